//! JSON answers whose object members keep a chosen order: cache entries in the cache's field
//! order, and acp-cli's shapes for the reference tools. One type, [`Entry`], serves both.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::cache::fields::Field;

/// A JSON value whose objects serialise with their members in a chosen order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    /// A plain value (its objects serialise in `serde_json`'s map order).
    Plain(Value),
    /// An object with ordered members.
    Object(Entry),
    /// An array of ordered values.
    Array(Vec<Ordered>),
}

impl Ordered {
    /// Converts to a `serde_json` value (member order then follows `serde_json`'s map).
    pub fn to_value(&self) -> Value {
        match self {
            Ordered::Plain(value) => value.clone(),
            Ordered::Object(object) => object.to_value(),
            Ordered::Array(items) => Value::Array(items.iter().map(Ordered::to_value).collect()),
        }
    }
}

impl From<Value> for Ordered {
    fn from(value: Value) -> Self {
        Ordered::Plain(value)
    }
}

impl From<Entry> for Ordered {
    fn from(entry: Entry) -> Self {
        Ordered::Object(entry)
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Plain(value) => value.serialize(serializer),
            Ordered::Object(object) => object.serialize(serializer),
            Ordered::Array(items) => items.serialize(serializer),
        }
    }
}

/// A JSON object that keeps its members in insertion order when serialised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entry(pub Vec<(String, Ordered)>);

impl Entry {
    /// The plain JSON value of member `key` (`None` for nested ordered values).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self.member(key) {
            Some(Ordered::Plain(value)) => Some(value),
            _ => None,
        }
    }

    /// Member `key`, whatever its kind.
    pub fn member(&self, key: &str) -> Option<&Ordered> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The text value of `key`.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Appends a member (the caller knows the key is new).
    pub fn push(&mut self, key: &str, value: impl Into<Ordered>) {
        self.0.push((key.to_string(), value.into()));
    }

    /// Sets `key`, replacing its value in place or appending it.
    pub fn insert(&mut self, key: &str, value: impl Into<Ordered>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(existing) => existing.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    /// Moves `key` (when present) to the end.
    pub fn move_to_end(&mut self, key: &str) {
        if let Some(i) = self.0.iter().position(|(k, _)| k == key) {
            let item = self.0.remove(i);
            self.0.push(item);
        }
    }

    /// An entry from a rebuilt cache entry: `fields` first, in their order, then the rest by
    /// name.
    pub fn in_field_order(mut map: Map<String, Value>, fields: &[Field]) -> Entry {
        let mut out = Entry::default();
        for field in fields {
            if let Some(value) = map.remove(field.name) {
                out.push(field.name, value);
            }
        }
        for (key, value) in map {
            out.push(&key, value);
        }
        out
    }

    /// Converts to a `serde_json` value (member order then follows `serde_json`'s map).
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect(),
        )
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Any JSON value: the members of cache entries are described by the cache schema, not here.
impl schemars::JsonSchema for Ordered {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Ordered".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!(true)
    }
}

/// A JSON object whose members are described by the cache schema, not here.
impl schemars::JsonSchema for Entry {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Entry".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object"})
    }
}
