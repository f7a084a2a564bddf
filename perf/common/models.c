/*
 * The tools' models (models.h): VGG-16 and ResNet-50 built from their architectures, and the
 * model file reader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/models.h"
#include "tuning/input.h"

const char tool_model_names[] = "vgg16, resnet50";

void tool_model_free(tool_model_t *m) {
  free(m->t);
  free(m->layers);
  memset(m, 0, sizeof *m);
}

/* Start a layer; its tensors follow with add_tensor(). @return 0 or -1 (memory). */
static int add_layer(tool_model_t *m, const char *name, double flops) {
  if (m->nlayers == m->layers_cap) {
    int cap = m->layers_cap ? 2 * m->layers_cap : 64;
    tool_layer_t *l = realloc(m->layers, (size_t)cap * sizeof *l);
    if (l == NULL) {
      return -1;
    }
    m->layers = l;
    m->layers_cap = cap;
  }
  tool_layer_t *l = &m->layers[m->nlayers++];
  snprintf(l->name, sizeof l->name, "%s", name);
  l->flops = flops;
  l->fwd_s = l->bwd_s = -1;
  l->first = (int)m->n;
  l->ntensors = 0;
  return 0;
}

static int add_tensor(tool_model_t *m, const char *name, size_t count) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    tool_tensor_t *t = realloc(m->t, cap * sizeof *t);
    if (t == NULL) {
      return -1;
    }
    m->t = t;
    m->cap = cap;
  }
  tool_tensor_t *t = &m->t[m->n++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->count = count;
  t->layer = m->nlayers - 1;
  m->layers[m->nlayers - 1].ntensors++;
  return 0;
}

/*
 * VGG-16 (Simonyan & Zisserman 2015, configuration D): 13 3x3 convolutions with bias at 224,
 * 112, 56, 28 and 14 pixels (a 2x2 max-pool between the blocks), then three fully connected
 * layers: 32 tensors, 138,357,544 parameters, 15.5 G multiply-adds per sample.
 */
static int build_vgg16(tool_model_t *m) {
  static const int ch[13] = {64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512};
  static const int px[13] = {224, 224, 112, 112, 56, 56, 56, 28, 28, 28, 14, 14, 14};
  int in = 3, rc = 0;
  char name[48];
  snprintf(m->name, sizeof m->name, "vgg16");
  for (int i = 0; i < 13 && rc == 0; i++) {
    double flops = 2.0 * px[i] * px[i] * ch[i] * in * 9;
    snprintf(name, sizeof name, "conv%d", i + 1);
    rc |= add_layer(m, name, flops);
    snprintf(name, sizeof name, "conv%d.weight", i + 1);
    rc |= add_tensor(m, name, (size_t)ch[i] * (size_t)in * 9);
    snprintf(name, sizeof name, "conv%d.bias", i + 1);
    rc |= add_tensor(m, name, (size_t)ch[i]);
    in = ch[i];
  }
  static const size_t fc_in[3] = {512 * 7 * 7, 4096, 4096}, fc_out[3] = {4096, 4096, 1000};
  for (int i = 0; i < 3 && rc == 0; i++) {
    snprintf(name, sizeof name, "fc%d", i + 6);
    rc |= add_layer(m, name, 2.0 * (double)fc_in[i] * (double)fc_out[i]);
    snprintf(name, sizeof name, "fc%d.weight", i + 6);
    rc |= add_tensor(m, name, fc_out[i] * fc_in[i]);
    snprintf(name, sizeof name, "fc%d.bias", i + 6);
    rc |= add_tensor(m, name, fc_out[i]);
  }
  return rc;
}

/* A convolution and its batch normalisation: one layer, the weight and the BN's gamma and beta. */
static int conv_bn(tool_model_t *m, const char *prefix, size_t out, size_t in, size_t k, int px) {
  char name[64];
  int rc = add_layer(m, prefix, 2.0 * px * px * (double)out * (double)in * (double)(k * k));
  snprintf(name, sizeof name, "%s.conv", prefix);
  rc |= add_tensor(m, name, out * in * k * k);
  snprintf(name, sizeof name, "%s.bn.gamma", prefix);
  rc |= add_tensor(m, name, out);
  snprintf(name, sizeof name, "%s.bn.beta", prefix);
  rc |= add_tensor(m, name, out);
  return rc;
}

/*
 * ResNet-50 (He et al. 2016; the stride on the 3x3 convolution, as in torchvision): a 7x7 stem
 * at 112 pixels, bottleneck stages of 3, 4, 6 and 3 blocks at 56, 28, 14 and 7 pixels, the fully
 * connected layer: 161 tensors, 25,557,032 parameters, 4.1 G multiply-adds per sample.
 */
static int build_resnet50(tool_model_t *m) {
  static const int blocks[4] = {3, 4, 6, 3}, mid[4] = {64, 128, 256, 512}, px[4] = {56, 28, 14, 7};
  char prefix[40];
  snprintf(m->name, sizeof m->name, "resnet50");
  int rc = conv_bn(m, "stem", 64, 3, 7, 112);
  size_t in = 64;
  for (int s = 0; s < 4 && rc == 0; s++) {
    size_t w = (size_t)mid[s], out = 4 * w;
    for (int b = 0; b < blocks[s]; b++) {
      /* The first block of stages 2-4 halves the size in its 3x3 convolution. */
      int px_in = (b == 0 && s > 0) ? 2 * px[s] : px[s];
      snprintf(prefix, sizeof prefix, "layer%d.%d.a", s + 1, b);
      rc |= conv_bn(m, prefix, w, in, 1, px_in);
      snprintf(prefix, sizeof prefix, "layer%d.%d.b", s + 1, b);
      rc |= conv_bn(m, prefix, w, w, 3, px[s]);
      snprintf(prefix, sizeof prefix, "layer%d.%d.c", s + 1, b);
      rc |= conv_bn(m, prefix, out, w, 1, px[s]);
      if (b == 0) {
        snprintf(prefix, sizeof prefix, "layer%d.%d.down", s + 1, b);
        rc |= conv_bn(m, prefix, out, in, 1, px[s]);
      }
      in = out;
    }
  }
  rc |= add_layer(m, "fc", 2.0 * 2048 * 1000);
  rc |= add_tensor(m, "fc.weight", 1000 * 2048);
  rc |= add_tensor(m, "fc.bias", 1000);
  return rc;
}

int tool_model_builtin(const char *name, tool_model_t *m) {
  memset(m, 0, sizeof *m);
  int rc = -1;
  if (strcmp(name, "vgg16") == 0) {
    rc = build_vgg16(m);
  } else if (strcmp(name, "resnet50") == 0) {
    rc = build_resnet50(m);
  }
  if (rc != 0) {
    tool_model_free(m);
  }
  return rc;
}

size_t tool_model_params(const tool_model_t *m) {
  size_t p = 0;
  for (size_t i = 0; i < m->n; i++) {
    p += m->t[i].count;
  }
  return p;
}

double tool_model_flops(const tool_model_t *m) {
  double f = 0;
  for (int i = 0; i < m->nlayers; i++) {
    f += m->layers[i].flops;
  }
  return f;
}

/* ---- Model files ---- */

static int parse_number(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 1e30) {
    return -1;
  }
  *out = v;
  return 0;
}

/* One "layer" line's fields after the keyword. @return 0 or -1 with the reason in why. */
static int parse_layer(tool_model_t *m, char **f, int nf, char *why, size_t len) {
  double flops = 0;
  if (nf != 3 && nf != 5) {
    snprintf(why, len, "a layer line is 'layer NAME FLOPS TENSORS [FORWARD_MS BACKWARD_MS]'");
    return -1;
  }
  if (strlen(f[0]) >= sizeof m->layers[0].name) {
    snprintf(why, len, "the layer name is longer than %zu characters",
             sizeof m->layers[0].name - 1);
    return -1;
  }
  if (parse_number(f[1], &flops) != 0) {
    snprintf(why, len, "FLOPS '%s' is not a non-negative number", f[1]);
    return -1;
  }
  if (add_layer(m, f[0], flops) != 0) {
    snprintf(why, len, "out of memory");
    return -1;
  }
  if (nf == 5) {
    double fwd, bwd;
    if (parse_number(f[3], &fwd) != 0 || parse_number(f[4], &bwd) != 0) {
      snprintf(why, len, "FORWARD_MS and BACKWARD_MS must be non-negative numbers");
      return -1;
    }
    m->layers[m->nlayers - 1].fwd_s = fwd * 1e-3;
    m->layers[m->nlayers - 1].bwd_s = bwd * 1e-3;
  }
  if (strcmp(f[2], "-") == 0) {
    return 0;
  }
  int k = 0;
  for (char *save = NULL, *tok = strtok_r(f[2], ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save), k++) {
    char *end = NULL;
    errno = 0;
    unsigned long long c = strtoull(tok, &end, 10);
    if (errno != 0 || end == tok || *end != '\0' || c == 0 || tok[0] == '-' ||
        c > (1ULL << 40)) {
      snprintf(why, len, "tensor size '%s' is not an element count in [1, 2^40]", tok);
      return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "%.40s.%d", f[0], k);
    if (add_tensor(m, name, (size_t)c) != 0) {
      snprintf(why, len, "out of memory");
      return -1;
    }
  }
  return 0;
}

int tool_model_load(const char *path, tool_model_t *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  /* Only a regular file: a FIFO would block open() and a device would never end. */
  int fd;
  uint64_t size;
  const char *kind;
  int opened = mpiar__input_open(path, &fd, &size, &kind);
  if (opened == MPIAR__INPUT_NOT_REGULAR) {
    snprintf(err, errlen, "%s: is %s, not a regular file", path, kind);
    return -1;
  }
  FILE *fp = opened == MPIAR__INPUT_OK ? fdopen(fd, "r") : NULL;
  if (fp == NULL) {
    int e = errno;
    if (opened == MPIAR__INPUT_OK) {
      close(fd);
    }
    snprintf(err, errlen, "%s: cannot open it: %s", path, strerror(e));
    return -1;
  }
  char line[4096], why[256] = "";
  int lineno = 0, header = 0, bad = 0;
  while (!bad && fgets(line, sizeof line, fp) != NULL) {
    lineno++;
    if (strchr(line, '\n') == NULL && !feof(fp)) {
      snprintf(why, sizeof why, "line longer than %zu characters", sizeof line - 2);
      bad = 1;
      break;
    }
    char *f[8];
    int nf = 0;
    for (char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save); tok != NULL && nf < 8;
         tok = strtok_r(NULL, " \t\r\n", &save)) {
      f[nf++] = tok;
    }
    if (nf == 0 || f[0][0] == '#') {
      continue;
    }
    if (!header) {
      header = nf == 2 && strcmp(f[0], "mpiar-model") == 0;
      if (!header) {
        snprintf(why, sizeof why, "the first line must be 'mpiar-model 1'");
        bad = 1;
      } else if (strcmp(f[1], "1") != 0) {
        snprintf(why, sizeof why, "version %s is not supported (this mpiar reads version 1)",
                 f[1]);
        bad = 1;
      }
    } else if (strcmp(f[0], "name") == 0 && nf == 2) {
      snprintf(m->name, sizeof m->name, "%s", f[1]);
    } else if (strcmp(f[0], "layer") == 0) {
      bad = parse_layer(m, f + 1, nf - 1, why, sizeof why) != 0;
    } else {
      snprintf(why, sizeof why, "unknown line '%s' (name NAME, layer ...)", f[0]);
      bad = 1;
    }
  }
  fclose(fp);
  if (!bad && m->nlayers == 0) {
    snprintf(why, sizeof why, "no layer");
    bad = 1;
    lineno = lineno ? lineno : 1;
  }
  if (bad) {
    snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
    tool_model_free(m);
    return -1;
  }
  if (m->name[0] == '\0') {
    snprintf(m->name, sizeof m->name, "%s", path);
  }
  return 0;
}

int tool_model_get(const char *name_or_path, tool_model_t *m, char *err, size_t errlen) {
  if (tool_model_builtin(name_or_path, m) == 0) {
    return 0;
  }
  if (strchr(name_or_path, '/') == NULL && strchr(name_or_path, '.') == NULL) {
    snprintf(err, errlen, "unknown model '%s' (%s, or a model file)", name_or_path,
             tool_model_names);
    return -1;
  }
  return tool_model_load(name_or_path, m, err, errlen);
}
