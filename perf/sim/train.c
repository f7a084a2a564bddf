/*
 * The training-step predictor (train.h): the backward pass as a sequence of gradient-ready times,
 * fusion buffers, and one communication stream whose messages are timed by the simulator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "train.h"
#include "tuning/tuning.h"

/* One distinct message size and what it costs (a step repeats sizes: layers share shapes). */
typedef struct timed {
  size_t bytes;
  double seconds;
  const mpiar__algorithm_t *alg;
  int simulated;
} timed_t;

typedef struct step_state {
  const train_config_t *c;
  mpiar__topology_t topo;
  const mpiar__topology_t *tp; /* &topo on several nodes, NULL on one */
  timed_t *cache;
  int ncache, cap;
  /* The algorithms used, with their counts. */
  const mpiar__algorithm_t *used[16];
  int used_n[16], nused;
  double comm_free; /* when the communication stream is next free */
  train_result_t *r;
  char *err;
  size_t errlen;
  int failed;
} step_state_t;

/* The cheapest registry algorithm and segment for @p bytes under the two-level cost model. */
static void choose(const train_config_t *c, const mpiar__topology_t *tp, size_t bytes,
                   const mpiar__algorithm_t **alg, size_t *seg) {
  const int p = c->nodes * c->ppn;
  const size_t es = mpiar_dtype_size(c->dtype);
  double best = INFINITY;
  *alg = &mpiar__algorithms[0];
  *seg = 0;
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__algorithms[i];
    if ((a->flags & MPIAR__ALG_HIERARCHICAL) && !mpiar__topology_is_hierarchical(tp)) {
      continue; /* its flat equivalent is in the registry */
    }
    if (a->flags & MPIAR__ALG_MANUAL) {
      continue; /* not an automatic candidate: the library's selector skips it too */
    }
    const int nseg = (a->flags & MPIAR__ALG_SEGMENTED) ? mpiar__tuning_nsegments : 0;
    for (int k = -1; k < nseg; k++) {
      const size_t s = k < 0 ? 0 : mpiar__tuning_segments[k];
      const double t = a->cost(p, bytes, es, s, &c->cost, tp);
      if (t < best * (1.0 - 1e-9)) {
        best = t;
        *alg = a;
        *seg = s;
      }
    }
  }
}

/*
 * The segment in elements a run uses for @p seg bytes: at least MPIAR__SEGMENT_MIN, and no more
 * than MPIAR__SEGMENTS_MAX segments per block, as the library raises it.
 */
static size_t segment_elems(size_t seg, size_t count, size_t es, int p) {
  return seg ? mpiar__segment_elems(seg, count, es, p) : 0;
}

static double time_with(const train_config_t *c, const mpiar__topology_t *tp, size_t bytes,
                        const mpiar__algorithm_t *alg, size_t seg, int *simulated, char *err,
                        size_t errlen) {
  const int p = c->nodes * c->ppn;
  const size_t es = mpiar_dtype_size(c->dtype);
  *simulated = 0;
  if (p == 1 || bytes == 0) {
    return 0.0;
  }
  /* Equal blocks on every rank (the symmetry the quotient simulation needs): round the count up
   * to a multiple of p, which changes the bytes by less than p elements. */
  size_t count = (bytes + es - 1) / es;
  count = (count + (size_t)p - 1) / (size_t)p * (size_t)p;
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = c->dtype;
  cfg.segment_elems = segment_elems(seg, count, es, p);
  cfg.cost = c->cost;
  cfg.topology = tp;
  cfg.data = 0;
  cfg.check_hazards = 0;
  cfg.quotient = 1;
  cfg.max_steps = c->max_sim_steps;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  if (rc == MPIAR_ERR_UNSUPPORTED) {
    return alg->cost(p, count * es, es, cfg.segment_elems * es, &c->cost, tp);
  }
  if (rc != MPIAR_SUCCESS || !res.ok) {
    snprintf(err, errlen, "simulating %s on %d x %d ranks, %zu bytes: %s", alg->name, c->nodes,
             c->ppn, bytes, rc != MPIAR_SUCCESS ? mpiar_last_error() : res.error);
    return -1.0;
  }
  *simulated = 1;
  return res.time_s;
}

static int make_topology(const train_config_t *c, mpiar__topology_t *t,
                         const mpiar__topology_t **tp) {
  memset(t, 0, sizeof *t);
  *tp = NULL;
  if (c->nodes <= 1) {
    return MPIAR_SUCCESS;
  }
  int rc = mpiar__topology_regular(t, c->nodes, c->ppn, MPIAR__PLACE_BLOCK);
  *tp = rc == MPIAR_SUCCESS ? t : NULL;
  return rc;
}

double train_allreduce_time(const train_config_t *c, size_t bytes, const mpiar__algorithm_t **alg,
                            size_t *seg, int *simulated, char *err, size_t errlen) {
  mpiar__topology_t t;
  const mpiar__topology_t *tp;
  if (make_topology(c, &t, &tp) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "topology of %d x %d ranks: %s", c->nodes, c->ppn, mpiar_last_error());
    return -1.0;
  }
  if (c->algorithm != NULL) {
    *alg = c->algorithm;
    *seg = c->segment_bytes;
  } else {
    choose(c, tp, bytes, alg, seg);
  }
  double s = time_with(c, tp, bytes, *alg, *seg, simulated, err, errlen);
  mpiar__topology_destroy(&t);
  return s;
}

double train_ps_time(const train_config_t *c, size_t bytes) {
  const double n = (double)bytes, N = c->nodes, S = c->ps_servers;
  const mpiar__cost_params_t *k = &c->cost;
  double intra = 0;
  if (c->ppn > 1) {
    /* Reduce-scatter and allgather inside the node: (K-1)(2 alpha + 2 n/K beta + n/K gamma). */
    const double K = c->ppn;
    intra = (K - 1) * (2 * k->alpha + 2 * n / K * k->beta + n / K * k->gamma);
  }
  if (c->nodes <= 1) {
    return intra;
  }
  const double node_port = S * k->alpha_inter + n * k->beta_inter;
  const double server_port = N * k->alpha_inter + N * n / S * k->beta_inter;
  const double port = node_port > server_port ? node_port : server_port;
  return intra + 2 * port + N * n / S * k->gamma;
}

/* The time of one message of @p bytes, from the cache or computed. */
static double message_time(step_state_t *st, size_t bytes) {
  for (int i = 0; i < st->ncache; i++) {
    if (st->cache[i].bytes == bytes) {
      return st->cache[i].seconds;
    }
  }
  const train_config_t *c = st->c;
  timed_t e = {bytes, 0, NULL, 0};
  if (c->ps_servers > 0) {
    e.seconds = train_ps_time(c, bytes);
  } else {
    size_t seg = c->segment_bytes;
    e.alg = c->algorithm;
    if (c->choose != NULL) {
      if (c->choose(c->choose_arg, bytes, &e.alg, &seg) != 0) {
        snprintf(st->err, st->errlen, "no algorithm for a message of %zu bytes", bytes);
        st->failed = 1;
        return 0;
      }
    } else if (e.alg == NULL) {
      choose(c, st->tp, bytes, &e.alg, &seg);
    }
    e.seconds = time_with(c, st->tp, bytes, e.alg, seg, &e.simulated, st->err, st->errlen);
    if (e.seconds < 0) {
      st->failed = 1;
      return 0;
    }
  }
  if (st->ncache == st->cap) {
    int cap = st->cap ? 2 * st->cap : 64;
    timed_t *t = realloc(st->cache, (size_t)cap * sizeof *t);
    if (t == NULL) {
      snprintf(st->err, st->errlen, "out of memory");
      st->failed = 1;
      return 0;
    }
    st->cache = t;
    st->cap = cap;
  }
  st->cache[st->ncache++] = e;
  return e.seconds;
}

/* Count the algorithm of a message of @p bytes (already in the cache). */
static void note_choice(step_state_t *st, size_t bytes) {
  for (int i = 0; i < st->ncache; i++) {
    if (st->cache[i].bytes != bytes) {
      continue;
    }
    st->r->simulated += st->cache[i].simulated;
    st->r->estimated += st->cache[i].alg != NULL && !st->cache[i].simulated;
    const mpiar__algorithm_t *a = st->cache[i].alg;
    if (a == NULL) {
      return;
    }
    for (int k = 0; k < st->nused; k++) {
      if (st->used[k] == a) {
        st->used_n[k]++;
        return;
      }
    }
    if (st->nused < 16) {
      st->used[st->nused] = a;
      st->used_n[st->nused++] = 1;
    }
    return;
  }
}

/* Send a buffer of @p bytes whose gradients are all ready at @p ready. */
static void launch(step_state_t *st, size_t bytes, double ready) {
  if (bytes == 0 || st->failed || st->c->nodes * st->c->ppn == 1) {
    return; /* one rank has nothing to send */
  }
  const double t = message_time(st, bytes);
  if (st->failed) {
    return;
  }
  note_choice(st, bytes);
  const double start = ready > st->comm_free ? ready : st->comm_free;
  st->comm_free = start + t;
  st->r->comm_s += t;
  st->r->messages++;
}

/* A layer's forward and backward seconds for one rank's batch. */
static void layer_times(const train_config_t *c, const tool_layer_t *l, double *fwd,
                        double *bwd) {
  const double rate = c->node_flops / c->ppn;
  *fwd = l->fwd_s >= 0 ? l->fwd_s : l->flops * c->batch / rate;
  *bwd = l->bwd_s >= 0 ? l->bwd_s : c->backward_factor * l->flops * c->batch / rate;
}

int train_step(const train_config_t *c, train_result_t *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  step_state_t st;
  memset(&st, 0, sizeof st);
  st.c = c;
  st.r = r;
  st.err = err;
  st.errlen = errlen;
  if (make_topology(c, &st.topo, &st.tp) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "topology of %d x %d ranks: %s", c->nodes, c->ppn, mpiar_last_error());
    return -1;
  }
  const tool_model_t *m = c->model;
  const size_t es = mpiar_dtype_size(c->dtype);
  double t = 0;
  for (int i = 0; i < m->nlayers; i++) {
    double fwd, bwd;
    layer_times(c, &m->layers[i], &fwd, &bwd);
    t += fwd;
  }
  r->forward_s = t;
  /* Backward: the last layer first; a layer's gradients are ready when its backward work ends. */
  size_t bucket = 0;
  double bucket_ready = 0;
  for (int i = m->nlayers - 1; i >= 0 && !st.failed; i--) {
    const tool_layer_t *l = &m->layers[i];
    double fwd, bwd;
    layer_times(c, l, &fwd, &bwd);
    t += bwd;
    for (int k = l->first + l->ntensors - 1; k >= l->first; k--) {
      const size_t b = m->t[k].count * es;
      r->bytes += b;
      /* Without overlap every message waits for the end of the pass (added up below). */
      const double ready = c->overlap ? t : 0;
      if (c->fusion_bytes == 0 || b >= c->fusion_bytes) {
        launch(&st, bucket, bucket_ready); /* what was buffered goes first, in order */
        bucket = 0;
        launch(&st, b, ready);
        continue;
      }
      if (bucket + b > c->fusion_bytes) {
        launch(&st, bucket, bucket_ready);
        bucket = 0;
      }
      bucket += b;
      bucket_ready = ready;
      if (bucket >= c->fusion_bytes) {
        launch(&st, bucket, bucket_ready);
        bucket = 0;
      }
    }
  }
  r->backward_s = t - r->forward_s;
  launch(&st, bucket, c->overlap ? t : 0);
  if (c->overlap) {
    r->step_s = st.comm_free > t ? st.comm_free : t;
  } else {
    r->step_s = t + r->comm_s; /* every message after the backward pass, one after another */
  }
  r->exposed_s = r->step_s - t;
  size_t used = 0;
  r->choices[0] = '\0';
  for (int k = 0; k < st.nused && used < sizeof r->choices; k++) {
    used += (size_t)snprintf(r->choices + used, sizeof r->choices - used, "%s%s x%d",
                             k ? ", " : "", st.used[k]->name, st.used_n[k]);
  }
  if (c->ps_servers > 0) {
    snprintf(r->choices, sizeof r->choices, "parameter server, %d server%s", c->ps_servers,
             c->ps_servers == 1 ? "" : "s");
  } else if (c->nodes * c->ppn == 1) {
    snprintf(r->choices, sizeof r->choices, "none (one rank)");
  }
  free(st.cache);
  mpiar__topology_destroy(&st.topo);
  return st.failed ? -1 : 0;
}
