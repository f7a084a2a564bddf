#!/usr/bin/env bash
# Rank placement on the emulated cluster: runs `mpiar-pingpong --where` on NODES nodes x K ranks
# with PLACE (block or cyclic) and checks that every rank sits on the node the placement
# names, as MPI sees it (the shared-memory group), by its host name (mpiar-ID-nI) and by its
# address (node I has 10.213.0.I+1). Exit 77 (skip) when the machine cannot make a cluster.
# Usage: check_placement.sh CLUSTER_SH TOOLS_DIR NODES K block|cyclic
set -uo pipefail
cluster=$1 tools=$2 nodes=$3 k=$4 place=$5
out=$("$cluster" job -n "$nodes" --calibrate no --timeout 60 -k "$k" --place "$place" \
  --tools "$tools" -- "$tools/mpiar-pingpong" --where 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -ne 0 ]; then
  echo "FAILED: the job exited with $rc"
  exit 1
fi
np=$((nodes * k))
bad=0
for ((r = 0; r < np; r++)); do
  if [ "$place" = block ]; then want=$((r / k)); else want=$((r % nodes)); fi
  line=$(grep -E "^rank $r of $np:" <<< "$out")
  if ! grep -qE "host mpiar-[0-9a-f]{6}-n$want, node $want, .*mpiar0=10\.213\.0\.$((want + 1))( |\$)" \
    <<< "$line"; then
    echo "FAILED: rank $r should be on node $want: '${line:-no line}'"
    bad=1
  fi
done
[ "$bad" -eq 0 ] && echo "placement $place of $np ranks on $nodes nodes: passed"
exit "$bad"
