/*
 * The real engine (src/engine) running every registry algorithm on the threads transport: the
 * ranks are threads of this process and a seeded scheduler delivers messages in an adversarial
 * order (transport_threads.h). Each case is one algorithm, rank count, count, segment, in-place
 * form, tag bound (small bounds make every message a probed one), message limit (small limits
 * split steps into several messages) and seed; every rank's result must be bit for bit the
 * expected one:
 *   - allreduce of int64 sums (any order of additions gives the exact sum),
 *   - the reproducible replacement of every allreduce algorithm on float64 against
 *     mpiar_reduce_canonical(),
 *   - broadcast from every root of the root's bytes,
 *   - reduce-scatter (each rank's block of the int64 sums, and the reproducible replacement on
 *     float64 against mpiar_reduce_canonical()) and allgather (every rank's block on every rank).
 * One case in three up to 8 ranks runs on the node transport (engine/transport_node.h) over the
 * threads transport, with rings in this process's memory (some pairs of ranks on rings, or all).
 * Faults go through the same transport: a send that fails, a rank that never runs the
 * collective (its peers' deadlines), a rank whose count differs (wrong lengths); every rank must
 * end with an error and every request and message must be freed.
 *
 * A failing case prints the command that replays it alone (the run is a function of its seed):
 *   test_engine_threads one ALG P COUNT SEG INPLACE TAGUB MAXMSG SEED [bcast ROOT | rs | ag]
 *                       [repro] [node RANKS_PER_NODE BYTES]
 * Usage: test_engine_threads matrix [seeds [pmax]]   the matrix (p = 1..16 and a few up to 64;
 *                                                    pmax: only the sizes up to it)
 *        test_engine_threads faults [seeds]   the fault cases
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "engine/engine.h"
#include "engine/transport_node.h"
#include "transport_threads.h"

typedef struct tcase {
  const mpiar__algorithm_t *alg;
  int bcast, root;
  int rsag; /* 1: reduce-scatter, 2: allgather (count is one rank's block); 0: neither */
  int repro; /* float64 against the canonical order */
  int p;
  size_t count, seg;
  int in_place;
  long tag_ub;
  size_t max_msg;
  uint64_t seed;
  /* Faults. */
  mpiar__tw_fault_t fault;
  int silent_rank; /* -1: none; else this rank never runs the collective */
  int long_rank;   /* -1: none; else this rank runs one element more */
  long timeout_ms;
  /* The node transport over the threads transport: 0 none; else ranks r and q share a node when
   * r / node_ranks == q / node_ranks, and messages of at most node_bytes take their rings. */
  int node_ranks;
  size_t node_bytes;
} tcase_t;

typedef struct run {
  const tcase_t *c;
  mpiar__tw_t *w;
  size_t es;
  unsigned char **in, **out;
  int *rc;
  char (*detail)[512];
  unsigned char *rings; /* p * p rings (node transport): ring (s, q) carries s's messages to q */
} run_t;

static int failures;

static void replay_line(const tcase_t *c) {
  char tail[64] = "";
  if (c->bcast) {
    snprintf(tail, sizeof tail, " bcast %d", c->root);
  } else if (c->rsag) {
    snprintf(tail, sizeof tail, " %s", c->rsag == 1 ? "rs" : "ag");
  }
  fprintf(stderr, "  replay: test_engine_threads one %s %d %zu %zu %d %ld %zu %" PRIu64 "%s%s\n",
          c->alg->name, c->p, c->count, c->seg, c->in_place, c->tag_ub, c->max_msg, c->seed, tail,
          c->repro ? " repro" : "");
  if (c->node_ranks > 0) {
    fprintf(stderr, "  (node transport: append 'node %d %zu' to replay it)\n", c->node_ranks,
            c->node_bytes);
  }
  if (c->fault.send_fail_rank >= 0 || c->silent_rank >= 0 || c->long_rank >= 0) {
    fprintf(stderr, "  (fault case: send failure on rank %d at send %d, silent rank %d, long rank "
                    "%d, timeout %ld ms; 'faults' replays it)\n",
            c->fault.send_fail_rank, c->fault.send_fail_at, c->silent_rank, c->long_rank,
            c->timeout_ms);
  }
}

static const char *describe(const uint64_t *acc, int f, int which, char *buf, size_t len) {
  snprintf(buf, len, "%" PRIu64, acc[(which ? 16 : 0) + 2 * f]);
  return "field";
}

static double input_f64(uint64_t seed, int rank, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)rank << 40) ^ (i * 0xBF58476D1CE4E5B9ULL);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 29;
  double v = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
  return (v - 0.5) * (double)(1 + (x & 1023));
}

static int64_t input_i64(uint64_t seed, int rank, size_t i) {
  return (int64_t)((seed % 1000) * 7 + (uint64_t)rank * 1000003 + i * 31) - 500000;
}

/* The node transport of @p rank over its threads transport: rings in the run's memory. */
static int node_open(run_t *run, int rank, const mpiar__transport_t **tx, void **txs) {
  const tcase_t *c = run->c;
  const size_t ring = mpiar__node_ring_bytes();
  void **out = calloc((size_t)c->p, sizeof *out), **in = calloc((size_t)c->p, sizeof *in);
  int rc = out != NULL && in != NULL ? MPIAR_SUCCESS : MPIAR_ERR_NOMEM;
  for (int q = 0; rc == MPIAR_SUCCESS && q < c->p; q++) {
    if (q != rank && q / c->node_ranks == rank / c->node_ranks) {
      out[q] = run->rings + ((size_t)rank * (size_t)c->p + (size_t)q) * ring;
      in[q] = run->rings + ((size_t)q * (size_t)c->p + (size_t)rank) * ring;
    }
  }
  /* The tag layout's exact bound caps the rings' messages, as the library's setup does. */
  mpiar__engine_t layout;
  mpiar__engine_tag_layout(&layout, c->tag_ub);
  size_t threshold = c->node_bytes < layout.exact_max ? c->node_bytes : layout.exact_max - 1;
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__transport_node_open(*tx, *txs, rank, c->p, out, in, threshold, NULL, NULL, tx,
                                    txs);
  }
  free(out);
  free(in);
  return rc;
}

static void body(int rank, void *arg) {
  run_t *run = arg;
  const tcase_t *c = run->c;
  run->rc[rank] = -1;
  if (rank == c->silent_rank) {
    run->rc[rank] = MPIAR_SUCCESS;
    return;
  }
  size_t count = c->count + (rank == c->long_rank ? 1 : 0);
  mpiar__engine_t *e = calloc(1, sizeof *e);
  mpiar__plan_t *plan = calloc(1, sizeof *plan);
  mpiar__request_t *r = NULL;
  int rc = e != NULL && plan != NULL ? MPIAR_SUCCESS : MPIAR_ERR_NOMEM;
  const mpiar__transport_t *tx = &mpiar__transport_threads;
  void *txs = mpiar__tw_state(run->w, rank);
  if (rc == MPIAR_SUCCESS && c->node_ranks > 0) {
    rc = node_open(run, rank, &tx, &txs);
  }
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__engine_init(e, tx, txs, rank, c->p, c->tag_ub);
    e->check_describe = describe;
  }
  if (rc == MPIAR_SUCCESS) {
    plan->name = c->alg->name;
    mpiar__schedule_init(&plan->sched, rank, c->p, count, run->es, c->in_place, c->alg->name,
                         c->seg);
    plan->sched.root = c->bcast ? c->root : -1;
    rc = c->alg->build(&plan->sched);
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar__schedule_finalize(&plan->sched);
    }
    if (rc == MPIAR_SUCCESS) {
      rc = mpiar__plan_prepare(plan, e->exact_max, c->max_msg);
    }
  }
  if (rc == MPIAR_SUCCESS && (r = mpiar__request_alloc(plan)) == NULL) {
    rc = MPIAR_ERR_NOMEM;
  }
  if (rc == MPIAR_SUCCESS) {
    r->magic = MPIAR__REQUEST_MAGIC;
    r->eng = e;
    r->plan = plan;
    r->dtype = c->repro ? MPIAR_FLOAT64 : MPIAR_INT64;
    r->kop = MPIAR_SUM;
    r->in = run->in[rank];
    r->out = run->out[rank];
    r->base[MPIAR__BUF_INPUT] = (char *)(c->in_place || c->bcast ? run->out[rank] : run->in[rank]);
    r->base[MPIAR__BUF_OUTPUT] = (char *)run->out[rank];
    r->base[MPIAR__BUF_SCRATCH] = r->scratch;
    r->timeout_ms = c->timeout_ms;
    double deadline = c->timeout_ms > 0 ? mpiar__engine_now(e) + (double)c->timeout_ms * 1e-3 : 0;
    rc = mpiar__engine_start(e, r, deadline);
  }
  if (rc == MPIAR_SUCCESS) {
    unsigned idle = 0;
    while (r->state == MPIAR__REQ_ACTIVE) {
      int progressed = 0;
      mpiar__progress(e, &progressed);
      idle = progressed ? 0 : idle + 1;
      if (idle > 0 && idle % 64 == 0) {
        mpiar__scan(e);
      }
      mpiar__tw_yield();
    }
    rc = r->rc;
    snprintf(run->detail[rank], sizeof run->detail[rank], "%s", r->detail);
  } else {
    snprintf(run->detail[rank], sizeof run->detail[rank], "%s", mpiar_last_error());
  }
  run->rc[rank] = rc;
  if (r != NULL) {
    if (r->tainted) {
      r->anext = e->tainted; /* freed with the engine, as the core does */
      e->tainted = r;
    } else {
      mpiar__request_free_mem(r);
    }
  }
  if (e != NULL) {
    mpiar__engine_close(e);
  }
  if (plan != NULL) {
    mpiar__plan_unprepare(plan);
  }
  free(plan);
  free(e);
}

/* Run one case; @return 0 when every rank got the expected result (or, with a fault, when every
 * rank ended with an error and nothing leaked). */
static int run_case(const tcase_t *c) {
  run_t run = {.c = c};
  run.es = 8;
  /* Elements of a rank's input and output buffers (and one more, never written). */
  const size_t all = (size_t)c->p * c->count;
  const size_t n_in = c->rsag == 1 ? all : c->count;
  const size_t n_out = c->rsag == 2 || (c->rsag == 1 && c->in_place) ? all : c->count;
  size_t n = (n_in > n_out ? n_in : n_out) + 1;
  run.in = calloc((size_t)c->p, sizeof *run.in);
  run.out = calloc((size_t)c->p, sizeof *run.out);
  run.rc = calloc((size_t)c->p, sizeof *run.rc);
  run.detail = calloc((size_t)c->p, sizeof *run.detail);
  long live_before = mpiar__requests_live;
  for (int r = 0; r < c->p; r++) {
    run.in[r] = malloc(n * 8);
    run.out[r] = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
      if (c->repro) {
        double v = input_f64(c->seed, r, i);
        memcpy(run.in[r] + 8 * i, &v, 8);
      } else {
        int64_t v = input_i64(c->seed, r, i);
        memcpy(run.in[r] + 8 * i, &v, 8);
      }
    }
    if (c->rsag == 2 && c->in_place) {
      memset(run.out[r], 0xAB, n * 8);
      memcpy(run.out[r] + (size_t)r * c->count * 8, run.in[r], c->count * 8);
    } else if (c->in_place || (c->bcast && r == c->root)) {
      memcpy(run.out[r], run.in[r], n * 8);
    } else {
      memset(run.out[r], 0xAB, n * 8);
    }
  }
  if (c->node_ranks > 0) {
    void *mem = NULL;
    size_t bytes = (size_t)c->p * (size_t)c->p * mpiar__node_ring_bytes();
    if (posix_memalign(&mem, 64, bytes) == 0) {
      mpiar__node_rings_init(mem, (size_t)c->p * (size_t)c->p);
    }
    run.rings = mem;
  }
  run.w = mpiar__tw_create(c->p, c->seed, c->tag_ub, &c->fault);
  int bad = run.w == NULL || (c->node_ranks > 0 && run.rings == NULL) ||
            mpiar__tw_run(run.w, body, &run) != 0;
  size_t leftover = 0;
  if (run.w != NULL) {
    mpiar__tw_destroy(run.w, &leftover);
  }
  int faulty = c->fault.send_fail_rank >= 0 || c->silent_rank >= 0 || c->long_rank >= 0;
  unsigned char *expect = malloc(n * 8);
  /* Every rank's result is expect[0, len) (allgather, allreduce, bcast) or, for a reduce-scatter,
   * its block of the reduction over the whole vector (n_in elements). */
  const size_t len = c->rsag == 1 ? c->count : c->rsag == 2 ? all : c->count;
  const size_t nred = c->rsag == 1 ? all : c->count;
  if (!bad && !faulty) {
    if (c->bcast) {
      memcpy(expect, run.in[c->root], c->count * 8);
    } else if (c->rsag == 2) {
      for (int r = 0; r < c->p; r++) {
        memcpy(expect + (size_t)r * c->count * 8, run.in[r], c->count * 8);
      }
    } else if (c->repro) {
      const void **ins = calloc((size_t)c->p, sizeof *ins);
      for (int r = 0; r < c->p; r++) {
        ins[r] = run.in[r];
      }
      if (nred > 0 &&
          mpiar_reduce_canonical(expect, ins, c->p, nred, MPIAR_FLOAT64, MPIAR_SUM) != 0) {
        bad = 1;
      }
      free(ins);
    } else {
      for (size_t i = 0; i < nred; i++) {
        int64_t s = 0;
        for (int r = 0; r < c->p; r++) {
          s += input_i64(c->seed, r, i);
        }
        memcpy(expect + 8 * i, &s, 8);
      }
    }
    if (leftover != 0) {
      fprintf(stderr, "FAIL %s p=%d: %zu messages never received\n", c->alg->name, c->p,
              leftover);
      bad = 1;
    }
    for (int r = 0; r < c->p && !bad; r++) {
      if (run.rc[r] != MPIAR_SUCCESS) {
        fprintf(stderr, "FAIL %s p=%d rank %d: %s: %s\n", c->alg->name, c->p, r,
                mpiar_err_name(run.rc[r]), run.detail[r]);
        bad = 1;
      } else if (len > 0 && memcmp(run.out[r], expect + (c->rsag == 1 ? 8 * (size_t)r * c->count
                                                                          : 0),
                                     len * 8) != 0) {
        const unsigned char *want = expect + (c->rsag == 1 ? 8 * (size_t)r * c->count : 0);
        size_t i = 0;
        while (memcmp(run.out[r] + 8 * i, want + 8 * i, 8) == 0) {
          i++;
        }
        fprintf(stderr, "FAIL %s p=%d rank %d: element %zu differs from the expected result\n",
                c->alg->name, c->p, r, i);
        bad = 1;
      }
    }
  } else if (!bad) {
    /* Every rank ended (the run returned). The rank whose send failed fails with the transport's
     * error; with a silent rank, every other rank fails (each needs its data); with a rank of
     * another count, at least one rank fails. A rank that finished before the failure may
     * succeed (it learns of the failure at its next call). */
    int failed = 0;
    for (int r = 0; r < c->p; r++) {
      failed += r != c->silent_rank && run.rc[r] != MPIAR_SUCCESS;
    }
    int ok = c->fault.send_fail_rank >= 0  ? run.rc[c->fault.send_fail_rank] == MPIAR_ERR_MPI
             : c->silent_rank >= 0         ? failed == c->p - 1
                                           : failed > 0;
    if (!ok) {
      fprintf(stderr, "FAIL %s p=%d: the fault did not end the collective as expected\n",
              c->alg->name, c->p);
      bad = 1;
    }
  }
  if (mpiar__requests_live != live_before) {
    fprintf(stderr, "FAIL %s p=%d: %ld requests not freed\n", c->alg->name, c->p,
            mpiar__requests_live - live_before);
    bad = 1;
  }
  if (bad) {
    replay_line(c);
    for (int r = 0; r < c->p; r++) {
      fprintf(stderr, "  rank %d: %s %s\n", r, mpiar_err_name(run.rc[r]), run.detail[r]);
    }
  }
  for (int r = 0; r < c->p; r++) {
    free(run.in[r]);
    free(run.out[r]);
  }
  free(expect);
  free(run.rings);
  free(run.in);
  free(run.out);
  free(run.rc);
  free(run.detail);
  failures += bad;
  return bad;
}

static tcase_t base_case(const mpiar__algorithm_t *alg, int p, uint64_t seed) {
  tcase_t c;
  memset(&c, 0, sizeof c);
  c.alg = alg;
  c.p = p;
  c.seed = seed;
  c.tag_ub = (1L << 28) - 1;
  c.max_msg = (size_t)1 << 30;
  c.fault.send_fail_rank = -1;
  c.silent_rank = -1;
  c.long_rank = -1;
  return c;
}

/* The varying parameters of a case, drawn from its seed (so a seed names the whole case). */
static void vary(tcase_t *c, uint64_t k) {
  static const size_t counts[] = {0, 1, 2, 3, 5, 8, 13, 31, 64, 100};
  size_t pick = (size_t)(k % 10);
  c->count = counts[pick] + (pick >= 4 ? (size_t)c->p : 0);
  c->seg = (k / 10) % 3 == 0 ? 0 : (size_t)(1 + (k / 30) % 7);
  c->in_place = (int)((k / 7) % 2);
  c->tag_ub = (k / 3) % 4 == 0 ? 65535 : (1L << 28) - 1; /* 65535: 2 size bits, most probed */
  c->max_msg = (k / 5) % 4 == 0 ? 24 : (size_t)1 << 30;   /* 24 bytes: steps split */
  /* One case in three up to 8 ranks runs on the node transport: nodes of 2 ranks with only
   * messages of at most 64 bytes on rings (the others on the threads transport), or one node
   * with every exact-length message on rings (segments of 1..7 elements fill them). */
  int node = (k / 11) % 3 == 0 ? 1 + (int)((k / 33) % 2) : 0;
  if (c->p <= 8 && node > 0) {
    c->node_ranks = node == 1 ? 2 : c->p;
    c->node_bytes = node == 1 ? 64 : MPIAR__NODE_THRESHOLD;
  }
}

static void matrix(int seeds, int pmax) {
  int ps[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 33, 64};
  int nps = (int)(sizeof ps / sizeof *ps);
  while (nps > 1 && ps[nps - 1] > pmax) {
    nps--;
  }
  int cases = 0;
  for (int a = 0; a < mpiar__algorithm_count + mpiar__algorithm_variant_count; a++) {
    const mpiar__algorithm_t *alg = a < mpiar__algorithm_count
                                        ? &mpiar__algorithms[a]
                                        : &mpiar__algorithm_variants[a - mpiar__algorithm_count];
    for (int i = 0; i < nps; i++) {
      int s_max = ps[i] > 16 ? 1 : seeds;
      for (int s = 0; s < s_max; s++) {
        uint64_t seed = (uint64_t)(a * 1000 + ps[i] * 37 + s * 7919 + 1);
        tcase_t c = base_case(alg, ps[i], seed);
        vary(&c, seed);
        cases++;
        run_case(&c);
        /* The reproducible replacement on float64, against the canonical order. */
        if (a < mpiar__algorithm_count && s == 0) {
          tcase_t d = c;
          d.alg = mpiar__algorithm_reproducible(alg, ps[i], MPIAR_FLOAT64);
          d.repro = 1;
          d.in_place = 0;
          if (d.alg != NULL) {
            cases++;
            run_case(&d);
          }
        }
      }
    }
  }
  for (int a = 0; a < mpiar__bcast_algorithm_count; a++) {
    for (int i = 0; i < nps; i++) {
      int s_max = ps[i] > 16 ? 1 : seeds;
      for (int s = 0; s < s_max; s++) {
        uint64_t seed = (uint64_t)(50000 + a * 1000 + ps[i] * 37 + s * 7919);
        tcase_t c = base_case(&mpiar__bcast_algorithms[a], ps[i], seed);
        vary(&c, seed);
        c.in_place = 1;
        c.bcast = 1;
        c.root = (int)(seed % (uint64_t)ps[i]);
        cases++;
        run_case(&c);
      }
    }
  }
  /* Reduce-scatter (and its reproducible replacement) and allgather: every entry. */
  for (int k = 1; k <= 2; k++) {
    const mpiar__algorithm_t *list =
        k == 1 ? mpiar__reduce_scatter_algorithms : mpiar__allgather_algorithms;
    const int nlist =
        k == 1 ? mpiar__reduce_scatter_algorithm_count : mpiar__allgather_algorithm_count;
    for (int a = 0; a < nlist; a++) {
      for (int i = 0; i < nps; i++) {
        int s_max = ps[i] > 8 ? 1 : seeds; /* fewer than allreduce: their schedules are simpler */
        for (int s = 0; s < s_max; s++) {
          uint64_t seed = (uint64_t)(70000 + k * 10000 + a * 1000 + ps[i] * 37 + s * 7919);
          tcase_t c = base_case(&list[a], ps[i], seed);
          vary(&c, seed);
          c.count = c.count > (size_t)ps[i] ? c.count - (size_t)ps[i] : c.count; /* per rank */
          c.seg = 0;
          c.rsag = k;
          cases++;
          run_case(&c);
          if (k == 1 && s == 0) {
            tcase_t d = c;
            d.alg = mpiar__reduce_scatter_reproducible(&list[a], ps[i], MPIAR_FLOAT64);
            d.repro = 1;
            cases++;
            run_case(&d);
          }
        }
      }
    }
  }
  printf("engine matrix: %d cases, %d failed\n", cases, failures);
}

static void faults(int seeds) {
  int cases = 0;
  const mpiar__algorithm_t *algs[] = {mpiar__algorithm_find("ring"),
                                      mpiar__algorithm_find("rabenseifner"),
                                      mpiar__algorithm_find("recursive_doubling")};
  for (int a = 0; a < 3; a++) {
    if (algs[a] == NULL) {
      continue;
    }
    for (int p = 2; p <= 6; p++) {
      for (int s = 0; s < seeds; s++) {
        uint64_t seed = (uint64_t)(90000 + a * 1000 + p * 37 + s * 7919);
        for (int kind = 0; kind < 3; kind++) {
          tcase_t c = base_case(algs[a], p, seed);
          c.count = (size_t)(4 * p + 3);
          c.timeout_ms = 500;
          int who = (int)(seed % (uint64_t)p);
          if (kind == 0) {
            c.fault.send_fail_rank = who;
            c.fault.send_fail_at = 0;
          } else if (kind == 1) {
            c.silent_rank = who;
          } else {
            c.long_rank = who;
            c.tag_ub = s % 2 ? 65535 : (1L << 28) - 1;
          }
          if (kind > 0 && s % 2 == 0) {
            /* On the node transport's rings: a silent peer is a deadline there too, and a
             * message of another length is found by the scan. (A send failure is the inner
             * transport's: case 0 stays on it.) */
            c.node_ranks = p;
            c.node_bytes = MPIAR__NODE_THRESHOLD;
          }
          cases++;
          run_case(&c);
        }
      }
    }
  }
  printf("engine faults: %d cases, %d failed\n", cases, failures);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "matrix") == 0) {
    matrix(argc >= 3 ? atoi(argv[2]) : 3, argc >= 4 ? atoi(argv[3]) : 64);
  } else if (argc >= 2 && strcmp(argv[1], "faults") == 0) {
    faults(argc >= 3 ? atoi(argv[2]) : 3);
  } else if (argc >= 10 && strcmp(argv[1], "one") == 0) {
    const mpiar__algorithm_t *alg = mpiar__algorithm_find(argv[2]);
    int bcast = argc >= 12 && strcmp(argv[10], "bcast") == 0;
    int rsag = argc >= 11 && strcmp(argv[10], "rs") == 0   ? 1
               : argc >= 11 && strcmp(argv[10], "ag") == 0 ? 2
                                                           : 0;
    if (bcast) {
      alg = mpiar__bcast_algorithm_find(argv[2]);
    } else if (rsag) {
      alg = rsag == 1 ? mpiar__reduce_scatter_algorithm_find(argv[2])
                      : mpiar__allgather_algorithm_find(argv[2]);
    }
    if (alg == NULL) {
      fprintf(stderr, "unknown algorithm %s\n", argv[2]);
      return 2;
    }
    tcase_t c = base_case(alg, atoi(argv[3]), strtoull(argv[9], NULL, 10));
    c.count = strtoull(argv[4], NULL, 10);
    c.seg = strtoull(argv[5], NULL, 10);
    c.in_place = atoi(argv[6]);
    c.tag_ub = atol(argv[7]);
    c.max_msg = strtoull(argv[8], NULL, 10);
    c.bcast = bcast;
    c.rsag = rsag;
    c.root = bcast ? atoi(argv[11]) : 0;
    for (int i = 10; i < argc; i++) {
      c.repro |= strcmp(argv[i], "repro") == 0;
      if (i + 2 < argc && strcmp(argv[i], "node") == 0) {
        c.node_ranks = atoi(argv[i + 1]);
        c.node_bytes = strtoull(argv[i + 2], NULL, 10);
      }
    }
    run_case(&c);
    printf("one case: %s\n", failures ? "failed" : "passed");
  } else {
    fprintf(stderr, "usage: test_engine_threads matrix|faults [seeds] | one ...\n");
    return 2;
  }
  return failures ? 1 : 0;
}
