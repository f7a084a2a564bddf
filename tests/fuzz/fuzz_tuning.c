/*
 * Fuzz target: the tuning-file reader (src/tuning/tuning.c). Any input must either be refused
 * with MPIAR_ERR_ENV and a detail that starts with the setting and the file's name, or be read
 * into a tuning whose tables hold the documented invariants (registry algorithms, sorted and
 * disjoint ranges, segments only where segmented and at least the minimum, consistent topology);
 * an accepted tuning written back by the writer must read back to the same tables. Never a crash,
 * a leak or undefined behaviour.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuning/tuning.h"

static void check_tables(const mpiar__tuning_t *t) {
  if (t->ranks < 1 || t->nodes < 1 || t->nodes > t->ranks || t->ranks_per_node < 1 ||
      (long)t->nodes * t->ranks_per_node < t->ranks || !(t->gamma[MPIAR_FLOAT32] >= 0)) {
    abort();
  }
  for (int k = 0; k < t->ntables; k++) {
    const mpiar__tuning_table_t *tab = &t->tables[k];
    for (int i = 0; i < tab->nranges; i++) {
      const mpiar__tuning_range_t *g = &tab->ranges[i];
      if (g->alg == NULL || mpiar__algorithm_find(g->alg->name) != g->alg ||
          g->max_bytes < g->min_bytes || (i > 0 && g->min_bytes <= tab->ranges[i - 1].max_bytes) ||
          (g->segment_bytes != 0 &&
           (g->segment_bytes < MPIAR__SEGMENT_MIN || !(g->alg->flags & MPIAR__ALG_SEGMENTED)))) {
        abort();
      }
      if (mpiar__tuning_lookup(t, tab->dtype, g->min_bytes) != g ||
          mpiar__tuning_lookup(t, tab->dtype, g->max_bytes) != g) {
        abort();
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mpiar__tuning_t t, u;
  int rc = mpiar__tuning_parse((const char *)data, size, "fuzz.json", &t);
  if (rc == MPIAR_ERR_ENV) {
    if (strncmp(mpiar_last_error(), "MPIAR_TUNING_FILE=fuzz.json: ", 29) != 0) {
      abort(); /* the detail must name the setting and the file */
    }
    return 0;
  }
  if (rc != MPIAR_SUCCESS) {
    abort();
  }
  check_tables(&t);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL) {
    return 0;
  }
  if (mpiar__tuning_write(&t, NULL, f) != 0) {
    abort();
  }
  fclose(f);
  if (mpiar__tuning_parse(text, len, "fuzz.json", &u) != MPIAR_SUCCESS || u.ntables != t.ntables ||
      u.ranks != t.ranks || u.nodes != t.nodes || u.ranks_per_node != t.ranks_per_node) {
    abort(); /* what the writer writes, the reader must read */
  }
  for (int k = 0; k < t.ntables; k++) {
    if (u.tables[k].dtype != t.tables[k].dtype || u.tables[k].nranges != t.tables[k].nranges ||
        memcmp(u.tables[k].ranges, t.tables[k].ranges,
               (size_t)t.tables[k].nranges * sizeof t.tables[k].ranges[0]) != 0) {
      abort();
    }
  }
  free(text);
  return 0;
}
