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
#      step) while idle, again while it applies K deltas itself (default 3, evenly spaced: the
#      revision, the base cache, the revision...), each waited for before the next, and once
#      more idle on the database the deltas left, replaying the first run's calls (what stays
#      after the deltas): p50/p99 of each group in the three runs, and how long each of the
#      server's deltas took; then, for each group over 1.5x of idle during the deltas, how many
#      of its calls were slower than 1.5x its idle p99 while a delta ran and between deltas
#      (from the run's `--calls-log`, DIR/during.calls.jsonl, and the deltas' spans,
#      DIR/deltas.jsonl).
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
        *) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 1 ;;
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

# Serving: idle, then while the server applies the revision and the base cache in turn, itself.
cp "$dir/base.db" "$project/.acp/acp.db"
rm -f "$project/.acp/acp.db-wal" "$project/.acp/acp.db-shm"
cp "$dir/base.cache.json" "$project/.acp/acp.cache.json"
touch -r "$dir/base.db" "$project/.acp/acp.cache.json"
"$acpdb" bench -C "$project" --stdio --duration "$duration" --json \
    --save-workload "$dir/workload.json" > "$dir/idle.json" 2>/dev/null
imported() {
    "$acpdb" sql -C "$project" --csv "SELECT value FROM meta WHERE key = '$1'" 2>/dev/null |
        tail -n 1 | tr -d '\r'
}
# Read before the run; during it the server's import is polled once a second, each poll a short
# process of its own, so as to take little from the calls measured.
last=$(imported imported_at)
"$acpdb" bench -C "$project" --stdio --duration "$duration" --json \
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
# The same calls on the database the deltas left, nothing else running.
"$acpdb" bench -C "$project" --stdio --duration "$duration" --json \
    --workload "$dir/workload.json" > "$dir/after.json" 2>/dev/null

echo
echo "| tool | idle p50 / p99 (ms) | with $deltas deltas p50 / p99 (ms) | p99 ratio | idle after them p50 / p99 (ms) | p99 ratio |"
echo "|---|---:|---:|---:|---:|---:|"
jq -r --slurpfile d "$dir/during.json" --slurpfile a "$dir/after.json" '
  def ratio(x; y): (x / y * 100 | round) / 100;
  .tools[] | select(.label | test("^acp_query:(callers|callees|search)|primer|depth") | not)
  | . as $i | ($d[0].tools[] | select(.label == $i.label)) as $x
  | ($a[0].tools[] | select(.label == $i.label)) as $y
  | "| \(.label) | \(.p50_ms) / \(.p99_ms) | \($x.p50_ms) / \($x.p99_ms) | \(ratio($x.p99_ms; .p99_ms)) | \($y.p50_ms) / \($y.p99_ms) | \(ratio($y.p99_ms; .p99_ms)) |"' \
  "$dir/idle.json"
echo
echo "Calls slower than 1.5x their group's idle p99 in the run with deltas, by when they started"
echo "(groups over 1.5x; a delta from its start to its commit, checkpoint and new pool):"
echo
echo "| tool | during a delta: slower / calls | between deltas: slower / calls |"
echo "|---|---:|---:|"
jq -rn --slurpfile i "$dir/idle.json" --slurpfile d "$dir/during.json" \
    --slurpfile spans "$dir/deltas.jsonl" --slurpfile calls "$dir/during.calls.jsonl" '
  ($i[0].tools | map({key: .label, value: .p99_ms}) | from_entries) as $idle
  | [$d[0].tools[] | select($idle[.label] != null and .p99_ms > 1.5 * $idle[.label]) | .label]
    as $over
  | $calls | map(select(.group as $g | any($over[]; . == $g)))
  | group_by(.group)[]
  | .[0].group as $g | ($idle[$g] * 1500) as $limit
  | map(. as $c | {slow: ($c.latency_us > $limit),
                   during: any($spans[]; $c.start_us >= .from_us and $c.start_us <= .to_us)})
  | "| \($g) | \(map(select(.during and .slow)) | length) / \(map(select(.during)) | length) | \(map(select((.during | not) and .slow)) | length) / \(map(select(.during | not)) | length) |"'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
