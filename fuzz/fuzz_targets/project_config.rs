//! `.acp.config.json` contents: any bytes are parsed or refused naming the file and never panic;
//! parsed rules stay within the limits and judge any path, the same way every time.
#![no_main]

use std::path::Path;

use acpdb::config::{PathRules, CONFIG_FILE, MAX_PATTERNS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = Path::new(CONFIG_FILE);
    let rules = match PathRules::parse(data, source) {
        Ok(rules) => rules,
        Err(err) => {
            assert!(format!("{err:#}").starts_with(CONFIG_FILE), "{err:#}");
            return;
        }
    };
    let value: serde_json::Value = serde_json::from_slice(data).expect("parsed rules are JSON");
    let count = |key: &str| value.get(key).and_then(|v| v.as_array()).map_or(0, Vec::len);
    assert!(count("include") + count("exclude") <= MAX_PATTERNS);
    // Paths made of the input's own text, as a hostile config would aim at them.
    let text = String::from_utf8_lossy(data);
    for path in text.split(['"', ',', '\n']).take(64) {
        let first = rules.exclusion(path).map(|why| why.to_string());
        assert_eq!(first, rules.exclusion(path).map(|why| why.to_string()));
        assert_eq!(rules.refusal(path).is_some(), first.is_some());
    }
});
