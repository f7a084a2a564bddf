/*
 * A tuning file applied by the library (run with MPIAR_TUNING_FILE and MPIAR_DEBUG=1; the CTest
 * entries match the choices and their sources in the output):
 *   test_tuning_apply [--dtype T] [--measured FILE] SIZE[=ALG/SEGMENT]...
 * For each SIZE (bytes), one allreduce (sum, checked) and what mpiar_select_comm() says it runs,
 * printed by rank 0 as "select SIZE bytes of T: ALG segment S (SOURCE)".
 *
 * SIZE=ALG/SEGMENT states what the file's table holds for SIZE, written out from the file by
 * hand: the choice must come from the tuning table and be exactly that.
 *
 * --measured FILE is for a file that mpiar-tune has just written, whose ranges no test can know
 * in advance: every choice whose source is the tuning table must be FILE's range holding the
 * size, found here by a linear scan of the ranges (not the library's lookup, which is what runs
 * the choice), and where FILE's topology is this communicator's every size inside a range must
 * come from the table.
 */
#include <stdint.h>

#include "mpi_test.h"
#include "tuning/tuning.h"

/* What one SIZE argument expects: nothing, or an algorithm and segment from the table. */
typedef struct expect {
  size_t bytes;
  char alg[64]; /* "" when the argument names no choice */
  size_t segment;
} expect_t;

static int parse_expect(const char *arg, expect_t *e) {
  memset(e, 0, sizeof *e);
  char *end = NULL;
  e->bytes = strtoull(arg, &end, 10);
  if (end == arg) {
    return -1;
  }
  if (*end == '\0') {
    return 0;
  }
  const char *slash = strchr(end, '/');
  if (*end != '=' || slash == NULL || (size_t)(slash - end - 1) >= sizeof e->alg) {
    return -1;
  }
  memcpy(e->alg, end + 1, (size_t)(slash - end - 1));
  e->segment = strtoull(slash + 1, &end, 10);
  return *end == '\0' && end != slash + 1 ? 0 : -1;
}

/* The range of @p t's table for @p dtype holding @p bytes, by a plain scan; NULL if none. */
static const mpiar__tuning_range_t *scan(const mpiar__tuning_t *t, mpiar_dtype_t dtype,
                                         size_t bytes) {
  for (int k = 0; k < t->ntables; k++) {
    for (int i = 0; t->tables[k].dtype == dtype && i < t->tables[k].nranges; i++) {
      const mpiar__tuning_range_t *g = &t->tables[k].ranges[i];
      if (g->min_bytes <= bytes && bytes <= g->max_bytes) {
        return g;
      }
    }
  }
  return NULL;
}

static void one_size(const expect_t *e, mpiar_dtype_t dtype, const mpiar__tuning_t *measured,
                     int measured_here) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t es = mpiar_dtype_size(dtype);
  size_t count = e->bytes / es;
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
      MT_CHECK(got == want, "%zu bytes: element %zu is %g, expected %g", e->bytes, i, got, want);
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
    printf("select %zu bytes of %s: %s segment %zu (%s)\n", e->bytes, mpiar_dtype_name(dtype), alg,
           seg, src);
  }
  if (e->alg[0] != '\0') {
    MT_CHECK(strcmp(src, "tuning table") == 0 && strcmp(alg, e->alg) == 0 && seg == e->segment,
             "%zu bytes: the file's table says %s/%zu, the library chose %s/%zu (%s)", e->bytes,
             e->alg, e->segment, alg, seg, src);
  }
  if (measured != NULL) {
    const mpiar__tuning_range_t *g = scan(measured, dtype, count * es);
    if (strcmp(src, "tuning table") == 0) {
      MT_CHECK(g != NULL && strcmp(g->alg->name, alg) == 0 && g->segment_bytes == seg,
               "%zu bytes: the file's range says %s/%zu, the library chose %s/%zu", e->bytes,
               g ? g->alg->name : "(no range)", g ? g->segment_bytes : 0, alg, seg);
    }
    if (measured_here && g != NULL) {
      MT_CHECK(strcmp(src, "tuning table") == 0,
               "%zu bytes: the table applies here, but the choice came from %s", e->bytes, src);
    }
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static mpiar__tuning_t measured;
  const mpiar__tuning_t *mp = NULL;
  mpiar_dtype_t dtype = MPIAR_FLOAT32;
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
    if (strcmp(argv[i], "--measured") == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar__tuning_load(argv[i + 1], &measured));
      mp = &measured;
    } else if (strcmp(argv[i], "--dtype") == 0) {
      MT_RC(MPIAR_SUCCESS, mpiar_dtype_from_name(argv[i + 1], &dtype));
    } else {
      MT_CHECK(0, "unknown option %s", argv[i]);
    }
  }
  /* The test runs on one node: the table applies where it was measured on this rank count. */
  int here = mp != NULL && mp->ranks == size && mp->nodes == 1;
  for (; i < argc; i++) {
    expect_t e;
    MT_CHECK(parse_expect(argv[i], &e) == 0, "'%s' is not SIZE or SIZE=ALG/SEGMENT", argv[i]);
    one_size(&e, dtype, mp, here);
  }
  return mt_finish("tuning apply");
}
