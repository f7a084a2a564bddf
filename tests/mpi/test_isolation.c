/*
 * Isolation and lifetime: user point-to-point traffic with the same tags interleaved with mpiar
 * calls on the same communicator; several communicators from MPI_Comm_split used alternately;
 * freeing a communicator releases its context; a cached plan is reused without building (and a
 * call like the last one reuses its plan without a lookup, until the plan is evicted or the
 * settings change); steps longer than the message limit are split into several messages.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/settings.h"
#include "core/inspect.h"
#include "mpi_test.h"

static int rank, size;

static void check_sum(MPI_Comm comm, size_t count, const char *alg, const char *what) {
  int csize = 0, crank = 0;
  MPI_Comm_size(comm, &csize);
  MPI_Comm_rank(comm, &crank);
  int64_t *v = malloc(count * sizeof *v + 1);
  for (size_t i = 0; i < count; i++) {
    v[i] = (int64_t)(crank + 1) * (int64_t)(i + 1);
  }
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = alg;
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce_ex(MPIAR_IN_PLACE, v, count, MPIAR_INT64, MPIAR_SUM, comm, &opts));
  int64_t tri = (int64_t)csize * (csize + 1) / 2;
  for (size_t i = 0; i < count; i++) {
    if (v[i] != tri * (int64_t)(i + 1)) {
      MT_CHECK(0, "%s %s: [%zu] = %lld, expected %lld", what, alg, i, (long long)v[i],
               (long long)(tri * (int64_t)(i + 1)));
      break;
    }
  }
  free(v);
}

/* A sum through mpiar_allreduce, or mpiar_iallreduce + mpiar_wait when @p in_place is 2 (no
 * options), in place or from a separate send buffer. */
static void memo_sum(MPI_Comm comm, size_t count, int in_place, const char *what) {
  int csize = 0, crank = 0;
  MPI_Comm_size(comm, &csize);
  MPI_Comm_rank(comm, &crank);
  int32_t *in = malloc(count * sizeof *in + 1), *out = malloc(count * sizeof *out + 1);
  for (size_t i = 0; i < count; i++) {
    in[i] = out[i] = (crank + 1) * (int32_t)(i % 1000 + 1);
  }
  if (in_place == 2) {
    mpiar_request_t req = MPIAR_REQUEST_NULL;
    MT_RC(MPIAR_SUCCESS,
          mpiar_iallreduce(MPIAR_IN_PLACE, out, count, MPIAR_INT32, MPIAR_SUM, comm, NULL, &req));
    MT_RC(MPIAR_SUCCESS, mpiar_wait(&req));
  } else {
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce(in_place ? MPIAR_IN_PLACE : in, out, count, MPIAR_INT32,
                                         MPIAR_SUM, comm));
  }
  int32_t tri = csize * (csize + 1) / 2;
  for (size_t i = 0; i < count; i++) {
    if (out[i] != tri * (int32_t)(i % 1000 + 1) || in[i] != (crank + 1) * (int32_t)(i % 1000 + 1)) {
      MT_CHECK(0, "%s (%s): [%zu] = %d, expected %d", what, in_place ? "in place" : "separate", i,
               out[i], tri * (int32_t)(i % 1000 + 1));
      break;
    }
  }
  free(in);
  free(out);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int nalg = mpiar_algorithm_count();

  /* 1. User messages with the library's tags, posted around mpiar calls on the same comm. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
#define NTAGS 8
  int sendv[NTAGS], recvv[NTAGS];
  MPI_Request reqs[NTAGS];
  for (int t = 0; t < NTAGS; t++) {
    sendv[t] = rank * 100 + t;
    MPI_Isend(&sendv[t], 1, MPI_INT, right, t, MPI_COMM_WORLD, &reqs[t]);
  }
  for (int a = 0; a < nalg; a++) {
    check_sum(MPI_COMM_WORLD, 1000, mpiar_algorithm_name(a), "interleaved user traffic");
  }
  for (int t = 0; t < NTAGS; t++) {
    MPI_Recv(&recvv[t], 1, MPI_INT, left, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MT_CHECK(recvv[t] == left * 100 + t, "user message tag %d = %d", t, recvv[t]);
  }
  MPI_Status statuses[NTAGS];
  MPI_Waitall(NTAGS, reqs, statuses);
  /* A user receive posted with MPI_ANY_TAG before the call must still get the user's message. */
  int any = -1;
  MPI_Request anyreq;
  MPI_Irecv(&any, 1, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &anyreq);
  check_sum(MPI_COMM_WORLD, 333, "auto", "pending ANY_TAG receive");
  int mine = 4242 + rank;
  MPI_Send(&mine, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
  MPI_Wait(&anyreq, MPI_STATUS_IGNORE);
  MT_CHECK(any == 4242 + left, "ANY_TAG receive got %d", any);

  /* 2. Split communicators used alternately. */
  MPI_Comm halves, reversed;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &halves);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
  for (int round = 0; round < 3; round++) {
    for (int a = 0; a < nalg; a++) {
      const char *alg = mpiar_algorithm_name(a);
      check_sum(halves, 97 + (size_t)round, alg, "halves");
      check_sum(MPI_COMM_WORLD, 50, alg, "world");
      check_sum(reversed, 1 + (size_t)round * 1000, alg, "reversed");
    }
  }

  /* 3. A cache hit builds nothing. */
  size_t built = mpiar__inspect_plans_built();
  for (int i = 0; i < 5; i++) {
    check_sum(MPI_COMM_WORLD, 1000, mpiar_algorithm_name(0), "cached");
  }
  MT_CHECK(mpiar__inspect_plans_built() == built, "a cached call built %zu plans",
           mpiar__inspect_plans_built() - built);

  /* 3a. The plan lookup itself says whether it built (not a global counter, which other
   * threads' calls move too). */
  int wcached = mpiar__inspect_context_cached(MPI_COMM_WORLD);
  MT_CHECK(wcached, "no context for MPI_COMM_WORLD after calls on it");
  if (wcached) {
    int b1 = -1, b2 = -1;
    MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan_lookup(MPI_COMM_WORLD, 0, 12345, 8, &b1));
    mpiar__inspect_add_plans_built(1000); /* as if other threads had built plans meanwhile */
    MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan_lookup(MPI_COMM_WORLD, 0, 12345, 8, &b2));
    MT_CHECK(b1 == 1 && b2 == 0, "plan_get said built %d, then %d (expected 1, then 0)", b1, b2);
  }

  /* 3b. Many sizes stay cached (a training step has hundreds of tensor sizes); with the limit
   * lowered, the least recently used plans are evicted and rebuilt, and results stay right. */
  MPI_Comm many;
  MPI_Comm_dup(MPI_COMM_WORLD, &many);
  for (int pass = 0; pass < 2; pass++) {
    built = mpiar__inspect_plans_built();
    for (size_t c = 1; c <= 300; c++) {
      check_sum(many, c, "auto", "many sizes");
    }
    MT_CHECK(pass == 0 || mpiar__inspect_plans_built() == built,
             "300 cached sizes rebuilt %zu plans on the second pass", mpiar__inspect_plans_built() - built);
  }
  int saved_max = mpiar__inspect_set_plan_cache_max(4);
  for (int pass = 0; pass < 2; pass++) {
    built = mpiar__inspect_plans_built();
    for (size_t c = 1000; c < 1010; c++) {
      check_sum(many, c, "ring", "evicted sizes");
    }
    /* Ten sizes through a cache of four: every call misses, on both passes. */
    MT_CHECK(mpiar__inspect_plans_built() - built == 10, "pass %d built %zu plans, expected 10", pass,
             mpiar__inspect_plans_built() - built);
  }
  built = mpiar__inspect_plans_built();
  check_sum(many, 1009, "ring", "most recent size");
  MT_CHECK(mpiar__inspect_plans_built() == built, "the most recent plan was evicted");

  /* 3c. Calls without options reuse the last like call's plan (no lookup), and a blocking call
   * keeps its request for the next like one (which holds the plan: the cache cannot evict it);
   * the memo follows the buffers' placement and the settings, and forgets a plan the cache
   * evicts. */
  built = mpiar__inspect_plans_built();
  size_t allocated = mpiar__inspect_requests_allocated();
  for (int i = 0; i < 50; i++) {
    memo_sum(many, 777, i % 2, "repeated call");
  }
  MT_CHECK(mpiar__inspect_plans_built() - built == 2, "50 like calls (in place and not) built %zu plans",
           mpiar__inspect_plans_built() - built);
  MT_CHECK(mpiar__inspect_requests_allocated() - allocated <= 3, "50 like calls allocated %zu requests",
           mpiar__inspect_requests_allocated() - allocated);
  mpiar__inspect_plan_t memo, last;
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &memo));
  MT_CHECK(memo.id != NULL && memo.count == 777 && memo.kept,
           "the memo holds the last call's plan, and its request is kept");
  for (size_t c = 2000; c < 2010; c++) {
    check_sum(many, c, "ring", "past the kept plan"); /* named: the memo stays */
  }
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
  MT_CHECK(last.id == memo.id, "the kept request's plan was evicted");
  built = mpiar__inspect_plans_built();
  memo_sum(many, 777, 1, "after the named calls");
  MT_CHECK(mpiar__inspect_plans_built() == built, "the kept plan was rebuilt");
  /* A nonblocking call's plan is not kept: evicting it clears the memo. */
  memo_sum(many, 555, 2, "nonblocking call");
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
  MT_CHECK(last.id != NULL && last.count == 555, "the memo holds the nonblocking call's plan");
  for (size_t c = 2000; c < 2010; c++) {
    check_sum(many, c, "ring", "evicting the memo's plan");
  }
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
  MT_CHECK(last.id == NULL, "the evicted plan is still the memo's");
  built = mpiar__inspect_plans_built();
  memo_sum(many, 555, 2, "after the eviction");
  MT_CHECK(mpiar__inspect_plans_built() - built == 1, "the evicted plan was not rebuilt (%zu built)",
           mpiar__inspect_plans_built() - built);
  setenv("MPIAR_ALGORITHM", "ring", 1);
  mpiar__settings_reload();
  memo_sum(many, 777, 1, "MPIAR_ALGORITHM=ring");
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
  MT_CHECK(last.id != NULL && strcmp(last.name, "ring") == 0, "new settings kept the old plan (%s)",
           last.id ? last.name : "none");
  unsetenv("MPIAR_ALGORITHM");
  mpiar__settings_reload();
  memo_sum(many, 777, 1, "MPIAR_ALGORITHM unset");
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
  MT_CHECK(last.id != NULL && strcmp(last.name, "ring") != 0,
           "the settings' reload kept the ring plan");
  /* The same call again runs the kept request as it is; a call that differs only in its
   * operation or datatype (same buffers and sizes) must not. */
  {
    int csize = 0, crank = 0;
    MPI_Comm_size(many, &csize);
    MPI_Comm_rank(many, &crank);
    int32_t buf[64];
    static const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_SUM, MPIAR_MAX, MPIAR_MAX,
                                     MPIAR_MIN, MPIAR_SUM, MPIAR_BXOR};
    allocated = mpiar__inspect_requests_allocated();
    for (int round = 0; round < 3; round++) {
      for (size_t kk = 0; kk < 2 * (sizeof ops / sizeof ops[0]); kk++) {
        size_t k = kk / 2; /* each call twice in a row: the second is the same call again */
        for (int i = 0; i < 64; i++) {
          buf[i] = (crank + 1) * (i + 1);
        }
        mpiar_dtype_t dt = (k % 2) ? MPIAR_UINT32 : MPIAR_INT32;
        MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, buf, 64, dt, ops[k], many));
        for (int i = 0; i < 64; i++) {
          int32_t want = 0;
          for (int q = 1; q <= csize; q++) {
            int32_t v = q * (i + 1);
            want = q == 1                ? v
                   : ops[k] == MPIAR_SUM ? want + v
                   : ops[k] == MPIAR_MAX ? (v > want ? v : want)
                   : ops[k] == MPIAR_MIN ? (v < want ? v : want)
                                         : want ^ v;
          }
          if (buf[i] != want) {
            MT_CHECK(0, "same buffers, operation %d: [%d] = %d, expected %d", (int)ops[k], i,
                     buf[i], want);
            break;
          }
        }
      }
    }
    MT_CHECK(mpiar__inspect_requests_allocated() - allocated <= 2, "like calls allocated %zu requests",
             mpiar__inspect_requests_allocated() - allocated);
  }

  /* The memo of automatic choices (direct-mapped, so sizes collide) agrees with the selector. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t c = 1; c <= 600; c += 7) {
      memo_sum(many, c * 97, 1, "memoised choice");
      const char *alg = NULL, *source = NULL;
      size_t seg = 0;
      MT_RC(MPIAR_SUCCESS, mpiar_select_comm(many, c * 97, MPIAR_INT32, &alg, &seg, &source));
      MT_RC(MPIAR_SUCCESS, mpiar__inspect_plan(many, MPIAR__INSPECT_LAST_CALL, &last));
      if (last.id == NULL || strcmp(last.name, alg) != 0) {
        MT_CHECK(0, "pass %d, %zu elements: ran %s, the selector chooses %s", pass, c * 97,
                 last.id ? last.name : "nothing", alg);
        break;
      }
    }
  }
  mpiar__inspect_set_plan_cache_max(saved_max);
  MPI_Comm_free(&many);

  /* 4. Freeing a communicator releases its context (and its private duplicate). */
  int live = mpiar__inspect_live_contexts();
  MPI_Comm_free(&halves);
  MT_CHECK(mpiar__inspect_live_contexts() == live - 1, "live contexts %d -> %d after a free", live,
           mpiar__inspect_live_contexts());
  MPI_Comm_free(&reversed);
  MT_CHECK(mpiar__inspect_live_contexts() == live - 2, "live contexts %d after two frees",
           mpiar__inspect_live_contexts());
  for (int i = 0; i < 20; i++) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    check_sum(dup, 10, "auto", "short-lived");
    MPI_Comm_free(&dup);
  }
  MT_CHECK(mpiar__inspect_live_contexts() == live - 2, "contexts leak: %d live", mpiar__inspect_live_contexts());

  /* 5. Steps longer than the message limit travel as several messages. The limit is read when a
   * plan is built, so a new communicator gets plans built under the lowered limit. */
  size_t saved = mpiar__inspect_set_max_message_bytes(1000);
  MPI_Comm split_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &split_comm);
  for (int a = 0; a < nalg; a++) {
    check_sum(split_comm, 20011, mpiar_algorithm_name(a), "split messages");
  }
  MPI_Comm_free(&split_comm);
  mpiar__inspect_set_max_message_bytes(saved);

  return mt_finish("isolation");
}
