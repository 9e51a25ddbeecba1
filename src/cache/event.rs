//! What the reader sends: the sections, lists and scopes of a cache or vars document and the
//! [`Event`]s read from them. Known to the reader, the digests and the import's writers alike,
//! so that none of them needs another to name a section.

use serde_json::Value;

use super::fields::Record;
use super::names::NameList;

/// A streamed map section of a cache or vars document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `source_files`
    SourceFiles,
    /// `files`
    Files,
    /// `symbols`
    Symbols,
    /// `domains`
    Domains,
    /// `graph.forward`
    GraphForward,
    /// `graph.reverse`
    GraphReverse,
    /// `constraints.by_file`
    ByFile,
    /// `constraints.by_lock_level`
    ByLockLevel,
    /// `variables` of a vars document
    Variables,
}

impl Section {
    /// The JSON path of the section.
    pub fn path(self) -> &'static str {
        match self {
            Section::SourceFiles => "source_files",
            Section::Files => "files",
            Section::Symbols => "symbols",
            Section::Domains => "domains",
            Section::GraphForward => "graph.forward",
            Section::GraphReverse => "graph.reverse",
            Section::ByFile => "constraints.by_file",
            Section::ByLockLevel => "constraints.by_lock_level",
            Section::Variables => "variables",
        }
    }

    /// Whether every entry must be a JSON object.
    pub(super) fn entries_are_objects(self) -> bool {
        matches!(
            self,
            Section::Files
                | Section::Symbols
                | Section::Domains
                | Section::ByFile
                | Section::Variables
        )
    }
}

/// A streamed array section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `constraints.hacks`
    Hacks,
    /// `constraints.debug_sessions`
    DebugSessions,
}

impl List {
    pub(super) fn path(self) -> &'static str {
        match self {
            List::Hacks => "constraints.hacks",
            List::DebugSessions => "constraints.debug_sessions",
        }
    }
}

/// Which object a member that is kept verbatim belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The document root.
    Root,
    /// The `graph` object.
    Graph,
    /// The `constraints` object.
    Constraints,
}

impl Scope {
    /// The JSON path of the object (empty for the root).
    pub fn path(self) -> &'static str {
        match self {
            Scope::Root => "",
            Scope::Graph => "graph",
            Scope::Constraints => "constraints",
        }
    }
}

/// One thing read from the document, in document order.
#[derive(Debug)]
pub enum Event {
    /// A member kept verbatim; `value` is `None` when the member is an object streamed as
    /// entries (or as a nested scope) that came before this event.
    Member {
        scope: Scope,
        key: String,
        value: Option<Value>,
    },
    /// One file entry, split into the model's columns on the reading thread, with its digest
    /// (`cache::digest`).
    File {
        key: String,
        record: Record,
        digest: i64,
    },
    /// One symbol entry, split into the model's columns on the reading thread, with its digest.
    Symbol {
        key: String,
        record: Record,
        digest: i64,
    },
    /// One entry of another streamed map section, with its digest for the sections that have
    /// one (`cache::digest::DIGESTED`).
    Entry {
        section: Section,
        key: String,
        value: Value,
        digest: Option<i64>,
    },
    /// One `graph.forward` or `graph.reverse` list whose items are all names, with the hash of
    /// its key (`cache::names`); other lists come as [`Event::Entry`]. In a full import, a list
    /// of [`LIST_PART`](super::reader::LIST_PART) names or more comes in parts: [`Event::GraphListPart`]s, then this
    /// event with the last names and the digest of the whole entry, or, when an item turns out
    /// not to be a name, an [`Event::Entry`] with the whole list, which replaces the parts.
    GraphList {
        section: Section,
        key: String,
        key_hash: u128,
        names: NameList,
        digest: i64,
    },
    /// The next [`LIST_PART`](super::reader::LIST_PART) names of a call-graph list being read (see [`Event::GraphList`]).
    GraphListPart {
        section: Section,
        key: String,
        key_hash: u128,
        names: NameList,
    },
    /// An entry whose digest the database already holds (see [`read_document_with`](super::reader::read_document_with)): not
    /// parsed, only the id of the row that holds it.
    Unchanged { section: Section, id: u32 },
    /// One element of a streamed array section.
    Item { list: List, value: Value },
}

/// The kind of document being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// An ACP cache (`acp.cache.json`).
    Cache,
    /// An ACP vars file (`acp.vars.json`).
    Vars,
}
