/*
 * Erroneous programs and failures end as error codes on every rank: no abort inside a call, no
 * silent wrong result, no hang past the deadline, and the job still finalizes.
 *
 *   test_hardening CASE
 *
 * Cases (each a CTest entry, each on fresh communicators):
 *   count ALG        the last rank passes one element less (1000 vs 999)
 *   dtype            float32 on the last rank, float64 elsewhere (message lengths differ)
 *   algorithm        ring on rank 0, recursive doubling on the others
 *   check            MPIAR_CHECK (per call): float32 vs int32, sum vs max, count, algorithm and
 *                    broadcast root differences are an MPIAR_ERR_MISMATCH on every rank that names
 *                    the argument and the ranks
 *   freed_comm       a freed communicator is MPIAR_ERR_COMM, not an abort
 *   late_first_call  the last rank arrives 3 s late for the first call on a communicator; the
 *                    others' 500 ms deadline covers context creation; the late rank is told
 *   deadline_busy    a call that progresses all the time still returns at its deadline
 *   finalize         several failures mid-transfer, then MPI_Finalize completes
 *   segments         segment sizes below the minimum are refused; plans stay bounded
 *   threads          a second thread entering a call on the same communicator gets
 *                    MPIAR_ERR_CONCURRENT (MPI_THREAD_MULTIPLE)
 *
 * Without MPIAR_CHECK, a mismatch that changes a message's length is found by the rank that
 * receives that message; a rank that received every message it expected may return success, and
 * its next call on the communicator fails with MPIAR_ERR_COMM_BROKEN (the rank that found the
 * mismatch told it). expect_everywhere() checks exactly that.
 */
#include <pthread.h>
#include <unistd.h>

#include "core/inspect.h"
#include "mpi_test.h"

static int rank, size;

/* A safety net: no case may hang the suite, whatever goes wrong. */
static mpiar_options_t safe(void) {
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 20000;
  return o;
}

/*
 * @p rc is this rank's result of an erroneous call on @p comm: an error here, or success and a
 * broken communicator on the next call. Some rank must have found a mismatch (or, for @p kind
 * "timeout", a deadline).
 */
static void expect_everywhere(int rc, MPI_Comm comm, const char *what, int found_code) {
  char detail[512];
  snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  if (rc == MPIAR_SUCCESS) {
    float x = 1.0f;
    mpiar_options_t o = safe();
    int again = mpiar_allreduce_ex(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, comm, &o);
    MT_CHECK(again == MPIAR_ERR_COMM_BROKEN,
             "%s: succeeded here, and the next call returned %s (%s), not MPIAR_ERR_COMM_BROKEN",
             what, mpiar_err_name(again), mpiar_last_error());
  } else {
    MT_CHECK(rc == found_code || rc == MPIAR_ERR_COMM_BROKEN, "%s: %s (%s)", what,
             mpiar_err_name(rc), detail);
  }
  int found = rc == found_code, any = 0;
  MPI_Allreduce(&found, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MT_CHECK(any, "%s: no rank reported %s", what, mpiar_err_name(found_code));
  if (rank == 0 || rc == found_code) {
    printf("rank %d %s: %s: %s\n", rank, what, mpiar_err_name(rc), detail);
  }
}

static MPI_Comm fresh(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  /* Create the context first, so that the case is about the data, not the creation. */
  float x = 1.0f;
  mpiar_options_t o = safe();
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, c, &o));
  return c;
}

static void case_count(const char *alg) {
  enum { N = 1000 };
  static float v[N];
  for (int i = 0; i < N; i++) {
    v[i] = 1.0f;
  }
  MPI_Comm c = fresh();
  mpiar_options_t o = safe();
  o.algorithm = alg;
  size_t n = rank == size - 1 ? N - 1 : N;
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, n, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
  char what[64];
  snprintf(what, sizeof what, "count 1000 vs 999 (%s)", alg);
  expect_everywhere(rc, c, what, MPIAR_ERR_MISMATCH);
  MPI_Comm_free(&c);
}

static void case_dtype(void) {
  enum { N = 1000 };
  static double v[N];
  MPI_Comm c = fresh();
  mpiar_options_t o = safe();
  mpiar_dtype_t t = rank == size - 1 ? MPIAR_FLOAT32 : MPIAR_FLOAT64;
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, t, MPIAR_SUM, c, &o);
  expect_everywhere(rc, c, "float32 vs float64", MPIAR_ERR_MISMATCH);
  MPI_Comm_free(&c);
}

static void case_algorithm(void) {
  enum { N = 4096 };
  static float v[N];
  MPI_Comm c = fresh();
  mpiar_options_t o = safe();
  o.algorithm = rank == 0 ? "ring" : "recursive_doubling";
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
  expect_everywhere(rc, c, "ring vs recursive_doubling", MPIAR_ERR_MISMATCH);
  MPI_Comm_free(&c);
}

/* With the check every rank returns MISMATCH and the detail names the argument. */
static void expect_check(int rc, const char *what, const char *field) {
  MT_CHECK(rc == MPIAR_ERR_MISMATCH, "%s: %s (%s)", what, mpiar_err_name(rc), mpiar_last_error());
  MT_CHECK(strstr(mpiar_last_error(), field) != NULL && strstr(mpiar_last_error(), "rank") != NULL,
           "%s: detail '%s' does not name the %s and the ranks", what, mpiar_last_error(), field);
  if (rank == 0) {
    printf("%s: %s\n", what, mpiar_last_error());
  }
}

static void case_check(void) {
  enum { N = 1000 };
  static float v[N];
  struct {
    const char *what, *field;
  } cases[] = {{"float32 vs int32", "datatype"}, {"sum vs max", "operation"},
               {"count", "count"},               {"algorithm", "algorithm"},
               {"bcast root", "root"},           {"bcast count", "count"},
               {"bcast algorithm", "algorithm"}, {"k of one algorithm", "algorithm"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    MPI_Comm c = fresh();
    mpiar_options_t o = safe();
    o.check = 1;
    int last = rank == size - 1;
    int rc;
    switch (k) {
    case 0:
      rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, last ? MPIAR_INT32 : MPIAR_FLOAT32, MPIAR_SUM,
                              c, &o);
      break;
    case 1:
      rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, last ? MPIAR_MAX : MPIAR_SUM, c,
                              &o);
      break;
    case 2:
      rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, last ? N - 1 : N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
      break;
    case 3:
      o.algorithm = last ? "ring" : "rabenseifner";
      rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
      break;
    case 4:
      rc = mpiar_bcast_ex(v, N, MPIAR_FLOAT32, last ? 1 % size : 0, c, &o);
      break;
    case 5:
      rc = mpiar_bcast_ex(v, last ? N - 1 : N, MPIAR_FLOAT32, 0, c, &o);
      break;
    case 6:
      o.algorithm = last ? "binomial" : "scatter_allgather";
      rc = mpiar_bcast_ex(v, N, MPIAR_FLOAT32, 0, c, &o);
      break;
    default:
      /* The parameter is part of the algorithm: k = 3 against the default k = 4. */
      o.algorithm = last ? "recursive_multiplying/k=3" : "recursive_multiplying";
      rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
      break;
    }
    expect_check(rc, cases[k].what, cases[k].field);
    if (k == 6) {
      /* Broadcast algorithms are named from the broadcast registry. */
      MT_CHECK(strstr(mpiar_last_error(), "binomial") != NULL &&
                   strstr(mpiar_last_error(), "scatter_allgather") != NULL,
               "detail '%s' does not name the two broadcast algorithms", mpiar_last_error());
    }
    if (k == 7) {
      MT_CHECK(strstr(mpiar_last_error(), "recursive_multiplying/k=3") != NULL,
               "detail '%s' does not name recursive_multiplying/k=3", mpiar_last_error());
    }
    /* The check found it before any data moved: the communicator is still good. */
    o.algorithm = NULL;
    for (int i = 0; i < N; i++) {
      v[i] = 1.0f;
    }
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o));
    MT_CHECK(v[N - 1] == (float)size, "after the check: %g", v[N - 1]);
    MPI_Comm_free(&c);
  }
  /* Agreeing ranks pass the check, for every algorithm. */
  MPI_Comm c = fresh();
  for (int a = 0; a < mpiar_algorithm_count(); a++) {
    mpiar_options_t o = safe();
    o.check = 1;
    o.algorithm = mpiar_algorithm_name(a);
    for (int i = 0; i < N; i++) {
      v[i] = 2.0f;
    }
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o));
    MT_CHECK(v[0] == 2.0f * size, "%s checked: %g", o.algorithm, v[0]);
  }
  MPI_Comm_free(&c);
}

static void case_freed_comm(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm stale = c;
  MPI_Comm_free(&c);
  float x = 1.0f;
  MT_RC(MPIAR_ERR_COMM, mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, stale));
  /* A freed communicator that had a context. */
  MPI_Comm d = fresh();
  stale = d;
  MPI_Comm_free(&d);
  MT_RC(MPIAR_ERR_COMM, mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, stale));
  MT_RC(MPIAR_ERR_COMM, mpiar_comm_init(MPI_COMM_NULL, NULL));
}

static void case_late_first_call(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  float x = 1.0f;
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  if (rank == size - 1) {
    sleep(3);
    o.timeout_ms = 10000;
    double t0 = MPI_Wtime();
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
    double dt = MPI_Wtime() - t0;
    /* The others gave up; they tell it through the duplicate once it completes. */
    MT_CHECK(rc == MPIAR_ERR_COMM_BROKEN || rc == MPIAR_ERR_TIMEOUT, "late rank: %s (%s)",
             mpiar_err_name(rc), mpiar_last_error());
    printf("late rank after %.2f s: %s: %s\n", dt, mpiar_err_name(rc), mpiar_last_error());
  } else {
    o.timeout_ms = 500;
    double t0 = MPI_Wtime();
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
    double dt = MPI_Wtime() - t0;
    MT_CHECK(rc == MPIAR_ERR_TIMEOUT, "first call with a late peer: %s (%s)", mpiar_err_name(rc),
             mpiar_last_error());
    MT_CHECK(dt >= 0.45 && dt < 2.9, "returned after %.2f s, deadline 0.5 s", dt);
    /* Later calls fail at once and tell the late rank when its duplicate completes. */
    double t1 = MPI_Wtime();
    while (MPI_Wtime() - t1 < 5.0) {
      rc = mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, c);
      MT_CHECK(rc == MPIAR_ERR_COMM_BROKEN, "later call: %s", mpiar_err_name(rc));
      usleep(100000);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&c);
  /* An explicit init with a deadline works when everyone is there. */
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  o.timeout_ms = 10000;
  MT_RC(MPIAR_SUCCESS, mpiar_comm_init(d, &o));
  MT_RC(MPIAR_SUCCESS, mpiar_comm_init(d, &o));
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, d));
  MPI_Comm_free(&d);
}

/* Every message is split into one-element pieces, so the call progresses at every pass. */
static void case_deadline_busy(void) {
  enum { N = 1 << 18 };
  static float v[N];
  MPI_Comm c = fresh();
  /* One element per message: 2^18 messages per rank, far more than a quiet machine moves in
   * the 10 ms deadline (64-byte messages, 16384 of them, once finished within 20 ms). */
  size_t saved = mpiar__inspect_set_max_message_bytes(sizeof(float));
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 10;
  o.algorithm = "ring";
  double t0 = MPI_Wtime();
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
  double dt = MPI_Wtime() - t0;
  mpiar__inspect_set_max_message_bytes(saved);
  MT_CHECK(dt < 5.0, "a 10 ms deadline returned after %.2f s (%s)", dt, mpiar_err_name(rc));
  expect_everywhere(rc, c, "busy call past its deadline", MPIAR_ERR_TIMEOUT);
  MPI_Comm_free(&c);
}

/* Failures mid-transfer of 1 MiB, then MPI_Finalize (in main) must return. */
static void case_finalize(void) {
  enum { N = 1 << 18 };
  static float v[N];
  for (int round = 0; round < 3; round++) {
    MPI_Comm c = fresh();
    mpiar_options_t o = safe();
    o.algorithm = round == 1 ? "rabenseifner" : "ring";
    size_t n = rank == size - 1 ? N - 1000 * (size_t)(round + 1) : N;
    int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, n, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
    expect_everywhere(rc, c, "1 MiB with a count mismatch", MPIAR_ERR_MISMATCH);
    if (round == 2) {
      continue; /* left for MPI_Finalize to release */
    }
    MPI_Comm_free(&c);
  }
  /* A deadline mid-transfer: one rank is late by more than the deadline. */
  MPI_Comm c = fresh();
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.timeout_ms = 200;
  if (rank == 0) {
    usleep(600000);
  }
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o);
  MT_CHECK(rc != MPIAR_SUCCESS || rank == 0, "rank %d: %s", rank, mpiar_err_name(rc));
}

static void case_segments(void) {
  enum { N = 1 << 22 };
  float *v = calloc(N, sizeof *v);
  MPI_Comm c = fresh();
  mpiar_options_t o = safe();
  o.algorithm = "ring";
  o.segment_bytes = 1;
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM,
                                                  c, &o));
  o.segment_bytes = 4095;
  MT_RC(MPIAR_ERR_INVALID_ARG, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM,
                                                  c, &o));
  /* The minimum is accepted; a ring block then has at most 1024 segments. */
  o.segment_bytes = 4096;
  for (int i = 0; i < N; i++) {
    v[i] = 1.0f;
  }
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, N, MPIAR_FLOAT32, MPIAR_SUM, c, &o));
  MT_CHECK(v[N - 1] == (float)size, "sum %g", v[N - 1]);
  mpiar__inspect_plan_t plan;
  int rc = mpiar__inspect_plan(c, MPIAR__INSPECT_RECENT, &plan);
  MT_RC(MPIAR_SUCCESS, rc);
  if (rc == MPIAR_SUCCESS) {
    size_t block = (N + (size_t)size - 1) / (size_t)size;
    MT_CHECK(plan.id != NULL && plan.segment_elems * 1024 >= block,
             "segment of %zu elements for blocks of %zu", plan.segment_elems, block);
    MT_CHECK(plan.id != NULL && plan.nsteps < (size_t)8 * 1024 * (size_t)size, "%zu steps",
             plan.nsteps);
  }
  MPI_Comm_free(&c);
  free(v);
}

static MPI_Comm thread_comm;
static int thread_rc;

static void *second_caller(void *arg) {
  (void)arg;
  usleep(300000); /* the main thread is inside its call by now (rank 0 waits for the last) */
  float x = 1.0f;
  thread_rc = mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, thread_comm);
  return NULL;
}

static void case_threads(void) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) {
    MT_CHECK(0, "MPI_THREAD_MULTIPLE is not provided");
    return;
  }
  thread_comm = fresh();
  float x = 1.0f;
  if (rank == 0) {
    pthread_t t;
    pthread_create(&t, NULL, second_caller, NULL);
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, thread_comm));
    pthread_join(t, NULL);
    MT_CHECK(thread_rc == MPIAR_ERR_CONCURRENT, "second thread: %s (%s)",
             mpiar_err_name(thread_rc), mpiar_last_error());
  } else {
    if (rank == size - 1) {
      usleep(900000);
    }
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, thread_comm));
  }
  MT_CHECK(x == (float)size, "sum %g", x);
  /* The refused call changed nothing: the communicator still works. */
  x = 1.0f;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(MPIAR_IN_PLACE, &x, 1, MPIAR_FLOAT32, MPIAR_SUM, thread_comm));
  MT_CHECK(x == (float)size, "sum %g", x);
  MPI_Comm_free(&thread_comm);
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *which = argc > 1 ? argv[1] : "";
  if (size < 2 && strcmp(which, "freed_comm") != 0 && strcmp(which, "segments") != 0) {
    fprintf(stderr, "test_hardening %s needs 2 or more ranks\n", which);
    MPI_Finalize();
    return 2;
  }
  if (strcmp(which, "count") == 0) {
    case_count(argc > 2 ? argv[2] : "auto");
  } else if (strcmp(which, "dtype") == 0) {
    case_dtype();
  } else if (strcmp(which, "algorithm") == 0) {
    case_algorithm();
  } else if (strcmp(which, "check") == 0) {
    case_check();
  } else if (strcmp(which, "freed_comm") == 0) {
#if defined(OPEN_MPI)
    /* Open MPI's handles are pointers: MPI's own calls on a freed one read freed memory, so
     * no library can tell it from a live one (docs/api.md). */
    if (rank == 0) {
      printf("SKIPPED: Open MPI's communicator handles are pointers, which cannot be checked "
             "once freed\n");
    }
    MPI_Finalize();
    return 77;
#endif
    case_freed_comm();
  } else if (strcmp(which, "late_first_call") == 0) {
    case_late_first_call();
  } else if (strcmp(which, "deadline_busy") == 0) {
    case_deadline_busy();
  } else if (strcmp(which, "finalize") == 0) {
    case_finalize();
  } else if (strcmp(which, "segments") == 0) {
    case_segments();
  } else if (strcmp(which, "threads") == 0) {
    case_threads();
  } else {
    fprintf(stderr, "test_hardening: unknown case '%s'\n", which);
    MPI_Finalize();
    return 2;
  }
  return mt_finish(which);
}
