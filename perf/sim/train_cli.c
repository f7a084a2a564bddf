/*
 * mpiar-sim --train: the table of predicted training steps (train.h) over node counts, link
 * bandwidths, node compute rates, fusion sizes and parameter-server sizes, with the scaling
 * efficiency of each row against the same configuration on one node.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"
#include "train_cli.h"
#include "tuning/tuning.h"

int train_parse_doubles(const char *value, void *dest, char *err, size_t errlen) {
  train_list_t *l = dest;
  char buf[512];
  if (strlen(value) >= sizeof buf) {
    snprintf(err, errlen, "the list is too long");
    return -1;
  }
  strcpy(buf, value);
  l->n = 0;
  if (value[0] == ',' || value[strlen(value) - 1] == ',' || strstr(value, ",,") != NULL) {
    snprintf(err, errlen, "empty item in '%s'", value);
    return -1;
  }
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    char *end = NULL;
    double v = strtod(tok, &end);
    if (end == tok || *end != '\0' || !(v > 0) || v > 1e9 || l->n == TRAIN_LIST_MAX) {
      snprintf(err, errlen, "'%s' is not a positive number (at most %d items)", tok,
               TRAIN_LIST_MAX);
      return -1;
    }
    l->v[l->n++] = v;
  }
  return 0;
}

/* The tuning file's fitted parameters into @p cost (alpha, beta, gamma of float32, inter). */
static int load_tuning(const char *path, mpiar__cost_params_t *cost, int *have_inter, char *err,
                       size_t errlen) {
  static mpiar__tuning_t t;
  if (mpiar__tuning_load(path, &t) != MPIAR_SUCCESS) {
    snprintf(err, errlen, "--tuning-file: %s", mpiar_last_error());
    return -1;
  }
  mpiar__tuning_params(&t, MPIAR_FLOAT32, cost);
  *have_inter = !isnan(t.alpha_inter);
  if (*have_inter) {
    cost->alpha_inter = t.alpha_inter;
    cost->beta_inter = t.beta_inter;
  }
  return 0;
}

static void print_header(const train_cli_t *o, const tool_model_t *m, const train_config_t *base,
                         int have_link) {
  char fz[64] = "";
  for (int i = 0; i < o->nfusion; i++) {
    char b[32];
    size_t used = strlen(fz);
    snprintf(fz + used, sizeof fz - used, "%s%s", i ? ", " : "",
             o->fusion[i] ? tool_format_bytes((double)o->fusion[i], b, sizeof b) : "none");
  }
  printf("# mpiar-sim --train %s: %d layers, %zu tensors, %.2f M parameters (%.1f MB of float32 "
         "gradients), %.2f GFLOP forward per sample\n",
         m->name, m->nlayers, m->n, (double)tool_model_params(m) / 1e6,
         (double)tool_model_params(m) * 4 / 1e6, tool_model_flops(m) / 1e9);
  printf("# per rank: batch %g samples; %d ranks per node; backward %gx forward; fusion %s; "
         "communication %s the backward pass\n",
         base->batch, base->ppn, base->backward_factor, fz,
         base->overlap ? "overlapped with" : "after");
  printf("# inside a node: alpha %g s, beta %g s/B (%.1f GB/s), gamma %g s/B%s\n",
         base->cost.alpha, base->cost.beta, 1e-9 / base->cost.beta, base->cost.gamma,
         o->tuning_file ? " (fitted, from the tuning file)" : "");
  if (have_link) {
    printf("# between nodes: alpha %g s; beta = 8 / link bit rate, one port per node\n",
           base->cost.alpha_inter);
  } else {
    printf("# between nodes: alpha %g s, beta %g s/B (%.2f Gb/s), one port per node\n",
           base->cost.alpha_inter, base->cost.beta_inter, 8e-9 / base->cost.beta_inter);
  }
  printf("# algorithms: %s; step = forward + backward, or later when communication ends;\n"
         "# exposed = communication not hidden by compute; efficiency = step on 1 node / step\n",
         base->algorithm ? base->algorithm->name
                         : "the cost model's choice per message (simulated on the two-level model)");
  printf("# %5s %7s %6s %6s %8s %11s %10s %10s %10s %10s %8s  %s\n", "link", "node", "fusion",
         "nodes", "ranks", "step ms", "compute ms", "comm ms", "exposed ms", "efficiency",
         "messages", "communication");
  printf("# %5s %7s %6s %6s\n", "Gb/s", "TFLOP/s", "MiB", "");
}

static void print_row(const train_cli_t *o, const train_config_t *c, const train_result_t *r,
                      double one_node_step, int first) {
  const double eff = one_node_step / r->step_s;
  if (o->json) {
    printf("%s\n {\"model\": \"%s\", \"nodes\": %d, \"ppn\": %d, \"ranks\": %d, "
           "\"batch_per_rank\": %g, \"node_flops\": %g, \"beta_inter\": %.9g, "
           "\"link_gbps\": %.6g, \"fusion_bytes\": %zu, \"ps_servers\": %d, \"step_s\": %.9g, "
           "\"forward_s\": %.9g, \"backward_s\": %.9g, \"comm_s\": %.9g, \"exposed_s\": %.9g, "
           "\"efficiency\": %.6f, \"messages\": %d, \"simulated\": %d, \"estimated\": %d, "
           "\"communication\": \"%s\"}",
           first ? "" : ",", c->model->name, c->nodes, c->ppn, c->nodes * c->ppn, c->batch,
           c->node_flops, c->cost.beta_inter, 8e-9 / c->cost.beta_inter, c->fusion_bytes,
           c->ps_servers, r->step_s, r->forward_s, r->backward_s, r->comm_s, r->exposed_s, eff,
           r->messages, r->simulated, r->estimated, r->choices);
    return;
  }
  printf("  %5.4g %7.4g %6.4g %6d %8d %11.2f %10.2f %10.2f %10.2f %9.1f%% %8d  %s%s\n",
         8e-9 / c->cost.beta_inter, c->node_flops / 1e12, (double)c->fusion_bytes / (1 << 20),
         c->nodes, c->nodes * c->ppn, r->step_s * 1e3, (r->forward_s + r->backward_s) * 1e3,
         r->comm_s * 1e3, r->exposed_s * 1e3, 100 * eff, r->messages, r->choices,
         r->estimated ? " (some closed form)" : "");
  fflush(stdout);
}

int train_run(const train_cli_t *o, const tool_spec_t *spec) {
  tool_model_t m;
  char err[512];
  if (tool_model_get(o->model, &m, err, sizeof err) != 0) {
    return tool_usage_error(spec, "--train: %s", err);
  }
  train_config_t base;
  memset(&base, 0, sizeof base);
  base.model = &m;
  base.ppn = o->ppn;
  base.batch = o->batch;
  base.backward_factor = o->backward_factor;
  base.cost = o->cost;
  base.dtype = MPIAR_FLOAT32;
  base.algorithm = o->algorithm;
  base.segment_bytes = o->segment_bytes;
  base.overlap = o->overlap;
  base.max_sim_steps = 4e7;
  int have_inter = 0;
  if (o->tuning_file != NULL &&
      load_tuning(o->tuning_file, &base.cost, &have_inter, err, sizeof err) != 0) {
    tool_model_free(&m);
    return tool_usage_error(spec, "%s", err);
  }
  if (o->have_alpha_inter) {
    base.cost.alpha_inter = o->cost.alpha_inter;
  }
  if (o->have_beta_inter) {
    base.cost.beta_inter = o->cost.beta_inter;
  }
  if (o->json) {
    printf("[");
  } else {
    print_header(o, &m, &base, o->links.n > 0);
  }
  int first = 1, failed = 0;
  const int nlinks = o->links.n > 0 ? o->links.n : 1;
  for (int li = 0; li < nlinks && !failed; li++) {
    for (int fi = 0; fi < o->flops.n && !failed; fi++) {
      for (int zi = 0; zi < o->nfusion && !failed; zi++) {
        train_config_t c = base;
        if (o->links.n > 0) {
          c.cost.beta_inter = 8.0 / (o->links.v[li] * 1e9);
        }
        c.node_flops = o->flops.v[fi] * 1e12;
        c.fusion_bytes = o->fusion[zi];
        /* The baseline: the same configuration on one node. */
        train_result_t one;
        c.nodes = 1;
        if (train_step(&c, &one, err, sizeof err) != 0) {
          fprintf(stderr, "mpiar-sim: %s\n", err);
          failed = 1;
          break;
        }
        for (int ni = 0; ni < o->nnodes && !failed; ni++) {
          for (int si = -1; si < o->nps && !failed; si++) {
            c.nodes = (int)o->node_counts[ni];
            c.ps_servers = si < 0 ? 0 : (int)o->ps[si];
            if (c.ps_servers > 0 && c.nodes == 1) {
              continue; /* one node needs no server */
            }
            train_result_t r;
            if (train_step(&c, &r, err, sizeof err) != 0) {
              fprintf(stderr, "mpiar-sim: %s\n", err);
              failed = 1;
              break;
            }
            print_row(o, &c, &r, one.step_s, first);
            first = 0;
          }
        }
      }
    }
  }
  if (o->json) {
    printf("\n]\n");
  }
  tool_model_free(&m);
  return failed ? TOOL_EXIT_FAIL : TOOL_EXIT_OK;
}
