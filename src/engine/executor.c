/*
 * The executor: runs requests (one rank's schedule each) with nonblocking messages of the
 * engine's transport (transport.h).
 *
 * A step becomes ready when its dependencies are complete. Ready communication steps are posted
 * at once (receives as early as the schedule allows); ready reductions run one per pass with a
 * poll of the transport (one completion test over every message) between them, so a segmented
 * schedule overlaps the transfer of chunk k+1 with the reduction of chunk k. A pass over an engine
 * advances every request in progress on it, so outstanding operations progress together whichever
 * one is waited for.
 *
 * Receives never truncate: a message shorter than the tag's size field can hold carries its exact
 * length in its tag, and its receive is posted with that tag, so a message of another length
 * cannot match it; a longer message is taken with a probe and received only if its length is
 * the expected one. (MPICH raises a truncated receive on MPI_COMM_WORLD's error handler, which
 * aborts by default, whatever the private communicator's handler says.) A message of another
 * length is found by the scan of unexpected messages that runs while a rank waits: it names what
 * each side expected, and the rank breaks the engine and notifies the others.
 *
 * The deadline is checked every MPIAR__CLOCK_PASSES passes and after every reduction, whether or
 * not anything progresses, so a call returns within about one reduction of its deadline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/engine.h"
#include "reduce_kernels/kernels.h"

/* Passes between two looks at the clock. */
#define MPIAR__CLOCK_PASSES 16

/* How long a failed request waits for receives that already matched a message to finish. */
#define MPIAR__ABANDON_WAIT_S 5.0

/* Matched receives (recv_msg) are in state PIECE_POSTED with this flag: they cannot be
 * cancelled. */
#define PIECE_MATCHED 0x80

/* Marks a table owner whose entry completed in this poll (pieces are far fewer than 2^31). */
#define OWNER_DONE 0x80000000u

static inline char *addr(const mpiar__request_t *r, mpiar__operand_t o) {
  return r->base[o.buf] + o.off * r->plan->sched.elem_size;
}

static inline void make_ready(mpiar__request_t *r, uint32_t step) {
  const mpiar__schedule_t *s = &r->plan->sched;
  uint8_t kind = s->steps[step].kind;
  if (kind == MPIAR__STEP_SEND || kind == MPIAR__STEP_RECV) {
    r->ready[r->comm_tail++] = step;
  } else {
    r->ready[s->nsteps + r->comp_tail++] = step;
  }
}

static inline void complete_step(mpiar__request_t *r, uint32_t step) {
  const mpiar__schedule_t *s = &r->plan->sched;
  r->done++;
  r->eng->progress_count++;
  for (uint32_t k = s->succ_first[step]; k < s->succ_first[step + 1]; k++) {
    uint32_t next = s->succ[k];
    if (--r->pending[next] == 0) {
      make_ready(r, next);
    }
  }
}

int mpiar__tx_error(int err, const char *what, const mpiar__request_t *r, uint32_t step) {
  char msg[512];
  r->eng->tx->error_string(err, msg, sizeof msg);
  return mpiar__error(MPIAR_ERR_MPI, "rank %d: %s in %s step %u failed: %s", r->eng->rank, what,
                      r->plan->name, step, msg);
}

/* ---- messages taken out of the transport's queue ---- */

/* Remove and return the earliest held message from @p source with @p tag; 0 if none. */
static int held_take(mpiar__engine_t *e, int source, int tag, mpiar__held_t *out) {
  for (int i = 0; i < e->nheld; i++) {
    if (e->held[i].msg.source == source && e->held[i].msg.tag == tag) {
      *out = e->held[i];
      memmove(&e->held[i], &e->held[i + 1], (size_t)(e->nheld - i - 1) * sizeof *e->held);
      e->nheld--;
      return 1;
    }
  }
  return 0;
}

int mpiar__take_message(mpiar__engine_t *e, int source, int tag, mpiar__held_t *out) {
  if (e->nheld > 0 && held_take(e, source, tag, out)) {
    return 1;
  }
  int found = 0;
  int err = e->tx->probe(e->txs, source, tag, &out->msg, &found);
  if (err != 0) {
    return -(err > 0 ? err : 1);
  }
  if (!found) {
    return 0;
  }
  out->data = NULL;
  return 1;
}

void mpiar__discard(mpiar__engine_t *e, mpiar__txmsg_t *msg, size_t bytes) {
  (void)bytes; /* the message knows its length */
  e->tx->recv_now(e->txs, NULL, msg);
}

void mpiar__held_discard(mpiar__engine_t *e, mpiar__held_t *h) {
  if (h->data != NULL) {
    free(h->data);
    h->data = NULL;
  } else {
    mpiar__discard(e, &h->msg, h->msg.bytes);
  }
}

/* ---- posting and completing messages ---- */

/* Record the owner of the message just posted as entry e->nm (room was made at the start). */
static inline void add_owner(mpiar__request_t *r, uint32_t piece) {
  mpiar__engine_t *e = r->eng;
  e->mown[e->nm].r = r;
  e->mown[e->nm++].piece = piece;
  r->nmpireq++;
}

static int length_mismatch(mpiar__request_t *r, uint32_t piece, size_t got) {
  const mpiar__piece_t *p = &r->plan->pieces[piece];
  const mpiar__step_t *st = &r->plan->sched.steps[p->step];
  return mpiar__error(MPIAR_ERR_MISMATCH,
                      "rank %d: %s step %u expected %zu bytes from rank %d but rank %d sent %zu: "
                      "the ranks called the collective with different counts, datatypes, "
                      "algorithms or segment sizes",
                      r->eng->rank, r->plan->name, p->step, p->len, st->peer, st->peer, got);
}

/* Receive a taken message into piece @p k, if its length is the expected one. */
static int receive_taken(mpiar__request_t *r, uint32_t k, mpiar__held_t *m) {
  const mpiar__piece_t *p = &r->plan->pieces[k];
  const mpiar__step_t *st = &r->plan->sched.steps[p->step];
  mpiar__engine_t *e = r->eng;
  if (m->msg.bytes != p->len) {
    int rc = length_mismatch(r, k, m->msg.bytes);
    mpiar__discard(e, &m->msg, m->msg.bytes);
    return rc;
  }
  int err = e->tx->recv_msg(e->txs, e->nm, addr(r, st->dst) + p->off, &m->msg);
  if (err != 0) {
    return mpiar__tx_error(err, e->tx->recv_msg_name, r, p->step);
  }
  r->piece_state[k] = PIECE_POSTED | PIECE_MATCHED;
  add_owner(r, k);
  return MPIAR_SUCCESS;
}

/*
 * Is one of the first @p n probing pieces of @p r waiting for a message from @p peer with
 * @p tag? Messages of one channel must be taken in the order of the pieces that wait for them
 * (the sender sent them in that order), so a piece never takes a message while an earlier piece
 * of its channel waits: a message that arrives between two probes would otherwise go to the
 * later piece (silently, when the two have the same length).
 */
static int probing_for(const mpiar__request_t *r, int peer, int tag, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const mpiar__piece_t *p = &r->plan->pieces[r->probing[i]];
    if (r->plan->sched.steps[p->step].peer == peer && (r->tag_base | p->tag) == tag) {
      return 1;
    }
  }
  return 0;
}

/* Post every piece of a SEND or RECV step. */
static int post(mpiar__request_t *r, uint32_t step) {
  const mpiar__plan_t *plan = r->plan;
  const mpiar__step_t *st = &plan->sched.steps[step];
  mpiar__engine_t *e = r->eng;
  uint32_t first = plan->piece_first[step], last = plan->piece_first[step + 1];
  r->piece_left[step] = last - first;
  for (uint32_t k = first; k < last; k++) {
    const mpiar__piece_t *p = &plan->pieces[k];
    int tag = r->tag_base | p->tag;
    if (st->kind == MPIAR__STEP_SEND) {
      int err = e->tx->send(e->txs, e->nm, addr(r, st->a) + p->off, p->len, st->peer, tag);
      if (err != 0) {
        return mpiar__tx_error(err, e->tx->send_name, r, step);
      }
      add_owner(r, k);
      continue;
    }
    mpiar__held_t m;
    if (e->nheld > 0 && (p->exact || !probing_for(r, st->peer, tag, r->nprobing)) &&
        held_take(e, st->peer, tag, &m)) {
      int rc = receive_taken(r, k, &m);
      if (rc != MPIAR_SUCCESS) {
        return rc;
      }
    } else if (p->exact) {
      int err = e->tx->recv(e->txs, e->nm, addr(r, st->dst) + p->off, p->len, st->peer, tag);
      if (err != 0) {
        return mpiar__tx_error(err, e->tx->recv_name, r, step);
      }
      r->piece_state[k] = PIECE_POSTED;
      add_owner(r, k);
    } else {
      r->piece_state[k] = PIECE_PROBING;
      r->probing[r->nprobing++] = k;
    }
  }
  return MPIAR_SUCCESS;
}

/* Receive the long messages that have arrived, after checking their length. */
static int probe(mpiar__request_t *r, int *progressed) {
  size_t kept = 0;
  int rc = MPIAR_SUCCESS;
  for (size_t i = 0; i < r->nprobing; i++) {
    uint32_t k = r->probing[i];
    const mpiar__piece_t *p = &r->plan->pieces[k];
    const mpiar__step_t *st = &r->plan->sched.steps[p->step];
    mpiar__held_t m;
    int tag = r->tag_base | p->tag;
    int got = rc == MPIAR_SUCCESS && !probing_for(r, st->peer, tag, kept)
                  ? mpiar__take_message(r->eng, st->peer, tag, &m)
                  : 0;
    if (got < 0) {
      rc = mpiar__tx_error(-got, r->eng->tx->probe_name, r, p->step);
    } else if (got) {
      rc = receive_taken(r, k, &m);
      *progressed = 1;
      if (rc == MPIAR_SUCCESS) {
        continue;
      }
    }
    r->probing[kept++] = k;
  }
  r->nprobing = kept;
  return rc;
}

/*
 * Test every outstanding message of the engine at once and complete the steps whose last piece
 * finished. A request whose message failed (a transport error, a wrong length) is returned in
 * *failed with its error, after the table is consistent again.
 */
static int poll(mpiar__engine_t *e, int *progressed, mpiar__request_t **failed) {
  *failed = NULL;
  if (e->nm == 0) {
    return MPIAR_SUCCESS;
  }
  size_t ndone = 0;
  int err = e->tx->poll(e->txs, e->nm, e->mdone, &ndone);
  if (err != 0) {
    *failed = e->mown[0].r;
    return mpiar__tx_error(err, e->tx->poll_name, *failed,
                           (*failed)->plan->pieces[e->mown[0].piece].step);
  }
  if (ndone == 0) {
    return MPIAR_SUCCESS;
  }
  *progressed = 1;
  int rc = MPIAR_SUCCESS;
  for (size_t i = 0; i < ndone; i++) {
    struct mpiar__mowner *o = &e->mown[e->mdone[i].index];
    mpiar__request_t *r = o->r;
    uint32_t k = o->piece;
    o->piece |= OWNER_DONE;
    if (rc != MPIAR_SUCCESS) {
      continue;
    }
    const mpiar__piece_t *p = &r->plan->pieces[k];
    const mpiar__step_t *st = &r->plan->sched.steps[p->step];
    if (e->mdone[i].err != 0) {
      rc = mpiar__tx_error(e->mdone[i].err, st->kind == MPIAR__STEP_SEND ? "a send" : "a receive",
                           r, p->step);
      *failed = r;
    } else if (st->kind == MPIAR__STEP_RECV && !p->exact && e->mdone[i].bytes != p->len) {
      /* An exact piece's tag carries its length, so the message that matched it has that length;
       * a probed piece's length is checked here. */
      rc = length_mismatch(r, k, e->mdone[i].bytes);
      *failed = r;
    }
  }
  /* The transport has removed the completed entries: remove their owners alike, then finish the
   * steps whose pieces have all completed. */
  size_t kept = 0;
  for (size_t i = 0; i < e->nm; i++) {
    if (!(e->mown[i].piece & OWNER_DONE)) {
      e->mown[kept++] = e->mown[i];
      continue;
    }
    mpiar__request_t *r = e->mown[i].r;
    uint32_t k = e->mown[i].piece & ~OWNER_DONE;
    uint32_t step = r->plan->pieces[k].step;
    r->piece_state[k] = PIECE_DONE;
    r->nmpireq--;
    if (--r->piece_left[step] == 0 && r != *failed) {
      complete_step(r, step);
    }
  }
  e->nm = kept;
  return rc;
}

static void run_local(mpiar__request_t *r, uint32_t step) {
  const mpiar__schedule_t *s = &r->plan->sched;
  const mpiar__step_t *st = &s->steps[step];
  if (st->count == 0) {
    return;
  }
  if (st->kind == MPIAR__STEP_REDUCE) {
    mpiar__reduce(addr(r, st->dst), addr(r, st->a), addr(r, st->b), st->count, r->dtype, r->kop);
    if (r->average && st->final) {
      /* The elements are complete here and travel on as averages: each is divided once. */
      mpiar__divide(addr(r, st->dst), addr(r, st->dst), st->count, r->dtype, (double)s->nranks);
    }
  } else {
    char *dst = addr(r, st->dst);
    const char *src = addr(r, st->a);
    if (dst != src) {
      memcpy(dst, src, st->count * s->elem_size);
    }
  }
}

static int timed_out(const mpiar__request_t *r) {
  const mpiar__plan_t *plan = r->plan;
  /* Name the oldest receive still waiting (else the oldest send): that peer is the late one. */
  const mpiar__engine_t *e = r->eng;
  uint32_t step = UINT32_MAX;
  for (int want_recv = 1; want_recv >= 0 && step == UINT32_MAX; want_recv--) {
    for (size_t i = 0; i < e->nm + r->nprobing; i++) {
      if (i < e->nm && e->mown[i].r != r) {
        continue;
      }
      uint32_t k = i < e->nm ? e->mown[i].piece : r->probing[i - e->nm];
      uint32_t s = plan->pieces[k].step;
      int is_recv = plan->sched.steps[s].kind == MPIAR__STEP_RECV;
      if (is_recv == want_recv && s < step) {
        step = s;
      }
    }
  }
  if (r->check_round < r->check_rounds) {
    return mpiar__error(MPIAR_ERR_TIMEOUT,
                        "rank %d: %s timed out after %ld ms in the argument check (round %d of %d)",
                        r->eng->rank, plan->name, r->timeout_ms, r->check_round + 1,
                        r->check_rounds);
  }
  if (step == UINT32_MAX) {
    return mpiar__error(MPIAR_ERR_TIMEOUT,
                        "rank %d: %s timed out after %ld ms with %zu of %zu steps done and no "
                        "message outstanding",
                        r->eng->rank, plan->name, r->timeout_ms, r->done, plan->sched.nsteps);
  }
  const mpiar__step_t *st = &plan->sched.steps[step];
  return mpiar__error(MPIAR_ERR_TIMEOUT,
                      "rank %d: %s timed out after %ld ms at step %u: waiting to %s %zu bytes %s "
                      "rank %d (tag %d)",
                      r->eng->rank, plan->name, r->timeout_ms, step,
                      st->kind == MPIAR__STEP_RECV ? "receive" : "send",
                      st->count * plan->sched.elem_size,
                      st->kind == MPIAR__STEP_RECV ? "from" : "to", st->peer, st->tag);
}

/* ---- one request, one pass ---- */

/* Something for data_pass to do: steps ready, or long messages to take. */
static inline int has_work(const mpiar__request_t *r) {
  return r->comm_head < r->comm_tail || r->comp_head < r->comp_tail || r->nprobing > 0;
}

/* Post what is ready, receive what arrived, run one reduction. */
static int data_pass(mpiar__request_t *r, int *progressed) {
  int rc;
  const size_t n = r->plan->sched.nsteps;
  while (r->comm_head < r->comm_tail) {
    if ((rc = post(r, r->ready[r->comm_head++])) != MPIAR_SUCCESS) {
      return rc;
    }
    *progressed = 1;
  }
  if (r->nprobing > 0 && (rc = probe(r, progressed)) != MPIAR_SUCCESS) {
    return rc;
  }
  if (r->comp_head < r->comp_tail) {
    uint32_t step = r->ready[n + r->comp_head++];
    run_local(r, step);
    complete_step(r, step);
    *progressed = 1;
    r->polls = MPIAR__CLOCK_PASSES - 1; /* look at the clock after every reduction */
  }
  return MPIAR_SUCCESS;
}

/* After the poll: a schedule with nothing left to wait for but steps not done never finishes. */
static int stalled(const mpiar__request_t *r) {
  const size_t n = r->plan->sched.nsteps;
  if (r->done < n && r->nmpireq == 0 && r->nprobing == 0 && r->comm_head == r->comm_tail &&
      r->comp_head == r->comp_tail) {
    return mpiar__error(MPIAR_ERR_INTERNAL,
                        "rank %d: %s schedule stalled with %zu of %zu steps done (a step depends "
                        "on one that never completes)",
                        r->eng->rank, r->plan->name, r->done, n);
  }
  return MPIAR_SUCCESS;
}

static void finish(mpiar__request_t *r, int rc) {
  mpiar__engine_t *e = r->eng;
  if (r->aprev != NULL) {
    r->aprev->anext = r->anext;
  } else {
    e->active = r->anext;
  }
  if (r->anext != NULL) {
    r->anext->aprev = r->aprev;
  } else {
    e->active_tail = r->aprev;
  }
  r->anext = r->aprev = NULL;
  e->nactive--;
  e->mreserved -= r->plan->npieces;
  if (e->slot_req[r->slot] == r) {
    e->slot_req[r->slot] = NULL;
  }
  r->rc = rc;
  if (rc != MPIAR_SUCCESS) {
    snprintf(r->detail, sizeof r->detail, "%s", mpiar_last_error());
  }
  r->state = MPIAR__REQ_DONE;
}

void mpiar__request_fail(mpiar__request_t *r, int code, const char *detail) {
  mpiar__engine_t *e = r->eng;
  char saved[512];
  snprintf(saved, sizeof saved, "%s", detail);
  /* Posted receives that have not matched are cancelled; receives that matched a message (and
   * may be writing the caller's buffer) are waited for, so that the buffer is no longer written
   * once the call returns; sends are kept until the context is released. */
  double until = e->tx->now() + MPIAR__ABANDON_WAIT_S;
  /* Sends still in flight may read the request's scratch: it is then freed with the engine. */
  r->tainted = r->nmpireq > 0 || r->check_req.handle != 0;
  int emptied = 0;
  for (size_t i = 0; i < e->nm; i++) {
    if (e->mown[i].r != r) {
      continue;
    }
    uint32_t k = e->mown[i].piece;
    const mpiar__step_t *st = &r->plan->sched.steps[r->plan->pieces[k].step];
    int how = st->kind != MPIAR__STEP_RECV               ? MPIAR__TX_KEEP
              : (r->piece_state[k] & PIECE_MATCHED) != 0 ? MPIAR__TX_FINISH
                                                         : MPIAR__TX_CANCEL;
    e->tx->abandon(e->txs, i, how, until);
    emptied = 1;
  }
  if (emptied) {
    size_t kept = 0;
    for (size_t i = 0; i < e->nm; i++) {
      if (e->mown[i].r != r) {
        e->mown[kept++] = e->mown[i];
      }
    }
    /* The transport removes exactly the entries it emptied, so its table matches the owners. */
    e->nm = e->tx->compact(e->txs, e->nm);
  }
  r->nmpireq = 0;
  r->nprobing = 0;
  if (r->check_req.handle != 0) {
    e->tx->keep_ctl(e->txs, &r->check_req);
    r->check_req.handle = 0;
  }
  r->check_rounds = r->check_round; /* no check left to run */
  mpiar__error(code, "%s", saved);
  finish(r, code);
}

/* A request failed on this rank: record its own error, then break the context and tell all. */
static void fail_and_break(mpiar__request_t *r, int rc) {
  char reason[512];
  snprintf(reason, sizeof reason, "%s", mpiar_last_error());
  mpiar__engine_t *e = r->eng;
  mpiar__request_fail(r, rc, reason);
  /* The others in progress on this context fail too, saying which failure broke it. */
  mpiar__engine_break(e, MPIAR_ERR_COMM_BROKEN, reason, 1);
}

void mpiar__request_abandon(mpiar__request_t *r, int rc) {
  fail_and_break(r, rc);
}

void mpiar__request_begin(mpiar__request_t *r) {
  const mpiar__plan_t *plan = r->plan;
  size_t n = plan->sched.nsteps;
  /* Small plans (a few steps: the latency-bound calls) copy inline, without a libc call. */
  if (n <= 16) {
    for (size_t i = 0; i < n; i++) {
      r->pending[i] = plan->ndeps[i];
    }
  } else {
    memcpy(r->pending, plan->ndeps, n * sizeof *r->pending);
  }
  if (plan->npieces <= 16) {
    for (size_t i = 0; i < plan->npieces; i++) {
      r->piece_state[i] = 0;
    }
  } else {
    memset(r->piece_state, 0, plan->npieces);
  }
  r->comm_head = r->comm_tail = r->comp_head = r->comp_tail = 0;
  r->nmpireq = r->nprobing = 0;
  r->done = 0;
  r->polls = 0;
  for (size_t i = 0; i < plan->nstart; i++) {
    make_ready(r, plan->start[i]);
  }
}

/* A request's pass failed with @p rc: fail it (and break the context unless the argument check
 * failed, which every rank saw alike with nothing else sent). */
static void pass_failed(mpiar__request_t *r, int rc) {
  if (r->check_failed) {
    /* Every rank reached the same verdict after the last round and nothing else was sent: the
     * call fails everywhere and the communicator stays usable. */
    char detail[512];
    snprintf(detail, sizeof detail, "%s", mpiar_last_error());
    mpiar__request_fail(r, rc, detail);
  } else {
    fail_and_break(r, rc);
  }
}

void mpiar__request_post(mpiar__request_t *r) {
  int progressed = 0;
  int rc = r->check_round < r->check_rounds ? mpiar__check_pass(r, &progressed)
           : has_work(r)                    ? data_pass(r, &progressed)
                                            : MPIAR_SUCCESS;
  if (rc != MPIAR_SUCCESS) {
    pass_failed(r, rc);
  }
}

/*
 * One pass over the engine: one poll of the transport over the messages of all its requests
 * completes steps; then each request posts what is ready (a start posts its first messages itself),
 * takes the long messages that arrived and runs one reduction (or a round of its argument check),
 * each request that is done finishes, and the deadlines are looked at. A receive and the reduction
 * or send it feeds therefore take one pass, and a pass with nothing to do is one poll and a few
 * comparisons per request.
 */
void mpiar__progress(mpiar__engine_t *e, int *progressed) {
  if (e->broken) {
    return;
  }
  mpiar__request_t *failed = NULL;
  int rc = poll(e, progressed, &failed);
  if (rc != MPIAR_SUCCESS) {
    fail_and_break(failed, rc);
    *progressed = 1;
    return;
  }
  for (mpiar__request_t *r = e->active; r != NULL && !e->broken;) {
    mpiar__request_t *next = r->anext;
    if (r->check_round < r->check_rounds) {
      rc = mpiar__check_pass(r, progressed);
    } else {
      rc = has_work(r) ? data_pass(r, progressed) : MPIAR_SUCCESS;
      if (rc == MPIAR_SUCCESS && r->done == r->plan->sched.nsteps) {
        finish(r, MPIAR_SUCCESS);
        *progressed = 1;
        r = next;
        continue;
      }
      if (rc == MPIAR_SUCCESS) {
        rc = stalled(r);
      }
    }
    if (rc == MPIAR_SUCCESS && r->deadline > 0 && ++r->polls >= MPIAR__CLOCK_PASSES) {
      r->polls = 0;
      if (e->tx->now() > r->deadline) {
        rc = timed_out(r);
      }
    }
    if (rc != MPIAR_SUCCESS) {
      pass_failed(r, rc);
      *progressed = 1;
    }
    r = next;
  }
}

/* ---- unexpected messages ---- */

/*
 * Does held message @p m contradict what its operation expects next from that rank? The
 * operation's first receive piece from m's source with m's step tag that has not completed must
 * carry m's full tag (the same length); *r and *piece name it when it does not. A posted receive
 * may already have matched an earlier message that MPI has not completed yet, so a contradiction
 * is only a suspicion until the context stops progressing (see mpiar__scan).
 */
static int conflict(mpiar__engine_t *e, const mpiar__held_t *m, mpiar__request_t **rp,
                    uint32_t *piece) {
  int slot = m->msg.tag >> (e->size_bits + MPIAR__TAG_BITS);
  if (slot >= e->nslots) {
    return 0;
  }
  mpiar__request_t *r = e->slot_req[slot];
  if (r == NULL || r->check_round < r->check_rounds) {
    return 0;
  }
  int step_tag = m->msg.tag & ((1 << MPIAR__TAG_BITS) - 1);
  const mpiar__plan_t *plan = r->plan;
  for (uint32_t k = 0; k < plan->npieces; k++) {
    const mpiar__piece_t *p = &plan->pieces[k];
    const mpiar__step_t *st = &plan->sched.steps[p->step];
    if (st->kind != MPIAR__STEP_RECV || st->peer != m->msg.source || st->tag != step_tag ||
        r->piece_state[k] == PIECE_DONE || (r->piece_state[k] & PIECE_MATCHED)) {
      continue;
    }
    if ((r->tag_base | p->tag) == m->msg.tag) {
      return 0;
    }
    *rp = r;
    *piece = k;
    return 1;
  }
  return 0; /* nothing left to receive from it there: a later operation in this slot */
}

/* A failure notice arrived: break the context with the failed rank's reason. */
static void notice_received(mpiar__engine_t *e, mpiar__held_t *m) {
  mpiar__notice_t n;
  memset(&n, 0, sizeof n);
  if (m->msg.bytes == sizeof n) {
    e->tx->recv_now(e->txs, &n, &m->msg);
  } else {
    mpiar__discard(e, &m->msg, m->msg.bytes);
    n.rank = m->msg.source;
  }
  n.detail[sizeof n.detail - 1] = '\0';
  char reason[512];
  snprintf(reason, sizeof reason, "rank %d failed: %s", (int)n.rank, n.detail);
  mpiar__error(MPIAR_ERR_COMM_BROKEN, "%s", reason);
  mpiar__engine_break(e, MPIAR_ERR_COMM_BROKEN, reason, 0);
}

/*
 * Argument-check messages for an operation that this rank runs without the check. The check of
 * an operation sends one message to every rank it waits for, and a rank that checks the operation
 * receives each of them before its data moves; so a check message held here for the operation in
 * its slot, or for an earlier one, means that the ranks differ in the check setting (MPIAR_CHECK
 * or the options' check): the checking ranks would wait forever for this rank's check, and this
 * rank for their data. A message for a later operation in the slot is kept (received, with its
 * sequence number) until that operation takes it.
 */
static void check_strays(mpiar__engine_t *e) {
  int step_mask = (1 << MPIAR__TAG_BITS) - 1;
  for (int i = 0; i < e->nheld; i++) {
    mpiar__held_t *h = &e->held[i];
    int slot = h->msg.tag >> (e->size_bits + MPIAR__TAG_BITS);
    int type = h->msg.tag & step_mask;
    if (slot != e->nslots || type < MPIAR__CTL_CHECK * 2) {
      continue;
    }
    int s = (type - MPIAR__CTL_CHECK * 2) / 32;
    mpiar__request_t *r = s < e->nslots ? e->slot_req[s] : NULL;
    if (r == NULL || r->check_rounds > 0 || h->msg.bytes != sizeof r->check_in) {
      continue; /* no operation there, or it checks too (it takes the message itself) */
    }
    if (h->data == NULL) {
      uint64_t *d = malloc(sizeof r->check_in);
      if (d == NULL || e->tx->recv_now(e->txs, d, &h->msg) != 0) {
        free(d);
        continue;
      }
      h->data = d;
      h->msg.handle = 0;
    }
    uint32_t seq = (uint32_t)h->data[32];
    if ((int32_t)(seq - r->seq) > 0) {
      continue; /* a later operation's check */
    }
    int source = h->msg.source;
    free(h->data);
    memmove(&e->held[i], &e->held[i + 1], (size_t)(e->nheld - i - 1) * sizeof *e->held);
    e->nheld--;
    int rc = mpiar__error(MPIAR_ERR_MISMATCH,
                          "rank %d: the ranks differ in MPIAR_CHECK (or the options' check, or "
                          "in the path: a call on mpiar_alloc buffers across nodes always "
                          "checks): rank %d runs the argument check for operation %u on this "
                          "communicator and rank %d runs %s without it; set it alike on every "
                          "rank",
                          e->rank, source, seq, e->rank,
                          seq == r->seq ? "that operation" : "a later one");
    fail_and_break(r, rc);
    return;
  }
}

/* How long a contradicting message may wait, with nothing progressing, before it is an error. */
#define MPIAR__MISMATCH_GRACE_S 0.1

void mpiar__scan(mpiar__engine_t *e) {
  int step_mask = (1 << MPIAR__TAG_BITS) - 1;
  while (!e->broken && e->nheld < MPIAR__HELD_MAX) {
    int flag = 0;
    mpiar__held_t m;
    int err = e->tx->probe(e->txs, MPIAR__TX_ANY, MPIAR__TX_ANY, &m.msg, &flag);
    if (err != 0) {
      char msg[400], reason[512];
      e->tx->error_string(err, msg, sizeof msg);
      snprintf(reason, sizeof reason, "rank %d: %s failed: %.400s", e->rank, e->tx->probe_name,
               msg);
      mpiar__error(MPIAR_ERR_MPI, "%s", reason);
      mpiar__engine_break(e, MPIAR_ERR_MPI, reason, 1);
      return;
    }
    if (!flag) {
      break;
    }
    int slot = m.msg.tag >> (e->size_bits + MPIAR__TAG_BITS);
    int step_tag = m.msg.tag & step_mask;
    if (slot == e->nslots && step_tag == MPIAR__CTL_NOTICE) {
      notice_received(e, &m);
    } else if (slot == e->nslots && step_tag < MPIAR__CTL_CHECK * 2) {
      /* A FIN: that rank released the communicator (its drain counts it when this rank's
       * release comes). */
      if (step_tag == MPIAR__CTL_FIN && m.msg.source >= 0 && m.msg.source < e->size) {
        if (e->fin_early == NULL) {
          e->fin_early = calloc((size_t)e->size, 1);
        }
        if (e->fin_early != NULL) {
          e->fin_early[m.msg.source] = 1;
        }
      }
      mpiar__discard(e, &m.msg, m.msg.bytes);
    } else {
      /* A receive not posted yet (a later step, a later operation, an argument check). */
      m.data = NULL;
      e->held[e->nheld++] = m;
    }
  }
  if (!e->broken) {
    check_strays(e);
  }
  if (e->broken) {
    return;
  }
  mpiar__request_t *r = NULL;
  uint32_t k = 0;
  int i = 0;
  while (i < e->nheld && !conflict(e, &e->held[i], &r, &k)) {
    i++;
  }
  if (i == e->nheld) {
    e->suspect_time = 0;
    return;
  }
  double now = e->tx->now();
  if (e->suspect_time == 0 || e->progress_count != e->suspect_progress) {
    e->suspect_time = now;
    e->suspect_progress = e->progress_count;
    return;
  }
  if (now - e->suspect_time < MPIAR__MISMATCH_GRACE_S) {
    return;
  }
  /* Nothing moved while the message waited: the next message this request expects from that
   * rank has another length, so the ranks disagree on the collective's arguments. */
  mpiar__held_t m = e->held[i];
  memmove(&e->held[i], &e->held[i + 1], (size_t)(e->nheld - i - 1) * sizeof *e->held);
  e->nheld--;
  e->suspect_time = 0;
  mpiar__discard(e, &m.msg, m.msg.bytes);
  int rc = length_mismatch(r, k, m.msg.bytes);
  fail_and_break(r, rc);
}
