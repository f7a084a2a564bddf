/*
 * Statistics of the interposer (MPIAR_PMPI_STATS): how many MPI_Allreduce calls mpiar ran, how
 * many bytes, with which algorithm, and how many went to PMPI_Allreduce for which reason.
 *
 * Counters are relaxed atomics: threads on different communicators may count at the same time,
 * and the totals are only read in MPI_Finalize, after every other call has returned.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "interpose/interpose.h"

/* Algorithms beyond this many share the last slot, printed as "other". */
#define MAX_ALGORITHMS 16

static const char *const fallback_names[MPIAR__PMPI_FB_NREASONS] = {
#define MPIAR__PMPI_FB_NAME_(name, text) text,
    MPIAR__PMPI_FALLBACK_MAP(MPIAR__PMPI_FB_NAME_)
#undef MPIAR__PMPI_FB_NAME_
};

/* The counters, laid out as one array so that a single reduction sums them over the ranks. */
enum {
  SLOT_ACCEL_CALLS,
  SLOT_ACCEL_BYTES,
  SLOT_ERRORS,
  SLOT_FALLBACK,                                            /* one per reason */
  SLOT_ALG_CALLS = SLOT_FALLBACK + MPIAR__PMPI_FB_NREASONS, /* MAX_ALGORITHMS + 1 */
  SLOT_ALG_BYTES = SLOT_ALG_CALLS + MAX_ALGORITHMS + 1,     /* MAX_ALGORITHMS + 1 */
  SLOT_COUNT = SLOT_ALG_BYTES + MAX_ALGORITHMS + 1
};

static _Atomic uint64_t counters[SLOT_COUNT];
static int enabled;
static char *path; /* NULL: stderr */

const char *mpiar__pmpi_fallback_name(int reason) {
  return (reason >= 0 && reason < MPIAR__PMPI_FB_NREASONS) ? fallback_names[reason] : "unknown";
}

void mpiar__pmpi_stats_configure(const char *value) {
  enabled = 0;
  free(path);
  path = NULL;
  if (value == NULL || value[0] == '\0' || strcmp(value, "0") == 0) {
    return;
  }
  enabled = 1;
  if (strcmp(value, "1") != 0) {
    path = strdup(value);
    /* Without memory for the name, the report still reaches the user on stderr. */
  }
}

int mpiar__pmpi_stats_enabled(void) {
  return enabled;
}

static void add(int slot, uint64_t v) {
  atomic_fetch_add_explicit(&counters[slot], v, memory_order_relaxed);
}

void mpiar__pmpi_stats_fallback(int reason) {
  if (enabled && reason >= 0 && reason < MPIAR__PMPI_FB_NREASONS) {
    add(SLOT_FALLBACK + reason, 1);
  }
}

void mpiar__pmpi_stats_error(void) {
  if (enabled) {
    add(SLOT_ERRORS, 1);
  }
}

/* @return the registry index of `algorithm`, or MAX_ALGORITHMS for "other". */
static int algorithm_slot(const char *algorithm) {
  int n = mpiar_algorithm_count();
  for (int i = 0; i < n && i < MAX_ALGORITHMS; i++) {
    const char *name = mpiar_algorithm_name(i);
    if (algorithm != NULL && name != NULL && strcmp(name, algorithm) == 0) {
      return i;
    }
  }
  return MAX_ALGORITHMS;
}

void mpiar__pmpi_stats_accelerated(const char *algorithm, size_t bytes) {
  if (!enabled) {
    return;
  }
  int a = algorithm_slot(algorithm);
  add(SLOT_ACCEL_CALLS, 1);
  add(SLOT_ACCEL_BYTES, bytes);
  add(SLOT_ALG_CALLS + a, 1);
  add(SLOT_ALG_BYTES + a, bytes);
}

static void print_report(FILE *f, const uint64_t *v, int nranks) {
  uint64_t calls = v[SLOT_ACCEL_CALLS] + v[SLOT_ERRORS];
  for (int r = 0; r < MPIAR__PMPI_FB_NREASONS; r++) {
    calls += v[SLOT_FALLBACK + r];
  }
  /* One "mpiar_pmpi key value" line per counter, zeros included, so that scripts can parse it. */
  fprintf(f, "mpiar_pmpi ranks %d\n", nranks);
  fprintf(f, "mpiar_pmpi calls %llu\n", (unsigned long long)calls);
  fprintf(f, "mpiar_pmpi accelerated.calls %llu\n", (unsigned long long)v[SLOT_ACCEL_CALLS]);
  fprintf(f, "mpiar_pmpi accelerated.bytes %llu\n", (unsigned long long)v[SLOT_ACCEL_BYTES]);
  fprintf(f, "mpiar_pmpi errors %llu\n", (unsigned long long)v[SLOT_ERRORS]);
  int n = mpiar_algorithm_count();
  if (n > MAX_ALGORITHMS) {
    n = MAX_ALGORITHMS;
  }
  for (int a = 0; a <= MAX_ALGORITHMS; a++) {
    /* The "other" slot is printed only when used, i.e. when the registry outgrew the table. */
    if ((a >= n && a < MAX_ALGORITHMS) || (a == MAX_ALGORITHMS && v[SLOT_ALG_CALLS + a] == 0)) {
      continue;
    }
    const char *name = (a < n) ? mpiar_algorithm_name(a) : "other";
    fprintf(f, "mpiar_pmpi algorithm.%s.calls %llu\n", name,
            (unsigned long long)v[SLOT_ALG_CALLS + a]);
    fprintf(f, "mpiar_pmpi algorithm.%s.bytes %llu\n", name,
            (unsigned long long)v[SLOT_ALG_BYTES + a]);
  }
  for (int r = 0; r < MPIAR__PMPI_FB_NREASONS; r++) {
    fprintf(f, "mpiar_pmpi fallback.%s %llu\n", fallback_names[r],
            (unsigned long long)v[SLOT_FALLBACK + r]);
  }
}

void mpiar__pmpi_stats_report(void) {
  if (!enabled) {
    return;
  }
  uint64_t v[SLOT_COUNT];
  for (int i = 0; i < SLOT_COUNT; i++) {
    v[i] = atomic_load_explicit(&counters[i], memory_order_relaxed);
  }
  int rank = 0;
  int nranks = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
  /* PMPI, not MPI: the report must neither go through this interposer nor be counted. */
  if (rank == 0) {
    PMPI_Reduce(MPI_IN_PLACE, v, SLOT_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  } else {
    PMPI_Reduce(v, NULL, SLOT_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    return;
  }
  FILE *f = stderr;
  if (path != NULL) {
    f = fopen(path, "w");
    if (f == NULL) {
      fprintf(stderr, "mpiar_pmpi: cannot write MPIAR_PMPI_STATS file '%s'; statistics follow\n",
              path);
      f = stderr;
    }
  }
  print_report(f, v, nranks);
  if (f != stderr) {
    fclose(f);
  } else {
    fflush(f);
  }
}
