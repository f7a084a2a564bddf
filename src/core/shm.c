/*
 * Node-shared buffers (mpiar_alloc / mpiar_free) and the zero-copy allreduce on them. The design
 * and the memory ordering are described in docs/shm.md; in short:
 *
 * - Every allocation is an MPI_Win_allocate_shared window over the node's ranks of the
 *   communicator; each rank's segment is registered in a process-wide table sorted by address.
 * - The first allocation on a communicator makes its domain: the node's communicator and one more
 *   window holding every rank's control block, a ring of SHM_RING entries indexed by the
 *   operation's number (every operation started on the context from then on counts, on either
 *   path, so the numbers agree on every rank of a correct program).
 * - Each entry has two words written by its owner only and read by everyone: `state`
 *   ((number << 2) | path) with the buffers' locations and the arguments written before it, and
 *   `done` (the number, once the owner's share is written into every receive buffer). Both are
 *   stored with release and loaded with acquire: a rank reads another's buffers only after it has
 *   seen that rank's `state`, and returns only after it has seen every rank's `done`, so every
 *   read and write of the buffers is ordered with the owners' own accesses before and after the
 *   call. Non-temporal stores are fenced (sfence) before `done` is released.
 */
#include "core/shm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "algorithms/ring_group.h"
#include "core/context.h"
#include "reduce_kernels/kernels.h"

/* Entries of a control block's ring (an operation's number mod SHM_RING picks its entry). More
 * than the engine's slots, so a rank never reuses an entry another rank still reads. */
#define SHM_RING 64

/* Paths in the low bits of an entry's state. */
enum { PATH_SHM = 1, PATH_ENGINE = 2, PATH_FAILED = 3 };

/* Calls of at most this many bytes carry their input in the entry: every rank then reduces the
 * whole vector from the entries and writes its own receive buffer only (one flag, no second
 * phase). */
#define SHM_INLINE_BYTES 4096

typedef struct shm_entry {
  uint64_t state; /* (number << 2) | path, released after the fields below */
  uint64_t count;
  uint64_t in_off, out_off;
  int32_t in_id, out_id;
  int32_t dtype, op;
  int32_t coll, root; /* the collective (mpiar__coll_t) and a broadcast's root */
  int32_t in_place;   /* the input lies in the receive buffer (in_id, in_off unused) */
  _Alignas(64) char payload[SHM_INLINE_BYTES]; /* the input of an inline call */
  _Alignas(64) uint64_t done; /* the number, released once this rank's share is written */
  char pad1[64 - 8];
} shm_entry_t;

_Static_assert(sizeof(shm_entry_t) % 64 == 0, "entries are whole cache lines");

typedef struct shm_ctl {
  shm_entry_t e[SHM_RING];
} shm_ctl_t;

typedef struct shm_alloc shm_alloc_t;
struct shm_op;

/* A rank finishes its zero-copy operations started this many operations before a new one before
 * it starts it (docs/shm.md: no rank then reuses an entry another still reads). */
#define SHM_WINDOW 16
_Static_assert(SHM_RING >= 4 * SHM_WINDOW, "entries outlive the window");

typedef struct mpiar__shm_domain {
  mpiar__context_t *ctx; /* holds a reference */
  MPI_Comm node;         /* the node's ranks of the communicator */
  int nrank, nsize;
  int whole;           /* every rank of the communicator is on this node */
  int hier;            /* else: every node holds nsize of its ranks (the hierarchical form) */
  MPI_Win ctl_win;     /* the control blocks */
  shm_ctl_t **ctl;     /* ctl[q]: node rank q's, mapped here */
  int *ranks;          /* ranks[q]: node rank q's rank in the communicator (for messages) */
  shm_alloc_t **allocs; /* by number (alike on every rank) */
  int nallocs, cap, live;
  uint64_t seq;    /* operations started on the context since the domain was made */
  struct shm_op *active, *active_tail; /* this rank's unfinished nonblocking ones, by number */
  char *scratch;   /* the reductions' temporaries (one operation reduces at a time) */
  size_t scratch_bytes;
} mpiar__shm_domain_t;

struct shm_alloc {
  mpiar__shm_domain_t *dom;
  int id;
  MPI_Win win;
  char *seg;   /* this rank's segment (offsets are taken from here) */
  char *mine;  /* what mpiar_alloc returned: the segment's first 64-byte boundary */
  size_t bytes;
  char **base;  /* base[q]: node rank q's segment, mapped here */
  size_t *size; /* its size */
  shm_alloc_t *older, *newer; /* creation order */
};

int mpiar__shm_live;

/* The table of this process's segments, sorted by address; the creation list. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static shm_alloc_t **table;
static int table_n, table_cap;
static shm_alloc_t *oldest, *newest;
static int finalize_keyval = MPI_KEYVAL_INVALID;
static int shm_finalized;

/* The last entry whose segment starts at or below @p a, or -1 (table_lock held). */
static int table_find(uintptr_t a) {
  int lo = 0, hi = table_n - 1, best = -1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if ((uintptr_t)table[mid]->mine <= a) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

/* The allocation holding [p, p + bytes) (table_lock held), or NULL. */
static shm_alloc_t *table_lookup(const void *p, size_t bytes) {
  uintptr_t a = (uintptr_t)p;
  int i = table_find(a);
  if (i < 0) {
    return NULL;
  }
  shm_alloc_t *al = table[i];
  uintptr_t s = (uintptr_t)al->mine;
  return a - s <= al->bytes && bytes <= al->bytes - (a - s) ? al : NULL;
}

/* ---- the zero-copy allreduce ---- */

static inline uint64_t load_acq(const uint64_t *w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}
static inline void store_rel(uint64_t *w, uint64_t v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
}

static int window_wait(mpiar__shm_domain_t *dom, uint64_t s);

int mpiar__shm_note_engine(mpiar__context_t *ctx) {
  mpiar__shm_domain_t *dom = ctx->shm;
  if (!dom->whole && !dom->hier) {
    return MPIAR_SUCCESS;
  }
  int rc = window_wait(dom, dom->seq + 1);
  uint64_t s = ++dom->seq;
  store_rel(&dom->ctl[dom->nrank]->e[s % SHM_RING].state, s << 2 | PATH_ENGINE);
  return rc;
}

static const char *const coll_names[] = {"allreduce", "bcast", "reduce_scatter_block",
                                         "allgather"};

static const char *coll_name(int coll) {
  return coll >= 0 && coll < (int)(sizeof coll_names / sizeof coll_names[0]) ? coll_names[coll]
                                                                              : "?";
}

/*
 * The bytes a rank's receive buffer spans (*out) and its send buffer (*in, 0 in place), for @p
 * count, @p es-byte elements on @p p ranks: a reduce-scatter's input and an allgather's output
 * hold p blocks, and in place a reduce-scatter reads its input from the receive buffer.
 */
static void call_bytes(int coll, size_t count, size_t es, int p, int in_place, size_t *in,
                       size_t *out) {
  size_t n = count * es, all = n * (size_t)p;
  *in = in_place || coll == MPIAR__COLL_BCAST ? 0 : coll == MPIAR__COLL_REDUCE_SCATTER ? all : n;
  *out = coll == MPIAR__COLL_ALLGATHER || (coll == MPIAR__COLL_REDUCE_SCATTER && in_place) ? all
                                                                                          : n;
}

/* The bytes each rank contributes (an inline call's payload): the whole input. */
static size_t input_bytes(int coll, size_t count, size_t es, int p) {
  return coll == MPIAR__COLL_REDUCE_SCATTER ? count * es * (size_t)p : count * es;
}

int mpiar__shm_eligible(mpiar__context_t *ctx, mpiar__shm_call_t *call) {
  mpiar__shm_domain_t *dom = ctx->shm;
  if (call->count == 0 || !(dom->whole || (dom->hier && call->across))) {
    return 0;
  }
  size_t in_bytes, out_bytes;
  call_bytes(call->coll, call->count, mpiar_dtype_size(call->dtype), dom->nsize, call->in == NULL,
             &in_bytes, &out_bytes);
  pthread_mutex_lock(&table_lock);
  shm_alloc_t *out = table_lookup(call->out, out_bytes);
  shm_alloc_t *in = call->in == NULL ? out : table_lookup(call->in, in_bytes);
  int ok = out != NULL && in != NULL && out->dom == dom && in->dom == dom;
  if (ok) {
    call->out_id = out->id;
    call->out_off = (size_t)((const char *)call->out - out->seg);
    call->in_id = in->id;
    call->in_off = call->in == NULL ? call->out_off : (size_t)((const char *)call->in - in->seg);
  }
  pthread_mutex_unlock(&table_lock);
  return ok;
}

enum { PHASE_ARRIVE, PHASE_WORK, PHASE_DONE, PHASE_FINISHED };

typedef struct shm_op {
  mpiar__context_t *ctx;
  mpiar__shm_domain_t *dom;
  mpiar__shm_call_t call;
  uint64_t seq;
  int slot;
  int phase;
  int next; /* the first rank not yet seen (arrival, then done) */
  int rc;
  int held; /* a request's operation holds a reference on its context */
  double deadline; /* 0: none */
  unsigned polls;
  int inline_call; /* the input travels in the entry (SHM_INLINE_BYTES) */
  int hier;        /* the hierarchical allreduce (the communicator spans nodes) */
  int listed;      /* on the domain's list of unfinished nonblocking operations */
  struct shm_op *prev, *after;
  char detail[512]; /* a failed nonblocking operation's, for its wait */
  const char **ins;
  char **outs;
} shm_op_t;

/* The operation is finished on this rank (its result in o->rc). */
static void op_finish(shm_op_t *o, int rc) {
  o->rc = rc;
  o->phase = PHASE_FINISHED;
  if (o->listed) {
    mpiar__shm_domain_t *dom = o->dom;
    if (o->prev != NULL) {
      o->prev->after = o->after;
    } else {
      dom->active = o->after;
    }
    if (o->after != NULL) {
      o->after->prev = o->prev;
    } else {
      dom->active_tail = o->prev;
    }
    o->listed = 0;
  }
}

/* Fail the operation on this rank: tell the node's ranks (the entry's state) and, through the
 * engine, every rank of the communicator (its failure notice). The detail is set. */
static int op_fail(shm_op_t *o, int rc, int inside) {
  char reason[512];
  snprintf(reason, sizeof reason, "%s", mpiar_last_error());
  store_rel(&o->dom->ctl[o->dom->nrank]->e[o->slot].state, o->seq << 2 | PATH_FAILED);
  if (inside || mpiar__context_enter_ctx(o->ctx) == MPIAR_SUCCESS) {
    if (!o->ctx->eng.broken) {
      mpiar__engine_break(&o->ctx->eng, rc, reason, 1);
    }
    if (!inside) {
      mpiar__context_leave(o->ctx);
    }
  }
  mpiar__error(rc, "%s", reason);
  snprintf(o->detail, sizeof o->detail, "%s", reason);
  op_finish(o, rc);
  return rc;
}

/* Copy @p n bytes; non-temporal stores when @p stream (the caller fences before releasing). */
static void put(char *dst, const char *src, size_t n, int stream) {
#if defined(__x86_64__)
  if (stream) {
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    head = head < n ? head : n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    size_t vec = n & ~(size_t)63;
    for (size_t i = 0; i < vec; i += 64) {
      __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
      __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16));
      __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32));
      __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48));
      _mm_stream_si128((__m128i *)(void *)(dst + i), a);
      _mm_stream_si128((__m128i *)(void *)(dst + i + 16), b);
      _mm_stream_si128((__m128i *)(void *)(dst + i + 32), c);
      _mm_stream_si128((__m128i *)(void *)(dst + i + 48), d);
    }
    memcpy(dst + vec, src + vec, n - vec);
    return;
  }
#else
  (void)stream;
#endif
  memcpy(dst, src, n);
}

/* Bytes of one block of the share (its temporaries stay in the core's L1/L2). */
#define SHM_BLOCK_BYTES ((size_t)16 * 1024)
/* Shares writing at least this much use non-temporal stores (they cannot stay in cache). */
#define SHM_STREAM_BYTES ((size_t)2 * 1024 * 1024)

/*
 * The canonical combination (mpiar_reduce_canonical's order) of x[0..p) over n elements into a
 * temporary of @p tmp (ntmp blocks of @p stride bytes); returns where the result lies.
 */
static const char *canonical_block(const char *const *x, int p, size_t n, mpiar_dtype_t dtype,
                                   mpiar_op_t kop, char *tmp, size_t stride) {
  if (p == 1) {
    return x[0];
  }
  int pp = 1;
  while (pp * 2 <= p) {
    pp *= 2;
  }
  int rem = p - pp;
  char *freel[40];
  int nfree = 0;
  int ntmp = (31 - __builtin_clz((unsigned)p)) + 3;
  for (int i = ntmp - 1; i >= 0; i--) {
    freel[nfree++] = tmp + (size_t)i * stride;
  }
  struct {
    int level;
    char *buf; /* a temporary, or NULL when ptr is an input */
    const char *ptr;
  } st[40];
  int top = 0;
  for (int i = 0; i < pp; i++) {
    if (i < rem) {
      char *b = freel[--nfree];
      mpiar__reduce(b, x[2 * i], x[2 * i + 1], n, dtype, kop);
      st[top].buf = b;
      st[top].ptr = b;
    } else {
      st[top].buf = NULL;
      st[top].ptr = x[i + rem];
    }
    st[top++].level = 0;
    while (top >= 2 && st[top - 1].level == st[top - 2].level) {
      char *dst = st[top - 2].buf != NULL   ? st[top - 2].buf
                  : st[top - 1].buf != NULL ? st[top - 1].buf
                                            : freel[--nfree];
      mpiar__reduce(dst, st[top - 2].ptr, st[top - 1].ptr, n, dtype, kop);
      if (st[top - 1].buf != NULL && st[top - 1].buf != dst) {
        freel[nfree++] = st[top - 1].buf;
      }
      top -= 2;
      st[top].level++;
      st[top].buf = dst;
      st[top].ptr = dst;
      top++;
    }
  }
  return st[0].ptr;
}

/* @p p rounded up to the next 64-byte boundary (NULL stays NULL). */
static void *align_line(void *p) {
  return (char *)p + ((64 - ((uintptr_t)p & 63)) & 63);
}

/* The domain's temporaries, at least @p need bytes (64-byte aligned), or NULL (detail set). */
static char *scratch_get(mpiar__shm_domain_t *dom, size_t need) {
  if (dom->scratch_bytes < need) {
    free(dom->scratch);
    dom->scratch = NULL;
    dom->scratch_bytes = 0;
    if (posix_memalign((void **)&dom->scratch, 64, need) != 0) {
      dom->scratch = NULL;
      mpiar__error(MPIAR_ERR_NOMEM, "zero-copy allreduce: %zu bytes of temporaries", need);
      return NULL;
    }
    dom->scratch_bytes = need;
  }
  return dom->scratch;
}

/*
 * Elements [lo, hi) of the reduction, read at element src0 + i of every rank's input, written at
 * element i of each of the @p ndst buffers @p dsts (in blocks whose temporaries stay in L1/L2:
 * a block's inputs are all read before its outputs are written, so an output may be an input).
 */
static int reduce_range(shm_op_t *o, size_t src0, size_t lo, size_t hi, char *const *dsts,
                        int ndst, int stream) {
  const mpiar__shm_call_t *c = &o->call;
  int p = o->dom->nsize;
  if (lo >= hi) {
    return MPIAR_SUCCESS;
  }
  size_t es = mpiar_dtype_size(c->dtype);
  mpiar_op_t kop = c->op == MPIAR_AVG ? MPIAR_SUM : c->op;
  /*
   * Two ranks, two outputs: the canonical order is x0 op x1, one kernel call, so the fan-out
   * kernel makes each result vector from the two inputs and stores it into both outputs at
   * once, where the level has one for the pair: every line is read once and written once with
   * reads and writes interleaved, instead of a reduction into a temporary and then its copies
   * (measured 1.2-1.5x faster at 16-64 MiB). Same bits as the kernel (kernels.h); avg is the
   * pair's avg kernel, (x0 + x1) halved, which equals the sum divided by 2 bit for bit (one
   * rounding of the sum, then an exact halving).
   */
  if (p == 2 && ndst == 2 && !o->hier &&
      mpiar__reduce_fan(dsts[0] + lo * es, dsts[1] + lo * es, o->ins[0] + (src0 + lo) * es,
                        o->ins[1] + (src0 + lo) * es, hi - lo, c->dtype, c->op, stream)) {
    return MPIAR_SUCCESS;
  }
  size_t block = SHM_BLOCK_BYTES / es;
  block = block < hi - lo ? block : hi - lo;
  size_t stride = (block * es + 63) & ~(size_t)63;
  int ntmp = (31 - __builtin_clz((unsigned)p)) + 3;
  size_t need = (size_t)ntmp * stride;
  mpiar__shm_domain_t *dom = o->dom;
  if (p > 1 && scratch_get(dom, need) == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  const char *x[256];
  const char **xs = p <= 256 ? x : malloc((size_t)p * sizeof *xs);
  if (xs == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "zero-copy %s: %d input pointers", coll_name(c->coll), p);
  }
  for (size_t off = lo; off < hi; off += block) {
    size_t n = hi - off < block ? hi - off : block;
    for (int q = 0; q < p; q++) {
      xs[q] = o->ins[q] + (src0 + off) * es;
    }
    const char *res = canonical_block(xs, p, n, c->dtype, kop, dom->scratch, stride);
    if (c->op == MPIAR_AVG && p > 1 && !o->hier) { /* across nodes the engine divides */
      mpiar__divide((char *)res, res, n, c->dtype, (double)p);
    }
    for (int k = 0; k < ndst; k++) {
      char *dst = dsts[k] + off * es;
      if (dst != res) {
        put(dst, res, n * es, stream);
      }
    }
  }
  if (xs != x) {
    free(xs);
  }
  return MPIAR_SUCCESS;
}

/*
 * The share [*lo, *hi) of an allreduce of @p count elements of @p es bytes that node rank @p me
 * of @p p owns: the vector cut into p nearly equal parts on 64-byte boundaries of the buffers.
 * The hierarchical form's inter-node step cuts alike (build_column), from the node map.
 */
static void share_of(size_t count, size_t es, int me, int p, size_t *lo, size_t *hi) {
  size_t unit = es >= 64 ? 1 : 64 / es;
  size_t units = (count + unit - 1) / unit;
  *lo = units * (size_t)me / (size_t)p * unit;
  *hi = units * (size_t)(me + 1) / (size_t)p * unit;
  *hi = *hi < count ? *hi : count;
  *lo = *lo < *hi ? *lo : *hi;
}

/* ---- the hierarchical allreduce (a communicator over several nodes of equal size) ---- */

static int build_column(mpiar__schedule_t *s);

/* The inter-node step's plans: not a registry entry (nothing selects it), a plan key's builder. */
static const mpiar__algorithm_t column_alg = {
    .name = "zero-copy column ring",
    .build = build_column,
    .summary = "the hierarchical zero-copy allreduce's inter-node step: a ring over the ranks of "
               "one local index, on their share of the vector, in OUTPUT",
};

/*
 * The inter-node step's schedule for this rank: a ring (ring_group.c) over the ranks of its
 * local index, one per node in node order, on its node's share of the vector (share_of), in
 * OUTPUT, where the intra-node reduction left this node's partial. Received blocks land in two
 * scratch blocks, since OUTPUT holds the partial they are reduced with. A rank whose share is
 * empty has no step (so has every rank of its index: the cut is alike on every node).
 */
static int build_column(mpiar__schedule_t *s) {
  const mpiar__topology_t *t = s->topo;
  if (t == NULL || t->nnodes < 2) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "%s: no node map", column_alg.name);
  }
  const int node = t->node_of[s->rank], l = t->local_rank[s->rank], n = t->nnodes;
  size_t lo, hi;
  share_of(s->count, s->elem_size, l, t->node_size[node], &lo, &hi);
  if (lo == hi) {
    return MPIAR_SUCCESS;
  }
  const int next = t->node_ranks[t->node_first[(node + 1) % n] + l];
  const int prev = t->node_ranks[t->node_first[(node + n - 1) % n] + l];
  mpiar__ring_group_t g = {0};
  int rc = mpiar__ring_group_init(&g, s, n, node, next, prev, lo, hi - lo, 0, MPIAR__TAG_LIMIT);
  if (rc == MPIAR_SUCCESS) {
    g.scratch = 0;
    s->scratch_elems = 2 * g.maxblk;
    rc = mpiar__ring_group_rs(&g, -1, 1);
  }
  if (rc == MPIAR_SUCCESS) {
    const long fin = g.red[(node + 1) % n];
    rc = mpiar__ring_group_ag(&g, &fin, 1, NULL);
  }
  mpiar__ring_group_free(&g);
  return rc;
}

/*
 * The inter-node step as an operation of the engine on the communicator's own context: it takes
 * the next operation number on every rank, as a rank on the MPI path's call does, and always
 * runs the argument check, whose algorithm field (MPIAR__SHM_HIER_ALG) no MPI-path call has. So
 * a rank on the MPI path meets it there: if it checks its call too, every rank sees the
 * difference (MPIAR_ERR_MISMATCH); if not, it finds this operation's check messages among its
 * unexpected ones (MPIAR_ERR_MISMATCH, breaking the context: COMM_BROKEN on the others).
 * Deadlines, failure notices and the drain are the engine's.
 */
static int column_allreduce(shm_op_t *o) {
  mpiar__context_t *ctx = o->ctx;
  const mpiar__shm_call_t *c = &o->call;
  const size_t es = mpiar_dtype_size(c->dtype);
  const mpiar__plan_key_t key = {.coll = MPIAR__COLL_ALLREDUCE,
                                 .count = c->count,
                                 .elem_size = es,
                                 .builder = &column_alg,
                                 .segment_elems = 0,
                                 .in_place = 1,
                                 .root = -1};
  mpiar__plan_t *plan = NULL;
  mpiar__request_t *r = NULL;
  int rc = mpiar__plan_get(ctx, &key, column_alg.name, build_column, &plan, NULL);
  if (rc != MPIAR_SUCCESS || (rc = mpiar__request_new(ctx, plan, &r)) != MPIAR_SUCCESS) {
    return rc;
  }
  r->dtype = c->dtype;
  r->kop = c->op == MPIAR_AVG ? MPIAR_SUM : c->op;
  r->average = c->op == MPIAR_AVG; /* the ring's final reductions divide by every rank */
  r->in = c->out;
  r->out = c->out;
  r->base[MPIAR__BUF_INPUT] = (char *)c->out;
  r->base[MPIAR__BUF_OUTPUT] = (char *)c->out;
  r->base[MPIAR__BUF_SCRATCH] = (char *)r->scratch;
  /* The call's deadline bounds the whole call: the engine's step gets what is left of it. */
  r->timeout_ms = c->timeout_ms;
  if (o->deadline > 0) {
    double left_ms = (o->deadline - MPI_Wtime()) * 1e3;
    r->timeout_ms = left_ms < 1 ? 1 : (long)left_ms;
  }
  r->check = 1;
  const uint64_t sig[8] = {MPIAR__COLL_ALLREDUCE, c->count, es, (uint64_t)c->dtype,
                           (uint64_t)c->op, MPIAR__SHM_HIER_ALG, 0, UINT64_MAX};
  memcpy(r->signature, sig, sizeof sig);
  ctx->refs++;
  rc = mpiar__request_start(r);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__wait_result(r);
  }
  mpiar__request_release(r);
  mpiar__context_unref(ctx);
  return rc;
}

/*
 * The hierarchical allreduce's work on this rank (node rank me of p, owning [lo, hi)): the
 * canonical reduction of the node's p inputs over its share into its own receive buffer (a sum
 * for avg), the inter-node allreduce of that share (column_allreduce), then the share copied into
 * every other node rank's receive buffer (non-temporal stores when @p stream).
 */
static int hier_work(shm_op_t *o, size_t lo, size_t hi, int stream) {
  mpiar__shm_domain_t *dom = o->dom;
  const int p = dom->nsize, me = dom->nrank;
  const size_t es = mpiar_dtype_size(o->call.dtype);
  int rc = reduce_range(o, 0, lo, hi, &o->outs[me], 1, 0);
  if (rc == MPIAR_SUCCESS) {
    rc = column_allreduce(o);
  }
  for (int q = 0; rc == MPIAR_SUCCESS && q < p; q++) {
    if (q != me && lo < hi) {
      put(o->outs[q] + lo * es, o->outs[me] + lo * es, (hi - lo) * es, stream);
    }
  }
  return rc;
}

/*
 * This rank's part of the work once every rank has arrived (the buffers mapped):
 * - allreduce: its share [lo, hi) of the vector reduced from every input into every output;
 * - reduce-scatter: its own block reduced from every input into its output (in place: into its
 *   block's place first, since rank 0 still reads the start of this buffer; moved at the end);
 * - broadcast: the root's buffer copied into its own;
 * - allgather: every rank's block copied from its owner's input into its own output.
 * Non-temporal stores when the rank writes at least SHM_STREAM_BYTES (fenced here).
 */
static int do_work(shm_op_t *o) {
  const mpiar__shm_call_t *c = &o->call;
  int p = o->dom->nsize, me = o->dom->nrank;
  size_t es = mpiar_dtype_size(c->dtype), n = c->count * es;
  int stream = 0, rc = MPIAR_SUCCESS;
  switch (c->coll) {
    case MPIAR__COLL_ALLREDUCE: {
      size_t lo, hi;
      share_of(c->count, es, me, p, &lo, &hi);
      stream = lo < hi && (hi - lo) * es * (size_t)p >= SHM_STREAM_BYTES;
      rc = o->hier ? hier_work(o, lo, hi, stream) : reduce_range(o, 0, lo, hi, o->outs, p, stream);
      break;
    }
    case MPIAR__COLL_REDUCE_SCATTER: {
      char *dst = o->outs[me] + (c->in == NULL ? (size_t)me * n : 0);
      stream = n >= SHM_STREAM_BYTES;
      rc = reduce_range(o, (size_t)me * c->count, 0, c->count, &dst, 1, stream);
      break;
    }
    case MPIAR__COLL_BCAST:
      stream = n >= SHM_STREAM_BYTES;
      if (me != c->root) {
        put(o->outs[me], o->ins[c->root], n, stream);
      }
      break;
    case MPIAR__COLL_ALLGATHER:
      stream = n * (size_t)p >= SHM_STREAM_BYTES;
      for (int q = 0; q < p; q++) {
        char *dst = o->outs[me] + (size_t)q * n;
        if (dst != o->ins[q]) {
          put(dst, o->ins[q], n, stream);
        }
      }
      break;
    default:
      break;
  }
#if defined(__x86_64__)
  if (stream) {
    _mm_sfence(); /* the non-temporal stores before `done` is released */
  }
#endif
  return rc;
}

static const char *path_name(uint64_t st) {
  switch (st & 3) {
    case PATH_ENGINE:
      return "the MPI path (its buffers are not all in mpiar_alloc memory of this communicator)";
    case PATH_FAILED:
      return "a failure";
    default:
      return "the zero-copy path";
  }
}

/* Every rank's entry arrived: the same collective, root, count, datatype and operation? */
static int check_args(shm_op_t *o) {
  mpiar__shm_domain_t *dom = o->dom;
  const mpiar__shm_call_t *c = &o->call;
  for (int q = 0; q < dom->nsize; q++) {
    const shm_entry_t *e = &dom->ctl[q]->e[o->slot];
    if (e->coll != (int32_t)c->coll || e->root != (int32_t)c->root) {
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "zero-copy operation %llu: rank %d runs %s (root %d) but rank %d runs "
                          "%s (root %d)",
                          (unsigned long long)o->seq, dom->ranks[q], coll_name(e->coll),
                          (int)e->root, dom->ranks[dom->nrank], coll_name(c->coll), c->root);
    }
    if (e->count != c->count || e->dtype != (int32_t)c->dtype || e->op != (int32_t)c->op) {
      const char *what = e->count != c->count ? "count" : e->dtype != (int32_t)c->dtype ? "datatype"
                                                                                          : "operation";
      return mpiar__error(MPIAR_ERR_MISMATCH,
                          "zero-copy %s %llu: the %s differs between rank %d (count %llu, %s, %s) "
                          "and rank %d (count %zu, %s, %s)",
                          coll_name(c->coll), (unsigned long long)o->seq, what, dom->ranks[q],
                          (unsigned long long)e->count,
                          mpiar_dtype_name((mpiar_dtype_t)e->dtype)
                              ? mpiar_dtype_name((mpiar_dtype_t)e->dtype)
                              : "?",
                          mpiar_op_name((mpiar_op_t)e->op) ? mpiar_op_name((mpiar_op_t)e->op) : "?",
                          dom->ranks[dom->nrank], c->count, mpiar_dtype_name(c->dtype),
                          mpiar_op_name(c->op));
    }
  }
  return MPIAR_SUCCESS;
}

/* Every rank's entry arrived with the same arguments: map every rank's buffers. */
static int map_buffers(shm_op_t *o) {
  mpiar__shm_domain_t *dom = o->dom;
  const mpiar__shm_call_t *c = &o->call;
  size_t es = mpiar_dtype_size(c->dtype), n = c->count * es;
  for (int q = 0; q < dom->nsize; q++) {
    const shm_entry_t *e = &dom->ctl[q]->e[o->slot];
    size_t bytes[2];
    call_bytes(c->coll, c->count, es, dom->nsize, e->in_place, &bytes[0], &bytes[1]);
    const int ids[2] = {e->in_id, e->out_id};
    const uint64_t offs[2] = {e->in_off, e->out_off};
    char *where[2] = {NULL, NULL};
    for (int k = e->in_place ? 1 : 0; k < 2; k++) {
      shm_alloc_t *al = ids[k] >= 0 && ids[k] < dom->nallocs ? dom->allocs[ids[k]] : NULL;
      if (al == NULL || offs[k] > al->size[q] || bytes[k] > al->size[q] - offs[k]) {
        return mpiar__error(MPIAR_ERR_MISMATCH,
                            "zero-copy %s %llu: rank %d's buffer (allocation %d, offset %llu, %zu "
                            "bytes) is not in memory this rank maps",
                            coll_name(c->coll), (unsigned long long)o->seq, dom->ranks[q], ids[k],
                            (unsigned long long)offs[k], bytes[k]);
      }
      where[k] = al->base[q] + offs[k];
    }
    o->outs[q] = where[1];
    /* In place, the input is the receive buffer (an allgather's block at its rank's place). */
    o->ins[q] = !e->in_place                        ? where[0]
                : c->coll == MPIAR__COLL_ALLGATHER ? where[1] + (size_t)q * n
                                                    : where[1];
  }
  return MPIAR_SUCCESS;
}

/* Every rank's entry arrived with its input inline (and the same arguments): this rank's result
 * from the entries' payloads into its own receive buffer. */
static int run_inline(shm_op_t *o) {
  mpiar__shm_domain_t *dom = o->dom;
  const mpiar__shm_call_t *c = &o->call;
  int p = dom->nsize, me = dom->nrank;
  size_t n = c->count * mpiar_dtype_size(c->dtype);
  if (c->coll == MPIAR__COLL_BCAST) {
    if (me != c->root) {
      memcpy(c->out, dom->ctl[c->root]->e[o->slot].payload, n);
    }
    return MPIAR_SUCCESS;
  }
  if (c->coll == MPIAR__COLL_ALLGATHER) {
    for (int q = 0; q < p; q++) {
      memcpy((char *)c->out + (size_t)q * n, dom->ctl[q]->e[o->slot].payload, n);
    }
    return MPIAR_SUCCESS;
  }
  /* Allreduce (the whole vector) or reduce-scatter (this rank's block). */
  size_t at = c->coll == MPIAR__COLL_REDUCE_SCATTER ? (size_t)me * n : 0;
  int ntmp = (31 - __builtin_clz((unsigned)p)) + 3;
  char *tmp = scratch_get(dom, (size_t)ntmp * SHM_INLINE_BYTES);
  if (tmp == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  const char *x[256];
  const char **xs = p <= 256 ? x : malloc((size_t)p * sizeof *xs);
  if (xs == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "zero-copy %s: %d input pointers", coll_name(c->coll), p);
  }
  for (int q = 0; q < p; q++) {
    xs[q] = dom->ctl[q]->e[o->slot].payload + at;
  }
  const char *res = canonical_block(xs, p, c->count, c->dtype,
                                    c->op == MPIAR_AVG ? MPIAR_SUM : c->op, tmp, SHM_INLINE_BYTES);
  if (p == 1) {
    memcpy(tmp, res, n); /* the entry is not this call's to change */
    res = tmp;
  }
  if (c->op == MPIAR_AVG && p > 1) {
    mpiar__divide((char *)res, res, c->count, c->dtype, (double)p);
  }
  memcpy(c->out, res, n);
  if (xs != x) {
    free(xs);
  }
  return MPIAR_SUCCESS;
}

/* Advance the operation as far as it goes without waiting; *done once it has finished (its
 * result in o->rc). */
static int op_advance(shm_op_t *o, int inside, int *done) {
  mpiar__shm_domain_t *dom = o->dom;
  const char *name = coll_name(o->call.coll);
  int p = dom->nsize;
  *done = 0;
  if (o->phase == PHASE_ARRIVE) {
    uint64_t want = o->seq << 2 | PATH_SHM;
    for (; o->next < p; o->next++) {
      uint64_t st = load_acq(&dom->ctl[o->next]->e[o->slot].state);
      if (st == want) {
        continue;
      }
      if ((st >> 2) < o->seq) {
        break; /* not there yet */
      }
      if ((st & 3) == PATH_FAILED && (st >> 2) == o->seq) {
        mpiar__error(MPIAR_ERR_COMM_BROKEN, "zero-copy %s %llu failed on rank %d", name,
                     (unsigned long long)o->seq, dom->ranks[o->next]);
        return op_fail(o, MPIAR_ERR_COMM_BROKEN, inside);
      }
      mpiar__error(MPIAR_ERR_MISMATCH,
                   "%s %llu runs on the zero-copy path on rank %d but on %s on rank %d", name,
                   (unsigned long long)o->seq, dom->ranks[dom->nrank],
                   (st >> 2) == o->seq ? path_name(st) : "a later operation", dom->ranks[o->next]);
      return op_fail(o, MPIAR_ERR_MISMATCH, inside);
    }
    if (o->next < p) {
      goto pending;
    }
    int rc = check_args(o);
    if (rc == MPIAR_SUCCESS && o->inline_call) {
      if ((rc = run_inline(o)) == MPIAR_SUCCESS) {
        op_finish(o, MPIAR_SUCCESS);
        *done = 1;
        return MPIAR_SUCCESS;
      }
    }
    if (rc == MPIAR_SUCCESS) {
      rc = map_buffers(o);
    }
    if (rc != MPIAR_SUCCESS) {
      return op_fail(o, rc, inside);
    }
    o->phase = PHASE_WORK;
  }
  if (o->phase == PHASE_WORK) {
    int rc = do_work(o);
    if (rc != MPIAR_SUCCESS) {
      return op_fail(o, rc, inside);
    }
    store_rel(&dom->ctl[dom->nrank]->e[o->slot].done, o->seq);
    o->phase = PHASE_DONE;
    o->next = 0;
  }
  if (o->phase == PHASE_DONE) {
    for (; o->next < p; o->next++) {
      if (load_acq(&dom->ctl[o->next]->e[o->slot].done) == o->seq) {
        continue;
      }
      uint64_t st = load_acq(&dom->ctl[o->next]->e[o->slot].state);
      if (st == (o->seq << 2 | PATH_FAILED)) {
        mpiar__error(MPIAR_ERR_COMM_BROKEN, "zero-copy %s %llu failed on rank %d", name,
                     (unsigned long long)o->seq, dom->ranks[o->next]);
        return op_fail(o, MPIAR_ERR_COMM_BROKEN, inside);
      }
      break;
    }
    if (o->next < p) {
      goto pending;
    }
    const mpiar__shm_call_t *c = &o->call;
    if (c->coll == MPIAR__COLL_REDUCE_SCATTER && c->in == NULL && dom->nrank != 0) {
      /* No rank reads this buffer any more: the block goes to its start. */
      size_t n = c->count * mpiar_dtype_size(c->dtype);
      memmove(c->out, (char *)c->out + (size_t)dom->nrank * n, n);
    }
    op_finish(o, MPIAR_SUCCESS);
  }
  *done = 1;
  return o->rc;
pending:
  if ((++o->polls & 63) == 0) {
    if (o->deadline > 0 && MPI_Wtime() > o->deadline) {
      mpiar__error(MPIAR_ERR_TIMEOUT, "zero-copy %s %llu: rank %d %s within %ld ms", name,
                   (unsigned long long)o->seq, dom->ranks[o->next],
                   o->phase == PHASE_ARRIVE ? "did not arrive" : "did not finish its share",
                   o->call.timeout_ms);
      return op_fail(o, MPIAR_ERR_TIMEOUT, inside);
    }
    if (inside && mpiar__interrupted()) {
      mpiar__error(MPIAR_ERR_INTERRUPTED, "zero-copy %s %llu: the wait was interrupted", name,
                   (unsigned long long)o->seq);
      return op_fail(o, MPIAR_ERR_INTERRUPTED, inside);
    }
  }
  return MPIAR_SUCCESS;
}

/*
 * Before operation number @p s takes its entry: this rank's nonblocking zero-copy operations
 * started SHM_WINDOW or more operations earlier are finished first, advanced as a wait advances
 * them (their own deadlines apply). @return MPIAR_ERR_COMM_BROKEN when that broke the context.
 */
static int window_wait(mpiar__shm_domain_t *dom, uint64_t s) {
  unsigned idle = 0;
  while (dom->active != NULL && dom->active->seq + SHM_WINDOW <= s) {
    int done = 0;
    (void)op_advance(dom->active, 1, &done); /* a failure is that operation's result */
    if (!done) {
      mpiar__idle(dom->ctx, ++idle);
    }
  }
  mpiar__error_clear();
  if (dom->ctx->eng.broken) {
    return mpiar__error(MPIAR_ERR_COMM_BROKEN,
                        "an earlier failure broke this communicator's context (%s); free it and "
                        "use a new one",
                        dom->ctx->eng.broken_reason);
  }
  return MPIAR_SUCCESS;
}

/* Publish this rank's arrival: its arguments and where its buffers lie, then the state. */
static int op_start(shm_op_t *o, mpiar__context_t *ctx, const mpiar__shm_call_t *call) {
  mpiar__shm_domain_t *dom = ctx->shm;
  int rc = window_wait(dom, dom->seq + 1);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  o->ctx = ctx;
  o->dom = dom;
  o->call = *call;
  o->seq = ++dom->seq;
  o->slot = (int)(o->seq % SHM_RING);
  o->phase = PHASE_ARRIVE;
  o->next = 0;
  o->rc = MPIAR_SUCCESS;
  o->polls = 0;
  o->deadline = call->timeout_ms > 0 ? MPI_Wtime() + (double)call->timeout_ms * 1e-3 : 0;
  shm_entry_t *e = &dom->ctl[dom->nrank]->e[o->slot];
  e->count = call->count;
  e->dtype = (int32_t)call->dtype;
  e->op = (int32_t)call->op;
  e->coll = (int32_t)call->coll;
  e->root = (int32_t)call->root;
  e->in_place = call->in == NULL;
  e->in_id = call->in_id;
  e->in_off = call->in_off;
  e->out_id = call->out_id;
  e->out_off = call->out_off;
  size_t es = mpiar_dtype_size(call->dtype), n = call->count * es;
  o->hier = !dom->whole;
  o->inline_call =
      !o->hier && input_bytes(call->coll, call->count, es, dom->nsize) <= SHM_INLINE_BYTES;
  if (o->inline_call) {
    const char *src = call->in != NULL ? call->in : call->out;
    if (call->coll == MPIAR__COLL_ALLGATHER && call->in == NULL) {
      src += (size_t)dom->nrank * n;
    }
    if (call->coll != MPIAR__COLL_BCAST || call->root == dom->nrank) {
      memcpy(e->payload, src, input_bytes(call->coll, call->count, es, dom->nsize));
    }
  }
  store_rel(&e->state, o->seq << 2 | PATH_SHM);
  return MPIAR_SUCCESS;
}

int mpiar__shm_run(mpiar__context_t *ctx, const mpiar__shm_call_t *call) {
  int p = ctx->shm->nsize;
  const char *ins[64];
  char *outs[64];
  shm_op_t o;
  o.ins = p <= 64 ? ins : malloc((size_t)p * sizeof *o.ins);
  o.outs = p <= 64 ? outs : malloc((size_t)p * sizeof *o.outs);
  if (o.ins == NULL || o.outs == NULL) {
    if (p > 64) {
      free(o.ins);
      free(o.outs);
    }
    return mpiar__error(MPIAR_ERR_NOMEM, "zero-copy %s: %d buffer pointers", coll_name(call->coll),
                        p);
  }
  o.held = 0;
  o.listed = 0;
  int done = 0, rc = op_start(&o, ctx, call);
  unsigned idle = 0;
  while (rc == MPIAR_SUCCESS && (rc = op_advance(&o, 1, &done)) == MPIAR_SUCCESS && !done) {
    mpiar__idle(ctx, ++idle);
  }
  if (p > 64) {
    free(o.ins);
    free(o.outs);
  }
  return rc;
}

/* ---- nonblocking and persistent: generalized requests ---- */

static int op_poll(void *state, int *done) {
  shm_op_t *o = state;
  if (o->phase == PHASE_FINISHED) {
    *done = 1;
    return o->rc == MPIAR_SUCCESS ? MPIAR_SUCCESS : mpiar__error(o->rc, "%s", o->detail);
  }
  return op_advance(o, 0, done);
}

static void op_free(void *state) {
  shm_op_t *o = state;
  if (o->held) {
    mpiar__context_unref(o->ctx);
  }
  free(o);
}

/* A request's operation with room for its p buffer pointers, or NULL (detail set). */
static shm_op_t *op_new(int p) {
  shm_op_t *o = calloc(1, sizeof *o + 2 * (size_t)p * sizeof(char *));
  if (o == NULL) {
    mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate a request");
    return NULL;
  }
  o->ins = (const char **)(void *)(o + 1);
  o->outs = (char **)(void *)(o->ins + p);
  o->phase = PHASE_FINISHED;
  return o;
}

/* A request's operation has arrived: on the domain's list of unfinished ones, advanced once
 * (a failure is the request's result, reported by its wait). */
static void op_started(shm_op_t *o) {
  mpiar__shm_domain_t *dom = o->dom;
  o->listed = 1;
  o->prev = dom->active_tail;
  o->after = NULL;
  if (dom->active_tail != NULL) {
    dom->active_tail->after = o;
  } else {
    dom->active = o;
  }
  dom->active_tail = o;
  int done = 0;
  (void)op_advance(o, 1, &done);
  mpiar__error_clear();
}

int mpiar__shm_start(mpiar__context_t *ctx, const mpiar__shm_call_t *call, mpiar_request_t *req) {
  shm_op_t *o = op_new(ctx->shm->nsize);
  if (o == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  int rc = op_start(o, ctx, call);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__grequest_start(op_poll, op_free, o, req);
    if (rc != MPIAR_SUCCESS) {
      /* Arrived already: the others wait for this rank, which fails instead. */
      char detail[512];
      snprintf(detail, sizeof detail, "%s", mpiar_last_error());
      mpiar__error(rc, "%s", detail);
      op_fail(o, rc, 1);
    }
  }
  if (rc != MPIAR_SUCCESS) {
    free(o);
    return rc;
  }
  ctx->refs++;
  o->held = 1;
  op_started(o);
  return MPIAR_SUCCESS;
}

/* mpiar_start of a persistent zero-copy request: its buffers must still lie in mpiar_alloc
 * memory of the communicator (an allocation freed since then is an error on every rank, since
 * mpiar_free is collective). */
static int op_restart(void *state) {
  shm_op_t *o = state;
  mpiar__context_t *ctx = o->ctx;
  int rc = mpiar__context_enter_ctx(ctx);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  mpiar__shm_call_t call = o->call;
  if (ctx->eng.broken) {
    rc = mpiar__error(MPIAR_ERR_COMM_BROKEN,
                      "an earlier failure broke this communicator's context (%s); free it and use "
                      "a new one",
                      ctx->eng.broken_reason);
  } else if (ctx->shm == NULL || !mpiar__shm_eligible(ctx, &call)) {
    rc = mpiar__error(MPIAR_ERR_INVALID_ARG,
                      "mpiar_start: the persistent %s's buffers no longer lie in mpiar_alloc "
                      "memory of its communicator (freed since the request was made)",
                      coll_name(call.coll));
  } else if ((rc = op_start(o, ctx, &call)) == MPIAR_SUCCESS) {
    op_started(o);
  }
  mpiar__context_leave(ctx);
  return rc;
}

int mpiar__shm_init(mpiar__context_t *ctx, const mpiar__shm_call_t *call, mpiar_request_t *req) {
  shm_op_t *o = op_new(ctx->shm->nsize);
  if (o == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  o->ctx = ctx;
  o->call = *call;
  int rc = mpiar__grequest_init(op_poll, op_restart, op_free, o, req);
  if (rc != MPIAR_SUCCESS) {
    free(o);
    return rc;
  }
  ctx->refs++;
  o->held = 1;
  return MPIAR_SUCCESS;
}

/* ---- allocation ---- */

static void alloc_release(shm_alloc_t *al);

/* MPI_Finalize: every allocation still live is freed (in creation order, alike on every rank). */
static int finalize_cb(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  for (;;) {
    pthread_mutex_lock(&table_lock);
    shm_alloc_t *al = oldest;
    pthread_mutex_unlock(&table_lock);
    if (al == NULL) {
      break;
    }
    alloc_release(al);
  }
  shm_finalized = 1;
  return MPI_SUCCESS;
}

static void domain_free(mpiar__shm_domain_t *dom) {
  if (dom->ctl_win != MPI_WIN_NULL) {
    MPI_Win_free(&dom->ctl_win);
  }
  if (dom->node != MPI_COMM_NULL) {
    MPI_Comm_free(&dom->node);
  }
  free(dom->ctl);
  free(dom->ranks);
  free(dom->allocs);
  free(dom->scratch);
  free(dom);
}

/* The domain of @p ctx, made now if it has none (collective over the communicator). */
static int domain_get(mpiar__context_t *ctx, mpiar__shm_domain_t **out) {
  if (ctx->shm != NULL) {
    *out = ctx->shm;
    return MPIAR_SUCCESS;
  }
  mpiar__shm_domain_t *dom = calloc(1, sizeof *dom);
  if (dom == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "mpiar_alloc: cannot allocate a domain");
  }
  dom->node = MPI_COMM_NULL;
  dom->ctl_win = MPI_WIN_NULL;
  int rank = ctx->eng.rank;
  int color = ctx->node_of != NULL ? ctx->node_of[rank] : 0;
  int err = MPI_Comm_split(ctx->comm, color, rank, &dom->node);
  void *mine = NULL;
  if (err == MPI_SUCCESS) {
    MPI_Comm_rank(dom->node, &dom->nrank);
    MPI_Comm_size(dom->node, &dom->nsize);
    /* Room for the first 64-byte boundary: the control blocks are cache-line aligned types, and
     * MPI places a segment to its own liking (Open MPI 4.1: 8 bytes past a line). A segment's
     * offset within its page is the same in every process that maps it, so every rank rounds
     * each base up to the same block. */
    err = MPI_Win_allocate_shared((MPI_Aint)(sizeof(shm_ctl_t) + 64), 1, MPI_INFO_NULL, dom->node,
                                  &mine, &dom->ctl_win);
    mine = align_line(mine);
  }
  if (err == MPI_SUCCESS) {
    dom->ctl = calloc((size_t)dom->nsize, sizeof *dom->ctl);
    dom->ranks = calloc((size_t)dom->nsize, sizeof *dom->ranks);
    err = dom->ctl == NULL || dom->ranks == NULL ? MPI_ERR_NO_MEM : MPI_SUCCESS;
  }
  /* The node's communicator lists the node's ranks in rank order (the split's key). */
  for (int r = 0, q = 0; err == MPI_SUCCESS && r < ctx->eng.size && q < dom->nsize; r++) {
    if (ctx->node_of == NULL || ctx->node_of[r] == color) {
      dom->ranks[q++] = r;
    }
  }
  for (int q = 0; err == MPI_SUCCESS && q < dom->nsize; q++) {
    MPI_Aint size = 0;
    int disp = 0;
    void *base = NULL;
    err = MPI_Win_shared_query(dom->ctl_win, q, &size, &disp, &base);
    dom->ctl[q] = align_line(base);
  }
  if (err == MPI_SUCCESS) {
    memset(mine, 0, sizeof(shm_ctl_t));
    /* Every block is zero before any rank reads one (MPI_Barrier orders the memory of the
     * window's ranks: MPI's shared-memory model needs MPI_Win_sync for that, below). */
    MPI_Win_lock_all(MPI_MODE_NOCHECK, dom->ctl_win);
    MPI_Win_sync(dom->ctl_win);
    err = MPI_Barrier(dom->node);
    MPI_Win_sync(dom->ctl_win);
    MPI_Win_unlock_all(dom->ctl_win);
  }
  if (err != MPI_SUCCESS) {
    domain_free(dom);
    return mpiar__error(MPIAR_ERR_MPI, "mpiar_alloc: the node's control window failed (MPI error %d)",
                        err);
  }
  dom->whole = ctx->nnodes <= 1; /* 0 on a one-rank communicator (no node map) */
  /* The hierarchical form needs the node map (MPIAR_TOPOLOGY=flat has none) and equal nodes:
   * local rank l of every node then owns the same share of the vector. */
  dom->hier = !dom->whole && ctx->has_topo && ctx->topo.nnodes >= 2;
  for (int i = 0; dom->hier && i < ctx->topo.nnodes; i++) {
    dom->hier = ctx->topo.node_size[i] == dom->nsize;
  }
  dom->ctx = ctx;
  ctx->refs++;
  ctx->shm = dom;
  *out = dom;
  return MPIAR_SUCCESS;
}

/* Free one allocation (collective over its node's ranks); its domain goes with its last one. */
static void alloc_release(shm_alloc_t *al) {
  pthread_mutex_lock(&table_lock);
  int i = table_find((uintptr_t)al->mine);
  while (i >= 0 && table[i] != al) {
    i--;
  }
  if (i >= 0) {
    memmove(&table[i], &table[i + 1], (size_t)(table_n - i - 1) * sizeof *table);
    table_n--;
  }
  if (al->older != NULL) {
    al->older->newer = al->newer;
  } else {
    oldest = al->newer;
  }
  if (al->newer != NULL) {
    al->newer->older = al->older;
  } else {
    newest = al->older;
  }
  __atomic_sub_fetch(&mpiar__shm_live, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&table_lock);
  mpiar__shm_domain_t *dom = al->dom;
  MPI_Win_free(&al->win);
  dom->allocs[al->id] = NULL;
  free(al->base);
  free(al->size);
  free(al);
  if (--dom->live == 0) {
    mpiar__context_t *ctx = dom->ctx;
    ctx->shm = NULL;
    domain_free(dom);
    mpiar__context_unref(ctx);
  }
}

int mpiar_alloc(MPI_Comm comm, size_t bytes, void **ptr) {
  mpiar__error_clear();
  if (ptr != NULL) {
    *ptr = NULL;
  }
  const mpiar__settings_t *set = NULL;
  int rc = mpiar__settings_checked(&set, NULL);
  long timeout_ms = mpiar__deadline_ms(0, set);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__kernels_init(); /* the agreement below and the reductions use the kernels */
  }
  if (rc != MPIAR_SUCCESS) {
    return mpiar__context_join_failed(comm, timeout_ms, rc);
  }
  /* Bad arguments are agreed on (below), so that no rank waits in the window's creation for a
   * rank that refused its arguments. */
  int bad = MPIAR_SUCCESS;
  if (ptr == NULL) {
    bad = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_alloc: the pointer to the result is NULL");
  } else if (bytes > ((size_t)1 << 48)) {
    bad = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_alloc: %zu bytes is more than 2^48", bytes);
  }
  char detail[512];
  snprintf(detail, sizeof detail, "%s", mpiar_last_error());
  mpiar__context_t *ctx = NULL;
  if ((rc = mpiar__context_enter(comm, timeout_ms, &ctx)) != MPIAR_SUCCESS) {
    return rc;
  }
  uint64_t row[2] = {bad != MPIAR_SUCCESS ? (uint64_t)ctx->eng.rank + 1 : 0, 0};
  rc = mpiar__context_allreduce(ctx, row, 1, MPIAR_UINT64, MPIAR_MAX, timeout_ms);
  if (rc != MPIAR_SUCCESS) {
    mpiar__context_leave(ctx);
    return rc;
  }
  if (row[0] != 0) {
    mpiar__context_leave(ctx);
    return bad != MPIAR_SUCCESS ? mpiar__error(bad, "%s", detail)
                                : mpiar__error(MPIAR_ERR_INVALID_ARG,
                                               "mpiar_alloc: rank %llu's arguments were refused",
                                               (unsigned long long)row[0] - 1);
  }
  mpiar__shm_domain_t *dom = NULL;
  if ((rc = domain_get(ctx, &dom)) != MPIAR_SUCCESS) {
    mpiar__context_leave(ctx);
    return rc;
  }
  shm_alloc_t *al = calloc(1, sizeof *al);
  int err = MPI_ERR_NO_MEM;
  if (al != NULL) {
    al->base = calloc((size_t)dom->nsize, sizeof *al->base);
    al->size = calloc((size_t)dom->nsize, sizeof *al->size);
    al->bytes = bytes;
    al->dom = dom;
    al->win = MPI_WIN_NULL;
    /* Every rank takes part in the window even when this process could not allocate the
     * bookkeeping (it then asks for nothing and frees the window at once). */
  }
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  /* Room for the first 64-byte boundary (MPI aligns a segment to its own liking). */
  MPI_Aint size = (MPI_Aint)(((bytes + 63) & ~(size_t)63) + 64);
  void *seg = NULL;
  MPI_Win win = MPI_WIN_NULL;
  err = MPI_Win_allocate_shared(size, 1, info, dom->node, &seg, &win);
  MPI_Info_free(&info);
  int ok = err == MPI_SUCCESS && al != NULL && al->base != NULL && al->size != NULL;
  for (int q = 0; ok && q < dom->nsize; q++) {
    MPI_Aint qs = 0;
    int disp = 0;
    void *qb = NULL;
    ok = MPI_Win_shared_query(win, q, &qs, &disp, &qb) == MPI_SUCCESS;
    al->base[q] = qb;
    al->size[q] = (size_t)qs;
  }
  /* Whether every rank of the node has it (a window one rank could not record is freed by all). */
  int all_ok = 0;
  if (err == MPI_SUCCESS) {
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, dom->node);
  }
  int id = -1;
  if (all_ok) {
    for (id = 0; id < dom->nallocs && dom->allocs[id] != NULL; id++) {
    }
    if (id == dom->cap) {
      int cap = dom->cap ? 2 * dom->cap : 8;
      shm_alloc_t **a = realloc(dom->allocs, (size_t)cap * sizeof *a);
      if (a != NULL) {
        dom->allocs = a;
        dom->cap = cap;
      }
    }
    pthread_mutex_lock(&table_lock);
    if (table_n == table_cap) {
      int cap = table_cap ? 2 * table_cap : 16;
      shm_alloc_t **t = realloc(table, (size_t)cap * sizeof *t);
      if (t != NULL) {
        table = t;
        table_cap = cap;
      }
    }
    ok = id < dom->cap && table_n < table_cap;
    pthread_mutex_unlock(&table_lock);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, dom->node);
  }
  if (!all_ok) {
    if (win != MPI_WIN_NULL) {
      MPI_Win_free(&win);
    }
    if (al != NULL) {
      free(al->base);
      free(al->size);
      free(al);
    }
    if (dom->live == 0) {
      ctx->shm = NULL;
      domain_free(dom);
      ctx->refs--; /* inside the context: it stays attached */
    }
    mpiar__context_leave(ctx);
    return err != MPI_SUCCESS
               ? mpiar__error(MPIAR_ERR_MPI, "mpiar_alloc: MPI_Win_allocate_shared of %zu bytes "
                                             "failed (MPI error %d)",
                              bytes, err)
               : mpiar__error(MPIAR_ERR_NOMEM, "mpiar_alloc: no memory for the bookkeeping of a "
                                               "window on some rank");
  }
  al->id = id;
  al->win = win;
  al->seg = seg;
  al->mine = align_line(seg);
  void *mine = al->mine;
  if (id == dom->nallocs) {
    dom->nallocs++;
  }
  dom->allocs[id] = al;
  dom->live++;
  pthread_mutex_lock(&table_lock);
  int at = table_find((uintptr_t)al->mine) + 1;
  memmove(&table[at + 1], &table[at], (size_t)(table_n - at) * sizeof *table);
  table[at] = al;
  table_n++;
  al->older = newest;
  if (newest != NULL) {
    newest->newer = al;
  } else {
    oldest = al;
  }
  newest = al;
  __atomic_add_fetch(&mpiar__shm_live, 1, __ATOMIC_RELAXED);
  if (finalize_keyval == MPI_KEYVAL_INVALID &&
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_cb, &finalize_keyval, NULL) ==
          MPI_SUCCESS) {
    /* Set after the contexts' own attribute: MPI_Finalize deletes it first (reverse order). */
    MPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval, NULL);
  }
  pthread_mutex_unlock(&table_lock);
  /* The kept request of a blocking call may name this address from before (ordinary memory
   * there once): the same-call shortcut must not take it past the path choice. */
  __atomic_store_n(&ctx->kept.hash, 0, __ATOMIC_RELAXED);
  mpiar__context_leave(ctx);
  *ptr = mine;
  return MPIAR_SUCCESS;
}

int mpiar_free(void *ptr) {
  mpiar__error_clear();
  if (ptr == NULL) {
    return MPIAR_SUCCESS;
  }
  if (shm_finalized || mpiar__mpi_finalized()) {
    return mpiar__error(MPIAR_ERR_MPI_STATE, "mpiar_free: MPI is already finalized");
  }
  pthread_mutex_lock(&table_lock);
  int i = table_find((uintptr_t)ptr);
  shm_alloc_t *al = i >= 0 && table[i]->mine == ptr ? table[i] : NULL;
  pthread_mutex_unlock(&table_lock);
  if (al == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "mpiar_free: %p is not the start of memory from mpiar_alloc (or it was "
                        "freed already)",
                        ptr);
  }
  alloc_release(al);
  return MPIAR_SUCCESS;
}
