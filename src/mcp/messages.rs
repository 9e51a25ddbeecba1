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
use serde_json::{json, Value};

use super::errors::{INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR};
use crate::cache::reader::json_type;

/// An error answer for a message that does not reach rmcp.
#[derive(Debug, PartialEq)]
pub(super) struct Rejection {
    id: Value,
    code: i32,
    message: String,
}

impl Rejection {
    /// The JSON-RPC error answer.
    pub(super) fn answer(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        })
    }

    pub(super) fn new(id: Value, code: i32, message: impl Into<String>) -> Rejection {
        Rejection {
            id,
            code,
            message: message.into(),
        }
    }
}

/// The error the server answers at once for one message (a line of stdin, the body of an HTTP
/// request), or `None` when the message goes on to the protocol (or is skipped: blank lines,
/// invalid notifications). For fuzzing and tests of the framing.
pub fn answer_for_line(line: &[u8]) -> Option<Value> {
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

/// The id of a message that is not valid JSON as a whole, when its top level still reads as an
/// object with a string or integer `id` (a bad escape or a nesting too deep elsewhere);
/// otherwise `null`.
fn readable_id(text: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Probe {
        id: Option<Value>,
    }
    match serde_json::from_slice::<Probe>(text) {
        Ok(Probe { id: Some(id) }) if usable_id(&id) => id,
        _ => Value::Null,
    }
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
                            let id = object.get("id").filter(|id| usable_id(id));
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
