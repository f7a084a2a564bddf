/*
 * Routed networks in the simulator (sim.h, "Routed networks"; network.h): routes, and the time of
 * hand-computable patterns on a torus and a fat tree (one message over 3 hops, two messages
 * sharing a link, opposite directions, dimension order, max-min sharing, an oversubscribed
 * uplink), the link report, refused configurations, and Swing's shorter hops against recursive
 * doubling and Rabenseifner on a ring.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/util.h"
#include "base/common.h"
#include "sim/sim.h"
#include "sim_test.h"

/* alpha 1 us, 1 GB/s links, 100 ns per hop; messages of N elements of 4 bytes. */
static const mpiar__cost_params_t model = {1e-6, 1e-9, 0, 1e-6, 1e-9, 0, 0};
#define HOP 1e-7
#define N 1000
#define NB (N * 4.0)

/* The pattern the test builder sends: message i from src[i] to dst[i], len[i] elements. */
static struct {
  int n, src[8], dst[8];
  size_t len[8];
} pat;

static int build_pattern(mpiar__schedule_t *s) {
  for (int i = 0; i < pat.n; i++) {
    long id = 0;
    if (pat.src[i] == s->rank) {
      id = mpiar__sched_send(s, pat.dst[i], i, mpiar__in(0), pat.len[i], NULL, 0);
    }
    if (id >= 0 && pat.dst[i] == s->rank) {
      id = mpiar__sched_recv(s, pat.src[i], i, mpiar__out(0), pat.len[i], NULL, 0);
    }
    if (id < 0) {
      return (int)id;
    }
  }
  return MPIAR_SUCCESS;
}

static const mpiar__algorithm_t pattern = {
    .name = "pattern", .build = build_pattern, .summary = "test"};

static mpiar__sim_result_t run(const char *spec, int p, const mpiar__algorithm_t *alg, size_t count,
                               int data, double *links) {
  mpiar__network_t net;
  char err[200];
  mpiar__sim_result_t res;
  memset(&res, 0, sizeof res);
  if (mpiar__network_parse(spec, &net, err, sizeof err) != 0) {
    EXPECT(0, "%s", err);
    return res;
  }
  net.hop_latency = HOP;
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.data = data;
  cfg.check_hazards = data ? -1 : 0;
  cfg.cost = model;
  cfg.network = &net;
  cfg.link_bytes = links;
  int rc = mpiar__sim_run(&cfg, &res);
  EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s %s p=%d: %s", spec, alg->name, p,
         rc ? mpiar_last_error() : res.error);
  return res;
}

/* Run the pattern; its time must be @p want. */
static mpiar__sim_result_t expect_pattern(const char *what, const char *spec, int p, double want) {
  mpiar__sim_result_t r = run(spec, p, &pattern, N * 2, 0, NULL);
  EXPECT(fabs(r.time_s - want) <= 1e-12 + 1e-9 * want, "%s on %s: %.9g s, expected %.9g s", what,
         spec, r.time_s, want);
  return r;
}

static void set_pattern(int n, const int *src, const int *dst, const size_t *len) {
  pat.n = n;
  for (int i = 0; i < n; i++) {
    pat.src[i] = src[i];
    pat.dst[i] = dst[i];
    pat.len[i] = len != NULL ? len[i] : N;
  }
}

static void routes(void) {
  mpiar__network_t net;
  char err[200], name[64];
  int links[64];
  EXPECT(mpiar__network_parse("torus:4x4", &net, err, sizeof err) == 0, "%s", err);
  /* 0 = (0,0) to 5 = (1,1): x first (0 +x), then y from node 1 (1 +y). */
  int n = mpiar__network_route(&net, 16, 0, 5, links);
  mpiar__network_link_name(&net, 16, links[0], name, sizeof name);
  EXPECT(n == 2 && strcmp(name, "0+x0") == 0, "route 0 -> 5: %d hops, first %s", n, name);
  mpiar__network_link_name(&net, 16, links[1], name, sizeof name);
  EXPECT(strcmp(name, "1+x1") == 0, "route 0 -> 5, second link %s", name);
  /* 0 to 3 = (3,0): one hop the short way, -x. */
  n = mpiar__network_route(&net, 16, 0, 3, links);
  mpiar__network_link_name(&net, 16, links[0], name, sizeof name);
  EXPECT(n == 1 && strcmp(name, "0-x0") == 0, "route 0 -> 3: %d hops, %s", n, name);
  EXPECT(mpiar__network_links(&net, 16) == 64 && mpiar__network_max_hops(&net) == 4,
         "torus 4x4: %d links, %d max hops", mpiar__network_links(&net, 16),
         mpiar__network_max_hops(&net));
  EXPECT(mpiar__network_parse("torus:4x4x4", &net, err, sizeof err) == 0 &&
             mpiar__network_nodes(&net) == 64 && mpiar__network_route(&net, 64, 0, 63, links) == 3,
         "torus 4x4x4");
  EXPECT(mpiar__network_parse("fattree:k=16,over=2", &net, err, sizeof err) == 0 &&
             net.leaf == 16 && net.over == 2.0 &&
             mpiar__network_route(&net, 64, 3, 9, links) == 2 &&
             mpiar__network_route(&net, 64, 3, 17, links) == 4,
         "fat tree routes");
  const char *bad[] = {"torus:",        "torus:1x4",   "torus:4x",
                       "torus:4y4",     "fattree:k=0", "fattree:k=4,over=0.5",
                       "fattree:k=4,x", "mesh:4",      NULL};
  for (int i = 0; bad[i] != NULL; i++) {
    EXPECT(mpiar__network_parse(bad[i], &net, err, sizeof err) != 0, "'%s' accepted", bad[i]);
  }
}

static void patterns(void) {
  const double a = model.alpha, b = model.beta;
  /* One message across 3 hops of a ring of 8. */
  set_pattern(1, (int[]){0}, (int[]){3}, NULL);
  mpiar__sim_result_t r = expect_pattern("0 -> 3", "torus:8", 8, a + NB * b + 3 * HOP);
  EXPECT(r.hops_total == 3 && r.hops_max == 3 && r.link_bytes_max == NB &&
             r.link_bytes_total == 3 * NB && r.links == 16,
         "0 -> 3: %zu hops, max %d, busiest %g B, total %g B, %d links", r.hops_total, r.hops_max,
         r.link_bytes_max, r.link_bytes_total, r.links);
  /* Two messages through one link (1 -> 2) share it: twice the bytes term. */
  set_pattern(2, (int[]){0, 1}, (int[]){2, 3}, NULL);
  r = expect_pattern("0 -> 2 and 1 -> 3", "torus:8", 8, a + 2 * NB * b + 2 * HOP);
  EXPECT(r.link_bytes_max == 2 * NB, "shared link carried %g B", r.link_bytes_max);
  /* The two directions of a link are independent. */
  set_pattern(2, (int[]){0, 1}, (int[]){1, 0}, NULL);
  expect_pattern("0 -> 1 and 1 -> 0", "torus:8", 8, a + NB * b + HOP);
  /* Dimension order on 4x4: 0 -> 5 goes x then y through 1, meeting 1 -> 9 on 1 +y. */
  set_pattern(2, (int[]){0, 1}, (int[]){5, 9}, NULL);
  expect_pattern("0 -> 5 and 1 -> 9", "torus:4x4", 16, a + 2 * NB * b + 2 * HOP);
  /* ... while 0 -> 5 and 4 -> 6 share nothing (4 -> 5 -> 6 along x of row 1). */
  set_pattern(2, (int[]){0, 4}, (int[]){5, 6}, NULL);
  expect_pattern("0 -> 5 and 4 -> 6", "torus:4x4", 16, a + NB * b + 2 * HOP);
  /*
   * Max-min: B 0 -> 2, C 1 -> 2 and D 1 -> 3 share link 1 +x (1/3 each); A 0 -> 1 (2N elements)
   * shares 0 +x with B only, so it gets the 2/3 that B leaves, and ends with the others at
   * 3 N beta (an equal split of 0 +x would end A at 4 N beta).
   */
  set_pattern(4, (int[]){0, 0, 1, 1}, (int[]){1, 2, 2, 3}, (size_t[]){2 * N, N, N, N});
  expect_pattern("max-min", "torus:8", 8, a + 3 * NB * b + 2 * HOP);
  /* Fat tree, leaves of 4: four messages between leaves share one uplink of capacity 4 / over. */
  set_pattern(4, (int[]){0, 1, 2, 3}, (int[]){4, 5, 6, 7}, NULL);
  expect_pattern("leaf 0 -> leaf 1, over 2", "fattree:k=4,over=2", 8, a + 2 * NB * b + 4 * HOP);
  expect_pattern("leaf 0 -> leaf 1, over 1", "fattree:k=4", 8, a + NB * b + 4 * HOP);
  /* Inside a leaf: 2 hops; two messages into one host share its down link. */
  set_pattern(2, (int[]){0, 1}, (int[]){2, 2}, NULL);
  expect_pattern("into host 2", "fattree:k=4,over=2", 8, a + 2 * NB * b + 2 * HOP);
}

static void refused(void) {
  mpiar__network_t net;
  char err[200];
  mpiar__network_parse("torus:4x4", &net, err, sizeof err);
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = mpiar__algorithm_find("ring");
  cfg.nranks = 10;
  cfg.count = 100;
  cfg.network = &net;
  mpiar__sim_result_t res;
  EXPECT(mpiar__sim_run(&cfg, &res) == MPIAR_ERR_INVALID_ARG, "10 ranks on a 4x4 torus accepted");
}

/* The algorithms on a ring of 16 and a 4x4 torus: correct data, and Swing's shorter hops. */
static void algorithms(void) {
  const char *names[] = {"swing", "swing_latency", "recursive_doubling", "rabenseifner", "ring"};
  mpiar__sim_result_t r[5];
  for (int i = 0; i < 5; i++) {
    const mpiar__algorithm_t *alg = mpiar__algorithm_find(names[i]);
    run("torus:4x4", 16, alg, 16 * 37 + 5, 1, NULL);
    run("fattree:k=4,over=2", 12, alg, 12 * 37 + 5, 1, NULL);
    r[i] = run("torus:16", 16, alg, (size_t)1 << 18, 0, NULL);
  }
  /* Recursive doubling's step j crosses 2^j links, Swing's |rho(j)| = 1, 1, 3, 5. */
  EXPECT(r[1].hops_total < r[2].hops_total && r[1].time_s < r[2].time_s,
         "swing_latency %zu hops %.6g s vs recursive doubling %zu hops %.6g s", r[1].hops_total,
         r[1].time_s, r[2].hops_total, r[2].time_s);
  EXPECT(r[0].link_bytes_max < r[3].link_bytes_max && r[0].time_s < r[3].time_s,
         "swing busiest link %g B %.6g s vs rabenseifner %g B %.6g s", r[0].link_bytes_max,
         r[0].time_s, r[3].link_bytes_max, r[3].time_s);
  /* The ring's neighbours are one hop away: every message crosses one link. */
  EXPECT(r[4].hops_max == 1, "ring: %d hops max", r[4].hops_max);
}

int main(void) {
  routes();
  patterns();
  refused();
  algorithms();
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
