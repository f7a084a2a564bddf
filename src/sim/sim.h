/*
 * In-process simulator: builds the schedules of all p ranks of one collective, runs them in one
 * process with exact MPI matching (per source and tag, in posting order), moves real data through
 * the real reduce kernels, checks everything that can go wrong, and reports the critical-path
 * time under an alpha-beta-gamma cost model.
 *
 * Cost model: a message occupies the sender's send port and the receiver's receive port (one of
 * each per rank, full duplex) for alpha + bytes * beta, starting when the SEND is ready and both
 * ports are free (sends leave a rank in the order they became ready). With a topology of more
 * than one node (two levels), a message between nodes occupies instead its node's one inter-node
 * send port and the destination node's one receive port, shared by all ranks of those nodes, for
 * alpha_inter + bytes * beta_inter (sends leave a node in the order they became ready); messages
 * inside a node keep the ranks' ports, alpha and beta. A RECV completes when its
 * message has arrived and the RECV is posted. REDUCE and COPY run one at a time per rank for
 * bytes * gamma. A step is ready when its dependencies are complete. Data follows the same order:
 * a send carries its buffer as it was when the send became ready.
 *
 * Checks: deadlock, unmatched messages, size mismatch (truncation), reads of uninitialised scratch
 * or output (per element), out-of-range operands, writes to INPUT, partial overlap inside one
 * step, unordered conflicting accesses of one rank (hazards: two steps touching overlapping memory,
 * one writing, not ordered by dependencies), results that differ between ranks (bitwise) and
 * results that differ from a reference (integers exactly, floats within a tolerance, or every bit
 * of a given expected result).
 *
 * Routed networks (cfg.network, network.h: a torus or a fat tree, one rank per node): instead of
 * ports, a message crosses the directed links of its route. It enters the network alpha after
 * its SEND is ready, then shares every link it crosses with the other messages in flight there:
 * the rates are max-min fair (progressive filling: the link with the smallest capacity per
 * message fixes the rate of its messages, which is taken off the other links they cross, and so
 * on), recomputed whenever a message enters or leaves, a link carrying 1 / beta bytes per second
 * times its capacity. A message leaves when its last byte has passed, and arrives hop_latency
 * per link crossed later. So alone it takes alpha + bytes beta + hops hop_latency, and k equal
 * messages through one link k times the bytes term. A node has no port limit of its own: it
 * drives all its links at once (a torus node has 2 d of them, a fat-tree host one each way).
 * The two directions of a link are independent. Reductions cost gamma per byte as above. The
 * result reports the bytes each link carried, the busiest link and the hops.
 */
#ifndef MPIAR_SIM_H
#define MPIAR_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "mpiar_types.h"
#include "sim/network.h"

typedef enum mpiar__sim_collective {
  MPIAR__SIM_ALLREDUCE = 0,
  MPIAR__SIM_BCAST,
  /* count is one rank's block c: INPUT p c and OUTPUT c (reduce-scatter), INPUT c and OUTPUT
   * p c (allgather); in place OUTPUT holds p c (see algorithms.h) */
  MPIAR__SIM_REDUCE_SCATTER,
  MPIAR__SIM_ALLGATHER
} mpiar__sim_collective_t;

typedef struct mpiar__sim_config {
  const mpiar__algorithm_t *algorithm; /* builder and name (allreduce or broadcast registry) */
  int collective;                      /* mpiar__sim_collective_t */
  int nranks;
  size_t count;
  mpiar_dtype_t dtype;
  mpiar_op_t op; /* allreduce and reduce-scatter; AVG runs SUM, divided by nranks at the final
                    reductions */
  int in_place;  /* not broadcast, which is always in place */
  int root;      /* broadcast only */
  size_t segment_elems;
  int data;          /* 1: real data and result checks; 0: matching and timing only */
  int check_hazards; /* -1: when nranks <= 64; 0: never; 1: always */
  int nan_inputs;    /* floats: put NaNs with rank-specific payloads into the inputs */
  uint64_t seed;
  mpiar__cost_params_t cost;
  /*
   * Optional, allreduce and reduce-scatter with data only. inputs: nranks arrays of count
   * elements (p count for a reduce-scatter) used instead of generated ones. expect: count
   * elements that every rank's result must equal bit for bit (the serial canonical reduction, for
   * reproducible schedules) instead of the tolerance check; for a reduce-scatter p count
   * elements, of which rank r's result must equal block r.
   */
  const void *const *inputs;
  const void *expect;
  /* Optional, allreduce and reduce-scatter with data only: count elements that receive the
   * result (every rank holds the same bits) when the run passes its checks; for a
   * reduce-scatter p count elements, the ranks' blocks in rank order. */
  void *result;
  /*
   * Node structure (NULL: one level). Owned by the caller; nranks must equal topology->nranks.
   * The schedules are built with it (s->topo), so hierarchical builders use it.
   */
  const mpiar__topology_t *topology;
  /*
   * Timing only (data 0): 1 lets the simulator run one representative rank per class of a
   * symmetry of the schedules, when it finds one (see "Quotient simulation" below); 0 runs every
   * rank. The time is the same; the work and memory shrink by p / representatives.
   */
  int quotient;
  /* 0, or the most steps the simulated ranks may hold in all: a larger run is refused with
   * MPIAR_ERR_UNSUPPORTED before its memory is taken (sweeps over huge rank counts). */
  double max_steps;
  /*
   * Optional routed network ("Routed networks" above; NULL: the port model). Owned by the
   * caller; excludes a topology; a torus must have nranks nodes. No quotient simulation.
   */
  const mpiar__network_t *network;
  /* With a network, optional: mpiar__network_links() entries, filled with each link's bytes. */
  double *link_bytes;
} mpiar__sim_config_t;

/*
 * Defaults: allreduce, float32 sum, data and hazard checks on, alpha 2 us, 10 GB/s, 20 GB/s,
 * generated inputs checked against the serial sum within a tolerance, no topology (the
 * inter-node link, used once a topology is set, is the same as the intra-node one).
 */
#define MPIAR__SIM_CONFIG_INIT                                                        \
  {                                                                                   \
    NULL, MPIAR__SIM_ALLREDUCE, 1, 0, MPIAR_FLOAT32, MPIAR_SUM, 0, 0, 0, 1, -1, 0, 1, \
        {2e-6, 1e-10, 5e-11, 2e-6, 1e-10, 0, 0}, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL   \
  }

typedef struct mpiar__sim_result {
  int ok;                  /* 1: ran to completion and every check passed */
  char error[512];         /* the first problem found, when !ok */
  double time_s;           /* critical-path time of the whole collective */
  size_t messages;         /* messages sent, all ranks */
  size_t messages_max;     /* the most messages any rank sends */
  size_t bytes_sent_total; /* all ranks */
  size_t bytes_sent_max;   /* the most bytes any rank sends */
  size_t bytes_reduced_max;
  size_t scratch_bytes_max;
  size_t steps;        /* all ranks */
  int hazards_checked; /* 1 if the hazard check ran */
  /* With a topology: traffic across node links (0 without one). */
  size_t inter_messages;          /* messages between nodes, all ranks */
  size_t inter_bytes_total;       /* bytes sent between nodes, all ranks */
  size_t node_bytes_sent_max;     /* the most bytes one node sends to other nodes */
  size_t node_bytes_received_max; /* the most bytes one node receives from other nodes */
  double max_error;               /* floats: largest error relative to the tolerance scale */
  int reps;                       /* ranks simulated: nranks, or the representatives */
  char symmetry[48];              /* the symmetry used ("" when every rank ran) */
  /* With a network: link traffic and routes (0 without one). */
  int links;               /* directed links */
  double link_bytes_max;   /* bytes the busiest link carried */
  int link_busiest;        /* its index (mpiar__network_link_name) */
  double link_bytes_total; /* bytes over all links (a message counts once per link) */
  size_t hops_total;       /* links crossed, summed over messages */
  int hops_max;            /* the longest route of a message */
} mpiar__sim_result_t;

/*
 * Quotient simulation. Many schedules are symmetric: rank g(r)'s schedule is rank r's with every
 * peer q replaced by g(q), for every g of a group of rank permutations that also maps nodes to
 * nodes and ports to ports (the ring under rotation, recursive doubling and Rabenseifner at
 * powers of two under XOR, and the two-level builders under the same maps applied to whole
 * nodes). Then every rank of an orbit has the same timeline, so it is enough to run one
 * representative per orbit: a message from a representative r to any rank q is received, in
 * the mirror image, by q's representative from the mirror image of r, at the same time.
 * Two groups are tried, with K = the ranks per node of a regular block topology (1 without
 * one): the rotations r -> r + jK (mod p) and, when p and K are powers of two, the maps
 * r -> r XOR jK; the representatives are ranks 0 .. K-1. A group is used only if every
 * generator maps sampled ranks' schedules onto each other step for step (kind, size, tag,
 * dependencies, peers), and not for algorithms flagged MPIAR__ALG_NO_QUOTIENT or on a routed
 * network; otherwise every rank runs. tests/sim/test_sim_quotient.c holds the
 * quotient's time equal to the full simulation's for every algorithm on many shapes.
 */

/*
 * Build rank @p rank's schedule for @p cfg into @p s (initialised here, finalized; the caller
 * destroys it). @return MPIAR_SUCCESS or the builder's error.
 */
int mpiar__sim_build(const mpiar__sim_config_t *cfg, int rank, mpiar__schedule_t *s);

/*
 * Run one collective. @return MPIAR_SUCCESS when the simulation ran (res->ok tells whether the
 * schedules were correct), or MPIAR_ERR_INVALID_ARG / MPIAR_ERR_NOMEM / a builder's error.
 */
int mpiar__sim_run(const mpiar__sim_config_t *cfg, mpiar__sim_result_t *res);

/*
 * Static checks of one rank's schedule: operand ranges, no write to INPUT (unless in place), no
 * partial overlap inside a step, and (when @p hazards) every pair of conflicting accesses ordered
 * by dependencies. @return 1 if clean, 0 with a message in @p err otherwise.
 */
int mpiar__sim_check_schedule(const mpiar__schedule_t *s, int hazards, char *err, size_t errlen);

#endif /* MPIAR_SIM_H */
