/*
 * Static checks of one rank's schedule: operands in range, INPUT read-only, no partial overlap
 * inside a step, and the hazard check.
 *
 * Hazards: the executor may run any step whose dependencies are complete, so two steps touching
 * overlapping memory, one of them writing, must be ordered by dependencies (one an ancestor of
 * the other), or some legal execution reads the wrong data. Ancestor sets are bitsets built in
 * step order (dependencies are earlier steps); accesses are sorted by buffer and offset so that
 * only overlapping pairs are compared.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef struct access {
  uint8_t buf;
  uint8_t write;
  uint32_t step;
  size_t lo, hi;
} access_t;

static const char *bufname(int b) {
  return b == MPIAR__BUF_INPUT ? "in" : b == MPIAR__BUF_OUTPUT ? "out" : "tmp";
}

static int cmp_access(const void *x, const void *y) {
  const access_t *a = x, *b = y;
  if (a->buf != b->buf) {
    return a->buf < b->buf ? -1 : 1;
  }
  if (a->lo != b->lo) {
    return a->lo < b->lo ? -1 : 1;
  }
  return a->step < b->step ? -1 : a->step > b->step;
}

/* Steps above this many per rank skip the hazard check (its bitsets grow as steps squared). */
#define MAX_HAZARD_STEPS 16384

int mpiar__sim_check_schedule(const mpiar__schedule_t *s, int hazards, char *err, size_t errlen) {
  access_t *acc = malloc((3 * s->nsteps + 1) * sizeof *acc);
  uint64_t *anc = NULL;
  size_t nacc = 0;
  int ok = 0;
  if (acc == NULL) {
    snprintf(err, errlen, "out of memory checking rank %d", s->rank);
    return 0;
  }
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    mpiar__operand_t ops[3];
    int w[3], nops = 0;
    switch (st->kind) {
    case MPIAR__STEP_SEND:
      ops[nops] = st->a, w[nops++] = 0;
      break;
    case MPIAR__STEP_RECV:
      ops[nops] = st->dst, w[nops++] = 1;
      break;
    case MPIAR__STEP_REDUCE:
      ops[nops] = st->dst, w[nops++] = 1;
      ops[nops] = st->a, w[nops++] = 0;
      ops[nops] = st->b, w[nops++] = 0;
      break;
    default:
      ops[nops] = st->dst, w[nops++] = 1;
      ops[nops] = st->a, w[nops++] = 0;
      break;
    }
    for (int k = 0; k < nops; k++) {
      int buf = ops[k].buf;
      if (buf >= MPIAR__BUF_COUNT) {
        snprintf(err, errlen, "rank %d step %zu: operand %d names no buffer", s->rank, i, k);
        goto cleanup;
      }
      size_t limit = buf == MPIAR__BUF_SCRATCH ? s->scratch_elems
                     : buf == MPIAR__BUF_INPUT  ? s->in_elems
                                                : s->out_elems;
      if (ops[k].off > limit || st->count > limit - ops[k].off) {
        snprintf(err, errlen, "rank %d step %zu: %s[%zu..%zu) outside its %zu elements", s->rank, i,
                 bufname(buf), ops[k].off, ops[k].off + st->count, limit);
        goto cleanup;
      }
      if (s->in_place && buf == MPIAR__BUF_INPUT) {
        buf = MPIAR__BUF_OUTPUT; /* the same memory */
      }
      if (w[k] && buf == MPIAR__BUF_INPUT) {
        snprintf(err, errlen, "rank %d step %zu writes INPUT", s->rank, i);
        goto cleanup;
      }
      ops[k].buf = (uint8_t)buf;
      if (st->count > 0) {
        access_t a = {(uint8_t)buf, (uint8_t)w[k], (uint32_t)i, ops[k].off, ops[k].off + st->count};
        acc[nacc++] = a;
      }
    }
    /* dst may equal a source exactly; any other overlap inside the step is undefined. */
    for (int k = 1; k < nops; k++) {
      if (ops[k].buf == ops[0].buf && ops[k].off != ops[0].off && st->count > 0 &&
          ops[k].off < ops[0].off + st->count && ops[0].off < ops[k].off + st->count &&
          st->kind != MPIAR__STEP_SEND) {
        snprintf(err, errlen, "rank %d step %zu: destination partially overlaps a source", s->rank,
                 i);
        goto cleanup;
      }
    }
  }
  if (hazards && s->nsteps <= MAX_HAZARD_STEPS) {
    const size_t words = (s->nsteps + 63) / 64;
    anc = calloc(s->nsteps * words + 1, sizeof *anc);
    if (anc == NULL) {
      snprintf(err, errlen, "out of memory checking rank %d", s->rank);
      goto cleanup;
    }
    for (size_t i = 0; i < s->nsteps; i++) {
      const mpiar__step_t *st = &s->steps[i];
      uint64_t *mine = anc + i * words;
      for (uint32_t j = 0; j < st->ndeps; j++) {
        const uint32_t d = s->deps[st->dep_first + j];
        const uint64_t *theirs = anc + (size_t)d * words;
        for (size_t x = 0; x < words; x++) {
          mine[x] |= theirs[x];
        }
        mine[d / 64] |= (uint64_t)1 << (d % 64);
      }
    }
    qsort(acc, nacc, sizeof *acc, cmp_access);
    for (size_t i = 0; i < nacc; i++) {
      for (size_t j = i + 1; j < nacc && acc[j].buf == acc[i].buf && acc[j].lo < acc[i].hi; j++) {
        const uint32_t x = acc[i].step, y = acc[j].step;
        if (x == y || !(acc[i].write || acc[j].write)) {
          continue;
        }
        const uint32_t early = x < y ? x : y, late = x < y ? y : x;
        if (!(anc[(size_t)late * words + early / 64] >> (early % 64) & 1)) {
          snprintf(err, errlen,
                   "%s rank %d: steps %" PRIu32 " and %" PRIu32
                   " touch %s[%zu..%zu) and %s[%zu..%zu), one writing, without a dependency",
                   s->algorithm ? s->algorithm : "?", s->rank, early, late, bufname(acc[i].buf),
                   acc[i].lo, acc[i].hi, bufname(acc[j].buf), acc[j].lo, acc[j].hi);
          goto cleanup;
        }
      }
    }
  }
  ok = 1;

cleanup:
  free(acc);
  free(anc);
  return ok;
}
