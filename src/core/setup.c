/*
 * What a new context does with its ranks once its private duplicate exists: the engine over the
 * MPI transport, the settings agreement (one row per rank: node key, whether the rank's settings
 * could be used, the settings that shape messages, the tuning file's key), the node map and the
 * node's CPUs (nodes.c), the selector, the kernel threads and the wait policy. Everything here
 * runs on the context's own allreduce (mpiar__context_allreduce), bounded by the creation's
 * deadline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "engine/transport_mpi.h"
#include "engine/transport_node.h"
#include "reduce_kernels/kernels.h"

/* The engine over an MPI transport on the private duplicate (errors returned, never fatal). */
int mpiar__context_engine_open(mpiar__context_t *ctx) {
  /* Library errors are returned as codes, never turned into an abort by MPI. */
  MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(ctx->comm, &rank);
  MPI_Comm_size(ctx->comm, &size);
  void *txs = NULL;
  long tag_ub = 0;
  if (mpiar__transport_mpi_open(ctx->comm, &txs, &tag_ub) != MPIAR_SUCCESS) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a communicator context");
  }
  ctx->eng.check_describe = mpiar__check_describe;
  return mpiar__engine_init(&ctx->eng, &mpiar__transport_mpi, txs, rank, size, tag_ub);
}

/*
 * The context's own allreduce (its creation: the settings agreement, the node map, the CPU
 * masks): the engine runs it like any request, on a plan the built-in model chose (no tuning
 * file is agreed on yet, and every rank must choose alike).
 */
int mpiar__context_allreduce(mpiar__context_t *ctx, void *buf, size_t count, mpiar_dtype_t dtype,
                             mpiar_op_t op, long timeout_ms) {
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  size_t es = mpiar_dtype_size(dtype);
  mpiar__settings_t automatic = *set;
  automatic.algorithm[0] = '\0';
  automatic.segment_bytes = 0;
  mpiar__choice_t choice;
  int rc =
      mpiar__select(&automatic, NULL, NULL, 0, count * es, dtype, ctx->eng.size, NULL, 0, &choice);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *alg = choice.alg;
  mpiar__plan_key_t key = {.coll = MPIAR__COLL_ALLREDUCE,
                           .count = count,
                           .elem_size = es,
                           .builder = alg,
                           .segment_elems = 0,
                           .in_place = 1,
                           .root = -1};
  mpiar__plan_t *plan = NULL;
  if ((rc = mpiar__plan_get(ctx, &key, alg->name, alg->build, &plan, NULL)) != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__request_t *r = NULL;
  if ((rc = mpiar__request_new(ctx, plan, &r)) != MPIAR_SUCCESS) {
    return rc;
  }
  r->dtype = dtype;
  r->kop = op;
  /* A spare request of this plan may come from a user's call (after creation: mpiar_alloc's
   * agreement): what that call set and this one does not use is reset. */
  r->average = 0;
  r->check = 0;
  r->in = r->out = buf;
  r->base[MPIAR__BUF_INPUT] = r->base[MPIAR__BUF_OUTPUT] = buf;
  r->base[MPIAR__BUF_SCRATCH] = r->scratch;
  r->timeout_ms = timeout_ms;
  ctx->refs++;
  if ((rc = mpiar__request_start(r)) != MPIAR_SUCCESS) {
    mpiar__request_release(r);
  } else {
    rc = mpiar__wait_one(r);
  }
  ctx->refs--;
  return rc;
}

/*
 * What every rank of a communicator must hold alike, one row per rank: the settings that shape
 * the messages of a collective (another algorithm, segment, reproducible order, argument check or
 * topology on one rank makes it send what the others do not expect, and the call would wait
 * forever), and whether the rank's settings could be used at all (a rank whose settings are
 * malformed still takes part, so that the others fail with it instead of waiting for it).
 */
enum {
  ROW_NODE = 0,  /* node key (never 0) */
  ROW_FAULT,     /* mpiar__settings_fault(): 0, or which variable is bad there */
  ROW_ALGORITHM, /* agreed fields from here on, in the order they are reported */
  ROW_SEGMENT,
  ROW_REPRODUCIBLE,
  ROW_CHECK,
  ROW_TOPOLOGY,
  ROW_TRANSPORT,
  ROW_WORDS
};
static const char *const row_names[ROW_WORDS] = {NULL,
                                                 NULL,
                                                 "MPIAR_ALGORITHM",
                                                 "MPIAR_SEGMENT_BYTES",
                                                 "MPIAR_REPRODUCIBLE",
                                                 "MPIAR_CHECK",
                                                 "MPIAR_TOPOLOGY",
                                                 "MPIAR_TRANSPORT"};

/* This rank's row (see ROW_*). */
static void settings_row(const mpiar__settings_t *set, int fault, uint64_t *row) {
  row[ROW_FAULT] = (uint64_t)fault;
  row[ROW_ALGORITHM] = set->algorithm[0] != '\0' ? mpiar__text_hash(set->algorithm) : 0;
  row[ROW_SEGMENT] = set->segment_bytes;
  row[ROW_REPRODUCIBLE] = (uint64_t)set->reproducible;
  row[ROW_CHECK] = (uint64_t)set->check;
  row[ROW_TOPOLOGY] = (uint64_t)set->topology_flat;
  row[ROW_TRANSPORT] = (uint64_t)set->transport_mpi;
}

/* The verdict on every rank's row, the same on every rank: a rank whose settings could not be
 * used, then the first field on which two ranks differ. */
static int settings_verdict(const mpiar__context_t *ctx, const uint64_t *rows,
                            const mpiar__settings_t *set) {
  for (int r = 0; r < ctx->eng.size; r++) {
    uint64_t fault = rows[(size_t)r * ROW_WORDS + ROW_FAULT];
    if (fault != 0) {
      const char *name = fault <= 64 ? mpiar__settings_names[fault - 1] : "a setting";
      return mpiar__error(MPIAR_ERR_ENV,
                          "rank %d of %d cannot use its settings (%s is malformed there, or names "
                          "what cannot be used): every rank's first call on the communicator "
                          "fails",
                          r, ctx->eng.size, name != NULL ? name : "a setting");
    }
  }
  for (int f = ROW_ALGORITHM; f < ROW_WORDS; f++) {
    uint64_t first = rows[f];
    for (int r = 1; r < ctx->eng.size; r++) {
      uint64_t v = rows[(size_t)r * ROW_WORDS + f];
      if (v == first) {
        continue;
      }
      if (f == ROW_ALGORITHM) {
        return mpiar__error(MPIAR_ERR_MISMATCH,
                            "MPIAR_ALGORITHM differs between ranks 0 and %d (here, rank %d: "
                            "'%s'): every rank must run with the same settings",
                            r, ctx->eng.rank, set->algorithm[0] ? set->algorithm : "auto");
      }
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "%s differs between ranks: rank 0 has %llu and rank %d has %llu (every "
                          "rank must run with the same settings)",
                          row_names[f], (unsigned long long)first, r, (unsigned long long)v);
    }
  }
  return MPIAR_SUCCESS;
}

/*
 * Every rank's row (an allreduce of one row per rank: the maximum of the owner's values and the
 * others' zeros), then the settings verdict and this rank's node size. Two more words carry the
 * selector key (mpiar__selector_key(): the tuning file and the machine) and its complement, so
 * that after the maximum every rank knows whether all of them hold the same one (*agreed), and
 * their table decisions agree.
 */
static int agree(mpiar__context_t *ctx, long timeout_ms, const mpiar__settings_t *set, int fault,
                 uint64_t selector_key, int *agreed) {
  ctx->local_ranks = 1;
  *agreed = 1;
  size_t words = (size_t)ctx->eng.size * ROW_WORDS;
  uint64_t *rows = calloc(words + 2, sizeof *rows);
  ctx->node_of = ctx->eng.size > 1 ? calloc((size_t)ctx->eng.size, sizeof *ctx->node_of) : NULL;
  if (rows == NULL || (ctx->eng.size > 1 && ctx->node_of == NULL)) {
    free(rows);
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate the node map of %d ranks", ctx->eng.size);
  }
  uint64_t *mine = rows + (size_t)ctx->eng.rank * ROW_WORDS;
  mine[ROW_NODE] = mpiar__node_key();
  settings_row(set, fault, mine);
  rows[words] = selector_key;
  rows[words + 1] = ~selector_key;
  int rc = ctx->eng.size > 1
               ? mpiar__context_allreduce(ctx, rows, words + 2, MPIAR_UINT64, MPIAR_MAX, timeout_ms)
               : MPIAR_SUCCESS;
  if (rc == MPIAR_SUCCESS) {
    rc = settings_verdict(ctx, rows, set);
  }
  if (rc == MPIAR_SUCCESS && ctx->eng.size > 1) {
    *agreed = rows[words] == selector_key && rows[words + 1] == ~selector_key;
    mpiar__node_map(ctx, rows, ROW_WORDS);
  }
  free(rows);
  return rc;
}

/* ---- the node transport (engine/transport_node.h) ---- */

/* The segments the node transport's rings live in: this rank's and its node's other ranks'. */
typedef struct node_maps {
  int n;
  mpiar__node_segment_t seg[];
} node_maps_t;

static void node_maps_free(void *arg) {
  node_maps_t *m = arg;
  for (int i = 0; i < m->n; i++) {
    mpiar__node_segment_unmap(&m->seg[i]); /* (a segment never mapped has no base) */
  }
  free(m);
}

/*
 * Segments for the rings of this rank's node: each rank makes one, with a ring to each rank of
 * its node (by the order of the node's ranks), the ranks exchange the segments' numbers, map
 * those of their node and agree on whether every rank could. One allreduce of a word per rank and
 * one of a word; the rings are used by every rank or by none. *why says why not.
 */
static int node_rings(mpiar__context_t *ctx, long timeout_ms, node_maps_t **maps, int **local,
                      char *why, size_t len) {
  const int p = ctx->eng.size, me = ctx->eng.rank, node = ctx->node_of[me];
  const size_t ring = mpiar__node_ring_bytes(), bytes = ring * (size_t)ctx->local_ranks;
  int rc = MPIAR_SUCCESS;
  uint64_t *ids = calloc((size_t)p, sizeof *ids);
  int *idx = calloc((size_t)p, sizeof *idx);
  node_maps_t *m = calloc(1, sizeof *m + (size_t)ctx->local_ranks * sizeof m->seg[0]);
  if (ids == NULL || idx == NULL || m == NULL) {
    free(ids);
    free(idx);
    free(m);
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate the node transport's map of %d ranks",
                        p);
  }
  m->n = ctx->local_ranks;
  int n = 0;
  for (int r = 0; r < p; r++) {
    idx[r] = ctx->node_of[r] == node ? n++ : -1;
  }
  int err = ctx->local_ranks > 1 ? mpiar__node_segment_create(bytes, &m->seg[0]) : 0;
  if (err == 0 && ctx->local_ranks > 1) {
    ids[me] = m->seg[0].id;
  } else if (err != 0) {
    snprintf(why, len, "rank %d cannot make a %zu-byte shared memory segment: %s", me, bytes,
             strerror(err));
  }
  rc = mpiar__context_allreduce(ctx, ids, (size_t)p, MPIAR_UINT64, MPIAR_MAX, timeout_ms);
  for (int r = 0; rc == MPIAR_SUCCESS && err == 0 && r < p; r++) {
    if (r == me || idx[r] < 0) {
      continue;
    }
    mpiar__node_segment_t *seg = &m->seg[idx[r] + 1 - (idx[r] > idx[me])];
    err = ids[r] != 0 ? mpiar__node_segment_attach(ids[r], bytes, seg) : ENOENT;
    if (err != 0) {
      snprintf(why, len, "rank %d cannot map rank %d's shared memory segment: %s", me, r,
               ids[r] != 0 ? strerror(err) : "that rank has none");
    }
  }
  /* Every rank learns whether all could (the highest rank that could not is named). */
  uint64_t failed = err != 0 ? (uint64_t)me + 1 : 0;
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__context_allreduce(ctx, &failed, 1, MPIAR_UINT64, MPIAR_MAX, timeout_ms);
  }
  if (m->seg[0].base != NULL) {
    /* Mapped where it will be: the name is no longer needed (nothing is left behind). */
    mpiar__node_segment_unlink(&m->seg[0]);
  }
  if (rc == MPIAR_SUCCESS && failed != 0 && err == 0) {
    snprintf(why, len, "rank %d could not set up its rings", (int)failed - 1);
  }
  free(ids);
  if (rc != MPIAR_SUCCESS || failed != 0) {
    node_maps_free(m);
    free(idx);
    return rc;
  }
  *maps = m;
  *local = idx;
  return MPIAR_SUCCESS;
}

/*
 * The context's transport: the node transport where MPIAR_TRANSPORT is auto, some ranks share a
 * node and every rank could set up its rings, else MPI (the engine's transport so far). The rings
 * were measured faster than MPI's own path at every size they take with MPICH 4.0 and Open MPI
 * 4.1 alike (docs/performance.md), so the MPI library does not enter the choice. Every rank
 * decides alike (the setting and the node map were agreed). @p why: the reason.
 */
static int choose_transport(mpiar__context_t *ctx, const mpiar__settings_t *set, long timeout_ms,
                            char *why, size_t len) {
  mpiar__engine_t *e = &ctx->eng;
  size_t threshold = MPIAR__NODE_THRESHOLD;
  if (set->transport_mpi) {
    snprintf(why, len, "MPIAR_TRANSPORT=mpi");
    return MPIAR_SUCCESS;
  }
  if (ctx->node_of == NULL || ctx->nnodes == e->size) {
    snprintf(why, len, "no two ranks share a node");
    return MPIAR_SUCCESS;
  }
  /* From here every rank takes part in the rings' agreement (the decision to hold it is the
   * same everywhere); a rank alone on its node has no pair to use them with. */
  if (e->exact_max <= 1) {
    snprintf(why, len, "the tag bound leaves no room for exact lengths");
    return MPIAR_SUCCESS;
  }
  if (threshold >= e->exact_max) {
    threshold = e->exact_max - 1;
  }
  node_maps_t *m = NULL;
  int *idx = NULL;
  int rc = node_rings(ctx, timeout_ms, &m, &idx, why, len);
  if (rc != MPIAR_SUCCESS || m == NULL) {
    return rc;
  }
  if (ctx->local_ranks == 1) {
    node_maps_free(m);
    free(idx);
    snprintf(why, len, "no other rank on this node");
    return MPIAR_SUCCESS;
  }
  const int p = e->size, me = e->rank;
  const size_t ring = mpiar__node_ring_bytes();
  void **out = calloc((size_t)p, sizeof *out), **in = calloc((size_t)p, sizeof *in);
  const mpiar__transport_t *tx = NULL;
  void *txs = NULL;
  rc = out != NULL && in != NULL ? MPIAR_SUCCESS : MPIAR_ERR_NOMEM;
  for (int r = 0; rc == MPIAR_SUCCESS && r < p; r++) {
    if (r != me && idx[r] >= 0) {
      /* Rank s's segment holds its rings to the node's ranks, by their order on the node. */
      const mpiar__node_segment_t *peer = &m->seg[idx[r] + 1 - (idx[r] > idx[me])];
      out[r] = (char *)m->seg[0].base + (size_t)idx[r] * ring;
      in[r] = (char *)peer->base + (size_t)idx[me] * ring;
    }
  }
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__transport_node_open(e->tx, e->txs, me, p, out, in, threshold, node_maps_free, m,
                                    &tx, &txs);
  }
  free(out);
  free(in);
  free(idx);
  if (rc != MPIAR_SUCCESS) {
    node_maps_free(m);
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate the node transport of %d ranks", p);
  }
  /* The engine is idle (no message in its table): the node transport takes MPI's place, and
   * the next start sizes its table (an owner table of no capacity makes it reserve). */
  e->tx = tx;
  e->txs = txs;
  e->mcap = 0;
  snprintf(why, len, "rings with the %d other ranks of this node for messages of at most %zu bytes",
           ctx->local_ranks - 1, threshold);
  return MPIAR_SUCCESS;
}

/*
 * MPIAR_DEBUG=1: how this rank will wait and reduce on the new context, as decided (every rank
 * prints its own line: the policy depends on the node).
 */
static void report_context(const mpiar__context_t *ctx, const mpiar__settings_t *set) {
  static const char *const policy[] = {"auto", "spin", "yield"};
  int threads = mpiar__kernel_threads();
  char why[160];
  if (set->num_threads > 0) {
    snprintf(why, sizeof why, "MPIAR_NUM_THREADS=%ld, at most the %d CPUs this rank may use",
             set->num_threads, ctx->cores);
  } else {
    snprintf(why, sizeof why, "%d CPUs shared by %d ranks of the node", ctx->cores,
             ctx->local_ranks);
  }
  fprintf(stderr,
          "mpiar: rank %d of %d: %d node%s, %d ranks on this node with %d CPUs: waiting ranks "
          "%s (MPIAR_WAIT=%s); %d reduction threads (%s)\n",
          ctx->eng.rank, ctx->eng.size, ctx->nnodes > 0 ? ctx->nnodes : 1,
          ctx->nnodes > 1 ? "s" : "", ctx->local_ranks, ctx->node_cpus,
          ctx->yield ? "yield" : "spin", set->wait >= 0 && set->wait <= 2 ? policy[set->wait] : "?",
          threads, why);
}

/* Everything after the duplicate exists: tags, buffers, the settings agreement, nodes, the wait
 * policy. @p fault: mpiar__settings_fault() of this rank. */
int mpiar__context_setup(mpiar__context_t *ctx, const mpiar__settings_t *set, int fault,
                         long timeout_ms) {
  int rc = mpiar__context_engine_open(ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  ctx->cores = mpiar__usable_cpus();
  /* Until the nodes are known, assume every rank is on this node (the safe guess for waiting). */
  ctx->yield = set->wait == MPIAR__WAIT_YIELD ||
               (set->wait == MPIAR__WAIT_AUTO && ctx->eng.size > ctx->cores);
  /* The tuning file was loaded by the call that got here (mpiar__settings_checked). */
  const mpiar__tuning_t *tuning = NULL;
  mpiar__tuning_get(set->tuning_file, &tuning);
  int agreed = 1;
  rc = agree(ctx, timeout_ms, set, fault, mpiar__selector_key(tuning), &agreed);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  /* The topology the hierarchical algorithms and the selector see (MPIAR_TOPOLOGY=flat: none). */
  if (ctx->node_of != NULL && !set->topology_flat) {
    if ((rc = mpiar__topology_from_map(&ctx->topo, ctx->eng.size, ctx->node_of)) != MPIAR_SUCCESS) {
      return rc;
    }
    ctx->has_topo = 1;
  }
  mpiar__selector_init(ctx, tuning, agreed);
  /* Cores of the node shared among the ranks on it; a rank's own affinity mask counts the CPUs
   * it may use, so a pinned rank gets those and an unpinned one gets its share of the node. */
  int share = ctx->cores / (ctx->local_ranks > 0 ? ctx->local_ranks : 1);
  mpiar__kernel_set_default_threads(share > 0 ? share : 1);
  /* Waiting ranks yield when the node has more ranks than CPUs among them all. */
  int cpus = 0;
  if ((rc = mpiar__node_cpus(ctx, timeout_ms, &cpus)) != MPIAR_SUCCESS) {
    return rc;
  }
  ctx->node_cpus = cpus > 0 ? cpus : ctx->cores;
  ctx->yield = set->wait == MPIAR__WAIT_YIELD ||
               (set->wait == MPIAR__WAIT_AUTO && ctx->local_ranks > ctx->node_cpus);
  char why[200];
  if ((rc = choose_transport(ctx, set, timeout_ms, why, sizeof why)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (set->debug) {
    report_context(ctx, set);
    fprintf(stderr, "mpiar: rank %d of %d: transport %s (%s)\n", ctx->eng.rank, ctx->eng.size,
            ctx->eng.tx->name, why);
  }
  return MPIAR_SUCCESS;
}
