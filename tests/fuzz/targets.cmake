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
mpiar_fuzz_target(tuning fuzz_tuning.c src/tuning/tuning.c src/tuning/input.c src/algorithms/registry.c src/algorithms/ring.c src/algorithms/rabenseifner.c src/algorithms/recursive_doubling.c src/algorithms/bcast.c src/algorithms/util.c src/algorithms/repro_direct.c src/algorithms/repro_rabenseifner.c src/algorithms/repro_halving.c src/algorithms/reproducible.c src/algorithms/cost.c src/algorithms/hier.c src/algorithms/hier_ring.c src/algorithms/hier_rabenseifner.c src/algorithms/hier_recursive_doubling.c src/algorithms/swing.c src/algorithms/recursive_multiplying.c src/algorithms/radix_rabenseifner.c src/algorithms/tree.c src/algorithms/knomial_tree.c src/algorithms/kary_tree.c src/algorithms/double_binary_tree.c src/algorithms/direct.c src/algorithms/torus_2d.c src/algorithms/swing_md.c src/algorithms/reduce_scatter.c src/algorithms/allgather.c src/schedule/schedule.c src/schedule/topology.c)
# fuzz_engine: the engine without its MPI transport, on the threads transport of tests/engine,
# with every source of the algorithms, schedule and engine layers (so that a file added to one of
# them needs no change here) and the portable reduction kernels.
set(_root "${CMAKE_CURRENT_LIST_DIR}/../..")
file(GLOB _engine_sources RELATIVE "${_root}" "${_root}/src/engine/*.c" "${_root}/src/algorithms/*.c"
     "${_root}/src/schedule/*.c")
list(REMOVE_ITEM _engine_sources src/engine/transport_mpi.c)
list(SORT _engine_sources)
mpiar_fuzz_target(engine fuzz_engine.c tests/engine/transport_threads.c ${_engine_sources} src/reduce_kernels/reference.c src/reduce_kernels/dispatch.c src/reduce_kernels/local.c src/reduce_kernels/canonical.c)
mpiar_fuzz_target(schedule_file fuzz_schedule_file.c src/schedule/schedfile.c src/schedule/schedule.c src/schedule/topology.c)
