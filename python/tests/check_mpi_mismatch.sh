#!/usr/bin/env bash
# The extension built with another MPI than mpi4py's must refuse to import, naming both. Run by
# ctest_driver.sh (which sets PYTHON).
#   check_mpi_mismatch.sh SOURCE_DIR BUILD_DIR LIBMPIAR_DIR WORK_DIR MPICC
# BUILD_DIR/include holds the generated headers; LIBMPIAR_DIR a libmpiar built with MPICC's MPI
# (this build's own), not mpi4py's.
set -euo pipefail
src=$1 build=$2 libdir=$3 work=$4 mpicc=$5
rm -rf "$work"
mkdir -p "$work"
cp -r "$src/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
(cd "$work/src" && MPIAR_INCLUDE_DIR="$src/include:$build/include" MPIAR_LIBRARY_DIR="$libdir" MPICC="$mpicc" \
  "$PYTHON" setup.py -q build_ext --inplace > "$work/build.log" 2>&1) || { cat "$work/build.log"; exit 1; }
cd "$work/src"
"$PYTHON" - <<'PY'
from mpi4py import MPI
vendor = MPI.get_vendor()[0]
try:
    import mpiar
except ImportError as e:
    message = str(e)
    print("ImportError:", message)
    assert vendor in message, f"the message does not name mpi4py's MPI ({vendor})"
    assert "built with" in message
    print("the mismatched module refused to import: ok")
else:
    raise SystemExit(f"imported mpiar built with {mpiar.build_info['mpi_vendor']} under mpi4py on {vendor}")
PY
