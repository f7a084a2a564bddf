# cmake -DNM=nm -DLIB=libmpiar.so -P check_exports.cmake
# The shared library's ABI is its public API: every exported symbol is mpiar_* (and not an
# internal mpiar__* name), and the public calls are there.
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(count 0)
foreach(line ${lines})
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (.+)$")
    set(sym "${CMAKE_MATCH_1}")
    string(REGEX REPLACE "@.*$" "" sym "${sym}")
    if(sym MATCHES "^MPIAR_[0-9]+$")
      continue()
    endif()
    if(NOT sym MATCHES "^mpiar_[a-z]" )
      list(APPEND bad "${sym}")
    endif()
    math(EXPR count "${count} + 1")
  endif()
endforeach()
foreach(need mpiar_allreduce mpiar_iallreduce mpiar_allreduce_init mpiar_start mpiar_wait
        mpiar_kv_pushpull_async mpiar_reduce_local mpiar_version mpiar_alloc mpiar_free
        mpiar_reduce_scatter_block mpiar_reduce_scatter_block_ex mpiar_ireduce_scatter_block
        mpiar_reduce_scatter_block_init mpiar_allgather mpiar_allgather_ex mpiar_iallgather
        mpiar_allgather_init)
  if(NOT out MATCHES "${need}")
    list(APPEND bad "missing:${need}")
  endif()
endforeach()
message("${count} exported symbols")
if(bad)
  message(FATAL_ERROR "not the public API: ${bad}")
endif()
