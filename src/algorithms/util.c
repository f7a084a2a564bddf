/* Small arithmetic shared by the builders. */
#include "algorithms/util.h"
#include "base/common.h"

int mpiar__pof2_floor(int p) {
  int q = 1;
  while (q <= p / 2) {
    q *= 2;
  }
  return q;
}

int mpiar__log2i(int pof2) {
  int l = 0;
  while ((1 << l) < pof2) {
    l++;
  }
  return l;
}

int mpiar__build_trivial(mpiar__schedule_t *s, int *done) {
  s->scratch_elems = 0;
  *done = 1;
  if (s->count == 0) {
    return MPIAR_SUCCESS;
  }
  if (s->nranks == 1) {
    /* One rank: the result is the input; out of place it is one copy. */
    long id =
        s->in_place ? 0 : mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count, NULL, 0);
    return id < 0 ? (int)id : MPIAR_SUCCESS;
  }
  *done = 0;
  return MPIAR_SUCCESS;
}
