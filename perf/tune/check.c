/*
 * mpiar-tune-check: does a tuning file make `auto` slower than the built-in model anywhere?
 * Run under MPIAR_TUNING_FILE=FILE on the communicator the file was made for; at every size of
 * the sweep (the main job's by default: 4 B .. 256 MiB, doubling) it asks what `auto` runs with
 * the file (mpiar_select_comm) and what it runs without one (the built-in model's choice,
 * core/inspect.h, on the same topology), times the two interleaved in shuffled order with the
 * bench's rules (barrier, slowest rank, median; repetitions scaled with the size), and prints the
 * ratio with / without per size and the worst. Where both choices are the same algorithm and
 * segment, `auto` runs the same plan either way: the ratio is 1 by construction, not timed.
 * perf/tune/quick-check.sh runs it on three --quick files.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "common/tool.h"
#include "core/inspect.h"
#include "mpiar.h"
#include "schedule/topology.h"
#include "tune.h"

typedef struct check_opts {
  size_t min_bytes, max_bytes;
  long factor, iters;
} check_opts_t;

static int parse(int argc, char **argv, check_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->min_bytes = 4;
  o->max_bytes = (size_t)256 << 20;
  o->factor = 2;
  const tool_arg_t args[] = {
      {.short_name = 'b', .kind = TOOL_ARG_SIZE, .dest = &o->min_bytes, .lo = 4,
       .hi = TOOL_SIZE_MAX, .metavar = "SIZE", .help = "smallest message; default 4"},
      {.short_name = 'e', .kind = TOOL_ARG_SIZE, .dest = &o->max_bytes, .lo = 4,
       .hi = TOOL_SIZE_MAX, .metavar = "SIZE", .help = "largest message; default 256M"},
      {.short_name = 'f', .kind = TOOL_ARG_INT, .dest = &o->factor, .lo = 2, .hi = 1 << 20,
       .metavar = "FACTOR", .help = "each size is the previous one times FACTOR; default 2"},
      {.short_name = 'i', .kind = TOOL_ARG_INT, .dest = &o->iters, .lo = 1, .hi = 100000000L,
       .metavar = "ITERS", .help = "timed repetitions per size; default: scaled as in mpiar-bench"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-tune-check",
      .usage = "MPIAR_TUNING_FILE=FILE mpiexec -n P mpiar-tune-check [options]",
      .about = "Times, at every size, what auto runs with MPIAR_TUNING_FILE against what it runs\n"
               "without a file (the built-in model), interleaved, and prints the ratios (with /\n"
               "without, medians of the slowest rank) and the worst.",
      .epilogue = "Sizes where both choices are the same run the same plan: ratio 1, not timed.",
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  if (o->min_bytes > o->max_bytes) {
    return tool_usage_error(&spec, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  }
  const char *tf = getenv("MPIAR_TUNING_FILE");
  if (tf == NULL || *tf == '\0') {
    return tool_usage_error(&spec, "MPIAR_TUNING_FILE must name the file to check");
  }
  return -1;
}

int main(int argc, char **argv) {
  check_opts_t o;
  int ex = parse(argc, argv, &o);
  if (ex >= 0) {
    return ex;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank, p;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  const mpiar_dtype_t dtype = MPIAR_FLOAT32;
  const size_t es = 4;
  int rc = mpiar_comm_init(comm, NULL);
  int *node_of = calloc((size_t)p, sizeof *node_of);
  if (rc == MPIAR_SUCCESS) {
    rc = node_of ? mpiar__inspect_node_of(comm, node_of, p) : MPIAR_ERR_NOMEM;
  }
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-tune-check: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  mpiar__topology_t topo;
  memset(&topo, 0, sizeof topo);
  const int have_topo = mpiar__topology_from_map(&topo, p, node_of) == MPIAR_SUCCESS;
  size_t sizes[TUNE_MAX_SIZES];
  int n = tool_size_sweep(o.min_bytes, o.max_bytes, (size_t)o.factor, es, sizes, TUNE_MAX_SIZES);
  size_t maxb = sizes[n - 1];
  char *sendbuf = NULL, *recvbuf = NULL;
  if (posix_memalign((void **)&sendbuf, 4096, maxb) != 0 ||
      posix_memalign((void **)&recvbuf, 4096, maxb) != 0) {
    fprintf(stderr, "mpiar-tune-check: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < maxb / es; i++) {
    ((float *)sendbuf)[i] = 0.25f;
  }
  memset(recvbuf, 0, maxb);
  if (rank == 0) {
    printf("# mpiar-tune-check: %d ranks, MPIAR_TUNING_FILE=%s\n", p, getenv("MPIAR_TUNING_FILE"));
    printf("#%10s %6s  %-24s %-24s %10s %10s %8s\n", "size", "iters", "auto with the file",
           "auto without (model)", "with us", "without us", "ratio");
  }
  double worst = 1.0;
  size_t worst_size = 0;
  int ndiff = 0, nabove = 0;
  double ratios[TUNE_MAX_SIZES];
  for (int k = 0; k < n; k++) {
    const size_t count = sizes[k] / es;
    const char *with_alg = NULL, *source = NULL;
    size_t with_seg = 0;
    rc = mpiar_select_comm(comm, count, dtype, &with_alg, &with_seg, &source);
    if (rc != MPIAR_SUCCESS) {
      fprintf(stderr, "mpiar-tune-check: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const mpiar__algorithm_t *model = NULL;
    size_t model_seg = 0;
    mpiar__inspect_model_choice(NULL, sizes[k], dtype, p, have_topo ? &topo : NULL, &model,
                                &model_seg);
    const mpiar__algorithm_t *with = mpiar__algorithm_find(with_alg);
    const size_t eff_with = (with->flags & MPIAR__ALG_SEGMENTED)
                                ? tune_effective_segment(with_seg, sizes[k], dtype, p)
                                : 0;
    const size_t eff_model = (model->flags & MPIAR__ALG_SEGMENTED)
                                 ? tune_effective_segment(model_seg, sizes[k], dtype, p)
                                 : 0;
    char wname[64], mname[64], sz[32];
    snprintf(wname, sizeof wname, "%s", with_alg);
    if (eff_with) {
      snprintf(wname, sizeof wname, "%s/seg=%zuK", with_alg, with_seg >> 10);
    }
    snprintf(mname, sizeof mname, "%s", model->name);
    if (eff_model) {
      snprintf(mname, sizeof mname, "%s/seg=%zuK", model->name, model_seg >> 10);
    }
    tool_format_bytes((double)sizes[k], sz, sizeof sz);
    if (with == model && eff_with == eff_model) {
      ratios[k] = 1.0;
      if (rank == 0) {
        printf(" %10s %6s  %-24s %-24s %10s %10s %8s\n", sz, "-", wname, mname, "-", "-",
               "same");
      }
      continue;
    }
    ndiff++;
    const int iters = o.iters > 0 ? (int)o.iters
                                  : tool_iters_for(sizes[k], TOOL_ITER_BYTES, TOOL_ITERS_MIN,
                                                   TOOL_ITERS_MAX);
    const int warm = tool_warmup_for(iters);
    double *t[2];
    t[0] = calloc((size_t)iters, sizeof(double));
    t[1] = calloc((size_t)iters, sizeof(double));
    const char *names[2] = {with_alg, model->name};
    const size_t segs[2] = {with_seg, model_seg};
    for (int rep = -warm; rep < iters; rep++) {
      int order[2];
      tool_shuffle(order, 2, ((uint64_t)k << 32) + (uint64_t)(rep + warm));
      for (int j = 0; j < 2; j++) {
        const int w = order[j];
        mpiar_options_t opts = MPIAR_OPTIONS_INIT;
        opts.algorithm = names[w];
        opts.segment_bytes = segs[w];
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        rc = mpiar_allreduce_ex(sendbuf, recvbuf, count, dtype, MPIAR_SUM, comm, &opts);
        double t1 = MPI_Wtime();
        if (rc != MPIAR_SUCCESS) {
          fprintf(stderr, "mpiar-tune-check: %s: %s\n", mpiar_strerror(rc), mpiar_last_error());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rep >= 0) {
          t[w][rep] = t1 - t0;
        }
      }
    }
    MPI_Allreduce(MPI_IN_PLACE, t[0], iters, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, t[1], iters, MPI_DOUBLE, MPI_MAX, comm);
    double mw = tool_median(t[0], iters), mm = tool_median(t[1], iters);
    ratios[k] = mw / mm;
    nabove += ratios[k] > 1.05;
    if (ratios[k] > worst) {
      worst = ratios[k];
      worst_size = sizes[k];
    }
    if (rank == 0) {
      printf(" %10s %6d  %-24s %-24s %10.2f %10.2f %8.3f\n", sz, iters, wname, mname, mw * 1e6,
             mm * 1e6, ratios[k]);
      fflush(stdout);
    }
    free(t[0]);
    free(t[1]);
  }
  if (rank == 0) {
    char sz[32];
    double med = tool_median(ratios, n);
    printf("# %d of %d sizes differ from the model; median ratio %.3f; worst ratio %.3f", ndiff, n,
           med, worst);
    if (worst_size) {
      printf(" at %s", tool_format_bytes((double)worst_size, sz, sizeof sz));
    }
    printf("; sizes more than 5%% slower with the file: %d\n", nabove);
  }
  if (have_topo) {
    mpiar__topology_destroy(&topo);
  }
  free(node_of);
  free(sendbuf);
  free(recvbuf);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
