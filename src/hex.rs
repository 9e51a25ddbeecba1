//! Lower-case hexadecimal, the one encoding of bytes as text (digests, cursors, blob
//! literals); a leaf every module may use.

use std::fmt::Write as _;

/// `bytes` as lower-case hexadecimal, two digits per byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}
