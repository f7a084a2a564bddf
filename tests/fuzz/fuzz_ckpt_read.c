/*
 * Fuzz target: the kvstore checkpoint reader (mpiar__ckpt_read) on arbitrary file contents. It
 * must return MPIAR_SUCCESS or an error code, never crash, read out of bounds, leak, or ask for
 * memory the file cannot justify (the reader bounds every size by the file's size). A file it
 * accepts must describe itself consistently: the keys' data add up to the file's size.
 *
 * The input is written to a memory file (memfd) and read through /proc/self/fd, as a checkpoint
 * on disk would be.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/common.h"
#include "kvstore/kv_internal.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fd < 0) {
    fd = memfd_create("mpiar-ckpt", 0);
    if (fd < 0) {
      abort();
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size)) {
    abort();
  }
  mpiar__kv_entry_t **entries = NULL;
  size_t n = 0;
  int rc = mpiar__ckpt_read(path, &entries, &n);
  if (rc == MPIAR_SUCCESS) {
    size_t bytes = MPIAR__CKPT_HEADER_BYTES + MPIAR__CKPT_TRAILER_BYTES;
    for (size_t i = 0; i < n; i++) {
      const mpiar__kv_entry_t *e = entries[i];
      bytes += MPIAR__CKPT_RECORD_BYTES + (e->name ? strlen(e->name) : 0) +
               e->bytes * (e->momentum ? 2 : 1);
    }
    if (bytes != size) {
      abort();
    }
    mpiar__ckpt_free(entries, n);
  } else if (rc != MPIAR_ERR_CORRUPT && rc != MPIAR_ERR_IO && rc != MPIAR_ERR_NOMEM) {
    abort();
  }
  return 0;
}
