//! Lower-case hexadecimal, the one encoding of bytes as text (digests, cursors, blob
//! literals), and its decoding; a leaf, used by the modules the code map lets use it.

use std::fmt::Write as _;

/// The bytes of hexadecimal `text` (either case), or `None` when it has an odd length or a
/// character that is not a hex digit.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let high = (pair[0] as char).to_digit(16)?;
            let low = (pair[1] as char).to_digit(16)?;
            Some((high * 16 + low) as u8)
        })
        .collect()
}

/// `bytes` as lower-case hexadecimal, two digits per byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_inverts_encoding_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(decode(&encode(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(decode("0A").as_deref(), Some(&[10u8][..]));
        assert_eq!(decode("abc"), None);
        assert_eq!(decode("zz"), None);
        assert_eq!(decode("").as_deref(), Some(&[][..]));
    }
}
