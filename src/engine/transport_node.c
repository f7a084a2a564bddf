/*
 * The node transport (transport_node.h): rings in shared memory for short messages between ranks
 * of one node, an inner transport for everything else.
 *
 * The message table holds both kinds of entries in the order they were posted. An entry of the
 * inner transport is also an entry of the inner table: the inner table holds exactly those, in
 * the same order, so the k-th inner entry of this table is entry k of the inner one (entries that
 * abandon() emptied keep their place in both until compact()). A ring entry is a send waiting for
 * room, a receive waiting for its message, or a completed one that the next poll reports.
 *
 * Memory ordering (per ring, one writer per word): the sender writes a slot's tag, length and
 * payload, then stores the slot's sequence word (message number + 1) with release; the receiver
 * loads it with acquire before reading the slot, and after reading stores the ring's taken count
 * with release; the sender loads that count with acquire before writing the slot again. Each
 * side keeps its own count of messages written or taken in private memory.
 *
 * Unexpected messages (arrived before their receive) are copied out of the ring at once into
 * private buffers of one slot's size (kept for reuse; one ring's worth made at open, so a steady
 * loop of calls never allocates), per sender in arrival order. probe() shows them to the engine
 * like the inner transport's messages (its scan of unexpected messages finds a wrong length here
 * as there); their handle has bit 63 set, which no handle of MPI (MPICH's
 * 32-bit integers, Open MPI's user-space pointers) or of the threads transport has.
 *
 * Errors: the rings never fail; every error is the inner transport's.
 */
#include "engine/transport_node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

typedef struct node_slot {
  uint64_t seq; /* message number + 1, stored with release once the slot is written */
  uint32_t tag;
  uint32_t len;
  char pad[48];
  unsigned char data[MPIAR__NODE_SLOT_BYTES];
} node_slot_t;

typedef struct node_ring {
  uint64_t taken; /* messages the receiver has taken out, stored with release */
  char pad[56];
  node_slot_t slot[MPIAR__NODE_SLOTS];
} node_ring_t;

_Static_assert(sizeof(node_slot_t) % 64 == 0, "slots are whole cache lines");
_Static_assert(sizeof(node_ring_t) % 64 == 0, "rings are whole cache lines");

#define SHM_HANDLE (UINT64_C(1) << 63)

/* Entry kinds. */
enum {
  E_INNER = 0,   /* an entry of the inner table */
  E_INNER_GONE,  /* abandoned there, still in the inner table until compact() */
  E_SEND,        /* a ring send waiting for room */
  E_RECV,        /* a ring receive waiting for its message */
  E_DONE,        /* a ring entry complete, reported at the next poll */
  E_GONE         /* a ring entry abandoned */
};

typedef struct node_entry {
  int kind;
  int ring; /* a ring entry (counted in nring until reported or abandoned) */
  int peer, tag;
  const void *sbuf;
  void *rbuf;
  size_t len;
  size_t bytes; /* E_DONE: bytes received */
  int err;      /* inner entries completed in this poll: their error */
} node_entry_t;

/* An unexpected message (private memory, one slot's size). */
typedef struct node_msg {
  struct node_msg *next;
  int source;
  int tag;
  size_t len;
  unsigned char data[MPIAR__NODE_SLOT_BYTES];
} node_msg_t;

typedef struct tx_node {
  mpiar__transport_t table; /* this transport's functions, with the inner one's names */
  const mpiar__transport_t *in;
  void *ins;
  int rank, size;
  size_t threshold;
  node_ring_t **out, **inr;
  uint64_t *sent, *taken; /* per peer: messages written to out[r], taken from inr[r] */
  size_t *waiting;        /* per peer: ring sends waiting for room */
  int *peers;             /* the ranks with an inbound ring */
  int npeers;
  node_msg_t **uhead, **utail; /* per peer: unexpected messages in arrival order */
  size_t nqueued;              /* unexpected messages in those queues */
  node_msg_t *spare;
  node_entry_t *ent;
  size_t n, cap;
  size_t nring; /* ring entries in the table: none, and a poll is the inner transport's alone */
  size_t ngone; /* inner entries abandoned and not yet compacted */
  size_t *gidx; /* inner entry k -> its index here */
  mpiar__txdone_t *idone;
  void (*unmap)(void *);
  void *arg;
} tx_node_t;

static inline uint64_t load_acq(const uint64_t *w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}
static inline void store_rel(uint64_t *w, uint64_t v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
}

size_t mpiar__node_ring_bytes(void) {
  return sizeof(node_ring_t);
}

void mpiar__node_rings_init(void *mem, size_t n) {
  memset(mem, 0, n * sizeof(node_ring_t));
}

/* Does a message of @p len bytes to or from @p peer take a ring? */
static inline int on_ring(const tx_node_t *t, int peer, size_t len) {
  return len <= t->threshold && peer >= 0 && peer < t->size && t->out[peer] != NULL;
}

/* ---- the rings ---- */

/* Has a message arrived in the ring from @p peer that is not taken yet? (One acquire load: the
 * passes that wait look at every ring this way before doing more.) */
static inline int ring_ready(const tx_node_t *t, int peer) {
  uint64_t k = t->taken[peer];
  return load_acq(&t->inr[peer]->slot[k % MPIAR__NODE_SLOTS].seq) == k + 1;
}

/* Any ring with a message not taken yet? */
static inline int rings_ready(const tx_node_t *t) {
  for (int k = 0; k < t->npeers; k++) {
    if (ring_ready(t, t->peers[k])) {
      return 1;
    }
  }
  return 0;
}

/* Write a message into the ring to @p peer if it has room; @return 1 when written. */
static int ring_put(tx_node_t *t, int peer, const void *buf, size_t len, int tag) {
  node_ring_t *g = t->out[peer];
  uint64_t k = t->sent[peer];
  if (k - load_acq(&g->taken) >= MPIAR__NODE_SLOTS) {
    return 0;
  }
  node_slot_t *s = &g->slot[k % MPIAR__NODE_SLOTS];
  s->tag = (uint32_t)tag;
  s->len = (uint32_t)len;
  if (len > 0) {
    memcpy(s->data, buf, len);
  }
  store_rel(&s->seq, k + 1);
  t->sent[peer] = k + 1;
  return 1;
}

/* The earliest ring receive posted for (peer, tag), or -1. */
static long posted_for(const tx_node_t *t, int peer, int tag) {
  for (size_t i = 0; i < t->n; i++) {
    const node_entry_t *x = &t->ent[i];
    if (x->kind == E_RECV && x->peer == peer && x->tag == tag) {
      return (long)i;
    }
  }
  return -1;
}

static node_msg_t *msg_new(tx_node_t *t) {
  node_msg_t *m = t->spare;
  if (m != NULL) {
    t->spare = m->next;
    return m;
  }
  return malloc(sizeof *m);
}

static void msg_free(tx_node_t *t, node_msg_t *m) {
  m->next = t->spare;
  t->spare = m;
}

/* Take every message that has arrived from @p peer: into its posted receive, or queued.
 * @return 0, or ENOMEM (the message stays in the ring for a later poll). */
static int ring_drain(tx_node_t *t, int peer) {
  node_ring_t *g = t->inr[peer];
  uint64_t k = t->taken[peer];
  for (;;) {
    node_slot_t *s = &g->slot[k % MPIAR__NODE_SLOTS];
    if (load_acq(&s->seq) != k + 1) {
      break;
    }
    int tag = (int)s->tag;
    size_t len = s->len;
    long i = posted_for(t, peer, tag);
    if (i >= 0) {
      node_entry_t *x = &t->ent[i];
      /* The tag carries the length, so a receive of this tag expects exactly this length. */
      if (len > 0) {
        memcpy(x->rbuf, s->data, len < x->len ? len : x->len);
      }
      x->kind = E_DONE;
      x->bytes = len;
    } else {
      node_msg_t *m = msg_new(t);
      if (m == NULL) {
        t->taken[peer] = k;
        return ENOMEM;
      }
      m->next = NULL;
      m->source = peer;
      m->tag = tag;
      m->len = len;
      if (len > 0) {
        memcpy(m->data, s->data, len);
      }
      if (t->utail[peer] != NULL) {
        t->utail[peer]->next = m;
      } else {
        t->uhead[peer] = m;
      }
      t->utail[peer] = m;
      t->nqueued++;
    }
    k++;
    store_rel(&g->taken, k);
  }
  t->taken[peer] = k;
  return 0;
}

/* Remove and return the earliest unexpected message from @p peer with @p tag (ANY: any). */
static node_msg_t *unexpected_take(tx_node_t *t, int peer, int tag) {
  node_msg_t *prev = NULL;
  for (node_msg_t *m = t->uhead[peer]; m != NULL; prev = m, m = m->next) {
    if (tag != MPIAR__TX_ANY && m->tag != tag) {
      continue;
    }
    if (prev != NULL) {
      prev->next = m->next;
    } else {
      t->uhead[peer] = m->next;
    }
    if (t->utail[peer] == m) {
      t->utail[peer] = prev;
    }
    t->nqueued--;
    return m;
  }
  return NULL;
}

/* ---- the table ---- */

static int tx_reserve(void *s, size_t cap) {
  tx_node_t *t = s;
  int err = t->in->reserve(t->ins, cap);
  if (err != 0 || cap <= t->cap) {
    return err;
  }
  node_entry_t *e = realloc(t->ent, cap * sizeof *e);
  if (e != NULL) {
    t->ent = e;
  }
  size_t *g = e ? realloc(t->gidx, cap * sizeof *g) : NULL;
  if (g != NULL) {
    t->gidx = g;
  }
  mpiar__txdone_t *d = g ? realloc(t->idone, cap * sizeof *d) : NULL;
  if (d == NULL) {
    return ENOMEM;
  }
  t->idone = d;
  t->cap = cap;
  return 0;
}

/* Entries of the inner table before entry @p i. */
static size_t inner_index(const tx_node_t *t, size_t i) {
  if (t->nring == 0 && t->ngone == 0) {
    return i; /* every entry is the inner transport's */
  }
  size_t k = 0;
  for (size_t j = 0; j < i; j++) {
    k += t->ent[j].kind == E_INNER || t->ent[j].kind == E_INNER_GONE;
  }
  return k;
}

static node_entry_t *entry(tx_node_t *t, size_t i, int kind, int peer, int tag, size_t len) {
  node_entry_t *x = &t->ent[i];
  x->kind = kind;
  x->ring = kind != E_INNER;
  t->nring += (size_t)x->ring;
  x->peer = peer;
  x->tag = tag;
  x->len = len;
  x->bytes = 0;
  x->err = 0;
  t->n = i + 1;
  return x;
}

static int tx_send(void *s, size_t i, const void *buf, size_t len, int peer, int tag) {
  tx_node_t *t = s;
  if (!on_ring(t, peer, len)) {
    int err = t->in->send(t->ins, inner_index(t, i), buf, len, peer, tag);
    if (err == 0) {
      entry(t, i, E_INNER, peer, tag, len);
    }
    return err;
  }
  /* Sends to one peer enter its ring in the order they were posted. */
  if (t->waiting[peer] == 0 && ring_put(t, peer, buf, len, tag)) {
    entry(t, i, E_DONE, peer, tag, len);
    return 0;
  }
  node_entry_t *x = entry(t, i, E_SEND, peer, tag, len);
  x->sbuf = buf;
  t->waiting[peer]++;
  return 0;
}

static int tx_recv(void *s, size_t i, void *buf, size_t len, int peer, int tag) {
  tx_node_t *t = s;
  if (!on_ring(t, peer, len)) {
    int err = t->in->recv(t->ins, inner_index(t, i), buf, len, peer, tag);
    if (err == 0) {
      entry(t, i, E_INNER, peer, tag, len);
    }
    return err;
  }
  node_entry_t *x = entry(t, i, E_RECV, peer, tag, len);
  x->rbuf = buf;
  node_msg_t *m = unexpected_take(t, peer, tag);
  if (m != NULL) {
    if (m->len > 0) {
      memcpy(buf, m->data, m->len < len ? m->len : len);
    }
    x->kind = E_DONE;
    x->bytes = m->len;
    msg_free(t, m);
  }
  return 0;
}

static int tx_probe(void *s, int source, int tag, mpiar__txmsg_t *m, int *found) {
  tx_node_t *t = s;
  int err = t->in->probe(t->ins, source, tag, m, found);
  if (err != 0 || *found || (t->nqueued == 0 && !rings_ready(t))) {
    return err;
  }
  for (int k = 0; k < t->npeers; k++) {
    int peer = t->peers[k];
    if (source != MPIAR__TX_ANY && source != peer) {
      continue;
    }
    if (ring_drain(t, peer) != 0) {
      return ENOMEM;
    }
    node_msg_t *u = unexpected_take(t, peer, tag);
    if (u != NULL) {
      m->handle = (uint64_t)(uintptr_t)u | SHM_HANDLE;
      m->source = u->source;
      m->tag = u->tag;
      m->bytes = u->len;
      *found = 1;
      return 0;
    }
  }
  return 0;
}

static node_msg_t *handle_msg(uint64_t h) {
  return (h & SHM_HANDLE) != 0 ? (node_msg_t *)(uintptr_t)(h & ~SHM_HANDLE) : NULL;
}

static int tx_recv_msg(void *s, size_t i, void *buf, mpiar__txmsg_t *m) {
  tx_node_t *t = s;
  node_msg_t *u = handle_msg(m->handle);
  if (u == NULL) {
    int err = t->in->recv_msg(t->ins, inner_index(t, i), buf, m);
    if (err == 0) {
      entry(t, i, E_INNER, m->source, m->tag, m->bytes);
    }
    return err;
  }
  node_entry_t *x = entry(t, i, E_DONE, u->source, u->tag, u->len);
  if (u->len > 0) {
    memcpy(buf, u->data, u->len);
  }
  x->bytes = u->len;
  msg_free(t, u);
  m->handle = 0;
  return 0;
}

static int tx_recv_now(void *s, void *buf, mpiar__txmsg_t *m) {
  tx_node_t *t = s;
  node_msg_t *u = handle_msg(m->handle);
  if (u == NULL) {
    return t->in->recv_now(t->ins, buf, m);
  }
  if (buf != NULL && u->len > 0) {
    memcpy(buf, u->data, u->len);
  }
  msg_free(t, u);
  m->handle = 0;
  return 0;
}

/* Sends waiting for room, in the order they were posted (per peer: the first that finds the
 * ring full stops that peer's later ones). */
static void push_waiting(tx_node_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    node_entry_t *x = &t->ent[i];
    if (x->kind != E_SEND) {
      continue;
    }
    /* A send of a peer whose earlier one is still waiting in this pass is after it. */
    int blocked = 0;
    for (size_t j = 0; j < i && !blocked; j++) {
      blocked = t->ent[j].kind == E_SEND && t->ent[j].peer == x->peer;
    }
    if (!blocked && ring_put(t, x->peer, x->sbuf, x->len, x->tag)) {
      x->kind = E_DONE;
      t->waiting[x->peer]--;
    }
  }
}

static int tx_poll(void *s, size_t n, mpiar__txdone_t *done, size_t *ndone) {
  tx_node_t *t = s;
  *ndone = 0;
  t->n = n;
  for (int k = 0; k < t->npeers; k++) {
    /* Out of memory for an unexpected message: it stays in the ring until a later poll. */
    if (ring_ready(t, t->peers[k])) {
      (void)ring_drain(t, t->peers[k]);
    }
  }
  if (t->nring == 0) {
    /* Only inner entries (the longer messages): the inner table is this one, entry for entry. */
    int err = t->in->poll(t->ins, n, done, ndone);
    t->n = err == 0 ? n - *ndone : n;
    return err;
  }
  size_t nin = 0, nwait = 0;
  for (size_t i = 0; i < n; i++) {
    int kind = t->ent[i].kind;
    if (kind == E_INNER || kind == E_INNER_GONE) {
      t->gidx[nin++] = i;
    }
    nwait += kind == E_SEND;
  }
  if (nwait > 0) {
    push_waiting(t);
  }
  /* The inner transport is polled even with none of its entries here: its poll is what moves
   * its clock and its progress (the threads transport hands the turn over there). */
  size_t ndi = 0;
  int err = t->in->poll(t->ins, nin, t->idone, &ndi);
  if (err != 0) {
    return err;
  }
  for (size_t k = 0; k < ndi; k++) {
    node_entry_t *x = &t->ent[t->gidx[t->idone[k].index]];
    x->kind = E_DONE;
    x->err = t->idone[k].err;
    x->bytes = t->idone[k].bytes;
  }
  size_t kept = 0, nd = 0;
  for (size_t i = 0; i < n; i++) {
    node_entry_t *x = &t->ent[i];
    if (x->kind == E_DONE) {
      t->nring -= (size_t)x->ring;
      done[nd].index = i;
      done[nd].err = x->err;
      done[nd++].bytes = x->bytes;
    } else {
      t->ent[kept++] = *x;
    }
  }
  t->n = kept;
  *ndone = nd;
  return 0;
}

static void tx_abandon(void *s, size_t i, int how, double until) {
  tx_node_t *t = s;
  node_entry_t *x = &t->ent[i];
  if (x->kind == E_INNER) {
    t->in->abandon(t->ins, inner_index(t, i), how, until);
    x->kind = E_INNER_GONE;
    t->ngone++;
    return;
  }
  t->nring -= (size_t)x->ring;
  if (x->kind == E_SEND) {
    /* Never written: the failed operation's message is not sent (its receiver learns of the
     * failure from the notice). */
    t->waiting[x->peer]--;
  }
  x->kind = E_GONE;
}

static size_t tx_compact(void *s, size_t n) {
  tx_node_t *t = s;
  size_t nin = 0;
  for (size_t i = 0; i < n; i++) {
    nin += t->ent[i].kind == E_INNER || t->ent[i].kind == E_INNER_GONE;
  }
  if (nin > 0) {
    t->in->compact(t->ins, nin);
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->ent[i].kind != E_INNER_GONE && t->ent[i].kind != E_GONE) {
      t->ent[kept++] = t->ent[i];
    }
  }
  t->n = kept;
  t->ngone = 0;
  return kept;
}

/* ---- control messages and the rest: the inner transport's ---- */

static int tx_send_ctl(void *s, const void *buf, size_t len, int peer, int tag,
                       mpiar__txreq_t *q) {
  tx_node_t *t = s;
  return t->in->send_ctl(t->ins, buf, len, peer, tag, q);
}

static int tx_test_ctl(void *s, mpiar__txreq_t *q, int *done) {
  tx_node_t *t = s;
  return t->in->test_ctl(t->ins, q, done);
}

static void tx_keep_ctl(void *s, mpiar__txreq_t *q) {
  tx_node_t *t = s;
  t->in->keep_ctl(t->ins, q);
}

static size_t tx_pending(void *s) {
  tx_node_t *t = s;
  return t->in->pending(t->ins);
}

static void free_list(node_msg_t *m) {
  while (m != NULL) {
    node_msg_t *next = m->next;
    free(m);
    m = next;
  }
}

/* The state's own memory (what open() allocates). */
static void node_free(tx_node_t *t) {
  free(t->out);
  free(t->inr);
  free(t->sent);
  free(t->taken);
  free(t->waiting);
  free(t->peers);
  free(t->uhead);
  free(t->utail);
  free(t->ent);
  free(t->gidx);
  free(t->idone);
  free(t);
}

static void tx_close(void *s) {
  tx_node_t *t = s;
  if (t == NULL) {
    return;
  }
  t->in->close(t->ins);
  for (int r = 0; r < t->size; r++) {
    free_list(t->uhead[r]);
  }
  free_list(t->spare);
  if (t->unmap != NULL) {
    t->unmap(t->arg);
  }
  node_free(t);
}

static const mpiar__transport_t node_functions = {
    .reserve = tx_reserve,
    .send = tx_send,
    .recv = tx_recv,
    .probe = tx_probe,
    .recv_msg = tx_recv_msg,
    .recv_now = tx_recv_now,
    .poll = tx_poll,
    .abandon = tx_abandon,
    .compact = tx_compact,
    .send_ctl = tx_send_ctl,
    .test_ctl = tx_test_ctl,
    .keep_ctl = tx_keep_ctl,
    .pending = tx_pending,
    .close = tx_close,
};

int mpiar__transport_node_open(const mpiar__transport_t *inner, void *inner_state, int rank,
                               int size, void *const *out, void *const *in, size_t threshold,
                               void (*unmap)(void *), void *arg, const mpiar__transport_t **tx,
                               void **state) {
  tx_node_t *t = calloc(1, sizeof *t);
  size_t p = (size_t)size;
  if (t == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  t->out = calloc(p, sizeof *t->out);
  t->inr = calloc(p, sizeof *t->inr);
  t->sent = calloc(p, sizeof *t->sent);
  t->taken = calloc(p, sizeof *t->taken);
  t->waiting = calloc(p, sizeof *t->waiting);
  t->peers = calloc(p, sizeof *t->peers);
  t->uhead = calloc(p, sizeof *t->uhead);
  t->utail = calloc(p, sizeof *t->utail);
  if (t->out == NULL || t->inr == NULL || t->sent == NULL || t->taken == NULL ||
      t->waiting == NULL || t->peers == NULL || t->uhead == NULL || t->utail == NULL) {
    node_free(t);
    return MPIAR_ERR_NOMEM;
  }
  t->table = node_functions;
  t->table.name = "node";
  t->table.send_name = inner->send_name;
  t->table.recv_name = inner->recv_name;
  t->table.probe_name = inner->probe_name;
  t->table.recv_msg_name = inner->recv_msg_name;
  t->table.poll_name = inner->poll_name;
  t->table.test_name = inner->test_name;
  t->table.now = inner->now;
  t->table.error_string = inner->error_string;
  t->in = inner;
  t->ins = inner_state;
  t->rank = rank;
  t->size = size;
  t->threshold = threshold < MPIAR__NODE_SLOT_BYTES ? threshold : MPIAR__NODE_SLOT_BYTES;
  for (int r = 0; r < size; r++) {
    /* A pair uses its rings only when both directions have one. */
    if (r != rank && out[r] != NULL && in[r] != NULL) {
      t->out[r] = out[r];
      t->inr[r] = in[r];
      t->peers[t->npeers++] = r;
    }
  }
  /* The unexpected-message buffers start with one ring's worth, so that a steady loop of calls
   * (a backlog of a message or two per peer) never allocates after the transport is open. */
  for (int k = 0; t->npeers > 0 && k < MPIAR__NODE_SLOTS; k++) {
    node_msg_t *m = malloc(sizeof *m);
    if (m == NULL) {
      node_free(t);
      return MPIAR_ERR_NOMEM;
    }
    msg_free(t, m);
  }
  t->unmap = unmap;
  t->arg = arg;
  *tx = &t->table;
  *state = t;
  return MPIAR_SUCCESS;
}

/* ---- segments ---- */

static void segment_name(uint64_t id, char *buf, size_t len) {
  snprintf(buf, len, "/mpiar-node-%u-%u", (unsigned)(id >> 32), (unsigned)(id & 0xffffffffu));
}

int mpiar__node_segment_create(size_t bytes, mpiar__node_segment_t *seg) {
  static unsigned counter;
  unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  uint64_t id = ((uint64_t)(uint32_t)getpid() << 32) | c;
  char name[64];
  segment_name(id, name, sizeof name);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return errno;
  }
  int err = 0;
  void *base = MAP_FAILED;
  /* posix_fallocate, unlike ftruncate alone, fails now (ENOSPC) when /dev/shm is too small,
   * instead of a SIGBUS at the first write. */
  if (ftruncate(fd, (off_t)bytes) != 0 || (err = posix_fallocate(fd, 0, (off_t)bytes)) != 0) {
    err = err ? err : errno;
  } else {
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = base == MAP_FAILED ? errno : 0;
  }
  close(fd);
  if (err != 0) {
    shm_unlink(name);
    return err;
  }
  seg->id = id;
  seg->base = base;
  seg->bytes = bytes;
  return 0;
}

int mpiar__node_segment_attach(uint64_t id, size_t bytes, mpiar__node_segment_t *seg) {
  char name[64];
  segment_name(id, name, sizeof name);
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) {
    return errno;
  }
  struct stat st;
  int err = 0;
  void *base = MAP_FAILED;
  if (fstat(fd, &st) != 0) {
    err = errno;
  } else if ((size_t)st.st_size != bytes) {
    err = EINVAL;
  } else {
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = base == MAP_FAILED ? errno : 0;
  }
  close(fd);
  if (err != 0) {
    return err;
  }
  seg->id = id;
  seg->base = base;
  seg->bytes = bytes;
  return 0;
}

void mpiar__node_segment_unlink(const mpiar__node_segment_t *seg) {
  char name[64];
  segment_name(seg->id, name, sizeof name);
  shm_unlink(name);
}

void mpiar__node_segment_unmap(mpiar__node_segment_t *seg) {
  if (seg->base != NULL) {
    munmap(seg->base, seg->bytes);
    seg->base = NULL;
  }
}
