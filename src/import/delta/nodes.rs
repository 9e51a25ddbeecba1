//! The delta's map from call-graph node names to ids.
//!
//! A changed list names every one of its items again (a hub's reverse list that gained one
//! caller names all its callers), so a 1 % edit at a million symbols asks for the ids of about
//! 540,000 distinct names: one index lookup each cost 3.7 s. Instead, every stored node is read
//! once, in one pass over `graph_nodes`, into a sorted table of 96-bit fingerprints of the
//! names (16 bytes a node: 14 MB at a million symbols, 0.2 s), and a name is found by a binary
//! search. The fingerprints are two foldhash hashes seeded at random for each delta, so no input
//! can be crafted to collide; two stored names that do share one are looked up by index
//! instead, as is any name once the delta removed a node. Nodes the delta creates are kept by
//! name.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension, Statement};

/// A stored node: its name's fingerprint and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stored {
    fingerprint: (u64, u32),
    id: u32,
}

/// Node ids by name, for the nodes stored when the delta began and those it created.
pub(super) struct NodeIds<'c> {
    /// The stored nodes, sorted by fingerprint; a fingerprint two of them share is left out.
    stored: Vec<Stored>,
    /// For each value of a fingerprint's top [`NodeIds::bits`] bits, the index in `stored` of
    /// the first node with that value or a greater one (about one node each: two memory reads
    /// find a name, where a binary search over a million nodes missed the cache twenty times).
    directory: Vec<u32>,
    bits: u32,
    /// Fingerprints two stored names share (names with one are looked up by index).
    shared: HashSet<(u64, u32)>,
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
        let mut stored = Vec::new();
        let mut next = 1u32;
        {
            let mut stmt = conn.prepare("SELECT id, name FROM graph_nodes")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let id: u32 = row.get(0)?;
                let name = row.get_ref(1)?.as_bytes()?;
                stored.push(Stored {
                    fingerprint: fingerprint(&hashers, name),
                    id,
                });
                next = next.max(id.saturating_add(1));
            }
        }
        stored.sort_unstable();
        let mut shared = HashSet::new();
        for pair in stored.windows(2) {
            if pair[0].fingerprint == pair[1].fingerprint {
                shared.insert(pair[0].fingerprint);
            }
        }
        if !shared.is_empty() {
            stored.retain(|node| !shared.contains(&node.fingerprint));
        }
        let bits = stored.len().max(1).ilog2().max(1);
        let mut directory = Vec::with_capacity((1 << bits) + 1);
        for (at, node) in stored.iter().enumerate() {
            let bucket = (node.fingerprint.0 >> (64 - bits)) as usize;
            while directory.len() <= bucket {
                directory.push(at as u32);
            }
        }
        directory.resize((1 << bits) + 1, stored.len() as u32);
        Ok(NodeIds {
            stored,
            directory,
            bits,
            shared,
            hashers,
            created: HashMap::new(),
            removed_any: false,
            by_name: conn.prepare("SELECT id FROM graph_nodes WHERE name = ?1")?,
            insert: conn.prepare("INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)")?,
            next,
        })
    }

    /// The id of the node called `name`, and whether the delta created it now.
    pub(super) fn get_or_create(&mut self, name: &str) -> Result<(u32, bool)> {
        if let Some(&id) = self.created.get(name) {
            return Ok((id, false));
        }
        let fingerprint = fingerprint(&self.hashers, name.as_bytes());
        if self.removed_any || self.shared.contains(&fingerprint) {
            if let Some(id) = self.by_name.query_row([name], |r| r.get(0)).optional()? {
                return Ok((id, false));
            }
        } else {
            let bucket = (fingerprint.0 >> (64 - self.bits)) as usize;
            let (start, end) = (self.directory[bucket], self.directory[bucket + 1]);
            let nodes = &self.stored[start as usize..end as usize];
            if let Some(node) = nodes.iter().find(|node| node.fingerprint == fingerprint) {
                return Ok((node.id, false));
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
fn fingerprint(hashers: &[foldhash::quality::RandomState; 2], name: &[u8]) -> (u64, u32) {
    (hashers[0].hash_one(name), hashers[1].hash_one(name) as u32)
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::{fingerprint, NodeIds};

    #[test]
    fn names_are_found_by_fingerprint_by_index_when_shared_and_created_when_new() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::migrate(&mut conn, None).unwrap();
        for id in 1..=5000u32 {
            conn.execute(
                "INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)",
                params![id * 3, format!("node_{id}")],
            )
            .unwrap();
        }
        let mut nodes = NodeIds::load(&conn).unwrap();
        for id in 1..=5000u32 {
            let found = nodes.get_or_create(&format!("node_{id}")).unwrap();
            assert_eq!(found, (id * 3, false));
        }
        // A fingerprint taken as shared by two stored names: found by index all the same.
        let name = "node_77";
        let shared = fingerprint(&nodes.hashers, name.as_bytes());
        nodes.shared.insert(shared);
        nodes.stored.retain(|node| node.fingerprint != shared);
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
}
