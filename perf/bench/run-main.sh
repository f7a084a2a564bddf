#!/usr/bin/env bash
# The main job of mpiar: mpiar-bench on 2 ranks over 4 B..256 MiB for float32 sum with every
# algorithm, `auto` and MPI_Allreduce. Writes OUT_DIR/bench.csv, bench.json, summary.txt and the
# plots (busbw, latency, speedup as PNG and SVG), and prints the summary table.
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

mkdir -p "$out"
start=$(date +%s)
set +e
"$mpiexec" "${flags[@]}" -n "${NP:-2}" "$bench" -b 4 -e 256M -f 2 -d float32 -o sum \
  --csv "$out/bench.csv" --json "$out/bench.json" "$@" | tee "$out/summary.txt"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "$0: mpiar-bench failed with exit code $rc" >&2
  exit "$rc"
fi

if command -v gnuplot > /dev/null; then
  gnuplot -c "$here/plot.gp" "$out/bench.csv" "$out"
  echo "# plots: $out/busbw.png $out/latency.png $out/speedup.png (and .svg)"
else
  echo "$0: gnuplot not found: no plots (install gnuplot-nox)" >&2
fi
echo "# results: $out/bench.csv $out/bench.json $out/summary.txt ($(( $(date +%s) - start )) s)"
