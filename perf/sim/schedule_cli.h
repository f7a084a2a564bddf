/*
 * mpiar-sim --schedule FILE and --export ALGORITHM (schedule_cli.c): a schedule file verified
 * and simulated beside the built-in algorithms, and a built-in schedule written as a file.
 */
#ifndef MPIAR_PERF_SCHEDULE_CLI_H
#define MPIAR_PERF_SCHEDULE_CLI_H

#include <stddef.h>

#include "algorithms/algorithms.h"
#include "mpiar_types.h"
#include "sim/network.h"

typedef struct schedule_cli {
  const char *schedule;   /* --schedule FILE */
  const char *export_alg; /* --export ALGORITHM */
  const char *output;     /* --output FILE for --export (NULL: stdout) */
  int nranks;             /* --ranks (0: the file's) */
  size_t bytes;           /* --bytes */
  int have_bytes;
  size_t segment_bytes;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int in_place;
  int data; /* -1: when small enough, 0 / 1: --no-data / --data */
  mpiar__cost_params_t cost;
  const mpiar__topology_t *topo;  /* two levels, or NULL */
  const mpiar__network_t *net;    /* a routed network, or NULL */
} schedule_cli_t;

/* @return the exit code: 0, 1 (verification or simulation failed), 2 (usage). */
int schedule_cli_run(const schedule_cli_t *c);

#endif /* MPIAR_PERF_SCHEDULE_CLI_H */
