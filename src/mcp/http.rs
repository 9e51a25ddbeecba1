//! `acpdb serve --http ADDR`: the same server over MCP Streamable HTTP, at `/mcp`, for many
//! clients at once; `GET /healthz` tells load balancers whether the index can answer.
//!
//! rmcp's `StreamableHttpService` speaks the protocol (sessions with `Mcp-Session-Id`, or
//! stateless JSON answers with `--stateless`), checks the `Host` and `Origin` headers against
//! DNS rebinding and answers an oversized body with 413. In front of it, a guard checks the
//! bearer token, refuses requests beyond the concurrency limit with 503 and ends those that run
//! past the time limit. SIGTERM or SIGINT stops accepting connections, lets the calls in flight
//! finish (up to the drain time), then closes the sessions.
//!
//! Invariants: a non-loopback address is never bound without a token; the token is compared in
//! constant time and never logged; every POST holds one slot of the concurrency limit until its
//! answer has been sent.

use std::future::{Future as _, IntoFuture as _};
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

use super::answer_cache::{AnswerCache, CacheStats};
use super::server::AcpServer;
use super::state::{IndexState, UnavailableReason};

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
        let mut origins: Vec<String> =
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .into_iter()
                .map(String::from)
                .collect();
        origins.extend(self.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins)
            .enforce_origin_validation()
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
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    request_timeout: Duration,
}

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

/// Checks the token, takes a slot of the concurrency limit and bounds the request's time.
///
/// Calls then wait for a read connection inside the server without holding a thread, light
/// ones never behind heavy ones (`server::Gates`); a request whose body is still arriving
/// holds no connection, so a slow client cannot hold up the others.
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
    let Ok(slot) = guard.slots.clone().try_acquire_owned() else {
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: {} requests are being answered, the server's limit \
                 (acpdb serve --max-concurrent); retry shortly\n",
                guard.max_concurrent
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let deadline = Instant::now() + guard.request_timeout;
    let timed_out = || {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the request ran past the server's time limit of {} s \
                 (acpdb serve --request-timeout)\n",
                guard.request_timeout.as_secs_f64()
            ),
        )
    };
    match tokio::time::timeout_at(deadline.into(), next.run(request)).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let body = Limited {
                inner: body,
                deadline: Box::pin(tokio::time::sleep_until(deadline.into())),
                _held: slot,
            };
            Response::from_parts(parts, Body::new(body))
        }
        Err(_) => {
            tracing::warn!(
                "a request ran past the time limit of {} s",
                guard.request_timeout.as_secs_f64()
            );
            timed_out()
        }
    }
}

/// An answer's body holding its request's slot until sent, cut off at the request's
/// deadline (a streamed answer that never ends would otherwise hold them for ever).
struct Limited {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _held: OwnedSemaphorePermit,
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
    /// The answer cache's size and counters.
    answer_cache: CacheStats,
}

/// What `GET /healthz` reads.
#[derive(Clone)]
struct HealthSources {
    state: Arc<IndexState>,
    answers: Arc<AnswerCache>,
}

fn health(sources: &HealthSources) -> (StatusCode, Health) {
    let state = &sources.state;
    let answer_cache = sources.answers.stats();
    let read_only = state.read_only();
    match state.pool() {
        Ok(_) => {
            let note = state.stale_note();
            let index = if note.is_some() { "stale" } else { "ready" };
            (
                StatusCode::OK,
                Health {
                    status: "ok",
                    index,
                    read_only,
                    message: note,
                    progress: None,
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
                answer_cache,
            },
        ),
    }
}

async fn healthz(State(sources): State<HealthSources>) -> Response {
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
    let health_sources = HealthSources {
        state: state.clone(),
        answers: server.answer_cache(),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        options.rmcp_config(cancel.child_token()),
    );
    let guard_state = Arc::new(Guard {
        token: options.token.clone(),
        slots: Arc::new(Semaphore::new(options.max_concurrent)),
        max_concurrent: options.max_concurrent,
        request_timeout: options.request_timeout,
    });
    let slots = guard_state.slots.clone();
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
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let signal = shutdown_signal().await?;
    tracing::info!("{signal}: no longer accepting connections; finishing the calls in flight");
    let _ = stop.send(());
    let drained = drain(&slots, options.max_concurrent, options.drain_timeout).await;
    if !drained {
        tracing::warn!(
            "calls still running after {} s; ending them",
            options.drain_timeout.as_secs_f64()
        );
    }
    cancel.cancel();
    match tokio::time::timeout(Duration::from_secs(2), running).await {
        Ok(result) => result??,
        Err(_) => tracing::warn!("connections still open after the drain; closing them"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// Waits until no request holds a slot, or `limit` passes; whether all finished.
async fn drain(slots: &Semaphore, total: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while slots.available_permits() < total {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
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
