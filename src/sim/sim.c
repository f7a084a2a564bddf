/*
 * The simulator's event loop (see sim.h for the model and the checks).
 *
 * Every step of every rank gets a global id. Events (a step completing, a transfer ending) are
 * processed in time order, ties in the order they were scheduled, so a run is deterministic.
 * Matching: a hash table keyed by (destination, source, tag) holds, per key, a FIFO of either
 * posted sends waiting for a receive or posted receives waiting for a send; a new post pops the
 * oldest entry of the other kind. That is MPI's matching rule without wildcards.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "reduce_kernels/kernels.h"
#include "sim/sim.h"

enum {
  EV_DONE = 0,
  EV_XFER_END = 1,
  EV_NET_START = 2,  /* routed: a message enters the network (gid: its SEND) */
  EV_NET_RATES = 3,  /* routed: recompute the rates after entries at this time */
  EV_NET_FINISH = 4, /* routed: the next message leaves (gid: the rates' version) */
  EV_NET_DELIVER = 5 /* routed: a message arrives (gid: its SEND) */
};

typedef struct event {
  double t;
  uint64_t seq;
  int64_t gid;
  int type;
} event_t;

typedef struct slot {
  uint64_t key; /* 0: empty; else key + 1 */
  int64_t head, tail;
  int kind; /* MPIAR__STEP_SEND or _RECV while non-empty; -1 when empty */
} slot_t;

/* The symmetry a quotient simulation uses (sim.h, "Quotient simulation"). */
enum { SYM_NONE = 0, SYM_ROTATE, SYM_XOR };

typedef struct sim {
  const mpiar__sim_config_t *cfg;
  mpiar__sim_result_t *res;
  int p;
  int nreps; /* ranks simulated: p, or the representatives 0 .. K-1 of a symmetry */
  int sym;   /* SYM_* */
  int K;     /* the symmetry's step: every map is r -> r + jK or r -> r XOR jK */
  size_t es; /* element size */
  mpiar__schedule_t *sched;
  int64_t *base; /* first global id of each rank, p + 1 entries */
  int64_t nsteps;
  int *rank_of;
  uint32_t *remaining;
  int64_t *link;           /* SEND: matched receive; RECV: matched send; -1 */
  int64_t *mnext;          /* FIFO link in the matching table */
  int64_t *pnext;          /* FIFO link in a send-port queue */
  uint8_t *arrived;        /* SEND: transfer over */
  unsigned char **payload; /* SEND: data captured when posted (data mode) */
  /*
   * Ports: 0 .. p-1 are the ranks' own (messages inside a node, or every message without a
   * topology), p + i is node i's inter-node port. Each has a send side with a FIFO of ready
   * sends (port_head/tail) and a receive side (recv_busy, with the senders waiting for it).
   */
  int nports;
  const mpiar__topology_t *topo; /* NULL: one level */
  int64_t *port_head, *port_tail;
  uint8_t *send_busy, *recv_busy, *waiting;
  int *wait_next, *wait_head, *wait_tail;
  double *compute_free;
  /* matching table */
  slot_t *table;
  size_t table_mask;
  /* events */
  event_t *heap;
  size_t nheap, heap_cap;
  uint64_t seq;
  int64_t done;
  double now;
  int failed;
  /* data */
  unsigned char **in, **out, **tmp, **orig;
  uint8_t **out_init, **tmp_init;
  /* routed network (sim.h, "Routed networks"): messages in flight, link state */
  const mpiar__network_t *net;
  int nlinks, max_hops;
  double *link_cap, *link_rem, *link_bytes;
  int *link_cnt;
  int64_t *flow_gid;
  double *flow_left, *flow_rate;
  int *flow_route, *flow_hops;
  uint8_t *flow_frozen;
  int nflows, flow_cap;
  double net_last;     /* when flow_left was last brought up to date */
  int64_t net_version; /* the rates' version; a FINISH event of an older one is stale */
  int rates_pending;   /* an EV_NET_RATES is queued for this time */
} sim_t;

static int fail(sim_t *m, const char *fmt, ...) MPIAR__PRINTF(2, 3);
static int fail(sim_t *m, const char *fmt, ...) {
  if (!m->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->res->error, sizeof m->res->error, fmt, ap);
    va_end(ap);
    m->failed = 1;
    m->res->ok = 0;
  }
  return -1;
}

/* ---- events ---- */

static int ev_less(const event_t *a, const event_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int push(sim_t *m, int type, double t, int64_t gid) {
  if (m->nheap == m->heap_cap) {
    size_t cap = m->heap_cap ? 2 * m->heap_cap : 1024;
    event_t *h = realloc(m->heap, cap * sizeof *h);
    if (h == NULL) {
      return fail(m, "out of memory (event queue)");
    }
    m->heap = h;
    m->heap_cap = cap;
  }
  event_t e = {t, m->seq++, gid, type};
  size_t i = m->nheap++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!ev_less(&e, &m->heap[up])) {
      break;
    }
    m->heap[i] = m->heap[up];
    i = up;
  }
  m->heap[i] = e;
  return 0;
}

static event_t pop(sim_t *m) {
  event_t top = m->heap[0], last = m->heap[--m->nheap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= m->nheap) {
      break;
    }
    if (c + 1 < m->nheap && ev_less(&m->heap[c + 1], &m->heap[c])) {
      c++;
    }
    if (!ev_less(&m->heap[c], &last)) {
      break;
    }
    m->heap[i] = m->heap[c];
    i = c;
  }
  if (m->nheap > 0) {
    m->heap[i] = last;
  }
  return top;
}

/* ---- matching table ---- */

static slot_t *lookup(sim_t *m, uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 20) & m->table_mask;
  for (;;) {
    slot_t *s = &m->table[i];
    if (s->key == 0) {
      s->key = key + 1;
      s->head = s->tail = -1;
      s->kind = -1;
      return s;
    }
    if (s->key == key + 1) {
      return s;
    }
    i = (i + 1) & m->table_mask;
  }
}

static uint64_t match_key(const sim_t *m, int dst, int src, int tag) {
  return ((uint64_t)dst * (uint64_t)m->p + (uint64_t)src) * MPIAR__TAG_LIMIT + (uint64_t)tag;
}

/* ---- data helpers ---- */

static const mpiar__step_t *step_of(const sim_t *m, int64_t gid, int *rank) {
  int r = m->rank_of[gid];
  *rank = r;
  return &m->sched[r].steps[gid - m->base[r]];
}

static unsigned char *addr(sim_t *m, int r, mpiar__operand_t o) {
  switch (o.buf) {
  case MPIAR__BUF_INPUT:
    return m->in[r] + o.off * m->es;
  case MPIAR__BUF_OUTPUT:
    return m->out[r] + o.off * m->es;
  default:
    return m->tmp[r] + o.off * m->es;
  }
}

static uint8_t *init_map(sim_t *m, int r, mpiar__operand_t o) {
  if (o.buf == MPIAR__BUF_SCRATCH) {
    return m->tmp_init[r] + o.off;
  }
  if (o.buf == MPIAR__BUF_OUTPUT || m->sched[r].in_place) {
    return m->out_init[r] ? m->out_init[r] + o.off : NULL;
  }
  return NULL; /* INPUT is always initialised */
}

static int check_read(sim_t *m, int r, int64_t gid, mpiar__operand_t o, size_t count) {
  uint8_t *map = init_map(m, r, o);
  if (map == NULL || count == 0) {
    return 0;
  }
  const uint8_t *hole = memchr(map, 0, count);
  if (hole != NULL) {
    return fail(m, "%s rank %d step %lld reads uninitialised %s[%zu]", m->cfg->algorithm->name, r,
                (long long)(gid - m->base[r]), o.buf == MPIAR__BUF_SCRATCH ? "scratch" : "output",
                o.off + (size_t)(hole - map));
  }
  return 0;
}

static void mark_written(sim_t *m, int r, mpiar__operand_t o, size_t count) {
  uint8_t *map = init_map(m, r, o);
  if (map != NULL) {
    memset(map, 1, count);
  }
}

/* ---- step life cycle ---- */

/* The representative of rank @p q (q itself when every rank runs). */
static int rep_of(const sim_t *m, int q) {
  switch (m->sym) {
  case SYM_ROTATE:
    return q % m->K;
  case SYM_XOR:
    return q & (m->K - 1);
  default:
    return q;
  }
}

/*
 * The image of rank @p x under the inverse of the map that takes q's representative to @p q: a
 * message from x to q is, in the mirror image, a message from mirror(q, x) to rep_of(q).
 */
static int mirror(const sim_t *m, int q, int x) {
  switch (m->sym) {
  case SYM_ROTATE: {
    const long g = q - q % m->K;
    return (int)(((long)x - g + m->p) % m->p);
  }
  case SYM_XOR:
    return x ^ (q & ~(m->K - 1));
  default:
    return x;
  }
}

/*
 * The ports a message from @p src (a simulated rank) to @p dst uses: src's own, or its node's,
 * and on the receiving side those of dst's representative, whose timeline dst shares.
 * @return 1 if it crosses a node link.
 */
static int ports_of(const sim_t *m, int src, int dst, int *q, int *d) {
  const int dr = rep_of(m, dst);
  if (m->topo != NULL && m->topo->node_of[src] != m->topo->node_of[dst]) {
    *q = m->p + m->topo->node_of[src];
    *d = m->p + m->topo->node_of[dr];
    return 1;
  }
  *q = src;
  *d = dr;
  return 0;
}

static int complete(sim_t *m, int64_t gid, double t);

static int try_start(sim_t *m, int q) {
  if (m->send_busy[q] || m->port_head[q] < 0) {
    return 0;
  }
  int64_t g = m->port_head[q];
  int r, sq, d;
  const mpiar__step_t *st = step_of(m, g, &r);
  const int inter = ports_of(m, r, st->peer, &sq, &d);
  (void)sq; /* == q: the message sits in the queue of the port it uses */
  if (m->recv_busy[d]) {
    if (!m->waiting[q]) {
      m->waiting[q] = 1;
      m->wait_next[q] = -1;
      if (m->wait_tail[d] < 0) {
        m->wait_head[d] = q;
      } else {
        m->wait_next[m->wait_tail[d]] = q;
      }
      m->wait_tail[d] = q;
    }
    return 0;
  }
  m->port_head[q] = m->pnext[g];
  if (m->port_head[q] < 0) {
    m->port_tail[q] = -1;
  }
  m->send_busy[q] = 1;
  m->recv_busy[d] = 1;
  const double bytes = (double)(st->count * m->es);
  const mpiar__cost_params_t *c = &m->cfg->cost;
  const double t = inter ? c->alpha_inter + bytes * c->beta_inter : c->alpha + bytes * c->beta;
  return push(m, EV_XFER_END, m->now + t, g);
}

static int pair_sizes_ok(sim_t *m, int64_t send, int64_t recv) {
  int rs, rr;
  const mpiar__step_t *s = step_of(m, send, &rs), *q = step_of(m, recv, &rr);
  if (s->count != q->count) {
    return fail(m, "%s: rank %d sends %zu elements (tag %d) to rank %d, which posted %zu (%s)",
                m->cfg->algorithm->name, rs, s->count, s->tag, rr, q->count,
                s->count > q->count ? "truncated" : "short message");
  }
  return 0;
}

static int make_ready(sim_t *m, int64_t gid, double t) {
  int r;
  const mpiar__step_t *st = step_of(m, gid, &r);
  const size_t bytes = st->count * m->es;
  switch (st->kind) {
  case MPIAR__STEP_REDUCE:
  case MPIAR__STEP_COPY: {
    double start = t > m->compute_free[r] ? t : m->compute_free[r];
    double end = start + (double)bytes * m->cfg->cost.gamma;
    m->compute_free[r] = end;
    return push(m, EV_DONE, end, gid);
  }
  case MPIAR__STEP_SEND: {
    if (m->cfg->data) {
      if (check_read(m, r, gid, st->a, st->count) != 0) {
        return -1;
      }
      m->payload[gid] = malloc(bytes ? bytes : 1);
      if (m->payload[gid] == NULL) {
        return fail(m, "out of memory (message payload)");
      }
      memcpy(m->payload[gid], addr(m, r, st->a), bytes);
    }
    slot_t *s = lookup(m, match_key(m, rep_of(m, st->peer), mirror(m, st->peer, r), st->tag));
    if (s->kind == MPIAR__STEP_RECV) {
      int64_t rv = s->head;
      s->head = m->mnext[rv];
      if (s->head < 0) {
        s->tail = -1;
        s->kind = -1;
      }
      m->link[gid] = rv;
      m->link[rv] = gid;
      if (pair_sizes_ok(m, gid, rv) != 0) {
        return -1;
      }
    } else {
      m->mnext[gid] = -1;
      if (s->tail < 0) {
        s->head = gid;
      } else {
        m->mnext[s->tail] = gid;
      }
      s->tail = gid;
      s->kind = MPIAR__STEP_SEND;
    }
    if (m->net != NULL) {
      return push(m, EV_NET_START, t + m->cfg->cost.alpha, gid);
    }
    int q, d;
    ports_of(m, r, st->peer, &q, &d);
    m->pnext[gid] = -1;
    if (m->port_tail[q] < 0) {
      m->port_head[q] = gid;
    } else {
      m->pnext[m->port_tail[q]] = gid;
    }
    m->port_tail[q] = gid;
    return try_start(m, q);
  }
  default: { /* RECV */
    slot_t *s = lookup(m, match_key(m, r, st->peer, st->tag));
    if (s->kind == MPIAR__STEP_SEND) {
      int64_t sd = s->head;
      s->head = m->mnext[sd];
      if (s->head < 0) {
        s->tail = -1;
        s->kind = -1;
      }
      m->link[gid] = sd;
      m->link[sd] = gid;
      if (pair_sizes_ok(m, sd, gid) != 0) {
        return -1;
      }
      if (m->arrived[sd]) {
        return complete(m, gid, t);
      }
      return 0;
    }
    m->mnext[gid] = -1;
    if (s->tail < 0) {
      s->head = gid;
    } else {
      m->mnext[s->tail] = gid;
    }
    s->tail = gid;
    s->kind = MPIAR__STEP_RECV;
    return 0;
  }
  }
}

static int do_data(sim_t *m, int64_t gid) {
  int r;
  const mpiar__step_t *st = step_of(m, gid, &r);
  const size_t bytes = st->count * m->es;
  mpiar_op_t op = m->cfg->op == MPIAR_AVG ? MPIAR_SUM : m->cfg->op;
  switch (st->kind) {
  case MPIAR__STEP_RECV:
    memcpy(addr(m, r, st->dst), m->payload[m->link[gid]], bytes);
    free(m->payload[m->link[gid]]);
    m->payload[m->link[gid]] = NULL;
    mark_written(m, r, st->dst, st->count);
    return 0;
  case MPIAR__STEP_REDUCE:
    if (check_read(m, r, gid, st->a, st->count) || check_read(m, r, gid, st->b, st->count)) {
      return -1;
    }
    mpiar__reduce(addr(m, r, st->dst), addr(m, r, st->a), addr(m, r, st->b), st->count,
                  m->cfg->dtype, op);
    if (m->cfg->op == MPIAR_AVG && st->final) {
      /* As the MPI executor: each element is divided by the reduction that completes it. */
      mpiar__divide(addr(m, r, st->dst), addr(m, r, st->dst), st->count, m->cfg->dtype,
                    (double)m->p);
    }
    mark_written(m, r, st->dst, st->count);
    return 0;
  case MPIAR__STEP_COPY:
    if (check_read(m, r, gid, st->a, st->count)) {
      return -1;
    }
    memmove(addr(m, r, st->dst), addr(m, r, st->a), bytes);
    mark_written(m, r, st->dst, st->count);
    return 0;
  default:
    return 0;
  }
}

static int complete(sim_t *m, int64_t gid, double t) {
  int r;
  const mpiar__step_t *st = step_of(m, gid, &r);
  (void)st;
  if (m->cfg->data && do_data(m, gid) != 0) {
    return -1;
  }
  m->done++;
  if (t > m->res->time_s) {
    m->res->time_s = t;
  }
  const mpiar__schedule_t *s = &m->sched[r];
  const int64_t local = gid - m->base[r];
  for (uint32_t i = s->succ_first[local]; i < s->succ_first[local + 1]; i++) {
    const int64_t succ = m->base[r] + s->succ[i];
    if (--m->remaining[succ] == 0 && make_ready(m, succ, t) != 0) {
      return -1;
    }
  }
  return 0;
}

static int xfer_end(sim_t *m, int64_t g) {
  int r, q, d;
  const mpiar__step_t *st = step_of(m, g, &r);
  ports_of(m, r, st->peer, &q, &d);
  m->send_busy[q] = 0;
  m->recv_busy[d] = 0;
  m->arrived[g] = 1;
  if (complete(m, g, m->now) != 0) {
    return -1;
  }
  if (m->link[g] >= 0 && complete(m, m->link[g], m->now) != 0) {
    return -1;
  }
  if (try_start(m, q) != 0) {
    return -1;
  }
  /* Senders that waited for this receive port try again, in the order they started waiting. */
  int w = m->wait_head[d];
  m->wait_head[d] = m->wait_tail[d] = -1;
  while (w >= 0) {
    int nx = m->wait_next[w];
    m->waiting[w] = 0;
    if (try_start(m, w) != 0) {
      return -1;
    }
    w = nx;
  }
  return 0;
}

/* ---- routed networks (sim.h, "Routed networks") ---- */

/* Bring every message's remaining bytes up to now at its current rate. */
static void net_advance(sim_t *m) {
  const double dt = m->now - m->net_last;
  if (dt > 0) {
    for (int f = 0; f < m->nflows; f++) {
      m->flow_left[f] -= m->flow_rate[f] * dt;
    }
  }
  m->net_last = m->now;
}

/* A link's share when it was queued, valid while the link still has that many unfixed messages. */
typedef struct share_item {
  double share;
  int link, cnt;
} share_item_t;

static int share_less(const share_item_t *a, const share_item_t *b) {
  return a->share < b->share || (a->share == b->share && a->link < b->link);
}

static int share_push(share_item_t **h, size_t *n, size_t *cap, share_item_t x) {
  if (*n == *cap) {
    const size_t c = *cap ? 2 * *cap : 1024;
    share_item_t *g = realloc(*h, c * sizeof *g);
    if (g == NULL) {
      return -1;
    }
    *h = g;
    *cap = c;
  }
  size_t i = (*n)++;
  while (i > 0 && share_less(&x, &(*h)[(i - 1) / 2])) {
    (*h)[i] = (*h)[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  (*h)[i] = x;
  return 0;
}

static share_item_t share_pop(share_item_t *h, size_t *n) {
  const share_item_t top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) {
      break;
    }
    if (c + 1 < *n && share_less(&h[c + 1], &h[c])) {
      c++;
    }
    if (!share_less(&h[c], &last)) {
      break;
    }
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) {
    h[i] = last;
  }
  return top;
}

/*
 * Max-min fair rates by progressive filling: the link with the least capacity per unfixed
 * message (the lowest index among equals) fixes those messages at that share, which leaves their
 * other links; repeat. The links wait in a heap keyed by their share (an entry is stale once the
 * link's count of unfixed messages has changed) and each link lists its messages, so a round
 * costs the messages it fixes rather than a scan of every link and message. Then queue the next
 * departure.
 */
static int net_rates(sim_t *m) {
  const int nl = m->nlinks, nf = m->nflows, H = m->max_hops;
  for (int l = 0; l < nl; l++) {
    m->link_rem[l] = m->link_cap[l];
    m->link_cnt[l] = 0;
  }
  for (int f = 0; f < nf; f++) {
    m->flow_frozen[f] = 0;
    for (int h = 0; h < m->flow_hops[f]; h++) {
      m->link_cnt[m->flow_route[f * H + h]]++;
    }
  }
  /* Each link's messages in increasing order (first[l] .. first[l + 1] in list). */
  int *first = malloc(((size_t)nl + 1) * sizeof *first);
  int *list = malloc(((size_t)nf * (size_t)H + 1) * sizeof *list);
  share_item_t *heap = NULL;
  size_t nheap = 0, heap_cap = 0;
  int rc = 0;
  if (first == NULL || list == NULL) {
    rc = fail(m, "out of memory (link shares)");
    goto done;
  }
  first[0] = 0;
  for (int l = 0; l < nl; l++) {
    first[l + 1] = first[l] + m->link_cnt[l];
  }
  for (int f = 0; f < nf; f++) {
    for (int h = 0; h < m->flow_hops[f]; h++) {
      const int l = m->flow_route[f * H + h];
      list[first[l + 1] - m->link_cnt[l]--] = f;
    }
  }
  for (int l = 0; l < nl; l++) {
    m->link_cnt[l] = first[l + 1] - first[l];
    if (m->link_cnt[l] > 0) {
      const share_item_t x = {m->link_rem[l] / m->link_cnt[l], l, m->link_cnt[l]};
      if (share_push(&heap, &nheap, &heap_cap, x) != 0) {
        rc = fail(m, "out of memory (link shares)");
        goto done;
      }
    }
  }
  int unfixed = nf;
  while (unfixed > 0 && nheap > 0) {
    const share_item_t top = share_pop(heap, &nheap);
    const int best = top.link;
    if (m->link_cnt[best] != top.cnt || top.cnt == 0) {
      continue; /* stale */
    }
    const double share = top.share;
    for (int i = first[best]; i < first[best + 1]; i++) {
      const int f = list[i];
      if (m->flow_frozen[f]) {
        continue;
      }
      m->flow_frozen[f] = 1;
      m->flow_rate[f] = share;
      unfixed--;
      const int *route = &m->flow_route[f * H];
      for (int h = 0; h < m->flow_hops[f]; h++) {
        m->link_rem[route[h]] -= share;
        m->link_cnt[route[h]]--;
      }
    }
    /* Requeue the links those messages left, at their new shares. */
    for (int i = first[best]; i < first[best + 1]; i++) {
      const int *route = &m->flow_route[list[i] * H];
      for (int h = 0; h < m->flow_hops[list[i]]; h++) {
        const int l = route[h];
        if (m->link_cnt[l] > 0 && l != best) {
          const share_item_t x = {m->link_rem[l] / m->link_cnt[l], l, m->link_cnt[l]};
          if (share_push(&heap, &nheap, &heap_cap, x) != 0) {
            rc = fail(m, "out of memory (link shares)");
            goto done;
          }
        }
      }
    }
  }
done:
  free(first);
  free(list);
  free(heap);
  if (rc != 0) {
    return rc;
  }
  m->net_version++;
  double next = -1;
  for (int f = 0; f < nf; f++) {
    const double t = m->flow_left[f] > 0 ? m->flow_left[f] / m->flow_rate[f] : 0;
    if (next < 0 || t < next) {
      next = t;
    }
  }
  return next < 0 ? 0 : push(m, EV_NET_FINISH, m->now + next, m->net_version);
}

static int net_deliver(sim_t *m, int64_t g) {
  m->arrived[g] = 1;
  if (complete(m, g, m->now) != 0) {
    return -1;
  }
  return m->link[g] >= 0 ? complete(m, m->link[g], m->now) : 0;
}

/* A message enters the network: its route, its traffic, and a rate at this time's recount. */
static int net_start(sim_t *m, int64_t g) {
  int r;
  const mpiar__step_t *st = step_of(m, g, &r);
  const double bytes = (double)(st->count * m->es);
  if (m->nflows == m->flow_cap) {
    const int cap = m->flow_cap ? 2 * m->flow_cap : 256;
    int64_t *gid = realloc(m->flow_gid, (size_t)cap * sizeof *gid);
    if (gid != NULL) {
      m->flow_gid = gid;
    }
    double *left = realloc(m->flow_left, (size_t)cap * sizeof *left);
    if (left != NULL) {
      m->flow_left = left;
    }
    double *rate = realloc(m->flow_rate, (size_t)cap * sizeof *rate);
    if (rate != NULL) {
      m->flow_rate = rate;
    }
    int *route = realloc(m->flow_route, (size_t)cap * (size_t)m->max_hops * sizeof *route);
    if (route != NULL) {
      m->flow_route = route;
    }
    int *hops = realloc(m->flow_hops, (size_t)cap * sizeof *hops);
    if (hops != NULL) {
      m->flow_hops = hops;
    }
    uint8_t *frozen = realloc(m->flow_frozen, (size_t)cap);
    if (frozen != NULL) {
      m->flow_frozen = frozen;
    }
    if (!gid || !left || !rate || !route || !hops || !frozen) {
      return fail(m, "out of memory (messages in flight)");
    }
    m->flow_cap = cap;
  }
  const int f = m->nflows;
  int *route = &m->flow_route[f * m->max_hops];
  const int hops = mpiar__network_route(m->net, m->p, r, st->peer, route);
  m->res->hops_total += (size_t)hops;
  if (hops > m->res->hops_max) {
    m->res->hops_max = hops;
  }
  for (int h = 0; h < hops; h++) {
    m->link_bytes[route[h]] += bytes;
  }
  if (bytes == 0) {
    return push(m, EV_NET_DELIVER, m->now + hops * m->net->hop_latency, g);
  }
  net_advance(m);
  m->flow_gid[f] = g;
  m->flow_left[f] = bytes;
  m->flow_rate[f] = 0;
  m->flow_hops[f] = hops;
  m->nflows++;
  if (!m->rates_pending) {
    m->rates_pending = 1;
    return push(m, EV_NET_RATES, m->now, 0);
  }
  return 0;
}

/* The next departure: messages whose last byte has passed leave, and arrive after their hops. */
static int net_finish(sim_t *m, int64_t version) {
  if (version != m->net_version) {
    return 0;
  }
  net_advance(m);
  int kept = 0;
  for (int f = 0; f < m->nflows; f++) {
    const int64_t g = m->flow_gid[f];
    int r;
    const mpiar__step_t *st = step_of(m, g, &r);
    const double bytes = (double)(st->count * m->es);
    if (m->flow_left[f] <= 1e-9 * bytes) {
      if (push(m, EV_NET_DELIVER, m->now + m->flow_hops[f] * m->net->hop_latency, g) != 0) {
        return -1;
      }
      continue;
    }
    m->flow_gid[kept] = g;
    m->flow_left[kept] = m->flow_left[f];
    m->flow_hops[kept] = m->flow_hops[f];
    memmove(&m->flow_route[kept * m->max_hops], &m->flow_route[f * m->max_hops],
            (size_t)m->max_hops * sizeof *m->flow_route);
    kept++;
  }
  m->nflows = kept;
  return net_rates(m);
}

static int net_event(sim_t *m, const event_t *e) {
  switch (e->type) {
  case EV_NET_START:
    return net_start(m, e->gid);
  case EV_NET_RATES:
    m->rates_pending = 0;
    net_advance(m);
    return net_rates(m);
  case EV_NET_FINISH:
    return net_finish(m, e->gid);
  default:
    return net_deliver(m, e->gid);
  }
}

/* Link arrays and capacities. @return 0, or -1 without memory. */
static int net_setup(sim_t *m) {
  const mpiar__network_t *net = m->net;
  m->nlinks = mpiar__network_links(net, m->p);
  m->max_hops = mpiar__network_max_hops(net);
  if (m->max_hops < 1) {
    m->max_hops = 1;
  }
  m->link_cap = malloc((size_t)m->nlinks * sizeof *m->link_cap);
  m->link_rem = malloc((size_t)m->nlinks * sizeof *m->link_rem);
  m->link_bytes = calloc((size_t)m->nlinks, sizeof *m->link_bytes);
  m->link_cnt = calloc((size_t)m->nlinks, sizeof *m->link_cnt);
  if (!m->link_cap || !m->link_rem || !m->link_bytes || !m->link_cnt) {
    return -1;
  }
  const double bw = m->cfg->cost.beta > 0 ? 1.0 / m->cfg->cost.beta : 1e300;
  for (int l = 0; l < m->nlinks; l++) {
    m->link_cap[l] = bw * mpiar__network_capacity(net, m->p, l);
  }
  return 0;
}

/* The link report of a finished run. */
static void net_report(sim_t *m) {
  mpiar__sim_result_t *res = m->res;
  res->links = m->nlinks;
  for (int l = 0; l < m->nlinks; l++) {
    res->link_bytes_total += m->link_bytes[l];
    if (m->link_bytes[l] > res->link_bytes_max) {
      res->link_bytes_max = m->link_bytes[l];
      res->link_busiest = l;
    }
  }
  if (m->cfg->link_bytes != NULL) {
    memcpy(m->cfg->link_bytes, m->link_bytes, (size_t)m->nlinks * sizeof *m->link_bytes);
  }
}

/* ---- setup, inputs and verification ---- */

/* Bytes and messages that cross node links, per node and in all (from the schedules). */
static int tally_node_links(sim_t *m) {
  mpiar__sim_result_t *res = m->res;
  if (m->topo == NULL) {
    return MPIAR_SUCCESS;
  }
  const int nn = m->topo->nnodes;
  size_t *sent = calloc(2 * (size_t)nn, sizeof *sent), *recvd = sent + nn;
  if (sent == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "node link tally of %d nodes", nn);
  }
  for (int r = 0; r < m->nreps; r++) {
    const mpiar__schedule_t *s = &m->sched[r];
    for (size_t i = 0; i < s->nsteps; i++) {
      const mpiar__step_t *st = &s->steps[i];
      const int a = m->topo->node_of[r];
      if (st->kind != MPIAR__STEP_SEND || a == m->topo->node_of[st->peer]) {
        continue;
      }
      const size_t bytes = st->count * m->es;
      sent[a] += bytes;
      recvd[m->topo->node_of[st->peer]] += bytes;
      res->inter_messages++;
      res->inter_bytes_total += bytes;
    }
  }
  if (m->nreps < m->p) {
    /* The representatives are node 0's ranks (sim.h): every node sends and receives as node 0
     * sends, and every orbit has p / K ranks. */
    const size_t orbit = (size_t)(m->p / m->nreps);
    res->inter_messages *= orbit;
    res->inter_bytes_total *= orbit;
    res->node_bytes_sent_max = res->node_bytes_received_max = sent[0];
  } else {
    for (int i = 0; i < nn; i++) {
      res->node_bytes_sent_max =
          sent[i] > res->node_bytes_sent_max ? sent[i] : res->node_bytes_sent_max;
      res->node_bytes_received_max =
          recvd[i] > res->node_bytes_received_max ? recvd[i] : res->node_bytes_received_max;
    }
  }
  free(sent);
  return MPIAR_SUCCESS;
}

int mpiar__sim_build(const mpiar__sim_config_t *cfg, int rank, mpiar__schedule_t *s) {
  const size_t es = mpiar_dtype_size(cfg->dtype);
  const int bcast = cfg->collective == MPIAR__SIM_BCAST;
  mpiar__schedule_init(s, rank, cfg->nranks, cfg->count, es, bcast ? 1 : cfg->in_place,
                       cfg->algorithm->name, cfg->segment_elems);
  if (bcast) {
    s->root = cfg->root;
  }
  s->topo = cfg->topology;
  int rc = cfg->algorithm->build(s);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__schedule_finalize(s);
  }
  if (rc != MPIAR_SUCCESS) {
    mpiar__schedule_destroy(s);
  }
  return rc;
}

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int is_float(mpiar_dtype_t d) {
  return mpiar__dtype_is_float(d);
}

static double get_f(const void *p, mpiar_dtype_t d, size_t i) {
  switch (d) {
  case MPIAR_FLOAT16:
    return mpiar__f16_to_f32(((const uint16_t *)p)[i]);
  case MPIAR_BFLOAT16:
    return mpiar__bf16_to_f32(((const uint16_t *)p)[i]);
  case MPIAR_FLOAT32:
    return ((const float *)p)[i];
  default:
    return ((const double *)p)[i];
  }
}

static void put_f(void *p, mpiar_dtype_t d, size_t i, double v) {
  switch (d) {
  case MPIAR_FLOAT16:
    ((uint16_t *)p)[i] = mpiar__f32_to_f16((float)v);
    break;
  case MPIAR_BFLOAT16:
    ((uint16_t *)p)[i] = mpiar__f32_to_bf16((float)v);
    break;
  case MPIAR_FLOAT32:
    ((float *)p)[i] = (float)v;
    break;
  default:
    ((double *)p)[i] = v;
    break;
  }
}

/* A quiet NaN whose payload names the rank, so that operand order shows in the result bits. */
static void put_nan(void *p, mpiar_dtype_t d, size_t i, int r) {
  switch (d) {
  case MPIAR_FLOAT16:
    ((uint16_t *)p)[i] = (uint16_t)(0x7e00u | ((unsigned)r & 0x1ffu));
    break;
  case MPIAR_BFLOAT16:
    ((uint16_t *)p)[i] = (uint16_t)(0x7fc0u | ((unsigned)r & 0x3fu));
    break;
  case MPIAR_FLOAT32: {
    uint32_t b = 0x7fc00000u | ((uint32_t)r & 0x3fffffu);
    memcpy((float *)p + i, &b, 4);
    break;
  }
  default: {
    uint64_t b = 0x7ff8000000000000ull | (uint64_t)r;
    memcpy((double *)p + i, &b, 8);
    break;
  }
  }
}

/* Elements of a rank's input and output (out of place: in place the output holds the larger). */
static size_t in_elems(const mpiar__sim_config_t *cfg) {
  return cfg->collective == MPIAR__SIM_REDUCE_SCATTER ? (size_t)cfg->nranks * cfg->count
                                                      : cfg->count;
}

static size_t out_elems(const mpiar__sim_config_t *cfg) {
  return cfg->collective == MPIAR__SIM_ALLGATHER ? (size_t)cfg->nranks * cfg->count : cfg->count;
}

static void fill_input(const mpiar__sim_config_t *cfg, int r, unsigned char *buf) {
  const size_t n = in_elems(cfg), es = mpiar_dtype_size(cfg->dtype);
  uint64_t st = cfg->seed * 0x100000001B3ull + (uint64_t)r * 0xD1B54A32D192ED03ull;
  if (!is_float(cfg->dtype)) {
    for (size_t i = 0; i < n; i++) {
      uint64_t x = splitmix(&st);
      memcpy(buf + i * es, &x, es);
    }
    return;
  }
  const double p = cfg->nranks;
  for (size_t i = 0; i < n; i++) {
    double u = (double)(splitmix(&st) >> 11) * 0x1.0p-53; /* [0, 1) */
    double v = cfg->op == MPIAR_PROD ? 1.0 + (2 * u - 1) / (2 * p) : 2 * u - 1;
    put_f(buf, cfg->dtype, i, v);
    if (cfg->nan_inputs && ((i % 7 == 0 && r % 3 != 2) || (i + (size_t)r) % 11 == 0)) {
      put_nan(buf, cfg->dtype, i, r);
    }
  }
}

static double unit_roundoff(mpiar_dtype_t d) {
  switch (d) {
  case MPIAR_FLOAT16:
    return 0x1.0p-11;
  case MPIAR_BFLOAT16:
    return 0x1.0p-8;
  case MPIAR_FLOAT32:
    return 0x1.0p-24;
  default:
    return 0x1.0p-53;
  }
}

/* Compare @p res (n elements) with a reference built from the original inputs' elements
 * [off, off + n): rank 0's result of an allreduce, or one rank's block of a reduce-scatter. */
static int verify_reference(sim_t *m, const unsigned char *res, size_t off, size_t n) {
  const mpiar__sim_config_t *cfg = m->cfg;
  const size_t es = m->es;
  const int p = m->p;
  const int exact = !is_float(cfg->dtype) || cfg->op == MPIAR_MIN || cfg->op == MPIAR_MAX;
  if (exact) {
    /* Integer operations wrap and are associative and commutative; MIN/MAX pick an input. */
    unsigned char *acc = malloc(n * es + 1);
    if (acc == NULL) {
      return fail(m, "out of memory (reference)");
    }
    memcpy(acc, m->orig[0] + off * es, n * es);
    for (int r = 1; r < p; r++) {
      mpiar__reduce(acc, acc, m->orig[r] + off * es, n, cfg->dtype, cfg->op);
    }
    for (size_t i = 0; i < n; i++) {
      if (memcmp(acc + i * es, res + i * es, es) != 0 &&
          !(is_float(cfg->dtype) && isnan(get_f(acc, cfg->dtype, i)) &&
            isnan(get_f(res, cfg->dtype, i)))) {
        free(acc);
        return fail(m, "%s p=%d n=%zu %s %s: element %zu differs from the reference",
                    cfg->algorithm->name, p, n, mpiar_dtype_name(cfg->dtype),
                    mpiar_op_name(cfg->op), i);
      }
    }
    free(acc);
    return 0;
  }
  const double u = unit_roundoff(cfg->dtype);
  for (size_t i = 0; i < n; i++) {
    double ref = cfg->op == MPIAR_PROD ? 1.0 : 0.0, mag = 0.0;
    for (int r = 0; r < p; r++) {
      double x = get_f(m->orig[r] + off * es, cfg->dtype, i);
      ref = cfg->op == MPIAR_PROD ? ref * x : ref + x;
      mag += fabs(x);
    }
    double scale = cfg->op == MPIAR_PROD ? fabs(ref) : mag;
    if (cfg->op == MPIAR_AVG) {
      ref /= p;
      scale /= p;
    }
    double got = get_f(res, cfg->dtype, i);
    if (isnan(ref) || isnan(got)) {
      if (!(isnan(ref) && isnan(got))) {
        return fail(m, "%s p=%d: element %zu is %g, reference %g", cfg->algorithm->name, p, i, got,
                    ref);
      }
      continue;
    }
    /* Each of the p-1 roundings, plus the final one, is at most u relative to the magnitudes. */
    double tol = 2.0 * (p + 1) * u * scale + 1e-300;
    double err = fabs(got - ref) / tol;
    if (err > m->res->max_error) {
      m->res->max_error = err;
    }
    if (err > 1.0) {
      return fail(m, "%s p=%d n=%zu %s %s: element %zu is %.17g, reference %.17g (tolerance %g)",
                  cfg->algorithm->name, p, n, mpiar_dtype_name(cfg->dtype), mpiar_op_name(cfg->op),
                  i, got, ref, tol);
    }
  }
  return 0;
}

/* Every bit of @p got (n elements: rank 0's result, the others equal it, or one rank's block)
 * against the caller's expected result from element @p off. */
static int verify_expected(sim_t *m, const unsigned char *got, size_t off, size_t n) {
  const mpiar__sim_config_t *cfg = m->cfg;
  const size_t es = m->es;
  const unsigned char *want = (const unsigned char *)cfg->expect + off * es;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * es, want + i * es, es) != 0) {
      uint64_t g = 0, w = 0;
      memcpy(&g, got + i * es, es);
      memcpy(&w, want + i * es, es);
      return fail(m, "%s p=%d n=%zu %s %s: element %zu is 0x%llx, expected 0x%llx (bitwise)",
                  cfg->algorithm->name, m->p, n, mpiar_dtype_name(cfg->dtype),
                  mpiar_op_name(cfg->op), i, (unsigned long long)g, (unsigned long long)w);
    }
  }
  return 0;
}

static int verify(sim_t *m) {
  const mpiar__sim_config_t *cfg = m->cfg;
  const size_t n = cfg->count, es = m->es;
  for (int r = 0; r < m->p; r++) {
    if (m->out_init[r] != NULL) {
      const uint8_t *hole = memchr(m->out_init[r], 0, out_elems(cfg));
      if (hole != NULL) {
        return fail(m, "%s: rank %d never wrote output element %zu", cfg->algorithm->name, r,
                    (size_t)(hole - m->out_init[r]));
      }
    }
  }
  if (cfg->collective == MPIAR__SIM_BCAST) {
    for (int r = 0; r < m->p; r++) {
      if (memcmp(m->out[r], m->orig[cfg->root], n * es) != 0) {
        return fail(m, "%s: rank %d does not hold the root's data", cfg->algorithm->name, r);
      }
    }
    return 0;
  }
  if (cfg->collective == MPIAR__SIM_ALLGATHER) {
    for (int r = 0; r < m->p; r++) {
      for (int q = 0; q < m->p; q++) {
        if (memcmp(m->out[r] + (size_t)q * n * es, m->orig[q], n * es) != 0) {
          return fail(m, "%s p=%d n=%zu: rank %d does not hold rank %d's block",
                      cfg->algorithm->name, m->p, n, r, q);
        }
      }
    }
    return 0;
  }
  if (cfg->collective == MPIAR__SIM_REDUCE_SCATTER) {
    for (int r = 0; r < m->p; r++) {
      const size_t off = (size_t)r * n;
      int rc = cfg->expect != NULL ? verify_expected(m, m->out[r], off, n)
                                   : verify_reference(m, m->out[r], off, n);
      if (rc != 0) {
        return rc;
      }
    }
    if (cfg->result != NULL) {
      for (int r = 0; r < m->p; r++) {
        memcpy((unsigned char *)cfg->result + (size_t)r * n * es, m->out[r], n * es);
      }
    }
    return 0;
  }
  for (int r = 1; r < m->p; r++) {
    if (memcmp(m->out[r], m->out[0], n * es) != 0) {
      size_t i = 0;
      while (memcmp(m->out[r] + i * es, m->out[0] + i * es, es) == 0) {
        i++;
      }
      return fail(m, "%s p=%d n=%zu: rank %d differs from rank 0 at element %zu (bitwise)",
                  cfg->algorithm->name, m->p, n, r, i);
    }
  }
  int rc = cfg->expect != NULL ? verify_expected(m, m->out[0], 0, n)
                               : verify_reference(m, m->out[0], 0, n);
  if (rc == 0 && cfg->result != NULL) {
    memcpy(cfg->result, m->out[0], n * es);
  }
  return rc;
}

static void free_sim(sim_t *m) {
  if (m->sched != NULL) {
    for (int r = 0; r < m->nreps; r++) {
      mpiar__schedule_destroy(&m->sched[r]);
    }
  }
  if (m->payload != NULL) {
    for (int64_t g = 0; g < m->nsteps; g++) {
      free(m->payload[g]);
    }
  }
  for (int r = 0; r < m->p; r++) {
    if (m->in != NULL && m->in[r] != m->out[r] && m->in[r] != m->orig[r]) {
      free(m->in[r]);
    }
    if (m->out != NULL) {
      free(m->out[r]);
    }
    if (m->orig != NULL) {
      free(m->orig[r]);
    }
    if (m->tmp != NULL) {
      free(m->tmp[r]);
    }
    if (m->out_init != NULL) {
      free(m->out_init[r]);
    }
    if (m->tmp_init != NULL) {
      free(m->tmp_init[r]);
    }
  }
  void *arrays[] = {
      m->sched,     m->base,      m->rank_of,   m->remaining,  m->link,       m->mnext,
      m->pnext,     m->arrived,   m->payload,   m->port_head,  m->port_tail,  m->send_busy,
      m->recv_busy, m->waiting,   m->wait_next, m->wait_head,  m->wait_tail,  m->compute_free,
      m->table,     m->heap,      m->in,        m->out,        m->tmp,        m->orig,
      m->out_init,  m->tmp_init,  m->link_cap,  m->link_rem,   m->link_bytes, m->link_cnt,
      m->flow_gid,  m->flow_left, m->flow_rate, m->flow_route, m->flow_hops,  m->flow_frozen};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
    free(arrays[i]);
  }
}

static int setup_data(sim_t *m) {
  const mpiar__sim_config_t *cfg = m->cfg;
  const int p = m->p, bcast = cfg->collective == MPIAR__SIM_BCAST;
  const int ag = cfg->collective == MPIAR__SIM_ALLGATHER;
  const size_t in_n = in_elems(cfg), out_n = out_elems(cfg), nb = in_n * m->es;
  /* The output buffer: in place the larger of the two shapes (they are one buffer). */
  const size_t ob = (cfg->in_place && !bcast && in_n > out_n ? in_n : out_n) * m->es;
  m->in = calloc((size_t)p, sizeof *m->in);
  m->out = calloc((size_t)p, sizeof *m->out);
  m->orig = calloc((size_t)p, sizeof *m->orig);
  m->tmp = calloc((size_t)p, sizeof *m->tmp);
  m->out_init = calloc((size_t)p, sizeof *m->out_init);
  m->tmp_init = calloc((size_t)p, sizeof *m->tmp_init);
  m->payload = calloc((size_t)m->nsteps + 1, sizeof *m->payload);
  if (!m->in || !m->out || !m->orig || !m->tmp || !m->out_init || !m->tmp_init || !m->payload) {
    return -1;
  }
  for (int r = 0; r < p; r++) {
    const size_t sc = m->sched[r].scratch_elems;
    m->orig[r] = malloc(nb + 1);
    m->out[r] = malloc(ob + 1);
    m->tmp[r] = malloc(sc * m->es + 1);
    m->tmp_init[r] = calloc(sc + 1, 1);
    if (!m->orig[r] || !m->out[r] || !m->tmp[r] || !m->tmp_init[r]) {
      return -1;
    }
    if (cfg->inputs != NULL) {
      memcpy(m->orig[r], cfg->inputs[r], nb);
    } else {
      fill_input(cfg, r, m->orig[r]);
    }
    /* Untouched memory holds a pattern, so that a read the init map misses still shows. */
    memset(m->out[r], 0xA5, ob);
    memset(m->tmp[r], 0x5A, sc * m->es);
    const int holds_input = bcast ? r == cfg->root : cfg->in_place;
    if (holds_input && ag) {
      /* An allgather in place: this rank's block already at r count, the rest unwritten. */
      memcpy(m->out[r] + (size_t)r * nb, m->orig[r], nb);
      m->in[r] = m->out[r];
      m->out_init[r] = calloc(out_n + 1, 1);
      if (m->out_init[r] == NULL) {
        return -1;
      }
      memset(m->out_init[r] + (size_t)r * in_n, 1, in_n);
    } else if (holds_input) {
      memcpy(m->out[r], m->orig[r], nb);
      m->in[r] = m->out[r];
    } else {
      m->in[r] = m->orig[r];
      m->out_init[r] = calloc(out_n + 1, 1);
      if (m->out_init[r] == NULL) {
        return -1;
      }
    }
  }
  return 0;
}

/* ---- quotient simulation: finding a symmetry (sim.h) ---- */

/* The generator's image of rank @p r: r + g (mod p) or r XOR g. */
static int apply_map(int sym, int g, int p, int r) {
  return sym == SYM_ROTATE ? (int)(((long)r + g) % p) : r ^ g;
}

/* Whether two dependency lists hold the same steps, in any order. */
static int same_deps(const uint32_t *x, const uint32_t *y, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t in_x = 0, in_y = 0;
    for (uint32_t j = 0; j < n; j++) {
      in_x += x[j] == x[i];
      in_y += y[j] == x[i];
    }
    if (in_x != in_y) {
      return 0;
    }
  }
  return 1;
}

/*
 * Whether @p b (rank g(r)'s schedule) is @p a (rank r's) with every peer q replaced by g(q),
 * step for step: kind, size, tag, dependencies (as sets). Buffer offsets may differ (a rotated
 * ring works on rotated blocks); they do not change the timing.
 */
static int maps_onto(const mpiar__schedule_t *a, const mpiar__schedule_t *b, int sym, int g,
                     int p) {
  if (a->nsteps != b->nsteps || a->ndeps != b->ndeps) {
    return 0;
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    const mpiar__step_t *x = &a->steps[i], *y = &b->steps[i];
    if (x->kind != y->kind || x->count != y->count || x->ndeps != y->ndeps ||
        !same_deps(a->deps + x->dep_first, b->deps + y->dep_first, x->ndeps)) {
      return 0;
    }
    if ((x->kind == MPIAR__STEP_SEND || x->kind == MPIAR__STEP_RECV) &&
        (x->tag != y->tag || y->peer != apply_map(sym, g, p, x->peer))) {
      return 0;
    }
  }
  return 1;
}

/* Check the generator g on sampled ranks. @return 1 if every sample maps, 0 if not, or an error. */
static int check_generator(const mpiar__sim_config_t *cfg, int sym, int g, int K, int *rc) {
  const int p = cfg->nranks;
  int samples[24], n = 0;
  for (int r = 0; r < K && n < 6; r++) {
    samples[n++] = r;
  }
  samples[n++] = K - 1;
  samples[n++] = p - 1;
  uint64_t x = (uint64_t)p * 0x9E3779B97F4A7C15ull + (uint64_t)g;
  while (n < 24) {
    samples[n++] = (int)(splitmix(&x) % (uint64_t)p);
  }
  for (int i = 0; i < n; i++) {
    mpiar__schedule_t a, b;
    if ((*rc = mpiar__sim_build(cfg, samples[i], &a)) != MPIAR_SUCCESS) {
      return 0;
    }
    if ((*rc = mpiar__sim_build(cfg, apply_map(sym, g, p, samples[i]), &b)) != MPIAR_SUCCESS) {
      mpiar__schedule_destroy(&a);
      return 0;
    }
    const int same = maps_onto(&a, &b, sym, g, p);
    mpiar__schedule_destroy(&a);
    mpiar__schedule_destroy(&b);
    if (!same) {
      return 0;
    }
  }
  return 1;
}

static int is_pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

/*
 * Find a symmetry for the quotient: K is 1 without a topology (or with one node), the ranks per
 * node of a regular block topology otherwise (maps must move whole nodes); none for other
 * topologies. Sets m->sym, m->K, m->nreps. @return MPIAR_SUCCESS or a builder's error.
 */
static int find_symmetry(sim_t *m) {
  const mpiar__sim_config_t *cfg = m->cfg;
  const mpiar__topology_t *t = m->topo;
  const int p = m->p;
  int K = 1;
  if (t != NULL && t->nnodes > 1) {
    if (!mpiar__topology_is_regular(t)) {
      return MPIAR_SUCCESS;
    }
    K = t->max_node_size;
    for (int r = 0; r < p; r++) {
      if (t->node_of[r] != r / K) {
        return MPIAR_SUCCESS; /* not a block placement */
      }
    }
  }
  if (p % K != 0 || p / K < 2) {
    return MPIAR_SUCCESS;
  }
  int rc = MPIAR_SUCCESS;
  if (check_generator(cfg, SYM_ROTATE, K, K, &rc)) {
    m->sym = SYM_ROTATE;
  } else if (rc == MPIAR_SUCCESS && is_pow2(p) && is_pow2(K)) {
    int all = 1;
    for (int g = K; g < p && all && rc == MPIAR_SUCCESS; g *= 2) {
      all = check_generator(cfg, SYM_XOR, g, K, &rc);
    }
    if (all && rc == MPIAR_SUCCESS) {
      m->sym = SYM_XOR;
    }
  }
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (m->sym != SYM_NONE) {
    m->K = K;
    m->nreps = K;
    snprintf(m->res->symmetry, sizeof m->res->symmetry, "%s by %d, %d representative%s",
             m->sym == SYM_ROTATE ? "rotation" : "xor", K, K, K == 1 ? "" : "s");
  }
  return MPIAR_SUCCESS;
}

int mpiar__sim_run(const mpiar__sim_config_t *cfg, mpiar__sim_result_t *res) {
  sim_t sim, *m = &sim;
  int rc = MPIAR_SUCCESS;
  memset(res, 0, sizeof *res);
  memset(m, 0, sizeof *m);
  m->cfg = cfg;
  m->res = res;
  m->p = cfg->nranks;
  m->es = mpiar_dtype_size(cfg->dtype);
  if (cfg->algorithm == NULL || cfg->nranks < 1 || m->es == 0 ||
      (cfg->collective == MPIAR__SIM_BCAST && (cfg->root < 0 || cfg->root >= cfg->nranks)) ||
      cfg->collective < MPIAR__SIM_ALLREDUCE || cfg->collective > MPIAR__SIM_ALLGATHER ||
      ((cfg->collective == MPIAR__SIM_ALLREDUCE ||
        cfg->collective == MPIAR__SIM_REDUCE_SCATTER) &&
       cfg->data && !mpiar_op_supported(cfg->dtype, cfg->op))) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "invalid simulation parameters");
  }
  if (cfg->topology != NULL && cfg->topology->nranks != cfg->nranks) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "a topology of %d ranks for %d ranks",
                        cfg->topology->nranks, cfg->nranks);
  }
  if (cfg->network != NULL &&
      (cfg->topology != NULL || (mpiar__network_nodes(cfg->network) != 0 &&
                                 mpiar__network_nodes(cfg->network) != cfg->nranks))) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "a routed network needs no topology and, for a torus, one rank per node "
                        "(%d nodes, %d ranks)",
                        mpiar__network_nodes(cfg->network), cfg->nranks);
  }
  m->topo = cfg->topology;
  m->net = cfg->network;
  m->nports = m->p + (m->topo != NULL ? m->topo->nnodes : 0);
  if (cfg->data) {
    MPIAR__CHECK(mpiar__kernels_init());
  }
  const int p = m->p;
  m->nreps = p;
  if (cfg->quotient && !cfg->data && p > 1 && m->net == NULL &&
      !(cfg->algorithm->flags & MPIAR__ALG_NO_QUOTIENT)) {
    MPIAR__CHECK(find_symmetry(m));
  }
  const int nreps = m->nreps;
  res->reps = nreps;
  m->sched = calloc((size_t)nreps, sizeof *m->sched);
  m->base = calloc((size_t)nreps + 1, sizeof *m->base);
  if (m->sched == NULL || m->base == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "simulation of %d ranks", p);
  }
  const int hazards = cfg->check_hazards < 0 ? p <= 64 : cfg->check_hazards;
  res->hazards_checked = hazards;
  res->ok = 1;
  for (int r = 0; r < nreps; r++) {
    MPIAR__CHECK(mpiar__sim_build(cfg, r, &m->sched[r]));
    if (r == 0 && cfg->max_steps > 0 && (double)m->sched[0].nsteps * nreps > cfg->max_steps) {
      MPIAR__FAIL(MPIAR_ERR_UNSUPPORTED,
                  "%s on %d ranks: about %.3g steps to simulate, more than the %.3g allowed%s",
                  cfg->algorithm->name, p, (double)m->sched[0].nsteps * nreps, cfg->max_steps,
                  nreps == p && cfg->quotient ? " (no symmetry found)" : "");
    }
    m->base[r + 1] = m->base[r] + (int64_t)m->sched[r].nsteps;
    mpiar__schedule_totals_t t;
    mpiar__schedule_totals(&m->sched[r], &t);
    res->messages += t.messages_sent;
    res->bytes_sent_total += t.bytes_sent;
    res->steps += t.steps;
    if (t.messages_sent > res->messages_max) {
      res->messages_max = t.messages_sent;
    }
    if (t.bytes_sent > res->bytes_sent_max) {
      res->bytes_sent_max = t.bytes_sent;
    }
    if (t.bytes_reduced > res->bytes_reduced_max) {
      res->bytes_reduced_max = t.bytes_reduced;
    }
    if (t.scratch_bytes > res->scratch_bytes_max) {
      res->scratch_bytes_max = t.scratch_bytes;
    }
    if (!mpiar__sim_check_schedule(&m->sched[r], hazards, res->error, sizeof res->error)) {
      res->ok = 0;
      goto cleanup;
    }
  }
  const size_t sim_messages = res->messages; /* sent by the simulated ranks */
  if (nreps < p) {
    /* Every orbit has p / K ranks, each sending what its representative sends. */
    const size_t orbit = (size_t)(p / nreps);
    res->messages *= orbit;
    res->bytes_sent_total *= orbit;
    res->steps *= orbit;
  }
  MPIAR__CHECK(tally_node_links(m));
  m->nsteps = m->base[nreps];
  const size_t N = (size_t)m->nsteps + 1;
  m->rank_of = malloc(N * sizeof *m->rank_of);
  m->remaining = malloc(N * sizeof *m->remaining);
  m->link = malloc(N * sizeof *m->link);
  m->mnext = malloc(N * sizeof *m->mnext);
  m->pnext = malloc(N * sizeof *m->pnext);
  m->arrived = calloc(N, 1);
  const size_t np = (size_t)m->nports;
  m->port_head = malloc(np * sizeof *m->port_head);
  m->port_tail = malloc(np * sizeof *m->port_tail);
  m->send_busy = calloc(np, 1);
  m->recv_busy = calloc(np, 1);
  m->waiting = calloc(np, 1);
  m->wait_next = malloc(np * sizeof *m->wait_next);
  m->wait_head = malloc(np * sizeof *m->wait_head);
  m->wait_tail = malloc(np * sizeof *m->wait_tail);
  m->compute_free = calloc((size_t)nreps, sizeof *m->compute_free);
  size_t cap = 64;
  while (cap < 2 * sim_messages + 16) {
    cap *= 2;
  }
  m->table = calloc(cap, sizeof *m->table);
  m->table_mask = cap - 1;
  if (!m->rank_of || !m->remaining || !m->link || !m->mnext || !m->pnext || !m->arrived ||
      !m->port_head || !m->port_tail || !m->send_busy || !m->recv_busy || !m->waiting ||
      !m->wait_next || !m->wait_head || !m->wait_tail || !m->compute_free || !m->table) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "simulation of %lld steps", (long long)m->nsteps);
  }
  if (m->net != NULL && net_setup(m) != 0) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "links of the network for %d ranks", p);
  }
  if (cfg->data && setup_data(m) != 0) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "simulation buffers for %d ranks x %zu elements", p, cfg->count);
  }
  for (int q = 0; q < m->nports; q++) {
    m->port_head[q] = m->port_tail[q] = -1;
    m->wait_head[q] = m->wait_tail[q] = -1;
  }
  for (int r = 0; r < nreps; r++) {
    for (int64_t g = m->base[r]; g < m->base[r + 1]; g++) {
      m->rank_of[g] = r;
      m->remaining[g] = m->sched[r].steps[g - m->base[r]].ndeps;
      m->link[g] = -1;
    }
  }
  /* Steps without dependencies are ready at time zero, rank by rank, in step order. */
  for (int64_t g = 0; g < m->nsteps && !m->failed; g++) {
    if (m->remaining[g] == 0) {
      make_ready(m, g, 0.0);
    }
  }
  while (m->nheap > 0 && !m->failed) {
    event_t e = pop(m);
    m->now = e.t;
    if (e.type == EV_DONE) {
      complete(m, e.gid, e.t);
    } else if (e.type == EV_XFER_END) {
      xfer_end(m, e.gid);
    } else {
      net_event(m, &e);
    }
  }
  if (m->failed) {
    goto cleanup;
  }
  if (m->done != m->nsteps) {
    /* Name the first step of the first rank that did not finish: the cycle runs through it. */
    for (int r = 0; r < nreps; r++) {
      for (int64_t g = m->base[r]; g < m->base[r + 1]; g++) {
        if (m->remaining[g] == 0) {
          const mpiar__step_t *st = &m->sched[r].steps[g - m->base[r]];
          int blocked =
              (st->kind == MPIAR__STEP_RECV && !(m->link[g] >= 0 && m->arrived[m->link[g]]));
          if (blocked) {
            fail(m, "%s p=%d: deadlock: rank %d step %lld (recv from %d tag %d) never matched",
                 cfg->algorithm->name, p, r, (long long)(g - m->base[r]), st->peer, st->tag);
            goto cleanup;
          }
        }
      }
    }
    fail(m, "%s p=%d: deadlock: %lld of %lld steps completed", cfg->algorithm->name, p,
         (long long)m->done, (long long)m->nsteps);
    goto cleanup;
  }
  for (size_t i = 0; i <= m->table_mask; i++) {
    if (m->table[i].key != 0 && m->table[i].kind == MPIAR__STEP_SEND) {
      int r;
      const mpiar__step_t *st = step_of(m, m->table[i].head, &r);
      fail(m, "%s p=%d: unmatched message from rank %d to rank %d tag %d", cfg->algorithm->name, p,
           r, st->peer, st->tag);
      goto cleanup;
    }
  }
  if (m->net != NULL) {
    net_report(m);
  }
  if (cfg->data) {
    verify(m);
  }

cleanup:
  free_sim(m);
  return rc;
}
