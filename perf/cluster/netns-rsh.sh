#!/bin/sh
# The "remote shell" of the emulated cluster (perf/cluster/cluster.sh). MPI launchers call it as
# `netns-rsh.sh HOST COMMAND...` to start their daemon on a node (MPICH's Hydra through
# `-launcher rsh -launcher-exec`, Open MPI through `--mca plm_rsh_agent`): a node is the network
# namespace named HOST, and the command comes as one shell command line, as ssh would get it.
# The command also gets a UTS namespace of its own whose host name is HOST, so that every node
# answers gethostname() with its own name, as separate machines would (MPI_Get_processor_name,
# Open MPI's session files and its idea of which processes share a node depend on it).
if [ $# -lt 2 ]; then
  echo "usage: $0 HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
case $host in
  mpiar-*-n[0-9]*) ;;
  *)
    echo "netns-rsh.sh: '$host' is not a node of an emulated mpiar cluster" >&2
    exit 255
    ;;
esac
# shellcheck disable=SC2016
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$1" && exec /bin/sh -c "$2"' \
  netns-rsh "$host" "$*"
