//! Answers of read-only tools kept per index generation, so that a question many agents ask
//! (the architecture, a hot file's context, a common search) is answered once per import.
//!
//! Invariants: an entry is returned only for the generation it was computed in (the index
//! state starts a new generation whenever the served database or its staleness changes, and
//! the first look-up of a new generation empties the cache); only successful answers and the
//! errors the index alone decides (a name that does not exist, with its suggestions:
//! `errors::decided_by_the_index`) are kept, never a result flagged as an error; an entry is held as its JSON text (a parsed JSON value takes several times its text) and
//! charged for it plus a fixed overhead, and the charges stay within the budget (the oldest
//! entries go first).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest share of the budget one answer may take: a page of a huge listing is not worth
/// evicting many small answers for.
const LARGEST_SHARE: usize = 16;

/// Largest answer kept, in bytes of JSON: each hit parses it again on the thread that
/// received the call, which must stay short.
pub const LARGEST_ANSWER: usize = 256 * 1024;

/// Bytes an entry is charged besides its answer text: its key, map and queue slots, the
/// allocations' headers.
const ENTRY_OVERHEAD: usize = 160;

/// The cache of one server; cheap to share between its connections.
pub struct AnswerCache {
    budget: usize,
    inner: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A call's identity: the SHA-256 of its tool name and arguments, so that a large argument
/// (a diff) is hashed once, outside the lock, and held in 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

#[derive(Default)]
struct Entries {
    generation: u64,
    by_key: HashMap<Key, Arc<Cached>>,
    /// Keys in the order they were stored, oldest first.
    order: VecDeque<Key>,
    bytes: usize,
}

struct Cached {
    /// The [`Outcome`] as JSON, parsed again for each call it answers.
    json: Box<str>,
    bytes: usize,
}

/// How a call ended: its result, or the error answered instead.
pub type Outcome = Result<CallToolResult, ErrorData>;

/// An [`Outcome`] as it is written in the cache.
#[derive(Serialize, Deserialize)]
enum Stored<R, E> {
    Answer(R),
    Error(E),
}

/// Counters reported by `GET /healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Budget in bytes (0: the cache is off).
    pub budget_bytes: usize,
    /// Bytes the entries are charged.
    pub bytes: usize,
    /// Answers held.
    pub entries: usize,
    /// Calls answered from the cache since the server started.
    pub hits: u64,
    /// Cacheable calls that had to be computed.
    pub misses: u64,
}

impl AnswerCache {
    /// A cache holding up to `budget` bytes of answers; 0 turns it off.
    pub fn new(budget: usize) -> AnswerCache {
        AnswerCache {
            budget,
            inner: Mutex::new(Entries::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether answers are kept at all.
    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// The key of a call of `tool` with `arguments`; `None` when they cannot be written as
    /// JSON (such a call is not cached).
    pub fn key(
        tool: &str,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Option<Key> {
        let mut hasher = Sha256::new();
        hasher.update(tool.as_bytes());
        hasher.update(b"\n");
        if let Some(arguments) = arguments {
            hasher.update(serde_json::to_vec(arguments).ok()?);
        }
        Some(Key(hasher.finalize().into()))
    }

    /// The outcome stored under `key` in `generation`, if any.
    pub fn get(&self, generation: u64, key: &Key) -> Option<Outcome> {
        let (found, old) = {
            let mut entries = self.lock();
            let old = entries.start(generation);
            let found = if entries.generation == generation {
                entries.by_key.get(key).cloned()
            } else {
                None
            };
            (found, old)
        };
        drop(old);
        let stored = found.and_then(|cached| serde_json::from_str(&cached.json).ok());
        match stored.map(|stored| match stored {
            Stored::Answer(result) => Ok(result),
            Stored::Error(error) => Err(error),
        }) {
            Some(result) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(result)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Stores `outcome` under `key` for `generation`, evicting the oldest entries to stay
    /// within the budget. A result flagged as an error, or one larger than [`LARGEST_ANSWER`]
    /// or a sixteenth of the budget, is not kept; the caller passes only the errors worth
    /// keeping.
    pub fn put(&self, generation: u64, key: Key, outcome: Result<&CallToolResult, &ErrorData>) {
        let largest = (self.budget / LARGEST_SHARE).min(LARGEST_ANSWER);
        if !self.enabled() {
            return;
        }
        let stored = match outcome {
            Ok(result) => {
                let text: usize = result
                    .content
                    .iter()
                    .map(|block| match block {
                        ContentBlock::Text(text) => text.text.len(),
                        _ => 0,
                    })
                    .sum();
                if result.is_error == Some(true) || text > largest {
                    return;
                }
                Stored::Answer(result)
            }
            Err(error) => Stored::Error(error),
        };
        let Ok(json) = serde_json::to_string(&stored) else {
            return;
        };
        let bytes = json.len() + ENTRY_OVERHEAD;
        if bytes > largest {
            return;
        }
        let cached = Arc::new(Cached {
            json: json.into(),
            bytes,
        });
        let mut evicted = Vec::new();
        let mut entries = self.lock();
        let old = entries.start(generation);
        if entries.generation != generation || entries.by_key.contains_key(&key) {
            // Computed for an older index, or by another call with the same arguments.
            drop(entries);
            return;
        }
        entries.by_key.insert(key, cached);
        entries.bytes += bytes;
        entries.order.push_back(key);
        while entries.bytes > self.budget {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            if let Some(gone) = entries.by_key.remove(&oldest) {
                entries.bytes -= gone.bytes;
                evicted.push(gone);
            }
        }
        drop(entries);
        drop((old, evicted));
    }

    /// The cache's counters.
    pub fn stats(&self) -> CacheStats {
        let entries = self.lock();
        CacheStats {
            budget_bytes: self.budget,
            bytes: entries.bytes,
            entries: entries.by_key.len(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Entries {
    /// Empties the cache when `generation` is newer than its entries'; returns the entries
    /// of the older generation, to be freed once the lock is released.
    fn start(&mut self, generation: u64) -> Option<Entries> {
        (generation > self.generation).then(|| {
            std::mem::replace(
                self,
                Entries {
                    generation,
                    ..Entries::default()
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str) -> Key {
        AnswerCache::key(name, None).unwrap()
    }

    fn answer(text: &str) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    fn text(outcome: &Outcome) -> String {
        match &outcome.as_ref().expect("an answer").content[0] {
            ContentBlock::Text(t) => t.text.clone(),
            _ => panic!("not text"),
        }
    }

    #[test]
    fn answers_come_back_within_their_generation_only() {
        let cache = AnswerCache::new(1 << 20);
        let key = k("acp_query");
        assert!(cache.get(1, &key).is_none());
        cache.put(1, key, Ok(&answer("first")));
        assert_eq!(text(&cache.get(1, &key).unwrap()), "first");
        // A new generation empties the cache; an answer computed in an older one is dropped,
        // and a call that began in an older one is not answered from the newer one.
        assert!(cache.get(2, &key).is_none());
        cache.put(1, key, Ok(&answer("late")));
        assert!(cache.get(2, &key).is_none());
        cache.put(2, key, Ok(&answer("second")));
        assert!(cache.get(1, &key).is_none());
        assert_eq!(text(&cache.get(2, &key).unwrap()), "second");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (2, 4, 1));
    }

    #[test]
    fn errors_and_oversized_answers_are_not_kept() {
        let cache = AnswerCache::new(16 * 1024);
        let mut failed = answer("no");
        failed.is_error = Some(true);
        cache.put(1, k("a"), Ok(&failed));
        cache.put(1, k("b"), Ok(&answer(&"x".repeat(2000))));
        assert_eq!(cache.stats().entries, 0);
        cache.put(1, k("c"), Ok(&answer("small")));
        assert_eq!(cache.stats().entries, 1);
    }

    #[test]
    fn an_error_comes_back_as_it_was_given() {
        let cache = AnswerCache::new(16 * 1024);
        let error = ErrorData::invalid_params(
            "Symbol not found: x",
            Some(serde_json::json!({"suggestions": ["a.ts:xy"]})),
        );
        cache.put(1, k("miss"), Err(&error));
        assert_eq!(cache.get(1, &k("miss")), Some(Err(error)));
        assert!(cache.get(2, &k("miss")).is_none());
    }

    #[test]
    fn the_oldest_answers_go_first_when_the_budget_is_spent() {
        let cache = AnswerCache::new(16 * 1024);
        for n in 0..100 {
            cache.put(1, k(&format!("key {n}")), Ok(&answer(&"y".repeat(500))));
        }
        let stats = cache.stats();
        assert!(stats.bytes <= stats.budget_bytes, "{stats:?}");
        assert!(stats.entries > 0 && stats.entries < 100, "{stats:?}");
        assert!(cache.get(1, &k("key 0")).is_none());
        assert!(cache.get(1, &k("key 99")).is_some());
        // Another call with the same arguments, computed meanwhile, leaves the first answer.
        cache.put(1, k("key 99"), Ok(&answer("z")));
        assert_ne!(text(&cache.get(1, &k("key 99")).unwrap()), "z");
        assert_eq!(cache.stats().bytes, stats.bytes);
    }

    #[test]
    fn a_cached_answer_is_the_answer_given_bit_for_bit() {
        let cache = AnswerCache::new(1 << 20);
        let mut x = 0.1f64;
        let numbers: Vec<f64> = (0..2000)
            .map(|n| {
                x = (x * 3.7 + 0.123_456_789).fract() * 10f64.powi(n % 40 - 20);
                x
            })
            .collect();
        let mut given = answer("text with \"quotes\", \\ and é");
        given.structured_content =
            Some(serde_json::json!({"numbers": numbers, "n": u64::MAX, "m": i64::MIN}));
        cache.put(1, k("k"), Ok(&given));
        assert_eq!(cache.get(1, &k("k")), Some(Ok(given)));
    }

    #[test]
    fn a_cache_of_no_bytes_keeps_nothing() {
        let cache = AnswerCache::new(0);
        assert!(!cache.enabled());
        cache.put(1, k("a"), Ok(&answer("a")));
        assert!(cache.get(1, &k("a")).is_none());
    }

    #[test]
    fn keys_tell_tools_and_arguments_apart() {
        let args: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"name":"a"}"#).unwrap();
        assert_ne!(
            AnswerCache::key("acp_query", Some(&args)),
            AnswerCache::key("acp_constraints", Some(&args))
        );
        assert_ne!(
            AnswerCache::key("acp_query", Some(&args)),
            AnswerCache::key("acp_query", None)
        );
    }
}
