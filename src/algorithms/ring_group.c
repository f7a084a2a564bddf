/* A ring over a group of ranks on one range of the vector (ring_group.h). */
#include "algorithms/ring_group.h"

#include <stdlib.h>

#include "algorithms/util.h"
#include "base/common.h"

size_t mpiar__ring_group_off(const mpiar__ring_group_t *g, int b) {
  return g->off + mpiar__block_off(g->len, g->size, b);
}
size_t mpiar__ring_group_len(const mpiar__ring_group_t *g, int b) {
  return mpiar__block_len(g->len, g->size, b);
}

int mpiar__ring_group_init(mpiar__ring_group_t *g, mpiar__schedule_t *s, int size, int pos,
                           int next, int prev, size_t off, size_t len, int tag0, int ntags) {
  g->s = s;
  g->size = size;
  g->pos = pos;
  g->next = next;
  g->prev = prev;
  g->off = off;
  g->len = len;
  g->from_input = 0;
  g->scratch = (size_t)-1;
  g->maxblk = mpiar__block_len(len, size, 0);
  g->tag0 = tag0;
  g->ntags = ntags;
  g->qs = g->qr = 0;
  g->slot_reader[0] = g->slot_reader[1] = -1;
  const size_t nmsg = 2 * (size_t)size;
  g->sendq = malloc(nmsg * sizeof *g->sendq);
  g->recvq = malloc(nmsg * sizeof *g->recvq);
  g->red = malloc((size_t)size * sizeof *g->red);
  g->sent = malloc((size_t)size * sizeof *g->sent);
  if (!g->sendq || !g->recvq || !g->red || !g->sent) {
    return MPIAR_ERR_NOMEM;
  }
  for (int b = 0; b < size; b++) {
    g->red[b] = g->sent[b] = -1;
  }
  return MPIAR_SUCCESS;
}

void mpiar__ring_group_free(mpiar__ring_group_t *g) {
  free(g->sendq);
  free(g->recvq);
  free(g->red);
  free(g->sent);
  g->sendq = g->recvq = g->red = g->sent = NULL;
}

/* Tag and tag-reuse dependency of the next send / receive. */
static int tag_of(const mpiar__ring_group_t *g, size_t q) {
  return g->tag0 + (int)(q % (size_t)g->ntags);
}
static long reuse(const mpiar__ring_group_t *g, const long *list, size_t q) {
  return q >= (size_t)g->ntags ? list[q - (size_t)g->ntags] : -1;
}

int mpiar__ring_group_rs(mpiar__ring_group_t *g, long start, int final) {
  mpiar__schedule_t *s = g->s;
  const int m = g->size, x = g->pos;
  int rc = MPIAR_SUCCESS;
  long id;
  for (int k = 0; k < m - 1; k++) {
    const int sb = ((x - k) % m + m) % m, rb = ((x - k - 1) % m + m) % m;
    const size_t so = mpiar__ring_group_off(g, sb), sl = mpiar__ring_group_len(g, sb);
    const size_t ro = mpiar__ring_group_off(g, rb), rl = mpiar__ring_group_len(g, rb);
    const mpiar__operand_t src = k > 0           ? mpiar__out(so)
                                 : g->from_input ? mpiar__own(s, so)
                                                 : mpiar__out(so);
    const long sdeps[] = {k > 0 ? g->red[sb] : start, reuse(g, g->sendq, g->qs)};
    MPIAR__STEP(id, mpiar__sched_send(s, g->next, tag_of(g, g->qs), src, sl, sdeps, 2));
    g->sendq[g->qs++] = id;
    g->sent[sb] = id;
    const int slot = k % 2;
    const int to_scratch = g->scratch != (size_t)-1;
    const mpiar__operand_t dst =
        to_scratch ? mpiar__scratch(g->scratch + (size_t)slot * g->maxblk) : mpiar__out(ro);
    const long rdeps[] = {to_scratch ? g->slot_reader[slot] : -1, reuse(g, g->recvq, g->qr), start};
    long rid;
    MPIAR__STEP(rid, mpiar__sched_recv(s, g->prev, tag_of(g, g->qr), dst, rl, rdeps, 3));
    g->recvq[g->qr++] = rid;
    /* The ring's order: the partial from the previous position first, except at position 0. */
    const mpiar__operand_t mine = g->from_input ? mpiar__own(s, ro) : mpiar__out(ro);
    const long ddeps[] = {rid, start};
    MPIAR__STEP(id, x > 0 ? mpiar__sched_reduce(s, mpiar__out(ro), dst, mine, rl, ddeps, 2)
                          : mpiar__sched_reduce(s, mpiar__out(ro), mine, dst, rl, ddeps, 2));
    g->red[rb] = id;
    if (to_scratch) {
      g->slot_reader[slot] = id;
    }
    if (final && k == m - 2) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, id));
    }
  }
cleanup:
  return rc;
}

int mpiar__ring_group_ag(mpiar__ring_group_t *g, const long *ready, size_t nready, long *done) {
  mpiar__schedule_t *s = g->s;
  const int m = g->size, x = g->pos;
  int rc = MPIAR_SUCCESS;
  long id;
  long *have = g->red; /* per block: the step after which OUTPUT holds it final */
  const int mine = (x + 1) % m;
  for (int k = 0; k < m - 1; k++) {
    const int sb = ((x + 1 - k) % m + m) % m, rb = ((x - k) % m + m) % m;
    const size_t so = mpiar__ring_group_off(g, sb), sl = mpiar__ring_group_len(g, sb);
    const size_t ro = mpiar__ring_group_off(g, rb), rl = mpiar__ring_group_len(g, rb);
    if (sb == mine) {
      /* The first send: after every step that wrote the block, and the tag's previous send. */
      long *deps = malloc((nready + 1) * sizeof *deps);
      if (deps == NULL) {
        MPIAR__FAIL(MPIAR_ERR_NOMEM, "ring allgather of %d ranks", m);
      }
      for (size_t i = 0; i < nready; i++) {
        deps[i] = ready[i];
      }
      deps[nready] = reuse(g, g->sendq, g->qs);
      id = mpiar__sched_send(s, g->next, tag_of(g, g->qs), mpiar__out(so), sl, deps, nready + 1);
      free(deps);
      if (id < 0) {
        rc = (int)id;
        goto cleanup;
      }
    } else {
      const long deps[] = {have[sb], reuse(g, g->sendq, g->qs)};
      MPIAR__STEP(id, mpiar__sched_send(s, g->next, tag_of(g, g->qs), mpiar__out(so), sl, deps, 2));
    }
    g->sendq[g->qs++] = id;
    const long rdeps[] = {g->sent[rb], g->red[rb], reuse(g, g->recvq, g->qr)};
    MPIAR__STEP(id, mpiar__sched_recv(s, g->prev, tag_of(g, g->qr), mpiar__out(ro), rl, rdeps, 3));
    g->recvq[g->qr++] = id;
    have[rb] = id;
    if (done != NULL) {
      done[rb] = id;
    }
  }
cleanup:
  return rc;
}
