#!/bin/sh
# The "remote shell" of the emulated cluster (perf/cluster/cluster.sh). MPI launchers call it as
# `netns-rsh.sh HOST COMMAND...` to start their daemon on a node (MPICH's Hydra through
# `-launcher rsh -launcher-exec`, Open MPI through `--mca plm_rsh_agent`): a node is the network
# namespace named HOST, and the command comes as one shell command line, as ssh would get it.
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
exec ip netns exec "$host" /bin/sh -c "$*"
