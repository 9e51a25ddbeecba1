//! A revision of an existing cache (`acpdb gen-fixture --edit-of PROJECT`): the edit a
//! revision of a generated cache makes, applied to any cache, such as the real ones of
//! `fixtures/real/`, so that a delta benchmark can run on the shapes real code has.
//!
//! In each edited file, as `acp index` writes it after an edit: the file's summary and line
//! count and its `source_files` stamp change; each of its symbols moves down a line and gets a
//! new summary (and signature, when it has one); one symbol that calls something calls another
//! existing symbol instead (its callee's reverse list loses it, the other's gains it); its last
//! symbol is removed (its own calls go, the calls to it stay, resolving to nothing) and one
//! with a new name is added, which calls the most called name and another symbol (their
//! reverse lists grow). The cache is read whole: this is for caches of real projects, not for
//! the million-symbol ones `gen-fixture` streams.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::rng::{stream, Rng};
use super::vocabulary::SALT_EDIT;

/// What [`edit_cache`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct EditSummary {
    /// Files edited.
    pub(super) files: usize,
    /// Symbols changed in place.
    pub(super) symbols_changed: usize,
    /// Symbols removed, and as many added under new names.
    pub(super) symbols_replaced: usize,
    /// Edits to call-graph lists (an item replaced, added or removed, a list added or removed).
    pub(super) list_edits: usize,
}

/// Reads `project`'s cache, edits `percent` of its files (at least one) and writes the result
/// with the project's vars file below `out`. Entries the edit leaves alone keep their bytes, as
/// `acp index` leaves them when it rewrites the cache; edited ones are written in its layout.
pub(super) fn edit_project(
    project: &Path,
    out: &Path,
    percent: f64,
    seed: u64,
) -> Result<EditSummary> {
    let source = project.join(".acp/acp.cache.json");
    let bytes = fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
    let original: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not valid JSON", source.display()))?;
    let mut cache = original.clone();
    let summary = edit_cache(&mut cache, percent, seed)
        .with_context(|| format!("editing {}", source.display()))?;
    let Some(members) = cache.as_object() else {
        bail!("{} does not hold a JSON object", source.display());
    };
    let mut text = String::new();
    write_object(
        &mut text,
        members,
        &original,
        serde_json::from_slice(&bytes)?,
        0,
    )?;
    let dir = out.join(".acp");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let target = dir.join("acp.cache.json");
    fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
    let vars = project.join(".acp/acp.vars.json");
    let copy = dir.join("acp.vars.json");
    // Copied unless it is the same file (an edit in place), which copying would empty.
    let same = |a: &Path, b: &Path| fs::canonicalize(a).ok() == fs::canonicalize(b).ok();
    if vars.is_file() && !(copy.exists() && same(&vars, &copy)) {
        fs::copy(&vars, &copy).with_context(|| format!("copying {}", vars.display()))?;
    }
    Ok(summary)
}

/// An object's members as written, in the order written (a key written twice: its last value,
/// at its first place, as a parsed object holds it).
#[derive(Default)]
struct Raw(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Raw {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Raw, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Raw;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
                let mut members: Vec<(String, Box<RawValue>)> = Vec::new();
                let mut places = std::collections::HashMap::new();
                while let Some((name, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    match places.get(&name) {
                        Some(&at) => members[at] = (name, value),
                        None => {
                            places.insert(name.clone(), members.len());
                            members.push((name, value));
                        }
                    }
                }
                Ok(Raw(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// The members whose entries an edit changes one by one: written member by member, each
/// unchanged one as it was read.
const EDITED_OBJECTS: &[&str] = &[
    "files",
    "source_files",
    "symbols",
    "graph",
    "forward",
    "reverse",
];

/// Writes `"key": value` at `depth` (two spaces a level, as `acp index` writes): `raw` as read
/// when the edit left it equal to `original`, an edited object member by member, anything else
/// as the edit left it (`edited`; absent members are skipped by the caller).
fn write_member(
    text: &mut String,
    key: &str,
    raw: &RawValue,
    edited: &Value,
    original: &Value,
    depth: usize,
) -> Result<()> {
    let indent = "  ".repeat(depth);
    text.push_str(&indent);
    text.push_str(&serde_json::to_string(key)?);
    text.push_str(": ");
    if edited == original {
        text.push_str(raw.get());
        return Ok(());
    }
    let (Some(members), true) = (edited.as_object(), EDITED_OBJECTS.contains(&key)) else {
        let pretty = serde_json::to_string_pretty(edited)?;
        text.push_str(&pretty.replace('\n', &format!("\n{indent}")));
        return Ok(());
    };
    write_object(
        text,
        members,
        original,
        serde_json::from_str(raw.get()).unwrap_or_default(),
        depth,
    )
}

/// Writes the object `members` whose members were `read` before the edit (and `original`
/// once parsed), its members at `depth + 1`.
fn write_object(
    text: &mut String,
    members: &Map<String, Value>,
    original: &Value,
    read: Raw,
    depth: usize,
) -> Result<()> {
    // The members read, in their order, then those the edit added.
    let seen: std::collections::HashSet<&str> =
        read.0.iter().map(|(name, _)| name.as_str()).collect();
    let added = members
        .iter()
        .filter(|(name, _)| !seen.contains(name.as_str()))
        .map(|(name, value)| Ok((name.clone(), RawValue::from_string(value.to_string())?)))
        .collect::<Result<Vec<_>>>()?;
    let written = read.0.into_iter().chain(added).filter_map(|(name, raw)| {
        let value = members.get(&name)?;
        Some((name, raw, value))
    });
    text.push('{');
    for (i, (name, raw, value)) in written.enumerate() {
        text.push_str(if i == 0 { "\n" } else { ",\n" });
        write_member(
            text,
            &name,
            &raw,
            value,
            &original[name.as_str()],
            depth + 1,
        )?;
    }
    text.push('\n');
    text.push_str(&"  ".repeat(depth));
    text.push('}');
    Ok(())
}

/// Edits `percent` of the files of `cache` (at least one), chosen by `seed`.
fn edit_cache(cache: &mut Value, percent: f64, seed: u64) -> Result<EditSummary> {
    if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) {
        bail!("the share of files to edit must be a percentage, not {percent}");
    }
    let Some(files) = cache.get("files").and_then(Value::as_object) else {
        bail!("the cache has no `files` object");
    };
    let mut keys: Vec<String> = files.keys().cloned().collect();
    if keys.is_empty() {
        bail!("the cache lists no file to edit");
    }
    let mut rng = stream(seed, SALT_EDIT, 0);
    let wanted = ((keys.len() as f64 * percent / 100.0).round() as usize).clamp(1, keys.len());
    for i in 0..wanted {
        let j = i + rng.index(keys.len() - i);
        keys.swap(i, j);
    }
    keys.truncate(wanted);
    keys.sort();
    let hub = most_called(cache);
    let mut summary = EditSummary::default();
    for key in keys {
        edit_file(cache, &key, hub.as_deref(), &mut rng, &mut summary);
    }
    Ok(summary)
}

/// The name with the longest `graph.reverse` list (the first such name in key order).
fn most_called(cache: &Value) -> Option<String> {
    let reverse = cache.pointer("/graph/reverse")?.as_object()?;
    reverse
        .iter()
        .max_by_key(|(name, list)| {
            (
                list.as_array().map_or(0, Vec::len),
                std::cmp::Reverse(*name),
            )
        })
        .map(|(name, _)| name.clone())
}

/// Edits one file and its symbols.
fn edit_file(
    cache: &mut Value,
    key: &str,
    hub: Option<&str>,
    rng: &mut Rng,
    summary: &mut EditSummary,
) {
    let path = key.trim_start_matches("./").to_string();
    if let Some(file) = cache.pointer_mut(&format!("/files/{}", escape(key))) {
        if let Some(file) = file.as_object_mut() {
            let text = text_of(file.get("summary"));
            file.insert("summary".into(), json!(format!("{text} (edited)")));
            if let Some(lines) = file.get("lines").and_then(Value::as_u64) {
                file.insert("lines".into(), json!(lines + 2));
            }
        }
    }
    if let Some(stamps) = cache.get_mut("source_files").and_then(Value::as_object_mut) {
        if stamps.contains_key(&path) {
            stamps.insert(path.clone(), json!("2030-01-01T00:00:00Z"));
        }
    }
    summary.files += 1;

    let symbols: Vec<String> = object(cache, "symbols")
        .iter()
        .filter(|(_, symbol)| symbol.get("file").and_then(Value::as_str) == Some(&path))
        .map(|(key, _)| key.clone())
        .collect();
    let all: Vec<String> = object(cache, "symbols").keys().cloned().collect();
    for name in &symbols {
        let symbol = &mut object(cache, "symbols")[name];
        if let Some(lines) = symbol.get_mut("lines").and_then(Value::as_array_mut) {
            for line in lines.iter_mut() {
                if let Some(n) = line.as_u64() {
                    *line = json!(n + 1);
                }
            }
        }
        let text = text_of(symbol.get("summary"));
        symbol["summary"] = json!(format!("{text} (edited)"));
        if let Some(signature) = symbol.get("signature").and_then(Value::as_str) {
            symbol["signature"] = json!(format!("{signature} /* edited */"));
        }
        summary.symbols_changed += 1;
    }
    // One caller calls another existing symbol instead of its last callee.
    let calls = |cache: &mut Value, name: &str| {
        lists(cache, "forward")
            .get(name)
            .and_then(Value::as_array)
            .is_some_and(|callees| !callees.is_empty())
    };
    if let Some(caller) = symbols.iter().find(|name| calls(cache, name)) {
        let other = all[rng.index(all.len())].clone();
        let callees = lists(cache, "forward").get_mut(caller.as_str());
        if let Some(Value::Array(callees)) = callees {
            if let Some(old) = callees.pop().and_then(|v| v.as_str().map(str::to_string)) {
                callees.push(json!(other));
                remove_item(cache, "reverse", &old, caller);
                push_item(cache, "reverse", &other, caller);
                summary.list_edits += 3;
            }
        }
    }
    // The file's last symbol replaced by one of a new name.
    let Some(removed) = symbols.last() else {
        return;
    };
    let Some(mut entry) = object(cache, "symbols").remove(removed) else {
        return;
    };
    summary.symbols_replaced += 1;
    if let Some(Value::Array(callees)) = lists(cache, "forward").remove(removed.as_str()) {
        summary.list_edits += 1;
        for callee in callees.iter().filter_map(Value::as_str) {
            remove_item(cache, "reverse", callee, removed);
            summary.list_edits += 1;
        }
    }
    let simple = entry.get("name").and_then(Value::as_str).unwrap_or(removed);
    let name = format!("{simple}_edited");
    let qualified = format!("{path}:{name}");
    let new_key = if removed.contains(':') {
        qualified.clone()
    } else {
        name.clone()
    };
    entry["name"] = json!(name);
    entry["qualified_name"] = json!(qualified);
    entry["summary"] = json!("Added by the edit");
    let other = all[rng.index(all.len())].clone();
    let callees: Vec<String> = hub.into_iter().map(str::to_string).chain([other]).collect();
    if entry.get("calls").is_some() {
        entry["calls"] = json!(callees);
    }
    if entry.get("called_by").is_some() {
        entry["called_by"] = json!([]);
    }
    object(cache, "symbols").insert(new_key.clone(), entry);
    lists(cache, "forward").insert(new_key.clone(), json!(callees));
    summary.list_edits += 1;
    for callee in &callees {
        push_item(cache, "reverse", callee, &new_key);
        summary.list_edits += 1;
    }
}

/// A JSON pointer token for `key`.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A summary's text, or nothing.
fn text_of(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or("").to_string()
}

/// The top-level object `name` of the cache, created when missing.
fn object<'a>(cache: &'a mut Value, name: &str) -> &'a mut Map<String, Value> {
    let root = cache.as_object_mut().expect("a cache is an object");
    let entry = root.entry(name).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("made an object above")
}

/// `graph.<direction>`, created when missing.
fn lists<'a>(cache: &'a mut Value, direction: &str) -> &'a mut Map<String, Value> {
    let graph = object(cache, "graph");
    let entry = graph.entry(direction).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("made an object above")
}

/// Appends `item` to `graph.<direction>[name]`, creating the list.
fn push_item(cache: &mut Value, direction: &str, name: &str, item: &str) {
    let entry = lists(cache, direction)
        .entry(name)
        .or_insert_with(|| json!([]));
    if let Some(items) = entry.as_array_mut() {
        items.push(json!(item));
    }
}

/// Removes one occurrence of `item` from `graph.<direction>[name]`, and the list once empty.
fn remove_item(cache: &mut Value, direction: &str, name: &str, item: &str) {
    let lists = lists(cache, direction);
    let Some(Value::Array(items)) = lists.get_mut(name) else {
        return;
    };
    if let Some(at) = items.iter().position(|v| v.as_str() == Some(item)) {
        items.remove(at);
    }
    if items.is_empty() {
        lists.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_cache() -> Value {
        json!({
            "files": {"./a.rs": {"path": "./a.rs", "lines": 10, "summary": "A"},
                      "./b.rs": {"path": "./b.rs", "lines": 5}},
            "source_files": {"a.rs": "t0", "b.rs": "t0"},
            "symbols": {
                "f": {"name": "f", "qualified_name": "a.rs:f", "file": "a.rs", "lines": [1, 3], "signature": "fn f()"},
                "g": {"name": "g", "qualified_name": "a.rs:g", "file": "a.rs", "lines": [4, 6]},
                "h": {"name": "h", "qualified_name": "b.rs:h", "file": "b.rs", "lines": [1, 2]}
            },
            "graph": {
                "forward": {"f": ["h", "len"], "g": ["f"], "h": ["len"]},
                "reverse": {"h": ["f"], "len": ["f", "h"], "f": ["g"]}
            }
        })
    }

    /// Forward and reverse as sets of (caller, callee) pairs.
    fn edges(cache: &Value, direction: &str) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        for (key, items) in cache["graph"][direction].as_object().unwrap() {
            for item in items.as_array().unwrap() {
                let item = item.as_str().unwrap().to_string();
                pairs.push(if direction == "forward" {
                    (key.clone(), item)
                } else {
                    (item, key.clone())
                });
            }
        }
        pairs.sort();
        pairs
    }

    #[test]
    fn an_edit_replaces_a_symbol_and_keeps_forward_and_reverse_inverse() {
        let mut cache = small_cache();
        let summary = edit_cache(&mut cache, 50.0, 1).unwrap();
        assert_eq!(summary.files, 1);
        let symbols = cache["symbols"].as_object().unwrap();
        assert_eq!(symbols.len(), 3, "one removed, one added");
        let added: Vec<&String> = symbols.keys().filter(|k| k.ends_with("_edited")).collect();
        assert_eq!(added.len(), 1, "{symbols:?}");
        let added = added[0];
        // The new symbol calls the most called name and has a list of its own.
        assert_eq!(cache["graph"]["forward"][added][0], json!("len"));
        assert_eq!(edges(&cache, "forward"), edges(&cache, "reverse"));
        let edited_file = symbols[added]["file"].as_str().unwrap();
        assert_eq!(
            cache["source_files"][edited_file],
            json!("2030-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_written_revision_keeps_the_bytes_and_places_of_what_it_did_not_edit() {
        let project = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        fs::create_dir_all(project.path().join(".acp")).unwrap();
        // Members out of key order, as `acp index` writes them; `h` names no file, so no edit
        // changes it.
        let unchanged =
            "\"h\": {\n      \"qualified_name\": \"b.rs:h\",\n      \"name\": \"h\"\n    }";
        let text = format!(
            "{{\n  \"symbols\": {{\n    {unchanged},\n    \"f\": {{\n      \"name\": \"f\",\n      \"file\": \"a.rs\"\n    }}\n  }},\n  \"files\": {{\n    \"./a.rs\": {{\n      \"path\": \"./a.rs\"\n    }},\n    \"./b.rs\": {{\n      \"path\": \"./b.rs\"\n    }}\n  }}\n}}"
        );
        fs::write(project.path().join(".acp/acp.cache.json"), &text).unwrap();
        fs::write(
            project.path().join(".acp/acp.vars.json"),
            "{\"variables\": {}}",
        )
        .unwrap();
        let mut expected: Value = serde_json::from_str(&text).unwrap();
        let edited = edit_cache(&mut expected, 50.0, 3).unwrap();
        assert_eq!(
            edit_project(project.path(), out.path(), 50.0, 3).unwrap(),
            edited
        );
        let written = fs::read_to_string(out.path().join(".acp/acp.cache.json")).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), expected);
        assert!(written.contains(unchanged), "{written}");
        let place = |text: &str| written.find(text).unwrap();
        assert!(place("\"symbols\"") < place("\"files\""), "{written}");
        assert!(place("\"h\"") < place("\"graph\""), "{written}");
        // Edited in place, the vars file stays as it was.
        edit_project(project.path(), project.path(), 50.0, 3).unwrap();
        let vars = fs::read_to_string(project.path().join(".acp/acp.vars.json")).unwrap();
        assert_eq!(vars, "{\"variables\": {}}");
    }

    #[test]
    fn the_same_seed_edits_the_same_way_and_bad_shares_are_refused() {
        let (mut a, mut b) = (small_cache(), small_cache());
        edit_cache(&mut a, 1.0, 7).unwrap();
        edit_cache(&mut b, 1.0, 7).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, small_cache());
        assert!(edit_cache(&mut small_cache(), f64::NAN, 7).is_err());
        assert!(edit_cache(&mut small_cache(), 101.0, 7).is_err());
        assert!(edit_cache(&mut json!({"files": {}}), 1.0, 7).is_err());
    }
}
