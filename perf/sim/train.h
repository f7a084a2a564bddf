/*
 * One data-parallel training step, predicted (mpiar-sim --train).
 *
 * N nodes of K ranks each train a model on batches of B samples per rank. The forward pass runs
 * layer by layer, then the backward pass in reverse; when a layer's backward work ends, its
 * gradients are ready. They go into a fusion buffer; a buffer is allreduced when the next
 * gradient would overflow it, when it is full, and at the end of the backward pass (a tensor
 * larger than the buffer goes alone; fusion 0: every tensor alone). Allreduces run one at a time,
 * in order, on one communication stream that works while the backward pass computes (--no-overlap:
 * they all start after it). The step ends when both are done.
 *
 * Compute: a layer's forward time is its FLOPs x B over the rank's share of the node's FLOP rate
 * (the node rate / K), its backward time backward_factor times that (2: the gradients of the
 * inputs and of the weights), unless the model gives measured times.
 * Communication: each allreduce's algorithm (and segment) is what the library's cost model picks
 * among the registry (two-level costs on the N x K topology) unless one is forced; its time is
 * the simulator's critical path of that schedule on the two-level model (the quotient simulation,
 * one representative per class of ranks; a count rounded up to a multiple of the rank count, so
 * that every rank's blocks are equal), or the closed form where even that is too large.
 * Parameter server (ps_servers = S): each node first reduces its ranks' gradients inside the node
 * (reduce-scatter and allgather), then per buffer of n bytes every node pushes n / S to each of
 * S servers and pulls the result back: a node port carries n each way, a server port N n / S each
 * way, and a server reduces N n / S bytes: 2 max(S alpha + n beta, N alpha + N n / S beta) +
 * N n / S gamma between nodes (inter-node alpha and beta).
 * Scaling efficiency: the step time on one node (K ranks, allreduce inside the node) over the step
 * time on N nodes with the same per-rank batch (weak scaling: N times the samples per step).
 */
#ifndef MPIAR_TRAIN_H
#define MPIAR_TRAIN_H

#include <stddef.h>

#include "algorithms/algorithms.h"
#include "common/models.h"

typedef struct train_config {
  const tool_model_t *model;
  int nodes, ppn;
  double batch;           /* samples per rank */
  double node_flops;      /* FLOP/s of one node, shared by its ranks */
  double backward_factor; /* backward FLOPs per forward FLOP */
  size_t fusion_bytes;    /* 0: one allreduce per tensor */
  mpiar__cost_params_t cost;
  mpiar_dtype_t dtype;                 /* of the gradients */
  const mpiar__algorithm_t *algorithm; /* NULL: the cost model's choice per message */
  size_t segment_bytes;                /* with a forced algorithm */
  int overlap;                         /* 1: communication runs during the backward pass */
  int ps_servers;                      /* > 0: a parameter server of this many servers */
  double max_sim_steps; /* simulations larger than this use the closed form (0: never) */
  /*
   * Optional: who picks each message's algorithm and segment instead of the cost model (a real
   * library's choice, when the prediction is set beside a measurement). @return 0, or -1.
   */
  int (*choose)(void *arg, size_t bytes, const mpiar__algorithm_t **alg, size_t *seg);
  void *choose_arg;
} train_config_t;

typedef struct train_result {
  double forward_s, backward_s; /* compute */
  double comm_s;                /* the messages' times added up */
  double step_s;
  double exposed_s;   /* communication not hidden by compute: step - forward - backward */
  int messages;       /* allreduces (or push/pulls) per step */
  size_t bytes;       /* gradient bytes per step */
  int simulated;      /* messages timed by the simulator */
  int estimated;      /* by the closed form (too large to simulate) */
  char choices[256];  /* the algorithms used: "hier_ring x9, hier_rabenseifner x1" */
} train_result_t;

/*
 * Predict one step. @return 0, or -1 with the reason in @p err (memory, a failed simulation).
 */
int train_step(const train_config_t *c, train_result_t *r, char *err, size_t errlen);

/*
 * The time of one allreduce of @p bytes on c's N x K ranks: the algorithm as train_step() picks
 * it (*alg, *seg), simulated (*simulated = 1) or closed form (0). @return seconds, or < 0 with
 * the reason in @p err.
 */
double train_allreduce_time(const train_config_t *c, size_t bytes, const mpiar__algorithm_t **alg,
                            size_t *seg, int *simulated, char *err, size_t errlen);

/* The parameter server's time for one buffer of @p bytes (see the header). */
double train_ps_time(const train_config_t *c, size_t bytes);

#endif /* MPIAR_TRAIN_H */
