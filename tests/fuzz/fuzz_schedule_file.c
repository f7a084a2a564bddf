/*
 * Fuzz target: the schedule-file reader (src/schedule/schedfile.c). Any input must either be
 * refused with a reason that starts with the file's name, or be read into a file whose
 * invariants hold (ranks' step ranges in order, operands inside their buffers, dependencies on
 * earlier steps); every rank's steps instantiated for the counts of one and two elements per chunk
 * and written back by the writer must read back to the same steps. Never a crash, a leak or
 * undefined behaviour.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpiar_types.h"
#include "schedule/schedfile.h"

/* The most steps instantiated per input: keeps each run short. */
#define MAX_STEPS 4096

static void check_file(const mpiar__schedfile_t *f) {
  if (f->nranks < 1 || f->nranks > MPIAR__SCHEDFILE_MAX_RANKS || f->chunks < 1 ||
      f->rank_first[0] != 0 || f->rank_first[f->nranks] != f->nsteps) {
    abort();
  }
  for (int r = 0; r < f->nranks; r++) {
    if (f->rank_first[r] > f->rank_first[r + 1]) {
      abort();
    }
    for (size_t i = f->rank_first[r]; i < f->rank_first[r + 1]; i++) {
      const mpiar__sfstep_t *st = &f->steps[i];
      for (uint32_t d = 0; d < st->ndeps; d++) {
        if (f->deps[st->dep_first + d] >= i - f->rank_first[r]) {
          abort();
        }
      }
      if ((st->kind == MPIAR__STEP_SEND || st->kind == MPIAR__STEP_RECV) &&
          (st->peer < 0 || st->peer >= f->nranks || st->peer == r || st->tag < 0 ||
           st->tag >= MPIAR__TAG_LIMIT)) {
        abort();
      }
    }
  }
}

static int same(const mpiar__schedule_t *a, const mpiar__schedule_t *b) {
  if (a->nsteps != b->nsteps || a->ndeps != b->ndeps ||
      (a->ndeps > 0 && memcmp(a->deps, b->deps, a->ndeps * sizeof *a->deps) != 0)) {
    return 0;
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    const mpiar__step_t *x = &a->steps[i], *y = &b->steps[i];
    if (x->kind != y->kind || x->count != y->count || x->peer != y->peer || x->tag != y->tag ||
        x->final != y->final || x->ndeps != y->ndeps ||
        (x->kind != MPIAR__STEP_SEND && (x->dst.buf != y->dst.buf || x->dst.off != y->dst.off)) ||
        (x->kind != MPIAR__STEP_RECV && (x->a.buf != y->a.buf || x->a.off != y->a.off)) ||
        (x->kind == MPIAR__STEP_REDUCE && (x->b.buf != y->b.buf || x->b.off != y->b.off))) {
      return 0;
    }
  }
  return 1;
}

static int build_all(const mpiar__schedfile_t *f, size_t count, int in_place,
                     mpiar__schedule_t *s) {
  int ok = 1;
  for (int r = 0; r < f->nranks; r++) {
    mpiar__schedule_init(&s[r], r, f->nranks, count, 4, in_place, "fuzz", 0);
    if (ok && mpiar__schedfile_instantiate(f, &s[r]) != MPIAR_SUCCESS) {
      ok = 0; /* only allocation can fail here */
    }
  }
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mpiar__schedfile_t f, g;
  char err[512];
  int rc = mpiar__schedfile_parse("fuzz.sched", (const char *)data, size, &f, err, sizeof err);
  if (rc != MPIAR_SUCCESS) {
    if (strncmp(err, "fuzz.sched", 10) != 0) {
      abort(); /* the reason must name the file */
    }
    return 0;
  }
  check_file(&f);
  if (f.nsteps > MAX_STEPS || f.nranks > 64) {
    mpiar__schedfile_free(&f);
    return 0;
  }
  const int in_place = f.inplace == MPIAR__SCHEDFILE_INPLACE_ONLY;
  for (size_t k = 1; k <= 2; k++) {
    const size_t count = k * f.chunks;
    mpiar__schedule_t *s = calloc((size_t)f.nranks, sizeof *s);
    mpiar__schedule_t *t = calloc((size_t)f.nranks, sizeof *t);
    if (s == NULL || t == NULL || !build_all(&f, count, in_place, s)) {
      abort();
    }
    /* Written back and read again: the same steps at this count. */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL || mpiar__schedfile_write(out, "w", s, f.nranks, f.order, err, sizeof err) != 0) {
      abort();
    }
    fclose(out);
    if (mpiar__schedfile_parse("written", text, len, &g, err, sizeof err) != MPIAR_SUCCESS ||
        !build_all(&g, count, in_place, t)) {
      abort();
    }
    for (int r = 0; r < f.nranks; r++) {
      if (!same(&s[r], &t[r])) {
        abort();
      }
      mpiar__schedule_destroy(&s[r]);
      mpiar__schedule_destroy(&t[r]);
    }
    mpiar__schedfile_free(&g);
    free(text);
    free(s);
    free(t);
  }
  mpiar__schedfile_free(&f);
  return 0;
}
