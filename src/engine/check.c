/*
 * The argument check (MPIAR_CHECK) as its own module of the engine: before its data steps, a
 * request that checks runs dissemination rounds over control messages of its slot, agreeing on
 * the minimum and maximum of the 8 fields of its signature; a difference fails the call on
 * every rank alike (nothing else was sent, so the communicator stays usable). The executor calls
 * mpiar__check_pass() in place of the data pass while rounds remain; the last round's verdict
 * starts the data steps (mpiar__request_begin()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/engine.h"

static int check_tag(const mpiar__request_t *r, int round) {
  const mpiar__engine_t *e = r->eng;
  return (e->nslots << (e->size_bits + MPIAR__TAG_BITS)) |
         (MPIAR__CTL_CHECK * 2 + r->slot * 32 + round);
}

/*
 * Combine a received accumulator into ours. Entries 2f, 2f+1 hold the smallest value of field f
 * and the lowest rank that has it; entries 16 + 2f, 17 + 2f the largest value and its rank.
 */
static void check_combine(uint64_t *acc, const uint64_t *in) {
  for (int f = 0; f < 8; f++) {
    uint64_t *mn = &acc[2 * f], *mx = &acc[16 + 2 * f];
    const uint64_t *imn = &in[2 * f], *imx = &in[16 + 2 * f];
    if (imn[0] < mn[0] || (imn[0] == mn[0] && imn[1] < mn[1])) {
      mn[0] = imn[0];
      mn[1] = imn[1];
    }
    if (imx[0] > mx[0] || (imx[0] == mx[0] && imx[1] < mx[1])) {
      mx[0] = imx[0];
      mx[1] = imx[1];
    }
  }
}

static int check_verdict(mpiar__request_t *r) {
  const uint64_t *acc = r->check_acc;
  for (int f = 0; f < 8; f++) {
    if (acc[2 * f] != acc[16 + 2 * f]) {
      char lo[64], hi[64];
      const char *field = r->eng->check_describe(acc, f, 0, lo, sizeof lo);
      r->eng->check_describe(acc, f, 1, hi, sizeof hi);
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "MPIAR_CHECK: the ranks called the collective with different "
                          "arguments: the %s is %s on rank %llu but %s on rank %llu",
                          field, lo, (unsigned long long)acc[2 * f + 1], hi,
                          (unsigned long long)acc[16 + 2 * f + 1]);
    }
  }
  return MPIAR_SUCCESS;
}

/*
 * One step of the check: dissemination rounds (round k sends to rank + 2^k and receives from
 * rank - 2^k), after which every rank holds the minimum and maximum of every field over all
 * ranks. Minimum and maximum are idempotent, so ranks counted twice do no harm. The messages have
 * one fixed length, and a round's receive is taken only after its length is checked.
 */
int mpiar__check_pass(mpiar__request_t *r, int *progressed) {
  mpiar__engine_t *e = r->eng;
  int k = r->check_round;
  int dist = (int)(((long)1 << k) % e->size);
  int to = (e->rank + dist) % e->size;
  int from = (e->rank - dist + e->size) % e->size;
  int tag = check_tag(r, k);
  if (!r->check_sent) {
    memcpy(r->check_send, r->check_acc, sizeof r->check_acc);
    r->check_send[32] = r->seq;
    int err = e->tx->send_ctl(e->txs, r->check_send, sizeof r->check_send, to, tag, &r->check_req);
    if (err != 0) {
      char what[64];
      snprintf(what, sizeof what, "%s (argument check)", e->tx->send_name);
      return mpiar__tx_error(err, what, r, 0);
    }
    r->check_sent = 1;
    *progressed = 1;
  }
  mpiar__held_t m;
  int got = r->check_recvd ? 0 : mpiar__take_message(e, from, tag, &m);
  if (got < 0) {
    char what[64];
    snprintf(what, sizeof what, "%s (argument check)", e->tx->probe_name);
    return mpiar__tx_error(-got, what, r, 0);
  }
  if (got) {
    if (m.msg.bytes != sizeof r->check_in) {
      mpiar__held_discard(e, &m);
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "rank %d: the argument check of rank %d has %zu bytes, not %zu (another "
                          "mpiar version?)",
                          e->rank, from, m.msg.bytes, sizeof r->check_in);
    }
    if (m.data != NULL) { /* received early by the scan */
      memcpy(r->check_in, m.data, sizeof r->check_in);
      free(m.data);
    } else {
      int err = e->tx->recv_now(e->txs, r->check_in, &m.msg);
      if (err != 0) {
        char what[64];
        snprintf(what, sizeof what, "%s (argument check)", e->tx->recv_msg_name);
        return mpiar__tx_error(err, what, r, 0);
      }
    }
    check_combine(r->check_acc, r->check_in);
    r->check_recvd = 1;
    e->progress_count++;
    *progressed = 1;
  }
  if (r->check_req.handle != 0) {
    int flag = 0;
    int err = e->tx->test_ctl(e->txs, &r->check_req, &flag);
    if (err != 0) {
      char what[64];
      snprintf(what, sizeof what, "%s (argument check)", e->tx->test_name);
      return mpiar__tx_error(err, what, r, 0);
    }
  }
  if (r->check_sent && r->check_recvd && r->check_req.handle == 0) {
    r->check_round++;
    r->check_sent = r->check_recvd = 0;
    *progressed = 1;
    if (r->check_round == r->check_rounds) {
      int rc = check_verdict(r);
      if (rc != MPIAR_SUCCESS) {
        r->check_failed = 1;
        return rc;
      }
      mpiar__request_begin(r);
    }
  }
  return MPIAR_SUCCESS;
}

void mpiar__check_init(mpiar__request_t *r) {
  r->check_failed = 0;
  int rounds = 0;
  while (rounds < 31 && (1 << rounds) < r->eng->size) {
    rounds++;
  }
  r->check_rounds = rounds;
  r->check_round = 0;
  r->check_sent = r->check_recvd = 0;
  r->check_req.handle = 0;
  for (int f = 0; f < 8; f++) {
    r->check_acc[2 * f] = r->check_acc[16 + 2 * f] = r->signature[f];
    r->check_acc[2 * f + 1] = r->check_acc[17 + 2 * f] = (uint64_t)r->eng->rank;
  }
}
