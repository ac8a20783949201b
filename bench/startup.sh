#!/usr/bin/env bash
# bench/startup.sh BUILD_DIR -- what a simulator command costs before it simulates anything:
# maximum RSS (KB, GNU time's %M; the simulator alone: --no-report keeps gnuplot, a child
# process, out of the figure) and wall time, next to /bin/true measured in the same run, plus
# the shared libraries the executables need. Target: `kvfleet run` under 10 MB RSS.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
[ -x /usr/bin/time ] || { echo "startup: /usr/bin/time not installed, skipped"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
measure() { # label, command... -> "label: rss KB, wall s (median of 5)"
  local label=$1; shift
  local rss=() wall=()
  for i in 1 2 3 4 5; do
    rm -rf "$out/r"
    /usr/bin/time -f "%M %e" -o "$out/t" "$@" >/dev/null 2>&1 || { echo "$label: failed"; return; }
    read -r m e <"$out/t"; rss+=("$m"); wall+=("$e")
  done
  printf '%-44s max RSS %6s KB   wall %s s (median of 5)\n' "$label" \
    "$(printf '%s\n' "${rss[@]}" | sort -n | sed -n 3p)" "$(printf '%s\n' "${wall[@]}" | sort -n | sed -n 3p)"
}
cd "$here"
measure "/bin/true (bare process, same run)" /bin/true
measure "kvfleet --version" "$build/kvfleet" --version
measure "kvfleet run quickstart, 10 requests" "$build/kvfleet" run scenarios/quickstart.yaml \
  --set workload.limit_requests=10 --quiet --no-report -o "$out/r"
for f in "$build/kvfleet" "$build/kvfleet-engine" "$build"/libkvfleet-*.so; do
  [ -e "$f" ] && echo "$(basename "$f") needs: $(readelf -d "$f" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
done
