/*
 * Schedule files under MPI (label schedule, mpi): built-in schedules exported as files and run
 * from them give the builders' bits, in and out of place; a file that differs between ranks, is
 * missing on one rank, fails verification or does not fit the call is an error on every rank
 * naming why, after which the communicator still works; MPIAR_ALGORITHM=file:PATH runs a file.
 *
 *   test_schedfile_mpi          the runs and the errors
 *   test_schedfile_mpi env      MPIAR_ALGORITHM=file:PATH (set here, before the first call)
 *   test_schedfile_mpi tuning   a tuning file's table naming file:PATH (MPIAR_TUNING_FILE)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algorithms.h"
#include "base/settings.h"
#include "mpiar.h"
#include "schedule/schedfile.h"
#include "sim/sim.h"
#include "tuning/tuning.h"

static int failures, rank, nranks;
static char dir[256];

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      failures++;                                                       \
      fprintf(stderr, "rank %d: %s:%d: %s: ", rank, __FILE__, __LINE__, \
              #cond);                                                   \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
    }                                                                   \
  } while (0)

/* Rank 0 writes @p alg's schedules for count elements as DIR/NAME; every rank gets the path. */
static void export_file(const char *alg_name, size_t count, int in_place, const char *extra,
                        const char *file, char *path, size_t len) {
  snprintf(path, len, "%s/%s", dir, file);
  if (rank == 0) {
    const mpiar__algorithm_t *alg = mpiar__algorithm_find_any(alg_name);
    mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
    cfg.algorithm = alg;
    cfg.nranks = nranks;
    cfg.count = count;
    cfg.in_place = in_place;
    mpiar__schedule_t *s = calloc((size_t)nranks, sizeof *s);
    for (int r = 0; r < nranks; r++) {
      CHECK(mpiar__sim_build(&cfg, r, &s[r]) == MPIAR_SUCCESS, "build %s", alg_name);
    }
    FILE *f = fopen(path, "w");
    char err[256];
    CHECK(f != NULL && mpiar__schedfile_write(f, NULL, s, nranks, 0, err, sizeof err) == 0,
          "write %s", path);
    if (extra != NULL) {
      fputs(extra, f);
    }
    fclose(f);
    for (int r = 0; r < nranks; r++) {
      mpiar__schedule_destroy(&s[r]);
    }
    free(s);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void fill(float *x, size_t n, unsigned seed) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1) + (uint64_t)rank * 1299709u;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 7);
  }
}

/* The builder's and its file's bits for @p count elements. */
static void same_bits(const char *alg, size_t count, int in_place) {
  char path[400], name[420];
  char file[96];
  snprintf(file, sizeof file, "%s_%d.sched", alg, in_place);
  for (char *c = file; *c != '\0'; c++) {
    *c = *c == '/' ? '_' : *c;
  }
  export_file(alg, count, in_place, NULL, file, path, sizeof path);
  snprintf(name, sizeof name, "file:%s", path);
  float *in = malloc(count * sizeof *in), *a = malloc(count * sizeof *a),
        *b = malloc(count * sizeof *b);
  fill(in, count, (unsigned)count);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  int rc1, rc2;
  o.algorithm = alg;
  if (in_place) {
    memcpy(a, in, count * sizeof *a);
    rc1 = mpiar_allreduce_ex(MPIAR_IN_PLACE, a, count, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD,
                             &o);
    o.algorithm = name;
    memcpy(b, in, count * sizeof *b);
    rc2 = mpiar_allreduce_ex(MPIAR_IN_PLACE, b, count, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD,
                             &o);
  } else {
    rc1 = mpiar_allreduce_ex(in, a, count, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, &o);
    o.algorithm = name;
    rc2 = mpiar_allreduce_ex(in, b, count, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, &o);
  }
  CHECK(rc1 == 0 && rc2 == 0 && memcmp(a, b, count * sizeof *a) == 0,
        "%s count %zu in_place %d: rc %d %d (%s), bits %s", alg, count, in_place, rc1, rc2,
        mpiar_last_error(), memcmp(a, b, count * sizeof *a) ? "differ" : "equal");
  /* Twice the count: the same steps scaled; int32 sums exactly. */
  int32_t *x = malloc(2 * count * sizeof *x), *y = malloc(2 * count * sizeof *y);
  for (size_t i = 0; i < 2 * count; i++) {
    x[i] = (int32_t)(i * 3 + (size_t)rank * 7);
  }
  if (in_place) {
    memcpy(y, x, 2 * count * sizeof *y);
  }
  rc2 = mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : x, y, 2 * count, MPIAR_INT32, MPIAR_SUM,
                           MPI_COMM_WORLD, &o);
  int ok = rc2 == 0;
  for (size_t i = 0; ok && i < 2 * count; i++) {
    ok = y[i] == (int32_t)(i * 3 * (size_t)nranks + 7 * (size_t)nranks * (size_t)(nranks - 1) / 2);
  }
  CHECK(ok, "%s at %zu int32: rc %d (%s)", name, 2 * count, rc2, mpiar_last_error());
  free(x), free(y), free(in), free(a), free(b);
}

/* A call with file @p name (per rank) fails on every rank with @p code and @p words. */
static void expect_error(const char *name, size_t count, int in_place, int code, const char *words) {
  float *x = calloc(count + 1, sizeof *x), *y = calloc(count + 1, sizeof *y);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = name;
  int rc = mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : x, y, count, MPIAR_FLOAT32, MPIAR_SUM,
                              MPI_COMM_WORLD, &o);
  CHECK(rc == code && strstr(mpiar_last_error(), words) != NULL,
        "%s: expected %d '%s', got %d '%s'", name, code, words, rc, mpiar_last_error());
  free(x), free(y);
  /* The communicator still works. */
  float v = 1.0f, s = 0.0f;
  rc = mpiar_allreduce(&v, &s, 1, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD);
  CHECK(rc == 0 && s == (float)nranks, "after the error: rc %d (%s)", rc, mpiar_last_error());
}

static void errors(void) {
  char a[400], b[400], name[420];
  const size_t count = (size_t)nranks * 64;
  export_file("ring", count, 0, NULL, "a.sched", a, sizeof a);
  export_file("ring", count, 0, "# another file\n", "b.sched", b, sizeof b);
  if (nranks > 1) {
    /* A file that differs between ranks. */
    snprintf(name, sizeof name, "file:%s", rank == 0 ? a : b);
    expect_error(name, count, 0, MPIAR_ERR_MISMATCH, "the file differs between ranks");
    /* Missing on the last rank. */
    snprintf(name, sizeof name, "file:%s", rank == nranks - 1 ? "/nonexistent/x.sched" : a);
    expect_error(name, count, 0, MPIAR_ERR_INVALID_ARG,
                 rank == nranks - 1 ? "cannot open schedule file" : "cannot use the file");
  }
  snprintf(name, sizeof name, "file:%s", a);
  /* A count the chunks do not divide; an in-place call of an out-of-place file. */
  if (nranks > 1) {
    expect_error(name, count + 1, 0, MPIAR_ERR_INVALID_ARG, "is not a multiple of the file's");
  }
  expect_error(name, count, 1, MPIAR_ERR_INVALID_ARG, "out-of-place calls only");
  /* A file that fails verification: every rank keeps its own input. */
  snprintf(b, sizeof b, "%s/wrong.sched", dir);
  if (rank == 0) {
    FILE *f = fopen(b, "w");
    fprintf(f, "mpiar-schedule 1\ncollective allreduce\nranks %d\nchunks 1\nscratch 0\n"
               "inplace no\norder none\n",
            nranks);
    for (int r = 0; r < nranks; r++) {
      fprintf(f, "rank %d\ncopy o0 i0 1\n", r);
    }
    fprintf(f, "end\n");
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(name, sizeof name, "file:%s", b);
  if (nranks > 1) {
    expect_error(name, 16, 0, MPIAR_ERR_INVALID_ARG, "fails verification");
  }
  /* A file of another rank count. */
  snprintf(b, sizeof b, "%s/other_p.sched", dir);
  if (rank == 0) {
    FILE *f = fopen(b, "w");
    fprintf(f, "mpiar-schedule 1\ncollective allreduce\nranks %d\nchunks 1\nscratch 0\n"
               "inplace no\norder none\n",
            nranks + 1);
    for (int r = 0; r <= nranks; r++) {
      fprintf(f, "rank %d\n", r);
    }
    fprintf(f, "end\n");
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(name, sizeof name, "file:%s", b);
  expect_error(name, 16, 0, MPIAR_ERR_INVALID_ARG, "is written for");
}

static void env_mode(void) {
  char a[400], name[420];
  const size_t count = (size_t)nranks * 32;
  export_file("ring", count, 0, NULL, "env.sched", a, sizeof a);
  snprintf(name, sizeof name, "file:%s", a);
  setenv("MPIAR_ALGORITHM", name, 1);
  mpiar__settings_reload();
  int32_t *x = malloc(count * sizeof *x), *y = malloc((count + 1) * sizeof *y);
  for (size_t i = 0; i < count; i++) {
    x[i] = (int32_t)i + rank;
  }
  int rc = mpiar_allreduce(x, y, count, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD);
  int ok = rc == 0;
  for (size_t i = 0; ok && i < count; i++) {
    ok = y[i] == (int32_t)(i * (size_t)nranks) + nranks * (nranks - 1) / 2;
  }
  CHECK(ok, "MPIAR_ALGORITHM=%s: rc %d (%s)", name, rc, mpiar_last_error());
  /* The file is what runs: a count its chunks do not divide is refused naming it. */
  if (nranks > 1) {
    rc = mpiar_allreduce(x, y, count + 1, MPIAR_INT32, MPIAR_SUM, MPI_COMM_WORLD);
    CHECK(rc == MPIAR_ERR_INVALID_ARG && strstr(mpiar_last_error(), a) != NULL,
          "MPIAR_ALGORITHM=%s at %zu: rc %d (%s)", name, count + 1, rc, mpiar_last_error());
  }
  free(x), free(y);
}

static void tuning_mode(void) {
  if (!mpiar__tuning_supported()) {
    if (rank == 0) {
      printf("SKIPPED: this build reads no tuning file (no libjansson)\n");
    }
    return;
  }
  char a[400], t[400];
  const size_t count = (size_t)nranks * 32;
  export_file("ring", count, 0, NULL, "tuned.sched", a, sizeof a);
  snprintf(t, sizeof t, "%s/tuning.json", dir);
  if (rank == 0) {
    FILE *f = fopen(t, "w");
    fprintf(f,
            "{\"format\": \"mpiar-tuning\", \"version\": 1,\n"
            " \"topology\": {\"ranks\": %d, \"nodes\": 1, \"ranks_per_node\": %d},\n"
            " \"model\": {\"alpha\": 1e-6, \"beta\": 1e-10, \"gamma\": {\"float32\": 5e-11}},\n"
            " \"tables\": [{\"dtype\": \"float32\", \"ranges\": [\n"
            "   {\"min_bytes\": 0, \"max_bytes\": null, \"algorithm\": \"file:%s\"}]}]}\n",
            nranks, nranks, a);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  setenv("MPIAR_TUNING_FILE", t, 1);
  mpiar__settings_reload();
  MPI_Comm comm; /* a new context reads the tuning file */
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  float *x = malloc((count + 1) * sizeof *x), *y = malloc((count + 1) * sizeof *y);
  for (size_t i = 0; i <= count; i++) {
    x[i] = (float)(i % 13) + (float)rank;
  }
  int rc = mpiar_allreduce(x, y, count, MPIAR_FLOAT32, MPIAR_SUM, comm);
  int ok = rc == 0;
  for (size_t i = 0; ok && i < count; i++) {
    ok = y[i] == (float)((i % 13) * (size_t)nranks) + (float)(nranks * (nranks - 1) / 2);
  }
  CHECK(ok, "tuning table naming file:%s: rc %d (%s)", a, rc, mpiar_last_error());
  /* The table's file is what runs: a count its chunks do not divide is refused naming it. */
  if (nranks > 1) {
    rc = mpiar_allreduce(x, y, count + 1, MPIAR_FLOAT32, MPIAR_SUM, comm);
    CHECK(rc == MPIAR_ERR_INVALID_ARG && strstr(mpiar_last_error(), a) != NULL,
          "tuning table at %zu: rc %d (%s)", count + 1, rc, mpiar_last_error());
  }
  free(x), free(y);
  MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/mpiar_schedfile_mpi_XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL) {
      perror("mkdtemp");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (argc > 1 && strcmp(argv[1], "env") == 0) {
    env_mode();
  } else if (argc > 1 && strcmp(argv[1], "tuning") == 0) {
    tuning_mode();
  } else {
    static const char *const algs[] = {"ring", "rabenseifner", "recursive_doubling", "swing",
                                       "direct", "double_binary_tree", "knomial_tree/k=3"};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
      same_bits(algs[i], (size_t)nranks * 96, (int)i % 2);
      same_bits(algs[i], (size_t)nranks * 40 + 8, (int)(i + 1) % 2);
    }
    errors();
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
      fprintf(stderr, "cannot remove %s\n", dir);
    }
    printf("%s: %d failures\n", total ? "FAIL" : "ok", total);
  }
  MPI_Finalize();
  return total != 0;
}
