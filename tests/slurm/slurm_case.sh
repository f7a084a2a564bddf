#!/usr/bin/env bash
# One Slurm test case (label `slurm`): makes a Slurm cluster of 2 emulated nodes with
# perf/cluster/slurm.sh, runs CASE on its head node (node 0) and removes the cluster. Exit 77
# (skip) with the reason where Slurm cannot run here.
#
# Usage: slurm_case.sh CASE      (the paths come from the environment, see CMakeLists.txt)
# Cases: srun_matrix_2x2 srun_bench_2x2 salloc_mpiexec_2x2 srun_interposer_2x1 srun_wait_auto
#        srun_rank_loss sbatch_tune_then_run openmpi_python_2x2
#
# The machine has fewer cores than the jobs have ranks (2 emulated nodes of 2 CPUs each on one
# 2-core machine), so the correctness runs set MPIAR_WAIT=yield as cluster.sh does; the
# MPIAR_WAIT=auto case leaves it unset. Every MPICH rank gets libmpiar_cluster_finalize.so
# preloaded ($MPIAR_SLURM_PRELOAD; see perf/cluster/cluster.sh for MPICH 4.0.2's MPI_Finalize
# hang over UCX/TCP, which srun --mpi=pmi2 shows too).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "${1:-}" != --inside ]; then
  case=${1:?usage: slurm_case.sh CASE}
  if [ "$case" = openmpi_python_2x2 ]; then
    # Open MPI's launcher, and the Python package built with it.
    why=""
    if ! command -v mpiexec.openmpi > /dev/null; then
      why="mpiexec.openmpi is missing (Debian: openmpi-bin)"
    elif [ ! -d "$MPIAR_T_PYPKG/mpiar" ]; then
      why="the Python package was not built ($MPIAR_T_PYPKG/mpiar)"
    elif ! /usr/bin/python3 -c 'import numpy, mpi4py' 2> /dev/null; then
      why="python3 lacks numpy or mpi4py"
    fi
    if [ -n "$why" ]; then
      echo "SKIPPED: $why"
      exit 77
    fi
  fi
  # Clusters of earlier runs that were killed before they could clean up (their job process
  # is gone); a running job's cluster is left alone.
  "$MPIAR_SLURM_SH" down --stale
  rc=0
  "$MPIAR_SLURM_SH" job -n 2 -r 1gbit --timeout 160 --tools "$MPIAR_T_TOOLS" -- \
    /bin/bash "$here/slurm_case.sh" --inside "$case" || rc=$?
  exit "$rc"
fi
case=$2

fail=0
check() { # check DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}
# shellcheck disable=SC2317 # called through check
has() { grep -qE -- "$2" <<< "$1"; }
# shellcheck disable=SC2317 # called through check
lacks() { ! grep -qE -- "$2" <<< "$1"; }
count() { grep -cE -- "$2" <<< "$1"; }
finish() {
  [ "$fail" -eq 0 ] && echo "slurm $case: passed"
  # 77 is the skip code: a failing case never returns it.
  exit $((fail == 0 ? 0 : 1))
}
# Bounds of one job: the shell's `timeout` and Slurm's own time limit (minutes).
# Generous: the machine may be loaded many times over by other jobs.
limit=140
# A short checked benchmark: MPI_Allreduce (`mpi`) is left out: MPICH's progress loop never
# yields, and 4 such ranks on a busy 2-core machine take minutes.
# shellcheck disable=SC2054 # one list of algorithms
bench_args=(-a ring,rabenseifner,hier_ring,hier_recursive_doubling,auto -b 4 -e 256K -f 16 -i 3
  -w 1 -c -q)
preload="--export=ALL,LD_PRELOAD=$MPIAR_SLURM_PRELOAD"
# The emulated nodes share the machine's cores, so Slurm binds local rank 0 of every node to
# the same core; pinned ranks cannot move off a core that other jobs load. Unbound, the
# matrix took 38 s where bound to cores it took 145 s (load average 20). The correctness runs
# leave the ranks unbound; the binding itself is the subject of srun_wait_auto.
alloc=(-N 2 --ntasks-per-node=2)
shape=("${alloc[@]}" --cpu-bind=none)
work="$MPIAR_SLURM_DIR/work"
mkdir -p "$work"
cd "$work" || exit 1

# The context line MPIAR_DEBUG=1 prints on every rank (src/core/setup.c), first one per rank.
first_context_lines() {
  local r
  for r in 0 1 2 3; do
    # (-o: Open MPI's output forwarding may join lines of different ranks)
    grep -m1 -oE "mpiar: rank $r of 4: [^;]*" <<< "$1"
  done
}
check_nodes() { # every rank of a 2 x 2 job found 2 nodes with 2 ranks each
  local lines
  lines=$(first_context_lines "$1")
  echo "$lines"
  check "$2: each of the 4 ranks sees 2 nodes of 2 ranks" \
    [ "$(count "$lines" ': 2 nodes, 2 ranks on this node')" -eq 4 ]
}

echo "# slurm case $case on $(hostname): $(sinfo -h -N -o '%N %c CPUs %t' | tr '\n' ';')"
case $case in
  srun_matrix_2x2)
    # srun places the ranks on two hosts ...
    hosts=$(timeout $limit srun "${shape[@]}" --time=3 hostname 2>&1)
    check "srun -N 2 --ntasks-per-node=2 runs on 2 hosts ($(sort -u <<< "$hosts" | tr '\n' ' '))" \
      [ "$(sort <<< "$hosts" | uniq -c | awk '$1 == 2' | wc -l)" -eq 2 ]
    # ... and mpiar finds them through MPI.
    out=$(MPIAR_DEBUG=1 MPIAR_WAIT=yield MPIAR_NUM_THREADS=1 timeout $limit \
      srun "${shape[@]}" --mpi=pmi2 --time=3 "$preload" "$MPIAR_T_MATRIX" --quick 2>&1)
    rc=$?
    grep -vE '^mpiar: (allreduce|bcast|rank)' <<< "$out" | tail -n 5
    check "the matrix under srun --mpi=pmi2 exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "the matrix passed on 4 ranks" has "$out" 'allreduce matrix on 4 ranks: passed'
    check_nodes "$out" "srun"
    ;;

  srun_bench_2x2)
    out=$(MPIAR_WAIT=yield MPIAR_NUM_THREADS=1 timeout $limit srun "${shape[@]}" --mpi=pmi2 \
      --time=3 "$preload" "$MPIAR_T_BENCH" "${bench_args[@]}" 2>&1)
    rc=$?
    echo "$out" | tail -n 12
    check "mpiar-bench under srun exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "mpiar-bench ran on 4 ranks" has "$out" '4 ranks'
    check "no wrong results" lacks "$out" '[Ww]rong|[Mm]ismatch|FAIL'
    ;;

  salloc_mpiexec_2x2)
    # MPICH's mpiexec inside the allocation: Hydra reads the allocation (no -n, no host list)
    # and starts its proxies with srun.
    # shellcheck disable=SC2016 # expanded by the allocation's shell
    script='m=$1 && shift && mpiexec.mpich -genv LD_PRELOAD "$MPIAR_SLURM_PRELOAD" hostname &&
      mpiexec.mpich -genv LD_PRELOAD "$MPIAR_SLURM_PRELOAD" -genv MPIAR_DEBUG 1 "$m" --quick &&
      mpiexec.mpich -genv LD_PRELOAD "$MPIAR_SLURM_PRELOAD" "$@"'
    out=$(MPIAR_WAIT=yield MPIAR_NUM_THREADS=1 timeout $limit salloc "${alloc[@]}" --time=3 \
      /bin/sh -c "$script" salloc-job "$MPIAR_T_MATRIX" "$MPIAR_T_BENCH" "${bench_args[@]}" 2>&1)
    rc=$?
    grep -vE '^mpiar: (allreduce|bcast|rank)' <<< "$out" | tail -n 12
    check "salloc + mpiexec exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    hosts=$(grep -E '^mpiar-[0-9a-f]{6}-n[0-9]+$' <<< "$out")
    check "mpiexec without -n started 4 processes on the allocation's 2 hosts" \
      [ "$(sort <<< "$hosts" | uniq -c | awk '$1 == 2' | wc -l)" -eq 2 ]
    check "the matrix passed on 4 ranks" has "$out" 'allreduce matrix on 4 ranks: passed'
    check_nodes "$out" "mpiexec in the allocation"
    check "mpiar-bench ran on 4 ranks" has "$out" '4 ranks'
    ;;

  srun_interposer_2x1)
    # pmpi_check knows nothing of mpiar. Plain, then with the interposer preloaded through
    # --export (before the finalize library, whose PMPI_Finalize it then calls): the same
    # results line for line, and the statistics the program expects. One rank per node: the
    # plain run is MPICH's own MPI_Allreduce, whose progress loop never yields, and 4 such
    # ranks on 2 busy cores can take minutes.
    shape=(-N 2 --ntasks-per-node=1 --cpu-bind=none)
    t0=$(date +%s)
    timeout $limit srun "${shape[@]}" --mpi=pmi2 --time=3 "$preload" \
      "$MPIAR_T_PMPI_CHECK" --tiny --out plain.txt > plain.log 2>&1
    rc=$?
    check "the plain run exits with 0 (got $rc, $(($(date +%s) - t0)) s)" [ "$rc" -eq 0 ]
    t0=$(date +%s)
    MPIAR_WAIT=yield timeout $limit srun "${shape[@]}" --mpi=pmi2 --time=3 \
      "--export=ALL,LD_PRELOAD=$MPIAR_T_PMPI_LIB:$MPIAR_SLURM_PRELOAD,MPIAR_PMPI_STATS=$work/stats.txt" \
      "$MPIAR_T_PMPI_CHECK" --tiny --f16 --out preloaded.txt --expect expect.txt \
      > preloaded.log 2>&1
    rc=$?
    tail -n 5 preloaded.log
    check "the preloaded run exits with 0 (got $rc, $(($(date +%s) - t0)) s)" [ "$rc" -eq 0 ]
    # float16 cases run only where mpiar runs them (MPI itself may not reduce that type).
    grep -v ' f16:' plain.txt > plain.cmp 2> /dev/null
    grep -v ' f16:' preloaded.txt > preloaded.cmp 2> /dev/null
    check "identical results with and without the interposer ($(wc -l < plain.cmp) lines)" \
      test -s plain.cmp -a -z "$(diff plain.cmp preloaded.cmp 2>&1 | head -3)"
    check "statistics gathered from 2 ranks" grep -qE '^mpiar_pmpi ranks 2$' stats.txt
    missing=$(grep -vxF -f stats.txt expect.txt | head -5)
    [ -s expect.txt ] || missing="expect.txt is empty"
    check "the statistics are those expected${missing:+ (differ: $missing)}" [ -z "$missing" ]
    accel=$(awk '$2 == "accelerated.calls" {print $3}' stats.txt)
    check "calls went through mpiar (${accel:-0} accelerated)" [ "${accel:-0}" -gt 0 ]
    ;;

  srun_wait_auto)
    # One core per rank (--cpu-bind=cores, 2 ranks on 2 cores): waiting ranks spin.
    out=$(MPIAR_DEBUG=1 timeout $limit srun "${alloc[@]}" --mpi=pmi2 --time=3 --cpu-bind=cores \
      "$preload" "$MPIAR_T_WAIT_AUTO" 2>&1)
    rc=$?
    lines=$(first_context_lines "$out")
    echo "$lines"
    check "--cpu-bind=cores: test_wait_auto exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "--cpu-bind=cores: every rank spins" \
      [ "$(count "$lines" '2 ranks on this node with 2 CPUs: waiting ranks spin \(MPIAR_WAIT=auto\)')" -eq 4 ]
    # --overcommit: the allocation has one CPU per node for its 2 ranks: they yield.
    out=$(MPIAR_DEBUG=1 timeout $limit srun -N 2 -n 4 --overcommit --mpi=pmi2 --time=3 \
      --cpu-bind=cores "$preload" "$MPIAR_T_WAIT_AUTO" 2>&1)
    rc=$?
    lines=$(first_context_lines "$out")
    echo "$lines"
    check "--overcommit: test_wait_auto exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "--overcommit: every rank yields" \
      [ "$(count "$lines" '2 ranks on this node with 1 CPUs: waiting ranks yield \(MPIAR_WAIT=auto\)')" -eq 4 ]
    ;;

  srun_rank_loss)
    # The last rank raises SIGKILL after 5 allreduces; the others have a 2 s deadline.
    t0=$(date +%s)
    out=$(MPIAR_WAIT=yield timeout $limit srun "${shape[@]}" --mpi=pmi2 --time=3 "$preload" \
      "$MPIAR_T_RANK_LOSS" 2000 2>&1)
    rc=$?
    took=$(($(date +%s) - t0))
    echo "$out"
    check "the job ended on its own in $took s (exit $rc, not the bound's 124)" \
      test "$rc" -ne 124 -a "$took" -lt 40
    check "srun reports the failure: exit 137 (128 + SIGKILL, the highest status of the tasks)" \
      [ "$rc" -eq 137 ]
    check "srun names the killed task" has "$out" 'task 3: Killed'
    check "the 3 survivors got the deadline's error" \
      [ "$(count "$out" '^rank [012]: survivor: MPIAR_ERR_(TIMEOUT|COMM_BROKEN): ')" -eq 3 ]
    check "at least one survivor timed out itself" \
      has "$out" '^rank [012]: survivor: MPIAR_ERR_TIMEOUT: .*timed out after 2000 ms'
    check "no survivor reported anything else" lacks "$out" 'unexpected|no error after'
    ;;

  sbatch_tune_then_run)
    # The job script users copy: the first ```bash block of docs/slurm.md.
    awk '/^```bash$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$MPIAR_SLURM_DOC" \
      > job.sbatch
    check "docs/slurm.md has the sbatch script" grep -q '^#SBATCH' job.sbatch
    PATH="$(dirname "$MPIAR_T_TUNE"):$(dirname "$MPIAR_T_BENCH"):$PATH"
    export PATH
    export MPIAR_TUNING_FILE="$work/tuning/mpiar-1x2.json"
    # One node of 2 ranks: mpiar-tune --quick calibrates between nodes too where there are
    # several, which takes 40 s on 2 nodes of this loaded 2-core machine (15 s on one).
    export MPIAR_TUNE_ARGS="--quick -q"
    export MPIAR_DEBUG=1 MPIAR_WAIT=yield
    sub=(--wait -N 1 --ntasks-per-node=2 --time=3 "--export=ALL,LD_PRELOAD=$MPIAR_SLURM_PRELOAD")
    for job in 1 2; do
      timeout $limit sbatch "${sub[@]}" -o "job$job.out" job.sbatch \
        mpiar-bench -b 4 -e 64K -f 16 -i 3 -w 1 -c -q -a auto > "submit$job.txt" 2>&1
      rc=$?
      echo "--- job $job: $(cat "submit$job.txt")"
      grep -vE '^mpiar: rank' "job$job.out" | tail -n 8
      check "sbatch --wait of job $job exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    done
    check "job 1 ran mpiar-tune and wrote the tuning file" \
      sh -c "grep -q 'wrote $MPIAR_TUNING_FILE' job1.out && [ -s '$MPIAR_TUNING_FILE' ]"
    check "job 2 did not tune again" sh -c "! grep -q 'wrote ' job2.out"
    check "job 2's program chose from that file's table" \
      grep -qE "source: tuning table of $MPIAR_TUNING_FILE" job2.out
    ;;

  openmpi_python_2x2)
    # Open MPI needs PMIx from srun (Debian's Open MPI has no PMI-1/PMI-2 client); its TCP
    # transport on the nodes' links, as cluster.sh sets it.
    export OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self,vader OMPI_MCA_btl_tcp_if_include=mpiar0
    export OMPI_MCA_oob_tcp_if_include=mpiar0 OMPI_MCA_mpi_yield_when_idle=1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export PYTHONPATH="$MPIAR_T_PYPKG" MPIAR_DEBUG=1 MPIAR_WAIT=yield
    py=(/usr/bin/python3 "$here/allreduce_check.py")
    out=$(timeout $limit srun "${shape[@]}" --mpi=pmix --time=3 "${py[@]}" 2>&1)
    rc=$?
    grep -vE '^mpiar: (allreduce|bcast)' <<< "$out"
    check "srun --mpi=pmix: exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "srun --mpi=pmix: 4 ranks ok" [ "$(count "$out" '^rank [0-3] of 4 on .*: allreduce ok')" -eq 4 ]
    check_nodes "$out" "srun --mpi=pmix"
    out=$(timeout $limit srun "${shape[@]}" --mpi=pmi2 --time=3 "${py[@]}" 2>&1)
    rc=$?
    check "srun --mpi=pmi2 fails for Open MPI (exit $rc)" [ "$rc" -ne 0 ]
    out=$(timeout $limit salloc "${alloc[@]}" --time=3 mpiexec.openmpi "${py[@]}" 2>&1)
    rc=$?
    grep -vE '^mpiar: (allreduce|bcast)' <<< "$out"
    check "salloc + mpiexec.openmpi: exits with 0 (got $rc)" [ "$rc" -eq 0 ]
    check "salloc + mpiexec.openmpi: 4 ranks ok" \
      [ "$(grep -oE 'rank [0-3] of 4 on [^:]*: allreduce ok' <<< "$out" | wc -l)" -eq 4 ]
    check_nodes "$out" "mpiexec.openmpi in the allocation"
    ;;

  *)
    echo "slurm_case.sh: unknown case '$case'" >&2
    exit 2
    ;;
esac
finish
