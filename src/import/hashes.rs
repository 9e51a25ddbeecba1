//! Compact in-memory tables of hashes, for the two per-entry records an import may keep: the
//! keys already inserted (to spot duplicates, kept only by a delta and by a full import of a
//! cache found to repeat a key) and the call-graph node ids by name. Both hold hashes, never
//! names, so their size is a few bytes per entry whatever the names' lengths.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

use super::scratch;

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
/// table (linear probing) of 12-byte slots, each holding the id and the hash's high 64 bits.
/// A probe starts at a home slot chosen by the low 64 bits, which are not stored: a lookup
/// matches a slot only when the high halves agree and the slot lies on its probe, so two names
/// share an id only when their high halves agree and their homes are a few slots apart (about
/// 2^-84 per pair at 10M names, 10^-12 among them).
///
/// The table grows by half when four fifths of its home slots are used, so it takes 15–23
/// bytes per name (a table of 16-byte slots that doubles at three quarters took 21–43). As
/// the slots keep no home bits, the table is built again from the hashes in id order, which
/// every insert appends to a temporary file: the old slots are emptied before the table grows,
/// so (with glibc, which moves a large block's pages when it grows) they are never held beside
/// the new ones. A probe never wraps around: past the last home slot it goes on into a tail
/// that grows as needed.
pub(super) struct NodeIds {
    /// `homes` slots where probes start, then the tail; an id of 0 marks an empty slot.
    slots: Vec<Slot>,
    /// Home slots (0 before the first insert).
    homes: usize,
    /// Every hash given an id, 16 bytes each, in id order.
    hashes: BufWriter<File>,
    len: u32,
}

/// One entry of [`NodeIds`]: the hash's high half as two words, so that the slot is 12 bytes.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Slot {
    check: [u32; 2],
    id: u32,
}

/// Home slots the table starts with.
const FIRST_SLOTS: usize = 1 << 12;

/// Slots reserved past the homes for the tail, so that it rarely reallocates the table.
const TAIL_ROOM: usize = 64;

impl NodeIds {
    /// An empty table whose hashes file is created in `spill_dir`.
    pub(super) fn new(spill_dir: &Path) -> Result<NodeIds> {
        let file = scratch::spill_file(spill_dir, "the call graph's names")?;
        Ok(NodeIds {
            slots: Vec::new(),
            homes: 0,
            hashes: BufWriter::with_capacity(1 << 16, file),
            len: 0,
        })
    }

    /// Ids given so far.
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// The id of `hash`, if it has one.
    pub(super) fn get(&self, hash: u128) -> Option<u32> {
        let (low, check) = split(hash);
        let mut at = home(low, self.homes);
        while let Some(slot) = self.slots.get(at) {
            if slot.id == 0 {
                return None;
            }
            if slot.check == check {
                return Some(slot.id);
            }
            at += 1;
        }
        None
    }

    /// Asks the processor to bring `hash`'s slot into its cache, so that a later
    /// [`NodeIds::get`] of it does not wait for memory: the loader announces a list's names a
    /// few ahead of looking them up, and the lookups' memory reads overlap.
    pub(super) fn prefetch(&self, hash: u128) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slot) = self.slots.get(home(split(hash).0, self.homes)) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of every x86_64 target, and a prefetch only hints the cache
            // (it reads nothing the program sees and cannot fault); the address is a live slot.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Gives `hash`, which has no id yet ([`NodeIds::get`]), the next one.
    pub(super) fn insert(&mut self, hash: u128) -> Result<u32> {
        let id = self
            .len
            .checked_add(1)
            .context("more than 4 billion graph nodes")?;
        self.hashes
            .write_all(&hash.to_le_bytes())
            .context(WRITING)?;
        self.len = id;
        if id as usize * 5 > self.homes * 4 {
            self.grow()?;
        } else {
            place(&mut self.slots, self.homes, hash, id);
        }
        Ok(id)
    }

    /// Empties the slots, makes room for half as many more, and places every id again, reading
    /// the hashes back from their file (its last one included).
    fn grow(&mut self) -> Result<()> {
        let homes = (self.homes + self.homes / 2).max(FIRST_SLOTS);
        // Emptied and grown rather than freed and allocated again: the allocator moves the
        // block's pages without copying them, and glibc does not take the freeing of a large
        // block as a reason to serve later large allocations from its heap.
        self.slots.clear();
        self.slots.reserve_exact(homes + TAIL_ROOM);
        self.slots.resize(homes, Slot::default());
        self.homes = homes;
        self.hashes.flush().context(WRITING)?;
        let mut chunk = vec![0u8; 1 << 16];
        let mut id = 0u32;
        while id < self.len {
            let want = chunk.len().min((self.len - id) as usize * HASH_BYTES);
            let offset = u64::from(id) * HASH_BYTES as u64;
            scratch::read_exact_at(self.hashes.get_ref(), &mut chunk[..want], offset)
                .context("reading back the call graph's names")?;
            for bytes in chunk[..want].chunks_exact(HASH_BYTES) {
                id += 1;
                let hash = u128::from_le_bytes(bytes.try_into().expect("16 bytes"));
                place(&mut self.slots, homes, hash, id);
            }
        }
        Ok(())
    }
}

/// Where a probe for `low` starts in a table of `homes` home slots: `low` scaled to them.
fn home(low: u64, homes: usize) -> usize {
    // The product's high word is below `homes`, so it fits.
    ((u128::from(low) * homes as u128) >> 64) as usize
}

/// Puts `id` in the first empty slot of `hash`'s probe.
fn place(slots: &mut Vec<Slot>, homes: usize, hash: u128, id: u32) {
    let (low, check) = split(hash);
    let mut at = home(low, homes);
    while slots.get(at).is_some_and(|slot| slot.id != 0) {
        at += 1;
    }
    let slot = Slot { check, id };
    if at == slots.len() {
        slots.push(slot);
    } else {
        slots[at] = slot;
    }
}

/// Bytes of a hash in the hashes file.
const HASH_BYTES: usize = std::mem::size_of::<u128>();

/// What failed when the hashes file cannot be written.
const WRITING: &str = "writing the call graph's names to a temporary file";

/// A hash's low 64 bits (which choose its home slot) and its high 64 bits (stored and compared).
fn split(hash: u128) -> (u64, [u32; 2]) {
    let high = (hash >> 64) as u64;
    (hash as u64, [high as u32, (high >> 32) as u32])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (tempfile::TempDir, NodeIds) {
        let dir = tempfile::tempdir().unwrap();
        let ids = NodeIds::new(dir.path()).unwrap();
        (dir, ids)
    }

    #[test]
    fn hashes_sharing_a_half_get_their_own_ids() {
        let (_dir, mut ids) = table();
        let a = (1u128 << 64) | 7;
        let b = (2u128 << 64) | 7;
        // The same high half as `a`'s, a home far from it.
        let c = (1u128 << 64) | (1u128 << 63);
        assert_eq!(ids.get(a), None);
        assert_eq!(ids.insert(a).unwrap(), 1);
        assert_eq!(ids.get(b), None);
        assert_eq!(ids.insert(b).unwrap(), 2);
        assert_eq!(ids.get(c), None);
        assert_eq!(ids.insert(c).unwrap(), 3);
        assert_eq!(
            (ids.get(a), ids.get(b), ids.get(c)),
            (Some(1), Some(2), Some(3))
        );
        assert_eq!(ids.get((4u128 << 64) | 7), None);
        assert_eq!(ids.get(u128::MAX), None);
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn every_id_is_found_after_the_table_grows() {
        let (_dir, mut ids) = table();
        let hash = |i: u128| crate::cache::names::name_hash(&i.to_string());
        let n = 3 * FIRST_SLOTS as u128;
        for i in 0..n {
            ids.prefetch(hash(i));
            assert_eq!(ids.get(hash(i)), None);
            assert_eq!(ids.insert(hash(i)).unwrap() as u128, i + 1);
        }
        assert!(ids.homes >= 3 * FIRST_SLOTS, "the table never grew");
        assert!(ids.len() * 5 <= ids.homes * 4);
        for i in 0..n {
            assert_eq!(ids.get(hash(i)).map(u128::from), Some(i + 1));
        }
        assert_eq!(ids.get(hash(n)), None);
    }

    #[test]
    fn crowded_homes_and_the_tail_survive_growing() {
        let (_dir, mut ids) = table();
        // Two crowds of names sharing a home at every table size: one at the last home, whose
        // cluster runs into the tail, and one in the middle. Ordinary names between them make
        // the table grow four times.
        let at_end = |i: u128| (i << 64) | u128::from(u64::MAX);
        let middle = |i: u128| (i << 64) | (1u128 << 63);
        let ordinary = |i: u128| crate::cache::names::name_hash(&i.to_string());
        let (mut given, mut tail_used) = (Vec::new(), false);
        for i in 0..6 * FIRST_SLOTS as u128 {
            let hash = match i % 20 {
                0 => at_end(i),
                1 => middle(i),
                _ => ordinary(i),
            };
            assert_eq!(ids.get(hash), None);
            given.push((hash, ids.insert(hash).unwrap()));
            tail_used |= ids.slots.len() > ids.homes;
        }
        assert!(
            ids.homes > 7 * FIRST_SLOTS,
            "the table never grew four times"
        );
        assert!(tail_used, "no cluster ran into the tail");
        for (hash, id) in given {
            assert_eq!(ids.get(hash), Some(id));
        }
        assert_eq!(ids.get(at_end(1 << 20)), None);
        assert_eq!(ids.get(middle(1 << 20)), None);
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
