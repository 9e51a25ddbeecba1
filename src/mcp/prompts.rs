//! MCP prompts: the workflows the tools support, as ready messages a client can offer its user
//! (`prompts/list`, `prompts/get`). Each prompt renders live answers of the read-only tools
//! (through `tools::call`, so they read exactly as the tools answer) and says which tool to use
//! next. Rendering a prompt never writes: `acp-debug` tells the agent how to start the session
//! rather than starting it, so that a client may fetch a prompt to preview it.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use rmcp::ErrorData;
use rusqlite::Connection;
use serde_json::{json, Map, Value};

use super::errors;
use crate::query::QueryResult;
use crate::tools;

/// The primer's token budget when `acp-onboard` gets none.
const DEFAULT_BUDGET: u64 = 4000;

/// One prompt: its name, what it is for, and its arguments (name, description, required).
struct Spec {
    name: &'static str,
    description: &'static str,
    arguments: &'static [(&'static str, &'static str, bool)],
}

/// Every prompt, in the order `prompts/list` gives them.
const PROMPTS: &[Spec] = &[
    Spec {
        name: "acp-onboard",
        description: "Start work on this codebase: its architecture and a primer sized to a token budget, then which tools to use for what.",
        arguments: &[(
            "budget",
            "Token budget of the primer (default 4000).",
            false,
        )],
    },
    Spec {
        name: "acp-before-edit",
        description: "Before changing a file: whether you may (lock level, approval, requirements), what the file holds, and how to find what calls into it.",
        arguments: &[("path", "The file to change, relative to the project root.", true)],
    },
    Spec {
        name: "acp-debug",
        description: "Debug a problem with a recorded session: how to start it with acp_debug and what to record at each step, so nothing is lost between attempts.",
        arguments: &[("problem", "The problem to debug, in a sentence.", true)],
    },
];

/// Whether the index is still true of the file at `path`: the indexed commit against `HEAD`,
/// and the file's own change on disk since the import.
fn freshness(conn: &Connection, path: &str) -> QueryResult<String> {
    use crate::query::staleness::{source_state, stale_files, stale_note};
    let canonical = crate::query::names::user_path(conn, path)?;
    let file = stale_note(&stale_files(conn, [canonical.as_str()])?).unwrap_or_else(|| {
        "The file is unchanged on disk since the index was imported.".to_string()
    });
    Ok(format!("{} {file}", source_state(conn)?.message))
}

/// The prompts, for `prompts/list`.
pub(super) fn list() -> Vec<Prompt> {
    PROMPTS
        .iter()
        .map(|spec| {
            let arguments = spec
                .arguments
                .iter()
                .map(|(name, description, required)| {
                    let mut argument = PromptArgument::new(*name);
                    argument.description = Some((*description).to_string());
                    argument.required = Some(*required);
                    argument
                })
                .collect();
            let mut prompt = Prompt::new(spec.name, Some(spec.description), Some(arguments));
            prompt.title = None;
            prompt
        })
        .collect()
}

/// Whether `name` is a prompt this server has (checked before a database is needed).
pub(super) fn exists(name: &str) -> Result<(), ErrorData> {
    if PROMPTS.iter().any(|spec| spec.name == name) {
        return Ok(());
    }
    let names: Vec<&str> = PROMPTS.iter().map(|spec| spec.name).collect();
    Err(errors::invalid_params(format!(
        "Unknown prompt: {name}. Valid prompts: {}",
        names.join(", ")
    )))
}

/// A string argument, required or not; a missing required one is a -32602 naming it.
fn argument<'a>(
    arguments: &'a Map<String, Value>,
    name: &str,
    required: bool,
) -> Result<Option<&'a str>, ErrorData> {
    match arguments.get(name) {
        Some(Value::String(text)) if text.contains('\0') => Err(errors::invalid_params(format!(
            "{name}: NUL characters are not allowed"
        ))),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.as_str())),
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(_)) if !required => Ok(None),
        Some(other) if !other.is_string() => Err(errors::invalid_params(format!(
            "{name}: expected a string, got {other}"
        ))),
        _ => Err(errors::invalid_params(format!(
            "{name}: required by this prompt"
        ))),
    }
}

/// A tool's answer as a prompt would quote it; a tool's error (an unknown path, say) is the
/// prompt's error.
fn tool(conn: &Connection, name: &str, args: Value) -> Result<String, ErrorData> {
    let answer: QueryResult<String> = tools::call(conn, name, &args);
    answer.map_err(errors::query)
}

/// Renders prompt `name` with `arguments` on `conn`.
pub(super) fn render(
    conn: &Connection,
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<GetPromptResult, ErrorData> {
    exists(name)?;
    let text = match name {
        "acp-onboard" => {
            let budget = match argument(arguments, "budget", false)? {
                None => DEFAULT_BUDGET,
                Some(text) => text
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|b| (100..=1_000_000).contains(b))
                    .ok_or_else(|| {
                        errors::invalid_params(format!(
                            "budget: expected a number of tokens from 100 to 1000000, got {text:?}"
                        ))
                    })?,
            };
            let architecture = tool(conn, "acp_get_architecture", json!({}))?;
            let primer = tool(
                conn,
                "acp_generate_primer",
                json!({ "token_budget": budget }),
            )?;
            format!(
                "I am starting work on this codebase. Its architecture, from acp_get_architecture:\n\n\
                 {architecture}\n\nIts primer (acp_generate_primer, {budget} tokens):\n\n{primer}\n\n\
                 From here on: find code with acp_query (search for words, globs or substrings; \
                 symbol and file for details; callers and callees with depth for the reach of a \
                 change); how one symbol reaches another, acp_trace; code nothing calls, \
                 acp_unused (candidates, not proof); before changing a file, use the \
                 acp-before-edit prompt or acp_constraints; for a task-shaped briefing, \
                 acp_context; record debugging with acp_debug and temporary code with acp_hack."
            )
        }
        "acp-before-edit" => {
            let path = argument(arguments, "path", true)?.unwrap_or_default();
            let freshness = freshness(conn, path).map_err(errors::query)?;
            let constraints = tool(conn, "acp_constraints", json!({ "path": path }))?;
            let context = tool(conn, "acp_get_file_context", json!({ "path": path }))?;
            format!(
                "I am about to change {path}. Is the index still true of it? {freshness}\n\n\
                 May I change it, and under what conditions? From \
                 acp_constraints:\n\n{constraints}\n\nWhat the file holds, from \
                 acp_get_file_context:\n\n{context}\n\nIf can_modify.allowed is false, do not \
                 change the file; if approval_needed is true, ask the user first; meet every \
                 requirement listed. Before changing a symbol, look at what calls it: acp_query \
                 with type callers, its name and depth 2 to 3."
            )
        }
        _ => {
            let problem = argument(arguments, "problem", true)?.unwrap_or_default();
            let start = json!({
                "action": "start",
                "data": { "problem": problem, "hypothesis": "<your first hypothesis>" }
            });
            format!(
                "Debug this problem with a recorded session: {problem}\n\n\
                 1. Start the session: call acp_debug with {start}; keep the session_id it returns.\n\
                 2. Before each change, record it: acp_debug action attempt with the session_id, \
                 a description of the change and the files it touches.\n\
                 3. After trying it, record the outcome: action result with the attempt_id, \
                 success true or false, and notes on what you observed.\n\
                 4. Undo a failed attempt, then record it: action revert with the attempt_id.\n\
                 5. Mark any temporary code (logging, a workaround) with acp_hack so it is not \
                 forgotten.\n\
                 6. When the problem is solved, action resolve with the session_id and what fixed \
                 it.\n\n\
                 acp_debug action status shows the session so far; action list shows every \
                 session."
            )
        }
    };
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text,
    )]))
}
