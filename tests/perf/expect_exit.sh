#!/bin/sh
# expect_exit.sh CODE COMMAND [ARGS...]: run COMMAND and succeed only if it exits with CODE.
expected=$1
shift
"$@"
rc=$?
if [ "$rc" -ne "$expected" ]; then
  echo "expect_exit.sh: '$*' exited with $rc, expected $expected" >&2
  exit 1
fi
