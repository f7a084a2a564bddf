/*
 * Opening a file that a user named, for reading: a tuning file, a checkpoint, a tool's input.
 *
 * open() of a FIFO for reading waits for a writer, possibly forever, and a terminal or a device
 * such as /dev/zero never ends: a path that names one of them must be refused, not read. The
 * file is opened with O_NONBLOCK, so that open() itself returns at once whatever the path names;
 * fstat() then tells a regular file from the rest, and only a regular file is switched back to
 * blocking reads and handed out, with its size.
 *
 * It sits in the tuning layer, the lowest layer that reads user files; the kvstore's checkpoint
 * and the tools of perf/ use it too.
 */
#ifndef MPIAR_TUNING_INPUT_H
#define MPIAR_TUNING_INPUT_H

#include <stdint.h>

/* What mpiar__input_open() found. */
enum {
  MPIAR__INPUT_OK = 0,
  MPIAR__INPUT_OPEN_FAILED = -1, /* open() or fstat() failed: errno says why */
  MPIAR__INPUT_NOT_REGULAR = -2  /* a directory, FIFO, device or socket: *kind says which */
};

/*
 * Open @p path for reading (O_CLOEXEC, blocking reads) if it is a regular file. @return
 * MPIAR__INPUT_OK with *fd open and *size its size in bytes; MPIAR__INPUT_OPEN_FAILED with errno
 * set; or MPIAR__INPUT_NOT_REGULAR with *kind naming what the path is ("a FIFO"), for a message
 * such as "'x' is a FIFO, not a regular file". Never blocks in open().
 */
int mpiar__input_open(const char *path, int *fd, uint64_t *size, const char **kind);

/* The kind of file of a stat mode, for messages: "a regular file", "a directory", "a FIFO", ... */
const char *mpiar__input_kind(unsigned mode);

#endif /* MPIAR_TUNING_INPUT_H */
