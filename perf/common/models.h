/*
 * Neural-network models as the tools see them: layers in forward order, each with its forward
 * FLOPs per sample and its parameter tensors (whose gradients a data-parallel step allreduces).
 * VGG-16 and ResNet-50 are built in (shapes of the published architectures, 224 x 224 ImageNet
 * inputs, 1000 classes); other models come from a text file (docs/tuning.md, "Model files"):
 *
 *   # comments and blank lines are skipped
 *   mpiar-model 1
 *   name NAME
 *   layer NAME FLOPS TENSORS [FORWARD_MS BACKWARD_MS]
 *
 * FLOPS: forward floating-point operations per sample (a multiply-add counts 2); TENSORS: the
 * element counts of the layer's parameter tensors, comma-separated ("-" for none); FORWARD_MS and
 * BACKWARD_MS: measured times of the layer for one rank's batch, used instead of the FLOP rate.
 * Used by mpiar-kv-replay (the tensors) and mpiar-sim --train (all of it).
 */
#ifndef MPIAR_TOOL_MODELS_H
#define MPIAR_TOOL_MODELS_H

#include <stddef.h>

typedef struct tool_tensor {
  char name[64];
  size_t count; /* elements */
  int layer;    /* the layer it belongs to */
} tool_tensor_t;

typedef struct tool_layer {
  char name[64];
  double flops;        /* forward FLOPs per sample */
  double fwd_s, bwd_s; /* measured seconds for one rank's batch; < 0: from the FLOP rate */
  int first, ntensors; /* its tensors: t[first .. first + ntensors - 1] */
} tool_layer_t;

typedef struct tool_model {
  char name[64];
  tool_tensor_t *t; /* every tensor, in forward order */
  size_t n, cap;
  tool_layer_t *layers; /* in forward order */
  int nlayers, layers_cap;
} tool_model_t;

/* The built-in model @p name ("vgg16" or "resnet50"). @return 0, or -1 (unknown name, memory). */
int tool_model_builtin(const char *name, tool_model_t *m);

/*
 * Read a model file. @return 0, or -1 with "FILE:LINE: what is wrong" in @p err (the model is
 * then empty).
 */
int tool_model_load(const char *path, tool_model_t *m, char *err, size_t errlen);

/* A built-in name or a file path. @return 0 or -1 with a message in @p err. */
int tool_model_get(const char *name_or_path, tool_model_t *m, char *err, size_t errlen);

void tool_model_free(tool_model_t *m);

/* Parameters (elements of every tensor) and forward FLOPs per sample of the whole model. */
size_t tool_model_params(const tool_model_t *m);
double tool_model_flops(const tool_model_t *m);

/* "vgg16, resnet50": the built-in names, for messages. */
extern const char tool_model_names[];

#endif /* MPIAR_TOOL_MODELS_H */
