//! The protocol's stdin and stdout.
//!
//! When they are pipes (as MCP clients spawn servers), both are read and written in
//! non-blocking mode through the runtime's reactor; tokio's own `stdin()`/`stdout()` hand every
//! read and write to a blocking-pool thread, two thread switches per request. A terminal or a
//! file falls back to those.
//!
//! Stdin is also filtered: rmcp drops lines that are not JSON without a word. Agents deserve an
//! error instead, so each malformed line is replaced by a well-formed but invalid JSON-RPC
//! message, which rmcp answers with an "Invalid request" error; the server keeps serving.
//!
//! The filter works inside `poll_read` of the reader rmcp polls, so a request costs no extra
//! task or pipe between stdin and the protocol.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::net::unix::pipe;

/// What a line that is not JSON is replaced with.
const MALFORMED: &[u8] = br#"{"jsonrpc":"2.0","id":null,"error":"malformed line"}"#;

/// Stdin with every line that is not valid JSON replaced by an invalid JSON-RPC request.
pub fn filtered_stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    match duplicate(&std::io::stdin()).and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok()) {
        Some(pipe) => Box::new(LineFilter::new(pipe)),
        None => Box::new(LineFilter::new(tokio::io::stdin())),
    }
}

/// Stdout for protocol messages.
pub fn stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    match duplicate(&std::io::stdout()).and_then(|fd| pipe::Sender::from_owned_fd(fd).ok()) {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    }
}

/// A second descriptor of a standard stream (`None` when it is closed).
fn duplicate(stream: &impl AsFd) -> Option<OwnedFd> {
    stream.as_fd().try_clone_to_owned().ok()
}

/// Reads whole lines from `inner` and hands them on, each checked and ending in `\n`.
struct LineFilter<R> {
    inner: BufReader<R>,
    /// The line being collected (without its newline).
    line: Vec<u8>,
    /// Checked bytes ready to be read, and how many of them were read already.
    ready: Vec<u8>,
    served: usize,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineFilter<R> {
    fn new(inner: R) -> Self {
        LineFilter {
            inner: BufReader::new(inner),
            line: Vec::new(),
            ready: Vec::new(),
            served: 0,
            eof: false,
        }
    }

    /// Moves the collected line, checked, into `ready`.
    fn finish_line(&mut self) {
        self.ready.clear();
        self.served = 0;
        let line = std::mem::take(&mut self.line);
        let text = line.strip_suffix(b"\r").unwrap_or(&line);
        let blank = text.iter().all(u8::is_ascii_whitespace);
        if blank || serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok() {
            self.ready.extend_from_slice(&line);
        } else {
            tracing::warn!(
                "ignoring a malformed line on stdin ({} bytes): not JSON",
                line.len()
            );
            self.ready.extend_from_slice(MALFORMED);
        }
        self.ready.push(b'\n');
        self.line = line;
        self.line.clear();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineFilter<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.served == this.ready.len() {
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let available = ready!(Pin::new(&mut this.inner).poll_fill_buf(cx))?;
            if available.is_empty() {
                this.eof = true;
                if !this.line.is_empty() {
                    this.finish_line();
                }
                continue;
            }
            let (taken, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    this.line.extend_from_slice(&available[..end]);
                    (end + 1, true)
                }
                None => {
                    this.line.extend_from_slice(available);
                    (available.len(), false)
                }
            };
            Pin::new(&mut this.inner).consume(taken);
            if complete {
                this.finish_line();
            }
        }
        let n = buf.remaining().min(this.ready.len() - this.served);
        buf.put_slice(&this.ready[this.served..this.served + n]);
        this.served += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn filter(input: &'static [u8]) -> String {
        let mut out = String::new();
        LineFilter::new(input)
            .read_to_string(&mut out)
            .await
            .unwrap();
        out
    }

    #[tokio::test]
    async fn json_lines_pass_and_others_are_replaced() {
        let out = filter(b"{\"a\":1}\r\nnot json\n\n[1,2]").await;
        let malformed = String::from_utf8_lossy(MALFORMED);
        assert_eq!(out, format!("{{\"a\":1}}\r\n{malformed}\n\n[1,2]\n"));
    }

    #[tokio::test]
    async fn a_truncated_last_line_is_replaced() {
        let out = filter(b"{\"a\":").await;
        assert_eq!(out, format!("{}\n", String::from_utf8_lossy(MALFORMED)));
    }
}
