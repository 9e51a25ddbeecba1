//! Logging to stderr (stdout belongs to the protocol), with a level that can be changed at run
//! time (MCP `logging/setLevel`).

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

static HANDLE: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

fn filter(level: &str) -> EnvFilter {
    EnvFilter::try_new(format!(
        "{level},refinery=warn,refinery_core=warn,rmcp=warn"
    ))
    .unwrap_or_else(|_| EnvFilter::new("info"))
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
