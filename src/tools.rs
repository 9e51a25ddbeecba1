//! Read-only tools by name: argument decoding, the query function, and the answer text exactly
//! as the MCP tool returns it. The MCP layer, `acpdb query` and the in-process benchmark all go
//! through [`call`], so they cannot drift apart.

use std::any::TypeId;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::query::acp_query::{acp_query, QueryParams};
use crate::query::check_constraints::{check_constraints, CheckConstraintsParams};
use crate::query::constraints::{acp_constraints, ConstraintsParams};
use crate::query::context::{context, GetContextParams};
use crate::query::domain_files::{domain_files, GetDomainFilesParams};
use crate::query::expand::{acp_expand, acp_expand_variable, ExpandParams, ExpandVariableParams};
use crate::query::file_context::{file_context, GetFileContextParams};
use crate::query::primer::{generate_primer, GeneratePrimerParams};
use crate::query::symbol_context::{symbol_context, GetSymbolContextParams};
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
];

/// Pretty-printed JSON, keys in declaration order (the reference server's text form).
pub fn pretty<T: Serialize>(value: &T) -> QueryResult<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// Decodes tool arguments the way the MCP layer does: a missing argument object is `{}`, and
/// values are coerced to the types of `T`'s input schema ([`crate::args::coerce`]).
pub fn decode<T: DeserializeOwned + JsonSchema + 'static>(args: &Value) -> QueryResult<T> {
    let mut args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args.clone()
    };
    crate::args::coerce(&input_schema::<T>(), &mut args).map_err(QueryError::invalid)?;
    serde_json::from_value(args).map_err(|e| QueryError::invalid(e.to_string()))
}

/// A JSON Schema object.
type Schema = Map<String, Value>;

/// The JSON Schema of a parameter type, generated once per type.
fn input_schema<T: JsonSchema + 'static>() -> Arc<Schema> {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, Arc<Schema>>>> = OnceLock::new();
    let mut schemas = SCHEMAS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    schemas
        .entry(TypeId::of::<T>())
        .or_insert_with(|| match schemars::schema_for!(T).to_value() {
            Value::Object(schema) => Arc::new(schema),
            _ => Arc::default(),
        })
        .clone()
}

/// `acp_check_constraints`' answer text: a literal message or the constraint object.
pub fn check_constraints_text(
    conn: &Connection,
    params: &CheckConstraintsParams,
) -> QueryResult<String> {
    let answer = check_constraints(conn, params)?;
    match answer.literal() {
        Some(text) => Ok(text.to_string()),
        None => pretty(&answer),
    }
}

/// Calls the read-only tool `name` with JSON `args`; returns the answer's text exactly as the
/// MCP tool returns it.
pub fn call(conn: &Connection, name: &str, args: &Value) -> QueryResult<String> {
    match name {
        "acp_get_architecture" => pretty(&architecture::architecture(conn)?),
        "acp_get_file_context" => {
            pretty(&file_context(conn, &decode::<GetFileContextParams>(args)?)?)
        }
        "acp_get_symbol_context" => pretty(&symbol_context(
            conn,
            &decode::<GetSymbolContextParams>(args)?,
        )?),
        "acp_get_domain_files" => {
            pretty(&domain_files(conn, &decode::<GetDomainFilesParams>(args)?)?)
        }
        "acp_check_constraints" => check_constraints_text(conn, &decode(args)?),
        "acp_get_hotpaths" => pretty(&hotpaths::hotpaths(conn)?),
        "acp_generate_primer" => pretty(&generate_primer(
            conn,
            &decode::<GeneratePrimerParams>(args)?,
        )?),
        "acp_context" => pretty(&context(conn, &decode::<GetContextParams>(args)?)?),
        "acp_query" => pretty(&acp_query(conn, &decode::<QueryParams>(args)?)?),
        "acp_expand" => pretty(&acp_expand(conn, &decode::<ExpandParams>(args)?)?),
        "acp_expand_variable" => pretty(&acp_expand_variable(
            conn,
            &decode::<ExpandVariableParams>(args)?,
        )?),
        "acp_constraints" => pretty(&acp_constraints(conn, &decode::<ConstraintsParams>(args)?)?),
        _ => Err(QueryError::invalid(format!(
            "Unknown tool: {name}. Valid tools: {}",
            INDEX_TOOLS.join(", ")
        ))),
    }
}

/// Options of `acpdb query`: the same JSON as the `acp_query` tool.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    /// Query type: symbol, file, domain, callers, callees, search or stats.
    #[arg(value_name = "TYPE")]
    pub kind: String,
    /// The symbol, file or domain name, or the search pattern.
    #[arg(value_name = "NAME|PATTERN")]
    pub target: Option<String>,
    /// Results per page (1-100).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Levels of callers/callees to follow (1-5).
    #[arg(long)]
    pub depth: Option<u32>,
    /// The `next_cursor` of a previous answer, for the next page.
    #[arg(long)]
    pub cursor: Option<String>,
}

impl QueryArgs {
    /// The `acp_query` arguments these options stand for.
    pub fn to_arguments(&self) -> Value {
        let mut args = serde_json::Map::new();
        args.insert("type".into(), Value::from(self.kind.clone()));
        if let Some(target) = &self.target {
            let key = if self.kind == "search" {
                "pattern"
            } else {
                "name"
            };
            args.insert(key.into(), Value::from(target.clone()));
        }
        if let Some(limit) = self.limit {
            args.insert("limit".into(), Value::from(limit));
        }
        if let Some(depth) = self.depth {
            args.insert("depth".into(), Value::from(depth));
        }
        if let Some(cursor) = &self.cursor {
            args.insert("cursor".into(), Value::from(cursor.clone()));
        }
        Value::Object(args)
    }
}

/// Runs `acpdb query`, printing the answer on stdout (and a warning on stderr when the database
/// is older than the cache).
pub fn run_query(project: &crate::project::Project, args: &QueryArgs) -> anyhow::Result<()> {
    let conn = crate::db::open_read_only(&project.db)?;
    crate::freshness::warn_if_outdated(project);
    let text =
        call(&conn, "acp_query", &args.to_arguments()).map_err(|e| anyhow::anyhow!("{e}"))?;
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}
