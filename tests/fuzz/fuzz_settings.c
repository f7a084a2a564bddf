/*
 * Fuzz target: the settings parser (src/base/settings.c). The first byte picks a variable, the
 * rest is its value. Parsing must either succeed with a value inside the variable's documented
 * range, or fail with MPIAR_ERR_ENV and a detail that names the variable; never anything else,
 * and never a crash or undefined behaviour.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) {
    return 0;
  }
  int nnames = 0;
  while (mpiar__settings_names[nnames] != NULL) {
    nnames++;
  }
  const char *name = mpiar__settings_names[data[0] % nnames];
  char *value = malloc(size);
  if (value == NULL) {
    return 0;
  }
  memcpy(value, data + 1, size - 1);
  value[size - 1] = '\0';
  mpiar__settings_t s;
  memset(&s, 0, sizeof s);
  s.kernel = -1;
  int rc = mpiar__settings_parse_one(name, value, &s);
  if (rc == MPIAR_ERR_ENV) {
    if (strstr(mpiar_last_error(), name) == NULL) {
      abort(); /* the detail must name the variable */
    }
  } else if (rc != MPIAR_SUCCESS) {
    abort();
  } else if ((s.segment_bytes != 0 && s.segment_bytes < MPIAR__SEGMENT_MIN) || s.timeout_ms < 0 ||
             s.timeout_ms > (1L << 30) || s.num_threads < 0 || s.num_threads > MPIAR__THREADS_MAX ||
             (unsigned)s.wait > MPIAR__WAIT_YIELD || s.kernel < -1 || s.kernel > 2 ||
             (s.debug | s.debug_schedule | s.check | s.reproducible | s.progress_thread |
              s.topology_flat) > 1 ||
             s.algorithm[sizeof s.algorithm - 1] != '\0' ||
             s.tuning_file[sizeof s.tuning_file - 1] != '\0') {
    abort(); /* accepted, but outside the documented range */
  }
  free(value);
  return 0;
}
