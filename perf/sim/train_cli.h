/* mpiar-sim --train: the options and the table (train_cli.c). */
#ifndef MPIAR_TRAIN_CLI_H
#define MPIAR_TRAIN_CLI_H

#include <stddef.h>

#include "common/tool.h"
#include "train.h"

#define TRAIN_LIST_MAX 16

/* A comma-separated list of positive numbers (--link-gbps, --node-tflops). */
typedef struct train_list {
  double v[TRAIN_LIST_MAX];
  int n;
} train_list_t;

/* The tool_arg_t parser of a train_list_t. */
int train_parse_doubles(const char *value, void *dest, char *err, size_t errlen);

typedef struct train_cli {
  const char *model; /* built-in name or model file */
  long node_counts[TRAIN_LIST_MAX];
  int nnodes;
  int ppn;
  double batch;
  double backward_factor;
  train_list_t flops; /* TFLOP/s per node */
  train_list_t links; /* Gb/s between nodes; none: --beta-inter */
  size_t fusion[TRAIN_LIST_MAX];
  int nfusion;
  long ps[TRAIN_LIST_MAX];
  int nps;
  int overlap;
  mpiar__cost_params_t cost;
  int have_alpha_inter, have_beta_inter;
  const char *tuning_file; /* fitted parameters instead of --alpha/--beta/--gamma */
  const mpiar__algorithm_t *algorithm;
  size_t segment_bytes;
  int json;
} train_cli_t;

/* Print the table. @return the exit code (usage errors through @p spec). */
int train_run(const train_cli_t *o, const tool_spec_t *spec);

#endif /* MPIAR_TRAIN_CLI_H */
