/*
 * What tests and tools read of the core, through functions: the process's counters, a context's
 * wait policy and node map, its plans, a request's state, and the few limits a test lowers. Files
 * outside the core include this header, never core/context.h, so that they do not depend on the
 * layout of the core's structures.
 *
 * A call that names a communicator enters its context (mpiar__context_enter: created on first
 * use, collective then) and leaves it before returning; it fails as entering fails.
 */
#ifndef MPIAR_INSPECT_H
#define MPIAR_INSPECT_H

#include <stddef.h>

#include <mpi.h>

#include "mpiar.h"

struct mpiar__algorithm;
struct mpiar__fingerprint;
struct mpiar__topology;
struct mpiar__tuning;

/* ---- Counters of the process ---- */

/* Plans built so far (a cache hit builds none). */
size_t mpiar__inspect_plans_built(void);
/* Count @p n more plans as built, as if other threads had built them meanwhile. */
void mpiar__inspect_add_plans_built(size_t n);
/* Requests allocated so far, and those allocated and not yet freed. */
size_t mpiar__inspect_requests_allocated(void);
long mpiar__inspect_requests_live(void);
/* Contexts not yet released. */
int mpiar__inspect_live_contexts(void);

/* ---- Limits a test lowers (each returns the value it replaces) ---- */

/* Plans kept per context; the least recently used ones beyond it are evicted. */
int mpiar__inspect_set_plan_cache_max(int max);
/* The largest message in bytes; a plan keeps the value it was built with. */
size_t mpiar__inspect_set_max_message_bytes(size_t bytes);

/* ---- A context ---- */

typedef struct mpiar__inspect_context {
  int yield;       /* 1: waiting ranks give their core away after a short spin */
  int node_cpus;   /* CPUs the ranks of this node may use together */
  int local_ranks; /* ranks of the communicator on this node */
  int nnodes;      /* nodes of the communicator (at least 1) */
  int nplans;      /* plans in its cache */
  char transport[16]; /* its engine's transport: "mpi" or "node" */
} mpiar__inspect_context_t;

int mpiar__inspect_context(MPI_Comm comm, mpiar__inspect_context_t *out);

/* 1 if this thread has the context of @p comm cached (no MPI call, no creation), else 0. */
int mpiar__inspect_context_cached(MPI_Comm comm);

/* The node of each of the @p n ranks of @p comm (n: its size), as the context numbers them. */
int mpiar__inspect_node_of(MPI_Comm comm, int *node_of, int n);

/* Set the wait policy of the context of @p comm (1: yield, 0: spin). */
int mpiar__inspect_set_yield(MPI_Comm comm, int yield);

/* ---- Plans ---- */

typedef enum mpiar__inspect_which {
  MPIAR__INSPECT_RECENT = 0, /* the most recently used plan of the cache */
  MPIAR__INSPECT_LAST_CALL   /* the plan of the last call without an algorithm name */
} mpiar__inspect_which_t;

typedef struct mpiar__inspect_plan {
  const void *id; /* the plan's identity, only to compare; NULL: there is none */
  char name[64];  /* its algorithm */
  size_t count;   /* elements */
  size_t segment_elems;
  size_t nsteps; /* steps of its schedule */
  int kept;      /* 1: the request a blocking call kept for the next like call runs this plan */
} mpiar__inspect_plan_t;

/* A plan of the context of @p comm (@p which: mpiar__inspect_which_t); out->id is NULL if none. */
int mpiar__inspect_plan(MPI_Comm comm, int which, mpiar__inspect_plan_t *out);

/*
 * Look up (or build) in the cache of the context this thread has cached for @p comm
 * (MPIAR_ERR_COMM if none) the in-place allreduce plan of registry entry @p alg for @p count
 * elements of @p elem_size bytes (one segment per block where the entry is segmented);
 * *built says whether this lookup built it.
 */
int mpiar__inspect_plan_lookup(MPI_Comm comm, int alg, size_t count, size_t elem_size, int *built);

/* ---- Requests ---- */

typedef struct mpiar__inspect_request {
  int active; /* started and not finished */
  int check;  /* runs the argument check */
} mpiar__inspect_request_t;

/* The request a live handle names; MPIAR_ERR_INVALID_ARG for a null, stale or made-up one. */
int mpiar__inspect_request(mpiar_request_t h, mpiar__inspect_request_t *out);

/* ---- What the tools ask of the selector ---- */

/* This process's machine (MPI library, CPU model, kernel level). */
void mpiar__inspect_fingerprint(struct mpiar__fingerprint *fp);

/*
 * The cost model's choice for @p bytes of @p dtype on @p nranks ranks (topology @p topo, NULL:
 * flat), with the parameters fitted in @p fitted (NULL: the built-in ones), whatever the settings
 * and the table.
 */
int mpiar__inspect_model_choice(const struct mpiar__tuning *fitted, size_t bytes,
                                mpiar_dtype_t dtype, int nranks,
                                const struct mpiar__topology *topo,
                                const struct mpiar__algorithm **alg, size_t *segment_bytes);

#endif /* MPIAR_INSPECT_H */
