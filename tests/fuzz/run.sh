#!/bin/sh
# tests/fuzz/run.sh -- builds the libFuzzer target once per trace format and runs each for
# SECONDS (default 60). Usage: tests/fuzz/run.sh [SECONDS] [FORMAT...]
# Needs clang with libFuzzer (Debian: libclang-rt-14-dev). Work goes to build-fuzz/.
set -eu
cd "$(dirname "$0")/../.."
SECS=${1:-60}
[ $# -gt 0 ] && shift
FORMATS=${*:-"mooncake azure burstgpt sessions kvfleet auto"}
OUT=build-fuzz
mkdir -p "$OUT"
CC=${CC:-clang}
SRC="tests/fuzz/fuzz_readers.c traces/trc_reader.c traces/trc_json.c traces/trc_csv.c
     traces/trc_writer.c traces/trc_gen.c traces/trc_stats.c common/kvf.c"
SH=${KVF_SHARED:-../shared}/traces

seed() { # seed corpus: a flags byte then the head of a real or small trace
    d="$OUT/corpus_$1"; mkdir -p "$d"
    case $1 in
    mooncake) src=traces/data/mooncake_conversation.jsonl ;;
    azure) src=traces/data/azure2023_conv.csv ;;
    sessions) src=$SH/weka_agentic_dev.jsonl ;;
    *) src= ;;
    esac
    if [ "$1" = burstgpt ]; then
        printf '\000Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID\n5,ChatGPT,472,18,490,Conversation log,a\n45,GPT-4,10,0,10,API log,a\n' > "$d/s0"
    elif [ "$1" = kvfleet ] || [ "$1" = auto ]; then
        printf '\000{"id":0,"arrival_ns":0,"input_tokens":130,"output_tokens":3,"class":"agent","flags":0,"images":1,"session":7,"turn":0,"prev_id":-1,"think_ns":0,"block_tokens":64,"blocks":[1,-2]}\n{"id":1,"arrival_ns":5,"input_tokens":200,"output_tokens":3,"session":7,"turn":1,"prev_id":0,"think_ns":9,"block_tokens":64,"blocks":[1,-2,3]}\n' > "$d/s0"
    fi
    if [ -n "$src" ] && [ -f "$src" ]; then
        for fl in 0 3 12 33; do
            { printf "\\$(printf %o $fl)"; head -c 3000 "$src"; } > "$d/s$fl"
        done
    fi
}

for fmt in $FORMATS; do
    F=$(echo "$fmt" | tr a-z A-Z)
    $CC -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -DFUZZ_FORMAT=TRC_FMT_$F -D_GNU_SOURCE -Icommon -Itraces $SRC \
        -ljansson -lcsv -lm -o "$OUT/fuzz_$fmt"
    seed "$fmt"
    echo "== fuzz_$fmt for ${SECS}s"
    rc=0
    "$OUT/fuzz_$fmt" -max_total_time="$SECS" -max_len=8192 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$OUT/${fmt}-" "$OUT/corpus_$fmt" \
        > "$OUT/fuzz_$fmt.log" 2>&1 || rc=$?
    grep -E "^(stat::|SUMMARY|Done)|ERROR" "$OUT/fuzz_$fmt.log" || true
    if [ $rc -ne 0 ]; then
        echo "fuzz_$fmt: FAILED (exit $rc; log and artifacts in $OUT)"; exit 1
    fi
done
echo "fuzz: all formats clean"
