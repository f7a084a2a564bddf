/*
 * mpiar-kv-replay: replay the gradient tensors of real models through the kvstore, per
 * iteration, and time it.
 *
 * Models (perf/common/models.h: shapes from the published architectures, ImageNet, 1000
 * classes):
 *   vgg16     Simonyan & Zisserman 2015, configuration D: 13 convolutions and 3 fully connected
 *             layers, a weight and a bias each: 32 tensors, 138,357,544 parameters;
 *   resnet50  He et al. 2016: 53 convolutions (no bias), 53 batch normalisations (gamma and
 *             beta), the fully connected layer: 161 tensors, 25,557,032 parameters.
 * The tensors are replayed in reverse layer order, the order in which backpropagation produces
 * their gradients.
 *
 * Modes per iteration (float32, average over workers unless noted):
 *   kv-per-tensor      one mpiar_kv_pushpull per tensor (with the metadata agreement);
 *   kv-per-tensor-nv   the same with verify = 0 (no agreement): the difference is its cost;
 *   kv-fused           one mpiar_kv_pushpull_batch of all tensors (fusion buffers);
 *   mpi-per-tensor     MPI_Allreduce (MPI_SUM) per tensor, the baseline;
 *   mpiar-per-tensor   mpiar_allreduce (automatic choice) per tensor, without the store.
 * Each iteration starts after a barrier; its time is the slowest worker's. Reported: median and
 * mean milliseconds per iteration, and fusion's speed-up over per-tensor pushpull.
 *
 * After the timed iterations, each mode runs once more on inputs whose results are known, and
 * every element is checked (exit code 1 on a wrong one).
 *
 *   mpiexec -n 2 mpiar-kv-replay [--model vgg16|resnet50|all] [--iters N] [--warmup N]
 *                                [--scale F] [--fusion BYTES] [--quick]   (--help for more)
 * --scale multiplies every tensor's element count (at least one element each) to bound memory:
 * the full VGG-16 needs about 1.1 GB per worker (gradients plus the store's copy of the
 * weights) and the fusion buffer. --quick: --scale 0.03125 --iters 2 --warmup 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "common/models.h"
#include "common/tool.h"
#include "mpiar.h"
#include "mpiar_kv.h"
#include "train_step.h"
#include "tuning/tuning.h"

static int rank, nranks;

static void die(int rc, const char *what) {
  fprintf(stderr, "worker %d: %s failed: %s (%s)\n", rank, what, mpiar_err_name(rc),
          mpiar_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { KV_PER_TENSOR, KV_PER_TENSOR_NV, KV_FUSED, MPI_PER_TENSOR, MPIAR_PER_TENSOR, NMODES };
static const char *const mode_names[NMODES] = {"kv-per-tensor", "kv-per-tensor-nv", "kv-fused",
                                               "mpi-per-tensor", "mpiar-per-tensor"};

/* Time one mode: warm-up iterations, then `iters` timed ones; returns median and mean in ms. */
static void run_mode(int mode, const tool_model_t *m, mpiar_kv_t *kv, float **grads,
                     mpiar_kv_key_t *keys, int warmup, int iters, double *median, double *mean) {
  double *t = calloc((size_t)iters, sizeof *t);
  const void **ins = calloc(m->n, sizeof *ins);
  if (t == NULL || ins == NULL) {
    die(MPIAR_ERR_NOMEM, "timing table");
  }
  for (size_t i = 0; i < m->n; i++) {
    ins[i] = MPIAR_IN_PLACE;
  }
  for (int it = -warmup; it < iters; it++) {
    int rc = mpiar_kv_barrier(kv);
    if (rc != 0) {
      die(rc, "barrier");
    }
    double t0 = MPI_Wtime();
    /* Backpropagation produces the last layer's gradient first. */
    if (mode == KV_FUSED) {
      rc = mpiar_kv_pushpull_batch(kv, m->n, keys, (const void *const *)ins, (void *const *)grads);
    } else {
      for (size_t k = m->n; k-- > 0 && rc == 0;) {
        if (mode == MPI_PER_TENSOR) {
          if (MPI_Allreduce(MPI_IN_PLACE, grads[k], (int)m->t[k].count, MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD) != MPI_SUCCESS) {
            rc = MPIAR_ERR_MPI;
          }
        } else if (mode == MPIAR_PER_TENSOR) {
          rc = mpiar_allreduce(MPIAR_IN_PLACE, grads[k], m->t[k].count, MPIAR_FLOAT32, MPIAR_SUM,
                               MPI_COMM_WORLD);
        } else {
          rc = mpiar_kv_pushpull(kv, keys[k], MPIAR_IN_PLACE, grads[k]);
        }
      }
    }
    if (rc != 0) {
      die(rc, mode_names[mode]);
    }
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0) {
      t[it] = dt * 1e3;
    }
  }
  double sum = 0;
  for (int i = 0; i < iters; i++) {
    sum += t[i];
  }
  qsort(t, (size_t)iters, sizeof *t, cmp_double);
  *median = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
  *mean = sum / iters;
  free(t);
  free(ins);
}

/* The check's input of worker r, tensor i, element k: small integers times 2^-60, so that every
 * sum over workers is exact in float32. */
static float check_input(int r, size_t i, size_t k) {
  return 0x1p-60f * (float)(1 + (k + 3 * i + 5 * (size_t)r) % 13);
}

/*
 * One untimed iteration of `mode` on inputs whose results are known, after the timed ones:
 * MPI and mpiar sum exactly, the store averages (the exact sum divided once by the worker
 * count, so within one rounding). @return the wrong elements over all workers.
 */
static long check_mode(int mode, const tool_model_t *m, mpiar_kv_t *kv, float **grads,
                       mpiar_kv_key_t *keys) {
  for (size_t i = 0; i < m->n; i++) {
    for (size_t k = 0; k < m->t[i].count; k++) {
      grads[i][k] = check_input(rank, i, k);
    }
  }
  double median, mean;
  run_mode(mode, m, kv, grads, keys, 0, 1, &median, &mean);
  const int avg = mode == KV_PER_TENSOR || mode == KV_PER_TENSOR_NV || mode == KV_FUSED;
  long bad = 0;
  for (size_t i = 0; i < m->n; i++) {
    for (size_t k = 0; k < m->t[i].count; k++) {
      float sum = 0;
      for (int r = 0; r < nranks; r++) {
        sum += check_input(r, i, k);
      }
      float want = avg ? sum / (float)nranks : sum;
      float got = grads[i][k];
      int ok = avg ? fabsf(got - want) <= 0x1p-23f * want : got == want;
      if (!ok && bad++ < 3) {
        fprintf(stderr, "worker %d: %s: %s[%zu] = %a, expected %a\n", rank, mode_names[mode],
                m->t[i].name, k, (double)got, (double)want);
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return bad;
}

/* A store averaging float32 gradients with every tensor of the model registered. */
static mpiar_kv_t *make_store(const tool_model_t *m, const mpiar_kv_key_t *keys, float **grads,
                              int verify, size_t fusion) {
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.op = MPIAR_AVG;
  o.fusion_bytes = fusion;
  o.verify = verify;
  mpiar_kv_t *kv = NULL;
  int rc = mpiar_kv_create(MPI_COMM_WORLD, &o, &kv);
  if (rc != 0) {
    die(rc, "create");
  }
  for (size_t i = 0; i < m->n; i++) {
    rc = mpiar_kv_init(kv, keys[i], MPIAR_FLOAT32, m->t[i].count, grads[i]);
    if (rc != 0) {
      die(rc, "init");
    }
  }
  return kv;
}

/* @return the wrong results of the checks, over all modes and workers. */
static long replay(tool_model_t *m, double scale, size_t fusion, int warmup, int iters,
                   const kv_train_opts_t *train) {
  size_t total = 0, largest = 0;
  for (size_t i = 0; i < m->n; i++) {
    size_t c = (size_t)ceil((double)m->t[i].count * scale);
    m->t[i].count = c ? c : 1;
    total += m->t[i].count;
    largest = m->t[i].count > largest ? m->t[i].count : largest;
  }
  float **grads = calloc(m->n, sizeof *grads);
  mpiar_kv_key_t *keys = calloc(m->n, sizeof *keys);
  if (grads == NULL || keys == NULL) {
    die(MPIAR_ERR_NOMEM, "tensor table");
  }
  for (size_t i = 0; i < m->n; i++) {
    grads[i] = malloc(m->t[i].count * sizeof(float));
    if (grads[i] == NULL) {
      die(MPIAR_ERR_NOMEM, m->t[i].name);
    }
    /* Small values: averaging keeps them, MPI's sum grows them by p per iteration at most. */
    for (size_t k = 0; k < m->t[i].count; k++) {
      grads[i][k] = 0x1p-60f * (float)(1 + (k + i) % 13);
    }
    keys[i] = MPIAR_KV_STR(m->t[i].name);
  }
  if (train != NULL) {
    kv_train_opts_t t = *train;
    t.warmup = warmup;
    t.iters = iters;
    int rc = kv_train_step(&t, m, grads, MPI_COMM_WORLD, rank);
    if (rc != MPIAR_SUCCESS) {
      die(rc, "train-step");
    }
    for (size_t i = 0; i < m->n; i++) {
      free(grads[i]);
    }
    free(grads);
    free(keys);
    return 0;
  }
  /* One store at a time (it holds a copy of the weights), so memory stays at two model copies. */
  mpiar_kv_t *kv = make_store(m, keys, grads, 1, fusion);
  size_t fb = 0;
  mpiar_kv_fusion_bytes(kv, &fb);
  if (rank == 0) {
    printf("%s: %zu tensors, %zu parameters (%.1f MB float32, largest %zu), scale %g, %d "
           "workers, fusion threshold %zu bytes, %d iterations after %d warm-up\n",
           m->name, m->n, total, (double)total * 4 / 1e6, largest, scale, nranks, fb, iters,
           warmup);
    printf("  %-18s %12s %12s %10s  %s\n", "mode", "median ms", "mean ms", "GB/s*", "check");
  }
  double med[NMODES], mean[NMODES];
  long wrong = 0;
  static const int order[NMODES] = {KV_PER_TENSOR, KV_FUSED, MPI_PER_TENSOR, MPIAR_PER_TENSOR,
                                    KV_PER_TENSOR_NV};
  for (int o = 0; o < NMODES; o++) {
    int mode = order[o];
    if (mode == KV_PER_TENSOR_NV) {
      int rc = mpiar_kv_destroy(kv);
      if (rc != 0) {
        die(rc, "destroy");
      }
      kv = make_store(m, keys, grads, 0, fusion);
    }
    run_mode(mode, m, kv, grads, keys, warmup, iters, &med[mode], &mean[mode]);
    long bad = check_mode(mode, m, kv, grads, keys);
    wrong += bad;
    if (rank == 0) {
      /* Algorithm bandwidth: bytes of the model per second (not counting p-dependent traffic). */
      printf("  %-18s %12.3f %12.3f %10.2f  %s\n", mode_names[mode], med[mode], mean[mode],
             (double)total * 4 / (med[mode] * 1e-3) / 1e9, bad ? "WRONG" : "ok");
    }
  }
  if (rank == 0) {
    printf("  fusion speed-up over kv per tensor: %.2fx; over MPI_Allreduce per tensor: %.2fx; "
           "agreement cost: %.1f us per call\n",
           med[KV_PER_TENSOR] / med[KV_FUSED], med[MPI_PER_TENSOR] / med[KV_FUSED],
           (med[KV_PER_TENSOR] - med[KV_PER_TENSOR_NV]) * 1e3 / (double)m->n);
  }
  for (size_t i = 0; i < m->n; i++) {
    free(grads[i]);
  }
  free(grads);
  free(keys);
  int rc = mpiar_kv_destroy(kv);
  if (rc != 0) {
    die(rc, "destroy");
  }
  return wrong;
}

static int parse_model(const char *value, void *dest, char *err, size_t errlen) {
  if (strcmp(value, "all") != 0 && strcmp(value, "vgg16") != 0 && strcmp(value, "resnet50") != 0) {
    snprintf(err, errlen, "unknown model '%s' (vgg16, resnet50 or all)", value);
    return -1;
  }
  *(const char **)dest = value;
  return 0;
}

int main(int argc, char **argv) {
  const char *which = "all";
  long iters = 10, warmup = 2;
  double scale = 1.0;
  size_t fusion = MPIAR_KV_FUSION_AUTO;
  int quick = 0, iters_given = 0, warmup_given = 0, scale_given = 0, train_step = 0;
  double node_tflops = 0.5;
  kv_train_opts_t topts = {.batch = 1};
  const tool_arg_t args[] = {
      {.long_name = "model",
       .kind = TOOL_ARG_CUSTOM,
       .dest = &which,
       .parse = parse_model,
       .metavar = "NAME",
       .help = "vgg16, resnet50 or all (default)"},
      {.long_name = "iters",
       .kind = TOOL_ARG_INT,
       .dest = &iters,
       .lo = 1,
       .hi = 1000000,
       .given = &iters_given,
       .metavar = "N",
       .help = "timed iterations per mode (default 10)"},
      {.long_name = "warmup",
       .kind = TOOL_ARG_INT,
       .dest = &warmup,
       .lo = 0,
       .hi = 1000000,
       .given = &warmup_given,
       .metavar = "N",
       .help = "untimed iterations before them (default 2)"},
      {.long_name = "scale",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &scale,
       .dlo = 0,
       .dlo_open = 1,
       .dhi = 1,
       .given = &scale_given,
       .metavar = "F",
       .help = "multiply every tensor's element count by F, at least one\n"
               "element each (default 1: the real models)"},
      {.long_name = "fusion",
       .kind = TOOL_ARG_SIZE,
       .dest = &fusion,
       .lo = 0,
       .hi = TOOL_SIZE_MAX,
       .metavar = "BYTES",
       .help = "fusion threshold of the store (0: no fusion; default:\n"
               "MPIAR_FUSION_BYTES, else 64 MiB)"},
      {.long_name = "train-step",
       .kind = TOOL_ARG_FLAG,
       .dest = &train_step,
       .help = "instead of the modes: a training step (compute per layer, the\n"
               "gradients allreduced in order as the backward pass makes them),\n"
               "measured beside the forecast of mpiar-sim --train"},
      {.long_name = "batch",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &topts.batch,
       .dlo = 0,
       .dlo_open = 1,
       .dhi = 1e6,
       .metavar = "B",
       .help = "--train-step: samples per rank (default 1)"},
      {.long_name = "node-tflops",
       .kind = TOOL_ARG_DOUBLE,
       .dest = &node_tflops,
       .dlo = 0,
       .dlo_open = 1,
       .dhi = 1e6,
       .metavar = "R",
       .help = "--train-step: the compute rate of a node, shared by its ranks\n"
               "(default 0.5 TFLOP/s)"},
      {.long_name = "tuning-file",
       .kind = TOOL_ARG_STRING,
       .dest = &topts.tuning_file,
       .metavar = "FILE",
       .help = "--train-step: the forecast's parameters (mpiar-tune's file)"},
      {.long_name = "quick",
       .kind = TOOL_ARG_FLAG,
       .dest = &quick,
       .help = "--scale 0.03125 --iters 2 --warmup 1 (options given explicitly\n"
               "take precedence)"},
  };
  const tool_spec_t spec = {
      .prog = "mpiar-kv-replay",
      .usage = "mpiexec -n P mpiar-kv-replay [options]",
      .about = "Replays the gradient tensors of VGG-16 and ResNet-50 (shapes of the published\n"
               "architectures) per iteration, in backpropagation order, through the kvstore\n"
               "(per tensor, with and without the metadata agreement, and fused), through\n"
               "mpiar_allreduce and through MPI_Allreduce, and times each mode (median and mean\n"
               "milliseconds per iteration, the slowest worker's). After the timed iterations\n"
               "each mode runs once more on inputs with known results, which are checked.",
      .epilogue =
          "The full VGG-16 needs about 1.1 GB per worker (gradients and the store's copy of\n"
          "the weights) plus the fusion buffer.",
      .args = args,
      .nargs = (int)(sizeof args / sizeof args[0]),
  };
  int ex = tool_args_run(&spec, argc, argv);
  if (ex >= 0) {
    return ex;
  }
  topts.node_flops = node_tflops * 1e12;
  /* The forecast's file is an input like any option: read before MPI starts, so that a missing,
   * damaged or non-regular file ends every rank with exit code 2 before any measurement. */
  static mpiar__tuning_t tuning;
  if (topts.tuning_file != NULL) {
    if (!train_step) {
      return tool_usage_error(&spec, "--tuning-file is used by --train-step only");
    }
    if (mpiar__tuning_load_as(topts.tuning_file, "--tuning-file", &tuning) != MPIAR_SUCCESS) {
      return tool_usage_error(&spec, "%s", mpiar_last_error());
    }
    topts.tuning = &tuning;
  }
  if (quick) {
    scale = scale_given ? scale : 1.0 / 32;
    iters = iters_given ? iters : 2;
    warmup = warmup_given ? warmup : 1;
  }

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  tool_model_t vgg, resnet;
  if (tool_model_builtin("vgg16", &vgg) != 0 || tool_model_builtin("resnet50", &resnet) != 0) {
    die(MPIAR_ERR_NOMEM, "model tables");
  }
  /* The published totals: a wrong shape table is an error, not a silent benchmark. */
  size_t pv = 0, pr = 0;
  for (size_t i = 0; i < vgg.n; i++) {
    pv += vgg.t[i].count;
  }
  for (size_t i = 0; i < resnet.n; i++) {
    pr += resnet.t[i].count;
  }
  if (vgg.n != 32 || pv != 138357544 || resnet.n != 161 || pr != 25557032) {
    fprintf(stderr, "model tables are wrong: vgg16 %zu tensors %zu params, resnet50 %zu / %zu\n",
            vgg.n, pv, resnet.n, pr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  long wrong = 0;
  if (strcmp(which, "all") == 0 || strcmp(which, "resnet50") == 0) {
    wrong += replay(&resnet, scale, fusion, (int)warmup, (int)iters, train_step ? &topts : NULL);
  }
  if (strcmp(which, "all") == 0 || strcmp(which, "vgg16") == 0) {
    wrong += replay(&vgg, scale, fusion, (int)warmup, (int)iters, train_step ? &topts : NULL);
  }
  if (rank == 0) {
    printf("check: %ld wrong results\n", wrong);
  }
  tool_model_free(&vgg);
  tool_model_free(&resnet);
  MPI_Finalize();
  return wrong ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}
