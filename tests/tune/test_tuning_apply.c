/*
 * A tuning file applied by the library (run with MPIAR_TUNING_FILE and MPIAR_DEBUG=1; the CTest
 * entries match the choices and their sources in the output):
 *   test_tuning_apply [--table FILE] [--dtype T] SIZE...
 * For each SIZE (bytes), one allreduce (sum, checked) and what mpiar_select_comm() says it runs,
 * printed by rank 0 as "select SIZE bytes of T: ALG segment S (SOURCE)". With --table, every
 * choice whose source is the tuning table must be FILE's range for the size (read here with the
 * library's own reader), and where FILE's topology is this communicator's the source must be the
 * table wherever the table has a range.
 */
#include <stdint.h>

#include "mpi_test.h"
#include "tuning/tuning.h"

static void one_size(size_t bytes, mpiar_dtype_t dtype, const mpiar__tuning_t *table,
                     int table_here) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t es = mpiar_dtype_size(dtype);
  size_t count = bytes / es;
  char *buf = malloc(count * es + 1);
  MT_CHECK(buf != NULL, "no memory");
  if (buf == NULL) {
    return;
  }
  /* Rank r holds r + 1 everywhere (exact in every type here). */
  for (size_t i = 0; i < count; i++) {
    if (dtype == MPIAR_FLOAT64) {
      ((double *)buf)[i] = mt_rank + 1;
    } else {
      ((float *)buf)[i] = (float)(mt_rank + 1);
    }
  }
  MT_RC(MPIAR_SUCCESS,
        mpiar_allreduce(MPIAR_IN_PLACE, buf, count, dtype, MPIAR_SUM, MPI_COMM_WORLD));
  double want = size * (size + 1) / 2.0;
  for (size_t i = 0; i < count; i++) {
    double got = dtype == MPIAR_FLOAT64 ? ((double *)buf)[i] : ((float *)buf)[i];
    if (got != want) {
      MT_CHECK(got == want, "%zu bytes: element %zu is %g, expected %g", bytes, i, got, want);
      break;
    }
  }
  free(buf);
  const char *alg = NULL, *src = NULL;
  size_t seg = 0;
  MT_RC(MPIAR_SUCCESS, mpiar_select_comm(MPI_COMM_WORLD, count, dtype, &alg, &seg, &src));
  if (alg == NULL || src == NULL) {
    return;
  }
  if (mt_rank == 0) {
    printf("select %zu bytes of %s: %s segment %zu (%s)\n", bytes, mpiar_dtype_name(dtype), alg,
           seg, src);
  }
  if (table != NULL) {
    const mpiar__tuning_range_t *g = mpiar__tuning_lookup(table, dtype, count * es);
    if (strcmp(src, "tuning table") == 0) {
      MT_CHECK(g != NULL && strcmp(g->alg->name, alg) == 0 && g->segment_bytes == seg,
               "%zu bytes: the table says %s/%zu, the library chose %s/%zu", bytes,
               g ? g->alg->name : "(no range)", g ? g->segment_bytes : 0, alg, seg);
    }
    if (table_here && g != NULL) {
      MT_CHECK(strcmp(src, "tuning table") == 0,
               "%zu bytes: the table applies here, but the "
               "choice came from %s",
               bytes, src);
    }
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static mpiar__tuning_t table;
  const mpiar__tuning_t *tp = NULL;
  mpiar_dtype_t dtype = MPIAR_FLOAT32;
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
    if (strcmp(argv[i], "--table") == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar__tuning_load(argv[i + 1], &table));
      tp = &table;
    } else if (strcmp(argv[i], "--dtype") == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar_dtype_from_name(argv[i + 1], &dtype));
    } else {
      MT_CHECK(0, "unknown option %s", argv[i]);
    }
  }
  /* The test runs on one node: the table applies where it was measured on this rank count. */
  int here = tp != NULL && tp->ranks == size && tp->nodes == 1;
  for (; i < argc; i++) {
    one_size(strtoull(argv[i], NULL, 10), dtype, tp, here);
  }
  return mt_finish("tuning apply");
}
