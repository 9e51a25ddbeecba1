//! An MCP client (rmcp's client side) driving the real `acpdb serve` over stdio or HTTP.

use std::path::Path;
use std::process::Stdio;

use rmcp::model::{
    CallToolRequestParams, ContentBlock, ErrorData, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

/// A connected client.
pub(crate) struct Client {
    pub(crate) service: RunningService<RoleClient, ()>,
}

/// A tool failure as the client saw it.
#[derive(Debug)]
pub(crate) struct ToolError {
    pub(crate) code: i32,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

/// A successful tool answer.
#[derive(Debug)]
pub(crate) struct ToolAnswer {
    /// The first text content, parsed as JSON when it is JSON.
    pub(crate) json: Value,
    /// Every text content item.
    pub(crate) texts: Vec<String>,
    /// The structured content, for the tools with an output schema.
    pub(crate) structured: Option<Value>,
}

impl ToolAnswer {
    /// Whether the answer carries the note of an index being re-imported or failing to be
    /// (not a note about the source files).
    pub(crate) fn index_is_stale(&self) -> bool {
        self.texts
            .iter()
            .any(|t| t.starts_with("The index is stale"))
    }
}

impl Client {
    /// Spawns `acpdb -C root serve` (plus `extra` arguments) and initializes.
    pub(crate) async fn spawn(root: &Path, extra: &[&str]) -> Client {
        let mut args = vec![
            "-C".to_string(),
            root.display().to_string(),
            "serve".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Client::spawn_command(env!("CARGO_BIN_EXE_acpdb"), &args).await
    }

    /// Spawns `command` with `args` (an MCP client's configured server) and initializes.
    pub(crate) async fn spawn_command(command: &str, args: &[String]) -> Client {
        let args = args.to_vec();
        let (transport, _stderr) =
            TokioChildProcess::builder(tokio::process::Command::new(command).configure(|cmd| {
                cmd.args(&args).env("ACPDB_LOG", "warn");
            }))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn acpdb serve");
        let service = ().serve(transport).await.expect("initialize");
        Client { service }
    }

    /// Connects to an `acpdb serve --http` at `url` (sending `token` as a bearer token) and
    /// initializes.
    pub(crate) async fn http(url: &str, token: Option<&str>) -> Client {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let service = ().serve(transport).await.expect("initialize over HTTP");
        Client { service }
    }

    /// Calls a tool; `Err` carries the JSON-RPC error.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<ToolAnswer, ToolError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        match self.service.call_tool(params).await {
            Ok(result) => {
                assert_ne!(
                    result.is_error,
                    Some(true),
                    "{tool} answered with isError instead of a JSON-RPC error"
                );
                let texts: Vec<String> = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        ContentBlock::Text(t) => Some(t.text.clone()),
                        _ => None,
                    })
                    .collect();
                let first = texts.first().cloned().unwrap_or_default();
                let json = serde_json::from_str(&first).unwrap_or(Value::String(first));
                Ok(ToolAnswer {
                    json,
                    texts,
                    structured: result.structured_content,
                })
            }
            Err(ServiceError::McpError(ErrorData {
                code,
                message,
                data,
            })) => Err(ToolError {
                code: code.0,
                message: message.to_string(),
                data,
            }),
            Err(other) => panic!("{tool}: transport failure {other}"),
        }
    }

    /// Calls a tool that must succeed and returns its JSON.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args.clone()).await {
            Ok(answer) => answer.json,
            Err(err) => panic!("{tool} {args} failed: {err:?}"),
        }
    }

    /// Calls a tool that must fail and returns the error.
    pub(crate) async fn err(&self, tool: &str, args: Value) -> ToolError {
        match self.call(tool, args.clone()).await {
            Ok(answer) => panic!("{tool} {args} succeeded: {:?}", answer.json),
            Err(err) => err,
        }
    }

    /// Reads a resource's text.
    pub(crate) async fn read(&self, uri: &str) -> Result<String, ToolError> {
        Ok(self.read_with_meta(uri).await?.0)
    }

    /// Reads a resource's text and its `_meta` (`Value::Null` when it has none).
    pub(crate) async fn read_with_meta(&self, uri: &str) -> Result<(String, Value), ToolError> {
        match self
            .service
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
        {
            Ok(result) => match result.contents.into_iter().next() {
                Some(ResourceContents::TextResourceContents { text, meta, .. }) => {
                    let meta = meta.map_or(Value::Null, |m| Value::Object(m.0));
                    Ok((text, meta))
                }
                other => panic!("unexpected resource contents {other:?}"),
            },
            Err(ServiceError::McpError(ErrorData {
                code,
                message,
                data,
            })) => Err(ToolError {
                code: code.0,
                message: message.to_string(),
                data,
            }),
            Err(other) => panic!("{uri}: transport failure {other}"),
        }
    }

    /// Disconnects.
    pub(crate) async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// Waits until a tool stops answering "index not ready" (-32003), up to `seconds`.
pub(crate) async fn wait_ready(client: &Client, seconds: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        match client
            .call("acp_get_architecture", serde_json::json!({}))
            .await
        {
            Err(err) if err.code == -32003 && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            _ => return,
        }
    }
}

/// The overviews' `source.files`, as `files` gives them, once the server's first sweep of the
/// sources ended and, when `watched`, it watches every source directory (ten seconds at most).
/// Answers given before then say how many files were checked so far.
pub(crate) async fn first_sweep_done<F: std::future::Future<Output = Value>>(
    files: impl Fn() -> F,
    watched: bool,
) -> Value {
    let mut state = Value::Null;
    for _ in 0..200 {
        state = files().await;
        if state["swept_at"].is_string() && (!watched || state["watched"] == true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    state
}

/// A copy of the demo fixture, imported, and a client of `acpdb serve` on it, ready to answer.
pub(crate) async fn demo_client() -> (super::TempProject, Client) {
    let project = super::TempProject::copy_of(&super::fixture("demo"));
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 30).await;
    (project, client)
}
