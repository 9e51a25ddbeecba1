//! Answers of read-only tools kept per index generation, so that a question many agents ask
//! (the architecture, a hot file's context, a common search) is answered once per import.
//!
//! Invariants: an entry is returned only for the generation it was computed in (the index
//! state starts a new generation whenever the served database or its staleness changes, and
//! the first look-up of a new generation empties the cache); only successful answers are kept;
//! an entry is held as its JSON text, so the budget bounds the memory it takes (a parsed JSON
//! value takes several times its text) and the entries stay within it (the oldest go first).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::CallToolResult;
use serde::Serialize;

/// Largest share of the budget one answer may take: a page of a huge listing is not worth
/// evicting many small answers for.
const LARGEST_SHARE: usize = 16;

/// Bytes an entry is charged besides its key and answer text (map slot, order slot, `Arc`).
const ENTRY_OVERHEAD: usize = 96;

/// The cache of one server; cheap to share between its connections.
pub struct AnswerCache {
    budget: usize,
    inner: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Entries {
    generation: u64,
    by_key: HashMap<Arc<str>, Arc<Cached>>,
    /// Keys in the order they were stored, oldest first.
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

struct Cached {
    /// The answer as JSON, parsed again for each call it answers.
    json: Box<str>,
    bytes: usize,
}

/// Counters reported by `GET /healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Budget in bytes (0: the cache is off).
    pub budget_bytes: usize,
    /// Bytes the entries take.
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

    /// The key of a call: the tool's name and its arguments as JSON.
    pub fn key(
        tool: &str,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> String {
        let arguments = arguments.map_or_else(String::new, |a| {
            serde_json::to_string(a).unwrap_or_default()
        });
        format!("{tool}\n{arguments}")
    }

    /// The answer stored under `key` in `generation`, if any.
    pub fn get(&self, generation: u64, key: &str) -> Option<CallToolResult> {
        let found = {
            let mut entries = self.lock();
            entries.start(generation);
            entries.by_key.get(key).cloned()
        };
        match found.and_then(|cached| serde_json::from_str(&cached.json).ok()) {
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

    /// Stores `result` under `key` for `generation`, evicting the oldest entries to stay within
    /// the budget; an error result, or one larger than a sixteenth of the budget, is not kept.
    pub fn put(&self, generation: u64, key: String, result: &CallToolResult) {
        if !self.enabled() || result.is_error == Some(true) {
            return;
        }
        let Ok(json) = serde_json::to_string(result) else {
            return;
        };
        let bytes = key.len() + json.len() + ENTRY_OVERHEAD;
        if bytes > self.budget / LARGEST_SHARE {
            return;
        }
        let cached = Arc::new(Cached {
            json: json.into(),
            bytes,
        });
        let mut entries = self.lock();
        entries.start(generation);
        if entries.generation != generation {
            return;
        }
        let key: Arc<str> = key.into();
        if let Some(old) = entries.by_key.insert(key.clone(), cached) {
            entries.bytes -= old.bytes;
            entries.order.retain(|k| *k != key);
        }
        entries.bytes += bytes;
        entries.order.push_back(key);
        while entries.bytes > self.budget {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            if let Some(gone) = entries.by_key.remove(&oldest) {
                entries.bytes -= gone.bytes;
            }
        }
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
    /// Empties the cache when `generation` is newer than its entries'.
    fn start(&mut self, generation: u64) {
        if generation > self.generation {
            *self = Entries {
                generation,
                ..Entries::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn answer(text: &str) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    fn text(result: &CallToolResult) -> String {
        match &result.content[0] {
            ContentBlock::Text(t) => t.text.clone(),
            _ => panic!("not text"),
        }
    }

    #[test]
    fn answers_come_back_within_their_generation_only() {
        let cache = AnswerCache::new(1 << 20);
        let key = AnswerCache::key("acp_query", None);
        assert!(cache.get(1, &key).is_none());
        cache.put(1, key.clone(), &answer("first"));
        assert_eq!(text(&cache.get(1, &key).unwrap()), "first");
        // A new generation empties the cache, and an answer computed in an older one is dropped.
        assert!(cache.get(2, &key).is_none());
        cache.put(1, key.clone(), &answer("late"));
        assert!(cache.get(2, &key).is_none());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 3, 0));
    }

    #[test]
    fn errors_and_oversized_answers_are_not_kept() {
        let cache = AnswerCache::new(16 * 1024);
        let mut failed = answer("no");
        failed.is_error = Some(true);
        cache.put(1, "a".into(), &failed);
        cache.put(1, "b".into(), &answer(&"x".repeat(2000)));
        assert_eq!(cache.stats().entries, 0);
        cache.put(1, "c".into(), &answer("small"));
        assert_eq!(cache.stats().entries, 1);
    }

    #[test]
    fn the_oldest_answers_go_first_when_the_budget_is_spent() {
        let cache = AnswerCache::new(16 * 1024);
        for n in 0..100 {
            cache.put(1, format!("key {n}"), &answer(&"y".repeat(500)));
        }
        let stats = cache.stats();
        assert!(stats.bytes <= stats.budget_bytes, "{stats:?}");
        assert!(stats.entries > 0 && stats.entries < 100, "{stats:?}");
        assert!(cache.get(1, "key 0").is_none());
        assert!(cache.get(1, "key 99").is_some());
        // Storing a key again replaces its answer and its charge.
        cache.put(1, "key 99".into(), &answer("z"));
        assert_eq!(text(&cache.get(1, "key 99").unwrap()), "z");
        assert!(cache.stats().bytes < stats.bytes);
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
        cache.put(1, "k".into(), &given);
        assert_eq!(cache.get(1, "k"), Some(given));
    }

    #[test]
    fn a_cache_of_no_bytes_keeps_nothing() {
        let cache = AnswerCache::new(0);
        assert!(!cache.enabled());
        cache.put(1, "a".into(), &answer("a"));
        assert!(cache.get(1, "a").is_none());
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
