//! The cache document, section by section in acp-cli's field order.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::json::*;
use super::model::*;
use super::rng::*;
use super::text::*;
use super::vocabulary::*;
use crate::cache::{lock_level_rank, LOCK_LEVELS};

pub(super) fn write_cache<W: Write>(
    plan: &Plan,
    totals: &Totals,
    json: &mut Json<W>,
) -> io::Result<u64> {
    let generated_at = rfc3339(BASE_SECS, BASE_NANOS);
    json.begin_object()?;
    json.field_str("$schema", CACHE_SCHEMA)?;
    json.field_str("version", GENERATOR_VERSION)?;
    json.field_str("generated_at", &generated_at)?;
    let mut sha = String::new();
    push_hex_sha(&mut sha, &mut stream(plan.seed, SALT_GIT, u64::MAX));
    json.field_str("git_commit", &sha)?;

    json.key("project")?;
    json.begin_object()?;
    json.field_str("name", "project")?;
    json.field_str("root", ".")?;
    json.end_object()?;

    json.key("stats")?;
    json.begin_object()?;
    json.field_uint("files", u64::from(plan.files))?;
    json.field_uint("symbols", u64::from(plan.symbols))?;
    json.field_uint("lines", totals.lines)?;
    json.key("annotationCoverage")?;
    let coverage = if plan.symbols == 0 {
        0.0
    } else {
        totals.summaries as f64 * 100.0 / f64::from(plan.symbols)
    };
    json.float(coverage)?;
    json.end_object()?;

    write_source_files(plan, json)?;
    write_files(plan, json)?;
    write_symbols(plan, json)?;
    let edges = write_graph(plan, json)?;
    write_domains(plan, totals, json)?;
    if totals.constrained {
        write_constraints(plan, &generated_at, json)?;
    }
    if totals.provenance > 0 {
        write_provenance(totals.provenance, json)?;
    }
    json.end_object()?;
    Ok(edges)
}

pub(super) fn write_source_files<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    json.key("source_files")?;
    json.begin_object()?;
    for f in plan.written_order(plan.files) {
        let file = plan.file(f);
        path.clear();
        push_path(&mut path, &file);
        json.key(&path)?;
        json.string(&rfc3339(file.mtime.0, file.mtime.1))?;
    }
    json.end_object()
}

pub(super) fn write_files<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    json.key("files")?;
    json.begin_object()?;
    for f in plan.written_order(plan.files) {
        let file = plan.file(f);
        let lines = plan.layout(&file, &mut syms);
        path.clear();
        push_path(&mut path, &file);
        json.file_key_field(&path)?;
        json.begin_object()?;
        json.key("path")?;
        json.file_key(&path)?;
        json.field_uint("lines", u64::from(lines))?;
        json.field_str("language", file.lang.id())?;
        json.key("exports")?;
        json.begin_array()?;
        if file.exports {
            let own = (file.first_symbol..).zip(&syms);
            for (i, sym) in own.filter(|(_, s)| s.exported()).take(3) {
                text.clear();
                push_name(&mut text, &file, sym);
                plan.push_own_name(&mut text, i);
                json.string(&text)?;
            }
        }
        json.end_array()?;
        json.key("imports")?;
        json.begin_array()?;
        json.end_array()?;
        if file.module {
            text.clear();
            push_module(&mut text, &file);
            json.field_str("module", &text)?;
        }
        let changed = plan.file_changed(f);
        if file.summary || changed {
            text.clear();
            push_file_summary(&mut text, &file);
            push_revision(&mut text, plan, changed);
            json.field_str("summary", &text)?;
        }
        if file.purpose {
            text.clear();
            push_file_purpose(&mut text, &file);
            json.field_str("purpose", &text)?;
        }
        if file.owner {
            text.clear();
            let _ = write!(text, "team-{}", DOMAINS[file.dir]);
            json.field_str("owner", &text)?;
        }
        let marks = plan.inline_marks(&file, lines);
        if !marks.is_empty() {
            json.key("inline")?;
            json.begin_array()?;
            for mark in &marks {
                json.begin_object()?;
                json.field_uint("line", u64::from(mark.line))?;
                json.field_str("type", INLINE_KINDS[mark.kind].0)?;
                if let Some(value) = &mark.value {
                    json.field_str("value", value)?;
                }
                json.field_str("directive", &mark.directive)?;
                if let Some(ticket) = &mark.ticket {
                    json.field_str("ticket", ticket)?;
                }
                if mark.auto_generated {
                    json.field_bool("auto_generated", true)?;
                }
                json.end_object()?;
            }
            json.end_array()?;
        }
        if file.domain {
            json.key("domains")?;
            json.begin_array()?;
            json.string(DOMAINS[file.dir])?;
            json.end_array()?;
        }
        if let Some(layer) = file.layer {
            json.field_str("layer", LAYERS[layer])?;
        }
        if file.ai_hint {
            json.key("ai_hints")?;
            json.begin_array()?;
            text.clear();
            let _ = write!(
                text,
                "ai-careful: {} parsing is brittle",
                NOUNS[file.stem_noun]
            );
            json.string(&text)?;
            json.end_array()?;
        }
        if file.git {
            write_file_git(plan, &file, json, &mut text)?;
        }
        if annotation_count(&file) > 0 {
            write_file_annotations(&file, json, &mut text)?;
        }
        json.end_object()?;
    }
    json.end_object()
}

pub(super) fn write_file_git<W: Write>(
    plan: &Plan,
    file: &FileInfo,
    json: &mut Json<W>,
    text: &mut String,
) -> io::Result<()> {
    let mut rng = stream(plan.seed, SALT_GIT, u64::from(file.index));
    json.key("git")?;
    json.begin_object()?;
    text.clear();
    push_hex_sha(text, &mut rng);
    json.field_str("last_commit", text)?;
    let author = rng.index(AUTHORS.len());
    json.field_str("last_author", AUTHORS[author])?;
    let committed = file.mtime.0 - rng.below(3600) as i64;
    json.field_str("last_modified", &rfc3339(committed, 0))?;
    json.field_uint("commit_count", 1 + rng.below(200))?;
    json.key("contributors")?;
    json.begin_array()?;
    let extra = rng.index(4);
    json.string(AUTHORS[author])?;
    for k in 1..=extra {
        json.string(AUTHORS[(author + k * 3) % AUTHORS.len()])?;
    }
    json.end_array()?;
    json.end_object()
}

pub(super) fn write_file_annotations<W: Write>(
    file: &FileInfo,
    json: &mut Json<W>,
    text: &mut String,
) -> io::Result<()> {
    json.key("annotations")?;
    json.begin_object()?;
    let entry = |json: &mut Json<W>, name: &str, value: &str| -> io::Result<()> {
        json.key(name)?;
        json.begin_object()?;
        json.field_str("value", value)?;
        json.field_bool("reviewed", true)?;
        json.end_object()
    };
    if file.module {
        text.clear();
        text.push('"');
        push_module(text, file);
        text.push('"');
        entry(json, "@acp:module", text)?;
    }
    if file.summary {
        text.clear();
        text.push('"');
        push_file_summary(text, file);
        text.push('"');
        entry(json, "@acp:summary", text)?;
    }
    if file.purpose {
        text.clear();
        text.push('"');
        push_file_purpose(text, file);
        text.push('"');
        entry(json, "@acp:purpose", text)?;
    }
    if file.owner {
        text.clear();
        let _ = write!(text, "team-{}", DOMAINS[file.dir]);
        entry(json, "@acp:owner", text)?;
    }
    if file.domain {
        entry(json, "@acp:domain", DOMAINS[file.dir])?;
    }
    if let Some(layer) = file.layer {
        entry(json, "@acp:layer", LAYERS[layer])?;
    }
    if let Some(level) = file.lock {
        entry(json, "@acp:lock", LOCK_LEVELS[level])?;
    }
    if file.ai_hint {
        entry(json, "@acp:ai-careful", "parsing is brittle")?;
    }
    json.end_object()
}

/// Marks a text of a file changed in this revision.
fn push_revision(text: &mut String, plan: &Plan, changed: bool) {
    if changed {
        let _ = write!(text, " (revision {})", plan.revision);
    }
}

pub(super) fn write_symbols<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    let mut name = String::new();
    let mut qualified = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    json.key("symbols")?;
    json.begin_object()?;
    // The file of the symbol written last, laid out: in file order each file is laid out once,
    // in hash order once for each of its symbols.
    let mut laid_out: Option<FileInfo> = None;
    for i in plan.written_order(plan.symbols) {
        let f = plan.file_of(i);
        let file = match laid_out.take() {
            Some(file) if file.index == f => file,
            _ => {
                let file = plan.file(f);
                plan.layout(&file, &mut syms);
                path.clear();
                push_path(&mut path, &file);
                file
            }
        };
        let sym = &syms[(i - file.first_symbol) as usize];
        name.clear();
        push_name(&mut name, &file, sym);
        plan.push_own_name(&mut name, i);
        qualified.clear();
        qualified.push_str(&path);
        qualified.push(':');
        qualified.push_str(&name);
        json.key(&qualified)?;
        json.begin_object()?;
        json.field_str("name", &name)?;
        json.field_str("qualified_name", &qualified)?;
        json.field_str("type", sym.kind.id())?;
        json.field_str("file", &path)?;
        json.field_lines(sym.start, sym.end)?;
        json.field_bool("exported", sym.exported())?;
        text.clear();
        if push_signature(&mut text, &file, sym, &name) {
            json.field_str("signature", &text)?;
        }
        let changed = plan.file_changed(f);
        if sym.summary.is_some() || changed {
            text.clear();
            if let Some(tail) = sym.summary {
                push_summary(&mut text, &file, sym, tail);
            }
            push_revision(&mut text, plan, changed);
            json.field_str("summary", &text)?;
        }
        if sym.is_async {
            json.field_bool("async", true)?;
        }
        match sym.visibility {
            Visibility::Public => {}
            Visibility::Private => json.field_str("visibility", "private")?,
            Visibility::Protected => json.field_str("visibility", "protected")?,
        }
        json.end_object()?;
        laid_out = Some(file);
    }
    json.end_object()
}

/// Writes `graph`; returns the number of edges.
///
/// `forward` is streamed caller by caller while in-degrees are counted; `reverse` then comes
/// from a second generation pass that scatters callers into per-callee buckets (a counting sort,
/// so each bucket lists its callers in index order).
pub(super) fn write_graph<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<u64> {
    // Nodes: the symbols, then the names that resolve to none.
    let n = plan.symbols as usize + plan.external as usize;
    let mut name = String::new();
    let mut callees = Vec::new();
    let mut indegree = vec![0u32; n];
    let mut edges: u64 = 0;

    json.key("graph")?;
    json.begin_object()?;
    json.key("forward")?;
    json.begin_object()?;
    for i in plan.written_order(plan.symbols) {
        if !plan.is_callable(i) {
            continue;
        }
        plan.callees(i, &mut callees);
        if callees.is_empty() {
            continue;
        }
        name.clear();
        plan.push_qualified(&mut name, i);
        plan.push_own_name(&mut name, i);
        json.key(&name)?;
        json.begin_array()?;
        for &c in &callees {
            indegree[c as usize] += 1;
            name.clear();
            plan.push_qualified(&mut name, c);
            json.string(&name)?;
        }
        json.end_array()?;
        edges += callees.len() as u64;
    }
    json.end_object()?;

    let edge_count = u32::try_from(edges).map_err(|_| {
        invalid(format!(
            "{edges} edges generated; at most {} are supported",
            u32::MAX
        ))
    })?;
    // bucket_start[c]..bucket_start[c + 1] will hold the callers of c; `indegree` becomes the
    // fill cursor of each bucket.
    let mut bucket_start = Vec::with_capacity(n + 1);
    let mut acc = 0u32;
    bucket_start.push(0);
    for cursor in indegree.iter_mut() {
        let count = *cursor;
        *cursor = acc;
        acc += count;
        bucket_start.push(acc);
    }
    let mut callers = vec![0u32; edge_count as usize];
    for i in 0..plan.symbols {
        if !plan.is_callable(i) {
            continue;
        }
        plan.callees(i, &mut callees);
        for &c in &callees {
            let cursor = &mut indegree[c as usize];
            callers[*cursor as usize] = i;
            *cursor += 1;
        }
    }
    drop(indegree);

    json.key("reverse")?;
    json.begin_object()?;
    for c in plan.written_order(n as u32).map(|c| c as usize) {
        let bucket = &callers[bucket_start[c] as usize..bucket_start[c + 1] as usize];
        if bucket.is_empty() {
            continue;
        }
        name.clear();
        plan.push_qualified(&mut name, c as u32);
        json.key(&name)?;
        json.begin_array()?;
        for &caller in bucket {
            name.clear();
            plan.push_qualified(&mut name, caller);
            plan.push_own_name(&mut name, caller);
            json.string(&name)?;
        }
        json.end_array()?;
    }
    json.end_object()?;
    json.end_object()?;
    Ok(edges)
}

pub(super) fn write_domains<W: Write>(
    plan: &Plan,
    totals: &Totals,
    json: &mut Json<W>,
) -> io::Result<()> {
    if totals.domain_files.iter().all(|&c| c == 0) {
        return Ok(());
    }
    let mut path = String::new();
    json.key("domains")?;
    json.begin_object()?;
    for (d, domain) in DOMAINS.iter().enumerate() {
        if totals.domain_files[d] == 0 {
            continue;
        }
        json.key(domain)?;
        json.begin_object()?;
        json.field_str("name", domain)?;
        json.key("files")?;
        json.begin_array()?;
        for f in plan.dir_bounds[d]..plan.dir_bounds[d + 1] {
            let file = plan.file(f);
            if file.domain {
                path.clear();
                push_path(&mut path, &file);
                json.file_key(&path)?;
            }
        }
        json.end_array()?;
        json.key("symbols")?;
        json.begin_array()?;
        json.end_array()?;
        json.end_object()?;
    }
    json.end_object()
}

pub(super) fn write_constraints<W: Write>(
    plan: &Plan,
    generated_at: &str,
    json: &mut Json<W>,
) -> io::Result<()> {
    let mut path = String::new();
    let mut syms = Vec::new();
    let mut by_level: Vec<Vec<u32>> = vec![Vec::new(); LOCK_LEVELS.len()];
    let mut hacks: Vec<(u32, Inline)> = Vec::new();

    json.key("constraints")?;
    json.begin_object()?;
    json.key("by_file")?;
    json.begin_object()?;
    for f in 0..plan.files {
        let file = plan.file(f);
        if file.inline {
            let lines = plan.layout(&file, &mut syms);
            hacks.extend(
                plan.inline_marks(&file, lines)
                    .into_iter()
                    .filter(|m| INLINE_KINDS[m.kind].0 == "hack")
                    .map(|m| (f, m)),
            );
        }
        if file.lock.is_none() && !file.ai_hint {
            continue;
        }
        let level = file.lock.unwrap_or(lock_level_rank("normal"));
        by_level[level].push(f);
        path.clear();
        push_path(&mut path, &file);
        json.file_key_field(&path)?;
        json.begin_object()?;
        json.key("mutation")?;
        json.begin_object()?;
        let level_name = LOCK_LEVELS[level];
        let default_directive = default_directive(level_name);
        json.field_str("level", level_name)?;
        json.field_bool("requires_approval", level_name == "approval-required")?;
        json.field_bool("requires_tests", level_name == "tests-required")?;
        json.field_bool("requires_docs", level_name == "docs-required")?;
        json.end_object()?;
        if file.lock.is_some() {
            if file.custom_directive {
                let directive = format!(
                    "Coordinate with team-{} before changing {} handling",
                    DOMAINS[file.dir], NOUNS[file.stem_noun]
                );
                json.field_str("directive", &directive)?;
            } else {
                json.field_str("directive", default_directive)?;
            }
        } else {
            json.field_bool("auto_generated", true)?;
        }
        json.end_object()?;
    }
    json.end_object()?;

    json.key("hacks")?;
    json.begin_array()?;
    for (f, mark) in &hacks {
        let file = plan.file(*f);
        path.clear();
        path.push_str("./");
        push_path(&mut path, &file);
        json.begin_object()?;
        json.field_str("id", &format!("{path}:{}", mark.line))?;
        json.field_str("type", "workaround")?;
        json.field_str("file", &path)?;
        json.field_uint("line", u64::from(mark.line))?;
        json.field_str("created_at", generated_at)?;
        json.field_str("reason", &mark.reason)?;
        if let Some(ticket) = &mark.ticket {
            json.field_str("ticket", ticket)?;
        }
        json.end_object()?;
    }
    json.end_array()?;

    json.key("debug_sessions")?;
    json.begin_array()?;
    json.end_array()?;

    json.key("by_lock_level")?;
    json.begin_object()?;
    for (level, files) in by_level.iter().enumerate() {
        if files.is_empty() {
            continue;
        }
        json.key(&cli_level_key(LOCK_LEVELS[level]))?;
        json.begin_array()?;
        for &f in files {
            path.clear();
            push_path(&mut path, &plan.file(f));
            json.file_key(&path)?;
        }
        json.end_array()?;
    }
    json.end_object()?;
    json.end_object()
}

pub(super) fn write_provenance<W: Write>(total: u64, json: &mut Json<W>) -> io::Result<()> {
    json.key("provenance")?;
    json.begin_object()?;
    json.key("summary")?;
    json.begin_object()?;
    json.field_uint("total", total)?;
    json.key("bySource")?;
    json.begin_object()?;
    json.field_uint("explicit", total)?;
    for source in ["converted", "heuristic", "refined", "inferred"] {
        json.field_uint(source, 0)?;
    }
    json.end_object()?;
    json.field_uint("needsReview", 0)?;
    json.field_uint("reviewed", total)?;
    json.end_object()?;
    json.end_object()
}
