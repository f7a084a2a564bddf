/*
 * mpiar-kv-replay --train-step: a data-parallel training step measured, beside the training-step
 * predictor's forecast of it (perf/sim/train.h) with the parameters that mpiar-tune fitted here.
 *
 * The step is the predictor's model carried out for real: a forward pass of compute, then the
 * backward pass layer by layer (last first); when a layer's backward compute ends, its gradient
 * tensors join a queue, and one communication stream allreduces them in order (float32 sum, in
 * place, the library's automatic choice), one at a time, while the compute goes on. Compute is
 * work, not wall-clock time: a layer's time (its FLOPs x batch over the rank's share of the node's
 * FLOP rate) passes in slices of 20 us spent spinning, and between slices the stream advances
 * (mpiar_test), which does not count towards the layer, so reductions and copies take from the
 * compute as they would on a real CPU. After the backward pass the stream is drained. A step is
 * timed from a barrier to the slowest rank's end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "common/models.h"
#include "common/tool.h"
#include "mpiar.h"
#include "train.h"
#include "train_step.h"
#include "tuning/tuning.h"

typedef struct stream {
  int *queue; /* tensor indices */
  size_t head, tail;
  mpiar_request_t req;
  int active;
  float **grads;
  const tool_model_t *m;
  MPI_Comm comm;
  int rc;
} stream_t;

static void stream_start(stream_t *s) {
  if (s->active || s->head == s->tail || s->rc != MPIAR_SUCCESS) {
    return;
  }
  const int k = s->queue[s->head++];
  s->rc = mpiar_iallreduce(MPIAR_IN_PLACE, s->grads[k], s->m->t[k].count, MPIAR_FLOAT32,
                           MPIAR_SUM, s->comm, NULL, &s->req);
  s->active = s->rc == MPIAR_SUCCESS;
}

static void stream_progress(stream_t *s) {
  if (s->active) {
    int done = 0;
    int rc = mpiar_test(&s->req, &done);
    if (rc != MPIAR_SUCCESS || done) {
      s->active = 0;
      s->rc = s->rc == MPIAR_SUCCESS ? rc : s->rc;
    }
  }
  stream_start(s);
}

static void stream_drain(stream_t *s) {
  while ((s->active || s->head != s->tail) && s->rc == MPIAR_SUCCESS) {
    if (s->active) {
      int rc = mpiar_wait(&s->req);
      s->active = 0;
      s->rc = rc;
    }
    stream_start(s);
  }
}

/* @p seconds of compute, advancing the stream between slices (which does not count). */
static void compute(double seconds, stream_t *s) {
  while (seconds > 0) {
    const double slice = seconds < 20e-6 ? seconds : 20e-6;
    const double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < slice) {
    }
    seconds -= slice;
    stream_progress(s);
  }
}

static double layer_seconds(const tool_layer_t *l, double batch, double rank_flops, int backward) {
  if (backward) {
    return l->bwd_s >= 0 ? l->bwd_s : 2.0 * l->flops * batch / rank_flops;
  }
  return l->fwd_s >= 0 ? l->fwd_s : l->flops * batch / rank_flops;
}

/* The library's choice for a message, as the measured run makes it. */
static int library_choice(void *arg, size_t bytes, const mpiar__algorithm_t **alg, size_t *seg) {
  const char *name = NULL;
  if (mpiar_select_comm(*(MPI_Comm *)arg, bytes / 4, MPIAR_FLOAT32, &name, seg, NULL) != 0) {
    return -1;
  }
  *alg = mpiar__algorithm_find(name);
  return *alg != NULL ? 0 : -1;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int kv_train_step(const kv_train_opts_t *o, const tool_model_t *m, float **grads, MPI_Comm comm,
                  int rank) {
  int p = 1, local = 1;
  MPI_Comm_size(comm, &p);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  const double rank_flops = o->node_flops / local;
  stream_t s = {0};
  s.queue = malloc(m->n * sizeof *s.queue);
  double *times = malloc((size_t)o->iters * sizeof *times);
  if (s.queue == NULL || times == NULL) {
    free(s.queue);
    free(times);
    return MPIAR_ERR_NOMEM;
  }
  s.grads = grads;
  s.m = m;
  s.comm = comm;
  double fwd = 0, bwd = 0;
  for (int i = 0; i < m->nlayers; i++) {
    fwd += layer_seconds(&m->layers[i], o->batch, rank_flops, 0);
    bwd += layer_seconds(&m->layers[i], o->batch, rank_flops, 1);
  }
  for (int it = -o->warmup; it < o->iters && s.rc == MPIAR_SUCCESS; it++) {
    s.head = s.tail = 0;
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < m->nlayers; i++) {
      compute(layer_seconds(&m->layers[i], o->batch, rank_flops, 0), &s);
    }
    for (int i = m->nlayers - 1; i >= 0; i--) {
      const tool_layer_t *l = &m->layers[i];
      compute(layer_seconds(l, o->batch, rank_flops, 1), &s);
      for (int k = l->first + l->ntensors - 1; k >= l->first; k--) {
        s.queue[s.tail++] = k;
      }
      stream_start(&s);
    }
    stream_drain(&s);
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (it >= 0) {
      times[it] = dt;
    }
  }
  int rc = s.rc;
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, comm);
  if (rc != MPIAR_SUCCESS) {
    free(s.queue);
    free(times);
    return rc;
  }
  qsort(times, (size_t)o->iters, sizeof *times, cmp);
  const double measured = times[o->iters / 2];
  /* The forecast: the same model, ranks and batch, the parameters fitted here. */
  double predicted = NAN;
  train_result_t r;
  memset(&r, 0, sizeof r);
  char why[512] = "no --tuning-file: no forecast";
  if (o->tuning != NULL) {
    const mpiar__tuning_t *t = o->tuning;
    train_config_t c;
    memset(&c, 0, sizeof c);
    c.model = m;
    c.nodes = p / local;
    c.ppn = local;
    c.batch = o->batch;
    c.node_flops = o->node_flops;
    c.backward_factor = 2;
    c.dtype = MPIAR_FLOAT32;
    c.overlap = 1;
    c.max_sim_steps = 4e7;
    mpiar__tuning_params(t, MPIAR_FLOAT32, &c.cost);
    c.cost.alpha_inter = isnan(t->alpha_inter) ? t->alpha : t->alpha_inter;
    c.cost.beta_inter = isnan(t->beta_inter) ? t->beta : t->beta_inter;
    c.choose = library_choice;
    c.choose_arg = &comm;
    if (train_step(&c, &r, why, sizeof why) == 0) {
      predicted = r.step_s;
    }
  }
  if (rank == 0) {
    printf("train-step %s: %zu tensors, batch %g per rank, node %.3g TFLOP/s shared by %d "
           "ranks: %.2f ms forward + %.2f ms backward of compute per step\n",
           m->name, m->n, o->batch, o->node_flops / 1e12, local, fwd * 1e3, bwd * 1e3);
    printf("  measured    %10.2f ms (median of %d steps after %d, slowest rank; fastest %.2f, "
           "slowest %.2f)\n",
           measured * 1e3, o->iters, o->warmup, times[0] * 1e3, times[o->iters - 1] * 1e3);
    if (isnan(predicted)) {
      printf("  predicted   - (%s)\n", why);
    } else {
      printf("  predicted   %10.2f ms (compute %.2f, communication %.2f of which %.2f exposed; %s), "
             "parameters of %s\n",
             predicted * 1e3, (r.forward_s + r.backward_s) * 1e3, r.comm_s * 1e3,
             r.exposed_s * 1e3, r.choices, o->tuning_file);
      printf("  error       %+10.1f %% (predicted / measured - 1)\n",
             100 * (predicted / measured - 1));
    }
  }
  free(s.queue);
  free(times);
  return MPIAR_SUCCESS;
}
