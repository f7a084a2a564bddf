/*
 * The training-step predictor (perf/sim/train.h) against steps computed by hand, the model files
 * it reads, and the built-in models' published totals.
 *
 * The hand-computed model: layer A of 1 GFLOP per sample with a tensor of 1000 float32 elements
 * (4000 bytes), then layer B of 2 GFLOP with 3000 elements (12000 bytes); batch 2 per rank, one
 * rank per node of 1 TFLOP/s, backward twice the forward. Forward: A 2 ms + B 4 ms = 6 ms;
 * backward: B 8 ms (ready at 14 ms), A 4 ms (ready at 18 ms). Between nodes 1 ms per message and
 * 1 us per byte, reductions 0.1 us per byte; recursive doubling on two ranks costs
 * alpha + n beta + n gamma: 14.2 ms for B's 12000 bytes, 5.4 ms for A's 4000.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/models.h"
#include "sim_test.h"
#include "train.h"

static int near(double a, double b) {
  return fabs(a - b) <= 1e-9 * (fabs(b) > 1e-3 ? fabs(b) : 1e-3);
}

/* Write @p text to a temporary file; its path goes to @p path. */
static void temp_file(const char *text, char *path, size_t len) {
  snprintf(path, len, "/tmp/mpiar_model_XXXXXX");
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

static void check_step(const char *what, const train_config_t *c, double step_ms, double comm_ms,
                       int messages) {
  train_result_t r;
  char err[256] = "";
  int rc = train_step(c, &r, err, sizeof err);
  CHECK(rc == 0, "%s: %s", what, err);
  CHECK(near(r.forward_s, 6e-3) && near(r.backward_s, 12e-3), "%s: compute %g + %g ms", what,
        r.forward_s * 1e3, r.backward_s * 1e3);
  CHECK(near(r.step_s, step_ms * 1e-3), "%s: step %.9g ms, expected %.9g", what, r.step_s * 1e3,
        step_ms);
  CHECK(near(r.comm_s, comm_ms * 1e-3), "%s: communication %.9g ms, expected %.9g", what,
        r.comm_s * 1e3, comm_ms);
  CHECK(near(r.exposed_s, (step_ms - 18) * 1e-3), "%s: exposed %.9g ms", what, r.exposed_s * 1e3);
  CHECK(r.messages == messages && r.bytes == 16000, "%s: %d messages, %zu bytes", what,
        r.messages, r.bytes);
}

static void hand_computed(void) {
  char path[64];
  temp_file("# two layers\nmpiar-model 1\nname two\n"
            "layer A 1e9 1000\n"
            "layer pool 0 -\n"
            "layer B 2e9 3000\n",
            path, sizeof path);
  tool_model_t m;
  char err[256] = "";
  CHECK(tool_model_load(path, &m, err, sizeof err) == 0, "model file: %s", err);
  remove(path);
  CHECK(m.nlayers == 3 && m.n == 2 && strcmp(m.name, "two") == 0, "layers %d tensors %zu",
        m.nlayers, m.n);
  train_config_t c;
  memset(&c, 0, sizeof c);
  c.model = &m;
  c.nodes = 1;
  c.ppn = 1;
  c.batch = 2;
  c.node_flops = 1e12;
  c.backward_factor = 2;
  c.dtype = MPIAR_FLOAT32;
  c.overlap = 1;
  c.cost = (mpiar__cost_params_t){1e-6, 1e-9, 1e-7, 1e-3, 1e-6, 0, 0};
  c.algorithm = mpiar__algorithm_find("recursive_doubling");
  c.max_sim_steps = 1e6;
  check_step("one rank", &c, 18, 0, 0);
  c.nodes = 2;
  /* B's message 14 -> 28.2 ms; A's waits for it: 28.2 -> 33.6 ms. */
  check_step("two nodes, a message per tensor", &c, 33.6, 19.6, 2);
  c.fusion_bytes = 1 << 20;
  /* One buffer of 16000 bytes at the end of the backward pass: 18 + 18.6 ms. */
  check_step("two nodes, fused", &c, 36.6, 18.6, 1);
  c.fusion_bytes = 0;
  c.overlap = 0;
  check_step("two nodes, no overlap", &c, 37.6, 19.6, 2);
  c.overlap = 1;
  /* Parameter server of 2 servers for 4 nodes: 2 max(S a + n b, N a + N n/S b) + N n/S g:
   * B 58.4 ms (14 -> 72.4), A 24.8 ms (72.4 -> 97.2). */
  c.nodes = 4;
  c.algorithm = NULL;
  c.ps_servers = 2;
  CHECK(near(train_ps_time(&c, 12000), 58.4e-3) && near(train_ps_time(&c, 4000), 24.8e-3),
        "parameter server: %g, %g ms", train_ps_time(&c, 12000) * 1e3,
        train_ps_time(&c, 4000) * 1e3);
  check_step("parameter server", &c, 97.2, 83.2, 2);
  /* The model's choice: half a second per message makes the fewest messages win (recursive
   * doubling: log2(4) messages against 2 log2(4) and 2 (p - 1)). */
  c.ps_servers = 0;
  c.cost.alpha_inter = 0.5;
  const mpiar__algorithm_t *alg = NULL;
  size_t seg = 1;
  int simulated = 0;
  double t = train_allreduce_time(&c, 4096, &alg, &seg, &simulated, err, sizeof err);
  CHECK(t > 0 && alg != NULL && strcmp(alg->name, "recursive_doubling") == 0 && seg == 0 &&
            simulated,
        "choice: %s seg %zu (%g s, %s)", alg ? alg->name : "-", seg, t, err);
  /* log2(4) = 2 inter-node rounds of half a second, plus the bytes. */
  CHECK(t > 1.0 && t < 1.01, "recursive doubling on 4 nodes: %g s", t);
  tool_model_free(&m);
}

static void model_files(void) {
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"layer A 1 2\n", ":1: the first line must be 'mpiar-model 1'"},
      {"mpiar-model 2\nlayer A 1 2\n", ":1: version 2 is not supported"},
      {"mpiar-model 1\n# nothing\n", ":2: no layer"},
      {"mpiar-model 1\nlayer A lots 2\n", ":2: FLOPS 'lots' is not a non-negative number"},
      {"mpiar-model 1\nlayer A 1 2,x\n", ":2: tensor size 'x' is not an element count"},
      {"mpiar-model 1\nlayer A 1 0\n", ":2: tensor size '0' is not an element count"},
      {"mpiar-model 1\nlayer A 1\n", ":2: a layer line is 'layer NAME FLOPS TENSORS"},
      {"mpiar-model 1\nlayer A 1 2 3\n", ":2: a layer line is"},
      {"mpiar-model 1\nlayer A 1 2 fast 3\n", ":2: FORWARD_MS and BACKWARD_MS"},
      {"mpiar-model 1\nlayers A 1 2\n", ":2: unknown line 'layers'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[64], err[256] = "";
    temp_file(bad[i].text, path, sizeof path);
    tool_model_t m;
    CHECK(tool_model_load(path, &m, err, sizeof err) != 0 && strstr(err, path) == err &&
              strstr(err, bad[i].want) != NULL,
          "case %zu: '%s'", i, err);
    remove(path);
  }
  /* Measured times replace the FLOP rate. */
  char path[64], err[256] = "";
  temp_file("mpiar-model 1\nlayer A 1e12 10 3 7.5\n", path, sizeof path);
  tool_model_t m;
  CHECK(tool_model_load(path, &m, err, sizeof err) == 0, "%s", err);
  remove(path);
  if (m.nlayers == 1) {
    CHECK(m.layers[0].fwd_s == 3e-3 && m.layers[0].bwd_s == 7.5e-3, "measured times");
    train_config_t c;
    memset(&c, 0, sizeof c);
    c.model = &m;
    c.nodes = c.ppn = 1;
    c.batch = 1;
    c.node_flops = 1;
    c.backward_factor = 2;
    c.dtype = MPIAR_FLOAT32;
    c.overlap = 1;
    train_result_t r;
    CHECK(train_step(&c, &r, err, sizeof err) == 0 && near(r.step_s, 10.5e-3), "step %g ms",
          r.step_s * 1e3);
  }
  tool_model_free(&m);
  CHECK(tool_model_get("alexnet", &m, err, sizeof err) != 0 &&
            strstr(err, "unknown model 'alexnet' (vgg16, resnet50") != NULL,
        "%s", err);
}

static void builtin_models(void) {
  tool_model_t v, r;
  CHECK(tool_model_builtin("vgg16", &v) == 0 && tool_model_builtin("resnet50", &r) == 0,
        "built-in models");
  /* Published: VGG-16 138,357,544 parameters, 15.47 G multiply-adds; ResNet-50 25,557,032
   * parameters, 4.1 G multiply-adds (the stride on the 3x3 convolution). */
  CHECK(v.n == 32 && tool_model_params(&v) == 138357544, "vgg16: %zu tensors, %zu", v.n,
        tool_model_params(&v));
  CHECK(fabs(tool_model_flops(&v) / 2 - 15.47e9) < 0.01e9, "vgg16: %g multiply-adds",
        tool_model_flops(&v) / 2);
  CHECK(r.n == 161 && tool_model_params(&r) == 25557032, "resnet50: %zu tensors, %zu", r.n,
        tool_model_params(&r));
  CHECK(fabs(tool_model_flops(&r) / 2 - 4.1e9) < 0.05e9, "resnet50: %g multiply-adds",
        tool_model_flops(&r) / 2);
  tool_model_free(&v);
  tool_model_free(&r);
}

int main(void) {
  hand_computed();
  model_files();
  builtin_models();
  printf("training-step predictor: %s (%d failed checks)\n", failures ? "FAILED" : "passed",
         failures);
  return failures ? 1 : 0;
}
