/*
 * Data-parallel training with the mpiar kvstore: a two-layer perceptron (8 inputs, 16 tanh
 * hidden units, one sigmoid output, cross-entropy loss) learns a fixed rule on a synthetic data
 * set that every worker generates identically. Each step takes the same global batch of 32
 * samples and splits it evenly over the workers; step_batch averages the gradients and applies
 * SGD with momentum and weight decay, so the run is the same whatever the number of workers.
 * Halfway through, the model is saved; at the end a fresh store loads that checkpoint and
 * replays the second half, which must reproduce the final weights bit for bit.
 *
 *   mpiexec -n 4 ./mpiar_train_mlp [--steps N] [--write FILE | --compare FILE] [--dir DIR]
 *
 * --write stores the loss curve and final weights (from a reference run, e.g. one worker);
 * --compare checks this run against such a file within a float tolerance. The program exits
 * with status 1 if a check fails: workers holding different weights, a resumed run differing,
 * or a curve outside the tolerance.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "mpiar.h"
#include "mpiar_kv.h"

enum { IN = 8, HID = 16, BATCH = 32, MAX_STEPS = 1000 };

static int rank, nworkers;

static void check(int rc, const char *what) {
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "worker %d: %s failed: %s (%s)\n", rank, what, mpiar_err_name(rc),
            mpiar_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* A sample is a pure function of its index: every worker can build any sample. */
static float feature(uint64_t sample, int j) {
  uint64_t x = sample * 0x9E3779B97F4A7C15ull + (uint64_t)j * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float label(uint64_t sample) {
  /* The rule to learn: a nonlinear boundary in the first four features. */
  float a = feature(sample, 0), b = feature(sample, 1), c = feature(sample, 2),
        d = feature(sample, 3);
  return a * b + 0.5f * c - 0.25f * d * d > 0.0f ? 1.0f : 0.0f;
}

/* The parameters as keys of the store, and the buffers of their gradients. */
typedef struct model {
  float w1[HID * IN], b1[HID], w2[HID], b2[1];
} model_t;

static const char *const names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
static const size_t counts[4] = {HID * IN, HID, HID, 1};

static float *part(model_t *m, int k) {
  float *p[4] = {m->w1, m->b1, m->w2, m->b2};
  return p[k];
}

/* Read the current weights from the store. */
static void fetch(mpiar_kv_t *kv, model_t *m) {
  for (int k = 0; k < 4; k++) {
    const void *d = NULL;
    check(mpiar_kv_lookup(kv, MPIAR_KV_STR(names[k]), NULL, NULL, &d), "lookup");
    memcpy(part(m, k), d, counts[k] * sizeof(float));
  }
}

/*
 * Forward and backward over this worker's share of the global batch of step `step`. Returns the
 * summed loss of the share; g receives the gradient of the batch-mean loss contributed by the
 * share, scaled so that the average over workers is the gradient of the global batch mean.
 *
 * The backward pass runs layer by layer, output layer first, as a framework's does: once the
 * output layer's gradients (fc2) exist, `ready(arg, 2)` is called so that their reduction can
 * start while the first layer's (fc1) are computed; then `ready(arg, 1)`. Each gradient element
 * is summed over the samples in the same order either way, so the bits do not depend on it.
 */
static double forward_backward(const model_t *m, int step, model_t *g,
                               void (*ready)(void *arg, int layer), void *arg) {
  memset(g, 0, sizeof *g);
  int share = BATCH / nworkers;
  double loss = 0;
  static float xs[BATCH][IN], hs[BATCH][HID], dzs[BATCH];
  for (int s = 0; s < share; s++) {
    uint64_t sample = (uint64_t)step * BATCH + (uint64_t)(rank * share + s);
    float *x = xs[s], *h = hs[s], y = label(sample);
    for (int j = 0; j < IN; j++) {
      x[j] = feature(sample, j);
    }
    float z = m->b2[0];
    for (int i = 0; i < HID; i++) {
      float a = m->b1[i];
      for (int j = 0; j < IN; j++) {
        a += m->w1[i * IN + j] * x[j];
      }
      h[i] = tanhf(a);
      z += m->w2[i] * h[i];
    }
    float p = 1.0f / (1.0f + expf(-z));
    loss += -(y * log(fmax(p, 1e-7)) + (1 - y) * log(fmax(1 - p, 1e-7)));
    float dz = (p - y) / (float)share;
    dzs[s] = dz;
    g->b2[0] += dz;
    for (int i = 0; i < HID; i++) {
      g->w2[i] += dz * h[i];
    }
  }
  if (ready != NULL) {
    ready(arg, 2);
  }
  for (int s = 0; s < share; s++) {
    for (int i = 0; i < HID; i++) {
      float da = dzs[s] * m->w2[i] * (1 - hs[s][i] * hs[s][i]);
      g->b1[i] += da;
      for (int j = 0; j < IN; j++) {
        g->w1[i * IN + j] += da * xs[s][j];
      }
    }
  }
  if (ready != NULL) {
    ready(arg, 1);
  }
  return loss;
}

static mpiar_kv_t *make_store(const model_t *init) {
  mpiar_kv_t *kv = NULL;
  /* Average: step() always does, and the overlapped step uses pushpull for it. */
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  o.op = MPIAR_AVG;
  check(mpiar_kv_create(MPI_COMM_WORLD, &o, &kv), "create");
  model_t m = *init;
  for (int k = 0; k < 4; k++) {
    check(mpiar_kv_init(kv, MPIAR_KV_STR(names[k]), MPIAR_FLOAT32, counts[k], part(&m, k)), "init");
  }
  double zero = 0;
  check(mpiar_kv_init(kv, MPIAR_KV_STR("loss"), MPIAR_FLOAT64, 1, &zero), "init loss");
  check(mpiar_kv_set_optimizer(kv, &MPIAR_KV_SGD(0.5, 0.9, 1e-4)), "set_optimizer");
  return kv;
}

/* One training step: local gradients, then step_batch averages them and updates the weights. */
static double train_step(mpiar_kv_t *kv, int step) {
  model_t m, g;
  fetch(kv, &m);
  double loss = forward_backward(&m, step, &g, NULL, NULL);
  mpiar_kv_key_t keys[4];
  void *grads[4];
  for (int k = 0; k < 4; k++) {
    keys[k] = MPIAR_KV_STR(names[k]);
    grads[k] = part(&g, k);
  }
  check(mpiar_kv_step_batch(kv, 4, keys, grads), "step_batch");
  check(mpiar_kv_pushpull(kv, MPIAR_KV_STR("loss"), MPIAR_IN_PLACE, &loss), "pushpull loss");
  return loss * nworkers / BATCH;
}

/* The overlapped step: each layer's gradients start reducing as soon as they exist. */
typedef struct overlap {
  mpiar_kv_t *kv;
  model_t *g;
  mpiar_request_t reqs[4];
} overlap_t;

static void layer_ready(void *arg, int layer) {
  overlap_t *o = arg;
  /* fc2 (keys 2, 3) is ready first; fc1 (keys 0, 1) is needed first by the next forward pass,
   * so it gets the higher priority when both are queued. */
  int first = layer == 2 ? 2 : 0;
  for (int k = first; k < first + 2; k++) {
    check(mpiar_kv_pushpull_async(o->kv, MPIAR_KV_STR(names[k]), MPIAR_IN_PLACE, part(o->g, k),
                                  -k, &o->reqs[k]),
          "pushpull_async");
  }
}

static double train_step_overlapped(mpiar_kv_t *kv, int step) {
  model_t m, g;
  fetch(kv, &m);
  overlap_t o = {kv, &g, {MPIAR_REQUEST_NULL}};
  double loss = forward_backward(&m, step, &g, layer_ready, &o);
  /* Wait before the update, in the order the update needs them (the same on every worker). */
  for (int k = 0; k < 4; k++) {
    check(mpiar_wait(&o.reqs[k]), "wait");
    check(mpiar_kv_update(kv, MPIAR_KV_STR(names[k]), part(&g, k)), "update");
  }
  check(mpiar_kv_pushpull(kv, MPIAR_KV_STR("loss"), MPIAR_IN_PLACE, &loss), "pushpull loss");
  return loss * nworkers / BATCH;
}

static uint64_t hash_model(const model_t *m) {
  const unsigned char *b = (const unsigned char *)m;
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < sizeof *m; i++) {
    h = (h ^ b[i]) * 0x100000001B3ull;
  }
  return h;
}

/* Every worker holds the same bits: MAX of the hash and of its complement agree. */
static int same_on_all_workers(const model_t *m) {
  uint64_t h[2] = {hash_model(m), ~hash_model(m)};
  check(mpiar_allreduce(MPIAR_IN_PLACE, h, 2, MPIAR_UINT64, MPIAR_MAX, MPI_COMM_WORLD),
        "allreduce");
  return h[0] == ~h[1];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nworkers);
  int steps = 40;
  int overlap = 0;
  const char *write_path = NULL, *compare_path = NULL, *dir = "/tmp";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) {
      write_path = argv[++i];
    } else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) {
      compare_path = argv[++i];
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--overlap") == 0) {
      overlap = 1;
    } else {
      if (rank == 0) {
        fprintf(stderr, "usage: %s [--steps N] [--write FILE | --compare FILE] [--dir DIR] [--overlap]\n",
                argv[0]);
      }
      MPI_Finalize();
      return 2;
    }
  }
  if (steps < 2 || steps > MAX_STEPS || BATCH % nworkers != 0) {
    if (rank == 0) {
      fprintf(stderr, "need 2 <= steps <= %d and a worker count dividing %d\n", MAX_STEPS, BATCH);
    }
    MPI_Finalize();
    return 2;
  }

  /* Worker 0's random start is everyone's (init broadcasts it); others start from garbage. */
  model_t init;
  float *flat = (float *)&init;
  for (size_t i = 0; i < sizeof init / sizeof(float); i++) {
    flat[i] = rank == 0 ? 0.5f * feature(1000003 + i, 7) : 1e3f;
  }
  mpiar_kv_t *kv = make_store(&init);
  char ckpt[512];
  snprintf(ckpt, sizeof ckpt, "%s/mpiar_train_mlp_%d.ckpt", dir, nworkers);

  static double losses[MAX_STEPS];
  int half = steps / 2, failed = 0;
  for (int s = 0; s < steps; s++) {
    if (s == half) {
      check(mpiar_kv_save(kv, ckpt), "save");
    }
    losses[s] = train_step(kv, s);
    if (rank == 0 && (s % 10 == 0 || s == steps - 1)) {
      printf("step %3d  loss %.6f\n", s, losses[s]);
    }
  }
  model_t final;
  fetch(kv, &final);
  if (!same_on_all_workers(&final)) {
    fprintf(stderr, "worker %d: weights differ between workers\n", rank);
    failed = 1;
  }
  check(mpiar_kv_destroy(kv), "destroy");

  /* Restore: a fresh store (other starting values) loads the checkpoint and replays. */
  for (size_t i = 0; i < sizeof init / sizeof(float); i++) {
    flat[i] = 0.0f;
  }
  kv = make_store(&init);
  check(mpiar_kv_load(kv, ckpt), "load");
  for (int s = half; s < steps; s++) {
    double l = train_step(kv, s);
    if (l != losses[s]) {
      fprintf(stderr, "worker %d: resumed step %d loss %.9g, first run %.9g\n", rank, s, l,
              losses[s]);
      failed = 1;
    }
  }
  model_t resumed;
  fetch(kv, &resumed);
  if (memcmp(&resumed, &final, sizeof final) != 0) {
    fprintf(stderr, "worker %d: the run resumed from the checkpoint ends with other weights\n",
            rank);
    failed = 1;
  }
  check(mpiar_kv_destroy(kv), "destroy");

  /* The same training with each layer's gradients reduced while the next layer's are computed. */
  if (overlap) {
    flat = (float *)&init;
    for (size_t i = 0; i < sizeof init / sizeof(float); i++) {
      flat[i] = rank == 0 ? 0.5f * feature(1000003 + i, 7) : 1e3f;
    }
    kv = make_store(&init);
    for (int s = 0; s < steps; s++) {
      double l = train_step_overlapped(kv, s);
      if (l != losses[s]) {
        fprintf(stderr, "worker %d: overlapped step %d loss %.9g, blocking %.9g\n", rank, s, l,
                losses[s]);
        failed = 1;
      }
    }
    model_t overlapped;
    fetch(kv, &overlapped);
    if (memcmp(&overlapped, &final, sizeof final) != 0) {
      fprintf(stderr, "worker %d: the overlapped run ends with other weights\n", rank);
      failed = 1;
    } else if (rank == 0) {
      printf("overlapped run (async pushpull per layer): bit-identical to the blocking run\n");
    }
    check(mpiar_kv_destroy(kv), "destroy");
  }
  if (rank == 0) {
    unlink(ckpt);
    printf("%d workers: loss %.6f -> %.6f; weights identical on every worker; "
           "resume from checkpoint exact\n",
           nworkers, losses[0], losses[steps - 1]);
  }

  /* The curve and weights against a reference run. */
  if (rank == 0 && write_path != NULL) {
    FILE *f = fopen(write_path, "w");
    if (f == NULL) {
      perror(write_path);
      failed = 1;
    } else {
      fprintf(f, "%d\n", steps);
      for (int s = 0; s < steps; s++) {
        fprintf(f, "%.17g\n", losses[s]);
      }
      for (size_t i = 0; i < sizeof final / sizeof(float); i++) {
        fprintf(f, "%.9g\n", (double)((float *)&final)[i]);
      }
      fclose(f);
    }
  }
  if (rank == 0 && compare_path != NULL) {
    FILE *f = fopen(compare_path, "r");
    int ref_steps = 0;
    if (f == NULL || fscanf(f, "%d", &ref_steps) != 1 || ref_steps != steps) {
      fprintf(stderr, "cannot read a reference of %d steps from %s\n", steps, compare_path);
      failed = 1;
    } else {
      /* Workers sum partial gradients in another order, so only rounding may differ. */
      double worst = 0;
      for (int s = 0; s < steps && !failed; s++) {
        double ref = 0;
        failed |= fscanf(f, "%lf", &ref) != 1;
        worst = fmax(worst, fabs(losses[s] - ref) / fmax(fabs(ref), 1e-3));
      }
      double worst_w = 0;
      for (size_t i = 0; i < sizeof final / sizeof(float) && !failed; i++) {
        double ref = 0;
        failed |= fscanf(f, "%lf", &ref) != 1;
        worst_w = fmax(worst_w, fabs((double)((float *)&final)[i] - ref) / fmax(fabs(ref), 1e-2));
      }
      printf("against %s: largest relative loss difference %.3g, weight difference %.3g\n",
             compare_path, worst, worst_w);
      if (failed || worst > 1e-4 || worst_w > 1e-3) {
        fprintf(stderr, "the curve or weights differ from the reference beyond tolerance\n");
        failed = 1;
      }
    }
    if (f != NULL) {
      fclose(f);
    }
  }
  int all_failed = failed;
  check(mpiar_allreduce(MPIAR_IN_PLACE, &all_failed, 1, MPIAR_INT32, MPIAR_MAX, MPI_COMM_WORLD),
        "allreduce");
  MPI_Finalize();
  return all_failed ? 1 : 0;
}
