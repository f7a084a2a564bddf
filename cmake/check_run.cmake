# Run a command and check both its exit code and its output (stdout and stderr together): CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit code, and WILL_FAIL accepts any failure.
#
#   cmake [-DEXPECT_RC=n] [-DMATCH0=regex ... -DMATCH9=regex] [-DNO_MATCH0=regex ...]
#         [-DWORKDIR=dir] -DNARGS=n -DARG0=command -DARG1=argument ... -P check_run.cmake
#
# The command comes in ARG0 .. ARG<NARGS-1> (cmake reads some words as options of its own even
# after "--", so it is not passed as trailing arguments). EXPECT_RC defaults to 0. Every MATCHn
# must match the output, no NO_MATCHn may. The output is echoed, so that CTest's log shows it.
cmake_minimum_required(VERSION 3.18)

set(cmd "")
if(NOT NARGS OR NARGS LESS 1)
  message(FATAL_ERROR "check_run.cmake: no command (-DNARGS=n -DARG0=...)")
endif()
math(EXPR last "${NARGS} - 1")
foreach(i RANGE ${last})
  list(APPEND cmd "${ARG${i}}")
endforeach()
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
if(NOT DEFINED WORKDIR)
  set(WORKDIR ".")
endif()

execute_process(COMMAND ${cmd} WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
set(problems "")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  string(APPEND problems "\n  exit code ${rc}, expected ${EXPECT_RC}")
endif()
foreach(k RANGE 9)
  if(DEFINED MATCH${k} AND NOT out MATCHES "${MATCH${k}}")
    string(APPEND problems "\n  the output does not match '${MATCH${k}}'")
  endif()
  if(DEFINED NO_MATCH${k} AND out MATCHES "${NO_MATCH${k}}")
    string(APPEND problems "\n  the output matches '${NO_MATCH${k}}'")
  endif()
endforeach()
if(problems)
  string(REPLACE ";" " " shown "${cmd}")
  message(FATAL_ERROR "${shown}:${problems}")
endif()
