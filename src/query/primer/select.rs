//! Scoring and budgeted selection of primer sections (acp-mcp's phases 1, 3 and 4).
//!
//! Phase 2 (conditionally required sections) never triggers in the reference, because the
//! library's `requiredIf` member is not read; dependencies and conflicts are likewise absent.

use super::library::{Dimension, Modifier, Section, Tokens};
use super::state::ProjectState;

/// Dimension weights of a preset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Weights {
    safety: f64,
    efficiency: f64,
    accuracy: f64,
    base: f64,
}

impl Weights {
    /// Weights of a preset name (case-insensitive; unknown names mean `balanced`).
    pub(super) fn for_preset(preset: &str) -> Weights {
        let (safety, efficiency, accuracy, base) = match preset.to_lowercase().as_str() {
            "safe" => (2.5, 0.8, 1.0, 0.8),
            "efficient" => (1.2, 2.0, 0.9, 0.8),
            "accurate" => (1.2, 0.9, 2.0, 0.8),
            _ => (1.5, 1.0, 1.0, 1.0),
        };
        Weights {
            safety,
            efficiency,
            accuracy,
            base,
        }
    }
}

/// A section with its adjusted values and resolved token cost.
#[derive(Debug, Clone)]
pub(super) struct Scored<'a> {
    /// The library section.
    pub section: &'a Section,
    /// Safety after modifiers.
    safety: i32,
    /// Weighted score after modifiers.
    score: f64,
    /// `score / tokens` (0 when tokens is 0).
    value_per_token: f64,
    /// Token cost.
    pub tokens: u64,
}

/// Scores one section against the project state.
pub(super) fn score<'a>(
    section: &'a Section,
    state: &ProjectState,
    weights: Weights,
) -> Scored<'a> {
    let value = &section.value;
    let mut dims = [value.safety, value.efficiency, value.accuracy, value.base];
    for modifier in &value.modifiers {
        if evaluate(&modifier.condition, state) {
            apply(&mut dims, modifier);
        }
    }
    let [safety, efficiency, accuracy, base] = dims;
    let score = f64::from(safety) * weights.safety
        + f64::from(efficiency) * weights.efficiency
        + f64::from(accuracy) * weights.accuracy
        + f64::from(base) * weights.base;
    let tokens = match section.tokens {
        Tokens::Fixed(n) => n,
        Tokens::Dynamic => match &section.data {
            Some(data) => 15 + 10 * state.item_estimate(&data.source),
            None => 30,
        },
    };
    let value_per_token = if tokens > 0 {
        score / tokens as f64
    } else {
        0.0
    };
    Scored {
        section,
        safety,
        score,
        value_per_token,
        tokens,
    }
}

fn apply(dims: &mut [i32; 4], modifier: &Modifier) {
    let targets: &[usize] = match modifier.dimension {
        Dimension::Safety => &[0],
        Dimension::Efficiency => &[1],
        Dimension::Accuracy => &[2],
        Dimension::Base => &[3],
        Dimension::All => &[0, 1, 2, 3],
    };
    for &i in targets {
        let v = &mut dims[i];
        if let Some(add) = modifier.add {
            *v = v.saturating_add(add).clamp(0, 200);
        }
        if let Some(multiply) = modifier.multiply {
            *v = (f64::from(*v) * multiply) as i32;
        }
        if let Some(set) = modifier.set {
            *v = set;
        }
    }
}

/// Evaluates `path <op> number` (first of ` >= `, ` <= `, ` > `, ` < `, ` == `, ` != ` found);
/// without an operator, whether the path's value is positive. Unknown paths are false.
pub(super) fn evaluate(condition: &str, state: &ProjectState) -> bool {
    let condition = condition.trim();
    for op in [" >= ", " <= ", " > ", " < ", " == ", " != "] {
        if let Some(at) = condition.find(op) {
            let Some(actual) = state.value(condition[..at].trim()) else {
                return false;
            };
            let Ok(expected) = condition[at + op.len()..].trim().parse::<f64>() else {
                return false;
            };
            return match op.trim() {
                ">=" => actual >= expected,
                "<=" => actual <= expected,
                ">" => actual > expected,
                "<" => actual < expected,
                "==" => (actual - expected).abs() < 0.001,
                _ => (actual - expected).abs() >= 0.001,
            };
        }
    }
    state.value(condition).is_some_and(|v| v > 0.0)
}

/// What the request lets through.
#[derive(Debug, Clone, Copy)]
pub(super) struct Filters<'a> {
    /// Agent capabilities.
    pub capabilities: &'a [String],
    /// Category filter.
    pub categories: Option<&'a [String]>,
    /// Tag filter.
    pub tags: Option<&'a [String]>,
    /// Section ids to include like required ones.
    pub force_include: &'a [String],
}

impl Filters<'_> {
    fn admits(&self, section: &Section) -> bool {
        let capable = section.capabilities.is_empty()
            || section
                .capabilities
                .iter()
                .any(|c| self.capabilities.contains(c));
        let in_category = self
            .categories
            .is_none_or(|cats| cats.contains(&section.category));
        let tagged = self
            .tags
            .is_none_or(|tags| section.tags.iter().any(|t| tags.contains(t)));
        capable && in_category && tagged
    }
}

/// The outcome of selection.
#[derive(Debug)]
pub(super) struct Selection<'a> {
    /// Included sections in inclusion order.
    pub included: Vec<Scored<'a>>,
    /// Sum of their token costs.
    pub tokens_used: u64,
    /// Eligible sections left out.
    pub excluded: usize,
}

/// Selects sections within `budget`: required (and forced) ones in file order, then
/// safety-critical ones (adjusted safety ≥ 80) within 40% of the remaining budget, then the
/// rest by value per token.
pub(super) fn select<'a>(scored: Vec<Scored<'a>>, budget: u64, filters: Filters) -> Selection<'a> {
    let eligible: Vec<Scored<'a>> = scored
        .into_iter()
        .filter(|s| filters.admits(s.section))
        .collect();
    let mut taken = vec![false; eligible.len()];
    let mut order: Vec<usize> = Vec::new();
    let mut used: u64 = 0;

    for (i, s) in eligible.iter().enumerate() {
        let forced = s.section.required || filters.force_include.contains(&s.section.id);
        if forced && !taken[i] && used + s.tokens <= budget {
            taken[i] = true;
            order.push(i);
            used += s.tokens;
        }
    }

    let safety_budget = ((budget - used) as f64 * 0.4) as u64;
    let mut safety_spent = 0;
    let mut critical: Vec<usize> = (0..eligible.len())
        .filter(|&i| !taken[i] && eligible[i].safety >= 80)
        .collect();
    critical.sort_by(|&a, &b| {
        let (a, b) = (&eligible[a], &eligible[b]);
        b.safety
            .cmp(&a.safety)
            .then_with(|| b.score.total_cmp(&a.score))
    });
    for i in critical {
        if safety_spent >= safety_budget {
            break;
        }
        let tokens = eligible[i].tokens;
        if used + tokens > budget {
            continue;
        }
        taken[i] = true;
        order.push(i);
        used += tokens;
        safety_spent += tokens;
    }

    let mut rest: Vec<usize> = (0..eligible.len()).filter(|&i| !taken[i]).collect();
    rest.sort_by(|&a, &b| {
        eligible[b]
            .value_per_token
            .total_cmp(&eligible[a].value_per_token)
    });
    for i in rest {
        if used >= budget {
            break;
        }
        let tokens = eligible[i].tokens;
        if used + tokens > budget {
            continue;
        }
        taken[i] = true;
        order.push(i);
        used += tokens;
    }

    let excluded = eligible.len() - order.len();
    let mut slots: Vec<Option<Scored<'a>>> = eligible.into_iter().map(Some).collect();
    let included = order.into_iter().filter_map(|i| slots[i].take()).collect();
    Selection {
        included,
        tokens_used: used,
        excluded,
    }
}
