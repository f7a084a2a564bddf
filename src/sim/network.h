/*
 * Routed networks for the simulator: a d-dimensional torus with dimension-order routing, and a
 * two-level fat tree with an oversubscribed leaf uplink. One rank per network node (host), in
 * rank order. A network is a list of directed links, each with a capacity in link bandwidths;
 * a route is the list of links a message crosses. sim.c moves messages over them (sim.h,
 * "Routed networks").
 *
 * Torus "torus:D0xD1x...": node r has coordinates c_i = (r / (D0 ... D_{i-1})) mod D_i (the first
 * dimension varies fastest). Every node has one link per dimension and direction (+ and -), each
 * direction its own link (full duplex). A message goes dimension by dimension, 0 first, the
 * shorter way round each ring (+ on a tie, as when D_i = 2). Capacity 1 per link.
 *
 * Fat tree "fattree:k=K,over=O": leaf switches of K hosts (rank r on leaf r / K), each host with
 * one link up to its leaf and one down (capacity 1); each leaf one aggregate link up to the core
 * and one down, of capacity K / O (O >= 1 the oversubscription: O = 1 full bisection, O = 2 half);
 * the core does not block. Inside a leaf a message crosses 2 links, between leaves 4.
 */
#ifndef MPIAR_SIM_NETWORK_H
#define MPIAR_SIM_NETWORK_H

#include <stddef.h>

enum { MPIAR__NET_TORUS = 1, MPIAR__NET_FATTREE = 2 };
#define MPIAR__NET_MAX_DIMS 8

typedef struct mpiar__network {
  int kind;                      /* MPIAR__NET_* */
  int ndims;                     /* torus */
  int dims[MPIAR__NET_MAX_DIMS]; /* torus: nodes along each dimension, each >= 2 */
  int leaf;                      /* fat tree: hosts per leaf switch */
  double over;                   /* fat tree: oversubscription of the leaf uplink, >= 1 */
  double hop_latency;            /* seconds added per link crossed (0: none) */
} mpiar__network_t;

/*
 * Parse "torus:8x8", "torus:4x4x4", "fattree:k=16,over=2" (over defaults to 1) into @p net
 * (hop_latency 0). @return 0, or -1 with the reason in @p err.
 */
int mpiar__network_parse(const char *spec, mpiar__network_t *net, char *err, size_t errlen);

/* The ranks a torus holds (the product of its dimensions); 0 for a fat tree (any count). */
int mpiar__network_nodes(const mpiar__network_t *net);

/* Directed links of @p net for @p nranks ranks. */
int mpiar__network_links(const mpiar__network_t *net, int nranks);

/* The most links one route crosses. */
int mpiar__network_max_hops(const mpiar__network_t *net);

/* Capacity of link @p l in link bandwidths (1, or a fat-tree leaf's K / O). */
double mpiar__network_capacity(const mpiar__network_t *net, int nranks, int l);

/*
 * The links a message from @p src to @p dst crosses, in order, into @p links (room for
 * mpiar__network_max_hops()). @return their number (0 when src == dst).
 */
int mpiar__network_route(const mpiar__network_t *net, int nranks, int src, int dst, int *links);

/* A name for link @p l: "3+x1" (node 3, dimension 1, + direction), "host 5 up", "leaf 2 down". */
void mpiar__network_link_name(const mpiar__network_t *net, int nranks, int l, char *buf,
                              size_t len);

/* "torus 8x8 (64 nodes)" or "fat tree, 16 hosts per leaf, uplink oversubscribed 2:1". */
void mpiar__network_describe(const mpiar__network_t *net, char *buf, size_t len);

#endif /* MPIAR_SIM_NETWORK_H */
