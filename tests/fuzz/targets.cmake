# The fuzz targets, one line each:
#   mpiar_fuzz_target(NAME SOURCE [LIBRARY SOURCES...])
# SOURCE is the target's file in tests/fuzz/ (it defines LLVMFuzzerTestOneInput); the library
# sources it needs are paths from the repository root (src/base/errors.c, settings.c and types.c are
# always added). Its seed corpus is tests/fuzz/corpus/NAME/. Both the project (which registers a
# CTest test per target, label fuzz) and the clang build in clang/ (which builds them) read this
# file, each with its own mpiar_fuzz_target().
mpiar_fuzz_target(parse_size fuzz_parse_size.c)
mpiar_fuzz_target(ckpt_read fuzz_ckpt_read.c src/kvstore/ckpt.c src/kvstore/table.c src/kvstore/crc32c.c src/tuning/input.c)
mpiar_fuzz_target(settings fuzz_settings.c)
# fuzz_engine: the engine without its MPI transport, on the threads transport of tests/engine,
# with every source of the algorithms, schedule and engine layers (so that a file added to one of
# them needs no change here) and the portable reduction kernels.
set(_root "${CMAKE_CURRENT_LIST_DIR}/../..")
file(GLOB _engine_sources RELATIVE "${_root}" "${_root}/src/engine/*.c" "${_root}/src/algorithms/*.c"
     "${_root}/src/schedule/*.c")
list(REMOVE_ITEM _engine_sources src/engine/transport_mpi.c)
list(SORT _engine_sources)
# fuzz_tuning: the tuning file reader with the registry it names algorithms from (every source of
# the algorithms and schedule layers, as above).
file(GLOB _registry_sources RELATIVE "${_root}" "${_root}/src/algorithms/*.c"
     "${_root}/src/schedule/*.c")
list(SORT _registry_sources)
mpiar_fuzz_target(tuning fuzz_tuning.c src/tuning/tuning.c src/tuning/input.c ${_registry_sources})
mpiar_fuzz_target(engine fuzz_engine.c tests/engine/transport_threads.c ${_engine_sources} src/reduce_kernels/reference.c src/reduce_kernels/dispatch.c src/reduce_kernels/local.c src/reduce_kernels/canonical.c)
mpiar_fuzz_target(schedule_file fuzz_schedule_file.c src/schedule/schedfile.c src/schedule/schedule.c src/schedule/topology.c)
