# The fuzz targets, one line each:
#   mpiar_fuzz_target(NAME SOURCE [LIBRARY SOURCES...])
# SOURCE is the target's file in tests/fuzz/ (it defines LLVMFuzzerTestOneInput); the library
# sources it needs are paths from the repository root (src/base/errors.c, settings.c and types.c are
# always added). Its seed corpus is tests/fuzz/corpus/NAME/. Both the project (which registers a
# CTest test per target, label fuzz) and the clang build in clang/ (which builds them) read this
# file, each with its own mpiar_fuzz_target().
mpiar_fuzz_target(parse_size fuzz_parse_size.c)
mpiar_fuzz_target(ckpt_read fuzz_ckpt_read.c src/kvstore/ckpt.c src/kvstore/table.c src/kvstore/crc32c.c)
mpiar_fuzz_target(settings fuzz_settings.c)
