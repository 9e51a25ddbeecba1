//! Compact in-memory tables of hashes, for the two per-entry records an import may keep: the
//! keys already inserted (to spot duplicates, kept only by a delta and by a full import of a
//! cache found to repeat a key) and the call-graph node ids by name. Both hold hashes, never
//! names, so their size is a few bytes per entry whatever the names' lengths.

use std::collections::hash_map::{DefaultHasher, Entry};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

use anyhow::{Context, Result};

/// A hasher for keys that are hashes already: a `u64` is its own hash.
#[derive(Default, Clone, Copy)]
pub(super) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type BuildPrehashed = BuildHasherDefault<Prehashed>;

/// The 64-bit hashes of the keys inserted so far, per section (9 bytes per slot).
#[derive(Default)]
pub(super) struct SeenKeys(HashSet<u64, BuildPrehashed>);

impl SeenKeys {
    /// Records `key` of `section`; false when a key with the same hash was recorded before
    /// (the same key, or, rarely, another one: the caller checks).
    pub(super) fn insert(&mut self, section: u8, key: &str) -> bool {
        let mut hasher = DefaultHasher::new();
        section.hash(&mut hasher);
        key.hash(&mut hasher);
        self.0.insert(hasher.finish())
    }
}

/// Node ids by the 128-bit hash of their name, ids given in order from 1: a table from the
/// hash's low 64 bits to 32 more of its bits and the id (16 bytes per slot, so a lookup reads
/// one slot, and two names share an id only when 96 bits of their hashes agree: about 2^-96
/// per pair, 10^-15 among 10M names), and the names whose low halves collide with another's
/// (about 2^-64 per pair) in a table of their own.
#[derive(Default)]
pub(super) struct NodeIds {
    by_low: HashMap<u64, (u32, u32), BuildPrehashed>,
    collided: HashMap<u128, u32>,
    len: u32,
}

impl NodeIds {
    /// Ids given so far.
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// The id of `hash`, if it has one.
    pub(super) fn get(&self, hash: u128) -> Option<u32> {
        let (low, check) = split(hash);
        match self.by_low.get(&low) {
            Some(&(stored, id)) if stored == check => Some(id),
            Some(_) => self.collided.get(&hash).copied(),
            None => None,
        }
    }

    /// Gives `hash`, which has no id yet, the next one.
    pub(super) fn insert(&mut self, hash: u128) -> Result<u32> {
        let id = self
            .len
            .checked_add(1)
            .context("more than 4 billion graph nodes")?;
        self.len = id;
        let (low, check) = split(hash);
        match self.by_low.entry(low) {
            Entry::Vacant(slot) => {
                slot.insert((check, id));
            }
            Entry::Occupied(_) => {
                self.collided.insert(hash, id);
            }
        }
        Ok(id)
    }
}

/// A hash's low 64 bits (the table's key) and its top 32 bits (checked on a match).
fn split(hash: u128) -> (u64, u32) {
    (hash as u64, (hash >> 96) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_sharing_a_low_half_get_their_own_ids() {
        let mut ids = NodeIds::default();
        let a = (1u128 << 96) | 7;
        let b = (2u128 << 96) | 7;
        let c = (3u128 << 96) | 8;
        assert_eq!(ids.get(a), None);
        assert_eq!(ids.insert(a).unwrap(), 1);
        assert_eq!(ids.get(b), None);
        assert_eq!(ids.insert(b).unwrap(), 2);
        assert_eq!(ids.insert(c).unwrap(), 3);
        assert_eq!(
            (ids.get(a), ids.get(b), ids.get(c)),
            (Some(1), Some(2), Some(3))
        );
        assert_eq!(ids.get((4u128 << 96) | 7), None);
        assert_eq!(ids.len(), 3);
        // 96 of the 128 bits are compared: the low 64 and the top 32.
        assert_eq!(ids.get(a | (5u128 << 64)), Some(1));
    }

    #[test]
    fn keys_are_seen_per_section() {
        let mut seen = SeenKeys::default();
        assert!(seen.insert(1, "a"));
        assert!(!seen.insert(1, "a"));
        assert!(seen.insert(2, "a"));
        assert!(seen.insert(1, "b"));
    }
}
