/* mpiar-kv-replay --train-step: a training step measured beside its forecast (train_step.c). */
#ifndef MPIAR_KV_TRAIN_STEP_H
#define MPIAR_KV_TRAIN_STEP_H

#include <mpi.h>

#include "common/models.h"
#include "tuning/tuning.h"

typedef struct kv_train_opts {
  double batch;      /* samples per rank */
  double node_flops; /* FLOP/s of a node, shared by its ranks */
  int warmup, iters;
  const char *tuning_file;       /* the file named by --tuning-file, for the report */
  const mpiar__tuning_t *tuning; /* its fitted parameters, for the forecast; NULL: none */
} kv_train_opts_t;

/*
 * Run and time the step on @p comm with the gradients @p grads (one array per tensor of @p m),
 * and print it beside the forecast (rank 0). @return MPIAR_SUCCESS or an mpiar error.
 */
int kv_train_step(const kv_train_opts_t *o, const tool_model_t *m, float **grads, MPI_Comm comm,
                  int rank);

#endif /* MPIAR_KV_TRAIN_STEP_H */
