#!/usr/bin/env bash
# pip install --no-build-isolation of python/ against an installed libmpiar, then a 2-rank run of
# the installed package. Run by ctest_driver.sh (which sets PYTHON, MPIEXEC, MPIEXEC_FLAGS, NP).
#   check_pip_install.sh LIB_BUILD_DIR PYTHON_SRC WORK_DIR MPICC
# LIB_BUILD_DIR is a build of libmpiar with mpi4py's MPI; it is installed under WORK_DIR/prefix.
# The package source is copied first, so the build leaves nothing in the source tree.
set -euo pipefail
libbuild=$1 src=$2 work=$3 mpicc=$4
rm -rf "$work"
mkdir -p "$work"
"${CMAKE_COMMAND:-cmake}" --install "$libbuild" --prefix "$work/prefix" > "$work/install.log"
cp -r "$src" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" MPICC="$mpicc" \
  "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index --target "$work/site" \
  "$work/src" > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }
grep "compiling with the MPI wrapper" "$work/pip.log" || true
export PYTHONPATH="$work/site"
# The check goes to a file: mpiexec forwards stdin to rank 0 only.
cat > "$work/check.py" <<'PY'
import os, sys
import numpy as np
from mpi4py import MPI
import mpiar
site = sys.argv[1]
assert mpiar.__file__.startswith(site), f"imported {mpiar.__file__}, not the package in {site}"
assert mpiar.build_info["libmpiar"].startswith(os.path.dirname(site)), mpiar.build_info
size = MPI.COMM_WORLD.Get_size()
assert size == 2, f"sees {size} of 2 ranks"
y = mpiar.allreduce(np.full(3, MPI.COMM_WORLD.Get_rank() + 1.0))
assert y.tolist() == [3.0] * 3, y
if MPI.COMM_WORLD.Get_rank() == 0:
    print(f"installed mpiar {mpiar.__version__} from {mpiar.__file__}: ok")
PY
# shellcheck disable=SC2086
"$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$PYTHON" "$work/check.py" "$work/site"
