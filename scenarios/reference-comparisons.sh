#!/bin/sh
# scenarios/reference-comparisons.sh -- what the reference figures ask a reader to check, run on
# scenarios/deepseek-reference.yaml (DeepSeek-V4.1-Flash on GB200), one variant per directory
# under OUT (default out/reference-comparisons), then compared with `kvfleet compare` against
# the base run, each on the first minute of the reference's sessions (60 s of new sessions,
# the climb to ~3,700 rps and the drain: what-ifs beside one another, not the operating point,
# whose five minutes a backlogged variant would take long to drain):
#   v3-standin      DeepSeek-V3 instead of V4.1-Flash (the stand-in this reference ran before
#                   the model landed: MLA + 256 experts, 70 KB of KV a token, one MTP draft token
#                   at 80 %; TP 8 since its dense weights fit), same traffic and cluster
#   dspark-off      V4.1-Flash without speculative decoding (speculative.method none)
#   hw-ascend       the same cluster on Ascend 910C instead of GB200
#   engine-6pct     an engine 6 % behind on decode: HBM efficiency 0.8 -> 0.752 (decode steps are
#                   memory-bound; prefill's memory-bound parts slow as well)
#   store-off       no shared store (kv_cache.ssd.capacity_tb = 0)
#   retention-half  retention halved (agent and coding 36 h, chat 84 h)
# Margin and payback against the hit rate (96 % down to 50 %) and utilisation are in every
# run's economics.sensitivity (sh scenarios/reference-table.sh prints them); the per-gigawatt
# extrapolation is economics.per_gigawatt.
set -e
KVF=${KVF:-build/kvfleet}
OUT=${1:-out/reference-comparisons}
S=scenarios/deepseek-reference.yaml
run() {
    name=$1
    shift
    "$KVF" run "$S" -q --no-report --force -o "$OUT/$name" --set workload.generate.duration_s=60 \
        --set output.steady_from_s=40 --set output.steady_to_s=60 "$@" >/dev/null
}
run base
run v3-standin --set model=deepseek-v3 --set speculative.method=draft \
    --set speculative.draft_tokens=1 --set speculative.acceptance=0.8 \
    --set cluster.prefill.tp=8 --set cluster.decode.tp=8
run dspark-off --set speculative.method=none
run hw-ascend --set hardware=ascend-910c
run engine-6pct --set efficiency.memory=0.752
run store-off --set kv_cache.ssd.capacity_tb=0
run retention-half --set kv_cache.ssd.retention.agent=36h --set kv_cache.ssd.retention.coding=36h \
    --set kv_cache.ssd.retention.chatbot=84h
"$KVF" compare "$OUT/base" "$OUT/v3-standin" "$OUT/dspark-off" "$OUT/hw-ascend" \
    "$OUT/engine-6pct" "$OUT/store-off" "$OUT/retention-half"
