/*
 * The engine: runs requests (one rank's schedule each) over a transport (transport.h), for one
 * communicator. Its state (mpiar__engine_t) is part of the core's context; the engine never
 * looks at the rest of the context, and the core never calls the transport's message functions.
 *
 * A plan is a built schedule plus everything derived from it that does not change between runs
 * (message pieces and their tags); it is immutable once built and shared by every request that
 * runs it (its cache fields belong to the core's plan cache). A request holds the per-run state
 * (pending dependency counts, ready queues, the messages in flight, scratch), so one plan can run
 * several times at once.
 *
 * Tags. Every message carries, besides the builder's step tag, the slot of its operation (each
 * outstanding operation of a communicator has its own slot, so messages of different operations
 * never match each other) and, for messages shorter than the size field can hold, its exact
 * length in bytes. A receive of an exact-length message is posted with that tag, so a message of
 * another length can never match it (no truncation is possible, whatever the sender does); a
 * longer message is received only after a probe has shown its length. Layout, from the low bits:
 *   step tag (MPIAR__TAG_BITS) | size field (size_bits) | slot (slot_bits)
 * sized from the transport's largest tag (MPI_TAG_UB: 2^28 - 1 in MPICH 4 gives 13 size bits and
 * 5 slot bits). The highest slot is reserved for control messages (failure notices, argument
 * checks, the drain at release): step tag MPIAR__CTL_NOTICE or MPIAR__CTL_FIN, or
 * 2 * MPIAR__CTL_CHECK + 32 * (data slot) + round for the argument check of that slot.
 */
#ifndef MPIAR_ENGINE_H
#define MPIAR_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "mpiar_types.h"

#include "base/common.h"
#include "engine/transport.h"
#include "schedule/schedule.h"

/* Bits of the builders' step tags (schedule.h: tags < MPIAR__TAG_LIMIT = 2^MPIAR__TAG_BITS). */
#define MPIAR__TAG_BITS 10

/* Control message types (step tags of the control slot). */
enum {
  MPIAR__CTL_NOTICE = 0, /* a rank failed: the context is broken everywhere */
  MPIAR__CTL_FIN = 1,    /* drain at release: this rank will send nothing more */
  MPIAR__CTL_CHECK = 16  /* + round: argument agreement (MPIAR_CHECK) */
};

typedef enum mpiar__coll {
  MPIAR__COLL_ALLREDUCE = 0,
  MPIAR__COLL_BCAST,
  MPIAR__COLL_REDUCE_SCATTER, /* count: one rank's block (reduce_scatter.c) */
  MPIAR__COLL_ALLGATHER       /* count: one rank's block (allgather.c) */
} mpiar__coll_t;

/* What a schedule depends on: everything but the buffers, the datatype and the operation. */
typedef struct mpiar__plan_key {
  int coll;            /* mpiar__coll_t */
  size_t count;        /* elements */
  size_t elem_size;    /* bytes per element */
  const void *builder; /* registry entry */
  size_t segment_elems;
  int in_place;
  int root; /* bcast root, -1 for allreduce */
} mpiar__plan_key_t;

/* One message of a SEND or RECV step (steps longer than the message limit are several). */
typedef struct mpiar__piece {
  uint32_t step;
  int tag;    /* step tag | size field (the slot is added when the request starts) */
  size_t off; /* bytes from the step's start */
  size_t len; /* bytes */
  uint8_t exact; /* 1: the tag holds the exact length (posted receive); 0: probed receive */
} mpiar__piece_t;

/* A message taken out of the transport's queue (probe) before its receive was ready. */
typedef struct mpiar__held {
  mpiar__txmsg_t msg;
  uint64_t *data; /* non-NULL: already received (an argument check message); msg.handle is 0 */
} mpiar__held_t;
#define MPIAR__HELD_MAX 256

/* A failure notice: which rank failed and why. Every notice has this size. */
typedef struct mpiar__notice {
  int32_t rank;
  int32_t code;
  char detail[248];
} mpiar__notice_t;

/* A plan: the schedule and its messages (the cache fields are the core plan cache's). */
typedef struct mpiar__plan {
  mpiar__plan_key_t key;
  const char *name; /* algorithm name, for messages */
  mpiar__schedule_t sched;
  uint32_t *ndeps;      /* per step: its number of dependencies (copied into each run) */
  uint32_t *start;      /* steps with no dependency, in order */
  size_t nstart;
  uint32_t *piece_first; /* per step: first piece (nsteps + 1 entries) */
  mpiar__piece_t *pieces;
  size_t npieces;
  size_t scratch_bytes;
  int refs;                    /* requests that hold this plan (not evicted while > 0) */
  struct mpiar_request *spare; /* finished requests kept for reuse (linked by next) */
  int nspare;
  uint32_t hash;
  struct mpiar__plan *hnext;
  struct mpiar__plan *lru_prev, *lru_next;
} mpiar__plan_t;

/* Finished requests a plan keeps for reuse, so that repeated calls allocate nothing. */
#define MPIAR__PLAN_SPARES 4

/* Request states. */
enum {
  MPIAR__REQ_INACTIVE = 0, /* persistent, not started (or finished) */
  MPIAR__REQ_ACTIVE,
  MPIAR__REQ_DONE /* nonpersistent, finished, not yet collected by test/wait */
};

/* Receive piece states. */
enum { PIECE_WAIT = 0, PIECE_POSTED, PIECE_PROBING, PIECE_DONE };

#define MPIAR__REQUEST_MAGIC 0x6d706172u /* "mpar" */

/* The hook of a generalized request (core/grequest.h): the core's, never looked at here. */
struct mpiar__grequest;

struct mpiar_request {
  /* What every pass and every test or wait touches, first (a few cache lines). */
  uint32_t magic;
  int state;
  struct mpiar__engine *eng; /* NULL: a generalized request */
  mpiar__plan_t *plan;
  struct mpiar__grequest *greq; /* non-NULL: a generalized request (no engine, no plan) */
  int persistent;
  int rc;                 /* the result once finished */
  int check_round, check_rounds;
  int slot;
  int tag_base;           /* slot << (size bits + step bits) */
  uint32_t seq;
  unsigned polls; /* passes since the clock was last read */
  unsigned tests; /* test calls (the scan cadence of test loops) */
  double deadline;

  /* Per-run working state (allocated with the request, sized by the plan). */
  uint32_t *pending;      /* per step: dependencies not yet complete */
  uint32_t *ready;        /* communication queue, then computation queue */
  uint32_t *piece_left;   /* per step: pieces not yet complete */
  uint8_t *piece_state;   /* per piece: PIECE_* (receives) */
  uint32_t *probing;      /* receive pieces waiting for a probe */
  size_t nprobing;
  size_t nmpireq;         /* its messages outstanding (in the engine's table) */
  size_t comm_head, comm_tail, comp_head, comp_tail;
  size_t done;
  struct mpiar_request *anext, *aprev; /* engine's active list (or its tainted list) */
  struct mpiar_request *next;          /* plan's spare list */

  /* The call's arguments. */
  mpiar_dtype_t dtype;
  mpiar_op_t kop; /* the kernel's operation (AVG runs as SUM) */
  int average;    /* final reductions divide by the rank count */
  int tainted;    /* failed with messages in flight: freed only with the context */
  const void *in; /* user buffers */
  void *out;
  char *base[MPIAR__BUF_COUNT];
  void *scratch;
  long timeout_ms; /* 0: no deadline */
  int check;       /* run the argument agreement first */

  /* Rarely touched: the detail of a failure, and the argument check's state (control messages):
   * per field, the smallest value and the lowest rank holding it (entries 2f, 2f + 1), the
   * largest and its rank (16 + 2f, 17 + 2f). */
  char detail[512];      /* the result's detail */
  uint64_t signature[8]; /* the arguments the check agrees on (see executor.c) */
  int check_sent, check_recvd;
  int check_failed; /* the ranks disagreed (an error everywhere, the context stays usable) */
  /* A check message: the accumulator (32 words), then the operation's sequence number (a rank
   * that does not check the operation tells a difference in the check setting by it). */
  uint64_t check_acc[32], check_send[33], check_in[33];
  mpiar__txreq_t check_req;
};
typedef struct mpiar_request mpiar__request_t;

/* The engine's fields of the core's context (one communicator). */
typedef struct mpiar__engine {
  const mpiar__transport_t *tx; /* the transport's functions */
  void *txs;                    /* its state */
  int rank, size;

  /* Tag layout (see the file header). */
  int size_bits, slot_bits;
  int nslots;       /* data slots; slot nslots is the control slot */
  size_t exact_max; /* messages shorter than this carry their exact length */

  /* Operations in progress. */
  uint32_t seq;                    /* operations started so far */
  int next_slot;                   /* the next operation's slot: seq mod nslots */
  struct mpiar_request **slot_req; /* the request running in each data slot, or NULL */
  struct mpiar_request *active;    /* every started, unfinished request (list by anext) */
  struct mpiar_request *active_tail;
  int nactive;

  /* Failure: a broken engine runs nothing; the reason is every later call's detail. */
  int broken;
  mpiar__held_t *held;
  int nheld;
  uint64_t progress_count; /* steps completed (any request) */
  /* The owner of every entry of the transport's message table, at the entry's index; the
   * transport tests them all with one poll per pass. */
  struct mpiar__mowner {
    struct mpiar_request *r;
    uint32_t piece;
  } *mown;
  mpiar__txdone_t *mdone;
  size_t nm, mcap;
  size_t mreserved;          /* pieces of the requests in flight: the table's room */
  double suspect_time;       /* when a held message first contradicted its operation (0: none) */
  uint64_t suspect_progress; /* progress_count then */
  unsigned char *fin_early;  /* per rank: its FIN (release) arrived before this rank's release */
  struct mpiar_request *tainted; /* failed requests whose memory the transport may still read */

  /* Names field @p f of an argument check's accumulator and writes its smallest (@p which 0) or
   * largest value (1) as text: the front end's, which knows what its signature holds. */
  const char *(*check_describe)(const uint64_t *acc, int f, int which, char *buf, size_t len);

  char broken_reason[512];    /* why the engine broke (broken != 0) */
  mpiar__notice_t notice_out; /* sent to every rank when this rank fails */
} mpiar__engine_t;

/* A drain in progress (release): what this rank has seen and sent. */
typedef struct mpiar__drain {
  unsigned char *fin_from; /* per rank: its FIN arrived */
  int fins;
  int fin_sent;
  int done;
} mpiar__drain_t;

/* ---- engine.c ---- */

/*
 * Set up @p e over transport @p tx (state @p txs) for rank @p rank of @p size, with tags up to
 * @p tag_ub; the transport is the engine's from now on (closed by mpiar__engine_close()).
 */
int mpiar__engine_init(mpiar__engine_t *e, const mpiar__transport_t *tx, void *txs, int rank,
                       int size, long tag_ub);

/* The tag layout for tags up to @p tag_ub (sets size_bits, slot_bits, nslots, exact_max). */
void mpiar__engine_tag_layout(mpiar__engine_t *e, long tag_ub);

/* The clock of the engine's transport (seconds). */
static inline double mpiar__engine_now(const mpiar__engine_t *e) {
  return e->tx->now();
}

/*
 * Break the engine: every active request fails with @p code and @p reason (the request whose
 * failure broke it has failed already, with its own code), this rank's in-flight messages are
 * kept by the transport until it closes, and, when @p notify, every other rank is sent a
 * failure notice.
 */
void mpiar__engine_break(mpiar__engine_t *e, int code, const char *reason, int notify);

/* Start request @p r: a slot (free: the caller waited for it), its deadline @p deadline (0:
 * none), room in the message table, its first steps (or its argument check) posted. */
int mpiar__engine_start(mpiar__engine_t *e, mpiar__request_t *r, double deadline);

/* Begin a drain (FINs that arrived before it count). */
int mpiar__drain_begin(mpiar__engine_t *e, mpiar__drain_t *d);
/* One drain pass; sets d->done when this rank has sent its FIN, every send finished and every
 * other rank's FIN arrived. */
void mpiar__drain_pass(mpiar__engine_t *e, mpiar__drain_t *d);

/* Close the transport (release: what is still in flight is left to the network); the engine
 * runs nothing more. */
void mpiar__engine_detach(mpiar__engine_t *e);

/* Detach, then free the engine's memory with the failed requests it kept. */
void mpiar__engine_close(mpiar__engine_t *e);

/*
 * What the engine derives once from a finalized schedule (plan->sched, plan->name set): the
 * dependency counts, the steps that start a run, the message pieces with their tags (messages
 * shorter than @p exact_max carry their length; steps longer than @p max_message_bytes are
 * split) and the scratch size. mpiar__plan_unprepare() frees that and the schedule.
 */
int mpiar__plan_prepare(mpiar__plan_t *plan, size_t exact_max, size_t max_message_bytes);
void mpiar__plan_unprepare(mpiar__plan_t *plan);

/* A request of @p plan (one allocation: the request, its working arrays, its scratch). */
mpiar__request_t *mpiar__request_alloc(const mpiar__plan_t *plan);

/* Abandon a request as a failure of this rank with @p rc (the detail set): it fails, the engine
 * breaks and every other rank is told. */
void mpiar__request_abandon(mpiar__request_t *r, int rc);

/* Requests allocated in this process so far (tests check that persistent starts allocate none). */
extern size_t mpiar__requests_allocated;

/* Requests allocated and not yet freed (tests check that nothing leaks). */
extern long mpiar__requests_live;

/* Free a request's memory (every request is freed through this). */
void mpiar__request_free_mem(mpiar__request_t *r);

/* ---- executor.c ---- */

/*
 * One progress pass over every active request of the engine. Sets *progressed when anything
 * moved. Requests that finish are unlinked and marked done (their rc set).
 */
void mpiar__progress(mpiar__engine_t *e, int *progressed);

/* Abandon a failed request (cancel receives, leave sends to the transport) and record its result. */
void mpiar__request_fail(mpiar__request_t *req, int code, const char *detail);

/* Post a started request's ready messages (or its argument check's first round) now. */
void mpiar__request_post(mpiar__request_t *req);

/* Reset the run state of a started request and make its first steps ready. */
void mpiar__request_begin(mpiar__request_t *req);

/* Receive and discard a matched message (drain, mismatch). */
void mpiar__discard(mpiar__engine_t *e, mpiar__txmsg_t *msg, size_t bytes);

/* Discard a held message (received already, or still in MPI's queue). */
void mpiar__held_discard(mpiar__engine_t *e, mpiar__held_t *h);

/* Look at unexpected messages (when idle): notices, mismatched lengths, early messages. */
void mpiar__scan(mpiar__engine_t *e);

#endif /* MPIAR_ENGINE_H */
