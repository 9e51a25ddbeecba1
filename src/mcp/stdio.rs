//! The protocol's stdin and stdout: a line-delimited JSON-RPC transport that answers every
//! request exactly once.
//!
//! When stdin and stdout are pipes (as MCP clients spawn servers), both are read and written
//! in non-blocking mode through the runtime's reactor; tokio's own `stdin()`/`stdout()` hand
//! every read and write to a blocking-pool thread, two thread switches per request. A terminal
//! or a file falls back to those.
//!
//! Each line is checked before rmcp sees it, and a line rmcp would drop without a word (or
//! answer without its id) is answered here instead, with the request's id whenever it can be
//! read:
//!
//! * not JSON, nested deeper than JSON's parser allows, or longer than [`MAX_LINE`]: `-32700`;
//! * not a JSON-RPC 2.0 message (a batch, a non-object, `jsonrpc` other than `"2.0"`, an id
//!   that is neither a string nor an integer), or a request whose id is still being answered:
//!   `-32600`;
//! * `params` (or a `tools/call`'s `arguments`) that is not an object, or params rmcp cannot
//!   decode: `-32602`.
//!
//! Notifications never get an answer, as JSON-RPC requires. Notifications and responses that
//! arrive before the first `initialize` request are dropped (logged), since rmcp would end the
//! session on them; a UTF-8 byte order mark opening a line is skipped.

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, ClientNotification, ClientRequest, GetPromptRequestParams,
    InitializeRequestParams, JsonRpcMessage, ReadResourceRequestParams, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::{json, Value};

use super::errors::{INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Longest line accepted, in bytes; longer ones are answered with a parse error and skipped.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

type Reader = BufReader<Box<dyn AsyncRead + Send + Unpin>>;
type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// The stdio transport of `acpdb serve`.
pub(crate) struct StdioTransport {
    reader: Reader,
    /// The line being collected, kept across cancelled reads.
    line: Vec<u8>,
    /// The current line passed [`MAX_LINE`]: its remaining bytes are skipped.
    oversized: bool,
    writer: Writer,
    /// Ids of the requests handed to rmcp and not answered yet.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
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
            oversized: false,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            in_flight: Arc::default(),
            initialize_seen: false,
        }
    }

    /// The next whole line (without its newline), `Err(())` for a line over [`MAX_LINE`],
    /// `None` at the end of input. Cancel-safe: bytes are taken from the buffer only after
    /// they are kept in `self.line`.
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, ()>> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(bytes) => bytes,
                Err(err) => {
                    tracing::error!("reading stdin: {err}");
                    return None;
                }
            };
            if available.is_empty() {
                if self.oversized {
                    self.oversized = false;
                    return Some(Err(()));
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
            if !self.oversized {
                if self.line.len() + content.len() > MAX_LINE {
                    self.oversized = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(content);
                }
            }
            self.reader.consume(taken);
            if complete.is_some() {
                if std::mem::take(&mut self.oversized) {
                    return Some(Err(()));
                }
                return Some(Ok(std::mem::take(&mut self.line)));
            }
        }
    }

    /// Writes an error answer in the background (so a cancelled `receive` cannot cut it).
    fn answer_error(&self, rejection: Rejection) {
        let writer = self.writer.clone();
        let message = rejection.answer();
        tokio::spawn(async move {
            if let Err(err) = write_line(&writer, &message).await {
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
                Err(()) => {
                    tracing::warn!("a line on stdin is longer than {MAX_LINE} bytes");
                    self.answer_error(Rejection::new(
                        Value::Null,
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
    /// Registers a request's id as in flight (refusing an id already in flight) and forgets
    /// the ids of cancelled requests.
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
                        "Invalid request: a request with id {id} is still being answered; \
                         give every request in flight its own id"
                    ),
                ));
                return None;
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    if let Some(id) = &cancelled.params.request_id {
                        lock(&self.in_flight).remove(id);
                    }
                }
            }
            _ => {}
        }
        Some(message)
    }
}

/// An error answer for a line that does not reach rmcp.
#[derive(Debug, PartialEq)]
struct Rejection {
    id: Value,
    code: i32,
    message: String,
}

impl Rejection {
    /// The JSON-RPC error answer.
    fn answer(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        })
    }

    fn new(id: Value, code: i32, message: impl Into<String>) -> Rejection {
        Rejection {
            id,
            code,
            message: message.into(),
        }
    }
}

/// The error the server answers at once for one line of its input, or `None` when the line
/// goes on to the protocol (or is skipped: blank lines, invalid notifications). For fuzzing
/// and tests of the framing; the stdio transport uses the same check.
pub fn answer_for_line(line: &[u8]) -> Option<Value> {
    match check(line) {
        Err(Some(rejection)) => Some(rejection.answer()),
        Ok(_) | Err(None) => None,
    }
}

/// Checks one line. `Ok(None)`: a blank line, skipped. `Err(Some(_))`: answer this error;
/// `Err(None)`: drop the line silently (an invalid notification or response).
fn check(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Option<Rejection>> {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(text).map_err(|err| {
        tracing::warn!("a line on stdin is not JSON ({} bytes): {err}", text.len());
        Some(Rejection::new(
            readable_id(text),
            PARSE_ERROR,
            format!("Parse error: {err}"),
        ))
    })?;
    let invalid = |id: &Value, message: &str| {
        Some(Rejection::new(
            id.clone(),
            INVALID_REQUEST,
            format!("Invalid request: {message}"),
        ))
    };
    let object = match &value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(invalid(
                &Value::Null,
                "batches are not supported; send one message per line",
            ))
        }
        _ => {
            return Err(invalid(
                &Value::Null,
                "a message must be a JSON-RPC 2.0 object",
            ))
        }
    };
    let id = match object.get("id") {
        None => None,
        Some(id @ Value::String(_)) => Some(id.clone()),
        Some(id @ Value::Number(n)) if n.is_i64() => Some(id.clone()),
        Some(_) => return Err(invalid(&Value::Null, "id must be a string or an integer")),
    };
    let is_request = object.contains_key("method") && id.is_some();
    // Answers go to requests only; an invalid notification or response is dropped.
    let reject = |code: i32, message: String| {
        if is_request {
            Err(Some(Rejection::new(
                id.clone().unwrap_or(Value::Null),
                code,
                message,
            )))
        } else {
            tracing::warn!("ignoring an invalid message on stdin: {message}");
            Err(None)
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return reject(
            INVALID_REQUEST,
            "Invalid request: jsonrpc must be \"2.0\"".into(),
        );
    }
    if let Some(method) = object.get("method") {
        if !method.is_string() {
            return reject(
                INVALID_REQUEST,
                "Invalid request: method must be a string".into(),
            );
        }
        match object.get("params") {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(other) => {
                return reject(
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: params must be an object, got {}",
                        kind(other)
                    ),
                )
            }
        }
        if method == "tools/call" {
            match object.get("params").and_then(|p| p.get("arguments")) {
                None | Some(Value::Null) | Some(Value::Object(_)) => {}
                Some(other) => {
                    return reject(
                        INVALID_PARAMS,
                        format!("arguments: expected an object, got {}", kind(other)),
                    )
                }
            }
        }
    }
    let params = object.get("params").cloned();
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            // rmcp takes a standard method whose params it cannot decode for a custom one,
            // and would answer "method not found".
            ClientRequest::CustomRequest(custom) if is_standard_method(&custom.method) => reject(
                INVALID_PARAMS,
                params_error(&custom.method, params.unwrap_or(Value::Null)),
            ),
            _ => Ok(Some(JsonRpcMessage::Request(request))),
        },
        Ok(message) => Ok(Some(message)),
        Err(err) => reject(INVALID_PARAMS, format!("Invalid params: {err}")),
    }
}

/// The MCP methods a client may call on a server.
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

fn is_standard_method(method: &str) -> bool {
    STANDARD_METHODS.contains(&method)
}

/// Why `params` do not fit `method`, in the words of the decoder where there is one.
fn params_error(method: &str, params: Value) -> String {
    fn decode<T: serde::de::DeserializeOwned>(params: Value) -> Option<String> {
        serde_json::from_value::<T>(params)
            .err()
            .map(|e| e.to_string())
    }
    let detail = match method {
        "tools/call" => decode::<CallToolRequestParams>(params),
        "resources/read" => decode::<ReadResourceRequestParams>(params),
        "prompts/get" => decode::<GetPromptRequestParams>(params),
        "initialize" => decode::<InitializeRequestParams>(params),
        _ => None,
    };
    match detail {
        Some(detail) => format!("Invalid params for {method}: {detail}"),
        None => format!("Invalid params for {method}"),
    }
}

/// The JSON type of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The id of a line that is not valid JSON as a whole, when its top level still reads as an
/// object with a string or integer `id` (a bad escape or a nesting too deep elsewhere);
/// otherwise `null`.
fn readable_id(text: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Probe {
        id: Option<Value>,
    }
    match serde_json::from_slice::<Probe>(text) {
        Ok(Probe {
            id: Some(id @ (Value::String(_) | Value::Number(_))),
        }) if id.is_string() || id.is_i64() => id,
        _ => Value::Null,
    }
}

/// Writes one message and a newline, then flushes.
async fn write_line(writer: &Writer, message: &impl serde::Serialize) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    let mut writer = writer.lock().await;
    writer.write_all(&bytes).await?;
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

    fn rejection(line: &str) -> Rejection {
        match check(line.as_bytes()) {
            Err(Some(rejection)) => rejection,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn valid_messages_pass_and_blank_lines_are_skipped() {
        let ok = check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(matches!(ok, Ok(Some(JsonRpcMessage::Request(_)))), "{ok:?}");
        assert!(matches!(check(b"  \r"), Ok(None)));
    }

    #[test]
    fn every_bad_request_is_answered_with_its_id_when_readable() {
        let cases: &[(&str, Value, i32)] = &[
            ("not json {", Value::Null, PARSE_ERROR),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"s":"\ud800"}}"#,
                json!(7),
                PARSE_ERROR,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
                Value::Null,
                PARSE_ERROR,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (r#""ping""#, Value::Null, INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                json!("a"),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}"#,
                json!(3),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}"#,
                json!(4),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"acp_query","arguments":[1]}}"#,
                json!(5),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#,
                json!(6),
                INVALID_PARAMS,
            ),
        ];
        for (line, id, code) in cases {
            let rejection = rejection(line);
            assert_eq!(
                (&rejection.id, rejection.code),
                (id, *code),
                "{line}: {rejection:?}"
            );
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"acp_query","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let deep = rejection(&deep);
        assert_eq!(deep.code, PARSE_ERROR, "{deep:?}");
    }

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

    #[test]
    fn invalid_notifications_are_dropped_silently() {
        assert!(matches!(
            check(br#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#),
            Err(None)
        ));
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// Requests to mutate.
        const SEEDS: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"acp_query","arguments":{"type":"search","pattern":"x","limit":5}}}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"acp://file/src%2Fa.ts"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        ];

        fn mutated() -> impl Strategy<Value = Vec<u8>> {
            (
                prop::sample::select(SEEDS),
                prop::collection::vec(
                    (
                        any::<prop::sample::Index>(),
                        prop::sample::select(b"{}[]\",:\\0123456789.-eEtfnu \x00\xff".as_slice()),
                    ),
                    0..6,
                ),
            )
                .prop_map(|(seed, edits)| {
                    let mut bytes = seed.as_bytes().to_vec();
                    for (at, byte) in edits {
                        let at = at.index(bytes.len());
                        bytes[at] = byte;
                    }
                    bytes
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

            /// Every line is passed on, skipped, or answered; a request whose id reads as a
            /// string or an integer is answered with that id.
            #[test]
            fn lines_are_passed_on_or_answered_with_their_id(line in mutated()) {
                match check(&line) {
                    Ok(_) | Err(None) => {}
                    Err(Some(rejection)) => {
                        prop_assert!([PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS].contains(&rejection.code));
                        if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(&line) {
                            let id = object.get("id").filter(|id| id.is_string() || id.is_i64());
                            if let Some(id) = id {
                                prop_assert_eq!(&rejection.id, id);
                            }
                        }
                    }
                }
            }

            #[test]
            fn arbitrary_bytes_never_panic(line in prop::collection::vec(any::<u8>(), 0..256)) {
                let _ = check(&line);
            }
        }
    }
}
