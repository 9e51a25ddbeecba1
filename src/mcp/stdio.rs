//! The protocol's stdin and stdout: a line-delimited JSON-RPC transport that answers every
//! request exactly once.
//!
//! When stdin and stdout are pipes (as MCP clients spawn servers), both are read and written
//! in non-blocking mode through the runtime's reactor; tokio's own `stdin()`/`stdout()` hand
//! every read and write to a blocking-pool thread, two thread switches per request. A terminal
//! or a file falls back to those.
//!
//! Each line is checked before rmcp sees it (`messages::check`, shared with HTTP), and a line
//! rmcp would drop without a word (or answer without its id) is answered here instead. On top
//! of those checks, a line longer than [`MAX_LINE`] is answered with `-32700`, and a request
//! whose id is still being answered with `-32600`.
//!
//! Notifications never get an answer, as JSON-RPC requires. Notifications and responses that
//! arrive before the first `initialize` request are dropped (logged), since rmcp would end the
//! session on them; a UTF-8 byte order mark opening a line is skipped.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::Value;

use super::errors::{INVALID_REQUEST, PARSE_ERROR};
use super::messages::{check, without_bom, written_id, Rejection};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Longest line accepted, in bytes; longer ones are answered with a parse error and skipped.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

type Reader = BufReader<Box<dyn AsyncRead + Send + Unpin>>;
type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// Ids of cancelled requests kept refused (see `StdioTransport::cancelled`): clients number
/// their requests upwards, so only a client reusing ids meets the bound.
const RETIRED_IDS: usize = 1024;

/// The stdio transport of `acpdb serve`.
pub(crate) struct StdioTransport {
    reader: Reader,
    /// The line being collected, kept across cancelled reads.
    line: Vec<u8>,
    /// The current line passed [`MAX_LINE`]: its remaining bytes are skipped. With the id its
    /// first bytes hold, if they do.
    oversized: Option<Option<String>>,
    writer: Writer,
    /// Ids of the requests handed to rmcp and not answered yet, the cancelled ones included.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    /// Ids of requests cancelled while in flight, oldest first. rmcp writes no answer for them,
    /// so nothing tells when their calls end, and a request reusing one before would be sent the
    /// old call's answer (rmcp routes answers by id): they stay refused until [`RETIRED_IDS`]
    /// later cancellations.
    cancelled: VecDeque<RequestId>,
    /// Whether an `initialize` request has been handed to rmcp.
    initialize_seen: bool,
}

impl StdioTransport {
    /// The transport over this process's stdin and stdout.
    pub(crate) fn new() -> StdioTransport {
        StdioTransport::over(stdin(), stdout())
    }

    /// The transport over any reader and writer.
    pub(crate) fn over(
        reader: Box<dyn AsyncRead + Send + Unpin>,
        writer: Box<dyn AsyncWrite + Send + Unpin>,
    ) -> StdioTransport {
        StdioTransport {
            reader: BufReader::new(reader),
            line: Vec::new(),
            oversized: None,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            in_flight: Arc::default(),
            cancelled: VecDeque::new(),
            initialize_seen: false,
        }
    }

    /// The next whole line (without its newline), `Err(id)` for a line over [`MAX_LINE`] (with
    /// the id its first bytes hold, as written), `None` at the end of input. Cancel-safe: bytes
    /// are taken from the buffer only after they are kept in `self.line`.
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, Option<String>>> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(bytes) => bytes,
                Err(err) => {
                    tracing::error!("reading stdin: {err}");
                    return None;
                }
            };
            if available.is_empty() {
                if let Some(id) = self.oversized.take() {
                    return Some(Err(id));
                }
                if self.line.is_empty() {
                    return None;
                }
                return Some(Ok(std::mem::take(&mut self.line)));
            }
            let (taken, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (end + 1, Some(end)),
                None => (available.len(), None),
            };
            let content = &available[..complete.unwrap_or(taken)];
            if self.oversized.is_none() {
                if self.line.len() + content.len() > MAX_LINE {
                    let mut prefix = std::mem::take(&mut self.line);
                    prefix.extend_from_slice(&content[..MAX_LINE - prefix.len()]);
                    self.oversized = Some(written_id(without_bom(&prefix)));
                } else {
                    self.line.extend_from_slice(content);
                }
            }
            self.reader.consume(taken);
            if complete.is_some() {
                if let Some(id) = self.oversized.take() {
                    return Some(Err(id));
                }
                return Some(Ok(std::mem::take(&mut self.line)));
            }
        }
    }

    /// Writes an error answer in the background (so a cancelled `receive` cannot cut it).
    fn answer_error(&self, rejection: Rejection) {
        let writer = self.writer.clone();
        let mut bytes = rejection.answer().into_bytes();
        bytes.push(b'\n');
        tokio::spawn(async move {
            if let Err(err) = write_bytes(&writer, &bytes).await {
                tracing::debug!("cannot write an error answer: {err}");
            }
        });
    }
}

impl Transport<RoleServer> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        if let Some(id) = answered {
            // Before writing: the client may reuse the id as soon as it reads the answer.
            lock(&self.in_flight).remove(&id);
        }
        async move { write_line(&writer, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.next_line().await? {
                Ok(line) => line,
                Err(id) => {
                    tracing::warn!("a line on stdin is longer than {MAX_LINE} bytes");
                    self.answer_error(Rejection::with_written_id(
                        id,
                        PARSE_ERROR,
                        format!("Parse error: the message is longer than {MAX_LINE} bytes"),
                    ));
                    continue;
                }
            };
            match check(&line) {
                Ok(None) => continue,
                Ok(Some(message)) => {
                    if let Some(message) = self.admit(message) {
                        return Some(message);
                    }
                }
                Err(Some(rejection)) => self.answer_error(rejection),
                Err(None) => {}
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let writer = self.writer.clone();
        async move { writer.lock().await.flush().await }
    }
}

impl StdioTransport {
    /// Registers a request's id as in flight (refusing an id already in flight, or cancelled
    /// while it was: see `cancelled`).
    fn admit(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        if !self.initialize_seen {
            match &message {
                JsonRpcMessage::Request(request) => {
                    self.initialize_seen =
                        matches!(request.request, ClientRequest::InitializeRequest(_));
                }
                // rmcp ends a session whose first message is anything but a request.
                _ => {
                    tracing::warn!(
                        "a notification or response arrived before `initialize`; ignored"
                    );
                    return None;
                }
            }
        }
        match &message {
            JsonRpcMessage::Request(request)
                if !lock(&self.in_flight).insert(request.id.clone()) =>
            {
                let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                self.answer_error(Rejection::new(
                    id.clone(),
                    INVALID_REQUEST,
                    format!(
                        "Invalid request: a request with id {id} is still being answered (or \
                         was cancelled while it was); give every request its own id"
                    ),
                ));
                return None;
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    let in_flight = cancelled.params.request_id.as_ref().filter(|id| {
                        lock(&self.in_flight).contains(id) && !self.cancelled.contains(id)
                    });
                    if let Some(id) = in_flight {
                        self.cancelled.push_back(id.clone());
                        if self.cancelled.len() > RETIRED_IDS {
                            if let Some(oldest) = self.cancelled.pop_front() {
                                lock(&self.in_flight).remove(&oldest);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Some(message)
    }
}

/// Writes one message and a newline, then flushes.
async fn write_line(writer: &Writer, message: &impl serde::Serialize) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    write_bytes(writer, &bytes).await
}

/// Writes a whole line (its newline included) at once.
async fn write_bytes(writer: &Writer, bytes: &[u8]) -> io::Result<()> {
    let mut writer = writer.lock().await;
    writer.write_all(bytes).await?;
    writer.flush().await
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(unix)]
fn stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    }
}

#[cfg(unix)]
fn stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    }
}

#[cfg(not(unix))]
fn stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    Box::new(tokio::io::stdin())
}

#[cfg(not(unix))]
fn stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    Box::new(tokio::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_request_with_an_id_in_flight_is_refused() {
        let ping = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;
        let input = format!("{ping}\n{ping}\n");
        let (writer, mut output) = tokio::io::duplex(4096);
        let mut transport =
            StdioTransport::over(Box::new(std::io::Cursor::new(input)), Box::new(writer));
        assert!(matches!(
            transport.receive().await,
            Some(JsonRpcMessage::Request(_))
        ));
        assert!(transport.receive().await.is_none());
        let mut answer = String::new();
        let mut reader = BufReader::new(&mut output);
        reader.read_line(&mut answer).await.unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], "p", "{answer}");
        assert_eq!(answer["error"]["code"], INVALID_REQUEST, "{answer}");
    }

    /// A request cancelled while in flight gets no answer, yet its call may still run: its id
    /// stays refused, or the new request would be sent the old call's answer. An answered one
    /// is free again.
    #[tokio::test]
    async fn the_id_of_a_request_cancelled_in_flight_stays_refused() {
        let ping = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#);
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"p"}}"#;
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let (p, q) = (ping("p"), ping("q"));
        let input = format!("{initialize}\n{p}\n{cancel}\n{p}\n{q}\n");
        let (writer, mut output) = tokio::io::duplex(4096);
        let mut transport =
            StdioTransport::over(Box::new(std::io::Cursor::new(input)), Box::new(writer));
        let mut handed = Vec::new();
        while let Some(message) = transport.receive().await {
            handed.push(serde_json::to_value(&message).unwrap());
        }
        let ids: Vec<Value> = handed.iter().map(|m| m["id"].clone()).collect();
        assert_eq!(Value::from(ids), serde_json::json!([0, "p", null, "q"]));
        let mut answer = String::new();
        BufReader::new(&mut output)
            .read_line(&mut answer)
            .await
            .unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], "p", "{answer}");
        assert_eq!(answer["error"]["code"], INVALID_REQUEST, "{answer}");
        let pong = JsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            RequestId::String("q".into()),
        );
        transport.send(pong).await.unwrap();
        assert!(!lock(&transport.in_flight).contains(&RequestId::String("q".into())));
    }
}
