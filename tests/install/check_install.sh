#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs a program against it twice:
# through find_package(mpiar) and through pkg-config. Usage: check_install.sh BUILD_DIR WORK_DIR
# MPIEXEC [MPIEXEC FLAGS...]
set -eu
build=$1
work=$2
mpicc=$3
shift 3
rm -rf "$work"
mkdir -p "$work/src"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cat > "$work/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(mpiar 0.2 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE mpiar::mpiar)
CMAKE
cat > "$work/src/app.c" <<'C'
#include <mpiar.h>
#include <stdio.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x = rank + 1;
  int rc = mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT64, MPIAR_SUM, MPI_COMM_WORLD);
  int ok = rc == MPIAR_SUCCESS && x == size * (size + 1) / 2.0 &&
           mpiar_version_hex() == MPIAR_VERSION_HEX;
  if (rank == 0) {
    printf("installed mpiar %s: %s\n", mpiar_version(), ok ? "ok" : "WRONG");
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
C
cmake -S "$work/src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DMPI_C_COMPILER="$mpicc" > "$work/configure.log"
cmake --build "$work/cmake-build" > "$work/build.log"
"$@" -n 2 "$work/cmake-build/app"
# pkg-config, with the MPI compiler wrapper supplying MPI itself.
pcdir=$(dirname "$(find "$work/prefix" -name mpiar.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs mpiar)
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir mpiar)
# shellcheck disable=SC2086
"$mpicc" "$work/src/app.c" -o "$work/app-pc" $flags -Wl,-rpath,"$libdir"
"$@" -n 2 "$work/app-pc"
