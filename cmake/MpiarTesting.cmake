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

# mpiar_add_test(NAME name COMMAND target [args...] LABELS l... [TIMEOUT s] [ENV K=V...])
function(mpiar_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

# mpiar_add_mpi_test(NAME name NPROCS n COMMAND target [args...] LABELS l... [TIMEOUT s] [ENV K=V...]
#                    [MPIEXEC_FLAGS flags...])
function(mpiar_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NPROCS;TIMEOUT" "COMMAND;LABELS;ENV;MPIEXEC_FLAGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  list(GET T_COMMAND 0 _exe)
  list(REMOVE_AT T_COMMAND 0)
  if(TARGET ${_exe})
    set(_exe $<TARGET_FILE:${_exe}>)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIAR_MPIEXEC_PREFLAGS} ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS}
                   ${T_MPIEXEC_FLAGS} ${MPIEXEC_PREFLAGS} ${_exe} ${MPIEXEC_POSTFLAGS} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       PROCESSORS ${T_NPROCS})
  if(T_ENV)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()
