//! Read-only tools: argument decoding, the query function, and the answer text exactly as the
//! MCP tool returns it. [`answer`] is the one table of which function answers a tool and how;
//! the MCP tool methods call it with typed arguments, and [`call`] (for the in-process benchmark
//! and the prompts) dispatches to it by name, so they cannot drift apart.

use std::io::Write as _;

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::query::acp_query::{acp_query, QueryParams, QueryResponse};
use crate::query::check_constraints::{check_constraints, CheckConstraintsParams};
use crate::query::constraints::{acp_constraints, ConstraintsParams, ConstraintsResponse};
use crate::query::context::{context, GetContextParams};
use crate::query::domain_files::{domain_files, GetDomainFilesParams};
use crate::query::expand::{
    acp_expand, acp_expand_variable, ExpandParams, ExpandResponse, ExpandVariableParams,
};
use crate::query::file_context::{file_context, GetFileContextParams};
use crate::query::impact::{acp_impact, at_least_as_strict, ImpactParams, ImpactResponse};
use crate::query::primer::{generate_primer, GeneratePrimerParams};
use crate::query::staleness::{
    asked_file, files_named, files_named_in, source_state, stale_files, stale_note, StaleFile,
};
use crate::query::symbol_context::{symbol_context, GetSymbolContextParams};
use crate::query::trace::{acp_trace, TraceParams, TraceResponse};
use crate::query::unused::{acp_unused, UnusedParams, UnusedResponse};
use crate::query::{architecture, hotpaths, QueryError, QueryResult};

/// Names of the read-only tools answered from the index.
pub const INDEX_TOOLS: &[&str] = &[
    "acp_get_architecture",
    "acp_get_file_context",
    "acp_get_symbol_context",
    "acp_get_domain_files",
    "acp_check_constraints",
    "acp_get_hotpaths",
    "acp_generate_primer",
    "acp_context",
    "acp_query",
    "acp_expand",
    "acp_expand_variable",
    "acp_constraints",
    "acp_impact",
    "acp_trace",
    "acp_unused",
];

/// Pretty-printed JSON, keys in declaration order (the reference server's text form).
pub fn pretty<T: Serialize>(value: &T) -> QueryResult<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// A tool's answer: the text every client reads and, for the tools that declare an output
/// schema ([`crate::schemas::output`]), the same JSON as a value (MCP `structuredContent`).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The answer as the tool's text content.
    pub text: String,
    /// The answer as structured content, for the tools with an output schema.
    pub structured: Option<Value>,
    /// A second text for the reader ([`crate::query::staleness`]): the files the answer names
    /// that changed on disk since the index was imported, or where the whole index stands
    /// against the project's source.
    pub note: Option<String>,
}

/// What a tool's query returns, made into an [`Answer`] only where one is sent (the command
/// line and the in-process benchmark need the text alone).
pub trait IntoAnswer {
    /// The answer's text.
    fn text(self) -> QueryResult<String>;
    /// The whole answer, its note read from `conn` (the snapshot the answer was read from).
    fn into_answer(self, conn: &Connection) -> QueryResult<Answer>;
}

impl IntoAnswer for String {
    fn text(self) -> QueryResult<String> {
        Ok(self)
    }

    fn into_answer(self, _conn: &Connection) -> QueryResult<Answer> {
        Ok(Answer {
            text: self,
            structured: None,
            note: None,
        })
    }
}

/// The typed answer of a tool with an output schema. Its text is compact JSON: the same
/// answer also travels as `structuredContent`, and an agent reading the text pays for every
/// byte of indentation (about a third of a large answer).
pub struct Typed<T>(pub T);

impl<T: Serialize> IntoAnswer for Typed<T> {
    fn text(self) -> QueryResult<String> {
        Ok(serde_json::to_string(&self.0)?)
    }

    fn into_answer(self, conn: &Connection) -> QueryResult<Answer> {
        let mut structured = serde_json::to_value(&self.0)?;
        let named = files_named(&structured);
        let stale_files = stale_files(conn, named.iter().map(String::as_str))?;
        if stale_files.is_empty() {
            return Ok(Answer {
                text: serde_json::to_string(&self.0)?,
                structured: Some(structured),
                note: None,
            });
        }
        let listed = serde_json::to_value(&stale_files)?;
        // The text keeps the answer's member order, `stale_files` last.
        let text = serde_json::to_string(&Checked {
            answer: &self.0,
            stale_files,
        })?;
        if let Value::Object(members) = &mut structured {
            members.insert("stale_files".into(), listed);
        }
        Ok(Answer {
            text,
            structured: Some(structured),
            note: None,
        })
    }
}

/// A typed answer as it is sent: the tool's answer, and the files it names that changed on
/// disk since the import. Its schema is the tool's `outputSchema`.
#[derive(Serialize, JsonSchema)]
pub struct Checked<T> {
    /// The tool's answer.
    #[serde(flatten)]
    pub answer: T,
    /// Files this answer names that changed on disk since the index was imported: their
    /// lines may be off; re-run `acp index` ([`crate::query::staleness`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_files: Vec<StaleFile>,
}

/// The text answer of a reference tool, whose text stays exactly the reference's, with a note
/// on the source it describes, looked at only when the answer is sent (the command line and
/// the in-process benchmark read the text alone).
pub struct Noted {
    text: String,
    on: NoteOn,
}

/// What a [`Noted`] answer's note is about.
enum NoteOn {
    /// Only these files (canonical paths): the one file an entry describes, known without
    /// reading the answer again.
    Only(Vec<String>),
    /// The files the answer names ([`files_named_in`]) and those the question named (canonical
    /// paths), when they changed on disk since the import.
    Files(Vec<String>),
    /// The index against the project's git `HEAD` and its files on disk.
    Source,
}

impl Noted {
    /// `text` (JSON, or a literal message naming nothing), noting which files it names
    /// changed on disk since the import.
    fn files(text: String) -> Noted {
        Noted::files_and(text, Vec::new())
    }

    /// `text`, an entry that names one file, `file` (as written: a file entry's `path`, a
    /// symbol entry's `file`), noting whether it changed on disk since the import.
    fn entry(text: String, file: Option<&str>) -> Noted {
        Noted {
            text,
            on: NoteOn::Only(file.map(asked_file).into_iter().collect()),
        }
    }

    /// [`Noted::files`], noting `asked` too: the files the question named (canonical paths).
    fn files_and(text: String, asked: Vec<String>) -> Noted {
        Noted {
            text,
            on: NoteOn::Files(asked),
        }
    }
}

impl IntoAnswer for Noted {
    fn text(self) -> QueryResult<String> {
        Ok(self.text)
    }

    fn into_answer(self, conn: &Connection) -> QueryResult<Answer> {
        let note = match &self.on {
            NoteOn::Only(files) => {
                stale_note(&stale_files(conn, files.iter().map(String::as_str))?)
            }
            NoteOn::Files(asked) => {
                let named = files_named_in(&self.text);
                let files = asked.iter().chain(&named).map(String::as_str);
                stale_note(&stale_files(conn, files)?)
            }
            NoteOn::Source => Some(format!("Source: {}", source_state(conn)?.message)),
        };
        Ok(Answer {
            text: self.text,
            structured: None,
            note,
        })
    }
}

/// Decodes tool arguments the way the MCP layer does: a missing argument object is `{}`, and
/// values are coerced to the types of `T`'s input schema ([`crate::args::coerce`]).
pub fn decode<T: DeserializeOwned + JsonSchema + 'static>(args: &Value) -> QueryResult<T> {
    let mut args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args.clone()
    };
    crate::args::coerce(&crate::schemas::input::<T>(), &mut args).map_err(QueryError::invalid)?;
    serde_json::from_value(args).map_err(|e| QueryError::invalid(e.to_string()))
}

/// The answer text of each read-only tool, from its typed arguments: the one table of which
/// query function answers a tool and how its answer is written. The MCP tool methods call these,
/// and [`call`] dispatches to them by name.
pub mod answer {
    use super::*;

    /// `acp_get_architecture`, noting where the index stands against the project's git `HEAD`
    /// and its files on disk ([`crate::query::staleness::source_state`]).
    pub fn architecture(conn: &Connection) -> QueryResult<Noted> {
        Ok(Noted {
            text: pretty(&architecture::architecture(conn)?)?,
            on: NoteOn::Source,
        })
    }

    /// `acp_get_file_context`.
    pub fn file_context(conn: &Connection, params: &GetFileContextParams) -> QueryResult<Noted> {
        let entry = super::file_context(conn, params)?;
        let file = entry.get("path").and_then(Value::as_str);
        Ok(Noted::entry(pretty(&entry)?, file))
    }

    /// `acp_get_symbol_context`.
    pub fn symbol_context(
        conn: &Connection,
        params: &GetSymbolContextParams,
    ) -> QueryResult<Noted> {
        let context = super::symbol_context(conn, params)?;
        let file = context.symbol.get("file").and_then(Value::as_str);
        Ok(Noted::entry(pretty(&context)?, file))
    }

    /// `acp_get_domain_files`.
    pub fn domain_files(conn: &Connection, params: &GetDomainFilesParams) -> QueryResult<Noted> {
        Ok(Noted::files(pretty(&super::domain_files(conn, params)?)?))
    }

    /// `acp_check_constraints`: a literal message or the constraint object.
    pub fn check_constraints(
        conn: &Connection,
        params: &CheckConstraintsParams,
    ) -> QueryResult<Noted> {
        let answer = super::check_constraints(conn, params)?;
        let text = match answer.literal() {
            Some(text) => text.to_string(),
            None => pretty(&answer)?,
        };
        let asked = asked_file(&params.path);
        Ok(Noted::files_and(text, vec![asked]))
    }

    /// `acp_get_hotpaths`.
    pub fn hotpaths(conn: &Connection) -> QueryResult<Noted> {
        Ok(Noted::files(pretty(&hotpaths::hotpaths(conn)?)?))
    }

    /// `acp_generate_primer`.
    pub fn primer(conn: &Connection, params: &GeneratePrimerParams) -> QueryResult<Noted> {
        Ok(Noted::files(pretty(&generate_primer(conn, params)?)?))
    }

    /// `acp_context`.
    pub fn context(conn: &Connection, params: &GetContextParams) -> QueryResult<Noted> {
        Ok(Noted::files(pretty(&super::context(conn, params)?)?))
    }

    /// `acp_query`.
    pub fn query(conn: &Connection, params: &QueryParams) -> QueryResult<Typed<QueryResponse>> {
        Ok(Typed(acp_query(conn, params)?))
    }

    /// `acp_expand`.
    pub fn expand(conn: &Connection, params: &ExpandParams) -> QueryResult<Typed<ExpandResponse>> {
        Ok(Typed(acp_expand(conn, params)?))
    }

    /// `acp_expand_variable`.
    pub fn expand_variable(
        conn: &Connection,
        params: &ExpandVariableParams,
    ) -> QueryResult<String> {
        pretty(&acp_expand_variable(conn, params)?)
    }

    /// `acp_constraints`.
    pub fn constraints(
        conn: &Connection,
        params: &ConstraintsParams,
    ) -> QueryResult<Typed<ConstraintsResponse>> {
        Ok(Typed(acp_constraints(conn, params)?))
    }

    /// `acp_impact`.
    pub fn impact(conn: &Connection, params: &ImpactParams) -> QueryResult<Typed<ImpactResponse>> {
        Ok(Typed(acp_impact(conn, params)?))
    }

    /// `acp_trace`.
    pub fn trace(conn: &Connection, params: &TraceParams) -> QueryResult<Typed<TraceResponse>> {
        Ok(Typed(acp_trace(conn, params)?))
    }

    /// `acp_unused`.
    pub fn unused(conn: &Connection, params: &UnusedParams) -> QueryResult<Typed<UnusedResponse>> {
        Ok(Typed(acp_unused(conn, params)?))
    }
}

/// Calls the read-only tool `name` with JSON `args`; returns the answer's text exactly as the
/// MCP tool returns it.
pub fn call(conn: &Connection, name: &str, args: &Value) -> QueryResult<String> {
    match name {
        "acp_get_architecture" => answer::architecture(conn)?.text(),
        "acp_get_file_context" => answer::file_context(conn, &decode(args)?)?.text(),
        "acp_get_symbol_context" => answer::symbol_context(conn, &decode(args)?)?.text(),
        "acp_get_domain_files" => answer::domain_files(conn, &decode(args)?)?.text(),
        "acp_check_constraints" => answer::check_constraints(conn, &decode(args)?)?.text(),
        "acp_get_hotpaths" => answer::hotpaths(conn)?.text(),
        "acp_generate_primer" => answer::primer(conn, &decode(args)?)?.text(),
        "acp_context" => answer::context(conn, &decode(args)?)?.text(),
        "acp_query" => answer::query(conn, &decode(args)?)?.text(),
        "acp_expand" => answer::expand(conn, &decode(args)?)?.text(),
        "acp_expand_variable" => answer::expand_variable(conn, &decode(args)?),
        "acp_constraints" => answer::constraints(conn, &decode(args)?)?.text(),
        "acp_impact" => answer::impact(conn, &decode(args)?)?.text(),
        "acp_trace" => answer::trace(conn, &decode(args)?)?.text(),
        "acp_unused" => answer::unused(conn, &decode(args)?)?.text(),
        _ => Err(QueryError::invalid(format!(
            "Unknown tool: {name}. Valid tools: {}",
            INDEX_TOOLS.join(", ")
        ))),
    }
}

/// Options of `acpdb query`: the same JSON as the `acp_query` tool, or as `acp_trace`
/// (`acpdb query trace FROM TO`) and `acp_unused` (`acpdb query unused [GLOB]`).
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    /// Query type: symbol, file, domain, callers, callees, search or stats (`acp_query`), trace
    /// (`acp_trace`) or unused (`acp_unused`).
    #[arg(value_name = "TYPE")]
    pub kind: String,
    /// The symbol, file or domain name, or the search pattern; for `trace`, where the paths
    /// start; for `unused`, a path glob.
    #[arg(value_name = "NAME|PATTERN")]
    pub target: Option<String>,
    /// For `trace`: where the paths end.
    #[arg(value_name = "TO")]
    pub to: Option<String>,
    /// Results per page (1-100).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Levels of callers/callees to follow (1-5); for `trace`, most calls in a path (1-10).
    #[arg(long)]
    pub depth: Option<u32>,
    /// The `next_cursor` of a previous answer, for the next page.
    #[arg(long)]
    pub cursor: Option<String>,
}

impl QueryArgs {
    /// The tool these options call and its arguments.
    pub fn to_call(&self) -> (&'static str, Value) {
        let mut args = serde_json::Map::new();
        let tool = match self.kind.as_str() {
            "trace" => {
                args.extend(self.target.clone().map(|from| ("from".into(), from.into())));
                args.extend(self.to.clone().map(|to| ("to".into(), to.into())));
                args.extend(self.depth.map(|d| ("max_depth".into(), d.into())));
                "acp_trace"
            }
            "unused" => {
                args.extend(self.target.clone().map(|glob| ("path".into(), glob.into())));
                "acp_unused"
            }
            kind => {
                args.insert("type".into(), Value::from(kind));
                if let Some(target) = &self.target {
                    let key = if kind == "search" { "pattern" } else { "name" };
                    args.insert(key.into(), Value::from(target.clone()));
                }
                args.extend(self.depth.map(|d| ("depth".into(), d.into())));
                "acp_query"
            }
        };
        args.extend(self.limit.map(|l| ("limit".into(), l.into())));
        args.extend(self.cursor.clone().map(|c| ("cursor".into(), c.into())));
        (tool, Value::Object(args))
    }
}

/// Runs `acpdb query`, printing the answer on stdout (and a warning on stderr when the database
/// is older than the cache).
pub fn run_query(project: &crate::project::Project, args: &QueryArgs) -> anyhow::Result<()> {
    let conn = crate::db::open_read_only(&project.db)?;
    crate::freshness::warn_if_outdated(project);
    let (tool, arguments) = args.to_call();
    // The tool's answer, indented for people (the tool itself answers compact JSON).
    let answer = crate::db::in_snapshot(&conn, |conn| {
        if arguments["type"] == "stats" {
            // No server sweeps for a one-off command: stats count the changed files in one go.
            crate::query::staleness::sweep(conn, CLI_SWEEP_BUDGET)?;
        }
        match tool {
            "acp_trace" => pretty(&acp_trace(conn, &decode(&arguments)?)?),
            "acp_unused" => pretty(&acp_unused(conn, &decode(&arguments)?)?),
            _ => pretty(&acp_query(conn, &decode(&arguments)?)?),
        }
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    writeln!(std::io::stdout().lock(), "{answer}")?;
    Ok(())
}

/// Files `acpdb query stats` compares with their baseline before it answers: 100,000 `lstat`
/// calls take about a tenth of a second.
const CLI_SWEEP_BUDGET: usize = 100_000;

/// Options of `acpdb impact`: what a change touches, for a pre-commit hook or a CI step.
#[derive(Debug, Clone, clap::Args)]
pub struct ImpactArgs {
    /// Changed files (paths relative to the project root).
    #[arg(long, num_args = 1..)]
    pub files: Vec<String>,
    /// Changed symbols (qualified names, keys or unique simple names).
    #[arg(long, num_args = 1..)]
    pub symbols: Vec<String>,
    /// A unified diff to read (`-` for stdin, e.g. `git diff | acpdb impact --diff -`).
    #[arg(long, value_name = "FILE|-")]
    pub diff: Option<std::path::PathBuf>,
    /// Levels of callers to follow (1-5, default 2).
    #[arg(long)]
    pub depth: Option<u32>,
    /// Impacted symbols to list (0: totals only; default 100, at most 500).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Exit with status 3 when a touched file's lock level is LEVEL or stricter (frozen,
    /// restricted, approval-required, tests-required, docs-required, review-required).
    #[arg(long, value_name = "LEVEL")]
    pub fail_on: Option<String>,
    /// Print the answer as JSON (the `acp_impact` tool's) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Status `acpdb impact --fail-on` exits with when a touched file is locked at the level given
/// or stricter.
pub const IMPACT_LOCKED_STATUS: u8 = 3;

/// Runs `acpdb impact`; returns whether a touched file is locked at `--fail-on` or stricter.
pub fn run_impact(project: &crate::project::Project, args: &ImpactArgs) -> anyhow::Result<bool> {
    if let Some(level) = &args.fail_on {
        if !crate::query::impact::LOCK_LEVELS.contains(&level.as_str()) {
            anyhow::bail!(
                "--fail-on: unknown lock level `{level}` (one of {})",
                crate::query::impact::LOCK_LEVELS.join(", ")
            );
        }
    }
    // The longest diff the tool accepts, read no further.
    const DIFF_LIMIT: u64 = crate::query::impact::MAX_DIFF_BYTES as u64;
    let diff = match &args.diff {
        None => None,
        Some(path) => {
            // A pipe (`-`, or `<(git diff)`) is read as well as a file, up to the limit.
            let bytes = if path.as_os_str() == "-" {
                crate::regular_file::read_limited(std::io::stdin(), DIFF_LIMIT)
            } else {
                std::fs::File::open(path)
                    .and_then(|f| crate::regular_file::read_limited(f, DIFF_LIMIT))
            }
            .map_err(|e| anyhow::anyhow!("--diff {}: {e}", path.display()))?;
            Some(
                String::from_utf8(bytes)
                    .map_err(|_| anyhow::anyhow!("--diff {}: not UTF-8 text", path.display()))?,
            )
        }
    };
    let params = ImpactParams {
        files: (!args.files.is_empty()).then(|| args.files.clone()),
        symbols: (!args.symbols.is_empty()).then(|| args.symbols.clone()),
        diff,
        depth: args.depth,
        limit: args.limit,
        cursor: None,
    };
    let conn = crate::db::open_read_only(&project.db)?;
    crate::freshness::warn_if_outdated(project);
    let answer = acp_impact(&conn, &params).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            pretty(&answer).map_err(|e| anyhow::anyhow!("{e}"))?
        )?;
    } else {
        write_impact_table(&mut out, &answer)?;
    }
    let locked = args.fail_on.as_deref().is_some_and(|threshold| {
        answer
            .files
            .iter()
            .any(|f| f.role == "touched" && at_least_as_strict(&f.lock_level, threshold))
    });
    Ok(locked)
}

/// The readable form of an impact answer.
fn write_impact_table(
    out: &mut impl std::io::Write,
    answer: &ImpactResponse,
) -> std::io::Result<()> {
    let t = &answer.totals;
    writeln!(
        out,
        "{} changed symbols in {} touched files; {} impacted symbols in {} files (depth {}{})",
        t.changed_symbols,
        t.touched_files,
        t.impacted_symbols,
        t.impacted_files,
        t.depth,
        if t.walk_capped { ", walk capped" } else { "" }
    )?;
    writeln!(
        out,
        "\n{:<10} {:<18} {:<9} {:<10} file",
        "role", "lock level", "allowed", "approval"
    )?;
    for f in &answer.files {
        writeln!(
            out,
            "{:<10} {:<18} {:<9} {:<10} {}{}",
            f.role,
            f.lock_level,
            if f.can_modify.allowed { "yes" } else { "NO" },
            if f.can_modify.approval_needed {
                "needed"
            } else {
                "-"
            },
            f.file,
            if f.indexed { "" } else { " (not indexed)" }
        )?;
    }
    if !answer.changed.is_empty() {
        writeln!(out, "\nchanged:")?;
        for s in &answer.changed {
            writeln!(out, "  {}", s.name)?;
        }
    }
    if !answer.impacted.is_empty() {
        writeln!(out, "\nimpacted (distance: path of calls):")?;
        for group in &answer.impacted {
            writeln!(out, "  {}", group.file.as_deref().unwrap_or("(no file)"))?;
            for s in &group.symbols {
                writeln!(out, "    {}: {}", s.distance, s.path.join(" -> "))?;
            }
        }
    }
    if answer.truncated {
        writeln!(
            out,
            "  … more: raise --limit, or use --json and its next_cursor"
        )?;
    }
    for (label, items) in [
        ("domains", &answer.domains),
        ("layers", &answer.layers),
        ("likely tests", &answer.likely_tests),
    ] {
        if !items.is_empty() {
            writeln!(out, "\n{label}: {}", items.join(", "))?;
        }
    }
    Ok(())
}
