//! Browsing the index with Datasette: its detection of a table's full-text index finds the word
//! indexes (not the trigram ones), its search query runs through them, and the metadata file
//! in `datasette/` describes tables and columns as docs/schema.md does, with canned queries
//! that run on an imported index.
//!
//! docs/schema.md is where tables and columns are described; `datasette/metadata.json` copies
//! those descriptions (and adds labels and queries of its own). After changing the schema's
//! description, `ACPDB_BLESS=1 cargo test --test it datasette` rewrites the copy.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Map, Value};

use crate::common::{fixture, TempProject};

/// Datasette 0.65's query for the full-text table of `table` (`detect_fts_sql`); the first row
/// wins.
fn detect_fts(conn: &Connection, table: &str) -> Option<String> {
    let sql = format!(
        r#"select name from sqlite_master
            where rootpage = 0
            and (
                sql like '%VIRTUAL TABLE%USING FTS%content="{table}"%'
                or sql like '%VIRTUAL TABLE%USING FTS%content=[{table}]%'
                or (
                    tbl_name = "{table}"
                    and sql like '%VIRTUAL TABLE%USING FTS%'
                )
            )"#
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    rows.next().unwrap().map(|row| row.get(0).unwrap())
}

fn demo() -> TempProject {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    project
}

#[test]
fn datasette_finds_the_word_indexes_and_searches_through_them() {
    let project = demo();
    let conn = Connection::open(project.db()).unwrap();
    assert_eq!(detect_fts(&conn, "symbols").as_deref(), Some("symbols_fts"));
    assert_eq!(detect_fts(&conn, "files").as_deref(), Some("files_fts"));
    // `?_search=validate*` on the symbols table, as Datasette writes it.
    let found: Vec<String> = conn
        .prepare(
            "select name from symbols where rowid in
             (select rowid from symbols_fts where symbols_fts match :search) order by name",
        )
        .unwrap()
        .query_map(&[(":search", "validate*")], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(found.contains(&"validateSession".to_string()), "{found:?}");
    let found: i64 = conn
        .query_row(
            "select count(*) from files where rowid in
             (select rowid from files_fts where files_fts match 'session')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(found >= 1);
}

/// The tables of docs/schema.md's section "Tables" (summary tables included): name → (one row
/// per, main columns).
fn schema_tables() -> Vec<(String, String, String)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema.md"))
        .unwrap();
    let start = doc.find("\n## Tables\n").expect("a Tables section");
    let end = start
        + doc[start..]
            .find("\n### Indexes\n")
            .expect("an Indexes section");
    doc[start..end]
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.strip_prefix("| `")?.splitn(3, " | ").collect();
            let [names, row, columns] = cells[..] else {
                return None;
            };
            let columns = columns.strip_suffix(" |").unwrap_or(columns);
            // `a`, `b` (V18): every name between backticks.
            let names: Vec<(String, String, String)> = names
                .split('`')
                .step_by(2)
                .filter(|name| !name.is_empty())
                .map(|name| (name.to_string(), unquote(row), columns.to_string()))
                .collect();
            Some(names)
        })
        .flatten()
        .collect()
}

fn unquote(text: &str) -> String {
    text.replace('`', "")
}

/// The columns that the schema's text explains: `` `name` (explanation) ``.
fn explained_columns(text: &str) -> Map<String, Value> {
    let mut columns = Map::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else { break };
        let name = &after[..end];
        rest = &after[end + 1..];
        let Some(body) = rest.strip_prefix(" (") else {
            continue;
        };
        let mut depth = 1;
        let Some(close) = body.char_indices().find_map(|(i, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            (depth == 0).then_some(i)
        }) else {
            break;
        };
        let is_column = name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if is_column && !columns.contains_key(name) {
            columns.insert(name.into(), Value::from(unquote(&body[..close])));
        }
        rest = &body[close + 1..];
    }
    columns
}

#[test]
fn the_metadata_describes_the_tables_as_the_schema_does_and_its_queries_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasette/metadata.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let metadata: Value = serde_json::from_str(&text).unwrap();
    let mut expected = metadata.clone();
    let tables = expected["databases"]["acp"]["tables"]
        .as_object_mut()
        .unwrap();
    for (name, row, columns) in schema_tables() {
        let entry = tables.entry(name).or_insert_with(|| json!({}));
        entry["description"] = Value::from(format!("One row per {row}."));
        let columns = explained_columns(&columns);
        if columns.is_empty() {
            entry.as_object_mut().unwrap().remove("columns");
        } else {
            entry["columns"] = Value::Object(columns);
        }
    }
    let expected_text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
    if std::env::var_os("ACPDB_BLESS").is_some() {
        std::fs::write(&path, &expected_text).unwrap();
    } else {
        assert!(
            text == expected_text,
            "datasette/metadata.json differs from docs/schema.md: run ACPDB_BLESS=1 cargo test --test it datasette"
        );
    }
    // Every table it describes exists, and every canned query runs on an imported index.
    let project = demo();
    let conn = Connection::open(project.db()).unwrap();
    for table in expected["databases"]["acp"]["tables"]
        .as_object()
        .unwrap()
        .keys()
    {
        let exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?1)",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert!(exists, "{table}");
    }
    let queries = expected["databases"]["acp"]["queries"].as_object().unwrap();
    assert!(queries.len() >= 4);
    for (name, query) in queries {
        let sql = query["sql"].as_str().unwrap();
        let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{name}: {e}"));
        for index in 1..=stmt.parameter_count() {
            let parameter = stmt.parameter_name(index).unwrap().to_string();
            let value = match parameter.as_str() {
                ":domain" => "auth",
                ":name" => "validateSession",
                other => panic!("{name}: no sample value for {other}"),
            };
            stmt.raw_bind_parameter(index, value).unwrap();
        }
        let mut rows = stmt.raw_query();
        assert!(rows.next().unwrap().is_some(), "{name} found nothing");
    }
}
