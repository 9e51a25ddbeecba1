#!/usr/bin/env bash
# Compares acpdb with the reference ACP MCP server (acp-mcp) on one project: the same
# `acpdb bench --stdio` workload is replayed against both servers, and a Markdown table of
# start-up, peak RSS and per-tool p50/p99 latency (with acpdb/acp-mcp ratios) is printed, headed
# by the machine (nproc, CPU model) and the date.
#
# Usage:
#   benches/compare.sh --files N [--dir DIR] [options]   generate a cache of N files x 10 symbols
#   benches/compare.sh --project DIR [options]           use DIR/.acp/acp.cache.json as it is
# Options:
#   --iterations N   measured passes per server (default 10)
#   --samples N      calls per tool group in one pass (default 8)
#   --out FILE       also write the table to FILE
# Environment:
#   ACPDB    the acpdb binary (default: target/release/acpdb next to this script, else `acpdb`)
#   ACP_MCP  the acp-mcp binary (default: `acp-mcp` on PATH, else ~/.cargo/bin/acp-mcp)
#
# Nothing is installed: a missing binary or tool (jq) stops the script with a message.
# The acpdb database is (re)built with `acpdb import` when it is missing or older than the cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
files=""
dir=""
iterations=10
samples=8
out=""

die() {
    echo "compare.sh: $*" >&2
    exit 1
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --files) files="${2:?--files needs a number}"; shift 2 ;;
        --dir | --project) dir="${2:?$1 needs a directory}"; shift 2 ;;
        --iterations) iterations="${2:?--iterations needs a number}"; shift 2 ;;
        --samples) samples="${2:?--samples needs a number}"; shift 2 ;;
        --out) out="${2:?--out needs a file}"; shift 2 ;;
        -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

# Binaries and tools.
acpdb="${ACPDB:-}"
if [[ -z "$acpdb" ]]; then
    if [[ -x "$here/../target/release/acpdb" ]]; then
        acpdb="$here/../target/release/acpdb"
    else
        acpdb="$(command -v acpdb || true)"
    fi
fi
[[ -n "$acpdb" && -x "$acpdb" ]] ||
    die "acpdb not found: build it with 'cargo build --release' or set ACPDB=/path/to/acpdb"
acp_mcp="${ACP_MCP:-$(command -v acp-mcp || true)}"
[[ -z "$acp_mcp" && -x "$HOME/.cargo/bin/acp-mcp" ]] && acp_mcp="$HOME/.cargo/bin/acp-mcp"
[[ -n "$acp_mcp" && -x "$acp_mcp" ]] ||
    die "acp-mcp not found: install it yourself (e.g. 'cargo install acp-mcp') or set ACP_MCP=/path/to/acp-mcp"
command -v jq >/dev/null || die "jq is required (install it with your package manager)"

# The project: generated or given.
if [[ -n "$files" ]]; then
    [[ "$files" =~ ^[0-9]+$ ]] || die "--files must be a number"
    dir="${dir:-${TMPDIR:-/tmp}/acpdb-compare-$files}"
    spec="--files $files --symbols-per-file 10 --edges-per-symbol 5 --key-order hash"
    if [[ -f "$dir/.acp/acp.cache.json" && "$(cat "$dir/.acp/gen-fixture.args" 2>/dev/null)" == "$spec" ]]; then
        echo "compare.sh: reusing the cache generated in $dir" >&2
    else
        # shellcheck disable=SC2086
        "$acpdb" gen-fixture $spec --out "$dir" >&2
        echo "$spec" >"$dir/.acp/gen-fixture.args"
    fi
fi
[[ -n "$dir" ]] || die "give --files N or --project DIR (see --help)"
dir="$(cd "$dir" && pwd)"
cache="$dir/.acp/acp.cache.json"
db="$dir/.acp/acp.db"
[[ -f "$cache" ]] || die "no cache at $cache"
if [[ ! -f "$db" || "$cache" -nt "$db" ]]; then
    "$acpdb" -C "$dir" import --no-progress >&2
fi

# The same workload for both servers.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
workload="$work/workload.json"
common=(--stdio --json --iterations "$iterations" --samples "$samples")
echo "compare.sh: acpdb serve ..." >&2
"$acpdb" -C "$dir" bench "${common[@]}" --save-workload "$workload" >"$work/acpdb.json"
echo "compare.sh: acp-mcp ..." >&2
"$acpdb" -C "$dir" bench "${common[@]}" --workload "$workload" -- "$acp_mcp" -C "$dir" \
    >"$work/acp-mcp.json"

symbols="$("$acpdb" -C "$dir" sql --csv "SELECT count(*) FROM symbols" 2>/dev/null | tail -n 1)"
cpu="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"

table="$(
    jq -n -r \
        --slurpfile a "$work/acpdb.json" --slurpfile r "$work/acp-mcp.json" \
        --arg date "$(date -u +%Y-%m-%dT%H:%MZ)" --arg nproc "$(nproc)" --arg cpu "${cpu:-unknown}" \
        --arg symbols "$symbols" \
        --arg cache_mb "$(awk -v b="$(stat -c %s "$cache")" 'BEGIN { printf "%.1f", b / 1e6 }')" \
        --arg iterations "$iterations" --arg samples "$samples" '
    def n3: if . == null then "–" else ((. * 1000 | round) / 1000 | tostring) end;
    def ratio($x; $y): if $x == null or $y == null or $y == 0 then "–"
        else ($x / $y) as $q
        | (if $q >= 0.1 then (($q * 100 | round) / 100) else (($q * 10000 | round) / 10000) end
           | tostring) + "×" end;
    def mb: if . == null then null else ((. / 1024 * 10 | round) / 10) end;
    $a[0] as $a | $r[0] as $r |
    "Machine: \($nproc) cores, \($cpu); date \($date).",
    "Project: \($symbols) symbols, cache \($cache_mb) MB; \($iterations) passes of \($a.workload_calls) calls (\($samples) per tool group) after 1 warm-up pass, one call at a time over stdio.",
    "Servers: \($a.server_info // "acpdb") vs acp-mcp (\($r.server_info // "?")). Ratio = acpdb ÷ acp-mcp (below 1: acpdb is faster or smaller).",
    "",
    "| metric | acpdb | acp-mcp | ratio |",
    "|---|---:|---:|---:|",
    "| start-up to initialize answer (ms) | \($a.startup.initialize_ms | n3) | \($r.startup.initialize_ms | n3) | \(ratio($a.startup.initialize_ms; $r.startup.initialize_ms)) |",
    "| start-up to first tool answer (ms) | \($a.startup.first_tool_ms | n3) | \($r.startup.first_tool_ms | n3) | \(ratio($a.startup.first_tool_ms; $r.startup.first_tool_ms)) |",
    "| peak RSS (MB) | \($a.peak_rss_kb | mb | n3) | \($r.peak_rss_kb | mb | n3) | \(ratio($a.peak_rss_kb; $r.peak_rss_kb)) |",
    "",
    "| tool | acpdb p50 | acp-mcp p50 | p50 ratio | acpdb p99 | acp-mcp p99 | p99 ratio |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ($a.tools[] as $t
        | ($r.tools | map(select(.label == $t.label)) | first) as $u
        | if ($u == null or $u.status != "ok") then
            "| \($t.label) | \($t.p50_ms | n3) | unsupported | – | \($t.p99_ms | n3) | unsupported | – |"
          else
            "| \($t.label) | \($t.p50_ms | n3) | \($u.p50_ms | n3) | \(ratio($t.p50_ms; $u.p50_ms)) | \($t.p99_ms | n3) | \($u.p99_ms | n3) | \(ratio($t.p99_ms; $u.p99_ms)) |"
          end),
    "",
    "Latencies in ms. Errors: acpdb \([$a.tools[].errors] | add), acp-mcp \([$r.tools[].errors] | add)."
    '
)"
echo "$table"
if [[ -n "$out" ]]; then
    echo "$table" >"$out"
    cp "$work/acpdb.json" "${out%.*}.acpdb.json"
    cp "$work/acp-mcp.json" "${out%.*}.acp-mcp.json"
fi
