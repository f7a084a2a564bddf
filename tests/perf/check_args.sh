#!/usr/bin/env bash
# Option parsing of mpiar-bench: every bad argument exits with code 2 and a message on stderr
# that names the problem, before MPI starts; --help documents every option; under mpiexec a
# bad argument ends every rank with code 2 and prints the message once.
#
# Usage: check_args.sh BENCH MPIEXEC NUMPROC_FLAG [MPIEXEC_PREFLAGS...]
set -u
bench=$1
mpiexec=$2
npflag=$3
shift 3
failures=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
  echo "FAIL: $*"
  echo "  stdout: $(head -c 400 "$out")"
  echo "  stderr: $(head -c 400 "$err")"
  failures=$((failures + 1))
}

# expect_bad "stderr text" args...: exit code 2, the text on stderr, nothing on stdout.
expect_bad() {
  local want=$1
  shift
  "$bench" "$@" > "$out" 2> "$err"
  local rc=$?
  if [ "$rc" -ne 2 ]; then
    fail "mpiar-bench $* exited with $rc, expected 2"
  elif ! grep -q -F -- "$want" "$err"; then
    fail "mpiar-bench $*: stderr lacks '$want'"
  elif [ -s "$out" ]; then
    fail "mpiar-bench $*: wrote to stdout"
  fi
}

expect_bad "unknown option '--bogus'" --bogus
expect_bad "unknown option 'extra'" extra
expect_bad "unknown option '--csvx'" --csvx
expect_bad "option '-i' needs a value" -i
expect_bad "option '--csv' needs a value" --csv
expect_bad "-b: '0' is not a size" -b 0
expect_bad "-b: '12X' is not a size" -b 12X
expect_bad "-e: '-4' is not a size" -e -4
expect_bad "-b 1048576 is larger than -e 1024" -b 1M -e 1K
expect_bad "-f: '1' is not an integer factor >= 2" -f 1
expect_bad "-f: '2.5' is not an integer factor" -f 2.5
expect_bad "-i: '0' is not a repetition count >= 1" -i 0
expect_bad "-i: '10x' is not a repetition count" -i 10x
expect_bad "-w: '-1' is not a repetition count >= 0" -w -1
expect_bad "-d: unknown datatype 'float128'" -d float128
expect_bad "-o: unknown operation 'mean'" -o mean
expect_bad "operation band is not defined on float32" -d float32 -o band
expect_bad "operation avg is not defined on int32" -d i32 -o avg
expect_bad "-a: unknown algorithm 'tree'" -a ring,tree
expect_bad "(known: " -a tree
expect_bad "-a: algorithm 'ring' is listed twice" -a ring,mpi,ring
expect_bad "-a: empty algorithm name" -a ring,
expect_bad "-a mpi: MPI has no predefined datatype for bfloat16" -d bf16 -a mpi
expect_bad "--json: empty file name" --json=

# A size suffix beyond G is not accepted, and the message tells what a size is.
expect_bad "optionally with K, M or G" -e 1T

# --help: exit code 0, every option documented, every registry algorithm named.
"$bench" --help > "$out" 2> "$err"
rc=$?
if [ "$rc" -ne 0 ]; then
  fail "--help exited with $rc"
fi
for opt in "-b SIZE" "-e SIZE" "-f FACTOR" "-i ITERS" "-w WARMUP" "-d DTYPE" "-o OP" "-a ALG" \
           "-c " "--inplace" "--csv FILE" "--json FILE" "-q, --quiet" "-h, --help" "auto" "mpi" \
           "ring" "rabenseifner" "recursive_doubling" "Exit codes"; do
  grep -q -F -- "$opt" "$out" || fail "--help does not mention '$opt'"
done

# Under mpiexec: every rank exits with 2, nothing hangs (CTest's timeout would catch it), and
# the message appears once, from rank 0.
"$mpiexec" "$@" "$npflag" 2 "$bench" -d nosuchtype > "$out" 2> "$err"
rc=$?
if [ "$rc" -ne 2 ]; then
  fail "mpiexec -n 2 mpiar-bench -d nosuchtype exited with $rc, expected 2"
fi
n=$(grep -c -F "unknown datatype 'nosuchtype'" "$err")
if [ "$n" -ne 1 ]; then
  fail "under mpiexec the message appeared $n times, expected once"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all option checks passed"
