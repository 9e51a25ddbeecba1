#!/usr/bin/env bash
# Delta import benchmark (docs/benchmarks.md, "Delta import").
#
# Usage:
#   benches/delta.sh [--files N] [--changed PERCENT] [--moved PERCENT] [--unresolved PERCENT]
#                    [--key-order hash|file] [--dir DIR] [--duration S] [--deltas K]
#                    [--serving-only] [--binary PATH]
#
# Generates a cache of N files (10 symbols each, 4.5 call edges per symbol, --unresolved percent
# of the call graph's names resolving to no symbol, default 15, as in real code; default 100000
# files, i.e. 1M symbols; its maps in --key-order, default hash, as acp-cli writes them) and a
# revision of it with PERCENT of the files changed (default 1: their summaries, their symbols'
# summaries and callees, so the call graph changes with them; in each its last symbol replaced
# by one of a new name that calls the hubs), --moved PERCENT of those also moved to another
# directory (default 0: their symbols renamed wherever named). Then, with the release build:
#   1. a full import of the base cache (`/usr/bin/time -v`: seconds, peak RSS, database size);
#   2. a delta import of the revision onto that database (same measures), then a full import of
#      the revision, which the delta's time is compared with;
#   3. the same for each real cache of fixtures/real/, its revision made with
#      `gen-fixture --edit-of` (PERCENT of its files edited; --moved does not apply to them);
#   4. `acpdb serve` under the default benchmark mix for S seconds (default 60; 0 skips this
#      step), in one run, while it applies K deltas itself (default 3, evenly spaced from
#      S / (K + 1) on: the revision, the base cache, the revision...), each waited for before
#      the next: how long each of the server's deltas took, then each group's p50/p99 over the
#      calls started during a delta (from its start to 3 s after the poll that saw it committed)
#      against its p50/p99 over the other calls of the same run (idle), and the p99 of the idle
#      calls of odd-numbered gaps between deltas against the even ones: what two idle samples of
#      one run differ by. From the run's `--calls-log` (DIR/during.calls.jsonl) and the deltas'
#      spans (DIR/deltas.jsonl).
# --serving-only skips steps 1 to 3 when DIR holds the base database from an earlier run.
# --binary runs another build instead of the release build of this checkout (to compare two
# builds on the same caches). Needs jq. Writes everything below DIR (default: a new temporary
# directory); caches already generated there are reused whatever the options say (use one DIR
# per --files, --changed, --moved, --unresolved and --key-order).
set -euo pipefail

files=100000
changed=1
moved=0
unresolved=15
key_order=hash
dir=""
duration=60
deltas=3
serving_only=""
binary=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --files) files="$2"; shift 2 ;;
        --changed) changed="$2"; shift 2 ;;
        --moved) moved="$2"; shift 2 ;;
        --unresolved) unresolved="$2"; shift 2 ;;
        --key-order) key_order="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        --duration) duration="$2"; shift 2 ;;
        --deltas) deltas="$2"; shift 2 ;;
        --serving-only) serving_only=1; shift ;;
        --binary) binary="$2"; shift 2 ;;
        *) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 1 ;;
    esac
done
command -v jq >/dev/null || { echo "delta.sh: jq is required" >&2; exit 1; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -n "$binary" ]]; then
    acpdb="$binary"
else
    (cd "$repo" && cargo build --release --quiet)
    acpdb="$repo/target/release/acpdb"
fi
dir="${dir:-$(mktemp -d)}"
project="$dir/project"
gen=(gen-fixture --files "$files" --symbols-per-file 10 --edges-per-symbol 4.5
     --unresolved-percent "$unresolved" --key-order "$key_order")

measure() { # label, then the command; prints "label: seconds s, peak RSS MB"
    local label="$1"; shift
    # Each run starts with the device quiet: what the run before wrote is on disk first (a
    # delta right after a full import otherwise competes with the write-out of 1.2 GB at 1M).
    sync
    /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" 2> "$dir/$label.log" || {
        cat "$dir/$label.log" >&2; exit 1; }
    read -r secs rss < "$dir/time.txt"
    echo "$label: $secs s, peak RSS $((rss / 1024)) MB; $(tail -n 1 "$dir/$label.log")"
    eval "${label}_secs=$secs"
}
size_mb() { echo $(( $(stat -c %s "$1") / 1000000 )); }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -f "$dir/rev1/.acp/acp.cache.json" ]] ||
    "$acpdb" "${gen[@]}" --out "$dir/rev1" --revision 1 --changed-percent "$changed" \
        --moved-percent "$moved" 2>/dev/null
[[ -f "$dir/base.cache.json" ]] || "$acpdb" "${gen[@]}" --out "$project" 2>/dev/null
[[ -f "$dir/base.cache.json" ]] && cp "$dir/base.cache.json" "$project/.acp/acp.cache.json"
if [[ -n "$serving_only" && -f "$dir/base.db" ]]; then
    echo "(imports skipped: --serving-only)"
else
    rm -f "$project/.acp/acp.db" "$project/.acp/acp.db-wal" "$project/.acp/acp.db-shm"
    measure full "$acpdb" import -C "$project" --full --no-progress
    cp "$project/.acp/acp.db" "$dir/base.db"
    cp "$project/.acp/acp.cache.json" "$dir/base.cache.json"
    base_mb=$(size_mb "$dir/base.db")

    cp "$dir/rev1/.acp/acp.cache.json" "$project/.acp/acp.cache.json"
    measure delta "$acpdb" import -C "$project" --no-progress
    delta_mb=$(size_mb "$project/.acp/acp.db")
    cp "$project/.acp/acp.db" "$dir/delta.db"
    # The full import of the same revision, right after: the time the delta is compared with.
    measure full_new "$acpdb" import -C "$project" --full --no-progress
    echo "database: ${base_mb} MB after the full import, ${delta_mb} MB after the delta"
    echo "delta time / full import time of the new cache: $(jq -n "$delta_secs / $full_new_secs * 100 | . * 10 | round / 10")%"
    cp "$dir/delta.db" "$project/.acp/acp.db"
    rm -f "$project/.acp/acp.db-wal" "$project/.acp/acp.db-shm"
fi

# The real caches of fixtures/real/, each with PERCENT of its files edited the same way
# (`gen-fixture --edit-of`): the median of three deltas onto a fresh copy of the full import,
# against the median of three full imports of the revision.
if [[ -z "$serving_only" ]]; then
    millis() { # the command's wall time in ms; its summary line kept in $dir/real.log
        local t0; t0=$(date +%s%N)
        "$@" > /dev/null 2> "$dir/real.log" || { cat "$dir/real.log" >&2; exit 1; }
        echo $(( ($(date +%s%N) - t0) / 1000000 ))
    }
    median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
    echo
    echo "| real cache ($changed % of files edited) | symbols | full import (ms) | delta (ms) | delta / full | written by the delta / database |"
    echo "|---|---:|---:|---:|---:|---:|"
    for real in "$repo"/fixtures/real/*/; do
        name="$(basename "$real")"
        at="$dir/real/$name"
        rm -rf "$at" "$at-rev"; mkdir -p "$dir/real"; cp -r "$real" "$at"
        "$acpdb" gen-fixture --edit-of "$at" --changed-percent "$changed" --out "$at-rev" 2>/dev/null
        millis "$acpdb" import -C "$at" --full --no-progress > /dev/null
        cp "$at/.acp/acp.db" "$at/base.db"
        symbols=$(jq '.symbols | length' "$at/.acp/acp.cache.json")
        cp "$at-rev/.acp/acp.cache.json" "$at/.acp/acp.cache.json"
        deltas_ms=(); fulls_ms=()
        for _ in 1 2 3; do
            cp "$at/base.db" "$at/.acp/acp.db"; rm -f "$at/.acp/acp.db-wal" "$at/.acp/acp.db-shm"
            deltas_ms+=("$(millis "$acpdb" import -C "$at" --no-progress)")
            grep -q '^delta:' "$dir/real.log" ||
                { echo "delta.sh: $name: not a delta: $(cat "$dir/real.log")" >&2; exit 1; }
            written=$(grep -o '[0-9.]* [kMG]B written' "$dir/real.log" | tail -n 1)
            db_size=$(grep -o 'acp.db ([0-9.]* [kMG]B' "$dir/real.log" | sed 's/acp.db (//')
        done
        for _ in 1 2 3; do
            fulls_ms+=("$(millis "$acpdb" import -C "$at" --full --no-progress)")
        done
        d=$(median "${deltas_ms[@]}"); f=$(median "${fulls_ms[@]}")
        echo "| $name | $symbols | $f | $d | $(jq -n "$d / $f * 1000 | round / 10")% | ${written% written} / $db_size |"
    done
fi

if [[ "$duration" == 0 ]]; then
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi

# Serving: one run of the mix while the server applies the revision and the base cache in turn,
# itself; its calls split by when they started, so that idle and deltas share whatever else loads
# the machine.
cp "$dir/base.db" "$project/.acp/acp.db"
rm -f "$project/.acp/acp.db-wal" "$project/.acp/acp.db-shm"
cp "$dir/base.cache.json" "$project/.acp/acp.cache.json"
touch -r "$dir/base.db" "$project/.acp/acp.cache.json"
imported() {
    "$acpdb" sql -C "$project" --csv "SELECT value FROM meta WHERE key = '$1'" 2>/dev/null |
        tail -n 1 | tr -d '\r'
}
# Read before the run; during it the server's import is polled once a second, each poll a short
# process of its own, so as to take little from the calls measured.
last=$(imported imported_at)
"$acpdb" bench -C "$project" --stdio --duration "$duration" --json \
    --save-workload "$dir/workload.json" \
    --calls-log "$dir/during.calls.jsonl" > "$dir/during.json" 2>/dev/null &
bench=$!
# Each delta's span, microseconds since the Unix epoch: from its start (its commit less
# `import_ms`) to the poll that saw it committed (its checkpoint and the new pool done by then).
: > "$dir/deltas.jsonl"
started=$(date +%s.%N)
for ((k = 1; k <= deltas; k++)); do
    # At k / (K + 1) of the run, or as soon as the previous delta ends.
    sleep "$(jq -n "[$started + $duration * $k / ($deltas + 1) - $(date +%s.%N), 0] | max")"
    if ((k % 2)); then cache="$dir/rev1/.acp/acp.cache.json"; else cache="$dir/base.cache.json"; fi
    cp "$cache" "$project/.acp/acp.cache.json.new"
    mv "$project/.acp/acp.cache.json.new" "$project/.acp/acp.cache.json"
    now="$last"
    for ((tries = 0; tries < duration; tries++)); do
        sleep 1
        now=$(imported imported_at)
        if [[ "$now" != "$last" ]]; then break; fi
    done
    [[ "$now" != "$last" ]] ||
        { echo "delta.sh: the server did not apply delta $k during the run" >&2; exit 1; }
    last="$now"
    ms=$(imported import_ms)
    seen=$(date +%s%6N)
    committed=$(date -d "$now" +%s%6N)
    echo "{\"from_us\": $((committed - ms * 1000)), \"to_us\": $seen}" >> "$dir/deltas.jsonl"
    echo "the server's delta $k: $((ms / 1000)).$(printf %03d $((ms % 1000))) s to its commit (meta import_ms)"
done
wait "$bench"

# A call belongs to a delta when it started from the delta's start to $settle seconds after the
# poll that saw it committed (the first calls on the new pool's connections count as the
# delta's); the others are idle, numbered by the deltas before them, and idle windows of odd
# and even number are compared with each other as well: what two idle samples of the same run
# differ by, the noise any ratio of this run is to be read against.
settle=3
echo
echo "| tool | idle calls | idle p50 / p99 (ms) | calls during deltas | during p50 / p99 (ms) | p99 ratio | idle odd / even windows' p99 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
jq -rn --slurpfile spans "$dir/deltas.jsonl" --slurpfile calls "$dir/during.calls.jsonl" \
    --argjson settle "$settle" '
  def pct(q): sort | .[([(q / 100 * length | ceil), 1] | max) - 1];
  def ms: . / 1000;
  def ratio(x; y): if x != null and y != null and y > 0 then (x / y * 100 | round) / 100 else "-" end;
  ($settle * 1000000) as $after
  | $calls
  | map(.start_us as $t
        | . + {window: (if any($spans[]; $t >= .from_us and $t <= .to_us + $after) then -1
                         else [$spans[] | select(.to_us + $after < $t)] | length end)})
  | group_by(.group)[]
  | select(.[0].group | test("^acp_query:(callers|callees|search)|primer|depth") | not)
  | .[0].group as $g
  | (map(select(.window >= 0) | .latency_us)) as $idle
  | (map(select(.window < 0) | .latency_us)) as $during
  | (map(select(.window >= 0 and .window % 2 == 1) | .latency_us) | pct(99)) as $odd
  | (map(select(.window >= 0 and .window % 2 == 0) | .latency_us) | pct(99)) as $even
  | select(($idle | length) > 0 and ($during | length) > 0)
  | "| \($g) | \($idle | length) | \($idle | pct(50) | ms) / \($idle | pct(99) | ms) | \($during | length) | \($during | pct(50) | ms) / \($during | pct(99) | ms) | \(ratio($during | pct(99); $idle | pct(99))) | \(ratio($odd; $even)) |"'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
