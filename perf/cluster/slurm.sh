#!/usr/bin/env bash
# slurm.sh: a Slurm cluster on the emulated nodes of cluster.sh, for jobs launched the way HPC
# users launch them (sbatch, salloc, srun, and mpiexec inside an allocation).
#
# `up` makes a cluster with cluster.sh (network namespaces on a bridge, one host name each,
# shaped links), then starts, from a slurm.conf generated in a temporary directory:
#   - munged, with a key of its own and its socket in that directory (not the machine's
#     /etc/munge or /run/munge);
#   - slurmctld on node 0 (the head node), listening on node 0's address only, 10.213.0.1;
#   - one slurmd per node, inside that node's network namespace, under the node's host name
#     (a UTS namespace of its own), so every node is a Slurm host of its own and srun places
#     ranks across real "hosts": MPI and mpiar see one node per namespace.
# Every daemon runs in the foreground under `timeout` (the cluster's lifetime), in a namespace
# of the cluster, with its output in the directory; its PID is kept there. `down` stops them
# by those PIDs (SIGTERM, then SIGKILL), removes the directory and then the cluster with
# `cluster.sh down`, which also kills any process left in its namespaces (job steps included).
# Nothing listens outside the cluster's namespaces and no address outside them is used.
#
# Usage:
#   slurm.sh check                            can Slurm clusters run here? 0, or 77 + reason
#   slurm.sh up [-n NODES] [-r RATE] [--lifetime S]
#                                             make one, print its ID (default 2 nodes, 1gbit,
#                                             3600 s)
#   slurm.sh exec ID [--timeout S] -- COMMAND [ARGS...]
#                                             run COMMAND on the head node (node 0's namespace
#                                             and host name) with SLURM_CONF set, bounded
#                                             (default 600 s; past it: 124)
#   slurm.sh down ID | --stale                stop its daemons, remove what `up` made (--stale:
#                                             every Slurm cluster whose `job` process is gone)
#   slurm.sh job [-n NODES] [-r RATE] [--timeout S] -- COMMAND [ARGS...]
#                                             up, exec and down in one go (down also on
#                                             failure, interrupt or timeout)
#
# The environment of COMMAND (and so of every job step, which inherits it through srun and
# sbatch): SLURM_CONF; UCX_TLS=tcp,self and UCX_NET_DEVICES=mpiar0 (MPICH's UCX over TCP on the
# node's link only: UCX's shared-memory transports would reach across namespaces);
# MPIAR_SLURM_PRELOAD, the path of libmpiar_cluster_finalize.so (cluster.sh explains MPICH
# 4.0.2's MPI_Finalize hang over UCX/TCP), for a job to put into its ranks' LD_PRELOAD;
# MPIAR_SLURM_ID, MPIAR_SLURM_NODES and MPIAR_SLURM_DIR (the temporary directory).
# --tools DIR names where libmpiar_cluster_finalize.so is (default build/perf/cluster).
#
# Exit status: COMMAND's, 124 when it passed its bound, 77 when Slurm cannot run here (not
# root, packages missing, namespaces unavailable, a daemon that does not start), 2 for a usage
# error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster="$here/cluster.sh"
state_root=${MPIAR_CLUSTER_STATE:-/run/mpiar-cluster}
skip_code=77
tmp_root=${TMPDIR:-/tmp}

die() {
  echo "slurm.sh: $*" >&2
  exit 2
}
say() { echo "# slurm: $*"; }

node_name() { echo "mpiar-$1-n$2"; }
valid_id() { [[ $1 =~ ^[0-9a-f]{6}$ ]]; }

# Why Slurm clusters cannot run here, or nothing.
missing_capability() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root (network namespaces for the nodes, and slurmd runs as root)"
    return
  fi
  local c miss=()
  for c in munged munge slurmctld slurmd srun salloc sbatch scontrol sinfo ip tc timeout unshare; do
    command -v "$c" > /dev/null || miss+=("$c")
  done
  if [ ${#miss[@]} -gt 0 ]; then
    echo "missing commands: ${miss[*]} (Debian packages slurmctld slurmd slurm-client munge" \
      "iproute2)"
  fi
}

# ---- up -----------------------------------------------------------------------------------

# start NAME NODE LIFETIME COMMAND...: COMMAND in the foreground of node NODE's namespace,
# under its host name, bounded by LIFETIME seconds; its output in $dir/log/NAME.out; PID kept.
# The node's own directory, $dir/node/NODE/tmp, is mounted on $dir/tmp (Slurm's TmpFS) in the
# daemon's mount namespace (ip netns exec makes one per command): node-local storage, as /tmp
# is on real nodes, so the nodes' job steps do not meet in one directory (PMIx makes one per
# step there, under the same name on every node).
start_daemon() {
  local name=$1 node=$2 lifetime=$3
  shift 3
  mkdir -p "$dir/node/$node/tmp"
  # shellcheck disable=SC2016
  timeout -k 5 "$lifetime" ip netns exec "$node" unshare --uts /bin/sh -c \
    'hostname "$1" && mount --bind "$2" "$3" && shift 3 && exec "$@"' slurm-node "$node" \
    "$dir/node/$node/tmp" "$dir/tmp" "$@" < /dev/null > "$dir/log/$name.out" 2>&1 &
  echo $! > "$dir/pid/$name"
}

# The node's hardware as slurmd sees it (CPUs, boards, sockets, cores, threads), memory left out.
node_hardware() {
  slurmd -C 2> /dev/null | head -1 | tr ' ' '\n' |
    grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' '
}

write_conf() {
  local id=$1 n=$2 hw i
  hw=$(node_hardware)
  [ -n "$hw" ] || hw="CPUs=$(nproc)"
  mkdir -p "$dir/ctld" "$dir/spool" "$dir/log" "$dir/tmp"
  for ((i = 0; i < n; i++)); do
    mkdir -p "$dir/spool/$(node_name "$id" "$i")"
  done
  : > "$dir/plugstack.conf"
  # slurmd loads a cgroup plugin even when no cgroup plugin is configured; inside a node's
  # namespace /sys is the namespace's own sysfs (ip netns exec), without the cgroup mounts its
  # autodetection looks for. cgroup/v1 named here loads without touching them.
  echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
  {
    echo "# Generated by perf/cluster/slurm.sh for the emulated cluster $id."
    echo "ClusterName=mpiar$id"
    echo "SlurmctldHost=$(node_name "$id" 0)(10.213.0.1)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "SlurmctldPort=6817"
    echo "SlurmdPort=6818"
    echo "StateSaveLocation=$dir/ctld"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/spool/slurmd.%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd.%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "PlugStackConfig=$dir/plugstack.conf"
    echo "TmpFS=$dir/tmp"
    # No cgroups: process groups track a job's processes, and task/affinity binds them
    # (--cpu-bind) with sched_setaffinity, as on clusters without the cgroup plugins.
    echo "ProctrackType=proctrack/pgid"
    echo "TaskPlugin=task/affinity"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SchedulerType=sched/builtin"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MailProg=/bin/true"
    echo "ReturnToService=2"
    # A failed rank does not take the step down by itself (the survivors report it), and the
    # step's other tasks get SIGKILL 2 s after SIGTERM when it is killed.
    echo "KillOnBadExit=0"
    echo "KillWait=2"
    echo "WaitTime=0"
    echo "InactiveLimit=0"
    echo "MinJobAge=30"
    echo "MessageTimeout=20"
    echo "SlurmdTimeout=120"
    echo "SlurmctldTimeout=60"
    for ((i = 0; i < n; i++)); do
      echo "NodeName=$(node_name "$id" "$i") NodeAddr=10.213.0.$((i + 1)) $hw State=UNKNOWN"
    done
    echo "PartitionName=mpiar Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$dir/slurm.conf"
}

# Run a Slurm client on the head node (node 0), bounded.
on_head() {
  local limit=$1
  shift
  # shellcheck disable=SC2016
  SLURM_CONF="$dir/slurm.conf" timeout -k 5 "$limit" ip netns exec "$(node_name "$cid" 0)" \
    unshare --uts /bin/sh -c 'hostname "$1" && shift && exec "$@"' slurm-node \
    "$(node_name "$cid" 0)" "$@"
}

# Wait (bounded) until every node is idle.
wait_ready() {
  local n=$1 t0 out=""
  t0=$(date +%s)
  while [ $(($(date +%s) - t0)) -lt 40 ]; do
    out=$(on_head 10 sinfo -h -N -o '%N %t' 2> /dev/null || true)
    if [ "$(grep -cE ' idle$' <<< "$out")" -eq "$n" ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "slurm.sh: the nodes did not become idle within 40 s: ${out:-no answer from slurmctld}" >&2
  return 1
}

# Why the daemons did not come up: the last lines of their logs.
explain_failure() {
  local f
  for f in "$dir"/log/*; do
    [ -s "$f" ] || continue
    echo "--- $(basename "$f") (last lines)" >&2
    tail -n 5 "$f" >&2
  done
}

# make_slurm NODES RATE LIFETIME: sets `cid` and `dir`; removes what it made and returns 77 on
# failure.
make_slurm() {
  local n=$1 rate=$2 lifetime=$3 why i node rc=0
  why=$(missing_capability)
  if [ -n "$why" ]; then
    echo "slurm.sh: cannot run Slurm here: $why" >&2
    return $skip_code
  fi
  cid=$("$cluster" up -n "$n" -r "$rate") || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "slurm.sh: cannot run Slurm here: cluster.sh up failed ($rc)" >&2
    return $skip_code
  fi
  dir=$(mktemp -d "$tmp_root/mpiar-slurm-$cid.XXXXXX")
  echo "$dir" > "$state_root/$cid/slurm"
  [ -z "${slurm_owner:-}" ] || echo "$slurm_owner" > "$state_root/$cid/owner"
  mkdir -p "$dir/munge" "$dir/pid" "$dir/log"
  chmod 755 "$dir/munge"
  write_conf "$cid" "$n"

  # munged: a key of its own (1 KiB of random bytes), its socket in the directory.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  start_daemon munged "$(node_name "$cid" 0)" "$lifetime" munged --foreground --force \
    --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  local t0
  t0=$(date +%s)
  until munge -n -S "$dir/munge/munge.socket" 2> /dev/null | unmunge -S "$dir/munge/munge.socket" \
    > /dev/null 2>&1; do
    if [ $(($(date +%s) - t0)) -ge 15 ] || ! kill -0 "$(cat "$dir/pid/munged")" 2> /dev/null; then
      echo "slurm.sh: cannot run Slurm here: munged did not start" >&2
      explain_failure
      destroy_slurm "$cid"
      return $skip_code
    fi
    sleep 0.2
  done

  start_daemon slurmctld "$(node_name "$cid" 0)" "$lifetime" slurmctld -D -c -f "$dir/slurm.conf"
  for ((i = 0; i < n; i++)); do
    node=$(node_name "$cid" "$i")
    start_daemon "slurmd.$node" "$node" "$lifetime" slurmd -D -f "$dir/slurm.conf" -N "$node"
  done
  if ! wait_ready "$n"; then
    echo "slurm.sh: cannot run Slurm here: the daemons did not come up" >&2
    explain_failure
    destroy_slurm "$cid"
    return $skip_code
  fi
}

cmd_up() {
  local n=2 rate=1gbit lifetime=3600
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=${2:?-n needs a value}; shift 2 ;;
      -r) rate=${2:?-r needs a value}; shift 2 ;;
      --lifetime) lifetime=${2:?--lifetime needs a value}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ $lifetime =~ ^[1-9][0-9]*$ ]] || die "--lifetime needs a positive number of seconds"
  local rc=0
  make_slurm "$n" "$rate" "$lifetime" || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  echo "$cid"
}

# ---- down ---------------------------------------------------------------------------------

# Stop the daemons of cluster `id` by their PIDs, remove the directory, then the cluster.
destroy_slurm() {
  local id=$1 d f pid
  valid_id "$id" || die "'$id' is not a cluster id"
  d=$(cat "$state_root/$id/slurm" 2> /dev/null || true)
  if [ -n "$d" ] && [ -d "$d/pid" ]; then
    # slurmds first, then the controller, then munge.
    for f in "$d"/pid/slurmd.* "$d/pid/slurmctld" "$d/pid/munged"; do
      [ -f "$f" ] || continue
      pid=$(cat "$f")
      kill -TERM "$pid" 2> /dev/null || true
    done
    local t0
    t0=$(date +%s)
    for f in "$d"/pid/*; do
      pid=$(cat "$f")
      while kill -0 "$pid" 2> /dev/null && [ $(($(date +%s) - t0)) -lt 10 ]; do
        sleep 0.1
      done
      kill -KILL "$pid" 2> /dev/null || true
    done
  fi
  # The namespaces, with whatever still runs inside them.
  "$cluster" down "$id" > /dev/null 2>&1 || true
  case $d in
    "$tmp_root"/mpiar-slurm-"$id".*) rm -rf "$d" ;;
  esac
}

cmd_down() {
  [ $# -eq 1 ] || die "usage: slurm.sh down ID | --stale"
  if [ "$1" = --stale ]; then
    local d owner
    for d in "$state_root"/*/; do
      if [ ! -f "$d/slurm" ] || [ ! -f "$d/owner" ]; then continue; fi
      owner=$(cat "$d/owner")
      if ! kill -0 "$owner" 2> /dev/null; then
        echo "slurm.sh: removing Slurm cluster $(basename "$d") (its job process $owner is gone)"
        destroy_slurm "$(basename "$d")"
      fi
    done
    return 0
  fi
  valid_id "$1" || die "'$1' is not a cluster id"
  [ -f "$state_root/$1/slurm" ] || die "no Slurm cluster '$1'"
  destroy_slurm "$1"
}

# ---- exec and job -------------------------------------------------------------------------

cmd_exec() {
  [ $# -ge 1 ] || die "usage: slurm.sh exec ID [--timeout S] -- COMMAND [ARGS...]"
  cid=$1
  shift
  valid_id "$cid" || die "'$cid' is not a cluster id"
  [ -f "$state_root/$cid/slurm" ] || die "no Slurm cluster '$cid'"
  dir=$(cat "$state_root/$cid/slurm")
  local limit=600
  local tools=${MPIAR_CLUSTER_TOOLS:-$here/../../build/perf/cluster}
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) limit=${2:?--timeout needs a value}; shift 2 ;;
      --tools) tools=${2:?--tools needs a value}; shift 2 ;;
      --) shift; break ;;
      *) die "exec: unknown option '$1' (the command comes after --)" ;;
    esac
  done
  [ $# -ge 1 ] || die "exec: no command"
  [[ $limit =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
  tools=$(cd "$tools" 2> /dev/null && pwd || echo "$tools")
  local nodes rc=0
  nodes=$(cat "$state_root/$cid/nodes")
  export UCX_TLS=tcp,self UCX_NET_DEVICES=mpiar0
  export MPIAR_SLURM_PRELOAD="$tools/libmpiar_cluster_finalize.so" MPIAR_SLURM_ID=$cid
  export MPIAR_SLURM_NODES=$nodes MPIAR_SLURM_DIR=$dir
  on_head "$limit" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    say "TIMEOUT: the command passed its bound of $limit s and was killed" >&2
    return 124
  fi
  return "$rc"
}

cmd_job() {
  local n=2 rate=1gbit limit=600 exec_args=()
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=${2:?-n needs a value}; shift 2 ;;
      -r) rate=${2:?-r needs a value}; shift 2 ;;
      --timeout) limit=${2:?--timeout needs a value}; exec_args+=(--timeout "$2"); shift 2 ;;
      --) exec_args+=("$@"); break ;;
      *) exec_args+=("$1"); shift ;;
    esac
  done
  [[ $limit =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
  slurm_owner=$$
  local rc=0
  make_slurm "$n" "$rate" $((limit + 60)) || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  trap 'destroy_slurm "$cid"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  # A reader that went away (the caller killed): exit through the trap above rather than die
  # of SIGPIPE without it. A handler, not an ignored signal, so the command inherits none.
  trap 'exit 141' PIPE
  say "cluster $cid: $n nodes ($(node_name "$cid" 0) .. $(node_name "$cid" $((n - 1)))), slurmctld" \
    "on node 0, $(node_hardware)per node"
  local id=$cid
  cmd_exec "$id" "${exec_args[@]}"
}

cmd_check() {
  local why
  why=$(missing_capability)
  if [ -n "$why" ]; then
    echo "slurm.sh: cannot run Slurm here: $why" >&2
    exit $skip_code
  fi
  "$cluster" check > /dev/null || exit $skip_code
  echo "slurm.sh: this machine can run Slurm clusters ($(slurmctld -V 2> /dev/null || echo slurm))"
}

command=${1:-}
[ $# -eq 0 ] || shift
case $command in
  check) cmd_check ;;
  up) cmd_up "$@" ;;
  exec) cmd_exec "$@" ;;
  down) cmd_down "$@" ;;
  job) cmd_job "$@" ;;
  -h | --help | help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "usage: slurm.sh check | up | exec | down | job (slurm.sh --help)" ;;
esac
