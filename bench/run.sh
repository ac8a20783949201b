#!/usr/bin/env bash
# bench/run.sh BUILD_DIR [OLD_KVFLEET] -- runs the benchmarks and prints their figures (not part
# of tests). OLD_KVFLEET (or KVF_BENCH_OLD): a previous release's binary; sim_speed prints each
# figure beside that binary's run of the same scenario, timed in the same bench run;
# KVF_BENCH_OLD_REPO: that release's checkout, whose scenario files the old binary then reads.
set -euo pipefail
build=${1:-build}
old=${2:-${KVF_BENCH_OLD:-}}
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${KVF_SHARED:-$here/../shared}
[ -d "$shared/traces" ] || shared=$here   # fall back to the bundled traces (traces/data)
[ -f "$shared/traces/mooncake_conversation.jsonl" ] || { mkdir -p /tmp/kvf_sh/traces; cp "$here/traces/data/mooncake_conversation.jsonl" /tmp/kvf_sh/traces/; shared=/tmp/kvf_sh; }
echo "== startup (RSS and wall before simulating)"
"$here/bench/startup.sh" "$build"
echo "== simulator speed"
"$build/bench/sim_speed" "$here" "$shared" 1 ${old:+"$old"}
for b in "$build"/bench/*; do
  case "$(basename "$b")" in sim_speed) ;; *) [ -x "$b" ] && { echo "== $(basename "$b")"; "$b" || true; } ;; esac
done
