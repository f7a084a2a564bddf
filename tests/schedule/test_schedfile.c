/*
 * Schedule files without MPI (label schedule): the round trip (every registry algorithm, instance
 * and research variant exported for several p, in and out of place, read back: the same steps
 * at the exported count and the same result bits in the simulator), damaged and hostile texts
 * (each refused with its line and field, every truncation and many byte changes of a valid file
 * without a crash), files that parse but fail verification, the fit of a call, non-regular
 * paths and the name "file:PATH".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/test_check.h"
#include "algorithms/algorithms.h"
#include "schedule/schedfile.h"
#include "sim/schedfile_alg.h"
#include "sim/sim.h"

static char dir[256];
static int nfiles;
static int exported; /* round trips that ran (the builder took p) */

/* A file of @p text in the test's directory; returns its path (static storage, 16 in turn). */
static const char *put(const char *text, size_t len) {
  static char paths[16][320];
  char *path = paths[nfiles % 16];
  snprintf(path, sizeof paths[0], "%s/f%d.sched", dir, nfiles++);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
  return path;
}

/* Rank r's steps of @p a and @p b are the same steps. */
static int same_steps(const mpiar__schedule_t *a, const mpiar__schedule_t *b) {
  if (a->nsteps != b->nsteps || a->ndeps != b->ndeps) {
    return 0;
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    const mpiar__step_t *x = &a->steps[i], *y = &b->steps[i];
    int same = x->kind == y->kind && x->count == y->count && x->ndeps == y->ndeps &&
               x->final == y->final;
    if (x->kind == MPIAR__STEP_SEND || x->kind == MPIAR__STEP_RECV) {
      same = same && x->peer == y->peer && x->tag == y->tag;
    }
    if (x->kind != MPIAR__STEP_SEND) {
      same = same && x->dst.buf == y->dst.buf && x->dst.off == y->dst.off;
    }
    if (x->kind != MPIAR__STEP_RECV) {
      same = same && x->a.buf == y->a.buf && x->a.off == y->a.off;
    }
    if (x->kind == MPIAR__STEP_REDUCE) {
      same = same && x->b.buf == y->b.buf && x->b.off == y->b.off;
    }
    for (uint32_t d = 0; same && d < x->ndeps; d++) {
      same = a->deps[x->dep_first + d] == b->deps[y->dep_first + d];
    }
    if (!same) {
      return 0;
    }
  }
  return 1;
}

/* Export @p alg for p ranks, read it back, compare steps and result bits. */
static void round_trip(const mpiar__algorithm_t *alg, int p, int in_place, size_t count,
                       const mpiar__topology_t *topo) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.in_place = in_place;
  cfg.topology = topo;
  mpiar__schedule_t s[16];
  int built = 0;
  for (; built < p; built++) {
    if (mpiar__sim_build(&cfg, built, &s[built]) != MPIAR_SUCCESS) {
      break;
    }
  }
  if (built < p) { /* the builder does not take this p: nothing to export */
    for (int r = 0; r < built; r++) {
      mpiar__schedule_destroy(&s[r]);
    }
    return;
  }
  exported++;
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  char err[512];
  int rc = mpiar__schedfile_write(mem, alg->name, s, p,
                                  (alg->flags & MPIAR__ALG_CANONICAL)
                                      ? MPIAR__SCHEDFILE_ORDER_CANONICAL
                                      : MPIAR__SCHEDFILE_ORDER_NONE,
                                  err, sizeof err);
  fclose(mem);
  EXPECT(rc == MPIAR_SUCCESS, "%s p=%d: write: %s", alg->name, p, err);
  /* The name line of a parameterised entry: its '/' and '=' are not in the format's names. */
  for (char *q = strstr(text, "\nname "); q != NULL && *++q != '\n';) {
    if (*q == '/' || *q == '=') {
      *q = '_';
    }
  }
  mpiar__schedfile_t f;
  rc = mpiar__schedfile_parse("exported", text, len, &f, err, sizeof err);
  EXPECT(rc == MPIAR_SUCCESS, "%s p=%d in_place=%d: parse: %s", alg->name, p, in_place, err);
  if (rc == MPIAR_SUCCESS) {
    for (int r = 0; r < p; r++) {
      mpiar__schedule_t t;
      mpiar__schedule_init(&t, r, p, count, s[r].elem_size, in_place, "file", 0);
      rc = mpiar__schedfile_instantiate(&f, &t);
      EXPECT(rc == MPIAR_SUCCESS && same_steps(&s[r], &t) && t.scratch_elems >= s[r].scratch_elems,
             "%s p=%d in_place=%d rank %d: the file's steps differ from the builder's", alg->name,
             p, in_place, r);
      mpiar__schedule_destroy(&t);
    }
    /* Run from the file: the same bits as the builder (float32 sum). */
    const mpiar__algorithm_t *fa = mpiar__schedfile_algorithm(put(text, len));
    CHECK(fa != NULL, "file entry");
    float *want = calloc(count + 1, sizeof *want), *got = calloc(count + 1, sizeof *got);
    mpiar__sim_result_t res;
    cfg.result = want;
    rc = mpiar__sim_run(&cfg, &res);
    EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d: the builder's run: %s", alg->name, p,
           res.error);
    mpiar__sim_config_t fc = cfg;
    fc.algorithm = mpiar__schedfile_unverified(fa);
    fc.topology = NULL; /* the file's steps are built for the topology already */
    fc.result = got;
    rc = mpiar__sim_run(&fc, &res);
    EXPECT(rc == MPIAR_SUCCESS && res.ok && memcmp(want, got, count * sizeof *got) == 0,
           "%s p=%d in_place=%d: the file's run: %s", alg->name, p, in_place,
           res.ok ? "different bits" : res.error);
    char why[1024];
    EXPECT(mpiar__schedfile_fit(fa, p, count, in_place, why, sizeof why),
           "%s p=%d in_place=%d: verification: %s", alg->name, p, in_place, why);
    free(want);
    free(got);
    mpiar__schedfile_free(&f);
  }
  free(text);
  for (int r = 0; r < p; r++) {
    mpiar__schedule_destroy(&s[r]);
  }
}

static void round_trips(void) {
  static const int ps[] = {1, 2, 3, 4, 5, 8};
  const mpiar__algorithm_t *tables[] = {mpiar__algorithms, mpiar__algorithm_instances,
                                        mpiar__algorithm_variants};
  const int counts[] = {mpiar__algorithm_count, mpiar__algorithm_instance_count,
                        mpiar__algorithm_variant_count};
  int n = 0;
  for (int t = 0; t < 3; t++) {
    for (int a = 0; a < counts[t]; a++) {
      for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        round_trip(&tables[t][a], ps[i], (int)(i + a) % 2, (size_t)ps[i] * 96, NULL);
        n++;
      }
    }
  }
  /* Two levels: the hierarchical builders' own schedules on 2 nodes of 4. */
  mpiar__topology_t topo;
  if (mpiar__topology_regular(&topo, 2, 4, 0) == MPIAR_SUCCESS) {
    for (int a = 0; a < mpiar__algorithm_count; a++) {
      if (mpiar__algorithms[a].flags & MPIAR__ALG_HIERARCHICAL) {
        round_trip(&mpiar__algorithms[a], 8, 0, 8 * 96, &topo);
        n++;
      }
    }
    mpiar__topology_destroy(&topo);
  }
  printf("round trips: %d tried, %d exported and run from their file\n", n, exported);
}

/* ---- damaged and hostile texts ---- */

#define HEAD "mpiar-schedule 1\ncollective allreduce\nranks 2\nchunks 2\nscratch 0\n"
#define HEAD_FULL HEAD "inplace no\norder none\n"
/* Ring on 2 ranks, out of place. */
static const char ring2[] = HEAD_FULL "rank 0\n"
                                      "send 1 0 i0 1\n"
                                      "recv 1 0 o1 1\n"
                                      "reduce o1 i1 o1 1 final : 1\n"
                                      "send 1 1 o1 1 : 2\n"
                                      "recv 1 1 o0 1\n"
                                      "rank 1\n"
                                      "send 0 0 i1 1\n"
                                      "recv 0 0 o0 1\n"
                                      "reduce o0 o0 i0 1 final : 1\n"
                                      "send 0 1 o0 1 : 2\n"
                                      "recv 0 1 o1 1\n"
                                      "end\n";

static void expect_refused(const char *text, const char *words) {
  mpiar__schedfile_t f;
  char err[512] = "";
  int rc = mpiar__schedfile_parse("t.sched", text, strlen(text), &f, err, sizeof err);
  EXPECT(rc != MPIAR_SUCCESS && strstr(err, words) != NULL && strncmp(err, "t.sched", 7) == 0,
         "expected '%s', got rc %d: '%s' for:\n%s", words, rc, err, text);
  if (rc == MPIAR_SUCCESS) {
    mpiar__schedfile_free(&f);
  }
}

static void hostile(void) {
  mpiar__schedfile_t f;
  char err[512];
  CHECK(mpiar__schedfile_parse("ring2", ring2, strlen(ring2), &f, err, sizeof err) == 0, "%s",
        err);
  CHECK(f.nranks == 2 && f.chunks == 2 && f.nsteps == 10 && f.has_final, "parsed ring2");
  mpiar__schedfile_free(&f);
  /* Comments (whole lines and line ends), blank lines, CRLF and tabs are accepted. */
  static const char commented[] = "# a comment\r\n\r\nmpiar-schedule 1\r\ncollective\tallreduce\n"
                                  "ranks 1 # one rank\nchunks 1\nscratch 0\ninplace yes\n"
                                  "order canonical\nname x-1.y_z #a comment\nrank 0\n"
                                  "  # none\nend\n# after\n";
  CHECK(mpiar__schedfile_parse("c", commented, strlen(commented), &f, err, sizeof err) == 0, "%s",
        err);
  CHECK(strcmp(f.name, "x-1.y_z") == 0 && f.order == MPIAR__SCHEDFILE_ORDER_CANONICAL &&
            f.inplace == MPIAR__SCHEDFILE_INPLACE_YES,
        "header");
  mpiar__schedfile_free(&f);

  expect_refused("", "empty");
  expect_refused("mpiar-schedule 2\n", ":1: field 2 (version)");
  expect_refused("schedule 1\n", ":1: the first line");
  expect_refused(HEAD "rank 0\n", "'inplace' is missing");
  expect_refused(HEAD_FULL "ranks 3\n", ":8: 'ranks' is given twice");
  expect_refused(HEAD_FULL "colour red\n", ":8: field 1: 'colour'");
  expect_refused(HEAD_FULL "name a/b\n", "field 2 (name)");
  expect_refused("mpiar-schedule 1\nranks 02\n", ":2: field 2 (ranks): '02'");
  expect_refused("mpiar-schedule 1\nranks -1\n", "not a decimal number");
  expect_refused("mpiar-schedule 1\nranks 4097\n", "above 4096");
  expect_refused("mpiar-schedule 1\nchunks 99999999999999999999999\n", "above");
  expect_refused("mpiar-schedule 1\nchunks 0\n", "at least 1 chunk");
  expect_refused("mpiar-schedule 1\ncollective bcast\n", "not supported");
  expect_refused("mpiar-schedule 1\ninplace maybe\n", "field 2 (inplace)");
  expect_refused("mpiar-schedule 1\norder any\n", "field 2 (order)");
  expect_refused(HEAD_FULL "rank 1\n", ":8: field 2 (rank): rank 1 where rank 0 comes next");
  expect_refused(HEAD_FULL "rank 0\nrank 1\nrank 2\n", ":10: field 2 (rank): rank 2 is not below ranks 2");
  expect_refused(HEAD_FULL "rank 0\nend\n", "'end' after rank 0: ranks 1..1");
  expect_refused(HEAD_FULL "rank 0\nrank 1\n", "ends before 'end'");
  expect_refused(HEAD_FULL "rank 0\nrank 1\nend\nrank 2\n", ":11: text after 'end'");
  expect_refused(HEAD_FULL "rank 0\nsend 2 0 i0 1\n", ":9: field 2 (peer): rank 2");
  expect_refused(HEAD_FULL "rank 0\nsend 0 0 i0 1\n", "sends to itself");
  expect_refused(HEAD_FULL "rank 0\nsend 1 1024 i0 1\n", "field 3 (tag)");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i1 2\n", "field 4 (source): chunks 1..3");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 s0 1\n", "of scratch are outside its 0");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 x0 1\n", "field 4 (source): 'x0' is not an operand");
  expect_refused(HEAD_FULL "rank 0\nrecv 1 0 i0 1\n", "may not write the input");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i0\n", "send takes 4 fields (3 given)");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i0 1 : 0\n", "step 0 is not an earlier step");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i0 1 :\n", "':' without a dependency");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i0 1 final\n", "only a reduce can be final");
  expect_refused(HEAD_FULL "rank 0\nsend 1 0 i0 1 , 0\n", "is not ':'");
  expect_refused(HEAD_FULL "rank 0\nreduce o0 i0 o0 1 finale\n", "is not 'final' or ':'");
  expect_refused(HEAD_FULL "rank 0\njump 1\n", "field 1: 'jump' is not a step");
  expect_refused(HEAD_FULL "rank 0\nend extra\n", "'end' takes no value");
  expect_refused(HEAD_FULL "rank 0 1\n", "'rank' takes one value");
  expect_refused("mpiar-schedule 1\nname caf\xc3\xa9\n", "not printable ASCII");
  /* A NUL byte inside a line. */
  {
    const char nul[] = "mpiar-schedule 1\nname a\0b\n";
    mpiar__schedfile_t g;
    CHECK(mpiar__schedfile_parse("t", nul, sizeof nul - 1, &g, err, sizeof err) != 0 &&
              strstr(err, "t:2: a NUL byte") != NULL,
          "NUL: %s", err);
  }
  /* A line longer than the bound; more dependencies than the bound. */
  {
    char *big = malloc(3 * MPIAR__SCHEDFILE_MAX_LINE);
    snprintf(big, 3 * MPIAR__SCHEDFILE_MAX_LINE, "mpiar-schedule 1\n# ");
    size_t l = strlen(big);
    memset(big + l, 'x', MPIAR__SCHEDFILE_MAX_LINE);
    big[l + MPIAR__SCHEDFILE_MAX_LINE] = '\0';
    expect_refused(big, ":2: longer than");
    int w = snprintf(big, 3 * MPIAR__SCHEDFILE_MAX_LINE, HEAD_FULL "rank 0\nsend 1 0 i0 1 :");
    for (int d = 0; d <= MPIAR__SCHEDFILE_MAX_DEPS; d++) {
      w += snprintf(big + w, 3 * MPIAR__SCHEDFILE_MAX_LINE - (size_t)w, " 0");
    }
    expect_refused(big, "dependencies (at most");
    free(big);
  }
  /* Every truncation of a valid file is refused (or is the whole file); none crashes. */
  const size_t n = strlen(ring2);
  for (size_t cut = 0; cut < n; cut++) {
    mpiar__schedfile_t g;
    int rc = mpiar__schedfile_parse("cut", ring2, cut, &g, err, sizeof err);
    EXPECT(rc != MPIAR_SUCCESS || cut >= n - 1, "truncated at %zu of %zu: accepted", cut, n);
    if (rc == MPIAR_SUCCESS) {
      mpiar__schedfile_free(&g);
    }
  }
  /* Byte changes: parse, and instantiate what parses; nothing may crash or leak. */
  static const char subst[] = {'0', '9', ' ', '\n', ':', 'o', 's', '#', '\0', (char)0xff};
  char *copy = malloc(n);
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof subst; k++) {
      memcpy(copy, ring2, n);
      copy[i] = subst[k];
      mpiar__schedfile_t g;
      if (mpiar__schedfile_parse("mut", copy, n, &g, err, sizeof err) == MPIAR_SUCCESS) {
        for (int r = 0; r < g.nranks; r++) {
          mpiar__schedule_t t;
          mpiar__schedule_init(&t, r, g.nranks, (size_t)g.chunks * 3, 4, 0, "mut", 0);
          (void)mpiar__schedfile_instantiate(&g, &t);
          mpiar__schedule_destroy(&t);
        }
        mpiar__schedfile_free(&g);
      }
    }
  }
  free(copy);
}

/* ---- files that parse but fail verification; the fit of a call ---- */

static void expect_unverified(const char *text, const char *words) {
  const mpiar__algorithm_t *a = mpiar__schedfile_algorithm(put(text, strlen(text)));
  char why[1024] = "";
  const mpiar__schedfile_t *f = mpiar__schedfile_of(a, why, sizeof why);
  CHECK(f != NULL, "parsed: %s", why);
  if (f == NULL) {
    return;
  }
  int ok = mpiar__schedfile_fit(a, f->nranks, f->chunks, 0, why, sizeof why);
  EXPECT(!ok && strstr(why, "fails verification") != NULL && strstr(why, words) != NULL,
         "expected a verification failure naming '%s', got '%s'", words, why);
  /* The builder refuses it too, so a plan is never built from it. */
  mpiar__schedule_t s;
  mpiar__schedule_init(&s, 0, f->nranks, f->chunks, 4, 0, a->name, 0);
  CHECK(a->build(&s) != MPIAR_SUCCESS, "the verified builder accepted it");
  mpiar__schedule_destroy(&s);
}

static void verification(void) {
  /* A message never received. */
  expect_unverified(HEAD_FULL "rank 0\nsend 1 0 i0 1\ncopy o0 i0 2\nrank 1\ncopy o0 i0 2\nend\n",
                    "");
  /* Lengths that differ. */
  expect_unverified(HEAD_FULL "rank 0\nsend 1 0 i0 1\nrank 1\nrecv 0 0 o0 2\nend\n", "");
  /* Each rank keeps its own input: not the reduction. */
  expect_unverified(HEAD_FULL "rank 0\ncopy o0 i0 2\nrank 1\ncopy o0 i0 2\nend\n", "");
  /* Rank 1 counts rank 0's chunk twice. */
  expect_unverified(HEAD_FULL "rank 0\nsend 1 0 i0 2\nrecv 1 0 o0 2\nrank 1\nrecv 0 0 o0 2\n"
                              "reduce o0 o0 i0 2 final : 0\nreduce o0 o0 o0 2 : 1\n"
                              "send 0 0 o0 2 : 2\nend\n",
                    "");
  /* A receive into the output while a send reads it, unordered: a hazard. */
  expect_unverified(HEAD_FULL "rank 0\ncopy o0 i0 2\nsend 1 0 o0 2 : 0\nrecv 1 0 o0 2 : 0\n"
                              "rank 1\ncopy o0 i0 2\nsend 0 0 o0 2 : 0\nrecv 0 0 o0 2 : 0\nend\n",
                    "");
  /* The fit of a call. */
  const mpiar__algorithm_t *a = mpiar__schedfile_algorithm(put(ring2, strlen(ring2)));
  char why[1024];
  CHECK(mpiar__schedfile_fit(a, 2, 2, 0, why, sizeof why), "ring2: %s", why);
  CHECK(mpiar__schedfile_fit(a, 2, 2000, 0, why, sizeof why), "ring2 2000: %s", why);
  CHECK(!mpiar__schedfile_fit(a, 2, 3, 0, why, sizeof why) &&
            strstr(why, "count 3 is not a multiple of the file's 2 chunks") != NULL,
        "%s", why);
  CHECK(!mpiar__schedfile_fit(a, 3, 6, 0, why, sizeof why) &&
            strstr(why, "written for 2 ranks, not 3") != NULL,
        "%s", why);
  CHECK(!mpiar__schedfile_fit(a, 2, 2, 1, why, sizeof why) && strstr(why, "inplace no") != NULL,
        "%s", why);
  CHECK(!(a->flags & MPIAR__ALG_CANONICAL) && (a->flags & MPIAR__ALG_MANUAL) &&
            (a->flags & MPIAR__ALG_FILE) && a->index >= 0x40000000u,
        "flags %x index %u", a->flags, a->index);
}

/* ---- names and paths ---- */

static void names(void) {
  char why[1024];
  const char *path = put(ring2, strlen(ring2));
  char name[400];
  snprintf(name, sizeof name, "file:%s", path);
  const mpiar__algorithm_t *a = mpiar__algorithm_find(name);
  CHECK(a != NULL && a == mpiar__algorithm_find_any(name) && a == mpiar__schedfile_algorithm(path),
        "one entry per path");
  CHECK(a != NULL && strcmp(a->name, name) == 0, "its name");
  CHECK(mpiar__algorithm_find("file:") == NULL, "an empty path");
  mpiar__algorithm_explain("file:", why, sizeof why);
  CHECK(strstr(why, "no path after 'file:'") != NULL, "%s", why);
  /* A missing file, a directory, a FIFO: an entry that names why, and never blocks. */
  char p2[300];
  snprintf(p2, sizeof p2, "%s/missing.sched", dir);
  a = mpiar__schedfile_algorithm(p2);
  CHECK(a != NULL && mpiar__schedfile_of(a, why, sizeof why) == NULL &&
            strstr(why, "cannot open") != NULL,
        "%s", why);
  CHECK(!mpiar__schedfile_fit(a, 2, 2, 0, why, sizeof why) && strstr(why, "cannot open") != NULL,
        "%s", why);
  a = mpiar__schedfile_algorithm(dir);
  CHECK(a != NULL && mpiar__schedfile_of(a, why, sizeof why) == NULL &&
            strstr(why, "is a directory") != NULL,
        "%s", why);
  snprintf(p2, sizeof p2, "%s/fifo", dir);
  if (mkfifo(p2, 0600) == 0) {
    a = mpiar__schedfile_algorithm(p2);
    CHECK(a != NULL && mpiar__schedfile_of(a, why, sizeof why) == NULL &&
              strstr(why, "FIFO") != NULL,
          "%s", why);
  }
  /* A file that does not parse: the line in the reason. */
  const char *bad = put(HEAD_FULL "rank 0\nsend 9 0 i0 1\n", strlen(HEAD_FULL) + 21);
  a = mpiar__schedfile_algorithm(bad);
  CHECK(a != NULL && mpiar__schedfile_of(a, why, sizeof why) == NULL &&
            strstr(why, ".sched:9: field 2 (peer)") != NULL,
        "%s", why);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/mpiar_schedfile_XXXXXX",
           getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  hostile();
  verification();
  names();
  round_trips();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot remove %s\n", dir);
  }
  printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
  return failures != 0;
}
