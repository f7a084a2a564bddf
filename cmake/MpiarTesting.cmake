# Test helpers: every test has labels and a timeout; MPI tests run through mpiexec.

# Open MPI refuses to run as root or oversubscribed unless told; MPICH needs neither flag.
set(MPIAR_MPIEXEC_PREFLAGS "")
if(MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiar_mpiexec_version
                  ERROR_VARIABLE _mpiar_mpiexec_version RESULT_VARIABLE _mpiar_rc)
  if(_mpiar_mpiexec_version MATCHES "Open MPI|OpenRTE|open-mpi")
    set(MPIAR_MPIEXEC_PREFLAGS --oversubscribe --allow-run-as-root)
  endif()
endif()

# Options of both helpers below:
#   LABELS l...     CTest labels; TIMEOUT s (default 60, MPI tests 120); ENV K=V... for the run
#   EXPECT_RC n     the exit code the program must end with (default 0)
#   MATCH re...     regular expressions its output (stdout and stderr together) must match
#   NO_MATCH re...  regular expressions its output must not match
#   SKIP_RC n       the exit code by which the program says that it cannot run here: CTest
#                   reports the test as skipped (the program prints why)
# With EXPECT_RC, MATCH or NO_MATCH the run goes through cmake/check_run.cmake, which checks the
# exit code and the output together (CTest's PASS_REGULAR_EXPRESSION ignores the exit code and
# WILL_FAIL accepts any failure). At most 10 MATCH and 10 NO_MATCH expressions; none may hold a
# semicolon.
set(MPIAR_CHECK_RUN "${CMAKE_CURRENT_LIST_DIR}/check_run.cmake")

# The command line of a test, wrapped in check_run.cmake when the options ask for checks.
function(_mpiar_test_command out)
  cmake_parse_arguments(C "" "EXPECT_RC" "COMMAND;MATCH;NO_MATCH" ${ARGN})
  list(GET C_COMMAND 0 _exe)
  if(TARGET ${_exe})
    list(REMOVE_AT C_COMMAND 0)
    list(PREPEND C_COMMAND $<TARGET_FILE:${_exe}>)
  endif()
  if(NOT DEFINED C_EXPECT_RC AND NOT C_MATCH AND NOT C_NO_MATCH)
    set(${out} "${C_COMMAND}" PARENT_SCOPE)
    return()
  endif()
  set(_defs "")
  if(DEFINED C_EXPECT_RC)
    list(APPEND _defs -DEXPECT_RC=${C_EXPECT_RC})
  endif()
  set(_k 0)
  foreach(_re ${C_MATCH})
    list(APPEND _defs "-DMATCH${_k}=${_re}")
    math(EXPR _k "${_k} + 1")
  endforeach()
  set(_k 0)
  foreach(_re ${C_NO_MATCH})
    list(APPEND _defs "-DNO_MATCH${_k}=${_re}")
    math(EXPR _k "${_k} + 1")
  endforeach()
  # The command travels as -DARGn variables: cmake would take some of its words (e.g. "-i")
  # for options of its own, even after "--".
  set(_k 0)
  foreach(_arg ${C_COMMAND})
    list(APPEND _defs "-DARG${_k}=${_arg}")
    math(EXPR _k "${_k} + 1")
  endforeach()
  set(${out} ${CMAKE_COMMAND} ${_defs} -DNARGS=${_k} -P ${MPIAR_CHECK_RUN} PARENT_SCOPE)
endfunction()

function(_mpiar_test_properties name labels timeout env skip_rc)
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
  if(env)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}")
  endif()
  if(NOT "${skip_rc}" STREQUAL "")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${skip_rc})
  endif()
endfunction()

# mpiar_add_test(NAME name COMMAND target [args...] [options above])
function(mpiar_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;EXPECT_RC;SKIP_RC" "COMMAND;LABELS;ENV;MATCH;NO_MATCH"
                        ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  set(_rc "")
  if(DEFINED T_EXPECT_RC)
    set(_rc EXPECT_RC ${T_EXPECT_RC})
  endif()
  _mpiar_test_command(_cmd COMMAND ${T_COMMAND} ${_rc} MATCH ${T_MATCH} NO_MATCH ${T_NO_MATCH})
  add_test(NAME ${T_NAME} COMMAND ${_cmd})
  _mpiar_test_properties(${T_NAME} "${T_LABELS}" ${T_TIMEOUT} "${T_ENV}" "${T_SKIP_RC}")
endfunction()

# mpiar_add_mpi_test(NAME name NPROCS n COMMAND target [args...] [options above]
#                    [MPIEXEC_FLAGS flags...])
function(mpiar_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NPROCS;TIMEOUT;EXPECT_RC;SKIP_RC"
                        "COMMAND;LABELS;ENV;MPIEXEC_FLAGS;MATCH;NO_MATCH" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  list(GET T_COMMAND 0 _exe)
  list(REMOVE_AT T_COMMAND 0)
  if(TARGET ${_exe})
    set(_exe $<TARGET_FILE:${_exe}>)
  endif()
  set(_rc "")
  if(DEFINED T_EXPECT_RC)
    set(_rc EXPECT_RC ${T_EXPECT_RC})
  endif()
  _mpiar_test_command(_cmd
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIAR_MPIEXEC_PREFLAGS} ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS}
            ${T_MPIEXEC_FLAGS} ${MPIEXEC_PREFLAGS} ${_exe} ${MPIEXEC_POSTFLAGS} ${T_COMMAND}
    ${_rc} MATCH ${T_MATCH} NO_MATCH ${T_NO_MATCH})
  add_test(NAME ${T_NAME} COMMAND ${_cmd})
  _mpiar_test_properties(${T_NAME} "${T_LABELS}" ${T_TIMEOUT} "${T_ENV}" "${T_SKIP_RC}")
  set_tests_properties(${T_NAME} PROPERTIES PROCESSORS ${T_NPROCS})
endfunction()

# mpiar_add_skipped_test(NAME name LABELS l... REASON text): a test that cannot run in this build
# or on this machine is still registered, and CTest reports it as skipped with the reason, so
# that it never disappears without a word.
function(mpiar_add_skipped_test)
  cmake_parse_arguments(T "" "NAME;REASON" "LABELS" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: ${T_REASON}")
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT 10
                       SKIP_REGULAR_EXPRESSION "SKIPPED: ")
  message(STATUS "mpiar: test ${T_NAME} is skipped: ${T_REASON}")
endfunction()
