#!/usr/bin/env bash
# scripts/readme-examples.sh [--check] -- reruns the README's example commands and rewrites the
# output block after each of them, so the figures the README shows are what the commands print.
#
# A marker line  <!-- readme-example: COMMAND -->  names the command; the fenced block right
# after it is its output. COMMAND runs in the repository root with `build/kvfleet` replaced by
# $KVF_BIN (default build/kvfleet); its stdout is the block (stderr is dropped), and a non-zero
# exit status is shown on a last line "(exit status N)". The `simulator` line is masked: its
# seconds and events per second are wall-clock ("<wall>", "<rate>"), and its event count
# ("<n>") follows how the simulator schedules its work, not the results. Everything else a run
# prints is deterministic (same scenario, trace and seed give the same figures).
#
# --check: change nothing; exit 1 and print the difference when the README differs (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${KVF_BIN:-build/kvfleet}
check=0
[ "${1:-}" = --check ] && check=1
[ -x "$bin" ] || { echo "readme-examples: no kvfleet at $bin (build first)" >&2; exit 2; }

mask() {
    sed -E 's/[0-9]+ events in [0-9.]+ s wall \([0-9.]+ M events\/s\)/<n> events in <wall> s wall (<rate> M events\/s)/'
}

run_example() {
    local cmd=${1//build\/kvfleet/$bin} rc=0 out
    out=$(mktemp)
    bash -c "$cmd" >"$out" 2>/dev/null || rc=$?
    mask <"$out"
    rm -f "$out"
    [ "$rc" = 0 ] || echo "(exit status $rc)"
}

new=$(mktemp)
trap 'rm -f "$new"' EXIT
state=0 n=0 cmd=
while IFS= read -r line || [ -n "$line" ]; do
    case $state in
    0)
        printf '%s\n' "$line" >>"$new"
        if [[ $line =~ ^\<!--\ readme-example:\ (.*)\ --\>$ ]]; then
            cmd=${BASH_REMATCH[1]}
            state=1
        fi
        ;;
    1)
        printf '%s\n' "$line" >>"$new"
        if [[ $line != '```'* ]]; then
            echo "readme-examples: README.md: the marker of '$cmd' is not followed by a fenced block" >&2
            exit 2
        fi
        run_example "$cmd" >>"$new"
        n=$((n + 1))
        state=2
        ;;
    2)
        if [[ $line == '```' ]]; then
            printf '%s\n' "$line" >>"$new"
            state=0
        fi
        ;;
    esac
done <README.md
[ "$state" = 0 ] || { echo "readme-examples: README.md ends inside an example block" >&2; exit 2; }
[ "$n" -gt 0 ] || { echo "readme-examples: no readme-example markers in README.md" >&2; exit 2; }

if [ "$check" = 1 ]; then
    if ! diff -u README.md "$new"; then
        echo "readme-examples: README.md differs from what its $n examples print;" \
             "run scripts/readme-examples.sh and commit the result" >&2
        exit 1
    fi
    echo "readme-examples: the $n example outputs in README.md match"
else
    cp "$new" README.md
    echo "readme-examples: rewrote the output of $n examples in README.md"
fi
