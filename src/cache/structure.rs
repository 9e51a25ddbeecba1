//! Where a JSON string, array or object ends, found 64 bytes at a time: each block becomes bit
//! masks of its quotes, backslashes and brackets; the bytes escaped by backslashes and those
//! inside strings follow from them with a few integer operations, so that only the brackets
//! outside strings (and, for a string, its closing quote) are looked at one by one. This is the
//! delta's scan of unchanged entries, whose bytes are digested and never parsed. Only structure
//! is found: the value is validated when it is parsed.

/// The scan of one value, carried from one slice of its bytes to the next.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ValueEnd {
    /// Brackets opened outside strings and not closed yet.
    depth: usize,
    /// The next byte is inside a string.
    in_string: bool,
    /// The next byte is escaped: the bytes before end in a backslash that escapes.
    escaped: bool,
    /// The value is a string: it ends at its closing quote.
    string: bool,
}

/// Bytes in a block.
const BLOCK: usize = 64;

/// The even bit positions of a block.
const EVEN_BITS: u64 = 0x5555_5555_5555_5555;

impl ValueEnd {
    /// The scan of a value whose first byte is `first` (`"`, `[` or `{`), before that byte.
    pub(super) fn new(first: u8) -> ValueEnd {
        ValueEnd {
            string: first == b'"',
            ..ValueEnd::default()
        }
    }

    /// Scans `bytes`, the value's next bytes: the index just past its end when it ends in them,
    /// else `None`, with every byte taken into the scan.
    pub(super) fn find(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut at = 0;
        while at < bytes.len() {
            let len = (bytes.len() - at).min(BLOCK);
            let block = &bytes[at..at + len];
            let masks = if len == BLOCK {
                Masks::of(block.try_into().expect("a whole block"))
            } else {
                // The last bytes, padded with spaces: neither quotes, backslashes nor brackets.
                let mut padded = [b' '; BLOCK];
                padded[..len].copy_from_slice(block);
                Masks::of(&padded)
            };
            if let Some(end) = self.block(masks, len) {
                return Some(at + end);
            }
            at += len;
        }
        None
    }

    /// Takes the first `len` bytes of a block in: the index just past the value's end when it
    /// ends in them.
    fn block(&mut self, masks: Masks, len: usize) -> Option<usize> {
        let valid = if len == BLOCK {
            u64::MAX
        } else {
            (1 << len) - 1
        };
        let (escaped, escapes) = self.escapes(masks.backslashes & valid);
        let quotes = masks.quotes & !escaped & valid;
        // Each quote flips in and out of a string: a byte is inside one (its opening quote
        // included, its closing quote not) when an odd number of quotes come before it or at it.
        let in_string = prefix_xor(quotes) ^ if self.in_string { u64::MAX } else { 0 };
        self.in_string = in_string >> (len - 1) & 1 == 1;
        self.escaped = escapes >> (len - 1) & 1 == 1;
        if self.string {
            let closing = quotes & !in_string;
            return (closing != 0).then(|| closing.trailing_zeros() as usize + 1);
        }
        let outside = !in_string & !escaped & valid;
        let opens = masks.opens & outside;
        let mut brackets = (masks.opens | masks.closes) & outside;
        while brackets != 0 {
            let at = brackets.trailing_zeros() as usize;
            brackets &= brackets - 1;
            if opens >> at & 1 == 1 {
                self.depth += 1;
            } else {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    return Some(at + 1);
                }
            }
        }
        None
    }

    /// The bytes of a block escaped by a backslash, and the backslashes that escape, given its
    /// backslashes: in a run of them, every other one escapes the byte after it, from the
    /// run's first on (from its second when the previous block escaped its first).
    fn escapes(&self, backslashes: u64) -> (u64, u64) {
        let carried = u64::from(self.escaped);
        if backslashes == 0 {
            return (carried, 0);
        }
        // A run whose first backslash is escaped escapes from its second: at odd bits.
        let carried_start = carried & backslashes & 1;
        let starts = backslashes & !(backslashes << 1);
        let even_starts = starts & EVEN_BITS & !carried_start;
        let odd_starts = (starts & !EVEN_BITS) | carried_start;
        // Adding a run's start clears the run (the carry stops at the zero after it).
        let even_runs = backslashes & !backslashes.wrapping_add(even_starts);
        let odd_runs = backslashes & !backslashes.wrapping_add(odd_starts);
        let escapes = (even_runs & EVEN_BITS) | (odd_runs & !EVEN_BITS);
        ((escapes << 1) | carried, escapes)
    }
}

/// The bit masks of one block.
#[derive(Debug, Clone, Copy)]
struct Masks {
    quotes: u64,
    backslashes: u64,
    /// `{` and `[`.
    opens: u64,
    /// `}` and `]`.
    closes: u64,
}

impl Masks {
    /// The masks of `block`, bit `i` for byte `i`.
    #[cfg(target_arch = "x86_64")]
    fn of(block: &[u8; BLOCK]) -> Masks {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        let mut masks = Masks {
            quotes: 0,
            backslashes: 0,
            opens: 0,
            closes: 0,
        };
        for (part, bytes) in block.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is part of every x86_64 processor; the load reads the 16 bytes of
            // `bytes`, with no alignment required.
            let [quotes, backslashes, opens, closes] = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>());
                // `[` and `]` differ from `{` and `}` by the bit 0x20 alone.
                let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
                let mask = |m| _mm_movemask_epi8(m) as u16 as u64;
                [
                    mask(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8))),
                    mask(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
                    mask(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'{' as i8))),
                    mask(_mm_cmpeq_epi8(folded, _mm_set1_epi8(b'}' as i8))),
                ]
            };
            let shift = 16 * part;
            masks.quotes |= quotes << shift;
            masks.backslashes |= backslashes << shift;
            masks.opens |= opens << shift;
            masks.closes |= closes << shift;
        }
        masks
    }

    /// The masks of `block`, bit `i` for byte `i`.
    #[cfg(not(target_arch = "x86_64"))]
    fn of(block: &[u8; BLOCK]) -> Masks {
        Masks::bytewise(block)
    }

    /// [`Masks::of`] a byte at a time.
    #[cfg(any(test, not(target_arch = "x86_64")))]
    fn bytewise(block: &[u8; BLOCK]) -> Masks {
        let mask = |wanted: &[u8]| {
            block
                .iter()
                .enumerate()
                .filter(|(_, b)| wanted.contains(b))
                .fold(0u64, |mask, (i, _)| mask | 1 << i)
        };
        Masks {
            quotes: mask(b"\""),
            backslashes: mask(b"\\"),
            opens: mask(b"{["),
            closes: mask(b"}]"),
        }
    }
}

/// Bit `i` of the result is the parity of bits `0..=i` of `x`.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the value at the start of `bytes` ends, a byte at a time: a backslash escapes the
    /// byte after it (outside strings too: that is invalid JSON, rejected when parsed).
    fn reference_end(bytes: &[u8]) -> Option<usize> {
        let string = bytes[0] == b'"';
        let (mut depth, mut in_string, mut i) = (0usize, false, 0);
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 1,
                b'"' if in_string => {
                    in_string = false;
                    if string {
                        return Some(i + 1);
                    }
                }
                b'"' => in_string = true,
                b'{' | b'[' if !in_string => depth += 1,
                b'}' | b']' if !in_string => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && !string {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// Finds the end feeding `bytes` in the parts that `cuts` (sorted offsets) make.
    fn end_in_parts(bytes: &[u8], cuts: &[usize]) -> Option<usize> {
        let mut scan = ValueEnd::new(bytes[0]);
        let mut from = 0;
        for &to in cuts.iter().chain([&bytes.len()]) {
            if let Some(end) = scan.find(&bytes[from..to]) {
                return Some(from + end);
            }
            from = to;
        }
        None
    }

    /// Bytes of the random values: each alphabet weighs quotes, backslashes (in long runs, so
    /// that runs cross blocks) and brackets differently.
    const ALPHABETS: [&[u8]; 3] = [b"\"\\{}[]a ", b"\\\\\\\\\\\\\"{}a", b"\"\"\"{{[[]]}}\\a"];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 4096,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn finds_the_end_a_byte_at_a_time_scan_finds_in_any_parts(
            alphabet in 0..ALPHABETS.len(),
            first in proptest::sample::select(b"\"{[".to_vec()),
            picks in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..400),
            cut_at in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..6),
        ) {
            let alphabet = ALPHABETS[alphabet];
            let bytes: Vec<u8> = std::iter::once(first)
                .chain(picks.iter().map(|pick| alphabet[pick.index(alphabet.len())]))
                .collect();
            let expected = reference_end(&bytes);
            proptest::prop_assert_eq!(end_in_parts(&bytes, &[]), expected);
            let mut cuts: Vec<usize> = cut_at.iter().map(|at| at.index(bytes.len())).collect();
            cuts.sort_unstable();
            proptest::prop_assert_eq!(end_in_parts(&bytes, &cuts), expected);
        }

        #[test]
        fn masks_match_a_byte_at_a_time(
            block in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    proptest::sample::select(b"\"\\{}[]".to_vec()),
                ],
                BLOCK,
            ),
        ) {
            let block: &[u8; BLOCK] = block.as_slice().try_into().unwrap();
            let (fast, slow) = (Masks::of(block), Masks::bytewise(block));
            proptest::prop_assert_eq!(
                (fast.quotes, fast.backslashes, fast.opens, fast.closes),
                (slow.quotes, slow.backslashes, slow.opens, slow.closes)
            );
        }
    }

    #[test]
    fn finds_the_end_of_serialized_values() {
        let text = "q\"uo\\te\\\\ {[}]\\\"\u{e9}";
        let value = serde_json::json!({
            "a": [text, {"b": text.repeat(40)}, [], {}],
            "c": "\\\\\\\\",
            "d": [[[[1, 2.5, null, true]]]],
        });
        for value in [value.clone(), value["a"].clone(), serde_json::json!(text)] {
            let mut bytes = serde_json::to_vec(&value).unwrap();
            let end = bytes.len();
            bytes.extend_from_slice(b", \"after\": {}]");
            assert_eq!(end_in_parts(&bytes, &[]), Some(end));
            let cuts: Vec<usize> = [1, 63, 64, 65, 130]
                .into_iter()
                .filter(|&cut| cut < end)
                .collect();
            assert_eq!(end_in_parts(&bytes, &cuts), Some(end));
            assert_eq!(end_in_parts(&bytes[..end - 1], &[]), None);
        }
    }
}
