/*
 * mpiar-pingpong: the calibration of a link between two nodes, in plain MPI (no mpiar).
 *
 * Rank 0 and the first rank on another node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) decides
 * what a node is) measure:
 *   - the 4-byte ping-pong: half the median round trip is the link's latency (alpha);
 *   - a ping-pong per size (one direction at a time): size / (half the round trip);
 *   - a paired exchange per size (MPI_Isend + MPI_Irecv on both sides at once, as the
 *     bandwidth-optimal allreduce algorithms move their data): size / time, per direction.
 * A least-squares fit of the one-way times, t = alpha + n * beta, gives the alpha-beta model of
 * the link. With --rate (the rate the link was set to), each rate is also given as a percentage
 * of it, and the run ends with one line, "calibration: PASS" or "calibration: FAIL", that says
 * whether both patterns reach --require percent (default 90) at every size.
 *
 * Other ranks wait in a barrier. --where prints, for every rank, its host name, its node as MPI
 * sees it and the IPv4 addresses of its interfaces (the cluster harness checks rank placement
 * with it), and measures nothing.
 *
 * Usage: mpiexec -n P mpiar-pingpong [--rate BITS] [--require PCT] [-b MIN] [-e MAX] [-i ITERS]
 *                                     [--where]
 * Exit codes: 0 success (PASS, FAIL or no rate given), 1 run-time error, 2 bad arguments,
 * 3 with --strict when the calibration fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define TAG 7
/* Each size is timed for at least this long (and at least MIN_ITERS round trips). */
#define TARGET_SECONDS 0.3
#define MIN_ITERS 3
#define LATENCY_ITERS 1000
#define MAX_SIZES 32

typedef struct {
  double rate_bits; /* the link rate as set, bit/s; 0: unknown */
  double require;   /* percent of the rate both patterns must reach */
  size_t min_bytes; /* sizes of the sweep: min, min * 4, ..., max */
  size_t max_bytes;
  int iters;  /* round trips per size; 0: TARGET_SECONDS worth */
  int where;  /* print the placement only */
  int strict; /* exit 3 when the calibration fails */
} opts_t;

typedef struct {
  size_t bytes;
  double pingpong; /* one-way seconds, median */
  double exchange; /* seconds per paired exchange, median */
} row_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* "64M", "1G", "1gbit", "200mbit", "4K": an integer with an optional K/M/G suffix (powers of
 * 1024 for sizes, of 1000 for rates, as tc reads them). @return 0 or -1. */
static int parse_scaled(const char *text, int rate, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || !(v > 0)) {
    return -1;
  }
  double unit = rate ? 1000.0 : 1024.0;
  switch (*end) {
  case 'k':
  case 'K':
    v *= unit, end++;
    break;
  case 'm':
  case 'M':
    v *= unit * unit, end++;
    break;
  case 'g':
  case 'G':
    v *= unit * unit * unit, end++;
    break;
  default:
    break;
  }
  if (rate && strcmp(end, "bit") == 0) {
    end += 3;
  }
  if (*end != '\0') {
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, opts_t *o, const char **err) {
  *o = (opts_t){.require = 90.0, .min_bytes = 1 << 20, .max_bytes = 64 << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    double v = 0;
    if (strcmp(a, "--where") == 0) {
      o->where = 1;
    } else if (strcmp(a, "--strict") == 0) {
      o->strict = 1;
    } else if (i + 1 >= argc) {
      *err = "unknown option, or an option without its value";
      return -1;
    } else if (strcmp(a, "--rate") == 0) {
      if (parse_scaled(argv[++i], 1, &o->rate_bits) != 0) {
        *err = "--rate needs a rate in bit/s, e.g. 1gbit, 200mbit, 1e9";
        return -1;
      }
    } else if (strcmp(a, "--require") == 0) {
      char *end = NULL;
      o->require = strtod(argv[++i], &end);
      if (*end != '\0' || !(o->require > 0 && o->require <= 100)) {
        *err = "--require needs a percentage in (0, 100]";
        return -1;
      }
    } else if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
      if (parse_scaled(argv[++i], 0, &v) != 0 || v < 4 || v > (double)(1u << 30)) {
        *err = "-b and -e need a size from 4 bytes to 1G";
        return -1;
      }
      *(a[1] == 'b' ? &o->min_bytes : &o->max_bytes) = (size_t)v;
    } else if (strcmp(a, "-i") == 0) {
      char *end = NULL;
      long n = strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000000) {
        *err = "-i needs a positive number of round trips";
        return -1;
      }
      o->iters = (int)n;
    } else {
      *err = "unknown option";
      return -1;
    }
  }
  if (o->min_bytes > o->max_bytes) {
    *err = "-b is larger than -e";
    return -1;
  }
  return 0;
}

/* The IPv4 addresses of this process's interfaces other than loopback, space separated. */
static void local_addresses(char *buf, size_t len) {
  struct ifaddrs *list = NULL;
  size_t used = 0;
  buf[0] = '\0';
  if (getifaddrs(&list) != 0) {
    snprintf(buf, len, "(getifaddrs: %s)", strerror(errno));
    return;
  }
  for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET) {
      continue;
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
    if (strncmp(ip, "127.", 4) == 0 || used + 1 >= len) {
      continue;
    }
    int w = snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", i->ifa_name, ip);
    used += w > 0 ? (size_t)w : 0;
  }
  freeifaddrs(list);
  if (used == 0) {
    snprintf(buf, len, "(no IPv4 address)");
  }
}

/* Node of every rank: the index, in order of first appearance, of its shared-memory group. */
static int node_ids(MPI_Comm comm, int *node) {
  int rank, size, local_rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm shm;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
  MPI_Comm_rank(shm, &local_rank);
  /* The lowest world rank of each group names it. */
  int leader = rank;
  MPI_Bcast(&leader, 1, MPI_INT, 0, shm);
  MPI_Comm_free(&shm);
  MPI_Allgather(&leader, 1, MPI_INT, node, 1, MPI_INT, comm);
  int nnodes = 0;
  for (int r = 0; r < size; r++) {
    if (node[r] == r) {
      node[r] = nnodes++;
    } else {
      node[r] = node[node[r]];
    }
  }
  return nnodes;
}

static void print_where(int rank, int size, const int *node) {
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  char addrs[512];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  local_addresses(addrs, sizeof addrs);
  char line[768];
  snprintf(line, sizeof line, "rank %d of %d: host %s, node %d, %s", rank, size, host, node[rank],
           addrs);
  /* Rank 0 prints every line, in rank order. */
  if (rank == 0) {
    puts(line);
    for (int r = 1; r < size; r++) {
      MPI_Recv(line, (int)sizeof line, MPI_CHAR, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      puts(line);
    }
    fflush(stdout);
  } else {
    MPI_Send(line, (int)sizeof line, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
  }
}

/*
 * One timed pattern between `me` and `peer` (0: ping-pong, rank 0 of the pair starts; 1: paired
 * exchange), `iters` times. times[] gets one entry per repetition: half the round trip for the
 * ping-pong, the whole exchange otherwise. Both sides of the pair run the same loop.
 */
static void run_pattern(int exchange, int first, int peer, char *sbuf, char *rbuf, size_t bytes,
                        int iters, double *times) {
  int n = (int)bytes;
  for (int it = 0; it < iters; it++) {
    double t0 = MPI_Wtime();
    if (exchange) {
      MPI_Request req[2];
      MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: GCC 12 warns on MPICH's definition */
      MPI_Irecv(rbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(sbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &req[1]);
      MPI_Waitall(2, req, st);
    } else if (first) {
      MPI_Send(sbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD);
      MPI_Recv(rbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(rbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(sbuf, n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD);
    }
    double dt = MPI_Wtime() - t0;
    times[it] = exchange ? dt : dt / 2;
  }
}

/* Round trips for one size: the option, or enough for TARGET_SECONDS at the estimate `one`
 * (seconds per repetition) that the pair agrees on. */
static int iterations(const opts_t *o, double one) {
  if (o->iters > 0) {
    return o->iters;
  }
  double n = TARGET_SECONDS / (one > 0 ? one : 1e-6);
  return n < MIN_ITERS ? MIN_ITERS : (n > LATENCY_ITERS ? LATENCY_ITERS : (int)n);
}

/* Median of a pattern at one size for the pair, after one untimed repetition that also gives
 * the estimate for the repetition count (both sides take the larger of their two estimates, so
 * they agree on the count). */
static double measure(const opts_t *o, int exchange, int first, int peer, char *sbuf, char *rbuf,
                      size_t bytes, double *times) {
  double est = 0, other = 0;
  run_pattern(exchange, first, peer, sbuf, rbuf, bytes, 1, &est);
  MPI_Sendrecv(&est, 1, MPI_DOUBLE, peer, TAG + 1, &other, 1, MPI_DOUBLE, peer, TAG + 1,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int iters = iterations(o, fmax(est, other));
  run_pattern(exchange, first, peer, sbuf, rbuf, bytes, iters, times);
  return median(times, iters);
}

/* "4 MiB", "512 KiB", "1000 B". */
static const char *size_name(size_t bytes, char *buf, size_t len) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) {
    snprintf(buf, len, "%zu MiB", bytes >> 20);
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    snprintf(buf, len, "%zu KiB", bytes >> 10);
  } else {
    snprintf(buf, len, "%zu B", bytes);
  }
  return buf;
}

static double pct(const opts_t *o, size_t bytes, double seconds) {
  return o->rate_bits > 0 ? 100.0 * (double)bytes * 8.0 / seconds / o->rate_bits : NAN;
}

static void report(const opts_t *o, int peer, const int *node, double latency, const row_t *rows,
                   int nrows, int *failed) {
  char addrs[512];
  local_addresses(addrs, sizeof addrs);
  printf("# mpiar-pingpong: rank 0 (node %d, %s) <-> rank %d (node %d)", node[0], addrs, peer,
         node[peer]);
  if (o->rate_bits > 0) {
    printf(", link set to %.4g Gbit/s", o->rate_bits / 1e9);
  }
  printf("\n# 4-byte ping-pong, one way (median of %d): %.2f us\n", LATENCY_ITERS, latency * 1e6);
  printf("# %12s  %14s %9s %7s  %14s %9s %7s\n", "size", "ping-pong us", "Gbit/s", "% link",
         "exchange us", "Gbit/s", "% link");
  /* Least squares over the ping-pong sizes and the 4-byte point: t = alpha + n beta. */
  double sx = 4, sy = latency, sxx = 16, sxy = 4 * latency;
  double worst = INFINITY;
  for (int i = 0; i < nrows; i++) {
    const row_t *r = &rows[i];
    double b = (double)r->bytes;
    double pp = pct(o, r->bytes, r->pingpong), ex = pct(o, r->bytes, r->exchange);
    char name[32];
    printf("  %12s  %14.1f %9.3f %7.1f  %14.1f %9.3f %7.1f\n",
           size_name(r->bytes, name, sizeof name), r->pingpong * 1e6, b * 8 / r->pingpong / 1e9, pp,
           r->exchange * 1e6, b * 8 / r->exchange / 1e9, ex);
    worst = fmin(worst, fmin(pp, ex));
    sx += b, sy += r->pingpong, sxx += b * b, sxy += b * r->pingpong;
  }
  int n = nrows + 1;
  double beta = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double alpha = (sy - beta * sx) / n;
  printf("# fit of the one-way times, t = alpha + n beta: alpha %.2f us, beta %.4g ns/B "
         "(%.4g Gbit/s)\n",
         alpha * 1e6, beta * 1e9, 8 / beta / 1e9);
  *failed = 0;
  if (o->rate_bits > 0 && nrows > 0) {
    *failed = !(worst >= o->require);
    printf("calibration: %s: the slowest size and pattern reached %.1f %% of the link "
           "(required: %.0f %% for ping-pong and exchange at every size)\n",
           *failed ? "FAIL" : "PASS", worst, o->require);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  opts_t o;
  const char *err = NULL;
  if (parse_args(argc, argv, &o, &err) != 0) {
    if (rank == 0) {
      fprintf(stderr,
              "mpiar-pingpong: %s\nusage: mpiar-pingpong [--rate BITS] [--require PCT] [-b MIN] "
              "[-e MAX] [-i ITERS] [--strict] [--where]\n",
              err);
    }
    MPI_Finalize();
    return 2;
  }
  int *node = malloc((size_t)size * sizeof *node);
  if (node == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  node_ids(MPI_COMM_WORLD, node);
  if (o.where) {
    print_where(rank, size, node);
    free(node);
    MPI_Finalize();
    return 0;
  }
  int peer = -1;
  for (int r = 1; r < size && peer < 0; r++) {
    peer = node[r] != node[0] ? r : -1;
  }
  if (peer < 0) {
    if (rank == 0) {
      fprintf(stderr, "mpiar-pingpong: all %d ranks are on one node; nothing to calibrate\n", size);
    }
    free(node);
    MPI_Finalize();
    return 1;
  }

  int nrows = 0;
  row_t rows[MAX_SIZES];
  for (size_t b = o.min_bytes; b <= o.max_bytes && nrows < MAX_SIZES; b *= 4) {
    rows[nrows++].bytes = b;
  }
  size_t maxb = nrows ? rows[nrows - 1].bytes : 4;
  char *sbuf = malloc(maxb), *rbuf = malloc(maxb);
  double *times = malloc(LATENCY_ITERS * sizeof *times);
  if (sbuf == NULL || rbuf == NULL || times == NULL) {
    fprintf(stderr, "mpiar-pingpong: rank %d: out of memory for %zu bytes\n", rank, maxb);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sbuf, rank + 1, maxb);
  double latency = 0;
  if (rank == 0 || rank == peer) {
    int first = rank == 0;
    int partner = first ? peer : 0;
    run_pattern(0, first, partner, sbuf, rbuf, 4, 100, times); /* connect and warm up */
    run_pattern(0, first, partner, sbuf, rbuf, 4, LATENCY_ITERS, times);
    latency = median(times, LATENCY_ITERS);
    for (int i = 0; i < nrows; i++) {
      rows[i].pingpong = measure(&o, 0, first, partner, sbuf, rbuf, rows[i].bytes, times);
      rows[i].exchange = measure(&o, 1, first, partner, sbuf, rbuf, rows[i].bytes, times);
    }
  }
  int failed = 0;
  if (rank == 0) {
    report(&o, peer, node, latency, rows, nrows, &failed);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(sbuf);
  free(rbuf);
  free(times);
  free(node);
  MPI_Finalize();
  return failed && o.strict ? 3 : 0;
}
