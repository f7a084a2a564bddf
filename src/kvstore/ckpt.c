/*
 * The checkpoint file: writing it atomically and reading it back with every check, without MPI
 * (the collective part lives in checkpoint.c). See kv_internal.h for the byte layout.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "kvstore/crc32c.h"
#include "kvstore/kv_internal.h"
#include "tuning/input.h"

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) {
    p[i] = (unsigned char)(v >> (8 * i));
  }
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    p[i] = (unsigned char)(v >> (8 * i));
  }
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) {
    v = (v << 8) | p[i];
  }
  return v;
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) {
    v = (v << 8) | p[i];
  }
  return v;
}

static const char *entry_str(const mpiar__kv_entry_t *e, char *buf, size_t size) {
  mpiar_kv_key_t key = {e->name, e->id};
  return mpiar__kv_key_str(key, buf, size);
}

/* Writing: a small buffer in front of write(2) that also keeps the running CRC of the file. */
typedef struct writer {
  int fd;
  const char *path;
  uint32_t crc;
  unsigned char buf[1 << 16];
  size_t used;
} writer_t;

static int write_all(writer_t *w, const void *data, size_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    /* Large pieces keep each write(2) call below the 2 GiB that Linux transfers at most. */
    size_t piece = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
    ssize_t k = write(w->fd, p, piece);
    if (k < 0) {
      if (errno == EINTR) {
        continue;
      }
      return mpiar__error(MPIAR_ERR_IO, "cannot write checkpoint '%s': %s", w->path,
                          strerror(errno));
    }
    p += k;
    len -= (size_t)k;
  }
  return MPIAR_SUCCESS;
}

static int writer_flush(writer_t *w) {
  int rc = write_all(w, w->buf, w->used);
  w->used = 0;
  return rc;
}

static int writer_put(writer_t *w, const void *data, size_t len) {
  if (len == 0) {
    return MPIAR_SUCCESS; /* an empty tensor may have no buffer at all */
  }
  w->crc = mpiar__crc32c(w->crc, data, len);
  if (len > sizeof w->buf / 2) {
    /* Tensor data goes straight from the store's memory to the file. */
    int rc = writer_flush(w);
    return rc != 0 ? rc : write_all(w, data, len);
  }
  if (w->used + len > sizeof w->buf) {
    int rc = writer_flush(w);
    if (rc != 0) {
      return rc;
    }
  }
  memcpy(w->buf + w->used, data, len);
  w->used += len;
  return MPIAR_SUCCESS;
}

/* Flush the directory holding @p path, so that the rename itself survives a crash. */
static int fsync_dir_of(const char *path) {
  char *copy = strdup(path);
  if (copy == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "copy of path '%s'", path);
  }
  const char *dir = dirname(copy);
  int rc = MPIAR_SUCCESS;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    rc = mpiar__error(MPIAR_ERR_IO, "cannot open directory '%s' to flush it: %s", dir,
                      strerror(errno));
  } else {
    if (fsync(fd) != 0 && errno != EINVAL) {
      rc = mpiar__error(MPIAR_ERR_IO, "cannot flush directory '%s': %s", dir, strerror(errno));
    }
    close(fd);
  }
  free(copy);
  return rc;
}

/*
 * Open and lock the temporary file of a save. Its name is fixed (path + ".tmp", in the same
 * directory so that rename() is atomic), and an exclusive lock on it marks the save in progress:
 * a save whose process was killed leaves the file, with no lock (the kernel drops a dead
 * process's locks), and the next save takes it over and truncates it, so no leftover outlives
 * the next save. A live lock means another process is saving to the same path right now: that
 * is an error, never a wait (the other save would then rename our file away).
 * @return MPIAR_SUCCESS with *fd open, locked and empty, or MPIAR_ERR_IO.
 */
static int open_locked_tmp(const char *tmp, int *fd) {
  /* Between our open() and flock() another save may finish and rename the file away; then the
   * name points to a new file (or none) and we start over. */
  for (int attempt = 0; attempt < 8; attempt++) {
    int f = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) {
      return mpiar__error(MPIAR_ERR_IO, "cannot create checkpoint '%s': %s", tmp, strerror(errno));
    }
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      close(f);
      if (err == EWOULDBLOCK) {
        return mpiar__error(MPIAR_ERR_IO,
                            "another process is saving a checkpoint through '%s' right now", tmp);
      }
      return mpiar__error(MPIAR_ERR_IO, "cannot lock '%s': %s", tmp, strerror(err));
    }
    struct stat by_fd;
    struct stat by_name;
    if (fstat(f, &by_fd) == 0 && stat(tmp, &by_name) == 0 && by_fd.st_dev == by_name.st_dev &&
        by_fd.st_ino == by_name.st_ino) {
      if (ftruncate(f, 0) != 0) {
        int err = errno;
        close(f);
        return mpiar__error(MPIAR_ERR_IO, "cannot truncate '%s': %s", tmp, strerror(err));
      }
      *fd = f;
      return MPIAR_SUCCESS;
    }
    close(f);
  }
  return mpiar__error(MPIAR_ERR_IO, "'%s' keeps being replaced by other saves", tmp);
}

/* Header, key records and names, then the data and the trailer, through the writer. */
static int write_contents(writer_t *w, mpiar__kv_entry_t *const *entries, size_t n,
                          const uint32_t *crcs, uint64_t size) {
  int rc = MPIAR_SUCCESS;
  unsigned char hdr[MPIAR__CKPT_HEADER_BYTES] = {0};
  memcpy(hdr, MPIAR__CKPT_MAGIC, sizeof MPIAR__CKPT_MAGIC);
  put_u32(hdr + 8, MPIAR__CKPT_VERSION);
  put_u32(hdr + 12, 0);
  put_u64(hdr + 16, n);
  put_u64(hdr + 24, size);
  MPIAR__CHECK(writer_put(w, hdr, sizeof hdr));
  for (size_t i = 0; i < n; i++) {
    const mpiar__kv_entry_t *e = entries[i];
    size_t name_len = e->name ? strlen(e->name) : 0;
    unsigned char rec[MPIAR__CKPT_RECORD_BYTES] = {0};
    rec[0] = e->name != NULL ? 1 : 0;
    rec[1] = (unsigned char)e->dtype;
    rec[2] = e->momentum != NULL ? 1 : 0;
    put_u32(rec + 4, (uint32_t)name_len);
    put_u64(rec + 8, (uint64_t)e->id);
    put_u64(rec + 16, e->count);
    put_u32(rec + 24, crcs[2 * i]);
    put_u32(rec + 28, crcs[2 * i + 1]);
    MPIAR__CHECK(writer_put(w, rec, sizeof rec));
    MPIAR__CHECK(writer_put(w, e->name, name_len));
  }
  for (size_t i = 0; i < n; i++) {
    const mpiar__kv_entry_t *e = entries[i];
    MPIAR__CHECK(writer_put(w, e->value, e->bytes));
    if (e->momentum != NULL) {
      MPIAR__CHECK(writer_put(w, e->momentum, e->bytes));
    }
  }
  unsigned char trailer[MPIAR__CKPT_TRAILER_BYTES];
  put_u32(trailer, w->crc);
  MPIAR__CHECK(writer_put(w, trailer, sizeof trailer));
  rc = writer_flush(w);
cleanup:
  return rc;
}

int mpiar__ckpt_write(const char *path, mpiar__kv_entry_t *const *entries, size_t n) {
  int rc = MPIAR_SUCCESS;
  writer_t *w = NULL;
  char *tmp = NULL;
  int fd = -1;
  uint32_t *crcs = NULL;

  /* Sizes and per-key CRCs first: the header states the file size and each key's checksum. */
  uint64_t size = MPIAR__CKPT_HEADER_BYTES + MPIAR__CKPT_TRAILER_BYTES;
  crcs = calloc(2 * n + 1, sizeof *crcs);
  if (crcs == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint CRCs of %zu keys", n);
  }
  for (size_t i = 0; i < n; i++) {
    const mpiar__kv_entry_t *e = entries[i];
    size += MPIAR__CKPT_RECORD_BYTES + (e->name ? strlen(e->name) : 0) + e->bytes;
    crcs[2 * i] = mpiar__crc32c(0, e->value, e->bytes);
    if (e->momentum != NULL) {
      size += e->bytes;
      crcs[2 * i + 1] = mpiar__crc32c(0, e->momentum, e->bytes);
    }
  }

  size_t tlen = strlen(path) + sizeof MPIAR__CKPT_TMP_SUFFIX;
  tmp = malloc(tlen);
  w = malloc(sizeof *w);
  if (tmp == NULL || w == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint writer for '%s'", path);
  }
  snprintf(tmp, tlen, "%s%s", path, MPIAR__CKPT_TMP_SUFFIX);
  MPIAR__CHECK(open_locked_tmp(tmp, &fd));
  w->fd = fd;
  w->path = tmp;
  w->crc = 0;
  w->used = 0;
  MPIAR__CHECK(write_contents(w, entries, n, crcs, size));
  if (fsync(fd) != 0) {
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot flush checkpoint '%s' to disk: %s", tmp, strerror(errno));
  }
  /* The rename happens under the lock, which close() then drops. */
  if (rename(tmp, path) != 0) {
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
  }
  int closed = close(fd);
  fd = -1;
  if (closed != 0) {
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot close checkpoint '%s': %s", path, strerror(errno));
  }
  rc = fsync_dir_of(path);

cleanup:
  /* A failed save removes its temporary file (while it still holds the lock, so that it never
   * removes another save's) and never touches the file under the final name. */
  if (fd >= 0) {
    if (rc != 0) {
      unlink(tmp);
    }
    close(fd);
  }
  free(crcs);
  free(tmp);
  free(w);
  return rc;
}

/* Reading: a FILE with the running CRC of every byte taken from it. */
typedef struct reader {
  FILE *f;
  const char *path;
  uint32_t crc;
} reader_t;

static int reader_get(reader_t *r, void *data, size_t len, const char *what) {
  if (len == 0) {
    return MPIAR_SUCCESS;
  }
  if (fread(data, 1, len, r->f) != len) {
    if (ferror(r->f)) {
      return mpiar__error(MPIAR_ERR_IO, "cannot read checkpoint '%s' (%s): %s", r->path, what,
                          strerror(errno));
    }
    return mpiar__error(MPIAR_ERR_CORRUPT, "checkpoint '%s' is truncated (in %s)", r->path, what);
  }
  r->crc = mpiar__crc32c(r->crc, data, len);
  return MPIAR_SUCCESS;
}

void mpiar__ckpt_free(mpiar__kv_entry_t **entries, size_t n) {
  if (entries == NULL) {
    return;
  }
  for (size_t i = 0; i < n; i++) {
    mpiar__kv_entry_free(entries[i]);
  }
  free(entries);
}

int mpiar__ckpt_read(const char *path, mpiar__kv_entry_t ***out, size_t *nout) {
  int rc = MPIAR_SUCCESS;
  reader_t r = {NULL, path, 0};
  mpiar__kv_entry_t **items = NULL;
  uint32_t *crcs = NULL;
  size_t n = 0;
  char name[MPIAR_KV_KEY_MAX + 1];
  char kbuf[96];

  /* A FIFO or a device would block open() or never end: only a regular file is read. */
  int fd;
  uint64_t fsize;
  const char *kind;
  int opened = mpiar__input_open(path, &fd, &fsize, &kind);
  if (opened == MPIAR__INPUT_NOT_REGULAR) {
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot load checkpoint '%s': it is %s, not a regular file", path,
                kind);
  }
  if (opened != MPIAR__INPUT_OK) {
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot open checkpoint '%s': %s", path, strerror(errno));
  }
  r.f = fdopen(fd, "rb");
  if (r.f == NULL) {
    int e = errno;
    close(fd);
    MPIAR__FAIL(MPIAR_ERR_IO, "cannot open checkpoint '%s': %s", path, strerror(e));
  }
  if (fsize < MPIAR__CKPT_HEADER_BYTES + MPIAR__CKPT_TRAILER_BYTES) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT,
                "checkpoint '%s' is truncated: %llu bytes, shorter than a header", path,
                (unsigned long long)fsize);
  }
  unsigned char hdr[MPIAR__CKPT_HEADER_BYTES];
  MPIAR__CHECK(reader_get(&r, hdr, sizeof hdr, "header"));
  if (memcmp(hdr, MPIAR__CKPT_MAGIC, sizeof MPIAR__CKPT_MAGIC) != 0) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT, "'%s' is not an mpiar kvstore checkpoint (bad magic)", path);
  }
  uint32_t version = get_u32(hdr + 8);
  if (version != MPIAR__CKPT_VERSION) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s' has version %u; this library reads version %u",
                path, version, MPIAR__CKPT_VERSION);
  }
  if (get_u32(hdr + 12) != 0) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s' has unknown flags 0x%x", path,
                get_u32(hdr + 12));
  }
  uint64_t nkeys = get_u64(hdr + 16);
  uint64_t stated = get_u64(hdr + 24);
  if (stated != fsize) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT,
                "checkpoint '%s' is truncated or damaged: the header says %llu bytes, the file "
                "has %llu",
                path, (unsigned long long)stated, (unsigned long long)fsize);
  }
  /* Bound every size by the file size before allocating, so damage cannot ask for huge memory. */
  if (nkeys > (fsize - MPIAR__CKPT_HEADER_BYTES) / MPIAR__CKPT_RECORD_BYTES) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s' claims %llu keys, more than its size allows",
                path, (unsigned long long)nkeys);
  }
  items = calloc(nkeys ? nkeys : 1, sizeof *items);
  crcs = calloc(2 * (nkeys ? nkeys : 1), sizeof *crcs);
  if (items == NULL || crcs == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint table of %llu keys", (unsigned long long)nkeys);
  }
  uint64_t used = MPIAR__CKPT_HEADER_BYTES + MPIAR__CKPT_TRAILER_BYTES;
  for (n = 0; n < nkeys;) {
    unsigned char rec[MPIAR__CKPT_RECORD_BYTES];
    MPIAR__CHECK(reader_get(&r, rec, sizeof rec, "key record"));
    unsigned kind = rec[0], dtype = rec[1], has_mom = rec[2];
    uint32_t name_len = get_u32(rec + 4);
    if (kind > 1 || rec[3] != 0 || has_mom > 1 || dtype >= MPIAR__DTYPE_COUNT ||
        name_len > MPIAR_KV_KEY_MAX || (kind == 0 && name_len != 0)) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': key record %zu is malformed", path, n);
    }
    uint64_t count = get_u64(rec + 16);
    size_t esize = mpiar_dtype_size((mpiar_dtype_t)dtype);
    uint64_t copies = has_mom ? 2 : 1;
    used += MPIAR__CKPT_RECORD_BYTES + name_len;
    if (used > fsize || count > (fsize - used) / esize / copies) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT,
                  "checkpoint '%s': key record %zu claims more data than the file holds", path, n);
    }
    used += count * esize * copies;
    MPIAR__CHECK(reader_get(&r, name, name_len, "key name"));
    name[name_len] = '\0';
    if (memchr(name, '\0', name_len) != NULL) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': key record %zu has a zero byte in its name",
                  path, n);
    }
    mpiar_kv_key_t key = {kind ? name : NULL, kind ? 0 : (int64_t)get_u64(rec + 8)};
    if (kind == 1 && get_u64(rec + 8) != 0) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': key record %zu is malformed", path, n);
    }
    mpiar__kv_entry_t *e = mpiar__kv_entry_new(key, (mpiar_dtype_t)dtype, (size_t)count);
    if (e == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint key record %zu", n);
    }
    items[n++] = e;
    crcs[2 * (n - 1)] = get_u32(rec + 24);
    crcs[2 * (n - 1) + 1] = get_u32(rec + 28);
    if (!has_mom && crcs[2 * (n - 1) + 1] != 0) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': key record %zu is malformed", path, n - 1);
    }
    if (e->bytes > 0 && (e->value = malloc(e->bytes)) == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint value of %zu bytes", e->bytes);
    }
    if (has_mom && (e->momentum = malloc(e->bytes ? e->bytes : 1)) == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "checkpoint momentum of %zu bytes", e->bytes);
    }
  }
  if (used != fsize) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT,
                "checkpoint '%s' is damaged: its records describe %llu bytes, the file has %llu",
                path, (unsigned long long)used, (unsigned long long)fsize);
  }
  for (size_t i = 0; i < n; i++) {
    mpiar__kv_entry_t *e = items[i];
    MPIAR__CHECK(reader_get(&r, e->value, e->bytes, "key data"));
    if (mpiar__crc32c(0, e->value, e->bytes) != crcs[2 * i]) {
      MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': CRC32C of key %s does not match its data",
                  path, entry_str(e, kbuf, sizeof kbuf));
    }
    if (e->momentum != NULL) {
      MPIAR__CHECK(reader_get(&r, e->momentum, e->bytes, "momentum data"));
      if (mpiar__crc32c(0, e->momentum, e->bytes) != crcs[2 * i + 1]) {
        MPIAR__FAIL(MPIAR_ERR_CORRUPT,
                    "checkpoint '%s': CRC32C of the momentum of key %s does not match its data",
                    path, entry_str(e, kbuf, sizeof kbuf));
      }
    }
  }
  uint32_t file_crc = r.crc;
  unsigned char trailer[MPIAR__CKPT_TRAILER_BYTES];
  MPIAR__CHECK(reader_get(&r, trailer, sizeof trailer, "trailer"));
  if (get_u32(trailer) != file_crc) {
    MPIAR__FAIL(MPIAR_ERR_CORRUPT, "checkpoint '%s': the file's CRC32C does not match its contents",
                path);
  }
  /* Duplicate keys would make the file ambiguous; a correct writer never produces them. */
  mpiar__kv_table_t seen = {0};
  for (size_t i = 0; i < n && rc == 0; i++) {
    mpiar_kv_key_t key = {items[i]->name, items[i]->id};
    if (mpiar__kv_table_find(&seen, key) != NULL) {
      rc = mpiar__error(MPIAR_ERR_CORRUPT, "checkpoint '%s' holds key %s twice", path,
                        entry_str(items[i], kbuf, sizeof kbuf));
    } else if ((rc = mpiar__kv_table_reserve(&seen)) == 0) {
      mpiar__kv_table_insert(&seen, items[i]);
    }
  }
  /* The index only borrowed the entries. */
  free(seen.items);
  free(seen.slots);
  if (rc != 0) {
    goto cleanup;
  }
  *out = items;
  *nout = n;
  items = NULL;

cleanup:
  if (r.f != NULL) {
    fclose(r.f);
  }
  mpiar__ckpt_free(items, n);
  free(crcs);
  return rc;
}
