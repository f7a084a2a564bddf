#!/usr/bin/env bash
# cluster.sh: an emulated multi-node cluster on one Linux machine, for real MPI jobs.
#
# A node is a network namespace (mpiar-ID-nI) with one interface, mpiar0, that a veth pair joins
# to a bridge; the bridge lives in a namespace of its own (mpiar-ID-sw), so the host's network
# is never touched: no address, route or firewall rule is added outside the cluster's
# namespaces, and the nodes have no route anywhere but their own subnet (10.213.0.0/24, node I
# at 10.213.0.I+1). Each node is a host of its own: its name resolves through a hosts file
# (/etc/netns/NODE/hosts, which `ip netns exec` mounts as /etc/hosts), and the launcher starts
# its MPI daemon inside the namespace under that host name (netns-rsh.sh), so MPI groups the
# ranks of a namespace as one node, and they share its link. The link rate is a token bucket
# filter (tc tbf) on both directions of every node's veth pair, with a burst of max(16 KiB,
# 100 us of the rate), below which tbf does not reach its rate. No delay is emulated (the
# development machines' kernel has no sch_netem): the latency is what veth and the bridge give,
# a few microseconds.
#
# Usage:
#   cluster.sh check                          can this machine make a cluster? 0, or 77 + reason
#   cluster.sh up [-n NODES] [-r RATE]        make a cluster, print its ID (default 2, 1gbit)
#   cluster.sh run ID [RUN OPTIONS] -- PROGRAM [ARGS...]
#                                             calibrate the link, then run PROGRAM on the nodes
#   cluster.sh down ID | --stale              remove what `up` made (--stale: every cluster whose
#                                             `job` process is gone)
#   cluster.sh job [-n NODES] [-r RATE] [RUN OPTIONS] -- PROGRAM [ARGS...]
#                                             up, run and down in one go (down also on failure)
#   cluster.sh list                           the clusters of this machine
# Run options:
#   -k RANKS          ranks per node (default 1)
#   --place block|cyclic
#                     block: ranks 0..K-1 on node 0, K..2K-1 on node 1, ...; cyclic: rank R on
#                     node R mod NODES (default block)
#   --timeout S       bound of the job in seconds (default 600), and of the calibration; a job
#                     that passes it is killed and the run exits with 124
#   --calibrate MIN:MAX|no
#                     sizes of the calibration (mpiar-pingpong between nodes 0 and 1, sizes
#                     MIN, 4 MIN, ... MAX; default 1M:64M); `no` skips it
#   --engine mpich|openmpi
#                     the MPI that launches PROGRAM (default: the one PROGRAM is linked with)
#   --tools DIR       where mpiar-pingpong and libmpiar_cluster_finalize.so are (default:
#                     build/perf/cluster of this source tree)
#   -q                no calibration table, only its verdict
#
# Environment of the ranks: whatever is exported when `run` starts, plus the transport settings
# (MPICH: UCX over TCP on mpiar0; Open MPI: the tcp BTL on mpiar0) and, when the job has more
# processes than the machine has cores, MPIAR_WAIT=yield and one thread per rank
# (MPIAR_NUM_THREADS=1, OMP_NUM_THREADS=1); otherwise cores / processes threads per rank.
# Variables the caller set are kept.
#
# Exit status: the program's (a program's 77 becomes 1, so that it cannot read as a skip), 124
# when the job passed its bound, 77 when this machine cannot make a cluster (not root, no
# ip/tc, or making a namespace, bridge, veth or tbf failed), 2 for a usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state_root=${MPIAR_CLUSTER_STATE:-/run/mpiar-cluster}
subnet=10.213.0
ifname=mpiar0
skip_code=77

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}
say() { echo "# cluster: $*"; }

# ---- rates and sizes ---------------------------------------------------------------------

# A tc rate (500kbit, 200mbit, 1gbit, 10gbit, or bits per second) in bits per second.
rate_bits() {
  local r=${1,,} n unit
  if [[ $r =~ ^([0-9]+)(kbit|mbit|gbit|bit)?$ ]]; then
    n=${BASH_REMATCH[1]}
    unit=${BASH_REMATCH[2]}
    case $unit in
      kbit) echo $((n * 1000)) ;;
      mbit) echo $((n * 1000000)) ;;
      gbit) echo $((n * 1000000000)) ;;
      *) echo "$n" ;;
    esac
  else
    return 1
  fi
}

# ---- state ------------------------------------------------------------------------------

state_of() { echo "$state_root/$1"; }
nodes_of() { cat "$(state_of "$1")/nodes"; }
node_name() { echo "mpiar-$1-n$2"; }

valid_id() { [[ $1 =~ ^[0-9a-f]{6}$ ]]; }

# ---- check and up -----------------------------------------------------------------------

# Why this machine cannot make a cluster, or nothing.
missing_capability() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root (network namespaces, veth pairs and tc need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  elif ! command -v ip > /dev/null || ! command -v tc > /dev/null; then
    echo "the ip and tc commands are missing (Debian package iproute2)"
  fi
}

# Each step of `up` that depends on the kernel and its permissions; a failure is a reason to skip.
need() {
  local what=$1
  shift
  local out
  if ! out=$("$@" 2>&1); then
    echo "cluster.sh: cannot make a cluster here: $what failed: $* : $out" >&2
    return 1
  fi
}

cmd_check() {
  local why
  why=$(missing_capability)
  if [ -n "$why" ]; then
    echo "cluster.sh: cannot make a cluster here: $why" >&2
    exit $skip_code
  fi
  # A one-node cluster exercises every kernel feature `up` needs.
  make_cluster 1 1gbit || exit $skip_code
  destroy_cluster "$cluster_id"
  echo "cluster.sh: this machine can make clusters (network namespaces, bridge, veth, tbf)"
  if ! probe_netem; then
    echo "cluster.sh: no delay emulation: the kernel lacks sch_netem"
  fi
}

# 0 if netem can be attached to a device (tried on a veth pair in a scratch namespace).
probe_netem() {
  local ns
  ns="mpiar-probe-$$"
  ip netns add "$ns" 2> /dev/null || return 1
  local ok=1
  if ip -n "$ns" link add mpiarprobe type veth peer name mpiarprobe1 2> /dev/null &&
    tc -n "$ns" qdisc add dev mpiarprobe root netem delay 1ms 2> /dev/null; then
    ok=0
  fi
  ip netns del "$ns"
  return $ok
}

# make_cluster NODES RATE: sets `cluster_id`; removes what it made and returns 77 on failure.
make_cluster() {
  local n=$1 rate=$2 bits burst
  bits=$(rate_bits "$rate") || die "-r '$rate' is not a rate (e.g. 200mbit, 1gbit, 10gbit)"
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
    die "-n needs 1..200 nodes"
  fi
  local why
  why=$(missing_capability)
  if [ -n "$why" ]; then
    echo "cluster.sh: cannot make a cluster here: $why" >&2
    return $skip_code
  fi
  # tbf reaches its rate only with a burst of at least max(16 KiB, ~100 us at the rate).
  burst=$((bits / 8 / 10000))
  burst=$((burst < 16384 ? 16384 : burst))

  mkdir -p "$state_root"
  local id dir
  for _ in 1 2 3 4 5 6 7 8; do
    id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    dir=$(state_of "$id")
    if mkdir "$dir" 2> /dev/null; then
      break
    fi
    dir=
  done
  [ -n "$dir" ] || die "could not make a state directory under $state_root"
  cluster_id=$id
  echo "$n" > "$dir/nodes"
  echo "$rate" > "$dir/rate"
  echo "$burst" > "$dir/burst"
  [ -z "${cluster_owner:-}" ] || echo "$cluster_owner" > "$dir/owner"

  if ! build_network "$id" "$n" "$rate" "$burst"; then
    destroy_cluster "$id" 2> /dev/null || true
    return $skip_code
  fi
}

build_network() {
  local id=$1 n=$2 rate=$3 burst=$4 sw br i node hosts
  sw="mpiar-$id-sw"
  br="mpiar${id}br"
  local dir
  dir=$(state_of "$id")
  need "ip netns add" ip netns add "$sw" || return 1
  need "bridge" ip -n "$sw" link add "$br" type bridge || return 1
  need "bridge up" ip -n "$sw" link set "$br" up || return 1
  hosts="$dir/hosts"
  {
    echo "127.0.0.1 localhost"
    for ((i = 0; i < n; i++)); do
      echo "$subnet.$((i + 1)) $(node_name "$id" "$i")"
    done
  } > "$hosts"
  for ((i = 0; i < n; i++)); do
    node=$(node_name "$id" "$i")
    need "ip netns add" ip netns add "$node" || return 1
    mkdir -p "/etc/netns/$node"
    cp "$hosts" "/etc/netns/$node/hosts"
    need "veth" ip -n "$sw" link add "mpiar${id}p$i" type veth peer name "$ifname" netns "$node" ||
      return 1
    need "veth on the bridge" ip -n "$sw" link set "mpiar${id}p$i" master "$br" up || return 1
    need "address" ip -n "$node" addr add "$subnet.$((i + 1))/24" dev "$ifname" || return 1
    need "link up" ip -n "$node" link set "$ifname" up || return 1
    need "loopback up" ip -n "$node" link set lo up || return 1
    # No IPv6 on the emulated links: no router solicitations or duplicate address detection
    # traffic on them, and MPI cannot pick a link-local address.
    ip netns exec "$node" sh -c "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6" \
      2> /dev/null || true
    # The link rate, both directions: node -> switch on the node's end, switch -> node on the
    # switch's end. latency bounds the queue (rate x 20 ms + burst).
    need "tc tbf" tc -n "$node" qdisc add dev "$ifname" root tbf rate "$rate" burst "$burst" \
      latency 20ms || return 1
    need "tc tbf" tc -n "$sw" qdisc add dev "mpiar${id}p$i" root tbf rate "$rate" burst "$burst" \
      latency 20ms || return 1
  done
  # Launchers start every node's processes with a host name of their own (netns-rsh.sh).
  need "UTS namespace" ip netns exec "$(node_name "$id" 0)" unshare --uts true || return 1
}

cmd_up() {
  local n=2 rate=1gbit
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=${2:?-n needs a value}; shift 2 ;;
      -r) rate=${2:?-r needs a value}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  local rc=0
  make_cluster "$n" "$rate" || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  echo "$cluster_id"
}

# ---- down -------------------------------------------------------------------------------

# Remove the namespaces (their veth ends and the bridge go with them), the hosts files and the
# state of cluster `id`, by name; processes still running inside its namespaces are killed.
destroy_cluster() {
  local id=$1 ns
  valid_id "$id" || die "'$id' is not a cluster id"
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^mpiar-$id-(sw|n[0-9]+)$" ||
    true); do
    local pids
    pids=$(ip netns pids "$ns" 2> /dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2> /dev/null || true
    fi
    ip netns del "$ns"
  done
  rm -rf "/etc/netns/mpiar-$id-"n[0-9]* "$(state_of "$id")"
}

cmd_down() {
  [ $# -eq 1 ] || die "usage: cluster.sh down ID | --stale"
  if [ "$1" = --stale ]; then
    local d owner
    for d in "$state_root"/*/; do
      [ -f "$d/owner" ] || continue
      owner=$(cat "$d/owner")
      if ! kill -0 "$owner" 2> /dev/null; then
        echo "cluster.sh: removing cluster $(basename "$d") (its job process $owner is gone)"
        destroy_cluster "$(basename "$d")"
      fi
    done
    return 0
  fi
  [ -d "$(state_of "$1")" ] || die "no cluster '$1' (see: cluster.sh list)"
  destroy_cluster "$1"
}

cmd_list() {
  local d id
  for d in "$state_root"/*/; do
    [ -f "$d/nodes" ] || continue
    id=$(basename "$d")
    echo "$id: $(cat "$d/nodes") nodes at $(cat "$d/rate")$([ -f "$d/owner" ] &&
      echo ", job process $(cat "$d/owner")")"
  done
}

# ---- run --------------------------------------------------------------------------------

# The MPI a program is linked with: mpich, openmpi, or nothing.
engine_of() {
  local libs
  libs=$(ldd "$1" 2> /dev/null || true)
  if grep -q 'libmpich' <<< "$libs"; then
    echo mpich
  elif grep -q 'libmpi\.so' <<< "$libs"; then
    echo openmpi
  fi
}

# mpi_launch ID ENGINE NPROCS NODES K PLACE TIMEOUT PROGRAM ARGS...: one MPI job, bounded.
mpi_launch() {
  local id=$1 engine=$2 np=$3 nodes=$4 k=$5 place=$6 limit=$7
  shift 7
  local dir node0 i mf
  dir=$(state_of "$id")
  node0=$(node_name "$id" 0)
  mf="$dir/machines.$engine.$nodes.$k.$place"
  : > "$mf"
  for ((i = 0; i < nodes; i++)); do
    case $engine in
      # Hydra wraps around the list: one slot per node gives round-robin placement.
      mpich) echo "$(node_name "$id" "$i"):$([ "$place" = block ] && echo "$k" || echo 1)" ;;
      openmpi) echo "$(node_name "$id" "$i") slots=$k" ;;
    esac >> "$mf"
  done
  local cmd=()
  case $engine in
    mpich)
      # UCX over TCP on the node's interface only (its shared-memory transports would reach the
      # other namespaces); ranks of one node talk through MPICH's shared memory, as on a real
      # node. The finalize library avoids MPICH 4.0.2's hang in MPI_Finalize over UCX/TCP.
      # shellcheck disable=SC2054 # tcp,self is one argument
      cmd=(mpiexec.mpich -launcher rsh -launcher-exec "$here/netns-rsh.sh" -f "$mf"
        -iface "$ifname" -n "$np" -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES "$ifname")
      if [ -f "$tools/libmpiar_cluster_finalize.so" ]; then
        cmd+=(-genv LD_PRELOAD "$tools/libmpiar_cluster_finalize.so${LD_PRELOAD:+:$LD_PRELOAD}")
      else
        say "warning: $tools/libmpiar_cluster_finalize.so not found: MPI_Finalize may hang" >&2
      fi
      ;;
    openmpi)
      # shellcheck disable=SC2054 # tcp,self,vader is one argument
      cmd=(mpiexec.openmpi --allow-run-as-root --oversubscribe --hostfile "$mf" -n "$np"
        --map-by "$([ "$place" = block ] && echo slot || echo node)" --bind-to none
        --mca plm_rsh_agent "$here/netns-rsh.sh"
        --mca pml ob1 --mca btl tcp,self,vader
        --mca btl_tcp_if_include "$ifname" --mca oob_tcp_if_include "$ifname")
      [ "$oversubscribed" = 0 ] || cmd+=(--mca mpi_yield_when_idle 1)
      local v
      for v in $(compgen -e | grep -E '^(MPIAR_|OMP_)' || true); do
        cmd+=(-x "$v")
      done
      ;;
    *) die "unknown engine '$engine' (mpich or openmpi)" ;;
  esac
  # The launcher runs on node 0, under node 0's host name (as netns-rsh.sh starts the others).
  local rc=0
  # shellcheck disable=SC2016
  timeout -k 10 "$limit" ip netns exec "$node0" unshare --uts /bin/sh -c \
    'hostname "$1" && shift && exec "$@"' netns-rsh "$node0" "${cmd[@]}" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    say "TIMEOUT: the job passed its bound of $limit s and was killed" >&2
    return 124
  fi
  return "$rc"
}

load_line() {
  local l1 l5 l15 rest
  read -r l1 l5 l15 rest < /proc/loadavg
  local verdict=quiet
  # Busy: more than half of the cores were taken on average over the last minute.
  if awk -v l="$l1" -v c="$cores" 'BEGIN { exit !(l > c / 2) }'; then
    verdict="BUSY: timings are not trustworthy"
  fi
  echo "load average $l1 $l5 $l15 on $cores cores ($1): $verdict"
}

cmd_run() {
  [ $# -ge 1 ] || die "usage: cluster.sh run ID [options] -- PROGRAM [ARGS...]"
  local id=$1
  shift
  if ! valid_id "$id" || [ ! -f "$(state_of "$id")/nodes" ]; then
    die "no cluster '$id' (see: cluster.sh list)"
  fi
  local k=1 place=block limit=600 calib=1M:64M engine="" quiet=0
  tools=${MPIAR_CLUSTER_TOOLS:-$here/../../build/perf/cluster}
  while [ $# -gt 0 ]; do
    case $1 in
      -k) k=${2:?-k needs a value}; shift 2 ;;
      --place) place=${2:?--place needs a value}; shift 2 ;;
      --timeout) limit=${2:?--timeout needs a value}; shift 2 ;;
      --calibrate) calib=${2:?--calibrate needs a value}; shift 2 ;;
      --engine) engine=${2:?--engine needs a value}; shift 2 ;;
      --tools) tools=${2:?--tools needs a value}; shift 2 ;;
      -q) quiet=1; shift ;;
      --) shift; break ;;
      *) die "run: unknown option '$1' (the program comes after --)" ;;
    esac
  done
  [ $# -ge 1 ] || die "run: no program (cluster.sh run ID [options] -- PROGRAM [ARGS...])"
  [[ $k =~ ^[1-9][0-9]*$ ]] || die "-k needs a positive number of ranks per node"
  [[ $limit =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
  case $place in block | cyclic) ;; *) die "--place is block or cyclic" ;; esac
  local prog
  prog=$(command -v "$1") || die "run: program '$1' not found"
  shift
  [ -n "$engine" ] || engine=$(engine_of "$prog")
  if [ -z "$engine" ]; then
    engine=mpich
    say "warning: $prog is linked with neither MPICH nor Open MPI; launching it with MPICH" >&2
  fi

  local dir nodes rate np
  dir=$(state_of "$id")
  nodes=$(nodes_of "$id")
  rate=$(cat "$dir/rate")
  np=$((nodes * k))
  cores=$(nproc)
  # More processes than cores: every waiting rank must give its core away, and one thread each.
  oversubscribed=0
  local threads=$((cores / np))
  if [ "$np" -gt "$cores" ]; then
    oversubscribed=1
    threads=1
    export MPIAR_WAIT=${MPIAR_WAIT:-yield}
  fi
  [ "$threads" -ge 1 ] || threads=1
  export MPIAR_NUM_THREADS=${MPIAR_NUM_THREADS:-$threads} OMP_NUM_THREADS=${OMP_NUM_THREADS:-$threads}

  say "$id: $nodes nodes x $k ranks ($place placement), links $rate each way (tbf, burst" \
    "$(cat "$dir/burst") B, no delay emulation), $engine"
  say "$np processes on $cores cores$([ "$oversubscribed" = 1 ] && echo ": oversubscribed"):" \
    "MPIAR_WAIT=${MPIAR_WAIT:-auto} MPIAR_NUM_THREADS=$MPIAR_NUM_THREADS OMP_NUM_THREADS=$OMP_NUM_THREADS"
  say "$(load_line before)"

  if [ "$calib" != no ] && [ "$nodes" -ge 2 ]; then
    [[ $calib =~ ^([0-9]+[KMG]?):([0-9]+[KMG]?)$ ]] || die "--calibrate needs MIN:MAX (e.g. 1M:64M) or no"
    local pp="$tools/mpiar-pingpong" out rc=0
    [ -x "$pp" ] || die "$pp not found (build it, or name its folder with --tools)"
    local calib_engine
    calib_engine=$(engine_of "$pp")
    out=$(mpi_launch "$id" "${calib_engine:-mpich}" 2 2 1 block "$limit" "$pp" --rate "$rate" \
      -b "${BASH_REMATCH[1]}" -e "${BASH_REMATCH[2]}" 2>&1) || rc=$?
    if [ "$quiet" = 1 ] && [ "$rc" -eq 0 ]; then
      grep -E '^calibration:|4-byte|^# fit' <<< "$out" | sed 's/^# //; s/^/# cluster: /'
    else
      sed 's/^# //; s/^/# cluster: /' <<< "$out"
    fi
    [ "$rc" -eq 0 ] || say "warning: the calibration run failed with exit code $rc" >&2
  fi

  local rc=0
  mpi_launch "$id" "$engine" "$np" "$nodes" "$k" "$place" "$limit" "$prog" "$@" || rc=$?
  say "$(load_line after)"
  if [ "$rc" -eq $skip_code ]; then
    say "the program exited with $skip_code; reported as 1 (77 means 'no cluster here')" >&2
    rc=1
  fi
  return "$rc"
}

# ---- job --------------------------------------------------------------------------------

cmd_job() {
  local n=2 rate=1gbit run_args=()
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=${2:?-n needs a value}; shift 2 ;;
      -r) rate=${2:?-r needs a value}; shift 2 ;;
      --) run_args+=("$@"); break ;;
      *) run_args+=("$1"); shift ;;
    esac
  done
  cluster_owner=$$
  local rc=0
  make_cluster "$n" "$rate" || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
  trap 'destroy_cluster "$cluster_id"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  cmd_run "$cluster_id" "${run_args[@]}"
}

command=${1:-}
[ $# -eq 0 ] || shift
case $command in
  check) cmd_check ;;
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  down) cmd_down "$@" ;;
  job) cmd_job "$@" ;;
  list) cmd_list ;;
  -h | --help | help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "usage: cluster.sh check | up | run | down | job | list (cluster.sh --help)" ;;
esac
