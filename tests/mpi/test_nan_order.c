/*
 * Operand order under MPI: every reduction that combines two ranks' data puts the lowest rank's
 * data first (docs/api.md, Semantics). When every rank's input is a quiet NaN whose payload names the
 * rank, a NaN op NaN returns its first operand's payload (sum, prod and avg on x86, and mpiar's
 * min and max by definition), so the result's payload is that of the leftmost input of each
 * element's reduction tree: rank 0's on every rank, if and only if the order holds in every
 * reduction. A swapped operand anywhere (a pre-step, a wrapped ring chain, a hierarchical level)
 * names another rank. Every registry algorithm runs, in place and not, float32 and float64, over
 * counts that make empty, short and uneven blocks, with and without segments where the algorithm
 * takes them. On one node a hierarchical entry builds its flat equivalent; the simulator checks
 * the two-level builders on real topologies (tests/sim).
 *
 *   test_nan_order
 */
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "mpi_test.h"

static int rank, size;

/* A quiet NaN whose payload is r + 1 (a payload of 0 would be the default NaN). */
static void fill_nan(mpiar_dtype_t t, int r, size_t n, void *buf) {
  for (size_t i = 0; i < n; i++) {
    if (t == MPIAR_FLOAT32) {
      uint32_t b = 0x7fc00000u | (uint32_t)(r + 1);
      memcpy((char *)buf + 4 * i, &b, 4);
    } else {
      uint64_t b = 0x7ff8000000000000ull | (uint64_t)(r + 1);
      memcpy((char *)buf + 8 * i, &b, 8);
    }
  }
}

/* The payload of element i (the bits below the quiet bit), or -1 if it is not a quiet NaN. */
static long payload(mpiar_dtype_t t, const void *buf, size_t i) {
  if (t == MPIAR_FLOAT32) {
    uint32_t b;
    memcpy(&b, (const char *)buf + 4 * i, 4);
    return (b & 0x7fc00000u) == 0x7fc00000u ? (long)(b & 0x3fffffu) : -1;
  }
  uint64_t b;
  memcpy(&b, (const char *)buf + 8 * i, 8);
  return (b & 0x7ff8000000000000ull) == 0x7ff8000000000000ull ? (long)(b & 0x7ffffffffffffull) : -1;
}

static void run(const char *alg, size_t seg, mpiar_dtype_t t, mpiar_op_t op, int in_place,
                size_t n) {
  const size_t es = t == MPIAR_FLOAT32 ? 4 : 8;
  char *in = malloc(n * es + 1), *out = malloc(n * es + 1);
  if (in == NULL || out == NULL) {
    MT_CHECK(0, "out of memory for %zu elements", n);
    free(in);
    free(out);
    return;
  }
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.algorithm = alg;
  o.segment_bytes = seg;
  memset(out, 0x55, n * es); /* no NaN: an element left unwritten fails */
  fill_nan(t, rank, n, in_place ? out : in);
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce_ex(in_place ? MPIAR_IN_PLACE : in, out, n, t, op, MPI_COMM_WORLD, &o));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    if (payload(t, out, i) != 1 && bad++ == 0) {
      first = i;
    }
  }
  MT_CHECK(bad == 0,
           "%s seg %zu %s %s %s count %zu: %zu elements lack rank 0's payload; element %zu "
           "has payload %ld (rank %ld's)",
           alg, seg, mpiar_dtype_name(t), mpiar_op_name(op), in_place ? "in place" : "not in place",
           n, bad, first, payload(t, out, first), payload(t, out, first) - 1);
  free(in);
  free(out);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  rank = mt_rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t p = (size_t)size;
  /* Empty and one-element blocks, uneven blocks, lengths past every kernel's vector width, and
   * one count long enough for 4 KiB segments to split a block. */
  const size_t counts[] = {1, p - 1 ? p - 1 : 1, p, p + 1, 2 * p + 3, 37, 301, 5003};
  const mpiar_dtype_t types[] = {MPIAR_FLOAT32, MPIAR_FLOAT64};
  const mpiar_op_t ops[] = {MPIAR_SUM, MPIAR_PROD, MPIAR_AVG, MPIAR_MIN, MPIAR_MAX};
  int runs = 0;
  for (int a = 0; a < mpiar_algorithm_count(); a++) {
    const char *alg = mpiar_algorithm_name(a);
    /* Segmented entries also run with 4 KiB segments, which split the longest count's blocks. */
    const int segmented = (mpiar__algorithm_find(alg)->flags & MPIAR__ALG_SEGMENTED) != 0;
    for (int s = 0; s <= segmented; s++) {
      for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
          for (int ip = 0; ip <= 1; ip++) {
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
              if (s && counts[c] < 5003) {
                continue;
              }
              run(alg, s ? 4096 : 0, types[ti], ops[oi], ip, counts[c]);
              runs++;
            }
          }
        }
      }
    }
  }
  MT_CHECK(runs > 0, "no algorithm ran");
  if (rank == 0) {
    printf("%d runs over %d algorithms\n", runs, mpiar_algorithm_count());
  }
  return mt_finish("test_nan_order");
}
