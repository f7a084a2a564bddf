#!/usr/bin/env bash
# What the cluster harness makes and removes: two clusters at once, each removed by name
# without touching the other; a job removes its cluster when the program fails, when it passes
# its time bound, and when making the cluster fails half-way (a `tc` that fails: exit 77, the
# skip code, and nothing left); a user who is not root gets 77 and a reason. Exit 77 (skip)
# when this machine cannot make a cluster at all.
# Usage: check_lifecycle.sh CLUSTER_SH
set -uo pipefail
cluster=$1
fail=0
check() { # check DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}
namespaces_of() { ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^mpiar-$1-(sw|n[0-9]+)$"; }
# shellcheck disable=SC2317 # called through check
gone() { # nothing of cluster $1 is left
  [ -z "$(namespaces_of "$1")" ] && ! ls -d /etc/netns/mpiar-"$1"-* > /dev/null 2>&1 &&
    [ ! -e "${MPIAR_CLUSTER_STATE:-/run/mpiar-cluster}/$1" ]
}
id_in() { grep -oE 'mpiar-[0-9a-f]{6}-|^# cluster: [0-9a-f]{6}:' <<< "$1" | head -1 | grep -oE '[0-9a-f]{6}'; }

"$cluster" check
rc=$?
[ "$rc" -eq 77 ] && exit 77
check "check succeeds" [ "$rc" -eq 0 ]

# Two clusters side by side; down removes exactly its own.
a=$("$cluster" up -n 2 -r 1gbit)
b=$("$cluster" up -n 1 -r 200mbit)
check "up made cluster $a (3 namespaces)" [ "$(namespaces_of "$a" | wc -l)" -eq 3 ]
check "up made cluster $b (2 namespaces)" [ "$(namespaces_of "$b" | wc -l)" -eq 2 ]
check "list names both" sh -c "'$cluster' list | grep -q '^$a: 2 nodes at 1gbit' &&
  '$cluster' list | grep -q '^$b: 1 nodes at 200mbit'"
check "the nodes resolve each other's names" \
  ip netns exec "mpiar-$a-n1" getent hosts "mpiar-$a-n0"
check "tbf on both ends of node 0's link" sh -c "
  tc -n mpiar-$a-n0 qdisc show dev mpiar0 | grep -q 'tbf.*rate 1Gbit' &&
  tc -n mpiar-$a-sw qdisc show dev mpiar${a}p0 | grep -q 'tbf.*rate 1Gbit'"
"$cluster" down "$a"
check "down $a removed it" gone "$a"
check "down $a left $b alone" [ "$(namespaces_of "$b" | wc -l)" -eq 2 ]
"$cluster" down "$b"
check "down $b removed it" gone "$b"

# A failing program: its exit code, and the cluster is gone.
out=$("$cluster" job -n 2 --calibrate no --timeout 30 -- sh -c 'exit 5' 2>&1)
rc=$?
id=$(id_in "$out")
check "a failing program's exit code comes back (5, got $rc)" [ "$rc" -eq 5 ]
check "the failed job removed its cluster ${id:-?}" gone "${id:-none}"

# A job past its bound: 124, and the cluster is gone.
out=$("$cluster" job -n 2 --calibrate no --timeout 2 -- sleep 60 2>&1)
rc=$?
id=$(id_in "$out")
check "a job past its bound exits with 124 (got $rc)" [ "$rc" -eq 124 ]
check "the timed-out job removed its cluster ${id:-?}" gone "${id:-none}"

# Making the cluster fails at tc: the skip code, the reason, nothing left.
fake=$(mktemp -d)
printf '#!/bin/sh\necho "tc: simulated failure" >&2\nexit 2\n' > "$fake/tc"
chmod +x "$fake/tc"
out=$(PATH="$fake:$PATH" "$cluster" job -n 2 -- true 2>&1)
rc=$?
rm -rf "$fake"
id=$(id_in "$out")
check "a failing tc gives 77 (got $rc) and says why" sh -c "[ $rc -eq 77 ] && echo '$out' | grep -q 'tc tbf failed'"
check "the half-made cluster ${id:-?} was removed" gone "${id:-none}"

# Not root: 77 and the reason.
if command -v setpriv > /dev/null; then
  # The user must reach the script: the checkout may sit in a directory only root can enter
  # (a mktemp -d clone), so a copy in a directory of its own, readable by all, runs from /.
  copy=$(mktemp -d)
  chmod 755 "$copy"
  cp "$cluster" "$copy/cluster.sh"
  chmod 755 "$copy/cluster.sh"
  out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups "$copy/cluster.sh" job -n 2 -- true 2>&1)
  rc=$?
  rm -rf "$copy"
  check "not root: 77 (got $rc) and the reason" sh -c "[ $rc -eq 77 ] && echo '$out' | grep -q 'not root'"
fi

[ "$fail" -eq 0 ] && echo "cluster lifecycle: passed"
exit "$fail"
