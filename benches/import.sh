#!/usr/bin/env bash
# Import benchmark: the figures of docs/benchmarks.md, "Import" (seconds, MB/s of
# JSON, CPU, peak RSS, database size against the JSON, the phases, and the growth between
# sizes).
#
# Usage:
#   benches/import.sh [--sizes 100K,1M] [--unresolved 15,0] [--runs N] [--dir DIR]
#                     [--drop-caches] [BINARY ...]
#
# For each size (100K, 1M, 3M or 10M symbols: 10 symbols a file, 4.5 call edges a symbol,
# seed 42) and each share of call-graph names that resolve to no symbol (--unresolved, in
# percent; default 15, as real code calls libraries, and 0) a cache is generated once below
# DIR (default /tmp/acpdb-import-bench; reused when present). The real caches of
# fixtures/real/ are benchmarked too. Each cache is then imported RUNS times (default 3) by
# each BINARY in turn, so that builds alternate on a machine whose speed drifts (default: the
# release build, built first), the database absent every time:
#   /usr/bin/time -v BINARY -C DIR/SIZE import --no-progress --full --log-level debug
# --drop-caches empties the kernel's page cache before each run (root only) and reads the
# cache back in, so every run starts from the same state. Prints Markdown: one row per cache
# and binary with the ranges over the runs (the "resolve" phase: node resolution and the
# indexes built after it), then the growth between consecutive sizes and the cost of the
# unresolved names (medians of the first binary). Needs GNU time at /usr/bin/time; 10M needs
# about 20 GB of disk.
set -euo pipefail

sizes="100K,1M"
unresolved="15,0"
runs=3
dir="/tmp/acpdb-import-bench"
drop=0
binaries=()
usage() {
    sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
    exit 1
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) sizes="${2:?--sizes needs a list}"; shift 2 ;;
        --unresolved) unresolved="${2:?--unresolved needs a list}"; shift 2 ;;
        --runs) runs="${2:?--runs needs a number}"; shift 2 ;;
        --dir) dir="${2:?--dir needs a directory}"; shift 2 ;;
        --drop-caches) drop=1; shift ;;
        -h | --help) usage ;;
        -*) usage ;;
        *) binaries+=("$1"); shift ;;
    esac
done
[[ -x /usr/bin/time ]] || { echo "import.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "import.sh: --runs needs a positive number" >&2; exit 1; }
if [[ $drop == 1 && ! -w /proc/sys/vm/drop_caches ]]; then
    echo "import.sh: --drop-caches needs root" >&2
    exit 1
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ${#binaries[@]} -eq 0 ]]; then
    (cd "$repo" && cargo build --release --locked --quiet)
    binaries=("$repo/target/release/acpdb")
fi
for bin in "${binaries[@]}"; do
    [[ -x "$bin" ]] || { echo "import.sh: $bin is not an executable" >&2; exit 1; }
done

# Files for a size: 10 symbols a file.
files_of() {
    case "$1" in
        100K) echo 10000 ;;
        1M) echo 100000 ;;
        3M) echo 300000 ;;
        10M) echo 1000000 ;;
        *) echo "import.sh: unknown size $1 (100K, 1M, 3M or 10M)" >&2; exit 1 ;;
    esac
}

IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a share_list <<<"$unresolved"
for size in "${size_list[@]}"; do files_of "$size" >/dev/null; done
for share in "${share_list[@]}"; do
    [[ "$share" =~ ^[0-9]+$ ]] || { echo "import.sh: --unresolved needs whole percents" >&2; exit 1; }
done
results="$(mktemp)"
scratch="$(mktemp -d)"
trap 'rm -rf "$results" "$scratch"' EXIT
# Cases: "name project" lines, the generated caches first, then the real ones (copied, so that
# their databases are written outside the repository).
cases=()
for size in "${size_list[@]}"; do
    for share in "${share_list[@]}"; do
        project="$dir/$size-u$share"
        cache="$project/.acp/acp.cache.json"
        if [[ ! -s "$cache" ]]; then
            echo "generating $size symbols ($share % unresolved) in $project" >&2
            "${binaries[0]}" gen-fixture --files "$(files_of "$size")" --symbols-per-file 10 \
                --edges-per-symbol 4.5 --unresolved-percent "$share" --out "$project" >/dev/null
        fi
        cases+=("$size@$share% $project")
    done
done
for real in "$repo"/fixtures/real/*/; do
    name="$(basename "$real")"
    cp -r "$real" "$scratch/$name"
    cases+=("real:$name $scratch/$name")
done
for case in "${cases[@]}"; do
    size="${case%% *}"
    project="${case#* }"
    cache="$project/.acp/acp.cache.json"
    for run in $(seq "$runs"); do
        for bin in "${binaries[@]}"; do
            rm -f "$project/.acp/acp.db"
            sync
            if [[ $drop == 1 ]]; then
                echo 3 >/proc/sys/vm/drop_caches
                cat "$cache" "$project/.acp/acp.vars.json" >/dev/null
            fi
            load="$(cut -d' ' -f1 /proc/loadavg)"
            log="$( { /usr/bin/time -v "$bin" -C "$project" import --no-progress --full \
                --log-level debug >/dev/null; } 2>&1 )" || {
                echo "import.sh: $bin failed on $size:" >&2
                echo "$log" >&2
                exit 1
            }
            db_bytes="$(stat -c %s "$project/.acp/acp.db")"
            json_bytes="$(stat -c %s "$cache" "$project/.acp/acp.vars.json" | awk '{s += $1} END {print s}')"
            # One record: size, binary, run, load, then name=value fields.
            awk -v size="$size" -v bin="$(basename "$bin")" -v run="$run" -v load="$load" \
                -v db="$db_bytes" -v json="$json_bytes" '
                function num(line) { match(line, /[0-9]+(\.[0-9]+)?/); return substr(line, RSTART, RLENGTH) }
                /loaded entries in/           { sub(/.*loaded entries in /, ""); load_s = num($0) }
                /built the call graph at/     { sub(/.*call graph at /, ""); link_s = num($0) }
                /built the indexes at/        { sub(/.*indexes at /, ""); index_s = num($0) }
                /resolved graph nodes at/     { sub(/.*nodes at /, ""); resolve_s = num($0) }
                /Elapsed \(wall clock\)/      { n = split($NF, t, ":"); wall = (n == 3 ? t[1] * 3600 + t[2] * 60 + t[3] : t[1] * 60 + t[2]) }
                /User time \(seconds\)/       { user = $NF }
                /System time \(seconds\)/     { sys = $NF }
                /Maximum resident set size/   { rss = $NF }
                END {
                    printf "%s %s %s %s wall=%.2f cpu=%.2f rss=%.1f db=%.1f ratio=%.3f mbs=%.1f load_s=%s link_s=%.2f index_s=%.2f resolve_s=%.2f rest_s=%.2f json=%.1f\n",
                        size, bin, run, load, wall, user + sys, rss / 1024, db / 1e6, db / json,
                        json / 1e6 / wall, load_s, link_s - load_s, index_s - link_s,
                        resolve_s - index_s, wall - resolve_s, json / 1e6
                }' <<<"$log" >>"$results"
            echo "$size $(basename "$bin") run $run: $(tail -1 "$results" | cut -d' ' -f5-)" >&2
        done
    done
done

# Ranges over the runs per cache and binary, then the growth between consecutive sizes and
# the cost of unresolved names.
awk -v sizes="$sizes" -v shares="$unresolved" '
function field(rec, name,    i, kv) {
    for (i = 5; i <= split(rec, f, " "); i++) { split(f[i], kv, "="); if (kv[1] == name) return kv[2] + 0 }
}
function symbols(size) { return size == "100K" ? 1e5 : size == "1M" ? 1e6 : size == "3M" ? 3e6 : 1e7 }
function range(key, name, fmt,    i, lo, hi, v) {
    for (i = 1; i <= count[key]; i++) {
        v = field(rec[key, i], name)
        if (i == 1 || v < lo) lo = v
        if (i == 1 || v > hi) hi = v
    }
    lo = sprintf(fmt, lo); hi = sprintf(fmt, hi)
    return lo == hi ? lo : lo "–" hi
}
function median(key, name,    i, n, v, j, t) {
    n = count[key]
    for (i = 1; i <= n; i++) v[i] = field(rec[key, i], name)
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
    key = $1 SUBSEP $2
    if (!(key in count)) { order[++keys] = key; if (!($2 in seen)) { seen[$2] = 1; bins[++nbins] = $2 } }
    rec[key, ++count[key]] = $0
    loads[key] = loads[key] (loads[key] == "" ? "" : ", ") $4
}
END {
    print "| cache (size@unresolved) | build | runs | JSON | seconds | MB/s | CPU s | peak RSS MB | database | load / link / index / resolve / rest s | resolve share | load average |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"
    for (k = 1; k <= keys; k++) {
        key = order[k]; split(key, p, SUBSEP)
        printf "| %s | %s | %d | %.1f MB | %s | %s | %s | %s | %s MB (%s×) | %s / %s / %s / %s / %s | %.0f %% | %s |\n",
            p[1], p[2], count[key], field(rec[key, 1], "json"), range(key, "wall", "%.2f"),
            range(key, "mbs", "%.1f"), range(key, "cpu", "%.1f"), range(key, "rss", "%.0f"),
            range(key, "db", "%.0f"), range(key, "ratio", "%.2f"), range(key, "load_s", "%.2f"),
            range(key, "link_s", "%.2f"), range(key, "index_s", "%.2f"), range(key, "resolve_s", "%.2f"),
            range(key, "rest_s", "%.2f"), 100 * median(key, "resolve_s") / median(key, "wall"), loads[key]
    }
    n = split(sizes, s, ",")
    m = split(shares, u, ",")
    if (n >= 2) {
        print ""
        print "| growth (" bins[1] ", " u[1] " % unresolved, medians) | symbols × | seconds × | peak RSS × | RSS per added symbol |"
        print "|---|---:|---:|---:|---:|"
        for (i = 2; i <= n; i++) {
            a = s[i - 1] "@" u[1] "%" SUBSEP bins[1]; b = s[i] "@" u[1] "%" SUBSEP bins[1]
            if (!(a in count) || !(b in count)) continue
            ra = median(a, "rss"); rb = median(b, "rss")
            printf "| %s → %s | ×%.0f | ×%.2f | ×%.2f | %.1f bytes |\n", s[i - 1], s[i],
                symbols(s[i]) / symbols(s[i - 1]), median(b, "wall") / median(a, "wall"), rb / ra,
                (rb - ra) * 1048576 / (symbols(s[i]) - symbols(s[i - 1]))
        }
    }
    if (m >= 2) {
        print ""
        print "| unresolved names (" bins[1] ", medians) | seconds | against " u[m] " % | resolve s |"
        print "|---|---:|---:|---:|"
        for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) {
            a = s[i] "@" u[j] "%" SUBSEP bins[1]; base = s[i] "@" u[m] "%" SUBSEP bins[1]
            if (!(a in count) || !(base in count)) continue
            printf "| %s, %s %% | %.2f | ×%.3f | %.2f |\n", s[i], u[j], median(a, "wall"),
                median(a, "wall") / median(base, "wall"), median(a, "resolve_s")
        }
    }
}' "$results"
