/*
 * Settings: every MPIAR_* environment variable, read by one parser with one documented grammar.
 *
 * All settings are read together, once per process, at the first call that needs any of them.
 * A malformed value makes every call that reads settings fail with MPIAR_ERR_ENV (the detail names
 * the variable, its value and what is accepted), so a typo is never ignored in one place and
 * obeyed in another. The grammar:
 *   size     a non-negative integer with an optional K, M or G suffix (powers of 1024; "64K",
 *            "64KiB", "64KB" are the same)
 *   integer  decimal, within the variable's range
 *   boolean  1, 0, on, off, yes, no, true, false (any case)
 *   choice   one of the listed words
 * An empty value is the same as an unset one.
 */
#ifndef MPIAR_SETTINGS_H
#define MPIAR_SETTINGS_H

#include <stddef.h>

/* How a rank waits for messages (MPIAR_WAIT). */
typedef enum mpiar__wait_policy {
  MPIAR__WAIT_AUTO = 0, /* spin, then yield the core when the node has more ranks than cores */
  MPIAR__WAIT_SPIN,     /* never give the core away */
  MPIAR__WAIT_YIELD     /* spin briefly, then yield the core between polls */
} mpiar__wait_policy_t;

/* Smallest pipeline segment accepted (MPIAR_SEGMENT_BYTES, mpiar_options_t.segment_bytes). */
#define MPIAR__SEGMENT_MIN ((size_t)4096)

/* Largest MPIAR_NUM_THREADS accepted; the threads used are also capped at the usable CPUs. */
#define MPIAR__THREADS_MAX 4096

typedef struct mpiar__settings {
  char algorithm[1024]; /* MPIAR_ALGORITHM: "" = auto; a registry name, or file:PATH */
  size_t segment_bytes; /* MPIAR_SEGMENT_BYTES: 0 = the selector's choice, else >= 4 KiB */
  long timeout_ms;      /* MPIAR_TIMEOUT_MS: 0 = no deadline */
  int wait;             /* MPIAR_WAIT: mpiar__wait_policy_t */
  int kernel;           /* MPIAR_KERNEL: -1 = the best level, else 0 reference, 1 avx2, 2 avx512 */
  long num_threads;     /* MPIAR_NUM_THREADS: 0 = cores per rank */
  int debug;            /* MPIAR_DEBUG */
  int debug_schedule;   /* MPIAR_DEBUG_SCHEDULE */
  int check;            /* MPIAR_CHECK: agree on the arguments before every collective */
  int reproducible;     /* MPIAR_REPRODUCIBLE */
  int progress_thread;  /* MPIAR_PROGRESS=thread */
  int topology_flat;    /* MPIAR_TOPOLOGY=flat */
  int transport_mpi;    /* MPIAR_TRANSPORT=mpi: every message on MPI (auto: the node transport
                         * where it was measured to win, engine/transport_node.h) */
  size_t fusion_bytes;  /* MPIAR_FUSION_BYTES (valid when fusion_set) */
  int fusion_set;
  int kv_shared;         /* MPIAR_KV_SHARED: the kvstore's fusion buffers in node-shared memory
                          * where that gives the same bits (default 1; kvstore/shared.c) */
  int pmpi;               /* MPIAR_PMPI: 0 passes every MPI_Allreduce through */
  char pmpi_stats[1024];  /* MPIAR_PMPI_STATS: "" off, "1" stderr, else a path */
  char tuning_file[1024]; /* MPIAR_TUNING_FILE: "" = none */
  unsigned generation;    /* a new value at every load (checks of the values are kept by it) */
  int malformed;          /* 0, or 1 + the index in mpiar__settings_names of the first bad one */
} mpiar__settings_t;

/*
 * The process's settings, parsed at the first call. @return MPIAR_SUCCESS, or MPIAR_ERR_ENV
 * with the detail of the first malformed variable (the same error on every call and thread).
 * *out is always set (to the defaults where a value was malformed).
 */
int mpiar__settings(const mpiar__settings_t **out);

/*
 * A call's deadline in ms (0: none) by the one rule of every entry point: an option > 0 is the
 * deadline, an option < 0 means none, an option of 0 defers to MPIAR_TIMEOUT_MS (@p set).
 */
static inline long mpiar__deadline_ms(long option_ms, const mpiar__settings_t *set) {
  return option_ms > 0 ? option_ms : (option_ms < 0 ? 0 : set->timeout_ms);
}

/* Parse the environment again (tests that change it between calls; not thread-safe). */
void mpiar__settings_reload(void);

/*
 * Parse one value of variable @p name (as the environment would) into a scratch settings struct,
 * for tests and fuzzing of the grammar. @return MPIAR_SUCCESS, MPIAR_ERR_ENV, or
 * MPIAR_ERR_INVALID_ARG for a name that is not a setting.
 */
int mpiar__settings_parse_one(const char *name, const char *value, mpiar__settings_t *out);

/* Names of the settings, NULL-terminated (documentation and tests). */
extern const char *const mpiar__settings_names[];

/* 1 + the index of setting @p name in mpiar__settings_names (0: not a setting). */
int mpiar__settings_number(const char *name);

/* Parsers of the grammar (0 on success, -1 if malformed). */
int mpiar__parse_size(const char *text, size_t *out);
int mpiar__parse_long(const char *text, long lo, long hi, long *out);
int mpiar__parse_bool(const char *text, int *out);

#endif /* MPIAR_SETTINGS_H */
