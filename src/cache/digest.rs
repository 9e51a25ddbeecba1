//! Entry digests: a 64-bit fingerprint of each file, symbol and call-graph list entry as it is
//! written in the cache (its section, its key and its raw JSON bytes). An import stores them with
//! the rows; a delta import hands them to the reader, which then recognises an unchanged entry
//! from its bytes alone and skips parsing it.
//!
//! The digest is a 64-bit foldhash (its `quality` variant, with a fixed seed; the cache file is
//! hashed with SHA-256 already, and a second SHA-256 over every entry was the reader's largest
//! cost), so two different entries share one by chance with a probability of about 2^-64 per
//! comparison. It is a change detector, not a defence against crafted entries (whoever writes the
//! cache decides what is imported anyway). A delta runs only on a database the same acpdb version
//! wrote; an entry whose digest differs, because it is written differently with the same content
//! (other spacing or key order) or was digested by another build, is compared column by column.
//! The foldhash version is pinned and a test holds one digest, so that a dependency update does
//! not silently turn every delta into a column-by-column comparison. foldhash reads bytes in the
//! machine's order and word size: a database copied to a big-endian or 32-bit machine gets the
//! column-by-column comparison once.

use std::hash::{BuildHasher, Hasher};

use super::event::Section;

/// The sections whose entries carry digests.
pub const DIGESTED: [Section; 4] = [
    Section::Files,
    Section::Symbols,
    Section::GraphForward,
    Section::GraphReverse,
];

/// The digest of the entry `key: raw` of `section`. The bytes are hashed in blocks of
/// 64 KiB, so that [`EntryDigest`] gives the same digest from the bytes in parts.
pub fn entry_digest(section: Section, key: &str, raw: &[u8]) -> i64 {
    let mut hasher = keyed_hasher(section, key);
    raw.chunks(DIGEST_BLOCK)
        .for_each(|block| hasher.write(block));
    hasher.finish() as i64
}

/// Bytes hashed at a time in an entry digest (an entry no longer than this is hashed in one).
const DIGEST_BLOCK: usize = 1 << 16;

/// An [`entry_digest`] computed from the entry's bytes as they stream by, in parts of any size
/// (a call-graph hub's list is never held whole).
pub struct EntryDigest {
    hasher: foldhash::quality::FoldHasher<'static>,
    /// Bytes of a block not hashed yet (fewer than [`DIGEST_BLOCK`]).
    block: Vec<u8>,
}

impl EntryDigest {
    /// The digest of an entry of `section` under `key`, before any of its bytes.
    pub fn new(section: Section, key: &str) -> EntryDigest {
        EntryDigest {
            hasher: keyed_hasher(section, key),
            block: Vec::new(),
        }
    }

    /// Adds the entry's next bytes.
    pub fn update(&mut self, mut bytes: &[u8]) {
        if !self.block.is_empty() {
            let take = bytes.len().min(DIGEST_BLOCK - self.block.len());
            self.block.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.block.len() < DIGEST_BLOCK {
                return;
            }
            self.hasher.write(&self.block);
            self.block.clear();
        }
        let whole = bytes.len() - bytes.len() % DIGEST_BLOCK;
        bytes[..whole]
            .chunks(DIGEST_BLOCK)
            .for_each(|block| self.hasher.write(block));
        self.block.extend_from_slice(&bytes[whole..]);
    }

    /// The digest of all the bytes added.
    pub fn finish(mut self) -> i64 {
        if !self.block.is_empty() {
            self.hasher.write(&self.block);
        }
        self.hasher.finish() as i64
    }
}

/// The hasher of an entry digest once it has taken the entry's section and key.
fn keyed_hasher(section: Section, key: &str) -> foldhash::quality::FoldHasher<'static> {
    let mut hasher = DIGEST_SEED.build_hasher();
    hasher.write_u8(section_code(section));
    hasher.write_u64(key.len() as u64);
    hasher.write(key.as_bytes());
    hasher
}

/// The fixed seed of entry digests (any constant would do; it must not change between runs).
const DIGEST_SEED: foldhash::quality::FixedState =
    foldhash::quality::FixedState::with_seed(0x6163_7064_6264_6967);

fn section_code(section: Section) -> u8 {
    DIGESTED
        .iter()
        .position(|s| *s == section)
        .map_or(u8::MAX, |i| i as u8)
}

/// The digests of the entries a database holds, each with its section and row id.
///
/// A new cache mostly lists its entries in the order of the previous one, which is the stored
/// rows' id order: [`KnownEntries::find`] first tries the entry after the last one found (a
/// sequential read), then a directory by the digests' top bits (digests are uniformly spread,
/// so about one entry per bucket: two memory reads instead of a binary search's twenty).
#[derive(Debug, Default)]
pub struct KnownEntries {
    /// Per section (in the order of [`DIGESTED`]), the stored entries in row id order.
    rows: [Rows; 4],
    /// Every digest, grouped by bucket ([`KnownEntries::buckets`]).
    by_bucket: Vec<u64>,
    /// For each of `by_bucket`, its section (index into [`DIGESTED`], the top [`SECTION_BITS`]
    /// bits) and its index in that section's `rows` (the other bits).
    places: Vec<u32>,
    /// `buckets[b]..buckets[b + 1]` are the indexes of `by_bucket` whose top `bits` bits are `b`.
    buckets: Vec<u32>,
    bits: u32,
}

/// A section's stored entries in row id order.
#[derive(Debug, Default)]
struct Rows {
    digests: Vec<i64>,
    ids: Vec<u32>,
}

/// Bits of a [`KnownEntries`] place that hold the section: four sections, and up to 2^30 entries
/// in each.
const SECTION_BITS: u32 = 2;

/// The place of the `at`-th entry of section `code` (see [`KnownEntries::places`]).
fn place(code: u8, at: usize) -> u32 {
    debug_assert!(at < 1 << (32 - SECTION_BITS), "{at} entries in one section");
    (u32::from(code) << (32 - SECTION_BITS)) | at as u32
}

/// The section and index of a place.
fn unplace(place: u32) -> (u8, usize) {
    (
        (place >> (32 - SECTION_BITS)) as u8,
        (place & (u32::MAX >> SECTION_BITS)) as usize,
    )
}

/// Where [`KnownEntries::find`] looks first in each section: just after the last entry found.
#[derive(Debug, Default, Clone)]
pub struct Hints([usize; 4]);

impl KnownEntries {
    /// Indexes `(digest, section, row id)` triples of the digested sections (fastest when
    /// each section's come in row id order, as a database reads them).
    pub fn new(entries: Vec<(i64, Section, u32)>) -> KnownEntries {
        let mut known = KnownEntries::default();
        for (digest, section, id) in entries {
            let Some(rows) = known.rows.get_mut(usize::from(section_code(section))) else {
                continue;
            };
            rows.digests.push(digest);
            rows.ids.push(id);
        }
        for rows in &mut known.rows {
            if !rows.ids.is_sorted() {
                let mut pairs: Vec<(u32, i64)> = rows
                    .ids
                    .iter()
                    .copied()
                    .zip(rows.digests.iter().copied())
                    .collect();
                pairs.sort_unstable();
                (rows.ids, rows.digests) = pairs.into_iter().unzip();
            }
        }
        // Digests by bucket (their top bits), a counting pass and a placing pass: the order
        // within a bucket, about one digest, does not matter to `find`.
        let total: usize = known.rows.iter().map(|rows| rows.ids.len()).sum();
        known.bits = total.max(2).ilog2().clamp(1, 30);
        let mut buckets = vec![0u32; (1usize << known.bits) + 1];
        for digest in known.rows.iter().flat_map(|rows| &rows.digests) {
            buckets[known.bucket(*digest as u64) + 1] += 1;
        }
        for b in 1..buckets.len() {
            buckets[b] += buckets[b - 1];
        }
        let mut next = buckets.clone();
        known.by_bucket = vec![0; total];
        known.places = vec![0; total];
        for (code, rows) in known.rows.iter().enumerate() {
            for (at, digest) in rows.digests.iter().enumerate() {
                let slot = &mut next[(*digest as u64 >> (64 - known.bits)) as usize];
                known.by_bucket[*slot as usize] = *digest as u64;
                known.places[*slot as usize] = place(code as u8, at);
                *slot += 1;
            }
        }
        known.buckets = buckets;
        known
    }

    fn bucket(&self, digest: u64) -> usize {
        (digest >> (64 - self.bits)) as usize
    }

    /// The row id of the entry of `section` with this digest, if the database holds one.
    pub fn find(&self, section: Section, digest: i64, hints: &mut Hints) -> Option<u32> {
        let code = section_code(section);
        let rows = self.rows.get(usize::from(code))?;
        let hint = &mut hints.0[usize::from(code)];
        if rows.digests.get(*hint) == Some(&digest) {
            *hint += 1;
            return Some(rows.ids[*hint - 1]);
        }
        if self.by_bucket.is_empty() {
            return None;
        }
        let unsigned = digest as u64;
        let b = self.bucket(unsigned);
        let at = (self.buckets[b] as usize..self.buckets[b + 1] as usize)
            .filter(|&i| self.by_bucket[i] == unsigned)
            .map(|i| unplace(self.places[i]))
            .find(|(section, _)| *section == code)
            .map(|(_, at)| at)?;
        *hint = at + 1;
        Some(rows.ids[at])
    }

    /// Every known entry: its section and row id.
    pub fn entries(&self) -> impl Iterator<Item = (Section, u32)> + '_ {
        DIGESTED
            .iter()
            .zip(&self.rows)
            .flat_map(|(section, rows)| rows.ids.iter().map(move |id| (*section, *id)))
    }

    /// Number of known entries.
    pub fn len(&self) -> usize {
        self.by_bucket.len()
    }

    /// Whether no entry is known.
    pub fn is_empty(&self) -> bool {
        self.by_bucket.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_tell_sections_keys_and_bytes_apart() {
        let d = entry_digest(Section::Files, "a", b"{}");
        assert_eq!(d, entry_digest(Section::Files, "a", b"{}"));
        assert_ne!(d, entry_digest(Section::Symbols, "a", b"{}"));
        assert_ne!(d, entry_digest(Section::Files, "b", b"{}"));
        assert_ne!(d, entry_digest(Section::Files, "a", b"{ }"));
        // The key's length is part of the input, so a key cannot borrow bytes of the value.
        assert_ne!(
            entry_digest(Section::Files, "ab", b"c"),
            entry_digest(Section::Files, "a", b"bc")
        );
    }

    /// Databases store digests, and a delta compares them with the new cache's: a different
    /// value for the same entry (a foldhash update, a changed seed) makes every entry look
    /// changed. Change this value only together with the acpdb version. (foldhash reads bytes
    /// in the machine's order and word size, so the value holds on 64-bit little-endian
    /// machines; elsewhere databases carry digests of their own.)
    #[test]
    #[cfg(all(target_endian = "little", target_pointer_width = "64"))]
    fn an_entry_digest_is_the_value_databases_store() {
        let digest = entry_digest(Section::Symbols, "validateSession", br#"{"line": 3}"#);
        assert_eq!(digest, 2_468_586_514_082_388_377);
    }

    #[test]
    fn a_digest_from_parts_is_the_digest_of_the_whole() {
        let raw: Vec<u8> = (0..3 * DIGEST_BLOCK + 17)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for len in [0, 5, DIGEST_BLOCK, DIGEST_BLOCK + 1, raw.len()] {
            let whole = entry_digest(Section::GraphReverse, "hub", &raw[..len]);
            for part in [
                1,
                7,
                4096,
                DIGEST_BLOCK - 1,
                DIGEST_BLOCK,
                2 * DIGEST_BLOCK + 3,
            ] {
                let mut digest = EntryDigest::new(Section::GraphReverse, "hub");
                raw[..len].chunks(part).for_each(|p| digest.update(p));
                assert_eq!(digest.finish(), whole, "{len} bytes in parts of {part}");
            }
        }
        let mut longer = EntryDigest::new(Section::GraphReverse, "hub");
        longer.update(&raw[..DIGEST_BLOCK + 1]);
        assert_ne!(
            longer.finish(),
            entry_digest(Section::GraphReverse, "hub", &raw[..DIGEST_BLOCK])
        );
    }

    #[test]
    fn known_entries_are_found_by_section_and_digest() {
        let known = KnownEntries::new(vec![
            (5, Section::Symbols, 2),
            (-3, Section::Files, 1),
            (5, Section::GraphReverse, 9),
        ]);
        let hints = &mut Hints::default();
        assert_eq!(known.find(Section::Files, -3, hints), Some(1));
        assert_eq!(known.find(Section::Symbols, 5, hints), Some(2));
        assert_eq!(known.find(Section::GraphReverse, 5, hints), Some(9));
        assert_eq!(known.find(Section::GraphForward, 5, hints), None);
        assert_eq!(known.find(Section::Files, 4, hints), None);
        assert_eq!(known.len(), 3);
        assert_eq!(known.entries().count(), 3);
        assert_eq!(KnownEntries::default().find(Section::Files, 0, hints), None);
    }

    #[test]
    fn every_one_of_many_entries_is_found() {
        let entries: Vec<(i64, Section, u32)> = (0..5000u32)
            .map(|i| {
                (
                    entry_digest(Section::Symbols, &i.to_string(), b"{}"),
                    Section::Symbols,
                    i,
                )
            })
            // Out of row id order: put in order when indexed.
            .chain([
                (i64::MIN, Section::Files, 9),
                (i64::MAX, Section::Files, 8),
                (-1, Section::Files, 7),
            ])
            .collect();
        let known = KnownEntries::new(entries.clone());
        // In order (each found just after the last), and in reverse (each found by its bucket).
        let hints = &mut Hints::default();
        for (digest, section, id) in entries.iter().chain(entries.iter().rev()) {
            assert_eq!(known.find(*section, *digest, hints), Some(*id));
        }
        assert_eq!(known.find(Section::Files, 0, hints), None);
        let files: Vec<(Section, u32)> = known
            .entries()
            .filter(|(section, _)| *section == Section::Files)
            .collect();
        assert_eq!(
            files,
            [
                (Section::Files, 7),
                (Section::Files, 8),
                (Section::Files, 9)
            ]
        );
    }
}
