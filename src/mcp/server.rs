//! The rmcp server: tool declarations, resources, logging and error mapping.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer, ServerHandler};
use rusqlite::Connection;

use super::answer_cache::AnswerCache;
use super::errors;
use super::state::IndexState;
use crate::journal::index::{DatabaseIndex, IndexConnection};
use crate::journal::{DebugRequest, HackRequest, Journal, JournalError};
use crate::query::acp_query::{QueryParams, QueryResponse};
use crate::query::check_constraints::CheckConstraintsParams;
use crate::query::constraints::{ConstraintsParams, ConstraintsResponse};
use crate::query::context::GetContextParams;
use crate::query::domain_files::GetDomainFilesParams;
use crate::query::expand::{ExpandParams, ExpandResponse, ExpandVariableParams};
use crate::query::file_context::GetFileContextParams;
use crate::query::impact::{ImpactParams, ImpactResponse};
use crate::query::primer::GeneratePrimerParams;
use crate::query::symbol_context::GetSymbolContextParams;
use crate::query::trace::{TraceParams, TraceResponse};
use crate::query::unused::{UnusedParams, UnusedResponse};
use crate::query::QueryResult;
use crate::tools::{answer, Answer, IntoAnswer};

const INSTRUCTIONS: &str = "acpdb serves an ACP code index (files, symbols, call graph, domains, \
constraints) from SQLite. Start with acp_get_architecture for the project's shape, then \
acp_query (search, symbol, file, callers/callees with depth) to find code, acp_constraints \
before changing a file, and acp_generate_primer or acp_context for a ready-made briefing. \
Record debugging with acp_debug and temporary code with acp_hack. Long lists come in pages: \
pass the returned next_cursor back as cursor. Prompts: acp-onboard when starting on the \
codebase, acp-before-edit {path} before changing a file, acp-debug {problem} to debug with a \
recorded session.";

/// How long a read query may take, which decides where it runs (see `AcpServer::answer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weight {
    /// A point lookup, an overview or a small walk: microseconds to a millisecond.
    Light,
    /// A search, an impact analysis or a large walk: milliseconds to seconds.
    Heavy,
}

impl Weight {
    fn heavy_if(heavy: bool) -> Weight {
        if heavy {
            Weight::Heavy
        } else {
            Weight::Light
        }
    }
}

/// Turns on the read pools ([`crate::mcp::state::ReadPools`]), taken without blocking a
/// thread: one per connection of the light pool for light calls, one per connection of the
/// heavy pool for heavy ones, so a point lookup never waits behind a row of searches and walks.
struct Gates {
    light: Arc<tokio::sync::Semaphore>,
    heavy: Arc<tokio::sync::Semaphore>,
    /// Where heavy queries run: one thread per heavy turn.
    heavy_workers: HeavyWorkers,
}

impl Gates {
    fn new(pool_size: u32) -> Gates {
        let (light, heavy) = crate::mcp::state::split_pool(pool_size);
        let (light, heavy) = (light as usize, heavy as usize);
        Gates {
            light: Arc::new(tokio::sync::Semaphore::new(light)),
            heavy: Arc::new(tokio::sync::Semaphore::new(heavy)),
            heavy_workers: HeavyWorkers::start(heavy),
        }
    }
}

/// A job for a heavy-query thread.
type HeavyJob = Box<dyn FnOnce() + Send>;

/// Threads that run heavy queries (and render their answers) at a lower CPU priority
/// ([`crate::priority::HEAVY_QUERIES`]); they stop when the server is dropped.
struct HeavyWorkers {
    jobs: std::sync::mpsc::Sender<HeavyJob>,
}

impl HeavyWorkers {
    fn start(threads: usize) -> HeavyWorkers {
        let (jobs, queue) = std::sync::mpsc::channel::<HeavyJob>();
        let queue = Arc::new(std::sync::Mutex::new(queue));
        for n in 0..threads {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("acpdb-heavy-{n}"))
                .spawn(move || {
                    lower_thread_priority();
                    loop {
                        let job = match queue.lock() {
                            Ok(queue) => queue.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(err) = spawned {
                tracing::warn!("cannot start a heavy-query thread: {err}");
            }
        }
        HeavyWorkers { jobs }
    }

    /// Runs `job` on a heavy-query thread and waits for its result without blocking the
    /// runtime. A panic in `job` is an internal error of this call only.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> Result<T, ErrorData> + Send + 'static,
    ) -> Result<T, ErrorData> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: HeavyJob = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            let _ = done.send(outcome);
        });
        self.jobs
            .send(job)
            .map_err(|_| errors::internal("no heavy-query thread is running"))?;
        match result.await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(errors::internal("the query panicked")),
            Err(_) => Err(errors::internal("the heavy-query thread stopped")),
        }
    }
}

/// Lowers the calling heavy-query thread's CPU priority to
/// [`crate::priority::HEAVY_QUERIES`] levels below the server's.
fn lower_thread_priority() {
    if let Err(err) = crate::priority::lower_this_thread(crate::priority::HEAVY_QUERIES) {
        tracing::debug!("cannot lower a heavy-query thread's priority: {err}");
    }
}

/// The acpdb MCP server.
#[derive(Clone)]
pub struct AcpServer {
    state: Arc<IndexState>,
    gates: Arc<Gates>,
    /// Longest a read query may run.
    time_limit: Duration,
    journal: Arc<std::sync::Mutex<Option<Arc<Journal>>>>,
    /// Answers of the read-only tools, per index generation.
    answers: Arc<AnswerCache>,
    /// Whether many clients share this server (HTTP): then no client sets the process's log
    /// level, which is the operator's (`--log-level`).
    shared: bool,
    tool_router: ToolRouter<Self>,
}

impl AcpServer {
    /// A server answering from `state`, interrupting read queries after `time_limit` and
    /// keeping up to `answer_cache_bytes` of answers (0: none).
    pub fn new(
        state: Arc<IndexState>,
        time_limit: Duration,
        answer_cache_bytes: usize,
    ) -> AcpServer {
        AcpServer {
            gates: Arc::new(Gates::new(state.pool_size())),
            state,
            time_limit,
            journal: Arc::new(std::sync::Mutex::new(None)),
            answers: Arc::new(AnswerCache::new(answer_cache_bytes)),
            shared: false,
            tool_router: standard_schemas(Self::tool_router()),
        }
    }

    /// This server, shared by many clients (HTTP): `logging/setLevel` is answered but leaves
    /// the process's log level alone, since one client must not silence or flood the
    /// operator's log (or read other clients' arguments in it).
    pub fn shared_by_many_clients(mut self) -> AcpServer {
        self.shared = true;
        self
    }

    /// The answer cache shared by this server's connections.
    pub fn answer_cache(&self) -> Arc<AnswerCache> {
        self.answers.clone()
    }

    /// Runs `query` on a pooled connection under the time limit and renders its answer.
    async fn answer<F, A>(&self, weight: Weight, query: F) -> Result<CallToolResult, ErrorData>
    where
        F: FnOnce(&Connection) -> QueryResult<A> + Send + 'static,
        A: IntoAnswer,
    {
        let (answer, note) = self
            .run(weight, move |conn| {
                query(conn).and_then(|answer| answer.into_answer(conn))
            })
            .await?;
        Ok(respond(answer, note))
    }

    /// Runs `query` on a pooled connection under the time limit; returns its result and the
    /// staleness note of the database it read ([`IndexState::pool_and_note`]).
    ///
    /// Point lookups and overviews take micro- to a few hundred microseconds and run on the
    /// worker that received the call. A query that may walk or scan ([`Weight::Heavy`]:
    /// call-graph walks, search, impact) runs on a heavy-query thread of lower CPU priority
    /// ([`HeavyWorkers`]), so cheap calls (and `ping`) keep being answered, first, while it
    /// runs.
    async fn run<F, T>(&self, weight: Weight, query: F) -> Result<(T, Option<String>), ErrorData>
    where
        F: FnOnce(&Connection) -> QueryResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let (pool, note) = self.state.pool_and_note().map_err(errors::unavailable)?;
        let closed = |_| errors::internal("the server is shutting down");
        let time_limit = self.time_limit;
        let value = match weight {
            Weight::Light => {
                let _connection = self.gates.light.acquire().await.map_err(closed)?;
                // A light query runs here only when a connection is free at once: waiting for
                // one (every connection busy with heavy queries) must not hold up this worker.
                match pool.light.try_get() {
                    Some(conn) => limited(&conn, time_limit, query),
                    None => tokio::task::block_in_place(|| on_pool(&pool.light, time_limit, query)),
                }
            }
            Weight::Heavy => {
                let heavy = self.gates.heavy.clone().acquire_owned().await;
                let heavy = heavy.map_err(closed)?;
                self.gates
                    .heavy_workers
                    .run(move || {
                        // The job holds its turn: it stays taken while it runs, even when the
                        // call waiting for it is dropped.
                        let _turn = heavy;
                        on_pool(&pool.heavy, time_limit, query)
                    })
                    .await
            }
        }?;
        Ok((value, note))
    }

    async fn journal_call<F>(&self, call: F) -> Result<CallToolResult, ErrorData>
    where
        F: FnOnce(&Journal) -> Result<crate::journal::Response, JournalError> + Send + 'static,
    {
        let (slot, state) = (self.journal.clone(), self.state.clone());
        // Opening the journal may wait (on another process holding it, up to its busy timeout)
        // and reads the attempts file: off the runtime's workers, as the call itself.
        let response = tokio::task::spawn_blocking(move || {
            let journal = open_journal(&slot, &state)?;
            call(&journal).map_err(errors::journal)
        })
        .await
        .map_err(|e| errors::internal(format!("journal task failed: {e}")))??;
        let (text, value) = response.into_parts();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(value);
        Ok(result)
    }
}

/// The journal in `slot`, opened there on first use.
fn open_journal(
    slot: &std::sync::Mutex<Option<Arc<Journal>>>,
    state: &Arc<IndexState>,
) -> Result<Arc<Journal>, ErrorData> {
    let mut slot = slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(journal) = slot.as_ref() {
        return Ok(journal.clone());
    }
    let project = state.project();
    if state.read_only() {
        return Err(errors::journal_read_only(&project));
    }
    let state = state.clone();
    let index = Arc::new(DatabaseIndex::new(move || {
        let pool = state.pool().ok()?;
        let conn = pool.light.get().ok()?;
        Some(Box::new(HeldConnection { conn, _pool: pool }) as IndexConnection)
    }));
    let journal = Journal::open(&project.journal_db, &project.root, &project.attempts)
        .map_err(errors::journal)?
        .with_index(index);
    let journal = Arc::new(journal);
    *slot = Some(journal.clone());
    Ok(journal)
}

impl AcpServer {
    /// Routes a tool call: unknown names list the valid ones, arguments are coerced to the
    /// tool's schema, and undecodable arguments are a -32602 error rather than an error result.
    async fn dispatch(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(tool) = self.tool_router.get(&name) else {
            let valid: Vec<String> = self
                .tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            return Err(errors::invalid_params_with(
                format!("Unknown tool: {name}. Valid tools: {}", valid.join(", ")),
                serde_json::json!({"valid_tools": valid}),
            ));
        };
        if let Some(arguments) = request.arguments.take() {
            let mut arguments = serde_json::Value::Object(arguments);
            crate::args::coerce(&tool.input_schema, &mut arguments)
                .map_err(errors::invalid_params)?;
            if let serde_json::Value::Object(arguments) = arguments {
                request.arguments = Some(arguments);
            }
        }
        // An index tool answers from the index alone: within one index generation the same
        // arguments get the same answer, which may come from the cache.
        let from_index = crate::tools::INDEX_TOOLS.contains(&name.as_str());
        let cached = if from_index && self.answers.enabled() {
            self.state.answer_generation().and_then(|generation| {
                AnswerCache::key(&name, request.arguments.as_ref()).map(|key| (generation, key))
            })
        } else {
            None
        };
        if let Some((generation, key)) = &cached {
            match self.answers.get(*generation, key) {
                Some(Ok(result)) => return Ok(CallToolResponse::Complete(result)),
                Some(Err(error)) => return Err(error),
                None => {}
            }
        }
        let context = ToolCallContext::new(self, request, context);
        let response = self.tool_router.call(context).await;
        if let Some((generation, key)) = cached {
            // Kept only when nothing changed while it was computed (no staleness note in it).
            let keep = match &response {
                Ok(CallToolResponse::Complete(result)) => Some(Ok(result)),
                Err(error) if errors::decided_by_the_index(error) => Some(Err(error)),
                _ => None,
            };
            if let Some(outcome) = keep {
                if self.state.answer_generation() == Some(generation) {
                    self.answers.put(generation, key, outcome);
                }
            }
        }
        let response = response?;
        match response {
            CallToolResponse::Complete(result) if result.is_error == Some(true) => {
                // rmcp reports undecodable arguments as an error result; agents get a JSON-RPC
                // -32602 instead, like the reference server.
                let message = result
                    .content
                    .iter()
                    .find_map(|c| match c {
                        ContentBlock::Text(text) => Some(text.text.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| "invalid arguments".into());
                let message = message
                    .strip_prefix("failed to deserialize parameters:")
                    .map(str::trim)
                    .unwrap_or(&message)
                    .to_string();
                Err(errors::invalid_params(message))
            }
            other => Ok(other),
        }
    }
}

/// `router` with every tool's input and output schema in standard JSON Schema 2020-12
/// ([`crate::schemas::standard`]); arguments are still coerced by the schemas of their types.
fn standard_schemas(mut router: ToolRouter<AcpServer>) -> ToolRouter<AcpServer> {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        tool.input_schema = Arc::new(crate::schemas::standard(&tool.input_schema));
        if let Some(output) = &tool.output_schema {
            tool.output_schema = Some(Arc::new(crate::schemas::standard(output)));
        }
    }
    router
}

/// A pooled connection that keeps its served pool: the connection goes back to the pool before
/// the pool is let go of, so that a pool replaced meanwhile still closes apart
/// ([`crate::mcp::state::ServedPool`]).
struct HeldConnection {
    conn: r2d2::PooledConnection<r2d2_sqlite::SqliteConnectionManager>,
    _pool: Arc<crate::mcp::state::ServedPool>,
}

impl std::ops::Deref for HeldConnection {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// The tool result of `answer`: its text, its own note (source files changed since the
/// import), then `note` when the database it was read from is stale; and, for the tools with
/// an output schema, its structured content.
fn respond(answer: Answer, note: Option<String>) -> CallToolResult {
    let mut content = vec![ContentBlock::text(answer.text)];
    content.extend(answer.note.map(ContentBlock::text));
    content.extend(note.map(ContentBlock::text));
    let mut result = CallToolResult::success(content);
    result.structured_content = answer.structured;
    result
}

/// A connection of `pool`, waiting for one to be free.
fn connection(
    pool: &crate::db::ReadPool,
) -> Result<r2d2::PooledConnection<r2d2_sqlite::SqliteConnectionManager>, ErrorData> {
    pool.get()
        .map_err(|e| errors::internal(format!("database connection: {e}")))
}

/// Runs `query` on a connection of `pool` (waiting for one), interrupted after `time_limit`.
fn on_pool<T>(
    pool: &crate::db::ReadPool,
    time_limit: Duration,
    query: impl FnOnce(&Connection) -> QueryResult<T>,
) -> Result<T, ErrorData> {
    let conn = connection(pool)?;
    limited(&conn, time_limit, query)
}

/// Runs `query` on `conn` in one snapshot ([`crate::db::in_snapshot`]), interrupted after
/// `time_limit`.
fn limited<T>(
    conn: &Connection,
    time_limit: Duration,
    query: impl FnOnce(&Connection) -> QueryResult<T>,
) -> Result<T, ErrorData> {
    let limit = crate::db::TimeLimit::install(conn, time_limit)
        .map_err(|e| errors::internal(format!("{e:#}")))?;
    match crate::db::in_snapshot(conn, query) {
        Ok(answer) => Ok(answer),
        Err(_) if limit.expired() => Err(errors::time_limit(time_limit.as_secs_f64())),
        Err(err) => Err(errors::query(err)),
    }
}

#[tool_router]
impl AcpServer {
    #[tool(
        name = "acp_query",
        output_schema = crate::schemas::output::<crate::tools::Checked<QueryResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Query the index: type symbol (name), file (name = path), domain (name), callers / callees (name, depth 1-5 for the blast radius of a change), search (pattern: words, globs like validate*, or substrings), stats. limit 1-100 (default 20); long results are paged: pass next_cursor back as cursor with the same type. For a whole file entry, use acp_get_file_context."
    )]
    async fn acp_query(
        &self,
        Parameters(params): Parameters<QueryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        // The first page of a small walk (at most `SMALL_WALK` edges, counted from the node
        // counts first) is a point lookup, answered on the light path.
        if params.is_first_page_walk() {
            let probe = params.clone();
            let (small, note) = self
                .run(Weight::Light, move |conn| {
                    if !probe.is_small_walk(conn)? {
                        return Ok(None);
                    }
                    answer::query(conn, &probe)?.into_answer(conn).map(Some)
                })
                .await?;
            if let Some(answer) = small {
                return Ok(respond(answer, note));
            }
        }
        self.answer(Weight::heavy_if(params.may_be_slow()), move |conn| {
            answer::query(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_expand",
        output_schema = crate::schemas::output::<crate::tools::Checked<ExpandResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Expand every $VARIABLE in a text using the project's vars file. Modes: summary (default), full, inline, annotated; answers variables_found, resolved, unresolved and the expansions. For one variable's raw entry, this replaces acp_expand_variable."
    )]
    async fn acp_expand(
        &self,
        Parameters(params): Parameters<ExpandParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| answer::expand(conn, &params))
            .await
    }

    #[tool(
        name = "acp_expand_variable",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Deprecated: use acp_expand. Returns one variable's entry from the vars file (type, value, description)."
    )]
    async fn acp_expand_variable(
        &self,
        Parameters(params): Parameters<ExpandVariableParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::expand_variable(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_constraints",
        output_schema = crate::schemas::output::<crate::tools::Checked<ConstraintsResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Before modifying a file, check whether you may: lock level and its meaning, reason, style, behaviour, quality requirements and can_modify {allowed, approval_needed, requirements}, plus symbol-level constraints. For the raw constraint entry, use acp_check_constraints."
    )]
    async fn acp_constraints(
        &self,
        Parameters(params): Parameters<ConstraintsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::constraints(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_impact",
        output_schema = crate::schemas::output::<crate::tools::Checked<ImpactResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Before an edit, or for a diff: what the change touches and whether it may be made. Give files, symbols or a unified diff (git diff). Answers the changed symbols; the symbols that call them up to depth (default 2, max 5), each with its distance and one shortest call path, grouped by file; every touched and impacted file with its lock level and can_modify {allowed, approval_needed, requirements}; domains, layers and likely tests; totals. limit 0 returns the totals only; long lists are paged with next_cursor."
    )]
    async fn acp_impact(
        &self,
        Parameters(params): Parameters<ImpactParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Heavy, move |conn| answer::impact(conn, &params))
            .await
    }

    #[tool(
        name = "acp_trace",
        output_schema = crate::schemas::output::<crate::tools::Checked<TraceResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "How does one symbol reach another? The shortest call paths from `from` to `to` (symbols by qualified name path:name, map key or unique simple name), up to max_depth calls (default 6, max 10). Each path lists its symbols with file, lines and lock level; found false with a message when no path exists within the depth (walk_capped when the search stopped at its bound). limit paths per page (default 3, max 50); pass next_cursor back for more. For everything that calls one symbol, use acp_query callers."
    )]
    async fn acp_trace(
        &self,
        Parameters(params): Parameters<TraceParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Heavy, move |conn| answer::trace(conn, &params))
            .await
    }

    #[tool(
        name = "acp_unused",
        output_schema = crate::schemas::output::<crate::tools::Checked<UnusedResponse>>(),
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Dead-code candidates: functions and methods nothing in the call graph calls, largest first, each with its size and reason; exported symbols, entry points (main), test files and runtime-called names (constructors, __init__) are left out. Filter by domain, path (glob) or type; include_exported true lists exported ones too. A static call graph misses dynamic calls: coverage says how much of each language it sees, so treat the list as candidates to check, never as proof. limit 1-100 (default 20); pass next_cursor back for more."
    )]
    async fn acp_unused(
        &self,
        Parameters(params): Parameters<UnusedParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Heavy, move |conn| answer::unused(conn, &params))
            .await
    }

    #[tool(
        name = "acp_get_architecture",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get an overview of the codebase architecture including domains, files, symbols, and structure. Use this first to understand the project layout. For counts and search, use acp_query (type stats or search)."
    )]
    async fn acp_get_architecture(&self) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, answer::architecture).await
    }

    #[tool(
        name = "acp_get_file_context",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get detailed context for a specific file including exports, imports, symbols, constraints, and relationships. Paths may be given with ./, backslashes or a trailing slash. Before editing the file, also call acp_constraints."
    )]
    async fn acp_get_file_context(
        &self,
        Parameters(params): Parameters<GetFileContextParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::file_context(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_get_symbol_context",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get detailed context for a symbol including its definition, callers, callees, constraints, and domain membership. Accepts the cache key, a qualified name (path:name) or a unique simple name; an ambiguous name answers with candidates. Long caller lists are paged (pass next_cursor back as cursor). For the callers of callers, use acp_query type callers with depth."
    )]
    async fn acp_get_symbol_context(
        &self,
        Parameters(params): Parameters<GetSymbolContextParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::symbol_context(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_get_domain_files",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get all files belonging to a specific domain with their metadata. Large domains are paged (pass next_cursor back as cursor). To list the domains, use acp_get_architecture."
    )]
    async fn acp_get_domain_files(
        &self,
        Parameters(params): Parameters<GetDomainFilesParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::domain_files(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_check_constraints",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Check what constraints (lock levels, style rules, behavior requirements) apply to a file or its symbols. Returns the raw constraint entry; for the lock level's meaning and whether you may modify the file, use acp_constraints."
    )]
    async fn acp_check_constraints(
        &self,
        Parameters(params): Parameters<CheckConstraintsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| {
            answer::check_constraints(conn, &params)
        })
        .await
    }

    #[tool(
        name = "acp_get_hotpaths",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get the most frequently called symbols in the codebase - the 'hotpaths' that are critical to understand. For who calls one particular symbol, use acp_query type callers."
    )]
    async fn acp_get_hotpaths(&self) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, answer::hotpaths).await
    }

    #[tool(
        name = "acp_generate_primer",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Generate a project primer (markdown, compact, json or text) for an AI agent, fitted to a token budget and never over it; filter by categories, tags or a preset and force-include sections. For a task-specific briefing, use acp_context."
    )]
    async fn acp_generate_primer(
        &self,
        Parameters(params): Parameters<GeneratePrimerParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| answer::primer(conn, &params))
            .await
    }

    #[tool(
        name = "acp_context",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Get operation-specific context: create (conventions and similar files for a new file), modify (constraints, importers and domain of a file), debug (related files and hotpaths for a file or symbol), explore (project overview). For a general primer, use acp_generate_primer."
    )]
    async fn acp_context(
        &self,
        Parameters(params): Parameters<GetContextParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(Weight::Light, move |conn| answer::context(conn, &params))
            .await
    }
    #[tool(
        name = "acp_debug",
        output_schema = crate::journal::debug_answer_schema(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Record a debugging session so attempts can be reviewed and reverted: start (problem, hypothesis), attempt (session_id, description, files), result (session_id, attempt_id, success, notes), revert, resolve (resolution), status, list. Entries are durable and exported to .acp/acp.attempts.json. To mark temporary code instead, use acp_hack."
    )]
    async fn acp_debug(
        &self,
        Parameters(request): Parameters<DebugRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        self.journal_call(move |journal| journal.debug(request))
            .await
    }

    #[tool(
        name = "acp_hack",
        output_schema = crate::journal::hack_answer_schema(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Track temporary code (hacks, workarounds, debug code) so it is not forgotten: mark (file, line, reason, expires), list (file, expired_only), revert (id), cleanup (lists expired markers). For a debugging session with several attempts, use acp_debug."
    )]
    async fn acp_hack(
        &self,
        Parameters(request): Parameters<HackRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        self.journal_call(move |journal| journal.hack(request))
            .await
    }
}

impl ServerHandler for AcpServer {
    // MCP logging is deprecated by the newest protocol revision, but clients on earlier revisions
    // (MCP Inspector among them) still call logging/setLevel, so it stays advertised.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new("acpdb", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.clone();
        let answer = self.dispatch(request, context).await;
        if let Err(err) = &answer {
            // The client's error, answered to it; not a problem of the server.
            tracing::debug!(%tool, code = err.code.0, message = %err.message, "error answered");
        }
        answer
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, ErrorData> {
        Ok(rmcp::model::ListToolsResult::with_all_items(
            self.tool_router.list_all(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = match request.level {
            rmcp::model::LoggingLevel::Debug => "debug",
            rmcp::model::LoggingLevel::Info | rmcp::model::LoggingLevel::Notice => "info",
            rmcp::model::LoggingLevel::Warning => "warn",
            _ => "error",
        };
        if self.shared {
            tracing::info!(
                "a client asked for log level {level}; the server's stays as --log-level set it"
            );
            return Ok(());
        }
        crate::logging::set_level(level);
        tracing::info!("log level set to {level}");
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let pool = self.state.pool().map_err(errors::unavailable)?;
        let resources = tokio::task::block_in_place(|| {
            on_pool(&pool.light, self.time_limit, |conn| {
                Ok(super::resources::list(conn))
            })
        })?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(super::prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        super::prompts::exists(&request.name)?;
        let pool = self.state.pool().map_err(errors::unavailable)?;
        let arguments = request.arguments.unwrap_or_default();
        let prompt = tokio::task::block_in_place(|| {
            on_pool(&pool.light, self.time_limit, |conn| {
                Ok(super::prompts::render(conn, &request.name, &arguments))
            })
        })??;
        Ok(prompt.into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            super::resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // As tool arguments: no file, symbol or domain name holds a NUL.
        if request.uri.contains('\0') {
            return Err(errors::invalid_params(
                "uri: must not contain a NUL character",
            ));
        }
        let pool = self.state.pool().map_err(errors::unavailable)?;
        let contents = tokio::task::block_in_place(|| {
            on_pool(&pool.light, self.time_limit, |conn| {
                Ok(super::resources::read(conn, &request.uri))
            })
        })??;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
