/*
 * The MPI test matrix: algorithms x dtypes x ops x counts {0, 1, p-1, p, p+1, a prime, 1 MiB}
 * x in-place. Inputs are chosen so that the exact answer is known (rank-valued integers, small
 * integer-valued floats), plus random floats compared with a tolerance. Every result must also be
 * bitwise identical on all ranks.
 *
 * Usage: test_allreduce_matrix [--quick] [--only NAME,NAME...]. --quick keeps every algorithm,
 * dtype and op but trims the large counts, for oversubscribed runs where each message costs
 * milliseconds; --only runs the named registry entries alone (no auto, no segmented ring), for
 * rank counts that only those entries treat apart.
 */
#include <math.h>
#include <stdint.h>

#include "base/common.h"
#include "mpi_test.h"
#include "reduce_kernels/kernels.h"

static int rank, nranks;
static size_t case_segment; /* segment_bytes of the cases run (0: the selector's) */

static int is_float(mpiar_dtype_t t) {
  return mpiar__dtype_is_float(t);
}
static int is_signed(mpiar_dtype_t t) {
  return t == MPIAR_INT8 || t == MPIAR_INT32 || t == MPIAR_INT64;
}

static double getf(mpiar_dtype_t t, const void *buf, size_t i) {
  switch (t) {
  case MPIAR_FLOAT16:
    return mpiar__f16_to_f32(((const uint16_t *)buf)[i]);
  case MPIAR_BFLOAT16:
    return mpiar__bf16_to_f32(((const uint16_t *)buf)[i]);
  case MPIAR_FLOAT32:
    return ((const float *)buf)[i];
  default:
    return ((const double *)buf)[i];
  }
}
static void setf(mpiar_dtype_t t, void *buf, size_t i, double v) {
  switch (t) {
  case MPIAR_FLOAT16:
    ((uint16_t *)buf)[i] = mpiar__f32_to_f16((float)v);
    break;
  case MPIAR_BFLOAT16:
    ((uint16_t *)buf)[i] = mpiar__f32_to_bf16((float)v);
    break;
  case MPIAR_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  default:
    ((double *)buf)[i] = v;
    break;
  }
}
/* Integer element as raw bits, zero-extended. */
static uint64_t getu(mpiar_dtype_t t, const void *buf, size_t i) {
  switch (mpiar_dtype_size(t)) {
  case 1:
    return ((const uint8_t *)buf)[i];
  case 4:
    return ((const uint32_t *)buf)[i];
  default:
    return ((const uint64_t *)buf)[i];
  }
}
static void setu(mpiar_dtype_t t, void *buf, size_t i, uint64_t v) {
  switch (mpiar_dtype_size(t)) {
  case 1:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case 4:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)buf)[i] = v;
    break;
  }
}
static int64_t gets(mpiar_dtype_t t, uint64_t bits) {
  switch (t) {
  case MPIAR_INT8:
    return (int8_t)bits;
  case MPIAR_INT32:
    return (int32_t)bits;
  case MPIAR_INT64:
    return (int64_t)bits;
  default:
    return (int64_t)bits;
  }
}
static uint64_t mask_of(mpiar_dtype_t t) {
  size_t s = mpiar_dtype_size(t);
  return s == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * s)) - 1);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Integer input of rank r at index i for op; every rank can compute every other's. */
static uint64_t int_input(mpiar_op_t op, int r, size_t i) {
  switch (op) {
  case MPIAR_SUM:
    return (uint64_t)(r + 1) * (i % 5 + 1) + (i % 11 == 0 ? 100 : 0);
  case MPIAR_PROD:
    return 1 + (i + (size_t)r) % 2 + (i % 13 == 0 ? 1 : 0);
  case MPIAR_MIN:
  case MPIAR_MAX:
    return (uint64_t)((int64_t)((i * 7 + (size_t)r * 13) % 201) - 100);
  default:
    return mix(i * 1000003u + (uint64_t)r);
  }
}

/* Small integer-valued float input: sums, products, minima stay exact in every float type. */
static double float_input(mpiar_op_t op, int r, size_t i) {
  switch (op) {
  case MPIAR_PROD:
    return (double)(1 + (i + (size_t)r) % 2) * ((i % 3 == 0) ? -1 : 1);
  case MPIAR_MIN:
  case MPIAR_MAX:
    return (double)((int)((i * 7 + (size_t)r * 13) % 201) - 100);
  default:
    return (double)((r + 1) % 4 + (int)(i % 3)) - 1.0;
  }
}

static double random_input(int r, size_t i) {
  return (double)(mix(i * 7919u + (uint64_t)r * 104729u) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *c = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ c[i]) * 1099511628211ULL;
  }
  return h;
}

/*
 * Bitwise identity across ranks: each case records a hash of its result, and all hashes are
 * compared at the end in one exchange (a collective per case would dominate oversubscribed runs).
 * Every case is recorded; the list grows as needed.
 */
typedef struct case_record {
  uint64_t hash;
  char name[96];
} case_record_t;
static case_record_t *cases;
static int ncases, case_capacity;

static void record_result(const void *buf, size_t bytes, const char *name) {
  if (ncases == case_capacity) {
    int cap = case_capacity ? 2 * case_capacity : 1024;
    case_record_t *grown = realloc(cases, (size_t)cap * sizeof *grown);
    if (grown == NULL) {
      MT_CHECK(0, "no memory to record case %d (%s)", ncases, name);
      return;
    }
    cases = grown;
    case_capacity = cap;
  }
  cases[ncases].hash = fnv(buf, bytes);
  snprintf(cases[ncases].name, sizeof cases[ncases].name, "%s", name);
  ncases++;
}

static void check_identical_everywhere(void) {
  /* Every rank ran the same cases in the same order; the counts must agree too. */
  int lo_n = 0, hi_n = 0;
  MPI_Allreduce(&ncases, &lo_n, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&ncases, &hi_n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MT_CHECK(lo_n == hi_n, "ranks recorded %d to %d cases", lo_n, hi_n);
  uint64_t *mine = malloc(((size_t)lo_n + 1) * sizeof *mine);
  uint64_t *lo = malloc(((size_t)lo_n + 1) * sizeof *lo);
  uint64_t *hi = malloc(((size_t)lo_n + 1) * sizeof *hi);
  if (mine == NULL || lo == NULL || hi == NULL) {
    MT_CHECK(0, "no memory to compare %d cases", lo_n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < lo_n; i++) {
    mine[i] = cases[i].hash;
  }
  MPI_Allreduce(mine, lo, lo_n, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(mine, hi, lo_n, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  for (int i = 0; i < lo_n; i++) {
    MT_CHECK(lo[i] == hi[i], "%s: results differ between ranks", cases[i].name);
  }
  free(mine);
  free(lo);
  free(hi);
}

static void fill(mpiar_dtype_t t, mpiar_op_t op, int random, int r, void *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (is_float(t)) {
      setf(t, buf, i, random ? random_input(r, i) : float_input(op, r, i));
    } else {
      setu(t, buf, i, int_input(op, r, i));
    }
  }
}

static uint64_t int_expected(mpiar_dtype_t t, mpiar_op_t op, size_t i) {
  uint64_t m = mask_of(t);
  uint64_t acc = int_input(op, 0, i) & m;
  for (int r = 1; r < nranks; r++) {
    uint64_t v = int_input(op, r, i) & m;
    /* Signed types compare as signed values, unsigned ones as the raw (masked) bits. */
    int less = is_signed(t) ? gets(t, v) < gets(t, acc) : v < acc;
    int more = is_signed(t) ? gets(t, v) > gets(t, acc) : v > acc;
    switch (op) {
    case MPIAR_SUM:
      acc = (acc + v) & m;
      break;
    case MPIAR_PROD:
      acc = (acc * v) & m;
      break;
    case MPIAR_MIN:
      acc = less ? v : acc;
      break;
    case MPIAR_MAX:
      acc = more ? v : acc;
      break;
    case MPIAR_BAND:
      acc &= v;
      break;
    case MPIAR_BOR:
      acc |= v;
      break;
    default:
      acc ^= v;
      break;
    }
  }
  return acc & m;
}

/* Expected float result in double, from the inputs as stored in the type (after rounding). */
static double float_expected(mpiar_dtype_t t, mpiar_op_t op, int random, size_t i, double *mag) {
  unsigned char tmp[8];
  double acc = 0, sum_abs = 0;
  for (int r = 0; r < nranks; r++) {
    setf(t, tmp, 0, random ? random_input(r, i) : float_input(op, r, i));
    double v = getf(t, tmp, 0);
    sum_abs += fabs(v);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
    case MPIAR_PROD:
      acc *= v;
      break;
    case MPIAR_MIN:
      acc = v < acc ? v : acc;
      break;
    case MPIAR_MAX:
      acc = v > acc ? v : acc;
      break;
    default:
      acc += v;
      break;
    }
  }
  if (op == MPIAR_AVG) {
    acc /= nranks;
    sum_abs /= nranks;
  }
  *mag = sum_abs;
  return acc;
}

static double eps_of(mpiar_dtype_t t) {
  switch (t) {
  case MPIAR_FLOAT16:
    return 0x1p-10;
  case MPIAR_BFLOAT16:
    return 0x1p-7;
  case MPIAR_FLOAT32:
    return 0x1p-23;
  default:
    return 0x1p-52;
  }
}

static void run_case(const char *alg, mpiar_dtype_t t, mpiar_op_t op, size_t count, int in_place,
                     int random) {
  size_t es = mpiar_dtype_size(t);
  size_t bytes = count * es;
  unsigned char *send = malloc(bytes + 64), *recv = malloc(bytes + 64);
  fill(t, op, random, rank, send, count);
  memset(recv, 0xA5, bytes + 64);
  if (in_place) {
    memcpy(recv, send, bytes);
  }
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = alg;
  opts.segment_bytes = case_segment;
  int rc = mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : send, recv, count, t, op, MPI_COMM_WORLD,
                              &opts);
  MT_CHECK(rc == MPIAR_SUCCESS, "%s %s %s count %zu in_place %d: %s: %s", alg, mpiar_dtype_name(t),
           mpiar_op_name(op), count, in_place, mpiar_err_name(rc), mpiar_last_error());
  if (rc != MPIAR_SUCCESS) {
    free(send);
    free(recv);
    return;
  }
  /* Nothing may be written past the end of the result. */
  for (size_t k = 0; k < 64; k++) {
    MT_CHECK(recv[bytes + k] == 0xA5, "%s wrote past the end at count %zu", alg, count);
    if (recv[bytes + k] != 0xA5) {
      break;
    }
  }
  int bad = 0;
  for (size_t i = 0; i < count && bad < 3; i++) {
    if (is_float(t)) {
      double mag = 0;
      double want = float_expected(t, op, random, i, &mag);
      double got = getf(t, recv, i);
      /* Exact inputs give exact results, except for the rounding of an average; random inputs
       * allow one rounding per rank. */
      double tol =
          (random || op == MPIAR_AVG) ? (nranks + 1) * eps_of(t) * (mag + fabs(want)) : 0.0;
      if (!(fabs(got - want) <= tol)) {
        bad++;
        MT_CHECK(0, "%s %s %s count %zu in_place %d random %d: [%zu] = %.9g, expected %.9g", alg,
                 mpiar_dtype_name(t), mpiar_op_name(op), count, in_place, random, i, got, want);
      }
    } else {
      uint64_t want = int_expected(t, op, i), got = getu(t, recv, i);
      if (got != want) {
        bad++;
        MT_CHECK(0, "%s %s %s count %zu in_place %d: [%zu] = %#llx, expected %#llx", alg,
                 mpiar_dtype_name(t), mpiar_op_name(op), count, in_place, i,
                 (unsigned long long)got, (unsigned long long)want);
      }
    }
  }
  char name[96];
  snprintf(name, sizeof name, "%s %s %s count %zu in_place %d random %d", alg, mpiar_dtype_name(t),
           mpiar_op_name(op), count, in_place, random);
  record_result(recv, bytes, name);
  /* The send buffer is input only. */
  if (!in_place) {
    unsigned char *again = malloc(bytes + 1);
    fill(t, op, random, rank, again, count);
    MT_CHECK(memcmp(again, send, bytes) == 0, "%s modified the send buffer", alg);
    free(again);
  }
  free(send);
  free(recv);
}

/*
 * On two ranks every algorithm reduces each element as x0 op x1 (rank 0's data first), wherever
 * the element sits in the vector: the kvstore relies on it for fused and per-key results to
 * agree. NaN payloads make the order visible (an operation returns its first NaN operand).
 */
static void check_rank0_first(void) {
  enum { N = 8001 };
  static float x[2][N], got[N], want[N];
  for (int r = 0; r < 2; r++) {
    for (size_t i = 0; i < N; i++) {
      uint32_t bits = 0x7fc00000u | (uint32_t)(r + 1) << 12 | (uint32_t)(i & 0xfff);
      memcpy(&x[r][i], &bits, sizeof bits);
    }
  }
  const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_MIN, MPIAR_MAX};
  int nalg = mpiar_algorithm_count();
  for (int a = 0; a <= nalg + 1; a++) {
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.algorithm = a < nalg ? mpiar_algorithm_name(a) : a == nalg ? "auto" : "ring";
    opts.segment_bytes = a == nalg + 1 ? 4096 : 0; /* the segmented ring */
    for (size_t o = 0; o < 3; o++) {
      for (int ip = 0; ip < 2; ip++) {
        MT_RC(MPIAR_SUCCESS, mpiar_reduce_local(want, x[0], x[1], N, MPIAR_FLOAT32, ops[o]));
        memcpy(got, x[rank], sizeof got);
        int rc = mpiar_allreduce_ex(ip ? MPIAR_IN_PLACE : x[rank], got, N, MPIAR_FLOAT32, ops[o],
                                    MPI_COMM_WORLD, &opts);
        MT_CHECK(rc == MPIAR_SUCCESS && memcmp(got, want, sizeof got) == 0,
                 "%s (segment %zu) %s in_place %d: not x0 op x1 on every element", opts.algorithm,
                 opts.segment_bytes, mpiar_op_name(ops[o]), ip);
      }
    }
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  const char *only = NULL; /* comma-separated names, or NULL for every entry */
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--only") == 0) {
      only = argv[i + 1];
    }
  }
  size_t p = (size_t)nranks;
  size_t small_counts[] = {0, 1, p - 1, p, p + 1, 1009};
  size_t nsmall = sizeof small_counts / sizeof small_counts[0];

  int nalg = mpiar_algorithm_count();
  MT_CHECK(nalg >= 3, "registry has %d algorithms", nalg);
  if (rank == 0) {
    printf("allreduce matrix on %d ranks%s: %d algorithms and auto x every dtype and op x counts "
           "0, 1, p-1, p, p+1, 1009%s x in place and not; %s of data per dtype (sum, and bxor "
           "or random floats)\n",
           nranks, quick ? " (--quick)" : "", nalg,
           quick ? " (two per dtype and op, rotating)" : "", quick ? "64 KiB" : "1 MiB");
  }
  int nonly = 0;
  for (int a = 0; a <= nalg; a++) {
    /* The registry's algorithms, then "auto". */
    const char *alg = a < nalg ? mpiar_algorithm_name(a) : "auto";
    if (only != NULL) {
      const size_t len = strlen(alg);
      const char *at = strstr(only, alg);
      while (at != NULL && ((at != only && at[-1] != ',') || (at[len] != ',' && at[len] != 0))) {
        at = strstr(at + 1, alg);
      }
      if (at == NULL) {
        continue;
      }
      nonly++;
    }
    for (int t = 0; t < MPIAR__DTYPE_COUNT; t++) {
      for (int op = 0; op < MPIAR__OP_COUNT; op++) {
        if (!mpiar_op_supported((mpiar_dtype_t)t, (mpiar_op_t)op)) {
          continue;
        }
        for (size_t c = 0; c < nsmall; c++) {
          /* Oversubscribed runs take two of the six counts per (dtype, op), rotating so that
           * every count and both in-place modes are covered across the ops and types. */
          for (int ip = 0; ip < 2; ip++) {
            if (quick && ((c + (size_t)ip + (size_t)op + (size_t)t) % 6) > 1) {
              continue;
            }
            run_case(alg, (mpiar_dtype_t)t, (mpiar_op_t)op, small_counts[c], ip, 0);
          }
        }
      }
      /* 1 MiB of data: sum, plus random floats (sum and avg) compared with a tolerance. */
      size_t big = ((size_t)1 << 20) / mpiar_dtype_size((mpiar_dtype_t)t);
      if (quick) {
        big = (big / 16) + 3;
      }
      run_case(alg, (mpiar_dtype_t)t, MPIAR_SUM, big, (t % 2), 0);
      if (is_float((mpiar_dtype_t)t)) {
        run_case(alg, (mpiar_dtype_t)t, MPIAR_SUM, 1009, 0, 1);
        run_case(alg, (mpiar_dtype_t)t, MPIAR_AVG, big, 1, 1);
      } else {
        run_case(alg, (mpiar_dtype_t)t, MPIAR_BXOR, big, 1, 0);
      }
    }
  }
  MT_CHECK(only == NULL || nonly > 0, "--only %s names no registry entry", only);
  /* The segmented ring, with the smallest segments accepted (4 KiB), on the large counts. */
  case_segment = 4096;
  for (int t = 0; t < MPIAR__DTYPE_COUNT && only == NULL; t++) {
    size_t big = ((size_t)1 << (quick ? 16 : 20)) / mpiar_dtype_size((mpiar_dtype_t)t) + 5;
    run_case("ring", (mpiar_dtype_t)t, MPIAR_SUM, big, t % 2, 0);
    if (is_float((mpiar_dtype_t)t)) {
      run_case("ring", (mpiar_dtype_t)t, MPIAR_AVG, big, (t + 1) % 2, 1);
    }
  }
  case_segment = 0;
  if (nranks == 2) {
    check_rank0_first();
  }
  check_identical_everywhere();
  if (rank == 0) {
    printf("%d cases run, every result compared bit for bit across the %d ranks\n", ncases, nranks);
  }
  free(cases);
  return mt_finish("allreduce matrix");
}
