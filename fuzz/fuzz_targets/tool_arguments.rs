//! Tool arguments coerced against real input schemas: coerced, or refused naming a field.
#![no_main]

use acpdb::journal::DebugRequest;
use acpdb::query::acp_query::QueryParams;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn schema<T: schemars::JsonSchema>() -> Map<String, Value> {
    match schemars::schema_for!(T).to_value() {
        Value::Object(schema) => schema,
        _ => Map::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for schema in [schema::<QueryParams>(), schema::<DebugRequest>()] {
        let mut args = args.clone();
        if let Err(message) = acpdb::args::coerce(&schema, &mut args) {
            assert!(message.contains(": "), "{message}");
        }
    }
});
