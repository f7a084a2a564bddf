/*
 * The one registry of allreduce algorithms. The selector, the executor, the simulator, the
 * benchmarks and the documentation all enumerate this list.
 */
#ifndef MPIAR_ALGORITHMS_H
#define MPIAR_ALGORITHMS_H

#include <stddef.h>

#include "mpiar_types.h"
#include "schedule/schedule.h"
#include "schedule/topology.h"

/*
 * Build one rank's allreduce schedule into an initialised, empty schedule `s` (whose rank,
 * nranks, count, elem_size, in_place and segment_elems are set). Makes no MPI call.
 * Every REDUCE between the data of two different ranks puts the lower rank's contribution in
 * operand `a`, so that every rank computes bit-identical results (floating operations are not
 * commutative in the NaN payload they return).
 * @return MPIAR_SUCCESS or a negative MPIAR_ERR_* code.
 */
typedef int (*mpiar__builder_fn)(mpiar__schedule_t *s);

/*
 * Parameters of the cost model, one- or two-level.
 *
 * One level (no topology, or every rank on one node): a message occupies the sender's send port
 * and the receiver's receive port (one of each per rank, full duplex) for alpha + bytes * beta;
 * a reduction takes bytes * gamma on its rank.
 * Two levels (a topology with more than one node): messages inside a node keep alpha and beta
 * and the ranks' own ports; a message between nodes occupies its node's one inter-node send port
 * and the destination node's one receive port (full duplex, shared by all ranks of the node) for
 * alpha_inter + bytes * beta_inter. Inter terms of 0 only matter once a topology is given.
 */
typedef struct mpiar__cost_params {
  double alpha;       /* seconds per message inside a node */
  double beta;        /* seconds per byte sent inside a node */
  double gamma;       /* seconds per byte reduced */
  double alpha_inter; /* seconds per message between nodes */
  double beta_inter;  /* seconds per byte between nodes, through the node's shared port */
  /*
   * The protocol term (mpiar__cost_handshake, cost.c): an MPI library sends a message of at
   * most eager_bytes at once and a longer one after a rendezvous handshake, which adds
   * `rendezvous` seconds to each message longer than eager_bytes, on one node (no topology, or
   * one node; the two-level estimates leave it out). Both 0: no such term (the closed forms of
   * the file headers, which the simulator reproduces).
   */
  double eager_bytes; /* the longest message sent without a handshake */
  double rendezvous;  /* seconds added to every message longer than eager_bytes */
} mpiar__cost_params_t;

/*
 * Modelled time of the algorithm for `nranks` ranks and `bytes` bytes, with the segment size the
 * builder would use (0 = none), on topology `topo` (NULL: one level; otherwise topo->nranks ==
 * nranks). The simulator's critical-path time equals it where the algorithm's file header says
 * so (one level: powers of two, any p for ring; two levels: see each file); elsewhere it is the
 * model's estimate, good enough to rank algorithms.
 */
typedef double (*mpiar__cost_fn)(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                 const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

enum {
  MPIAR__ALG_SEGMENTED = 1u << 0, /* uses segment_elems */
  /*
   * Reads the schedule's topology (s->topo) and is built for it: offer it only where
   * mpiar__topology_is_hierarchical(topo). On a flat topology (NULL, one node, one rank per node)
   * it builds its flat equivalent, so forcing it by name is always correct.
   */
  MPIAR__ALG_HIERARCHICAL = 1u << 1,
  /*
   * Not an automatic candidate: the selector's model skips it; it runs when named (options,
   * MPIAR_ALGORITHM, a tuning file's table). For entries whose choice by the model has not been
   * measured yet, so that adding them leaves `auto` unchanged.
   */
  MPIAR__ALG_MANUAL = 1u << 2,
  /*
   * The simulator's quotient (sim.h) would not reproduce its timing: its schedules map onto each
   * other under a symmetry, but messages from several nodes meet at one node port in a step and
   * queue there in an order the representatives cannot mirror. The simulator runs every rank.
   */
  MPIAR__ALG_NO_QUOTIENT = 1u << 3,
  /* Reduces every element in the canonical order (mpiar_reduce_canonical): reproducible mode
   * runs it as it is. */
  MPIAR__ALG_CANONICAL = 1u << 4,
  /* On two ranks it reduces each element once, as x0 op x1 (the canonical order there):
   * reproducible mode runs it as it is on one or two ranks. */
  MPIAR__ALG_PAIR_EXACT = 1u << 5,
  /*
   * The order in which an element's contributions are combined depends on the element's position
   * in the vector (the ring starts block b's sum at rank b + 1): a vector reduced whole and the
   * same elements reduced as a sub-vector (fusion) may differ in the last bits of floating data.
   * Without it, every element of every vector is combined along the same tree of ranks.
   * ctest -R sim_registry proves the flag both ways on every entry.
   */
  MPIAR__ALG_ORDER_BY_POSITION = 1u << 6,
  /* A schedule file's entry, made at run time ("file:PATH", docs/schedules.md): its builder
   * instantiates the file's steps; it is in no table. */
  MPIAR__ALG_FILE = 1u << 7
};

/*
 * An integer parameter that is part of an algorithm's name (the radix or fan-out k): the entry
 * named BASE runs k = def, and "BASE/NAME=V" names the same algorithm with k = V, for
 * min <= V <= max, written in decimal without leading zeros. Each value is its own entry (the
 * registry entry for the default, mpiar__algorithm_instances[] for the others), so that a
 * choice, a plan key, a tuning range and the argument check's algorithm index all carry the
 * value through the entry they hold.
 */
typedef struct mpiar__alg_param {
  const char *name; /* "k"; NULL: the algorithm takes no parameter */
  int min, max, def;
} mpiar__alg_param_t;

typedef struct mpiar__algorithm {
  const char *name; /* BASE for the default value, "BASE/k=V" for an instance */
  mpiar__builder_fn build;
  mpiar__cost_fn cost;
  unsigned flags;
  const char *summary;      /* one line for --help and the docs */
  mpiar__alg_param_t param; /* the parameter the name may carry (zero: none) */
  int value;                /* this entry's value of the parameter (0: none) */
  const char *base;         /* instances: the registry name they parameterise (NULL otherwise) */
  /* This entry's number, unique among allreduce entries (registry, instances, variants) and the
   * same in every process of a build: the argument check's algorithm field
   * (mpiar__algorithm_number(), mpiar__algorithm_at()). Broadcast entries: their position. */
  unsigned index;
  /* Reproducible mode's replacement for floating data (an entry flagged MPIAR__ALG_CANONICAL,
   * found with mpiar__algorithm_find_any()); NULL for a canonical entry. */
  const char *repro;
} mpiar__algorithm_t;

/*
 * The segment in elements a run uses for @p seg_bytes (0: none): at least MPIAR__SEGMENT_MIN
 * bytes, and large enough that a ring block (count / p elements) has at most
 * MPIAR__SEGMENTS_MAX segments, so a plan's size stays bounded whatever is asked. The library's
 * plans, mpiar-tune, mpiar-bench and the training-step predictor all apply it.
 */
#define MPIAR__SEGMENTS_MAX 1024
size_t mpiar__segment_elems(size_t seg_bytes, size_t count, size_t es, int nranks);

/* The registry: mpiar__algorithms[0 .. mpiar__algorithm_count - 1]. */
extern const mpiar__algorithm_t mpiar__algorithms[];
extern const int mpiar__algorithm_count;

/*
 * @return the entry named @p name, or NULL. "BASE/k=V" finds BASE's entry for the value V (the
 * registry entry itself when V is its default); anything else after a '/' finds nothing.
 */
const mpiar__algorithm_t *mpiar__algorithm_find(const char *name);

/*
 * Schedule files: mpiar__algorithm_find() and mpiar__algorithm_find_any() hand a name
 * "file:PATH" to this hook (set by src/sim/schedfile_alg.c when it is linked), which returns the
 * file's entry (NULL: none, e.g. an empty path). The entry of a file that cannot be used is
 * still returned; its builder and mpiar__schedfile_fit() name the reason.
 */
#define MPIAR__ALG_FILE_PREFIX "file:"
extern const mpiar__algorithm_t *(*mpiar__algorithm_file_hook)(const char *path);

/*
 * Why @p name names no registry algorithm, in one phrase for an error message that the caller
 * prefixes with the variable or option (e.g. "unknown algorithm 'x'", "k=9 is outside 2..8 for
 * recursive_multiplying"); the names the registry offers are listed. Writes at most @p len bytes.
 */
void mpiar__algorithm_explain(const char *name, char *buf, size_t len);

/* The non-default values of parameterised entries (see mpiar__alg_param_t). */
extern const mpiar__algorithm_t mpiar__algorithm_instances[];
extern const int mpiar__algorithm_instance_count;

/*
 * A number naming any allreduce entry (registry, research variant, instance), the same on every
 * rank, for the argument check's signature; mpiar__algorithm_at() inverts it (NULL: none).
 */
unsigned mpiar__algorithm_number(const mpiar__algorithm_t *alg);
const mpiar__algorithm_t *mpiar__algorithm_at(unsigned number);

/* Builders (one file each). */
int mpiar__build_ring(mpiar__schedule_t *s);
int mpiar__build_rabenseifner(mpiar__schedule_t *s);
int mpiar__build_recursive_doubling(mpiar__schedule_t *s);
/* In place, recursive doubling stages vectors of [MIN, MAX) bytes for its first send. */
#define MPIAR__RD_STAGE_MIN_BYTES ((size_t)16 * 1024)
#define MPIAR__RD_STAGE_MAX_BYTES ((size_t)512 * 1024)
/* Does an in-place recursive doubling of @p bytes stage its first send? */
static inline int mpiar__rd_stages(size_t bytes) {
  return bytes >= MPIAR__RD_STAGE_MIN_BYTES && bytes < MPIAR__RD_STAGE_MAX_BYTES;
}

/*
 * Radix and tree algorithms with a parameter k (mpiar__alg_param_t): one builder and one cost
 * function per algorithm taking k; the registry binds each value of k to an entry.
 */
int mpiar__build_recursive_multiplying_k(mpiar__schedule_t *s, int k);
double mpiar__cost_recursive_multiplying_k(int k, int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo);
int mpiar__build_radix_rabenseifner_k(mpiar__schedule_t *s, int k);
double mpiar__cost_radix_rabenseifner_k(int k, int nranks, size_t bytes, size_t elem_size,
                                        size_t segment_bytes, const mpiar__cost_params_t *c,
                                        const mpiar__topology_t *topo);
int mpiar__build_knomial_tree_k(mpiar__schedule_t *s, int k);
double mpiar__cost_knomial_tree_k(int k, int nranks, size_t bytes, size_t elem_size,
                                  size_t segment_bytes, const mpiar__cost_params_t *c,
                                  const mpiar__topology_t *topo);
int mpiar__build_kary_tree_k(mpiar__schedule_t *s, int k);
double mpiar__cost_kary_tree_k(int k, int nranks, size_t bytes, size_t elem_size,
                               size_t segment_bytes, const mpiar__cost_params_t *c,
                               const mpiar__topology_t *topo);

/*
 * Swing (swing.c; De Sensi et al., NSDI '24): the peer of rank r in step s alternates between
 * r + rho(s) and r - rho(s), rho(s) = sum_{i<=s} (-2)^i. swing: reduce-scatter + allgather
 * (bandwidth-optimal); swing_latency: full-vector exchanges (latency-optimal). Named only
 * (MPIAR__ALG_MANUAL).
 */
int mpiar__build_swing(mpiar__schedule_t *s);
int mpiar__build_swing_fold(mpiar__schedule_t *s);
int mpiar__build_swing_latency(mpiar__schedule_t *s);
double mpiar__cost_swing(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                         const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_swing_latency(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                 const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_swing_fold(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                              const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
/* Multi-dimensional Swing (swing_md.c) on a grid of d dimensions: 2 d collectives on parts of
 * the vector (swing_md), or full-vector exchanges (swing_md_latency). Named only. */
int mpiar__build_swing_md_k(mpiar__schedule_t *s, int d);
int mpiar__build_swing_md_latency_k(mpiar__schedule_t *s, int d);
double mpiar__cost_swing_md_k(int d, int nranks, size_t bytes, size_t elem_size,
                              size_t segment_bytes, const mpiar__cost_params_t *c,
                              const mpiar__topology_t *topo);
double mpiar__cost_swing_md_latency_k(int d, int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo);

/* The multi-port bucket algorithm (bucket.c) on swing_md's grid of d dimensions: 2 d
 * multi-dimensional rings on parts of the vector, two directions per dimension. Named only. */
int mpiar__build_bucket_k(mpiar__schedule_t *s, int d);
double mpiar__cost_bucket_k(int d, int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

/* Closed-form costs (the formulas in each builder's file header). */
double mpiar__cost_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                        const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_rabenseifner(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo);

/*
 * Hierarchical (topology-aware) builders, flag MPIAR__ALG_HIERARCHICAL: they read s->topo. Two
 * levels: reduce-scatter inside each node, an allreduce between nodes on each rank's shard (ring,
 * or recursive halving/doubling), allgather inside each node; or, for small messages, reduce to
 * one leader per node, recursive doubling among the leaders, broadcast inside each node.
 */
int mpiar__build_hier_ring(mpiar__schedule_t *s);
int mpiar__build_hier_rabenseifner(mpiar__schedule_t *s);
int mpiar__build_hier_recursive_doubling(mpiar__schedule_t *s);
double mpiar__cost_hier_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_hier_rabenseifner(int nranks, size_t bytes, size_t elem_size,
                                     size_t segment_bytes, const mpiar__cost_params_t *c,
                                     const mpiar__topology_t *topo);
double mpiar__cost_hier_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo);

/*
 * Catalogue algorithms (flag MPIAR__ALG_MANUAL: run when named, not chosen by the model yet).
 * double_binary_tree: two complementary binary trees, each reducing and broadcasting half of the
 * vector, pipelined in segments (double_binary_tree.c). direct: every block straight to its owner
 * and back, p-1 messages out and p-1 in per phase (direct.c). torus_2d: ring reduce-scatter along
 * the rows of a logical grid, ring allreduce along its columns, ring allgather along the rows
 * (torus_2d.c).
 */
int mpiar__build_double_binary_tree(mpiar__schedule_t *s);
/* The same trees with their edges coloured, each rank's sends in the colouring's steps. */
int mpiar__build_double_binary_tree_colour(mpiar__schedule_t *s);
int mpiar__build_direct(mpiar__schedule_t *s);
int mpiar__build_torus_2d(mpiar__schedule_t *s);
double mpiar__cost_double_binary_tree(int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo);
double mpiar__cost_double_binary_tree_colour(int nranks, size_t bytes, size_t elem_size,
                                             size_t segment_bytes, const mpiar__cost_params_t *c,
                                             const mpiar__topology_t *topo);
double mpiar__cost_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                          const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_torus_2d(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

/*
 * Research variants: built and simulated (mpiar-sim --algorithm NAME, tests/sim) but not offered
 * to the selector or to users. rabenseifner_fold is Rabenseifner with the whole-vector fold for
 * non-power-of-two p, kept to show that the registered half-vector pre-step is never slower.
 */
extern const mpiar__algorithm_t mpiar__algorithm_variants[];
extern const int mpiar__algorithm_variant_count;
int mpiar__build_rabenseifner_fold(mpiar__schedule_t *s);
double mpiar__cost_rabenseifner_fold(int nranks, size_t bytes, size_t elem_size,
                                     size_t segment_bytes, const mpiar__cost_params_t *c,
                                     const mpiar__topology_t *topo);

/* @return the registry entry or research variant named @p name, or NULL. */
const mpiar__algorithm_t *mpiar__algorithm_find_any(const char *name);

/*
 * Reproducible mode (MPIAR_REPRODUCIBLE): every element of the result is the canonical
 * combination of the ranks' values (src/reduce_kernels/canonical.c, mpiar_reduce_canonical()),
 * whatever the algorithm, size, segment, offset in the buffer or fusion. The builders below
 * compute it; they are research variants (mpiar__algorithm_variants) reached through
 * mpiar__algorithm_reproducible(), not names users select.
 *
 * repro_direct: direct reduce-scatter reduced in the canonical tree at the receiver + ring
 * allgather; any p, 2(p-1) messages and 2 (p-1)/p n bytes per rank, segmented: replaces ring.
 * repro_rabenseifner: Rabenseifner with halving at distance 1 first (canonical for every p),
 * cost of rabenseifner: replaces rabenseifner.
 * recursive_doubling computes the canonical tree natively (its fold and distance-1-first
 * exchanges are the tree's definition), so it replaces itself.
 */
int mpiar__build_repro_direct(mpiar__schedule_t *s);
int mpiar__build_repro_rabenseifner(mpiar__schedule_t *s);
double mpiar__cost_repro_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
/*
 * repro_halving (research): the canonical tree evaluated as a weighted recursive halving plus a
 * Bruck allgather; exactly 2 (p-1)/p n bytes sent per rank and O(log p) messages for every p.
 */
int mpiar__build_repro_halving(mpiar__schedule_t *s);
double mpiar__cost_repro_halving(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                 const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

/*
 * The algorithm to run in reproducible mode instead of @p alg (a registry entry or variant, as
 * selected by name, environment, tuning or `auto`) for @p nranks ranks and @p dtype: @p alg
 * itself where it already yields the canonical order (integer types, where every order gives the
 * same bits; p <= 2 for the flat algorithms, which all compute x0 op x1; recursive_doubling and
 * the repro_* builders for every p), else its reproducible replacement (ring, direct ->
 * repro_direct, keeping the segment size; rabenseifner, rabenseifner_fold -> repro_rabenseifner;
 * any other algorithm, e.g. a hierarchical one: repro_direct when it is segmented, else
 * repro_rabenseifner). Never NULL for a non-NULL @p alg.
 */
const mpiar__algorithm_t *mpiar__algorithm_reproducible(const mpiar__algorithm_t *alg, int nranks,
                                                        mpiar_dtype_t dtype);

/*
 * Broadcast algorithms, for mpiar_bcast(). The builder broadcasts s->count elements of OUTPUT
 * from s->root (set it after mpiar__schedule_init()); broadcast is always in place (in_place 1):
 * the root's OUTPUT holds the data. Same entry type as the allreduce registry; flags are 0.
 */
extern const mpiar__algorithm_t mpiar__bcast_algorithms[];
extern const int mpiar__bcast_algorithm_count;

/* @return the broadcast entry named @p name ("binomial", "scatter_allgather"), or NULL. */
const mpiar__algorithm_t *mpiar__bcast_algorithm_find(const char *name);

int mpiar__build_bcast_binomial(mpiar__schedule_t *s);
int mpiar__build_bcast_scatter_allgather(mpiar__schedule_t *s);
double mpiar__cost_bcast_binomial(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                  const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_bcast_scatter_allgather(int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo);

/*
 * Reduce-scatter and allgather algorithms, for mpiar_reduce_scatter_block() and
 * mpiar_allgather() (reduce_scatter.c, allgather.c). Their schedules' count is one rank's block
 * c (equal blocks) and the builder sets the buffer shapes: reduce-scatter INPUT p c, OUTPUT c;
 * allgather INPUT c, OUTPUT p c; in place both are OUTPUT's memory of p c (a reduce-scatter's
 * result at its start, an allgather's own block at r c). A cost function's bytes are the whole
 * vector's, p c elements. Same entry type as the allreduce registry; index is the position.
 */
void mpiar__shape_reduce_scatter(mpiar__schedule_t *s);
void mpiar__shape_allgather(mpiar__schedule_t *s);
/* The empty and one-rank reduce-scatter (sets the shape; *done as mpiar__build_trivial). */
int mpiar__build_rs_trivial(mpiar__schedule_t *s, int *done);

extern const mpiar__algorithm_t mpiar__reduce_scatter_algorithms[];
extern const int mpiar__reduce_scatter_algorithm_count;
extern const mpiar__algorithm_t mpiar__allgather_algorithms[];
extern const int mpiar__allgather_algorithm_count;

/* @return the reduce-scatter (allgather) entry named @p name, or NULL. */
const mpiar__algorithm_t *mpiar__reduce_scatter_algorithm_find(const char *name);
const mpiar__algorithm_t *mpiar__allgather_algorithm_find(const char *name);

/*
 * The reduce-scatter to run in reproducible mode instead of @p alg: @p alg where it yields the
 * canonical order (integer types; p <= 2 for entries flagged PAIR_EXACT; CANONICAL entries), else
 * repro_direct. Never NULL for a non-NULL @p alg.
 */
const mpiar__algorithm_t *mpiar__reduce_scatter_reproducible(const mpiar__algorithm_t *alg,
                                                             int nranks, mpiar_dtype_t dtype);

int mpiar__build_rs_ring(mpiar__schedule_t *s);
int mpiar__build_rs_recursive_halving(mpiar__schedule_t *s);
int mpiar__build_rs_direct(mpiar__schedule_t *s);
int mpiar__build_repro_direct_rs(mpiar__schedule_t *s);
double mpiar__cost_rs_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                           const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_rs_recursive_halving(int nranks, size_t bytes, size_t elem_size,
                                        size_t segment_bytes, const mpiar__cost_params_t *c,
                                        const mpiar__topology_t *topo);
double mpiar__cost_rs_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_rs_repro_direct(int nranks, size_t bytes, size_t elem_size,
                                   size_t segment_bytes, const mpiar__cost_params_t *c,
                                   const mpiar__topology_t *topo);

int mpiar__build_ag_ring(mpiar__schedule_t *s);
int mpiar__build_ag_recursive_doubling(mpiar__schedule_t *s);
int mpiar__build_ag_bruck(mpiar__schedule_t *s);
int mpiar__build_ag_direct(mpiar__schedule_t *s);
double mpiar__cost_ag_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                           const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_ag_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                         size_t segment_bytes, const mpiar__cost_params_t *c,
                                         const mpiar__topology_t *topo);
double mpiar__cost_ag_bruck(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo);
double mpiar__cost_ag_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

#endif /* MPIAR_ALGORITHMS_H */
