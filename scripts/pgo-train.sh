#!/usr/bin/env bash
# scripts/pgo-train.sh KVFLEET PROFILE_DIR -- the training run of profile-guided optimisation
# (make build): the instrumented kvfleet (built with KVFLEET_PGO=generate) replays bundled
# scenarios, shortened where they are long, and writes its profiles to PROFILE_DIR, which is
# emptied first (profiles of an older build would be merged in). About 10 s on two cores.
#
# The training set is the simulator's everyday work: the event loop with and without the
# prefix cache and the SSD store, disaggregated and colocated pools, expert-parallel decode,
# routers and SLO classes, stores over days, both trace readers (Mooncake JSONL, Azure CSV)
# and the report. The figures bench/sim_speed times run the same code on other traces and
# at other sizes (its 1,000-GPU hour replays generated traffic; this replays Mooncake at
# 20,000 requests). Code the training does not reach is compiled as without profiles.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: scripts/pgo-train.sh KVFLEET PROFILE_DIR" >&2
    exit 2
fi
if [ ! -f "$1" ] || [ ! -x "$1" ]; then
    echo "pgo-train: $1: not an executable kvfleet" >&2
    exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")   # the replays run from the repository root
dir=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
find "$dir" -name '*.gcda' -delete
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {   # run NAME ARGS...: one replay; a failure stops the build with its message
    local name=$1
    shift
    if ! "$bin" run "$@" -o "$out/$name" --force -q > "$out/$name.log" 2>&1; then
        echo "pgo-train: '$name' failed:" >&2
        cat "$out/$name.log" >&2
        exit 1
    fi
}
cd "$repo"
run quickstart scenarios/quickstart.yaml
run azure scenarios/quickstart.yaml --trace traces/data/azure2023_conv.csv --no-report
run cached scenarios/cluster-1000gpu.yaml --set workload.limit_requests=20000 --no-report
run nocache scenarios/cluster-1000gpu.yaml --set workload.limit_requests=20000 \
    --set kv_cache.prefix_cache=false --no-report
run ep scenarios/ep-decode-144.yaml --no-report
run colocated scenarios/quickstart.yaml --set cluster.mode=colocated \
    --set cluster.decode.instances=0 --set cluster.prefill.instances=4 --no-report
run policies scenarios/policy-comparison.yaml --no-report
run classes scenarios/slo-classes.yaml --no-report
run mixed scenarios/mixed-hardware.yaml --no-report
run days scenarios/fleet-days.yaml --no-report
# the binary writes where it was built to (KVFLEET_PGO_DIR), not where this script was told:
# none here means another folder, or a binary built without KVFLEET_PGO=generate
n=$(find "$dir" -name '*.gcda' | wc -l)
if [ "$n" -eq 0 ]; then
    echo "pgo-train: no profiles were written to $dir: was $1 built with" \
         "KVFLEET_PGO=generate and KVFLEET_PGO_DIR=$dir?" >&2
    exit 1
fi
echo "pgo-train: $n profiles in $dir"
