/* Small arithmetic shared by the builders. */
#include "algorithms/util.h"
#include "base/common.h"

int mpiar__pof2_floor(int p) {
  int q = 1;
  while (q <= p / 2) {
    q *= 2;
  }
  return q;
}

int mpiar__log2i(int pof2) {
  int l = 0;
  while ((1 << l) < pof2) {
    l++;
  }
  return l;
}

int mpiar__build_trivial(mpiar__schedule_t *s, int *done) {
  s->scratch_elems = 0;
  *done = 1;
  if (s->count == 0) {
    return MPIAR_SUCCESS;
  }
  if (s->nranks == 1) {
    /* One rank: the result is the input; out of place it is one copy. */
    long id =
        s->in_place ? 0 : mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count, NULL, 0);
    return id < 0 ? (int)id : MPIAR_SUCCESS;
  }
  *done = 0;
  return MPIAR_SUCCESS;
}

void mpiar__radix_groups(int p, int r, int k, mpiar__radix_groups_t *g) {
  g->k = p < k ? p : k;
  g->pp = 1;
  g->L = 0;
  while (g->pp <= p / g->k) {
    g->pp *= g->k;
    g->L++;
  }
  const int pp = g->pp;
  int v = (int)((size_t)r * (size_t)pp / (size_t)p);
  while (v + 1 < pp && (int)mpiar__block_off((size_t)p, pp, v + 1) <= r) {
    v++;
  }
  while ((int)mpiar__block_off((size_t)p, pp, v) > r) {
    v--;
  }
  g->v = v;
  g->lead = (int)mpiar__block_off((size_t)p, pp, v);
  g->gsize = (int)mpiar__block_len((size_t)p, pp, v);
}

int mpiar__radix_collapse(mpiar__schedule_t *s, const mpiar__radix_groups_t *g, int tag_post,
                          int *done, long *last, int *in_out) {
  const int r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;
  *done = 0;
  if (r != g->lead) {
    /* Hand the vector to the group's lowest rank, then wait for the result. */
    long snd;
    MPIAR__STEP(snd, mpiar__sched_send(s, g->lead, 0, mpiar__own(s, 0), n, NULL, 0));
    const long deps[] = {s->in_place ? snd : -1};
    MPIAR__STEP(id, mpiar__sched_recv(s, g->lead, tag_post, mpiar__out(0), n, deps, 1));
    *done = 1;
    return MPIAR_SUCCESS;
  }
  if (g->gsize > 1) {
    /* Fold the group's vectors in rank order: own op x_{r+1} op ... (lower ranks in a). */
    long rcv[8];
    for (int m = 1; m < g->gsize; m++) {
      MPIAR__STEP(rcv[m],
                  mpiar__sched_recv(s, r + m, 0, mpiar__scratch((size_t)(m - 1) * n), n, NULL, 0));
    }
    for (int m = 1; m < g->gsize; m++) {
      const long deps[] = {rcv[m], *last};
      MPIAR__STEP(*last,
                  mpiar__sched_reduce(s, mpiar__out(0), m == 1 ? mpiar__own(s, 0) : mpiar__out(0),
                                      mpiar__scratch((size_t)(m - 1) * n), n, deps, 2));
    }
    *in_out = 1;
  }
cleanup:
  return rc;
}

double mpiar__radix_collapse_cost(int p, int pp, double n, const mpiar__cost_params_t *l) {
  if (pp == p) {
    return 0.0;
  }
  const int g = (p + pp - 1) / pp;
  const double msg = l->alpha + n * l->beta;
  return (g - 1) * (msg + n * l->gamma) + (g - 1) * msg;
}
