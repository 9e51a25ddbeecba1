#!/usr/bin/env bash
# Prints the growth and comparison tables (docs/benchmarks.md, "Queries over stdio") from the
# reports that `benches/compare.sh --out FILE` wrote at several scales.
#
# Usage:
#   benches/growth.sh LABEL=FILE [LABEL=FILE ...]
# e.g.
#   benches/compare.sh --files 1000   --out /tmp/cmp-10k.md
#   benches/compare.sh --files 10000  --out /tmp/cmp-100k.md
#   benches/compare.sh --files 100000 --out /tmp/cmp-1m.md
#   benches/growth.sh 10K=/tmp/cmp-10k.md 100K=/tmp/cmp-100k.md 1M=/tmp/cmp-1m.md
#
# For each FILE it reads FILE's `.acpdb.json` and `.acp-mcp.json` siblings (the JSON reports of
# `acpdb bench --stdio --json` against each server). Needs jq.
set -euo pipefail

[[ $# -gt 0 ]] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 1; }
command -v jq >/dev/null || { echo "growth.sh: jq is required" >&2; exit 1; }

reports="[]"
for arg in "$@"; do
    label="${arg%%=*}"
    file="${arg#*=}"
    base="${file%.*}"
    for side in acpdb acp-mcp; do
        [[ -f "$base.$side.json" ]] || { echo "growth.sh: no $base.$side.json" >&2; exit 1; }
    done
    reports="$(jq -c --arg lab "$label" --slurpfile a "$base.acpdb.json" \
        --slurpfile r "$base.acp-mcp.json" '. + [{"label": $lab, a: $a[0], r: $r[0]}]' \
        <<<"$reports")"
done

jq -r '
def n3: if . == null then "–" else ((. * 1000 | round) / 1000 | tostring) end;
def mb: if . == null then null else ((. / 1024 * 10 | round) / 10) end;
def ratio($x; $y): if $x == null or $y == null or $y == 0 then "–"
    else ($x / $y) as $q
    | (if $q >= 0.1 then (($q * 100 | round) / 100) else (($q * 10000 | round) / 10000) end
       | tostring) end;
def row($name; f): "| \($name) | " + (map(f) | join(" | ")) + " |";
def tool($r; $lab): $r.tools | map(select(.["label"] == $lab)) | first;
. as $all
| ($all | map(.["label"]) | join(" | ")) as $head
| ($all | map("---:") | join("|")) as $rule
| "### Growth (acpdb over stdio)", "",
  "| | \($head) |", "|---|\($rule)|",
  row("start-up to initialize answer (ms)"; .a.startup.initialize_ms | n3),
  row("start-up to first tool answer (ms)"; .a.startup.first_tool_ms | n3),
  row("server peak RSS (MB)"; .a.peak_rss_kb | mb | n3),
  "",
  "| tool (p50 / p99 ms) | \($head) |", "|---|\($rule)|",
  (($all[0].a.tools[] | .["label"]) as $lab
    | row($lab; tool(.a; $lab) as $t | "\($t.p50_ms | n3) / \($t.p99_ms | n3)")),
  "",
  "### acpdb vs acp-mcp", "",
  "| acp-mcp | \($head) |", "|---|\($rule)|",
  row("start-up to initialize answer (ms)"; .r.startup.initialize_ms | n3),
  row("peak RSS (MB)"; .r.peak_rss_kb | mb | n3),
  "",
  "Ratios acpdb ÷ acp-mcp (below 1: acpdb faster or smaller); tools as p50 / p99.", "",
  "| | \($head) |", "|---|\($rule)|",
  row("start-up to initialize answer"; ratio(.a.startup.initialize_ms; .r.startup.initialize_ms)),
  row("start-up to first tool answer"; ratio(.a.startup.first_tool_ms; .r.startup.first_tool_ms)),
  row("peak RSS"; ratio(.a.peak_rss_kb; .r.peak_rss_kb)),
  ($all[0].r.tools[] | select(.status == "ok") | .["label"]) as $lab
    | row($lab; tool(.a; $lab) as $t | tool(.r; $lab) as $u
        | "\(ratio($t.p50_ms; $u.p50_ms)) / \(ratio($t.p99_ms; $u.p99_ms))")
' <<<"$reports"
