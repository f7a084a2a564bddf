#!/usr/bin/env bash
# Command lines of one tool, from a table: every bad argument must end the tool with exit code 2
# and a message on stderr that names the option (nothing on stdout), --help must document every
# option, and under mpiexec the message must appear once, from rank 0.
#
# Usage: check_tool_args.sh TABLE TOOL MPIEXEC NUMPROC_FLAG [MPIEXEC_PREFLAGS...]
#
# TABLE has one case per line, fields separated by " | ":
#   RC | NP | ENV | TEXT | ARGUMENTS
# RC: the exit code expected (2 for bad arguments, 0 for --help). NP: "-" to run the tool
# directly, or a number of ranks to run it under mpiexec. ENV: "-" or VAR=VALUE for the run.
# TEXT: a fixed string expected on stderr (exit code 2, once) or on stdout (exit code 0).
# ARGUMENTS: split at blanks. Lines starting with '#' and blank lines are skipped.
#
# In TEXT and ARGUMENTS, @TMP@ stands for a scratch directory made for the run, which holds the
# inputs that no fixed path provides:
#   @TMP@/fifo           a FIFO (opening it for reading blocks until a writer comes)
#   @TMP@/dir/           an empty directory
#   @TMP@/sparse.json    a sparse file of 209,716,567 bytes (zeros)
#   @TMP@/truncated.json the start of a tuning file, cut inside its topology
# Every case runs under `timeout` (CHECK_TOOL_ARGS_TIMEOUT seconds, default 30): a tool that
# blocks, on a FIFO for instance, is a failed case, not a hung test.
set -u
set -f # arguments such as '*' stay as they are
table=$1
tool=$2
mpiexec=$3
npflag=$4
shift 4
preflags=("$@")
limit=${CHECK_TOOL_ARGS_TIMEOUT:-30}
out=$(mktemp)
err=$(mktemp)
scratch=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$scratch"' EXIT
mkfifo "$scratch/fifo"
mkdir "$scratch/dir"
truncate -s 209716567 "$scratch/sparse.json"
printf '{\n  "format": "mpiar-tuning",\n  "version": 1,\n  "topology": {"ranks": 2, "no' \
  > "$scratch/truncated.json"
failures=0
cases=0

trim() {
  local s=$1
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf '%s' "$s"
}

fail() {
  echo "FAIL: $*"
  echo "  stdout: $(head -c 600 "$out")"
  echo "  stderr: $(head -c 600 "$err")"
  failures=$((failures + 1))
}

while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in '#'* | '') continue ;; esac
  IFS='|' read -r rc np envv text args <<< "$line"
  rc=$(trim "$rc")
  np=$(trim "$np")
  envv=$(trim "$envv")
  text=$(trim "$text")
  args=$(trim "$args")
  text=${text//@TMP@/$scratch}
  args=${args//@TMP@/$scratch}
  # shellcheck disable=SC2206
  argv=($args)
  envs=()
  if [ "$envv" != "-" ]; then
    envs=("$envv")
  fi
  cmd=("$tool" "${argv[@]}")
  if [ "$np" != "-" ]; then
    cmd=("$mpiexec" "${preflags[@]}" "$npflag" "$np" "$tool" "${argv[@]}")
  fi
  cases=$((cases + 1))
  env "${envs[@]}" timeout -k 5 "$limit" "${cmd[@]}" > "$out" 2> "$err" < /dev/null
  got=$?
  what="$(basename "$tool") ${argv[*]}"
  [ "$np" != "-" ] && what="$what (under mpiexec, $np ranks)"
  [ "$envv" != "-" ] && what="$what with $envv"
  if [ "$got" -eq 124 ] || [ "$got" -eq 137 ]; then
    fail "$what did not end within $limit s"
  elif [ "$got" -ne "$rc" ]; then
    fail "$what exited with $got, expected $rc"
  elif [ "$rc" -eq 0 ]; then
    grep -q -F -- "$text" "$out" || fail "$what: stdout lacks '$text'"
  else
    n=$(grep -c -F -- "$text" "$err")
    if [ "$n" -ne 1 ]; then
      fail "$what: stderr holds '$text' $n times, expected once"
    elif [ -s "$out" ]; then
      fail "$what: wrote to stdout"
    fi
  fi
done < "$table"

if [ "$cases" -eq 0 ]; then
  echo "no cases in $table"
  exit 1
fi
if [ "$failures" -ne 0 ]; then
  echo "$failures of $cases cases failed"
  exit 1
fi
echo "$cases command lines of $(basename "$tool") behaved as expected"
