#!/usr/bin/env bash
# scripts/parity.sh OLD_BIN NEW_BIN [--all] -- runs every bundled scenario (and the quickstart
# cluster on each bundled trace) with two kvfleet binaries and compares what they wrote:
# summary.json without the wall-clock figures (sim.wall_s, sim.events_per_s, ...), every
# request row and every time-series row of results.db. Prints one line per case and exits 1
# on the first difference kept in the log. Without --all the multi-hour cases (fleet-day,
# fleet-days, cluster-1000gpu) are left out and deepseek-reference and fleet-day-v41 run their
# first minute. A refactoring or a faster path must leave this at "identical".
set -uo pipefail
old=${1:?usage: parity.sh OLD_BIN NEW_BIN [--all]}
new=${2:?usage: parity.sh OLD_BIN NEW_BIN [--all]}
all=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/kvf_parity.XXXXXX)
# KEEP=1 keeps the runs (printed at the end) for a closer look; EVENTS=0 leaves the event counts
# out too (a path that merges events, such as runs of decode steps, changes only those; so does
# a binary from before sim.page_events)
trap '[ -n "${KEEP:-}" ] && echo "runs kept in $work" || rm -rf "$work"' EXIT
cases=()
for s in "$here"/scenarios/*.yaml "$here"/scenarios/published/*.yaml; do
  extra=
  case "$(basename "$s")" in
    fleet-day.yaml|fleet-days.yaml|cluster-1000gpu.yaml) [ "$all" = --all ] || continue ;;
    # five minutes of sessions at 4,000 rps: its first minute unless --all
    deepseek-reference.yaml|fleet-day-v41.yaml)
      [ "$all" = --all ] || extra="--set workload.generate.duration_s=60" ;;
  esac
  cases+=("$s|$extra")
done
# the bundled traces; the ShareGPT lengths file has no times: a trace generated from it
"$old" trace gen --profile chatbot --lengths "$here/traces/data/sarathi_sharegpt8k_lengths.csv" \
  --rate 4 --duration 600 --seed 7 -o "$work/sharegpt.jsonl" >/dev/null 2>&1
for t in "$here"/traces/data/*.jsonl "$here"/traces/data/azure*.csv "$work/sharegpt.jsonl"; do
  cases+=("$here/scenarios/quickstart.yaml|--trace $t --set workload.format=auto")
done
strip() { # summary.json without the figures that are wall-clock
  jq -S 'del(.sim.wall_s, .sim.events_per_s, .sim.wall_loop_s, .sim.rss_bytes, .sim.peak_rss_bytes,
              .sim.read_s, .sim.startup_s) | walk(if type == "object" then del(.wall_s) else . end)
         | if env.EVENTS == "0" then del(.sim.events, .sim.page_events) else . end' "$1"
}
dump() { # request and time-series rows, in their stored order
  sqlite3 "$1" 'select * from request order by rowid; select * from timeseries order by rowid;'
}
fail=0
for c in "${cases[@]}"; do
  s=${c%%|*}; extra=${c#*|}
  name=$(basename "$s" .yaml)
  case $extra in --trace*) name=$name-$(basename "${extra#--trace }" | cut -d' ' -f1) ;; esac
  ok=1
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    # shellcheck disable=SC2086
    (cd "$here" && "$bin" run "$s" $extra -q -o "$work/$side-$name" --no-report) \
      > "$work/$side-$name.log" 2>&1 || echo "exit $?" >> "$work/$side-$name.rc"
  done
  if ! cmp -s "$work/old-$name.rc" "$work/new-$name.rc" 2>/dev/null &&
     [ -e "$work/old-$name.rc" -o -e "$work/new-$name.rc" ]; then ok=0; fi
  if [ -f "$work/old-$name/summary.json" ]; then
    diff <(strip "$work/old-$name/summary.json") <(strip "$work/new-$name/summary.json") \
      > "$work/$name.sdiff" 2>&1 || ok=0
    diff <(dump "$work/old-$name/results.db") <(dump "$work/new-$name/results.db") \
      > "$work/$name.rdiff" 2>&1 || ok=0
  fi
  if [ $ok = 1 ]; then echo "identical  $name"; else
    echo "DIFFERENT  $name"; head -20 "$work/$name.sdiff" "$work/$name.rdiff" 2>/dev/null; fail=1; fi
done
exit $fail
