//! The primer section library (`primer.defaults.json`, embedded), read the way acp-mcp reads it.
//!
//! acp-mcp's types use snake_case member names while the file is camelCase, so every camelCase
//! member (`requiredIf`, `dependsOn`, `conflictsWith`, `capabilitiesAll`, `data.maxItems`,
//! `data.itemTokens`, `formats.*.itemTemplate`, `selectionStrategy`, …) is silently ignored.
//! These types declare only the members acp-mcp actually uses; serde skips the rest the same way.

use std::sync::LazyLock;

use serde::de::{self, Deserializer};
use serde::Deserialize;

const DEFAULTS_JSON: &str = include_str!("primer.defaults.json");

static LIBRARY: LazyLock<Result<Library, String>> = LazyLock::new(|| {
    serde_json::from_str(DEFAULTS_JSON)
        .map_err(|e| format!("embedded primer.defaults.json does not parse: {e}"))
});

/// The embedded section library.
pub(super) fn library() -> Result<&'static Library, String> {
    LIBRARY.as_ref().map_err(Clone::clone)
}

/// The root of `primer.defaults.json`.
#[derive(Debug, Deserialize)]
pub(super) struct Library {
    /// Sections in file order.
    pub sections: Vec<Section>,
}

/// One primer section.
#[derive(Debug, Deserialize)]
pub(super) struct Section {
    /// Section id.
    pub id: String,
    /// Category id.
    pub category: String,
    /// Token cost.
    #[serde(default)]
    pub tokens: Tokens,
    /// Value dimensions and modifiers.
    #[serde(default)]
    pub value: SectionValue,
    /// Included first when it fits.
    #[serde(default)]
    pub required: bool,
    /// Needs at least one of these capabilities (when non-empty).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Data source of a dynamic section.
    #[serde(default)]
    pub data: Option<Data>,
    /// Templates per output format.
    #[serde(default)]
    pub formats: Formats,
    /// Tags for the tag filter.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A section's token cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tokens {
    /// A fixed number.
    Fixed(u64),
    /// Estimated from the data source.
    Dynamic,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::Fixed(30)
    }
}

impl<'de> Deserialize<'de> for Tokens {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(s) if s == "dynamic" => Ok(Tokens::Dynamic),
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(Tokens::Fixed)
                .ok_or_else(|| de::Error::custom("token count must be a non-negative integer")),
            other => Err(de::Error::custom(format!(
                "token count must be a number or \"dynamic\", not {other}"
            ))),
        }
    }
}

/// Value dimensions of a section.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct SectionValue {
    /// Safety (0–100).
    #[serde(default)]
    pub safety: i32,
    /// Efficiency (0–100).
    #[serde(default)]
    pub efficiency: i32,
    /// Accuracy (0–100).
    #[serde(default)]
    pub accuracy: i32,
    /// Base value (default 50).
    #[serde(default = "default_base")]
    pub base: i32,
    /// Conditional adjustments, applied in order.
    #[serde(default)]
    pub modifiers: Vec<Modifier>,
}

impl Default for SectionValue {
    fn default() -> Self {
        SectionValue {
            safety: 0,
            efficiency: 0,
            accuracy: 0,
            base: default_base(),
            modifiers: Vec::new(),
        }
    }
}

fn default_base() -> i32 {
    50
}

/// A conditional adjustment of a section's value.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Modifier {
    /// Condition over the project state, e.g. `constraints.frozenCount > 0`.
    pub condition: String,
    /// Added (then clamped to 0..=200).
    #[serde(default)]
    pub add: Option<i32>,
    /// Multiplied (then truncated).
    #[serde(default)]
    pub multiply: Option<f64>,
    /// Replaces the value.
    #[serde(default)]
    pub set: Option<i32>,
    /// Which dimension(s) it changes.
    #[serde(default)]
    pub dimension: Dimension,
}

/// The target of a modifier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Dimension {
    /// Safety only.
    Safety,
    /// Efficiency only.
    Efficiency,
    /// Accuracy only.
    Accuracy,
    /// Base only.
    Base,
    /// All four.
    #[default]
    All,
}

/// Data source of a dynamic section.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Data {
    /// Source path, e.g. `cache.domains`.
    pub source: String,
    /// A list of lock levels for `cache.constraints.by_lock_level`; other shapes are ignored.
    #[serde(default)]
    pub filter: Option<serde_json::Value>,
}

/// Templates per output format.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Formats {
    /// Markdown template.
    #[serde(default)]
    pub markdown: Option<Template>,
    /// Compact template.
    #[serde(default)]
    pub compact: Option<Template>,
    /// JSON template (null for every shipped section).
    #[serde(default)]
    pub json: Option<Template>,
}

/// One format's templates.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Template {
    /// Static text.
    #[serde(default)]
    pub template: Option<String>,
    /// Text before a dynamic list.
    #[serde(default)]
    pub header: Option<String>,
    /// Text after a dynamic list.
    #[serde(default)]
    pub footer: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_library_parses() {
        let library = library().unwrap();
        assert_eq!(library.sections.len(), 37);
        let frozen = library
            .sections
            .iter()
            .find(|s| s.id == "lock-frozen")
            .unwrap();
        assert_eq!(frozen.value.modifiers.len(), 2);
        assert_eq!(frozen.value.modifiers[1].dimension, Dimension::Safety);
        let protected = library
            .sections
            .iter()
            .find(|s| s.id == "protected-files-list")
            .unwrap();
        assert_eq!(protected.tokens, Tokens::Dynamic);
        assert!(protected.formats.markdown.is_some());
        assert!(protected.formats.json.is_none());
    }
}
