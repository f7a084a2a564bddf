#!/bin/sh
# MPI_Allreduce natively and through libmpiar_pmpi.so, the same binary (mpiar-allreduce-loop, an
# OSU-style loop) run ROUNDS times each, in turn (odd rounds preloaded first, so that drift of the
# machine's load hits both alike). Prints a markdown table: per size, for the slowest rank's
# average call (OSU's figure) and its median call, the median over the rounds natively and
# through the interposer, and the median and the smallest (worst) over the rounds of the ratio
# native / interposer measured in the same round (>= 1: the interposer is not slower).
#
# Usage: perf/pmpi/compare.sh BUILD_DIR [ROUNDS] [-- tool options]
# Environment: MPIEXEC (default mpiexec.mpich), NP (default 2), MPIEXEC_FLAGS (extra launcher
# options, e.g. "--oversubscribe --allow-run-as-root" for Open MPI), ENV_STYLE (hydra: -genv,
# ompi: -x; default from the launcher's name).
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [ROUNDS] [-- mpiar-allreduce-loop options]" >&2
  exit 2
fi
build=$1
shift
rounds=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  rounds=$1
  shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
exe=$build/perf/pmpi/mpiar-allreduce-loop
lib=$(cd "$build/src/interpose" 2>/dev/null && pwd)/libmpiar_pmpi.so
for f in "$exe" "$lib"; do
  if [ ! -f "$f" ]; then
    echo "$0: $f is missing (build the targets mpiar-allreduce-loop and mpiar_pmpi)" >&2
    exit 2
  fi
done
case $rounds in
'' | *[!0-9]* | 0)
  echo "$0: ROUNDS must be a positive integer, not '$rounds'" >&2
  exit 2
  ;;
esac
mpiexec=${MPIEXEC:-mpiexec.mpich}
np=${NP:-2}
case ${ENV_STYLE:-$mpiexec} in
*openmpi* | *mpirun* | ompi) preload="-x LD_PRELOAD=$lib" ;;
*) preload="-genv LD_PRELOAD $lib" ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
r=1
while [ $r -le "$rounds" ]; do
  if [ $((r % 2)) -eq 1 ]; then
    first=pmpi second=native
  else
    first=native second=pmpi
  fi
  for kind in $first $second; do
    if [ "$kind" = native ]; then
      # shellcheck disable=SC2086
      $mpiexec ${MPIEXEC_FLAGS:-} -n "$np" "$exe" "$@" >"$out/native.$r"
    else
      # shellcheck disable=SC2086
      $mpiexec ${MPIEXEC_FLAGS:-} -n "$np" $preload "$exe" "$@" >"$out/pmpi.$r"
    fi
  done
  r=$((r + 1))
done
echo "| size | native, us | interposer, us | native / interposer | median call: native, us | interposer, us | native / interposer |"
echo "|---|---|---|---|---|---|---|"
# Columns 4 and 5 of each tool line: the slowest rank's average and median call.
for f in "$out"/native.* "$out"/pmpi.*; do
  kind=${f##*/}
  grep -v '^#' "$f" | awk -v k="${kind%%.*}" -v r="${kind#*.}" '{print $1, k, r, $4, $5}'
done | awk '
  function median(s,   n, i, j, t, a) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) {
      t = a[j]; a[j] = a[j-1]; a[j-1] = t
    }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  function human(b) {
    return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B"
  }
  # One metric (c: 1 average, 2 median call): medians of both and of the per-round ratio, and
  # the worst round.
  function cells(s, c,   r, nat, pm, ratio, worst, q) {
    nat = ""; pm = ""; ratio = ""; worst = ""
    for (r in rounds) {
      if (!((s, "native", r) in t) || !((s, "pmpi", r) in t)) continue
      split(t[s, "native", r], x, " "); split(t[s, "pmpi", r], y, " ")
      nat = nat " " x[c]; pm = pm " " y[c]
      q = x[c] / y[c]
      ratio = ratio " " q
      if (worst == "" || q < worst) worst = q
    }
    return sprintf("%.2f | %.2f | %.2fx (worst %.2fx)", median(nat), median(pm), median(ratio),
                   worst)
  }
  { t[$1, $2, $3] = $4 " " $5; if (!($1 in seen)) { seen[$1] = 1; sizes[++ns] = $1 }
    rounds[$3] = 1 }
  END {
    for (i = 1; i <= ns; i++) {
      printf "| %s | %s | %s |\n", human(sizes[i]), cells(sizes[i], 1), cells(sizes[i], 2)
    }
  }'
