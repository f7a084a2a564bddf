/*
 * The MPI executor: runs requests (one rank's schedule each) with nonblocking point-to-point
 * messages on the context's private communicator.
 *
 * A step becomes ready when its dependencies are complete. Ready communication steps are posted
 * at once (receives as early as the schedule allows); ready reductions run one per pass with a
 * progress poll (MPI_Testsome) between them, so a segmented schedule overlaps the transfer of
 * chunk k+1 with the reduction of chunk k. A pass over a context advances every request in
 * progress on it, so outstanding operations progress together whichever one is waited for.
 *
 * Receives never truncate: a message shorter than the tag's size field can hold carries its exact
 * length in its tag, and its receive is posted with that tag, so a message of another length
 * cannot match it; a longer message is taken with MPI_Improbe and received only if its length is
 * the expected one. (MPICH raises a truncated receive on MPI_COMM_WORLD's error handler, which
 * aborts by default, whatever the private communicator's handler says.) A message of another
 * length is found by the scan of unexpected messages that runs while a rank waits: it names what
 * each side expected, and the rank breaks the context and notifies the others.
 *
 * The deadline is checked every MPIAR__CLOCK_PASSES passes and after every reduction, whether or
 * not anything progresses, so a call returns within about one reduction of its deadline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

/* Passes between two looks at the clock. */
#define MPIAR__CLOCK_PASSES 16

/* How long a failed request waits for receives that already matched a message to finish. */
#define MPIAR__ABANDON_WAIT_S 5.0

/* Matched receives (Imrecv) are in state PIECE_POSTED with this flag: they cannot be cancelled. */
#define PIECE_MATCHED 0x80

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
  r->ctx->progress_count++;
  for (uint32_t k = s->succ_first[step]; k < s->succ_first[step + 1]; k++) {
    uint32_t next = s->succ[k];
    if (--r->pending[next] == 0) {
      make_ready(r, next);
    }
  }
}

static int mpi_error(int err, const char *what, const mpiar__request_t *r, uint32_t step) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error %d", err);
  }
  return mpiar__error(MPIAR_ERR_MPI, "rank %d: %s in %s step %u failed: %s", r->ctx->rank, what,
                      r->plan->name, step, msg);
}

/* ---- messages taken out of MPI's queue ---- */

/* Remove and return the earliest held message from @p source with @p tag; 0 if none. */
static int held_take(mpiar__context_t *ctx, int source, int tag, mpiar__held_t *out) {
  for (int i = 0; i < ctx->nheld; i++) {
    if (ctx->held[i].source == source && ctx->held[i].tag == tag) {
      *out = ctx->held[i];
      memmove(&ctx->held[i], &ctx->held[i + 1], (size_t)(ctx->nheld - i - 1) * sizeof *ctx->held);
      ctx->nheld--;
      return 1;
    }
  }
  return 0;
}

/*
 * The next message from @p source with @p tag, held or in MPI's queue: 1 if taken, 0 if none
 * yet, or an MPI error code (> 1 is impossible for MPI_SUCCESS = 0, so errors are negated).
 */
static int take_message(mpiar__context_t *ctx, int source, int tag, mpiar__held_t *out) {
  if (ctx->nheld > 0 && held_take(ctx, source, tag, out)) {
    return 1;
  }
  int flag = 0;
  MPI_Status st;
  int err = MPI_Improbe(source, tag, ctx->comm, &flag, &out->msg, &st);
  if (err != MPI_SUCCESS) {
    return -(err > 0 ? err : 1);
  }
  if (!flag) {
    return 0;
  }
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  out->source = source;
  out->tag = tag;
  out->bytes = (size_t)count;
  out->data = NULL;
  return 1;
}

void mpiar__discard(mpiar__context_t *ctx, MPI_Message *msg, size_t bytes) {
  (void)ctx;
  /* Into a scratch buffer, in blocks that all land on the same 64 KiB (an overlapping receive
   * type is never read back, and it keeps a stray gigabyte from needing a gigabyte). */
  enum { SINK = 64 * 1024 };
  static _Thread_local char sink[SINK];
  if (bytes <= SINK) {
    MPI_Mrecv(sink, (int)bytes, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    return;
  }
  MPI_Datatype blocks, rest, whole;
  int nblocks = (int)(bytes / SINK);
  int tail = (int)(bytes % SINK);
  MPI_Type_create_hvector(nblocks, SINK, 0, MPI_BYTE, &blocks);
  int lens[2] = {1, tail};
  MPI_Aint displs[2] = {0, 0};
  MPI_Datatype types[2] = {blocks, MPI_BYTE};
  MPI_Type_create_struct(tail > 0 ? 2 : 1, lens, displs, types, &whole);
  MPI_Type_commit(&whole);
  MPI_Mrecv(sink, 1, whole, msg, MPI_STATUS_IGNORE);
  MPI_Type_free(&whole);
  MPI_Type_free(&blocks);
  (void)rest;
}

void mpiar__held_discard(mpiar__context_t *ctx, mpiar__held_t *h) {
  if (h->data != NULL) {
    free(h->data);
    h->data = NULL;
  } else {
    mpiar__discard(ctx, &h->msg, h->bytes);
  }
}

/* ---- posting and completing messages ---- */

/* Record an outstanding MPI request in the context's table (room was made at the start). */
static inline void add_mpireq(mpiar__request_t *r, MPI_Request q, uint32_t piece) {
  mpiar__context_t *ctx = r->ctx;
  ctx->mreq[ctx->nm] = q;
  ctx->mown[ctx->nm].r = r;
  ctx->mown[ctx->nm++].piece = piece;
  r->nmpireq++;
}

static int length_mismatch(mpiar__request_t *r, uint32_t piece, size_t got) {
  const mpiar__piece_t *p = &r->plan->pieces[piece];
  const mpiar__step_t *st = &r->plan->sched.steps[p->step];
  return mpiar__error(MPIAR_ERR_MISMATCH,
                      "rank %d: %s step %u expected %zu bytes from rank %d but rank %d sent %zu: "
                      "the ranks called the collective with different counts, datatypes, "
                      "algorithms or segment sizes",
                      r->ctx->rank, r->plan->name, p->step, p->len, st->peer, st->peer, got);
}

/* Receive a taken message into piece @p k, if its length is the expected one. */
static int receive_taken(mpiar__request_t *r, uint32_t k, mpiar__held_t *m) {
  const mpiar__piece_t *p = &r->plan->pieces[k];
  const mpiar__step_t *st = &r->plan->sched.steps[p->step];
  if (m->bytes != p->len) {
    int rc = length_mismatch(r, k, m->bytes);
    mpiar__discard(r->ctx, &m->msg, m->bytes);
    return rc;
  }
  MPI_Request q = MPI_REQUEST_NULL;
  int err = MPI_Imrecv(addr(r, st->dst) + p->off, (int)p->len, MPI_BYTE, &m->msg, &q);
  if (err != MPI_SUCCESS) {
    int rc = mpi_error(err, "MPI_Imrecv", r, p->step);
    if (m->msg != MPI_MESSAGE_NULL) {
      mpiar__discard(r->ctx, &m->msg, m->bytes); /* so that its sender is not left waiting */
    }
    return rc;
  }
  r->piece_state[k] = PIECE_POSTED | PIECE_MATCHED;
  add_mpireq(r, q, k);
  return MPIAR_SUCCESS;
}

/* Post every piece of a SEND or RECV step. */
static int post(mpiar__request_t *r, uint32_t step) {
  const mpiar__plan_t *plan = r->plan;
  const mpiar__step_t *st = &plan->sched.steps[step];
  mpiar__context_t *ctx = r->ctx;
  uint32_t first = plan->piece_first[step], last = plan->piece_first[step + 1];
  r->piece_left[step] = last - first;
  for (uint32_t k = first; k < last; k++) {
    const mpiar__piece_t *p = &plan->pieces[k];
    int tag = r->tag_base | p->tag;
    MPI_Request q = MPI_REQUEST_NULL;
    if (st->kind == MPIAR__STEP_SEND) {
      int err = MPI_Isend(addr(r, st->a) + p->off, (int)p->len, MPI_BYTE, st->peer, tag,
                          ctx->comm, &q);
      if (err != MPI_SUCCESS) {
        return mpi_error(err, "MPI_Isend", r, step);
      }
      add_mpireq(r, q, k);
      continue;
    }
    mpiar__held_t m;
    if (ctx->nheld > 0 && held_take(ctx, st->peer, tag, &m)) {
      int rc = receive_taken(r, k, &m);
      if (rc != MPIAR_SUCCESS) {
        return rc;
      }
    } else if (p->exact) {
      int err = MPI_Irecv(addr(r, st->dst) + p->off, (int)p->len, MPI_BYTE, st->peer, tag,
                          ctx->comm, &q);
      if (err != MPI_SUCCESS) {
        return mpi_error(err, "MPI_Irecv", r, step);
      }
      r->piece_state[k] = PIECE_POSTED;
      add_mpireq(r, q, k);
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
    int got = rc == MPIAR_SUCCESS ? take_message(r->ctx, st->peer, r->tag_base | p->tag, &m) : 0;
    if (got < 0) {
      rc = mpi_error(-got, "MPI_Improbe", r, p->step);
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
 * Test every outstanding MPI request of the context at once and complete the steps whose last
 * piece finished. A request whose message failed (an MPI error, a wrong length) is returned in
 * *failed with its error, after the table is consistent again.
 */
static int poll(mpiar__context_t *ctx, int *progressed, mpiar__request_t **failed) {
  *failed = NULL;
  if (ctx->nm == 0) {
    return MPIAR_SUCCESS;
  }
  int outcount = 0;
  int err = MPI_Testsome((int)ctx->nm, ctx->mreq, &outcount, ctx->mdone, ctx->mstat);
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {
    *failed = ctx->mown[0].r;
    return mpi_error(err, "MPI_Testsome", *failed, (*failed)->plan->pieces[ctx->mown[0].piece].step);
  }
  if (outcount == MPI_UNDEFINED || outcount == 0) {
    return MPIAR_SUCCESS;
  }
  *progressed = 1;
  int rc = MPIAR_SUCCESS;
  for (int i = 0; i < outcount; i++) {
    mpiar__request_t *r = ctx->mown[ctx->mdone[i]].r;
    uint32_t k = ctx->mown[ctx->mdone[i]].piece;
    const mpiar__piece_t *p = &r->plan->pieces[k];
    const mpiar__step_t *st = &r->plan->sched.steps[p->step];
    if (rc != MPIAR_SUCCESS) {
      break;
    }
    if (err == MPI_ERR_IN_STATUS && ctx->mstat[i].MPI_ERROR != MPI_SUCCESS) {
      rc = mpi_error(ctx->mstat[i].MPI_ERROR,
                     st->kind == MPIAR__STEP_SEND ? "a send" : "a receive", r, p->step);
      *failed = r;
    } else if (st->kind == MPIAR__STEP_RECV && !p->exact) {
      /* An exact piece's tag carries its length, so the message that matched it has that length;
       * a probed piece's length is checked here. */
      int count = -1;
      MPI_Get_count(&ctx->mstat[i], MPI_BYTE, &count);
      if ((size_t)count != p->len) {
        rc = length_mismatch(r, k, (size_t)count);
        *failed = r;
      }
    }
  }
  /* Completed requests are MPI_REQUEST_NULL now: compact the table, then finish the steps whose
   * pieces have all completed. */
  size_t kept = 0;
  for (size_t i = 0; i < ctx->nm; i++) {
    if (ctx->mreq[i] != MPI_REQUEST_NULL) {
      ctx->mreq[kept] = ctx->mreq[i];
      ctx->mown[kept++] = ctx->mown[i];
      continue;
    }
    mpiar__request_t *r = ctx->mown[i].r;
    uint32_t k = ctx->mown[i].piece;
    uint32_t step = r->plan->pieces[k].step;
    r->piece_state[k] = PIECE_DONE;
    r->nmpireq--;
    if (--r->piece_left[step] == 0 && r != *failed) {
      complete_step(r, step);
    }
  }
  ctx->nm = kept;
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
  const mpiar__context_t *ctx = r->ctx;
  uint32_t step = UINT32_MAX;
  for (int want_recv = 1; want_recv >= 0 && step == UINT32_MAX; want_recv--) {
    for (size_t i = 0; i < ctx->nm + r->nprobing; i++) {
      if (i < ctx->nm && ctx->mown[i].r != r) {
        continue;
      }
      uint32_t k = i < ctx->nm ? ctx->mown[i].piece : r->probing[i - ctx->nm];
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
                        r->ctx->rank, plan->name, r->timeout_ms, r->check_round + 1,
                        r->check_rounds);
  }
  if (step == UINT32_MAX) {
    return mpiar__error(MPIAR_ERR_TIMEOUT,
                        "rank %d: %s timed out after %ld ms with %zu of %zu steps done and no "
                        "message outstanding",
                        r->ctx->rank, plan->name, r->timeout_ms, r->done, plan->sched.nsteps);
  }
  const mpiar__step_t *st = &plan->sched.steps[step];
  return mpiar__error(MPIAR_ERR_TIMEOUT,
                      "rank %d: %s timed out after %ld ms at step %u: waiting to %s %zu bytes %s "
                      "rank %d (tag %d)",
                      r->ctx->rank, plan->name, r->timeout_ms, step,
                      st->kind == MPIAR__STEP_RECV ? "receive" : "send",
                      st->count * plan->sched.elem_size,
                      st->kind == MPIAR__STEP_RECV ? "from" : "to", st->peer, st->tag);
}

/* ---- the argument check (MPIAR_CHECK) ---- */

static const char *const check_fields[8] = {"collective", "count",     "element size", "datatype",
                                            "operation",  "algorithm", "segment",      "root"};

static int check_tag(const mpiar__request_t *r, int round) {
  const mpiar__context_t *ctx = r->ctx;
  return (ctx->nslots << (ctx->size_bits + MPIAR__TAG_BITS)) |
         (MPIAR__CTL_CHECK * 2 + r->slot * 32 + round);
}

/*
 * Combine a received accumulator into ours. Entries 2f, 2f+1 hold the smallest value of field f
 * and the lowest rank that has it; entries 16 + 2f, 17 + 2f the largest value and its rank.
 */
static void check_combine(uint64_t *acc, const uint64_t *in) {
  for (int f = 0; f < 8; f++) {
    uint64_t *mn = &acc[2 * f], *mx = &acc[16 + 2 * f];
    const uint64_t *imn = &in[2 * f], *imx = &in[16 + 2 * f];
    if (imn[0] < mn[0] || (imn[0] == mn[0] && imn[1] < mn[1])) {
      mn[0] = imn[0];
      mn[1] = imn[1];
    }
    if (imx[0] > mx[0] || (imx[0] == mx[0] && imx[1] < mx[1])) {
      mx[0] = imx[0];
      mx[1] = imx[1];
    }
  }
}

static void check_describe(const uint64_t *acc, int f, char *buf, size_t len, int which) {
  uint64_t v = acc[(which ? 16 : 0) + 2 * f];
  if (f == 3 && mpiar_dtype_name((mpiar_dtype_t)v) != NULL) {
    snprintf(buf, len, "%s", mpiar_dtype_name((mpiar_dtype_t)v));
  } else if (f == 4 && mpiar_op_name((mpiar_op_t)v) != NULL) {
    snprintf(buf, len, "%s", mpiar_op_name((mpiar_op_t)v));
  } else if (f == 5 && acc[0] == MPIAR__COLL_BCAST) {
    snprintf(buf, len, "%s",
             v < (uint64_t)mpiar__bcast_algorithm_count ? mpiar__bcast_algorithms[v].name : "?");
  } else if (f == 5 && v <= UINT32_MAX && mpiar__algorithm_at((unsigned)v) != NULL) {
    snprintf(buf, len, "%s", mpiar__algorithm_at((unsigned)v)->name);
  } else if (f == 0) {
    snprintf(buf, len, "%s", v == MPIAR__COLL_BCAST ? "bcast" : "allreduce");
  } else if (f == 7 && v == UINT64_MAX) {
    snprintf(buf, len, "none");
  } else {
    snprintf(buf, len, "%llu", (unsigned long long)v);
  }
}

static int check_verdict(mpiar__request_t *r) {
  const uint64_t *acc = r->check_acc;
  for (int f = 0; f < 8; f++) {
    if (acc[2 * f] != acc[16 + 2 * f]) {
      char lo[64], hi[64];
      check_describe(acc, f, lo, sizeof lo, 0);
      check_describe(acc, f, hi, sizeof hi, 1);
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "MPIAR_CHECK: the ranks called the collective with different "
                          "arguments: the %s is %s on rank %llu but %s on rank %llu",
                          check_fields[f], lo, (unsigned long long)acc[2 * f + 1], hi,
                          (unsigned long long)acc[16 + 2 * f + 1]);
    }
  }
  return MPIAR_SUCCESS;
}

/*
 * One step of the check: dissemination rounds (round k sends to rank + 2^k and receives from
 * rank - 2^k), after which every rank holds the minimum and maximum of every field over all
 * ranks. Minimum and maximum are idempotent, so ranks counted twice do no harm. The messages have
 * one fixed length, and a round's receive is taken only after its length is checked.
 */
static int check_pass(mpiar__request_t *r, int *progressed) {
  mpiar__context_t *ctx = r->ctx;
  int k = r->check_round;
  int dist = (int)(((long)1 << k) % ctx->size);
  int to = (ctx->rank + dist) % ctx->size;
  int from = (ctx->rank - dist + ctx->size) % ctx->size;
  int tag = check_tag(r, k);
  if (!r->check_sent) {
    memcpy(r->check_send, r->check_acc, sizeof r->check_acc);
    r->check_send[32] = r->seq;
    int err = MPI_Isend(r->check_send, (int)sizeof r->check_send, MPI_BYTE, to, tag, ctx->comm,
                        &r->check_req);
    if (err != MPI_SUCCESS) {
      return mpi_error(err, "MPI_Isend (argument check)", r, 0);
    }
    r->check_sent = 1;
    *progressed = 1;
  }
  mpiar__held_t m;
  int got = r->check_recvd ? 0 : take_message(ctx, from, tag, &m);
  if (got < 0) {
    return mpi_error(-got, "MPI_Improbe (argument check)", r, 0);
  }
  if (got) {
    if (m.bytes != sizeof r->check_in) {
      mpiar__held_discard(ctx, &m);
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "rank %d: the argument check of rank %d has %zu bytes, not %zu (another "
                          "mpiar version?)",
                          ctx->rank, from, m.bytes, sizeof r->check_in);
    }
    if (m.data != NULL) { /* received early by the scan */
      memcpy(r->check_in, m.data, sizeof r->check_in);
      free(m.data);
    } else {
      int err =
          MPI_Mrecv(r->check_in, (int)sizeof r->check_in, MPI_BYTE, &m.msg, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS) {
        return mpi_error(err, "MPI_Mrecv (argument check)", r, 0);
      }
    }
    check_combine(r->check_acc, r->check_in);
    r->check_recvd = 1;
    ctx->progress_count++;
    *progressed = 1;
  }
  if (r->check_req != MPI_REQUEST_NULL) {
    int flag = 0;
    int err = MPI_Test(&r->check_req, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) {
      return mpi_error(err, "MPI_Test (argument check)", r, 0);
    }
  }
  if (r->check_sent && r->check_recvd && r->check_req == MPI_REQUEST_NULL) {
    r->check_round++;
    r->check_sent = r->check_recvd = 0;
    *progressed = 1;
    if (r->check_round == r->check_rounds) {
      int rc = check_verdict(r);
      if (rc != MPIAR_SUCCESS) {
        r->check_failed = 1;
        return rc;
      }
      mpiar__request_begin(r);
    }
  }
  return MPIAR_SUCCESS;
}

void mpiar__check_init(mpiar__request_t *r) {
  r->check_failed = 0;
  int rounds = 0;
  while (rounds < 31 && (1 << rounds) < r->ctx->size) {
    rounds++;
  }
  r->check_rounds = rounds;
  r->check_round = 0;
  r->check_sent = r->check_recvd = 0;
  r->check_req = MPI_REQUEST_NULL;
  for (int f = 0; f < 8; f++) {
    r->check_acc[2 * f] = r->check_acc[16 + 2 * f] = r->signature[f];
    r->check_acc[2 * f + 1] = r->check_acc[17 + 2 * f] = (uint64_t)r->ctx->rank;
  }
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
                        r->ctx->rank, r->plan->name, r->done, n);
  }
  return MPIAR_SUCCESS;
}

static void finish(mpiar__request_t *r, int rc) {
  mpiar__context_t *ctx = r->ctx;
  if (r->aprev != NULL) {
    r->aprev->anext = r->anext;
  } else {
    ctx->active = r->anext;
  }
  if (r->anext != NULL) {
    r->anext->aprev = r->aprev;
  } else {
    ctx->active_tail = r->aprev;
  }
  r->anext = r->aprev = NULL;
  ctx->nactive--;
  ctx->mreserved -= r->plan->npieces;
  if (ctx->slot_req[r->slot] == r) {
    ctx->slot_req[r->slot] = NULL;
  }
  r->rc = rc;
  if (rc != MPIAR_SUCCESS) {
    snprintf(r->detail, sizeof r->detail, "%s", mpiar_last_error());
  }
  r->state = MPIAR__REQ_DONE;
}

void mpiar__request_fail(mpiar__request_t *r, int code, const char *detail) {
  mpiar__context_t *ctx = r->ctx;
  char saved[512];
  snprintf(saved, sizeof saved, "%s", detail);
  /* Posted receives that have not matched are cancelled; receives that matched a message (and
   * may be writing the caller's buffer) are waited for, so that the buffer is no longer written
   * once the call returns; sends are kept until the context is released. */
  double until = MPI_Wtime() + MPIAR__ABANDON_WAIT_S;
  /* Sends still in flight may read the request's scratch: it is then freed with the context. */
  r->tainted = r->nmpireq > 0 || r->check_req != MPI_REQUEST_NULL;
  size_t kept = 0;
  for (size_t i = 0; i < ctx->nm; i++) {
    if (ctx->mown[i].r != r) {
      ctx->mreq[kept] = ctx->mreq[i];
      ctx->mown[kept++] = ctx->mown[i];
      continue;
    }
    uint32_t k = ctx->mown[i].piece;
    const mpiar__step_t *st = &r->plan->sched.steps[r->plan->pieces[k].step];
    if (st->kind == MPIAR__STEP_RECV && !(r->piece_state[k] & PIECE_MATCHED)) {
      MPI_Cancel(&ctx->mreq[i]);
      MPI_Wait(&ctx->mreq[i], MPI_STATUS_IGNORE);
    } else if (st->kind == MPIAR__STEP_RECV) {
      int flag = 0;
      while (MPI_Test(&ctx->mreq[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag &&
             MPI_Wtime() < until) {
      }
      mpiar__context_zombie(ctx, ctx->mreq[i]);
    } else {
      mpiar__context_zombie(ctx, ctx->mreq[i]);
    }
  }
  ctx->nm = kept;
  r->nmpireq = 0;
  r->nprobing = 0;
  if (r->check_req != MPI_REQUEST_NULL) {
    mpiar__context_zombie(ctx, r->check_req);
    r->check_req = MPI_REQUEST_NULL;
  }
  r->check_rounds = r->check_round; /* no check left to run */
  mpiar__error(code, "%s", saved);
  finish(r, code);
}

/* A request failed on this rank: record its own error, then break the context and tell all. */
static void fail_and_break(mpiar__request_t *r, int rc) {
  char reason[512];
  snprintf(reason, sizeof reason, "%s", mpiar_last_error());
  mpiar__context_t *ctx = r->ctx;
  mpiar__request_fail(r, rc, reason);
  /* The others in progress on this context fail too, saying which failure broke it. */
  mpiar__context_break(ctx, MPIAR_ERR_COMM_BROKEN, reason, 1);
}

void mpiar__request_abandon(mpiar__request_t *r, int rc) {
  fail_and_break(r, rc);
}

void mpiar__request_begin(mpiar__request_t *r) {
  const mpiar__plan_t *plan = r->plan;
  size_t n = plan->sched.nsteps;
  memcpy(r->pending, plan->ndeps, n * sizeof *r->pending);
  memset(r->piece_state, 0, plan->npieces);
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
  int rc = r->check_round < r->check_rounds ? check_pass(r, &progressed)
           : has_work(r)                    ? data_pass(r, &progressed)
                                            : MPIAR_SUCCESS;
  if (rc != MPIAR_SUCCESS) {
    pass_failed(r, rc);
  }
}

/*
 * One pass over the context: one MPI_Testsome over the messages of all its requests completes
 * steps; then each request posts what is ready (a start posts its first messages itself), takes
 * the long messages that arrived and runs one reduction (or a round of its argument check), each
 * request that is done finishes, and the deadlines are looked at. A receive and the reduction or
 * send it feeds therefore take one pass, and a pass with nothing to do is one MPI_Testsome and a
 * few comparisons per request.
 */
void mpiar__progress(mpiar__context_t *ctx, int *progressed) {
  if (ctx->broken) {
    return;
  }
  mpiar__request_t *failed = NULL;
  int rc = poll(ctx, progressed, &failed);
  if (rc != MPIAR_SUCCESS) {
    fail_and_break(failed, rc);
    *progressed = 1;
    return;
  }
  for (mpiar__request_t *r = ctx->active; r != NULL && !ctx->broken;) {
    mpiar__request_t *next = r->anext;
    if (r->check_round < r->check_rounds) {
      rc = check_pass(r, progressed);
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
      if (MPI_Wtime() > r->deadline) {
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
static int conflict(mpiar__context_t *ctx, const mpiar__held_t *m, mpiar__request_t **rp,
                    uint32_t *piece) {
  int slot = m->tag >> (ctx->size_bits + MPIAR__TAG_BITS);
  if (slot >= ctx->nslots) {
    return 0;
  }
  mpiar__request_t *r = ctx->slot_req[slot];
  if (r == NULL || r->check_round < r->check_rounds) {
    return 0;
  }
  int step_tag = m->tag & ((1 << MPIAR__TAG_BITS) - 1);
  const mpiar__plan_t *plan = r->plan;
  for (uint32_t k = 0; k < plan->npieces; k++) {
    const mpiar__piece_t *p = &plan->pieces[k];
    const mpiar__step_t *st = &plan->sched.steps[p->step];
    if (st->kind != MPIAR__STEP_RECV || st->peer != m->source || st->tag != step_tag ||
        r->piece_state[k] == PIECE_DONE || (r->piece_state[k] & PIECE_MATCHED)) {
      continue;
    }
    if ((r->tag_base | p->tag) == m->tag) {
      return 0;
    }
    *rp = r;
    *piece = k;
    return 1;
  }
  return 0; /* nothing left to receive from it there: a later operation in this slot */
}

/* A failure notice arrived: break the context with the failed rank's reason. */
static void notice_received(mpiar__context_t *ctx, mpiar__held_t *m) {
  mpiar__notice_t n;
  memset(&n, 0, sizeof n);
  if (m->bytes == sizeof n) {
    MPI_Mrecv(&n, (int)sizeof n, MPI_BYTE, &m->msg, MPI_STATUS_IGNORE);
  } else {
    mpiar__discard(ctx, &m->msg, m->bytes);
    n.rank = m->source;
  }
  n.detail[sizeof n.detail - 1] = '\0';
  char reason[512];
  snprintf(reason, sizeof reason, "rank %d failed: %s", (int)n.rank, n.detail);
  mpiar__error(MPIAR_ERR_COMM_BROKEN, "%s", reason);
  mpiar__context_break(ctx, MPIAR_ERR_COMM_BROKEN, reason, 0);
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
static void check_strays(mpiar__context_t *ctx) {
  int step_mask = (1 << MPIAR__TAG_BITS) - 1;
  for (int i = 0; i < ctx->nheld; i++) {
    mpiar__held_t *h = &ctx->held[i];
    int slot = h->tag >> (ctx->size_bits + MPIAR__TAG_BITS);
    int type = h->tag & step_mask;
    if (slot != ctx->nslots || type < MPIAR__CTL_CHECK * 2) {
      continue;
    }
    int s = (type - MPIAR__CTL_CHECK * 2) / 32;
    mpiar__request_t *r = s < ctx->nslots ? ctx->slot_req[s] : NULL;
    if (r == NULL || r->check_rounds > 0 || h->bytes != sizeof r->check_in) {
      continue; /* no operation there, or it checks too (it takes the message itself) */
    }
    if (h->data == NULL) {
      uint64_t *d = malloc(sizeof r->check_in);
      if (d == NULL ||
          MPI_Mrecv(d, (int)sizeof r->check_in, MPI_BYTE, &h->msg, MPI_STATUS_IGNORE) !=
              MPI_SUCCESS) {
        free(d);
        continue;
      }
      h->data = d;
      h->msg = MPI_MESSAGE_NULL;
    }
    uint32_t seq = (uint32_t)h->data[32];
    if ((int32_t)(seq - r->seq) > 0) {
      continue; /* a later operation's check */
    }
    int source = h->source;
    free(h->data);
    memmove(&ctx->held[i], &ctx->held[i + 1], (size_t)(ctx->nheld - i - 1) * sizeof *ctx->held);
    ctx->nheld--;
    int rc = mpiar__error(MPIAR_ERR_MISMATCH,
                          "rank %d: the ranks differ in MPIAR_CHECK (or the options' check): rank "
                          "%d runs the argument check for operation %u on this communicator and "
                          "rank %d runs %s without it; set it alike on every rank",
                          ctx->rank, source, seq, ctx->rank,
                          seq == r->seq ? "that operation" : "a later one");
    fail_and_break(r, rc);
    return;
  }
}

/* How long a contradicting message may wait, with nothing progressing, before it is an error. */
#define MPIAR__MISMATCH_GRACE_S 0.1

void mpiar__scan(mpiar__context_t *ctx) {
  int step_mask = (1 << MPIAR__TAG_BITS) - 1;
  while (!ctx->broken && ctx->nheld < MPIAR__HELD_MAX) {
    int flag = 0;
    mpiar__held_t m;
    MPI_Status st;
    int err = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, ctx->comm, &flag, &m.msg, &st);
    if (err != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING], reason[512];
      int len = 0;
      if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) {
        snprintf(msg, sizeof msg, "MPI error %d", err);
      }
      snprintf(reason, sizeof reason, "rank %d: MPI_Improbe failed: %.400s", ctx->rank, msg);
      mpiar__error(MPIAR_ERR_MPI, "%s", reason);
      mpiar__context_break(ctx, MPIAR_ERR_MPI, reason, 1);
      return;
    }
    if (!flag) {
      break;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    m.source = st.MPI_SOURCE;
    m.tag = st.MPI_TAG;
    m.bytes = (size_t)count;
    int slot = m.tag >> (ctx->size_bits + MPIAR__TAG_BITS);
    int step_tag = m.tag & step_mask;
    if (slot == ctx->nslots && step_tag == MPIAR__CTL_NOTICE) {
      notice_received(ctx, &m);
    } else if (slot == ctx->nslots && step_tag < MPIAR__CTL_CHECK * 2) {
      /* A FIN: that rank released the communicator (its drain counts it when this rank's
       * release comes). */
      if (step_tag == MPIAR__CTL_FIN && m.source >= 0 && m.source < ctx->size) {
        if (ctx->fin_early == NULL) {
          ctx->fin_early = calloc((size_t)ctx->size, 1);
        }
        if (ctx->fin_early != NULL) {
          ctx->fin_early[m.source] = 1;
        }
      }
      mpiar__discard(ctx, &m.msg, m.bytes);
    } else {
      /* A receive not posted yet (a later step, a later operation, an argument check). */
      m.data = NULL;
      ctx->held[ctx->nheld++] = m;
    }
  }
  if (!ctx->broken) {
    check_strays(ctx);
  }
  if (ctx->broken) {
    return;
  }
  mpiar__request_t *r = NULL;
  uint32_t k = 0;
  int i = 0;
  while (i < ctx->nheld && !conflict(ctx, &ctx->held[i], &r, &k)) {
    i++;
  }
  if (i == ctx->nheld) {
    ctx->suspect_time = 0;
    return;
  }
  double now = MPI_Wtime();
  if (ctx->suspect_time == 0 || ctx->progress_count != ctx->suspect_progress) {
    ctx->suspect_time = now;
    ctx->suspect_progress = ctx->progress_count;
    return;
  }
  if (now - ctx->suspect_time < MPIAR__MISMATCH_GRACE_S) {
    return;
  }
  /* Nothing moved while the message waited: the next message this request expects from that
   * rank has another length, so the ranks disagree on the collective's arguments. */
  mpiar__held_t m = ctx->held[i];
  memmove(&ctx->held[i], &ctx->held[i + 1], (size_t)(ctx->nheld - i - 1) * sizeof *ctx->held);
  ctx->nheld--;
  ctx->suspect_time = 0;
  mpiar__discard(ctx, &m.msg, m.bytes);
  int rc = length_mismatch(r, k, m.bytes);
  fail_and_break(r, rc);
}
