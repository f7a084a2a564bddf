/*
 * The tree allreduce engine: pipelined reduce to rank 0, then pipelined broadcast from it.
 *
 * Segment g of a rank: receive segment g of each child's subtree result (into that child's
 * scratch slot for g's parity), fold own op C_1 op C_2 ... in ascending child order (subtrees are
 * contiguous ranges above this rank, so every fold runs in rank order with the lower ranks in
 * operand a), send the fold to the parent; then receive segment g of the result from the parent
 * into OUTPUT and forward it to the children, the child with the largest subtree first. The root's
 * last fold of each segment is final. Reduce messages and broadcast messages between a pair go in
 * opposite directions; within one direction segment g carries tag g (at most MPIAR__SEGMENTS_MAX
 * segments, so tags never repeat).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/tree.h"
#include "base/common.h"

size_t mpiar__tree_segment(size_t n, size_t seg) {
  const size_t floor = (n + MPIAR__SEGMENTS_MAX - 1) / MPIAR__SEGMENTS_MAX;
  if (seg == 0 || seg >= n) {
    return n;
  }
  return seg > floor ? seg : floor;
}

int mpiar__build_tree(mpiar__schedule_t *s, const mpiar__tree_node_t *node) {
  const size_t n = s->count;
  const int nc = node->nchildren, ip = s->in_place;
  int rc = MPIAR_SUCCESS;
  long *reader = NULL; /* per (child, parity): the last fold that read the slot */
  long id = -1;
  const size_t seg = mpiar__tree_segment(n, s->segment_elems);
  const size_t nseg = (n + seg - 1) / seg;
  const size_t slots = nseg > 1 ? 2 : 1;
  s->scratch_elems = (size_t)nc * slots * seg;
  if (nc > 0) {
    reader = malloc((size_t)nc * 2 * sizeof *reader);
    if (reader == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "tree schedule of %d children", nc);
    }
    for (int i = 0; i < 2 * nc; i++) {
      reader[i] = -1;
    }
  }
  for (size_t g = 0; g < nseg; g++) {
    const size_t off = g * seg, len = n - off < seg ? n - off : seg;
    const int tag = (int)g;
    long rcv[64 * 8];
    for (int c = 0; c < nc; c++) {
      const size_t slot = (size_t)c * slots + g % slots;
      const long deps[] = {reader[slot]};
      MPIAR__STEP(rcv[c], mpiar__sched_recv(s, node->children[c], tag, mpiar__scratch(slot * seg),
                                            len, deps, 1));
    }
    long acc = -1; /* the fold's last step (OUTPUT holds it), or -1: the rank's own segment */
    for (int c = 0; c < nc; c++) {
      const size_t slot = (size_t)c * slots + g % slots;
      const long deps[] = {rcv[c], acc};
      MPIAR__STEP(acc, mpiar__sched_reduce(s, mpiar__out(off),
                                           c == 0 ? mpiar__own(s, off) : mpiar__out(off),
                                           mpiar__scratch(slot * seg), len, deps, 2));
      reader[slot] = acc;
    }
    if (node->parent < 0) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, acc));
    }
    long up = -1;
    if (node->parent >= 0) {
      const long deps[] = {acc};
      const mpiar__operand_t src = acc >= 0 ? mpiar__out(off) : mpiar__own(s, off);
      MPIAR__STEP(up, mpiar__sched_send(s, node->parent, tag, src, len, deps, 1));
      /* The result overwrites what the send to the parent reads (OUTPUT, or INPUT in place). */
      const long rdeps[] = {(acc >= 0 || ip) ? up : -1};
      MPIAR__STEP(acc, mpiar__sched_recv(s, node->parent, tag, mpiar__out(off), len, rdeps, 1));
    }
    for (int c = nc - 1; c >= 0; c--) {
      const long deps[] = {acc};
      MPIAR__STEP(id, mpiar__sched_send(s, node->children[c], tag, mpiar__out(off), len, deps, 1));
    }
  }

cleanup:
  free(reader);
  return rc;
}

/*
 * The two-level rule of the simulator: a message between two nodes leaves through its sender's
 * node port and arrives through its receiver's, each taking one message at a time (T_inter
 * each); inside a node it takes the ranks' own ports (T). `port` holds each node's send and
 * receive port's free time, claimed in the order the sweep meets the messages.
 */
typedef struct links {
  const mpiar__topology_t *topo; /* NULL: one level */
  double T, Ti;
  double *port; /* [2 nnodes]: send side, receive side */
  int *busy;    /* [2 nnodes]: inter-node messages per segment through each side */
} links_t;

static int inter(const links_t *l, int a, int b) {
  return l->topo != NULL && l->topo->node_of[a] != l->topo->node_of[b];
}

/* When a message from @p a to @p b ready at @p ready arrives through the node ports. */
static double node_hop(links_t *l, int a, int b, double ready) {
  double *snd = &l->port[2 * l->topo->node_of[a]], *rcv = &l->port[2 * l->topo->node_of[b] + 1];
  double start = ready > *snd ? ready : *snd;
  start = start > *rcv ? start : *rcv;
  *snd = *rcv = start + l->Ti;
  l->busy[2 * l->topo->node_of[a]]++;
  l->busy[2 * l->topo->node_of[b] + 1]++;
  return start + l->Ti;
}

/* The reduce's sweep: up[r] when rank r's fold is done; the busiest rank's time per segment. */
static double reduce_sweep(int p, int k, mpiar__tree_shape_fn shape, double G, links_t *l,
                           mpiar__tree_node_t *node, double *up) {
  double period = 0.0;
  /* Children have higher ranks, so a descending sweep sees them first. */
  for (int r = p - 1; r >= 0; r--) {
    shape(p, r, k, node);
    const int nc = node->nchildren;
    double port = 0.0, fold = 0.0;
    /* The receive port takes the children's results in the order they are ready (ties: the
     * lower rank first, as they are posted). */
    double arrive[64 * 8];
    int order[64 * 8];
    for (int i = 0; i < nc; i++) {
      order[i] = i;
    }
    for (int i = 1; i < nc; i++) { /* insertion sort by ready time, stable */
      const int x = order[i];
      int j = i - 1;
      while (j >= 0 && up[node->children[order[j]]] > up[node->children[x]]) {
        order[j + 1] = order[j];
        j--;
      }
      order[j + 1] = x;
    }
    int own = node->parent >= 0 && !inter(l, r, node->parent);
    for (int i = 0; i < nc; i++) {
      const int ch = node->children[order[i]];
      const double ready = up[ch];
      if (inter(l, ch, r)) {
        arrive[order[i]] = node_hop(l, ch, r, ready);
      } else {
        port = (ready > port ? ready : port) + l->T;
        arrive[order[i]] = port;
        own++;
      }
    }
    for (int i = 0; i < nc; i++) {
      fold = (arrive[i] > fold ? arrive[i] : fold) + G;
    }
    up[r] = fold;
    /* Per segment its own ports carry each intra-node message once each way (up and down). */
    double b = own * l->T;
    b = b > nc * G ? b : nc * G;
    period = b > period ? b : period;
  }
  return period;
}

double mpiar__tree_time(int p, int k, mpiar__tree_shape_fn shape, double S, double m,
                        const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  links_t l = {topo, c->alpha + S * c->beta, c->alpha_inter + S * c->beta_inter, NULL, NULL};
  const double G = S * c->gamma;
  const size_t nn = topo != NULL ? (size_t)topo->nnodes : 0;
  double *up = calloc(2 * (size_t)p + 2 * nn, sizeof *up); /* per rank: fold; result; ports */
  int *busy = calloc(2 * nn + 1, sizeof *busy);
  mpiar__tree_node_t *node = malloc(sizeof *node);
  if (up == NULL || node == NULL || busy == NULL) {
    free(up);
    free(busy);
    free(node);
    return INFINITY;
  }
  double *down = up + p;
  l.port = down + p;
  l.busy = busy;
  double t = 0.0;
  double period = reduce_sweep(p, k, shape, G, &l, node, up);
  /* Broadcast: parents have lower ranks; each sends to its children, largest subtree first,
   * once the reduce has left every port. */
  for (size_t i = 0; i < 2 * nn; i++) {
    l.port[i] = 0.0;
  }
  down[0] = up[0];
  for (int r = 0; r < p; r++) {
    shape(p, r, k, node);
    double send = down[r];
    for (int i = node->nchildren - 1; i >= 0; i--) {
      const int ch = node->children[i];
      if (inter(&l, r, ch)) {
        down[ch] = node_hop(&l, r, ch, down[r]);
      } else {
        send += l.T;
        down[ch] = send;
      }
    }
    t = down[r] > t ? down[r] : t;
  }
  /* A node port carries its ranks' inter-node messages of a segment, each way. */
  for (size_t i = 0; i < 2 * nn; i++) {
    period = busy[i] * l.Ti > period ? busy[i] * l.Ti : period;
  }
  free(up);
  free(busy);
  free(node);
  return t + (m - 1) * period;
}

int mpiar__build_shaped_tree(mpiar__schedule_t *s, int k, mpiar__tree_shape_fn shape) {
  int done = 0;
  int rc = mpiar__build_trivial(s, &done);
  if (rc != MPIAR_SUCCESS || done) {
    return rc;
  }
  mpiar__tree_node_t node;
  shape(s->nranks, s->rank, k, &node);
  return mpiar__build_tree(s, &node);
}

double mpiar__tree_cost(int k, mpiar__tree_shape_fn shape, int nranks, size_t bytes,
                        size_t elem_size, size_t segment_bytes, const mpiar__cost_params_t *c,
                        const mpiar__topology_t *topo) {
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t l;
  const int one = mpiar__cost_one_level(topo, c, &l);
  const size_t n = bytes / elem_size;
  const size_t seg = mpiar__tree_segment(n, segment_bytes / elem_size);
  const double m = ceil((double)n / (double)seg);
  return mpiar__tree_time(nranks, k, shape, (double)(seg * elem_size), m, &l, one ? NULL : topo);
}
