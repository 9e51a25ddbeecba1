//! A stdin filter that makes malformed lines visible to the client.
//!
//! rmcp drops lines that are not JSON without a word. Agents deserve an error instead, so each
//! malformed line is replaced by a well-formed but invalid JSON-RPC message, which rmcp answers
//! with an "Invalid request" error; the server keeps serving.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};

/// Stdin with every line that is not valid JSON replaced by an invalid JSON-RPC request.
pub fn filtered_stdin() -> impl AsyncRead + Send + Unpin + 'static {
    let (reader, mut writer) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let forwarded = if line.trim().is_empty()
                || serde_json::from_str::<serde::de::IgnoredAny>(&line).is_ok()
            {
                line
            } else {
                tracing::warn!(
                    "ignoring a malformed line on stdin ({} bytes): not JSON",
                    line.len()
                );
                r#"{"jsonrpc":"2.0","id":null,"error":"malformed line"}"#.to_string()
            };
            if writer.write_all(forwarded.as_bytes()).await.is_err()
                || writer.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    reader
}
