/*
 * Golden text of printed schedules: one small case per builder, compared line by line with the
 * files in tests/sim/golden. Run with "--update DIR" to rewrite them after a deliberate change
 * (and review the diff).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef struct gcase {
  const char *file;
  const char *algorithm;
  int bcast, nranks, rank, in_place, root;
  size_t count, segment;
  int nodes, ppn, placement; /* a regular topology when nodes > 0 (nranks = nodes x ppn) */
} gcase_t;

static const gcase_t cases[] = {
    {"ring_p4_n10_r1.txt", "ring", 0, 4, 1, 0, 0, 10, 0, 0, 0, 0},
    {"ring_p3_n12_seg2_inplace_r0.txt", "ring", 0, 3, 0, 1, 0, 12, 2, 0, 0, 0},
    {"rabenseifner_p4_n8_r2.txt", "rabenseifner", 0, 4, 2, 0, 0, 8, 0, 0, 0, 0},
    {"rabenseifner_p3_n6_inplace_r0.txt", "rabenseifner", 0, 3, 0, 1, 0, 6, 0, 0, 0, 0},
    {"rabenseifner_p3_n6_inplace_r1.txt", "rabenseifner", 0, 3, 1, 1, 0, 6, 0, 0, 0, 0},
    {"rabenseifner_fold_p3_n6_r1.txt", "rabenseifner_fold", 0, 3, 1, 0, 0, 6, 0, 0, 0, 0},
    {"recursive_doubling_p3_n5_r0.txt", "recursive_doubling", 0, 3, 0, 0, 0, 5, 0, 0, 0, 0},
    {"recursive_doubling_p3_n5_inplace_r1.txt", "recursive_doubling", 0, 3, 1, 1, 0, 5, 0, 0, 0, 0},
    {"repro_direct_p5_n11_r4.txt", "repro_direct", 0, 5, 4, 0, 0, 11, 0, 0, 0, 0},
    {"repro_direct_p3_n9_seg2_inplace_r1.txt", "repro_direct", 0, 3, 1, 1, 0, 9, 2, 0, 0, 0},
    {"repro_rabenseifner_p6_n12_r1.txt", "repro_rabenseifner", 0, 6, 1, 0, 0, 12, 0, 0, 0, 0},
    {"repro_rabenseifner_p6_n12_inplace_r4.txt", "repro_rabenseifner", 0, 6, 4, 1, 0, 12, 0, 0, 0,
     0},
    {"swing_p8_n16_r3.txt", "swing", 0, 8, 3, 0, 0, 16, 0, 0, 0, 0},
    {"swing_latency_p6_n5_inplace_r3.txt", "swing_latency", 0, 6, 3, 1, 0, 5, 0, 0, 0, 0},
    {"bcast_binomial_p6_root2_r3.txt", "binomial", 1, 6, 3, 1, 2, 7, 0, 0, 0, 0},
    {"bcast_scatter_allgather_p5_root1_r2.txt", "scatter_allgather", 1, 5, 2, 1, 1, 11, 0, 0, 0, 0},
    {"hier_ring_2x2rr_n8_r1.txt", "hier_ring", 0, 4, 1, 0, 0, 8, 0, 2, 2, 1},
    {"hier_ring_3x2_n12_inplace_r3.txt", "hier_ring", 0, 6, 3, 1, 0, 12, 0, 3, 2, 0},
    {"hier_rabenseifner_3x2_n12_r2.txt", "hier_rabenseifner", 0, 6, 2, 0, 0, 12, 0, 3, 2, 0},
    {"hier_recursive_doubling_3x3_n5_r3.txt", "hier_recursive_doubling", 0, 9, 3, 0, 0, 5, 0, 3, 3,
     0},
};

/* Print one rank's schedule; @return the text (malloc'd) or NULL. */
static char *print_schedule(const mpiar__sim_config_t *cfg, int rank) {
  mpiar__schedule_t s;
  if (cfg->algorithm == NULL || mpiar__sim_build(cfg, rank, &s) != MPIAR_SUCCESS) {
    return NULL;
  }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f != NULL) {
    mpiar__schedule_print(&s, f);
    fclose(f);
  }
  mpiar__schedule_destroy(&s);
  return text;
}

static char *render(const gcase_t *c) {
  mpiar__topology_t topo;
  if (c->nodes > 0 && mpiar__topology_regular(&topo, c->nodes, c->ppn,
                                              (mpiar__placement_t)c->placement) != MPIAR_SUCCESS) {
    return NULL;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.topology = c->nodes > 0 ? &topo : NULL;
  cfg.algorithm = c->bcast ? mpiar__bcast_algorithm_find(c->algorithm)
                           : mpiar__algorithm_find_any(c->algorithm);
  cfg.collective = c->bcast ? MPIAR__SIM_BCAST : MPIAR__SIM_ALLREDUCE;
  cfg.nranks = c->nranks;
  cfg.count = c->count;
  cfg.in_place = c->in_place;
  cfg.root = c->root;
  cfg.segment_elems = c->segment;
  char *text = print_schedule(&cfg, c->rank);
  if (c->nodes > 0) {
    mpiar__topology_destroy(&topo);
  }
  return text;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = '\0';
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

int main(int argc, char **argv) {
  int update = argc == 3 && strcmp(argv[1], "--update") == 0;
  if (argc != 2 && !update) {
    fprintf(stderr, "usage: %s GOLDEN_DIR | --update GOLDEN_DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[argc - 1];
  int failures = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
    char *got = render(&cases[i]);
    if (got == NULL) {
      fprintf(stderr, "FAIL %s: could not build the schedule\n", cases[i].file);
      failures++;
      continue;
    }
    if (update) {
      FILE *f = fopen(path, "w");
      if (f == NULL || fputs(got, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        failures++;
      }
      free(got);
      continue;
    }
    char *want = slurp(path);
    if (want == NULL || strcmp(want, got) != 0) {
      failures++;
      fprintf(stderr, "FAIL %s differs from the golden text.\n--- expected\n%s--- got\n%s",
              cases[i].file, want ? want : "(missing)\n", got);
    }
    free(want);
    free(got);
  }
  printf("%zu cases, %d failures\n", sizeof cases / sizeof cases[0], failures);
  return failures ? 1 : 0;
}
