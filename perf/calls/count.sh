#!/usr/bin/env bash
# Instructions per call of mpiar-calls' loops on one rank, by valgrind --tool=callgrind (counts
# that do not drift with the machine's load):
#   perf/calls/count.sh BUILD_DIR [N]
# prints, per loop, its instructions over its calls (sizes_loop: N rounds of 8 calls; the
# nonblocking and options loops include their 10 warm-up calls).
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [N]}
n=${2:-2000}
bin=$build/perf/calls/mpiar-calls
command -v valgrind >/dev/null || { echo "count.sh: valgrind is not installed" >&2; exit 77; }
[ -x "$bin" ] || { echo "count.sh: $bin is not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for loop in blocking_loop persistent_loop sizes_loop nonblocking_loop options_loop; do
  valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect="$loop" \
    "$bin" "$n" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  ir=$(callgrind_annotate "$work/out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  case $loop in
    sizes_loop) per=$((n * 8)) ;;
    nonblocking_loop | options_loop) per=$((n + 10)) ;; # their warm-up runs the same function
    *) per=$n ;;
  esac
  printf '%-16s %8d instructions per call\n' "$loop" $((ir / per))
done
