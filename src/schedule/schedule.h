/*
 * Schedules as data: the list of steps one rank performs for one collective, independent of
 * buffer addresses, so that it can be cached, printed, simulated and executed.
 *
 * Builders (src/algorithms) only append steps; the MPI executor (src/core) and the simulator
 * (src/sim) are the only code that runs them.
 */
#ifndef MPIAR_SCHEDULE_H
#define MPIAR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "schedule/topology.h"

/* Logical buffers. In an in-place call INPUT and OUTPUT are the same memory. */
typedef enum mpiar__buf {
  MPIAR__BUF_INPUT = 0,
  MPIAR__BUF_OUTPUT,
  MPIAR__BUF_SCRATCH,
  MPIAR__BUF_COUNT
} mpiar__buf_t;

typedef enum mpiar__step_kind {
  MPIAR__STEP_SEND = 0, /* send `count` elements of `a` to `peer` with `tag` */
  MPIAR__STEP_RECV,     /* receive `count` elements into `dst` from `peer` with `tag` */
  MPIAR__STEP_REDUCE,   /* dst = a op b over `count` elements (dst may equal a or b) */
  MPIAR__STEP_COPY      /* dst = a over `count` elements */
} mpiar__step_kind_t;

/* A place in a logical buffer, in elements. */
typedef struct mpiar__operand {
  uint8_t buf; /* mpiar__buf_t */
  size_t off;  /* element offset */
} mpiar__operand_t;

typedef struct mpiar__step {
  uint8_t kind;         /* mpiar__step_kind_t */
  int peer;             /* SEND/RECV: the other rank; -1 otherwise */
  int tag;              /* SEND/RECV: 0 <= tag < MPIAR__TAG_LIMIT */
  size_t count;         /* elements */
  mpiar__operand_t dst; /* RECV, REDUCE, COPY */
  mpiar__operand_t a;   /* SEND (source), REDUCE (first operand), COPY (source) */
  mpiar__operand_t b;   /* REDUCE (second operand) */
  uint32_t dep_first;   /* index of this step's first dependency in schedule.deps */
  uint32_t ndeps;       /* number of dependencies (each an earlier step index) */
  uint8_t final;        /* REDUCE: its result is the complete reduction of those elements */
} mpiar__step_t;

/*
 * Step tags are below 2^10: the MPI executor puts an operation slot and the message length in the
 * higher bits of the MPI tag (src/core/context.h). Messages between one ordered pair of ranks
 * with the same tag match in posting order on both sides, so a builder may reuse tags only where
 * the order of those messages is fixed by dependencies.
 */
#define MPIAR__TAG_LIMIT 1024

typedef struct mpiar__schedule {
  int rank;              /* this rank */
  int nranks;            /* communicator size */
  size_t count;          /* elements of the whole vector */
  size_t elem_size;      /* bytes per element */
  int in_place;          /* 1: INPUT and OUTPUT are the same memory */
  int root;              /* broadcast schedules: the root rank; -1 for allreduce */
  const char *algorithm; /* static name of the builder */
  size_t segment_elems;  /* pipelining segment (0 = none) */
  size_t scratch_elems;  /* scratch the steps use, computed by the builder */
  size_t max_steps;      /* 0: no limit but the 32-bit indices; else appends beyond fail */
  /*
   * The communicator's node structure, set after mpiar__schedule_init() like `root` (NULL: flat,
   * one level). Owned by the caller and immutable while the schedule lives; only hierarchical
   * builders read it, and one topology serves every schedule of a communicator.
   */
  const mpiar__topology_t *topo;
  /*
   * Elements of INPUT and OUTPUT: both `count` (allreduce, broadcast) unless the builder sets
   * them. Reduce-scatter and allgather, whose `count` is one rank's block, set them to the
   * shapes of mpiar__shape_reduce_scatter() / mpiar__shape_allgather() (src/algorithms).
   */
  size_t in_elems, out_elems;

  mpiar__step_t *steps;
  size_t nsteps, steps_cap;
  uint32_t *deps; /* dependency lists, concatenated */
  size_t ndeps, deps_cap;

  /* Filled by mpiar__schedule_finalize(): successor lists (CSR) for the executors. */
  uint32_t *succ_first; /* nsteps + 1 entries */
  uint32_t *succ;       /* ndeps entries */
} mpiar__schedule_t;

/* Start an empty schedule (no allocation yet). */
void mpiar__schedule_init(mpiar__schedule_t *s, int rank, int nranks, size_t count,
                          size_t elem_size, int in_place, const char *algorithm,
                          size_t segment_elems);

/* Free everything the schedule owns and leave it empty. */
void mpiar__schedule_destroy(mpiar__schedule_t *s);

/* Operand constructors. */
static inline mpiar__operand_t mpiar__in(size_t off) {
  mpiar__operand_t o = {MPIAR__BUF_INPUT, off};
  return o;
}
static inline mpiar__operand_t mpiar__out(size_t off) {
  mpiar__operand_t o = {MPIAR__BUF_OUTPUT, off};
  return o;
}
static inline mpiar__operand_t mpiar__scratch(size_t off) {
  mpiar__operand_t o = {MPIAR__BUF_SCRATCH, off};
  return o;
}

/*
 * Append steps. Each returns the new step's index (>= 0) or a negative MPIAR_ERR_* code
 * (MPIAR_ERR_NOMEM, or MPIAR_ERR_INTERNAL for a dependency that is not an earlier step).
 * `deps` lists `ndeps` earlier step indices (negative entries are ignored, so "no previous step"
 * can be passed as -1).
 */
long mpiar__sched_send(mpiar__schedule_t *s, int peer, int tag, mpiar__operand_t src, size_t count,
                       const long *deps, size_t ndeps);
long mpiar__sched_recv(mpiar__schedule_t *s, int peer, int tag, mpiar__operand_t dst, size_t count,
                       const long *deps, size_t ndeps);
long mpiar__sched_reduce(mpiar__schedule_t *s, mpiar__operand_t dst, mpiar__operand_t a,
                         mpiar__operand_t b, size_t count, const long *deps, size_t ndeps);
long mpiar__sched_copy(mpiar__schedule_t *s, mpiar__operand_t dst, mpiar__operand_t src,
                       size_t count, const long *deps, size_t ndeps);

/*
 * Mark a REDUCE step as final: its result is the reduction over all ranks of those elements, and
 * no other REDUCE of this rank writes them afterwards. Executors divide there for MPIAR_AVG, so
 * each element is divided once, by the rank that finished it (n/p elements per rank in ring and
 * Rabenseifner, instead of n). @return MPIAR_SUCCESS or MPIAR_ERR_INTERNAL for a non-REDUCE step.
 */
int mpiar__sched_mark_final(mpiar__schedule_t *s, long step);

/* Compute successor lists; call once after the builder. @return MPIAR_SUCCESS or MPIAR_ERR_NOMEM.
 */
int mpiar__schedule_finalize(mpiar__schedule_t *s);

/* Totals of one rank's schedule. */
typedef struct mpiar__schedule_totals {
  size_t messages_sent, messages_received;
  size_t bytes_sent, bytes_received;
  size_t bytes_reduced; /* bytes of output written by REDUCE steps */
  size_t bytes_copied;
  size_t scratch_bytes;
  size_t steps;
} mpiar__schedule_totals_t;

void mpiar__schedule_totals(const mpiar__schedule_t *s, mpiar__schedule_totals_t *t);

/* Print one line per step (stable text, used by golden tests) to @p out. */
void mpiar__schedule_print(const mpiar__schedule_t *s, FILE *out);

#endif /* MPIAR_SCHEDULE_H */
