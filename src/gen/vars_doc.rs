//! The vars file.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::json::*;
use super::model::*;
use super::rng::*;
use super::text::*;
use super::vocabulary::*;

/// Writes the vars document; returns the number of variables.
pub(super) fn write_vars<W: Write>(
    plan: &Plan,
    totals: &Totals,
    json: &mut Json<W>,
) -> io::Result<u64> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut count = 0u64;
    let mut path = String::new();
    let mut name = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    let mut sampled = Vec::new();

    json.begin_object()?;
    json.field_str("$schema", VARS_SCHEMA)?;
    json.field_str("version", GENERATOR_VERSION)?;
    json.key("variables")?;
    json.begin_object()?;

    let symbol_share = (2000.0 / f64::from(plan.symbols.max(1))).clamp(0.01, 0.25);
    let file_share = (500.0 / f64::from(plan.files.max(1))).clamp(0.02, 0.5);
    for f in 0..plan.files {
        let file = plan.file(f);
        sampled.clear();
        sampled.extend(
            (file.first_symbol..file.first_symbol + file.symbol_count)
                .filter(|&i| stream(plan.seed, SALT_VARS, u64::from(i)).chance(symbol_share)),
        );
        if sampled.is_empty() {
            continue;
        }
        plan.layout(&file, &mut syms);
        path.clear();
        push_path(&mut path, &file);
        for &i in &sampled {
            let sym = &syms[(i - file.first_symbol) as usize];
            if !sym.exported() {
                continue;
            }
            name.clear();
            push_name(&mut name, &file, sym);
            let var = var_name("SYM_", &name);
            if !seen.insert(var.clone()) {
                continue;
            }
            json.key(&var)?;
            json.begin_object()?;
            json.field_str("type", "symbol")?;
            text.clear();
            let _ = write!(text, "{path}:{name}");
            json.field_str("value", &text)?;
            if let Some(tail) = sym.summary {
                text.clear();
                push_summary(&mut text, &file, sym, tail);
                json.field_str("description", &text)?;
            }
            json.field_str("source", &path)?;
            json.field_lines(sym.start, sym.end)?;
            json.end_object()?;
            count += 1;
        }
    }

    for f in 0..plan.files {
        let file = plan.file(f);
        if !(file.module || file.summary)
            || !stream(plan.seed, SALT_VARS_FILE, u64::from(f)).chance(file_share)
        {
            continue;
        }
        path.clear();
        path.push_str("./");
        push_path(&mut path, &file);
        let var = var_name("FILE_", &path);
        if !seen.insert(var.clone()) {
            continue;
        }
        json.key(&var)?;
        json.begin_object()?;
        json.field_str("type", "file")?;
        json.field_str("value", &path)?;
        text.clear();
        if file.summary {
            push_file_summary(&mut text, &file);
        } else {
            push_module(&mut text, &file);
        }
        json.field_str("description", &text)?;
        json.end_object()?;
        count += 1;
    }

    for (d, domain) in DOMAINS.iter().enumerate() {
        let files = totals.domain_files[d];
        if files == 0 {
            continue;
        }
        json.key(&var_name("DOM_", domain))?;
        json.begin_object()?;
        json.field_str("type", "domain")?;
        json.field_str("value", domain)?;
        json.field_str("description", &format!("Domain: {domain} ({files} files)"))?;
        json.end_object()?;
        count += 1;
    }

    for (l, layer) in LAYERS.iter().enumerate() {
        let files = totals.layer_files[l];
        if files == 0 {
            continue;
        }
        json.key(&var_name("LAYER_", layer))?;
        json.begin_object()?;
        json.field_str("type", "layer")?;
        json.field_str("value", layer)?;
        json.field_str("description", &format!("Layer: {layer} ({files} files)"))?;
        json.end_object()?;
        count += 1;
    }

    json.end_object()?;
    json.end_object()?;
    Ok(count)
}
