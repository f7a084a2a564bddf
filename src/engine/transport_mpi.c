/*
 * The MPI transport: the engine's messages as nonblocking MPI point-to-point calls on one
 * communicator (the context's private duplicate).
 *
 * The message table is an array of MPI requests, tested by one MPI_Testsome per pass (each
 * MPI_Testsome runs MPI's progress engine once, whatever the number of requests). Completed
 * requests are MPI_REQUEST_NULL after the test, and so are entries that abandon() emptied:
 * compaction drops exactly those. Requests of failed operations that are still in flight
 * ("zombies") are kept, tested by pending() during the drain, and freed by close().
 *
 * Handles: an MPI_Request or MPI_Message travels in the engine's 64-bit handle by its bytes,
 * with the null handle as 0 (a live MPI handle is never all zero bits: MPICH's are tagged
 * integers, Open MPI's are pointers).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/transport_mpi.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "an MPI_Request fits a handle");
_Static_assert(sizeof(MPI_Message) <= sizeof(uint64_t), "an MPI_Message fits a handle");

typedef struct tx_mpi {
  MPI_Comm comm;
  MPI_Request *req;       /* the message table */
  unsigned char *probed;  /* per entry: a receive of a probed message (its length reported) */
  int *idx;               /* MPI_Testsome's indices */
  MPI_Status *stat;       /* and statuses */
  size_t cap;
  MPI_Request *zombies;   /* requests of failed operations still in flight */
  size_t nzombies, zombie_cap;
} tx_mpi_t;

static uint64_t req_handle(MPI_Request q) {
  uint64_t h = 0;
  if (q != MPI_REQUEST_NULL) {
    memcpy(&h, &q, sizeof q);
  }
  return h;
}

static MPI_Request handle_req(uint64_t h) {
  MPI_Request q = MPI_REQUEST_NULL;
  if (h != 0) {
    memcpy(&q, &h, sizeof q);
  }
  return q;
}

static uint64_t msg_handle(MPI_Message m) {
  uint64_t h = 0;
  if (m != MPI_MESSAGE_NULL) {
    memcpy(&h, &m, sizeof m);
  }
  return h;
}

static MPI_Message handle_msg(uint64_t h) {
  MPI_Message m = MPI_MESSAGE_NULL;
  if (h != 0) {
    memcpy(&m, &h, sizeof m);
  }
  return m;
}

static void zombie(tx_mpi_t *t, MPI_Request q) {
  if (q == MPI_REQUEST_NULL) {
    return;
  }
  if (t->nzombies == t->zombie_cap) {
    size_t cap = t->zombie_cap ? 2 * t->zombie_cap : 64;
    MPI_Request *z = realloc(t->zombies, cap * sizeof *z);
    if (z == NULL) {
      /* Out of memory on the failure path: let MPI finish the request on its own. */
      MPI_Request_free(&q);
      return;
    }
    t->zombies = z;
    t->zombie_cap = cap;
  }
  t->zombies[t->nzombies++] = q;
}

static int tx_reserve(void *s, size_t cap) {
  tx_mpi_t *t = s;
  if (cap <= t->cap) {
    return 0;
  }
  MPI_Request *q = realloc(t->req, cap * sizeof *q);
  if (q != NULL) {
    t->req = q;
  }
  unsigned char *p = q ? realloc(t->probed, cap) : NULL;
  if (p != NULL) {
    t->probed = p;
  }
  int *d = p ? realloc(t->idx, cap * sizeof *d) : NULL;
  if (d != NULL) {
    t->idx = d;
  }
  MPI_Status *st = d ? realloc(t->stat, cap * sizeof *st) : NULL;
  if (st == NULL) {
    return MPI_ERR_NO_MEM;
  }
  t->stat = st;
  t->cap = cap;
  return 0;
}

static int tx_send(void *s, size_t i, const void *buf, size_t len, int peer, int tag) {
  tx_mpi_t *t = s;
  t->probed[i] = 0;
  return MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, t->comm, &t->req[i]);
}

static int tx_recv(void *s, size_t i, void *buf, size_t len, int peer, int tag) {
  tx_mpi_t *t = s;
  t->probed[i] = 0;
  return MPI_Irecv(buf, (int)len, MPI_BYTE, peer, tag, t->comm, &t->req[i]);
}

static int tx_probe(void *s, int source, int tag, mpiar__txmsg_t *m, int *found) {
  tx_mpi_t *t = s;
  MPI_Message msg = MPI_MESSAGE_NULL;
  MPI_Status st;
  *found = 0;
  int err = MPI_Improbe(source == MPIAR__TX_ANY ? MPI_ANY_SOURCE : source,
                        tag == MPIAR__TX_ANY ? MPI_ANY_TAG : tag, t->comm, found, &msg, &st);
  if (err != MPI_SUCCESS || !*found) {
    return err;
  }
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  m->handle = msg_handle(msg);
  m->source = st.MPI_SOURCE;
  m->tag = st.MPI_TAG;
  m->bytes = (size_t)count;
  return 0;
}

/* Receive and drop a matched message: into a scratch buffer, in blocks that all land on the same
 * 64 KiB (an overlapping receive type is never read back, and it keeps a stray gigabyte from
 * needing a gigabyte). */
static int discard(MPI_Message *msg, size_t bytes) {
  enum { SINK = 64 * 1024 };
  static _Thread_local char sink[SINK];
  if (bytes <= SINK) {
    return MPI_Mrecv(sink, (int)bytes, MPI_BYTE, msg, MPI_STATUS_IGNORE);
  }
  MPI_Datatype blocks, whole;
  int nblocks = (int)(bytes / SINK);
  int tail = (int)(bytes % SINK);
  MPI_Type_create_hvector(nblocks, SINK, 0, MPI_BYTE, &blocks);
  int lens[2] = {1, tail};
  MPI_Aint displs[2] = {0, 0};
  MPI_Datatype types[2] = {blocks, MPI_BYTE};
  MPI_Type_create_struct(tail > 0 ? 2 : 1, lens, displs, types, &whole);
  MPI_Type_commit(&whole);
  int err = MPI_Mrecv(sink, 1, whole, msg, MPI_STATUS_IGNORE);
  MPI_Type_free(&whole);
  MPI_Type_free(&blocks);
  return err;
}

static int tx_recv_msg(void *s, size_t i, void *buf, mpiar__txmsg_t *m) {
  tx_mpi_t *t = s;
  MPI_Message msg = handle_msg(m->handle);
  t->probed[i] = 1;
  int err = MPI_Imrecv(buf, (int)m->bytes, MPI_BYTE, &msg, &t->req[i]);
  if (err != MPI_SUCCESS && msg != MPI_MESSAGE_NULL) {
    discard(&msg, m->bytes); /* so that its sender is not left waiting */
  }
  m->handle = msg_handle(msg);
  return err;
}

static int tx_recv_now(void *s, void *buf, mpiar__txmsg_t *m) {
  (void)s;
  MPI_Message msg = handle_msg(m->handle);
  int err = buf == NULL ? discard(&msg, m->bytes)
                        : MPI_Mrecv(buf, (int)m->bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  m->handle = msg_handle(msg);
  return err;
}

static int tx_poll(void *s, size_t n, mpiar__txdone_t *done, size_t *ndone) {
  tx_mpi_t *t = s;
  int outcount = 0;
  *ndone = 0;
  int err = MPI_Testsome((int)n, t->req, &outcount, t->idx, t->stat);
  if (err != MPI_SUCCESS && err != MPI_ERR_IN_STATUS) {
    return err;
  }
  if (outcount == MPI_UNDEFINED || outcount == 0) {
    return 0;
  }
  for (int k = 0; k < outcount; k++) {
    size_t i = (size_t)t->idx[k];
    done[k].index = i;
    done[k].err = err == MPI_ERR_IN_STATUS ? t->stat[k].MPI_ERROR : MPI_SUCCESS;
    done[k].bytes = 0;
    if (t->probed[i]) {
      int count = -1;
      MPI_Get_count(&t->stat[k], MPI_BYTE, &count);
      done[k].bytes = (size_t)count;
    }
  }
  *ndone = (size_t)outcount;
  /* Completed requests are MPI_REQUEST_NULL now: close the gaps. */
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->req[i] != MPI_REQUEST_NULL) {
      t->req[kept] = t->req[i];
      t->probed[kept++] = t->probed[i];
    }
  }
  return 0;
}

static void tx_abandon(void *s, size_t i, int how, double until) {
  tx_mpi_t *t = s;
  if (how == MPIAR__TX_CANCEL) {
    MPI_Cancel(&t->req[i]);
    MPI_Wait(&t->req[i], MPI_STATUS_IGNORE);
  } else if (how == MPIAR__TX_FINISH) {
    int flag = 0;
    while (MPI_Test(&t->req[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag &&
           MPI_Wtime() < until) {
    }
    zombie(t, t->req[i]);
  } else {
    zombie(t, t->req[i]);
  }
  t->req[i] = MPI_REQUEST_NULL;
}

static size_t tx_compact(void *s, size_t n) {
  tx_mpi_t *t = s;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->req[i] != MPI_REQUEST_NULL) {
      t->req[kept] = t->req[i];
      t->probed[kept++] = t->probed[i];
    }
  }
  return kept;
}

static int tx_send_ctl(void *s, const void *buf, size_t len, int peer, int tag,
                       mpiar__txreq_t *q) {
  tx_mpi_t *t = s;
  MPI_Request r = MPI_REQUEST_NULL;
  int err = MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, t->comm, &r);
  if (err != MPI_SUCCESS) {
    return err;
  }
  if (q != NULL) {
    q->handle = req_handle(r);
  } else {
    zombie(t, r);
  }
  return 0;
}

static int tx_test_ctl(void *s, mpiar__txreq_t *q, int *done) {
  (void)s;
  MPI_Request r = handle_req(q->handle);
  *done = 0;
  int err = MPI_Test(&r, done, MPI_STATUS_IGNORE);
  q->handle = req_handle(r);
  return err;
}

static void tx_keep_ctl(void *s, mpiar__txreq_t *q) {
  zombie(s, handle_req(q->handle));
  q->handle = 0;
}

static size_t tx_pending(void *s) {
  tx_mpi_t *t = s;
  size_t kept = 0;
  for (size_t i = 0; i < t->nzombies; i++) {
    int flag = 0;
    MPI_Test(&t->zombies[i], &flag, MPI_STATUS_IGNORE);
    if (!flag) {
      t->zombies[kept++] = t->zombies[i];
    }
  }
  t->nzombies = kept;
  return kept;
}

static void tx_close(void *s) {
  tx_mpi_t *t = s;
  if (t == NULL) {
    return;
  }
  for (size_t k = 0; k < t->nzombies; k++) {
    MPI_Request_free(&t->zombies[k]);
  }
  free(t->zombies);
  free(t->req);
  free(t->probed);
  free(t->idx);
  free(t->stat);
  free(t);
}

static double tx_now(void) {
  return MPI_Wtime();
}

static void tx_error_string(int err, char *buf, size_t len) {
  char msg[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(err, msg, &n) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error %d", err);
  }
  snprintf(buf, len, "%s", msg);
}

const mpiar__transport_t mpiar__transport_mpi = {
    .name = "mpi",
    .send_name = "MPI_Isend",
    .recv_name = "MPI_Irecv",
    .probe_name = "MPI_Improbe",
    .recv_msg_name = "MPI_Imrecv",
    .poll_name = "MPI_Testsome",
    .test_name = "MPI_Test",
    .reserve = tx_reserve,
    .send = tx_send,
    .recv = tx_recv,
    .probe = tx_probe,
    .recv_msg = tx_recv_msg,
    .recv_now = tx_recv_now,
    .poll = tx_poll,
    .abandon = tx_abandon,
    .compact = tx_compact,
    .send_ctl = tx_send_ctl,
    .test_ctl = tx_test_ctl,
    .keep_ctl = tx_keep_ctl,
    .pending = tx_pending,
    .close = tx_close,
    .now = tx_now,
    .error_string = tx_error_string,
};

int mpiar__transport_mpi_open(MPI_Comm comm, void **state, long *tag_ub) {
  tx_mpi_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  t->comm = comm;
  int *ub = NULL, flag = 0;
  *tag_ub = 32767;
  if (MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub != NULL &&
      *ub > 0) {
    *tag_ub = *ub;
  }
  *state = t;
  return MPIAR_SUCCESS;
}
