//! Tool arguments as clients really send them.
//!
//! Some MCP clients (form-based ones such as the MCP Inspector among them) send every value
//! as a string: `"limit": "20"`, `"data": "{\"problem\": …}"`. [`coerce`] walks the arguments
//! against the tool's input schema and turns a numeric string into the number, `"true"` /
//! `"false"` into the boolean and a JSON-encoded object or array into the value, wherever the
//! schema asks for that type. Any other mismatch is an error that names the field and says what
//! it expects (`limit: expected an integer from 1 to 100, got "abc"`), so the agent can fix
//! the call. A string holding a NUL character is refused the same way: no name, path or
//! pattern contains one. Values of the right type and `null` pass untouched: checking ranges, enumerations
//! and required fields stays with the tools, whose messages say more.

use serde_json::{Map, Value};

/// Coerces `args` in place to the types `schema` (a tool's input schema: an object schema,
/// `$ref`s to `#/$defs/…` or `#/definitions/…` allowed) asks for. The error names the first
/// field that cannot be coerced.
pub fn coerce(schema: &Map<String, Value>, args: &mut Value) -> Result<(), String> {
    let coercer = Coercer { root: schema };
    match args {
        Value::Object(members) => match schema.get("properties").and_then(Value::as_object) {
            Some(properties) => coercer.properties(properties, members, ""),
            None => Ok(()),
        },
        other => Err(format!(
            "arguments: expected an object, got {}",
            excerpt(other)
        )),
    }
}

/// The JSON types a schema allows, as the schema's `type` keyword names them.
#[derive(Debug, Default, Clone, Copy)]
struct Types {
    integer: bool,
    number: bool,
    boolean: bool,
    string: bool,
    object: bool,
    array: bool,
    null: bool,
}

impl Types {
    fn of(schema: &Value) -> Option<Types> {
        let mut types = Types::default();
        let names: Vec<&str> = match schema.get("type")? {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        for name in names {
            match name {
                "integer" => types.integer = true,
                "number" => types.number = true,
                "boolean" => types.boolean = true,
                "string" => types.string = true,
                "object" => types.object = true,
                "array" => types.array = true,
                "null" => types.null = true,
                _ => return None,
            }
        }
        Some(types)
    }

    fn admits(self, value: &Value) -> bool {
        match value {
            Value::Null => self.null,
            Value::Bool(_) => self.boolean,
            Value::Number(n) => self.number || (self.integer && (n.is_i64() || n.is_u64())),
            Value::String(_) => self.string,
            Value::Array(_) => self.array,
            Value::Object(_) => self.object,
        }
    }
}

struct Coercer<'s> {
    root: &'s Map<String, Value>,
}

impl<'s> Coercer<'s> {
    /// The schema `schema` stands for, following `$ref`s inside the document.
    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..16 {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let Some(target) = reference.strip_prefix("#/").and_then(|pointer| {
                let (first, rest) = pointer.split_once('/').unwrap_or((pointer, ""));
                let member = self.root.get(first)?;
                if rest.is_empty() {
                    Some(member)
                } else {
                    member.pointer(&format!("/{rest}"))
                }
            }) else {
                break;
            };
            schema = target;
        }
        schema
    }

    fn value(&self, schema: &'s Value, value: &mut Value, path: &str) -> Result<(), String> {
        if value.is_null() {
            // An absent value: whether the field may be absent is the tool's to say.
            return Ok(());
        }
        if value.as_str().is_some_and(|text| text.contains('\0')) {
            return Err(format!(
                "{}: must not contain a NUL character",
                if path.is_empty() { "arguments" } else { path }
            ));
        }
        let schema = self.resolve(schema);
        if let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        {
            return self.branches(branches, value, path);
        }
        let Some(types) = Types::of(schema) else {
            return self.members(schema, value, path);
        };
        if !types.admits(value) {
            match coerced(types, value) {
                Some(new) => *value = new,
                None => return Err(mismatch(path, schema, types, value)),
            }
        }
        self.members(schema, value, path)
    }

    /// The first branch the value fits, with or without coercion.
    fn branches(&self, branches: &'s [Value], value: &mut Value, path: &str) -> Result<(), String> {
        let mut first_error = None;
        for branch in branches {
            let mut attempt = value.clone();
            match self.value(branch, &mut attempt, path) {
                Ok(()) => {
                    *value = attempt;
                    return Ok(());
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Coerces an object's properties and an array's items.
    fn members(&self, schema: &'s Value, value: &mut Value, path: &str) -> Result<(), String> {
        match value {
            Value::Object(members) => {
                let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                    return Ok(());
                };
                self.properties(properties, members, path)
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else {
                    return Ok(());
                };
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(item_schema, item, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn properties(
        &self,
        properties: &'s Map<String, Value>,
        members: &mut Map<String, Value>,
        path: &str,
    ) -> Result<(), String> {
        for (name, member) in members.iter_mut() {
            if let Some(schema) = properties.get(name) {
                let path = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                self.value(schema, member, &path)?;
            }
        }
        Ok(())
    }
}

/// `value` turned into one of `types`, when it is a string spelling such a value.
fn coerced(types: Types, value: &Value) -> Option<Value> {
    let Value::String(text) = value else {
        return None;
    };
    let text = text.trim();
    if types.integer || types.number {
        if let Ok(n) = text.parse::<i64>() {
            return Some(n.into());
        }
        if let Ok(n) = text.parse::<u64>() {
            return Some(n.into());
        }
        if types.number {
            if let Some(n) = text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                return Some(Value::Number(n));
            }
        }
    }
    if types.boolean {
        match text {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    if types.object || types.array {
        if let Ok(parsed) = serde_json::from_str::<Value>(text) {
            if (types.object && parsed.is_object()) || (types.array && parsed.is_array()) {
                return Some(parsed);
            }
        }
    }
    None
}

/// `<field>: expected <what>, got <value>`.
fn mismatch(path: &str, schema: &Value, types: Types, value: &Value) -> String {
    let field = if path.is_empty() { "arguments" } else { path };
    let mut expected = Vec::new();
    if types.integer {
        let min = schema.get("minimum").and_then(Value::as_i64);
        let max = schema.get("maximum").and_then(Value::as_i64);
        expected.push(match (min, max) {
            (Some(min), Some(max)) => format!("an integer from {min} to {max}"),
            (Some(min), None) => format!("an integer of at least {min}"),
            (None, Some(max)) => format!("an integer of at most {max}"),
            (None, None) => "an integer".to_owned(),
        });
    } else if types.number {
        expected.push("a number".to_owned());
    }
    for (allowed, what) in [
        (types.boolean, "true or false"),
        (types.string, "a string"),
        (types.object, "an object"),
        (types.array, "an array"),
        (types.null, "null"),
    ] {
        if allowed {
            expected.push(what.to_owned());
        }
    }
    let expected = match expected.len() {
        0 => "nothing".to_owned(),
        1 => expected.remove(0),
        _ => {
            let last = expected.pop().unwrap_or_default();
            format!("{} or {last}", expected.join(", "))
        }
    };
    format!("{field}: expected {expected}, got {}", excerpt(value))
}

/// A value as JSON text, cut to a readable length.
fn excerpt(value: &Value) -> String {
    const MAX: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let mut cut: String = text.chars().take(MAX - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 100},
                "name": {"type": ["string", "null"]},
                "flag": {"type": "boolean"},
                "ratio": {"type": "number"},
                "list": {"type": ["array", "null"], "items": {"type": "integer"}},
                "data": {"anyOf": [{"$ref": "#/$defs/Data"}, {"type": "null"}]}
            },
            "$defs": {
                "Data": {
                    "type": "object",
                    "properties": {"line": {"type": ["integer", "null"], "minimum": 1}}
                }
            }
        })
    }

    fn coerce_ok(args: Value) -> Value {
        let mut args = args;
        coerce(schema().as_object().unwrap(), &mut args).unwrap();
        args
    }

    fn coerce_err(args: Value) -> String {
        let mut args = args;
        coerce(schema().as_object().unwrap(), &mut args).unwrap_err()
    }

    #[test]
    fn strings_become_the_types_the_schema_asks_for() {
        assert_eq!(
            coerce_ok(json!({"limit": " 5 ", "flag": "true", "ratio": "0.5", "list": "[1, 2]"})),
            json!({"limit": 5, "flag": true, "ratio": 0.5, "list": [1, 2]})
        );
        assert_eq!(
            coerce_ok(json!({"data": "{\"line\": \"7\"}"})),
            json!({"data": {"line": 7}})
        );
        assert_eq!(coerce_ok(json!({"list": ["3"]})), json!({"list": [3]}));
    }

    #[test]
    fn values_of_the_right_type_and_unknown_members_pass_untouched() {
        let args = json!({"limit": 500, "name": "42", "data": null, "flag": null, "other": "x"});
        assert_eq!(coerce_ok(args.clone()), args);
    }

    #[test]
    fn mismatches_name_the_field_and_what_it_expects() {
        assert_eq!(
            coerce_err(json!({"limit": "abc"})),
            r#"limit: expected an integer from 1 to 100 or null, got "abc""#
        );
        assert_eq!(
            coerce_err(json!({"data": {"line": "x"}})),
            r#"data.line: expected an integer of at least 1 or null, got "x""#
        );
        assert_eq!(
            coerce_err(json!({"limit": 2.5})),
            "limit: expected an integer from 1 to 100 or null, got 2.5"
        );
        assert_eq!(
            coerce_err(json!({"name": 5})),
            "name: expected a string or null, got 5"
        );
        assert_eq!(
            coerce_err(json!({"list": [1, "b"]})),
            r#"list[1]: expected an integer, got "b""#
        );
        assert_eq!(
            coerce_err(json!({"name": "cache\u{0}"})),
            "name: must not contain a NUL character"
        );
        assert_eq!(
            coerce_err(json!(["limit", 5])),
            r#"arguments: expected an object, got ["limit",5]"#
        );
    }
}
