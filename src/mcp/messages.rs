//! The checks every incoming JSON-RPC message passes before rmcp sees it, over stdio and HTTP
//! alike: a message rmcp would drop without a word, answer without its id, or (over HTTP)
//! refuse with a bare status, is answered here with a JSON-RPC error, carrying the request's id
//! whenever it can be read:
//!
//! * not JSON, or nested deeper than JSON's parser allows: `-32700`;
//! * not a JSON-RPC 2.0 message (a batch, a non-object, `jsonrpc` other than `"2.0"`, an id
//!   that is neither a string nor an integer): `-32600`;
//! * `params` (or a `tools/call`'s `arguments`) that is not an object, or params rmcp cannot
//!   decode: `-32602`.
//!
//! Notifications never get an answer, as JSON-RPC requires (over HTTP, where every request gets
//! a status, an invalid notification or response gets 400 with a `-32600` error and no id).

use rmcp::model::{
    CallToolRequestParams, ClientRequest, GetPromptRequestParams, InitializeRequestParams,
    JsonRpcMessage, ReadResourceRequestParams,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::RoleServer;
use serde_json::Value;

use super::errors::{INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR};
use crate::cache::reader::json_type;

/// An error answer for a message that does not reach rmcp.
#[derive(Debug, PartialEq)]
pub(super) struct Rejection {
    /// The request's id as the client wrote it (JSON text), or `null`.
    id: String,
    code: i32,
    message: String,
}

/// A JSON-RPC error answer, its id as written in the request.
#[derive(serde::Serialize)]
struct ErrorAnswer<'a> {
    jsonrpc: &'static str,
    id: &'a serde_json::value::RawValue,
    error: ErrorBody<'a>,
}

#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    code: i32,
    message: &'a str,
}

impl Rejection {
    /// The JSON-RPC error answer, as JSON text: the id is echoed as the client wrote it, even
    /// a number no JSON parser reads back exactly (`1e400`).
    pub(super) fn answer(&self) -> String {
        let null = serde_json::value::RawValue::NULL;
        let id = serde_json::value::RawValue::from_string(self.id.clone()).ok();
        let answer = ErrorAnswer {
            jsonrpc: "2.0",
            id: id.as_deref().unwrap_or(null),
            error: ErrorBody {
                code: self.code,
                message: &self.message,
            },
        };
        serde_json::to_string(&answer).unwrap_or_default()
    }

    pub(super) fn new(id: Value, code: i32, message: impl Into<String>) -> Rejection {
        Rejection {
            id: id.to_string(),
            code,
            message: message.into(),
        }
    }

    /// A rejection of a request whose id, as written, is `id` (`None`: unreadable, `null`).
    pub(super) fn with_written_id(
        id: Option<String>,
        code: i32,
        message: impl Into<String>,
    ) -> Rejection {
        Rejection {
            id: id.unwrap_or_else(|| "null".into()),
            code,
            message: message.into(),
        }
    }
}

/// The error the server answers at once for one message (a line of stdin, the body of an HTTP
/// request), or `None` when the message goes on to the protocol (or is skipped: blank lines,
/// invalid notifications). For fuzzing and tests of the framing.
pub fn answer_for_line(line: &[u8]) -> Option<String> {
    match check(line) {
        Err(Some(rejection)) => Some(rejection.answer()),
        Ok(_) | Err(None) => None,
    }
}

/// The bytes of a message without a UTF-8 byte order mark opening it.
pub(super) fn without_bom(message: &[u8]) -> &[u8] {
    message.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(message)
}

/// Checks one message. `Ok(None)`: blank, skipped. `Err(Some(_))`: answer this error;
/// `Err(None)`: drop the message without an answer (an invalid notification or response).
pub(super) fn check(
    line: &[u8],
) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Option<Rejection>> {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    let text = without_bom(text);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(text).map_err(|err| {
        tracing::warn!("a message is not JSON ({} bytes): {err}", text.len());
        Some(Rejection::with_written_id(
            written_id(text),
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
                "batches are not supported; send one message at a time",
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
        Some(id) if usable_id(id) => Some(id.clone()),
        Some(_) => {
            return Err(Some(Rejection::with_written_id(
                written_id(text),
                INVALID_REQUEST,
                "Invalid request: id must be a string or an integer",
            )))
        }
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
            tracing::warn!("ignoring an invalid message: {message}");
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
                        json_type(other)
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
                        format!("arguments: expected an object, got {}", json_type(other)),
                    )
                }
            }
        }
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            // rmcp takes a standard method whose params it cannot decode for a custom one,
            // and would answer "method not found".
            ClientRequest::CustomRequest(custom) if is_standard_method(&custom.method) => reject(
                INVALID_PARAMS,
                params_error(&custom.method, custom.params.clone().unwrap_or(Value::Null)),
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

/// The id of a message as the client wrote it (its JSON text), read from the top level of
/// `text` without parsing the rest, which may be invalid JSON or cut off (the first bytes of a
/// line too long to read whole): a string or a number, else `None`.
pub(super) fn written_id(text: &[u8]) -> Option<String> {
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(text, at);
        let key_end = string_end(text, at)?;
        let key = &text[at..key_end];
        at = skip_space(text, key_end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(text, at + 1);
        let value_end = value_end(text, at)?;
        if key == b"\"id\"" {
            let value = &text[at..value_end];
            let readable = match value.first()? {
                b'"' => serde_json::from_slice::<String>(value).is_ok(),
                _ => is_json_number(value),
            };
            return readable.then(|| String::from_utf8_lossy(value).into_owned());
        }
        at = skip_space(text, value_end);
        match text.get(at)? {
            b',' => at += 1,
            _ => return None,
        }
    }
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The end (past the closing quote) of the string starting at `at`.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match text.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The end of the JSON value starting at `at` (its brackets balanced, its strings skipped);
/// `None` when the text ends first.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let len = text[at..]
                .iter()
                .position(|b| b.is_ascii_whitespace() || matches!(b, b',' | b'}' | b']'))?;
            Some(at + len)
        }
    }
}

/// Whether `token` is a number in JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_json_number(token: &[u8]) -> bool {
    let digits = |at: usize| {
        token[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut at = usize::from(token.first() == Some(&b'-'));
    match (token.get(at), digits(at)) {
        (Some(b'0'), 1) => at += 1,
        (Some(b'1'..=b'9'), n) => at += n,
        _ => return false,
    }
    if token.get(at) == Some(&b'.') {
        match digits(at + 1) {
            0 => return false,
            n => at += 1 + n,
        }
    }
    if matches!(token.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(token.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        match digits(at) {
            0 => return false,
            n => at += n,
        }
    }
    at == token.len()
}

/// Whether `id` may identify a request: a string or an integer.
fn usable_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
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
    fn every_bad_request_is_answered_with_its_id_as_written() {
        let cases: &[(&str, &str, i32)] = &[
            ("not json {", "null", PARSE_ERROR),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"s":"\ud800"}}"#,
                "7",
                PARSE_ERROR,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
                "1e400",
                PARSE_ERROR,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                "null",
                INVALID_REQUEST,
            ),
            (r#""ping""#, "null", INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                "1.5",
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                "null",
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                r#""a""#,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}"#,
                "3",
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}"#,
                "4",
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"acp_query","arguments":[1]}}"#,
                "5",
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#,
                "6",
                INVALID_PARAMS,
            ),
        ];
        for (line, id, code) in cases {
            let rejection = rejection(line);
            assert_eq!(
                (rejection.id.as_str(), rejection.code),
                (*id, *code),
                "{line}: {rejection:?}"
            );
            let answer = rejection.answer();
            assert!(answer.contains(&format!(r#""id":{id},"#)), "{answer}");
        }
        // A standard method's params that do not decode are named with the decoder's words.
        let missing = rejection(
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#,
        );
        assert!(
            missing.message.contains("tools/call") && missing.message.contains("`name`"),
            "{missing:?}"
        );
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"acp_query","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let deep = rejection(&deep);
        assert_eq!(deep.code, PARSE_ERROR, "{deep:?}");
    }

    #[test]
    fn an_id_is_read_from_the_start_of_a_message_cut_off_or_broken_later() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"aaaa"#,
                Some("42"),
            ),
            (
                r#" { "method" : "ping", "params": {"a":[1,{"b":"}"}]}, "id" : "x\"y" , "#,
                Some(r#""x\"y""#),
            ),
            (r#"{"params":{"id":1},"id":-0.5e+3}"#, Some("-0.5e+3")),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"x":"aaaa"#,
                None,
            ),
            (r#"{"id":01}"#, None),
            (r#"{"id":null}"#, None),
            (r#"{"id":"\ud800"}"#, None),
            (r#"["id",1]"#, None),
        ];
        for (text, id) in cases {
            assert_eq!(written_id(text.as_bytes()).as_deref(), *id, "{text}");
        }
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
            /// string or an integer is answered with that id (as written, so equal once read).
            #[test]
            fn lines_are_passed_on_or_answered_with_their_id(line in mutated()) {
                match check(&line) {
                    Ok(_) | Err(None) => {}
                    Err(Some(rejection)) => {
                        prop_assert!([PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS].contains(&rejection.code));
                        if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(&line) {
                            let id = object.get("id").filter(|id| usable_id(id));
                            if let Some(id) = id {
                                let answered = serde_json::from_str::<Value>(&rejection.id).ok();
                                prop_assert_eq!(answered.as_ref(), Some(id));
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
