//! Compact in-memory tables of hashes, for the two per-entry records an import may keep: the
//! keys already inserted (to spot duplicates, kept only by a delta and by a full import of a
//! cache found to repeat a key) and the call-graph node ids by name. Both hold hashes, never
//! names, so their size is a few bytes per entry whatever the names' lengths.

use std::collections::hash_map::DefaultHasher;
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

/// Node ids by the 128-bit hash of their name, ids given in order from 1: an open-addressing
/// table (linear probing) of 16-byte slots holding the hash's low 64 bits, 32 more of its bits
/// and the id, so a lookup usually reads one cache line and two names share an id only when
/// 96 bits of their hashes agree (about 2^-96 per pair, 10^-15 among 10M names). Names whose
/// low halves collide with another's (about 2^-64 per pair) go to a table of their own.
///
/// A probe never wraps around: past the last home slot it goes on into a tail that grows as
/// needed. So the table can double in place (see [`NodeIds::grow`]) and never holds its old
/// slots beside the new ones, which at 10M names would be 134 MB more at that moment.
#[derive(Default)]
pub(super) struct NodeIds {
    /// `homes` slots where probes start, then the tail; an id of 0 marks an empty slot.
    slots: Vec<Slot>,
    /// A power of two (or 0 before the first insert).
    homes: usize,
    /// Slots in use.
    used: usize,
    collided: HashMap<u128, u32>,
    len: u32,
}

/// One entry of [`NodeIds`], aligned so that it never straddles two cache lines.
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Slot {
    low: u64,
    check: u32,
    id: u32,
}

/// Home slots the table starts with.
const FIRST_SLOTS: usize = 1 << 12;

/// Slots reserved past the homes for the tail, so that it rarely reallocates the table.
const TAIL_ROOM: usize = 64;

impl NodeIds {
    /// Ids given so far.
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// The id of `hash`, if it has one.
    pub(super) fn get(&self, hash: u128) -> Option<u32> {
        let (low, check) = split(hash);
        let slot = self.slots.get(self.find(low))?;
        if slot.id == 0 {
            None
        } else if slot.check == check {
            Some(slot.id)
        } else {
            self.collided.get(&hash).copied()
        }
    }

    /// Asks the processor to bring `hash`'s slot into its cache, so that a later
    /// [`NodeIds::get`] of it does not wait for memory: the loader announces a list's names a
    /// few ahead of looking them up, and the lookups' memory reads overlap.
    pub(super) fn prefetch(&self, hash: u128) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slot) = self.slots.get(self.home(split(hash).0)) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of every x86_64 target, and a prefetch only hints the cache
            // (it reads nothing the program sees and cannot fault); the address is a live slot.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Gives `hash`, which has no id yet, the next one.
    pub(super) fn insert(&mut self, hash: u128) -> Result<u32> {
        let id = self
            .len
            .checked_add(1)
            .context("more than 4 billion graph nodes")?;
        self.len = id;
        if (self.used + 1) * 4 > self.homes * 3 {
            self.grow();
        }
        let (low, check) = split(hash);
        let at = self.find(low);
        if self.slots.get(at).is_some_and(|slot| slot.id != 0) {
            self.collided.insert(hash, id);
        } else {
            self.place(at, Slot { low, check, id });
            self.used += 1;
        }
        Ok(id)
    }

    /// Where a probe for `low` starts.
    fn home(&self, low: u64) -> usize {
        // Truncation is intended: the mask keeps the bits that fit.
        (low as usize) & self.homes.wrapping_sub(1)
    }

    /// The slot holding `low`, or the empty slot where it would go, which is the end of the
    /// slots when the probe runs off the tail.
    fn find(&self, low: u64) -> usize {
        if self.homes == 0 {
            return self.slots.len();
        }
        let mut at = self.home(low);
        while let Some(slot) = self.slots.get(at) {
            if slot.id == 0 || slot.low == low {
                return at;
            }
            at += 1;
        }
        at
    }

    /// Puts `slot` at `at`, an empty slot or the end of the slots ([`NodeIds::find`]).
    fn place(&mut self, at: usize, slot: Slot) {
        if at == self.slots.len() {
            self.slots.push(slot);
        } else {
            self.slots[at] = slot;
        }
    }

    /// Doubles the home slots in place (at most three quarters are used, so probes stay
    /// short). An entry's home either stays or moves up by the old count of homes. The tail's
    /// entries are set aside; every other entry is taken out and placed again in slot order.
    /// An entry whose home stays lands at or before its old slot, past slots already done; one
    /// whose home moves up lands in the new upper half, which holds only entries placed again.
    /// So no entry is ever placed past one that is taken out later, and every probe stays
    /// unbroken. The slots grow by reallocation, which moves large blocks without copying.
    fn grow(&mut self) {
        let old_homes = self.homes;
        let homes = (old_homes * 2).max(FIRST_SLOTS);
        let tail: Vec<Slot> = self
            .slots
            .drain(old_homes.min(self.slots.len())..)
            .filter(|slot| slot.id != 0)
            .collect();
        self.slots
            .reserve_exact(homes + TAIL_ROOM - self.slots.len());
        self.slots.resize(homes, Slot::default());
        self.homes = homes;
        for at in 0..old_homes {
            let slot = std::mem::take(&mut self.slots[at]);
            if slot.id != 0 {
                let to = self.find(slot.low);
                self.place(to, slot);
            }
        }
        for slot in tail {
            let to = self.find(slot.low);
            self.place(to, slot);
        }
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
    fn every_id_is_found_after_the_table_grows() {
        let mut ids = NodeIds::default();
        let hash = |i: u128| crate::cache::names::name_hash(&i.to_string());
        let n = 3 * FIRST_SLOTS as u128;
        for i in 0..n {
            ids.prefetch(hash(i));
            assert_eq!(ids.get(hash(i)), None);
            assert_eq!(ids.insert(hash(i)).unwrap() as u128, i + 1);
        }
        assert!(ids.homes >= 4 * FIRST_SLOTS, "the table never grew");
        assert!(ids.used * 4 <= ids.homes * 3);
        for i in 0..n {
            assert_eq!(ids.get(hash(i)).map(u128::from), Some(i + 1));
        }
        assert_eq!(ids.get(hash(n)), None);
    }

    #[test]
    fn crowded_homes_and_the_tail_survive_doubling() {
        let mut ids = NodeIds::default();
        // Two crowds of names sharing a home at every table size below 2^40: one near the end
        // of the first table's homes, whose cluster runs into the tail, and one whose home
        // moves to the upper half when the table doubles. Ordinary names between them make
        // the table double three times.
        let near_end = |i: u128| (i << 96) | ((i + 1) << 40) | (FIRST_SLOTS as u128 - 3);
        let moving = |i: u128| (i << 96) | ((i + 1) << 40) | (FIRST_SLOTS as u128 + 5);
        let ordinary = |i: u128| crate::cache::names::name_hash(&i.to_string());
        let (mut given, mut tail_used) = (Vec::new(), false);
        for i in 0..6 * FIRST_SLOTS as u128 {
            let hash = match i % 20 {
                0 => near_end(i),
                1 => moving(i),
                _ => ordinary(i),
            };
            assert_eq!(ids.get(hash), None);
            given.push((hash, ids.insert(hash).unwrap()));
            tail_used |= ids.slots.len() > ids.homes;
        }
        assert!(
            ids.homes >= 8 * FIRST_SLOTS,
            "the table never doubled three times"
        );
        assert!(tail_used, "no cluster ran into the tail");
        for (hash, id) in given {
            assert_eq!(ids.get(hash), Some(id));
        }
        assert_eq!(ids.get(near_end(1 << 20)), None);
        assert_eq!(ids.get(moving(1 << 20)), None);
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
