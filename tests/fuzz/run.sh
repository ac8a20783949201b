#!/bin/sh
# tests/fuzz/run.sh -- builds the libFuzzer targets (CMake, KVFLEET_FUZZ=ON, clang with ASan
# and UBSan, in build-fuzz/) and runs each for SECONDS (default 20) from a seed corpus of real
# files, printing the executions reached. Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]
# Targets: fuzz_readers_{mooncake,azure,burstgpt,sessions,kvfleet,auto}, fuzz_scenario,
# fuzz_model, fuzz_resultsdb, fuzz_argv, fuzz_set. Needs clang with libFuzzer (Debian: clang, libclang-rt-14-dev).
# Exit 1 on any crash, sanitizer report, leak or timeout (artifacts in build-fuzz/artifacts/).
set -eu
cd "$(dirname "$0")/../.."
SECS=${1:-20}
[ $# -gt 0 ] && shift
B=build-fuzz
ALL="fuzz_readers_mooncake fuzz_readers_azure fuzz_readers_burstgpt fuzz_readers_sessions
     fuzz_readers_kvfleet fuzz_readers_auto fuzz_scenario fuzz_model fuzz_resultsdb fuzz_argv
     fuzz_set"
TARGETS=${*:-$ALL}
CC=${CC:-clang} cmake -S . -B $B -DKVFLEET_FUZZ=ON -DKVFLEET_SANITIZE=address,undefined \
    -DKVFLEET_CUDA=OFF -DKVFLEET_MPI=OFF -DKVFLEET_WERROR=ON >/dev/null
cmake --build $B -j "$(nproc)" --target fuzz >/dev/null
SH=${KVF_SHARED:-../shared}/traces
mkdir -p $B/artifacts

# seed corpus: a mode/flags byte, then the head of a real file
seed_file() { # DIR BYTE FILE
    [ -f "$3" ] || return 0
    { printf "\\$(printf %o "$2")"; head -c 6000 "$3"; } > "$1/s$2_$(basename "$3")"
}
seed() {
    d=$B/corpus/$1
    mkdir -p "$d"
    case $1 in
    fuzz_readers_mooncake) for fl in 0 3 12 33; do seed_file "$d" $fl traces/data/mooncake_conversation.jsonl; done ;;
    fuzz_readers_azure) for fl in 0 3 12 33; do seed_file "$d" $fl traces/data/azure2023_conv.csv; done ;;
    fuzz_readers_sessions) for fl in 0 3 12 33; do seed_file "$d" $fl "$SH/weka_agentic_dev.jsonl"; done ;;
    fuzz_readers_burstgpt)
        printf '\000Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID\n5,ChatGPT,472,18,490,Conversation log,a\n45,GPT-4,10,0,10,API log,a\n' > "$d/s0" ;;
    fuzz_readers_kvfleet|fuzz_readers_auto)
        printf '\000{"id":0,"arrival_ns":0,"input_tokens":130,"output_tokens":3,"class":"agent","flags":0,"images":1,"session":7,"turn":0,"prev_id":-1,"think_ns":0,"block_tokens":64,"blocks":[1,-2]}\n{"id":1,"arrival_ns":5,"input_tokens":200,"output_tokens":3,"session":7,"turn":1,"prev_id":0,"think_ns":9,"block_tokens":64,"blocks":[1,-2,3]}\n' > "$d/s0"
        seed_file "$d" 0 traces/data/mooncake_conversation.jsonl
        # found by this target: a canonical request without blocks, read whole for the stats
        # (an offset added to a null block array)
        printf '\007{"id":0,"arrival_ns":0,"input_tokens":130,"output_tokens":3,"class":"agent","flags":0,"imagex":-1,"think_ns":0,"block_tokens":64,"b6ocks":[1,52]}\n{"[1,-2,3]}\n' > "$d/r1" ;;
    fuzz_scenario)
        for f in scenarios/*.yaml; do seed_file "$d" 0 "$f"; done
        printf '\001cluster.prefill={instances: 4, gpus_per_instance: 2}' > "$d/set1"
        printf '\001economics.gpu_hour_usd=[1, 2]' > "$d/set2"
        printf '\001cluster.schedule=[{from_h: 0, prefill: 1}, {from_h: 8, prefill: 2}]' > "$d/set3" ;;
    fuzz_argv)
        printf 's.yaml\000-o\000out\000--force\000--set\000seed=3\000--trace\000x #1.jsonl' > "$d/a1"
        printf -- '--seed\0005 # x\000-j4\000--step-seqs\0002\000--json\000-q\000--help' > "$d/a2"
        printf -- '--trace\000"q\\\\:\000--set\000' > "$d/a3" ;;
    fuzz_set)
        printf '\001cluster.prefill.instances=4\000workload.trace=x #1.jsonl\000workload.trace=a: b' > "$d/s1"
        printf '\000economics.prices_per_mtok.chatbot.output=1\000cluster.decode={instances: 2}' > "$d/s2"
        printf '\000workload.generate.days=2\000workload.generate.arrival=gamma\000seed=7' > "$d/s3" ;;
    fuzz_model)
        for f in models/*.yaml; do seed_file "$d" 0 "$f"; done
        for f in models/hardware/*.yaml; do seed_file "$d" 1 "$f"; done ;;
    fuzz_resultsdb)
        if [ -x build/kvfleet ] && [ ! -f "$d/r.db" ]; then
            rm -rf $B/seed_run
            build/kvfleet run scenarios/quickstart.yaml --set workload.limit_requests=8 \
                --set output.sample_interval_s=60 -q --no-report -o $B/seed_run >/dev/null 2>&1 &&
                cp $B/seed_run/results.db "$d/r.db" || true
        fi
        printf 'SQLite format 3\000' > "$d/hdr" ;;
    esac
}

total=0
for t in $TARGETS; do
    seed "$t"
    maxlen=8192
    [ "$t" = fuzz_resultsdb ] && maxlen=131072
    log=$B/$t.log
    rc=0
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        $B/fuzz/$t -max_total_time="$SECS" -max_len=$maxlen -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$B/artifacts/$t-" $B/corpus/$t >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    printf 'fuzz %-24s %4ss  %9s executions\n' "$t" "${secs:-?}" "${execs:-?}"
    if [ $rc -ne 0 ]; then
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -20
        echo "$t: FAILED (exit $rc; log $log, artifacts in $B/artifacts/)"
        exit 1
    fi
done
echo "fuzz: all targets clean"
