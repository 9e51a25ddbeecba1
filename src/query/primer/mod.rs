//! `acp_generate_primer`: a budgeted briefing assembled from the embedded section library.
//!
//! Reproduces acp-mcp 0.2.0: sections are scored against the project state (modifier
//! conditions), filtered by capability/category/tag, selected in three phases within the token
//! budget, and rendered in inclusion order. Static sections render their template verbatim;
//! dynamic sections with data render only their header and footer (the reference never reads
//! the item templates). `tokens_used` is the sum of the sections' token estimates.

mod library;
mod select;
mod state;

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::without_description;
use super::{QueryError, QueryResult};
use library::{Section, Template};
use select::{Filters, Weights};
use state::ProjectState;

/// Arguments of `acp_generate_primer`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct GeneratePrimerParams {
    /// Maximum token budget for the primer (default: 4000)
    #[serde(default = "default_token_budget")]
    pub token_budget: usize,
    /// Output format: "markdown", "compact", or "json" (default: "markdown")
    #[serde(default = "default_format")]
    pub format: String,
    /// Weight preset: "safe", "efficient", "accurate", or "balanced" (default: "balanced")
    #[serde(default = "default_preset")]
    pub preset: String,
    /// Available capabilities (default: ["shell", "file-read", "file-write"])
    #[serde(default = "default_capabilities")]
    pub capabilities: Vec<String>,
    /// Filter by categories (optional)
    #[serde(default)]
    pub categories: Option<Vec<String>>,
    /// Filter by tags (optional)
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Force include specific section IDs (optional)
    #[serde(default)]
    pub force_include: Vec<String>,
}

impl Default for GeneratePrimerParams {
    fn default() -> Self {
        GeneratePrimerParams {
            token_budget: default_token_budget(),
            format: default_format(),
            preset: default_preset(),
            capabilities: default_capabilities(),
            categories: None,
            tags: None,
            force_include: Vec::new(),
        }
    }
}

fn default_token_budget() -> usize {
    4000
}

fn default_format() -> String {
    "markdown".into()
}

fn default_preset() -> String {
    "balanced".into()
}

fn default_capabilities() -> Vec<String> {
    vec!["shell".into(), "file-read".into(), "file-write".into()]
}

/// Answer of `acp_generate_primer`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Primer {
    /// The rendered primer.
    pub content: String,
    /// Sum of the included sections' token estimates.
    pub tokens_used: u64,
    /// The requested budget.
    pub token_budget: u64,
    /// Number of sections included.
    pub sections_included: usize,
    /// Eligible sections left out for lack of budget.
    pub sections_excluded: usize,
}

/// Output format of the rendered primer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Markdown,
    Compact,
    Json,
}

impl Format {
    /// Case-insensitive; unknown names mean markdown.
    fn parse(name: &str) -> Format {
        match name.to_lowercase().as_str() {
            "compact" => Format::Compact,
            "json" => Format::Json,
            _ => Format::Markdown,
        }
    }

    fn template(self, section: &Section) -> Option<&Template> {
        match self {
            Format::Markdown => section.formats.markdown.as_ref(),
            Format::Compact => section.formats.compact.as_ref(),
            Format::Json => section.formats.json.as_ref(),
        }
    }
}

/// Generates the primer for the indexed project.
pub fn generate_primer(conn: &Connection, params: &GeneratePrimerParams) -> QueryResult<Primer> {
    let library = library::library().map_err(QueryError::Internal)?;
    let state = ProjectState::load(conn)?;
    let weights = Weights::for_preset(&params.preset);
    let scored = library
        .sections
        .iter()
        .map(|section| select::score(section, &state, weights))
        .collect();
    let budget = params.token_budget as u64;
    let selection = select::select(
        scored,
        budget,
        Filters {
            capabilities: &params.capabilities,
            categories: params.categories.as_deref(),
            tags: params.tags.as_deref(),
            force_include: &params.force_include,
        },
    );
    let format = Format::parse(&params.format);
    let mut parts = Vec::new();
    for included in &selection.included {
        let text = render(included.section, format, &state);
        if !text.is_empty() {
            parts.push(text);
        }
    }
    let content = match format {
        Format::Markdown => parts.join("\n\n"),
        Format::Compact => parts.join(" | "),
        Format::Json => format!("[\n{}\n]", parts.join(",\n")),
    };
    Ok(Primer {
        content,
        tokens_used: selection.tokens_used,
        token_budget: budget,
        sections_included: selection.included.len(),
        sections_excluded: selection.excluded,
    })
}

fn render(section: &Section, format: Format, state: &ProjectState) -> String {
    let Some(template) = format.template(section) else {
        return String::new();
    };
    let Some(data) = &section.data else {
        return template.template.clone().unwrap_or_default();
    };
    if !has_items(&data.source, data.filter.as_ref(), state) {
        return String::new();
    }
    format!(
        "{}{}",
        template.header.as_deref().unwrap_or(""),
        template.footer.as_deref().unwrap_or("")
    )
}

/// Whether a dynamic section's data source yields any item.
fn has_items(source: &str, filter: Option<&serde_json::Value>, state: &ProjectState) -> bool {
    match source {
        "cache.domains" => state.domains > 0,
        "cache.layers" => state.layers > 0,
        "cache.constraints.by_lock_level" => {
            let levels: Vec<&str> = match filter {
                Some(serde_json::Value::Array(items)) => {
                    items.iter().filter_map(serde_json::Value::as_str).collect()
                }
                _ => vec!["frozen", "restricted"],
            };
            state.entries_in(&levels) > 0
        }
        "cache.entryPoints" => state.entry_point_files > 0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_default_like_the_reference() {
        let params: GeneratePrimerParams = serde_json::from_str("{}").unwrap();
        assert_eq!(params.token_budget, 4000);
        assert_eq!(params.capabilities, ["shell", "file-read", "file-write"]);
        assert!(params.categories.is_none());
        assert!(serde_json::from_str::<GeneratePrimerParams>(r#"{"token_budget": -1}"#).is_err());
    }

    #[test]
    fn formats_fall_back_to_markdown() {
        assert_eq!(Format::parse("JSON"), Format::Json);
        assert_eq!(Format::parse("Compact"), Format::Compact);
        assert_eq!(Format::parse("html"), Format::Markdown);
    }
}
