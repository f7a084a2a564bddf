/*
 * Pieces shared by the builders: the block partition of a vector, powers of two, and the
 * bookkeeping of the non-power-of-two fold.
 */
#ifndef MPIAR_ALGORITHMS_UTIL_H
#define MPIAR_ALGORITHMS_UTIL_H

#include <stddef.h>

#include "algorithms/algorithms.h"
#include "schedule/schedule.h"

/*
 * Block i of a vector of n elements cut into nblocks blocks: the first n % nblocks blocks are one
 * element longer, so that every rank computes the same cut without communication.
 */
static inline size_t mpiar__block_off(size_t n, int nblocks, int i) {
  size_t q = n / (size_t)nblocks, r = n % (size_t)nblocks;
  return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

static inline size_t mpiar__block_len(size_t n, int nblocks, int i) {
  return n / (size_t)nblocks + ((size_t)i < n % (size_t)nblocks ? 1 : 0);
}

/* The largest power of two <= p (p >= 1). */
int mpiar__pof2_floor(int p);

/* log2 of a power of two. */
int mpiar__log2i(int pof2);

/*
 * The cases every allreduce builder shares: an empty vector (no step) and a single rank (a copy
 * when out of place). Sets *done to 1 when it built the whole schedule, with scratch 0.
 * @return MPIAR_SUCCESS or a negative MPIAR_ERR_* code.
 */
int mpiar__build_trivial(mpiar__schedule_t *s, int *done);

/* The current data of this rank before its first reduction: INPUT, or OUTPUT in place. */
static inline mpiar__operand_t mpiar__own(const mpiar__schedule_t *s, size_t off) {
  return s->in_place ? mpiar__out(off) : mpiar__in(off);
}

/*
 * Two-level cost helpers (cost.c). The flat algorithms' costs on a topology are step-synchronous
 * estimates built from them: each round costs the slower of a rank's port and the busiest node
 * port.
 */

/*
 * The protocol term of one message of @p bytes inside a node: c->rendezvous when it is longer
 * than c->eager_bytes (the handshake of a rendezvous), else 0.
 */
double mpiar__cost_handshake(const mpiar__cost_params_t *c, double bytes);

/*
 * @p c for messages of @p bytes each: alpha carries their handshake, so that a formula over
 * messages of one size charges it once per message.
 */
mpiar__cost_params_t mpiar__cost_at(const mpiar__cost_params_t *c, double bytes);

/* The handshakes of one message each of @p n / 2, n / 4, .., n / @p q bytes (q a power of two):
 * a recursive halving's, or the doubling back. */
double mpiar__cost_halving_handshakes(const mpiar__cost_params_t *c, double n, double q);

/*
 * 1 when every message on @p topo stays on one level, with that level's alpha and beta in
 * @p link (NULL or one node: inside a node; one rank per node: between nodes; gamma copied);
 * 0 for a real two-level topology. The protocol term stays only on one node (NULL or one node):
 * it was measured there, and the two-level estimates leave it out.
 */
int mpiar__cost_one_level(const mpiar__topology_t *topo, const mpiar__cost_params_t *c,
                          mpiar__cost_params_t *link);

/*
 * The link of an algorithm whose two-level cost is not modelled: the level every message stays
 * on, or on a real two-level topology the slower level's alpha and beta for every message (an
 * upper bound).
 */
void mpiar__cost_slow_link(const mpiar__topology_t *topo, const mpiar__cost_params_t *c,
                           mpiar__cost_params_t *link);

/* mpiar__cost_slow_link() as a value: the link of the formulas that are not topology-aware. */
static inline mpiar__cost_params_t mpiar__cost_link(const mpiar__cost_params_t *c,
                                                    const mpiar__topology_t *topo) {
  mpiar__cost_params_t l;
  mpiar__cost_slow_link(topo, c, &l);
  return l;
}

/* The partner rank of @p rank in one round of a pattern, or -1 when it sends nothing. */
typedef int (*mpiar__peer_fn)(int rank, const void *arg);

/* One round of messages: whether one stays inside a node, and the busiest node port's count. */
typedef struct mpiar__round_load {
  int intra; /* 1 if some message of the round stays inside a node */
  int port;  /* the most inter-node messages one node sends, or receives, in the round */
} mpiar__round_load_t;

void mpiar__round_load(const mpiar__topology_t *topo, mpiar__peer_fn peer, const void *arg,
                       mpiar__round_load_t *load);

/* Time of a round of messages of @p bytes each: max(alpha + bytes beta, port x inter message). */
double mpiar__round_time(const mpiar__round_load_t *load, const mpiar__cost_params_t *c,
                         double bytes);

/*
 * A tally of messages that leave together (a round's, or several rounds' whose messages do not
 * wait for each other), for the two-level estimates: per rank the messages its own port sends
 * and receives inside its node, per node those its shared port sends and receives across nodes.
 * mpiar__tally_time: the busiest port's count times its message time, the longer of the two
 * levels. Init allocates (MPIAR_ERR_NOMEM); free releases.
 */
typedef struct mpiar__tally {
  const mpiar__topology_t *topo;
  int *count; /* [2 nranks] own port (sends, receives), then [2 nnodes] node port */
} mpiar__tally_t;
int mpiar__tally_init(mpiar__tally_t *t, const mpiar__topology_t *topo);
void mpiar__tally_free(mpiar__tally_t *t);
void mpiar__tally_clear(mpiar__tally_t *t);
void mpiar__tally_add(mpiar__tally_t *t, int from, int to);
void mpiar__tally_round(mpiar__tally_t *t, mpiar__peer_fn peer, const void *arg);
double mpiar__tally_time(const mpiar__tally_t *t, const mpiar__cost_params_t *c, double bytes);

/*
 * One round of the radix-k algorithms (recursive_multiplying, radix_rabenseifner) at distance d
 * for the two-level estimates: sub-step t (1..k-1) sends from each group's lead, virtual rank v,
 * to the lead of v + ((digit + t) mod k - digit) d, digit = (v / d) mod k.
 * mpiar__radix_round_time: the round's k-1 sub-steps of @p bytes each tallied together;
 * mpiar__radix_collapse_time: the collapse into each lead and the return (0 for p = p'), with
 * the leads' folds.
 */
typedef struct mpiar__radix_step {
  int p, pp, k, d, t;
} mpiar__radix_step_t;
double mpiar__radix_round_time(mpiar__tally_t *t, mpiar__radix_step_t *x,
                               const mpiar__cost_params_t *c, double bytes);
double mpiar__radix_collapse_time(mpiar__tally_t *t, const mpiar__radix_step_t *x,
                                  const mpiar__cost_params_t *c, double bytes);

/*
 * Exchange patterns of recursive halving/doubling over p ranks, p' = 2^L <= p, rem = p - p':
 * the folded ranks (even ranks below 2 rem) sit out; virtual rank v maps to 2v+1 below rem.
 */
typedef struct mpiar__xor_pattern {
  int pof2, rem, mask; /* mask 0: the pre-/post-step pairs (2i, 2i+1), i < rem */
} mpiar__xor_pattern_t;

int mpiar__xor_peer(int rank, const void *arg);

/* Append a step and jump to cleanup on failure; the step index lands in `var`. */
#define MPIAR__STEP(var, expr) \
  do {                         \
    long step_ = (expr);       \
    if (step_ < 0) {           \
      rc = (int)step_;         \
      goto cleanup;            \
    }                          \
    (var) = step_;             \
    (void)(var);               \
  } while (0)

/*
 * The groups of the radix-k algorithms (recursive_multiplying, radix_rabenseifner): the radix a
 * run uses (k, or p when one round covers every rank), p' = k^L the largest power of it <= p,
 * and this rank's group: virtual rank v, whose block of ranks (mpiar__block_off(p, p', v)) has
 * gsize ranks led by its lowest, lead.
 */
typedef struct mpiar__radix_groups {
  int k, pp, L;
  int v, lead, gsize;
} mpiar__radix_groups_t;
void mpiar__radix_groups(int p, int r, int k, mpiar__radix_groups_t *g);

/*
 * The collapse stage of the radix-k algorithms: a rank that does not lead its group sends its
 * vector to the lead and receives the result with @p tag_post (*done = 1: its schedule is
 * complete); the lead folds its group's vectors into OUTPUT in rank order (lower ranks in
 * operand a; scratch (gsize - 1) n elements), *last the last fold and *in_out 1 when it did.
 */
int mpiar__radix_collapse(mpiar__schedule_t *s, const mpiar__radix_groups_t *g, int tag_post,
                          int *done, long *last, int *in_out);

/* The collapse's time on link @p l, n bytes: (g-1)(alpha + n beta + n gamma) + (g-1)(alpha +
 * n beta), g = ceil(p / p'); 0 when p is a power of the radix. */
double mpiar__radix_collapse_cost(int p, int pp, double n, const mpiar__cost_params_t *l);

/* Number of elements of a list literal of dependencies. */
#define MPIAR__NDEPS(arr) (sizeof(arr) / sizeof((arr)[0]))

/*
 * The fold of a non-power-of-two p into p' = 2^floor(log2 p) virtual ranks, rem = p - p' pairs
 * folded (reduce-scatter and allgather's recursive halving / doubling): virtual rank v's first
 * block, and the real rank that stands for it.
 */
static inline int mpiar__fold_first_block(int v, int rem) {
  return v < rem ? 2 * v : v + rem;
}
static inline int mpiar__fold_real_rank(int v, int rem) {
  return v < rem ? 2 * v + 1 : v + rem;
}

#endif /* MPIAR_ALGORITHMS_UTIL_H */
