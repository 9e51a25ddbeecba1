//! The JSON Schemas of tool inputs and outputs, generated from their Rust types once per type:
//! inputs as schemars writes them (the MCP layer and `tools::decode` coerce arguments
//! by them), outputs for the serialised form, with an object at the root as MCP's
//! `outputSchema` requires.
//!
//! What clients are shown is standard JSON Schema 2020-12 only ([`standard`]): schemars marks
//! integers with OpenAPI's formats (`uint32`, `int64`, `double`), which a strict validator
//! rejects or warns about on every call; they are dropped, an integer keeping the bounds its
//! format stood for (`minimum: 0`, `maximum: 4294967295` for `uint32`).

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// A JSON Schema object.
pub type Schema = Map<String, Value>;

/// The schema of a tool's arguments of type `T`.
pub fn input<T: JsonSchema + 'static>() -> Arc<Schema> {
    cached::<T>(false, || schemars::schema_for!(T).to_value())
}

/// The schema of a tool's answers of type `T`, as they serialise: `type: object` at the root
/// (an answer that is one of several shapes lists them under `oneOf`/`anyOf` below it), no
/// root title or description.
pub fn output<T: JsonSchema + 'static>() -> Arc<Schema> {
    cached::<T>(true, || {
        let mut schema = SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value();
        if let Value::Object(root) = &mut schema {
            root.remove("title");
            root.remove("description");
            root.insert("type".into(), Value::from("object"));
        }
        schema
    })
}

fn cached<T: 'static>(output: bool, make: impl FnOnce() -> Value) -> Arc<Schema> {
    type Cache = Mutex<HashMap<(TypeId, bool), Arc<Schema>>>;
    static SCHEMAS: OnceLock<Cache> = OnceLock::new();
    let mut schemas = SCHEMAS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    schemas
        .entry((TypeId::of::<T>(), output))
        .or_insert_with(|| match make() {
            Value::Object(schema) => Arc::new(schema),
            _ => Arc::default(),
        })
        .clone()
}

/// The formats JSON Schema 2020-12 defines; any other `format` is left out of the schemas
/// clients see.
pub const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// `schema` in standard JSON Schema 2020-12: every `format` outside [`STANDARD_FORMATS`]
/// removed, an integer format becoming the bounds it stands for (`uint32`: 0 to 4294967295)
/// where the schema states none. Property names are left alone: only the members of a schema
/// object are keywords.
pub fn standard(schema: &Schema) -> Schema {
    let mut value = Value::Object(schema.clone());
    standardise(&mut value);
    match value {
        Value::Object(schema) => schema,
        _ => Schema::new(),
    }
}

/// The bounds an OpenAPI integer format stands for, where JSON numbers can state them:
/// `uint*` from 0, the 8- to 32-bit ones up to their largest value and from their smallest.
fn integer_bounds(format: &str) -> (Option<i64>, Option<i64>) {
    match format {
        "uint8" => (Some(0), Some(u8::MAX.into())),
        "uint16" => (Some(0), Some(u16::MAX.into())),
        "uint32" => (Some(0), Some(u32::MAX.into())),
        "int8" => (Some(i8::MIN.into()), Some(i8::MAX.into())),
        "int16" => (Some(i16::MIN.into()), Some(i16::MAX.into())),
        "int32" => (Some(i32::MIN.into()), Some(i32::MAX.into())),
        unsigned if unsigned.starts_with("uint") => (Some(0), None),
        _ => (None, None),
    }
}

fn standardise(value: &mut Value) {
    match value {
        Value::Object(members) => {
            if let Some(Value::String(format)) = members.get("format") {
                if !STANDARD_FORMATS.contains(&format.as_str()) {
                    let (minimum, maximum) = integer_bounds(format);
                    members.remove("format");
                    for (keyword, bound) in [("minimum", minimum), ("maximum", maximum)] {
                        if let Some(bound) = bound {
                            members.entry(keyword).or_insert_with(|| Value::from(bound));
                        }
                    }
                }
            }
            for (key, member) in members.iter_mut() {
                // A map of names to schemas: each value is a schema, the names are not keywords.
                if matches!(key.as_str(), "properties" | "$defs" | "definitions") {
                    if let Value::Object(named) = member {
                        named.values_mut().for_each(standardise);
                    }
                } else {
                    standardise(member);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(standardise),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openapi_formats_become_bounds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "format": {"type": "string", "format": "uri"},
                "depth": {"type": "integer", "format": "uint32", "minimum": 0},
                "count": {"type": ["integer", "null"], "format": "uint64"},
                "score": {"type": "number", "format": "double"},
                "delta": {"type": "integer", "format": "int64"}
            },
            "$defs": {"Page": {"anyOf": [{"type": "integer", "format": "uint"}]}}
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        let standard = Value::Object(standard(&schema));
        assert_eq!(
            standard,
            json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "format": "uri"},
                    "depth": {"type": "integer", "minimum": 0, "maximum": 4294967295u32},
                    "count": {"type": ["integer", "null"], "minimum": 0},
                    "score": {"type": "number"},
                    "delta": {"type": "integer"}
                },
                "$defs": {"Page": {"anyOf": [{"type": "integer", "minimum": 0}]}}
            })
        );
    }
}
