#!/bin/sh
# bench/trace_stats.sh -- streams a million-request trace through `kvfleet trace stats` and
# reports peak RSS and rows/s. Two traces: the Mooncake conversation trace repeated 84 times
# (each copy shifted by one hour: block ids repeat, so the distinct-block set stays flat) and
# a generated chatbot trace (distinct blocks keep growing). Not part of the test run.
# Usage: bench/trace_stats.sh [KVFLEET_BINARY] [WORKDIR]
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/kvfleet}
W=${2:-/tmp/kvfleet-bench-traces}
mkdir -p "$W"
if [ ! -s "$W/mooncake_x84.jsonl" ]; then
    python3 - "$W/mooncake_x84.jsonl" <<'PY'
import re, sys
lines = open('traces/data/mooncake_conversation.jsonl').read().splitlines()
pre = re.compile(r'^\{"timestamp": (\d+),')
with open(sys.argv[1], 'w') as f:
    for k in range(84):
        for l in lines:
            m = pre.match(l)
            f.write('{"timestamp": %d,' % (int(m.group(1)) + k * 3600000) + l[m.end():] + '\n')
PY
fi
if [ ! -s "$W/chatbot_1m.jsonl" ]; then
    "$BIN" trace gen --profile chatbot --rate 300 --duration 3340 --block-tokens 512 \
        --seed 1 -o "$W/chatbot_1m.jsonl"
fi
run() { # name file extra-args
    rows=$(wc -l < "$2")
    /usr/bin/time -v "$BIN" trace stats "$2" $3 --json > "$W/$1.json" 2> "$W/$1.time"
    rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$W/$1.time")
    wall=$(awk -F': ' '/Elapsed \(wall/ {print $2}' "$W/$1.time")
    user=$(awk -F': ' '/User time/ {print $2}' "$W/$1.time")
    python3 - "$1" "$rows" "$rss" "$wall" "$user" "$W/$1.json" <<'PY'
import json, sys
name, rows, rss, wall, user, js = sys.argv[1:]
p = wall.split(':'); secs = float(p[-1]) + (60 * float(p[-2]) if len(p) > 1 else 0)
s = json.load(open(js))
print(f"{name}: {int(rows):,} rows, peak RSS {int(rss)/1024:.1f} MiB, wall {secs:.1f} s "
      f"(user {float(user):.1f} s), {int(rows)/secs:,.0f} rows/s; ideal_hit_rate "
      f"{s['ideal_hit_rate']:.4f}, distinct blocks {s['distinct_blocks']:,}")
PY
}
run mooncake_x84_b64 "$W/mooncake_x84.jsonl" "--block-tokens 64"
run mooncake_x84_b512 "$W/mooncake_x84.jsonl" "--block-tokens 512"
run chatbot_1m_b512 "$W/chatbot_1m.jsonl" "--block-tokens 512"
# memory must not depend on trace length: the first 100k rows against all of them
head -n 100000 "$W/mooncake_x84.jsonl" > "$W/mooncake_100k.jsonl"
run mooncake_100k_b64 "$W/mooncake_100k.jsonl" "--block-tokens 64"
