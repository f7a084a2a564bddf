/*
 * Node discovery: which ranks of a communicator share a node (memory, CPUs), found when its
 * context is made. Each rank contributes a node key in its row of the settings agreement
 * (setup.c); the map numbers the distinct keys in rank order. The CPUs of a node are the union
 * of its ranks' affinity masks, by one more allreduce of the context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/context.h"
#include "reduce_kernels/kernels.h"

uint64_t mpiar__text_hash(const char *text) {
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (const char *c = text; *c != '\0'; c++) {
    h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
  }
  return h;
}

/*
 * This process's node: a hash of the host name and of the network namespace. Ranks on one host
 * share memory; ranks in different network namespaces of one host are the emulated nodes of
 * perf/cluster, which MPI launches as different hosts too. (MPI_Comm_split_type would give the
 * same grouping, but it is a blocking collective: a rank that gave up on a late peer would leave
 * that peer blocked in it forever. This key is exchanged with mpiar's own allreduce, which the
 * deadline bounds.)
 */
uint64_t mpiar__node_key(void) {
  char text[512] = "";
  gethostname(text, 255);
  text[255] = '\0';
  size_t used = strlen(text);
  ssize_t n = readlink("/proc/self/ns/net", text + used + 1, sizeof text - used - 2);
  if (n > 0) {
    text[used] = '|';
    text[used + 1 + (size_t)n] = '\0';
  }
  return mpiar__text_hash(text) | 1; /* never 0 */
}

void mpiar__node_map(mpiar__context_t *ctx, const uint64_t *rows, size_t stride) {
  int nodes = 0;
  for (int r = 0; r < ctx->eng.size; r++) {
    int first = r;
    for (int q = 0; q < r; q++) {
      if (rows[(size_t)q * stride] == rows[(size_t)r * stride]) {
        first = q;
        break;
      }
    }
    ctx->node_of[r] = first == r ? nodes++ : ctx->node_of[first];
  }
  ctx->nnodes = nodes;
  ctx->local_ranks = 0;
  for (int r = 0; r < ctx->eng.size; r++) {
    ctx->local_ranks += ctx->node_of[r] == ctx->node_of[ctx->eng.rank];
  }
}

/*
 * The CPUs the ranks of this rank's node may use together: the union of their affinity masks, by
 * one OR of a mask per node over the communicator (collective). Ranks pinned one per core are
 * then not taken for an oversubscribed node, nor unpinned ones sharing it for a free one. 0 when
 * there are too many nodes for one mask each (the caller falls back on this rank's own mask).
 */
int mpiar__node_cpus(mpiar__context_t *ctx, long timeout_ms, int *out) {
  *out = 0;
  size_t words = (size_t)ctx->nnodes * MPIAR__CPU_WORDS;
  if (ctx->node_of == NULL || ctx->nnodes < 1 || words > ((size_t)1 << 16)) {
    return MPIAR_SUCCESS;
  }
  uint64_t *masks = calloc(words, sizeof *masks);
  if (masks == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "cannot allocate the CPU masks of %d nodes", ctx->nnodes);
  }
  uint64_t *mine = masks + (size_t)ctx->node_of[ctx->eng.rank] * MPIAR__CPU_WORDS;
  mpiar__usable_cpu_mask(mine);
  int rc = mpiar__context_allreduce(ctx, masks, words, MPIAR_UINT64, MPIAR_BOR, timeout_ms);
  if (rc == MPIAR_SUCCESS) {
    for (int w = 0; w < MPIAR__CPU_WORDS; w++) {
      *out += __builtin_popcountll(mine[w]);
    }
  }
  free(masks);
  return rc;
}
