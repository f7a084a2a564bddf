/*
 * The engine (src/engine) on the threads transport (tests/engine/transport_threads.h), with the
 * fuzzer's bytes in place of the scheduler's seed: the first bytes choose the case, the rest
 * decide every choice MPI leaves open (which messages arrive, which sends and receives complete,
 * which rank runs next); once they run out the scheduler lets everything progress, so every input
 * ends. A run is a function of its input alone.
 *
 * The case (bytes 0-9; missing bytes are 0):
 *   0  the algorithm: allreduce registry, research variants, parameterised instances, then the
 *      broadcast algorithms
 *   1  p = 1 + b % 16
 *   2  count = b % 65 elements
 *   3  segment = b % 9 elements (0: none), at least count / 16 (at most 16 segments)
 *   4  dtype = b % 10, the operation from b / 10 (integers: SUM .. BXOR; floating: SUM, PROD,
 *      MIN, MAX, AVG; floating SUM, PROD and AVG run the reproducible replacement)
 *   5  bits 0-1: blocking calls one after another, nonblocking calls in flight together, one
 *      persistent request started again, blocking; bit 2 in place; bit 3 the argument check;
 *      bit 4 the reproducible replacement; bits 5-6 the tag bound (2^28 - 1, 65535, 32767);
 *      bit 7 messages of at most 24 bytes (steps split)
 *   6  the fault, b % 16: 12 a send fails, 13 a rank never runs the collective, 14 a rank runs
 *      one element more, 15 one rank's arguments differ under the check; else none
 *   7  the fault's rank (b % p) and b / 16 % 8: for a failing send, which of its sends; for a
 *      mismatch, which field of the signature
 *   8  the input data's seed
 *   9  operations: 1 + b % 3; bcast root: b / 3 % p
 * Without a fault every operation on every rank must succeed with the expected result bit for
 * bit (integers and floating MIN/MAX: any order gives the same bits; reproducible runs: the
 * canonical order of mpiar_reduce_canonical(); broadcast: the root's bytes), leave its input and
 * the element after its output untouched, and nothing may be left: no message unreceived, no
 * receive posted, no request allocated. With a fault every rank must end, every operation that
 * succeeds must still be right (except beside a rank of another count), and the fault must end
 * the collective as test_engine_threads 'faults' expects (a failed send fails its operation; a
 * silent rank fails every other rank of an allreduce, or of a broadcast from it, with elements;
 * a rank of another count makes an allreduce fail somewhere); a mismatch under the check fails the
 * operation everywhere and leaves the communicator usable for the next one. After a failure a
 * rank starts nothing more and leaves its buffers alone (the transport may still read a failed
 * call's send buffer, as mpiar.h says). Anything else prints the case and aborts. With
 * FUZZ_ENGINE_VERBOSE set in the environment, every input's case is printed, with how many of
 * its bytes the scheduler took.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "engine/engine.h"

#include "../engine/transport_threads.h"

#define HEADER 10
#define MAX_OPS 3
/* Passes one rank may make before the run counts as hung (a run ends long before). */
#define MAX_PASSES 500000UL

enum { MODE_BLOCKING = 0, MODE_NONBLOCKING, MODE_PERSISTENT };
enum { FAULT_NONE = 0, FAULT_SEND, FAULT_SILENT, FAULT_LONG, FAULT_MISMATCH };

typedef struct fcase {
  const mpiar__algorithm_t *alg;
  uint64_t alg_number;
  int bcast, root, p;
  size_t count, seg, es;
  mpiar_dtype_t dtype;
  mpiar_op_t op;
  int repro, mode, nops, in_place, check;
  long tag_ub;
  size_t max_msg;
  int fault, fault_rank, mismatch_field;
  mpiar__tw_fault_t tw_fault;
  long timeout_ms;
  uint8_t data_seed;
} fcase_t;

typedef struct frun {
  const fcase_t *c;
  mpiar__tw_t *w;
  unsigned char *in[MAX_OPS];     /* per operation: p inputs of count + 2 elements */
  unsigned char *expect[MAX_OPS]; /* per operation: the expected result */
  int (*rc)[MAX_OPS];             /* per rank and operation (1: never run) */
  char (*detail)[256];
} frun_t;

static const char *const mode_names[] = {"blocking", "nonblocking", "persistent"};
static const char *const fault_names[] = {"none", "send failure", "silent rank", "long rank",
                                          "argument mismatch"};

static void describe_case(const fcase_t *c) {
  fprintf(stderr,
          "fuzz_engine: %s%s p=%d count=%zu seg=%zu dtype=%s op=%s%s %s x%d in_place=%d check=%d "
          "tag_ub=%ld max_msg=%zu root=%d fault=%s rank=%d (send %d, field %d) seed=%u\n",
          c->bcast ? "bcast " : "", c->alg->name, c->p, c->count, c->seg,
          mpiar_dtype_name(c->dtype), mpiar_op_name(c->op), c->repro ? " reproducible" : "",
          mode_names[c->mode], c->nops, c->in_place, c->check, c->tag_ub, c->max_msg, c->root,
          fault_names[c->fault], c->fault_rank, c->tw_fault.send_fail_at, c->mismatch_field,
          (unsigned)c->data_seed);
}

static void fail(const fcase_t *c, const char *what, int rank, int op) {
  describe_case(c);
  fprintf(stderr, "fuzz_engine: rank %d operation %d: %s\n", rank, op, what);
  abort();
}

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/* Element @p i of rank @p rank's input of operation @p op: any bits, but finite for floating
 * types (no NaN, whose payload would depend on the order; infinities may still come out). */
static void input_elem(const fcase_t *c, int op, int rank, size_t i, unsigned char *dst) {
  uint64_t x = mix(((uint64_t)c->data_seed << 48) ^ ((uint64_t)op << 40) ^
                   ((uint64_t)rank << 32) ^ (uint64_t)i);
  switch (c->dtype) {
  case MPIAR_FLOAT16:
    if (((x >> 10) & 0x1F) == 0x1F) {
      x &= ~(uint64_t)0x4000;
    }
    break;
  case MPIAR_BFLOAT16:
    if (((x >> 7) & 0xFF) == 0xFF) {
      x &= ~(uint64_t)0x4000;
    }
    break;
  case MPIAR_FLOAT32:
    if (((x >> 23) & 0xFF) == 0xFF) {
      x &= ~(uint64_t)0x40000000;
    }
    break;
  case MPIAR_FLOAT64:
    if (((x >> 52) & 0x7FF) == 0x7FF) {
      x &= ~((uint64_t)1 << 62);
    }
    break;
  default:
    break;
  }
  memcpy(dst, &x, c->es); /* little-endian: the low bytes */
}

static const char *check_describe(const uint64_t *acc, int f, int which, char *buf, size_t len) {
  snprintf(buf, len, "%" PRIu64, acc[(which ? 16 : 0) + 2 * f]);
  return "field";
}

/* What one operation of one rank runs with: its request and its buffers. */
typedef struct fop {
  mpiar__request_t *r;
  unsigned char *in, *out, *guard;
  int started;
} fop_t;

/* Set up operation @p op of this rank on @p o (its request allocated already) and start it. */
static void start_op(frun_t *run, mpiar__engine_t *e, mpiar__plan_t *plan, fop_t *o, int rank,
                     int op, size_t count) {
  const fcase_t *c = run->c;
  mpiar__request_t *r = o->r;
  o->started = 0;
  if (e->broken) {
    /* Refused, as the core refuses a start on a broken context, before the buffers are touched:
     * after a failure the transport may still read the last run's send buffer (mpiar.h). */
    r->rc = MPIAR_ERR_COMM_BROKEN;
    snprintf(r->detail, sizeof r->detail, "broken: %s", e->broken_reason);
    return;
  }
  size_t bytes = (count + 1) * c->es;
  memcpy(o->in, run->in[op] + (size_t)rank * (c->count + 2) * c->es, bytes);
  if (c->in_place || (c->bcast && rank == c->root)) {
    memcpy(o->out, o->in, bytes);
  } else {
    memset(o->out, 0xAB, bytes);
  }
  memcpy(o->guard, o->out + count * c->es, c->es);
  r->magic = MPIAR__REQUEST_MAGIC;
  r->eng = e;
  r->plan = plan;
  r->persistent = c->mode == MODE_PERSISTENT;
  r->state = MPIAR__REQ_INACTIVE;
  r->rc = MPIAR_SUCCESS;
  r->detail[0] = '\0';
  r->dtype = c->dtype;
  r->kop = c->op == MPIAR_AVG ? MPIAR_SUM : c->op;
  r->average = !c->bcast && c->op == MPIAR_AVG;
  r->in = o->in;
  r->out = o->out;
  r->base[MPIAR__BUF_INPUT] = (char *)(c->in_place || c->bcast ? o->out : o->in);
  r->base[MPIAR__BUF_OUTPUT] = (char *)o->out;
  r->base[MPIAR__BUF_SCRATCH] = r->scratch;
  r->timeout_ms = c->timeout_ms;
  r->check = c->check;
  r->check_rounds = r->check_round = 0;
  r->check_req.handle = 0;
  if (c->check) {
    r->signature[0] = (uint64_t)(c->bcast ? MPIAR__COLL_BCAST : MPIAR__COLL_ALLREDUCE);
    r->signature[1] = (uint64_t)count;
    r->signature[2] = (uint64_t)c->es;
    r->signature[3] = (uint64_t)c->dtype;
    r->signature[4] = c->bcast ? 0 : (uint64_t)c->op;
    r->signature[5] = c->alg_number;
    r->signature[6] = (uint64_t)c->seg;
    r->signature[7] = c->bcast ? (uint64_t)c->root : UINT64_MAX;
    if (c->fault == FAULT_MISMATCH && op == 0 && rank == c->fault_rank) {
      r->signature[c->mismatch_field] ^= 1;
    }
  }
  double deadline = c->timeout_ms > 0 ? mpiar__engine_now(e) + (double)c->timeout_ms * 1e-3 : 0;
  int rc = mpiar__engine_start(e, r, deadline);
  if (rc != MPIAR_SUCCESS) {
    r->rc = rc;
    return;
  }
  o->started = 1;
}

/* Operation @p op of this rank ended: record it and check what it left. */
static void end_op(frun_t *run, fop_t *o, int rank, int op, size_t count) {
  const fcase_t *c = run->c;
  mpiar__request_t *r = o->r;
  int rc = r->rc;
  run->rc[rank][op] = rc;
  if (rc != MPIAR_SUCCESS) {
    if (r->detail[0] != '\0') {
      snprintf(run->detail[rank], sizeof run->detail[rank], "%s", r->detail);
    }
    return;
  }
  if (c->fault == FAULT_LONG) {
    return; /* beside a rank of another count, data may be misplaced without a length error */
  }
  if (count > 0 && memcmp(o->out, run->expect[op], count * c->es) != 0) {
    size_t i = 0;
    while (memcmp(o->out + i * c->es, run->expect[op] + i * c->es, c->es) == 0) {
      i++;
    }
    char what[128];
    snprintf(what, sizeof what, "element %zu differs from the expected result", i);
    fail(c, what, rank, op);
  }
  if (memcmp(o->out + count * c->es, o->guard, c->es) != 0) {
    fail(c, "the element after the output was written", rank, op);
  }
  if (!c->in_place && !c->bcast &&
      memcmp(o->in, run->in[op] + (size_t)rank * (c->count + 2) * c->es, (count + 1) * c->es) !=
          0) {
    fail(c, "the input buffer was written", rank, op);
  }
}

static void release_req(mpiar__engine_t *e, mpiar__request_t *r) {
  if (r == NULL) {
    return;
  }
  if (r->tainted) {
    r->anext = e->tainted; /* freed with the engine, as the core does */
    e->tainted = r;
  } else {
    mpiar__request_free_mem(r);
  }
}

static void body(int rank, void *arg) {
  frun_t *run = arg;
  const fcase_t *c = run->c;
  for (int op = 0; op < MAX_OPS; op++) {
    run->rc[rank][op] = 1;
  }
  if (c->fault == FAULT_SILENT && rank == c->fault_rank) {
    return;
  }
  size_t count = c->count + (c->fault == FAULT_LONG && rank == c->fault_rank ? 1 : 0);
  mpiar__engine_t *e = calloc(1, sizeof *e);
  mpiar__plan_t *plan = calloc(1, sizeof *plan);
  fop_t ops[MAX_OPS];
  memset(ops, 0, sizeof ops);
  size_t bytes = (count + 1) * c->es;
  int rc = e != NULL && plan != NULL ? MPIAR_SUCCESS : MPIAR_ERR_NOMEM;
  for (int k = 0; k < MAX_OPS && rc == MPIAR_SUCCESS; k++) {
    ops[k].in = malloc(bytes);
    ops[k].out = malloc(bytes);
    ops[k].guard = malloc(c->es);
    if (ops[k].in == NULL || ops[k].out == NULL || ops[k].guard == NULL) {
      rc = MPIAR_ERR_NOMEM;
    }
  }
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__engine_init(e, &mpiar__transport_threads, mpiar__tw_state(run->w, rank), rank,
                            c->p, c->tag_ub);
    e->check_describe = check_describe;
  }
  if (rc == MPIAR_SUCCESS) {
    plan->name = c->alg->name;
    mpiar__schedule_init(&plan->sched, rank, c->p, count, c->es, c->in_place || c->bcast,
                         c->alg->name, c->seg);
    plan->sched.root = c->bcast ? c->root : -1;
    rc = c->alg->build(&plan->sched);
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar__schedule_finalize(&plan->sched);
    }
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar__plan_prepare(plan, e->exact_max, c->max_msg);
    }
  }
  if (rc != MPIAR_SUCCESS) {
    char what[512];
    snprintf(what, sizeof what, "setting up failed: %s: %s", mpiar_err_name(rc),
             mpiar_last_error());
    fail(c, what, rank, 0);
  }
  /* Operations: together (nonblocking) or one after another, each in a request of its own, or
   * one persistent request started again for each. */
  int together = c->mode == MODE_NONBLOCKING ? c->nops : 1;
  unsigned long passes = 0, idle = 0;
  for (int first = 0; first < c->nops; first += together) {
    for (int k = first; k < first + together; k++) {
      fop_t *o = &ops[c->mode == MODE_PERSISTENT ? 0 : k];
      if (o->r == NULL && (o->r = mpiar__request_alloc(plan)) == NULL) {
        fail(c, "cannot allocate a request", rank, k);
      }
      start_op(run, e, plan, o, rank, k, count);
    }
    for (;;) {
      int active = 0;
      for (int k = first; k < first + together; k++) {
        fop_t *o = &ops[c->mode == MODE_PERSISTENT ? 0 : k];
        active += o->started && o->r->state == MPIAR__REQ_ACTIVE;
      }
      if (active == 0) {
        break;
      }
      int progressed = 0;
      mpiar__progress(e, &progressed);
      idle = progressed ? 0 : idle + 1;
      if (idle > 0 && idle % 64 == 0) {
        mpiar__scan(e);
      }
      if (++passes > MAX_PASSES) {
        fail(c, "no end after many passes (hung)", rank, first);
      }
      mpiar__tw_yield();
    }
    for (int k = first; k < first + together; k++) {
      fop_t *o = &ops[c->mode == MODE_PERSISTENT ? 0 : k];
      end_op(run, o, rank, k, count);
      if (c->mode != MODE_PERSISTENT) {
        release_req(e, o->r);
        o->r = NULL;
      }
    }
  }
  release_req(e, ops[0].r);
  if (c->fault == FAULT_NONE && e->nheld != 0) {
    fail(c, "messages taken out of the queue were never received", rank, c->nops - 1);
  }
  mpiar__engine_close(e);
  mpiar__plan_unprepare(plan);
  for (int k = 0; k < MAX_OPS; k++) {
    free(ops[k].in);
    free(ops[k].out);
    free(ops[k].guard);
  }
  free(plan);
  free(e);
}

static uint8_t at(const uint8_t *data, size_t size, size_t i) {
  return i < size ? data[i] : 0;
}

/* The case of the input's first bytes. */
static void parse_case(const uint8_t *data, size_t size, fcase_t *c) {
  memset(c, 0, sizeof *c);
  int nall = mpiar__algorithm_count + mpiar__algorithm_variant_count +
             mpiar__algorithm_instance_count;
  int a = at(data, size, 0) % (nall + mpiar__bcast_algorithm_count);
  if (a < mpiar__algorithm_count) {
    c->alg = &mpiar__algorithms[a];
  } else if ((a -= mpiar__algorithm_count) < mpiar__algorithm_variant_count) {
    c->alg = &mpiar__algorithm_variants[a];
  } else if ((a -= mpiar__algorithm_variant_count) < mpiar__algorithm_instance_count) {
    c->alg = &mpiar__algorithm_instances[a];
  } else {
    c->alg = &mpiar__bcast_algorithms[a - mpiar__algorithm_instance_count];
    c->bcast = 1;
  }
  c->p = 1 + at(data, size, 1) % 16;
  c->count = at(data, size, 2) % 65;
  c->seg = at(data, size, 3) % 9;
  if (c->seg > 0 && c->count > 16 * c->seg) {
    c->seg = (c->count + 15) / 16; /* at most 16 segments: an input stays fast */
  }
  uint8_t b4 = at(data, size, 4);
  c->dtype = (mpiar_dtype_t)(b4 % 10);
  int floating = c->dtype >= MPIAR_FLOAT16;
  if (floating) {
    static const mpiar_op_t fops[] = {MPIAR_SUM, MPIAR_PROD, MPIAR_MIN, MPIAR_MAX, MPIAR_AVG};
    c->op = fops[(b4 / 10) % 5];
  } else {
    c->op = (mpiar_op_t)((b4 / 10) % 7);
  }
  c->es = mpiar_dtype_size(c->dtype);
  uint8_t b5 = at(data, size, 5);
  c->mode = (b5 & 3) == 3 ? MODE_BLOCKING : (int)(b5 & 3);
  c->in_place = (b5 >> 2) & 1;
  c->check = (b5 >> 3) & 1;
  c->repro = (b5 >> 4) & 1;
  static const long tag_ubs[] = {(1L << 28) - 1, 65535, 32767, (1L << 28) - 1};
  c->tag_ub = tag_ubs[(b5 >> 5) & 3];
  c->max_msg = (b5 >> 7) ? 24 : (size_t)1 << 30;
  uint8_t b6 = at(data, size, 6), b7 = at(data, size, 7);
  c->fault = b6 % 16 < 12 ? FAULT_NONE : FAULT_SEND + (b6 % 16 - 12);
  c->data_seed = at(data, size, 8);
  uint8_t b9 = at(data, size, 9);
  c->nops = 1 + b9 % 3;
  c->tw_fault.send_fail_rank = -1;
  if (c->fault != FAULT_NONE && c->p == 1) {
    c->p = 2; /* a fault needs another rank to notice it */
  }
  c->fault_rank = b7 % c->p;
  if (c->fault == FAULT_SEND) {
    c->tw_fault.send_fail_rank = c->fault_rank;
    c->tw_fault.send_fail_at = b7 / 16 % 8;
  }
  if (c->fault == FAULT_SILENT || c->fault == FAULT_LONG) {
    c->timeout_ms = 100; /* on the transport's virtual clock */
  }
  if (c->fault == FAULT_MISMATCH) {
    c->check = 1;
    c->mismatch_field = b7 / 16 % 8;
  }
  if (c->bcast) {
    c->in_place = 1;
    c->root = (b9 / 3) % c->p;
    c->repro = 0;
    c->alg_number = (uint64_t)(c->alg - mpiar__bcast_algorithms);
  } else {
    /* Floating SUM, PROD and AVG have one right answer only in the canonical order. */
    if (floating && c->op != MPIAR_MIN && c->op != MPIAR_MAX) {
      c->repro = 1;
    }
    if (c->repro) {
      c->alg = mpiar__algorithm_reproducible(c->alg, c->p, c->dtype);
    }
    c->alg_number = mpiar__algorithm_number(c->alg);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fcase_t c;
  parse_case(data, size, &c);
  if (getenv("FUZZ_ENGINE_VERBOSE") != NULL) {
    describe_case(&c); /* the case of each input (to read a reproducer) */
  }
  frun_t run;
  memset(&run, 0, sizeof run);
  run.c = &c;
  size_t stride = (c.count + 2) * c.es; /* a long rank reads count + 1 elements */
  const void *ins[16];
  for (int op = 0; op < c.nops; op++) {
    run.in[op] = malloc((size_t)c.p * stride);
    run.expect[op] = malloc(stride);
    if (run.in[op] == NULL || run.expect[op] == NULL) {
      abort();
    }
    for (int r = 0; r < c.p; r++) {
      for (size_t i = 0; i < c.count + 2; i++) {
        input_elem(&c, op, r, i, run.in[op] + (size_t)r * stride + i * c.es);
      }
      ins[r] = run.in[op] + (size_t)r * stride;
    }
    if (c.bcast) {
      memcpy(run.expect[op], ins[c.root], c.count * c.es);
    } else if (c.count > 0 && mpiar_reduce_canonical(run.expect[op], ins, c.p, c.count, c.dtype,
                                                     c.op) != MPIAR_SUCCESS) {
      fail(&c, "mpiar_reduce_canonical failed", -1, op);
    }
  }
  run.rc = calloc((size_t)c.p, sizeof *run.rc);
  run.detail = calloc((size_t)c.p, sizeof *run.detail);
  long live_before = mpiar__requests_live;
  run.w = mpiar__tw_create_bytes(c.p, data + (size < HEADER ? size : HEADER),
                                 size < HEADER ? 0 : size - HEADER, c.tag_ub, &c.tw_fault);
  if (run.w == NULL || run.rc == NULL || run.detail == NULL ||
      mpiar__tw_run(run.w, body, &run) != 0) {
    fail(&c, "cannot run the threads", -1, 0);
  }
  if (getenv("FUZZ_ENGINE_VERBOSE") != NULL) {
    fprintf(stderr, "fuzz_engine: the scheduler took %zu of the %zu bytes after the header\n",
            mpiar__tw_bytes_used(run.w), size < HEADER ? 0 : size - HEADER);
  }
  size_t unmatched = mpiar__tw_unmatched(run.w);
  int fired = mpiar__tw_fault_fired(run.w);
  size_t leftover = 0;
  mpiar__tw_destroy(run.w, &leftover);
  if (mpiar__requests_live != live_before) {
    fail(&c, "requests were not freed", -1, 0);
  }
  int failed = 0, others_failed = 0, mpi_err = 0;
  for (int r = 0; r < c.p; r++) {
    for (int op = 0; op < c.nops; op++) {
      int silent = c.fault == FAULT_SILENT && r == c.fault_rank;
      if (silent) {
        continue;
      }
      if (run.rc[r][op] == 1) {
        fail(&c, "the operation never ran", r, op);
      }
      failed += run.rc[r][op] != MPIAR_SUCCESS;
      others_failed += op == 0 && run.rc[r][op] != MPIAR_SUCCESS;
      mpi_err += r == c.fault_rank && run.rc[r][op] == MPIAR_ERR_MPI;
      int must_succeed = c.fault == FAULT_NONE || (c.fault == FAULT_MISMATCH && op > 0) ||
                         (c.fault == FAULT_SEND && !fired);
      if (must_succeed && run.rc[r][op] != MPIAR_SUCCESS) {
        char what[400];
        snprintf(what, sizeof what, "failed: %s: %s", mpiar_err_name(run.rc[r][op]),
                 run.detail[r]);
        fail(&c, what, r, op);
      }
      if (c.fault == FAULT_MISMATCH && op == 0 && run.rc[r][op] != MPIAR_ERR_MISMATCH) {
        char what[400];
        snprintf(what, sizeof what, "ended with %s, not MPIAR_ERR_MISMATCH: %s",
                 mpiar_err_name(run.rc[r][op]), run.detail[r]);
        fail(&c, what, r, op);
      }
    }
  }
  if (c.fault == FAULT_NONE || c.fault == FAULT_MISMATCH) {
    if (leftover != 0) {
      fail(&c, "messages were never received", -1, c.nops - 1);
    }
    if (unmatched != 0) {
      fail(&c, "receives are still posted", -1, c.nops - 1);
    }
  } else if (c.fault == FAULT_SEND && fired && mpi_err == 0) {
    fail(&c, "the failed send did not fail its operation", c.fault_rank, 0);
  } else if (c.fault == FAULT_SILENT && c.count > 0 && (!c.bcast || c.root == c.fault_rank) &&
             others_failed != c.p - 1) {
    fail(&c, "a rank finished although a rank it needs never ran", -1, 0);
  } else if (c.fault == FAULT_LONG && !c.bcast && failed == 0) {
    /* (A broadcast root of one element more may send it to ranks that receive none: eager
     * sends complete and nobody can tell before the drain at release.) */
    fail(&c, "no rank noticed the rank of another count", c.fault_rank, 0);
  }
  for (int op = 0; op < c.nops; op++) {
    free(run.in[op]);
    free(run.expect[op]);
  }
  free(run.rc);
  free(run.detail);
  return 0;
}
