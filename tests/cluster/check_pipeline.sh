#!/usr/bin/env bash
# run-cluster-bench.sh on one small configuration (2 nodes x 1 rank at 1 Gbit/s, 4 B..64 KiB):
# the summary must hold every table with a row for it, and with gnuplot the plot must exist as
# PNG and SVG. Exit 77 (skip) when the machine cannot make a cluster.
# Usage: check_pipeline.sh RUN_CLUSTER_BENCH BUILD_DIR OUT_DIR [GNUPLOT]
set -uo pipefail
script=$1 build=$2 out=$3 gnuplot=${4:-}
rm -rf "$out"
CONFIGS=2x1:1gbit:block:64K TIMEOUT=60 "$script" "$build" "$out" -i 3 -w 1 -c
rc=$?
[ "$rc" -eq 77 ] && exit 77
fail=0
check() {
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
check "run-cluster-bench.sh succeeded" [ "$rc" -eq 0 ]
sum="$out/summary.md"
for table in "### Bandwidth" "### 4-byte latency" "### \`auto\` against the best" "### Calibration"; do
  check "summary has '$table'" grep -qF "$table" "$sum"
done
check "4-byte latency row with numbers" grep -qE '^\| 2 x 1, block \| [0-9.]+ \| [0-9.]+ \|' "$sum"
check "calibration verdict" grep -qE '^\| 2 x 1, block \| 1gbit \| [0-9.]+ us \| [0-9.e+-]+ Gbit/s \| (PASS|FAIL) \|' "$sum"
if [ -n "$gnuplot" ] && [[ $gnuplot != *NOTFOUND ]]; then
  check "plot as PNG" test -s "$out/busbw-2x1-1gbit-block.png"
  check "plot as SVG" grep -q '<svg' "$out/busbw-2x1-1gbit-block.svg"
fi
[ "$fail" -eq 0 ] && echo "cluster measurement pipeline: passed"
exit "$fail"
