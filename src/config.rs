//! The project's `.acp.config.json`: its `include` and `exclude` globs as a [`PathRules`]
//! matcher (RFC-0013 §8.3: "Tools MUST respect `.acp.config.json` exclude patterns").
//!
//! Only `<root>/.acp.config.json` is read. No file means no rules; a file that cannot be read
//! or is not valid JSON, or whose `include`/`exclude` is not a list of glob strings, is an
//! error naming the file. Only the keys written in the file apply: the schema's defaults are
//! not invented for an absent key.
//!
//! A canonical root-relative path (as `cache::paths` writes it: `src/a.ts`) is excluded when it
//! or one of its parent directories matches an `exclude` glob, or when `include` is present and
//! the path matches none of its globs. Globs follow globset's (and gitignore's) rules: `*` and
//! `?` stay within one path segment, `**` spans any number of them, including none, so
//! `**/node_modules/**` also matches `node_modules/x.js` at the root.
//!
//! A config holds at most [`MAX_PATTERNS`] patterns of at most [`MAX_PATTERN_BYTES`] bytes each
//! (the matcher's time and memory grow with them; a repository anyone can clone carries the
//! file), and the rules of one config's content are compiled once per process.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use anyhow::{bail, Context, Result};
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The config file's name, always at the project root.
pub const CONFIG_FILE: &str = ".acp.config.json";

/// Most patterns a config may hold, `include` and `exclude` together; more is an error naming
/// the limit.
pub const MAX_PATTERNS: usize = 1_000;

/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1_024;

/// The rules last compiled, by the SHA-256 of their config's bytes: the journal reads the
/// config again for every action, and compiling a thousand globs each time would cost more
/// than the action.
static COMPILED: Mutex<Option<PathRules>> = Mutex::new(None);

/// What the `meta` table records for a project without a config file.
pub const NO_CONFIG: &str = "none";

/// What the `meta` table records for an import that ignored the config (`--ignore-config`).
pub const IGNORED: &str = "ignored";

/// The `meta` key of the config's state at import: its SHA-256, [`NO_CONFIG`] or [`IGNORED`].
pub const SHA256_META_KEY: &str = "config_sha256";

/// The `meta` key of the number of entries and list items the config's rules left out.
pub const DROPPED_META_KEY: &str = "config_dropped";

/// A list of globs with their texts, to name the one that matched.
#[derive(Debug, Clone)]
struct Patterns {
    set: GlobSet,
    texts: Vec<String>,
}

impl Patterns {
    fn new(texts: Vec<String>, key: &str, source: &Path) -> Result<Patterns> {
        let mut builder = GlobSetBuilder::new();
        for text in &texts {
            builder.add(glob(text).with_context(|| {
                format!(
                    "{}: `{key}` pattern {text:?} is not a valid glob",
                    source.display()
                )
            })?);
        }
        Ok(Patterns {
            set: builder
                .build()
                .with_context(|| format!("{}: cannot compile `{key}`", source.display()))?,
            texts,
        })
    }

    /// The first pattern (in file order) matching `path`. Most paths match none: asking
    /// whether any matches first is cheaper than listing every match.
    fn first_match(&self, path: &str) -> Option<&str> {
        if !self.set.is_match(path) {
            return None;
        }
        self.set
            .matches(path)
            .into_iter()
            .min()
            .map(|i| self.texts[i].as_str())
    }
}

fn glob(text: &str) -> Result<Glob, globset::Error> {
    let text = text.strip_prefix("./").unwrap_or(text);
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// Why a path is excluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusion<'a> {
    /// The path (or a parent directory) matches this `exclude` pattern.
    Pattern(&'a str),
    /// `include` is present and the path matches none of its patterns.
    NotIncluded,
}

impl fmt::Display for Exclusion<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::Pattern(p) => write!(f, "exclude pattern '{p}'"),
            Exclusion::NotIncluded => write!(f, "it matches no include pattern"),
        }
    }
}

/// The include and exclude rules of a project's config.
#[derive(Debug, Clone)]
pub struct PathRules {
    include: Option<Patterns>,
    exclude: Option<Patterns>,
    /// SHA-256 of the config file's bytes, or [`NO_CONFIG`].
    sha256: String,
}

impl Default for PathRules {
    fn default() -> Self {
        PathRules::none()
    }
}

impl PathRules {
    /// No rules: every path is kept.
    pub fn none() -> PathRules {
        PathRules {
            include: None,
            exclude: None,
            sha256: NO_CONFIG.to_string(),
        }
    }

    /// Reads the config file at `path` (`Project::config`); no file means no rules.
    pub fn load(path: &Path) -> Result<PathRules> {
        match read_config(path)? {
            Some(bytes) => PathRules::parse(&bytes, path),
            None => Ok(PathRules::none()),
        }
    }

    /// Reads a config from an opened file (at most [`CONFIG_LIMIT`] bytes); `source` names the
    /// file in errors.
    pub fn read(file: impl Read, source: &Path) -> Result<PathRules> {
        PathRules::parse(&read_bounded(file, source)?, source)
    }

    /// Parses a config file's bytes; `source` names the file in errors. The rules of the same
    /// bytes as the last ones parsed are not compiled again.
    pub fn parse(bytes: &[u8], source: &Path) -> Result<PathRules> {
        let sha256 = sha256_hex(bytes);
        let mut compiled = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rules) = compiled.as_ref().filter(|rules| rules.sha256 == sha256) {
            return Ok(rules.clone());
        }
        let rules = PathRules::compile(bytes, source, sha256)?;
        *compiled = Some(rules.clone());
        Ok(rules)
    }

    fn compile(bytes: &[u8], source: &Path, sha256: String) -> Result<PathRules> {
        let value: Value = serde_json::from_slice(bytes)
            .with_context(|| format!("{} is not valid JSON", source.display()))?;
        let Value::Object(map) = value else {
            bail!("{} is not a JSON object", source.display());
        };
        let count = |key: &str| map.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        let patterns = count("include") + count("exclude");
        if patterns > MAX_PATTERNS {
            bail!(
                "{}: {patterns} `include` and `exclude` patterns; at most {MAX_PATTERNS} are accepted \
                 (a directory pattern such as `src/gen/**` covers many files)",
                source.display()
            );
        }
        let list = |key: &str| -> Result<Option<Patterns>> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(items)) => {
                    let texts = items
                        .iter()
                        .map(|item| {
                            let text = item.as_str().with_context(|| {
                                format!(
                                    "{}: `{key}` must be a list of glob strings, found {item}",
                                    source.display()
                                )
                            })?;
                            if text.len() > MAX_PATTERN_BYTES {
                                bail!(
                                    "{}: a `{key}` pattern of {} bytes; at most {MAX_PATTERN_BYTES} are accepted",
                                    source.display(),
                                    text.len()
                                );
                            }
                            Ok(text.to_string())
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Patterns::new(texts, key, source).map(Some)
                }
                Some(other) => bail!(
                    "{}: `{key}` must be a list of glob strings, found {other}",
                    source.display()
                ),
            }
        };
        Ok(PathRules {
            include: list("include")?,
            exclude: list("exclude")?,
            sha256,
        })
    }

    /// The hash recorded at import: the config file's SHA-256, or [`NO_CONFIG`].
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether the rules keep every path (no `include`, no `exclude` patterns).
    pub fn keeps_everything(&self) -> bool {
        self.include.is_none() && self.exclude.as_ref().is_none_or(|e| e.texts.is_empty())
    }

    /// Why the canonical root-relative `path` is excluded, or `None` when it is kept.
    pub fn exclusion(&self, path: &str) -> Option<Exclusion<'_>> {
        if self.keeps_everything() {
            return None;
        }
        let path = path.strip_prefix("./").unwrap_or(path);
        if let Some(exclude) = &self.exclude {
            // The path itself, then each parent directory (`vendor` excludes `vendor/a.ts`).
            if let Some(p) = exclude.first_match(path) {
                return Some(Exclusion::Pattern(p));
            }
            let mut dir = path;
            while let Some(at) = dir.rfind('/') {
                dir = &dir[..at];
                if let Some(p) = exclude.first_match(dir) {
                    return Some(Exclusion::Pattern(p));
                }
            }
        }
        if let Some(include) = &self.include {
            if !include.set.is_match(path) {
                return Some(Exclusion::NotIncluded);
            }
        }
        None
    }

    /// Whether the canonical root-relative `path` is excluded.
    pub fn excludes(&self, path: &str) -> bool {
        self.exclusion(path).is_some()
    }

    /// The message refusing an excluded path: `path 'vendor/x.ts' is excluded by
    /// .acp.config.json (exclude pattern '**/vendor/**')`.
    pub fn refusal(&self, path: &str) -> Option<String> {
        self.exclusion(path)
            .map(|why| format!("path '{path}' is excluded by {CONFIG_FILE} ({why})"))
    }
}

/// The most bytes a config file may have (real ones have a few KiB).
pub const CONFIG_LIMIT: u64 = 4 * 1024 * 1024;

/// The bytes of the config file at `path`, `None` when there is none. Anything but a regular
/// file of at most [`CONFIG_LIMIT`] bytes is an error; a FIFO or a device is refused without
/// blocking on it.
fn read_config(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match crate::regular_file::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => {
            bail!("{} {err}", path.display())
        }
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    read_bounded(file, path).map(Some)
}

/// The bytes of a config file, refused beyond [`CONFIG_LIMIT`].
fn read_bounded(file: impl Read, path: &Path) -> Result<Vec<u8>> {
    crate::regular_file::read_limited(file, CONFIG_LIMIT).map_err(|err| match err.kind() {
        std::io::ErrorKind::InvalidData => {
            anyhow::anyhow!(
                "{} {err}; a project config holds a few KiB of rules",
                path.display()
            )
        }
        _ => anyhow::Error::new(err).context(format!("cannot read {}", path.display())),
    })
}

/// The SHA-256 of the config file at `path` as the `meta` table records it ([`NO_CONFIG`] when
/// there is none), read as [`PathRules::load`] reads it.
pub fn file_sha256(path: &Path) -> Result<String> {
    Ok(match read_config(path)? {
        Some(bytes) => sha256_hex(&bytes),
        None => NO_CONFIG.to_string(),
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::encode(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(json: &str) -> PathRules {
        PathRules::parse(json.as_bytes(), Path::new(CONFIG_FILE)).unwrap()
    }

    #[test]
    fn no_keys_keep_everything() {
        let r = rules(r#"{"version": "1.0.0"}"#);
        assert!(r.keeps_everything());
        assert!(!r.excludes("node_modules/x.js"));
        assert!(!r.excludes("a.test.ts"));
        assert!(PathRules::none().exclusion("x").is_none());
        assert_eq!(PathRules::none().sha256(), NO_CONFIG);
    }

    #[test]
    fn double_star_matches_at_the_root_and_below() {
        let r = rules(r#"{"exclude": ["**/node_modules/**", "dist/**"]}"#);
        assert!(r.excludes("node_modules/x.js"));
        assert!(r.excludes("a/b/node_modules/c/d.js"));
        assert!(r.excludes("dist/x.js"));
        assert!(!r.excludes("src/dist/x.js"));
        assert!(!r.excludes("src/node_modules_x/a.js"));
        assert!(!r.excludes("src/a.ts"));
        assert_eq!(
            r.exclusion("a/node_modules/b.js"),
            Some(Exclusion::Pattern("**/node_modules/**"))
        );
    }

    #[test]
    fn star_stays_within_a_segment() {
        let r = rules(r#"{"exclude": ["src/*.gen.ts", "**/*.test.*"]}"#);
        assert!(r.excludes("src/a.gen.ts"));
        assert!(!r.excludes("src/x/a.gen.ts"));
        assert!(r.excludes("a.test.ts"));
        assert!(r.excludes("deep/er/a.test.js"));
    }

    #[test]
    fn a_directory_pattern_excludes_what_it_holds() {
        let r = rules(r#"{"exclude": ["vendor", "./legacy/old"]}"#);
        assert!(r.excludes("vendor/x.ts"));
        assert!(r.excludes("vendor/a/b.ts"));
        assert!(r.excludes("legacy/old/a.ts"));
        assert!(!r.excludes("src/vendor/x.ts"));
        assert!(!r.excludes("vendored.ts"));
    }

    #[test]
    fn include_keeps_only_matches_and_exclude_wins() {
        let r = rules(r#"{"include": ["**/*.ts", "src/**"], "exclude": ["**/vendor/**"]}"#);
        assert!(!r.excludes("a.ts"));
        assert!(!r.excludes("x/y/a.ts"));
        assert!(!r.excludes("src/readme.md"));
        assert_eq!(r.exclusion("docs/readme.md"), Some(Exclusion::NotIncluded));
        assert_eq!(
            r.exclusion("src/vendor/a.ts"),
            Some(Exclusion::Pattern("**/vendor/**"))
        );
        let none = rules(r#"{"include": []}"#);
        assert!(none.excludes("a.ts"), "an empty include keeps nothing");
    }

    #[test]
    fn refusal_names_the_file_and_the_pattern() {
        let r = rules(r#"{"exclude": ["**/vendor/**"]}"#);
        assert_eq!(
            r.refusal("vendor/x.ts").unwrap(),
            "path 'vendor/x.ts' is excluded by .acp.config.json (exclude pattern '**/vendor/**')"
        );
        assert!(r.refusal("src/x.ts").is_none());
    }

    #[test]
    fn bad_configs_are_errors_naming_the_file() {
        for bad in [
            "{",
            "[]",
            r#"{"exclude": "x"}"#,
            r#"{"exclude": [1]}"#,
            r#"{"include": ["a[b"]}"#,
        ] {
            let err = PathRules::parse(bad.as_bytes(), Path::new("/p/.acp.config.json"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("/p/.acp.config.json"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_hash_is_of_the_bytes() {
        let r = rules("{}");
        assert_eq!(
            r.sha256(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn real_generator_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real/demo-ts");
        let r = PathRules::load(&dir.join(CONFIG_FILE)).unwrap();
        assert!(!r.keeps_everything());
        assert!(!r.excludes("src/auth/session.ts"));
        assert!(r.excludes("node_modules/a/index.ts"));
        assert!(r.excludes("README.md"));
    }

    /// The contents a hostile or careless `.acp.config.json` may hold: any bytes, any JSON,
    /// glob lists of every shape around the limits, deep nesting.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn source() -> &'static Path {
            Path::new("/p/.acp.config.json")
        }

        /// A piece of a glob: names, wildcards, classes, alternatives, escapes, and broken ones.
        fn piece() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => "[a-z0-9_.-]{1,8}",
                1 => Just("*".to_string()),
                1 => Just("**".to_string()),
                1 => Just("?".to_string()),
                1 => "\\{[a-z]{1,3},[a-z]{0,3}\\}",
                1 => "\\[!?[a-z]-[a-z]\\]",
                1 => prop::sample::select(vec!["[", "{", "}", "\\", "./", "[]", "{,}", "***"])
                    .prop_map(str::to_string),
                1 => "\\PC{1,4}",
            ]
        }

        fn pattern() -> impl Strategy<Value = String> {
            prop_oneof![
                9 => prop::collection::vec(piece(), 1..6).prop_map(|p| p.join("/")),
                1 => (MAX_PATTERN_BYTES - 2..MAX_PATTERN_BYTES + 3).prop_map(|n| "a".repeat(n)),
            ]
        }

        fn any_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                "\\PC{0,12}".prop_map(Value::from),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                    prop::collection::btree_map("[a-z]{1,8}", inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// What `include` or `exclude` holds: a glob list, one around the count limit, or
        /// anything else.
        fn list() -> impl Strategy<Value = Value> {
            prop_oneof![
                6 => prop::collection::vec(pattern(), 0..24).prop_map(Value::from),
                1 => (MAX_PATTERNS / 2 - 2..MAX_PATTERNS / 2 + 3).prop_map(|n| {
                    Value::from((0..n).map(|i| format!("gen{i}/**/*.ts")).collect::<Vec<_>>())
                }),
                1 => any_json(),
            ]
        }

        fn config() -> impl Strategy<Value = Value> {
            (
                prop::option::of(list()),
                prop::option::of(list()),
                prop::collection::btree_map("[a-z]{1,8}", any_json(), 0..3),
            )
                .prop_map(|(include, exclude, extra)| {
                    let mut map: serde_json::Map<String, Value> = extra.into_iter().collect();
                    map.extend(include.map(|v| ("include".to_string(), v)));
                    map.extend(exclude.map(|v| ("exclude".to_string(), v)));
                    Value::Object(map)
                })
        }

        fn strings(value: Option<&Value>) -> Option<Vec<&str>> {
            match value {
                None | Some(Value::Null) => Some(Vec::new()),
                Some(Value::Array(items)) => items.iter().map(Value::as_str).collect(),
                Some(_) => None,
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any bytes are parsed or refused with an error naming the file; none panics.
            #[test]
            fn any_bytes_are_parsed_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
                if let Err(err) = PathRules::parse(&bytes, source()) {
                    prop_assert!(format!("{err:#}").starts_with("/p/.acp.config.json"), "{err:#}");
                }
            }

            /// A config is accepted exactly when it is within the limits: lists of strings, at
            /// most `MAX_PATTERNS` patterns of at most `MAX_PATTERN_BYTES` each (and valid
            /// globs); accepted rules judge every path the same way each time.
            #[test]
            fn configs_within_the_limits_and_only_those_are_accepted(config in config()) {
                let bytes = serde_json::to_vec(&config).unwrap();
                let parsed = PathRules::parse(&bytes, source());
                let lists = [strings(config.get("include")), strings(config.get("exclude"))];
                let within = match &lists {
                    [Some(include), Some(exclude)] => {
                        include.len() + exclude.len() <= MAX_PATTERNS
                            && include.iter().chain(exclude).all(|p| p.len() <= MAX_PATTERN_BYTES)
                    }
                    _ => false,
                };
                match parsed {
                    Err(err) => {
                        let message = format!("{err:#}");
                        prop_assert!(message.starts_with("/p/.acp.config.json"), "{message}");
                        // Within the limits, only a pattern that is no glob is refused.
                        prop_assert!(!within || message.contains("not a valid glob"), "{message}");
                    }
                    Ok(rules) => {
                        prop_assert!(within, "accepted beyond the limits: {config}");
                        let [_, Some(exclude)] = &lists else { unreachable!() };
                        for pattern in exclude {
                            // A pattern made only of plain names excludes the path it spells.
                            let plain = pattern.trim_start_matches("./");
                            if plain.split('/').all(|part| {
                                !part.is_empty()
                                    && part.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
                            }) {
                                prop_assert!(rules.excludes(plain), "{pattern}");
                            }
                            let first = rules.exclusion(pattern).map(|why| why.to_string());
                            prop_assert_eq!(&first, &rules.exclusion(pattern).map(|why| why.to_string()));
                            prop_assert_eq!(rules.refusal(pattern).is_some(), first.is_some());
                        }
                    }
                }
            }
        }

        /// Nesting far deeper than any config is refused as JSON, without exhausting the stack.
        #[test]
        fn deep_nesting_is_refused() {
            for depth in [200, 100_000] {
                let text = format!(
                    r#"{{"exclude": {}{}}}"#,
                    "[".repeat(depth),
                    "]".repeat(depth)
                );
                let err = PathRules::parse(text.as_bytes(), source()).unwrap_err();
                assert!(format!("{err:#}").contains("not valid JSON"), "{err:#}");
            }
            // Deep but within JSON's nesting limit: refused as no list of strings.
            let text = format!(r#"{{"include": {}{}}}"#, "[".repeat(100), "]".repeat(100));
            let err = PathRules::parse(text.as_bytes(), source()).unwrap_err();
            assert!(
                format!("{err:#}").contains("list of glob strings"),
                "{err:#}"
            );
        }
    }
}
