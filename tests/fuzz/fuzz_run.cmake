# Run one fuzz target for SECONDS seconds from its seed corpus; any crash, sanitizer report,
# leak or timeout fails the test, and the input that caused it is left in WORKDIR.
# -DEXE=target -DBINARY=the fuzz build dir -DSEEDS=seed corpus -DWORKDIR=dir -DSECONDS=n
cmake_minimum_required(VERSION 3.18)
if(NOT EXISTS ${EXE})
  if(EXISTS ${BINARY}/fuzz_unavailable.txt)
    file(READ ${BINARY}/fuzz_unavailable.txt why)
    message("SKIPPED: ${why}")
    return()
  endif()
  message(FATAL_ERROR "${EXE} was not built (see the test fuzz_build)")
endif()
# New inputs go to a corpus of the run's own; the committed seeds are only read.
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR}/corpus)
execute_process(
  COMMAND ${EXE} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -seed=1
          -print_final_stats=1 -artifact_prefix=${WORKDIR}/ ${WORKDIR}/corpus ${SEEDS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(REGEX MATCH "Done [0-9]+ runs in [0-9]+ second" done "${out}")
string(REGEX MATCH "stat::number_of_executed_units: [0-9]+" units "${out}")
if(NOT rc EQUAL 0 OR NOT done)
  file(GLOB artifacts ${WORKDIR}/crash-* ${WORKDIR}/leak-* ${WORKDIR}/timeout-* ${WORKDIR}/oom-*)
  message(FATAL_ERROR "${EXE} failed (exit ${rc}); inputs: ${artifacts}\n${out}")
endif()
message("${EXE}: ${done}s, ${units}")
