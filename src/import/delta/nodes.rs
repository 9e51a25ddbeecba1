//! The delta's map from call-graph node names to ids.
//!
//! A changed list names every one of its items again (a hub's reverse list that gained one
//! caller names all its callers), so a 1 % edit at a million symbols asks for the ids of about
//! 540,000 distinct names: one index lookup each cost 3.7 s. Instead, every stored node is read
//! once, in one pass over `graph_nodes`, into an open-addressing table of 96-bit fingerprints of
//! the names (16 bytes a slot, 4 slots in 5 used: 20 bytes a node), where a name is found in one
//! memory read; the names of a list are looked up a batch at a time, their slots fetched into
//! the cache together. The fingerprints are two foldhash hashes seeded
//! at random for each delta, so no input can be crafted to collide; two stored names that do
//! share one are looked up by index instead, as is any name once the delta removed a node.
//! Nodes the delta creates are kept by name.

use std::hash::BuildHasher;

use anyhow::{Context, Result};
use foldhash::{HashMap, HashMapExt};
use rusqlite::{params, Connection, OptionalExtension, Statement};

/// A name's fingerprint: two hashes of it with random seeds.
type Fingerprint = (u64, u32);

/// A slot of the table: a stored node's fingerprint and id, [`EMPTY`] or [`BY_INDEX`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    high: u64,
    low: u32,
    id: u32,
}

/// The id of an empty slot (no node has id 0).
const EMPTY: u32 = 0;

/// The id of a slot whose fingerprint two stored names share (or whose node's id cannot be
/// kept in a slot): its names are looked up by index.
const BY_INDEX: u32 = u32::MAX;

/// Names looked up together, their slots fetched into the cache before the first is read.
const BATCH: usize = 16;

/// Node ids by name, for the nodes stored when the delta began and those it created.
pub(super) struct NodeIds<'c> {
    /// The stored nodes by fingerprint, linear probing from [`NodeIds::home`]; at most four
    /// fifths full.
    slots: Vec<Slot>,
    hashers: [foldhash::quality::RandomState; 2],
    /// Nodes created by the delta.
    created: HashMap<String, u32>,
    /// Whether the delta removed a node (the table may then name it).
    removed_any: bool,
    by_name: Statement<'c>,
    insert: Statement<'c>,
    next: u32,
}

impl<'c> NodeIds<'c> {
    /// Reads every node of the database on `conn`.
    pub(super) fn load(conn: &'c Connection) -> Result<NodeIds<'c>> {
        let hashers = [
            foldhash::quality::RandomState::default(),
            foldhash::quality::RandomState::default(),
        ];
        let count: i64 = conn.query_row("SELECT count(*) FROM graph_nodes", [], |r| r.get(0))?;
        let count = usize::try_from(count).unwrap_or(0);
        // Read in the delta's write transaction, the count is exact; were more rows read, the
        // load would stop (below) rather than fill the table past four fifths.
        let mut nodes = NodeIds {
            slots: vec![Slot::default(); ((count * 5).div_ceil(4) + 1).max(16)],
            hashers,
            created: HashMap::new(),
            removed_any: false,
            by_name: conn.prepare("SELECT id FROM graph_nodes WHERE name = ?1")?,
            insert: conn.prepare("INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)")?,
            next: 1,
        };
        let mut stmt = conn.prepare("SELECT id, name FROM graph_nodes")?;
        let mut rows = stmt.query([])?;
        let mut stored = 0usize;
        // Kept a batch at a time, as names are looked up: the slots of a batch are fetched
        // into the cache together.
        let mut batch: Vec<(Fingerprint, u32)> = Vec::with_capacity(BATCH);
        loop {
            let row = rows.next()?;
            if let Some(row) = row {
                let id: u32 = row.get(0)?;
                let fingerprint = fingerprint(&nodes.hashers, row.get_ref(1)?.as_bytes()?);
                nodes.prefetch(fingerprint);
                batch.push((fingerprint, id));
                stored += 1;
                if stored > nodes.slots.len() * 4 / 5 {
                    anyhow::bail!("the call graph's nodes changed while the delta read them");
                }
                nodes.next = nodes.next.max(id.saturating_add(1));
            }
            if batch.len() == BATCH || row.is_none() {
                for (fingerprint, id) in batch.drain(..) {
                    nodes.keep(fingerprint, id);
                }
            }
            if row.is_none() {
                return Ok(nodes);
            }
        }
    }

    /// Puts a stored node in its slot.
    fn keep(&mut self, (high, low): Fingerprint, id: u32) {
        let mut at = self.home(high);
        loop {
            let slot = &mut self.slots[at];
            if slot.id == EMPTY {
                let id = if id == EMPTY { BY_INDEX } else { id };
                *slot = Slot { high, low, id };
                return;
            }
            if slot.high == high && slot.low == low {
                slot.id = BY_INDEX;
                return;
            }
            at = self.next_slot(at);
        }
    }

    /// The slot of a stored node with fingerprint `(high, low)`, if any.
    fn find(&self, (high, low): Fingerprint) -> Option<u32> {
        let mut at = self.home(high);
        loop {
            let slot = self.slots[at];
            if slot.id == EMPTY {
                return None;
            }
            if slot.high == high && slot.low == low {
                return Some(slot.id);
            }
            at = self.next_slot(at);
        }
    }

    /// The first slot a fingerprint whose first hash is `high` may be in: `high` scaled to the
    /// table's length, so that any length will do.
    fn home(&self, high: u64) -> usize {
        ((u128::from(high) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot after `at`, the first after the last.
    fn next_slot(&self, at: usize) -> usize {
        if at + 1 == self.slots.len() {
            0
        } else {
            at + 1
        }
    }

    /// Asks the processor to bring the slot of `fingerprint` into the cache.
    fn prefetch(&self, (high, _): Fingerprint) {
        let slot = &self.slots[self.home(high)];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch only hints the cache; the address is that of a live slot.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(slot).cast::<i8>()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// The id of the node called `name`, and whether the delta created it now.
    pub(super) fn get_or_create(&mut self, name: &str) -> Result<(u32, bool)> {
        let fingerprint = fingerprint(&self.hashers, name.as_bytes());
        self.resolve(name, fingerprint)
    }

    /// The ids of the nodes called `names`, in order, appended to `ids`; `created` is called
    /// with each name the delta creates a node for. Looked up [`BATCH`] at a time, so that the
    /// memory reads of a batch overlap.
    pub(super) fn get_or_create_all<'n>(
        &mut self,
        names: impl Iterator<Item = &'n str>,
        ids: &mut Vec<u32>,
        mut created: impl FnMut(&str),
    ) -> Result<()> {
        let mut names = names.peekable();
        let mut batch: Vec<(&str, Fingerprint)> = Vec::with_capacity(BATCH);
        while names.peek().is_some() {
            batch.clear();
            batch.extend(names.by_ref().take(BATCH).map(|name| {
                let fingerprint = fingerprint(&self.hashers, name.as_bytes());
                self.prefetch(fingerprint);
                (name, fingerprint)
            }));
            for &(name, fingerprint) in &batch {
                let (id, new) = self.resolve(name, fingerprint)?;
                if new {
                    created(name);
                }
                ids.push(id);
            }
        }
        Ok(())
    }

    /// [`NodeIds::get_or_create`] with the name's fingerprint.
    fn resolve(&mut self, name: &str, fingerprint: Fingerprint) -> Result<(u32, bool)> {
        // A created name's fingerprint is in no slot: had a stored name shared it, the name
        // would have been given that node's id, not created.
        let stored = if self.removed_any {
            None
        } else {
            self.find(fingerprint)
        };
        match stored {
            Some(id) if id != BY_INDEX => return Ok((id, false)),
            Some(_) => {}
            None => {
                if let Some(&id) = self.created.get(name) {
                    return Ok((id, false));
                }
            }
        }
        if stored.is_some() || self.removed_any {
            if let Some(id) = self.by_name.query_row([name], |r| r.get(0)).optional()? {
                return Ok((id, false));
            }
        }
        let id = self.next;
        self.next = id
            .checked_add(1)
            .context("more than 4 billion graph nodes")?;
        self.insert.execute(params![id, name])?;
        self.created.insert(name.to_string(), id);
        Ok((id, true))
    }

    /// Records that the node called `name` was removed.
    pub(super) fn removed(&mut self, name: &str) {
        self.created.remove(name);
        self.removed_any = true;
    }
}

/// The 96-bit fingerprint of a node name.
fn fingerprint(hashers: &[foldhash::quality::RandomState; 2], name: &[u8]) -> Fingerprint {
    (hashers[0].hash_one(name), hashers[1].hash_one(name) as u32)
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::{fingerprint, NodeIds};

    /// A database in memory whose call graph has the nodes `node_{n}` for `n` in `numbers`,
    /// each with id `n * step`.
    fn nodes_named(numbers: impl IntoIterator<Item = u32>, step: u32) -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::migrate(&mut conn, None).unwrap();
        for n in numbers {
            conn.execute(
                "INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)",
                params![n * step, format!("node_{n}")],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn names_are_found_by_fingerprint_by_index_when_shared_and_created_when_new() {
        let conn = nodes_named(1..=5000, 3);
        let mut nodes = NodeIds::load(&conn).unwrap();
        for id in 1..=5000u32 {
            let found = nodes.get_or_create(&format!("node_{id}")).unwrap();
            assert_eq!(found, (id * 3, false));
        }
        // A fingerprint taken as shared by two stored names: found by index all the same.
        let name = "node_77";
        let shared = fingerprint(&nodes.hashers, name.as_bytes());
        nodes.keep(shared, 1);
        assert_eq!(nodes.get_or_create(name).unwrap(), (77 * 3, false));
        // A new name gets the next id, once.
        assert_eq!(nodes.get_or_create("fresh").unwrap(), (15_001, true));
        assert_eq!(nodes.get_or_create("fresh").unwrap(), (15_001, false));
        // Once a node is removed, names are looked up by index: a removed one is new again.
        conn.execute("DELETE FROM graph_nodes WHERE name = 'node_5'", [])
            .unwrap();
        nodes.removed("node_5");
        assert_eq!(nodes.get_or_create("node_6").unwrap(), (18, false));
        assert_eq!(nodes.get_or_create("node_5").unwrap(), (15_002, true));
    }

    #[test]
    fn names_looked_up_in_batches_come_back_in_order_each_new_one_created_once() {
        let conn = nodes_named(1..=100, 1);
        let mut nodes = NodeIds::load(&conn).unwrap();
        // The table is at most four fifths full, whatever the count.
        assert!(
            nodes.slots.len() * 4 >= 100 * 5,
            "{} slots",
            nodes.slots.len()
        );
        // Stored and new names across several batches, a new one twice in the same batch and
        // again in a later one.
        let names: Vec<String> = (0..40)
            .map(|i| match i % 5 {
                0 => format!("new_{}", i / 10),
                _ => format!("node_{}", 1 + i * 2),
            })
            .collect();
        let mut ids = vec![7];
        let mut created = Vec::new();
        nodes
            .get_or_create_all(names.iter().map(String::as_str), &mut ids, |name| {
                created.push(name.to_string())
            })
            .unwrap();
        assert_eq!(created, ["new_0", "new_1", "new_2", "new_3"]);
        let mut expected = vec![7];
        for name in &names {
            expected.push(match name.strip_prefix("new_") {
                Some(n) => 101 + n.parse::<u32>().unwrap(),
                None => name["node_".len()..].parse().unwrap(),
            });
        }
        assert_eq!(ids, expected);
        let stored: i64 = conn
            .query_row(
                "SELECT count(*) FROM graph_nodes WHERE name LIKE 'new%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(stored, 4);
    }

    #[test]
    fn probing_goes_on_from_the_last_slot_to_the_first() {
        let conn = nodes_named([], 1);
        let mut nodes = NodeIds::load(&conn).unwrap();
        let last = nodes.slots.len() - 1;
        assert_eq!(nodes.home(u64::MAX), last);
        for low in 1..=3u32 {
            nodes.keep((u64::MAX, low), 10 + low);
        }
        assert_eq!(nodes.slots[last].id, 11);
        assert_eq!(nodes.slots[0].id, 12);
        assert_eq!(nodes.slots[1].id, 13);
        for low in 1..=3u32 {
            assert_eq!(nodes.find((u64::MAX, low)), Some(10 + low));
        }
        assert_eq!(nodes.find((u64::MAX, 4)), None);
    }
}
