/*
 * The MPI executor: runs one rank's schedule with nonblocking point-to-point messages on the
 * context's private communicator.
 *
 * A step becomes ready when its dependencies are complete. Ready communication steps are posted
 * at once (receives as early as the schedule allows), ready reductions run one at a time with a
 * progress poll (MPI_Testsome) between them, so a segmented schedule overlaps the transfer of
 * chunk k+1 with the reduction of chunk k. Steps longer than mpiar__max_message_bytes travel as
 * several messages with the same tag, which MPI matches in posting order.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

/* Idle polls before a waiting rank starts yielding its core (when the policy yields). */
#define MPIAR__SPIN_POLLS 64

typedef struct exec_state {
  mpiar__context_t *ctx;
  mpiar__plan_t *plan;
  char *base[MPIAR__BUF_COUNT];
  size_t comm_head, comm_tail; /* queue at plan->ready[0 .. nsteps) */
  size_t comp_head, comp_tail; /* queue at plan->ready[nsteps .. 2 nsteps) */
  size_t nactive;
  size_t done;
  int average; /* MPIAR_AVG: final reductions divide by the rank count */
} exec_state_t;

static inline char *addr(const exec_state_t *x, mpiar__operand_t o) {
  return x->base[o.buf] + o.off * x->plan->sched.elem_size;
}

static inline void make_ready(exec_state_t *x, uint32_t step) {
  const mpiar__schedule_t *s = &x->plan->sched;
  uint8_t kind = s->steps[step].kind;
  if (kind == MPIAR__STEP_SEND || kind == MPIAR__STEP_RECV) {
    x->plan->ready[x->comm_tail++] = step;
  } else {
    x->plan->ready[s->nsteps + x->comp_tail++] = step;
  }
}

static inline void complete(exec_state_t *x, uint32_t step) {
  const mpiar__schedule_t *s = &x->plan->sched;
  x->done++;
  for (uint32_t k = s->succ_first[step]; k < s->succ_first[step + 1]; k++) {
    uint32_t next = s->succ[k];
    if (--x->plan->pending[next] == 0) {
      make_ready(x, next);
    }
  }
}

static int mpi_error(int err, const char *what, const exec_state_t *x, uint32_t step) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error %d", err);
  }
  return mpiar__error(MPIAR_ERR_MPI, "rank %d: %s in %s step %u failed: %s", x->ctx->rank, what,
                      x->plan->name, step, msg);
}

/* Post every piece of a SEND or RECV step. */
static int post(exec_state_t *x, uint32_t step) {
  mpiar__plan_t *plan = x->plan;
  const mpiar__step_t *st = &plan->sched.steps[step];
  size_t bytes = st->count * plan->sched.elem_size;
  char *buf = st->kind == MPIAR__STEP_SEND ? addr(x, st->a) : addr(x, st->dst);
  uint32_t npieces = plan->piece_first[step + 1] - plan->piece_first[step];
  plan->piece_left[step] = npieces;
  size_t off = 0;
  for (uint32_t k = 0; k < npieces; k++) {
    size_t len = bytes - off < mpiar__max_message_bytes ? bytes - off : mpiar__max_message_bytes;
    MPI_Request *req = &plan->active[x->nactive];
    int err;
    if (st->kind == MPIAR__STEP_SEND) {
      err = MPI_Isend(buf + off, (int)len, MPI_BYTE, st->peer, st->tag, x->ctx->comm, req);
    } else {
      err = MPI_Irecv(buf + off, (int)len, MPI_BYTE, st->peer, st->tag, x->ctx->comm, req);
    }
    if (err != MPI_SUCCESS) {
      return mpi_error(err, st->kind == MPIAR__STEP_SEND ? "MPI_Isend" : "MPI_Irecv", x, step);
    }
    plan->active_step[x->nactive++] = step;
    off += len;
  }
  return MPIAR_SUCCESS;
}

static void run_local(exec_state_t *x, uint32_t step, mpiar_dtype_t dtype, mpiar_op_t op) {
  const mpiar__schedule_t *s = &x->plan->sched;
  const mpiar__step_t *st = &s->steps[step];
  if (st->count == 0) {
    return;
  }
  if (st->kind == MPIAR__STEP_REDUCE) {
    mpiar__reduce(addr(x, st->dst), addr(x, st->a), addr(x, st->b), st->count, dtype, op);
    if (x->average && st->final) {
      /* The elements are complete here and travel on as averages: each is divided once. */
      mpiar__divide(addr(x, st->dst), addr(x, st->dst), st->count, dtype, (double)s->nranks);
    }
  } else {
    char *dst = addr(x, st->dst);
    const char *src = addr(x, st->a);
    if (dst != src) {
      memcpy(dst, src, st->count * s->elem_size);
    }
  }
}

/* Test outstanding requests; complete the steps whose last piece arrived. */
static int poll(exec_state_t *x, int *progressed) {
  mpiar__plan_t *plan = x->plan;
  if (x->nactive == 0) {
    return MPIAR_SUCCESS;
  }
  int outcount = 0;
  int err = MPI_Testsome((int)x->nactive, plan->active, &outcount, plan->done_idx, plan->statuses);
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {
    return mpi_error(err, "MPI_Testsome", x, plan->active_step[0]);
  }
  if (outcount == MPI_UNDEFINED || outcount == 0) {
    return MPIAR_SUCCESS;
  }
  *progressed = 1;
  for (int k = 0; k < outcount; k++) {
    uint32_t step = plan->active_step[plan->done_idx[k]];
    const mpiar__step_t *st = &plan->sched.steps[step];
    if (err == MPI_ERR_IN_STATUS && plan->statuses[k].MPI_ERROR != MPI_SUCCESS) {
      return mpi_error(plan->statuses[k].MPI_ERROR,
                       st->kind == MPIAR__STEP_SEND ? "a send" : "a receive", x, step);
    }
  }
  /* Completed requests were set to MPI_REQUEST_NULL: compact the outstanding list, then finish
   * the steps whose pieces have all arrived. */
  size_t kept = 0;
  for (size_t i = 0; i < x->nactive; i++) {
    if (plan->active[i] != MPI_REQUEST_NULL) {
      plan->active[kept] = plan->active[i];
      plan->active_step[kept] = plan->active_step[i];
      kept++;
    } else {
      uint32_t step = plan->active_step[i];
      if (--plan->piece_left[step] == 0) {
        complete(x, step);
      }
    }
  }
  x->nactive = kept;
  return MPIAR_SUCCESS;
}

/* Cancel what is still outstanding so that no request outlives a failed call. */
static void abandon(exec_state_t *x) {
  mpiar__plan_t *plan = x->plan;
  for (size_t i = 0; i < x->nactive; i++) {
    const mpiar__step_t *st = &plan->sched.steps[plan->active_step[i]];
    if (st->kind == MPIAR__STEP_RECV) {
      MPI_Cancel(&plan->active[i]);
      MPI_Wait(&plan->active[i], MPI_STATUS_IGNORE);
    } else {
      /* A send cannot be withdrawn reliably; freeing lets MPI finish it in the background. */
      MPI_Request_free(&plan->active[i]);
    }
  }
  x->nactive = 0;
}

static int timed_out(exec_state_t *x, double deadline_ms) {
  mpiar__plan_t *plan = x->plan;
  /* Name the oldest receive still waiting (else the oldest send): that peer is the late one. */
  uint32_t step = UINT32_MAX;
  for (int want_recv = 1; want_recv >= 0 && step == UINT32_MAX; want_recv--) {
    for (size_t i = 0; i < x->nactive; i++) {
      uint32_t s = plan->active_step[i];
      int is_recv = plan->sched.steps[s].kind == MPIAR__STEP_RECV;
      if (is_recv == want_recv && s < step) {
        step = s;
      }
    }
  }
  if (step == UINT32_MAX) {
    return mpiar__error(MPIAR_ERR_TIMEOUT,
                        "rank %d: %s timed out after %.0f ms with no message "
                        "outstanding",
                        x->ctx->rank, plan->name, deadline_ms);
  }
  const mpiar__step_t *st = &plan->sched.steps[step];
  return mpiar__error(MPIAR_ERR_TIMEOUT,
                      "rank %d: %s timed out after %.0f ms at step %u: waiting to %s %zu bytes "
                      "%s rank %d (tag %d)",
                      x->ctx->rank, plan->name, deadline_ms, step,
                      st->kind == MPIAR__STEP_RECV ? "receive" : "send",
                      st->count * plan->sched.elem_size,
                      st->kind == MPIAR__STEP_RECV ? "from" : "to", st->peer, st->tag);
}

int mpiar__execute(mpiar__context_t *ctx, mpiar__plan_t *plan, const void *in, void *out,
                   mpiar_dtype_t dtype, mpiar_op_t op, long timeout_ms) {
  const mpiar__schedule_t *s = &plan->sched;
  exec_state_t x = {0};
  x.ctx = ctx;
  x.plan = plan;
  x.base[MPIAR__BUF_INPUT] = (char *)(s->in_place ? out : in);
  x.base[MPIAR__BUF_OUTPUT] = (char *)out;
  x.base[MPIAR__BUF_SCRATCH] = (char *)ctx->scratch;
  /* AVG travels as a sum and is divided by the final reduction of each element. */
  mpiar_op_t kop = op == MPIAR_AVG ? MPIAR_SUM : op;
  x.average = op == MPIAR_AVG;

  size_t n = s->nsteps;
  for (size_t i = 0; i < n; i++) {
    plan->pending[i] = s->steps[i].ndeps;
    if (plan->pending[i] == 0) {
      make_ready(&x, (uint32_t)i);
    }
  }
  int yield = ctx->wait == MPIAR__WAIT_YIELD ||
              (ctx->wait == MPIAR__WAIT_AUTO && ctx->local_ranks > ctx->cores);
  double deadline = timeout_ms > 0 ? MPI_Wtime() + (double)timeout_ms * 1e-3 : 0;
  unsigned idle = 0;
  int rc = MPIAR_SUCCESS;

  while (x.done < n) {
    int progressed = 0;
    while (x.comm_head < x.comm_tail) {
      uint32_t step = plan->ready[x.comm_head++];
      rc = post(&x, step);
      if (rc != MPIAR_SUCCESS) {
        goto fail;
      }
      progressed = 1;
    }
    rc = poll(&x, &progressed);
    if (rc != MPIAR_SUCCESS) {
      goto fail;
    }
    if (x.comp_head < x.comp_tail) {
      uint32_t step = plan->ready[n + x.comp_head++];
      run_local(&x, step, dtype, kop);
      complete(&x, step);
      progressed = 1;
    }
    if (progressed) {
      idle = 0;
      continue;
    }
    if (x.nactive == 0 && x.comm_head == x.comm_tail && x.comp_head == x.comp_tail) {
      rc = mpiar__error(MPIAR_ERR_INTERNAL,
                        "rank %d: %s schedule stalled with %zu of %zu steps done (a step "
                        "depends on one that never completes)",
                        ctx->rank, plan->name, x.done, n);
      goto fail;
    }
    idle++;
    if (deadline > 0 && (idle & 15) == 0 && MPI_Wtime() > deadline) {
      rc = timed_out(&x, (double)timeout_ms);
      goto fail;
    }
    if (yield && idle > MPIAR__SPIN_POLLS) {
      sched_yield();
    }
  }
  return MPIAR_SUCCESS;

fail:
  abandon(&x);
  mpiar__context_break(ctx, mpiar_last_error());
  return rc;
}
