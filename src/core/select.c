/*
 * Algorithm selection. Precedence: the per-call option, then MPIAR_ALGORITHM (and
 * MPIAR_SEGMENT_BYTES), then the table of the tuning file (MPIAR_TUNING_FILE, written by
 * mpiar-tune) where it was measured on a communicator like this one and on this machine, then
 * the cheapest algorithm (and segment size) under the alpha-beta-gamma cost model, with the
 * tuning file's fitted parameters when there is a file and the built-in ones otherwise.
 *
 * Every rank of a communicator must choose alike: the table applies or not by what the ranks
 * agreed on when the context was created (the same file and machine everywhere, see
 * mpiar__selector_init), and the model's inputs are the same on every rank.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

/*
 * Cost-model parameters of the built-in choice, for machines without a tuning file, fitted to
 * two ranks of one node with MPICH 4 (ch4:ucx, shared memory) with mpiar-bench: about 1 us per
 * message (the 8-byte exchange), the point-to-point exchange bandwidth of 9.4 GB/s at 1..16 MiB,
 * and 8 MiB of float32 reduced in 0.5 ms inside a ring. MPICH sends a message of at most 8 KiB
 * at once and a longer one after a rendezvous handshake, about 3 us more per message (recursive
 * doubling from 8 to 10 KiB at p = 2, the ring from 16 to 18 KiB: 3.0-3.1 us beside the bytes),
 * the model's protocol term. With it, at p = 2: recursive doubling up to 8 KiB (one eager message);
 * the ring above, to 16 KiB (its two halves eager where recursive doubling's one message is not);
 * recursive doubling again (one handshake against two) until the ring's halved reduction pays
 * for its extra message and handshake, 2 (alpha + rendezvous) / gamma = 125 KiB; then the ring,
 * as measured (docs/tuning.md). Without the term the crossover was 2 alpha / gamma = 32000 B,
 * which ran recursive doubling's one 10..16 KiB message at twice the ring's time, and from 32 to
 * 112 KiB the ring's two messages at 1.08-1.38x recursive doubling's one. With Open MPI 4.1 (its
 * vader shared-memory transport) a message above the 4 KiB eager limit costs about 2.6 us beside
 * its bytes (the intercept of mpiar-bench's paired exchange at 8-128 KiB), which moves that
 * crossover to about 80 KiB, as measured there: at 32-64 KiB recursive doubling ran 1.2-1.36x
 * Open MPI's allreduce where the ring ran 0.8-0.9x, and at 128 KiB the two were level. That
 * fit puts the handshake into every message (no protocol term), as it was measured.
 */
#if defined(OPEN_MPI)
#define BUILTIN_ALPHA 2.6e-6
#define BUILTIN_EAGER_BYTES 0.0
#define BUILTIN_RENDEZVOUS 0.0
#else
#define BUILTIN_ALPHA 1.0e-6
#define BUILTIN_EAGER_BYTES 8192.0
#define BUILTIN_RENDEZVOUS 3.0e-6
#endif
static const mpiar__cost_params_t builtin_params = {
    .alpha = BUILTIN_ALPHA,
    .beta = 1.0 / 9.4e9,
    .gamma = 1.0 / 16.0e9,
    .eager_bytes = BUILTIN_EAGER_BYTES,
    .rendezvous = BUILTIN_RENDEZVOUS,
    /* Between nodes, without a tuning file: a 25 Gb/s network with 5 us per message, a common
     * cluster interconnect (mpiar-tune measures the real one). */
    .alpha_inter = 5.0e-6,
    .beta_inter = 1.0 / 3.125e9,
};

/*
 * Segment sizes the built-in choice considers for pipelined algorithms. Measured on that node,
 * segments below 1 MiB slow the ring down (each is a rendezvous handshake, and the transfer is a
 * copy by the receiving CPU, so it cannot overlap a reduction on the same core); 4 MiB segments
 * help only from about 32 MiB. The cost model does not see either effect, so the candidates
 * carry the measurement. With fitted parameters the model considers the same candidates: they
 * are where it is known to rank segments right; a tuning table measures all of mpiar-tune's.
 */
static const size_t segment_candidates[] = {0, 4 << 20};

static const char *const source_names[] = {
    [MPIAR__SRC_OPTION] = "the call's options",
    [MPIAR__SRC_ENV] = "MPIAR_ALGORITHM",
    [MPIAR__SRC_TABLE] = "tuning table",
    [MPIAR__SRC_FITTED] = "model with fitted parameters",
    [MPIAR__SRC_BUILTIN] = "model with built-in parameters",
};

const char *mpiar__source_name(int source) {
  return (unsigned)source < sizeof source_names / sizeof source_names[0] ? source_names[source]
                                                                         : "?";
}

/* ---- This machine ------------------------------------------------------------------------- */

/* The CPU model from /proc/cpuinfo ("unknown" where there is none). */
static void cpu_model(char *out, size_t len) {
  snprintf(out, len, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) {
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      const char *v = strchr(line, ':');
      if (v != NULL) {
        v++;
        while (*v == ' ' || *v == '\t') {
          v++;
        }
        snprintf(out, len, "%.*s", (int)strcspn(v, "\n"), v);
      }
      break;
    }
  }
  fclose(f);
}

static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;
static mpiar__fingerprint_t fingerprint;

static void fingerprint_init(void) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS) {
    len = 0;
  }
  lib[len < (int)sizeof lib ? len : (int)sizeof lib - 1] = '\0';
  lib[strcspn(lib, "\n\r")] = '\0';
  /* "MPICH Version:\t4.0.2": runs of blanks become one space. */
  size_t w = 0;
  for (size_t r = 0; lib[r] != '\0'; r++) {
    int blank = lib[r] == ' ' || lib[r] == '\t';
    if (!blank || (w > 0 && lib[w - 1] != ' ')) {
      lib[w++] = blank ? ' ' : lib[r];
    }
  }
  while (w > 0 && lib[w - 1] == ' ') {
    w--;
  }
  lib[w] = '\0';
  snprintf(fingerprint.mpi_library, sizeof fingerprint.mpi_library, "%.*s",
           (int)sizeof fingerprint.mpi_library - 1, lib);
  cpu_model(fingerprint.cpu, sizeof fingerprint.cpu);
  const char *level = mpiar_kernel_level();
  snprintf(fingerprint.kernel_level, sizeof fingerprint.kernel_level, "%s",
           level ? level : "unknown");
}

void mpiar__fingerprint_here(mpiar__fingerprint_t *fp) {
  pthread_once(&fingerprint_once, fingerprint_init);
  *fp = fingerprint;
}

uint64_t mpiar__selector_key(const mpiar__tuning_t *t) {
  if (t == NULL) {
    return 0x9e3779b97f4a7c15ULL;
  }
  mpiar__fingerprint_t fp;
  mpiar__fingerprint_here(&fp);
  uint64_t h = t->hash;
  const char *parts[3] = {fp.mpi_library, fp.cpu, fp.kernel_level};
  for (int i = 0; i < 3; i++) {
    for (const char *c = parts[i]; *c != '\0'; c++) {
      h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
    }
    h = (h ^ 0xff) * 0x100000001b3ULL;
  }
  return h;
}

void mpiar__selector_init(mpiar__context_t *ctx, const mpiar__tuning_t *t, int agreed) {
  mpiar__selector_t *sel = &ctx->selector;
  memset(sel, 0, sizeof *sel);
  if (t == NULL) {
    return;
  }
  if (!agreed) {
    /* The ranks hold different files or run on different machines: each rank's own view would
     * make them choose differently, so all of them use the built-in model. */
    snprintf(sel->why, sizeof sel->why,
             "the ranks do not agree on it (different files or machines): built-in model");
    return;
  }
  sel->tuning = t;
  int nodes = ctx->nnodes > 0 ? ctx->nnodes : 1;
  int largest = ctx->eng.size;
  if (ctx->node_of != NULL) {
    largest = 0;
    for (int n = 0; n < nodes; n++) {
      int k = 0;
      for (int r = 0; r < ctx->eng.size; r++) {
        k += ctx->node_of[r] == n;
      }
      largest = k > largest ? k : largest;
    }
  }
  mpiar__fingerprint_t here;
  mpiar__fingerprint_here(&here);
  sel->table =
      mpiar__tuning_applies(t, ctx->eng.size, nodes, largest, &here, sel->why, sizeof sel->why);
}

/*
 * Hierarchical algorithms cut the vector into chunks of segment x p elements and overlap the node
 * link on one chunk with the ranks' own links on the next; chunks of 256 KiB .. 1 MiB per rank
 * did best in the two-level model (docs/hierarchical.md).
 */
static const size_t hier_segment_candidates[] = {0, 256 << 10, 1 << 20};

/*
 * MPIAR_ALGORITHM against the registry, checked by every call whatever its options, so that a
 * misspelt name is an error everywhere and not only where it would have been used.
 */
int mpiar__check_env_algorithm(const mpiar__settings_t *set) {
  if (MPIAR__LIKELY(set->algorithm[0] == '\0') || mpiar__algorithm_find(set->algorithm) != NULL) {
    return MPIAR_SUCCESS;
  }
  char why[512];
  mpiar__algorithm_explain(set->algorithm, why, sizeof why);
  return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "MPIAR_ALGORITHM: %s", why);
}

int mpiar__settings_checked(const mpiar__settings_t **set, const mpiar__tuning_t **tuning) {
  /* The generation of the settings whose algorithm and tuning file were last found good: a loop
   * of calls checks them once. */
  static unsigned good;
  static const mpiar__settings_t *good_set; /* the settings that generation lives in */
  const mpiar__settings_t *g = __atomic_load_n(&good_set, __ATOMIC_ACQUIRE);
  if (tuning == NULL && g != NULL && g->generation == __atomic_load_n(&good, __ATOMIC_ACQUIRE)) {
    *set = g;
    return MPIAR_SUCCESS;
  }
  int rc = mpiar__settings(set);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  unsigned gen = (*set)->generation;
  if (tuning == NULL && __atomic_load_n(&good, __ATOMIC_ACQUIRE) == gen) {
    return MPIAR_SUCCESS;
  }
  rc = mpiar__check_env_algorithm(*set);
  if (rc == MPIAR_SUCCESS) {
    const mpiar__tuning_t *t = NULL;
    rc = mpiar__tuning_get((*set)->tuning_file, &t);
    if (tuning != NULL) {
      *tuning = t;
    }
  }
  if (rc == MPIAR_SUCCESS) {
    __atomic_store_n(&good, gen, __ATOMIC_RELEASE);
    __atomic_store_n(&good_set, *set, __ATOMIC_RELEASE);
  }
  return rc;
}

int mpiar__settings_fault(void) {
  const mpiar__settings_t *set = NULL;
  if (mpiar__settings(&set) != MPIAR_SUCCESS) {
    return set->malformed > 0 ? set->malformed : mpiar__settings_number("MPIAR_ALGORITHM");
  }
  if (mpiar__check_env_algorithm(set) != MPIAR_SUCCESS) {
    return mpiar__settings_number("MPIAR_ALGORITHM");
  }
  const mpiar__tuning_t *t = NULL;
  if (mpiar__tuning_get(set->tuning_file, &t) != MPIAR_SUCCESS) {
    return mpiar__settings_number("MPIAR_TUNING_FILE");
  }
  if (mpiar__kernels_init() != MPIAR_SUCCESS) {
    return mpiar__settings_number("MPIAR_KERNEL"); /* a level this CPU lacks */
  }
  return 0;
}

/*
 * The cheapest registry entry for (bytes, p) under the model with @p params, with its best
 * segment size on @p topo (hierarchical entries compete only on a topology with several nodes
 * and several ranks on some node). With @p reproducible, each entry is costed as the algorithm that would run in its
 * place (its reproducible replacement for @p dtype), which the caller then runs instead.
 */
static void model_choice(size_t bytes, size_t elem_size, int nranks,
                         const mpiar__topology_t *topo, int reproducible, mpiar_dtype_t dtype,
                         const mpiar__cost_params_t *params,
                         const mpiar__algorithm_t **alg, size_t *segment_bytes) {
  double best = INFINITY;
  *alg = &mpiar__algorithms[0];
  *segment_bytes = 0;
  int hierarchical = mpiar__topology_is_hierarchical(topo);
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    const mpiar__algorithm_t *entry = &mpiar__algorithms[i];
    if (((entry->flags & MPIAR__ALG_HIERARCHICAL) && !hierarchical) ||
        (entry->flags & MPIAR__ALG_MANUAL)) {
      continue;
    }
    const mpiar__algorithm_t *a =
        reproducible ? mpiar__algorithm_reproducible(entry, nranks, dtype) : entry;
    const size_t *cands = segment_candidates;
    size_t nseg = sizeof segment_candidates / sizeof segment_candidates[0];
    if (a->flags & MPIAR__ALG_HIERARCHICAL) {
      cands = hier_segment_candidates;
      nseg = sizeof hier_segment_candidates / sizeof hier_segment_candidates[0];
    }
    if (!(a->flags & MPIAR__ALG_SEGMENTED)) {
      nseg = 1;
    }
    for (size_t k = 0; k < nseg; k++) {
      size_t seg = cands[k];
      double t = a->cost(nranks, bytes, elem_size, seg, params, topo);
      /* A strict improvement is required, so ties keep the earlier (simpler) choice. */
      if (t < best * (1.0 - 1e-9)) {
        best = t;
        *alg = entry;
        *segment_bytes = seg;
      }
    }
  }
}

/* The automatic choice: the table where it applies and covers the size, else the model. */
static void automatic_choice(const mpiar__selector_t *sel, size_t bytes, mpiar_dtype_t dtype,
                             int nranks, const mpiar__topology_t *topo, int reproducible,
                             mpiar__choice_t *out) {
  const mpiar__tuning_t *t = sel != NULL ? sel->tuning : NULL;
  if (t != NULL && sel->table) {
    const mpiar__tuning_range_t *g = mpiar__tuning_lookup(t, dtype, bytes);
    if (g != NULL) {
      out->alg = g->alg;
      out->segment_bytes = g->segment_bytes;
      out->source = MPIAR__SRC_TABLE;
      out->range = g;
      return;
    }
  }
  mpiar__cost_params_t params = builtin_params;
  out->source = MPIAR__SRC_BUILTIN;
  if (t != NULL) {
    mpiar__tuning_params(t, dtype, &params);
    out->source = MPIAR__SRC_FITTED;
  }
  model_choice(bytes, mpiar_dtype_size(dtype), nranks, topo, reproducible, dtype, &params,
               &out->alg, &out->segment_bytes);
}

static int unknown(const char *requested) {
  char why[512];
  mpiar__algorithm_explain(requested, why, sizeof why);
  return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "options.algorithm: %s", why);
}

int mpiar__select(const mpiar__settings_t *set, const mpiar__selector_t *sel, const char *requested,
                  size_t requested_segment_bytes, size_t bytes, mpiar_dtype_t dtype, int nranks,
                  const mpiar__topology_t *topo, int reproducible, mpiar__choice_t *out) {
  size_t env_segment = set->segment_bytes;
  memset(out, 0, sizeof *out);
  if (requested_segment_bytes != 0 && requested_segment_bytes < MPIAR__SEGMENT_MIN) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "segment_bytes %zu is below the minimum of %zu bytes (0 = automatic)",
                        requested_segment_bytes, MPIAR__SEGMENT_MIN);
  }
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    out->alg = mpiar__algorithm_find(requested);
    if (out->alg == NULL) {
      return unknown(requested);
    }
    out->segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    out->source = MPIAR__SRC_OPTION;
    return MPIAR_SUCCESS;
  }
  if (set->algorithm[0] != '\0') {
    out->alg = mpiar__algorithm_find(set->algorithm);
    if (out->alg == NULL) {
      return mpiar__check_env_algorithm(set);
    }
    out->segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    out->source = MPIAR__SRC_ENV;
    return MPIAR_SUCCESS;
  }
  automatic_choice(sel, bytes, dtype, nranks, topo, reproducible, out);
  if (requested_segment_bytes) {
    out->segment_bytes = requested_segment_bytes;
  } else if (env_segment && (out->alg->flags & MPIAR__ALG_SEGMENTED)) {
    out->segment_bytes = env_segment;
  }
  if (!(out->alg->flags & MPIAR__ALG_SEGMENTED)) {
    out->segment_bytes = 0;
  }
  return MPIAR_SUCCESS;
}

void mpiar__choice_describe(const mpiar__context_t *ctx, const mpiar__choice_t *ch, char *buf,
                            size_t len) {
  const mpiar__selector_t *sel = &ctx->selector;
  switch (ch->source) {
  case MPIAR__SRC_TABLE:
    if (ch->range->max_bytes == MPIAR__TUNING_UNBOUNDED) {
      snprintf(buf, len, "tuning table of %s, range %zu bytes and more", sel->tuning->source,
               ch->range->min_bytes);
    } else {
      snprintf(buf, len, "tuning table of %s, range %zu..%zu bytes", sel->tuning->source,
               ch->range->min_bytes, ch->range->max_bytes);
    }
    break;
  case MPIAR__SRC_FITTED:
    snprintf(buf, len, "model with the parameters fitted in %s: %s", sel->tuning->source,
             sel->table ? "its table has no range for this size and type" : sel->why);
    break;
  case MPIAR__SRC_BUILTIN:
    if (sel->why[0] != '\0') {
      snprintf(buf, len, "model with built-in parameters: tuning file not used: %s", sel->why);
    } else {
      snprintf(buf, len, "model with built-in parameters (no MPIAR_TUNING_FILE)");
    }
    break;
  default:
    snprintf(buf, len, "%s", mpiar__source_name(ch->source));
    break;
  }
}

/* The selector of a communicator of @p nranks ranks on one node, for calls without one. */
static void one_node_selector(const mpiar__tuning_t *t, int nranks, mpiar__selector_t *sel) {
  memset(sel, 0, sizeof *sel);
  sel->tuning = t;
  if (t != NULL) {
    mpiar__fingerprint_t here;
    mpiar__fingerprint_here(&here);
    sel->table = mpiar__tuning_applies(t, nranks, 1, nranks, &here, sel->why, sizeof sel->why);
  }
}

int mpiar_select(size_t bytes, int nranks, const char **algorithm, size_t *segment_bytes) {
  mpiar__error_clear();
  if (nranks < 1 || algorithm == NULL || segment_bytes == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_select needs nranks >= 1 and two results");
  }
  const mpiar__settings_t *set = NULL;
  const mpiar__tuning_t *t = NULL;
  int rc = mpiar__settings_checked(&set, &t);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__selector_t sel;
  one_node_selector(t, nranks, &sel);
  mpiar__choice_t ch;
  rc = mpiar__select(set, &sel, NULL, 0, bytes, MPIAR_FLOAT32, nranks, NULL, 0, &ch);
  if (rc == MPIAR_SUCCESS) {
    *algorithm = ch.alg->name;
    *segment_bytes = ch.segment_bytes;
  }
  return rc;
}

int mpiar__select_bcast(const char *requested, size_t bytes, size_t elem_size, int nranks,
                        const mpiar__algorithm_t **alg) {
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    *alg = mpiar__bcast_algorithm_find(requested);
    if (*alg == NULL) {
      return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM,
                          "unknown broadcast algorithm '%s' (binomial, scatter_allgather or auto)",
                          requested);
    }
    return MPIAR_SUCCESS;
  }
  double best = INFINITY;
  *alg = &mpiar__bcast_algorithms[0];
  for (int i = 0; i < mpiar__bcast_algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__bcast_algorithms[i];
    double t = a->cost(nranks, bytes, elem_size, 0, &builtin_params, NULL);
    if (t < best * (1.0 - 1e-9)) {
      best = t;
      *alg = a;
    }
  }
  return MPIAR_SUCCESS;
}

int mpiar__select_rsag(int coll, const char *requested, size_t bytes, size_t elem_size,
                       int nranks, const mpiar__algorithm_t **alg) {
  const int rs = coll == MPIAR__COLL_REDUCE_SCATTER;
  const mpiar__algorithm_t *list = rs ? mpiar__reduce_scatter_algorithms
                                      : mpiar__allgather_algorithms;
  const int n = rs ? mpiar__reduce_scatter_algorithm_count : mpiar__allgather_algorithm_count;
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    *alg = rs ? mpiar__reduce_scatter_algorithm_find(requested)
              : mpiar__allgather_algorithm_find(requested);
    if (*alg == NULL) {
      char names[256] = "";
      size_t used = 0;
      for (int i = 0; i < n && used < sizeof names; i++) {
        used += (size_t)snprintf(names + used, sizeof names - used, "%s, ", list[i].name);
      }
      return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "unknown %s algorithm '%s' (%sor auto)",
                          rs ? "reduce-scatter" : "allgather", requested, names);
    }
    return MPIAR_SUCCESS;
  }
  double best = INFINITY;
  *alg = &list[0];
  for (int i = 0; i < n; i++) {
    const mpiar__algorithm_t *a = &list[i];
    if (a->flags & MPIAR__ALG_MANUAL) {
      continue;
    }
    double t = a->cost(nranks, bytes, elem_size, 0, &builtin_params, NULL);
    if (t < best * (1.0 - 1e-9)) {
      best = t;
      *alg = a;
    }
  }
  return MPIAR_SUCCESS;
}
