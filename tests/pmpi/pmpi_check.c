/*
 * A plain MPI program, written without mpiar, that exercises MPI_Allreduce the way the PMPI
 * interposer (libmpiar_pmpi.so) must handle it: the predefined datatypes and operations, counts
 * 0, 1, 7, 1000 (and 1 << 20 with --big), in place and not, on MPI_COMM_WORLD and on a split
 * communicator, plus the cases the interposer hands to MPI (derived types, MAXLOC, a user op,
 * an intercommunicator, bad arguments with MPI_ERRORS_RETURN). --quick and --tiny run fewer
 * types and counts, for oversubscribed runs and for the pass-through checks.
 *
 * Every rank checks its results against values it computes itself (the inputs are chosen so
 * that every exact result is known and every floating result is exact whatever the order), and
 * exits non-zero on a mismatch. Rank 0 writes one line per case to --out: the case, the MPI
 * error class and a digest of the result, so that runs with and without the interposer can be
 * compared line by line. With --expect it also writes the statistics the interposer should
 * report for the calls made (sums over all ranks), in the interposer's "mpiar_pmpi key value"
 * format.
 *
 * Modes: (default) the matrix above; --threads: two threads on two communicators under
 * MPI_THREAD_MULTIPLE; --fail=return|fatal: one MPI_INT sum that is expected to fail (the
 * driver makes it fail through the environment), with MPI_ERRORS_RETURN or the default handler.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <mpi.h>

#if defined(MPI_C_FLOAT16)
#define CHECK_F16_TYPE MPI_C_FLOAT16
#elif defined(MPIX_C_FLOAT16)
#define CHECK_F16_TYPE MPIX_C_FLOAT16
#endif

/* ---------------------------------------------------------------------------------------- */
/* Expected statistics: which path the interposer must take for each call.                   */

/* The interposer's fallback reasons, in the order of its report. */
static const char *const reasons[] = {"disabled", "mpi-state",   "nested", "count",    "comm", "op",
                                      "datatype", "datatype-op", "buffer", "intercomm"};
#define NREASONS ((int)(sizeof(reasons) / sizeof(reasons[0])))

enum {
  ST_CALLS,
  ST_ACCEL_CALLS,
  ST_ACCEL_BYTES,
  ST_ERRORS,
  ST_FALLBACK,
  ST_COUNT = ST_FALLBACK + NREASONS
};
static uint64_t expected_stats[ST_COUNT];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

static int reason_index(const char *reason) {
  for (int i = 0; i < NREASONS; i++) {
    if (strcmp(reasons[i], reason) == 0) {
      return i;
    }
  }
  fprintf(stderr, "pmpi_check: unknown reason %s\n", reason);
  abort();
}

/* Record one call that mpiar runs and that fails (the --fail modes). */
static void expect_error(void) {
  pthread_mutex_lock(&stats_lock);
  expected_stats[ST_CALLS]++;
  expected_stats[ST_ERRORS]++;
  pthread_mutex_unlock(&stats_lock);
}

/* Record one call: reason NULL means mpiar runs it and moves `bytes`. */
static void expect_call(const char *reason, uint64_t bytes) {
  pthread_mutex_lock(&stats_lock);
  expected_stats[ST_CALLS]++;
  if (reason == NULL) {
    expected_stats[ST_ACCEL_CALLS]++;
    expected_stats[ST_ACCEL_BYTES] += bytes;
  } else {
    expected_stats[ST_FALLBACK + reason_index(reason)]++;
  }
  pthread_mutex_unlock(&stats_lock);
}

static void write_expected_stats(const char *path) {
  uint64_t sum[ST_COUNT];
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Reduce(expected_stats, sum, ST_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank != 0 || path == NULL) {
    return;
  }
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  fprintf(f, "mpiar_pmpi calls %llu\n", (unsigned long long)sum[ST_CALLS]);
  fprintf(f, "mpiar_pmpi accelerated.calls %llu\n", (unsigned long long)sum[ST_ACCEL_CALLS]);
  fprintf(f, "mpiar_pmpi accelerated.bytes %llu\n", (unsigned long long)sum[ST_ACCEL_BYTES]);
  fprintf(f, "mpiar_pmpi errors %llu\n", (unsigned long long)sum[ST_ERRORS]);
  for (int r = 0; r < NREASONS; r++) {
    fprintf(f, "mpiar_pmpi fallback.%s %llu\n", reasons[r],
            (unsigned long long)sum[ST_FALLBACK + r]);
  }
  fclose(f);
}

/* ---------------------------------------------------------------------------------------- */
/* Datatypes and operations.                                                                 */

enum kind { K_SINT, K_UINT, K_FLOAT, K_F16, K_BOOL, K_BYTE };

/* Bits of tdesc_t.ext: operation kinds (enum opkind below) outside the MPI standard. */
#define X_ARITH 1
#define X_BIT 2
#define X_LOGIC 4

typedef struct tdesc {
  const char *name;
  MPI_Datatype dt;
  int kind;
  size_t size;
  int quick; /* part of the reduced matrix of --quick */
  int ext;   /* X_*: operation kinds the standard leaves to the MPI library */
} tdesc_t;

/* MPI_CHAR follows char's signedness on this platform. */
#if CHAR_MIN < 0
#define K_CHAR K_SINT
#else
#define K_CHAR K_UINT
#endif

static const tdesc_t types[] = {
    {"MPI_CHAR", MPI_CHAR, K_CHAR, 1, 1, X_ARITH | X_BIT | X_LOGIC},
    {"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, K_SINT, sizeof(signed char), 1, 0},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_UINT, sizeof(unsigned char), 0, 0},
    {"MPI_SHORT", MPI_SHORT, K_SINT, sizeof(short), 1, 0},
    {"MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, K_UINT, sizeof(unsigned short), 0, 0},
    {"MPI_INT", MPI_INT, K_SINT, sizeof(int), 1, 0},
    {"MPI_UNSIGNED", MPI_UNSIGNED, K_UINT, sizeof(unsigned), 1, 0},
    {"MPI_LONG", MPI_LONG, K_SINT, sizeof(long), 0, 0},
    {"MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, K_UINT, sizeof(unsigned long), 1, 0},
    {"MPI_LONG_LONG", MPI_LONG_LONG, K_SINT, sizeof(long long), 0, 0},
    {"MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, K_UINT, sizeof(unsigned long long), 0, 0},
    {"MPI_INT8_T", MPI_INT8_T, K_SINT, 1, 0, 0},
    {"MPI_UINT8_T", MPI_UINT8_T, K_UINT, 1, 1, 0},
    {"MPI_INT16_T", MPI_INT16_T, K_SINT, 2, 0, 0},
    {"MPI_UINT16_T", MPI_UINT16_T, K_UINT, 2, 0, 0},
    {"MPI_INT32_T", MPI_INT32_T, K_SINT, 4, 0, 0},
    {"MPI_UINT32_T", MPI_UINT32_T, K_UINT, 4, 0, 0},
    {"MPI_INT64_T", MPI_INT64_T, K_SINT, 8, 1, 0},
    {"MPI_UINT64_T", MPI_UINT64_T, K_UINT, 8, 0, 0},
    {"MPI_AINT", MPI_AINT, K_SINT, sizeof(MPI_Aint), 0, X_LOGIC},
    {"MPI_OFFSET", MPI_OFFSET, K_SINT, sizeof(MPI_Offset), 0, X_LOGIC},
    {"MPI_COUNT", MPI_COUNT, K_SINT, sizeof(MPI_Count), 1, X_LOGIC},
    {"MPI_FLOAT", MPI_FLOAT, K_FLOAT, sizeof(float), 1, 0},
    {"MPI_DOUBLE", MPI_DOUBLE, K_FLOAT, sizeof(double), 1, 0},
    {"MPI_C_BOOL", MPI_C_BOOL, K_BOOL, sizeof(_Bool), 1, 0},
    {"MPI_BYTE", MPI_BYTE, K_BYTE, 1, 1, 0},
#ifdef CHECK_F16_TYPE
    {"f16:MPI_C_FLOAT16", CHECK_F16_TYPE, K_F16, 2, 1, 0},
#endif
};
#define NTYPES ((int)(sizeof(types) / sizeof(types[0])))

enum opkind { O_ARITH, O_BIT, O_LOGIC }; /* 1 << kind is the X_ bit */
typedef struct odesc {
  const char *name;
  MPI_Op op;
  int kind;
} odesc_t;

static const odesc_t ops[] = {
    {"MPI_SUM", MPI_SUM, O_ARITH},   {"MPI_PROD", MPI_PROD, O_ARITH}, {"MPI_MIN", MPI_MIN, O_ARITH},
    {"MPI_MAX", MPI_MAX, O_ARITH},   {"MPI_BAND", MPI_BAND, O_BIT},   {"MPI_BOR", MPI_BOR, O_BIT},
    {"MPI_BXOR", MPI_BXOR, O_BIT},   {"MPI_LAND", MPI_LAND, O_LOGIC}, {"MPI_LOR", MPI_LOR, O_LOGIC},
    {"MPI_LXOR", MPI_LXOR, O_LOGIC},
};
#define NOPS ((int)(sizeof(ops) / sizeof(ops[0])))

static const tdesc_t *find_type(const char *name) {
  for (int i = 0; i < NTYPES; i++) {
    if (strcmp(types[i].name, name) == 0) {
      return &types[i];
    }
  }
  abort();
}

static const odesc_t *find_op(const char *name) {
  for (int i = 0; i < NOPS; i++) {
    if (strcmp(ops[i].name, name) == 0) {
      return &ops[i];
    }
  }
  abort();
}

/*
 * Does this MPI library reduce (datatype, op)? One element on a communicator of this process
 * alone, with errors returned, through PMPI so that the interposer neither sees nor counts it.
 */
static int mpi_accepts(MPI_Datatype dt, MPI_Op op) {
  MPI_Comm self;
  if (PMPI_Comm_split(MPI_COMM_SELF, 0, 0, &self) != MPI_SUCCESS) {
    return 0;
  }
  PMPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
  unsigned char in[16] = {0}, res[16];
  int ok = PMPI_Allreduce(in, res, 1, dt, op, self) == MPI_SUCCESS;
  PMPI_Comm_free(&self);
  return ok;
}

/*
 * Is the pair one the matrix calls: defined by the MPI standard, or (for the kinds the standard
 * leaves open, such as any operation on MPI_CHAR) accepted by this MPI library?
 */
static int pair_valid(const tdesc_t *t, const odesc_t *o) {
  if (t->ext & (1 << o->kind)) {
    return mpi_accepts(t->dt, o->op);
  }
  switch (t->kind) {
  case K_SINT:
  case K_UINT:
    return 1;
  case K_FLOAT:
  case K_F16:
    return o->kind == O_ARITH;
  case K_BOOL:
    return o->kind == O_LOGIC;
  case K_BYTE:
    return o->kind == O_BIT;
  default:
    return 0;
  }
}

/* The interposer's documented policy: NULL when mpiar runs the pair, else the reason. */
static const char *expected_path(const tdesc_t *t, const odesc_t *o) {
  if ((t->kind == K_SINT || t->kind == K_UINT) && o->kind == O_ARITH && t->size != 1 &&
      t->size != 4 && t->size != 8) {
    return "datatype";
  }
  return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Inputs and the locally computed expected results.                                         */

/* Small integers, so that every sum and product over up to 3 ranks is exact in every type. */
static int64_t input_value(const tdesc_t *t, int rank, size_t i, int salt) {
  uint64_t h = (uint64_t)i * 7u + (uint64_t)rank * 13u + (uint64_t)salt * 5u;
  switch (t->kind) {
  case K_SINT:
  case K_FLOAT:
  case K_F16:
    return (int64_t)(h % 11u) - 5;
  case K_UINT:
    return (int64_t)(h % 11u);
  case K_BOOL:
    return (h % 3u) != 0;
  default: /* K_BYTE */
    return (int64_t)(((uint64_t)i * 37u + (uint64_t)rank * 101u + (uint64_t)salt * 17u) & 0xffu);
  }
}

/* binary16 bits of a double, rounded to nearest even (exact for the small integers used here). */
static uint16_t to_f16(double x) {
  float f = (float)x;
  uint32_t b;
  memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000u;
  int32_t e = (int32_t)((b >> 23) & 0xffu) - 127 + 15;
  uint32_t m = b & 0x7fffffu;
  if (((b >> 23) & 0xffu) == 0xffu) {
    return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0u));
  }
  if (e >= 31) {
    return (uint16_t)(sign | 0x7c00u);
  }
  if (e <= 0) {
    if (e < -10) {
      return (uint16_t)sign;
    }
    m |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = 1u << (shift - 1);
    uint32_t r = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1);
    if (rest > half || (rest == half && (r & 1u))) {
      r++;
    }
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((uint32_t)e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) {
    r++;
  }
  return (uint16_t)(sign | r);
}

/* Store an integer's low `size` bytes (through unsigned types, so wrapping is well defined). */
static void store_int(unsigned char *p, size_t size, uint64_t v) {
  switch (size) {
  case 1: {
    uint8_t x = (uint8_t)v;
    memcpy(p, &x, 1);
    break;
  }
  case 2: {
    uint16_t x = (uint16_t)v;
    memcpy(p, &x, 2);
    break;
  }
  case 4: {
    uint32_t x = (uint32_t)v;
    memcpy(p, &x, 4);
    break;
  }
  default: {
    uint64_t x = v;
    memcpy(p, &x, 8);
    break;
  }
  }
}

static void store_value(const tdesc_t *t, unsigned char *p, double fv, int64_t iv) {
  switch (t->kind) {
  case K_FLOAT:
    if (t->size == 4) {
      float f = (float)fv;
      memcpy(p, &f, 4);
    } else {
      memcpy(p, &fv, 8);
    }
    break;
  case K_F16: {
    uint16_t h = to_f16(fv);
    memcpy(p, &h, 2);
    break;
  }
  case K_BOOL: {
    _Bool b = iv != 0;
    memcpy(p, &b, sizeof b);
    break;
  }
  default:
    store_int(p, t->size, (uint64_t)iv);
    break;
  }
}

static void fill_input(const tdesc_t *t, unsigned char *buf, size_t n, int rank, int salt) {
  for (size_t i = 0; i < n; i++) {
    int64_t v = input_value(t, rank, i, salt);
    store_value(t, buf + i * t->size, (double)v, v);
  }
}

/* The result of reducing the inputs of ranks 0..p-1 in exact arithmetic. */
static void fill_expected(const tdesc_t *t, const odesc_t *o, unsigned char *buf, size_t n, int p,
                          int salt) {
  for (size_t i = 0; i < n; i++) {
    int64_t acc = input_value(t, 0, i, salt);
    double facc = (double)acc;
    /* One rank's input is the result as it is: MPI applies no operation, not even the 0/1 of a
     * logical one. */
    if (o->kind == O_LOGIC && p > 1) {
      acc = acc != 0;
    }
    for (int r = 1; r < p; r++) {
      int64_t v = input_value(t, r, i, salt);
      if (t->kind == K_FLOAT || t->kind == K_F16) {
        double d = (double)v;
        if (o->op == MPI_SUM) {
          facc += d;
        } else if (o->op == MPI_PROD) {
          facc *= d;
        } else if (o->op == MPI_MIN) {
          facc = d < facc ? d : facc;
        } else {
          facc = d > facc ? d : facc;
        }
        continue;
      }
      uint64_t ua = (uint64_t)acc;
      uint64_t uv = (uint64_t)v;
      if (o->op == MPI_SUM) {
        acc = (int64_t)(ua + uv);
      } else if (o->op == MPI_PROD) {
        acc = (int64_t)(ua * uv);
      } else if (o->op == MPI_MIN) {
        acc = v < acc ? v : acc;
      } else if (o->op == MPI_MAX) {
        acc = v > acc ? v : acc;
      } else if (o->op == MPI_BAND) {
        acc = (int64_t)(ua & uv);
      } else if (o->op == MPI_BOR) {
        acc = (int64_t)(ua | uv);
      } else if (o->op == MPI_BXOR) {
        acc = (int64_t)(ua ^ uv);
      } else if (o->op == MPI_LAND) {
        acc = acc && v;
      } else if (o->op == MPI_LOR) {
        acc = acc || v;
      } else {
        acc = (acc != 0) != (v != 0);
      }
    }
    store_value(t, buf + i * t->size, facc, acc);
  }
}

static uint64_t digest(const void *buf, size_t bytes) {
  const unsigned char *p = buf;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) {
    h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

/* ---------------------------------------------------------------------------------------- */
/* Running cases.                                                                            */

static FILE *out; /* rank 0 of MPI_COMM_WORLD only */
static int failures;
static int world_rank;
static int world_size;

static int error_class(int rc) {
  int cls = rc;
  if (rc != MPI_SUCCESS) {
    MPI_Error_class(rc, &cls);
  }
  return cls;
}

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "pmpi_check: rank %d: FAIL %s: %s\n", world_rank, what, detail);
  failures++;
}

/* One line of the comparison file, written by the writing rank of the case. */
static void report(int writer, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int writer, const char *fmt, ...) {
  if (!writer || out == NULL) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
}

/* One matrix case: allreduce on `comm`, compare with the local expectation. */
static void run_case(MPI_Comm comm, const char *comm_name, int writer, const tdesc_t *t,
                     const odesc_t *o, size_t n, int in_place, int salt) {
  int rank, p;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  size_t bytes = n * t->size;
  unsigned char *send = malloc(bytes + 1);
  unsigned char *recv = malloc(bytes + 1);
  unsigned char *want = malloc(bytes + 1);
  if (send == NULL || recv == NULL || want == NULL) {
    fprintf(stderr, "pmpi_check: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  fill_input(t, send, n, rank, salt);
  memset(recv, 0xa5, bytes + 1);
  fill_expected(t, o, want, n, p, salt);
  int rc;
  if (in_place) {
    memcpy(recv, send, bytes);
    rc = MPI_Allreduce(MPI_IN_PLACE, recv, (int)n, t->dt, o->op, comm);
  } else {
    rc = MPI_Allreduce(send, recv, (int)n, t->dt, o->op, comm);
  }
  expect_call(expected_path(t, o), bytes);
  char what[160];
  snprintf(what, sizeof what, "%s %s %s n=%zu inplace=%d", comm_name, t->name, o->name, n,
           in_place);
  if (rc != MPI_SUCCESS) {
    fail(what, "MPI_Allreduce returned an error");
  } else if (memcmp(recv, want, bytes) != 0) {
    fail(what, "result differs from the expected values");
  } else if (recv[bytes] != 0xa5) {
    fail(what, "wrote past the end of the receive buffer");
  }
  report(writer, "%s class=%d digest=%016llx", what, error_class(rc),
         (unsigned long long)digest(recv, bytes));
  free(send);
  free(recv);
  free(want);
}

static void run_matrix(MPI_Comm comm, const char *comm_name, int writer, int quick, int with_f16,
                       int big) {
  /* --quick keeps the types marked quick and the counts 1, 7 and 1000; --tiny (quick = 2) keeps
   * the count 7 only. */
  static const size_t all_counts[] = {0, 1, 7, 1000};
  const size_t *counts = all_counts + (quick == 0 ? 0 : quick == 1 ? 1 : 2);
  size_t ncounts = quick == 0 ? 4 : quick == 1 ? 3 : 1;
  /* The inputs of a case depend on the case only, not on which other cases run. */
  for (int ti = 0; ti < NTYPES; ti++) {
    const tdesc_t *t = &types[ti];
    if ((quick && !t->quick) || (t->kind == K_F16 && !with_f16)) {
      continue;
    }
    for (int oi = 0; oi < NOPS; oi++) {
      if (!pair_valid(t, &ops[oi])) {
        continue;
      }
      for (size_t ci = 0; ci < ncounts; ci++) {
        for (int in_place = 0; in_place < 2; in_place++) {
          run_case(comm, comm_name, writer, t, &ops[oi], counts[ci], in_place,
                   ti * 97 + oi * 13 + (int)counts[ci] * 3 + in_place);
        }
      }
    }
  }
  if (!big) {
    return;
  }
  /* Large messages on a few pairs: they take the pipelined algorithms. */
  static const struct {
    const char *type;
    const char *op;
  } large[] = {{"MPI_INT", "MPI_SUM"},      {"MPI_DOUBLE", "MPI_SUM"}, {"MPI_UINT8_T", "MPI_BXOR"},
               {"MPI_INT64_T", "MPI_LOR"},  {"MPI_FLOAT", "MPI_MAX"},  {"MPI_SHORT", "MPI_BAND"},
               {"MPI_UNSIGNED", "MPI_PROD"}};
  for (size_t k = 0; k < sizeof(large) / sizeof(large[0]); k++) {
    const tdesc_t *t = find_type(large[k].type);
    const odesc_t *o = find_op(large[k].op);
    for (int in_place = 0; in_place < 2; in_place++) {
      run_case(comm, comm_name, writer, t, o, (size_t)1 << 20, in_place,
               5000 + (int)k * 2 + in_place);
    }
  }
}

/* Random doubles and floats: not exact, so checked with a tolerance and bitwise across ranks. */
static void run_random(MPI_Comm comm, int writer, size_t n) {
  int rank, p;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  double *d = malloc(n * sizeof(double));
  double *dr = malloc(n * sizeof(double));
  float *f = malloc(n * sizeof(float));
  float *fr = malloc(n * sizeof(float));
  if (d == NULL || dr == NULL || f == NULL || fr == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  uint64_t s = 0x9e3779b97f4a7c15ull;
  double *ref = calloc(n, sizeof(double));
  for (int r = 0; r < p; r++) {
    for (size_t i = 0; i < n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      double v = (double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
      ref[i] += v;
      if (r == rank) {
        d[i] = v;
        f[i] = (float)v;
      }
    }
  }
  int rc1 = MPI_Allreduce(d, dr, (int)n, MPI_DOUBLE, MPI_SUM, comm);
  expect_call(NULL, n * sizeof(double));
  int rc2 = MPI_Allreduce(f, fr, (int)n, MPI_FLOAT, MPI_SUM, comm);
  expect_call(NULL, n * sizeof(float));
  int ok = rc1 == MPI_SUCCESS && rc2 == MPI_SUCCESS;
  for (size_t i = 0; ok && i < n; i++) {
    ok = fabs(dr[i] - ref[i]) <= 1e-12 * p && fabs((double)fr[i] - ref[i]) <= 1e-5 * p;
  }
  if (!ok) {
    fail("random sum", "outside the tolerance");
  }
  /* Every rank must hold the same bits (MPI_Allgather is not intercepted). */
  uint64_t mine[2] = {digest(dr, n * sizeof(double)), digest(fr, n * sizeof(float))};
  uint64_t *all = malloc(sizeof(mine) * (size_t)p);
  MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, comm);
  for (int r = 0; r < p; r++) {
    if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1]) {
      fail("random sum", "ranks disagree on the result bits");
    }
  }
  report(writer, "random MPI_DOUBLE/MPI_FLOAT MPI_SUM n=%zu class=%d/%d %s", n, error_class(rc1),
         error_class(rc2), ok ? "ok" : "FAIL");
  free(all);
  free(ref);
  free(d);
  free(dr);
  free(f);
  free(fr);
}

/* A commutative user operation (integer sum), which must go to MPI. */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const int *a = in;
  int *b = inout;
  for (int i = 0; i < *len; i++) {
    b[i] += a[i];
  }
}

/* A fallback case with a known answer: record the class, check the values when MPI succeeded. */
static void check_ints(const char *what, int rc, const int *got, const int *want, int n) {
  if (rc == MPI_SUCCESS && memcmp(got, want, (size_t)n * sizeof(int)) != 0) {
    fail(what, "result differs from the expected values");
  }
  report(world_rank == 0, "%s class=%d digest=%016llx", what, error_class(rc),
         rc == MPI_SUCCESS ? (unsigned long long)digest(got, (size_t)n * sizeof(int)) : 0ull);
}

/* Cases the interposer must hand to MPI unchanged, and a few edge cases it runs itself. */
static void run_special(int split_color) {
  enum { N = 7 };
  int a[2 * N], r[2 * N], w[2 * N];
  for (int i = 0; i < 2 * N; i++) {
    a[i] = world_rank * 10 + i;
    w[i] = 0;
    for (int k = 0; k < world_size; k++) {
      w[i] += k * 10 + i;
    }
  }

  int rc;
#ifndef OPEN_MPI
  /* Derived datatype: MPI decides (MPICH refuses predefined ops on derived types). The standard
   * leaves the call erroneous, and Open MPI crashes on it, so only MPICH runs it. */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  rc = MPI_Allreduce(a, r, N, pair, MPI_SUM, MPI_COMM_WORLD);
  expect_call("datatype", 0);
  check_ints("special derived-contiguous(2,MPI_INT) MPI_SUM", rc, r, w, 2 * N);
  MPI_Type_free(&pair);
#endif

  /* User-defined operation. */
  MPI_Op op;
  MPI_Op_create(user_sum, 1, &op);
  rc = MPI_Allreduce(a, r, N, MPI_INT, op, MPI_COMM_WORLD);
  expect_call("op", 0);
  check_ints("special user-op MPI_INT", rc, r, w, N);
  MPI_Op_free(&op);

  /* MPI_MAXLOC on MPI_2INT: the largest value, the lowest rank among equals. */
  int loc[2 * N], locr[2 * N], locw[2 * N];
  for (int i = 0; i < N; i++) {
    loc[2 * i] = (i + world_rank) % 3;
    loc[2 * i + 1] = world_rank;
    locw[2 * i] = -1;
    for (int k = 0; k < world_size; k++) {
      if ((i + k) % 3 > locw[2 * i]) {
        locw[2 * i] = (i + k) % 3;
        locw[2 * i + 1] = k;
      }
    }
  }
  rc = MPI_Allreduce(loc, locr, N, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
  expect_call("op", 0);
  check_ints("special MPI_2INT MPI_MAXLOC", rc, locr, locw, 2 * N);

  /* Types the interposer leaves to MPI: MPI_WCHAR (no reduction in the standard; MPICH and
   * Open MPI refuse it) and complex. MPI's answer, whatever it is, comes back unchanged. */
  wchar_t c[N], cr[N], cw[N];
  for (int i = 0; i < N; i++) {
    c[i] = (wchar_t)(i + world_rank);
    cw[i] = 0;
    for (int k = 0; k < world_size; k++) {
      cw[i] = (wchar_t)(cw[i] + i + k);
    }
  }
  rc = MPI_Allreduce(c, cr, N, MPI_WCHAR, MPI_SUM, MPI_COMM_WORLD);
  expect_call("datatype", 0);
  if (rc == MPI_SUCCESS && memcmp(cr, cw, sizeof cw) != 0) {
    fail("MPI_WCHAR sum", "result differs from the expected values");
  }
  report(world_rank == 0, "special MPI_WCHAR MPI_SUM class=%d digest=%016llx", error_class(rc),
         rc == MPI_SUCCESS ? (unsigned long long)digest(cr, sizeof cr) : 0ull);

  /* MPI_CHAR: run on mpiar where MPI reduces it (as this platform's char), else MPI's error. */
  char ch[N], chr[N];
  for (int i = 0; i < N; i++) {
    ch[i] = (char)(i * 3 - world_rank);
  }
  rc = MPI_Allreduce(ch, chr, N, MPI_CHAR, MPI_MIN, MPI_COMM_WORLD);
  expect_call(mpi_accepts(MPI_CHAR, MPI_MIN) ? NULL : "datatype-op", N);
  report(world_rank == 0, "special MPI_CHAR MPI_MIN class=%d digest=%016llx", error_class(rc),
         rc == MPI_SUCCESS ? (unsigned long long)digest(chr, N) : 0ull);

  double z[2 * N], zr[2 * N], zw[2 * N];
  for (int i = 0; i < 2 * N; i++) {
    z[i] = world_rank + 0.5 * i;
    zw[i] = 0;
    for (int k = 0; k < world_size; k++) {
      zw[i] += k + 0.5 * i;
    }
  }
  rc = MPI_Allreduce(z, zr, N, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  expect_call("datatype", 0);
  if (rc == MPI_SUCCESS && memcmp(zr, zw, sizeof zr) != 0) {
    fail("complex sum", "result differs from the expected values");
  }
  report(world_rank == 0, "special MPI_C_DOUBLE_COMPLEX MPI_SUM class=%d digest=%016llx",
         error_class(rc), rc == MPI_SUCCESS ? (unsigned long long)digest(zr, sizeof zr) : 0ull);

  /* Pairs the standard does not define, and bad arguments: MPI's own errors (MPI_ERRORS_RETURN
   * is set on every communicator used here). */
  const struct {
    const char *name;
    MPI_Datatype type;
    MPI_Op op;
    const char *reason;
  } bad[] = {{"MPI_FLOAT MPI_BAND", MPI_FLOAT, MPI_BAND, "datatype-op"},
             {"MPI_C_BOOL MPI_SUM", MPI_C_BOOL, MPI_SUM, "datatype-op"},
             {"MPI_BYTE MPI_SUM", MPI_BYTE, MPI_SUM, "datatype-op"},
             {"MPI_DATATYPE_NULL MPI_SUM", MPI_DATATYPE_NULL, MPI_SUM, "datatype"},
             {"MPI_INT MPI_OP_NULL", MPI_INT, MPI_OP_NULL, "op"}};
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    rc = MPI_Allreduce(a, r, 1, bad[k].type, bad[k].op, MPI_COMM_WORLD);
    expect_call(bad[k].reason, 0);
    report(world_rank == 0, "special %s class=%d", bad[k].name, error_class(rc));
  }
#ifndef OPEN_MPI
  /* MPICH checks buffer arguments and returns an error; Open MPI does not check them and would
   * crash on the NULL receive buffer, so only MPICH runs these. */
  rc = MPI_Allreduce(a, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect_call("buffer", 0);
  report(world_rank == 0, "special null-recvbuf class=%d", error_class(rc));
  rc = MPI_Allreduce(r, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect_call("buffer", 0);
  report(world_rank == 0, "special aliased-buffers class=%d", error_class(rc));
#endif
  rc = MPI_Allreduce(a, r, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL);
  expect_call("comm", 0);
  report(world_rank == 0, "special MPI_COMM_NULL class=%d", error_class(rc));

  /* A zero count with NULL buffers is valid MPI, and mpiar runs it. */
  rc = MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect_call(NULL, 0);
  report(world_rank == 0, "special count-0-null-buffers class=%d", error_class(rc));

  /* Intercommunicator between the two halves of the split: each side receives the sum over the
   * other side. */
  if (world_size >= 2) {
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, split_color, world_rank, &local);
    int remote_leader = split_color == 0 ? 1 : 0;
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 99, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int iw[N];
    for (int i = 0; i < N; i++) {
      iw[i] = 0;
      for (int k = 0; k < world_size; k++) {
        iw[i] += (k % 2 != split_color) ? k * 10 + i : 0;
      }
    }
    rc = MPI_Allreduce(a, r, N, MPI_INT, MPI_SUM, inter);
    expect_call("intercomm", 0);
    if (rc != MPI_SUCCESS || memcmp(r, iw, sizeof iw) != 0) {
      fail("intercommunicator sum", "wrong result or error");
    }
    report(world_rank == 0, "special intercomm MPI_INT MPI_SUM class=%d digest=%016llx",
           error_class(rc), (unsigned long long)digest(r, sizeof iw));
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
  }

  /* MPI_Iallreduce is not intercepted: neither counted nor changed. */
  MPI_Request req;
  rc = MPI_Iallreduce(a, r, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  check_ints("special MPI_Iallreduce MPI_INT MPI_SUM", rc, r, w, N);

#if MPI_VERSION >= 4
  /* The large-count form takes the same paths. */
  MPI_Count cn = N;
  rc = MPI_Allreduce_c(a, r, cn, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect_call(NULL, N * sizeof(int));
  check_ints("special MPI_Allreduce_c MPI_INT MPI_SUM", rc, r, w, N);
  short s[N], sr[N], sw[N];
  for (int i = 0; i < N; i++) {
    s[i] = (short)(world_rank + i);
    sw[i] = 0;
    for (int k = 0; k < world_size; k++) {
      sw[i] = (short)(sw[i] + k + i);
    }
  }
  rc = MPI_Allreduce_c(s, sr, cn, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD);
  expect_call("datatype", 0);
  if (rc != MPI_SUCCESS || memcmp(sr, sw, sizeof sw) != 0) {
    fail("MPI_Allreduce_c MPI_SHORT", "wrong result or error");
  }
  report(world_rank == 0, "special MPI_Allreduce_c MPI_SHORT MPI_SUM class=%d digest=%016llx",
         error_class(rc), (unsigned long long)digest(sr, sizeof sr));
#endif
}

/* ---------------------------------------------------------------------------------------- */
/* Threads: two threads, each on its own communicator, under MPI_THREAD_MULTIPLE.            */

typedef struct thread_arg {
  MPI_Comm comm;
  int id;
  int failures;
} thread_arg_t;

static void *thread_main(void *varg) {
  thread_arg_t *arg = varg;
  int rank, p;
  MPI_Comm_rank(arg->comm, &rank);
  MPI_Comm_size(arg->comm, &p);
  static const size_t counts[] = {1, 7, 1000, 4096, 65536};
  for (int iter = 0; iter < 40; iter++) {
    const tdesc_t *t = find_type((iter + arg->id) % 2 == 0 ? "MPI_INT" : "MPI_DOUBLE");
    const odesc_t *o = &ops[iter % 4];
    size_t n = counts[iter % 5];
    int salt = iter * 2 + arg->id;
    unsigned char *send = malloc(n * t->size);
    unsigned char *recv = malloc(n * t->size);
    unsigned char *want = malloc(n * t->size);
    fill_input(t, send, n, rank, salt);
    fill_expected(t, o, want, n, p, salt);
    int rc = MPI_Allreduce(send, recv, (int)n, t->dt, o->op, arg->comm);
    expect_call(NULL, n * t->size);
    if (rc != MPI_SUCCESS || memcmp(recv, want, n * t->size) != 0) {
      fprintf(stderr, "pmpi_check: rank %d thread %d: FAIL iteration %d (%s %s n=%zu)\n",
              world_rank, arg->id, iter, t->name, o->name, n);
      arg->failures++;
    }
    free(send);
    free(recv);
    free(want);
  }
  return NULL;
}

static int run_threads(void) {
  MPI_Comm comms[2];
  MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
  /* The second communicator orders the ranks the other way round. */
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &comms[1]);
  thread_arg_t args[2] = {{comms[0], 0, 0}, {comms[1], 1, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    if (pthread_create(&th[i], NULL, thread_main, &args[i]) != 0) {
      fprintf(stderr, "pmpi_check: pthread_create failed\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    failures += args[i].failures;
  }
  report(world_rank == 0, "threads: 2 threads x 40 calls on 2 communicators, %d failures",
         args[0].failures + args[1].failures);
  MPI_Comm_free(&comms[0]);
  MPI_Comm_free(&comms[1]);
  return 0;
}

/* ---------------------------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: pmpi_check [--out FILE] [--expect FILE] [--big] [--quick|--tiny]\n"
                  "                  [--f16] [--threads] [--fail=return|fatal]\n");
}

int main(int argc, char **argv) {
  const char *out_path = NULL;
  const char *expect_path = NULL;
  const char *fail_mode = NULL;
  int big = 0, quick = 0, with_f16 = 0, threads = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out_path = argv[++i];
    } else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
      expect_path = argv[++i];
    } else if (strcmp(argv[i], "--big") == 0) {
      big = 1;
    } else if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--tiny") == 0) {
      quick = 2;
    } else if (strcmp(argv[i], "--f16") == 0) {
      with_f16 = 1;
    } else if (strcmp(argv[i], "--threads") == 0) {
      threads = 1;
    } else if (strncmp(argv[i], "--fail=", 7) == 0) {
      fail_mode = argv[i] + 7;
    } else {
      usage();
      return 2;
    }
  }

  int provided = MPI_THREAD_SINGLE;
  if (threads) {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank == 0 && out_path != NULL) {
    out = fopen(out_path, "w");
    if (out == NULL) {
      perror(out_path);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }

  if (fail_mode != NULL) {
    /* The driver arranges for this call to fail inside the interposer. With MPI_ERRORS_RETURN the
     * class comes back; with the default handler the program must not get past the call. */
    if (strcmp(fail_mode, "return") == 0) {
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    int x = world_rank, y = -1;
    int rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect_error();
    int cls = error_class(rc);
    if (cls == MPI_ERR_OTHER) {
      report(world_rank == 0, "fail-mode %s: class=MPI_ERR_OTHER y=%d", fail_mode, y);
    } else {
      report(world_rank == 0, "fail-mode %s: class=%d y=%d", fail_mode, cls, y);
    }
    if (rc == MPI_SUCCESS) {
      fail("fail mode", "MPI_Allreduce succeeded");
    } else if (y != -1) {
      fail("fail mode", "the receive buffer was written by a failed call");
    }
  } else if (threads) {
    if (provided < MPI_THREAD_MULTIPLE) {
      if (world_rank == 0) {
        printf("pmpi_check: MPI_THREAD_MULTIPLE not provided\n");
      }
      if (out != NULL) {
        fclose(out);
      }
      MPI_Finalize();
      return 77;
    }
    run_threads();
  } else {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    /* Split in two; the key reverses the order so that comm ranks differ from world ranks. */
    int color = world_rank % 2;
    MPI_Comm split;
    MPI_Comm_split(MPI_COMM_WORLD, color, world_size - world_rank, &split);
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    run_matrix(MPI_COMM_WORLD, "world", world_rank == 0, quick, with_f16, big);
    /* The lines of the half that holds world rank 0 are written. */
    run_matrix(split, "split", world_rank == 0, quick, with_f16, 0);
    run_random(MPI_COMM_WORLD, world_rank == 0, 1000);
    run_special(color);
    MPI_Comm_free(&split);
  }

  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  write_expected_stats(expect_path);
  if (world_rank == 0) {
    report(1, "failures %d", total);
    if (out != NULL) {
      fclose(out);
    }
    if (total != 0) {
      fprintf(stderr, "pmpi_check: %d failures\n", total);
    }
  }
  MPI_Bcast(&total, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
