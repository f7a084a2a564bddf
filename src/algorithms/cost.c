/*
 * Two-level cost helpers: which level a one-level formula applies to, and the load of one round
 * of a pattern on the node ports, for the flat algorithms' estimates on a topology.
 */
#include <stdlib.h>

#include "algorithms/util.h"

int mpiar__cost_one_level(const mpiar__topology_t *topo, const mpiar__cost_params_t *c,
                          mpiar__cost_params_t *link) {
  *link = *c;
  if (topo == NULL || topo->nnodes == 1) {
    return 1;
  }
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
