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
use std::sync::OnceLock;

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

/// The digests of the entries a database holds, each with its row id, by section. A delta
/// hands them to the reader before they are all read: each section is published
/// ([`KnownEntries::publish`]) as soon as it has been read, and a lookup waits only for its own
/// section, so that the reader scans the files and symbols while the call-graph lists' digests
/// are still being read.
///
/// A new cache mostly lists its entries in the order of the previous one, which is the stored
/// rows' id order: [`KnownEntries::find`] first tries the entry after the last one found (a
/// sequential read), then a directory by the digests' top bits (digests are uniformly spread,
/// so about one entry per bucket: two memory reads instead of a binary search's twenty).
#[derive(Debug)]
pub struct KnownEntries {
    /// Per section, in the order of [`DIGESTED`]: its entries once read, `None` once their
    /// reading was abandoned ([`KnownEntries::abandon`]).
    sections: [OnceLock<Option<SectionEntries>>; 4],
}

/// Why [`KnownEntries`] cannot answer: the reading of a section's digests was abandoned
/// ([`KnownEntries::abandon`]: it failed, or the delta stopped it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the stored digests of `{}` were not read", .0.path())]
pub struct DigestsUnavailable(pub Section);

/// One section's stored entries.
#[derive(Debug, Default)]
struct SectionEntries {
    /// Digests in row id order.
    digests: Vec<i64>,
    /// Row ids in order, one for each of `digests`.
    ids: Vec<u32>,
    /// Every digest, grouped by bucket ([`SectionEntries::buckets`]).
    by_bucket: Vec<u64>,
    /// For each of `by_bucket`, its index in `digests` and `ids`.
    places: Vec<u32>,
    /// `buckets[b]..buckets[b + 1]` are the indexes of `by_bucket` whose top `bits` bits are `b`.
    buckets: Vec<u32>,
    bits: u32,
}

/// The digests and row ids of one section's stored entries, as read ([`KnownEntries::publish`]).
#[derive(Debug, Default)]
pub struct StoredDigests {
    digests: Vec<i64>,
    ids: Vec<u32>,
}

impl StoredDigests {
    /// Adds the entry of row `id` with this digest.
    pub fn push(&mut self, digest: i64, id: u32) {
        self.digests.push(digest);
        self.ids.push(id);
    }
}

impl SectionEntries {
    fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.digests.capacity() * size_of::<i64>()
            + self.ids.capacity() * size_of::<u32>()
            + self.by_bucket.capacity() * size_of::<u64>()
            + self.places.capacity() * size_of::<u32>()
            + self.buckets.capacity() * size_of::<u32>()
    }

    /// Indexes a section's stored entries (fastest when they come in row id order, as a
    /// database reads them).
    fn new(
        StoredDigests {
            mut digests,
            mut ids,
        }: StoredDigests,
    ) -> SectionEntries {
        if !ids.is_sorted() {
            let mut pairs: Vec<(u32, i64)> = ids.into_iter().zip(digests).collect();
            pairs.sort_unstable();
            (ids, digests) = pairs.into_iter().unzip();
        }
        // Digests by bucket (their top bits), a counting pass and a placing pass: the order
        // within a bucket, about one digest, does not matter to `find`.
        let bits = digests.len().max(2).ilog2().clamp(1, 30);
        let bucket = |digest: i64| (digest as u64 >> (64 - bits)) as usize;
        let mut buckets = vec![0u32; (1usize << bits) + 1];
        for digest in &digests {
            buckets[bucket(*digest) + 1] += 1;
        }
        for b in 1..buckets.len() {
            buckets[b] += buckets[b - 1];
        }
        let mut next = buckets.clone();
        let mut by_bucket = vec![0; digests.len()];
        let mut places = vec![0; digests.len()];
        for (at, digest) in digests.iter().enumerate() {
            let slot = &mut next[bucket(*digest)];
            by_bucket[*slot as usize] = *digest as u64;
            places[*slot as usize] = at as u32;
            *slot += 1;
        }
        SectionEntries {
            digests,
            ids,
            by_bucket,
            places,
            buckets,
            bits,
        }
    }

    /// The row id of the entry with this digest, trying `hint` first (moved past the entry
    /// found).
    fn find(&self, digest: i64, hint: &mut usize) -> Option<u32> {
        if self.digests.get(*hint) == Some(&digest) {
            *hint += 1;
            return Some(self.ids[*hint - 1]);
        }
        if self.by_bucket.is_empty() {
            return None;
        }
        let unsigned = digest as u64;
        let b = (unsigned >> (64 - self.bits)) as usize;
        let at = (self.buckets[b] as usize..self.buckets[b + 1] as usize)
            .find(|&i| self.by_bucket[i] == unsigned)
            .map(|i| self.places[i] as usize)?;
        *hint = at + 1;
        Some(self.ids[at])
    }
}

/// Where [`KnownEntries::find`] looks first in each section: just after the last entry found.
#[derive(Debug, Default, Clone)]
pub struct Hints([usize; 4]);

impl Default for KnownEntries {
    /// No entry in any section, every section published.
    fn default() -> KnownEntries {
        let known = KnownEntries::pending();
        for section in DIGESTED {
            known.publish(section, StoredDigests::default());
        }
        known
    }
}

impl KnownEntries {
    /// No section published yet.
    pub fn pending() -> KnownEntries {
        KnownEntries {
            sections: Default::default(),
        }
    }

    /// Publishes `section`'s stored entries (once: a section published or abandoned already
    /// stays as it is).
    pub fn publish(&self, section: Section, entries: StoredDigests) {
        if let Some(slot) = self.sections.get(usize::from(section_code(section))) {
            let _ = slot.set(Some(SectionEntries::new(entries)));
        }
    }

    /// Marks `section`, unless it is published already, as never to be: lookups in it fail
    /// instead of waiting.
    pub fn abandon(&self, section: Section) {
        if let Some(slot) = self.sections.get(usize::from(section_code(section))) {
            let _ = slot.set(None);
        }
    }

    /// The entries of the section at `code` (its place in [`DIGESTED`]) once published,
    /// waiting until then; `None` for a section without digests.
    fn section(&self, code: u8) -> Result<Option<&SectionEntries>, DigestsUnavailable> {
        match self.sections.get(usize::from(code)) {
            None => Ok(None),
            Some(slot) => slot
                .wait()
                .as_ref()
                .map(Some)
                .ok_or(DigestsUnavailable(DIGESTED[usize::from(code)])),
        }
    }

    /// The row id of the entry of `section` with this digest, if the database holds one; waits
    /// until the section is published.
    pub fn find(
        &self,
        section: Section,
        digest: i64,
        hints: &mut Hints,
    ) -> Result<Option<u32>, DigestsUnavailable> {
        let code = section_code(section);
        let Some(entries) = self.section(code)? else {
            return Ok(None);
        };
        Ok(entries.find(digest, &mut hints.0[usize::from(code)]))
    }

    /// Bytes of memory the published sections' entries take.
    pub fn heap_bytes(&self) -> usize {
        self.sections
            .iter()
            .filter_map(|slot| slot.get()?.as_ref())
            .map(SectionEntries::heap_bytes)
            .sum()
    }

    /// Every known entry: its section and row id (waiting until every section is published).
    pub fn entries(&self) -> Result<impl Iterator<Item = (Section, u32)> + '_, DigestsUnavailable> {
        let sections = DIGESTED
            .iter()
            .zip(0u8..)
            .filter_map(|(section, code)| {
                let rows = self.section(code).transpose()?;
                Some(rows.map(|rows| (*section, rows)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sections
            .into_iter()
            .flat_map(|(section, rows)| rows.ids.iter().map(move |id| (section, *id))))
    }
}

#[cfg(test)]
impl FromIterator<(i64, u32)> for StoredDigests {
    fn from_iter<T: IntoIterator<Item = (i64, u32)>>(pairs: T) -> StoredDigests {
        let mut stored = StoredDigests::default();
        pairs
            .into_iter()
            .for_each(|(digest, id)| stored.push(digest, id));
        stored
    }
}

#[cfg(test)]
impl KnownEntries {
    /// Every section published at once from `(digest, section, row id)` triples.
    fn new(entries: Vec<(i64, Section, u32)>) -> KnownEntries {
        let known = KnownEntries::pending();
        for section in DIGESTED {
            let rows = entries
                .iter()
                .filter(|(_, s, _)| *s == section)
                .map(|(digest, _, id)| (*digest, *id))
                .collect();
            known.publish(section, rows);
        }
        known
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
        assert_eq!(known.find(Section::Files, -3, hints), Ok(Some(1)));
        assert_eq!(known.find(Section::Symbols, 5, hints), Ok(Some(2)));
        assert_eq!(known.find(Section::GraphReverse, 5, hints), Ok(Some(9)));
        assert_eq!(known.find(Section::GraphForward, 5, hints), Ok(None));
        assert_eq!(known.find(Section::Files, 4, hints), Ok(None));
        assert_eq!(known.entries().unwrap().count(), 3);
        assert_eq!(
            KnownEntries::default().find(Section::Files, 0, hints),
            Ok(None)
        );
        // Sections outside DIGESTED hold nothing, and nothing waits for them.
        assert_eq!(known.find(Section::Domains, 5, hints), Ok(None));
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
            assert_eq!(known.find(*section, *digest, hints), Ok(Some(*id)));
        }
        assert_eq!(known.find(Section::Files, 0, hints), Ok(None));
        let files: Vec<(Section, u32)> = known
            .entries()
            .unwrap()
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

    #[test]
    fn the_memory_entries_take_grows_with_the_sections_published() {
        let known = KnownEntries::pending();
        assert_eq!(known.heap_bytes(), 0);
        let many = |n: u32| -> StoredDigests { (0..n).map(|i| (i64::from(i) * 7919, i)).collect() };
        known.publish(Section::Files, many(1_000));
        let files = known.heap_bytes();
        // A digest, a row id, the digest again by bucket and its place: 24 bytes an entry.
        assert!(files >= 1_000 * 24, "{files} bytes for 1,000 entries");
        known.abandon(Section::Symbols);
        assert_eq!(known.heap_bytes(), files);
        known.publish(Section::GraphForward, many(10_000));
        assert!(known.heap_bytes() >= files + 10_000 * 24);
    }

    #[test]
    fn a_lookup_waits_for_its_own_section_only() {
        let known = std::sync::Arc::new(KnownEntries::pending());
        known.publish(Section::Files, [(7, 1)].into_iter().collect());
        // Files answer while the other sections are still being read.
        assert_eq!(
            known.find(Section::Files, 7, &mut Hints::default()),
            Ok(Some(1))
        );
        let waiting = {
            let known = known.clone();
            std::thread::spawn(move || known.find(Section::Symbols, 8, &mut Hints::default()))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !waiting.is_finished(),
            "answered before the section was read"
        );
        known.publish(Section::Symbols, [(8, 4)].into_iter().collect());
        assert_eq!(waiting.join().unwrap(), Ok(Some(4)));
    }

    #[test]
    fn an_abandoned_section_fails_its_lookups_instead_of_waiting() {
        let known = KnownEntries::pending();
        known.publish(Section::Files, [(7, 1)].into_iter().collect());
        for section in DIGESTED {
            known.abandon(section);
        }
        let hints = &mut Hints::default();
        assert_eq!(known.find(Section::Files, 7, hints), Ok(Some(1)));
        assert_eq!(
            known.find(Section::GraphForward, 7, hints),
            Err(DigestsUnavailable(Section::GraphForward))
        );
        assert!(known.entries().is_err());
        // What was abandoned stays so.
        known.publish(Section::Symbols, [(8, 4)].into_iter().collect());
        assert_eq!(
            known.find(Section::Symbols, 8, hints),
            Err(DigestsUnavailable(Section::Symbols))
        );
    }
}
