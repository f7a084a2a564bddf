/*
 * Tuning files: what mpiar-tune measured on a machine, read back by the library's selector.
 *
 * A tuning file is a JSON document (format "mpiar-tuning", version 1, docs/tuning.md) that holds
 * the communicator it was measured on (ranks, nodes, ranks per node), the cost model's parameters
 * fitted there (alpha and beta per level, gamma per element type), a fingerprint of the machine
 * (MPI library, CPU model, kernel level), and per element type a table of message-size ranges,
 * each with the algorithm and segment size that measured fastest.
 *
 * This layer parses, validates and writes the format; it needs no MPI. The core decides per
 * communicator whether the table applies (same ranks, nodes and ranks per node, same machine)
 * or whether only the fitted parameters drive the model (src/core/select.c).
 *
 * Parsing uses libjansson where the build found it (MPIAR_HAVE_JANSSON); a build without it
 * refuses every file with an error that says so, never ignoring one.
 */
#ifndef MPIAR_TUNING_H
#define MPIAR_TUNING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "base/settings.h"

/* The format's name and the one version this library reads and writes. */
#define MPIAR__TUNING_FORMAT "mpiar-tuning"
#define MPIAR__TUNING_VERSION 1

/* Limits that keep a loaded file in fixed-size memory (a table has one range per winner). */
#define MPIAR__TUNING_MAX_RANGES 128
#define MPIAR__TUNING_MAX_BYTES ((size_t)16 << 20) /* largest file read */

/* The upper bound of a range that has none ("max_bytes": null). */
#define MPIAR__TUNING_UNBOUNDED SIZE_MAX

/*
 * Segment sizes mpiar-tune tries for every segmented algorithm (besides no segmentation), and
 * the bench's default segmented columns: the same space, so that the bench's best column is the
 * best that tuning could have picked.
 */
extern const size_t mpiar__tuning_segments[];
extern const int mpiar__tuning_nsegments;

/* A machine, as far as the choice of algorithms depends on it. */
typedef struct mpiar__fingerprint {
  char mpi_library[160]; /* first line of MPI_Get_library_version(), blanks collapsed */
  char cpu[128];         /* the CPU model ("model name" of /proc/cpuinfo) */
  char kernel_level[16]; /* reduction kernels: reference, avx2 or avx512 */
} mpiar__fingerprint_t;

/* One size range of a table: sizes min_bytes..max_bytes (inclusive) run alg with segment. */
typedef struct mpiar__tuning_range {
  size_t min_bytes;
  size_t max_bytes;              /* MPIAR__TUNING_UNBOUNDED: no upper bound */
  const mpiar__algorithm_t *alg; /* a registry entry */
  size_t segment_bytes;          /* 0: none; only for segmented algorithms */
} mpiar__tuning_range_t;

/* The table of one element type: ranges sorted by size, disjoint (gaps fall to the model). */
typedef struct mpiar__tuning_table {
  mpiar_dtype_t dtype;
  int nranges;
  mpiar__tuning_range_t ranges[MPIAR__TUNING_MAX_RANGES];
} mpiar__tuning_table_t;

typedef struct mpiar__tuning {
  char source[256]; /* the file's name, for messages */
  int version;
  char created[64];       /* UTC, ISO 8601, as written */
  char mpiar_version[32]; /* of the mpiar-tune that wrote it */
  mpiar__fingerprint_t fingerprint;
  /* The communicator measured: ranks, nodes, and the ranks of its largest node. */
  int ranks, nodes, ranks_per_node;
  /* Fitted cost model. The inter-node terms are NaN when the run had one node. */
  double alpha, beta;
  double alpha_inter, beta_inter;
  double gamma[MPIAR__DTYPE_COUNT]; /* seconds per byte reduced; NaN: not measured (float32's) */
  int ntables;
  mpiar__tuning_table_t tables[MPIAR__DTYPE_COUNT];
  uint64_t hash; /* FNV-1a of the file's bytes: ranks agree on it */
} mpiar__tuning_t;

/*
 * Parse @p len bytes of @p text (a whole tuning file; need not be NUL-terminated) into @p out.
 * @p source names it in messages. @return MPIAR_SUCCESS, or MPIAR_ERR_ENV with a detail that
 * names MPIAR_TUNING_FILE and @p source, then the line and column (syntax) or the field (e.g.
 * "tables[0].ranges[2].algorithm") and what is wrong with it. Never reads beyond @p len.
 */
int mpiar__tuning_parse(const char *text, size_t len, const char *source, mpiar__tuning_t *out);

/*
 * Read the file @p path and parse it (errors as mpiar__tuning_parse(), also for I/O). Only a
 * regular file is read: a directory, FIFO, device or socket is refused without blocking
 * (tuning/input.h), and a file larger than MPIAR__TUNING_MAX_BYTES is refused by its size, unread.
 */
int mpiar__tuning_load(const char *path, mpiar__tuning_t *out);

/*
 * mpiar__tuning_load() for a file that a tool's option names: every message starts with
 * "SETTING=PATH: " (e.g. "--tuning-file=t.json: cannot open it: ...") instead of
 * "MPIAR_TUNING_FILE=PATH: ".
 */
int mpiar__tuning_load_as(const char *path, const char *setting, mpiar__tuning_t *out);

/*
 * Write @p t as a version-1 tuning file to @p f (no JSON library needed), with the optional
 * @p measurements text (a JSON object written as the "measurements" member, which the loader
 * ignores; NULL: none). @return 0, or -1 if writing failed.
 */
int mpiar__tuning_write(const mpiar__tuning_t *t, const char *measurements, FILE *f);

/* Empty tuning: no tables, NaN parameters. */
void mpiar__tuning_init(mpiar__tuning_t *t);

/* @return the range of @p dtype's table holding @p bytes, or NULL (no table, or a gap). */
const mpiar__tuning_range_t *mpiar__tuning_lookup(const mpiar__tuning_t *t, mpiar_dtype_t dtype,
                                                  size_t bytes);

/* The fitted parameters for reductions of @p dtype (float32's gamma where @p dtype has none). */
void mpiar__tuning_params(const mpiar__tuning_t *t, mpiar_dtype_t dtype, mpiar__cost_params_t *out);

/*
 * Whether the table was measured on a communicator like this one and on this machine. @return 1,
 * or 0 with the first difference in @p why ("the file was measured on 4 ranks, this communicator
 * has 2").
 */
int mpiar__tuning_applies(const mpiar__tuning_t *t, int ranks, int nodes, int ranks_per_node,
                          const mpiar__fingerprint_t *here, char *why, size_t whylen);

/*
 * The process's tuning file, @p path (from MPIAR_TUNING_FILE; "" = none), loaded on first use
 * and kept: *out is NULL when there is none. Every later call returns the same result, so a bad
 * file makes every call fail alike. A different @p path (tests reload settings) loads again.
 * @return MPIAR_SUCCESS or the load's error.
 */
int mpiar__tuning_get(const char *path, const mpiar__tuning_t **out);

/* 1 if this build reads tuning files (libjansson), else 0. */
int mpiar__tuning_supported(void);

#endif /* MPIAR_TUNING_H */
