# Runs an MPI test program under valgrind (memcheck, full leak check) and fails if any report
# (an invalid access, an uninitialised value, a leaked block) has an mpiar function in its stack.
# MPI's own reports (its start-up allocations, for one) are not mpiar's to fix and are ignored.
#
# Variables (-D): MPIEXEC, NPFLAG, NP, PREFLAGS (comma-separated), VALGRIND, EXE, ARGS (the
# program's arguments, comma-separated; optional), WORKDIR, SUPP (a valgrind suppression file for
# MPI's own reports; optional).
cmake_minimum_required(VERSION 3.18)
string(REPLACE "," ";" PREFLAGS "${PREFLAGS}")
string(REPLACE "," ";" ARGS "${ARGS}")
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(_supp "")
if(SUPP)
  set(_supp "--suppressions=${SUPP}")
endif()
execute_process(
  COMMAND "${MPIEXEC}" ${PREFLAGS} ${NPFLAG} ${NP} "${VALGRIND}" --leak-check=full
          --show-leak-kinds=definite,indirect,possible --log-file=${WORKDIR}/vg.%p.log ${_supp} "${EXE}" ${ARGS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the program failed under valgrind (exit ${rc})")
endif()
file(GLOB logs "${WORKDIR}/vg.*.log")
list(LENGTH logs nlogs)
if(nlogs LESS NP)
  message(FATAL_ERROR "expected ${NP} valgrind logs, found ${nlogs}")
endif()
set(found 0)
foreach(log ${logs})
  file(STRINGS "${log}" hits REGEX "(at|by) 0x[0-9A-Fa-f]+: mpiar_")
  if(hits)
    set(found 1)
    file(READ "${log}" text)
    message("${log}:\n${text}")
  endif()
endforeach()
if(found)
  message(FATAL_ERROR "valgrind reports with mpiar in the stack (see above)")
endif()
message("valgrind: no report involves mpiar (${nlogs} ranks)")
