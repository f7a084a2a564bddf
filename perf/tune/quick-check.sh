#!/usr/bin/env bash
# Does a --quick tuning file ever make `auto` slower than the built-in model? Runs
# `mpiar-tune --quick` RUNS times (default 3); after each, mpiar-tune-check times, at every size of
# the main job's sweep (4 B .. 256 MiB, doubling), what `auto` runs with that file against what it
# runs without one, interleaved (medians of the slowest rank), and prints the worst ratio. Target:
# no size more than 5 % slower with the file, in every run. Prints the load average with each run.
#
# Usage: perf/tune/quick-check.sh BUILD_DIR OUT_DIR [RUNS]
# Environment: NP (ranks, default 2), MPIEXEC (default: the one CMake found), MPIEXEC_FLAGS,
# CHECK_ARGS (more mpiar-tune-check options, e.g. "-e 64M").
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [RUNS]" >&2
  exit 2
fi
build=$1
out=$2
runs=${3:-3}
tune="$build/perf/tune/mpiar-tune"
check="$build/perf/tune/mpiar-tune-check"
for t in "$tune" "$check"; do
  if [ ! -x "$t" ]; then
    echo "$0: $t not found; build first: cmake --build $build -j2" >&2
    exit 2
  fi
done
mpiexec=${MPIEXEC:-}
if [ -z "$mpiexec" ] && [ -f "$build/CMakeCache.txt" ]; then
  mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
fi
mpiexec=${mpiexec:-mpiexec}
read -r -a flags <<< "${MPIEXEC_FLAGS:-}"
if "$mpiexec" --version 2>&1 | grep -q -E 'Open MPI|OpenRTE'; then
  flags+=(--oversubscribe --allow-run-as-root)
fi
read -r -a check_args <<< "${CHECK_ARGS:-}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
np=${NP:-2}
summary="$out/summary.txt"
: > "$summary"
fail=0
for i in $(seq 1 "$runs"); do
  file="$out/quick_$i.json"
  echo "## run $i: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start" | tee -a "$summary"
  "$mpiexec" "${flags[@]}" -n "$np" "$tune" --quick -q -o "$file" > "$out/tune_$i.txt"
  sed -n '/^# overrides at/p' "$out/tune_$i.txt" | tee -a "$summary"
  sed -n '/^## Table/,/^## What the model/p' "$out/tune_$i.txt" | sed '$d' | tee -a "$summary"
  MPIAR_TUNING_FILE="$file" "$mpiexec" "${flags[@]}" -n "$np" "$check" "${check_args[@]}" \
    > "$out/check_$i.txt"
  grep -v '^ .* same$' "$out/check_$i.txt" | tee -a "$summary"
  worst=$(sed -n 's/.*worst ratio \([0-9.]*\).*/\1/p' "$out/check_$i.txt")
  if awk -v w="$worst" 'BEGIN { exit !(w > 1.05) }'; then
    fail=1
  fi
  echo "## run $i: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" | tee -a "$summary"
done
if [ "$fail" -eq 0 ]; then
  echo "# target met: no size more than 5 % slower with a --quick file in $runs runs" | tee -a "$summary"
else
  echo "# target missed: a size more than 5 % slower with a --quick file (above)" | tee -a "$summary"
fi
exit "$fail"
