//! Text: identifiers, paths, signatures and descriptions.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat};

use super::model::*;
use super::rng::*;
use super::vocabulary::*;

#[derive(Clone, Copy)]
pub(super) enum Case {
    Camel,
    Pascal,
    Snake,
    UpperSnake,
}

pub(super) fn push_capitalized(buf: &mut String, word: &str) {
    let mut chars = word.chars();
    if let Some(c) = chars.next() {
        buf.push(c.to_ascii_uppercase());
        buf.push_str(chars.as_str());
    }
}

pub(super) fn push_ident(buf: &mut String, words: &[&str], case: Case) {
    for (k, word) in words.iter().enumerate() {
        match case {
            Case::Camel if k == 0 => buf.push_str(word),
            Case::Camel | Case::Pascal => push_capitalized(buf, word),
            Case::Snake | Case::UpperSnake => {
                if k > 0 {
                    buf.push('_');
                }
                if matches!(case, Case::UpperSnake) {
                    buf.extend(word.chars().map(|c| c.to_ascii_uppercase()));
                } else {
                    buf.push_str(word);
                }
            }
        }
    }
}

/// Words of a symbol name without case: `[verb, adj?, noun]`, `[adj?, noun, tail]` or
/// `[adj?, noun, suffix]`.
pub(super) fn name_words(sym: &Sym) -> ([&'static str; 3], usize) {
    let mut words = [""; 3];
    let mut n = 0;
    let mut push = |w: &'static str| {
        words[n] = w;
        n += 1;
    };
    if sym.callable() {
        push(VERBS[sym.verb].0);
    }
    if let Some(a) = sym.adjective {
        push(ADJECTIVES[a]);
    }
    push(NOUNS[sym.noun]);
    match sym.kind {
        Kind::Function | Kind::Method => {}
        Kind::Const => push(CONST_TAILS[sym.tail]),
        _ => push(TYPE_SUFFIXES[sym.suffix]),
    }
    (words, n)
}

pub(super) fn push_name(buf: &mut String, file: &FileInfo, sym: &Sym) {
    if let Some(name) = sym.common {
        buf.push_str(name);
        return;
    }
    let (words, n) = name_words(sym);
    let words = &words[..n];
    let private = sym.visibility == Visibility::Private;
    let case = match (file.lang, sym.kind) {
        (Lang::Go, _) if private => Case::Camel,
        (Lang::Go, _) => Case::Pascal,
        (Lang::TypeScript, Kind::Const) if sym.upper_const => Case::UpperSnake,
        (Lang::TypeScript, Kind::Function | Kind::Method | Kind::Const) => Case::Camel,
        (Lang::Rust | Lang::Python, Kind::Const) => Case::UpperSnake,
        (Lang::Rust | Lang::Python, Kind::Function | Kind::Method) => Case::Snake,
        _ => Case::Pascal,
    };
    if file.lang == Lang::Python && private {
        buf.push('_');
    }
    push_ident(buf, words, case);
    if sym.round > 0 {
        let _ = write!(buf, "{}", sym.round);
    }
}

/// Appends `src/<domain>/<stem>.<ext>` (no `./`).
pub(super) fn push_path(buf: &mut String, file: &FileInfo) {
    buf.push_str("src/");
    buf.push_str(DOMAINS[file.dir]);
    buf.push('/');
    if file.moved {
        buf.push_str("moved/");
    }
    let noun = NOUNS[file.stem_noun];
    let suffix = FILE_SUFFIXES[file.stem_suffix].0;
    let words: &[&str] = if suffix.is_empty() {
        &[noun]
    } else {
        &[noun, suffix]
    };
    let case = if file.lang == Lang::TypeScript {
        Case::Camel
    } else {
        Case::Snake
    };
    push_ident(buf, words, case);
    if file.stem_round > 0 {
        let _ = write!(buf, "{}", file.stem_round);
    }
    buf.push_str(match file.lang {
        Lang::TypeScript if file.tsx => ".tsx",
        Lang::TypeScript => ".ts",
        Lang::Rust => ".rs",
        Lang::Python => ".py",
        Lang::Go => ".go",
    });
}

/// Title-cased words of a file stem (`Session Store`).
pub(super) fn push_module(buf: &mut String, file: &FileInfo) {
    push_capitalized(buf, NOUNS[file.stem_noun]);
    let suffix = FILE_SUFFIXES[file.stem_suffix].0;
    if !suffix.is_empty() {
        buf.push(' ');
        push_capitalized(buf, suffix);
    }
}

pub(super) fn file_role(file: &FileInfo) -> &'static str {
    match FILE_SUFFIXES[file.stem_suffix].0 {
        "" => "module",
        s => s,
    }
}

pub(super) fn push_file_summary(buf: &mut String, file: &FileInfo) {
    push_capitalized(buf, NOUNS[file.stem_noun]);
    let _ = write!(
        buf,
        " {} for the {} domain",
        file_role(file),
        DOMAINS[file.dir]
    );
}

pub(super) fn push_file_purpose(buf: &mut String, file: &FileInfo) {
    let _ = write!(
        buf,
        "Owns {} {} logic shared by the {} handlers",
        NOUNS[file.stem_noun],
        file_role(file),
        DOMAINS[file.dir]
    );
}

pub(super) fn push_summary(buf: &mut String, file: &FileInfo, sym: &Sym, tail: usize) {
    let noun = NOUNS[sym.noun];
    let adjective = sym.adjective.map(|a| ADJECTIVES[a]);
    match sym.kind {
        Kind::Function | Kind::Method => {
            buf.push_str(VERBS[sym.verb].1);
            buf.push_str(" the ");
            if let Some(a) = adjective {
                buf.push_str(a);
                buf.push(' ');
            }
            buf.push_str(noun);
            buf.push_str(SUMMARY_TAILS[tail]);
            buf.push('.');
        }
        Kind::Const => {
            let _ = write!(
                buf,
                "Default {} {} used by the {} module.",
                noun, CONST_TAILS[sym.tail], DOMAINS[file.dir]
            );
        }
        _ => {
            push_capitalized(buf, adjective.unwrap_or(noun));
            if adjective.is_some() {
                buf.push(' ');
                buf.push_str(noun);
            }
            let _ = write!(
                buf,
                " {} for the {} domain.",
                TYPE_SUFFIXES[sym.suffix], DOMAINS[file.dir]
            );
        }
    }
    if sym.summary_note {
        let _ = write!(
            buf,
            "\n@acp:perf Hot path - keep allocations out of the {noun} loop"
        );
    }
}

pub(super) fn push_type_name(buf: &mut String, lang: Lang, noun: usize, kind: usize) {
    if kind < 3 {
        buf.push_str(lang.primitives()[kind]);
    } else {
        push_capitalized(buf, NOUNS[noun]);
    }
}

/// Appends a declaration line in the file's language; returns false for symbols without one.
pub(super) fn push_signature(buf: &mut String, file: &FileInfo, sym: &Sym, name: &str) -> bool {
    let lang = file.lang;
    let public = sym.visibility == Visibility::Public;
    if !sym.callable() {
        let keyword = match (lang, sym.kind) {
            (_, Kind::Const) => return false,
            (Lang::Go, Kind::Struct) => {
                let _ = write!(buf, "type {name} struct");
                return true;
            }
            (Lang::Go, Kind::Interface) => {
                let _ = write!(buf, "type {name} interface");
                return true;
            }
            (Lang::Go, _) => {
                let _ = write!(buf, "type {name} string");
                return true;
            }
            (Lang::Rust, Kind::Class) => {
                let _ = write!(buf, "impl {name}");
                return true;
            }
            (_, kind) => kind.id(),
        };
        if lang == Lang::Rust && public {
            buf.push_str("pub ");
        } else if lang == Lang::TypeScript && public {
            buf.push_str("export ");
        }
        buf.push_str(keyword);
        buf.push(' ');
        buf.push_str(name);
        if sym.kind == Kind::Type && lang == Lang::TypeScript {
            buf.push_str(" = ");
            push_capitalized(buf, NOUNS[sym.noun]);
            buf.push_str(" | null");
        }
        return true;
    }

    let method = sym.kind == Kind::Method;
    match lang {
        Lang::TypeScript => {
            match sym.visibility {
                Visibility::Private if method => buf.push_str("private "),
                Visibility::Protected => buf.push_str("protected "),
                _ => {}
            }
            if sym.is_async {
                buf.push_str("async ");
            }
            if !method {
                buf.push_str("function ");
            }
        }
        Lang::Rust => {
            if public {
                buf.push_str("pub ");
            }
            if sym.is_async {
                buf.push_str("async ");
            }
            buf.push_str("fn ");
        }
        Lang::Python => {
            if sym.is_async {
                buf.push_str("async ");
            }
            buf.push_str("def ");
        }
        Lang::Go => {
            buf.push_str("func ");
            if method {
                buf.push_str("(r *");
                push_capitalized(buf, NOUNS[file.stem_noun]);
                let suffix = FILE_SUFFIXES[file.stem_suffix].0;
                if !suffix.is_empty() {
                    push_capitalized(buf, suffix);
                }
                buf.push_str(") ");
            }
        }
    }
    buf.push_str(name);
    buf.push('(');
    let mut first = true;
    if method {
        match lang {
            Lang::Rust => {
                buf.push_str("&self");
                first = false;
            }
            Lang::Python => {
                buf.push_str("self");
                first = false;
            }
            _ => {}
        }
    }
    for k in 0..sym.params {
        if !first {
            buf.push_str(", ");
        }
        first = false;
        let noun = (sym.noun + 1 + k * 7) % NOUNS.len();
        let ty = sym.param_types[k];
        buf.push_str(NOUNS[noun]);
        match lang {
            Lang::TypeScript | Lang::Rust | Lang::Python => buf.push_str(": "),
            Lang::Go => buf.push(' '),
        }
        if ty == 3 {
            match lang {
                Lang::Rust => buf.push('&'),
                Lang::Go => buf.push('*'),
                _ => {}
            }
        }
        push_type_name(buf, lang, noun, ty);
    }
    buf.push(')');
    let ret = sym.returns;
    match lang {
        Lang::TypeScript => {
            buf.push_str(": ");
            if sym.is_async {
                buf.push_str("Promise<");
            }
            match ret {
                0 => buf.push_str("void"),
                1 => buf.push_str("boolean"),
                _ => push_capitalized(buf, NOUNS[sym.noun]),
            }
            if sym.is_async {
                buf.push('>');
            }
        }
        Lang::Rust => match ret {
            0 => {}
            1 => buf.push_str(" -> bool"),
            _ => {
                buf.push_str(" -> Result<");
                push_capitalized(buf, NOUNS[sym.noun]);
                buf.push('>');
            }
        },
        Lang::Python => {
            buf.push_str(" -> ");
            match ret {
                0 => buf.push_str("None"),
                1 => buf.push_str("bool"),
                _ => push_capitalized(buf, NOUNS[sym.noun]),
            }
        }
        Lang::Go => match ret {
            0 => buf.push_str(" error"),
            1 => buf.push_str(" bool"),
            _ => {
                buf.push_str(" (*");
                push_capitalized(buf, NOUNS[sym.noun]);
                buf.push_str(", error)");
            }
        },
    }
    true
}

pub(super) fn rfc3339(secs: i64, nanos: u32) -> String {
    DateTime::from_timestamp(secs, nanos)
        .expect("timestamps stay within chrono's range")
        .to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

pub(super) fn push_hex_sha(buf: &mut String, rng: &mut Rng) {
    let _ = write!(
        buf,
        "{:016x}{:016x}{:08x}",
        rng.next_u64(),
        rng.next_u64(),
        rng.next_u64() as u32
    );
}

/// `PREFIX_` + the upper-cased text with every character outside `[A-Za-z0-9]` turned into `_`.
pub(super) fn var_name(prefix: &str, text: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + text.len());
    name.push_str(prefix);
    name.extend(text.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    name
}

impl Plan {
    /// Appends what makes the name of a symbol this revision replaced ([`Plan::replaced`])
    /// new, when symbol `i` is one: its entry, its exports and its calls (as a caller) go by
    /// the new name; calls to it keep the old one.
    pub(super) fn push_own_name(&self, buf: &mut String, i: u32) {
        if self.replaced(i) {
            let _ = write!(buf, "Rev{}", self.revision);
        }
    }

    /// Appends the call-graph name of node `i`: the qualified name of symbol `i`, or for
    /// `i >= symbols` a name that resolves to no symbol: a builtin, a symbol since removed
    /// (the qualified name of a symbol with [`REMOVED_SUFFIX`]) or a library call
    /// (`noun.verbAdjective`, distinct for each `i`).
    pub(super) fn push_qualified(&self, buf: &mut String, i: u32) {
        if i >= self.symbols {
            let k = (i - self.symbols) as usize;
            if let Some(builtin) = BUILTINS.get(k) {
                buf.push_str(builtin);
            } else if k.is_multiple_of(4) {
                self.push_qualified(buf, (k as u64 * 7919 % u64::from(self.symbols)) as u32);
                buf.push_str(REMOVED_SUFFIX);
            } else {
                let (nouns, verbs, adjectives) = (NOUNS.len(), VERBS.len(), ADJECTIVES.len());
                buf.push_str(NOUNS[k % nouns]);
                buf.push('.');
                buf.push_str(VERBS[k / nouns % verbs].0);
                let round = k / (nouns * verbs);
                if round > 0 {
                    push_capitalized(buf, ADJECTIVES[(round - 1) % adjectives]);
                    let again = (round - 1) / adjectives;
                    if again > 0 {
                        let _ = write!(buf, "{again}");
                    }
                }
            }
            return;
        }
        let file = self.file(self.file_of(i));
        let sym = self.symbol(&file, i);
        push_path(buf, &file);
        buf.push(':');
        push_name(buf, &file, &sym);
    }
}
