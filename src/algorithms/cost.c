/*
 * Cost helpers: the protocol term of a message (the eager limit and the rendezvous handshake
 * beyond it), which level a one-level formula applies to, and the load of one round of a pattern
 * on the node ports, for the flat algorithms' estimates on a topology.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/util.h"

double mpiar__cost_handshake(const mpiar__cost_params_t *c, double bytes) {
  return bytes > c->eager_bytes ? c->rendezvous : 0.0;
}

mpiar__cost_params_t mpiar__cost_at(const mpiar__cost_params_t *c, double bytes) {
  mpiar__cost_params_t l = *c;
  l.alpha += mpiar__cost_handshake(c, bytes);
  return l;
}

double mpiar__cost_halving_handshakes(const mpiar__cost_params_t *c, double n, double q) {
  double h = 0.0;
  for (double half = n / 2; half >= n / q; half /= 2) {
    h += mpiar__cost_handshake(c, half);
  }
  return h;
}

int mpiar__cost_one_level(const mpiar__topology_t *topo, const mpiar__cost_params_t *c,
                          mpiar__cost_params_t *link) {
  *link = *c;
  if (topo == NULL || topo->nnodes == 1) {
    return 1;
  }
  /* The protocol term was measured on one node; across nodes neither level's estimate has it. */
  link->rendezvous = 0.0;
  if (topo->max_node_size == 1) {
    link->alpha = c->alpha_inter;
    link->beta = c->beta_inter;
    return 1;
  }
  return 0;
}

void mpiar__cost_slow_link(const mpiar__topology_t *topo, const mpiar__cost_params_t *c,
                           mpiar__cost_params_t *link) {
  if (!mpiar__cost_one_level(topo, c, link)) {
    link->alpha = c->alpha > c->alpha_inter ? c->alpha : c->alpha_inter;
    link->beta = c->beta > c->beta_inter ? c->beta : c->beta_inter;
  }
}

void mpiar__round_load(const mpiar__topology_t *topo, mpiar__peer_fn peer, const void *arg,
                       mpiar__round_load_t *load) {
  int *sends = calloc(2 * (size_t)topo->nnodes, sizeof *sends);
  if (sends == NULL) {
    /* No memory for the tally: assume the worst a node can see, a message from each rank. */
    load->intra = 1;
    load->port = topo->max_node_size;
    return;
  }
  int *recvs = sends + topo->nnodes;
  load->intra = 0;
  load->port = 0;
  for (int r = 0; r < topo->nranks; r++) {
    const int q = peer(r, arg);
    if (q < 0) {
      continue;
    }
    const int a = topo->node_of[r], b = topo->node_of[q];
    if (a == b) {
      load->intra = 1;
      continue;
    }
    const int most = ++sends[a] > ++recvs[b] ? sends[a] : recvs[b];
    if (most > load->port) {
      load->port = most;
    }
  }
  free(sends);
}

double mpiar__round_time(const mpiar__round_load_t *load, const mpiar__cost_params_t *c,
                         double bytes) {
  const double intra = load->intra ? c->alpha + bytes * c->beta : 0.0;
  const double inter = load->port * (c->alpha_inter + bytes * c->beta_inter);
  return intra > inter ? intra : inter;
}

int mpiar__tally_init(mpiar__tally_t *t, const mpiar__topology_t *topo) {
  t->topo = topo;
  t->count = calloc(2 * ((size_t)topo->nranks + (size_t)topo->nnodes), sizeof *t->count);
  return t->count != NULL ? MPIAR_SUCCESS : MPIAR_ERR_NOMEM;
}

void mpiar__tally_free(mpiar__tally_t *t) {
  free(t->count);
  t->count = NULL;
}

void mpiar__tally_clear(mpiar__tally_t *t) {
  memset(t->count, 0, 2 * ((size_t)t->topo->nranks + (size_t)t->topo->nnodes) * sizeof *t->count);
}

void mpiar__tally_add(mpiar__tally_t *t, int from, int to) {
  const mpiar__topology_t *topo = t->topo;
  const int a = topo->node_of[from], b = topo->node_of[to];
  if (a == b) {
    t->count[2 * from]++;
    t->count[2 * to + 1]++;
  } else {
    int *node = t->count + 2 * topo->nranks;
    node[2 * a]++;
    node[2 * b + 1]++;
  }
}

void mpiar__tally_round(mpiar__tally_t *t, mpiar__peer_fn peer, const void *arg) {
  for (int r = 0; r < t->topo->nranks; r++) {
    const int q = peer(r, arg);
    if (q >= 0) {
      mpiar__tally_add(t, r, q);
    }
  }
}

double mpiar__tally_time(const mpiar__tally_t *t, const mpiar__cost_params_t *c, double bytes) {
  int own = 0, port = 0;
  for (int i = 0; i < 2 * t->topo->nranks; i++) {
    own = t->count[i] > own ? t->count[i] : own;
  }
  const int *node = t->count + 2 * t->topo->nranks;
  for (int i = 0; i < 2 * t->topo->nnodes; i++) {
    port = node[i] > port ? node[i] : port;
  }
  const double intra = own * (c->alpha + bytes * c->beta);
  const double inter = port * (c->alpha_inter + bytes * c->beta_inter);
  return intra > inter ? intra : inter;
}

/* Sub-step x->t of the round at distance x->d: a lead's partner, -1 for the other ranks. */
static int radix_peer(int rank, const void *arg) {
  const mpiar__radix_step_t *x = arg;
  mpiar__radix_groups_t g;
  mpiar__radix_groups(x->p, rank, x->k, &g);
  if (rank != g.lead) {
    return -1;
  }
  const int digit = (g.v / x->d) % g.k, ito = (digit + x->t) % g.k;
  return (int)mpiar__block_off((size_t)x->p, x->pp, g.v + (ito - digit) * x->d);
}

/* The collapse: a member's lead, -1 for a lead. */
static int radix_member_peer(int rank, const void *arg) {
  const mpiar__radix_step_t *x = arg;
  mpiar__radix_groups_t g;
  mpiar__radix_groups(x->p, rank, x->k, &g);
  return rank != g.lead ? g.lead : -1;
}

double mpiar__radix_round_time(mpiar__tally_t *t, mpiar__radix_step_t *x,
                               const mpiar__cost_params_t *c, double bytes) {
  mpiar__tally_clear(t);
  for (x->t = 1; x->t < x->k; x->t++) {
    mpiar__tally_round(t, radix_peer, x);
  }
  return mpiar__tally_time(t, c, bytes);
}

double mpiar__radix_collapse_time(mpiar__tally_t *t, const mpiar__radix_step_t *x,
                                  const mpiar__cost_params_t *c, double bytes) {
  if (x->pp == x->p) {
    return 0.0;
  }
  const int gs = (x->p + x->pp - 1) / x->pp;
  mpiar__tally_clear(t);
  mpiar__tally_round(t, radix_member_peer, x);
  return 2 * mpiar__tally_time(t, c, bytes) + (gs - 1) * bytes * c->gamma;
}

int mpiar__xor_peer(int rank, const void *arg) {
  const mpiar__xor_pattern_t *x = arg;
  if (x->mask == 0) {
    return rank < 2 * x->rem ? rank ^ 1 : -1;
  }
  if (rank < 2 * x->rem && rank % 2 == 0) {
    return -1;
  }
  const int v = rank < 2 * x->rem ? rank / 2 : rank - x->rem;
  const int w = v ^ x->mask;
  return w < x->rem ? 2 * w + 1 : w + x->rem;
}
