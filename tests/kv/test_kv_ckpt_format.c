/*
 * The checkpoint file without MPI: a round trip of integer and string keys of several dtypes
 * with and without momentum; every single-byte change of a small file and every truncation at
 * 1/8 steps detected as MPIAR_ERR_CORRUPT; a missing file, bad magic, other version and extra
 * bytes; an atomic save that leaves no temporary file and replaces the old file whole; a save
 * whose process is killed half-way leaves the previous checkpoint intact and its temporary file
 * is gone after the next save; a save running in another process makes a second one fail. A
 * changed value or momentum byte under a recomputed whole-file CRC is caught by the key's own
 * CRC; a FIFO, a directory or a device is refused without blocking. With a directory argument,
 * the fuzz target's seed checkpoints are read too.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kv_test.h"
#include "kvstore/crc32c.h"
#include "kvstore/kv_internal.h"

static char dir[256];

static mpiar__kv_entry_t *make(mpiar_kv_key_t key, mpiar_dtype_t dtype, size_t count, int mom,
                               unsigned seed) {
  mpiar__kv_entry_t *e = mpiar__kv_entry_new(key, dtype, count);
  KV_EXPECT(e != NULL, "allocation");
  if (e->bytes > 0) {
    e->value = malloc(e->bytes);
    KV_EXPECT(e->value != NULL, "allocation");
    for (size_t i = 0; i < e->bytes; i++) {
      ((unsigned char *)e->value)[i] = (unsigned char)(seed * 31 + i * 7);
    }
  }
  if (mom) {
    e->momentum = malloc(e->bytes ? e->bytes : 1);
    KV_EXPECT(e->momentum != NULL, "allocation");
    for (size_t i = 0; i < e->bytes; i++) {
      ((unsigned char *)e->momentum)[i] = (unsigned char)(seed * 17 + i * 3 + 1);
    }
  }
  return e;
}

static int same_entry(const mpiar__kv_entry_t *a, const mpiar__kv_entry_t *b) {
  if ((a->name == NULL) != (b->name == NULL)) {
    return 0;
  }
  if (a->name != NULL ? strcmp(a->name, b->name) != 0 : a->id != b->id) {
    return 0;
  }
  if (a->dtype != b->dtype || a->count != b->count || a->hash != b->hash) {
    return 0;
  }
  if (a->bytes > 0 && memcmp(a->value, b->value, a->bytes) != 0) {
    return 0;
  }
  if ((a->momentum == NULL) != (b->momentum == NULL)) {
    return 0;
  }
  return a->momentum == NULL || a->bytes == 0 || memcmp(a->momentum, b->momentum, a->bytes) == 0;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  KV_EXPECT(f != NULL, "open %s", path);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*len ? *len : 1);
  KV_EXPECT(b != NULL && fread(b, 1, *len, f) == *len, "read %s", path);
  fclose(f);
  return b;
}

static void spit(const char *path, const unsigned char *b, size_t len) {
  FILE *f = fopen(path, "wb");
  KV_EXPECT(f != NULL && fwrite(b, 1, len, f) == len, "write %s", path);
  fclose(f);
}

static int read_rc(const char *path) {
  mpiar__kv_entry_t **got = NULL;
  size_t n = 0;
  int rc = mpiar__ckpt_read(path, &got, &n);
  if (rc == 0) {
    mpiar__ckpt_free(got, n);
  }
  return rc;
}

/* The file offset of the first key's data: after the header and every record with its name. */
static size_t data_offset(const unsigned char *b, size_t len) {
  uint64_t nkeys = 0;
  for (int i = 7; i >= 0; i--) {
    nkeys = (nkeys << 8) | b[16 + i];
  }
  size_t off = MPIAR__CKPT_HEADER_BYTES;
  for (uint64_t k = 0; k < nkeys; k++) {
    KV_EXPECT(off + MPIAR__CKPT_RECORD_BYTES <= len, "record %llu", (unsigned long long)k);
    uint32_t name_len = (uint32_t)b[off + 4] | (uint32_t)b[off + 5] << 8 |
                        (uint32_t)b[off + 6] << 16 | (uint32_t)b[off + 7] << 24;
    off += MPIAR__CKPT_RECORD_BYTES + name_len;
  }
  return off;
}

/* Write the CRC32C of every byte before the trailer into it, as a writer would. */
static void reseal(unsigned char *b, size_t len) {
  uint32_t crc = mpiar__crc32c(0, b, len - MPIAR__CKPT_TRAILER_BYTES);
  for (int i = 0; i < 4; i++) {
    b[len - MPIAR__CKPT_TRAILER_BYTES + (size_t)i] = (unsigned char)(crc >> (8 * i));
  }
}

/*
 * A data byte changed and the whole-file CRC made right again, so that only the key's own CRC
 * (value or momentum) can tell: the first key holds @p bytes of value, then as many of momentum.
 */
static void check_key_crcs(const unsigned char *orig, size_t len, size_t bytes, const char *bad) {
  unsigned char *copy = malloc(len);
  KV_EXPECT(copy != NULL, "allocation");
  size_t at = data_offset(orig, len);
  static const struct {
    size_t skip;
    const char *want;
  } cases[] = {{0, "CRC32C of key 3 does not match its data"},
               {1, "CRC32C of the momentum of key 3 does not match its data"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memcpy(copy, orig, len);
    copy[at + cases[c].skip * bytes + 1] ^= 0x10;
    reseal(copy, len);
    spit(bad, copy, len);
    KV_EXPECT_RC(read_rc(bad), MPIAR_ERR_CORRUPT);
    KV_EXPECT(strstr(mpiar_last_error(), cases[c].want) != NULL, "detail: %s (expected '%s')",
              mpiar_last_error(), cases[c].want);
  }
  /* The same resealing without a change loads: the cases above differ only in the data byte. */
  memcpy(copy, orig, len);
  reseal(copy, len);
  spit(bad, copy, len);
  KV_EXPECT_EQ(read_rc(bad), MPIAR_SUCCESS);
  free(copy);
  printf("a changed value byte and a changed momentum byte under a recomputed file CRC: caught "
         "by the key's CRC\n");
}

/* What is not a regular file is refused at once, naming the path and what it is. */
static void check_not_regular(void) {
  char fifo[320];
  snprintf(fifo, sizeof fifo, "%s/fifo.ckpt", dir);
  KV_EXPECT(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
  static const struct {
    const char *path;
    const char *kind;
  } cases[] = {{NULL, "is a FIFO (named pipe), not a regular file"},
               {"/tmp", "is a directory, not a regular file"},
               {"/dev/zero", "is a character device, not a regular file"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const char *p = cases[c].path != NULL ? cases[c].path : fifo;
    KV_EXPECT_RC(read_rc(p), MPIAR_ERR_IO);
    KV_EXPECT(strstr(mpiar_last_error(), p) != NULL &&
                  strstr(mpiar_last_error(), cases[c].kind) != NULL,
              "%s: detail: %s", p, mpiar_last_error());
  }
  unlink(fifo);
  printf("a FIFO, a directory and /dev/zero refused as checkpoints\n");
}

/* Only the final file may remain in the directory: no temporary file survives a save. */
static void expect_only(const char *name) {
  DIR *d = opendir(dir);
  KV_EXPECT(d != NULL, "opendir %s", dir);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
      continue;
    }
    KV_EXPECT(strcmp(de->d_name, name) == 0, "unexpected file '%s' in %s", de->d_name, dir);
  }
  closedir(d);
}

/* Count the files of the directory; *other gets the name of one that is not `name`. */
static int count_files(const char *name, char *other, size_t len) {
  DIR *d = opendir(dir);
  KV_EXPECT(d != NULL, "opendir %s", dir);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
      continue;
    }
    n++;
    if (strcmp(de->d_name, name) != 0) {
      snprintf(other, len, "%s", de->d_name);
    }
  }
  closedir(d);
  return n;
}

/* The pipe a child in the middle of a save writes to before it stops there. */
static int stopped_fd = -1;

static void stop_here(int sig) {
  (void)sig;
  char c = 1;
  if (write(stopped_fd, &c, 1) != 1) {
    _exit(4);
  }
  for (;;) {
    pause();
  }
}

/*
 * Run a save in a child process whose file size limit (RLIMIT_FSIZE) ends it after `limit`
 * bytes of the temporary file: the kernel sends SIGXFSZ in the middle of a write. With `stop`
 * the child catches the signal and stays there, alive, holding whatever the save holds; without
 * it the signal kills the child as SIGKILL would, at a known point. @return the child's pid.
 */
static pid_t save_in_child(const char *path, mpiar__kv_entry_t *const *ents, size_t n, rlim_t limit,
                           int stop) {
  int fds[2];
  KV_EXPECT(pipe(fds) == 0, "pipe");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  KV_EXPECT(pid >= 0, "fork");
  if (pid == 0) {
    close(fds[0]);
    stopped_fd = fds[1];
    struct rlimit rl = {limit, limit};
    signal(SIGXFSZ, stop ? stop_here : SIG_DFL);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
      _exit(5);
    }
    mpiar__ckpt_write(path, ents, n);
    _exit(3); /* the save was not interrupted: the parent reports it */
  }
  close(fds[1]);
  if (stop) {
    char c = 0;
    KV_EXPECT(read(fds[0], &c, 1) == 1, "the child did not stop in the middle of its save");
  }
  close(fds[0]);
  return pid;
}

/* Interrupted and concurrent saves (see the file's header). */
static void check_interrupted_saves(const char *path, mpiar__kv_entry_t *const *ents, size_t n) {
  /* The store to save is larger than the limit: 100000 bytes of one key. */
  mpiar__kv_entry_t *big = make(MPIAR_KV_STR("big"), MPIAR_FLOAT32, 25000, 0, 9);
  mpiar__kv_entry_t *all[8];
  for (size_t i = 0; i < n; i++) {
    all[i] = ents[i];
  }
  all[n] = big;
  size_t before_len = 0;
  unsigned char *before = slurp(path, &before_len);
  char other[256] = "";

  /* Killed half-way: the previous checkpoint survives, a temporary file is left over. */
  pid_t pid = save_in_child(path, all, n + 1, 4096, 0);
  int status = 0;
  KV_EXPECT(waitpid(pid, &status, 0) == pid, "waitpid");
  KV_EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ,
            "the saving child was not killed in the middle of its save (status 0x%x)", status);
  KV_EXPECT_EQ(read_rc(path), MPIAR_SUCCESS);
  size_t len = 0;
  unsigned char *now = slurp(path, &len);
  KV_EXPECT(len == before_len && memcmp(now, before, len) == 0,
            "the killed save changed the previous checkpoint");
  free(now);
  KV_EXPECT(count_files("model.ckpt", other, sizeof other) == 2,
            "a killed save should leave its temporary file");
  printf("a save killed after 4096 bytes left '%s'\n", other);
  /* The next save takes the leftover over: one file remains, the new checkpoint. */
  KV_OK(mpiar__ckpt_write(path, all, n + 1));
  expect_only("model.ckpt");
  mpiar__kv_entry_t **got = NULL;
  size_t ngot = 0;
  KV_OK(mpiar__ckpt_read(path, &got, &ngot));
  KV_EXPECT(ngot == n + 1 && same_entry(got[n], big), "the save after the killed one");
  mpiar__ckpt_free(got, ngot);

  /* A leftover with other contents (an older, longer temporary file) is truncated, not kept. */
  char tmp[400];
  snprintf(tmp, sizeof tmp, "%s%s", path, MPIAR__CKPT_TMP_SUFFIX);
  unsigned char junk[200000];
  memset(junk, 0x5A, sizeof junk);
  spit(tmp, junk, sizeof junk);
  KV_OK(mpiar__ckpt_write(path, ents, n));
  expect_only("model.ckpt");
  KV_EXPECT_EQ(read_rc(path), MPIAR_SUCCESS);

  /* A save in progress in another process: a second save fails and changes nothing. */
  free(before);
  before = slurp(path, &before_len);
  pid = save_in_child(path, all, n + 1, 4096, 1);
  KV_EXPECT_RC(mpiar__ckpt_write(path, ents, n), MPIAR_ERR_IO);
  KV_EXPECT(strstr(mpiar_last_error(), "another process is saving") != NULL, "detail: %s",
            mpiar_last_error());
  now = slurp(path, &len);
  KV_EXPECT(len == before_len && memcmp(now, before, len) == 0,
            "a refused save changed the checkpoint");
  free(now);
  /* Once that process is killed, saving works again and no temporary file remains. */
  kill(pid, SIGKILL);
  KV_EXPECT(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "waitpid");
  KV_OK(mpiar__ckpt_write(path, all, n + 1));
  expect_only("model.ckpt");
  KV_EXPECT_EQ(read_rc(path), MPIAR_SUCCESS);
  free(before);
  mpiar__kv_entry_free(big);
}

/*
 * The fuzz target's seed checkpoints (tests/fuzz/corpus/ckpt_read, written by
 * tests/fuzz/make_seeds.py): those named valid-* must load, bad-* must be refused as damaged, so
 * that the seeds follow the format when it changes.
 */
static void check_seeds(const char *seeds) {
  DIR *d = opendir(seeds);
  KV_EXPECT(d != NULL, "opendir %s", seeds);
  int nvalid = 0, nbad = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", seeds, de->d_name);
    if (strncmp(de->d_name, "valid-", 6) == 0) {
      KV_EXPECT(read_rc(p) == MPIAR_SUCCESS, "seed %s: %s", p, mpiar_last_error());
      nvalid++;
    } else if (strncmp(de->d_name, "bad-", 4) == 0) {
      KV_EXPECT(read_rc(p) == MPIAR_ERR_CORRUPT, "seed %s is not refused as damaged", p);
      nbad++;
    }
  }
  closedir(d);
  KV_EXPECT(nvalid > 0 && nbad > 0, "no seeds in %s", seeds);
  printf("%d valid and %d damaged seed checkpoints read as such\n", nvalid, nbad);
}

int main(int argc, char **argv) {
  if (argc > 1) {
    check_seeds(argv[1]);
  }
  snprintf(dir, sizeof dir, "/tmp/mpiar_kv_ckpt_XXXXXX");
  KV_EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
  char path[320], bad[320];
  snprintf(path, sizeof path, "%s/model.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);

  mpiar__kv_entry_t *ents[6];
  ents[0] = make(MPIAR_KV_INT(3), MPIAR_FLOAT32, 5, 1, 1);
  ents[1] = make(MPIAR_KV_STR("3"), MPIAR_FLOAT64, 3, 0, 2);
  ents[2] = make(MPIAR_KV_STR("layer1.weight"), MPIAR_BFLOAT16, 7, 0, 3);
  ents[3] = make(MPIAR_KV_INT(-42), MPIAR_INT64, 2, 0, 4);
  ents[4] = make(MPIAR_KV_STR(""), MPIAR_UINT8, 0, 0, 5);
  ents[5] = make(MPIAR_KV_INT(INT64_MAX), MPIAR_FLOAT16, 4, 1, 6);
  size_t n = sizeof ents / sizeof ents[0];

  /* Round trip. */
  KV_OK(mpiar__ckpt_write(path, ents, n));
  expect_only("model.ckpt");
  mpiar__kv_entry_t **got = NULL;
  size_t ngot = 0;
  KV_OK(mpiar__ckpt_read(path, &got, &ngot));
  KV_EXPECT_EQ(ngot, n);
  for (size_t i = 0; i < n; i++) {
    KV_EXPECT(same_entry(ents[i], got[i]), "entry %zu differs after the round trip", i);
  }
  mpiar__ckpt_free(got, ngot);

  /* An empty store is a valid checkpoint too. */
  KV_OK(mpiar__ckpt_write(bad, NULL, 0));
  KV_OK(mpiar__ckpt_read(bad, &got, &ngot));
  KV_EXPECT_EQ(ngot, 0);
  mpiar__ckpt_free(got, ngot);

  size_t len = 0;
  unsigned char *orig = slurp(path, &len);
  printf("checkpoint of %zu keys: %zu bytes\n", n, len);

  /* Every byte flipped, one at a time, in several ways: always detected. */
  static const unsigned char flips[] = {0x01, 0x80, 0xFF};
  unsigned char *copy = malloc(len);
  KV_EXPECT(copy != NULL, "allocation");
  size_t tried = 0;
  for (size_t pos = 0; pos < len; pos++) {
    for (size_t k = 0; k < sizeof flips; k++) {
      memcpy(copy, orig, len);
      copy[pos] ^= flips[k];
      spit(bad, copy, len);
      int rc = read_rc(bad);
      KV_EXPECT(rc == MPIAR_ERR_CORRUPT, "byte %zu ^ 0x%02X: %s (%s)", pos, flips[k],
                mpiar_err_name(rc), mpiar_last_error());
      tried++;
    }
  }
  printf("%zu single-byte corruptions detected\n", tried);

  /* Truncation at every 1/8 of the file (and one byte short), and one byte too many. */
  for (int e = 0; e <= 8; e++) {
    size_t cut = e < 8 ? len * (size_t)e / 8 : len - 1;
    spit(bad, orig, cut);
    int rc = read_rc(bad);
    KV_EXPECT(rc == MPIAR_ERR_CORRUPT, "truncated to %zu of %zu bytes: %s (%s)", cut, len,
              mpiar_err_name(rc), mpiar_last_error());
  }
  memcpy(copy, orig, len);
  FILE *f = fopen(bad, "wb");
  KV_EXPECT(f != NULL && fwrite(orig, 1, len, f) == len && fputc(0, f) == 0, "write");
  fclose(f);
  KV_EXPECT_RC(read_rc(bad), MPIAR_ERR_CORRUPT);

  /* Bad magic and another version give their own messages. */
  memcpy(copy, orig, len);
  copy[0] = 'X';
  spit(bad, copy, len);
  KV_EXPECT_RC(read_rc(bad), MPIAR_ERR_CORRUPT);
  KV_EXPECT(strstr(mpiar_last_error(), "magic") != NULL, "detail: %s", mpiar_last_error());
  memcpy(copy, orig, len);
  copy[8] = 2;
  spit(bad, copy, len);
  KV_EXPECT_RC(read_rc(bad), MPIAR_ERR_CORRUPT);
  KV_EXPECT(strstr(mpiar_last_error(), "version 2") != NULL, "detail: %s", mpiar_last_error());

  check_key_crcs(orig, len, ents[0]->bytes, bad);
  check_not_regular();

  /* A missing file is an I/O error naming the file. */
  unlink(bad);
  KV_EXPECT_RC(read_rc(bad), MPIAR_ERR_IO);
  KV_EXPECT(strstr(mpiar_last_error(), "bad.ckpt") != NULL, "detail: %s", mpiar_last_error());

  /* Saving again replaces the file whole; a save into a missing directory fails cleanly. */
  ((unsigned char *)ents[0]->value)[0] ^= 0x55;
  KV_OK(mpiar__ckpt_write(path, ents, n));
  expect_only("model.ckpt");
  KV_OK(mpiar__ckpt_read(path, &got, &ngot));
  KV_EXPECT(same_entry(ents[0], got[0]), "the second save did not replace the first");
  mpiar__ckpt_free(got, ngot);
  char nodir[400];
  snprintf(nodir, sizeof nodir, "%s/missing/model.ckpt", dir);
  KV_EXPECT_RC(mpiar__ckpt_write(nodir, ents, n), MPIAR_ERR_IO);
  expect_only("model.ckpt");

  check_interrupted_saves(path, ents, n);

  unlink(path);
  rmdir(dir);
  free(copy);
  free(orig);
  for (size_t i = 0; i < n; i++) {
    mpiar__kv_entry_free(ents[i]);
  }
  printf("checkpoint format: all checks passed\n");
  return 0;
}
