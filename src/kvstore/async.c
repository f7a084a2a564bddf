/*
 * Asynchronous pushpull (mpiar_kv_pushpull_async): the MXNet trainer's pattern of starting each
 * gradient's reduction as the backward pass produces it, with priorities, fusion and overlap.
 *
 * Tensors are queued, and the queue starts at points that depend only on the sequence of calls
 * (the same on every worker): when it holds a fusion buffer's worth, when a tensor larger than
 * the threshold arrives, at mpiar_kv_wait_all(), and at the first test or wait on a queued
 * request. A start sorts the queue by priority (higher first, ties in call order), runs the
 * metadata agreement over it (verify = 1), packs consecutive tensors of one dtype into fusion
 * buffers (larger ones go alone, on the caller's buffers) and starts one nonblocking allreduce
 * per buffer (per 4 MiB piece where the store cuts reductions). Each tensor's request is a
 * generalized request (core/grequest.h): testing it advances its buffer's allreduces and, when
 * they finish, copies the results out. The reductions are those of pushpull_batch, so the
 * results equal per-key pushpull bit for bit.
 *
 * Node-shared buffers (kv->shared, shared.c): fused batches take their buffer from a ring of
 * SHARED_RING buffers in mpiar_alloc memory instead of the pool, the n-th fused batch slot
 * n mod SHARED_RING, so that every allocation happens at the same start on every worker (the
 * pool's contents depend on when each worker's batches finished, which differs). A start whose
 * slot still serves an older batch finishes that batch first: its allreduce needs every worker's
 * share, and every worker reaches this start, polling the same batch, so none waits for a
 * worker that waits for it.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "core/grequest.h"
#include "kvstore/kv_internal.h"

typedef struct batch batch_t;

/* One asynchronous pushpull. */
typedef struct op {
  mpiar_kv_t *kv; /* NULL once finished (the store may be destroyed before its request) */
  mpiar__kv_entry_t *e;
  const void *in;
  void *out;
  int priority;
  uint64_t order;
  batch_t *batch; /* NULL while queued */
  int done, rc;
  char detail[256];
  int held;      /* the caller holds a request for it */
  struct op *next; /* the queue, or the store's list of unfinished operations */
} op_t;

/* One fusion buffer (or one large tensor on the caller's buffers) and its allreduces. */
struct batch {
  mpiar_kv_t *kv;
  unsigned char *buf; /* fusion buffer from the store's pool, NULL for a lone tensor */
  size_t cap;
  int slot; /* its node-shared ring slot, or -1 (buf from the pool) */
  op_t **ops;
  size_t nops;
  mpiar_request_t *reqs;
  size_t nreqs;
  int finished, rc;
  char detail[256];
  size_t users; /* operations not yet released */
};

/* Fusion buffers kept for reuse, so that a training step allocates none after the first. */
#define POOL_MAX 8

#define SHARED_RING MPIAR__KV_SHARED_RING

typedef struct mpiar__kv_async {
  op_t *queue, **tail; /* queued, in call order */
  size_t queued, queued_bytes;
  uint64_t order;
  op_t *live; /* started, not finished (for wait_all) */
  unsigned char *pool[POOL_MAX];
  size_t pool_cap[POOL_MAX];
  int npool;
  mpiar__kv_shbuf_t ring[SHARED_RING]; /* node-shared buffers (kv->shared) */
  batch_t *ring_user[SHARED_RING];     /* the unfinished batch in each slot, or NULL */
  uint64_t nring;                      /* fused batches started on the ring */
  /* The order numbers of the last started tensors, in start order (tests). */
  uint64_t started[64];
  size_t nstarted;
} async_t;

size_t mpiar__kv_async_queued(const mpiar_kv_t *kv) {
  return kv->async != NULL ? kv->async->queued : 0;
}

size_t mpiar__kv_async_started(const mpiar_kv_t *kv, uint64_t *orders, size_t max) {
  const async_t *a = kv->async;
  size_t n = a == NULL ? 0 : (a->nstarted < 64 ? a->nstarted : 64);
  for (size_t i = 0; i < n && i < max; i++) {
    orders[i] = a->started[(a->nstarted - n + i) % 64];
  }
  return n < max ? n : max;
}

static async_t *async_of(mpiar_kv_t *kv) {
  if (kv->async == NULL) {
    kv->async = calloc(1, sizeof *kv->async);
    if (kv->async != NULL) {
      kv->async->tail = &kv->async->queue;
    }
  }
  return kv->async;
}

static unsigned char *pool_get(async_t *a, size_t bytes, size_t *cap) {
  for (int i = 0; i < a->npool; i++) {
    if (a->pool_cap[i] >= bytes) {
      unsigned char *b = a->pool[i];
      *cap = a->pool_cap[i];
      a->pool[i] = a->pool[--a->npool];
      a->pool_cap[i] = a->pool_cap[a->npool];
      return b;
    }
  }
  *cap = bytes;
  return malloc(bytes);
}

static void pool_put(async_t *a, unsigned char *b, size_t cap) {
  if (a != NULL && a->npool < POOL_MAX) {
    a->pool[a->npool] = b;
    a->pool_cap[a->npool++] = cap;
  } else {
    free(b);
  }
}

static void batch_release(batch_t *b) {
  if (--b->users > 0) {
    return;
  }
  free(b->ops);
  free(b->reqs);
  free(b);
}

static void op_release(op_t *o) {
  if (o->batch != NULL) {
    batch_release(o->batch);
  }
  free(o);
}

static void op_finish(op_t *o, int rc, const char *detail) {
  o->done = 1;
  o->rc = rc;
  snprintf(o->detail, sizeof o->detail, "%s", rc != MPIAR_SUCCESS ? detail : "");
  mpiar_kv_t *kv = o->kv;
  o->kv = NULL;
  if (kv != NULL && kv->async != NULL) {
    for (op_t **l = &kv->async->live; *l != NULL; l = &(*l)->next) {
      if (*l == o) {
        *l = o->next;
        break;
      }
    }
  }
  o->next = NULL;
  if (!o->held) {
    op_release(o);
  }
}

/* All of a batch's allreduces finished: copy the fused results out and finish its tensors. */
static void batch_finish(batch_t *b) {
  b->finished = 1;
  if (b->rc == MPIAR_SUCCESS && b->buf != NULL) {
    size_t off = 0;
    for (size_t k = 0; k < b->nops; k++) {
      memcpy(b->ops[k]->out, b->buf + off, b->ops[k]->e->bytes);
      off += b->ops[k]->e->bytes;
    }
  }
  if (b->buf != NULL && b->slot >= 0) {
    b->kv->async->ring_user[b->slot] = NULL;
  } else if (b->buf != NULL) {
    pool_put(b->kv != NULL ? b->kv->async : NULL, b->buf, b->cap);
  }
  b->buf = NULL;
  b->users++; /* keep the batch while its operations finish */
  for (size_t k = 0; k < b->nops; k++) {
    op_finish(b->ops[k], b->rc, b->detail);
  }
  batch_release(b);
}

/* Advance a batch's allreduces once. */
static void batch_poll(batch_t *b) {
  if (b->finished) {
    return;
  }
  size_t left = 0;
  for (size_t i = 0; i < b->nreqs; i++) {
    if (b->reqs[i] == MPIAR_REQUEST_NULL) {
      continue;
    }
    int done = 0;
    int rc = mpiar_test(&b->reqs[i], &done);
    if (rc != MPIAR_SUCCESS && b->rc == MPIAR_SUCCESS) {
      b->rc = rc;
      snprintf(b->detail, sizeof b->detail, "%s", mpiar_last_error());
    }
    left += !done && rc == MPIAR_SUCCESS;
    if (rc != MPIAR_SUCCESS && !done) {
      /* Another thread inside the communicator: leave it for the next poll. */
      left++;
    }
  }
  if (left == 0) {
    batch_finish(b);
  }
}

/* Start the allreduces of a batch (in pieces where the store cuts its reductions). */
static int batch_start(mpiar_kv_t *kv, batch_t *b, const void *send, void *recv, size_t count,
                       mpiar_dtype_t dtype) {
  size_t es = mpiar_dtype_size(dtype);
  size_t chunk = mpiar__kv_cut(kv, dtype) ? mpiar__kv_chunk_bytes / es : count;
  chunk = chunk > 0 ? chunk : 1;
  size_t n = count == 0 ? 0 : (count + chunk - 1) / chunk;
  b->reqs = calloc(n + 1, sizeof *b->reqs);
  if (b->reqs == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "async pushpull: %zu requests", n);
  }
  for (size_t off = 0; off < count; off += chunk) {
    size_t len = count - off < chunk ? count - off : chunk;
    const void *s = send == MPIAR_IN_PLACE ? MPIAR_IN_PLACE : (const char *)send + off * es;
    int rc = mpiar_iallreduce(s, (char *)recv + off * es, len, dtype, kv->op, kv->comm,
                              mpiar__kv_data_options(kv, dtype), &b->reqs[b->nreqs]);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
    b->nreqs++;
  }
  return MPIAR_SUCCESS;
}

/*
 * The next ring slot for a fused batch of @p bytes (collective: every worker starts the same
 * fused batches in the same order). Leaves b->buf NULL when the store uses ordinary memory.
 */
static int ring_get(mpiar_kv_t *kv, batch_t *b, size_t bytes) {
  async_t *a = kv->async;
  if (!kv->shared) {
    return MPIAR_SUCCESS;
  }
  size_t k = (size_t)(a->nring % SHARED_RING);
  unsigned idle = 0;
  while (a->ring_user[k] != NULL) {
    batch_poll(a->ring_user[k]); /* finishing it clears the slot */
    if (a->ring_user[k] != NULL && ++idle > 64) {
      sched_yield();
    }
  }
  int rc = mpiar__kv_shared_fit(kv, &a->ring[k], bytes);
  if (rc < 0) {
    return rc;
  }
  if (rc == 1) {
    a->nring++;
    a->ring_user[k] = b;
    b->slot = (int)k;
    b->buf = a->ring[k].buf;
    b->cap = a->ring[k].cap;
  }
  return MPIAR_SUCCESS;
}

/* Make a batch of ops[0..n) (one lone tensor, or a fused buffer) and start it. */
static void batch_make(mpiar_kv_t *kv, op_t **ops, size_t n, size_t bytes) {
  batch_t *b = calloc(1, sizeof *b);
  op_t **list = b != NULL ? malloc(n * sizeof *list) : NULL;
  int rc = MPIAR_SUCCESS;
  if (b == NULL || list == NULL) {
    free(b);
    rc = mpiar__error(MPIAR_ERR_NOMEM, "async pushpull: a batch of %zu tensors", n);
    for (size_t k = 0; k < n; k++) {
      op_finish(ops[k], rc, mpiar_last_error());
    }
    return;
  }
  memcpy(list, ops, n * sizeof *list);
  b->slot = -1;
  b->kv = kv;
  b->ops = list;
  b->nops = n;
  b->users = n;
  for (size_t k = 0; k < n; k++) {
    ops[k]->batch = b;
  }
  mpiar_dtype_t dtype = ops[0]->e->dtype;
  if (n == 1) {
    op_t *o = ops[0];
    rc = batch_start(kv, b, o->in == o->out ? MPIAR_IN_PLACE : o->in, o->out, o->e->count, dtype);
  } else {
    rc = ring_get(kv, b, bytes);
    if (rc == MPIAR_SUCCESS && b->buf == NULL) {
      b->buf = pool_get(kv->async, bytes, &b->cap);
    }
    if (rc != MPIAR_SUCCESS) {
    } else if (b->buf == NULL) {
      rc = mpiar__error(MPIAR_ERR_NOMEM, "async pushpull: fusion buffer of %zu bytes", bytes);
    } else {
      size_t off = 0, count = 0;
      for (size_t k = 0; k < n; k++) {
        memcpy(b->buf + off, ops[k]->in, ops[k]->e->bytes);
        off += ops[k]->e->bytes;
        count += ops[k]->e->count;
      }
      rc = batch_start(kv, b, MPIAR_IN_PLACE, b->buf, count, dtype);
    }
  }
  if (rc != MPIAR_SUCCESS) {
    b->rc = rc;
    snprintf(b->detail, sizeof b->detail, "%s", mpiar_last_error());
    /* Pieces already started still complete (they are collective); then the batch fails. */
  }
  batch_poll(b);
}

/* Start everything queued, in priority order (see the file header). */
static int flush(mpiar_kv_t *kv) {
  async_t *a = kv->async;
  if (a == NULL || a->queued == 0) {
    return MPIAR_SUCCESS;
  }
  size_t n = a->queued;
  op_t **ops = malloc(n * sizeof *ops);
  if (ops == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "async pushpull: a queue of %zu tensors", n);
  }
  size_t k = 0;
  for (op_t *o = a->queue; o != NULL; o = o->next) {
    ops[k++] = o;
  }
  a->queue = NULL;
  a->tail = &a->queue;
  a->queued = a->queued_bytes = 0;
  /* Insertion sort: higher priority first, then call order (a queue is a few hundred tensors). */
  for (size_t i = 1; i < n; i++) {
    op_t *x = ops[i];
    size_t j = i;
    while (j > 0 && (ops[j - 1]->priority < x->priority ||
                     (ops[j - 1]->priority == x->priority && ops[j - 1]->order > x->order))) {
      ops[j] = ops[j - 1];
      j--;
    }
    ops[j] = x;
  }
  for (size_t i = 0; i < n; i++) {
    ops[i]->next = a->live;
    a->live = ops[i];
    a->started[a->nstarted++ % 64] = ops[i]->order;
  }
  int rc = MPIAR_SUCCESS;
  if (kv->verify) {
    uint64_t h = mpiar__kv_hash_add(MPIAR__KV_PUSHPULL_ASYNC, n);
    for (size_t i = 0; i < n; i++) {
      h = mpiar__kv_entry_hash(mpiar__kv_hash_add(h, (uint64_t)(int64_t)ops[i]->priority),
                               ops[i]->e);
    }
    char what[MPIAR__KV_WHAT_MAX];
    snprintf(what, sizeof what, "pushpull_async of %zu queued keys", n);
    rc = mpiar__kv_agree(kv, MPIAR_SUCCESS, h, what, 0);
  }
  if (rc != MPIAR_SUCCESS) {
    char detail[256];
    snprintf(detail, sizeof detail, "%s", mpiar_last_error());
    for (size_t i = 0; i < n; i++) {
      op_finish(ops[i], rc, detail);
    }
    free(ops);
    return rc;
  }
  size_t i = 0;
  while (i < n) {
    op_t *o = ops[i];
    if (o->e->count == 0) {
      op_finish(o, MPIAR_SUCCESS, "");
      i++;
      continue;
    }
    if (o->e->bytes > kv->fusion_bytes) {
      batch_make(kv, &ops[i], 1, o->e->bytes);
      i++;
      continue;
    }
    /* Consecutive tensors of this dtype that fit one buffer. */
    size_t j = i, bytes = 0;
    while (j < n && ops[j]->e->dtype == o->e->dtype && ops[j]->e->count > 0 &&
           ops[j]->e->bytes <= kv->fusion_bytes && bytes + ops[j]->e->bytes <= kv->fusion_bytes) {
      bytes += ops[j]->e->bytes;
      j++;
    }
    batch_make(kv, &ops[i], j - i, bytes);
    i = j;
  }
  free(ops);
  return MPIAR_SUCCESS;
}

static int op_poll(void *state, int *done) {
  op_t *o = state;
  if (!o->done && o->batch == NULL && o->kv != NULL) {
    /* The first test or wait on a queued tensor starts the queue (a collective point). */
    int rc = flush(o->kv);
    if (rc != MPIAR_SUCCESS && !o->done) {
      op_finish(o, rc, mpiar_last_error());
    }
  }
  if (!o->done && o->batch != NULL) {
    batch_poll(o->batch);
  }
  *done = o->done;
  if (o->done && o->rc != MPIAR_SUCCESS) {
    return mpiar__error(o->rc, "%s", o->detail);
  }
  return o->done ? o->rc : MPIAR_SUCCESS;
}

static void op_free(void *state) {
  op_t *o = state;
  o->held = 0;
  if (o->done) {
    op_release(o);
  }
}

int mpiar_kv_pushpull_async(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *in, void *out,
                            int priority, mpiar_request_t *req) {
  mpiar__error_clear();
  if (req != NULL) {
    *req = MPIAR_REQUEST_NULL;
  }
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "kvstore handle is NULL");
  }
  char what[MPIAR__KV_WHAT_MAX];
  snprintf(what, sizeof what, "pushpull_async");
  if (in == MPIAR_IN_PLACE) {
    in = out;
  }
  mpiar__kv_entry_t *e = NULL;
  int rc = mpiar__kv_find_key(kv, key, what, &e);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__kv_check_tensor(kv, e, in, out, kv->op, what);
  }
  async_t *a = rc == MPIAR_SUCCESS ? async_of(kv) : NULL;
  op_t *o = a != NULL ? calloc(1, sizeof *o) : NULL;
  if (rc == MPIAR_SUCCESS && o == NULL) {
    rc = mpiar__error(MPIAR_ERR_NOMEM, "pushpull_async: an operation");
  }
  if (rc != MPIAR_SUCCESS) {
    free(o);
    return rc;
  }
  o->kv = kv;
  o->e = e;
  o->in = in;
  o->out = out;
  o->priority = priority;
  o->order = a->order++;
  if (req != NULL) {
    if ((rc = mpiar__grequest_start(op_poll, op_free, o, req)) != MPIAR_SUCCESS) {
      free(o);
      return rc;
    }
    o->held = 1;
  }
  *a->tail = o;
  a->tail = &o->next;
  a->queued++;
  a->queued_bytes += e->bytes;
  if (e->bytes > kv->fusion_bytes || a->queued_bytes >= kv->fusion_bytes) {
    /* Errors of the start are the operations' own: they complete with them. */
    flush(kv);
  }
  return MPIAR_SUCCESS;
}

int mpiar_kv_wait_all(mpiar_kv_t *kv) {
  mpiar__error_clear();
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "kvstore handle is NULL");
  }
  async_t *a = kv->async;
  if (a == NULL) {
    return MPIAR_SUCCESS;
  }
  int first = flush(kv);
  char detail[256] = "";
  if (first != MPIAR_SUCCESS) {
    snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  }
  unsigned idle = 0;
  while (a->live != NULL) {
    op_t *o = a->live;
    batch_t *b = o->batch;
    int held = o->held;
    o->held = 1; /* keep it while looking at its result */
    if (b != NULL) {
      batch_poll(b);
    }
    if (o->done) {
      if (o->rc != MPIAR_SUCCESS && first == MPIAR_SUCCESS) {
        first = o->rc;
        snprintf(detail, sizeof detail, "%s", o->detail);
      }
      o->held = held;
      if (!held) {
        op_release(o);
      }
      idle = 0;
      continue;
    }
    o->held = held;
    if (++idle > 64) {
      sched_yield();
    }
  }
  if (first != MPIAR_SUCCESS) {
    return mpiar__error(first, "%s", detail);
  }
  return MPIAR_SUCCESS;
}

int mpiar__kv_async_finish(mpiar_kv_t *kv) {
  if (kv->async == NULL) {
    return MPIAR_SUCCESS;
  }
  int rc = mpiar_kv_wait_all(kv);
  async_t *a = kv->async;
  for (int i = 0; i < a->npool; i++) {
    free(a->pool[i]);
  }
  /* Collective: every worker allocated the same slots (ring_get). */
  for (int k = 0; k < SHARED_RING; k++) {
    mpiar__kv_shared_release(&a->ring[k]);
  }
  free(a);
  kv->async = NULL;
  return rc;
}
