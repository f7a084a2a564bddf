/*
 * The tuning-file reader and writer (src/tuning), no MPI: a file written by the writer reads back
 * field for field; every kind of damage (malformed or truncated JSON, another format or version,
 * wrong types, out-of-range values, an unknown algorithm, overlapping or unsorted ranges, unknown
 * or duplicate members, a segment on an unsegmented algorithm) is MPIAR_ERR_ENV with a detail
 * that names MPIAR_TUNING_FILE, the file, and the line (syntax) or the field; lookups find the
 * range of a size (a range's last byte included, the next one not), gaps fall through; a table
 * applies only to its communicator and machine. Only regular files are read: a FIFO, a device or
 * a directory is refused without blocking, a file over the size limit by its real size; a tool's
 * option can stand in for MPIAR_TUNING_FILE in the messages.
 *
 * In a build without libjansson every file is refused with a message saying so; the test checks
 * that and reports itself skipped (exit code 77) for the rest.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/test_check.h"
#include "tuning/tuning.h"

/* A valid file; the cases below change one thing in it. */
static const char *const valid =
    "{\n"
    "  \"format\": \"mpiar-tuning\",\n"
    "  \"version\": 1,\n"
    "  \"created\": \"2026-12-01T00:00:00Z\",\n"
    "  \"mpiar_version\": \"0.2.0\",\n"
    "  \"fingerprint\": {\"mpi_library\": \"MPI X\", \"cpu\": \"CPU Y\", \"kernel_level\": "
    "\"avx2\"},\n"
    "  \"topology\": {\"ranks\": 4, \"nodes\": 2, \"ranks_per_node\": 2},\n"
    "  \"model\": {\"alpha\": 1e-6, \"beta\": 1e-10, \"alpha_inter\": 5e-6, \"beta_inter\": "
    "4e-10,\n"
    "            \"gamma\": {\"float32\": 5e-11, \"bfloat16\": 1.5e-10}},\n"
    "  \"tables\": [\n"
    "    {\"dtype\": \"float32\", \"ranges\": [\n"
    "      {\"min_bytes\": 0, \"max_bytes\": 4095, \"algorithm\": \"recursive_doubling\"},\n"
    "      {\"min_bytes\": 4096, \"max_bytes\": 1048575, \"algorithm\": \"rabenseifner\", "
    "\"segment_bytes\": 0},\n"
    "      {\"min_bytes\": 2097152, \"max_bytes\": null, \"algorithm\": \"ring\", "
    "\"segment_bytes\": 1048576}\n"
    "    ]},\n"
    "    {\"dtype\": \"bf16\", \"ranges\": [\n"
    "      {\"min_bytes\": 0, \"max_bytes\": null, \"algorithm\": \"ring\"}\n"
    "    ]}\n"
    "  ],\n"
    "  \"measurements\": {\"anything\": [1, 2, {\"x\": null}]},\n"
    "  \"comment\": \"free text\"\n"
    "}\n";

/* valid with the first occurrence of `from` replaced by `to`. */
static char *edit(const char *from, const char *to) {
  const char *at = strstr(valid, from);
  if (at == NULL) {
    fprintf(stderr, "test bug: '%s' is not in the valid file\n", from);
    exit(1);
  }
  size_t n = strlen(valid) - strlen(from) + strlen(to) + 1;
  char *s = malloc(n);
  size_t head = (size_t)(at - valid);
  memcpy(s, valid, head);
  strcpy(s + head, to);
  strcat(s, at + strlen(from));
  return s;
}

/* The parse fails with MPIAR_ERR_ENV and a detail holding the setting, the source and @p want. */
static void refused(const char *what, const char *text, size_t len, const char *want) {
  mpiar__tuning_t t;
  int rc = mpiar__tuning_parse(text, len, "case.json", &t);
  const char *d = mpiar_last_error();
  CHECK(rc == MPIAR_ERR_ENV, "%s: %s (%s), expected MPIAR_ERR_ENV", what, mpiar_err_name(rc), d);
  CHECK(strstr(d, "MPIAR_TUNING_FILE=case.json: ") == d,
        "%s: detail '%s' does not start with "
        "the setting and the file",
        what, d);
  CHECK(strstr(d, want) != NULL, "%s: detail '%s' lacks '%s'", what, d, want);
}

static void refused_edit(const char *what, const char *from, const char *to, const char *want) {
  char *s = edit(from, to);
  refused(what, s, strlen(s), want);
  free(s);
}

static void check_valid(void) {
  mpiar__tuning_t t;
  int rc = mpiar__tuning_parse(valid, strlen(valid), "valid.json", &t);
  CHECK(rc == MPIAR_SUCCESS, "valid file: %s (%s)", mpiar_err_name(rc), mpiar_last_error());
  CHECK(t.version == 1 && t.ranks == 4 && t.nodes == 2 && t.ranks_per_node == 2, "topology");
  CHECK(t.alpha == 1e-6 && t.beta == 1e-10 && t.alpha_inter == 5e-6 && t.beta_inter == 4e-10,
        "model");
  CHECK(t.gamma[MPIAR_FLOAT32] == 5e-11 && t.gamma[MPIAR_BFLOAT16] == 1.5e-10 &&
            isnan(t.gamma[MPIAR_FLOAT64]),
        "gamma");
  CHECK(strcmp(t.fingerprint.cpu, "CPU Y") == 0 && strcmp(t.created, "2026-12-01T00:00:00Z") == 0,
        "strings");
  CHECK(t.ntables == 2 && t.tables[0].nranges == 3 && t.tables[1].dtype == MPIAR_BFLOAT16,
        "tables");

  /* Lookups: inside ranges, at their edges, in the gap, past the last bound, other types. */
  const mpiar__tuning_range_t *g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 0);
  CHECK(g != NULL && strcmp(g->alg->name, "recursive_doubling") == 0, "lookup 0");
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 4096);
  CHECK(g != NULL && strcmp(g->alg->name, "rabenseifner") == 0, "lookup 4096");
  CHECK(mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 1048576) == NULL, "the gap falls to the model");
  /* A range's upper bound is inclusive: its last byte is in it, the next byte is not. */
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 4095);
  CHECK(g != NULL && strcmp(g->alg->name, "recursive_doubling") == 0 && g->min_bytes == 0 &&
            g->max_bytes == 4095,
        "lookup 4095, the last byte of 0..4095: %s", g ? g->alg->name : "(none)");
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 1048575);
  CHECK(g != NULL && strcmp(g->alg->name, "rabenseifner") == 0 && g->min_bytes == 4096 &&
            g->max_bytes == 1048575,
        "lookup 1048575, the last byte of 4096..1048575: %s", g ? g->alg->name : "(none)");
  CHECK(mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 2097151) == NULL, "lookup 2097151, in the gap");
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 2097152);
  CHECK(g != NULL && strcmp(g->alg->name, "ring") == 0 && g->segment_bytes == 1048576,
        "lookup 2097152, the first byte of the unbounded range");
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, SIZE_MAX - 1);
  CHECK(g != NULL && strcmp(g->alg->name, "ring") == 0, "lookup SIZE_MAX - 1");
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, (size_t)1 << 40);
  CHECK(g != NULL && g->segment_bytes == 1048576, "unbounded last range");
  CHECK(mpiar__tuning_lookup(&t, MPIAR_FLOAT64, 100) == NULL, "no float64 table");
  g = mpiar__tuning_lookup(&t, MPIAR_BFLOAT16, 100);
  CHECK(g != NULL && strcmp(g->alg->name, "ring") == 0, "bf16 table");

  /* Parameters per type: float64 has no gamma of its own and takes float32's. */
  mpiar__cost_params_t c;
  mpiar__tuning_params(&t, MPIAR_FLOAT64, &c);
  CHECK(c.alpha == 1e-6 && c.beta == 1e-10 && c.gamma == 5e-11, "float64 params");
  mpiar__tuning_params(&t, MPIAR_BFLOAT16, &c);
  CHECK(c.gamma == 1.5e-10, "bf16 gamma");

  /* Applies to its communicator and machine only, and says why not. */
  mpiar__fingerprint_t here = {"MPI X", "CPU Y", "avx2"};
  char why[320];
  CHECK(mpiar__tuning_applies(&t, 4, 2, 2, &here, why, sizeof why) == 1, "applies");
  CHECK(mpiar__tuning_applies(&t, 2, 1, 2, &here, why, sizeof why) == 0 &&
            strstr(why, "measured on 4 ranks on 2 nodes") != NULL,
        "other rank count: %s", why);
  CHECK(mpiar__tuning_applies(&t, 4, 4, 1, &here, why, sizeof why) == 0, "other topology");
  mpiar__fingerprint_t other = here;
  snprintf(other.cpu, sizeof other.cpu, "CPU Z");
  CHECK(mpiar__tuning_applies(&t, 4, 2, 2, &other, why, sizeof why) == 0 &&
            strstr(why, "CPU Y") != NULL && strstr(why, "CPU Z") != NULL,
        "other CPU: %s", why);
  snprintf(other.cpu, sizeof other.cpu, "CPU Y");
  snprintf(other.kernel_level, sizeof other.kernel_level, "avx512");
  CHECK(mpiar__tuning_applies(&t, 4, 2, 2, &other, why, sizeof why) == 0, "other kernels");

  /* Without a fingerprint a file applies on any machine with its topology. */
  char *nofp = edit("  \"fingerprint\": {\"mpi_library\": \"MPI X\", \"cpu\": \"CPU Y\", "
                    "\"kernel_level\": \"avx2\"},\n",
                    "");
  rc = mpiar__tuning_parse(nofp, strlen(nofp), "nofp.json", &t);
  CHECK(rc == MPIAR_SUCCESS, "no fingerprint: %s", mpiar_last_error());
  CHECK(mpiar__tuning_applies(&t, 4, 2, 2, &other, why, sizeof why) == 1, "any machine");
  free(nofp);

  /* A range of one byte (min_bytes == max_bytes) holds that byte only. */
  char *one = edit("\"min_bytes\": 4096, \"max_bytes\": 1048575",
                   "\"min_bytes\": 4096, \"max_bytes\": 4096");
  rc = mpiar__tuning_parse(one, strlen(one), "one.json", &t);
  CHECK(rc == MPIAR_SUCCESS, "a one-byte range: %s", mpiar_last_error());
  g = mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 4096);
  CHECK(g != NULL && strcmp(g->alg->name, "rabenseifner") == 0, "lookup 4096 in 4096..4096");
  CHECK(mpiar__tuning_lookup(&t, MPIAR_FLOAT32, 4097) == NULL, "lookup 4097 after 4096..4096");
  free(one);

  /* The inter-node terms may be null or absent (one node). */
  refused_edit("both inter terms or none", "\"beta_inter\": 4e-10", "\"beta_inter\": null",
               "field model.alpha_inter: alpha_inter and beta_inter are given together");
}

/* What the writer writes, the reader reads back. */
static void check_round_trip(void) {
  mpiar__tuning_t t, u;
  int rc = mpiar__tuning_parse(valid, strlen(valid), "valid.json", &t);
  CHECK(rc == MPIAR_SUCCESS, "valid: %s", mpiar_last_error());
  char path[] = "/tmp/mpiar_tuning_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  CHECK(f != NULL, "temporary file");
  if (f == NULL) {
    return;
  }
  CHECK(mpiar__tuning_write(&t, "{\"sizes\": [1, 2]}", f) == 0, "write");
  fclose(f);
  rc = mpiar__tuning_load(path, &u);
  CHECK(rc == MPIAR_SUCCESS, "read back: %s", mpiar_last_error());
  CHECK(strcmp(u.source, path) == 0, "source");
  CHECK(u.ranks == t.ranks && u.nodes == t.nodes && u.ranks_per_node == t.ranks_per_node &&
            u.alpha == t.alpha && u.beta == t.beta && u.alpha_inter == t.alpha_inter &&
            u.beta_inter == t.beta_inter && u.ntables == t.ntables,
        "fields differ after the round trip");
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    CHECK((isnan(u.gamma[d]) && isnan(t.gamma[d])) || u.gamma[d] == t.gamma[d], "gamma %d", d);
  }
  for (int k = 0; k < t.ntables; k++) {
    CHECK(u.tables[k].dtype == t.tables[k].dtype && u.tables[k].nranges == t.tables[k].nranges,
          "table %d", k);
    for (int i = 0; i < t.tables[k].nranges; i++) {
      const mpiar__tuning_range_t *a = &t.tables[k].ranges[i], *b = &u.tables[k].ranges[i];
      CHECK(a->min_bytes == b->min_bytes && a->max_bytes == b->max_bytes && a->alg == b->alg &&
                a->segment_bytes == b->segment_bytes,
            "table %d range %d", k, i);
    }
  }
  CHECK(strcmp(u.fingerprint.mpi_library, "MPI X") == 0, "fingerprint");
  remove(path);
}

static void check_refused(void) {
  /* Syntax: the line and column of the fault. */
  refused_edit("malformed JSON", "\"version\": 1,", "\"version\": 1,,", "line 3, column");
  refused_edit("a missing comma", "\"alpha\": 1e-6, ", "\"alpha\": 1e-6 ", "line 8, column");
  refused_edit("a single quote", "\"format\"", "'format'", "line 2, column");
  refused("truncated", valid, strlen(valid) / 2, "near end of file");
  refused("cut in a string", valid, (size_t)(strstr(valid, "CPU Y") - valid),
          "premature end of input");
  refused("empty", "", 0, "line 1");
  refused("not an object", "[1, 2]", 6, "the document is an array, expected an object");
  refused_edit("duplicate member", "\"version\": 1,", "\"version\": 1, \"version\": 1,",
               "duplicate object key");
  refused("NUL inside", "{\"format\": \"mpiar-\0tuning\"}", 26, "line 1");

  /* Header: format and version come first. */
  refused_edit("other format", "\"mpiar-tuning\"", "\"other-tuning\"",
               "field format: is not \"mpiar-tuning\"");
  refused_edit("no format", "\"format\": \"mpiar-tuning\",", "", "field format: missing");
  refused_edit("future version", "\"version\": 1", "\"version\": 2",
               "field version: version 2 is not supported");
  refused_edit("version as text", "\"version\": 1", "\"version\": \"1\"",
               "field version: is a string, expected an integer");
  refused_edit("version zero", "\"version\": 1", "\"version\": 0",
               "field version: is 0, expected an integer in [1,");

  /* Types and ranges of fields. */
  refused_edit("ranks as text", "\"ranks\": 4", "\"ranks\": \"4\"",
               "field topology.ranks: is a string, expected an integer");
  refused_edit("ranks fractional", "\"ranks\": 4", "\"ranks\": 4.5",
               "field topology.ranks: is a number, expected an integer");
  refused_edit("nodes above ranks", "\"nodes\": 2", "\"nodes\": 5",
               "field topology.nodes: is 5, expected an integer in [1, 4]");
  refused_edit("impossible placement", "\"ranks_per_node\": 2", "\"ranks_per_node\": 1",
               "field topology: 4 ranks cannot be placed on 2 nodes");
  refused_edit("topology missing", "\"topology\"", "\"topolog\"", "unknown member 'topolog'");
  refused_edit("alpha as text", "\"alpha\": 1e-6", "\"alpha\": \"fast\"",
               "field model.alpha: is a string, expected a number of seconds");
  refused_edit("negative beta", "\"beta\": 1e-10", "\"beta\": -1e-10",
               "field model.beta: is -1e-10, expected seconds in [0, 1)");
  refused_edit("gamma of no type", "\"bfloat16\": 1.5e-10", "\"bfloat17\": 1.5e-10",
               "field model.gamma.bfloat17: 'bfloat17' is not a datatype");
  refused_edit("gamma without float32", "\"float32\": 5e-11, ", "",
               "field model.gamma.float32: missing");
  static const char small[] =
      "{\"format\": \"mpiar-tuning\", \"version\": 1,\n"
      " \"topology\": {\"ranks\": 2, \"nodes\": 1, \"ranks_per_node\": 2},\n"
      " \"model\": {\"alpha\": 1e-6, \"beta\": 1e-10, \"gamma\": {\"float32\": 5e-11}},\n"
      " \"tables\": {\"float32\": []}}\n";
  refused("tables not an array", small, strlen(small),
          "field tables: is an object, expected an array");
  refused_edit("table of no type", "\"dtype\": \"bf16\"", "\"dtype\": \"complex\"",
               "field tables[1].dtype: 'complex' is not a datatype");
  refused_edit("two tables of a type", "\"dtype\": \"bf16\"", "\"dtype\": \"float32\"",
               "field tables[1].dtype: float32 has a table already (tables[0])");
  refused_edit("max below min", "\"max_bytes\": 4095", "\"max_bytes\": -1",
               "field tables[0].ranges[0].max_bytes: is -1, expected an integer in [0,");
  refused_edit("max as text", "\"max_bytes\": 4095", "\"max_bytes\": \"4K\"",
               "field tables[0].ranges[0].max_bytes: is a string, expected an integer");
  refused_edit("range not an object",
               "{\"min_bytes\": 0, \"max_bytes\": null, \"algorithm\": "
               "\"ring\"}",
               "[0, null, \"ring\"]", "field tables[1].ranges[0]: is an array, expected an object");
  refused_edit("range member misspelt", "\"segment_bytes\": 1048576", "\"segment\": 1048576",
               "field tables[0].ranges[2]: unknown member 'segment'");
  refused_edit("segment too small", "\"segment_bytes\": 1048576", "\"segment_bytes\": 100",
               "field tables[0].ranges[2].segment_bytes: is 100, expected 0 or at least 4096");
  refused_edit("segment on an unsegmented algorithm",
               "\"algorithm\": \"rabenseifner\", \"segment_bytes\": 0",
               "\"algorithm\": \"rabenseifner\", \"segment_bytes\": 65536",
               "field tables[0].ranges[1].segment_bytes: is 65536, but rabenseifner is not "
               "segmented");

  /* Unknown algorithms, overlapping and unsorted ranges. */
  refused_edit("unknown algorithm", "\"algorithm\": \"rabenseifner\"", "\"algorithm\": \"tree\"",
               "field tables[0].ranges[1].algorithm: unknown algorithm 'tree' (ring, ");
  refused_edit("research variant", "\"algorithm\": \"rabenseifner\"",
               "\"algorithm\": \"repro_direct\"", "unknown algorithm 'repro_direct'");
  refused_edit("algorithm as number", "\"algorithm\": \"rabenseifner\"", "\"algorithm\": 3",
               "field tables[0].ranges[1].algorithm: is an integer, expected an algorithm name");
  refused_edit("overlapping ranges", "\"min_bytes\": 4096,", "\"min_bytes\": 4000,",
               "field tables[0].ranges[1]: 4000..1048575 bytes overlaps or precedes ranges[0] "
               "(0..4095 bytes)");
  refused_edit("a range starting on the previous one's last byte", "\"min_bytes\": 4096,",
               "\"min_bytes\": 4095,",
               "field tables[0].ranges[1]: 4095..1048575 bytes overlaps or precedes ranges[0] "
               "(0..4095 bytes)");
  refused_edit("unsorted ranges", "\"min_bytes\": 2097152,", "\"min_bytes\": 1000,",
               "field tables[0].ranges[2]: 1000 bytes and more overlaps or precedes ranges[1]");
  refused_edit("range after an unbounded one", "\"max_bytes\": 1048575", "\"max_bytes\": null",
               "field tables[0].ranges[2]: 2097152 bytes and more overlaps or precedes "
               "ranges[1] (4096 bytes and more)");
  refused_edit("unknown top-level member", "\"comment\"", "\"coment\"",
               "field (top level): unknown member 'coment'");
  refused_edit("fingerprint field missing", "\"cpu\": \"CPU Y\", ", "",
               "field fingerprint.cpu: missing");
}

/* A file of @p text in a new temporary path (into @p path, of PATH_MAX). @return 0 or -1. */
static int temp_file(char *path, size_t len, const char *text) {
  snprintf(path, len, "/tmp/mpiar_tuning_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) {
    return -1;
  }
  size_t n = strlen(text);
  int ok = write(fd, text, n) == (ssize_t)n;
  close(fd);
  return ok ? 0 : -1;
}

/* The load fails with MPIAR_ERR_ENV and the detail is exactly "@p want". */
/* Make @p path a sparse file of @p bytes (holes: no disk space used). */
static void sparse_file(const char *path, off_t bytes) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && ftruncate(fd, bytes) == 0, "a sparse file of %lld bytes", (long long)bytes);
  if (fd >= 0) {
    close(fd);
  }
}

static void load_refused(const char *what, const char *path, const char *want) {
  mpiar__tuning_t t;
  int rc = mpiar__tuning_load(path, &t);
  CHECK(rc == MPIAR_ERR_ENV && strcmp(mpiar_last_error(), want) == 0, "%s: %s: '%s', expected '%s'",
        what, mpiar_err_name(rc), mpiar_last_error(), want);
}

/*
 * What is not a regular file is refused, without blocking (a FIFO would block open() until a
 * writer came: the test's timeout turns that into a failure), and a file too large is refused
 * with its own size, unread.
 */
static void check_not_regular(void) {
  char dir[] = "/tmp/mpiar_tuning_dir_XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char fifo[128], want[400];
  snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
  snprintf(want, sizeof want, "MPIAR_TUNING_FILE=%s: is a FIFO (named pipe), not a regular file",
           fifo);
  load_refused("a FIFO", fifo, want);
  load_refused("/dev/zero", "/dev/zero",
               "MPIAR_TUNING_FILE=/dev/zero: is a character device, not a regular file");
  snprintf(want, sizeof want, "MPIAR_TUNING_FILE=%s: is a directory, not a regular file", dir);
  load_refused("a directory", dir, want);

  /* 209,716,567 bytes, sparse: refused by its size as fstat gives it, not by what was read. */
  char big[128];
  snprintf(big, sizeof big, "%s/big.json", dir);
  sparse_file(big, 209716567);
  snprintf(want, sizeof want,
           "MPIAR_TUNING_FILE=%s: 209716567 bytes, larger than the 16777216 bytes read", big);
  load_refused("a sparse file of 209716567 bytes", big, want);
  /* One byte over the limit is too many; the limit itself is read (and is not JSON). */
  sparse_file(big, 16777217);
  snprintf(want, sizeof want,
           "MPIAR_TUNING_FILE=%s: 16777217 bytes, larger than the 16777216 bytes read", big);
  load_refused("one byte over the limit", big, want);
  sparse_file(big, 16777216);
  mpiar__tuning_t t;
  int rc = mpiar__tuning_load(big, &t);
  CHECK(rc == MPIAR_ERR_ENV && strstr(mpiar_last_error(), "line 1, column") != NULL,
        "a file of the limit's size is read and parsed: %s", mpiar_last_error());
  unlink(big);
  unlink(fifo);
  rmdir(dir);
}

/* A tool's option names the file in every message, in place of MPIAR_TUNING_FILE. */
static void check_load_as(void) {
  mpiar__tuning_t t;
  int rc = mpiar__tuning_load_as("/nonexistent/t.json", "--tuning-file", &t);
  CHECK(rc == MPIAR_ERR_ENV &&
            strstr(mpiar_last_error(), "--tuning-file=/nonexistent/t.json: cannot open it: ") ==
                mpiar_last_error(),
        "missing, by an option: %s", mpiar_last_error());
  char path[64], want[160];
  char *s = edit("\"ranks\": 4", "\"ranks\": \"4\"");
  CHECK(temp_file(path, sizeof path, s) == 0, "temporary file");
  free(s);
  rc = mpiar__tuning_load_as(path, "--tuning-file", &t);
  snprintf(want, sizeof want,
           "--tuning-file=%s: field topology.ranks: is a string, expected an integer", path);
  CHECK(rc == MPIAR_ERR_ENV && strcmp(mpiar_last_error(), want) == 0,
        "damaged, by an option: '%s', expected '%s'", mpiar_last_error(), want);
  remove(path);
  CHECK(temp_file(path, sizeof path, valid) == 0, "temporary file");
  rc = mpiar__tuning_load_as(path, "--tuning-file", &t);
  CHECK(rc == MPIAR_SUCCESS && t.ntables == 2, "valid, by an option: %s", mpiar_last_error());
  remove(path);
}

static void check_files(void) {
  /* A missing file, and the process's file: loaded once, the same error every time. */
  mpiar__tuning_t t;
  int rc = mpiar__tuning_load("/nonexistent/tuning.json", &t);
  CHECK(rc == MPIAR_ERR_ENV &&
            strstr(mpiar_last_error(), "MPIAR_TUNING_FILE=/nonexistent/tuning.json: cannot open "
                                       "it: ") != NULL,
        "missing file: %s", mpiar_last_error());
  const mpiar__tuning_t *p = (const mpiar__tuning_t *)1;
  CHECK(mpiar__tuning_get("", &p) == MPIAR_SUCCESS && p == NULL, "no file: %s", mpiar_last_error());
  for (int i = 0; i < 2; i++) {
    rc = mpiar__tuning_get("/nonexistent/tuning.json", &p);
    CHECK(rc == MPIAR_ERR_ENV && p == NULL && strstr(mpiar_last_error(), "cannot open") != NULL,
          "call %d: %s", i, mpiar_last_error());
  }
}

int main(void) {
  if (!mpiar__tuning_supported()) {
    mpiar__tuning_t t;
    int rc = mpiar__tuning_parse(valid, strlen(valid), "valid.json", &t);
    CHECK(rc == MPIAR_ERR_ENV && strstr(mpiar_last_error(), "without JSON support") != NULL,
          "a build without libjansson: %s", mpiar_last_error());
    printf("tuning files: built without libjansson; %s\n",
           failures ? "FAILED" : "every file refused as it should be (the rest is skipped)");
    return failures ? 1 : 77;
  }
  check_valid();
  check_round_trip();
  check_refused();
  check_files();
  check_not_regular();
  check_load_as();
  printf("tuning files: %s (%d failed checks)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
