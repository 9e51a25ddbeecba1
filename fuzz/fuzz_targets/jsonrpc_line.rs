//! A line of the server's input: passed on, or answered with a JSON-RPC error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(answer) = acpdb::mcp::answer_for_line(data) {
        // The id is echoed as written (perhaps a number no parser reads back): the code is read
        // from the text, which has this one shape.
        let code: i64 = answer
            .split(r#""error":{"code":"#)
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|code| code.parse().ok())
            .unwrap();
        assert!([-32700, -32600, -32602].contains(&code), "{answer}");
    }
});
