/*
 * mpiar-bench: the sweep. For each size, every algorithm and every plan of the point-to-point
 * limit (limit.c) runs once per repetition, in an order shuffled anew for each repetition (the
 * same on every rank), so that drift on a shared machine (other processes, frequency changes)
 * hits every column alike and no column gains from its place in the sequence.
 * Each run is timed between a barrier and its own end on every rank; the per-rank times are
 * reduced with MPI_MAX once per size, outside the timed loop, so the reported time is that of
 * the slowest rank.
 *
 * The benchmark itself may call MPI's collectives (barrier, the MAX reduction of the times and
 * MPI_Allreduce as the `mpi` column); the library it measures never does.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "bench.h"
#include "common/tool.h"
#include "algorithms/algorithms.h"

/* At most this many mismatch messages per rank; the count of failures is always complete. */
#define MAX_FAILURE_MESSAGES 5

/* Pattern written into the result buffer before each checked run, so a stale result fails. */
#define POISON_BYTE 0xA5

/* ---- Inputs with exactly known results (-c) -------------------------------------------- */

/*
 * The input of rank r at element i: small non-negative integers, chosen per operation so that
 * every partial result of any reduction order is an exactly representable integer (see
 * exact_bound()), hence every algorithm must produce the same bits as the expected values.
 */
static uint64_t input_value(mpiar_op_t op, size_t i, int r) {
  uint64_t h = tool_mix64(((uint64_t)i << 16) ^ (uint64_t)r);
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
    return tool_mix64((uint64_t)i << 16) % 4 + 2 * (uint64_t)r;
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

/* The sweep's sizes in bytes (--sizes, or -b, -e, -f), rounded to whole elements, without
 * repeats. */
static int make_sizes(const bench_opts_t *o, size_t esize, size_t **out) {
  *out = malloc(128 * sizeof **out);
  if (*out == NULL) {
    return -1;
  }
  if (o->nsizes == 0) {
    return tool_size_sweep(o->min_bytes, o->max_bytes, o->factor, esize, *out, 128);
  }
  int n = 0;
  for (int i = 0; i < o->nsizes; i++) {
    int k = tool_size_sweep(o->sizes[i], o->sizes[i], 2, esize, *out + n, 1);
    n += k > 0 && (n == 0 || (*out)[n] != (*out)[n - 1]) ? k : 0;
  }
  return n;
}

static int iters_for(const bench_opts_t *o, size_t bytes) {
  const int lo = o->min_iters > 0 ? o->min_iters : BENCH_AUTO_ITERS_MIN;
  return o->iters > 0 ? o->iters
                      : tool_iters_for(bytes, BENCH_AUTO_ITER_BYTES, lo,
                                       lo > BENCH_AUTO_ITERS_MAX ? lo : BENCH_AUTO_ITERS_MAX);
}

static int warmup_for(const bench_opts_t *o, int iters) {
  return o->warmup >= 0 ? o->warmup : tool_warmup_for(iters);
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

/* Ranks of `comm` on this node: they share its memory. */
static int local_ranks(MPI_Comm comm) {
  MPI_Comm node;
  int n = 1;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
  }
  return n;
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

/* Everything one run holds: communicators, buffers, the rows and their limit plans. */
typedef struct bench_state {
  bench_opts_t o;
  bench_run_t run;
  MPI_Comm comm;       /* the algorithms and MPI_Allreduce run here */
  MPI_Comm limit_comm; /* the limit's plans, so that their tags meet nothing else */
  int rank;
  int p;
  size_t esize;
  size_t *sizes;
  int nsizes;
  char *sendbuf;  /* max(bytes, limit bytes) */
  char *recvbuf;  /* bytes */
  char *expected; /* bytes, with -c */
  char *limitbuf; /* what the limit's plans receive */
  char *shm_send; /* mpiar_alloc buffers of the "/shared" columns (send_capacity, recv_capacity) */
  char *shm_recv;
  int any_shared;
  uint64_t *stream; /* the memory floor's bandwidth pass (run.node_buffer bytes) */
  size_t send_capacity, recv_capacity, limit_capacity;
  double *times;   /* (algorithms + plans) x repetitions of one size */
  double *scratch; /* repetitions */
  MPI_Request *reqs;
  MPI_Status *statuses;
  int max_iters, max_slots;
  size_t max_reqs;
  FILE *csv;
  long total_failures;
  int messages;
  int flat; /* one node, or one rank per node: hierarchical columns are flat ones */
  progress_t pg;
} bench_state_t;

/*
 * The segment the library runs for @p seg at @p count elements (it raises small ones so that a
 * block has at most MPIAR__SEGMENTS_MAX), or 0 when that does not split a ring block: the
 * schedule is then the unsegmented one.
 */
static size_t effective_segment(size_t seg, size_t count, size_t es, int p) {
  if (seg == 0 || count == 0) {
    return 0;
  }
  size_t eff = mpiar__segment_elems(seg, count, es, p) * es;
  size_t block = (count + (size_t)p - 1) / (size_t)p * es;
  return eff < block ? eff : 0;
}

/*
 * The limit's plans of row k: the exchange, then each algorithm's schedule once (`auto` adds
 * its pick where that is not already there, e.g. with a segment). @return an mpiar code.
 */
static int build_plans(bench_state_t *st, bench_row_t *row) {
  const bench_opts_t *o = &st->o;
  row->plans = calloc((size_t)o->nalgs + 1, sizeof *row->plans);
  if (row->plans == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  if (bench_plan_exchange(&row->plans[0], row->limit_bytes, st->rank, st->p) != 0) {
    return MPIAR_ERR_NOMEM;
  }
  row->nplans = 1;
  for (int a = 0; a < o->nalgs && st->p > 1; a++) {
    if (a == st->run.mpi_index) {
      continue;
    }
    const int is_auto = a == st->run.auto_index;
    if (!is_auto && strcmp(o->alg_base[a], BENCH_ALG_AUTO) == 0) {
      continue; /* `auto/repro`: its pick is not known here; the others' plans bound it */
    }
    if (o->alg_shared[a]) {
      continue; /* the zero-copy path sends no messages */
    }
    bench_plan_t *plan = &row->plans[row->nplans];
    size_t seg = effective_segment(is_auto ? row->auto_segment : o->alg_segment[a], row->count,
                                   st->esize, st->p);
    int rc = bench_plan_schedule(plan, is_auto ? row->auto_pick : o->alg_base[a], seg, st->rank,
                                 st->p, row->count, o->dtype, o->op, o->inplace);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
    int dup = 0;
    for (int q = 1; q < row->nplans && !dup; q++) {
      dup = strcmp(row->plans[q].name, plan->name) == 0;
    }
    if (dup) {
      bench_plan_free(plan);
    } else {
      row->nplans++;
    }
  }
  return MPIAR_SUCCESS;
}

/* Sizes, rows, auto's picks, the limit's plans, and how large every buffer must be. */
static int plan_sweep(bench_state_t *st) {
  bench_opts_t *o = &st->o;
  st->nsizes = make_sizes(o, st->esize, &st->sizes);
  if (st->nsizes <= 0 ||
      (st->run.rows = calloc((size_t)st->nsizes, sizeof *st->run.rows)) == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  st->max_iters = 1;
  st->max_slots = 1;
  st->max_reqs = 1;
  for (int k = 0; k < st->nsizes; k++) {
    bench_row_t *row = &st->run.rows[k];
    row->bytes = st->sizes[k];
    row->count = st->sizes[k] / st->esize;
    row->limit_bytes = limit_bytes_for(st->sizes[k], st->p);
    row->iters = iters_for(o, st->sizes[k]);
    row->warmup = warmup_for(o, row->iters);
    if (st->run.auto_index >= 0) {
      /* What `auto` runs on this communicator, and where that choice comes from (a tuning
       * table, the model); collective, like the calls it predicts. */
      int rc = mpiar_select_comm(st->comm, row->count, o->dtype, &row->auto_pick,
                                 &row->auto_segment, &row->auto_source);
      if (rc != MPIAR_SUCCESS) {
        return rc;
      }
    }
    int rc = build_plans(st, row);
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
    size_t send = row->bytes > row->limit_bytes ? row->bytes : row->limit_bytes;
    st->send_capacity = send > st->send_capacity ? send : st->send_capacity;
    st->recv_capacity = row->bytes > st->recv_capacity ? row->bytes : st->recv_capacity;
    for (int q = 0; q < row->nplans; q++) {
      const bench_plan_t *plan = &row->plans[q];
      st->limit_capacity =
          plan->recv_bytes > st->limit_capacity ? plan->recv_bytes : st->limit_capacity;
      st->max_reqs = plan->nreqs > st->max_reqs ? plan->nreqs : st->max_reqs;
    }
    st->max_iters = row->iters > st->max_iters ? row->iters : st->max_iters;
    st->max_slots = o->nalgs + row->nplans > st->max_slots ? o->nalgs + row->nplans : st->max_slots;
  }
  return MPIAR_SUCCESS;
}

/* The memory a rank's buffers take. */
static double buffer_bytes(const bench_state_t *st) {
  return (double)st->send_capacity * (st->any_shared ? 2.0 : 1.0) +
         (double)st->recv_capacity * ((st->o.validate ? 2.0 : 1.0) + (st->any_shared ? 1.0 : 0.0)) +
         (double)st->limit_capacity + (double)st->run.node_buffer;
}

/* ---- The memory floor -------------------------------------------------------------------- */

/* Passes of the bandwidth measurement before the sweep (after one untimed) and after it. */
#define FLOOR_PASSES 5
#define FLOOR_PASSES_END 3

/*
 * The last-level cache of this CPU in bytes, from sysfs (the kernel's view: glibc's
 * sysconf(_SC_LEVEL3_CACHE_SIZE) reports the whole package's on some AMD parts, e.g. 384 MiB for a
 * 32 MiB L3 seen by a virtual machine); sysconf where sysfs says nothing, 0 if neither knows.
 */
static size_t last_level_cache(void) {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; i++) {
    char path[96];
    int level = 0;
    char size[32] = "";
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
      continue;
    }
    int ok = fscanf(f, "%d", &level) == 1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    f = fopen(path, "r");
    if (f == NULL) {
      continue;
    }
    ok = ok && fscanf(f, "%31s", size) == 1;
    fclose(f);
    size_t bytes = 0;
    if (ok && level > best_level && tool_parse_size(size, &bytes) == 0) {
      best_level = level;
      best = bytes;
    }
  }
  if (best == 0) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    best = l3 > 0 ? (size_t)l3 : 0;
  }
  return best;
}

/*
 * Bytes per rank of the bandwidth pass: by default the node's ranks together stream through
 * twice the last-level cache (so what they touch cannot stay in it), and each at least 64 MiB.
 */
static size_t floor_buffer_bytes(const bench_opts_t *o, int local) {
  if (o->floor_buffer != 0) {
    return o->floor_buffer / sizeof(uint64_t) * sizeof(uint64_t);
  }
  size_t per_rank = 2 * last_level_cache() / (size_t)(local > 0 ? local : 1);
  size_t lo = (size_t)64 << 20;
  per_rank = per_rank < lo ? lo : per_rank;
  return (per_rank + 4095) / 4096 * 4096;
}

/*
 * One in-place streaming update of this rank's buffer (every 8-byte word incremented: each line
 * read once and written once), every rank at once between barriers. @return the slowest rank's
 * time, seconds.
 */
static double stream_pass(bench_state_t *st) {
  uint64_t *v = st->stream;
  const size_t n = st->run.node_buffer / sizeof *v;
  MPI_Barrier(st->comm);
  double t0 = MPI_Wtime();
  for (size_t i = 0; i < n; i++) {
    v[i] += 1;
  }
  double dt = MPI_Wtime() - t0, worst = 0;
  MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, st->comm);
  return worst;
}

/*
 * The node's memory bandwidth (bytes read plus written per second by a node's ranks together)
 * over @p passes passes: the median into *median and, when min/max are not NULL, the range.
 */
static void measure_memory(bench_state_t *st, int passes, double *median, double *min,
                           double *max) {
  double bw[FLOOR_PASSES];
  const double bytes = 2.0 * (double)st->run.node_buffer * st->run.ranks_per_node;
  for (int i = 0; i < passes; i++) {
    bw[i] = bytes / stream_pass(st);
  }
  *median = tool_median(bw, passes); /* sorts bw */
  if (min != NULL) {
    *min = bw[0];
    *max = bw[passes - 1];
  }
}

static int allocate_buffers(bench_state_t *st) {
  int ok = posix_memalign((void **)&st->sendbuf, 4096, st->send_capacity) == 0;
  ok = ok && posix_memalign((void **)&st->recvbuf, 4096, st->recv_capacity) == 0;
  if (ok && st->o.validate) {
    ok = posix_memalign((void **)&st->expected, 4096, st->recv_capacity) == 0;
  }
  if (ok && st->limit_capacity > 0) {
    ok = posix_memalign((void **)&st->limitbuf, 4096, st->limit_capacity) == 0;
  }
  size_t slots = (size_t)st->max_slots * (size_t)st->max_iters;
  if (ok && st->run.node_buffer > 0) {
    ok = posix_memalign((void **)&st->stream, 4096, st->run.node_buffer) == 0;
  }
  ok = ok && (st->times = malloc(slots * sizeof *st->times)) != NULL;
  ok = ok && (st->scratch = malloc((size_t)st->max_iters * sizeof *st->scratch)) != NULL;
  ok = ok && (st->reqs = malloc(st->max_reqs * sizeof *st->reqs)) != NULL;
  ok = ok && (st->statuses = malloc(st->max_reqs * sizeof *st->statuses)) != NULL;
  if (ok) {
    /* Touch every page now, so that first-touch page faults never land in a timed run. */
    memset(st->sendbuf, 0, st->send_capacity);
    memset(st->recvbuf, 0, st->recv_capacity);
    if (st->limitbuf != NULL) {
      memset(st->limitbuf, 0, st->limit_capacity);
    }
    if (st->stream != NULL) {
      memset(st->stream, 0, st->run.node_buffer);
    }
  }
  return ok;
}

/* The "/shared" columns' buffers: collective over the communicator, on every rank alike.
 * @return an mpiar code. */
static int allocate_shared(bench_state_t *st) {
  int rc = mpiar_alloc(st->comm, st->send_capacity, (void **)&st->shm_send);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar_alloc(st->comm, st->recv_capacity, (void **)&st->shm_recv);
  }
  if (rc == MPIAR_SUCCESS) {
    memset(st->shm_send, 0, st->send_capacity);
    memset(st->shm_recv, 0, st->recv_capacity);
  }
  return rc;
}

/* Compare a checked result with the expected values; report the first few mismatches. */
static void check_result(bench_state_t *st, const bench_row_t *row, const char *recv, int s,
                         int rep, long *failures) {
  if (memcmp(recv, st->expected, row->bytes) == 0) {
    return;
  }
  failures[s]++;
  if (st->messages >= MAX_FAILURE_MESSAGES) {
    return;
  }
  st->messages++;
  const size_t es = st->esize;
  size_t i = 0;
  while (memcmp(recv + i * es, st->expected + i * es, es) == 0) {
    i++;
  }
  char got[64];
  char want[64];
  describe(st->o.dtype, recv, i, got, sizeof got);
  describe(st->o.dtype, st->expected, i, want, sizeof want);
  progress_clear(&st->pg);
  fprintf(stderr, "mpiar-bench: rank %d: %s, %zu bytes, %s %d: element %zu is %s, expected %s\n",
          st->rank, st->o.algs[s], row->bytes, rep < 0 ? "warm-up" : "repetition",
          rep < 0 ? rep + row->warmup : rep, i, got, want);
}

/* One slot of one repetition: an algorithm, `mpi`, or one of the limit's plans. */
static void run_slot(bench_state_t *st, const bench_row_t *row, int s, int rep, long *failures) {
  const bench_opts_t *o = &st->o;
  const int plan = s - o->nalgs; /* >= 0: a plan of the limit */
  const int shared = plan < 0 && o->alg_shared[s];
  char *send = shared ? st->shm_send : st->sendbuf;
  char *recv = shared ? st->shm_recv : st->recvbuf;
  if (plan < 0 && o->validate) {
    memset(recv, POISON_BYTE, row->bytes);
  }
  if (plan < 0 && o->inplace) {
    memcpy(recv, send, row->bytes);
  }
  MPI_Barrier(st->comm);
  double t0 = MPI_Wtime();
  int rc;
  if (plan >= 0) {
    rc = bench_plan_run(&row->plans[plan], st->sendbuf, st->limitbuf, st->reqs, st->statuses,
                        st->limit_comm);
  } else if (s == st->run.mpi_index) {
    rc = run_mpi(send, recv, row->count, o, st->p, st->comm);
  } else {
    mpiar_options_t opts = MPIAR_OPTIONS_INIT;
    opts.algorithm = o->alg_base[s];
    opts.segment_bytes = o->alg_segment[s];
    opts.reproducible = o->alg_repro[s];
    rc = mpiar_allreduce_ex(o->inplace ? MPIAR_IN_PLACE : send, recv, row->count, o->dtype, o->op,
                            st->comm, &opts);
  }
  double t1 = MPI_Wtime();
  if (rc != 0) {
    /* The other ranks may be waiting inside the same call: only an abort ends them all. */
    progress_clear(&st->pg);
    if (plan >= 0 || s == st->run.mpi_index) {
      fprintf(stderr, "mpiar-bench: rank %d: MPI error %d in %s at %zu bytes\n", st->rank, rc,
              plan >= 0 ? row->plans[plan].name : "MPI_Allreduce", row->bytes);
    } else {
      fprintf(stderr, "mpiar-bench: rank %d: %s at %zu bytes: %s: %s\n", st->rank, o->algs[s],
              row->bytes, mpiar_strerror(rc), mpiar_last_error());
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rep >= 0) {
    st->times[(size_t)s * (size_t)row->iters + (size_t)rep] = t1 - t0;
  }
  if (plan < 0 && o->validate) {
    check_result(st, row, recv, s, rep, failures);
  }
}

/* Time every slot of row k, interleaved in shuffled orders, and reduce the times over the ranks. */
static void run_size(bench_state_t *st, int k) {
  bench_opts_t *o = &st->o;
  bench_row_t *row = &st->run.rows[k];
  for (size_t i = 0; i < row->count; i++) {
    store_value(o->dtype, st->sendbuf, i, input_value(o->op, i, st->rank));
    if (o->validate) {
      store_value(o->dtype, st->expected, i, expected_value(o->op, i, st->p));
    }
  }
  if (st->shm_send != NULL) {
    memcpy(st->shm_send, st->sendbuf, row->bytes);
  }
  const int nslots = o->nalgs + row->nplans;
  long failures[BENCH_MAX_ALGS] = {0};
  int order[2 * BENCH_MAX_ALGS + 2];
  for (int rep = -row->warmup; rep < row->iters; rep++) {
    tool_shuffle(order, nslots, ((uint64_t)k << 32) + (uint64_t)(rep + row->warmup));
    for (int i = 0; i < nslots; i++) {
      run_slot(st, row, order[i], rep, failures);
    }
    progress_show(&st->pg, k, st->nsizes, row->bytes, rep, row->iters, row->warmup);
  }
  MPI_Allreduce(MPI_IN_PLACE, st->times, nslots * row->iters, MPI_DOUBLE, MPI_MAX, st->comm);
  MPI_Allreduce(MPI_IN_PLACE, failures, o->nalgs, MPI_LONG, MPI_SUM, st->comm);
  for (int a = 0; a < o->nalgs; a++) {
    bench_stat_compute(st->times + (size_t)a * (size_t)row->iters, row->iters, st->scratch,
                       &row->alg[a]);
    row->alg[a].failures = failures[a];
    st->total_failures += failures[a];
  }
  /* The best column: the fastest median of every algorithm and segment (not auto, not mpi,
   * not a reproducible-mode column).
   * A segment column that runs the same schedule as an earlier column (its segment does not
   * split a block at this size, or the library raises it to another column's) is left out:
   * the minimum over copies of one schedule would only pick the luckiest noise. */
  row->best_alg = -1;
  row->best_time = NAN;
  for (int a = 0; a < o->nalgs; a++) {
    int copy = 0;
    const mpiar__algorithm_t *alg = mpiar__algorithm_find(o->alg_base[a]);
    if (alg != NULL && (alg->flags & MPIAR__ALG_HIERARCHICAL) && st->flat) {
      copy = 1; /* on one node (or one rank per node) it builds its flat equivalent */
    }
    if (o->alg_segment[a] != 0) {
      size_t eff = effective_segment(o->alg_segment[a], row->count, st->esize, st->p);
      for (int q = 0; q < a && !copy; q++) {
        copy = q != st->run.auto_index && q != st->run.mpi_index && !o->alg_repro[q] &&
               strcmp(o->alg_base[q], o->alg_base[a]) == 0 &&
               effective_segment(o->alg_segment[q], row->count, st->esize, st->p) == eff;
      }
    }
    /* Reproducible-mode columns are another contract, and shared-buffer columns another
     * memory, not a choice auto could make. */
    row->best_candidate[a] = !copy && !o->alg_repro[a] && !o->alg_shared[a] &&
                             a != st->run.auto_index && a != st->run.mpi_index &&
                             strcmp(o->alg_base[a], BENCH_ALG_AUTO) != 0;
    if (row->best_candidate[a] && (row->best_alg < 0 || row->alg[a].median < row->best_time)) {
      row->best_alg = a;
      row->best_time = row->alg[a].median;
    }
  }
  /* The limit: the best repetition of the fastest plan. */
  row->limit_time = NAN;
  row->limit_plan = NULL;
  for (int q = 0; q < row->nplans && row->limit_bytes > 0; q++) {
    bench_stat_t lim;
    bench_stat_compute(st->times + (size_t)(o->nalgs + q) * (size_t)row->iters, row->iters,
                       st->scratch, &lim);
    if (row->limit_plan == NULL || lim.min < row->limit_time) {
      row->limit_time = lim.min;
      row->limit_plan = row->plans[q].name;
    }
  }
  row->floor_bytes = bench_floor_bytes(row->bytes, st->run.ranks_per_node, st->p, o->inplace);
  row->floor_time = row->floor_bytes / st->run.node_bw;
  st->run.nrows = k + 1;
  if (st->rank == 0) {
    progress_clear(&st->pg);
    bench_table_row(stdout, &st->run, row);
    fflush(stdout);
    if (st->csv != NULL) {
      bench_csv_row(st->csv, &st->run, row);
    }
  }
}

/*
 * Rank 0 opens the output files before anything is planned or measured, so that a path that
 * cannot be written is a bad argument: every rank exits at once with TOOL_EXIT_USAGE.
 */
static int open_outputs(bench_state_t *st) {
  int ok = 1;
  const bench_opts_t *o = &st->o;
  if (st->rank == 0 && o->csv_path != NULL) {
    st->csv = fopen(o->csv_path, "w");
    if (st->csv == NULL) {
      fprintf(stderr, "mpiar-bench: --csv: cannot write '%s': %s\nTry 'mpiar-bench --help'.\n",
              o->csv_path, strerror(errno));
      ok = 0;
    } else {
      bench_csv_header(st->csv);
    }
  }
  if (st->rank == 0 && ok && o->json_path != NULL) {
    /* Opened now, and rewritten at the end. */
    FILE *j = fopen(o->json_path, "w");
    if (j == NULL) {
      fprintf(stderr, "mpiar-bench: --json: cannot write '%s': %s\nTry 'mpiar-bench --help'.\n",
              o->json_path, strerror(errno));
      ok = 0;
    } else {
      fclose(j);
    }
  }
  return all_ok(ok, st->comm);
}

/* Rank 0: the summary, the JSON file, the CSV file's state. @return the exit code. */
static int finish_outputs(bench_state_t *st) {
  int exit_code = 0;
  const bench_opts_t *o = &st->o;
  bench_table_summary(stdout, &st->run);
  if (o->validate) {
    printf("# check (-c): %ld failed results, counted on every rank\n", st->total_failures);
  }
  if (o->json_path != NULL) {
    FILE *j = fopen(o->json_path, "w");
    if (j == NULL || bench_json_write(j, &st->run) != 0) {
      fprintf(stderr, "mpiar-bench: cannot write --json '%s'\n", o->json_path);
      exit_code = 1;
    }
    if (j != NULL && fclose(j) != 0) {
      exit_code = 1;
    }
  }
  if (st->csv != NULL) {
    if (ferror(st->csv)) {
      fprintf(stderr, "mpiar-bench: error writing --csv '%s'\n", o->csv_path);
      exit_code = 1;
    }
    fclose(st->csv);
    st->csv = NULL;
  }
  return exit_code;
}

/* Setup on every rank; @return -1 to run the sweep, else the exit code every rank ends with. */
static int setup(bench_state_t *st) {
  char err[512];
  const bench_opts_t *o = &st->o;
  if (!open_outputs(st)) {
    return TOOL_EXIT_USAGE;
  }
  /* Checks that need the rank count: identical on every rank, so all exit alike. */
  if (o->validate && exact_bound(o->dtype, o->op, st->p, err, sizeof err) != 0) {
    if (st->rank == 0) {
      fprintf(stderr, "mpiar-bench: %s\n", err);
    }
    return TOOL_EXIT_USAGE;
  }
  if (st->rank == 0 && o->mpi_dropped) {
    fprintf(stderr, "mpiar-bench: MPI has no predefined %s datatype: the mpi column is left out\n",
            mpiar_dtype_name(o->dtype));
  }
  int local = local_ranks(st->comm), lmin = local, lmax = local;
  MPI_Allreduce(&local, &lmin, 1, MPI_INT, MPI_MIN, st->comm);
  MPI_Allreduce(&local, &lmax, 1, MPI_INT, MPI_MAX, st->comm);
  st->flat = lmin == st->p || lmax == 1;
  st->run.ranks_per_node = lmax;
  st->run.node_buffer = floor_buffer_bytes(o, lmax);
  for (int a = 0; a < o->nalgs; a++) {
    st->any_shared |= o->alg_shared[a];
  }
  int rc = plan_sweep(st);
  if (!all_ok(rc == MPIAR_SUCCESS, st->comm)) {
    fprintf(stderr, "mpiar-bench: rank %d: planning the sweep: %s: %s\n", st->rank,
            mpiar_strerror(rc), mpiar_last_error());
    return TOOL_EXIT_FAIL;
  }
  /* Every rank of the node holds its buffers at once: refuse what cannot fit, on every rank. */
  int fits = tool_check_memory(buffer_bytes(st) * local_ranks(st->comm),
                               "-e and --floor-buffer (the buffers of every rank on this node)",
                               err, sizeof err) == 0;
  if (!all_ok(fits, st->comm)) {
    if (st->rank == 0) {
      fprintf(stderr, "mpiar-bench: %s\nTry 'mpiar-bench --help'.\n", err);
    }
    return TOOL_EXIT_USAGE;
  }
  if (!all_ok(allocate_buffers(st), st->comm)) {
    if (st->rank == 0) {
      fprintf(stderr, "mpiar-bench: out of memory for buffers of %.0f bytes\n", buffer_bytes(st));
    }
    return TOOL_EXIT_FAIL;
  }
  if (st->any_shared && (rc = allocate_shared(st)) != MPIAR_SUCCESS) {
    /* mpiar_alloc agrees on its outcome: every rank returns alike. */
    if (st->rank == 0) {
      fprintf(stderr, "mpiar-bench: mpiar_alloc of the shared columns' buffers: %s: %s\n",
              mpiar_strerror(rc), mpiar_last_error());
    }
    return TOOL_EXIT_FAIL;
  }
  /* The node's bandwidth for the memory floor, before the sweep (one untimed pass first). */
  stream_pass(st);
  st->run.node_passes = FLOOR_PASSES;
  measure_memory(st, FLOOR_PASSES, &st->run.node_bw, &st->run.node_bw_min, &st->run.node_bw_max);
  if (st->rank == 0) {
    fill_run_info(&st->run);
  } else {
    st->run.kernel = mpiar_kernel_level();
  }
  return -1;
}

static void teardown(bench_state_t *st) {
  if (st->csv != NULL) {
    fclose(st->csv);
  }
  for (int k = 0; k < st->nsizes && st->run.rows != NULL; k++) {
    for (int q = 0; q < st->run.rows[k].nplans; q++) {
      bench_plan_free(&st->run.rows[k].plans[q]);
    }
    free(st->run.rows[k].plans);
  }
  free(st->run.rows);
  mpiar_free(st->shm_recv);
  mpiar_free(st->shm_send);
  free(st->stream);
  free(st->statuses);
  free(st->reqs);
  free(st->scratch);
  free(st->times);
  free(st->limitbuf);
  free(st->expected);
  free(st->recvbuf);
  free(st->sendbuf);
  free(st->sizes);
  MPI_Comm_free(&st->limit_comm);
  MPI_Comm_free(&st->comm);
}

int main(int argc, char **argv) {
  static bench_state_t st;
  int ex = bench_parse_args(argc, argv, &st.o);
  if (ex >= 0) {
    return ex;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_dup(MPI_COMM_WORLD, &st.comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &st.limit_comm);
  MPI_Comm_rank(st.comm, &st.rank);
  MPI_Comm_size(st.comm, &st.p);
  st.esize = mpiar_dtype_size(st.o.dtype);
  if (st.o.collective != NULL) {
    const int code = bench_collective_run(&st.o, st.comm, st.rank, st.p);
    MPI_Comm_free(&st.limit_comm);
    MPI_Comm_free(&st.comm);
    MPI_Finalize();
    return code;
  }
  st.run.opts = &st.o;
  st.run.nranks = st.p;
  st.run.mpi_index = -1;
  st.run.auto_index = -1;
  if (st.o.nalgs == 0) {
    /* The default list: the hierarchical algorithms only where the job spans several nodes. */
    int multi = local_ranks(st.comm) < st.p, any = 0;
    MPI_Allreduce(&multi, &any, 1, MPI_INT, MPI_MAX, st.comm);
    char err[256];
    /* -m shared: the list's mpiar columns on shared buffers (an -a list was turned already). */
    if (bench_default_algorithms(&st.o, any, err, sizeof err) != 0 ||
        (st.o.shared_mode && bench_shared_list(&st.o, err, sizeof err) != 0)) {
      if (st.rank == 0) {
        fprintf(stderr, "mpiar-bench: %s\n", err);
      }
      MPI_Comm_free(&st.limit_comm);
      MPI_Comm_free(&st.comm);
      MPI_Finalize();
      return TOOL_EXIT_USAGE;
    }
  }
  st.run.shared_index = -1;
  for (int a = 0; a < st.o.nalgs; a++) {
    if (strcmp(st.o.algs[a], BENCH_ALG_AUTO BENCH_SHARED_SUFFIX) == 0) {
      st.run.shared_index = a;
    }
    if (strcmp(st.o.algs[a], BENCH_ALG_MPI) == 0) {
      st.run.mpi_index = a;
    } else if (strcmp(st.o.algs[a], BENCH_ALG_AUTO) == 0) {
      st.run.auto_index = a; /* `auto/repro` is not: its pick is that of reproducible mode */
    }
  }

  int exit_code = setup(&st);
  if (exit_code < 0) {
    st.pg =
        (progress_t){st.rank == 0 && !st.o.quiet && tool_progress_wanted(), MPI_Wtime(), 0.0, 0};
    if (st.rank == 0) {
      bench_table_header(stdout, &st.run);
    }
    for (int k = 0; k < st.nsizes; k++) {
      run_size(&st, k);
    }
    progress_clear(&st.pg);
    /* Again after the sweep: the summary shows how far the machine drifted meanwhile. */
    st.run.node_passes_end = FLOOR_PASSES_END;
    measure_memory(&st, FLOOR_PASSES_END, &st.run.node_bw_end, NULL, NULL);
    exit_code = st.rank == 0 ? finish_outputs(&st) : 0;
    if (st.total_failures > 0) {
      exit_code = TOOL_EXIT_FAIL;
    }
    /* Rank 0's output errors decide the exit code of every rank. */
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, st.comm);
  }
  teardown(&st);
  MPI_Finalize();
  return exit_code;
}
