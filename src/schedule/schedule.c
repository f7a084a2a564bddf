/*
 * Schedules as data: growth of the step and dependency arrays, validation of what builders
 * append, successor lists for the executors, totals and the printed form.
 *
 * Builders call the append functions only; a failed append leaves the schedule unchanged, so a
 * builder can return the code and let its caller destroy the schedule.
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "schedule/schedule.h"

void mpiar__schedule_init(mpiar__schedule_t *s, int rank, int nranks, size_t count,
                          size_t elem_size, int in_place, const char *algorithm,
                          size_t segment_elems) {
  memset(s, 0, sizeof *s);
  s->rank = rank;
  s->nranks = nranks;
  s->count = count;
  s->elem_size = elem_size;
  s->in_place = in_place ? 1 : 0;
  s->root = -1;
  s->algorithm = algorithm;
  s->segment_elems = segment_elems;
  s->in_elems = s->out_elems = count;
}

void mpiar__schedule_destroy(mpiar__schedule_t *s) {
  free(s->steps);
  free(s->deps);
  free(s->succ_first);
  free(s->succ);
  s->steps = NULL;
  s->deps = NULL;
  s->succ_first = NULL;
  s->succ = NULL;
  s->nsteps = s->steps_cap = 0;
  s->ndeps = s->deps_cap = 0;
  s->scratch_elems = 0;
}

/* Grow an array geometrically so that appending n steps costs O(n) in total. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) {
    return MPIAR_SUCCESS;
  }
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need) {
    ncap *= 2;
  }
  void *p = realloc(*arr, ncap * elem);
  if (p == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "schedule of %zu entries", ncap);
  }
  *arr = p;
  *cap = ncap;
  return MPIAR_SUCCESS;
}

/*
 * Append one step after validating it. Dependencies must name earlier steps (that is what makes
 * every schedule acyclic); negative entries mean "none" and are skipped, as are duplicates.
 */
static long append(mpiar__schedule_t *s, const mpiar__step_t *st, const long *deps, size_t ndeps) {
  /* Step and dependency indices are 32-bit in the arrays: a schedule never outgrows them. */
  size_t limit = s->max_steps != 0 && s->max_steps < UINT32_MAX ? s->max_steps : UINT32_MAX - 1;
  if (s->nsteps >= limit || s->ndeps + ndeps >= UINT32_MAX) {
    return mpiar__error(MPIAR_ERR_NOMEM,
                        "%s rank %d: the schedule would exceed %zu steps (use larger segments)",
                        s->algorithm ? s->algorithm : "?", s->rank, limit);
  }
  for (size_t i = 0; i < ndeps; i++) {
    if (deps[i] >= (long)s->nsteps) {
      return mpiar__error(MPIAR_ERR_INTERNAL,
                          "%s rank %d: step %zu depends on step %ld, which is not earlier",
                          s->algorithm ? s->algorithm : "?", s->rank, s->nsteps, deps[i]);
    }
  }
  if ((st->kind == MPIAR__STEP_SEND || st->kind == MPIAR__STEP_RECV) &&
      (st->peer < 0 || st->peer >= s->nranks || st->peer == s->rank || st->tag < 0 ||
       st->tag >= MPIAR__TAG_LIMIT)) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "%s rank %d: step %zu has peer %d tag %d",
                        s->algorithm ? s->algorithm : "?", s->rank, s->nsteps, st->peer, st->tag);
  }
  int rc = grow((void **)&s->steps, &s->steps_cap, s->nsteps + 1, sizeof *s->steps);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  rc = grow((void **)&s->deps, &s->deps_cap, s->ndeps + ndeps, sizeof *s->deps);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__step_t *dst = &s->steps[s->nsteps];
  *dst = *st;
  dst->dep_first = (uint32_t)s->ndeps;
  dst->ndeps = 0;
  for (size_t i = 0; i < ndeps; i++) {
    if (deps[i] < 0) {
      continue;
    }
    int dup = 0;
    for (uint32_t j = 0; j < dst->ndeps; j++) {
      dup |= s->deps[dst->dep_first + j] == (uint32_t)deps[i];
    }
    if (!dup) {
      s->deps[s->ndeps++] = (uint32_t)deps[i];
      dst->ndeps++;
    }
  }
  return (long)s->nsteps++;
}

static mpiar__operand_t no_operand(void) {
  mpiar__operand_t o = {MPIAR__BUF_COUNT, 0};
  return o;
}

long mpiar__sched_send(mpiar__schedule_t *s, int peer, int tag, mpiar__operand_t src, size_t count,
                       const long *deps, size_t ndeps) {
  mpiar__step_t st = {MPIAR__STEP_SEND, peer, tag, count, no_operand(), src, no_operand(), 0, 0, 0};
  return append(s, &st, deps, ndeps);
}

long mpiar__sched_recv(mpiar__schedule_t *s, int peer, int tag, mpiar__operand_t dst, size_t count,
                       const long *deps, size_t ndeps) {
  mpiar__step_t st = {MPIAR__STEP_RECV, peer, tag, count, dst, no_operand(), no_operand(), 0, 0, 0};
  return append(s, &st, deps, ndeps);
}

long mpiar__sched_reduce(mpiar__schedule_t *s, mpiar__operand_t dst, mpiar__operand_t a,
                         mpiar__operand_t b, size_t count, const long *deps, size_t ndeps) {
  mpiar__step_t st = {MPIAR__STEP_REDUCE, -1, 0, count, dst, a, b, 0, 0, 0};
  return append(s, &st, deps, ndeps);
}

long mpiar__sched_copy(mpiar__schedule_t *s, mpiar__operand_t dst, mpiar__operand_t src,
                       size_t count, const long *deps, size_t ndeps) {
  mpiar__step_t st = {MPIAR__STEP_COPY, -1, 0, count, dst, src, no_operand(), 0, 0, 0};
  return append(s, &st, deps, ndeps);
}

int mpiar__sched_mark_final(mpiar__schedule_t *s, long step) {
  if (step < 0 || (size_t)step >= s->nsteps || s->steps[step].kind != MPIAR__STEP_REDUCE) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "%s: step %ld is not a reduction", s->algorithm, step);
  }
  s->steps[step].final = 1;
  return MPIAR_SUCCESS;
}

int mpiar__schedule_finalize(mpiar__schedule_t *s) {
  free(s->succ_first);
  free(s->succ);
  s->succ_first = calloc(s->nsteps + 1, sizeof *s->succ_first);
  s->succ = malloc((s->ndeps ? s->ndeps : 1) * sizeof *s->succ);
  if (s->succ_first == NULL || s->succ == NULL) {
    free(s->succ_first);
    free(s->succ);
    s->succ_first = NULL;
    s->succ = NULL;
    return mpiar__error(MPIAR_ERR_NOMEM, "successor lists of %zu steps", s->nsteps);
  }
  /* Counting sort by predecessor: successors of each step end up in increasing step order. */
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    for (uint32_t j = 0; j < st->ndeps; j++) {
      s->succ_first[s->deps[st->dep_first + j] + 1]++;
    }
  }
  for (size_t i = 0; i < s->nsteps; i++) {
    s->succ_first[i + 1] += s->succ_first[i];
  }
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    for (uint32_t j = 0; j < st->ndeps; j++) {
      uint32_t d = s->deps[st->dep_first + j];
      s->succ[s->succ_first[d]++] = (uint32_t)i;
    }
  }
  /* The fill loop advanced each start to the next one's; shift back. */
  for (size_t i = s->nsteps; i > 0; i--) {
    s->succ_first[i] = s->succ_first[i - 1];
  }
  s->succ_first[0] = 0;
  return MPIAR_SUCCESS;
}

void mpiar__schedule_totals(const mpiar__schedule_t *s, mpiar__schedule_totals_t *t) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    size_t bytes = st->count * s->elem_size;
    switch (st->kind) {
    case MPIAR__STEP_SEND:
      t->messages_sent++;
      t->bytes_sent += bytes;
      break;
    case MPIAR__STEP_RECV:
      t->messages_received++;
      t->bytes_received += bytes;
      break;
    case MPIAR__STEP_REDUCE:
      t->bytes_reduced += bytes;
      break;
    default:
      t->bytes_copied += bytes;
      break;
    }
  }
  t->scratch_bytes = s->scratch_elems * s->elem_size;
  t->steps = s->nsteps;
}

static const char *buf_name(uint8_t b) {
  switch (b) {
  case MPIAR__BUF_INPUT:
    return "in";
  case MPIAR__BUF_OUTPUT:
    return "out";
  case MPIAR__BUF_SCRATCH:
    return "tmp";
  default:
    return "?";
  }
}

/*
 * Format (stable; golden tests compare it):
 *   # <algorithm> rank R/P count N elem E in_place I segment S scratch T [root R] [nodes N]
 *   <index> send   peer P tag T n N in[off]                 deps i,j
 *   <index> recv   peer P tag T n N out[off]                deps -
 *   <index> reduce n N out[off] = in[off] op tmp[off]       deps i
 *   <index> copy   n N out[off] = in[off]                   deps i
 */
void mpiar__schedule_print(const mpiar__schedule_t *s, FILE *out) {
  fprintf(out, "# %s rank %d/%d count %zu elem %zu in_place %d segment %zu scratch %zu",
          s->algorithm ? s->algorithm : "?", s->rank, s->nranks, s->count, s->elem_size,
          s->in_place, s->segment_elems, s->scratch_elems);
  if (s->root >= 0) {
    fprintf(out, " root %d", s->root);
  }
  if (s->topo != NULL) {
    fprintf(out, " nodes %d", s->topo->nnodes);
  }
  fputc('\n', out);
  for (size_t i = 0; i < s->nsteps; i++) {
    const mpiar__step_t *st = &s->steps[i];
    fprintf(out, "%zu ", i);
    switch (st->kind) {
    case MPIAR__STEP_SEND:
      fprintf(out, "send   peer %d tag %d n %zu %s[%zu]", st->peer, st->tag, st->count,
              buf_name(st->a.buf), st->a.off);
      break;
    case MPIAR__STEP_RECV:
      fprintf(out, "recv   peer %d tag %d n %zu %s[%zu]", st->peer, st->tag, st->count,
              buf_name(st->dst.buf), st->dst.off);
      break;
    case MPIAR__STEP_REDUCE:
      fprintf(out, "reduce n %zu %s[%zu] = %s[%zu] op %s[%zu]%s", st->count, buf_name(st->dst.buf),
              st->dst.off, buf_name(st->a.buf), st->a.off, buf_name(st->b.buf), st->b.off,
              st->final ? " final" : "");
      break;
    default:
      fprintf(out, "copy   n %zu %s[%zu] = %s[%zu]", st->count, buf_name(st->dst.buf), st->dst.off,
              buf_name(st->a.buf), st->a.off);
      break;
    }
    fputs(" deps ", out);
    if (st->ndeps == 0) {
      fputc('-', out);
    }
    for (uint32_t j = 0; j < st->ndeps; j++) {
      fprintf(out, "%s%u", j ? "," : "", s->deps[st->dep_first + j]);
    }
    fputc('\n', out);
  }
}
