/*
 * The simulator's checks catch broken schedules: each deliberately wrong builder below must be
 * reported, with the problem named in the error text.
 */
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

static int failures;

/* Ranks 0 and 1 each wait for the other before sending. */
static int b_deadlock(mpiar__schedule_t *s) {
  long r = mpiar__sched_recv(s, 1 - s->rank, 0, mpiar__scratch(0), s->count, NULL, 0);
  s->scratch_elems = s->count;
  mpiar__sched_send(s, 1 - s->rank, 0, mpiar__in(0), s->count, &r, 1);
  return 0;
}

/* Rank 0 sends a message nobody receives. */
static int b_unmatched(mpiar__schedule_t *s) {
  mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count, NULL, 0);
  if (s->rank == 0) {
    mpiar__sched_send(s, 1, 7, mpiar__in(0), s->count, NULL, 0);
  }
  return 0;
}

/* Rank 1 posts a receive one element shorter than the message. */
static int b_truncated(mpiar__schedule_t *s) {
  s->scratch_elems = s->count;
  if (s->rank == 0) {
    mpiar__sched_send(s, 1, 0, mpiar__in(0), s->count, NULL, 0);
  } else {
    mpiar__sched_recv(s, 0, 0, mpiar__scratch(0), s->count - 1, NULL, 0);
  }
  return 0;
}

/* A reduction reads scratch that nothing wrote. */
static int b_uninit(mpiar__schedule_t *s) {
  s->scratch_elems = s->count;
  mpiar__sched_reduce(s, mpiar__out(0), mpiar__in(0), mpiar__scratch(0), s->count, NULL, 0);
  return 0;
}

/* In place, a reduction overwrites the buffer an unfinished send reads: no dependency. */
static int b_hazard(mpiar__schedule_t *s) {
  s->scratch_elems = s->count;
  long snd = mpiar__sched_send(s, 1 - s->rank, 0, mpiar__out(0), s->count, NULL, 0);
  long rcv = mpiar__sched_recv(s, 1 - s->rank, 0, mpiar__scratch(0), s->count, NULL, 0);
  (void)snd;
  mpiar__sched_reduce(s, mpiar__out(0), mpiar__out(0), mpiar__scratch(0), s->count, &rcv, 1);
  return 0;
}

/* Each rank puts its own data in operand a: commutative, but NaN payloads differ by rank. */
static int b_own_first(mpiar__schedule_t *s) {
  s->scratch_elems = s->count;
  long snd = mpiar__sched_send(s, 1 - s->rank, 0, mpiar__in(0), s->count, NULL, 0);
  long rcv = mpiar__sched_recv(s, 1 - s->rank, 0, mpiar__scratch(0), s->count, NULL, 0);
  long deps[] = {snd, rcv};
  mpiar__sched_reduce(s, mpiar__out(0), mpiar__in(0), mpiar__scratch(0), s->count, deps, 2);
  return 0;
}

/* Every rank keeps its own input: ranks disagree. */
static int b_no_exchange(mpiar__schedule_t *s) {
  mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count, NULL, 0);
  return 0;
}

/* One rank doubles its input: the same on every rank (p = 1) but not the reduction. */
static int b_wrong(mpiar__schedule_t *s) {
  mpiar__sched_reduce(s, mpiar__out(0), mpiar__in(0), mpiar__in(0), s->count, NULL, 0);
  return 0;
}

/* Writes the input buffer of a call that is not in place. */
static int b_write_input(mpiar__schedule_t *s) {
  mpiar__sched_copy(s, mpiar__in(0), mpiar__in(0), s->count, NULL, 0);
  return 0;
}

/* Reads past the end of OUTPUT. */
static int b_range(mpiar__schedule_t *s) {
  mpiar__sched_copy(s, mpiar__out(1), mpiar__in(0), s->count, NULL, 0);
  return 0;
}

/* Leaves the last output element unwritten. */
static int b_partial(mpiar__schedule_t *s) {
  mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count - 1, NULL, 0);
  return 0;
}

static void expect_error(const char *name, mpiar__builder_fn fn, int p, mpiar_dtype_t dt, int nan,
                         const char *needle) {
  mpiar__algorithm_t alg = {name, fn, NULL, 0, "broken on purpose", {0}, 0, NULL, 0, NULL};
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = &alg;
  cfg.nranks = p;
  cfg.count = 33;
  cfg.dtype = dt;
  cfg.nan_inputs = nan;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  if (rc != MPIAR_SUCCESS || res.ok || strstr(res.error, needle) == NULL) {
    failures++;
    fprintf(stderr, "FAIL %s: rc %d ok %d error '%s' (expected '%s')\n", name, rc, res.ok,
            res.error, needle);
  }
}

int main(void) {
  expect_error("deadlock", b_deadlock, 2, MPIAR_INT32, 0, "deadlock");
  expect_error("unmatched", b_unmatched, 2, MPIAR_INT32, 0, "unmatched message");
  expect_error("truncated", b_truncated, 2, MPIAR_INT32, 0, "truncated");
  expect_error("uninit", b_uninit, 1, MPIAR_INT32, 0, "uninitialised scratch");
  expect_error("hazard", b_hazard, 2, MPIAR_INT32, 0, "without a dependency");
  expect_error("own_first", b_own_first, 2, MPIAR_FLOAT32, 1, "bitwise");
  expect_error("no_exchange", b_no_exchange, 3, MPIAR_INT64, 0, "differs from rank 0");
  expect_error("wrong", b_wrong, 1, MPIAR_INT32, 0, "differs from the reference");
  expect_error("wrong_float", b_wrong, 1, MPIAR_FLOAT64, 0, "reference");
  expect_error("write_input", b_write_input, 1, MPIAR_INT32, 0, "writes INPUT");
  expect_error("range", b_range, 1, MPIAR_INT32, 0, "outside");
  expect_error("partial", b_partial, 1, MPIAR_INT32, 0, "never wrote output element 32");
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
