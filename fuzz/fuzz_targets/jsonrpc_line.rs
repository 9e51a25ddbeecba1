//! A line of the server's input: passed on, or answered with a JSON-RPC error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(answer) = acpdb::mcp::answer_for_line(data) {
        let code = answer["error"]["code"].as_i64().unwrap();
        assert!([-32700, -32600, -32602].contains(&code), "{answer}");
    }
});
