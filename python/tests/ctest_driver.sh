#!/usr/bin/env bash
# Runs one Python test of the CTest label `python`:
#
#   ctest_driver.sh --skip REASON
#   ctest_driver.sh --python PY --mpiexec MPIEXEC --flags=F1,F2 --np N --pkg DIR --need M1,M2
#                   [--script FILE] -- ARGS...
#
# Exits 77 (CTest's skip code, with the reason on stdout) when the interpreter lacks a module of
# --need or the launcher is missing. Otherwise it runs `MPIEXEC FLAGS -n N PY ARGS` with the
# package directory DIR on PYTHONPATH; ARGS may hold several launches separated by `---`, run one
# after the other. With --script, it runs `bash FILE ARGS` instead, with PYTHON, MPIEXEC,
# MPIEXEC_FLAGS (space-separated), NP and PYTHONPATH in the environment.
# MPIAR_TEST_NP tells the tests how many ranks they were launched with, so that a launch whose
# processes do not see each other (a launcher of another MPI) fails instead of passing N times.
set -u

skip() {
  echo "SKIPPED: $*"
  exit 77
}

python="" mpiexec="" flags="" np=1 pkg="" need="" script=""
while [ $# -gt 0 ]; do
  case "$1" in
    --skip) skip "$2" ;;
    --python) python=$2; shift 2 ;;
    --mpiexec) mpiexec=$2; shift 2 ;;
    --flags=*) flags=${1#--flags=}; shift ;;
    --np) np=$2; shift 2 ;;
    --pkg) pkg=$2; shift 2 ;;
    --need) need=$2; shift 2 ;;
    --script) script=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ctest_driver.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

[ -x "$python" ] || skip "the interpreter $python does not exist"
declare -A debian=([numpy]=python3-numpy [mpi4py]=python3-mpi4py [torch]=python3-torch
                   [pytest]=python3-pytest [pip]=python3-pip [setuptools]=python3-setuptools)
IFS=, read -r -a modules <<< "$need"
for m in "${modules[@]}"; do
  [ -n "$m" ] || continue
  if ! "$python" -c "import $m" > /dev/null 2>&1; then
    skip "$python cannot import $m (Debian: ${debian[$m]:-$m})"
  fi
done
[ -x "$mpiexec" ] || command -v "$mpiexec" > /dev/null 2>&1 || skip "the launcher $mpiexec is missing"
if ! ls "$pkg"/mpiar/_mpiar*.so > /dev/null 2>&1; then
  echo "ctest_driver.sh: the extension was not built in $pkg/mpiar" >&2
  exit 1
fi

IFS=, read -r -a mpiflags <<< "$flags"
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"
export MPIAR_TEST_NP="$np"
# A hang (a rank that died inside a collective) becomes an error naming the step after 60 s.
export MPIAR_TIMEOUT_MS="${MPIAR_TIMEOUT_MS:-60000}"

if [ -n "$script" ]; then
  export PYTHON="$python" MPIEXEC="$mpiexec" MPIEXEC_FLAGS="${mpiflags[*]}" NP="$np"
  exec bash "$script" "$@"
fi

launch=()
for a in "$@" ---; do
  if [ "$a" = --- ]; then
    echo "+ $mpiexec ${mpiflags[*]} -n $np $python ${launch[*]}"
    "$mpiexec" "${mpiflags[@]}" -n "$np" "$python" "${launch[@]}" || exit $?
    launch=()
  else
    launch+=("$a")
  fi
done
exit 0
