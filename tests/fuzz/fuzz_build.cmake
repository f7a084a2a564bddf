# Configure and build the fuzz targets (clang/) with clang in their own build directory.
# -DCLANG=compiler -DSOURCE=tests/fuzz/clang -DBINARY=build dir -DREPO=repository root
# -DMPI_INCLUDE_DIRS=dirs holding mpi.h, comma-separated, -DWERROR=ON|OFF. Prints "SKIPPED: reason" (CTest reports
# the test skipped) when clang cannot link libFuzzer programs.
cmake_minimum_required(VERSION 3.18)
string(REPLACE "," ";" MPI_INCLUDE_DIRS "${MPI_INCLUDE_DIRS}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -DCMAKE_C_COMPILER=${CLANG}
          -DMPIAR_SOURCE_DIR=${REPO} "-DMPIAR_MPI_INCLUDE_DIRS=${MPI_INCLUDE_DIRS}"
          -DMPIAR_WERROR=${WERROR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the fuzz targets with ${CLANG} failed:\n${out}")
endif()
if(EXISTS ${BINARY}/fuzz_unavailable.txt)
  file(READ ${BINARY}/fuzz_unavailable.txt why)
  message("SKIPPED: ${why}")
  return()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} -j 2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz targets failed")
endif()
