/* Routed networks: parsing, links and routes (network.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/network.h"

static int parse_int(const char **s, long lo, long hi, long *out) {
  char *end;
  long v = strtol(*s, &end, 10);
  if (end == *s || v < lo || v > hi) {
    return -1;
  }
  *s = end;
  *out = v;
  return 0;
}

int mpiar__network_parse(const char *spec, mpiar__network_t *net, char *err, size_t errlen) {
  memset(net, 0, sizeof *net);
  if (spec == NULL) {
    snprintf(err, errlen, "no network given");
    return -1;
  }
  if (strncmp(spec, "torus:", 6) == 0) {
    const char *s = spec + 6;
    long total = 1;
    net->kind = MPIAR__NET_TORUS;
    for (;;) {
      long d;
      if (net->ndims == MPIAR__NET_MAX_DIMS || parse_int(&s, 2, 4096, &d) != 0) {
        snprintf(err, errlen,
                 "'%s': a torus is D0xD1x... with 1 to %d dimensions of 2 to 4096 nodes", spec,
                 MPIAR__NET_MAX_DIMS);
        return -1;
      }
      net->dims[net->ndims++] = (int)d;
      total *= d;
      if (total > (1L << 20)) {
        snprintf(err, errlen, "'%s': more than %ld nodes", spec, 1L << 20);
        return -1;
      }
      if (*s == '\0') {
        return 0;
      }
      if (*s != 'x') {
        snprintf(err, errlen, "'%s': dimensions are separated by 'x'", spec);
        return -1;
      }
      s++;
    }
  }
  if (strncmp(spec, "fattree:", 8) == 0) {
    const char *s = spec + 8;
    long k;
    net->kind = MPIAR__NET_FATTREE;
    net->over = 1.0;
    if (strncmp(s, "k=", 2) != 0 || (s += 2, parse_int(&s, 1, 1 << 16, &k)) != 0) {
      snprintf(err, errlen, "'%s': a fat tree is fattree:k=K[,over=O] (K hosts per leaf)", spec);
      return -1;
    }
    net->leaf = (int)k;
    if (strncmp(s, ",over=", 6) == 0) {
      char *end;
      net->over = strtod(s + 6, &end);
      if (end == s + 6 || !(net->over >= 1.0 && net->over <= 1024.0)) {
        snprintf(err, errlen, "'%s': over=O is the uplink oversubscription, 1 <= O <= 1024", spec);
        return -1;
      }
      s = end;
    }
    if (*s != '\0') {
      snprintf(err, errlen, "'%s': unexpected '%s'", spec, s);
      return -1;
    }
    return 0;
  }
  snprintf(err, errlen, "'%s': not torus:D0xD1x... or fattree:k=K[,over=O]", spec);
  return -1;
}

int mpiar__network_nodes(const mpiar__network_t *net) {
  if (net->kind != MPIAR__NET_TORUS) {
    return 0;
  }
  int n = 1;
  for (int i = 0; i < net->ndims; i++) {
    n *= net->dims[i];
  }
  return n;
}

static int leaves(const mpiar__network_t *net, int nranks) {
  return (nranks + net->leaf - 1) / net->leaf;
}

int mpiar__network_links(const mpiar__network_t *net, int nranks) {
  if (net->kind == MPIAR__NET_TORUS) {
    return mpiar__network_nodes(net) * net->ndims * 2;
  }
  return 2 * nranks + 2 * leaves(net, nranks);
}

int mpiar__network_max_hops(const mpiar__network_t *net) {
  if (net->kind != MPIAR__NET_TORUS) {
    return 4;
  }
  int h = 0;
  for (int i = 0; i < net->ndims; i++) {
    h += net->dims[i] / 2;
  }
  return h;
}

double mpiar__network_capacity(const mpiar__network_t *net, int nranks, int l) {
  if (net->kind == MPIAR__NET_FATTREE && l >= 2 * nranks) {
    return (double)net->leaf / net->over;
  }
  return 1.0;
}

/* Torus link index: node, dimension, direction (0: +, 1: -). */
static int torus_link(const mpiar__network_t *net, int node, int dim, int dir) {
  return (node * net->ndims + dim) * 2 + dir;
}

int mpiar__network_route(const mpiar__network_t *net, int nranks, int src, int dst, int *links) {
  int n = 0;
  if (src == dst) {
    return 0;
  }
  if (net->kind == MPIAR__NET_FATTREE) {
    const int ls = src / net->leaf, ld = dst / net->leaf, nl = leaves(net, nranks);
    links[n++] = src; /* host src up */
    if (ls != ld) {
      links[n++] = 2 * nranks + ls;      /* leaf ls up */
      links[n++] = 2 * nranks + nl + ld; /* leaf ld down */
    }
    links[n++] = nranks + dst; /* host dst down */
    return n;
  }
  int node = src, stride = 1;
  for (int d = 0; d < net->ndims; d++) {
    const int D = net->dims[d];
    const int cs = (src / stride) % D, cd = (dst / stride) % D;
    const int fwd = ((cd - cs) % D + D) % D;
    const int dir = fwd <= D - fwd ? 0 : 1;
    const int hops = dir == 0 ? fwd : D - fwd;
    int c = cs;
    for (int h = 0; h < hops; h++) {
      links[n++] = torus_link(net, node, d, dir);
      const int next = dir == 0 ? (c + 1) % D : (c + D - 1) % D;
      node += (next - c) * stride;
      c = next;
    }
    stride *= D;
  }
  return n;
}

void mpiar__network_link_name(const mpiar__network_t *net, int nranks, int l, char *buf,
                              size_t len) {
  if (net->kind == MPIAR__NET_TORUS) {
    snprintf(buf, len, "%d%cx%d", l / (2 * net->ndims), l % 2 ? '-' : '+', (l / 2) % net->ndims);
    return;
  }
  const int nl = leaves(net, nranks);
  if (l < nranks) {
    snprintf(buf, len, "host %d up", l);
  } else if (l < 2 * nranks) {
    snprintf(buf, len, "host %d down", l - nranks);
  } else if (l < 2 * nranks + nl) {
    snprintf(buf, len, "leaf %d up", l - 2 * nranks);
  } else {
    snprintf(buf, len, "leaf %d down", l - 2 * nranks - nl);
  }
}

void mpiar__network_describe(const mpiar__network_t *net, char *buf, size_t len) {
  if (net->kind == MPIAR__NET_TORUS) {
    size_t used = (size_t)snprintf(buf, len, "torus ");
    for (int i = 0; i < net->ndims && used < len; i++) {
      used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "x" : "", net->dims[i]);
    }
    if (used < len) {
      snprintf(buf + used, len - used, " (%d nodes, dimension-order routing)",
               mpiar__network_nodes(net));
    }
    return;
  }
  snprintf(buf, len, "fat tree, %d hosts per leaf, leaf uplink %g:1 oversubscribed", net->leaf,
           net->over);
}
