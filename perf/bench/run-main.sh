#!/usr/bin/env bash
# The main job of mpiar: mpiar-bench on 2 ranks over 4 B..256 MiB for float32 sum with every
# algorithm, `auto` and MPI_Allreduce, out of place; then the same algorithms (without the segment
# columns) in place over 4 B..64 MiB, the form in which training reduces its gradients (kvstore,
# DDP, the Python optimizer); then the same algorithms on node-shared buffers (`-m shared`:
# mpiar_alloc, the zero-copy path) beside `auto` on ordinary buffers and MPI_Allreduce at the
# sizes of the shared path's targets (8 B, 16 MiB, 64 MiB) and a few between. Every run prints
# the memory floor beside the point-to-point limit. Writes OUT_DIR/bench.csv, bench.json and the
# plots (busbw, latency, speedup as PNG and SVG) of the first run, OUT_DIR/in-place/ and
# OUT_DIR/shared/ with the same for the others, and summary.txt with the three tables (each says
# which form it measured), and prints them.
#
# Usage: perf/bench/run-main.sh BUILD_DIR OUT_DIR [more mpiar-bench options]
# Environment: NP (ranks, default 2), MPIEXEC (default: the one CMake found), MPIEXEC_FLAGS.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [mpiar-bench options]" >&2
  exit 2
fi
build=$1
out=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench="$build/perf/bench/mpiar-bench"
if [ ! -x "$bench" ]; then
  echo "$0: $bench not found; build first: cmake -S . -B $build && cmake --build $build -j2" >&2
  exit 2
fi

# Use the launcher that matches the MPI the benchmark was built with.
mpiexec=${MPIEXEC:-}
if [ -z "$mpiexec" ] && [ -f "$build/CMakeCache.txt" ]; then
  mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
fi
mpiexec=${mpiexec:-mpiexec}
# Open MPI refuses to run as root or on more ranks than cores unless told; MPICH needs neither.
read -r -a flags <<< "${MPIEXEC_FLAGS:-}"
if "$mpiexec" --version 2>&1 | grep -q -E 'Open MPI|OpenRTE'; then
  flags+=(--oversubscribe --allow-run-as-root)
fi

mkdir -p "$out/in-place" "$out/shared"
start=$(date +%s)
: > "$out/summary.txt"

# One run of mpiar-bench: its table is appended to summary.txt, its files go to DIR.
run_bench() {
  local dir=$1
  shift
  local t0
  t0=$(date +%s)
  set +e
  "$mpiexec" "${flags[@]}" -n "${NP:-2}" "$bench" -d float32 -o sum \
    --csv "$dir/bench.csv" --json "$dir/bench.json" "$@" | tee -a "$out/summary.txt"
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "$0: mpiar-bench failed with exit code $rc" >&2
    exit "$rc"
  fi
  echo "# this run: $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
}

run_bench "$out" -b 4 -e 256M -f 2 "$@"
echo | tee -a "$out/summary.txt"
# The in-place run leaves the segment columns out unless the options name columns themselves.
shape=(--no-segments)
for arg in "$@"; do
  case "$arg" in -a* | --segments* | --no-segments) shape=() ;; esac
done
run_bench "$out/in-place" --in-place "${shape[@]}" -b 4 -e 64M -f 4 "$@"
echo | tee -a "$out/summary.txt"
# -m shared leaves the segment columns out itself (the zero-copy path has no segments); its sizes
# are the targets' unless the options give sizes.
sizes=(--sizes 8,4K,256K,4M,16M,64M)
for arg in "$@"; do
  case "$arg" in -b* | -e* | -f* | --sizes*) sizes=() ;; esac
done
run_bench "$out/shared" -m shared "${sizes[@]}" "$@"

if command -v gnuplot > /dev/null; then
  gnuplot -c "$here/plot.gp" "$out/bench.csv" "$out"
  gnuplot -c "$here/plot.gp" "$out/in-place/bench.csv" "$out/in-place"
  gnuplot -c "$here/plot.gp" "$out/shared/bench.csv" "$out/shared"
  echo "# plots: $out/busbw.png $out/latency.png $out/speedup.png (and .svg), in place in" \
    "$out/in-place/, on shared buffers in $out/shared/"
else
  echo "$0: gnuplot not found: no plots (install gnuplot-nox)" >&2
fi
echo "# results: $out/bench.csv $out/bench.json $out/in-place/ $out/shared/ $out/summary.txt" \
  "($(( $(date +%s) - start )) s)"
