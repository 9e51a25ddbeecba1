//! Logging to stderr (stdout belongs to the protocol), with a level that can be changed at run
//! time (MCP `logging/setLevel`).

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

static HANDLE: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Libraries whose informational chatter (migrations applied, service started) is not the
/// user's business: they log at most warnings, and never more than the chosen level allows.
const QUIET_TARGETS: &[&str] = &["refinery", "refinery_core", "rmcp"];

/// The filter for `level`, which applies to every target.
fn filter(level: &str) -> EnvFilter {
    let level = level.trim().to_ascii_lowercase();
    let quiet = if matches!(level.as_str(), "off" | "error") {
        level.as_str()
    } else {
        "warn"
    };
    let mut directives = vec![level.clone()];
    directives.extend(QUIET_TARGETS.iter().map(|t| format!("{t}={quiet}")));
    EnvFilter::try_new(directives.join(",")).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Whether an event is rmcp's report of an error answer it sent. Those are the user's errors
/// (an unknown name, a bad argument), answered to the client, not problems of the server;
/// the server logs them itself at debug level.
fn is_error_answer_report(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.is_event()
        && metadata.target().starts_with("rmcp")
        && *metadata.level() == tracing::Level::WARN
        && metadata.fields().field("error").is_some()
        && metadata.fields().field("id").is_some()
}

/// Installs the stderr logger. `ACPDB_LOG` (an `EnvFilter` directive) overrides `level`.
pub fn init(level: &str) {
    use std::io::IsTerminal;
    let initial = std::env::var("ACPDB_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| filter(level));
    let (layer, handle) = reload::Layer::new(initial);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .compact();
    if tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::filter::filter_fn(|metadata| {
            !is_error_answer_report(metadata)
        }))
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = HANDLE.set(handle);
    }
}

/// Changes the log level (`error`, `warn`, `info`, `debug`, `trace`).
pub fn set_level(level: &str) -> bool {
    match HANDLE.get() {
        Some(handle) => handle.reload(filter(level)).is_ok(),
        None => false,
    }
}
