/* Error codes and the thread-local detail string behind mpiar_last_error(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

/* Long enough for a detail naming a rank, an algorithm, a step and a peer. */
#define MPIAR__DETAIL_MAX 512

static _Thread_local char detail[MPIAR__DETAIL_MAX];

int mpiar__error(int code, const char *fmt, ...) {
  /* Formatted aside first: an argument may be the detail itself (a caller that adds context to
   * the last error passes mpiar_last_error()), and vsnprintf must not write what it reads. */
  char text[MPIAR__DETAIL_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  memcpy(detail, text, sizeof detail);
  return code;
}

void mpiar__error_clear(void) {
  detail[0] = '\0';
}

const char *mpiar_last_error(void) {
  return detail;
}

const char *mpiar_strerror(int err) {
  switch (err) {
#define MPIAR__STRERROR_CASE(name, value, text) \
  case MPIAR_##name:                            \
    return text;
    MPIAR_ERRNO_MAP(MPIAR__STRERROR_CASE)
#undef MPIAR__STRERROR_CASE
  default:
    return "unknown error";
  }
}

const char *mpiar_err_name(int err) {
  switch (err) {
#define MPIAR__ERRNAME_CASE(name, value, text) \
  case MPIAR_##name:                           \
    return "MPIAR_" #name;
    MPIAR_ERRNO_MAP(MPIAR__ERRNAME_CASE)
#undef MPIAR__ERRNAME_CASE
  default:
    return "MPIAR_ERR_UNKNOWN";
  }
}

const char *mpiar_version(void) {
  return MPIAR_VERSION_STRING;
}

unsigned mpiar_version_hex(void) {
  return MPIAR_VERSION_HEX;
}
