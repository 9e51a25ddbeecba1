//! Replaying a workload against a server under test: warm-up passes, then measured ones until
//! a number of passes or a time limit, every call's latency and outcome recorded.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::Value;

use super::report::{Outcome, Recorder};
use super::workload::Workload;

/// A server under test, answering one call at a time.
pub trait Target {
    /// Calls `tool`; `Err` only when the server cannot be reached any more.
    fn call(&mut self, tool: &str, arguments: &Value) -> Result<Outcome>;
}

/// When the measured passes end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this many passes.
    Passes(u32),
    /// After the call that crosses this much wall-clock time.
    Time(Duration),
}

/// Counts of a replay.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    /// Measured passes started.
    pub passes: u32,
    /// Measured calls.
    pub calls: usize,
    /// Wall-clock time of the measured passes.
    pub elapsed: Duration,
}

/// Replays `workload` against `target`: `warmup` unmeasured passes, then measured ones until
/// `stop`. Calls to tools the target does not know are skipped after the first.
pub fn replay(
    target: &mut dyn Target,
    workload: &Workload,
    warmup: u32,
    stop: Stop,
    recorder: &mut Recorder,
) -> Result<Replayed> {
    let groups: Vec<String> = workload.calls.iter().map(|c| c.group()).collect();
    let mut pass = |recorder: &mut Recorder, measured: bool, deadline: Option<Instant>| {
        let mut calls = 0;
        for (call, group) in workload.calls.iter().zip(&groups) {
            if recorder.is_unsupported(&call.tool) {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let started = Instant::now();
            let outcome = call.judge(target.call(&call.tool, &call.arguments)?);
            let latency = started.elapsed();
            if outcome != Outcome::Unsupported {
                calls += 1;
            }
            recorder.record(group, &call.tool, latency, outcome, measured);
        }
        Ok::<usize, anyhow::Error>(calls)
    };
    for _ in 0..warmup {
        pass(recorder, false, None)?;
    }
    let started = Instant::now();
    let deadline = match stop {
        Stop::Time(limit) => Some(started + limit),
        Stop::Passes(_) => None,
    };
    let mut replayed = Replayed {
        passes: 0,
        calls: 0,
        elapsed: Duration::ZERO,
    };
    loop {
        let more = match stop {
            Stop::Passes(n) => replayed.passes < n,
            Stop::Time(_) => deadline.is_some_and(|d| Instant::now() < d),
        };
        if !more {
            break;
        }
        replayed.calls += pass(recorder, true, deadline)?;
        replayed.passes += 1;
    }
    replayed.elapsed = started.elapsed();
    Ok(replayed)
}
