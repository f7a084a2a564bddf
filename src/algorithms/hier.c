/*
 * The shared part of the hierarchical builders (see hier.h): channels, the layout of blocks and
 * pieces, the intra-node phases and the driver; and the inter-node port model for their costs.
 *
 * Intra-node phases (node of k ranks, local rank l, block b = elements block_off(n, k, b)):
 *  - reduce-scatter ring, shifted so that local rank l ends with block l: in step s (0 <= s <
 *    k-1) it sends block l-s-1 to l+1 and receives block l-s-2 from l-1, which it reduces with
 *    its own data. Block b's chain starts at local rank b+1 and ends at b; the partial received
 *    is operand a when its ranks are all below this one (the chain did not wrap past k-1), so
 *    the node's reduction of every element has one fixed order.
 *  - allgather ring: in step s local rank l sends block l-s (its own at s = 0, once the
 *    inter-node phase has completed it) to l+1 and receives block l-s-1 from l-1.
 * Every element is reduced along one chain inside its node, then by one inter-node allreduce that
 * computes it once on one rank and copies it to the other nodes, then copied inside each node:
 * every rank ends with the bits of that one computation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/hier.h"
#include "base/common.h"

static int mod(int a, int m) {
  return ((a % m) + m) % m;
}

/* The block of a k-way partition of n elements (mpiar__block_off) holding element x < n. */
static int block_of(size_t n, int k, size_t x) {
  const size_t q = n / (size_t)k, r = n % (size_t)k;
  if (x < r * (q + 1)) {
    return (int)(x / (q + 1));
  }
  return (int)(r + (x - r * (q + 1)) / q);
}

int mpiar__steps_push(mpiar__steps_t *l, long step) {
  if (step < 0) {
    return MPIAR_SUCCESS;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    long *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "list of %zu steps", cap);
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = step;
  return MPIAR_SUCCESS;
}

/* ---- channels ---- */

static mpiar__hier_peer_t *channel(mpiar__hier_t *h, int peer) {
  for (int i = 0; i < h->npeers; i++) {
    if (h->peers[i].peer == peer) {
      return &h->peers[i];
    }
  }
  if (h->npeers == h->cap_peers) {
    int cap = h->cap_peers ? 2 * h->cap_peers : 8;
    mpiar__hier_peer_t *v = realloc(h->peers, (size_t)cap * sizeof *v);
    if (v == NULL) {
      mpiar__error(MPIAR_ERR_NOMEM, "channels to %d peers", cap);
      return NULL;
    }
    h->peers = v;
    h->cap_peers = cap;
  }
  mpiar__hier_peer_t *c = &h->peers[h->npeers++];
  memset(c, 0, sizeof *c);
  c->peer = peer;
  return c;
}

static int remember(long **v, size_t *n, size_t *cap, long step) {
  if (*n == *cap) {
    size_t ncap = *cap ? 2 * *cap : 16;
    long *nv = realloc(*v, ncap * sizeof *nv);
    if (nv == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "channel of %zu messages", ncap);
    }
    *v = nv;
    *cap = ncap;
  }
  (*v)[(*n)++] = step;
  return MPIAR_SUCCESS;
}

/*
 * Append the q-th message of one direction of a channel. Below MPIAR__TAG_LIMIT messages the
 * tag q is unique on the pair; beyond, the message also depends on the one that used its tag
 * before (`hist` holds the steps of the earlier messages).
 */
static long channel_step(mpiar__hier_t *h, int send, int peer, mpiar__operand_t buf, size_t count,
                         const long *deps, size_t ndeps) {
  mpiar__hier_peer_t *c = channel(h, peer);
  if (c == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  const size_t q = send ? c->nsend : c->nrecv;
  const long *hist = send ? c->send : c->recv;
  long *all = NULL;
  if (q >= MPIAR__TAG_LIMIT) {
    all = malloc((ndeps + 1) * sizeof *all);
    if (all == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "dependencies of %zu steps", ndeps + 1);
    }
    if (ndeps > 0) {
      memcpy(all, deps, ndeps * sizeof *all);
    }
    all[ndeps++] = hist[q - MPIAR__TAG_LIMIT];
    deps = all;
  }
  const int tag = (int)(q % MPIAR__TAG_LIMIT);
  long id = send ? mpiar__sched_send(h->s, peer, tag, buf, count, deps, ndeps)
                 : mpiar__sched_recv(h->s, peer, tag, buf, count, deps, ndeps);
  free(all);
  if (id >= 0) {
    int rc = send ? remember(&c->send, &c->nsend, &c->cap_send, id)
                  : remember(&c->recv, &c->nrecv, &c->cap_recv, id);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
  }
  return id;
}

long mpiar__hier_send(mpiar__hier_t *h, int peer, mpiar__operand_t src, size_t count,
                      const long *deps, size_t ndeps) {
  return channel_step(h, 1, peer, src, count, deps, ndeps);
}

long mpiar__hier_recv(mpiar__hier_t *h, int peer, mpiar__operand_t dst, size_t count,
                      const long *deps, size_t ndeps) {
  return channel_step(h, 0, peer, dst, count, deps, ndeps);
}

size_t mpiar__hier_scratch(mpiar__hier_t *h, size_t elems) {
  const size_t off = h->s->scratch_elems;
  h->s->scratch_elems += elems;
  return off;
}

/* ---- layout ---- */

static int cmp_size(const void *a, const void *b) {
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* Index of @p x (relative to the chunk) in the sorted cut points (x is one of them). */
static int cut_index(const mpiar__hier_t *h, size_t x) {
  int lo = 0, hi = h->npieces;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (h->cut[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* The chunk's pieces: every node size's cut points (relative), sorted, without repeats. */
static int make_pieces(mpiar__hier_t *h) {
  const mpiar__topology_t *t = h->t;
  const size_t n = h->n;
  uint8_t *seen = calloc((size_t)t->max_node_size + 1, 1);
  size_t ncuts = 0;
  if (seen == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "piece layout");
  }
  for (int i = 0; i < t->nnodes; i++) {
    if (!seen[t->node_size[i]]) {
      seen[t->node_size[i]] = 1;
      ncuts += (size_t)t->node_size[i] + 1;
    }
  }
  free(h->cut);
  h->cut = malloc(ncuts * sizeof *h->cut);
  if (h->cut == NULL) {
    free(seen);
    return mpiar__error(MPIAR_ERR_NOMEM, "piece layout of %zu cuts", ncuts);
  }
  size_t m = 0;
  for (int k = 1; k <= t->max_node_size; k++) {
    for (int b = 0; seen[k] && b <= k; b++) {
      h->cut[m++] = mpiar__block_off(n, k, b);
    }
  }
  free(seen);
  qsort(h->cut, m, sizeof *h->cut, cmp_size);
  size_t u = 0;
  for (size_t i = 0; i < m; i++) {
    if (u == 0 || h->cut[i] != h->cut[u - 1]) {
      h->cut[u++] = h->cut[i];
    }
  }
  h->npieces = (int)u - 1;
  h->first_piece = cut_index(h, h->blk_off - h->base);
  h->end_piece = cut_index(h, h->blk_off - h->base + h->blk_len);
  return MPIAR_SUCCESS;
}

int mpiar__hier_init(mpiar__hier_t *h, mpiar__schedule_t *s) {
  memset(h, 0, sizeof *h);
  h->s = s;
  h->t = s->topo;
  h->node = h->t->node_of[s->rank];
  h->local = h->t->local_rank[s->rank];
  h->k = h->t->node_size[h->node];
  h->own_output = h->k > 1 || s->in_place;
  h->p1_sent = malloc((size_t)h->k * sizeof *h->p1_sent);
  if (h->p1_sent == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "hierarchical schedule state");
  }
  return MPIAR_SUCCESS;
}

int mpiar__hier_chunk(mpiar__hier_t *h, size_t base, size_t n) {
  h->base = base;
  h->n = n;
  h->blk_off = base + mpiar__block_off(n, h->k, h->local);
  h->blk_len = mpiar__block_len(n, h->k, h->local);
  h->p1_done = -1;
  for (int b = 0; b < h->k; b++) {
    h->p1_sent[b] = -1;
  }
  return make_pieces(h);
}

void mpiar__hier_free(mpiar__hier_t *h) {
  for (int i = 0; i < h->npeers; i++) {
    free(h->peers[i].send);
    free(h->peers[i].recv);
  }
  free(h->peers);
  free(h->cut);
  free(h->p1_sent);
  memset(h, 0, sizeof *h);
}

int mpiar__hier_member(const mpiar__hier_t *h, const mpiar__hier_piece_t *pc, int node) {
  const int k = h->t->node_size[node];
  return mpiar__topology_rank(h->t, node, block_of(h->n, k, pc->off - h->base));
}

/* ---- intra-node phases ---- */

/* Phase 1: the reduce-scatter ring inside the node (see the file header). */
static int intra_reduce_scatter(mpiar__hier_t *h) {
  mpiar__schedule_t *s = h->s;
  const int k = h->k, l = h->local, ip = s->in_place;
  const size_t n = h->n, base = h->base, maxblk = mpiar__block_len(n, k, 0);
  const int next = mpiar__topology_rank(h->t, h->node, (l + 1) % k);
  const int prev = mpiar__topology_rank(h->t, h->node, (l + k - 1) % k);
  const size_t slots = ip ? mpiar__hier_scratch(h, 2 * maxblk) : 0;
  long slot_reader[2] = {-1, -1};
  long *red = malloc((size_t)k * sizeof *red); /* per block: this rank's reduction of it */
  int rc = MPIAR_SUCCESS;
  long id;
  if (red == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "hierarchical reduce-scatter of %d blocks", k);
  }
  for (int b = 0; b < k; b++) {
    red[b] = -1;
  }
  for (int st = 0; st < k - 1; st++) {
    const int sb = mod(l - st - 1, k), rb = mod(l - st - 2, k);
    const size_t sbo = base + mpiar__block_off(n, k, sb), rbo = base + mpiar__block_off(n, k, rb);
    const size_t rbl = mpiar__block_len(n, k, rb);
    const long sdeps[] = {red[sb]};
    MPIAR__STEP(id, mpiar__hier_send(h, next, st == 0 ? mpiar__own(s, sbo) : mpiar__out(sbo),
                                     mpiar__block_len(n, k, sb), sdeps, 1));
    /* Out of place the first send reads INPUT: OUTPUT of that block stays untouched. */
    h->p1_sent[sb] = (st == 0 && !ip) ? -1 : id;
    const mpiar__operand_t dst =
        ip ? mpiar__scratch(slots + (size_t)(st % 2) * maxblk) : mpiar__out(rbo);
    const long rdeps[] = {ip ? slot_reader[st % 2] : -1};
    long rcv;
    MPIAR__STEP(rcv, mpiar__hier_recv(h, prev, dst, rbl, rdeps, 1));
    const long ddeps[] = {rcv};
    const mpiar__operand_t mine = mpiar__own(s, rbo);
    const int partial_first = (rb + 1) % k < l; /* its chain holds lower local ranks only */
    MPIAR__STEP(red[rb], partial_first
                             ? mpiar__sched_reduce(s, mpiar__out(rbo), dst, mine, rbl, ddeps, 1)
                             : mpiar__sched_reduce(s, mpiar__out(rbo), mine, dst, rbl, ddeps, 1));
    slot_reader[st % 2] = red[rb];
  }
  h->p1_done = red[l];

cleanup:
  free(red);
  return rc;
}

/* Phase 3: the allgather ring inside the node, once @p ready have completed this rank's block. */
static int intra_allgather(mpiar__hier_t *h, const mpiar__steps_t *ready) {
  const int k = h->k, l = h->local;
  const size_t n = h->n, base = h->base;
  const int next = mpiar__topology_rank(h->t, h->node, (l + 1) % k);
  const int prev = mpiar__topology_rank(h->t, h->node, (l + k - 1) % k);
  int rc = MPIAR_SUCCESS;
  long id = -1, got = -1;
  for (int st = 0; st < k - 1; st++) {
    const int sb = mod(l - st, k), rb = mod(l - st - 1, k);
    const size_t sbo = base + mpiar__block_off(n, k, sb), rbo = base + mpiar__block_off(n, k, rb);
    /*
     * Sends leave in step order: a forward waits for the previous send too, so a block that
     * arrived early does not hold the link while this rank's own block is ready.
     */
    const long fdeps[] = {got, id};
    MPIAR__STEP(id, mpiar__hier_send(h, next, mpiar__out(sbo), mpiar__block_len(n, k, sb),
                                     st == 0 ? ready->v : fdeps, st == 0 ? ready->n : 2));
    /* The block overwrites OUTPUT where phase 1 last read it (its send followed every write). */
    const long rdeps[] = {h->p1_sent[rb]};
    MPIAR__STEP(got,
                mpiar__hier_recv(h, prev, mpiar__out(rbo), mpiar__block_len(n, k, rb), rdeps, 1));
  }

cleanup:
  return rc;
}

int mpiar__hier_build(mpiar__schedule_t *s, mpiar__builder_fn flat, mpiar__hier_inter_fn inter) {
  if (!mpiar__topology_is_hierarchical(s->topo)) {
    return flat(s);
  }
  if (s->topo->nranks != s->nranks) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "%s: topology of %d ranks for %d ranks", s->algorithm,
                        s->topo->nranks, s->nranks);
  }
  int rc = MPIAR_SUCCESS, done = 0;
  mpiar__hier_t h;
  mpiar__steps_t ready = {NULL, 0, 0};
  memset(&h, 0, sizeof h);
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  MPIAR__CHECK(mpiar__hier_init(&h, s));
  const size_t chunk = mpiar__hier_chunk_elems(s);
  for (size_t base = 0; base < s->count; base += chunk) {
    /* Each chunk is a whole two-level allreduce of its own; they share only the channels. */
    MPIAR__CHECK(mpiar__hier_chunk(&h, base, s->count - base < chunk ? s->count - base : chunk));
    ready.n = 0;
    if (h.k > 1) {
      MPIAR__CHECK(intra_reduce_scatter(&h));
    }
    for (int i = h.first_piece; i < h.end_piece; i++) {
      const mpiar__hier_piece_t pc = {base + h.cut[i], h.cut[i + 1] - h.cut[i], i, h.node,
                                      h.t->nnodes};
      MPIAR__CHECK(inter(&h, &pc, &ready));
    }
    if (h.k > 1) {
      MPIAR__CHECK(intra_allgather(&h, &ready));
    }
  }

cleanup:
  mpiar__hier_free(&h);
  free(ready.v);
  return rc;
}

/* ---- costs ---- */

/*
 * The members' next messages, ordered by ready time (ties: lower member first): a binary heap
 * of member indices over their ready times.
 */
typedef struct port_heap {
  int *m;
  const double *ready;
  int n;
} port_heap_t;

static int heap_less(const port_heap_t *h, int a, int b) {
  return h->ready[a] < h->ready[b] || (h->ready[a] == h->ready[b] && a < b);
}

static void heap_sift(port_heap_t *h, int i) {
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) {
      return;
    }
    if (c + 1 < h->n && heap_less(h, h->m[c + 1], h->m[c])) {
      c++;
    }
    if (!heap_less(h, h->m[c], h->m[i])) {
      return;
    }
    const int x = h->m[c];
    h->m[c] = h->m[i];
    h->m[i] = x;
    i = c;
  }
}

double mpiar__hier_port_time(int k, int nsteps, mpiar__port_step_fn step, const void *arg,
                             const mpiar__cost_params_t *c) {
  double *ready = calloc((size_t)k, sizeof *ready);
  int *next = calloc((size_t)k, sizeof *next), *order = malloc((size_t)k * sizeof *order);
  double port = 0.0, end = 0.0, msg, red;
  if (ready == NULL || next == NULL || order == NULL) {
    free(ready);
    free(next);
    free(order);
    /* An upper bound without the per-member state: no step overlaps the next. */
    for (int j = 0; j < nsteps; j++) {
      step(j, arg, &msg, &red);
      end += k * (c->alpha_inter + msg * c->beta_inter) + red * c->gamma;
    }
    return end;
  }
  /*
   * The port sends whichever message became ready first (a member's next message is ready once
   * its previous one has arrived and been reduced): the one-port FIFO of the simulator.
   */
  port_heap_t h = {order, ready, k};
  for (int m = 0; m < k; m++) {
    order[m] = m;
  }
  while (h.n > 0 && nsteps > 0) {
    const int m = order[0];
    step(next[m], arg, &msg, &red);
    port = (port > ready[m] ? port : ready[m]) + c->alpha_inter + msg * c->beta_inter;
    ready[m] = port + red * c->gamma;
    if (++next[m] == nsteps) {
      end = ready[m] > end ? ready[m] : end;
      order[0] = order[--h.n];
    }
    heap_sift(&h, 0);
  }
  free(ready);
  free(next);
  free(order);
  return end;
}

size_t mpiar__hier_chunk_elems(const mpiar__schedule_t *s) {
  const size_t seg = s->segment_elems, p = (size_t)s->nranks;
  return seg == 0 || seg >= (s->count + p - 1) / p ? s->count : seg * p;
}

int mpiar__hier_npieces(const mpiar__topology_t *topo, size_t count) {
  mpiar__schedule_t s;
  mpiar__schedule_init(&s, 0, topo->nranks, count, 1, 0, "cost", 0);
  s.topo = topo;
  mpiar__hier_t h;
  /* Without memory for the layout, count the largest node's blocks. */
  const int n =
      mpiar__hier_init(&h, &s) == MPIAR_SUCCESS && mpiar__hier_chunk(&h, 0, count) == MPIAR_SUCCESS
          ? h.npieces
          : topo->max_node_size;
  mpiar__hier_free(&h);
  return n;
}

double mpiar__hier_intra_time(const mpiar__topology_t *topo, double bytes,
                              const mpiar__cost_params_t *c) {
  const double k = topo->max_node_size, b = bytes / k;
  return (k - 1) * (c->alpha + b * (c->beta + c->gamma)) + (k - 1) * (c->alpha + b * c->beta);
}

double mpiar__hier_cost(const mpiar__topology_t *topo, size_t bytes, size_t elem_size,
                        size_t segment_bytes, const mpiar__cost_params_t *c,
                        mpiar__hier_inter_cost_fn inter) {
  if (bytes == 0 || elem_size == 0) {
    return 0.0;
  }
  mpiar__schedule_t s;
  mpiar__schedule_init(&s, 0, topo->nranks, bytes / elem_size, elem_size, 0, "cost",
                       segment_bytes / elem_size);
  const size_t chunk = mpiar__hier_chunk_elems(&s);
  const double nchunks = ceil((double)s.count / (double)chunk);
  const double cb = (double)(chunk * elem_size);
  const double intra = mpiar__hier_intra_time(topo, cb, c);
  const double between = inter(topo, cb, mpiar__hier_npieces(topo, chunk), c);
  /*
   * One chunk: exact on regular topologies. Several: after the first chunk, each further one
   * adds the slower of the ranks' ports (its intra-node phases) and the node port (its
   * inter-node phase), which work at the same time; an estimate.
   */
  return intra + between + (nchunks - 1) * (intra > between ? intra : between);
}
