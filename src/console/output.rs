//! How a result is written: an aligned table with box-drawing borders, JSON or CSV.

use std::fmt::Write as _;
use std::io::{self, Write};

use rusqlite::types::Value;
use serde::Serialize;

/// Table cells longer than this many characters are cut and end in `…`.
pub const TABLE_CELL_WIDTH: usize = 60;

/// How a result is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// An aligned text table drawn with box-drawing borders (`┌─┬─┐`, `│`, `├─┼─┤`, `└─┴─┘`):
    /// the header, then one line per row. `NULL` prints as `NULL`, numbers are right-aligned,
    /// a backslash, the border `│` and control characters in text show escaped (`\\`,
    /// `\u{2502}`, `\n`, …), and cells longer than [`TABLE_CELL_WIDTH`] characters are cut. No
    /// output when the statement has no columns.
    Table,
    /// One line holding `{"columns": [name…], "rows": [[value…]…], "truncated": bool,
    /// "row_count": N}`, where `row_count` is the number of rows in `rows` and `truncated`
    /// says the row cap stopped the output. INTEGER and REAL are numbers (a non-finite REAL is
    /// the string `inf`, `-inf` or `NaN`), TEXT a string, NULL `null`, BLOB a string `x'0a1b…'`.
    Json,
    /// CSV per RFC 4180: a header row, CRLF line ends, fields holding a comma, quote, CR or LF
    /// quoted with inner quotes doubled. NULL is an empty field, BLOB is `x'0a1b…'`.
    Csv,
}

/// A fetched result.
pub(super) struct ResultSet {
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<Vec<Value>>,
    pub(super) truncated: bool,
}

/// `x'…'` with the bytes in lowercase hex.
pub(super) fn blob_literal(bytes: &[u8]) -> String {
    format!("x'{}'", crate::hex::encode(bytes))
}

/// A REAL as text, keeping `.0` on whole numbers so it reads as a REAL.
pub(super) fn real_text(value: f64) -> String {
    format!("{value:?}")
}

/// `text` cut to at most `width` characters, ending in `…` when cut.
pub(super) fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Text as a table cell (before clipping): a backslash, the column border `│` and control
/// characters are escaped (`\\`, `\u{2502}`, `\n`, `\t`, …), so text never reads as a border
/// or a line break.
pub(super) fn escape_cell(text: &str) -> String {
    let mut cell = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => cell.push_str("\\\\"),
            BORDER => cell.push_str("\\u{2502}"),
            c if c.is_control() => cell.extend(c.escape_debug()),
            c => cell.push(c),
        }
    }
    cell
}

/// A value as a table cell (before clipping).
pub(super) fn table_cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_text(*r),
        Value::Text(t) => escape_cell(t),
        Value::Blob(b) => blob_literal(b),
    }
}

/// The vertical border between and around table cells.
pub(super) const BORDER: char = '│';

/// One horizontal rule of the table: `left`, `─` runs as wide as the columns (plus their
/// padding) joined by `join`, then `right`.
pub(super) fn table_rule(widths: &[usize], (left, join, right): (char, char, char)) -> String {
    let runs: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
    format!("{left}{}{right}", runs.join(&join.to_string()))
}

pub(super) fn write_table(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    if result.columns.is_empty() {
        return Ok(());
    }
    let header: Vec<(String, bool)> = result
        .columns
        .iter()
        .map(|c| (clip(&escape_cell(c), TABLE_CELL_WIDTH), false))
        .collect();
    let body: Vec<Vec<(String, bool)>> = result
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| {
                    let numeric = matches!(v, Value::Integer(_) | Value::Real(_));
                    (clip(&table_cell(v), TABLE_CELL_WIDTH), numeric)
                })
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|(h, _)| h.chars().count()).collect();
    for row in &body {
        for (width, (cell, _)) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let write_row = |out: &mut dyn Write, cells: &[(String, bool)]| {
        let mut line = String::new();
        line.push(BORDER);
        for ((cell, numeric), width) in cells.iter().zip(&widths) {
            let _ = if *numeric {
                write!(line, " {cell:>width$} {BORDER}")
            } else {
                write!(line, " {cell:<width$} {BORDER}")
            };
        }
        writeln!(out, "{line}")
    };
    writeln!(out, "{}", table_rule(&widths, ('┌', '┬', '┐')))?;
    write_row(out, &header)?;
    writeln!(out, "{}", table_rule(&widths, ('├', '┼', '┤')))?;
    for row in &body {
        write_row(out, row)?;
    }
    writeln!(out, "{}", table_rule(&widths, ('└', '┴', '┘')))
}

/// The `--json` document; see [`OutputFormat::Json`].
#[derive(Serialize)]
pub(super) struct JsonResult<'a> {
    pub(super) columns: &'a [String],
    pub(super) rows: Vec<Vec<serde_json::Value>>,
    pub(super) truncated: bool,
    pub(super) row_count: usize,
}

pub(super) fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Integer(i) => (*i).into(),
        Value::Real(r) => serde_json::Number::from_f64(*r)
            .map_or_else(|| real_text(*r).into(), serde_json::Value::Number),
        Value::Text(t) => t.as_str().into(),
        Value::Blob(b) => blob_literal(b).into(),
    }
}

pub(super) fn write_json(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    let document = JsonResult {
        columns: &result.columns,
        rows: result
            .rows
            .iter()
            .map(|row| row.iter().map(json_value).collect())
            .collect(),
        truncated: result.truncated,
        row_count: result.rows.len(),
    };
    serde_json::to_writer(&mut *out, &document)?;
    writeln!(out)
}

/// A CSV field, quoted when RFC 4180 requires it.
pub(super) fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

pub(super) fn csv_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_text(*r),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => blob_literal(b),
    }
}

/// Writes one CSV record ending in CRLF. A record of one empty field is written `""`: a bare
/// line break reads as no record at all to most CSV readers (Python's, pandas).
pub(super) fn write_csv_record<S: AsRef<str>>(out: &mut dyn Write, fields: &[S]) -> io::Result<()> {
    let fields: Vec<String> = fields.iter().map(|f| csv_field(f.as_ref())).collect();
    match fields.as_slice() {
        [only] if only.is_empty() => write!(out, "\"\"\r\n"),
        _ => write!(out, "{}\r\n", fields.join(",")),
    }
}

pub(super) fn write_csv(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    write_csv_record(out, &result.columns)?;
    for row in &result.rows {
        write_csv_record(out, &row.iter().map(csv_text).collect::<Vec<_>>())?;
    }
    Ok(())
}
