/*
 * The engine's life: setting it up over a transport, starting requests (slots, the message
 * table's room), failure (breaking, notices), the drain at release, and closing.
 *
 * Slots. Operations of one engine are numbered in the order they start (the same order on every
 * rank), and operation s runs in slot s mod nslots, whose number is in every tag of its messages.
 * A slot is reused only once the operation that had it has finished on this rank (the core waits
 * for it before mpiar__engine_start()); the operation that reuses it starts after that one on
 * every rank, so every receive of the earlier one matched before any receive of the later one is
 * posted, and the transport's ordering of messages between two ranks keeps each message with its
 * own operation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/engine.h"

size_t mpiar__requests_allocated;
long mpiar__requests_live;

/*
 * The tag layout of engine.h's header. At most 5 slot bits (31 operations in flight per
 * communicator; a start beyond waits for the oldest to finish) and at most 20 size bits (exact
 * lengths below 1 MiB).
 */
void mpiar__engine_tag_layout(mpiar__engine_t *e, long tag_ub) {
  int bits = 0;
  while (bits < 31 && (1L << (bits + 1)) - 1 <= tag_ub) {
    bits++;
  }
  int spare = bits - MPIAR__TAG_BITS;
  e->slot_bits = spare >= 7 ? 5 : (spare > 2 ? spare - 2 : 1);
  e->size_bits = spare - e->slot_bits;
  if (e->size_bits > 20) {
    e->size_bits = 20;
  }
  if (e->size_bits < 0) {
    e->size_bits = 0;
  }
  e->nslots = (1 << e->slot_bits) - 1;
  e->exact_max = e->size_bits > 0 ? ((size_t)1 << e->size_bits) - 1 : 0;
}

int mpiar__engine_init(mpiar__engine_t *e, const mpiar__transport_t *tx, void *txs, int rank,
                       int size, long tag_ub) {
  e->tx = tx;
  e->txs = txs;
  e->rank = rank;
  e->size = size;
  mpiar__engine_tag_layout(e, tag_ub);
  if (e->slot_req == NULL) {
    e->slot_req = calloc((size_t)e->nslots, sizeof *e->slot_req);
  }
  if (e->held == NULL) {
    e->held = calloc(MPIAR__HELD_MAX, sizeof *e->held);
  }
  if (e->slot_req == NULL || e->held == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a communicator context");
  }
  return MPIAR_SUCCESS;
}

void mpiar__engine_break(mpiar__engine_t *e, int code, const char *reason, int notify) {
  if (!e->broken) {
    e->broken = 1;
    snprintf(e->broken_reason, sizeof e->broken_reason, "%s", reason);
  }
  /* Every request in progress fails with @p code and the reason. */
  while (e->active != NULL) {
    mpiar__request_fail(e->active, code, reason);
  }
  if (notify && e->tx != NULL && e->size > 1) {
    e->notice_out.rank = e->rank;
    e->notice_out.code = code;
    snprintf(e->notice_out.detail, sizeof e->notice_out.detail, "%s", reason);
    int tag = (e->nslots << (e->size_bits + MPIAR__TAG_BITS)) | MPIAR__CTL_NOTICE;
    for (int r = 0; r < e->size; r++) {
      if (r != e->rank) {
        e->tx->send_ctl(e->txs, &e->notice_out, sizeof e->notice_out, r, tag, NULL);
      }
    }
  }
}

/* Room in the owner table for @p need entries (the transport's table grows alike). */
static int table_reserve(mpiar__engine_t *e, size_t need) {
  if (need <= e->mcap) {
    return MPIAR_SUCCESS;
  }
  size_t cap = e->mcap ? e->mcap : 64;
  while (cap < need) {
    cap *= 2;
  }
  struct mpiar__mowner *o = realloc(e->mown, cap * sizeof *o);
  if (o != NULL) {
    e->mown = o;
  }
  mpiar__txdone_t *d = o ? realloc(e->mdone, cap * sizeof *d) : NULL;
  if (d != NULL) {
    e->mdone = d;
  }
  if (d == NULL || e->tx->reserve(e->txs, cap) != 0) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot grow the request table to %zu entries", cap);
  }
  e->mcap = cap;
  return MPIAR_SUCCESS;
}

int mpiar__engine_start(mpiar__engine_t *e, mpiar__request_t *r, double deadline) {
  int slot = e->next_slot; /* seq mod nslots */
  /* Room in the table for every message of every run in flight (it grows only when a larger mix
   * of operations than ever before is in flight). */
  int rc = table_reserve(e, e->mreserved + r->plan->npieces + 2);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  e->mreserved += r->plan->npieces;
  r->seq = e->seq++;
  e->next_slot = slot + 1 < e->nslots ? slot + 1 : 0;
  r->slot = slot;
  r->tag_base = slot << (e->size_bits + MPIAR__TAG_BITS);
  r->deadline = deadline;
  r->state = MPIAR__REQ_ACTIVE;
  r->rc = MPIAR_SUCCESS;
  e->slot_req[slot] = r;
  /* Append, so passes visit requests in start order. */
  r->anext = NULL;
  r->aprev = e->active_tail;
  if (e->active_tail != NULL) {
    e->active_tail->anext = r;
  } else {
    e->active = r;
  }
  e->active_tail = r;
  e->nactive++;
  if (r->check && e->size > 1) {
    mpiar__check_init(r);
  } else {
    r->check_rounds = r->check_round = 0;
    mpiar__request_begin(r);
  }
  /* Post the first messages now, as MPI's nonblocking calls do. */
  mpiar__request_post(r);
  return MPIAR_SUCCESS;
}

/* ---- the drain at release ---- */

int mpiar__drain_begin(mpiar__engine_t *e, mpiar__drain_t *d) {
  memset(d, 0, sizeof *d);
  d->done = 1;
  if (e->tx == NULL || e->size <= 1) {
    return MPIAR_SUCCESS;
  }
  d->fin_from = calloc((size_t)e->size, 1);
  if (d->fin_from == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  d->done = 0;
  for (int r = 0; r < e->size && e->fin_early != NULL; r++) {
    d->fin_from[r] = e->fin_early[r];
    d->fins += e->fin_early[r];
  }
  return MPIAR_SUCCESS;
}

void mpiar__drain_pass(mpiar__engine_t *e, mpiar__drain_t *d) {
  /* Leftover messages of failed operations. */
  size_t pending = e->tx->pending(e->txs);
  /* Messages taken out of the queue earlier, and everything that arrives now. */
  while (e->nheld > 0) {
    mpiar__held_discard(e, &e->held[--e->nheld]);
  }
  int ctl_slot = e->nslots;
  for (;;) {
    int found = 0;
    mpiar__txmsg_t m;
    if (e->tx->probe(e->txs, MPIAR__TX_ANY, MPIAR__TX_ANY, &m, &found) != 0 || !found) {
      break;
    }
    int slot = m.tag >> (e->size_bits + MPIAR__TAG_BITS);
    int type = m.tag & ((1 << MPIAR__TAG_BITS) - 1);
    if (slot == ctl_slot && type == MPIAR__CTL_FIN && m.source >= 0 && m.source < e->size &&
        !d->fin_from[m.source]) {
      d->fin_from[m.source] = 1;
      d->fins++;
    }
    mpiar__discard(e, &m, m.bytes);
  }
  if (!d->fin_sent && pending == 0) {
    /* Everything this rank sent has been received: say so to every rank. */
    int tag = (ctl_slot << (e->size_bits + MPIAR__TAG_BITS)) | MPIAR__CTL_FIN;
    for (int r = 0; r < e->size; r++) {
      if (r != e->rank) {
        e->tx->send_ctl(e->txs, NULL, 0, r, tag, NULL);
      }
    }
    d->fin_sent = 1;
    pending = e->tx->pending(e->txs);
  }
  if (d->fin_sent && pending == 0 && d->fins == e->size - 1) {
    d->done = 1;
  }
}

void mpiar__engine_detach(mpiar__engine_t *e) {
  if (e->tx != NULL) {
    e->tx->close(e->txs);
    e->tx = NULL;
    e->txs = NULL;
  }
}

void mpiar__engine_close(mpiar__engine_t *e) {
  mpiar__engine_detach(e);
  while (e->tainted != NULL) {
    mpiar__request_t *r = e->tainted;
    e->tainted = r->anext;
    mpiar__request_free_mem(r);
  }
  free(e->mown);
  free(e->mdone);
  free(e->slot_req);
  free(e->fin_early);
  free(e->held);
  e->mown = NULL;
  e->mdone = NULL;
  e->slot_req = NULL;
  e->fin_early = NULL;
  e->held = NULL;
  e->nm = e->mcap = 0;
}

/* ---- what the engine derives from a schedule ---- */

/* The pieces of every SEND and RECV step, with their tags (step tag | size field). */
static int plan_pieces(mpiar__plan_t *plan, size_t exact_max, size_t max) {
  const mpiar__schedule_t *s = &plan->sched;
  size_t n = 0;
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    if (st->kind == MPIAR__STEP_SEND || st->kind == MPIAR__STEP_RECV) {
      size_t bytes = st->count * s->elem_size;
      n += bytes <= max ? 1 : (bytes + max - 1) / max;
    }
  }
  if (n >= UINT32_MAX) {
    return mpiar__error(MPIAR_ERR_NOMEM, "%s: %zu messages per rank is more than a plan holds",
                        plan->name, n);
  }
  plan->pieces = malloc((n + 1) * sizeof *plan->pieces);
  plan->piece_first = malloc((s->nsteps + 1) * sizeof *plan->piece_first);
  if (plan->pieces == NULL || plan->piece_first == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate %zu message pieces", n);
  }
  size_t k = 0;
  size_t large = exact_max; /* the size field's value that means "probe for the length" */
  for (size_t i = 0; i < s->nsteps; i++) {
    plan->piece_first[i] = (uint32_t)k;
    const mpiar__step_t *st = &s->steps[i];
    if (st->kind != MPIAR__STEP_SEND && st->kind != MPIAR__STEP_RECV) {
      continue;
    }
    size_t bytes = st->count * s->elem_size;
    size_t off = 0;
    do {
      size_t len = bytes - off < max ? bytes - off : max;
      mpiar__piece_t *p = &plan->pieces[k++];
      p->step = (uint32_t)i;
      p->off = off;
      p->len = len;
      p->exact = len < exact_max;
      size_t field = p->exact ? len : large;
      p->tag = (int)((field << MPIAR__TAG_BITS) | (size_t)st->tag);
      off += len;
    } while (off < bytes);
  }
  plan->piece_first[s->nsteps] = (uint32_t)k;
  plan->npieces = k;
  return MPIAR_SUCCESS;
}

int mpiar__plan_prepare(mpiar__plan_t *plan, size_t exact_max, size_t max_message_bytes) {
  int rc = MPIAR_SUCCESS;
  const mpiar__schedule_t *s = &plan->sched;
  size_t n = s->nsteps;
  plan->ndeps = malloc((n + 1) * sizeof *plan->ndeps);
  plan->start = malloc((n + 1) * sizeof *plan->start);
  if (plan->ndeps == NULL || plan->start == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "cannot allocate the executor state of a %zu-step plan", n);
  }
  for (size_t i = 0; i < n; i++) {
    plan->ndeps[i] = s->steps[i].ndeps;
    if (s->steps[i].ndeps == 0) {
      plan->start[plan->nstart++] = (uint32_t)i;
    }
  }
  MPIAR__CHECK(plan_pieces(plan, exact_max, max_message_bytes));
  plan->scratch_bytes = s->scratch_elems * s->elem_size;
cleanup:
  return rc;
}

void mpiar__plan_unprepare(mpiar__plan_t *plan) {
  mpiar__schedule_destroy(&plan->sched);
  free(plan->ndeps);
  free(plan->start);
  free(plan->piece_first);
  free(plan->pieces);
  plan->ndeps = plan->start = plan->piece_first = NULL;
  plan->pieces = NULL;
}

/* ---- request memory ---- */

static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) & ~(a - 1);
}

/* One allocation: the request, then its working arrays, then its scratch (64-byte aligned). */
mpiar__request_t *mpiar__request_alloc(const mpiar__plan_t *plan) {
  size_t n = plan->sched.nsteps, np = plan->npieces;
  size_t off = align_up(sizeof(mpiar__request_t), 64);
  size_t o_pending = off;
  off += (n + 1) * sizeof(uint32_t);
  size_t o_ready = off;
  off += (2 * n + 1) * sizeof(uint32_t);
  size_t o_left = off;
  off += (n + 1) * sizeof(uint32_t);
  size_t o_probing = off;
  off += (np + 1) * sizeof(uint32_t);
  size_t o_state = off;
  off += np + 1;
  off = align_up(off, 64);
  size_t o_scratch = off;
  off += align_up(plan->scratch_bytes, 64);
  char *block = NULL;
  if (posix_memalign((void **)&block, 64, off) != 0) {
    return NULL;
  }
  mpiar__request_t *r = (mpiar__request_t *)block;
  memset(r, 0, sizeof *r);
  r->pending = (uint32_t *)(block + o_pending);
  r->ready = (uint32_t *)(block + o_ready);
  r->piece_left = (uint32_t *)(block + o_left);
  r->probing = (uint32_t *)(block + o_probing);
  r->piece_state = (uint8_t *)(block + o_state);
  /* Never NULL, even when empty: a zero-length step of a rank with no scratch (a block of no
   * element) still forms its address, and NULL + 0 is undefined behaviour. */
  r->scratch = block + o_scratch;
  __atomic_fetch_add(&mpiar__requests_allocated, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&mpiar__requests_live, 1, __ATOMIC_RELAXED);
  return r;
}

void mpiar__request_free_mem(mpiar__request_t *r) {
  if (r != NULL) {
    __atomic_fetch_sub(&mpiar__requests_live, 1, __ATOMIC_RELAXED);
    free(r);
  }
}
