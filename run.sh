#!/usr/bin/env bash
# The two entry points of the README, for a fresh Debian machine:
#   ./run.sh bench   install what is missing, build, run the main job (mpiar-bench on 2 ranks)
#   ./run.sh test    install what is missing, build with warnings as errors, run the whole test
#                    suite (with the libFuzzer targets, built with clang), then run it again built
#                    with AddressSanitizer and UndefinedBehaviorSanitizer
# Options come from the environment: BUILD_DIR (default build), RESULTS_DIR (default results),
# JOBS (default: the number of CPUs), CMAKE_ARGS (extra arguments for cmake), SANITIZE=0 (skip
# the sanitizer pass).
set -euo pipefail

mode=${1:-}
case "$mode" in
  bench|test) ;;
  *) echo "usage: $0 bench|test" >&2; exit 2 ;;
esac

cd "$(dirname "$0")"
BUILD_DIR=${BUILD_DIR:-build}
RESULTS_DIR=${RESULTS_DIR:-results}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# Debian packages the build, the tests and the plots need. The Python package (python/, tests
# labelled python) needs Debian's interpreter with numpy, mpi4py, torch and pytest, and Open MPI
# (Debian's mpi4py is built with it); the rest of the project stays on MPICH. iproute2: ip and
# tc for the emulated cluster of perf/cluster; slurmctld, slurmd, slurm-client and munge for the
# Slurm cluster made on it (perf/cluster/slurm.sh, tests labelled slurm).
packages=(build-essential cmake pkg-config mpich libmpich-dev libisal-dev libjansson-dev gnuplot-nox python3 valgrind
  clang-14 libclang-rt-14-dev iproute2 slurmctld slurmd slurm-client munge
  python3-dev python3-numpy python3-mpi4py python3-torch python3-pytest python3-setuptools
  python3-pip openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    echo "run.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "run.sh: missing packages; run this as root, then run $0 again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# The test command builds with warnings as errors, as CI does.
werror=()
if [ "$mode" = test ]; then
  werror=(-DMPIAR_WERROR=ON)
fi
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${werror[@]}" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"

if [ "$mode" = test ]; then
  (cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS")
  # The same suite once more, built with AddressSanitizer and UndefinedBehaviorSanitizer (every
  # report is fatal). Leaks are left to the valgrind test: MPI's own start-up allocations would
  # drown LeakSanitizer's report. SANITIZE=0 skips this pass. This pass runs on MPI's transport
  # (MPIAR_TRANSPORT=mpi) where the first ran on the default (auto: the node transport's rings
  # between ranks of this node), so every engine and MPI test runs on both; the node
  # transport's own tests force it on in both passes.
  if [ "${SANITIZE:-1}" != 0 ]; then
    # shellcheck disable=SC2086
    cmake -S . -B "$BUILD_DIR-sanitize" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMPIAR_SANITIZE=address,undefined -DMPIAR_WERROR=ON ${CMAKE_ARGS:-}
    cmake --build "$BUILD_DIR-sanitize" -j "$JOBS"
    cd "$BUILD_DIR-sanitize"
    MPIAR_TRANSPORT=mpi ASAN_OPTIONS=detect_leaks=0 exec ctest --output-on-failure -j "$JOBS"
  fi
  exit 0
fi

exec perf/bench/run-main.sh "$BUILD_DIR" "$RESULTS_DIR"
