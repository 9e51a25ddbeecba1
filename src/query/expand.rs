//! `acp_expand` and the deprecated `acp_expand_variable`: `$VAR` references expanded from the
//! imported vars file against the imported cache (vars-and-expansion.md §5).
//!
//! The text is scanned once, left to right, and the output is built from spans, so one
//! reference never corrupts another (`$SYM_A` inside `$SYM_AB`). `$$` is an escaped dollar. A
//! name that is a variable is a reference; an undefined name shaped like a variable
//! (`[A-Z][A-Z0-9_]+`) is reported unresolved and kept literally; anything else (`$foo`, `$5`)
//! is plain text. Variables and their targets are looked up by primary key or index, once per
//! name and call.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use rusqlite::{Connection, OptionalExtension};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::lookup::{domain_entry, file_entry, symbol_entry, var_entry, vars_loaded, Entry};
use super::names::{not_found, project_root, suggest_variables, NAME_IS, QUALIFIED_NAME_IS};
use super::{QueryError, QueryResult};
use crate::cache::paths::canonical_path;

/// Deepest chain of nested references followed by the `inline` mode.
pub const MAX_NESTING: usize = 10;

/// The longest text an expansion may grow to (4 MiB): a short text of many references to long
/// entries would otherwise make an answer (and the memory behind it) a hundred times its size.
pub const MAX_EXPANDED_BYTES: usize = 4 << 20;

/// Modifiers recognised after a reference (`$NAME.ref`).
const MODIFIERS: &[&str] = &[
    "full",
    "ref",
    "signature",
    "summary",
    "description",
    "value",
    "type",
];

/// Parameters of `acp_expand`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct ExpandParams {
    /// Text containing `$VAR` references (e.g. `Check $SYM_PLACEORDER and $FILE_CONFIG.ref`).
    /// `$$` stands for a literal `$`.
    #[schemars(with = "String")]
    pub text: Option<String>,
    /// Expansion mode: `summary` (default; name, location and description), `full` (the complete
    /// cache entry as JSON), `inline` (the variable's value, nested references expanded) or
    /// `annotated` (`$VAR → summary`). A modifier on one reference (`.full`, `.ref`,
    /// `.signature`, `.summary`, `.description`, `.value`, `.type`) overrides the mode for it.
    #[schemars(extend("type" = "string", "enum" = ["summary", "full", "inline", "annotated"], "default" = "summary"))]
    pub mode: Option<String>,
}

/// Parameters of the deprecated `acp_expand_variable`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct ExpandVariableParams {
    /// Variable name to expand (e.g. "SYM_AuthService"); a leading `$` is ignored.
    pub name: String,
}

/// How one variable was expanded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ExpansionDetail {
    /// The variable's type (`symbol`, `file`, `domain`, `layer`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The variable's value.
    pub value: String,
    /// The text its first occurrence expanded to.
    pub source: String,
}

/// Expansion details by variable name, in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expansions(pub Vec<(String, ExpansionDetail)>);

impl Serialize for Expansions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, detail) in &self.0 {
            map.serialize_entry(name, detail)?;
        }
        map.end()
    }
}

/// An object of [`ExpansionDetail`]s keyed by variable name.
impl schemars::JsonSchema for Expansions {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expansions".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": generator.subschema_for::<ExpansionDetail>(),
        })
    }
}

/// Answer of `acp_expand`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ExpandResponse {
    /// The input text.
    pub original: String,
    /// The text with references replaced.
    pub expanded: String,
    /// Referenced names (without `$`), resolved or not, in order of first appearance.
    pub variables_found: Vec<String>,
    /// Names that are defined variables.
    pub variables_resolved: Vec<String>,
    /// Names shaped like variables that are not defined.
    pub variables_unresolved: Vec<String>,
    /// How each resolved name was expanded.
    pub expansions: Expansions,
    /// Problems met (undefined variables, inapplicable or unknown modifiers, cycles).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Expansion mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Summary,
    Full,
    Inline,
    Annotated,
}

impl Mode {
    fn parse(mode: Option<&str>) -> QueryResult<Mode> {
        match mode {
            None | Some("summary") => Ok(Mode::Summary),
            Some("full") => Ok(Mode::Full),
            Some("inline") => Ok(Mode::Inline),
            Some("annotated") => Ok(Mode::Annotated),
            Some(other) => Err(QueryError::invalid_with(
                format!("Invalid mode: {other}. Use: summary, full, inline, annotated"),
                serde_json::json!({"field": "mode"}),
            )),
        }
    }
}

/// What a variable points at in the cache.
#[derive(Debug, Clone)]
enum Target {
    Symbol {
        id: i64,
        name: String,
        file: Option<String>,
        lines: Option<(i64, i64)>,
        signature: Option<String>,
        desc: Option<String>,
    },
    File {
        id: i64,
        path: String,
        desc: Option<String>,
    },
    Domain {
        name: String,
        files: usize,
        desc: Option<String>,
    },
    Missing,
}

/// A defined variable and its target.
#[derive(Debug, Clone)]
struct Var {
    kind: String,
    value: String,
    description: Option<String>,
    entry: Entry,
    target: Target,
}

/// Trims and collapses whitespace runs; `None` when nothing is left.
fn clean(text: Option<&str>) -> Option<String> {
    let joined = text?.split_whitespace().collect::<Vec<_>>().join(" ");
    (!joined.is_empty()).then_some(joined)
}

fn first_desc(candidates: &[Option<&str>]) -> Option<String> {
    candidates.iter().find_map(|c| clean(*c))
}

fn is_variable_shaped(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 2
        && bytes[0].is_ascii_uppercase()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// Strings (names, warnings) in the order first met, each once: a text may name hundreds of
/// thousands of variables, so whether one was met is a set lookup, not a scan of the list.
#[derive(Default)]
struct FirstMet {
    list: Vec<String>,
    met: HashSet<String>,
}

impl FirstMet {
    /// Adds `item` unless it was met before; whether it was new.
    fn insert(&mut self, item: &str) -> bool {
        let new = !self.met.contains(item);
        if new {
            self.met.insert(item.to_string());
            self.list.push(item.to_string());
        }
        new
    }
}

/// Names and details collected from the top-level text.
#[derive(Default)]
struct Tracking {
    found: FirstMet,
    resolved: FirstMet,
    unresolved: FirstMet,
    expansions: Expansions,
}

struct Expander<'c> {
    conn: &'c Connection,
    loaded: bool,
    root: Option<String>,
    vars: HashMap<String, Option<Rc<Var>>>,
    /// Undefined names already warned about.
    undefined: HashSet<String>,
    warnings: FirstMet,
}

/// Undefined names of one text that get suggestions (the rest get a plain warning), so a text
/// full of unknown names costs a bounded number of lookups.
const SUGGESTED_UNDEFINED: usize = 20;

impl<'c> Expander<'c> {
    fn new(conn: &'c Connection) -> QueryResult<Expander<'c>> {
        let loaded = vars_loaded(conn)?;
        let mut expander = Expander {
            conn,
            loaded,
            root: project_root(conn)?,
            vars: HashMap::new(),
            undefined: HashSet::new(),
            warnings: FirstMet::default(),
        };
        if !loaded {
            expander.warn("No vars file loaded".into());
        }
        Ok(expander)
    }

    fn warn(&mut self, message: String) {
        if self.warnings.insert(&message) {
            tracing::debug!("acp_expand: {message}");
        }
    }

    fn var(&mut self, name: &str) -> QueryResult<Option<Rc<Var>>> {
        if !self.loaded {
            return Ok(None);
        }
        if let Some(known) = self.vars.get(name) {
            return Ok(known.clone());
        }
        let var = match var_entry(self.conn, name)? {
            Some(entry) => {
                let kind = entry.text("type").unwrap_or_default().to_string();
                let value = entry.text("value").unwrap_or_default().to_string();
                let description = entry.text("description").map(str::to_string);
                let target = self.target(&kind, &value, description.as_deref())?;
                Some(Rc::new(Var {
                    kind,
                    value,
                    description,
                    entry,
                    target,
                }))
            }
            None => None,
        };
        self.vars.insert(name.to_string(), var.clone());
        Ok(var)
    }

    fn target(&self, kind: &str, value: &str, description: Option<&str>) -> QueryResult<Target> {
        Ok(match kind {
            "symbol" => self.symbol_target(value, description)?,
            "file" => {
                let path = canonical_path(value, self.root.as_deref());
                self.conn
                    .prepare_cached(
                        "SELECT id, path, purpose, summary, module FROM files WHERE path = ?1 ORDER BY id LIMIT 1",
                    )?
                    .query_row([&path], |r| {
                        let purpose: Option<String> = r.get(2)?;
                        let summary: Option<String> = r.get(3)?;
                        let module: Option<String> = r.get(4)?;
                        Ok(Target::File {
                            id: r.get(0)?,
                            path: r.get(1)?,
                            desc: first_desc(&[
                                purpose.as_deref(),
                                summary.as_deref(),
                                module.as_deref(),
                                description,
                            ]),
                        })
                    })
                    .optional()?
                    .unwrap_or(Target::Missing)
            }
            "domain" => self
                .conn
                .prepare_cached(
                    "SELECT coalesce(name, key), description, file_count FROM domains WHERE key = ?1",
                )?
                .query_row([value], |r| {
                    let own: Option<String> = r.get(1)?;
                    Ok(Target::Domain {
                        name: r.get(0)?,
                        files: r.get::<_, i64>(2)? as usize,
                        desc: first_desc(&[own.as_deref(), description]),
                    })
                })
                .optional()?
                .unwrap_or(Target::Missing),
            _ => Target::Missing,
        })
    }

    /// Symbol lookup: map key, then qualified name, then (for a value without `:`) a unique
    /// simple name.
    fn symbol_target(&self, value: &str, description: Option<&str>) -> QueryResult<Target> {
        const COLUMNS: &str =
            "id, coalesce(name, key), file_path, line_start, line_end, signature, purpose, summary";
        let mut statements = vec![
            format!("SELECT {COLUMNS} FROM symbols WHERE key = ?1"),
            format!("SELECT {COLUMNS} FROM symbols WHERE {QUALIFIED_NAME_IS} ORDER BY id LIMIT 1"),
        ];
        if !value.contains(':') {
            statements.push(format!(
                "SELECT {COLUMNS} FROM symbols WHERE {NAME_IS} AND (SELECT count(*) FROM (SELECT 1 FROM symbols WHERE {NAME_IS} LIMIT 2)) = 1"
            ));
        }
        for sql in statements {
            let found = self
                .conn
                .prepare_cached(&sql)?
                .query_row([value], |r| {
                    let start: Option<i64> = r.get(3)?;
                    let end: Option<i64> = r.get(4)?;
                    let purpose: Option<String> = r.get(6)?;
                    let summary: Option<String> = r.get(7)?;
                    Ok(Target::Symbol {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        file: r.get(2)?,
                        lines: start.map(|s| (s, end.unwrap_or(s))),
                        signature: r.get(5)?,
                        desc: first_desc(&[purpose.as_deref(), summary.as_deref(), description]),
                    })
                })
                .optional()?;
            if let Some(target) = found {
                return Ok(target);
            }
        }
        Ok(Target::Missing)
    }

    /// Scans `text`, replacing references. `chain` holds the names being expanded inline
    /// (empty at the top level, where `tracking` collects the names seen).
    fn expand(
        &mut self,
        text: &str,
        mode: Mode,
        chain: &mut Vec<String>,
        mut tracking: Option<&mut Tracking>,
    ) -> QueryResult<String> {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut literal = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'$' {
                i += 1;
                continue;
            }
            if bytes.get(i + 1) == Some(&b'$') {
                out.push_str(&text[literal..i]);
                out.push('$');
                i += 2;
                literal = i;
                continue;
            }
            if !bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
                i += 1;
                continue;
            }
            let mut end = i + 2;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                end += 1;
            }
            let name = &text[i + 1..end];
            match self.var(name)? {
                Some(var) => {
                    let mut next = end;
                    let mut modifier = None;
                    if bytes.get(end) == Some(&b'.')
                        && bytes.get(end + 1).is_some_and(u8::is_ascii_lowercase)
                    {
                        next = end + 2;
                        while next < bytes.len()
                            && (bytes[next].is_ascii_lowercase() || bytes[next] == b'_')
                        {
                            next += 1;
                        }
                        modifier = Some(&text[end + 1..next]);
                    }
                    let expansion = self.reference(name, &var, modifier, mode, chain)?;
                    if let Some(tracking) = tracking.as_deref_mut() {
                        tracking.found.insert(name);
                        if tracking.resolved.insert(name) {
                            tracking.expansions.0.push((
                                name.to_string(),
                                ExpansionDetail {
                                    kind: var.kind.clone(),
                                    value: var.value.clone(),
                                    source: expansion.clone(),
                                },
                            ));
                        }
                    }
                    out.push_str(&text[literal..i]);
                    out.push_str(&expansion);
                    if out.len() > MAX_EXPANDED_BYTES {
                        return Err(QueryError::invalid_with(
                            format!(
                                "The expansion grows past {} MiB by offset {next} of the text; expand a shorter text, or fewer references at once",
                                MAX_EXPANDED_BYTES >> 20
                            ),
                            serde_json::json!({"field": "text", "max_expanded_bytes": MAX_EXPANDED_BYTES}),
                        ));
                    }
                    i = next;
                    literal = i;
                }
                None if is_variable_shaped(name) => {
                    if let Some(tracking) = tracking.as_deref_mut() {
                        tracking.found.insert(name);
                        tracking.unresolved.insert(name);
                    }
                    if self.loaded && !self.undefined.contains(name) {
                        let close = if self.undefined.len() < SUGGESTED_UNDEFINED {
                            suggest_variables(self.conn, name)?
                        } else {
                            Vec::new()
                        };
                        self.undefined.insert(name.to_string());
                        self.warn(match close.as_slice() {
                            [] => format!("Undefined variable: ${name}"),
                            close => format!(
                                "Undefined variable: ${name} (did you mean ${}?)",
                                close.join(", $")
                            ),
                        });
                    }
                    i = end;
                }
                None => i = end,
            }
        }
        out.push_str(&text[literal..]);
        Ok(out)
    }

    /// The replacement text of one reference.
    fn reference(
        &mut self,
        name: &str,
        var: &Var,
        modifier: Option<&str>,
        mode: Mode,
        chain: &mut Vec<String>,
    ) -> QueryResult<String> {
        let Some(modifier) = modifier else {
            return self.mode_text(name, var, mode, chain);
        };
        if !MODIFIERS.contains(&modifier) {
            self.warn(format!("Unknown modifier '.{modifier}' on ${name}"));
            return self.mode_text(name, var, mode, chain);
        }
        let applied = match modifier {
            "full" => Some(full_text(self.conn, var)?),
            "ref" => match &var.target {
                Target::Symbol {
                    file: Some(file),
                    lines,
                    ..
                } => Some(match lines {
                    Some((start, end)) => format!("{file}:{start}-{end}"),
                    None => file.clone(),
                }),
                Target::File { path, .. } => Some(path.clone()),
                _ => None,
            },
            "signature" => match &var.target {
                Target::Symbol {
                    signature: Some(signature),
                    ..
                } => Some(signature.clone()),
                _ => None,
            },
            "summary" | "description" => {
                Some(clean(var.description.as_deref()).unwrap_or_else(|| summary_text(var)))
            }
            "value" => Some(var.value.clone()),
            _ => Some(var.kind.clone()),
        };
        match applied {
            Some(text) => Ok(text),
            None => {
                self.warn(format!(
                    "Modifier '.{modifier}' does not apply to {} variable ${name}",
                    var.kind
                ));
                self.mode_text(name, var, mode, chain)
            }
        }
    }

    fn mode_text(
        &mut self,
        name: &str,
        var: &Var,
        mode: Mode,
        chain: &mut Vec<String>,
    ) -> QueryResult<String> {
        match mode {
            Mode::Summary => Ok(summary_text(var)),
            Mode::Full => full_text(self.conn, var),
            Mode::Annotated => Ok(format!("${name} \u{2192} {}", summary_text(var))),
            Mode::Inline => {
                if chain.iter().any(|n| n == name) || chain.len() >= MAX_NESTING {
                    let mut names: Vec<String> = chain.iter().map(|n| format!("${n}")).collect();
                    names.push(format!("${name}"));
                    let path = names.join(" -> ");
                    self.warn(format!("Circular reference: {path}"));
                    return Ok(format!("[CIRCULAR: {path}]"));
                }
                chain.push(name.to_string());
                let value = var.value.clone();
                let expanded = self.expand(&value, Mode::Inline, chain, None);
                chain.pop();
                expanded
            }
        }
    }
}

/// The summary-mode text of a variable.
fn summary_text(var: &Var) -> String {
    let or_default =
        |desc: &Option<String>| desc.clone().unwrap_or_else(|| "No description".to_string());
    match &var.target {
        Target::Symbol {
            name,
            file,
            lines,
            desc,
            ..
        } => {
            let location = match (file, lines) {
                (Some(file), Some((start, end))) => format!(" ({file}:{start}-{end})"),
                (Some(file), None) => format!(" ({file})"),
                (None, _) => String::new(),
            };
            format!("{name}{location} - {}", or_default(desc))
        }
        Target::File { path, desc, .. } => format!("{path} - {}", or_default(desc)),
        Target::Domain { name, files, desc } => {
            format!("{name} ({files} files) - {}", or_default(desc))
        }
        Target::Missing => match clean(var.description.as_deref()) {
            Some(description) => format!("{} - {description}", var.value),
            None => var.value.clone(),
        },
    }
}

/// The full-mode text: the target's cache entry (or the variable entry) as pretty JSON.
fn full_text(conn: &Connection, var: &Var) -> QueryResult<String> {
    let entry = match &var.target {
        Target::Symbol { id, .. } => symbol_entry(conn, *id)?,
        Target::File { id, .. } => file_entry(conn, *id)?,
        Target::Domain { .. } => {
            domain_entry(conn, &var.value)?.unwrap_or_else(|| var.entry.clone())
        }
        Target::Missing => var.entry.clone(),
    };
    Ok(serde_json::to_string_pretty(&entry)?)
}

/// `acp_expand`: expands every `$VAR` reference of `text`.
pub fn acp_expand(conn: &Connection, params: &ExpandParams) -> QueryResult<ExpandResponse> {
    let text = params.text.as_deref().ok_or_else(|| {
        QueryError::invalid_with(
            "Missing required parameter: text",
            serde_json::json!({"field": "text"}),
        )
    })?;
    let mode = Mode::parse(params.mode.as_deref())?;
    let mut expander = Expander::new(conn)?;
    let mut tracking = Tracking::default();
    let expanded = expander.expand(text, mode, &mut Vec::new(), Some(&mut tracking))?;
    Ok(ExpandResponse {
        original: text.to_string(),
        expanded,
        variables_found: tracking.found.list,
        variables_resolved: tracking.resolved.list,
        variables_unresolved: tracking.unresolved.list,
        expansions: tracking.expansions,
        warnings: expander.warnings.list,
    })
}

/// `acp_expand_variable` (deprecated): the raw variable entry (`type, value, description, refs,
/// source, lines`), read through the same variable lookup as [`acp_expand`].
pub fn acp_expand_variable(conn: &Connection, params: &ExpandVariableParams) -> QueryResult<Entry> {
    // Once per process at WARN (a fleet's operator reads it once, not once per call), then at
    // DEBUG.
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::debug!("acp_expand_variable is deprecated, use acp_expand");
    } else {
        tracing::warn!("acp_expand_variable is deprecated, use acp_expand (said once)");
    }
    if !vars_loaded(conn)? {
        return Err(QueryError::invalid("No vars file loaded"));
    }
    let name = params.name.strip_prefix('$').unwrap_or(&params.name);
    match var_entry(conn, name)? {
        Some(entry) => Ok(entry),
        None => Err(not_found(
            "Variable",
            &params.name,
            suggest_variables(conn, name)?,
        )),
    }
}
