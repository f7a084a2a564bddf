/*
 * Tuning files (tuning.h): the version-1 reader (libjansson), its validation, the writer, and
 * the process's loaded file.
 *
 * The reader is strict: every member it knows is checked for its type and range, an unknown
 * member is an error (so that a misspelt optional field is not silently dropped), and the
 * ranges of a table must be sorted and disjoint. Only "measurements" and "comment" are free-form
 * and skipped. Every error names the file, then the line and column (syntax errors, from
 * jansson) or the field path ("tables[0].ranges[2].algorithm"), then what is wrong.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuning/input.h"
#include "tuning/tuning.h"

#if MPIAR_HAVE_JANSSON
#include <jansson.h>
#endif

const size_t mpiar__tuning_segments[] = {(size_t)64 << 10, (size_t)256 << 10, (size_t)1 << 20,
                                         (size_t)4 << 20, (size_t)16 << 20};
const int mpiar__tuning_nsegments =
    (int)(sizeof mpiar__tuning_segments / sizeof mpiar__tuning_segments[0]);

int mpiar__tuning_supported(void) {
  return MPIAR_HAVE_JANSSON;
}

void mpiar__tuning_init(mpiar__tuning_t *t) {
  memset(t, 0, sizeof *t);
  t->alpha = t->beta = t->alpha_inter = t->beta_inter = NAN;
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    t->gamma[d] = NAN;
  }
}

static uint64_t fnv1a(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
  }
  return h;
}

/*
 * Every message starts like this, so that the user knows which setting and file it is about: the
 * setting is MPIAR_TUNING_FILE for the library, a tool's option (--tuning-file) for a tool.
 */
#define PREFIX "%s=%s: "
#define DEFAULT_SETTING "MPIAR_TUNING_FILE"

#if MPIAR_HAVE_JANSSON

/* ---- Reading ------------------------------------------------------------------------------ */

typedef struct reader {
  const char *setting;
  const char *source;
  mpiar__tuning_t *out;
} reader_t;

static int bad(const reader_t *r, const char *field, const char *fmt, ...) MPIAR__PRINTF(3, 4);

/* "MPIAR_TUNING_FILE=NAME: field F: WHAT". */
static int bad(const reader_t *r, const char *field, const char *fmt, ...) {
  char what[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return mpiar__error(MPIAR_ERR_ENV, PREFIX "field %s: %s", r->setting, r->source, field, what);
}

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  default:
    return "null";
  }
}

/* Members of an object must be among @p known (NULL-terminated). */
static int check_members(const reader_t *r, const char *field, const json_t *obj,
                         const char *const *known) {
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)obj, key, value) {
    int found = 0;
    for (int i = 0; known[i] != NULL && !found; i++) {
      found = strcmp(key, known[i]) == 0;
    }
    if (!found) {
      char names[256] = "";
      for (int i = 0; known[i] != NULL; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", known[i]);
      }
      return bad(r, field, "unknown member '%s' (known: %s)", key, names);
    }
  }
  return MPIAR_SUCCESS;
}

/* The member @p key of @p obj: required (missing is an error) or optional (*v = NULL). */
static int member(const reader_t *r, const char *parent, const json_t *obj, const char *key,
                  int required, json_t **v, char *field, size_t fieldlen) {
  if (parent[0] != '\0') {
    snprintf(field, fieldlen, "%.80s.%.40s", parent, key);
  } else {
    snprintf(field, fieldlen, "%.40s", key);
  }
  *v = json_object_get(obj, key);
  if (*v == NULL && required) {
    return bad(r, field, "missing");
  }
  return MPIAR_SUCCESS;
}

static int want_object(const reader_t *r, const char *field, const json_t *v) {
  return json_is_object(v) ? MPIAR_SUCCESS
                           : bad(r, field, "is %s, expected an object", type_name(v));
}

static int read_int(const reader_t *r, const char *field, const json_t *v, long long lo,
                    long long hi, long long *out) {
  if (!json_is_integer(v)) {
    return bad(r, field, "is %s, expected an integer", type_name(v));
  }
  long long x = json_integer_value(v);
  if (x < lo || x > hi) {
    return bad(r, field, "is %lld, expected an integer in [%lld, %lld]", x, lo, hi);
  }
  *out = x;
  return MPIAR_SUCCESS;
}

/* A finite number in [0, 1) seconds (per message, per byte); null gives NaN where allowed. */
static int read_seconds(const reader_t *r, const char *field, const json_t *v, int nullable,
                        double *out) {
  if (nullable && json_is_null(v)) {
    *out = NAN;
    return MPIAR_SUCCESS;
  }
  if (!json_is_number(v)) {
    return bad(r, field, "is %s, expected a number of seconds%s", type_name(v),
               nullable ? " or null" : "");
  }
  double x = json_number_value(v);
  if (!isfinite(x) || x < 0 || x >= 1) {
    return bad(r, field, "is %g, expected seconds in [0, 1)", x);
  }
  *out = x;
  return MPIAR_SUCCESS;
}

static int read_string(const reader_t *r, const char *field, const json_t *v, char *out,
                       size_t cap) {
  if (!json_is_string(v)) {
    return bad(r, field, "is %s, expected a string", type_name(v));
  }
  if (json_string_length(v) >= cap) {
    return bad(r, field, "is longer than %zu characters", cap - 1);
  }
  snprintf(out, cap, "%s", json_string_value(v));
  return MPIAR_SUCCESS;
}

static int read_dtype(const reader_t *r, const char *field, const json_t *v, mpiar_dtype_t *dtype) {
  if (!json_is_string(v)) {
    return bad(r, field, "is %s, expected a datatype name", type_name(v));
  }
  if (mpiar_dtype_from_name(json_string_value(v), dtype) != MPIAR_SUCCESS) {
    return bad(r, field, "'%.64s' is not a datatype (int8 ... float64)", json_string_value(v));
  }
  return MPIAR_SUCCESS;
}

/* "format" and "version" first, so that a file of another version fails on its version. */
static int read_header(const reader_t *r, const json_t *root) {
  char field[160];
  json_t *v;
  int rc = member(r, "", root, "format", 1, &v, field, sizeof field);
  if (rc == MPIAR_SUCCESS &&
      (!json_is_string(v) || strcmp(json_string_value(v), MPIAR__TUNING_FORMAT) != 0)) {
    rc = bad(r, field, "is not \"%s\": not a tuning file", MPIAR__TUNING_FORMAT);
  }
  long long version = 0;
  if (rc == MPIAR_SUCCESS &&
      (rc = member(r, "", root, "version", 1, &v, field, sizeof field)) == MPIAR_SUCCESS) {
    rc = read_int(r, field, v, 1, INT32_MAX, &version);
  }
  if (rc == MPIAR_SUCCESS && version != MPIAR__TUNING_VERSION) {
    rc = bad(r, field,
             "version %lld is not supported: this mpiar %s reads version %d (make the file "
             "again with this version's mpiar-tune)",
             version, mpiar_version(), MPIAR__TUNING_VERSION);
  }
  r->out->version = (int)version;
  return rc;
}

static int read_fingerprint(const reader_t *r, const json_t *fp) {
  static const char *const known[] = {"mpi_library", "cpu", "kernel_level", NULL};
  char field[160];
  json_t *v;
  mpiar__fingerprint_t *f = &r->out->fingerprint;
  int rc = want_object(r, "fingerprint", fp);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, "fingerprint", fp, known);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "fingerprint", fp, "mpi_library", 1, &v, field, sizeof field))) {
    rc = read_string(r, field, v, f->mpi_library, sizeof f->mpi_library);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "fingerprint", fp, "cpu", 1, &v, field, sizeof field))) {
    rc = read_string(r, field, v, f->cpu, sizeof f->cpu);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "fingerprint", fp, "kernel_level", 1, &v, field, sizeof field))) {
    rc = read_string(r, field, v, f->kernel_level, sizeof f->kernel_level);
  }
  return rc;
}

static int read_topology(const reader_t *r, const json_t *topo) {
  static const char *const known[] = {"ranks", "nodes", "ranks_per_node", NULL};
  char field[160];
  json_t *v;
  long long ranks = 0, nodes = 0, rpn = 0;
  int rc = want_object(r, "topology", topo);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, "topology", topo, known);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "topology", topo, "ranks", 1, &v, field, sizeof field))) {
    rc = read_int(r, field, v, 1, 1 << 24, &ranks);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "topology", topo, "nodes", 1, &v, field, sizeof field))) {
    rc = read_int(r, field, v, 1, ranks, &nodes);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "topology", topo, "ranks_per_node", 1, &v, field, sizeof field))) {
    rc = read_int(r, field, v, 1, ranks, &rpn);
  }
  /* The largest node holds rpn ranks and every other node at least one. */
  if (rc == MPIAR_SUCCESS && (nodes * rpn < ranks || rpn + (nodes - 1) > ranks)) {
    rc = bad(r, "topology",
             "%lld ranks cannot be placed on %lld nodes whose largest holds %lld ranks", ranks,
             nodes, rpn);
  }
  r->out->ranks = (int)ranks;
  r->out->nodes = (int)nodes;
  r->out->ranks_per_node = (int)rpn;
  return rc;
}

static int read_gamma(const reader_t *r, const json_t *g) {
  int rc = want_object(r, "model.gamma", g);
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)g, key, value) {
    if (rc != MPIAR_SUCCESS) {
      break;
    }
    char field[160];
    snprintf(field, sizeof field, "model.gamma.%.64s", key);
    mpiar_dtype_t d;
    if (mpiar_dtype_from_name(key, &d) != MPIAR_SUCCESS) {
      rc = bad(r, field, "'%.64s' is not a datatype (int8 ... float64)", key);
    } else {
      rc = read_seconds(r, field, value, 0, &r->out->gamma[d]);
    }
  }
  if (rc == MPIAR_SUCCESS && isnan(r->out->gamma[MPIAR_FLOAT32])) {
    rc = bad(r, "model.gamma.float32", "missing (the other types default to it)");
  }
  return rc;
}

static int read_model(const reader_t *r, const json_t *model) {
  static const char *const known[] = {"alpha", "beta", "alpha_inter", "beta_inter", "gamma", NULL};
  static const char *const names[4] = {"alpha", "beta", "alpha_inter", "beta_inter"};
  double *dest[4] = {&r->out->alpha, &r->out->beta, &r->out->alpha_inter, &r->out->beta_inter};
  char field[160];
  json_t *v;
  int rc = want_object(r, "model", model);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, "model", model, known);
  }
  for (int i = 0; i < 4 && rc == MPIAR_SUCCESS; i++) {
    /* The inter-node terms are optional (null or absent: the run had one node). */
    if ((rc = member(r, "model", model, names[i], i < 2, &v, field, sizeof field)) ==
            MPIAR_SUCCESS &&
        v != NULL) {
      rc = read_seconds(r, field, v, i >= 2, dest[i]);
    }
  }
  if (rc == MPIAR_SUCCESS && isnan(r->out->alpha_inter) != isnan(r->out->beta_inter)) {
    rc = bad(r, "model.alpha_inter", "alpha_inter and beta_inter are given together or not at all");
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "model", model, "gamma", 1, &v, field, sizeof field))) {
    rc = read_gamma(r, v);
  }
  return rc;
}

static int read_range(const reader_t *r, const char *parent, const json_t *rg,
                      mpiar__tuning_range_t *out) {
  static const char *const known[] = {"min_bytes", "max_bytes", "algorithm", "segment_bytes", NULL};
  char field[160];
  json_t *v;
  long long lo = 0, hi = 0, seg = 0;
  int rc = want_object(r, parent, rg);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, parent, rg, known);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, parent, rg, "min_bytes", 1, &v, field, sizeof field))) {
    rc = read_int(r, field, v, 0, INT64_MAX, &lo);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, parent, rg, "max_bytes", 1, &v, field, sizeof field))) {
    if (json_is_null(v)) {
      hi = -1;
    } else {
      rc = read_int(r, field, v, lo, INT64_MAX, &hi);
    }
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, parent, rg, "algorithm", 1, &v, field, sizeof field))) {
    if (!json_is_string(v)) {
      rc = bad(r, field, "is %s, expected an algorithm name", type_name(v));
    } else if ((out->alg = mpiar__algorithm_find(json_string_value(v))) == NULL &&
               strchr(json_string_value(v), '/') != NULL) {
      char why[512]; /* a parameter out of its range, or one the algorithm does not take */
      mpiar__algorithm_explain(json_string_value(v), why, sizeof why);
      rc = bad(r, field, "%.300s", why);
    } else if (out->alg == NULL) {
      char names[256] = "";
      for (int i = 0; i < mpiar__algorithm_count; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                 mpiar__algorithms[i].name);
      }
      rc = bad(r, field, "unknown algorithm '%.64s' (%s)", json_string_value(v), names);
    }
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, parent, rg, "segment_bytes", 0, &v, field, sizeof field)) && v != NULL) {
    rc = read_int(r, field, v, 0, INT64_MAX, &seg);
    if (rc == MPIAR_SUCCESS && seg != 0 && seg < (long long)MPIAR__SEGMENT_MIN) {
      rc = bad(r, field, "is %lld, expected 0 or at least %zu bytes", seg, MPIAR__SEGMENT_MIN);
    }
    if (rc == MPIAR_SUCCESS && seg != 0 && !(out->alg->flags & MPIAR__ALG_SEGMENTED)) {
      rc = bad(r, field, "is %lld, but %s is not segmented (0 or leave it out)", seg,
               out->alg->name);
    }
  }
  out->min_bytes = (size_t)lo;
  out->max_bytes = hi < 0 ? MPIAR__TUNING_UNBOUNDED : (size_t)hi;
  out->segment_bytes = (size_t)seg;
  return rc;
}

static void range_text(const mpiar__tuning_range_t *g, char *buf, size_t len) {
  if (g->max_bytes == MPIAR__TUNING_UNBOUNDED) {
    snprintf(buf, len, "%zu bytes and more", g->min_bytes);
  } else {
    snprintf(buf, len, "%zu..%zu bytes", g->min_bytes, g->max_bytes);
  }
}

static int read_table(const reader_t *r, int index, const json_t *tab) {
  static const char *const known[] = {"dtype", "ranges", NULL};
  char parent[48], field[160];
  json_t *v;
  snprintf(parent, sizeof parent, "tables[%d]", index);
  mpiar__tuning_table_t *t = &r->out->tables[index];
  int rc = want_object(r, parent, tab);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, parent, tab, known);
  }
  if (rc == MPIAR_SUCCESS && !(rc = member(r, parent, tab, "dtype", 1, &v, field, sizeof field))) {
    rc = read_dtype(r, field, v, &t->dtype);
  }
  for (int i = 0; i < index && rc == MPIAR_SUCCESS; i++) {
    if (r->out->tables[i].dtype == t->dtype) {
      rc = bad(r, field, "%s has a table already (tables[%d])", mpiar_dtype_name(t->dtype), i);
    }
  }
  if (rc == MPIAR_SUCCESS && !(rc = member(r, parent, tab, "ranges", 1, &v, field, sizeof field))) {
    if (!json_is_array(v)) {
      rc = bad(r, field, "is %s, expected an array", type_name(v));
    } else if (json_array_size(v) > MPIAR__TUNING_MAX_RANGES) {
      rc = bad(r, field, "has %zu ranges, at most %d are read", json_array_size(v),
               MPIAR__TUNING_MAX_RANGES);
    }
  }
  for (size_t i = 0; rc == MPIAR_SUCCESS && i < json_array_size(v); i++) {
    char rfield[96];
    snprintf(rfield, sizeof rfield, "%s.ranges[%zu]", parent, i);
    mpiar__tuning_range_t *g = &t->ranges[i];
    rc = read_range(r, rfield, json_array_get(v, i), g);
    if (rc == MPIAR_SUCCESS && i > 0 &&
        (t->ranges[i - 1].max_bytes == MPIAR__TUNING_UNBOUNDED ||
         g->min_bytes <= t->ranges[i - 1].max_bytes)) {
      char a[96], b[96];
      range_text(g, a, sizeof a);
      range_text(&t->ranges[i - 1], b, sizeof b);
      rc = bad(r, rfield,
               "%s overlaps or precedes ranges[%zu] (%s): ranges are sorted by size and disjoint",
               a, i - 1, b);
    }
    t->nranges = (int)i + 1;
  }
  return rc;
}

static int read_tables(const reader_t *r, const json_t *tables) {
  if (!json_is_array(tables)) {
    return bad(r, "tables", "is %s, expected an array", type_name(tables));
  }
  if (json_array_size(tables) > MPIAR__DTYPE_COUNT) {
    return bad(r, "tables", "has %zu tables, at most one per datatype (%d)",
               json_array_size(tables), MPIAR__DTYPE_COUNT);
  }
  int rc = MPIAR_SUCCESS;
  for (size_t i = 0; i < json_array_size(tables) && rc == MPIAR_SUCCESS; i++) {
    rc = read_table(r, (int)i, json_array_get(tables, i));
    r->out->ntables = (int)i + 1;
  }
  return rc;
}

static int read_document(const reader_t *r, const json_t *root) {
  static const char *const known[] = {"format",       "version",  "created", "mpiar_version",
                                      "fingerprint",  "topology", "model",   "tables",
                                      "measurements", "comment",  NULL};
  if (!json_is_object(root)) {
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "the document is %s, expected an object", r->setting,
                        r->source, type_name(root));
  }
  int rc = read_header(r, root);
  if (rc == MPIAR_SUCCESS) {
    rc = check_members(r, "(top level)", root, known);
  }
  char field[160];
  json_t *v;
  mpiar__tuning_t *t = r->out;
  if (rc == MPIAR_SUCCESS && !(rc = member(r, "", root, "created", 0, &v, field, sizeof field)) &&
      v != NULL) {
    rc = read_string(r, field, v, t->created, sizeof t->created);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "", root, "mpiar_version", 0, &v, field, sizeof field)) && v != NULL) {
    rc = read_string(r, field, v, t->mpiar_version, sizeof t->mpiar_version);
  }
  if (rc == MPIAR_SUCCESS &&
      !(rc = member(r, "", root, "fingerprint", 0, &v, field, sizeof field)) && v != NULL) {
    rc = read_fingerprint(r, v);
  }
  if (rc == MPIAR_SUCCESS && !(rc = member(r, "", root, "topology", 1, &v, field, sizeof field))) {
    rc = read_topology(r, v);
  }
  if (rc == MPIAR_SUCCESS && !(rc = member(r, "", root, "model", 1, &v, field, sizeof field))) {
    rc = read_model(r, v);
  }
  if (rc == MPIAR_SUCCESS && !(rc = member(r, "", root, "tables", 1, &v, field, sizeof field))) {
    rc = read_tables(r, v);
  }
  return rc;
}

static int parse_as(const char *text, size_t len, const char *source, const char *setting,
                    mpiar__tuning_t *out) {
  mpiar__tuning_init(out);
  snprintf(out->source, sizeof out->source, "%s", source);
  if (len > MPIAR__TUNING_MAX_BYTES) {
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "%zu bytes, larger than the %zu bytes read", setting,
                        source, len, MPIAR__TUNING_MAX_BYTES);
  }
  json_error_t err;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
  if (root == NULL) {
    /* jansson counts lines from 1 and columns from 1 (0 or -1 when it has none). */
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "line %d, column %d: %s (not valid JSON)", setting,
                        source, err.line, err.column > 0 ? err.column : 1, err.text);
  }
  reader_t r = {setting, source, out};
  int rc = read_document(&r, root);
  json_decref(root);
  out->hash = fnv1a(text, len);
  return rc;
}

#else /* !MPIAR_HAVE_JANSSON */

static int parse_as(const char *text, size_t len, const char *source, const char *setting,
                    mpiar__tuning_t *out) {
  (void)text;
  (void)len;
  mpiar__tuning_init(out);
  return mpiar__error(MPIAR_ERR_ENV,
                      PREFIX "this mpiar was built without JSON support (libjansson), so it reads "
                             "no tuning file; install libjansson-dev and build again, or leave "
                             "%s unset",
                      setting, source, setting);
}

#endif

int mpiar__tuning_parse(const char *text, size_t len, const char *source, mpiar__tuning_t *out) {
  return parse_as(text, len, source, DEFAULT_SETTING, out);
}

/*
 * The whole of the regular file open on @p fd, of @p size bytes by fstat(), into *buf (*len
 * bytes). A file larger than the reader's limit is refused by its size, unread, so that the
 * message gives the size the file has. One byte of room beyond @p size tells a file that grew
 * since fstat() (being written as it is read) from one that ends there; it is refused.
 */
static int read_whole(int fd, uint64_t size, const char *path, const char *setting, char **buf,
                      size_t *len) {
  *buf = NULL;
  *len = 0;
  if (size > MPIAR__TUNING_MAX_BYTES) {
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "%llu bytes, larger than the %zu bytes read", setting,
                        path, (unsigned long long)size, MPIAR__TUNING_MAX_BYTES);
  }
  size_t cap = (size_t)size + 1;
  char *b = malloc(cap);
  if (b == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, PREFIX "no memory to read its %zu bytes", setting, path,
                        (size_t)size);
  }
  size_t n = 0;
  while (n < cap) {
    ssize_t k = read(fd, b + n, cap - n);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k < 0) {
      int e = errno;
      free(b);
      return mpiar__error(MPIAR_ERR_ENV, PREFIX "cannot read it: %s", setting, path, strerror(e));
    }
    if (k == 0) {
      break;
    }
    n += (size_t)k;
  }
  if (n == cap) {
    free(b);
    return mpiar__error(MPIAR_ERR_ENV,
                        PREFIX "grew while it was read (%zu bytes when opened): write it elsewhere "
                               "and rename it into place",
                        setting, path, (size_t)size);
  }
  *buf = b;
  *len = n;
  return MPIAR_SUCCESS;
}

int mpiar__tuning_load_as(const char *path, const char *setting, mpiar__tuning_t *out) {
  mpiar__tuning_init(out);
  int fd;
  uint64_t size;
  const char *kind;
  int st = mpiar__input_open(path, &fd, &size, &kind);
  if (st == MPIAR__INPUT_NOT_REGULAR) {
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "is %s, not a regular file", setting, path, kind);
  }
  if (st != MPIAR__INPUT_OK) {
    return mpiar__error(MPIAR_ERR_ENV, PREFIX "cannot open it: %s", setting, path, strerror(errno));
  }
  char *buf;
  size_t len;
  int rc = read_whole(fd, size, path, setting, &buf, &len);
  close(fd);
  if (rc == MPIAR_SUCCESS) {
    rc = parse_as(buf, len, path, setting, out);
  }
  free(buf);
  return rc;
}

int mpiar__tuning_load(const char *path, mpiar__tuning_t *out) {
  return mpiar__tuning_load_as(path, DEFAULT_SETTING, out);
}

/* ---- Writing ------------------------------------------------------------------------------ */

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      fprintf(f, "\\%c", *p);
    } else if (*p < 0x20) {
      fprintf(f, "\\u%04x", *p);
    } else {
      fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Seconds with every digit a double holds, null for NaN (a parameter not measured). */
static void put_seconds(FILE *f, double v) {
  if (isfinite(v)) {
    fprintf(f, "%.17g", v);
  } else {
    fputs("null", f);
  }
}

int mpiar__tuning_write(const mpiar__tuning_t *t, const char *measurements, FILE *f) {
  fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"created\": ", MPIAR__TUNING_FORMAT,
          MPIAR__TUNING_VERSION);
  put_string(f, t->created);
  fprintf(f, ",\n  \"mpiar_version\": ");
  put_string(f, t->mpiar_version);
  fprintf(f, ",\n  \"fingerprint\": {\n    \"mpi_library\": ");
  put_string(f, t->fingerprint.mpi_library);
  fprintf(f, ",\n    \"cpu\": ");
  put_string(f, t->fingerprint.cpu);
  fprintf(f, ",\n    \"kernel_level\": ");
  put_string(f, t->fingerprint.kernel_level);
  fprintf(f, "\n  },\n  \"topology\": {\"ranks\": %d, \"nodes\": %d, \"ranks_per_node\": %d},\n",
          t->ranks, t->nodes, t->ranks_per_node);
  fprintf(f, "  \"model\": {\n    \"alpha\": ");
  put_seconds(f, t->alpha);
  fprintf(f, ",\n    \"beta\": ");
  put_seconds(f, t->beta);
  fprintf(f, ",\n    \"alpha_inter\": ");
  put_seconds(f, t->alpha_inter);
  fprintf(f, ",\n    \"beta_inter\": ");
  put_seconds(f, t->beta_inter);
  fprintf(f, ",\n    \"gamma\": {");
  int first = 1;
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    if (!isnan(t->gamma[d])) {
      fprintf(f, "%s\n      \"%s\": ", first ? "" : ",", mpiar_dtype_name((mpiar_dtype_t)d));
      put_seconds(f, t->gamma[d]);
      first = 0;
    }
  }
  fprintf(f, "\n    }\n  },\n  \"tables\": [");
  for (int k = 0; k < t->ntables; k++) {
    const mpiar__tuning_table_t *tab = &t->tables[k];
    fprintf(f, "%s\n    {\"dtype\": \"%s\", \"ranges\": [", k ? "," : "",
            mpiar_dtype_name(tab->dtype));
    for (int i = 0; i < tab->nranges; i++) {
      const mpiar__tuning_range_t *g = &tab->ranges[i];
      fprintf(f, "%s\n      {\"min_bytes\": %zu, \"max_bytes\": ", i ? "," : "", g->min_bytes);
      if (g->max_bytes == MPIAR__TUNING_UNBOUNDED) {
        fputs("null", f);
      } else {
        fprintf(f, "%zu", g->max_bytes);
      }
      fprintf(f, ", \"algorithm\": \"%s\", \"segment_bytes\": %zu}", g->alg->name,
              g->segment_bytes);
    }
    fprintf(f, "\n    ]}");
  }
  fprintf(f, "\n  ]");
  if (measurements != NULL) {
    fprintf(f, ",\n  \"measurements\": %s", measurements);
  }
  fprintf(f, "\n}\n");
  return ferror(f) ? -1 : 0;
}

/* ---- Use ---------------------------------------------------------------------------------- */

const mpiar__tuning_range_t *mpiar__tuning_lookup(const mpiar__tuning_t *t, mpiar_dtype_t dtype,
                                                  size_t bytes) {
  for (int k = 0; k < t->ntables; k++) {
    const mpiar__tuning_table_t *tab = &t->tables[k];
    if (tab->dtype != dtype) {
      continue;
    }
    /* Binary search for the last range starting at or below bytes. */
    int lo = 0, hi = tab->nranges - 1, found = -1;
    while (lo <= hi) {
      int mid = (lo + hi) / 2;
      if (tab->ranges[mid].min_bytes <= bytes) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found >= 0 && bytes <= tab->ranges[found].max_bytes) {
      return &tab->ranges[found];
    }
    return NULL;
  }
  return NULL;
}

void mpiar__tuning_params(const mpiar__tuning_t *t, mpiar_dtype_t dtype,
                          mpiar__cost_params_t *out) {
  memset(out, 0, sizeof *out);
  out->alpha = t->alpha;
  out->beta = t->beta;
  double g = (unsigned)dtype < MPIAR__DTYPE_COUNT ? t->gamma[dtype] : NAN;
  out->gamma = isnan(g) ? t->gamma[MPIAR_FLOAT32] : g;
}

int mpiar__tuning_applies(const mpiar__tuning_t *t, int ranks, int nodes, int ranks_per_node,
                          const mpiar__fingerprint_t *here, char *why, size_t whylen) {
  if (t->ranks != ranks || t->nodes != nodes || t->ranks_per_node != ranks_per_node) {
    snprintf(why, whylen,
             "its table was measured on %d ranks on %d node%s (at most %d per node), this "
             "communicator has %d on %d (at most %d)",
             t->ranks, t->nodes, t->nodes == 1 ? "" : "s", t->ranks_per_node, ranks, nodes,
             ranks_per_node);
    return 0;
  }
  const mpiar__fingerprint_t *f = &t->fingerprint;
  if (f->mpi_library[0] != '\0' && strcmp(f->mpi_library, here->mpi_library) != 0) {
    snprintf(why, whylen, "its table was measured with %.60s, this process runs %.60s",
             f->mpi_library, here->mpi_library);
    return 0;
  }
  if (f->cpu[0] != '\0' && strcmp(f->cpu, here->cpu) != 0) {
    snprintf(why, whylen, "its table was measured on a %.60s, this process runs on a %.60s", f->cpu,
             here->cpu);
    return 0;
  }
  if (f->kernel_level[0] != '\0' && strcmp(f->kernel_level, here->kernel_level) != 0) {
    snprintf(why, whylen, "its table was measured with %s kernels, this process uses %s",
             f->kernel_level, here->kernel_level);
    return 0;
  }
  return 1;
}

/* ---- The process's file ------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* read with acquire ordering after the first load */
static char loaded_path[1024];
static mpiar__tuning_t current;
static int current_rc;
static char current_detail[512];

int mpiar__tuning_get(const char *path, const mpiar__tuning_t **out) {
  if (MPIAR__UNLIKELY(!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE) ||
                      strcmp(loaded_path, path) != 0)) {
    pthread_mutex_lock(&lock);
    if (!loaded || strcmp(loaded_path, path) != 0) {
      current_rc = MPIAR_SUCCESS;
      current_detail[0] = '\0';
      mpiar__tuning_init(&current);
      if (path[0] != '\0') {
        current_rc = mpiar__tuning_load(path, &current);
        snprintf(current_detail, sizeof current_detail, "%s", mpiar_last_error());
      }
      snprintf(loaded_path, sizeof loaded_path, "%s", path);
      __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
  }
  *out = (current_rc == MPIAR_SUCCESS && loaded_path[0] != '\0') ? &current : NULL;
  if (MPIAR__UNLIKELY(current_rc != MPIAR_SUCCESS)) {
    return mpiar__error(current_rc, "%s", current_detail);
  }
  return MPIAR_SUCCESS;
}
