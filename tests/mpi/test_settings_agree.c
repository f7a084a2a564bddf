/*
 * Settings that differ between ranks: each case sets a variable on some ranks only (before the
 * first mpiar call, which reads the environment), then every rank must return an error that names
 * the variable, and never wait forever (the test has no deadline; CTest's timeout is the hang
 * detector).
 *   test_settings_agree CASE
 * Cases: reproducible, check_env, algorithm, segment_malformed, kernel_malformed, tuning_truncated,
 * comm_init, kv_create, check_option, check_option_later, same (every rank alike: must succeed).
 */
#include <stdint.h>
#include <unistd.h>

#include "mpi_test.h"
#include "mpiar_kv.h"

static int size;

/* The first allreduce on a fresh duplicate of MPI_COMM_WORLD fails with @p expect on this rank
 * and its detail names @p what; a second call on the same communicator fails too. */
static void expect_failure(size_t count, int expect, const char *what, const char *rank_named) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  float *v = malloc(count * sizeof *v);
  for (size_t i = 0; i < count; i++) {
    v[i] = (float)(mt_rank + 1);
  }
  int rc = mpiar_allreduce(MPIAR_IN_PLACE, v, count, MPIAR_FLOAT32, MPIAR_SUM, comm);
  MT_CHECK(rc == expect, "got %s (%s), expected %s", mpiar_err_name(rc), mpiar_last_error(),
           mpiar_err_name(expect));
  MT_CHECK(strstr(mpiar_last_error(), what) != NULL, "detail '%s' does not name %s",
           mpiar_last_error(), what);
  if (rank_named != NULL) {
    MT_CHECK(strstr(mpiar_last_error(), rank_named) != NULL, "detail '%s' does not name %s",
             mpiar_last_error(), rank_named);
  }
  /* Later calls on the communicator fail as well, at once. */
  rc = mpiar_allreduce(MPIAR_IN_PLACE, v, count, MPIAR_FLOAT32, MPIAR_SUM, comm);
  MT_CHECK(rc != MPIAR_SUCCESS, "a second call succeeded");
  free(v);
  MPI_Comm_free(&comm);
}

/* Per-call check option on rank 0 only: an error naming the check on every rank. */
static void check_option(int later) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  float v[10];
  for (int i = 0; i < 10; i++) {
    v[i] = 1.0f;
  }
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.check = 0;
  if (later) {
    /* A few like calls first, so that the mismatch falls on a later operation and slot. */
    for (int k = 0; k < 3; k++) {
      MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 10, MPIAR_FLOAT32, MPIAR_SUM,
                                              comm, &opts));
    }
  }
  opts.check = mt_rank == 0 ? 1 : 0;
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, v, 10, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
  MT_CHECK(rc == MPIAR_ERR_MISMATCH || rc == MPIAR_ERR_COMM_BROKEN,
           "got %s (%s), expected a mismatch", mpiar_err_name(rc), mpiar_last_error());
  MT_CHECK(strstr(mpiar_last_error(), "MPIAR_CHECK") != NULL, "detail '%s' does not name the check",
           mpiar_last_error());
  MPI_Comm_free(&comm);
}

static void write_truncated_tuning(const char *path) {
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fputs("{\"format\": \"mpiar-tuning\", \"version\": 1, \"ranges\": [", f);
    fclose(f);
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    fprintf(stderr, "usage: test_settings_agree CASE\n");
    MPI_Finalize();
    return 2;
  }
  const char *c = argv[1];
  char path[256];
  snprintf(path, sizeof path, "settings_agree_%d.json", (int)getpid());
  if (strcmp(c, "reproducible") == 0) {
    if (mt_rank == 0) {
      setenv("MPIAR_REPRODUCIBLE", "1", 1);
    }
    expect_failure(3000, MPIAR_ERR_MISMATCH, "MPIAR_REPRODUCIBLE", NULL);
    expect_failure(100000, MPIAR_ERR_MISMATCH, "MPIAR_REPRODUCIBLE", NULL);
  } else if (strcmp(c, "check_env") == 0) {
    if (mt_rank == size - 1) {
      setenv("MPIAR_CHECK", "1", 1);
    }
    expect_failure(10, MPIAR_ERR_MISMATCH, "MPIAR_CHECK", NULL);
  } else if (strcmp(c, "algorithm") == 0) {
    if (mt_rank == 0) {
      setenv("MPIAR_ALGORITHM", "ring", 1);
    }
    expect_failure(1000, MPIAR_ERR_MISMATCH, "MPIAR_ALGORITHM", NULL);
  } else if (strcmp(c, "segment_malformed") == 0) {
    if (mt_rank == size - 1) {
      setenv("MPIAR_SEGMENT_BYTES", "12x", 1);
    }
    char named[32];
    snprintf(named, sizeof named, "rank %d", size - 1);
    expect_failure(100, MPIAR_ERR_ENV, "MPIAR_SEGMENT_BYTES",
                   mt_rank == size - 1 ? NULL : named);
  } else if (strcmp(c, "kernel_malformed") == 0) {
    if (mt_rank == size - 1) {
      setenv("MPIAR_KERNEL", "sse9", 1);
    }
    char named[32];
    snprintf(named, sizeof named, "rank %d", size - 1);
    expect_failure(100, MPIAR_ERR_ENV, "MPIAR_KERNEL", mt_rank == size - 1 ? NULL : named);
  } else if (strcmp(c, "tuning_truncated") == 0) {
    if (mt_rank == size - 1) {
      write_truncated_tuning(path);
      setenv("MPIAR_TUNING_FILE", path, 1);
    }
    char named[32];
    snprintf(named, sizeof named, "rank %d", size - 1);
    MPI_Barrier(MPI_COMM_WORLD);
    expect_failure(100, MPIAR_ERR_ENV, "MPIAR_TUNING_FILE", mt_rank == size - 1 ? NULL : named);
    if (mt_rank == size - 1) {
      unlink(path);
    }
  } else if (strcmp(c, "comm_init") == 0) {
    if (mt_rank == 0) {
      setenv("MPIAR_TOPOLOGY", "sideways", 1);
    }
    int rc = mpiar_comm_init(MPI_COMM_WORLD, NULL);
    MT_CHECK(rc == MPIAR_ERR_ENV, "mpiar_comm_init: %s (%s)", mpiar_err_name(rc),
             mpiar_last_error());
    MT_CHECK(strstr(mpiar_last_error(), "MPIAR_TOPOLOGY") != NULL, "detail '%s'",
             mpiar_last_error());
  } else if (strcmp(c, "kv_create") == 0) {
    if (mt_rank == size - 1) {
      setenv("MPIAR_SEGMENT_BYTES", "12x", 1);
    }
    mpiar_kv_t *kv = NULL;
    int rc = mpiar_kv_create(MPI_COMM_WORLD, NULL, &kv);
    MT_CHECK(rc != MPIAR_SUCCESS && kv == NULL, "mpiar_kv_create: %s (%s)", mpiar_err_name(rc),
             mpiar_last_error());
    mpiar_kv_destroy(kv);
  } else if (strcmp(c, "check_option") == 0) {
    check_option(0);
  } else if (strcmp(c, "check_option_later") == 0) {
    check_option(1);
  } else if (strcmp(c, "same") == 0) {
    /* Every rank alike: the agreement passes and the settings take effect. */
    setenv("MPIAR_REPRODUCIBLE", "1", 1);
    setenv("MPIAR_CHECK", "1", 1);
    setenv("MPIAR_ALGORITHM", "ring", 1);
    float v[3000];
    for (int i = 0; i < 3000; i++) {
      v[i] = 1.0f;
    }
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce(MPIAR_IN_PLACE, v, 3000, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD));
    MT_CHECK(v[2999] == (float)size, "sum %g", (double)v[2999]);
  } else {
    fprintf(stderr, "unknown case %s\n", c);
    MPI_Finalize();
    return 2;
  }
  return mt_finish(c);
}
