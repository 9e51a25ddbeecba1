//! `acpdb serve --http ADDR`: the same server over MCP Streamable HTTP, at `/mcp`, for many
//! clients at once; `GET /healthz` tells load balancers whether the index can answer.
//!
//! rmcp's `StreamableHttpService` speaks the protocol (sessions with `Mcp-Session-Id`, or
//! stateless JSON answers with `--stateless`) and checks the `Host` and `Origin` headers against
//! DNS rebinding. In front of it, a guard checks the bearer token, reads the body whole (413
//! past `--max-body`, 408 when it has not arrived within the time limit, 503 when four bodies
//! per slot are being received already), answers a body that is
//! not a valid JSON-RPC message with 400 and a JSON-RPC error (`messages::check`, as over
//! stdio), refuses requests beyond the concurrency limit with 503 and ends those that run past
//! the time limit. A connection whose request headers have not arrived within the time limit
//! is closed, and so is one left idle that long, or whose client has read nothing of an answer
//! for that long. SIGTERM or SIGINT stops accepting
//! connections, lets the calls in flight finish (up to the drain time), then closes the
//! sessions.
//!
//! Invariants: a non-loopback address is never bound without a token; the token is compared in
//! constant time and never logged; every POST holds one slot of the concurrency limit from the
//! moment its body is in until its answer has been sent, so a slow client holds none; no
//! connection outlives the time limit without a request in progress.

use std::future::Future as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body::{Frame, SizeHint};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;

use super::answer_cache::{AnswerCache, CacheStats};
use super::errors::{INVALID_REQUEST, PARSE_ERROR};
use super::messages::{self, Rejection};
use super::server::AcpServer;
use super::state::{IndexState, UnavailableReason};
use crate::query::staleness::{source_state_swept, SourceState};

/// What `acpdb serve --http` was told (checked by [`HttpOptions::check`]); its `Debug` form
/// hides the token.
#[derive(Clone)]
pub struct HttpOptions {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// Answer each request on its own, without sessions (for load-balanced fleets).
    pub stateless: bool,
    /// The bearer token every `/mcp` request must carry, if any.
    pub token: Option<String>,
    /// Browser origins allowed besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// `Host` names allowed besides the loopback ones.
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests accepted at once; more are refused with 503.
    pub max_concurrent: usize,
    /// Longest a request may take from arrival to the end of its answer.
    pub request_timeout: Duration,
    /// Longest the calls in flight may take to finish after SIGTERM.
    pub drain_timeout: Duration,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("stateless", &self.stateless)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_concurrent", &self.max_concurrent)
            .field("request_timeout", &self.request_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .finish()
    }
}

/// The browser origins always allowed: pages served from this machine, over HTTP or HTTPS.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

impl HttpOptions {
    /// Refuses a non-loopback address without a token.
    pub fn check(&self) -> Result<()> {
        if !self.addr.ip().is_loopback() && self.token.is_none() {
            bail!(
                "refusing to serve on {} without a token: anyone who can reach it could read the \
                 index. Give --token-file FILE (clients send `Authorization: Bearer <token>`), \
                 or bind a loopback address such as 127.0.0.1:{}",
                self.addr,
                self.addr.port()
            );
        }
        if self.max_concurrent == 0 {
            bail!("--max-concurrent must be at least 1");
        }
        Ok(())
    }

    fn rmcp_config(&self, cancel: CancellationToken) -> StreamableHttpServerConfig {
        let mut origins: Vec<String> = LOOPBACK_ORIGINS.into_iter().map(String::from).collect();
        origins.extend(self.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            // The guard reads every body under this limit first; rmcp's check stays as a backstop.
            .with_max_request_body_bytes(self.max_body_bytes)
            .with_cancellation_token(cancel);
        let config = if self.addr.ip().is_loopback() {
            let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
                .into_iter()
                .map(String::from)
                .collect();
            hosts.push(self.addr.ip().to_string());
            hosts.extend(self.allowed_hosts.iter().cloned());
            config.with_allowed_hosts(hosts)
        } else if self.allowed_hosts.is_empty() {
            // Behind a load balancer the Host is the balancer's name; the token guards instead.
            config.disable_allowed_hosts()
        } else {
            config.with_allowed_hosts(self.allowed_hosts.clone())
        };
        if self.stateless {
            config
                .with_legacy_session_mode(false)
                .with_json_response(true)
        } else {
            config
        }
    }
}

/// The most bytes a token file may have (a token is a few dozen).
const TOKEN_FILE_LIMIT: u64 = 64 << 10;

/// Reads a token file: its content without surrounding whitespace, which must not be empty.
pub fn read_token(path: &std::path::Path) -> Result<String> {
    let file = crate::regular_file::open(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let bytes = crate::regular_file::read_limited(file, TOKEN_FILE_LIMIT)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("the token file {} is not UTF-8", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "the token in {} must be printable ASCII without spaces",
            path.display()
        );
    }
    Ok(token.to_string())
}

/// The checks in front of the MCP service.
struct Guard {
    token: Option<String>,
    /// Requests between their arrival and the end of their answer (what a drain waits for).
    in_progress: TaskTracker,
    /// Bodies being received at once ([`RECEIVING_PER_SLOT`] per slot), which bounds the
    /// memory they take.
    receiving: Arc<Semaphore>,
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    max_body_bytes: usize,
    request_timeout: Duration,
}

/// Bodies that may be received at once per slot of `--max-concurrent`: enough that slow
/// uploads leave room for others, few enough that their memory stays bounded (at most this
/// many times `--max-concurrent` × `--max-body`).
const RECEIVING_PER_SLOT: usize = 4;

/// Whether `a` and `b` are equal, in a time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `headers` carry `Authorization: Bearer <token>`.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let scheme = b"bearer ";
    value.len() > scheme.len()
        && value[..scheme.len()].eq_ignore_ascii_case(scheme)
        && constant_time_eq(value[scheme.len()..].trim_ascii(), token.as_bytes())
}

fn plain(status: StatusCode, text: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

/// Checks the token, reads the body, takes a slot of the concurrency limit and bounds the
/// request's time.
///
/// Calls then wait for a read connection inside the server without holding a thread, light
/// ones never behind heavy ones (`server::Gates`); a request whose body is still arriving
/// holds neither a slot nor a connection, so a slow client cannot hold up the others.
///
/// A `GET` opens a session's stream of server messages, which lives as long as the session: it
/// takes no slot and has no time limit (rmcp ends it when the session ends).
async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if let Some(token) = &guard.token {
        if !authorized(request.headers(), token) {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send the server's token as `Authorization: Bearer <token>`\n".into(),
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"acpdb\""),
            );
            return response;
        }
    }
    if request.method() == Method::GET {
        return next.run(request).await;
    }
    let counted = guard.in_progress.token();
    let deadline = Instant::now() + guard.request_timeout;
    let limit = guard.request_timeout.as_secs_f64();
    let busy = |what: String| {
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Service Unavailable: {what}; retry shortly\n"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    };
    let Ok(receiving) = guard.receiving.clone().try_acquire_owned() else {
        return busy(format!(
            "{} request bodies are being received, the server's limit ({RECEIVING_PER_SLOT} \
             per slot of acpdb serve --max-concurrent)",
            receiving_limit(guard.max_concurrent)
        ));
    };
    let request = match tokio::time::timeout_at(
        deadline.into(),
        receive(request, guard.max_body_bytes),
    )
    .await
    {
        Ok(Ok(request)) => request,
        Ok(Err(refusal)) => return refusal,
        Err(_) => {
            return plain(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "Request Timeout: the request's body did not arrive within the server's \
                     time limit of {limit} s (acpdb serve --request-timeout)\n"
                ),
            )
        }
    };
    drop(receiving);
    let Ok(slot) = guard.slots.clone().try_acquire_owned() else {
        return busy(format!(
            "{} requests are being answered, the server's limit (acpdb serve --max-concurrent)",
            guard.max_concurrent
        ));
    };
    match tokio::time::timeout_at(deadline.into(), next.run(request)).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let body = Limited {
                inner: body,
                deadline: Box::pin(tokio::time::sleep_until(deadline.into())),
                _held: (slot, counted),
            };
            Response::from_parts(parts, Body::new(body))
        }
        Err(_) => {
            tracing::warn!("a request ran past the time limit of {limit} s");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Service Unavailable: the request ran past the server's time limit of \
                     {limit} s (acpdb serve --request-timeout); it may still be carried out \
                     (an acp_debug or acp_hack write among them): look (their status or list \
                     action) before sending it again\n"
                ),
            )
        }
    }
}

/// Bodies that may be received at once under a limit of `max_concurrent` requests answered.
fn receiving_limit(max_concurrent: usize) -> usize {
    max_concurrent.saturating_mul(RECEIVING_PER_SLOT)
}

/// `request` with its body read whole (at most `limit` bytes) and, for a JSON `POST`, checked
/// to be one JSON-RPC message ([`messages::check`]); or the answer that refuses it.
async fn receive(request: Request, limit: usize) -> Result<Request, Response> {
    let too_large = || {
        plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: request body exceeds {limit} bytes (acpdb serve --max-body)\n"
            ),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let (parts, mut body) = request.into_parts();
    let mut bytes = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            plain(
                StatusCode::BAD_REQUEST,
                format!("Bad Request: the request's body could not be read: {e}\n"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if data.len() > limit - bytes.len() {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    if parts.method == Method::POST && is_json(&parts.headers) {
        // rmcp refuses a byte order mark, which the checks skip.
        let mark = bytes.len() - messages::without_bom(&bytes).len();
        bytes.drain(..mark);
        let rejection = match messages::check(&bytes) {
            Ok(Some(_)) => None,
            Ok(None) => Some(Rejection::new(
                serde_json::Value::Null,
                PARSE_ERROR,
                "Parse error: the request's body is empty",
            )),
            Err(Some(rejection)) => Some(rejection),
            Err(None) => Some(Rejection::new(
                serde_json::Value::Null,
                INVALID_REQUEST,
                "Invalid request: not a valid JSON-RPC 2.0 notification or response",
            )),
        };
        if let Some(rejection) = rejection {
            return Err((
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                rejection.answer().to_string(),
            )
                .into_response());
        }
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Whether `headers` declare a JSON body (other bodies are rmcp's to refuse, with 415).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// An answer's body holding its request's slot (and its count in progress) until sent, cut off
/// at the request's deadline (a streamed answer that never ends would otherwise hold them for
/// ever).
struct Limited {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _held: (OwnedSemaphorePermit, TaskTrackerToken),
}

impl HttpBody for Limited {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            tracing::warn!("an answer's stream ran past the request time limit and was ended");
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer of `GET /healthz`.
#[derive(Debug, Serialize)]
struct Health {
    /// `ok` when tool calls can be answered, else `unavailable`.
    status: &'static str,
    /// `ready`, `stale` (answering from the previous import), `importing` (first import, with
    /// progress), `no_cache` or `import_failed`.
    index: &'static str,
    /// Whether the server is read-only.
    read_only: bool,
    /// Why the index is stale or unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// The first import's progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<serde_json::Value>,
    /// Where the served index stands against the project's git `HEAD` and its files on disk,
    /// as the watcher's sweep found them (no file is looked at for this answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<SourceState>,
    /// The answer cache's size and counters.
    answer_cache: CacheStats,
}

/// What `GET /healthz` reads.
#[derive(Clone)]
struct HealthSources {
    state: Arc<IndexState>,
    answers: Arc<AnswerCache>,
    /// The `Host` names `/mcp` answers to (rmcp's list; empty: any).
    hosts: Arc<Vec<String>>,
}

/// Whether the request names, in its `Host` header, one of `allowed` (any when empty): a host,
/// with its port when the entry names one, as rmcp judges requests to `/mcp`. A page that
/// reaches a loopback server by DNS rebinding names its own host, and is refused.
fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    use axum::http::uri::Authority;
    if allowed.is_empty() {
        return true;
    }
    let named = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok());
    let Some(named) = named.and_then(|host| Authority::try_from(host).ok()) else {
        return false;
    };
    let host = |name: &str| name.trim_matches(['[', ']']).to_ascii_lowercase();
    allowed.iter().any(|entry| {
        let (entry_host, entry_port) = match Authority::try_from(entry.trim()) {
            Ok(authority) => (host(authority.host()), authority.port_u16()),
            Err(_) => (host(entry.trim()), None),
        };
        entry_host == host(named.host()) && entry_port.is_none_or(|p| named.port_u16() == Some(p))
    })
}

fn health(sources: &HealthSources) -> (StatusCode, Health) {
    let state = &sources.state;
    let answer_cache = sources.answers.stats();
    let read_only = state.read_only();
    match state.pool() {
        Ok(pool) => {
            let note = state.stale_note();
            let index = if note.is_some() { "stale" } else { "ready" };
            let source = pool.light.try_get().and_then(|conn| {
                crate::db::in_snapshot(&conn, |conn| source_state_swept(conn, 0)).ok()
            });
            (
                StatusCode::OK,
                Health {
                    status: "ok",
                    index,
                    read_only,
                    message: note,
                    progress: None,
                    source,
                    answer_cache,
                },
            )
        }
        Err(unavailable) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Health {
                status: "unavailable",
                index: match unavailable.reason {
                    UnavailableReason::Building => "importing",
                    UnavailableReason::NoCache => "no_cache",
                    UnavailableReason::ImportFailed => "import_failed",
                },
                read_only,
                message: Some(unavailable.message),
                progress: unavailable.data,
                source: None,
                answer_cache,
            },
        ),
    }
}

async fn healthz(State(sources): State<HealthSources>, headers: HeaderMap) -> Response {
    if !host_allowed(&headers, &sources.hosts) {
        return (
            StatusCode::FORBIDDEN,
            "Forbidden: the Host is not one this server answers to\n",
        )
            .into_response();
    }
    let (status, health) = health(&sources);
    let text = serde_json::to_string(&health).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        text + "\n",
    )
        .into_response()
}

/// Serves `server` over HTTP until SIGTERM or SIGINT, then drains and returns.
pub(super) async fn serve(
    state: Arc<IndexState>,
    server: AcpServer,
    options: HttpOptions,
) -> Result<()> {
    options.check()?;
    let cancel = CancellationToken::new();
    let config = options.rmcp_config(cancel.child_token());
    let health_sources = HealthSources {
        state: state.clone(),
        answers: server.answer_cache(),
        hosts: Arc::new(config.allowed_hosts.clone()),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard_state = Arc::new(Guard {
        token: options.token.clone(),
        in_progress: TaskTracker::new(),
        receiving: Arc::new(Semaphore::new(receiving_limit(options.max_concurrent))),
        slots: Arc::new(Semaphore::new(options.max_concurrent)),
        max_concurrent: options.max_concurrent,
        max_body_bytes: options.max_body_bytes,
        request_timeout: options.request_timeout,
    });
    let in_progress = guard_state.in_progress.clone();
    let app = Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(guard_state, guard))
        .route(
            "/healthz",
            axum::routing::get(healthz).with_state(health_sources),
        );
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    tracing::info!(
        "serving {} over MCP at http://{local}/mcp ({}{}{})",
        state.project().root.display(),
        if options.stateless {
            "stateless"
        } else {
            "sessions"
        },
        if options.token.is_some() {
            ", bearer token required"
        } else {
            ""
        },
        if state.read_only() { ", read-only" } else { "" },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let running = tokio::spawn(accept(listener, app, options.request_timeout, stopped));
    let signal = shutdown_signal().await?;
    // Said once it is true: the listening socket is closed when `accept` answers.
    let (closed, listener_closed) = tokio::sync::oneshot::channel();
    let _ = stop.send(closed);
    let _ = listener_closed.await;
    tracing::info!("{signal}: no longer accepting connections; finishing the calls in flight");
    let drained = drain(&in_progress, options.drain_timeout).await;
    if !drained {
        tracing::warn!(
            "calls still running after {} s; ending them",
            options.drain_timeout.as_secs_f64()
        );
    }
    cancel.cancel();
    match tokio::time::timeout(Duration::from_secs(2), running).await {
        Ok(result) => result?,
        Err(_) => tracing::warn!("connections still open after the drain; closing them"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// Serves `app` on every connection `listener` accepts until `stopped` fires; then closes the
/// listening socket (and says so on the sender `stopped` carried), lets the requests in flight
/// finish, closes each connection, and returns once all are closed. A
/// connection whose next request's headers have not arrived within `header_timeout` is closed
/// (an idle one too), so a client that opens connections and sends nothing holds none for
/// long. (`axum::serve` sets no such limit.)
async fn accept(
    listener: tokio::net::TcpListener,
    app: Router,
    header_timeout: Duration,
    stopped: tokio::sync::oneshot::Receiver<tokio::sync::oneshot::Sender<()>>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let (closing, closing_seen) = tokio::sync::watch::channel(());
    let mut stopped = std::pin::pin!(stopped);
    let listener_closed = loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("cannot accept a connection: {e}");
                    // Out of file descriptors or memory: wait for some to be freed. Any other
                    // error ends only the connection it was about.
                    let exhausted = [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM];
                    if e.raw_os_error().is_some_and(|code| exhausted.contains(&code)) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            closed = &mut stopped => break closed.ok(),
        };
        let connection = http.serve_connection(
            StallLimited::new(hyper_util::rt::TokioIo::new(stream), header_timeout),
            hyper_util::service::TowerToHyperService::new(app.clone()),
        );
        let mut closing = closing_seen.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!("a connection ended: {e}");
                    }
                    return;
                }
                _ = closing.changed() => {}
            }
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    };
    drop(listener);
    if let Some(closed) = listener_closed {
        let _ = closed.send(());
    }
    drop(closing_seen);
    let _ = closing.send(());
    closing.closed().await;
}

/// A connection whose writes fail once one has waited `limit` for the client to read: an
/// answer a client never reads would otherwise keep its connection and the answer's memory for
/// ever, and a streamed one its slot and the drain too, since hyper asks an answer's body for
/// more only when it can write.
struct StallLimited<T> {
    io: T,
    limit: Duration,
    /// Running while a write waits.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> StallLimited<T> {
    fn new(io: T, limit: Duration) -> StallLimited<T> {
        StallLimited {
            io,
            limit,
            stalled: None,
        }
    }

    /// `polled`, or an error once writes have waited `limit`.
    fn unless_stalled<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<R>>,
    ) -> Poll<std::io::Result<R>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read nothing of an answer within the time limit",
            )));
        }
        Poll::Pending
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for StallLimited<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for StallLimited<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.unless_stalled(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.unless_stalled(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.unless_stalled(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.unless_stalled(cx, polled)
    }
}

/// Waits until no request is in progress (its body arriving, its call running or its answer
/// being sent), or `limit` passes; whether all finished.
async fn drain(in_progress: &TaskTracker, limit: Duration) -> bool {
    in_progress.close();
    tokio::time::timeout(limit, in_progress.wait())
        .await
        .is_ok()
}

/// Waits for SIGTERM or SIGINT (Ctrl-C) and names it.
async fn shutdown_signal() -> Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        })
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        Ok("Ctrl-C")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_token() {
        let options = HttpOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            stateless: false,
            token: Some("s3cret".into()),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: 1,
            max_concurrent: 1,
            request_timeout: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(1),
        };
        let shown = format!("{options:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("<hidden>"),
            "{shown}"
        );
    }

    #[test]
    fn bearer_token_must_match_exactly() {
        let mut headers = HeaderMap::new();
        assert!(!authorized(&headers, "secret"));
        for (value, ok) in [
            ("Bearer secret", true),
            ("bearer secret", true),
            ("Bearer secreT", false),
            ("Bearer secret2", false),
            ("Bearer secre", false),
            ("Basic secret", false),
            ("Bearer ", false),
        ] {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(authorized(&headers, "secret"), ok, "{value}");
        }
    }
}
