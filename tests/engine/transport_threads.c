/*
 * The threads transport (see transport_threads.h): ranks as threads taking turns, messages
 * delivered in a seeded, adversarial order within MPI's guarantees.
 *
 * A message lives from its send until both sides are done with it (two references: the send's
 * and the receive's). It is first in flight, then arrived (visible to receives and probes),
 * then matched (by a posted receive, or taken by a probe). Arrival keeps the order of each
 * (source, destination, tag) channel: only the oldest message of a channel still in flight may
 * arrive. A posted receive matches the oldest arrived message of its channel, and an arriving
 * message matches the oldest posted receive of its channel, as MPI's matching does.
 */
#include "transport_threads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The transport's own error codes (never 0). */
enum { TW_ERR_SEND = 1, TW_ERR_TRUNCATE = 2 };

/* The virtual clock's step per poll (seconds). */
#define TW_TICK 1e-4

typedef struct tw_op tw_op_t;

typedef struct tw_msg {
  int src, dst, tag;
  size_t len;
  uint64_t seq;
  const void *sbuf;    /* the sender's buffer until the data is captured */
  unsigned char *data; /* the captured copy (NULL: not yet) */
  int arrived, matched, consumed;
  int refs; /* the send's and the receive's */
  tw_op_t *send_op;
} tw_msg_t;

struct tw_op {
  int send; /* 1: a send; 0: a receive */
  tw_msg_t *msg;
  void *buf; /* receives */
  size_t len;
  int peer, tag;
  int err;
};

typedef struct tw_rank {
  mpiar__tw_t *w;
  int rank;
  tw_op_t **table;
  size_t cap;
  tw_op_t **kept; /* sends kept until close (abandoned, control without a test) */
  size_t nkept, kept_cap;
  int sends; /* sends posted so far (fault injection) */
} tw_rank_t;

struct mpiar__tw {
  int p;
  uint64_t rng;
  /* The byte stream that replaces the generator (mpiar__tw_create_bytes), NULL: seeded. */
  const uint8_t *bytes;
  size_t nbytes, pos;
  uint64_t passes; /* pass_turn calls (the stream's fallback switches every fourth) */
  long tag_ub;
  mpiar__tw_fault_t fault;
  double clock;
  uint64_t seq;
  tw_msg_t **msgs; /* live messages in send order */
  size_t nmsgs, msgs_cap;
  tw_op_t **posted; /* posted receives not yet matched, in posting order */
  int *posted_rank;
  size_t nposted, posted_cap;
  tw_rank_t *ranks;
  /* Turns. */
  pthread_mutex_t mu;
  pthread_cond_t *cv; /* per rank */
  int turn;
  int *alive;
  void (*body)(int rank, void *arg);
  void *arg;
};

static _Thread_local mpiar__tw_t *cur_world;
static _Thread_local int cur_rank;

static uint64_t rnd(mpiar__tw_t *w) {
  /* xorshift64* */
  uint64_t x = w->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  w->rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/*
 * The scheduler's next draw: the seeded generator's, or the next byte of the stream. Once the
 * stream has run out, @p fallback: a fixed choice that lets everything progress.
 */
static uint64_t draw(mpiar__tw_t *w, uint64_t fallback) {
  if (w->bytes == NULL) {
    return rnd(w);
  }
  return w->pos < w->nbytes ? w->bytes[w->pos++] : fallback;
}

/* One chance in @p n (never, once a stream has run out). */
static int chance(mpiar__tw_t *w, unsigned n) {
  return draw(w, 1) % n == 0;
}

/* ---- turns ---- */

/*
 * Hand the turn to a rank the scheduler picks (often this one again: a switch costs a context
 * switch, and runs of a few passes per turn interleave the ranks just as well). Each rank waits
 * on its own condition variable, so a switch wakes one thread.
 */
static void pass_turn(mpiar__tw_t *w) {
  /* A spent stream keeps the turn for three passes, then hands it to the next live rank. */
  uint64_t stay = w->passes++ % 4 != 3;
  if (w->alive[cur_rank] && draw(w, stay) % 4 != 0) {
    return;
  }
  int alive = 0, after = 0; /* live ranks, and the position among them of the next one */
  for (int r = 0; r < w->p; r++) {
    after += w->alive[r] && r <= cur_rank;
    alive += w->alive[r];
  }
  if (alive == 0) {
    return;
  }
  int k = (int)(draw(w, (uint64_t)(after % alive)) % (uint64_t)alive);
  int next = 0;
  for (int r = 0; r < w->p; r++) {
    if (w->alive[r] && k-- == 0) {
      next = r;
      break;
    }
  }
  if (next == cur_rank) {
    return;
  }
  w->turn = next;
  pthread_cond_signal(&w->cv[next]);
  if (!w->alive[cur_rank]) {
    return;
  }
  while (w->turn != cur_rank) {
    pthread_cond_wait(&w->cv[cur_rank], &w->mu);
  }
}

void mpiar__tw_yield(void) {
  if (cur_world != NULL) {
    cur_world->clock += TW_TICK;
    pass_turn(cur_world);
  }
}

typedef struct tw_thread {
  mpiar__tw_t *w;
  int rank;
} tw_thread_t;

static void *thread_main(void *p) {
  tw_thread_t *t = p;
  mpiar__tw_t *w = t->w;
  cur_world = w;
  cur_rank = t->rank;
  pthread_mutex_lock(&w->mu);
  while (w->turn != t->rank) {
    pthread_cond_wait(&w->cv[t->rank], &w->mu);
  }
  w->body(t->rank, w->arg);
  w->alive[t->rank] = 0;
  pass_turn(w);
  pthread_mutex_unlock(&w->mu);
  cur_world = NULL;
  return NULL;
}

int mpiar__tw_run(mpiar__tw_t *w, void (*body)(int rank, void *arg), void *arg) {
  w->body = body;
  w->arg = arg;
  pthread_t *th = calloc((size_t)w->p, sizeof *th);
  tw_thread_t *ts = calloc((size_t)w->p, sizeof *ts);
  if (th == NULL || ts == NULL) {
    free(th);
    free(ts);
    return -1;
  }
  for (int r = 0; r < w->p; r++) {
    w->alive[r] = 1;
  }
  w->turn = (int)(draw(w, 0) % (uint64_t)w->p);
  int made = 0;
  for (int r = 0; r < w->p; r++) {
    ts[r].w = w;
    ts[r].rank = r;
    if (pthread_create(&th[r], NULL, thread_main, &ts[r]) != 0) {
      break;
    }
    made++;
  }
  for (int r = 0; r < made; r++) {
    pthread_join(th[r], NULL);
  }
  free(th);
  free(ts);
  return made == w->p ? 0 : -1;
}

/* ---- messages ---- */

static void capture(tw_msg_t *m) {
  if (m->data == NULL && m->len > 0) {
    m->data = malloc(m->len);
    memcpy(m->data, m->sbuf, m->len);
  }
  m->sbuf = NULL;
}

static void msg_unref(mpiar__tw_t *w, tw_msg_t *m) {
  if (--m->refs > 0) {
    return;
  }
  for (size_t i = 0; i < w->nmsgs; i++) {
    if (w->msgs[i] == m) {
      memmove(&w->msgs[i], &w->msgs[i + 1], (w->nmsgs - i - 1) * sizeof *w->msgs);
      w->nmsgs--;
      break;
    }
  }
  free(m->data);
  free(m);
}

/* Copy message @p m into @p buf (a receive completing, or a message received at once). */
static void deliver(tw_msg_t *m, void *buf) {
  if (buf != NULL && m->len > 0) {
    memcpy(buf, m->data != NULL ? m->data : m->sbuf, m->len);
  }
  m->consumed = 1;
}

static void match(mpiar__tw_t *w, size_t posted_index, tw_msg_t *m) {
  tw_op_t *op = w->posted[posted_index];
  memmove(&w->posted[posted_index], &w->posted[posted_index + 1],
          (w->nposted - posted_index - 1) * sizeof *w->posted);
  memmove(&w->posted_rank[posted_index], &w->posted_rank[posted_index + 1],
          (w->nposted - posted_index - 1) * sizeof *w->posted_rank);
  w->nposted--;
  m->matched = 1;
  op->msg = m;
  if (m->len > op->len) {
    op->err = TW_ERR_TRUNCATE;
  }
}

/* Messages in flight arrive (each channel in order), and arrivals match posted receives. */
static void tick(mpiar__tw_t *w) {
  w->clock += TW_TICK;
  for (size_t i = 0; i < w->nmsgs; i++) {
    tw_msg_t *m = w->msgs[i];
    if (m->arrived || chance(w, 3)) {
      continue;
    }
    int head = 1;
    for (size_t j = 0; j < i && head; j++) {
      tw_msg_t *o = w->msgs[j];
      head = o->arrived || o->src != m->src || o->dst != m->dst || o->tag != m->tag;
    }
    if (!head) {
      continue;
    }
    m->arrived = 1;
    for (size_t k = 0; k < w->nposted; k++) {
      tw_op_t *op = w->posted[k];
      if (w->posted_rank[k] == m->dst && op->peer == m->src && op->tag == m->tag) {
        match(w, k, m);
        break;
      }
    }
  }
}

static tw_msg_t *new_msg(mpiar__tw_t *w, int src, int dst, int tag, const void *buf, size_t len) {
  tw_msg_t *m = calloc(1, sizeof *m);
  if (m == NULL) {
    return NULL;
  }
  if (w->nmsgs == w->msgs_cap) {
    size_t cap = w->msgs_cap ? 2 * w->msgs_cap : 64;
    tw_msg_t **a = realloc(w->msgs, cap * sizeof *a);
    if (a == NULL) {
      free(m);
      return NULL;
    }
    w->msgs = a;
    w->msgs_cap = cap;
  }
  m->src = src;
  m->dst = dst;
  m->tag = tag;
  m->len = len;
  m->sbuf = buf;
  m->seq = w->seq++;
  m->refs = 2;
  w->msgs[w->nmsgs++] = m;
  return m;
}

static tw_op_t *new_send(tw_rank_t *t, const void *buf, size_t len, int peer, int tag, int *err) {
  mpiar__tw_t *w = t->w;
  *err = 0;
  if (w->fault.send_fail_rank == t->rank && t->sends++ == w->fault.send_fail_at) {
    *err = TW_ERR_SEND;
    return NULL;
  }
  tw_op_t *op = calloc(1, sizeof *op);
  tw_msg_t *m = op != NULL ? new_msg(w, t->rank, peer, tag, buf, len) : NULL;
  if (m == NULL) {
    free(op);
    *err = TW_ERR_SEND;
    return NULL;
  }
  op->send = 1;
  op->msg = m;
  m->send_op = op;
  return op;
}

/* Complete a send: its data is captured unless its receive took it already. */
static void send_done(mpiar__tw_t *w, tw_op_t *op) {
  tw_msg_t *m = op->msg;
  if (!m->consumed) {
    capture(m);
  }
  m->send_op = NULL;
  msg_unref(w, m);
  free(op);
}

static void recv_done(mpiar__tw_t *w, tw_op_t *op) {
  if (op->err == 0) {
    deliver(op->msg, op->buf);
  }
  msg_unref(w, op->msg);
  free(op);
}

/* Can @p op complete now (and does the scheduler let it)? */
static int ready(mpiar__tw_t *w, const tw_op_t *op) {
  return (op->send || op->msg != NULL) && !chance(w, 2);
}

static void keep(tw_rank_t *t, tw_op_t *op) {
  if (t->nkept == t->kept_cap) {
    size_t cap = t->kept_cap ? 2 * t->kept_cap : 16;
    tw_op_t **a = realloc(t->kept, cap * sizeof *a);
    if (a == NULL) {
      send_done(t->w, op);
      return;
    }
    t->kept = a;
    t->kept_cap = cap;
  }
  t->kept[t->nkept++] = op;
}

/* ---- the transport's functions ---- */

static int tw_reserve(void *s, size_t cap) {
  tw_rank_t *t = s;
  if (cap <= t->cap) {
    return 0;
  }
  tw_op_t **a = realloc(t->table, cap * sizeof *a);
  if (a == NULL) {
    return TW_ERR_SEND;
  }
  t->table = a;
  t->cap = cap;
  return 0;
}

static int tw_send(void *s, size_t i, const void *buf, size_t len, int peer, int tag) {
  tw_rank_t *t = s;
  int err = 0;
  t->table[i] = new_send(t, buf, len, peer, tag, &err);
  return err;
}

static int tw_recv(void *s, size_t i, void *buf, size_t len, int peer, int tag) {
  tw_rank_t *t = s;
  mpiar__tw_t *w = t->w;
  tw_op_t *op = calloc(1, sizeof *op);
  if (op == NULL) {
    return TW_ERR_SEND;
  }
  op->buf = buf;
  op->len = len;
  op->peer = peer;
  op->tag = tag;
  t->table[i] = op;
  /* The oldest arrived message of the channel, if any (arrival keeps channel order). */
  for (size_t k = 0; k < w->nmsgs; k++) {
    tw_msg_t *m = w->msgs[k];
    if (m->arrived && !m->matched && m->dst == t->rank && m->src == peer && m->tag == tag) {
      m->matched = 1;
      op->msg = m;
      if (m->len > len) {
        op->err = TW_ERR_TRUNCATE;
      }
      return 0;
    }
  }
  if (w->nposted == w->posted_cap) {
    size_t cap = w->posted_cap ? 2 * w->posted_cap : 64;
    tw_op_t **a = realloc(w->posted, cap * sizeof *a);
    int *b = a != NULL ? realloc(w->posted_rank, cap * sizeof *b) : NULL;
    if (a != NULL) {
      w->posted = a;
    }
    if (b == NULL) {
      t->table[i] = NULL;
      free(op);
      return TW_ERR_SEND;
    }
    w->posted_rank = b;
    w->posted_cap = cap;
  }
  w->posted[w->nposted] = op;
  w->posted_rank[w->nposted++] = t->rank;
  return 0;
}

static int tw_probe(void *s, int source, int tag, mpiar__txmsg_t *out, int *found) {
  tw_rank_t *t = s;
  mpiar__tw_t *w = t->w;
  tick(w);
  *found = 0;
  for (size_t k = 0; k < w->nmsgs; k++) {
    tw_msg_t *m = w->msgs[k];
    if (m->arrived && !m->matched && m->dst == t->rank &&
        (source == MPIAR__TX_ANY || m->src == source) && (tag == MPIAR__TX_ANY || m->tag == tag)) {
      m->matched = 1;
      out->handle = (uint64_t)(uintptr_t)m;
      out->source = m->src;
      out->tag = m->tag;
      out->bytes = m->len;
      *found = 1;
      break;
    }
  }
  pass_turn(w);
  return 0;
}

static int tw_recv_msg(void *s, size_t i, void *buf, mpiar__txmsg_t *mm) {
  tw_rank_t *t = s;
  tw_op_t *op = calloc(1, sizeof *op);
  tw_msg_t *m = (tw_msg_t *)(uintptr_t)mm->handle;
  if (op == NULL) {
    deliver(m, NULL);
    msg_unref(t->w, m);
    mm->handle = 0;
    return TW_ERR_SEND;
  }
  op->buf = buf;
  op->len = m->len;
  op->msg = m;
  t->table[i] = op;
  mm->handle = 0;
  return 0;
}

static int tw_recv_now(void *s, void *buf, mpiar__txmsg_t *mm) {
  tw_rank_t *t = s;
  tw_msg_t *m = (tw_msg_t *)(uintptr_t)mm->handle;
  if (m != NULL) {
    deliver(m, buf);
    msg_unref(t->w, m);
  }
  mm->handle = 0;
  return 0;
}

static int tw_poll(void *s, size_t n, mpiar__txdone_t *done, size_t *ndone) {
  tw_rank_t *t = s;
  mpiar__tw_t *w = t->w;
  tick(w);
  size_t k = 0, kept = 0;
  for (size_t i = 0; i < n; i++) {
    tw_op_t *op = t->table[i];
    if (!ready(w, op)) {
      t->table[kept++] = op;
      continue;
    }
    done[k].index = i;
    done[k].err = op->err;
    done[k].bytes = op->msg->len;
    k++;
    if (op->send) {
      send_done(w, op);
    } else {
      recv_done(w, op);
    }
  }
  *ndone = k;
  pass_turn(w);
  return 0;
}

static void unpost(mpiar__tw_t *w, tw_op_t *op) {
  for (size_t k = 0; k < w->nposted; k++) {
    if (w->posted[k] == op) {
      memmove(&w->posted[k], &w->posted[k + 1], (w->nposted - k - 1) * sizeof *w->posted);
      memmove(&w->posted_rank[k], &w->posted_rank[k + 1],
              (w->nposted - k - 1) * sizeof *w->posted_rank);
      w->nposted--;
      return;
    }
  }
}

static void tw_abandon(void *s, size_t i, int how, double until) {
  (void)until;
  (void)how;
  tw_rank_t *t = s;
  tw_op_t *op = t->table[i];
  t->table[i] = NULL;
  if (op->send) {
    keep(t, op);
  } else if (op->msg == NULL) {
    unpost(t->w, op); /* cancelled */
    free(op);
  } else {
    recv_done(t->w, op); /* matched: it finishes (a matched receive cannot be cancelled) */
  }
}

static size_t tw_compact(void *s, size_t n) {
  tw_rank_t *t = s;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->table[i] != NULL) {
      t->table[kept++] = t->table[i];
    }
  }
  return kept;
}

static int tw_send_ctl(void *s, const void *buf, size_t len, int peer, int tag,
                       mpiar__txreq_t *q) {
  tw_rank_t *t = s;
  int err = 0;
  tw_op_t *op = new_send(t, buf, len, peer, tag, &err);
  if (op == NULL) {
    return err;
  }
  if (q != NULL) {
    q->handle = (uint64_t)(uintptr_t)op;
  } else {
    keep(t, op);
  }
  return 0;
}

static int tw_test_ctl(void *s, mpiar__txreq_t *q, int *flag) {
  tw_rank_t *t = s;
  mpiar__tw_t *w = t->w;
  tick(w);
  tw_op_t *op = (tw_op_t *)(uintptr_t)q->handle;
  *flag = 0;
  if (op != NULL && ready(w, op)) {
    send_done(w, op);
    q->handle = 0;
    *flag = 1;
  }
  pass_turn(w);
  return 0;
}

static void tw_keep_ctl(void *s, mpiar__txreq_t *q) {
  tw_op_t *op = (tw_op_t *)(uintptr_t)q->handle;
  if (op != NULL) {
    keep(s, op);
  }
  q->handle = 0;
}

static size_t tw_pending(void *s) {
  tw_rank_t *t = s;
  mpiar__tw_t *w = t->w;
  tick(w);
  size_t kept = 0;
  for (size_t i = 0; i < t->nkept; i++) {
    if (ready(w, t->kept[i])) {
      send_done(w, t->kept[i]);
    } else {
      t->kept[kept++] = t->kept[i];
    }
  }
  t->nkept = kept;
  pass_turn(w);
  return kept;
}

static void tw_close(void *s) {
  tw_rank_t *t = s;
  for (size_t i = 0; i < t->nkept; i++) {
    send_done(t->w, t->kept[i]);
  }
  free(t->kept);
  free(t->table);
  t->kept = NULL;
  t->table = NULL;
  t->nkept = t->kept_cap = t->cap = 0;
}

static double tw_now(void) {
  return cur_world != NULL ? cur_world->clock : 0;
}

static void tw_error_string(int err, char *buf, size_t len) {
  snprintf(buf, len, "%s",
           err == TW_ERR_SEND       ? "injected send failure (threads transport)"
           : err == TW_ERR_TRUNCATE ? "message truncated (threads transport)"
                                    : "threads transport error");
}

const mpiar__transport_t mpiar__transport_threads = {
    .name = "threads",
    .send_name = "tw_send",
    .recv_name = "tw_recv",
    .probe_name = "tw_probe",
    .recv_msg_name = "tw_recv_msg",
    .poll_name = "tw_poll",
    .test_name = "tw_test",
    .reserve = tw_reserve,
    .send = tw_send,
    .recv = tw_recv,
    .probe = tw_probe,
    .recv_msg = tw_recv_msg,
    .recv_now = tw_recv_now,
    .poll = tw_poll,
    .abandon = tw_abandon,
    .compact = tw_compact,
    .send_ctl = tw_send_ctl,
    .test_ctl = tw_test_ctl,
    .keep_ctl = tw_keep_ctl,
    .pending = tw_pending,
    .close = tw_close,
    .now = tw_now,
    .error_string = tw_error_string,
};

mpiar__tw_t *mpiar__tw_create(int p, uint64_t seed, long tag_ub, const mpiar__tw_fault_t *fault) {
  mpiar__tw_t *w = calloc(1, sizeof *w);
  if (w == NULL) {
    return NULL;
  }
  w->p = p;
  w->rng = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  if (w->rng == 0) {
    w->rng = 1;
  }
  w->tag_ub = tag_ub;
  w->fault.send_fail_rank = -1;
  if (fault != NULL) {
    w->fault = *fault;
  }
  w->ranks = calloc((size_t)p, sizeof *w->ranks);
  w->alive = calloc((size_t)p, sizeof *w->alive);
  w->cv = calloc((size_t)p, sizeof *w->cv);
  if (w->ranks == NULL || w->alive == NULL || w->cv == NULL) {
    free(w->ranks);
    free(w->alive);
    free(w->cv);
    free(w);
    return NULL;
  }
  for (int r = 0; r < p; r++) {
    w->ranks[r].w = w;
    w->ranks[r].rank = r;
  }
  pthread_mutex_init(&w->mu, NULL);
  for (int r = 0; r < p; r++) {
    pthread_cond_init(&w->cv[r], NULL);
  }
  return w;
}

mpiar__tw_t *mpiar__tw_create_bytes(int p, const uint8_t *bytes, size_t nbytes, long tag_ub,
                                    const mpiar__tw_fault_t *fault) {
  mpiar__tw_t *w = mpiar__tw_create(p, 0, tag_ub, fault);
  if (w != NULL) {
    w->bytes = bytes != NULL ? bytes : (const uint8_t *)"";
    w->nbytes = bytes != NULL ? nbytes : 0;
  }
  return w;
}

size_t mpiar__tw_bytes_used(const mpiar__tw_t *w) {
  return w->pos;
}

int mpiar__tw_fault_fired(const mpiar__tw_t *w) {
  return w->fault.send_fail_rank >= 0 && w->fault.send_fail_rank < w->p &&
         w->ranks[w->fault.send_fail_rank].sends > w->fault.send_fail_at;
}

size_t mpiar__tw_unmatched(const mpiar__tw_t *w) {
  return w->nposted;
}

void *mpiar__tw_state(mpiar__tw_t *w, int rank) {
  return &w->ranks[rank];
}

void mpiar__tw_destroy(mpiar__tw_t *w, size_t *leftover) {
  for (int r = 0; r < w->p; r++) {
    tw_close(&w->ranks[r]);
  }
  for (size_t i = 0; i < w->nmsgs; i++) {
    if (getenv("TW_DEBUG") != NULL) {
      tw_msg_t *m = w->msgs[i];
      fprintf(stderr, "leftover %d -> %d tag %d len %zu arrived %d matched %d consumed %d refs %d send %s\n",
              m->src, m->dst, m->tag, m->len, m->arrived, m->matched, m->consumed, m->refs,
              m->send_op ? "open" : "done");
    }
    free(w->msgs[i]->send_op);
    free(w->msgs[i]->data);
    free(w->msgs[i]);
  }
  for (size_t k = 0; k < w->nposted; k++) {
    free(w->posted[k]);
  }
  if (leftover != NULL) {
    *leftover = w->nmsgs;
  }
  free(w->msgs);
  free(w->posted);
  free(w->posted_rank);
  free(w->ranks);
  free(w->alive);
  pthread_mutex_destroy(&w->mu);
  for (int r = 0; r < w->p; r++) {
    pthread_cond_destroy(&w->cv[r]);
  }
  free(w->cv);
  free(w);
}
