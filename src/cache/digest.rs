//! Entry digests: a 64-bit fingerprint of each file, symbol and call-graph list entry as it is
//! written in the cache (its section, its key and its raw JSON bytes). An import stores them with
//! the rows; a delta import hands them to the reader, which then recognises an unchanged entry
//! from its bytes alone and skips parsing it.
//!
//! The digest is the first 8 bytes of a SHA-256, so two different entries share one by chance
//! with a probability of about 2^-64 per comparison; an entry written differently with the same
//! content (other spacing or key order) gets another digest and is compared column by column.

use sha2::{Digest, Sha256};

use super::reader::Section;

/// The sections whose entries carry digests.
pub const DIGESTED: [Section; 4] = [
    Section::Files,
    Section::Symbols,
    Section::GraphForward,
    Section::GraphReverse,
];

/// The digest of the entry `key: raw` of `section`.
pub fn entry_digest(section: Section, key: &str, raw: &[u8]) -> i64 {
    let mut hasher = Sha256::new();
    hasher.update([section_code(section)]);
    hasher.update((key.len() as u64).to_le_bytes());
    hasher.update(key.as_bytes());
    hasher.update(raw);
    let hash = hasher.finalize();
    i64::from_le_bytes(hash[..8].try_into().expect("8 bytes"))
}

fn section_code(section: Section) -> u8 {
    DIGESTED
        .iter()
        .position(|s| *s == section)
        .map_or(u8::MAX, |i| i as u8)
}

/// The digests of the entries a database holds, each with its section and row id.
///
/// Digests are uniformly spread, so a directory by their top bits (about one bucket per entry)
/// finds an entry with two memory reads instead of a binary search's twenty.
#[derive(Debug, Default)]
pub struct KnownEntries {
    /// Sorted as unsigned numbers.
    digests: Vec<u64>,
    /// `buckets[b]..buckets[b + 1]` are the digests whose top `bits` bits are `b`.
    buckets: Vec<u32>,
    bits: u32,
    /// Row ids, in the order of `digests`.
    ids: Vec<u32>,
    /// Indexes into [`DIGESTED`], in the order of `digests`.
    sections: Vec<u8>,
}

impl KnownEntries {
    /// Indexes `(digest, section, row id)` triples.
    pub fn new(mut entries: Vec<(i64, Section, u32)>) -> KnownEntries {
        entries.sort_unstable_by_key(|(digest, _, _)| *digest as u64);
        let bits = entries.len().max(1).ilog2().clamp(1, 30);
        let mut known = KnownEntries {
            digests: Vec::with_capacity(entries.len()),
            buckets: vec![0; (1usize << bits) + 1],
            bits,
            ids: Vec::with_capacity(entries.len()),
            sections: Vec::with_capacity(entries.len()),
        };
        for (digest, section, id) in entries {
            known.digests.push(digest as u64);
            known.ids.push(id);
            known.sections.push(section_code(section));
        }
        // buckets[b] = the first index whose bucket is at least b.
        let mut i = 0;
        for b in 0..known.buckets.len() {
            while i < known.digests.len() && known.bucket(known.digests[i]) < b {
                i += 1;
            }
            known.buckets[b] = i as u32;
        }
        known
    }

    fn bucket(&self, digest: u64) -> usize {
        (digest >> (64 - self.bits)) as usize
    }

    /// The row id of the entry of `section` with this digest, if the database holds one.
    pub fn find(&self, section: Section, digest: i64) -> Option<u32> {
        if self.digests.is_empty() {
            return None;
        }
        let code = section_code(section);
        let digest = digest as u64;
        let b = self.bucket(digest);
        let range = self.buckets[b] as usize..self.buckets[b + 1] as usize;
        range
            .filter(|&i| self.digests[i] == digest && self.sections[i] == code)
            .map(|i| self.ids[i])
            .next()
    }

    /// Every known entry: its section and row id.
    pub fn entries(&self) -> impl Iterator<Item = (Section, u32)> + '_ {
        self.sections
            .iter()
            .zip(&self.ids)
            .map(|(code, id)| (DIGESTED[usize::from(*code)], *id))
    }

    /// Number of known entries.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no entry is known.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
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

    #[test]
    fn known_entries_are_found_by_section_and_digest() {
        let known = KnownEntries::new(vec![
            (5, Section::Symbols, 2),
            (-3, Section::Files, 1),
            (5, Section::GraphReverse, 9),
        ]);
        assert_eq!(known.find(Section::Files, -3), Some(1));
        assert_eq!(known.find(Section::Symbols, 5), Some(2));
        assert_eq!(known.find(Section::GraphReverse, 5), Some(9));
        assert_eq!(known.find(Section::GraphForward, 5), None);
        assert_eq!(known.find(Section::Files, 4), None);
        assert_eq!(known.len(), 3);
        assert_eq!(known.entries().count(), 3);
        assert_eq!(KnownEntries::default().find(Section::Files, 0), None);
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
            .chain([
                (i64::MIN, Section::Files, 7),
                (i64::MAX, Section::Files, 8),
                (-1, Section::Files, 9),
            ])
            .collect();
        let known = KnownEntries::new(entries.clone());
        for (digest, section, id) in entries {
            assert_eq!(known.find(section, digest), Some(id));
        }
        assert_eq!(known.find(Section::Files, 0), None);
    }
}
