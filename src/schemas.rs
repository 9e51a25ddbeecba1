//! The JSON Schemas of tool inputs and outputs, generated from their Rust types once per type:
//! inputs as schemars writes them (the MCP layer and `tools::decode` coerce arguments
//! by them), outputs for the serialised form, with an object at the root as MCP's
//! `outputSchema` requires.

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
