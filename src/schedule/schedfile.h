/*
 * Schedule files: one collective's schedule for every rank of a fixed rank count, written over
 * chunks of the vector instead of element offsets (docs/schedules.md has the format).
 *
 * The vector of `count` elements is cut into C equal chunks (the file's `chunks`), so a file
 * serves every count that is a multiple of C: chunk c covers elements [c k, (c + 1) k) with
 * k = count / C, scratch chunk c the same range of the scratch buffer, which holds S chunks (the
 * file's `scratch`). A count that is not a multiple of C is refused by name.
 *
 * This module parses the text (strictly: every problem is reported with the file's name, the
 * line and the field), instantiates one rank's steps for a count into a schedule, writes the
 * steps of built schedules back as text (the exporter), and hashes the content. It reads no file:
 * the caller hands it the bytes (src/tuning/input.c opens user-named files).
 */
#ifndef MPIAR_SCHEDULE_SCHEDFILE_H
#define MPIAR_SCHEDULE_SCHEDFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "schedule/schedule.h"

#define MPIAR__SCHEDFILE_VERSION 1
/* Bounds of what a file may declare (a larger file is refused before its memory is taken). */
#define MPIAR__SCHEDFILE_MAX_BYTES ((size_t)64 << 20) /* the text */
#define MPIAR__SCHEDFILE_MAX_RANKS 4096
#define MPIAR__SCHEDFILE_MAX_CHUNKS ((uint32_t)1 << 20) /* chunks, and scratch chunks */
#define MPIAR__SCHEDFILE_MAX_STEPS ((size_t)1 << 22)    /* all ranks together */
#define MPIAR__SCHEDFILE_MAX_DEPS 256                   /* of one step */
#define MPIAR__SCHEDFILE_MAX_LINE 4096                  /* bytes of one line */

enum { MPIAR__SCHEDFILE_ALLREDUCE = 0 };

/* inplace: which calls the file serves. */
enum {
  MPIAR__SCHEDFILE_INPLACE_NO = 0,  /* out-of-place calls only */
  MPIAR__SCHEDFILE_INPLACE_YES = 1, /* both */
  MPIAR__SCHEDFILE_INPLACE_ONLY = 2 /* in-place calls only */
};

/* order: the reduction order the file guarantees. */
enum { MPIAR__SCHEDFILE_ORDER_NONE = 0, MPIAR__SCHEDFILE_ORDER_CANONICAL = 1 };

/* One step over chunks (buffers are mpiar__buf_t). */
typedef struct mpiar__sfstep {
  uint8_t kind; /* mpiar__step_kind_t */
  uint8_t final;
  uint8_t dbuf, abuf, bbuf;
  int peer, tag;
  uint32_t dchunk, achunk, bchunk; /* first chunk of each operand */
  uint32_t nchunks;                /* length, in chunks */
  uint32_t dep_first, ndeps;       /* into deps[]: indices of earlier steps of the same rank */
} mpiar__sfstep_t;

typedef struct mpiar__schedfile {
  char name[72]; /* the file's `name`, or "" */
  int collective;
  int nranks;
  uint32_t chunks, scratch;
  int inplace, order;
  int has_final; /* some REDUCE is marked final */
  uint64_t hash; /* of the whole text (mpiar__schedfile_hash) */
  size_t *rank_first; /* nranks + 1 entries: rank r's steps are [rank_first[r], rank_first[r+1]) */
  mpiar__sfstep_t *steps;
  size_t nsteps;
  uint32_t *deps;
  size_t ndeps;
} mpiar__schedfile_t;

/* 64-bit FNV-1a of @p len bytes: the content hash ranks agree on. */
uint64_t mpiar__schedfile_hash(const void *data, size_t len);

/*
 * Parse @p len bytes of text named @p what (a path, for messages) into @p f (zeroed first).
 * @return MPIAR_SUCCESS, or MPIAR_ERR_INVALID_ARG with "WHAT:LINE: what is wrong" in @p err
 * (MPIAR_ERR_NOMEM: "WHAT: ..."). On failure @p f holds nothing to free.
 */
int mpiar__schedfile_parse(const char *what, const char *text, size_t len, mpiar__schedfile_t *f,
                           char *err, size_t errlen);

void mpiar__schedfile_free(mpiar__schedfile_t *f);

/*
 * Can @p f serve a call on @p nranks ranks of @p count elements, in place or not? @return 1, or
 * 0 with the reason in @p why ("count 6 is not a multiple of the file's 4 chunks").
 */
int mpiar__schedfile_fits(const mpiar__schedfile_t *f, int nranks, size_t count, int in_place,
                          char *why, size_t len);

/*
 * Append rank s->rank's steps for s->count elements to the initialised, empty schedule @p s and
 * set its scratch. @return MPIAR_SUCCESS, MPIAR_ERR_INVALID_ARG when the file does not fit
 * (mpiar__schedfile_fits, in the error detail), or an append's error.
 */
int mpiar__schedfile_instantiate(const mpiar__schedfile_t *f, mpiar__schedule_t *s);

/*
 * Write @p nranks built schedules of one allreduce (scheds[r] is rank r's, all for the same count
 * and in-place mode) as a file: the chunk is the largest element count dividing the count and
 * every offset, length and the scratch of every step, so the file reproduces these schedules
 * step for step at this count and scales them to every multiple of its chunks. @p order is
 * MPIAR__SCHEDFILE_ORDER_*. @return MPIAR_SUCCESS or MPIAR_ERR_INVALID_ARG (count 0, a broadcast)
 * with the reason in @p err.
 */
int mpiar__schedfile_write(FILE *out, const char *name, const mpiar__schedule_t *scheds,
                           int nranks, int order, char *err, size_t errlen);

#endif /* MPIAR_SCHEDULE_SCHEDFILE_H */
