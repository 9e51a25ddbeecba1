//! Call-graph lists as the reader hands them over: the names of a JSON array of strings in one
//! buffer, each with its 128-bit hash, so the thread that writes the graph neither parses the
//! list again nor hashes a name, and frees two allocations per list instead of one per name.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
use siphasher::sip128::SipHasher13;

/// A 128-bit hash of a call-graph node name (SipHash-1-3 with 128-bit output); the importer
/// keeps 64 of its bits per node and chooses the node's slot by the other 64, so two distinct
/// names sharing an id is out of reach (about 2^-84 per pair among 10M names).
pub fn name_hash(name: &str) -> u128 {
    SipHasher13::new().hash(name.as_bytes()).as_u128()
}

/// The names of a JSON array whose items are all strings, in order (duplicates kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameList {
    /// The names, one after the other.
    text: String,
    /// Per name: its hash (apart from the ends, which a tuple would pad to 32 bytes a name).
    hashes: Vec<u128>,
    /// Per name: where it ends in `text`.
    ends: Vec<u32>,
}

impl NameList {
    /// An empty list with room for the names of the JSON text `raw` (its length, half its
    /// quotes), or for the first `most` of them, so that its buffers are allocated once.
    pub fn sized_for(raw: &[u8], most: usize) -> NameList {
        let quoted = memchr::memchr_iter(b'"', raw).count() / 2;
        let items = quoted.min(most);
        let text = if quoted > most {
            raw.len() / quoted * most
        } else {
            raw.len()
        };
        NameList {
            text: String::with_capacity(text),
            hashes: Vec::with_capacity(items),
            ends: Vec::with_capacity(items),
        }
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each name with its [`name_hash`], in list order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u128)> + '_ {
        let mut start = 0;
        self.hashes
            .iter()
            .zip(&self.ends)
            .map(move |(&hash, &end)| {
                let name = &self.text[start..end as usize];
                start = end as usize;
                (name, hash)
            })
    }

    /// Each name's [`name_hash`], in list order.
    pub fn hashes(&self) -> impl Iterator<Item = u128> + '_ {
        self.hashes.iter().copied()
    }

    /// Appends `name` with its hash.
    pub(super) fn push(&mut self, name: &str) -> Result<(), &'static str> {
        self.text.push_str(name);
        let end = u32::try_from(self.text.len()).map_err(|_| "a list of over 4 GiB of names")?;
        self.hashes.push(name_hash(name));
        self.ends.push(end);
        Ok(())
    }
}

/// Deserializes a JSON array of strings into a [`NameList`]; any other value (an array holding
/// something else than a string included) is refused, and the caller parses it as a
/// [`serde_json::Value`].
pub struct NameListSeed(NameList);

impl NameListSeed {
    /// A seed for the JSON text `raw`, which sizes the list from it so that its buffers are
    /// allocated once.
    pub fn for_json(raw: &[u8]) -> NameListSeed {
        NameListSeed(NameList::sized_for(raw, usize::MAX))
    }
}

impl<'de> DeserializeSeed<'de> for NameListSeed {
    type Value = NameList;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<NameList, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for NameListSeed {
    type Value = NameList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of names")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NameList, A::Error> {
        let mut list = self.0;
        while seq.next_element_seed(NameSeed(&mut list))?.is_some() {}
        Ok(list)
    }
}

/// One string of the array, appended to the list without an allocation of its own.
struct NameSeed<'a>(&'a mut NameList);

impl<'de> DeserializeSeed<'de> for NameSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<(), E> {
        self.0.push(name).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(raw: &str) -> Result<NameList, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(raw);
        let list = NameListSeed::for_json(raw.as_bytes()).deserialize(&mut de)?;
        de.end()?;
        Ok(list)
    }

    #[test]
    fn a_list_of_strings_keeps_order_duplicates_and_escapes() {
        let raw = r#"["b", "a", "b", "", "caf\u00e9", "x\"y"]"#;
        let list = names(raw).unwrap();
        let read: Vec<&str> = list.iter().map(|(name, _)| name).collect();
        assert_eq!(read, ["b", "a", "b", "", "café", "x\"y"]);
        assert!(list.iter().all(|(name, hash)| hash == name_hash(name)));
        assert!(names("[]").unwrap().is_empty());
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in [
            r#"["a", 1]"#,
            r#"["a", null]"#,
            r#"[["a"]]"#,
            r#"{"a": "b"}"#,
            r#""a""#,
        ] {
            assert!(names(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn names_hash_apart() {
        assert_ne!(name_hash("a"), name_hash("b"));
        assert_eq!(name_hash("validate"), name_hash("validate"));
        assert_ne!(name_hash(""), name_hash(" "));
    }
}
