//! The model: files and symbols derived from indices.

use std::io;

use super::rng::*;
use super::spec::*;
use super::vocabulary::*;
use crate::cache::LOCK_LEVELS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    TypeScript,
    Rust,
    Python,
    Go,
}

impl Lang {
    pub(super) fn id(self) -> &'static str {
        match self {
            Lang::TypeScript => "typescript",
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Go => "go",
        }
    }

    /// Names that recur across files (name, kind, private).
    pub(super) fn common_names(self) -> &'static [(&'static str, Kind, bool)] {
        match self {
            Lang::TypeScript => &[
                ("constructor", Kind::Method, false),
                ("render", Kind::Method, false),
                ("toString", Kind::Method, false),
                ("handle", Kind::Function, false),
                ("main", Kind::Function, false),
            ],
            Lang::Rust => &[
                ("new", Kind::Method, false),
                ("default", Kind::Method, false),
                ("from", Kind::Method, false),
                ("main", Kind::Function, true),
                ("run", Kind::Function, false),
            ],
            Lang::Python => &[
                ("__init__", Kind::Method, false),
                ("__repr__", Kind::Method, false),
                ("main", Kind::Function, false),
                ("run", Kind::Function, false),
                ("setup", Kind::Function, false),
            ],
            Lang::Go => &[
                ("main", Kind::Function, true),
                ("init", Kind::Function, true),
                ("New", Kind::Function, false),
                ("String", Kind::Method, false),
                ("Run", Kind::Function, false),
            ],
        }
    }

    /// Kinds of non-callable symbols with relative weights.
    pub(super) fn type_kinds(self) -> &'static [(Kind, u32)] {
        match self {
            Lang::TypeScript => &[
                (Kind::Class, 40),
                (Kind::Interface, 25),
                (Kind::Type, 10),
                (Kind::Enum, 5),
                (Kind::Const, 20),
            ],
            Lang::Rust => &[
                (Kind::Struct, 40),
                (Kind::Enum, 15),
                (Kind::Trait, 10),
                (Kind::Class, 10),
                (Kind::Const, 20),
                (Kind::Type, 5),
            ],
            Lang::Python => &[(Kind::Class, 75), (Kind::Const, 25)],
            Lang::Go => &[
                (Kind::Struct, 45),
                (Kind::Interface, 20),
                (Kind::Type, 15),
                (Kind::Const, 20),
            ],
        }
    }

    /// Primitive parameter types.
    pub(super) fn primitives(self) -> [&'static str; 3] {
        match self {
            Lang::TypeScript => ["string", "number", "boolean"],
            Lang::Rust => ["&str", "u64", "bool"],
            Lang::Python => ["str", "int", "bool"],
            Lang::Go => ["string", "int", "bool"],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Function,
    Method,
    Class,
    Interface,
    Type,
    Enum,
    Struct,
    Trait,
    Const,
}

impl Kind {
    pub(super) fn id(self) -> &'static str {
        match self {
            Kind::Function => "function",
            Kind::Method => "method",
            Kind::Class => "class",
            Kind::Interface => "interface",
            Kind::Type => "type",
            Kind::Enum => "enum",
            Kind::Struct => "struct",
            Kind::Trait => "trait",
            Kind::Const => "const",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Visibility {
    Public,
    Private,
    Protected,
}

/// Everything about one file that does not need its symbols.
#[derive(Debug, Clone, Copy)]
pub(super) struct FileInfo {
    pub(super) index: u32,
    pub(super) dir: usize,
    pub(super) lang: Lang,
    pub(super) tsx: bool,
    pub(super) stem_noun: usize,
    pub(super) stem_suffix: usize,
    pub(super) stem_round: usize,
    pub(super) first_symbol: u32,
    pub(super) symbol_count: u32,
    /// Noun of the file's first symbol; symbol `j` uses noun `noun_offset + j`.
    pub(super) noun_offset: usize,
    /// The first symbol takes a recurring name from [`Lang::common_names`].
    pub(super) common: Option<usize>,
    pub(super) mtime: (i64, u32),
    pub(super) domain: bool,
    pub(super) layer: Option<usize>,
    pub(super) module: bool,
    pub(super) summary: bool,
    pub(super) purpose: bool,
    pub(super) owner: bool,
    pub(super) inline: bool,
    pub(super) lock: Option<usize>,
    pub(super) custom_directive: bool,
    pub(super) ai_hint: bool,
    pub(super) git: bool,
    pub(super) exports: bool,
    /// Moved by this revision into a `moved/` directory of its domain ([`Plan::moved`]).
    pub(super) moved: bool,
}

/// Everything about one symbol; `start`/`end` are filled by [`Plan::layout`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Sym {
    pub(super) kind: Kind,
    pub(super) common: Option<&'static str>,
    pub(super) verb: usize,
    pub(super) adjective: Option<usize>,
    pub(super) noun: usize,
    pub(super) round: usize,
    pub(super) suffix: usize,
    pub(super) tail: usize,
    pub(super) upper_const: bool,
    pub(super) visibility: Visibility,
    pub(super) is_async: bool,
    pub(super) summary: Option<usize>,
    pub(super) summary_note: bool,
    pub(super) params: usize,
    pub(super) param_types: [usize; 3],
    pub(super) returns: usize,
    pub(super) start: u32,
    pub(super) end: u32,
}

impl Sym {
    pub(super) fn exported(&self) -> bool {
        self.visibility == Visibility::Public
    }

    pub(super) fn callable(&self) -> bool {
        matches!(self.kind, Kind::Function | Kind::Method)
    }
}

/// One inline annotation of a file.
#[derive(Debug, Clone)]
pub(super) struct Inline {
    pub(super) line: u32,
    pub(super) kind: usize,
    pub(super) value: Option<String>,
    pub(super) directive: String,
    pub(super) auto_generated: bool,
    pub(super) ticket: Option<String>,
    pub(super) reason: String,
}

/// Aggregates computed by a first pass over all files.
#[derive(Debug, Clone, Default)]
pub(super) struct Totals {
    pub(super) lines: u64,
    pub(super) summaries: u64,
    pub(super) domain_files: Vec<u32>,
    pub(super) layer_files: Vec<u32>,
    pub(super) provenance: u64,
    pub(super) constrained: bool,
}

/// Global layout of a spec: directory boundaries, per-file symbol ranges, graph parameters.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) seed: u64,
    pub(super) files: u32,
    pub(super) symbols: u32,
    /// `dir_bounds[d]..dir_bounds[d + 1]` are the files of domain directory `d`.
    pub(super) dir_bounds: Vec<u32>,
    /// `file_starts[f]..file_starts[f + 1]` are the symbols of file `f`.
    pub(super) file_starts: Vec<u32>,
    /// Mean out-degree of a callable symbol.
    pub(super) mean_degree: f64,
    /// `ln(symbols + 1)`, the scale of the Zipf sampler.
    pub(super) zipf_scale: f64,
    /// Multiplier of the rank → symbol permutation (coprime with `symbols`).
    pub(super) perm_mul: u64,
    pub(super) perm_add: u64,
    /// The revision written (0: the base cache).
    pub(super) revision: u32,
    /// In a revision after 0, the share of files changed, in millionths.
    pub(super) changed_per_million: u64,
    /// Of the changed files, the share also moved ([`Plan::moved`]), in millionths.
    pub(super) moved_per_million: u64,
    /// Call-graph names that resolve to no symbol, as node ids `symbols..symbols + external`
    /// (see [`Plan::push_qualified`]); about three quarters of them are called.
    pub(super) external: u32,
    /// The order of the entries of the cache's maps.
    pub(super) key_order: KeyOrder,
}

/// A share in percent as millionths, within 0..=100 %.
fn per_million(percent: f64) -> u64 {
    (percent.clamp(0.0, 100.0) * 10_000.0).round() as u64
}

pub(super) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Plan {
    pub(super) fn new(spec: &GenSpec) -> io::Result<Plan> {
        let total = u64::from(spec.files) * u64::from(spec.symbols_per_file);
        if total >= u64::from(u32::MAX) {
            return Err(invalid(format!(
                "{total} symbols requested; at most {} are supported",
                u32::MAX - 1
            )));
        }
        if !spec.edges_per_symbol.is_finite() || spec.edges_per_symbol < 0.0 {
            return Err(invalid(format!(
                "edges per symbol must be a non-negative number, got {}",
                spec.edges_per_symbol
            )));
        }
        if total as f64 * spec.edges_per_symbol > f64::from(u32::MAX) * 0.8 {
            return Err(invalid(format!(
                "about {:.0} edges requested; at most {} are supported",
                total as f64 * spec.edges_per_symbol,
                u32::MAX
            )));
        }
        let symbols = total as u32;
        let seed = spec.seed;

        // Domain directories get Zipf-like shares of the files.
        let weights: Vec<f64> = (0..DOMAINS.len())
            .map(|d| 1.0 / (d as f64 + 3.0).powf(0.8))
            .collect();
        let weight_sum: f64 = weights.iter().sum();
        let mut dir_bounds = vec![0u32];
        let mut acc = 0.0;
        for w in &weights {
            acc += w;
            let bound = (f64::from(spec.files) * acc / weight_sum).round() as u32;
            dir_bounds.push(bound.min(spec.files));
        }
        *dir_bounds.last_mut().expect("non-empty") = spec.files;

        // Symbols per file vary in 1..2K around the mean K, then are nudged to hit the total.
        let k = spec.symbols_per_file;
        let mut counts: Vec<u32> = (0..spec.files)
            .map(|f| {
                if k == 0 {
                    0
                } else {
                    1 + stream(seed, SALT_COUNT, u64::from(f)).below(u64::from(2 * k - 1)) as u32
                }
            })
            .collect();
        let mut diff = i64::from(symbols) - counts.iter().map(|&c| i64::from(c)).sum::<i64>();
        let mut f = 0usize;
        while diff != 0 {
            if diff > 0 {
                counts[f] += 1;
                diff -= 1;
            } else if counts[f] > 1 {
                counts[f] -= 1;
                diff += 1;
            }
            f = (f + 1) % counts.len();
        }
        let mut file_starts = Vec::with_capacity(counts.len() + 1);
        let mut start = 0u32;
        file_starts.push(0);
        for c in counts {
            start += c;
            file_starts.push(start);
        }

        let mut plan = Plan {
            seed,
            files: spec.files,
            symbols,
            dir_bounds,
            file_starts,
            mean_degree: 0.0,
            zipf_scale: (f64::from(symbols) + 1.0).ln(),
            perm_mul: 1,
            perm_add: 0,
            revision: spec.revision,
            changed_per_million: per_million(spec.changed_percent),
            moved_per_million: per_million(spec.moved_percent),
            external: 0,
            key_order: spec.key_order,
        };
        let callable = (0..symbols).filter(|&i| plan.is_callable(i)).count();
        if callable > 0 {
            plan.mean_degree = spec.edges_per_symbol * f64::from(symbols) / callable as f64;
        }
        let share = spec.unresolved_percent / 100.0;
        if !share.is_finite() || !(0.0..0.9).contains(&share) {
            return Err(invalid(format!(
                "the share of unresolved names must be at least 0 and below 90 percent, got {}",
                spec.unresolved_percent
            )));
        }
        if share > 0.0 && callable > 0 && spec.edges_per_symbol > 0.0 {
            // The callable symbols are (about) the resolved names; one name in `external` is
            // called per callable symbol that draws it, three in four.
            let unresolved = callable as f64 * share / (1.0 - share);
            plan.external = ((unresolved / CALLABLE_SHARE).round() as u32)
                .max(BUILTINS.len() as u32)
                .min(symbols);
            // The calls of those names replace calls of symbols, so that the cache has as many
            // edges as one where every name resolves: a name of its own for `external` of the
            // symbols, a builtin for two in five, a library call for one in five.
            let unresolved_calls = f64::from(plan.external) / f64::from(symbols) + 0.6;
            plan.mean_degree = (plan.mean_degree - unresolved_calls).max(0.0);
        }
        if symbols > 0 {
            let n = u64::from(symbols);
            let mut mul = 0x9E37_79B1 % n;
            while gcd(mul.max(1), n) != 1 {
                mul += 1;
            }
            plan.perm_mul = mul.max(1);
            plan.perm_add = mix(seed, 0xA5A5) % n;
        }
        Ok(plan)
    }

    /// The indexes `0..n` (of files, symbols or call-graph nodes) in the order their entries
    /// are written: in order, or for [`KeyOrder::Hash`] scattered by a step of about 0.618 `n`
    /// coprime with `n`, so that neighbours (a file's symbols) land far apart.
    pub(super) fn written_order(&self, n: u32) -> impl Iterator<Item = u32> {
        let n = u64::from(n);
        let mut step = 1;
        if self.key_order == KeyOrder::Hash && n > 2 {
            step = (n as f64 * 0.618_034) as u64;
            while gcd(step, n) != 1 {
                step += 1;
            }
        }
        (0..n).map(move |j| (j * step % n) as u32)
    }

    /// Whether file `f` differs from revision 0 in this revision: its summary, its symbols'
    /// summaries and its symbols' callees.
    pub(super) fn file_changed(&self, f: u32) -> bool {
        self.revision > 0 && self.revision_draw(SALT_REVISION, f) < self.changed_per_million
    }

    /// Whether file `f` is one of the files this revision edits that it also moves (a share
    /// of them, `moved_per_million`), as `acp index` writes a file moved to another directory:
    /// its entry under a new key, its symbols under new qualified names, and every list naming
    /// them with the new names.
    pub(super) fn moved(&self, f: u32) -> bool {
        self.moved_per_million > 0
            && self.file_changed(f)
            && self.revision_draw(SALT_MOVE, f) < self.moved_per_million
    }

    /// A draw in millionths from this revision's stream `salt` for file `f`.
    fn revision_draw(&self, salt: u64, f: u32) -> u64 {
        stream(mix(self.seed, u64::from(self.revision)), salt, u64::from(f)).below(1_000_000)
    }

    /// Whether symbol `i` is the one an edited file of this revision replaced: its last
    /// symbol, removed and added again under a name new to the cache ([`Plan::push_own_name`]).
    /// Its old name stays where other symbols call it (resolving to nothing, as after a
    /// removal); the new one calls the hubs besides its own callees.
    pub(super) fn replaced(&self, i: u32) -> bool {
        if i >= self.symbols {
            return false;
        }
        let f = self.file_of(i);
        self.file_changed(f) && i + 1 == self.file_starts[f as usize + 1]
    }

    pub(super) fn file_of(&self, symbol: u32) -> u32 {
        (self.file_starts.partition_point(|&s| s <= symbol) - 1) as u32
    }

    pub(super) fn file(&self, f: u32) -> FileInfo {
        let dir = self.dir_bounds.partition_point(|&b| b <= f) - 1;
        let local = (f - self.dir_bounds[dir]) as usize;
        let stem_noun = (local + dir * 13) % NOUNS.len();
        let q = local / NOUNS.len();
        let stem_suffix = q % FILE_SUFFIXES.len();
        let stem_round = q / FILE_SUFFIXES.len();

        let mut rng = stream(self.seed, SALT_FILE, u64::from(f));
        let lang = match rng.below(100) {
            0..=44 => Lang::TypeScript,
            45..=64 => Lang::Rust,
            65..=86 => Lang::Python,
            _ => Lang::Go,
        };
        let tsx = lang == Lang::TypeScript && rng.chance(0.1);
        let noun_offset = rng.index(NOUNS.len());
        let common = rng
            .chance(0.25)
            .then(|| rng.index(lang.common_names().len()));
        let age = 60 + rng.below(400 * 86_400) as i64;
        let nanos = match rng.below(3) {
            0 => 0,
            1 => rng.below(1000) as u32 * 1_000_000,
            _ => rng.below(1_000_000_000) as u32,
        };
        let domain = rng.chance(0.85);
        let layer = if rng.chance(0.6) {
            Some(
                FILE_SUFFIXES[stem_suffix]
                    .1
                    .unwrap_or_else(|| rng.index(LAYERS.len())),
            )
        } else {
            None
        };
        let module = rng.chance(0.3);
        let summary = rng.chance(0.25);
        let purpose = rng.chance(0.15);
        let owner = rng.chance(0.1);
        let inline = rng.chance(0.08);
        let lock = rng.chance(0.05).then(|| rng.index(LOCK_LEVELS.len()));
        let custom_directive = rng.chance(0.3);
        let ai_hint = rng.chance(0.01);
        let git = rng.chance(0.9);
        let exports = rng.chance(0.05);
        FileInfo {
            index: f,
            dir,
            lang,
            tsx,
            stem_noun,
            stem_suffix,
            stem_round,
            first_symbol: self.file_starts[f as usize],
            symbol_count: self.file_starts[f as usize + 1] - self.file_starts[f as usize],
            noun_offset,
            common,
            mtime: (BASE_SECS - age, nanos),
            domain,
            layer,
            module,
            summary,
            purpose,
            owner,
            inline,
            lock,
            custom_directive,
            ai_hint,
            git,
            exports,
            moved: self.moved(f),
        }
    }

    /// Whether symbol `i` is a function or method; the first draw of its stream.
    pub(super) fn is_callable(&self, i: u32) -> bool {
        stream(self.seed, SALT_SYMBOL, u64::from(i)).unit() < CALLABLE_SHARE
    }

    pub(super) fn symbol(&self, file: &FileInfo, i: u32) -> Sym {
        let mut rng = stream(self.seed, SALT_SYMBOL, u64::from(i));
        let callable = rng.unit() < CALLABLE_SHARE;
        let lang = file.lang;
        let method_share = match lang {
            Lang::TypeScript | Lang::Rust => 0.45,
            Lang::Python => 0.5,
            Lang::Go => 0.4,
        };
        let mut kind = if callable {
            if rng.chance(method_share) {
                Kind::Method
            } else {
                Kind::Function
            }
        } else {
            let kinds = lang.type_kinds();
            kinds[rng.weighted(kinds, |k| k.1)].0
        };
        let pos = (i - file.first_symbol) as usize;
        let noun = (file.noun_offset + pos) % NOUNS.len();
        let round = pos / NOUNS.len();
        let verb = rng.index(VERBS.len());
        let adjective = rng.chance(0.4).then(|| rng.index(ADJECTIVES.len()));
        let suffix = rng.index(TYPE_SUFFIXES.len());
        let tail = rng.index(CONST_TAILS.len());
        let upper_const = rng.chance(0.5);
        let roll = rng.unit();
        let mut visibility = match lang {
            Lang::TypeScript if kind == Kind::Method && roll < 0.05 => Visibility::Protected,
            Lang::TypeScript if roll < 0.17 => Visibility::Private,
            Lang::Rust if roll < 0.3 => Visibility::Private,
            Lang::Python if roll < 0.15 => Visibility::Private,
            Lang::Go if roll < 0.4 => Visibility::Private,
            _ => Visibility::Public,
        };
        let mut common = None;
        if pos == 0 && callable {
            if let Some(c) = file.common {
                let (name, common_kind, private) = lang.common_names()[c];
                common = Some(name);
                kind = common_kind;
                visibility = if private {
                    Visibility::Private
                } else {
                    Visibility::Public
                };
            }
        }
        let async_share = match lang {
            Lang::TypeScript => 0.25,
            Lang::Rust | Lang::Python => 0.15,
            Lang::Go => 0.0,
        };
        let is_async = rng.chance(async_share) && callable;
        let summary = rng.chance(0.4).then(|| rng.index(SUMMARY_TAILS.len()));
        let summary_note = rng.chance(0.05);
        let params = rng.index(4);
        let param_types = [rng.index(4), rng.index(4), rng.index(4)];
        let returns = rng.index(4);
        Sym {
            kind,
            common,
            verb,
            adjective,
            noun,
            round,
            suffix,
            tail,
            upper_const,
            visibility,
            is_async,
            summary,
            summary_note,
            params,
            param_types,
            returns,
            start: 0,
            end: 0,
        }
    }

    /// Fills `syms` with the file's symbols and their line ranges; returns the file's line count.
    pub(super) fn layout(&self, file: &FileInfo, syms: &mut Vec<Sym>) -> u32 {
        syms.clear();
        let mut rng = stream(self.seed, SALT_LAYOUT, u64::from(file.index));
        if file.symbol_count == 0 {
            return 5 + rng.below(200) as u32;
        }
        let mut line = 1 + rng.below(20) as u32;
        for i in file.first_symbol..file.first_symbol + file.symbol_count {
            let mut sym = self.symbol(file, i);
            let len = match sym.kind {
                Kind::Function | Kind::Method => {
                    let long = if rng.chance(0.1) { rng.below(150) } else { 0 };
                    3 + rng.below(40) + long
                }
                Kind::Const | Kind::Type => 1 + rng.below(3),
                _ => 5 + rng.below(60),
            } as u32;
            sym.start = line;
            sym.end = line + len - 1;
            line = sym.end + 1 + rng.below(4) as u32;
            syms.push(sym);
        }
        line + rng.below(10) as u32
    }

    /// Callees of caller `i`, sorted and distinct: a mix of nearby symbols, uniformly chosen
    /// symbols and Zipf-popular ones, all callable.
    pub(super) fn callees(&self, i: u32, out: &mut Vec<u32>) {
        out.clear();
        let seed = if self.file_changed(self.file_of(i)) {
            mix(self.seed, u64::from(self.revision))
        } else {
            self.seed
        };
        let mut rng = stream(seed, SALT_EDGES, u64::from(i));
        let degree = (self.mean_degree * -(1.0 - rng.unit()).ln()).round() as usize;
        let n = u64::from(self.symbols);
        let mut attempts = degree * 8 + 16;
        while out.len() < degree && attempts > 0 {
            attempts -= 1;
            let roll = rng.unit();
            let target = if roll < 0.35 {
                let offset = rng.below(64) as i64 - 32;
                (i64::from(i) + offset).clamp(0, n as i64 - 1) as u64
            } else if roll < 0.7 {
                rng.below(n)
            } else {
                let rank = ((rng.unit() * self.zipf_scale).exp() as u64).saturating_sub(1);
                (rank.min(n - 1) * self.perm_mul + self.perm_add) % n
            } as u32;
            if self.is_callable(target) && !out.contains(&target) {
                out.push(target);
            }
        }
        if self.external > 0 && degree > 0 {
            let n = u64::from(self.symbols);
            let external = u64::from(self.external);
            // One name of its own: the symbols drawn by a permutation into the first
            // `external` slots each call one name nothing else defines, so every such name is
            // called; an edited file's symbols draw again.
            let revision = if seed == self.seed { 0 } else { self.revision };
            let slot =
                (u64::from(i) * self.perm_mul + self.perm_add + u64::from(revision) * 7919) % n;
            if slot < external {
                out.push(self.symbols + slot as u32);
            }
            // Builtins, Zipf-popular: the longest reverse lists of a real graph.
            if rng.unit() < 0.4 {
                let builtins = BUILTINS.len() as f64;
                let rank = ((rng.unit() * (builtins + 1.0).ln()).exp() as u64).saturating_sub(1);
                let id = self.symbols + rank.min(external - 1) as u32;
                if !out.contains(&id) {
                    out.push(id);
                }
            }
            // Library calls shared by a few callers.
            if rng.unit() < 0.2 {
                let id = self.symbols + rng.below(external) as u32;
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        if self.replaced(i) {
            // The most popular symbol (Zipf rank 0) and the most popular builtin.
            let hub = (self.perm_add % u64::from(self.symbols)) as u32;
            if hub != i && self.is_callable(hub) && !out.contains(&hub) {
                out.push(hub);
            }
            if self.external > 0 && !out.contains(&self.symbols) {
                out.push(self.symbols);
            }
        }
        out.sort_unstable();
    }

    pub(super) fn totals(&self) -> Totals {
        let mut totals = Totals {
            domain_files: vec![0; DOMAINS.len()],
            layer_files: vec![0; LAYERS.len()],
            ..Totals::default()
        };
        let mut syms = Vec::new();
        for f in 0..self.files {
            let file = self.file(f);
            let lines = self.layout(&file, &mut syms);
            totals.lines += u64::from(lines);
            totals.summaries += syms.iter().filter(|s| s.summary.is_some()).count() as u64;
            if file.domain {
                totals.domain_files[file.dir] += 1;
            }
            if let Some(l) = file.layer {
                totals.layer_files[l] += 1;
            }
            totals.provenance += annotation_count(&file);
            totals.constrained |= file.lock.is_some()
                || file.ai_hint
                || self
                    .inline_marks(&file, lines)
                    .iter()
                    .any(|m| INLINE_KINDS[m.kind].0 == "hack");
        }
        totals
    }

    /// Inline annotations of a file with `lines` lines.
    pub(super) fn inline_marks(&self, file: &FileInfo, lines: u32) -> Vec<Inline> {
        if !file.inline {
            return Vec::new();
        }
        let mut rng = stream(self.seed, SALT_INLINE, u64::from(file.index));
        let count = 1 + rng.below(3);
        let noun = NOUNS[file.stem_noun];
        let mut marks: Vec<Inline> = (0..count)
            .map(|_| {
                let kind = rng.weighted(INLINE_KINDS, |k| k.2);
                let line = 1 + rng.below(u64::from(lines.max(1))) as u32;
                let adjective = ADJECTIVES[rng.index(ADJECTIVES.len())];
                let auto_generated = rng.chance(0.7);
                let directive = if auto_generated {
                    INLINE_KINDS[kind].1.to_string()
                } else {
                    format!("Keep the {noun} contract stable for {}", DOMAINS[file.dir])
                };
                let ticket_no = 100 + rng.below(9900);
                let reason = format!("Vendor SDK mishandles the {adjective} {noun}");
                let (value, ticket) = match INLINE_KINDS[kind].0 {
                    "hack" => {
                        let ticket =
                            format!("{}{ticket_no}", DOMAINS[file.dir][..3].to_ascii_uppercase());
                        (Some(format!("ticket={ticket} \"{reason}\"")), Some(ticket))
                    }
                    "todo" => (Some(format!("Handle the {adjective} {noun} case")), None),
                    "fixme" => (Some(format!("Race on {adjective} {noun} updates")), None),
                    _ => (None, None),
                };
                Inline {
                    line,
                    kind,
                    value,
                    directive,
                    auto_generated,
                    ticket,
                    reason,
                }
            })
            .collect();
        marks.sort_by_key(|m| m.line);
        marks
    }
}

pub(super) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Number of `files[*].annotations` entries of a file.
pub(super) fn annotation_count(file: &FileInfo) -> u64 {
    [
        file.module,
        file.summary,
        file.purpose,
        file.owner,
        file.domain,
        file.layer.is_some(),
        file.lock.is_some(),
        file.ai_hint,
    ]
    .iter()
    .filter(|&&b| b)
    .count() as u64
}
