/*
 * The transport interface: what the engine asks of the network, as one table of functions plus
 * the transport's own state (the engine never looks inside the state).
 *
 * A transport knows messages, tags and completions; it never knows schedules, requests or
 * plans. The engine knows schedules and this table; it never calls a network library itself.
 * The MPI transport (transport_mpi.c) runs on a communicator; the threads transport
 * (tests/engine) runs the ranks of a communicator as threads of one process and delivers
 * messages in an adversarial, seeded order.
 *
 * The message table. Every message the engine waits on through passes (a SEND or RECV piece of a
 * schedule) is an entry of the transport's table, at the index the engine names when it posts
 * it; the engine keeps its own owner of each entry at the same index. poll() tests entries
 * [0, n) at once (MPI: one MPI_Testsome, which runs MPI's progress engine once whatever the
 * number of requests), reports the ones that completed, and removes them, keeping the others in
 * their order; the engine removes its owners the same way. abandon() empties one entry and
 * compact() then closes the gaps, again in order.
 *
 * Matching. Messages between one ordered pair of ranks with one tag match receives in the order
 * they were sent; nothing else is ordered. An exact-length receive (recv) is only ever matched by
 * a message of that length, because the engine puts the length into the tag (see engine.h); a
 * message whose length is not known is taken by probe() and received with recv_msg() (or
 * recv_now()) after the engine has compared its length.
 *
 * Errors are the transport's own codes (MPI error codes for MPI), 0 meaning success; the engine
 * turns them into library errors with error_string() and the names below, so its messages name
 * the call that failed.
 */
#ifndef MPIAR_TRANSPORT_H
#define MPIAR_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

/* Any source or any tag, for probe(). */
#define MPIAR__TX_ANY (-1)

/* A message taken out of the transport's queue by probe() (MPI: an MPI_Message), not yet
 * received. */
typedef struct mpiar__txmsg {
  uint64_t handle; /* the transport's; 0 once received */
  int source, tag;
  size_t bytes;
} mpiar__txmsg_t;

/* A send outside the message table (control messages: the argument check, notices, FINs). */
typedef struct mpiar__txreq {
  uint64_t handle; /* the transport's; 0: complete (nothing outstanding) */
} mpiar__txreq_t;

/* One completion reported by poll(). */
typedef struct mpiar__txdone {
  size_t index; /* the entry's index before the removal */
  int err;      /* 0, or the transport's error for this message */
  size_t bytes; /* receives: the length that arrived */
} mpiar__txdone_t;

/* What abandon() does with an entry of a failed operation. */
enum {
  MPIAR__TX_CANCEL = 0, /* a receive that has not matched: cancel it */
  MPIAR__TX_FINISH,     /* a receive that matched: let it finish (bounded), then keep it */
  MPIAR__TX_KEEP        /* a send: keep it until the transport closes */
};

typedef struct mpiar__transport {
  const char *name;
  /* Names of the calls, for error messages ("MPI_Isend", ...). */
  const char *send_name, *recv_name, *probe_name, *recv_msg_name, *poll_name, *test_name;

  /* Make room for @p cap entries in the message table. */
  int (*reserve)(void *tx, size_t cap);
  /* Post entry @p i: a send of @p len bytes, or a receive of exactly @p len bytes. */
  int (*send)(void *tx, size_t i, const void *buf, size_t len, int peer, int tag);
  int (*recv)(void *tx, size_t i, void *buf, size_t len, int peer, int tag);
  /* Take the earliest message from @p source with @p tag (either may be MPIAR__TX_ANY) out of
   * the queue without receiving it: *found = 1 and *m filled, or *found = 0. */
  int (*probe)(void *tx, int source, int tag, mpiar__txmsg_t *m, int *found);
  /* Receive taken message @p m (of m->bytes bytes) into @p buf as entry @p i. On an error the
   * message is discarded, so that its sender is not left waiting. */
  int (*recv_msg)(void *tx, size_t i, void *buf, mpiar__txmsg_t *m);
  /* Receive taken message @p m now into @p buf (NULL: discard it, whatever its length). */
  int (*recv_now)(void *tx, void *buf, mpiar__txmsg_t *m);
  /* Test entries [0, n): the completed ones go to done[0 .. *ndone) and leave the table (the
   * others keep their order). A failure of the test itself returns its error. */
  int (*poll)(void *tx, size_t n, mpiar__txdone_t *done, size_t *ndone);
  /* Empty entry @p i of a failed operation (MPIAR__TX_*; FINISH waits until @p until, on
   * now()'s clock); the transport keeps what is still in flight until it closes. */
  void (*abandon)(void *tx, size_t i, int how, double until);
  /* Remove the entries that abandon() emptied from [0, n), keeping the order; @return the new n. */
  size_t (*compact)(void *tx, size_t n);
  /* A send outside the table; @p q NULL: nobody tests it (kept until the transport closes). */
  int (*send_ctl)(void *tx, const void *buf, size_t len, int peer, int tag, mpiar__txreq_t *q);
  /* Test a send of send_ctl(): *done = 1 (q->handle is 0 then) or 0. */
  int (*test_ctl)(void *tx, mpiar__txreq_t *q, int *done);
  /* Keep an unfinished send of send_ctl() until the transport closes. */
  void (*keep_ctl)(void *tx, mpiar__txreq_t *q);
  /* Test what abandon() and keep_ctl() kept: @return how many are still in flight. */
  size_t (*pending)(void *tx);
  /* Release the transport's state; what is still in flight is left to the network. */
  void (*close)(void *tx);
  /* The transport's clock, in seconds (deadlines). */
  double (*now)(void);
  /* One line for error code @p err. */
  void (*error_string)(int err, char *buf, size_t len);
} mpiar__transport_t;

#endif /* MPIAR_TRANSPORT_H */
