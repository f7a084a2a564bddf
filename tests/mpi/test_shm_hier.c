/*
 * The hierarchical zero-copy allreduce (docs/shm.md): a communicator over several nodes holding
 * the same number of its ranks each, buffers in mpiar_alloc memory. It runs on the emulated
 * cluster (tests/cluster: 2 nodes x 2 ranks); on one node it exits 77 (SKIPPED) and says why.
 * --quick (the sanitizer pass): float32 and int32 at counts 1, 33 and 4099 only.
 *
 *   - exact results (small integers) of sum, max and avg on float32, float64 and int32, at counts
 *     1, 7, 33, 1000, 4099 and 1 Mi + 3, in place and not; the send buffer and the byte after the
 *     output untouched; the path taken (the context's most recent plan is the inter-node step's);
 *   - random floats: the same bits on every rank;
 *   - reproducible mode and nonblocking calls take the MPI path: the bits equal the MPI path's on
 *     ordinary buffers;
 *   - mismatched paths (one rank, or a whole node, on ordinary buffers; with and without the
 *     argument check) end in an error on every rank, with a deadline only as a safety net;
 *   - a rank late past the others' deadline: an error on every rank.
 */
#include <stdint.h>
#include <string.h>

#include "core/inspect.h"
#include "mpi_test.h"

#define COLUMN_PLAN "zero-copy column ring"
#define MAXCOUNT (((size_t)1 << 20) + 3)

static int rank, size;
static int quick; /* --quick (sanitizer builds): float32 and int32, counts 1, 33 and 4099 */

static size_t es_of(mpiar_dtype_t t) {
  return mpiar_dtype_size(t);
}

/* Element i of rank r's input: (r + 1) (1 + i mod 7), exact in every datatype here. */
static void fill_small(void *buf, size_t count, mpiar_dtype_t t, int r) {
  for (size_t i = 0; i < count; i++) {
    int v = (r + 1) * (int)(1 + i % 7);
    if (t == MPIAR_FLOAT32) {
      ((float *)buf)[i] = (float)v;
    } else if (t == MPIAR_FLOAT64) {
      ((double *)buf)[i] = (double)v;
    } else {
      ((int32_t *)buf)[i] = v;
    }
  }
}

static double expected(size_t i, mpiar_op_t op) {
  double k = (double)(1 + i % 7), tri = (double)size * (size + 1) / 2.0;
  return op == MPIAR_MAX ? k * size : op == MPIAR_AVG ? k * tri / size : k * tri;
}

static double get(const void *buf, size_t i, mpiar_dtype_t t) {
  return t == MPIAR_FLOAT32   ? ((const float *)buf)[i]
         : t == MPIAR_FLOAT64 ? ((const double *)buf)[i]
                              : ((const int32_t *)buf)[i];
}

/* Was the last call on @p comm the hierarchical path? (its inter-node step's plan was the
 * context's most recently used one) */
static int took_column(MPI_Comm comm) {
  mpiar__inspect_plan_t pl;
  return mpiar__inspect_plan(comm, MPIAR__INSPECT_RECENT, &pl) == MPIAR_SUCCESS && pl.id != NULL &&
         strcmp(pl.name, COLUMN_PLAN) == 0;
}

/* A call that names no plan use afterwards: make some other plan the most recent one. */
static void touch_other_plan(MPI_Comm comm) {
  int one = 1, r = 0;
  MT_RC(MPIAR_SUCCESS, mpiar_allreduce(&one, &r, 1, MPIAR_INT32, MPIAR_SUM, comm));
}

static void exact_cases(char *in, char *out) {
  static const mpiar_dtype_t types[] = {MPIAR_FLOAT32, MPIAR_FLOAT64, MPIAR_INT32};
  static const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_MAX, MPIAR_AVG};
  static const size_t counts[] = {1, 7, 33, 1000, 4099, MAXCOUNT};
  for (size_t ti = 0; ti < 3; ti++) {
    for (size_t oi = 0; oi < 3; oi++) {
      mpiar_dtype_t t = types[ti];
      mpiar_op_t op = ops[oi];
      if (op == MPIAR_AVG && t == MPIAR_INT32) {
        continue;
      }
      if (quick && t == MPIAR_FLOAT64) {
        continue;
      }
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci], es = es_of(t);
        if (quick && n != 1 && n != 33 && n != 4099) {
          continue;
        }
        /* The largest count once per datatype (sum), in place and not. */
        if (n == MAXCOUNT && op != MPIAR_SUM) {
          continue;
        }
        for (int inplace = 0; inplace < 2; inplace++) {
          touch_other_plan(MPI_COMM_WORLD);
          char *buf = inplace ? out : in;
          fill_small(buf, n, t, rank);
          memset(out + (inplace ? n * es : 0), 0x5a, inplace ? 1 : n * es + 1);
          int rc = mpiar_allreduce(inplace ? MPIAR_IN_PLACE : in, out, n, t, op, MPI_COMM_WORLD);
          MT_CHECK(rc == MPIAR_SUCCESS, "%s %s n=%zu inplace=%d: %s (%s)", mpiar_dtype_name(t),
                   mpiar_op_name(op), n, inplace, mpiar_err_name(rc), mpiar_last_error());
          MT_CHECK(took_column(MPI_COMM_WORLD), "%s %s n=%zu inplace=%d: not the hierarchical path",
                   mpiar_dtype_name(t), mpiar_op_name(op), n, inplace);
          size_t bad = 0, first = 0;
          for (size_t i = 0; i < n; i++) {
            if (get(out, i, t) != expected(i, op) && bad++ == 0) {
              first = i;
            }
          }
          MT_CHECK(bad == 0, "%s %s n=%zu inplace=%d: %zu wrong elements, first [%zu] = %g, not %g",
                   mpiar_dtype_name(t), mpiar_op_name(op), n, inplace, bad, first,
                   get(out, first, t), expected(first, op));
          MT_CHECK((unsigned char)out[n * es] == 0x5a, "the byte after the output changed");
          if (!inplace) {
            size_t changed = 0;
            char *want = malloc(n * es);
            fill_small(want, n, t, rank);
            changed = memcmp(want, in, n * es) != 0;
            free(want);
            MT_CHECK(!changed, "%s n=%zu: the send buffer changed", mpiar_dtype_name(t), n);
          }
        }
      }
    }
  }
}

static uint64_t hash_bytes(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  }
  return h;
}

static void fill_random(float *buf, size_t n, int r, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t x = test_mix64(seed * 1000003u + (uint64_t)r * 7919u + i);
    buf[i] = (float)((double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
  }
}

/* Random floats: the same bits on every rank; reproducible mode and the nonblocking form take
 * the MPI path and give its bits. */
static void random_cases(char *in, char *out) {
  static const size_t counts[] = {4099, 300007};
  float *plain_in = malloc(300007 * sizeof(float)), *plain_out = malloc(300007 * sizeof(float));
  for (size_t ci = 0; ci < (quick ? 1u : 2u); ci++) {
    size_t n = counts[ci];
    fill_random((float *)in, n, rank, 11 + ci);
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce(in, out, n, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD));
    MT_CHECK(took_column(MPI_COMM_WORLD), "random n=%zu: not the hierarchical path", n);
    uint64_t h = hash_bytes(out, n * sizeof(float)), *all = malloc((size_t)size * sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int q = 0; q < size; q++) {
      MT_CHECK(all[q] == h, "random n=%zu: rank %d's result differs from this rank's", n, q);
    }
    free(all);

    /* Reproducible mode: the MPI path (every rank), bit for bit the MPI path's. */
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.reproducible = 1;
    MT_RC(MPIAR_SUCCESS,
          mpiar_allreduce_ex(in, out, n, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, &opts));
    MT_CHECK(!took_column(MPI_COMM_WORLD), "reproducible mode took the hierarchical path");
    memcpy(plain_in, in, n * sizeof(float));
    MT_RC(MPIAR_SUCCESS, mpiar_allreduce_ex(plain_in, plain_out, n, MPIAR_FLOAT32, MPIAR_SUM,
                                            MPI_COMM_WORLD, &opts));
    MT_CHECK(memcmp(out, plain_out, n * sizeof(float)) == 0,
             "reproducible n=%zu: mpiar_alloc buffers differ from ordinary ones", n);

    /* Nonblocking: the MPI path, the bits of the same call on ordinary buffers. */
    mpiar_request_t req;
    MT_RC(MPIAR_SUCCESS,
          mpiar_iallreduce(in, out, n, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, NULL, &req));
    MT_RC(MPIAR_SUCCESS, mpiar_wait(&req));
    MT_CHECK(!took_column(MPI_COMM_WORLD), "a nonblocking call took the hierarchical path");
    MT_RC(MPIAR_SUCCESS, mpiar_iallreduce(plain_in, plain_out, n, MPIAR_FLOAT32, MPIAR_SUM,
                                          MPI_COMM_WORLD, NULL, &req));
    MT_RC(MPIAR_SUCCESS, mpiar_wait(&req));
    MT_CHECK(memcmp(out, plain_out, n * sizeof(float)) == 0,
             "nonblocking n=%zu: mpiar_alloc buffers differ from ordinary ones", n);
  }
  free(plain_in);
  free(plain_out);
}

/*
 * Mismatched paths on a fresh communicator: the ranks for which @p ordinary says so pass
 * ordinary buffers, the others mpiar_alloc ones; @p check: the options' argument check on every
 * rank. Every rank fails (a mismatch or a broken communicator), then the communicator is broken.
 */
static void mismatch_case(const char *what, int ordinary, int check) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const size_t n = 5000;
  float *shared = NULL, *plain = malloc(n * sizeof(float));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(comm, n * sizeof(float), (void **)&shared));
  float *buf = ordinary ? plain : shared;
  fill_small(buf, n, MPIAR_FLOAT32, rank);
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = 20000; /* a safety net: the error comes without it */
  opts.check = check;
  double t0 = MPI_Wtime();
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, buf, n, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
  double took = MPI_Wtime() - t0;
  MT_CHECK(rc == MPIAR_ERR_MISMATCH || rc == MPIAR_ERR_COMM_BROKEN,
           "%s: %s (%s), expected a mismatch or a broken communicator", what, mpiar_err_name(rc),
           mpiar_last_error());
  MT_CHECK(took < 15, "%s: the error took %.1f s (the deadline's safety net?)", what, took);
  if (rank == 0 || rank == size - 1) {
    printf("%s: rank %d: %s: %s\n", what, rank, mpiar_err_name(rc), mpiar_last_error());
  }
  if (!check) {
    /* A failure of this path breaks the communicator (every rank learns it). */
    MT_RC(MPIAR_ERR_COMM_BROKEN,
          mpiar_allreduce_ex(MPIAR_IN_PLACE, buf, n, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts));
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(shared));
  /* The failed call's messages may still be in flight until the communicator's release drains
   * them: its ordinary buffer lives until then. */
  MPI_Comm_free(&comm);
  free(plain);
}

/* The last rank arrives 0.8 s late against a 300 ms deadline: the others fail (the deadline, or
 * the notice of a rank that reached it), the late rank finds the failure when it arrives. */
static void late_case(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const size_t n = 5000;
  float *buf = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(comm, n * sizeof(float), (void **)&buf));
  fill_small(buf, n, MPIAR_FLOAT32, rank);
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.timeout_ms = 300;
  if (rank == size - 1) {
    double until = MPI_Wtime() + 0.8;
    while (MPI_Wtime() < until) {
    }
  }
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, buf, n, MPIAR_FLOAT32, MPIAR_SUM, comm, &opts);
  MT_CHECK(rank == size - 1 ? rc == MPIAR_ERR_COMM_BROKEN
                            : rc == MPIAR_ERR_TIMEOUT || rc == MPIAR_ERR_COMM_BROKEN,
           "late rank: %s (%s)", mpiar_err_name(rc), mpiar_last_error());
  if (rank == 0 || rank == size - 1) {
    printf("a late rank: rank %d: %s: %s\n", rank, mpiar_err_name(rc), mpiar_last_error());
  }
  MT_RC(MPIAR_SUCCESS, mpiar_free(buf));
  MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mpiar__inspect_context_t ci;
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_context(MPI_COMM_WORLD, &ci));
  if (ci.nnodes < 2 || size % ci.nnodes != 0 || ci.local_ranks != size / ci.nnodes) {
    if (rank == 0) {
      printf("SKIPPED: test_shm_hier needs several nodes of equal size (%d nodes, %d ranks)\n",
             ci.nnodes, size);
    }
    MPI_Finalize();
    return 77;
  }
  int *node_of = malloc((size_t)size * sizeof *node_of);
  MT_RC(MPIAR_SUCCESS, mpiar__inspect_node_of(MPI_COMM_WORLD, node_of, size));
  char *in = NULL, *out = NULL;
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, MAXCOUNT * 8, (void **)&in));
  MT_RC(MPIAR_SUCCESS, mpiar_alloc(MPI_COMM_WORLD, MAXCOUNT * 8 + 64, (void **)&out));
  exact_cases(in, out);
  random_cases(in, out);
  MT_RC(MPIAR_SUCCESS, mpiar_free(in));
  MT_RC(MPIAR_SUCCESS, mpiar_free(out));

  /* One rank on the MPI path (its node's ranks see it in the control blocks). */
  mismatch_case("the last rank on ordinary buffers", rank == size - 1, 0);
  /* A whole node on the MPI path: only the argument check tells the nodes apart. */
  int last_node = node_of[size - 1];
  mismatch_case("the last node on ordinary buffers", node_of[rank] == last_node, 0);
  mismatch_case("the last node on ordinary buffers, checked", node_of[rank] == last_node, 1);
  late_case();
  free(node_of);
  return mt_finish("test_shm_hier");
}
