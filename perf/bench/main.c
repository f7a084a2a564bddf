/*
 * mpiar-bench: the sweep. For each size, every algorithm runs once per repetition in turn
 * (A B C ... A B C ...) followed by the point-to-point exchange that defines the limit, so that
 * drift on a shared machine (other processes, frequency changes) hits every column alike.
 * Each run is timed between a barrier and its own end on every rank; the per-rank times are
 * reduced with MPI_MAX once per size, outside the timed loop, so the reported time is that of
 * the slowest rank.
 *
 * The benchmark itself may call MPI's collectives (barrier, the MAX reduction of the times and
 * MPI_Allreduce as the `mpi` column); the library it measures never does.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "bench.h"

/* MPI messages carry at most INT_MAX elements; larger ones are sent in chunks of this size. */
#define CHUNK_BYTES ((size_t)1 << 30)
#define MAX_CHUNKS (((size_t)1 << 41) / CHUNK_BYTES + 1)

/* At most this many mismatch messages per rank; the count of failures is always complete. */
#define MAX_FAILURE_MESSAGES 5

/* Pattern written into the result buffer before each checked run, so a stale result fails. */
#define POISON_BYTE 0xA5

/*
 * A launcher sets the rank in the environment before MPI starts. Messages printed before
 * MPI_Init (bad arguments, --help) come from rank 0 only, so they appear once.
 */
static int launcher_rank0(void) {
  static const char *const vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                     "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') {
      return strcmp(v, "0") == 0;
    }
  }
  return 1;
}

/* ---- Inputs with exactly known results (-c) -------------------------------------------- */

/* A 64-bit mixing function: element values look random, so a misplaced block is detected. */
static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/*
 * The input of rank r at element i: small non-negative integers, chosen per operation so that
 * every partial result of any reduction order is an exactly representable integer (see
 * exact_bound()), hence every algorithm must produce the same bits as the expected values.
 */
static uint64_t input_value(mpiar_op_t op, size_t i, int r) {
  uint64_t h = mix64(((uint64_t)i << 16) ^ (uint64_t)r);
  switch (op) {
  case MPIAR_SUM:
    return h % 4;
  case MPIAR_PROD:
    return 1 + (h & 1);
  case MPIAR_MIN:
  case MPIAR_MAX:
    return h % 64;
  case MPIAR_AVG:
    /* b(i) + 2r: the sum over ranks is p * (b(i) + p - 1), so the average is an integer. */
    return mix64((uint64_t)i << 16) % 4 + 2 * (uint64_t)r;
  default: /* bitwise operations */
    return h & 0x7f;
  }
}

/* The exact result of the operation over all ranks at element i, in 64-bit arithmetic. */
static uint64_t expected_value(mpiar_op_t op, size_t i, int p) {
  uint64_t acc = input_value(op, i, 0);
  for (int r = 1; r < p; r++) {
    uint64_t v = input_value(op, i, r);
    switch (op) {
    case MPIAR_SUM:
    case MPIAR_AVG:
      acc += v;
      break;
    case MPIAR_PROD:
      acc *= v;
      break;
    case MPIAR_MIN:
      acc = v < acc ? v : acc;
      break;
    case MPIAR_MAX:
      acc = v > acc ? v : acc;
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
  return op == MPIAR_AVG ? acc / (uint64_t)p : acc;
}

/* binary16 bits of a non-negative integer that is exactly representable (checked beforehand). */
static uint16_t f16_of_int(uint64_t v) {
  if (v == 0) {
    return 0;
  }
  int e = 63 - __builtin_clzll(v);
  uint64_t mant = e <= 10 ? (v << (10 - e)) : (v >> (e - 10));
  return (uint16_t)(((unsigned)(e + 15) << 10) | (unsigned)(mant & 0x3ff));
}

/* Store the integer v as element i of a buffer of dtype (integers wrap to the type's width). */
static void store_value(mpiar_dtype_t dtype, void *buf, size_t i, uint64_t v) {
  switch (dtype) {
  case MPIAR_INT8:
  case MPIAR_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case MPIAR_INT32:
  case MPIAR_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case MPIAR_INT64:
  case MPIAR_UINT64:
    ((uint64_t *)buf)[i] = v;
    break;
  case MPIAR_FLOAT16:
    ((uint16_t *)buf)[i] = f16_of_int(v);
    break;
  case MPIAR_BFLOAT16: {
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16);
    break;
  }
  case MPIAR_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  default:
    ((double *)buf)[i] = (double)v;
    break;
  }
}

/*
 * Check that every partial result of the chosen inputs is exact in a floating dtype at p ranks.
 * @return 0, or -1 with a message in err.
 */
static int exact_bound(mpiar_dtype_t dtype, mpiar_op_t op, int p, char *err, size_t len) {
  double limit; /* largest integer up to which all integers are representable */
  int max_exp;  /* largest power of two below the overflow threshold */
  switch (dtype) {
  case MPIAR_FLOAT16:
    limit = 2048;
    max_exp = 15;
    break;
  case MPIAR_BFLOAT16:
    limit = 256;
    max_exp = 127;
    break;
  case MPIAR_FLOAT32:
    limit = 16777216.0;
    max_exp = 127;
    break;
  case MPIAR_FLOAT64:
    limit = 9007199254740992.0;
    max_exp = 1023;
    break;
  default:
    return 0; /* integers wrap identically in any order */
  }
  double bound = 0;
  switch (op) {
  case MPIAR_SUM:
    bound = 3.0 * p;
    break;
  case MPIAR_AVG:
    bound = 3.0 * p + (double)p * (p - 1);
    break;
  case MPIAR_PROD:
    /* Products of ones and twos are powers of two: exact until they overflow. */
    if (p > max_exp) {
      snprintf(err, len, "-c: %s prod is exact for at most %d ranks", mpiar_dtype_name(dtype),
               max_exp);
      return -1;
    }
    return 0;
  default:
    bound = 63;
    break;
  }
  if (bound > limit) {
    snprintf(err, len, "-c: %s %s of the check's inputs is not exact on %d ranks",
             mpiar_dtype_name(dtype), mpiar_op_name(op), p);
    return -1;
  }
  return 0;
}

/* Describe element i of a buffer for a mismatch message. */
static void describe(mpiar_dtype_t dtype, const void *buf, size_t i, char *out, size_t len) {
  switch (dtype) {
  case MPIAR_INT8:
    snprintf(out, len, "%d", ((const int8_t *)buf)[i]);
    break;
  case MPIAR_UINT8:
    snprintf(out, len, "%u", ((const uint8_t *)buf)[i]);
    break;
  case MPIAR_INT32:
    snprintf(out, len, "%d", (int)((const int32_t *)buf)[i]);
    break;
  case MPIAR_UINT32:
    snprintf(out, len, "%u", (unsigned)((const uint32_t *)buf)[i]);
    break;
  case MPIAR_INT64:
    snprintf(out, len, "%lld", (long long)((const int64_t *)buf)[i]);
    break;
  case MPIAR_UINT64:
    snprintf(out, len, "%llu", (unsigned long long)((const uint64_t *)buf)[i]);
    break;
  case MPIAR_FLOAT16:
  case MPIAR_BFLOAT16:
    snprintf(out, len, "bits 0x%04x", ((const uint16_t *)buf)[i]);
    break;
  case MPIAR_FLOAT32:
    snprintf(out, len, "%.9g", ((const float *)buf)[i]);
    break;
  default:
    snprintf(out, len, "%.17g", ((const double *)buf)[i]);
    break;
  }
}

/* ---- The runs --------------------------------------------------------------------------- */

static MPI_Datatype mpi_dtype(mpiar_dtype_t d) {
  switch (d) {
  case MPIAR_INT8:
    return MPI_INT8_T;
  case MPIAR_UINT8:
    return MPI_UINT8_T;
  case MPIAR_INT32:
    return MPI_INT32_T;
  case MPIAR_UINT32:
    return MPI_UINT32_T;
  case MPIAR_INT64:
    return MPI_INT64_T;
  case MPIAR_UINT64:
    return MPI_UINT64_T;
  case MPIAR_FLOAT32:
    return MPI_FLOAT;
  case MPIAR_FLOAT64:
    return MPI_DOUBLE;
  default:
    return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(mpiar_op_t op) {
  switch (op) {
  case MPIAR_SUM:
  case MPIAR_AVG: /* MPI has no average: MPI_SUM, then a division, as a user would write it */
    return MPI_SUM;
  case MPIAR_PROD:
    return MPI_PROD;
  case MPIAR_MIN:
    return MPI_MIN;
  case MPIAR_MAX:
    return MPI_MAX;
  case MPIAR_BAND:
    return MPI_BAND;
  case MPIAR_BOR:
    return MPI_BOR;
  default:
    return MPI_BXOR;
  }
}

/* The `mpi` column: MPI_Allreduce in chunks of at most INT_MAX elements. */
static int run_mpi(const void *send, void *recv, size_t count, const bench_opts_t *o, int p,
                   MPI_Comm comm) {
  const size_t esize = mpiar_dtype_size(o->dtype);
  const MPI_Datatype dt = mpi_dtype(o->dtype);
  const MPI_Op op = mpi_op(o->op);
  for (size_t done = 0; done < count;) {
    size_t n = count - done;
    if (n > (size_t)INT_MAX) {
      n = (size_t)INT_MAX;
    }
    const void *s = o->inplace ? MPI_IN_PLACE : (const char *)send + done * esize;
    int rc = MPI_Allreduce(s, (char *)recv + done * esize, (int)n, dt, op, comm);
    if (rc != MPI_SUCCESS) {
      return rc;
    }
    done += n;
  }
  if (o->op == MPIAR_AVG) {
    if (o->dtype == MPIAR_FLOAT32) {
      float *r = recv;
      for (size_t i = 0; i < count; i++) {
        r[i] /= (float)p;
      }
    } else {
      double *r = recv;
      for (size_t i = 0; i < count; i++) {
        r[i] /= (double)p;
      }
    }
  }
  return MPI_SUCCESS;
}

/*
 * The limit: every rank sends `bytes` to its right neighbour and receives as many from its left
 * one, all posted at once (for p = 2 the neighbours are the same partner: a paired exchange).
 */
static int run_exchange(const void *send, void *recv, size_t bytes, int rank, int p,
                        MPI_Request *reqs, MPI_Status *statuses, MPI_Comm comm) {
  if (p < 2 || bytes == 0) {
    return MPI_SUCCESS;
  }
  const int to = (rank + 1) % p;
  const int from = (rank + p - 1) % p;
  int n = 0;
  for (size_t off = 0; off < bytes; off += CHUNK_BYTES) {
    int len = (int)(bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES);
    MPI_Irecv((char *)recv + off, len, MPI_BYTE, from, 0, comm, &reqs[n++]);
    MPI_Isend((const char *)send + off, len, MPI_BYTE, to, 0, comm, &reqs[n++]);
  }
  return MPI_Waitall(n, reqs, statuses);
}

/* ---- Progress on stderr ----------------------------------------------------------------- */

typedef struct progress {
  int enabled;
  double start;
  double last;
  int width; /* characters of the line now shown, to erase it */
} progress_t;

static void progress_show(progress_t *pg, int k, int nsizes, size_t bytes, int rep, int iters,
                          int warmup) {
  double now = MPI_Wtime();
  if (!pg->enabled || now - pg->last < 0.25) {
    return;
  }
  pg->last = now;
  char sz[32];
  char line[160];
  int w =
      snprintf(line, sizeof line, "mpiar-bench: size %d/%d (%s), %s %d/%d, %.1f s", k + 1, nsizes,
               bench_format_size(bytes, sz, sizeof sz), rep < 0 ? "warm-up" : "repetition",
               rep < 0 ? rep + warmup + 1 : rep + 1, rep < 0 ? warmup : iters, now - pg->start);
  fprintf(stderr, "\r%s%*s", line, pg->width > w ? pg->width - w : 0, "");
  fflush(stderr);
  pg->width = w;
}

static void progress_clear(progress_t *pg) {
  if (pg->enabled && pg->width > 0) {
    fprintf(stderr, "\r%*s\r", pg->width, "");
    fflush(stderr);
    pg->width = 0;
  }
}

/* ---- Main ------------------------------------------------------------------------------- */

/* The sweep's sizes in bytes, rounded to whole elements, without repeats. */
static int make_sizes(const bench_opts_t *o, size_t esize, size_t **out) {
  int n = 0;
  size_t *v = malloc(128 * sizeof *v);
  if (v == NULL) {
    return -1;
  }
  for (size_t s = o->min_bytes; s <= o->max_bytes && n < 128;) {
    size_t count = s / esize ? s / esize : 1;
    size_t bytes = count * esize;
    if (n == 0 || v[n - 1] != bytes) {
      v[n++] = bytes;
    }
    if (s > o->max_bytes / o->factor) {
      break;
    }
    s *= o->factor;
  }
  *out = v;
  return n;
}

static int iters_for(const bench_opts_t *o, size_t bytes) {
  if (o->iters > 0) {
    return o->iters;
  }
  size_t n = BENCH_AUTO_ITER_BYTES / bytes;
  if (n < BENCH_AUTO_ITERS_MIN) {
    n = BENCH_AUTO_ITERS_MIN;
  }
  return n > BENCH_AUTO_ITERS_MAX ? BENCH_AUTO_ITERS_MAX : (int)n;
}

static int warmup_for(const bench_opts_t *o, int iters) {
  if (o->warmup >= 0) {
    return o->warmup;
  }
  int w = iters / 10;
  return w < 1 ? 1 : (w > 20 ? 20 : w);
}

/* Bytes each rank moves in a bandwidth-optimal allreduce of `bytes`: 2(p-1)/p * bytes. */
static size_t limit_bytes_for(size_t bytes, int p) {
  return (size_t)ceil(2.0 * (double)(p - 1) * (double)bytes / (double)p);
}

/* Every rank agrees whether all of them succeeded: rank-local failures never leave one waiting. */
static int all_ok(int ok, MPI_Comm comm) {
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}

static void fill_run_info(bench_run_t *run) {
  run->kernel = mpiar_kernel_level();
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  lib[len < (int)sizeof lib ? len : (int)sizeof lib - 1] = '\0';
  size_t cut = strcspn(lib, "\n\r");
  lib[cut] = '\0';
  /* "MPICH Version:\t4.0.2": runs of blanks become one space, for a one-line header. */
  size_t w = 0;
  for (size_t r = 0; lib[r] != '\0'; r++) {
    int blank = lib[r] == ' ' || lib[r] == '\t';
    if (!blank || (w > 0 && lib[w - 1] != ' ')) {
      lib[w++] = blank ? ' ' : lib[r];
    }
  }
  lib[w] = '\0';
  /* Keep the version string short enough for the header line. */
  snprintf(run->mpi_library, sizeof run->mpi_library, "%.*s", 80, lib);
  if (gethostname(run->host, sizeof run->host) != 0) {
    snprintf(run->host, sizeof run->host, "unknown host");
  }
  run->host[sizeof run->host - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(run->date, sizeof run->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int main(int argc, char **argv) {
  bench_opts_t o;
  char err[512];
  int prc = bench_parse_args(argc, argv, &o, err, sizeof err);
  if (prc == BENCH_PARSE_HELP) {
    if (launcher_rank0()) {
      bench_usage(stdout);
    }
    return 0;
  }
  if (prc != BENCH_PARSE_OK) {
    if (launcher_rank0()) {
      fprintf(stderr, "mpiar-bench: %s\nTry 'mpiar-bench --help'.\n", err);
    }
    return 2;
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0;
  int p = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);

  int exit_code = 0;
  size_t *sizes = NULL;
  char *sendbuf = NULL;
  char *recvbuf = NULL;
  char *expected = NULL;
  double *times = NULL;
  double *scratch = NULL;
  MPI_Request *reqs = NULL;
  MPI_Status *statuses = NULL;
  FILE *csv = NULL;
  bench_run_t run;
  memset(&run, 0, sizeof run);
  run.opts = &o;
  run.nranks = p;
  run.mpi_index = -1;
  run.auto_index = -1;
  for (int a = 0; a < o.nalgs; a++) {
    if (strcmp(o.algs[a], BENCH_ALG_MPI) == 0) {
      run.mpi_index = a;
    } else if (strcmp(o.algs[a], BENCH_ALG_AUTO) == 0) {
      run.auto_index = a;
    }
  }

  /* Checks that need the rank count: identical on every rank, so all exit alike. */
  if (o.validate && exact_bound(o.dtype, o.op, p, err, sizeof err) != 0) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-bench: %s\n", err);
    }
    exit_code = 2;
    goto done;
  }
  if (rank == 0 && o.mpi_dropped) {
    fprintf(stderr, "mpiar-bench: MPI has no predefined %s datatype: the mpi column is left out\n",
            mpiar_dtype_name(o.dtype));
  }

  const size_t esize = mpiar_dtype_size(o.dtype);
  const int nsizes = make_sizes(&o, esize, &sizes);
  size_t capacity = 0;
  int max_iters = 1;
  for (int k = 0; k < nsizes; k++) {
    size_t lb = limit_bytes_for(sizes[k], p);
    size_t need = lb > sizes[k] ? lb : sizes[k];
    capacity = need > capacity ? need : capacity;
    int it = iters_for(&o, sizes[k]);
    max_iters = it > max_iters ? it : max_iters;
  }
  const int nslots = o.nalgs + 1; /* the algorithms, then the point-to-point limit */
  int ok = nsizes > 0;
  /* The limit's exchange reuses the buffers, which therefore hold max(bytes, limit bytes). */
  ok = ok && posix_memalign((void **)&sendbuf, 4096, capacity) == 0;
  ok = ok && posix_memalign((void **)&recvbuf, 4096, capacity) == 0;
  if (ok && o.validate) {
    ok = posix_memalign((void **)&expected, 4096, capacity) == 0;
  }
  ok = ok && (times = malloc((size_t)nslots * (size_t)max_iters * sizeof *times)) != NULL;
  ok = ok && (scratch = malloc((size_t)max_iters * sizeof *scratch)) != NULL;
  ok = ok && (reqs = malloc(2 * MAX_CHUNKS * sizeof *reqs)) != NULL;
  ok = ok && (statuses = malloc(2 * MAX_CHUNKS * sizeof *statuses)) != NULL;
  ok = ok && (run.rows = calloc((size_t)nsizes, sizeof *run.rows)) != NULL;
  if (!all_ok(ok, comm)) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-bench: out of memory for buffers of %zu bytes\n", capacity);
    }
    exit_code = 1;
    goto done;
  }
  /* Touch every page now, so that first-touch page faults never land in a timed run. */
  memset(sendbuf, 0, capacity);
  memset(recvbuf, 0, capacity);

  if (rank == 0) {
    fill_run_info(&run);
  } else {
    run.kernel = mpiar_kernel_level();
  }
  ok = 1;
  if (rank == 0 && o.csv_path != NULL) {
    csv = fopen(o.csv_path, "w");
    if (csv == NULL) {
      fprintf(stderr, "mpiar-bench: cannot write --csv '%s'\n", o.csv_path);
      ok = 0;
    } else {
      bench_csv_header(csv);
    }
  }
  if (rank == 0 && o.json_path != NULL) {
    /* Opened now, and rewritten at the end, so that an unwritable path fails before the sweep. */
    FILE *j = fopen(o.json_path, "w");
    if (j == NULL) {
      fprintf(stderr, "mpiar-bench: cannot write --json '%s'\n", o.json_path);
      ok = 0;
    } else {
      fclose(j);
    }
  }
  if (!all_ok(ok, comm)) {
    exit_code = 1;
    goto done;
  }

  progress_t pg = {rank == 0 && !o.quiet, MPI_Wtime(), 0.0, 0};
  if (rank == 0) {
    bench_table_header(stdout, &run);
  }
  long total_failures = 0;
  int messages = 0;
  for (int k = 0; k < nsizes; k++) {
    bench_row_t *row = &run.rows[k];
    row->bytes = sizes[k];
    row->count = sizes[k] / esize;
    row->limit_bytes = limit_bytes_for(sizes[k], p);
    row->iters = iters_for(&o, sizes[k]);
    row->warmup = warmup_for(&o, row->iters);
    for (size_t i = 0; i < row->count; i++) {
      store_value(o.dtype, sendbuf, i, input_value(o.op, i, rank));
      if (o.validate) {
        store_value(o.dtype, expected, i, expected_value(o.op, i, p));
      }
    }
    if (run.auto_index >= 0) {
      int rc = mpiar_select(row->bytes, p, &row->auto_pick, &row->auto_segment);
      if (rc != MPIAR_SUCCESS) {
        /* The selector reads the same environment on every rank. */
        if (rank == 0) {
          fprintf(stderr, "mpiar-bench: mpiar_select: %s: %s\n", mpiar_strerror(rc),
                  mpiar_last_error());
        }
        exit_code = 1;
        goto done;
      }
    }

    long failures[BENCH_MAX_ALGS] = {0};
    for (int rep = -row->warmup; rep < row->iters; rep++) {
      for (int s = 0; s < nslots; s++) {
        const int is_limit = s == o.nalgs;
        if (!is_limit && o.validate) {
          memset(recvbuf, POISON_BYTE, row->bytes);
        }
        if (!is_limit && o.inplace) {
          memcpy(recvbuf, sendbuf, row->bytes);
        }
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        int rc;
        if (is_limit) {
          rc = run_exchange(sendbuf, recvbuf, row->limit_bytes, rank, p, reqs, statuses, comm);
        } else if (s == run.mpi_index) {
          rc = run_mpi(sendbuf, recvbuf, row->count, &o, p, comm);
        } else {
          mpiar_options_t opts = MPIAR_OPTIONS_INIT;
          opts.algorithm = o.algs[s];
          rc = mpiar_allreduce_ex(o.inplace ? MPIAR_IN_PLACE : sendbuf, recvbuf, row->count,
                                  o.dtype, o.op, comm, &opts);
        }
        double t1 = MPI_Wtime();
        if (rc != 0) {
          /*
           * The other ranks may be waiting inside the same call: only an abort ends them all.
           */
          progress_clear(&pg);
          if (is_limit || s == run.mpi_index) {
            fprintf(stderr, "mpiar-bench: rank %d: MPI error %d at %zu bytes\n", rank, rc,
                    row->bytes);
          } else {
            fprintf(stderr, "mpiar-bench: rank %d: %s at %zu bytes: %s: %s\n", rank, o.algs[s],
                    row->bytes, mpiar_strerror(rc), mpiar_last_error());
          }
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rep >= 0) {
          times[(size_t)s * (size_t)row->iters + (size_t)rep] = t1 - t0;
        }
        if (!is_limit && o.validate && memcmp(recvbuf, expected, row->bytes) != 0) {
          failures[s]++;
          if (messages < MAX_FAILURE_MESSAGES) {
            messages++;
            size_t i = 0;
            while (memcmp(recvbuf + i * esize, expected + i * esize, esize) == 0) {
              i++;
            }
            char got[64];
            char want[64];
            describe(o.dtype, recvbuf, i, got, sizeof got);
            describe(o.dtype, expected, i, want, sizeof want);
            progress_clear(&pg);
            fprintf(stderr,
                    "mpiar-bench: rank %d: %s, %zu bytes, %s %d: element %zu is %s, expected "
                    "%s\n",
                    rank, o.algs[s], row->bytes, rep < 0 ? "warm-up" : "repetition",
                    rep < 0 ? rep + row->warmup : rep, i, got, want);
          }
        }
      }
      progress_show(&pg, k, nsizes, row->bytes, rep, row->iters, row->warmup);
    }

    MPI_Allreduce(MPI_IN_PLACE, times, nslots * row->iters, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, failures, o.nalgs, MPI_LONG, MPI_SUM, comm);
    for (int a = 0; a < o.nalgs; a++) {
      bench_stat_compute(times + (size_t)a * (size_t)row->iters, row->iters, scratch, &row->alg[a]);
      row->alg[a].failures = failures[a];
      total_failures += failures[a];
    }
    bench_stat_t lim;
    bench_stat_compute(times + (size_t)o.nalgs * (size_t)row->iters, row->iters, scratch, &lim);
    row->limit_median = row->limit_bytes > 0 ? lim.median : NAN;
    run.nrows = k + 1;
    if (rank == 0) {
      progress_clear(&pg);
      bench_table_row(stdout, &run, row);
      if (csv != NULL) {
        bench_csv_row(csv, &run, row);
      }
    }
  }
  progress_clear(&pg);

  if (rank == 0) {
    bench_table_summary(stdout, &run);
    if (o.validate) {
      printf("# check (-c): %ld failed results, counted on every rank\n", total_failures);
    }
    if (o.json_path != NULL) {
      FILE *j = fopen(o.json_path, "w");
      if (j == NULL || bench_json_write(j, &run) != 0) {
        fprintf(stderr, "mpiar-bench: cannot write --json '%s'\n", o.json_path);
        exit_code = 1;
      }
      if (j != NULL && fclose(j) != 0) {
        exit_code = 1;
      }
    }
    if (csv != NULL) {
      if (ferror(csv)) {
        fprintf(stderr, "mpiar-bench: error writing --csv '%s'\n", o.csv_path);
        exit_code = 1;
      }
      fclose(csv);
      csv = NULL;
    }
  }
  if (total_failures > 0) {
    exit_code = 1;
  }
  /* Rank 0's output errors decide the exit code of every rank. */
  MPI_Bcast(&exit_code, 1, MPI_INT, 0, comm);

done:
  if (csv != NULL) {
    fclose(csv);
  }
  free(run.rows);
  free(statuses);
  free(reqs);
  free(scratch);
  free(times);
  free(expected);
  free(recvbuf);
  free(sendbuf);
  free(sizes);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return exit_code;
}
