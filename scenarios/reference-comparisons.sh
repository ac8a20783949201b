#!/bin/sh
# scenarios/reference-comparisons.sh -- what the reference figures ask a reader to check, run on
# scenarios/deepseek-reference.yaml, one variant per directory under OUT (default
# out/reference-comparisons), then compared with `kvfleet compare` against the base run:
#   hw-ascend       the same cluster on Ascend 910C instead of GB200
#   engine-6pct     an engine 6 % behind on decode: HBM efficiency 0.8 -> 0.752 (decode steps are
#                   memory-bound; prefill's memory-bound parts slow as well)
#   store-off       no shared store (kv_cache.ssd.capacity_tb = 0)
#   retention-half  retention halved (agent and coding 36 h, chat 84 h)
#   routing-off     prefill routing by load instead of cache affinity (with one prefill
#                   instance this has nothing to choose between: a check that it changes nothing)
# Margin and payback against the hit rate (96 % down to 50 %) and utilisation are in every
# run's economics.sensitivity (report: "Margin and payback against the cache-hit rate"); the
# per-gigawatt extrapolation is economics.per_gigawatt.
set -e
KVF=${KVF:-build/kvfleet}
OUT=${1:-out/reference-comparisons}
S=scenarios/deepseek-reference.yaml
run() { name=$1; shift; "$KVF" run "$S" -q --no-report -o "$OUT/$name" "$@" >/dev/null; }
run base
run hw-ascend --set hardware=ascend-910c
run engine-6pct --set efficiency.memory=0.752
run store-off --set kv_cache.ssd.capacity_tb=0
run retention-half --set kv_cache.ssd.retention.agent=36h --set kv_cache.ssd.retention.coding=36h \
    --set kv_cache.ssd.retention.chatbot=84h
run routing-off --set router.prefill=least_loaded
"$KVF" compare "$OUT/base" "$OUT/hw-ascend" "$OUT/engine-6pct" "$OUT/store-off" \
    "$OUT/retention-half" "$OUT/routing-off"
