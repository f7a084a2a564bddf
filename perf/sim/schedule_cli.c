/*
 * mpiar-sim --schedule FILE: read the file, verify it (the checks every run under MPI makes: the
 * steps matched, no hazard, the full reduction on every rank), then simulate it at --bytes and
 * print its time and traffic (per rank, and per link on a --topology network) beside every
 * built-in algorithm's at that size.
 *
 * mpiar-sim --export ALGORITHM --ranks P [--bytes N] [--in-place]: write the builder's schedules
 * of every rank as a schedule file (schedfile.h: the chunk is the largest element count that
 * divides every offset and length, so the file gives the builder's steps exactly at this count).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"
#include "schedule/schedfile.h"
#include "schedule_cli.h"
#include "sim/schedfile_alg.h"
#include "sim/sim.h"

#define DATA_LIMIT_BYTES (256.0 * 1024 * 1024)

static int export_schedule(const schedule_cli_t *c) {
  const mpiar__algorithm_t *alg = mpiar__algorithm_find_any(c->export_alg);
  if (alg == NULL || (alg->flags & MPIAR__ALG_FILE)) {
    fprintf(stderr, "mpiar-sim: --export: '%s' is not a built-in algorithm\n", c->export_alg);
    return 2;
  }
  if (c->nranks < 1) {
    fprintf(stderr, "mpiar-sim: --export needs --ranks P\n");
    return 2;
  }
  const int p = c->nranks;
  const size_t es = mpiar_dtype_size(c->dtype);
  /* Default: 4096 elements per rank, the size at which every builder takes its general form. */
  size_t count = c->have_bytes ? c->bytes / es : (size_t)p * 4096;
  if (count == 0) {
    fprintf(stderr, "mpiar-sim: --export: --bytes must hold at least one element\n");
    return 2;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = c->dtype;
  cfg.in_place = c->in_place;
  cfg.topology = c->topo;
  cfg.segment_elems = (alg->flags & MPIAR__ALG_SEGMENTED)
                          ? mpiar__segment_elems(c->segment_bytes, count, es, p)
                          : 0;
  mpiar__schedule_t *s = calloc((size_t)p, sizeof *s);
  if (s == NULL) {
    fprintf(stderr, "mpiar-sim: out of memory\n");
    return 1;
  }
  int built = 0, rc = MPIAR_SUCCESS;
  for (; built < p && rc == MPIAR_SUCCESS; built++) {
    rc = mpiar__sim_build(&cfg, built, &s[built]);
  }
  int ex = 0;
  if (rc != MPIAR_SUCCESS) {
    built--;
    fprintf(stderr, "mpiar-sim: --export %s: %s\n", alg->name, mpiar_last_error());
    ex = 1;
  } else {
    FILE *out = c->output != NULL ? fopen(c->output, "w") : stdout;
    if (out == NULL) {
      fprintf(stderr, "mpiar-sim: cannot write '%s'\n", c->output);
      ex = 1;
    } else {
      char err[256];
      char name[72];
      snprintf(name, sizeof name, "%.50s", alg->name);
      for (char *q = name; *q != '\0'; q++) {
        *q = (*q == '/' || *q == '=') ? '_' : *q;
      }
      int order = (alg->flags & MPIAR__ALG_CANONICAL) ? MPIAR__SCHEDFILE_ORDER_CANONICAL
                                                      : MPIAR__SCHEDFILE_ORDER_NONE;
      if (mpiar__schedfile_write(out, name, s, p, order, err, sizeof err) != MPIAR_SUCCESS) {
        fprintf(stderr, "mpiar-sim: --export %s: %s\n", alg->name, err);
        ex = 1;
      }
      if (out != stdout && fclose(out) != 0) {
        fprintf(stderr, "mpiar-sim: cannot write '%s'\n", c->output);
        ex = 1;
      }
    }
  }
  for (int r = 0; r < built; r++) {
    mpiar__schedule_destroy(&s[r]);
  }
  free(s);
  return ex;
}

/* Per-rank bytes and messages of the file's steps at @p count. */
static int print_ranks(const mpiar__sim_config_t *cfg) {
  printf("rank  messages_out  bytes_out     messages_in  bytes_in      bytes_reduced  scratch\n");
  for (int r = 0; r < cfg->nranks; r++) {
    mpiar__schedule_t s;
    if (mpiar__sim_build(cfg, r, &s) != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-sim: rank %d: %s\n", r, mpiar_last_error());
      return 1;
    }
    mpiar__schedule_totals_t t;
    mpiar__schedule_totals(&s, &t);
    printf("%-5d %-13zu %-13zu %-12zu %-13zu %-14zu %zu\n", r, t.messages_sent, t.bytes_sent,
           t.messages_received, t.bytes_received, t.bytes_reduced, t.scratch_bytes);
    mpiar__schedule_destroy(&s);
  }
  return 0;
}

static void print_row(const char *name, const mpiar__sim_result_t *res, int mark) {
  printf("%-36s %12.3f %14zu %12zu %s\n", name, res->time_s * 1e6, res->bytes_sent_max,
         res->messages_max, mark ? "<- the file" : "");
}

static int run_file(const schedule_cli_t *c) {
  const mpiar__algorithm_t *alg = mpiar__schedfile_algorithm(c->schedule);
  char why[1024];
  const mpiar__schedfile_t *f = alg != NULL ? mpiar__schedfile_of(alg, why, sizeof why) : NULL;
  if (alg == NULL) {
    snprintf(why, sizeof why, "--schedule: an empty or too long path");
  }
  if (f == NULL) {
    fprintf(stderr, "mpiar-sim: %s\n", why);
    return 1;
  }
  const int p = f->nranks;
  if (c->nranks != 0 && c->nranks != p) {
    fprintf(stderr, "mpiar-sim: --ranks %d: the file '%s' is written for %d ranks\n", c->nranks,
            c->schedule, p);
    return 1;
  }
  if ((c->topo != NULL && c->topo->nranks != p) ||
      (c->net != NULL && mpiar__network_nodes(c->net) != 0 &&
       mpiar__network_nodes(c->net) != p)) {
    fprintf(stderr, "mpiar-sim: the topology does not have the file's %d ranks\n", p);
    return 2;
  }
  const size_t es = mpiar_dtype_size(c->dtype);
  printf("file %s: %s%s%d ranks, %u chunks, %u scratch chunks, inplace %s, order %s, %zu steps, "
         "content hash %016llx\n",
         c->schedule, f->name, f->name[0] ? ", " : "", p, (unsigned)f->chunks,
         (unsigned)f->scratch,
         f->inplace == MPIAR__SCHEDFILE_INPLACE_NO
             ? "no"
             : (f->inplace == MPIAR__SCHEDFILE_INPLACE_YES ? "yes" : "only"),
         f->order == MPIAR__SCHEDFILE_ORDER_CANONICAL ? "canonical" : "none", f->nsteps,
         (unsigned long long)f->hash);
  /* Verification: the checks of a run under MPI, for each in-place mode the file serves. */
  int failed = 0;
  for (int ip = 0; ip < 2; ip++) {
    if ((ip && f->inplace == MPIAR__SCHEDFILE_INPLACE_NO) ||
        (!ip && f->inplace == MPIAR__SCHEDFILE_INPLACE_ONLY)) {
      continue;
    }
    if (mpiar__schedfile_fit(alg, p, f->chunks, ip, why, sizeof why)) {
      printf("verified%s: every message matched, no hazard, the full reduction on every rank "
             "(int32 sum exact; float32 sum%s and average)\n",
             ip ? " in place" : "", f->order == MPIAR__SCHEDFILE_ORDER_CANONICAL
                                        ? " bit for bit in the canonical order"
                                        : "");
    } else {
      printf("FAILED%s: %s\n", ip ? " in place" : "", why);
      failed = 1;
    }
  }
  if (failed) {
    return 1;
  }
  /* The size: --bytes, or the smallest multiple of the chunks of at least 1 MiB. */
  size_t count = 0;
  if (c->have_bytes) {
    if (c->bytes % es != 0) {
      fprintf(stderr, "mpiar-sim: --bytes must be a multiple of the element size (%s)\n",
              mpiar_dtype_name(c->dtype));
      return 2;
    }
    count = c->bytes / es;
  } else {
    size_t want = ((size_t)1 << 20) / es;
    count = (want + f->chunks - 1) / f->chunks * f->chunks;
  }
  const int in_place = f->inplace == MPIAR__SCHEDFILE_INPLACE_ONLY ? 1 : c->in_place;
  if (!mpiar__schedfile_fits(f, p, count, in_place, why, sizeof why)) {
    fprintf(stderr, "mpiar-sim: %s\n", why);
    return 1;
  }
  const size_t bytes = count * es;
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = mpiar__schedfile_unverified(alg);
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = c->dtype;
  cfg.op = c->op;
  cfg.in_place = in_place;
  cfg.cost = c->cost;
  cfg.topology = c->topo;
  cfg.network = c->net;
  cfg.data = c->data >= 0 ? c->data : (double)p * (double)bytes <= DATA_LIMIT_BYTES;
  int nlinks = c->net != NULL ? mpiar__network_links(c->net, p) : 0;
  double *links = nlinks > 0 ? calloc((size_t)nlinks, sizeof *links) : NULL;
  cfg.link_bytes = links;
  mpiar__sim_result_t res;
  memset(&res, 0, sizeof res);
  char sz[32];
  printf("\nsimulated at %s (%zu elements of %s, %s%s):\n", tool_format_bytes((double)bytes, sz,
                                                                             sizeof sz),
         count, mpiar_dtype_name(c->dtype), mpiar_op_name(c->op), in_place ? ", in place" : "");
  if (mpiar__sim_run(&cfg, &res) != MPIAR_SUCCESS || !res.ok) {
    printf("FAILED: %s\n", res.ok ? mpiar_last_error() : res.error);
    free(links);
    return 1;
  }
  printf("time %.3f us, %zu messages, most bytes sent by a rank %zu, %s\n", res.time_s * 1e6,
         res.messages, res.bytes_sent_max,
         cfg.data ? "data checked" : "timing only (--data to check the data)");
  if (print_ranks(&cfg) != 0) {
    free(links);
    return 1;
  }
  if (links != NULL) {
    printf("busiest link %.0f bytes; bytes per link:\n", res.link_bytes_max);
    for (int l = 0; l < nlinks; l++) {
      if (links[l] > 0) {
        char ln[64];
        mpiar__network_link_name(c->net, p, l, ln, sizeof ln);
        printf("  %-16s %.0f\n", ln, links[l]);
      }
    }
  }
  /* Beside the built-in algorithms at the same size (timing only). */
  printf("\n%-36s %12s %14s %12s\n", "algorithm", "time_us", "bytes_out_max", "msgs_max");
  print_row(alg->name, &res, 1);
  for (int a = 0; a < mpiar__algorithm_count; a++) {
    const mpiar__algorithm_t *b = &mpiar__algorithms[a];
    mpiar__sim_config_t bc = cfg;
    bc.algorithm = b;
    bc.data = 0;
    bc.link_bytes = NULL;
    bc.quotient = c->net == NULL;
    bc.segment_elems = (b->flags & MPIAR__ALG_SEGMENTED)
                           ? mpiar__segment_elems(c->segment_bytes, count, es, p)
                           : 0;
    mpiar__sim_result_t br;
    memset(&br, 0, sizeof br);
    if (mpiar__sim_run(&bc, &br) == MPIAR_SUCCESS && br.ok) {
      print_row(b->name, &br, 0);
    } else {
      printf("%-36s %s\n", b->name, "(not simulated)");
    }
  }
  free(links);
  return 0;
}

int schedule_cli_run(const schedule_cli_t *c) {
  if (c->schedule != NULL && c->export_alg != NULL) {
    fprintf(stderr, "mpiar-sim: --schedule and --export do not go together\n");
    return 2;
  }
  return c->export_alg != NULL ? export_schedule(c) : run_file(c);
}
