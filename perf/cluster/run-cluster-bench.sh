#!/usr/bin/env bash
# The measurements on the emulated cluster: for each configuration, one cluster, the
# calibration of its links, mpiar-bench (every algorithm, `auto` and MPI_Allreduce side by side,
# float32 sum) and mpiar-latency (back-to-back 4-byte calls), then a summary (summary.md) and
# one plot per configuration of the bus bandwidth against the link rate.
#
# Usage: perf/cluster/run-cluster-bench.sh BUILD_DIR OUT_DIR [more mpiar-bench options]
#   e.g. perf/cluster/run-cluster-bench.sh build results/cluster
#        CONFIGS="2x2:200mbit:block:16M 2x2:200mbit:cyclic:16M" \
#          perf/cluster/run-cluster-bench.sh build results/hier -a hier_ring,ring,auto,mpi
# Environment: CONFIGS, a list of NODESxRANKS:RATE:PLACEMENT:LARGEST_SIZE (default: the six
# below); TIMEOUT, the bound of each job in seconds (default 1800).
# With more processes than cores a repetition costs milliseconds even for 4 bytes (MPICH's
# barrier between repetitions spins), so those configurations time 10 repetitions per size
# (-i 10 -w 1) instead of up to 1000, and mpiar-latency 9 blocks of 50 calls instead of 200;
# mpiar-bench options given here come after those and win.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [mpiar-bench options]" >&2
  exit 2
fi
build=$1
out=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster="$here/cluster.sh"
bench="$build/perf/bench/mpiar-bench"
latency="$build/perf/bench/mpiar-latency"
tools="$build/perf/cluster"
for f in "$bench" "$latency" "$tools/mpiar-pingpong"; do
  [ -x "$f" ] || { echo "$0: $f not found; build first" >&2; exit 2; }
done
"$cluster" check > /dev/null || exit $?

# 2 nodes at 1 Gbit/s and 4 at 200 Mbit/s, one rank each (two cores drive that much), then two
# ranks per node at 200 Mbit/s, placed by node (block) and round-robin (cyclic).
configs=${CONFIGS:-"2x1:1gbit:block:64M 4x1:200mbit:block:64M 2x2:200mbit:block:16M
  2x2:200mbit:cyclic:16M 3x2:200mbit:block:16M 3x2:200mbit:cyclic:16M"}
limit=${TIMEOUT:-1800}
mkdir -p "$out"

for c in $configs; do
  IFS=: read -r shape rate place max <<< "$c"
  nodes=${shape%x*}
  k=${shape#*x}
  name="$shape-$rate-$place"
  echo "== $name: $nodes nodes x $k ranks, $rate links, $place placement" >&2
  id=$("$cluster" up -n "$nodes" -r "$rate")
  trap '"$cluster" down "$id"' EXIT
  printf 'name=%s\nnodes=%s\nranks_per_node=%s\nrate=%s\nplace=%s\n' "$name" "$nodes" "$k" \
    "$rate" "$place" > "$out/$name.meta"
  # The calibration: 1 MiB to the largest size of the sweep, or 1 MiB alone.
  calib=1M:$max
  [ "$(numfmt --from=iec "$max")" -ge 1048576 ] || calib=1M:1M
  iters=()
  calls=200
  if [ $((nodes * k)) -gt "$(nproc)" ]; then
    iters=(-i 10 -w 1)
    calls=50
  fi
  "$cluster" run "$id" -k "$k" --place "$place" --timeout "$limit" --calibrate "$calib" \
    --tools "$tools" -- "$bench" -b 4 -e "$max" -f 2 -d float32 -o sum -q "${iters[@]}" \
    --csv "$out/$name.csv" --json "$out/$name.json" "$@" | tee "$out/$name.txt"
  "$cluster" run "$id" -k "$k" --place "$place" --timeout "$limit" --calibrate no \
    --tools "$tools" -- "$latency" -s 4 -k "$calls" -r 9 | tee "$out/$name.latency.txt"
  "$cluster" down "$id"
  trap - EXIT
done

sim=()
[ -x "$build/perf/sim/mpiar-sim" ] && sim=(--sim "$build/perf/sim/mpiar-sim")
python3 "$here/report.py" "$out" "${sim[@]}" | tee "$out/summary.md"
if command -v gnuplot > /dev/null; then
  for m in "$out"/*.meta; do
    name=$(basename "$m" .meta)
    [ -f "$out/$name.csv" ] || continue
    field() { sed -n "s/^$1=//p" "$m"; }
    bits=$(field rate | sed -E 's/gbit$/e9/; s/mbit$/e6/; s/kbit$/e3/; s/bit$//')
    gnuplot -c "$here/plot.gp" "$out/$name.csv" "$out/busbw-$name" "$bits" \
      "$(field nodes) nodes x $(field ranks_per_node) ranks, $(field place) placement"
  done
  echo "# plots: $out/busbw-*.png (and .svg)" >&2
else
  echo "$0: gnuplot not found: no plots (install gnuplot-nox)" >&2
fi
