#!/usr/bin/env bash
# Launched by another MPI's mpiexec, every process of test_world.py is a singleton and must fail
# the rank-count check. Run by ctest_driver.sh (which sets PYTHON, MPIEXEC, MPIEXEC_FLAGS, NP and
# CMAKE_COMMAND comes from the test's environment), after its own checks, so that a missing
# module is still a skip:
#   check_wrong_launcher.sh CHECK_RUN_CMAKE TEST_WORLD_PY
# The launch goes through the project's check_run.cmake, which checks the exit code (1: the
# ranks' AssertionError) and the message together.
set -euo pipefail
check_run=$1 script=$2
args=("$MPIEXEC")
if [ -n "$MPIEXEC_FLAGS" ]; then
  read -r -a flags <<< "$MPIEXEC_FLAGS"
  args+=("${flags[@]}")
fi
args+=(-n "$NP" "$PYTHON" "$script")
defs=()
for i in "${!args[@]}"; do
  defs+=("-DARG$i=${args[$i]}")
done
exec "$CMAKE_COMMAND" -DEXPECT_RC=1 "-DMATCH0=sees 1 of the $NP ranks it was launched with" \
  "-DNO_MATCH0=ok: the ranks see each other" "${defs[@]}" "-DNARGS=${#args[@]}" -P "$check_run"
