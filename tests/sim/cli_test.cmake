# mpiar-sim command line: JSON output parses and carries the promised fields, text output and
# printed schedules have their form.
function(run expect_rc)
  execute_process(COMMAND ${SIM} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "mpiar-sim ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# Bad command lines (exit code 2, a message naming the option) are checked with every other
# tool's in tests/perf/args/mpiar-sim.txt.
run(2 --algorithm ring --ranks 4 --bytes)
if(NOT ERR MATCHES "option '--bytes' needs a value" OR NOT ERR MATCHES "Try 'mpiar-sim --help'")
  message(FATAL_ERROR "usage error without its message: ${ERR}")
endif()
run(0 --help)
run(2 --reproducible --algorithm ring --ranks 4 --bytes 1K)

# Reproducible mode: each algorithm beside its replacement (ring -> repro_direct at 3 ranks).
run(0 --sweep --reproducible --ranks 3 --sizes 64K)
if(NOT OUT MATCHES "repro_direct/1.000" OR NOT OUT MATCHES "repro_rabenseifner/")
  message(FATAL_ERROR "reproducible sweep: ${OUT}")
endif()
run(0 --algorithm repro_direct --ranks 5 --bytes 10K --segment 1K --in-place --dtype bf16)
if(NOT OUT MATCHES "checks +ok")
  message(FATAL_ERROR "repro_direct: ${OUT}")
endif()

run(0 --algorithm ring --ranks 8 --bytes 1M --json)
foreach(field algorithm ranks bytes time_s messages bytes_sent_max ok)
  string(JSON v ERROR_VARIABLE jerr GET "${OUT}" ${field})
  if(jerr)
    message(FATAL_ERROR "field ${field}: ${jerr}\n${OUT}")
  endif()
  set(J_${field} "${v}")
endforeach()
if(NOT J_algorithm STREQUAL "ring" OR NOT J_ranks EQUAL 8 OR NOT J_bytes EQUAL 1048576
   OR NOT J_ok STREQUAL "ON" OR NOT J_bytes_sent_max EQUAL 1835008 OR NOT J_messages EQUAL 112)
  message(FATAL_ERROR "unexpected JSON values: ${OUT}")
endif()

run(0 --algorithm rabenseifner --ranks 6 --bytes 64K --segment 4K --in-place --dtype bf16
    --op max --alpha 1e-6 --beta 2e-10 --gamma 0)
if(NOT OUT MATCHES "checks +ok" OR NOT OUT MATCHES "busbw")
  message(FATAL_ERROR "text output: ${OUT}")
endif()

run(0 --algorithm ring --ranks 4 --bytes 64 --print-schedule --rank 1)
if(NOT OUT MATCHES "^# ring rank 1/4 count 16")
  message(FATAL_ERROR "schedule print: ${OUT}")
endif()

run(0 --collective bcast --algorithm scatter_allgather --ranks 7 --root 3 --bytes 10K --json)
string(JSON ok GET "${OUT}" ok)
if(NOT ok STREQUAL "ON")
  message(FATAL_ERROR "bcast: ${OUT}")
endif()

run(0 --sweep --ranks 2,16 --sizes 1K,4M --json)
string(JSON n LENGTH "${OUT}")
string(JSON w GET "${OUT}" 3 winner)
if(NOT n EQUAL 4 OR w STREQUAL "-")
  message(FATAL_ERROR "sweep JSON: ${OUT}")
endif()
