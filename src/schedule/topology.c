/*
 * Topologies: the canonical form of a rank -> node map, and the regular and uneven layouts the
 * simulator and the tests build.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "schedule/topology.h"

void mpiar__topology_destroy(mpiar__topology_t *t) {
  free(t->node_of);
  free(t->local_rank);
  free(t->node_size);
  free(t->node_first);
  free(t->node_ranks);
  memset(t, 0, sizeof *t);
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Index of @p label in the sorted, duplicate-free array @p labels of @p n entries. */
static int label_index(const int *labels, int n, int label) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (labels[mid] < label) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/*
 * Number the nodes by their lowest rank: walking the ranks in order, a label seen for the first
 * time opens the next node. Sorting the labels once makes each lookup a binary search.
 */
static int number_nodes(mpiar__topology_t *t, const int *node_label) {
  const int p = t->nranks;
  int rc = MPIAR_SUCCESS;
  int *labels = malloc((size_t)p * sizeof *labels);
  int *id_of = malloc((size_t)p * sizeof *id_of);
  if (labels == NULL || id_of == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "topology of %d ranks", p);
  }
  memcpy(labels, node_label, (size_t)p * sizeof *labels);
  qsort(labels, (size_t)p, sizeof *labels, cmp_int);
  int nlabels = 0;
  for (int i = 0; i < p; i++) {
    if (i == 0 || labels[i] != labels[nlabels - 1]) {
      labels[nlabels++] = labels[i];
    }
  }
  for (int i = 0; i < nlabels; i++) {
    id_of[i] = -1;
  }
  t->nnodes = 0;
  for (int r = 0; r < p; r++) {
    const int li = label_index(labels, nlabels, node_label[r]);
    if (id_of[li] < 0) {
      id_of[li] = t->nnodes++;
    }
    t->node_of[r] = id_of[li];
  }

cleanup:
  free(labels);
  free(id_of);
  return rc;
}

/* Node sizes, the per-node rank lists and local ranks, from node_of. */
static int index_nodes(mpiar__topology_t *t) {
  const int p = t->nranks, nn = t->nnodes;
  t->node_size = calloc((size_t)nn, sizeof *t->node_size);
  t->node_first = calloc((size_t)nn + 1, sizeof *t->node_first);
  if (t->node_size == NULL || t->node_first == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "topology of %d nodes", nn);
  }
  for (int r = 0; r < p; r++) {
    t->node_size[t->node_of[r]]++;
  }
  t->max_node_size = 0;
  for (int i = 0; i < nn; i++) {
    t->node_first[i + 1] = t->node_first[i] + t->node_size[i];
    if (t->node_size[i] > t->max_node_size) {
      t->max_node_size = t->node_size[i];
    }
  }
  /* Ranks in increasing order: each node's list comes out in rank order. */
  for (int i = 0; i < nn; i++) {
    t->node_size[i] = 0;
  }
  for (int r = 0; r < p; r++) {
    const int node = t->node_of[r];
    t->local_rank[r] = t->node_size[node]++;
    t->node_ranks[t->node_first[node] + t->local_rank[r]] = r;
  }
  return MPIAR_SUCCESS;
}

int mpiar__topology_from_map(mpiar__topology_t *t, int nranks, const int *node_label) {
  int rc = MPIAR_SUCCESS;
  memset(t, 0, sizeof *t);
  if (nranks < 1 || node_label == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "a topology needs at least one rank (got %d)",
                        nranks);
  }
  for (int r = 0; r < nranks; r++) {
    if (node_label[r] < 0) {
      return mpiar__error(MPIAR_ERR_INVALID_ARG, "rank %d has the negative node label %d", r,
                          node_label[r]);
    }
  }
  t->nranks = nranks;
  t->node_of = malloc((size_t)nranks * sizeof *t->node_of);
  t->local_rank = malloc((size_t)nranks * sizeof *t->local_rank);
  t->node_ranks = malloc((size_t)nranks * sizeof *t->node_ranks);
  if (t->node_of == NULL || t->local_rank == NULL || t->node_ranks == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "topology of %d ranks", nranks);
  }
  MPIAR__CHECK(number_nodes(t, node_label));
  MPIAR__CHECK(index_nodes(t));
  return MPIAR_SUCCESS;

cleanup:
  mpiar__topology_destroy(t);
  return rc;
}

int mpiar__topology_shuffled(mpiar__topology_t *t, int nnodes, const int *node_size,
                             uint64_t *rng) {
  memset(t, 0, sizeof *t);
  if (nnodes < 1 || node_size == NULL || rng == NULL || *rng == 0) {
    return MPIAR_ERR_INVALID_ARG;
  }
  int p = 0;
  for (int i = 0; i < nnodes; i++) {
    if (node_size[i] < 1 || node_size[i] > INT_MAX - p) {
      return MPIAR_ERR_INVALID_ARG;
    }
    p += node_size[i];
  }
  int *label = malloc((size_t)p * sizeof *label);
  if (label == NULL) {
    return MPIAR_ERR_NOMEM;
  }
  for (int i = 0, r = 0; i < nnodes; i++) {
    for (int j = 0; j < node_size[i]; j++) {
      label[r++] = i;
    }
  }
  uint64_t x = *rng;
  for (int r = p - 1; r > 0; r--) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const int q = (int)(x % (uint64_t)(r + 1)), tmp = label[r];
    label[r] = label[q];
    label[q] = tmp;
  }
  *rng = x;
  int rc = mpiar__topology_from_map(t, p, label);
  free(label);
  return rc;
}

int mpiar__topology_uneven(mpiar__topology_t *t, int nnodes, const int *node_size,
                           mpiar__placement_t placement) {
  memset(t, 0, sizeof *t);
  if (nnodes < 1 || node_size == NULL ||
      (placement != MPIAR__PLACE_BLOCK && placement != MPIAR__PLACE_ROUNDROBIN)) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "a topology needs at least one node and a placement");
  }
  long total = 0;
  for (int i = 0; i < nnodes; i++) {
    if (node_size[i] < 1) {
      return mpiar__error(MPIAR_ERR_INVALID_ARG, "node %d has %d ranks (at least 1)", i,
                          node_size[i]);
    }
    total += node_size[i];
    if (total > INT_MAX) {
      return mpiar__error(MPIAR_ERR_INVALID_ARG, "a topology of more than %d ranks", INT_MAX);
    }
  }
  const int p = (int)total;
  int *label = malloc((size_t)p * sizeof *label);
  int *left = malloc((size_t)nnodes * sizeof *left);
  if (label == NULL || left == NULL) {
    free(label);
    free(left);
    return mpiar__error(MPIAR_ERR_NOMEM, "topology of %d ranks", p);
  }
  memcpy(left, node_size, (size_t)nnodes * sizeof *left);
  int node = 0;
  for (int r = 0; r < p; r++) {
    if (placement == MPIAR__PLACE_BLOCK) {
      while (left[node] == 0) {
        node++;
      }
    } else {
      /* Deal one rank to each node in turn, skipping the nodes that are full. */
      while (left[node] == 0) {
        node = (node + 1) % nnodes;
      }
    }
    label[r] = node;
    left[node]--;
    if (placement == MPIAR__PLACE_ROUNDROBIN) {
      node = (node + 1) % nnodes;
    }
  }
  int rc = mpiar__topology_from_map(t, p, label);
  free(label);
  free(left);
  return rc;
}

int mpiar__topology_regular(mpiar__topology_t *t, int nnodes, int ranks_per_node,
                            mpiar__placement_t placement) {
  memset(t, 0, sizeof *t);
  if (nnodes < 1 || ranks_per_node < 1 || nnodes > INT_MAX / ranks_per_node) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "a topology of %d nodes x %d ranks", nnodes,
                        ranks_per_node);
  }
  int *sizes = malloc((size_t)nnodes * sizeof *sizes);
  if (sizes == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "topology of %d nodes", nnodes);
  }
  for (int i = 0; i < nnodes; i++) {
    sizes[i] = ranks_per_node;
  }
  int rc = mpiar__topology_uneven(t, nnodes, sizes, placement);
  free(sizes);
  return rc;
}

int mpiar__topology_is_hierarchical(const mpiar__topology_t *t) {
  return t != NULL && t->nnodes > 1 && t->max_node_size > 1;
}

int mpiar__topology_is_regular(const mpiar__topology_t *t) {
  if (t == NULL) {
    return 1;
  }
  for (int i = 0; i < t->nnodes; i++) {
    if (t->node_size[i] != t->max_node_size) {
      return 0;
    }
  }
  return 1;
}
