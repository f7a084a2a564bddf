/*
 * The point-to-point limit of mpiar-bench: exchanges that move what an allreduce of a size must
 * move, as fast as the MPI library moves it, and nothing else.
 *
 * A limit that an algorithm exceeds is no limit. A single paired exchange of the 2(p-1)/p * n
 * bytes that a bandwidth-optimal allreduce moves per rank is not one: a schedule that moves the
 * same bytes in smaller messages can be faster (a message that fits MPI's eager protocol where
 * the larger one needs a rendezvous, or two transfers in flight instead of one). So the limit of
 * a size is the fastest of several plans, each timed in every repetition beside the algorithms:
 *
 *   exchange       one message of 2(p-1)/p * n bytes to the right neighbour, one from the left;
 *   <algorithm>    the sends and receives of that algorithm's own schedule for this rank (the
 *                  same peers, tags, message sizes and counts), all posted at once: the schedule
 *                  with its reductions, copies and dependencies taken away.
 *
 * Each algorithm's time is at least that of its own plan (it moves the same messages, later and
 * with work in between), so no algorithm's time is below the fastest plan's, beyond noise; the
 * best repetition of the fastest plan is the bound. Messages larger than CHUNK_BYTES travel in
 * chunks (MPI counts are int).
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "bench.h"
#include "sim/sim.h"

/* MPI messages carry at most INT_MAX elements; larger ones are sent in chunks of this size. */
#define CHUNK_BYTES ((size_t)1 << 30)

/* Tag of the exchange plan: the schedules' tags are below MPIAR__TAG_LIMIT. */
#define EXCHANGE_TAG 0

static size_t chunks_of(size_t bytes) {
  return bytes == 0 ? 1 : (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
}

static int plan_add(bench_plan_t *plan, int is_send, int peer, int tag, size_t bytes) {
  bench_msg_t *m = realloc(plan->msgs, (size_t)(plan->nmsgs + 1) * sizeof *m);
  if (m == NULL) {
    return -1;
  }
  plan->msgs = m;
  m += plan->nmsgs++;
  m->is_send = is_send;
  m->peer = peer;
  m->tag = tag;
  m->bytes = bytes;
  m->offset = 0;
  if (is_send) {
    plan->send_bytes = bytes > plan->send_bytes ? bytes : plan->send_bytes;
  } else {
    /* Receives in flight at once need memory of their own. */
    m->offset = plan->recv_bytes;
    plan->recv_bytes += bytes;
  }
  plan->nreqs += chunks_of(bytes);
  return 0;
}

int bench_plan_exchange(bench_plan_t *plan, size_t bytes, int rank, int p) {
  memset(plan, 0, sizeof *plan);
  snprintf(plan->name, sizeof plan->name, "exchange");
  if (p < 2 || bytes == 0) {
    return 0;
  }
  if (plan_add(plan, 0, (rank + p - 1) % p, EXCHANGE_TAG, bytes) != 0 ||
      plan_add(plan, 1, (rank + 1) % p, EXCHANGE_TAG, bytes) != 0) {
    bench_plan_free(plan);
    return -1;
  }
  return 0;
}

int bench_plan_schedule(bench_plan_t *plan, const char *algorithm, size_t segment_bytes, int rank,
                        int p, size_t count, mpiar_dtype_t dtype, mpiar_op_t op, int in_place) {
  memset(plan, 0, sizeof *plan);
  const size_t es = mpiar_dtype_size(dtype);
  if (segment_bytes) {
    char sz[32];
    bench_format_size(segment_bytes, sz, sizeof sz);
    /* "4 MiB" -> "4MiB": names stay single words in the CSV and the table. */
    char *space = strchr(sz, ' ');
    if (space != NULL) {
      memmove(space, space + 1, strlen(space));
    }
    snprintf(plan->name, sizeof plan->name, "%s/seg=%s", algorithm, sz);
  } else {
    snprintf(plan->name, sizeof plan->name, "%s", algorithm);
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = mpiar__algorithm_find(algorithm);
  if (cfg.algorithm == NULL) {
    return MPIAR_ERR_UNKNOWN_ALGORITHM;
  }
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = dtype;
  cfg.op = op;
  cfg.in_place = in_place;
  /* As the library does: a segment only for the algorithms that pipeline. */
  cfg.segment_elems =
      (cfg.algorithm->flags & MPIAR__ALG_SEGMENTED) ? (segment_bytes + es - 1) / es : 0;
  mpiar__schedule_t s;
  int rc = mpiar__sim_build(&cfg, rank, &s);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  /* Receives first, then sends, each in step order: messages with the same peer and tag match in
   * the order the schedule fixes, since its dependencies only point to earlier steps. */
  for (int pass = 0; pass < 2 && rc == MPIAR_SUCCESS; pass++) {
    for (size_t i = 0; i < s.nsteps; i++) {
      const mpiar__step_t *st = &s.steps[i];
      int want = pass == 0 ? MPIAR__STEP_RECV : MPIAR__STEP_SEND;
      if (st->kind == want && plan_add(plan, pass, st->peer, st->tag, st->count * es) != 0) {
        rc = MPIAR_ERR_NOMEM;
        break;
      }
    }
  }
  mpiar__schedule_destroy(&s);
  if (rc != MPIAR_SUCCESS) {
    bench_plan_free(plan);
  }
  return rc;
}

int bench_plan_run(const bench_plan_t *plan, const void *sendbuf, void *recvbuf, MPI_Request *reqs,
                   MPI_Status *statuses, MPI_Comm comm) {
  size_t n = 0;
  for (int i = 0; i < plan->nmsgs; i++) {
    const bench_msg_t *m = &plan->msgs[i];
    size_t off = 0;
    do {
      int len = (int)(m->bytes - off < CHUNK_BYTES ? m->bytes - off : CHUNK_BYTES);
      int rc = m->is_send ? MPI_Isend((const char *)sendbuf + off, len, MPI_BYTE, m->peer, m->tag,
                                      comm, &reqs[n++])
                          : MPI_Irecv((char *)recvbuf + m->offset + off, len, MPI_BYTE, m->peer,
                                      m->tag, comm, &reqs[n++]);
      if (rc != MPI_SUCCESS) {
        return rc;
      }
      off += (size_t)len;
    } while (off < m->bytes);
  }
  return MPI_Waitall((int)n, reqs, statuses);
}

void bench_plan_free(bench_plan_t *plan) {
  free(plan->msgs);
  plan->msgs = NULL;
  plan->nmsgs = 0;
}
