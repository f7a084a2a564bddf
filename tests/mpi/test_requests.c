/*
 * Requests: nonblocking and persistent operations.
 *
 *   test_requests CASE
 *
 *   api          iallreduce/ibcast with test, wait, waitall, testany, waitany, request_free, the
 *                null request, and bad handles
 *   outstanding  2..64 operations of different sizes and algorithms outstanding at once on one
 *                communicator, completed in reverse, random and array order: each gets its own
 *                messages (its own slot and tags), and each result is exact
 *   persistent   allreduce_init / bcast_init started 1000 times: no allocation and no plan built
 *                per start, results exact each time; misuse is refused
 *   failure      an error in one of several outstanding requests fails them all, on every rank
 *   threads      4 threads x 1000 calls on 4 communicators (MPI_THREAD_MULTIPLE), results checked
 *   progress     MPIAR_PROGRESS=thread: operations finish while the program computes, without
 *                test calls (with MPI_THREAD_MULTIPLE; without it, MPIAR_ERR_THREAD_LEVEL)
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "core/inspect.h"
#include "mpi_test.h"

static int rank, size;

/* Fill with rank-valued integers (exact sums) for operation number @p k. */
static void fill(int64_t *v, size_t n, int k) {
  for (size_t i = 0; i < n; i++) {
    v[i] = (int64_t)(rank + 1) * (int64_t)(i % 1000 + 1) + k;
  }
}

static int check_sum(const int64_t *v, size_t n, int k, const char *what) {
  int64_t tri = (int64_t)size * (size + 1) / 2;
  for (size_t i = 0; i < n; i++) {
    int64_t want = tri * (int64_t)(i % 1000 + 1) + (int64_t)k * size;
    if (v[i] != want) {
      MT_CHECK(0, "%s: [%zu] = %lld, expected %lld", what, i, (long long)v[i], (long long)want);
      return 0;
    }
  }
  return 1;
}

static void case_api(void) {
  enum { N = 5000 };
  static int64_t a[N], b[N];
  mpiar_request_t r = MPIAR_REQUEST_NULL, rs[4];
  /* The null request is complete. */
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  int done = 0;
  MT_RC(MPIAR_SUCCESS, mpiar_test(&r, &done));
  MT_CHECK(done == 1, "null request not done");
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&r));
  /* iallreduce + wait. */
  fill(a, N, 1);
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, NULL, &r));
  MT_CHECK(r != MPIAR_REQUEST_NULL, "no request");
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  MT_CHECK(r == MPIAR_REQUEST_NULL, "a completed request is not set to MPIAR_REQUEST_NULL");
  check_sum(a, N, 1, "iallreduce + wait");
  /* iallreduce + a test loop. */
  fill(a, N, 2);
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, NULL, &r));
  done = 0;
  long polls = 0;
  while (!done) {
    MT_RC(MPIAR_SUCCESS, mpiar_test(&r, &done));
    polls++;
  }
  MT_CHECK(r == MPIAR_REQUEST_NULL, "tested request not released");
  check_sum(a, N, 2, "iallreduce + test");
  /* Out of place, ibcast, waitall with a null entry. */
  fill(a, N, 3);
  for (int i = 0; i < N; i++) {
    b[i] = rank == size - 1 ? i : -1;
  }
  static int64_t out[N];
  MT_RC(MPIAR_SUCCESS,
        mpiar_iallreduce(a, out, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &rs[0]));
  MT_RC(MPIAR_SUCCESS, mpiar_ibcast(b, N, MPIAR_INT64, size - 1, MPI_COMM_WORLD, NULL, &rs[1]));
  rs[2] = MPIAR_REQUEST_NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_waitall(3, rs));
  MT_CHECK(rs[0] == MPIAR_REQUEST_NULL && rs[1] == MPIAR_REQUEST_NULL, "waitall left requests");
  check_sum(out, N, 3, "out of place");
  for (int i = 0; i < N; i++) {
    if (b[i] != i) {
      MT_CHECK(0, "ibcast [%d] = %lld", i, (long long)b[i]);
      break;
    }
  }
  /* waitany / testany: each completes one; all null -> index -1. */
  fill(a, N, 4);
  fill(b, N, 5);
  MT_RC(MPIAR_SUCCESS,
        mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &rs[0]));
  MT_RC(MPIAR_SUCCESS,
        mpiar_iallreduce(MPIAR_IN_PLACE, b, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &rs[1]));
  int seen[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    int idx = -1;
    MT_RC(MPIAR_SUCCESS, mpiar_waitany(2, rs, &idx));
    MT_CHECK(idx == 0 || idx == 1, "waitany index %d", idx);
    if (idx == 0 || idx == 1) {
      seen[idx]++;
      MT_CHECK(rs[idx] == MPIAR_REQUEST_NULL, "waitany did not release");
    }
  }
  MT_CHECK(seen[0] == 1 && seen[1] == 1, "waitany completed %d and %d", seen[0], seen[1]);
  check_sum(a, N, 4, "waitany a");
  check_sum(b, N, 5, "waitany b");
  int idx = 7;
  MT_RC(MPIAR_SUCCESS, mpiar_testany(2, rs, &idx, &done));
  MT_CHECK(idx == -1 && done == 1, "testany on nulls: index %d done %d", idx, done);
  /* request_free of an active request completes it. */
  fill(a, N, 6);
  MT_RC(MPIAR_SUCCESS,
        mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &r));
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&r));
  MT_CHECK(r == MPIAR_REQUEST_NULL, "request_free did not null the handle");
  check_sum(a, N, 6, "request_free of an active request");
  /* Bad arguments: refused, nothing started. */
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                                MPI_COMM_WORLD, NULL, NULL));
  MT_RC(MPIAR_ERR_BAD_DTYPE_OP, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_AVG,
                                                 MPI_COMM_WORLD, NULL, &r));
  MT_CHECK(r == MPIAR_REQUEST_NULL, "a refused call made a request");
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_wait(NULL));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&r));
  mpiar_request_t stale = NULL;
  MT_RC(MPIAR_SUCCESS,
        mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &r));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&r)); /* not persistent */
  stale = r;
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_wait(&stale)); /* released */
  mpiar_options_t junk;
  memset(&junk, 0, sizeof junk);
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                                MPI_COMM_WORLD, &junk, &r));
  /* An options struct of the first released layout (0.1: the fields up to timeout_ms), as a
   * program compiled against that header passes it: sizeof 32, whose last 4 bytes are padding
   * (garbage here) where the current layout has its check field. */
  struct options_v1 {
    size_t struct_size;
    const char *algorithm;
    size_t segment_bytes;
    int timeout_ms;
  } old;
  memset(&old, 0x77, sizeof old);
  old.struct_size = sizeof old;
  old.algorithm = NULL;
  old.segment_bytes = 0;
  old.timeout_ms = 0;
  MT_CHECK(sizeof old == 32 && offsetof(mpiar_options_t, check) < sizeof old,
           "the old layout's padding no longer holds the check field (sizeof %zu)", sizeof old);
  fill(a, N, 7);
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                          MPI_COMM_WORLD, (const mpiar_options_t *)(void *)&old));
  check_sum(a, N, 7, "an older options struct");
  /* The same layout with 1 in its padding: not an argument check either (the check would
   * otherwise run; it is a field of a later layout). */
  memset((char *)&old + offsetof(struct options_v1, timeout_ms) + sizeof(int), 0, 4);
  ((unsigned char *)&old)[offsetof(struct options_v1, timeout_ms) + sizeof(int)] = 1;
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, (const mpiar_options_t *)(void *)&old,
                                        &r));
  mpiar__inspect_request_t info;
  MT_CHECK(mpiar__inspect_request(r, &info) == MPIAR_SUCCESS && info.check == 0,
           "a 0.1 options structure turned the argument check on");
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  if (rank == 0) {
    printf("api: a test loop took %ld polls\n", polls);
  }
}

/*
 * Handles are safe by construction: a copy of a completed or freed handle is refused (never
 * completing another request that reuses the same memory), also when more requests than a plan
 * keeps spare come and go (run under valgrind too: no read of freed memory).
 */
static void case_stale(void) {
  enum { N = 1000, M = 9 };
  static int64_t a[M][N];
  mpiar_request_t r = MPIAR_REQUEST_NULL, stale = MPIAR_REQUEST_NULL;
  fill(a[0], N, 1);
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a[0], N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, NULL, &r));
  stale = r;
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  check_sum(a[0], N, 1, "first");
  /* The next request of the same plan takes the same memory: the stale copy must not name it. */
  fill(a[1], N, 2);
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a[1], N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, NULL, &r));
  MT_CHECK(r != stale, "a new request has the completed one's handle");
  int done = 0;
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_wait(&stale));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_test(&stale, &done));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_request_free(&stale));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&stale));
  mpiar_request_t pair[2] = {r, stale};
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_waitall(2, pair));
  MT_CHECK(r != MPIAR_REQUEST_NULL, "the live request was touched");
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&r));
  check_sum(a[1], N, 2, "the request after a stale wait");
  /* More requests of one plan than it keeps spare: the extra ones are freed when they finish;
   * copies of every handle are refused afterwards. */
  mpiar_request_t rs[M], copies[M];
  for (int k = 0; k < M; k++) {
    fill(a[k], N, 10 + k);
    MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a[k], N, MPIAR_INT64, MPIAR_SUM,
                                          MPI_COMM_WORLD, NULL, &rs[k]));
    copies[k] = rs[k];
  }
  MT_RC(MPIAR_SUCCESS, mpiar_waitall(M, rs));
  for (int k = 0; k < M; k++) {
    check_sum(a[k], N, 10 + k, "one of several");
    MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_wait(&copies[k]));
    MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_test(&copies[k], &done));
  }
  /* A freed persistent request. */
  mpiar_request_t p = MPIAR_REQUEST_NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, a[0], N, MPIAR_INT64, MPIAR_SUM,
                                            MPI_COMM_WORLD, NULL, &p));
  mpiar_request_t pcopy = p;
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&p));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&pcopy));
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_request_free(&pcopy));
  /* A handle that was never made. */
  mpiar_request_t made_up = (mpiar_request_t)(uintptr_t)0x5a5a5a5a5a5aULL;
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_wait(&made_up));
}

/*
 * Requests used after MPI_Finalize (an iallreduce left outstanding across it, a persistent
 * request started after it): MPIAR_ERR_MPI_STATE at once, never a wait that spins forever.
 * Runs its own MPI_Finalize; the exit code is this rank's verdict.
 */
static int case_after_finalize(void) {
  enum { N = 1000 };
  static int64_t a[N], b[N];
  fill(a, N, 1);
  fill(b, N, 2);
  mpiar_request_t r = MPIAR_REQUEST_NULL, p = MPIAR_REQUEST_NULL, q = MPIAR_REQUEST_NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, b, N, MPIAR_INT64, MPIAR_SUM,
                                            MPI_COMM_WORLD, NULL, &p));
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, b, N, MPIAR_INT64, MPIAR_SUM,
                                            MPI_COMM_WORLD, NULL, &q));
  MPI_Barrier(MPI_COMM_WORLD);
  MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                        MPI_COMM_WORLD, NULL, &r));
  int before = mt_failures;
  MPI_Finalize();
  double t0 = (double)clock() / CLOCKS_PER_SEC;
  MT_RC(MPIAR_ERR_MPI_STATE, mpiar_wait(&r));
  MT_CHECK(r == MPIAR_REQUEST_NULL, "the request outlived MPI_Finalize");
  MT_RC(MPIAR_ERR_MPI_STATE, mpiar_start(&p));
  int done = 0;
  MT_RC(MPIAR_ERR_MPI_STATE, mpiar_test(&q, &done));
  MT_RC(MPIAR_ERR_MPI_STATE, mpiar_request_free(&q));
  MT_RC(MPIAR_ERR_MPI_STATE,
        mpiar_allreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD));
  MT_CHECK(strstr(mpiar_last_error(), "finalized") != NULL, "detail '%s'", mpiar_last_error());
  double spent = (double)clock() / CLOCKS_PER_SEC - t0;
  MT_CHECK(spent < 5.0, "the calls after MPI_Finalize took %.1f s of CPU", spent);
  printf("after_finalize: rank %d %s (%d failed checks, %d before MPI_Finalize)\n", rank,
         mt_failures ? "FAILED" : "passed", mt_failures, before);
  return mt_failures ? 1 : 0;
}

/* @p n operations of sizes and algorithms that differ, completed in @p order. */
static void outstanding(MPI_Comm comm, int n, int order, unsigned seed) {
  int64_t **bufs = calloc((size_t)n, sizeof *bufs);
  size_t *counts = calloc((size_t)n, sizeof *counts);
  mpiar_request_t *reqs = calloc((size_t)n, sizeof *reqs);
  int nalg = mpiar_algorithm_count();
  for (int k = 0; k < n; k++) {
    counts[k] = (size_t)((k * 7919 + (int)seed) % 20000) + (size_t)(k % 3 == 0 ? 70000 : 1);
    bufs[k] = malloc(counts[k] * sizeof(int64_t));
    fill(bufs[k], counts[k], k);
    mpiar_options_t o = MPIAR_OPTIONS_INIT;
    o.algorithm = k % (nalg + 1) == nalg ? "auto" : mpiar_algorithm_name(k % (nalg + 1));
    o.timeout_ms = 60000;
    MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, bufs[k], counts[k], MPIAR_INT64,
                                          MPIAR_SUM, comm, &o, &reqs[k]));
  }
  if (order == 0) { /* reverse */
    for (int k = n - 1; k >= 0; k--) {
      MT_RC(MPIAR_SUCCESS, mpiar_wait(&reqs[k]));
    }
  } else if (order == 1) { /* a random order, tests in between */
    int left = n;
    unsigned s = seed * 2654435761u + 1;
    while (left > 0) {
      s = s * 1103515245u + 12345u;
      int k = (int)((s >> 8) % (unsigned)n);
      int done = 0;
      if (reqs[k] != MPIAR_REQUEST_NULL) {
        MT_RC(MPIAR_SUCCESS, mpiar_test(&reqs[k], &done));
        left -= done;
      }
    }
  } else {
    MT_RC(MPIAR_SUCCESS, mpiar_waitall(n, reqs));
  }
  for (int k = 0; k < n; k++) {
    char what[64];
    snprintf(what, sizeof what, "%d outstanding, operation %d (%zu elements)", n, k, counts[k]);
    check_sum(bufs[k], counts[k], k, what);
    free(bufs[k]);
  }
  free(bufs);
  free(counts);
  free(reqs);
}

static void case_outstanding(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  const int ns[] = {2, 5, 31, 32, 64};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    for (int order = 0; order < 3; order++) {
      outstanding(c, ns[i], order, (unsigned)(i * 3 + (size_t)order));
    }
  }
  /* Two communicators, interleaved. */
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  enum { N = 3000 };
  static int64_t x[8][N];
  mpiar_request_t rs[8];
  for (int k = 0; k < 8; k++) {
    fill(x[k], N, k);
    MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(MPIAR_IN_PLACE, x[k], N, MPIAR_INT64, MPIAR_SUM,
                                          k % 2 ? c : d, NULL, &rs[k]));
  }
  MT_RC(MPIAR_SUCCESS, mpiar_waitall(8, rs));
  for (int k = 0; k < 8; k++) {
    check_sum(x[k], N, k, "two communicators");
  }
  MPI_Comm_free(&d);
  MPI_Comm_free(&c);
}

static void case_persistent(void) {
  enum { N = 1000, STARTS = 1000 };
  static int64_t a[N], b[N];
  mpiar_request_t ar = MPIAR_REQUEST_NULL, br = MPIAR_REQUEST_NULL;
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce_init(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &ar));
  MT_RC(MPIAR_SUCCESS, mpiar_bcast_init(b, N, MPIAR_INT64, 0, MPI_COMM_WORLD, NULL, &br));
  /* Inactive: waiting returns at once; it is not released. */
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&ar));
  MT_CHECK(ar != MPIAR_REQUEST_NULL, "waiting on an inactive persistent request released it");
  size_t allocs = 0, plans = 0;
  for (int s = 0; s < STARTS; s++) {
    if (s == 1) {
      allocs = mpiar__inspect_requests_allocated();
      plans = mpiar__inspect_plans_built();
    }
    fill(a, N, s);
    for (int i = 0; i < N; i++) {
      b[i] = rank == 0 ? (int64_t)s * i : -1;
    }
    MT_RC(MPIAR_SUCCESS, mpiar_start(&ar));
    MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_start(&ar)); /* already active */
    MT_RC(MPIAR_SUCCESS, mpiar_start(&br));
    mpiar_request_t both[2] = {ar, br};
    MT_RC(MPIAR_SUCCESS, mpiar_waitall(2, both));
    MT_CHECK(both[0] == ar && both[1] == br, "waitall released persistent requests");
    if (!check_sum(a, N, s, "persistent allreduce") || b[N - 1] != (int64_t)s * (N - 1)) {
      MT_CHECK(b[N - 1] == (int64_t)s * (N - 1), "persistent bcast: %lld", (long long)b[N - 1]);
      break;
    }
  }
  MT_CHECK(mpiar__inspect_requests_allocated() == allocs, "%zu requests allocated by %d starts",
           mpiar__inspect_requests_allocated() - allocs, STARTS - 1);
  MT_CHECK(mpiar__inspect_plans_built() == plans, "%zu plans built by %d starts",
           mpiar__inspect_plans_built() - plans,
           STARTS - 1);
  /* The blocking call allocates nothing on a cache hit either. */
  size_t before = mpiar__inspect_requests_allocated();
  for (int s = 0; s < 100; s++) {
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM,
                                         MPI_COMM_WORLD));
  }
  MT_CHECK(mpiar__inspect_requests_allocated() - before <= 1,
           "blocking calls allocated %zu requests",
           mpiar__inspect_requests_allocated() - before);
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&ar));
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&br));
  MT_CHECK(ar == MPIAR_REQUEST_NULL && br == MPIAR_REQUEST_NULL, "free did not null");
  /* A persistent request outlives its communicator until it is freed. */
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_init(MPIAR_IN_PLACE, a, N, MPIAR_INT64, MPIAR_SUM, c, NULL,
                                            &ar));
  fill(a, N, 9);
  MT_RC(MPIAR_SUCCESS, mpiar_start(&ar));
  MT_RC(MPIAR_SUCCESS, mpiar_wait(&ar));
  check_sum(a, N, 9, "before the communicator is freed");
  int live = mpiar__inspect_live_contexts();
  MPI_Comm_free(&c);
  MT_CHECK(mpiar__inspect_live_contexts() == live,
           "the context went before its persistent request");
  MT_RC(MPIAR_SUCCESS, mpiar_request_free(&ar));
  MT_CHECK(mpiar__inspect_live_contexts() == live - 1,
           "freeing the request did not release the context");
}

static void case_failure(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  enum { N = 20000 };
  static int64_t x[4][N];
  mpiar_request_t rs[4];
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 20000;
  for (int k = 0; k < 4; k++) {
    /* The third operation has another count on the last rank. */
    size_t n = (k == 2 && rank == size - 1) ? N - 17 : N;
    int rc = mpiar_iallreduce(MPIAR_IN_PLACE, x[k], n, MPIAR_INT64, MPIAR_SUM, c, &o, &rs[k]);
    /* The mismatch may already be found while a later operation starts: that start then fails
     * with the broken communicator, and makes no request. */
    MT_CHECK(rc == MPIAR_SUCCESS || (k == 3 && rc == MPIAR_ERR_COMM_BROKEN), "start %d: %s (%s)",
             k, mpiar_err_name(rc), mpiar_last_error());
  }
  int errors = 0, mismatch = 0;
  for (int k = 0; k < 4; k++) {
    int rc = mpiar_wait(&rs[k]);
    errors += rc != MPIAR_SUCCESS;
    mismatch += rc == MPIAR_ERR_MISMATCH;
    MT_CHECK(rc == MPIAR_SUCCESS || rc == MPIAR_ERR_MISMATCH || rc == MPIAR_ERR_COMM_BROKEN,
             "request %d: %s (%s)", k, mpiar_err_name(rc), mpiar_last_error());
    MT_CHECK(rs[k] == MPIAR_REQUEST_NULL, "request %d not released", k);
  }
  /* Every rank sees an error: in the requests, or on its next call. */
  if (errors == 0) {
    int64_t y = 1;
    MT_RC(MPIAR_ERR_COMM_BROKEN, mpiar_allreduce_ex(MPIAR_IN_PLACE, &y, 1, MPIAR_INT64, MPIAR_SUM,
                                                    c, &o));
  }
  int any = 0;
  MPI_Allreduce(&mismatch, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MT_CHECK(any > 0, "no rank found the mismatch");
  MPI_Comm_free(&c);
}

/* ---- threads ---- */

enum { THREADS = 4, CALLS = 1000 };
static MPI_Comm thread_comms[THREADS];
static int thread_failures[THREADS];

static void *thread_main(void *arg) {
  int t = (int)(intptr_t)arg;
  int64_t v[64];
  for (int call = 0; call < CALLS; call++) {
    size_t n = (size_t)(1 + (call + t) % 64);
    for (size_t i = 0; i < n; i++) {
      v[i] = (int64_t)(rank + 1) * (t + 1) + call;
    }
    int rc;
    if (call % 3 == 2) {
      mpiar_request_t r;
      rc = mpiar_iallreduce(MPIAR_IN_PLACE, v, n, MPIAR_INT64, MPIAR_SUM, thread_comms[t], NULL, &r);
      if (rc == MPIAR_SUCCESS) {
        rc = mpiar_wait(&r);
      }
    } else {
      rc = mpiar_allreduce(MPIAR_IN_PLACE, v, n, MPIAR_INT64, MPIAR_SUM, thread_comms[t]);
    }
    int64_t want = (int64_t)size * (size + 1) / 2 * (t + 1) + (int64_t)call * size;
    if (rc != MPIAR_SUCCESS || v[n - 1] != want) {
      if (thread_failures[t]++ < 3) {
        fprintf(stderr, "rank %d thread %d call %d: %s (%s), %lld vs %lld\n", rank, t, call,
                mpiar_err_name(rc), mpiar_last_error(), (long long)v[n - 1], (long long)want);
      }
    }
  }
  return NULL;
}

static void case_threads(void) {
  int provided = 0;
  MPI_Query_thread(&provided);
  MT_CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    return;
  }
  for (int t = 0; t < THREADS; t++) {
    MPI_Comm_dup(MPI_COMM_WORLD, &thread_comms[t]);
  }
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) {
    pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    MT_CHECK(thread_failures[t] == 0, "thread %d: %d failed calls", t, thread_failures[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    MPI_Comm_free(&thread_comms[t]);
  }
}

static void case_progress(void) {
  int provided = 0;
  MPI_Query_thread(&provided);
  enum { N = 1 << 20 };
  int64_t *v = malloc(N * sizeof *v);
  fill(v, N, 3);
  mpiar_request_t r = MPIAR_REQUEST_NULL;
  int rc = mpiar_iallreduce(MPIAR_IN_PLACE, v, N, MPIAR_INT64, MPIAR_SUM, MPI_COMM_WORLD, NULL, &r);
  if (provided != MPI_THREAD_MULTIPLE) {
    MT_CHECK(rc == MPIAR_ERR_THREAD_LEVEL, "progress thread without MPI_THREAD_MULTIPLE: %s",
             mpiar_err_name(rc));
    MT_CHECK(strstr(mpiar_last_error(), "MPI_THREAD_") != NULL, "detail '%s' names no level",
             mpiar_last_error());
    free(v);
    return;
  }
  MT_RC(MPIAR_SUCCESS, rc);
  /* Compute (sleep) without calling mpiar: the progress thread moves the operation. */
  double t0 = MPI_Wtime();
  int done = 0;
  mpiar__inspect_request_t info;
  while (MPI_Wtime() - t0 < 30.0) {
    usleep(100000);
    if (mpiar__inspect_request(r, &info) != MPIAR_SUCCESS || !info.active) {
      break;
    }
  }
  MT_CHECK(mpiar__inspect_request(r, &info) == MPIAR_SUCCESS && !info.active,
           "8 MiB not finished after %.1f s of computing", MPI_Wtime() - t0);
  MT_RC(MPIAR_SUCCESS, mpiar_test(&r, &done));
  MT_CHECK(done == 1, "not done");
  check_sum(v, N, 3, "progress thread");
  free(v);
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "";
  int provided = 0;
  if (strcmp(which, "progress_single") == 0) {
    MPI_Init(&argc, &argv);
    which = "progress";
  } else {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (strcmp(which, "api") == 0) {
    case_api();
  } else if (strcmp(which, "outstanding") == 0) {
    case_outstanding();
  } else if (strcmp(which, "persistent") == 0) {
    case_persistent();
  } else if (strcmp(which, "failure") == 0) {
    case_failure();
  } else if (strcmp(which, "threads") == 0) {
    case_threads();
  } else if (strcmp(which, "progress") == 0) {
    case_progress();
  } else if (strcmp(which, "stale") == 0) {
    case_stale();
  } else if (strcmp(which, "after_finalize") == 0) {
    return case_after_finalize();
  } else {
    fprintf(stderr, "test_requests: unknown case '%s'\n", which);
    MPI_Finalize();
    return 2;
  }
  return mt_finish(which);
}
