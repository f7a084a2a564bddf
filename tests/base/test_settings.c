/*
 * The settings parser (src/base/settings.c), no MPI: every variable accepts its documented values
 * and refuses anything else with MPIAR_ERR_ENV and a detail naming the variable; a malformed
 * variable in the environment makes mpiar__settings() fail until it is fixed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_check.h"
#include "base/common.h"
#include "base/settings.h"

static mpiar__settings_t parse(const char *name, const char *value, int expect) {
  mpiar__settings_t s;
  memset(&s, 0, sizeof s);
  s.kernel = -1;
  int rc = mpiar__settings_parse_one(name, value, &s);
  CHECK(rc == expect, "%s='%s': %s (%s), expected %s", name, value, mpiar_err_name(rc),
        mpiar_last_error(), mpiar_err_name(expect));
  if (rc == MPIAR_ERR_ENV) {
    CHECK(strstr(mpiar_last_error(), name) != NULL, "detail '%s' does not name %s",
          mpiar_last_error(), name);
  }
  return s;
}

static void bad(const char *name, const char *value) {
  parse(name, value, MPIAR_ERR_ENV);
}

int main(void) {
  /* Sizes. */
  CHECK(parse("MPIAR_SEGMENT_BYTES", "64K", MPIAR_SUCCESS).segment_bytes == 65536, "64K");
  CHECK(parse("MPIAR_SEGMENT_BYTES", "1MiB", MPIAR_SUCCESS).segment_bytes == 1 << 20, "1MiB");
  CHECK(parse("MPIAR_SEGMENT_BYTES", "0", MPIAR_SUCCESS).segment_bytes == 0, "0");
  CHECK(parse("MPIAR_SEGMENT_BYTES", "4096", MPIAR_SUCCESS).segment_bytes == 4096, "4096");
  const char *bad_sizes[] = {"1", "4095", "12Q", "-5", "K", " 64K", "64K ", "1.5M", "64KK",
                             "99999999999999999999", "17179869184G"};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof *bad_sizes; i++) {
    bad("MPIAR_SEGMENT_BYTES", bad_sizes[i]);
  }
  CHECK(parse("MPIAR_FUSION_BYTES", "3K", MPIAR_SUCCESS).fusion_bytes == 3072, "3K");
  CHECK(parse("MPIAR_FUSION_BYTES", "0", MPIAR_SUCCESS).fusion_set == 1, "fusion 0 is set");
  bad("MPIAR_FUSION_BYTES", "abc");
  /* Integers with ranges. */
  CHECK(parse("MPIAR_TIMEOUT_MS", "250", MPIAR_SUCCESS).timeout_ms == 250, "250");
  bad("MPIAR_TIMEOUT_MS", "soon");
  bad("MPIAR_TIMEOUT_MS", "-1");
  bad("MPIAR_TIMEOUT_MS", "2000000000");
  CHECK(parse("MPIAR_NUM_THREADS", "4", MPIAR_SUCCESS).num_threads == 4, "4");
  CHECK(parse("MPIAR_NUM_THREADS", "4096", MPIAR_SUCCESS).num_threads == 4096, "4096");
  bad("MPIAR_NUM_THREADS", "0");
  bad("MPIAR_NUM_THREADS", "4097");
  bad("MPIAR_NUM_THREADS", "two");
  /* Booleans: one set of words for every boolean. */
  const char *booleans[] = {"MPIAR_DEBUG",        "MPIAR_DEBUG_SCHEDULE", "MPIAR_CHECK",
                            "MPIAR_REPRODUCIBLE", "MPIAR_PMPI"};
  const char *yes[] = {"1", "on", "yes", "true", "YES", "True"};
  const char *no[] = {"0", "off", "no", "false", "OFF"};
  for (size_t b = 0; b < sizeof booleans / sizeof *booleans; b++) {
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
      mpiar__settings_t s = parse(booleans[b], yes[i], MPIAR_SUCCESS);
      int v = b == 0 ? s.debug : b == 1 ? s.debug_schedule : b == 2 ? s.check
                                    : b == 3 ? s.reproducible
                                             : s.pmpi;
      CHECK(v == 1, "%s=%s", booleans[b], yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
      mpiar__settings_t s = parse(booleans[b], no[i], MPIAR_SUCCESS);
      int v = b == 0 ? s.debug : b == 1 ? s.debug_schedule : b == 2 ? s.check
                                    : b == 3 ? s.reproducible
                                             : s.pmpi;
      CHECK(v == 0, "%s=%s", booleans[b], no[i]);
    }
    bad(booleans[b], "banana");
    bad(booleans[b], "2");
    bad(booleans[b], "yes please");
  }
  /* Choices. */
  CHECK(parse("MPIAR_WAIT", "yield", MPIAR_SUCCESS).wait == MPIAR__WAIT_YIELD, "yield");
  CHECK(parse("MPIAR_WAIT", "spin", MPIAR_SUCCESS).wait == MPIAR__WAIT_SPIN, "spin");
  bad("MPIAR_WAIT", "sometimes");
  CHECK(parse("MPIAR_KERNEL", "reference", MPIAR_SUCCESS).kernel == 0, "reference");
  CHECK(parse("MPIAR_KERNEL", "avx512", MPIAR_SUCCESS).kernel == 2, "avx512");
  CHECK(parse("MPIAR_KERNEL", "auto", MPIAR_SUCCESS).kernel == -1, "auto");
  bad("MPIAR_KERNEL", "sse9");
  CHECK(parse("MPIAR_PROGRESS", "thread", MPIAR_SUCCESS).progress_thread == 1, "thread");
  bad("MPIAR_PROGRESS", "threads");
  CHECK(parse("MPIAR_TOPOLOGY", "flat", MPIAR_SUCCESS).topology_flat == 1, "flat");
  bad("MPIAR_TOPOLOGY", "tree");
  /* Names: the grammar here, the registry in the MPI layer. */
  CHECK(strcmp(parse("MPIAR_ALGORITHM", "ring", MPIAR_SUCCESS).algorithm, "ring") == 0, "ring");
  CHECK(parse("MPIAR_ALGORITHM", "auto", MPIAR_SUCCESS).algorithm[0] == '\0', "auto");
  bad("MPIAR_ALGORITHM", "Ring");
  bad("MPIAR_ALGORITHM", "ring;rm");
  static char longname[1100];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  bad("MPIAR_ALGORITHM", longname);
  /* A schedule file: file:PATH, any path (docs/schedules.md); an empty one is malformed. */
  CHECK(strcmp(parse("MPIAR_ALGORITHM", "file:/a b/c.sched", MPIAR_SUCCESS).algorithm,
               "file:/a b/c.sched") == 0,
        "file:PATH");
  bad("MPIAR_ALGORITHM", "file:");
  /* NAME/k=N: the grammar strictly (whether NAME takes k, and its range, is the registry's). */
  CHECK(strcmp(parse("MPIAR_ALGORITHM", "recursive_multiplying/k=4", MPIAR_SUCCESS).algorithm,
               "recursive_multiplying/k=4") == 0,
        "name/k=N");
  CHECK(strcmp(parse("MPIAR_ALGORITHM", "x/k=999", MPIAR_SUCCESS).algorithm, "x/k=999") == 0,
        "three digits");
  const char *const bad_params[] = {"ring/",    "ring/k",   "ring/k=",    "ring/k=04", "ring/k=0",
                                    "ring/k=-2", "ring/k=2x", "ring/k=1000", "ring/K=2", "/k=2",
                                    "ring/k=2/k=3", "ring/=2", "ring//k=2", "ring/k= 2", "ring/k=+2"};
  for (size_t i = 0; i < sizeof bad_params / sizeof bad_params[0]; i++) {
    bad("MPIAR_ALGORITHM", bad_params[i]);
  }
  CHECK(strcmp(parse("MPIAR_TUNING_FILE", "/tmp/t.json", MPIAR_SUCCESS).tuning_file,
               "/tmp/t.json") == 0,
        "tuning file");
  /* Empty is unset. */
  CHECK(parse("MPIAR_TIMEOUT_MS", "", MPIAR_SUCCESS).timeout_ms == 0, "empty");
  /* Not a setting. */
  parse("MPIAR_NOPE", "1", MPIAR_ERR_INVALID_ARG);
  /* Every name the table lists parses its empty value. */
  for (int i = 0; mpiar__settings_names[i] != NULL; i++) {
    parse(mpiar__settings_names[i], "", MPIAR_SUCCESS);
  }

  /* The environment: a malformed variable fails every read until it is fixed. */
  const mpiar__settings_t *set = NULL;
  setenv("MPIAR_DEBUG", "banana", 1);
  mpiar__settings_reload();
  CHECK(mpiar__settings(&set) == MPIAR_ERR_ENV, "banana accepted");
  CHECK(strstr(mpiar_last_error(), "MPIAR_DEBUG") != NULL, "detail %s", mpiar_last_error());
  CHECK(mpiar__settings(&set) == MPIAR_ERR_ENV, "second read");
  setenv("MPIAR_DEBUG", "yes", 1);
  setenv("MPIAR_SEGMENT_BYTES", "256K", 1);
  mpiar__settings_reload();
  CHECK(mpiar__settings(&set) == MPIAR_SUCCESS, "%s", mpiar_last_error());
  CHECK(set->debug == 1 && set->segment_bytes == 256 * 1024, "debug %d segment %zu", set->debug,
        set->segment_bytes);
  printf("settings: %s (%d failed checks)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
