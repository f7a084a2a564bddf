/* Opening user-named input files without blocking, regular files only (input.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tuning/input.h"

const char *mpiar__input_kind(unsigned mode) {
  if (S_ISREG(mode)) {
    return "a regular file";
  }
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO (named pipe)";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "not a regular file";
}

int mpiar__input_open(const char *path, int *fd, uint64_t *size, const char **kind) {
  *fd = -1;
  *size = 0;
  *kind = NULL;
  int f;
  do {
    f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (f < 0 && errno == EINTR);
  if (f < 0) {
    return MPIAR__INPUT_OPEN_FAILED;
  }
  struct stat st;
  if (fstat(f, &st) != 0) {
    int e = errno;
    close(f);
    errno = e;
    return MPIAR__INPUT_OPEN_FAILED;
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    *kind = mpiar__input_kind((unsigned)st.st_mode);
    return MPIAR__INPUT_NOT_REGULAR;
  }
  /* O_NONBLOCK does not change reads of a regular file; it is cleared all the same, so that the
   * descriptor is the one a plain open() would have given. */
  int flags = fcntl(f, F_GETFL);
  if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    errno = e;
    return MPIAR__INPUT_OPEN_FAILED;
  }
  *fd = f;
  *size = (uint64_t)st.st_size;
  return MPIAR__INPUT_OK;
}
