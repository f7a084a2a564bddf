/*
 * Schedule files (schedfile.h; the format is in docs/schedules.md): the strict reader, the
 * instantiation of one rank's steps for a count, and the writer of built schedules.
 *
 * The reader never trusts the text: every number is decimal without sign, bounded before it is
 * used, every bound of schedfile.h is checked before memory is taken for it, and the first
 * problem ends the parse with the line and the field that hold it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "schedule/schedfile.h"

uint64_t mpiar__schedfile_hash(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++) {
    h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  return h;
}

void mpiar__schedfile_free(mpiar__schedfile_t *f) {
  if (f == NULL) {
    return;
  }
  free(f->rank_first);
  free(f->steps);
  free(f->deps);
  memset(f, 0, sizeof *f);
}

/* ---- the reader ---- */

/* A step's fields: kind, 4 operands, final, ':' and its dependencies. */
#define MAX_FIELDS (8 + MPIAR__SCHEDFILE_MAX_DEPS)

typedef struct reader {
  const char *what;
  char *err;
  size_t errlen;
  size_t line; /* 1-based number of the line being read */
  char *field[MAX_FIELDS];
  int nfields;
} reader_t;

/* Return the code of a failed check at once. */
#define CHECK_RC(expr)                \
  do {                                \
    int rc_ = (expr);                 \
    if (rc_ != MPIAR_SUCCESS) {       \
      return rc_;                     \
    }                                 \
  } while (0)

static int fail(reader_t *r, const char *fmt, ...) MPIAR__PRINTF(2, 3);
static int fail(reader_t *r, const char *fmt, ...) {
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (r->line > 0) {
    snprintf(r->err, r->errlen, "%.200s:%zu: %s", r->what, r->line, msg);
  } else {
    snprintf(r->err, r->errlen, "%.200s: %s", r->what, msg);
  }
  return MPIAR_ERR_INVALID_ARG;
}

/* A decimal number without sign or leading zeros, at most @p max. */
static int number(reader_t *r, int k, const char *name, uint64_t max, uint64_t *out) {
  const char *s = r->field[k];
  if (s[0] < '0' || s[0] > '9' || (s[0] == '0' && s[1] != '\0')) {
    return fail(r, "field %d (%s): '%.40s' is not a decimal number", k + 1, name, s);
  }
  uint64_t v = 0;
  for (; *s != '\0'; s++) {
    if (*s < '0' || *s > '9') {
      return fail(r, "field %d (%s): '%.40s' is not a decimal number", k + 1, name, r->field[k]);
    }
    if (v > (max - (uint64_t)(*s - '0')) / 10) {
      return fail(r, "field %d (%s): '%.40s' is above %" PRIu64, k + 1, name, r->field[k], max);
    }
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return MPIAR_SUCCESS;
}

/* Split a line (NUL-terminated, writable) into fields at spaces and tabs; a field that starts
 * with '#' starts a comment, which runs to the end of the line. */
static int split(reader_t *r, char *s) {
  r->nfields = 0;
  while (*s != '\0') {
    while (*s == ' ' || *s == '\t') {
      *s++ = '\0';
    }
    if (*s == '\0' || *s == '#') {
      break; /* the end of the line, or a comment to its end */
    }
    if (r->nfields == MAX_FIELDS) {
      return fail(r, "more than %d fields", MAX_FIELDS);
    }
    r->field[r->nfields++] = s;
    while (*s != '\0' && *s != ' ' && *s != '\t') {
      s++;
    }
  }
  return MPIAR_SUCCESS;
}

/* An operand "i3", "o0", "s12": buffer and first chunk, the range checked against its buffer. */
static int operand(reader_t *r, const mpiar__schedfile_t *f, int k, const char *name,
                   uint32_t nchunks, uint8_t *buf, uint32_t *chunk) {
  const char *s = r->field[k];
  switch (s[0]) {
  case 'i':
    *buf = MPIAR__BUF_INPUT;
    break;
  case 'o':
    *buf = MPIAR__BUF_OUTPUT;
    break;
  case 's':
    *buf = MPIAR__BUF_SCRATCH;
    break;
  default:
    return fail(r, "field %d (%s): '%.40s' is not an operand (i, o or s and a chunk: o3)", k + 1,
                name, s);
  }
  char *save = r->field[k];
  r->field[k] = (char *)s + 1;
  uint64_t c = 0;
  int rc = number(r, k, name, UINT32_MAX, &c);
  r->field[k] = save;
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  uint32_t limit = *buf == MPIAR__BUF_SCRATCH ? f->scratch : f->chunks;
  if (c > limit || nchunks > limit - c) {
    return fail(r, "field %d (%s): chunks %" PRIu64 "..%" PRIu64 " of %s are outside its %" PRIu32
                   " chunks",
                k + 1, name, c, c + nchunks, *buf == MPIAR__BUF_SCRATCH ? "scratch" : "the vector",
                limit);
  }
  *chunk = (uint32_t)c;
  return MPIAR_SUCCESS;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem, reader_t *r) {
  if (need <= *cap) {
    return MPIAR_SUCCESS;
  }
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) {
    ncap *= 2;
  }
  void *p = realloc(*arr, ncap * elem);
  if (p == NULL) {
    size_t line = r->line;
    r->line = 0;
    int rc = fail(r, "out of memory at line %zu", line);
    return rc == MPIAR_ERR_INVALID_ARG ? MPIAR_ERR_NOMEM : rc;
  }
  *arr = p;
  *cap = ncap;
  return MPIAR_SUCCESS;
}

enum { H_COLLECTIVE, H_RANKS, H_CHUNKS, H_SCRATCH, H_INPLACE, H_ORDER, H_NAME, H_COUNT };
static const char *const header_keys[H_COUNT] = {"collective", "ranks",  "chunks", "scratch",
                                                 "inplace",    "order", "name"};

static int header(reader_t *r, mpiar__schedfile_t *f, int *seen) {
  const char *key = r->field[0];
  int h = 0;
  while (h < H_COUNT && strcmp(key, header_keys[h]) != 0) {
    h++;
  }
  if (h == H_COUNT) {
    return fail(r, "field 1: '%.40s' is neither a header key (collective, ranks, chunks, scratch, "
                   "inplace, order, name) nor 'rank'",
                key);
  }
  if (seen[h]) {
    return fail(r, "'%s' is given twice", key);
  }
  seen[h] = 1;
  if (r->nfields != 2) {
    return fail(r, "'%s' takes one value (%d given)", key, r->nfields - 1);
  }
  const char *v = r->field[1];
  uint64_t n = 0;
  switch (h) {
  case H_COLLECTIVE:
    if (strcmp(v, "allreduce") != 0) {
      return fail(r, "field 2 (collective): '%.40s' is not supported (allreduce)", v);
    }
    f->collective = MPIAR__SCHEDFILE_ALLREDUCE;
    return MPIAR_SUCCESS;
  case H_RANKS:
    CHECK_RC(number(r, 1, "ranks", MPIAR__SCHEDFILE_MAX_RANKS, &n));
    if (n == 0) {
      return fail(r, "field 2 (ranks): at least 1 rank");
    }
    f->nranks = (int)n;
    return MPIAR_SUCCESS;
  case H_CHUNKS:
    CHECK_RC(number(r, 1, "chunks", MPIAR__SCHEDFILE_MAX_CHUNKS, &n));
    if (n == 0) {
      return fail(r, "field 2 (chunks): at least 1 chunk");
    }
    f->chunks = (uint32_t)n;
    return MPIAR_SUCCESS;
  case H_SCRATCH:
    CHECK_RC(number(r, 1, "scratch", MPIAR__SCHEDFILE_MAX_CHUNKS, &n));
    f->scratch = (uint32_t)n;
    return MPIAR_SUCCESS;
  case H_INPLACE:
    if (strcmp(v, "no") == 0) {
      f->inplace = MPIAR__SCHEDFILE_INPLACE_NO;
    } else if (strcmp(v, "yes") == 0) {
      f->inplace = MPIAR__SCHEDFILE_INPLACE_YES;
    } else if (strcmp(v, "only") == 0) {
      f->inplace = MPIAR__SCHEDFILE_INPLACE_ONLY;
    } else {
      return fail(r, "field 2 (inplace): '%.40s' is not no, yes or only", v);
    }
    return MPIAR_SUCCESS;
  case H_ORDER:
    if (strcmp(v, "none") == 0) {
      f->order = MPIAR__SCHEDFILE_ORDER_NONE;
    } else if (strcmp(v, "canonical") == 0) {
      f->order = MPIAR__SCHEDFILE_ORDER_CANONICAL;
    } else {
      return fail(r, "field 2 (order): '%.40s' is not none or canonical", v);
    }
    return MPIAR_SUCCESS;
  default: /* H_NAME */
    if (strlen(v) >= sizeof f->name) {
      return fail(r, "field 2 (name): longer than %zu characters", sizeof f->name - 1);
    }
    for (const char *c = v; *c != '\0'; c++) {
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            *c == '_' || *c == '-' || *c == '.')) {
        return fail(r, "field 2 (name): '%.40s' has a character other than letters, digits, "
                       "'_', '-' and '.'",
                    v);
      }
    }
    snprintf(f->name, sizeof f->name, "%s", v);
    return MPIAR_SUCCESS;
  }
}

typedef struct growing {
  size_t steps_cap, deps_cap;
} growing_t;

/* One step line of rank @p rank, whose steps so far start at @p first. */
static int step(reader_t *r, mpiar__schedfile_t *f, growing_t *g, int rank, size_t first) {
  const char *kind = r->field[0];
  mpiar__sfstep_t st;
  memset(&st, 0, sizeof st);
  st.peer = -1;
  int nargs; /* fields before "final" / ':' */
  if (strcmp(kind, "send") == 0) {
    st.kind = MPIAR__STEP_SEND;
    nargs = 5;
  } else if (strcmp(kind, "recv") == 0) {
    st.kind = MPIAR__STEP_RECV;
    nargs = 5;
  } else if (strcmp(kind, "reduce") == 0) {
    st.kind = MPIAR__STEP_REDUCE;
    nargs = 5;
  } else if (strcmp(kind, "copy") == 0) {
    st.kind = MPIAR__STEP_COPY;
    nargs = 4;
  } else {
    return fail(r, "field 1: '%.40s' is not a step (send, recv, reduce, copy), 'rank' or 'end'",
                kind);
  }
  if (r->nfields < nargs) {
    return fail(r, "%s takes %d fields (%d given)", kind, nargs - 1, r->nfields - 1);
  }
  int k = nargs;
  if (k < r->nfields && strcmp(r->field[k], "final") == 0) {
    if (st.kind != MPIAR__STEP_REDUCE) {
      return fail(r, "field %d: only a reduce can be final", k + 1);
    }
    st.final = 1;
    f->has_final = 1;
    k++;
  }
  int dep_at = -1;
  if (k < r->nfields) {
    if (strcmp(r->field[k], ":") != 0) {
      return fail(r, "field %d: '%.40s' is not %s':' and the dependencies", k + 1, r->field[k],
                  st.kind == MPIAR__STEP_REDUCE && !st.final ? "'final' or " : "");
    }
    dep_at = k + 1;
    if (dep_at == r->nfields) {
      return fail(r, "field %d: ':' without a dependency", k + 1);
    }
  }
  uint64_t v = 0;
  CHECK_RC(number(r, nargs - 1, "chunks", MPIAR__SCHEDFILE_MAX_CHUNKS, &v));
  st.nchunks = (uint32_t)v;
  if (st.kind == MPIAR__STEP_SEND || st.kind == MPIAR__STEP_RECV) {
    CHECK_RC(number(r, 1, "peer", MPIAR__SCHEDFILE_MAX_RANKS, &v));
    if (v >= (uint64_t)f->nranks) {
      return fail(r, "field 2 (peer): rank %" PRIu64 " is not below ranks %d", v, f->nranks);
    }
    if ((int)v == rank) {
      return fail(r, "field 2 (peer): rank %d %ss to itself", rank, kind);
    }
    st.peer = (int)v;
    CHECK_RC(number(r, 2, "tag", MPIAR__TAG_LIMIT - 1, &v));
    st.tag = (int)v;
    if (st.kind == MPIAR__STEP_SEND) {
      CHECK_RC(operand(r, f, 3, "source", st.nchunks, &st.abuf, &st.achunk));
    } else {
      CHECK_RC(operand(r, f, 3, "destination", st.nchunks, &st.dbuf, &st.dchunk));
    }
  } else {
    CHECK_RC(operand(r, f, 1, "destination", st.nchunks, &st.dbuf, &st.dchunk));
    CHECK_RC(operand(r, f, 2, st.kind == MPIAR__STEP_COPY ? "source" : "first operand",
                            st.nchunks, &st.abuf, &st.achunk));
    if (st.kind == MPIAR__STEP_REDUCE) {
      CHECK_RC(operand(r, f, 3, "second operand", st.nchunks, &st.bbuf, &st.bchunk));
    }
  }
  if (st.kind != MPIAR__STEP_SEND && st.dbuf == MPIAR__BUF_INPUT) {
    return fail(r, "field 2 (destination): a step may not write the input (i); an in-place call "
                   "writes the output (o)");
  }
  size_t index = f->nsteps - first;
  if (f->nsteps == MPIAR__SCHEDFILE_MAX_STEPS) {
    return fail(r, "more than %zu steps", MPIAR__SCHEDFILE_MAX_STEPS);
  }
  st.dep_first = (uint32_t)f->ndeps;
  if (dep_at > 0) {
    int nd = r->nfields - dep_at;
    if (nd > MPIAR__SCHEDFILE_MAX_DEPS) {
      return fail(r, "%d dependencies (at most %d)", nd, MPIAR__SCHEDFILE_MAX_DEPS);
    }
    CHECK_RC(grow((void **)&f->deps, &g->deps_cap, f->ndeps + (size_t)nd, sizeof *f->deps,
                         r));
    for (int d = dep_at; d < r->nfields; d++) {
      CHECK_RC(number(r, d, "dependency", UINT32_MAX, &v));
      if (v >= index) {
        return fail(r, "field %d (dependency): step %" PRIu64 " is not an earlier step of rank %d "
                       "(this is step %zu)",
                    d + 1, v, rank, index);
      }
      f->deps[f->ndeps++] = (uint32_t)v;
    }
    st.ndeps = (uint32_t)nd;
  }
  CHECK_RC(grow((void **)&f->steps, &g->steps_cap, f->nsteps + 1, sizeof *f->steps, r));
  f->steps[f->nsteps++] = st;
  return MPIAR_SUCCESS;
}

int mpiar__schedfile_parse(const char *what, const char *text, size_t len, mpiar__schedfile_t *f,
                           char *err, size_t errlen) {
  reader_t r = {.what = what != NULL ? what : "schedule", .err = err, .errlen = errlen};
  memset(f, 0, sizeof *f);
  if (len > MPIAR__SCHEDFILE_MAX_BYTES) {
    return fail(&r, "%zu bytes (at most %zu)", len, MPIAR__SCHEDFILE_MAX_BYTES);
  }
  f->hash = mpiar__schedfile_hash(text, len);
  char line[MPIAR__SCHEDFILE_MAX_LINE + 1];
  int seen[H_COUNT] = {0};
  int have_version = 0, ended = 0;
  int rank = -1; /* the rank whose steps are being read */
  size_t first = 0;
  growing_t g = {0, 0};
  int rc = MPIAR_SUCCESS;
  size_t pos = 0;
  while (pos < len) {
    r.line++;
    size_t end = pos;
    while (end < len && text[end] != '\n') {
      end++;
    }
    size_t n = end - pos;
    if (n > 0 && text[end - 1] == '\r') {
      n--;
    }
    if (n > MPIAR__SCHEDFILE_MAX_LINE) {
      rc = fail(&r, "longer than %d bytes", MPIAR__SCHEDFILE_MAX_LINE);
      goto out;
    }
    memcpy(line, text + pos, n);
    line[n] = '\0';
    pos = end + 1;
    if (memchr(line, '\0', n) != NULL) {
      rc = fail(&r, "a NUL byte");
      goto out;
    }
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)line[i];
      if ((c < 0x20 && c != '\t') || c >= 0x7f) {
        rc = fail(&r, "byte %zu (0x%02x) is not printable ASCII", i + 1, c);
        goto out;
      }
    }
    if ((rc = split(&r, line)) != MPIAR_SUCCESS) {
      goto out;
    }
    if (r.nfields == 0) {
      continue; /* blank, or a comment */
    }
    if (ended) {
      rc = fail(&r, "text after 'end'");
      goto out;
    }
    if (!have_version) {
      if (strcmp(r.field[0], "mpiar-schedule") != 0 || r.nfields != 2) {
        rc = fail(&r, "the first line must be 'mpiar-schedule %d'", MPIAR__SCHEDFILE_VERSION);
        goto out;
      }
      if (strcmp(r.field[1], "1") != 0) {
        rc = fail(&r, "field 2 (version): '%.40s' is not a version this library reads (%d)",
                  r.field[1], MPIAR__SCHEDFILE_VERSION);
        goto out;
      }
      have_version = 1;
      continue;
    }
    if (strcmp(r.field[0], "rank") == 0 || strcmp(r.field[0], "end") == 0) {
      if (rank < 0) {
        for (int h = 0; h < H_NAME; h++) {
          if (!seen[h]) {
            rc = fail(&r, "'%s' is missing before the first rank", header_keys[h]);
            goto out;
          }
        }
        f->rank_first = calloc((size_t)f->nranks + 1, sizeof *f->rank_first);
        if (f->rank_first == NULL) {
          rc = fail(&r, "out of memory");
          rc = MPIAR_ERR_NOMEM;
          goto out;
        }
      } else {
        f->rank_first[rank + 1] = f->nsteps;
      }
      if (strcmp(r.field[0], "end") == 0) {
        if (r.nfields != 1) {
          rc = fail(&r, "'end' takes no value");
          goto out;
        }
        if (rank != f->nranks - 1) {
          rc = fail(&r, "'end' after rank %d: ranks %d..%d have no section", rank, rank + 1,
                    f->nranks - 1);
          goto out;
        }
        ended = 1;
        continue;
      }
      uint64_t v = 0;
      if (r.nfields != 2) {
        rc = fail(&r, "'rank' takes one value (%d given)", r.nfields - 1);
        goto out;
      }
      if ((rc = number(&r, 1, "rank", MPIAR__SCHEDFILE_MAX_RANKS, &v)) != MPIAR_SUCCESS) {
        goto out;
      }
      if (v != (uint64_t)(rank + 1)) {
        rc = fail(&r, "field 2 (rank): rank %" PRIu64 " where rank %d comes next", v, rank + 1);
        goto out;
      }
      if (v >= (uint64_t)f->nranks) {
        rc = fail(&r, "field 2 (rank): rank %" PRIu64 " is not below ranks %d", v, f->nranks);
        goto out;
      }
      rank = (int)v;
      first = f->nsteps;
      f->rank_first[rank] = first;
      continue;
    }
    if (rank < 0) {
      rc = header(&r, f, seen);
    } else {
      rc = step(&r, f, &g, rank, first);
    }
    if (rc != MPIAR_SUCCESS) {
      goto out;
    }
  }
  if (!ended) {
    r.line = 0;
    rc = fail(&r, have_version ? "ends before 'end' (truncated?)"
                               : "empty: no 'mpiar-schedule 1' line");
    goto out;
  }
  return MPIAR_SUCCESS;
out:
  mpiar__schedfile_free(f);
  return rc;
}

/* ---- instantiation ---- */

int mpiar__schedfile_fits(const mpiar__schedfile_t *f, int nranks, size_t count, int in_place,
                          char *why, size_t len) {
  if (nranks != f->nranks) {
    snprintf(why, len, "the file is written for %d ranks, not %d", f->nranks, nranks);
    return 0;
  }
  if (count % f->chunks != 0) {
    snprintf(why, len,
             "count %zu is not a multiple of the file's %" PRIu32
             " chunks (it serves counts %" PRIu32 ", %" PRIu64 ", ...)",
             count, f->chunks, f->chunks, 2 * (uint64_t)f->chunks);
    return 0;
  }
  if (in_place && f->inplace == MPIAR__SCHEDFILE_INPLACE_NO) {
    snprintf(why, len, "the file serves out-of-place calls only (inplace no), and the call is in "
                       "place");
    return 0;
  }
  if (!in_place && f->inplace == MPIAR__SCHEDFILE_INPLACE_ONLY) {
    snprintf(why, len, "the file serves in-place calls only (inplace only), and the call is not "
                       "in place");
    return 0;
  }
  return 1;
}

static mpiar__operand_t at(uint8_t buf, uint32_t chunk, size_t k) {
  mpiar__operand_t o = {buf, (size_t)chunk * k};
  return o;
}

int mpiar__schedfile_instantiate(const mpiar__schedfile_t *f, mpiar__schedule_t *s) {
  char why[256];
  if (!mpiar__schedfile_fits(f, s->nranks, s->count, s->in_place, why, sizeof why)) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s", why);
  }
  if (s->rank < 0 || s->rank >= f->nranks) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "rank %d of %d", s->rank, f->nranks);
  }
  const size_t k = s->count / f->chunks;
  s->scratch_elems = (size_t)f->scratch * k;
  long deps[MPIAR__SCHEDFILE_MAX_DEPS];
  const size_t first = f->rank_first[s->rank], last = f->rank_first[s->rank + 1];
  for (size_t i = first; i < last; i++) {
    const mpiar__sfstep_t *st = &f->steps[i];
    for (uint32_t d = 0; d < st->ndeps; d++) {
      deps[d] = (long)f->deps[st->dep_first + d];
    }
    const size_t n = (size_t)st->nchunks * k;
    long idx = 0;
    switch (st->kind) {
    case MPIAR__STEP_SEND:
      idx = mpiar__sched_send(s, st->peer, st->tag, at(st->abuf, st->achunk, k), n, deps,
                              st->ndeps);
      break;
    case MPIAR__STEP_RECV:
      idx = mpiar__sched_recv(s, st->peer, st->tag, at(st->dbuf, st->dchunk, k), n, deps,
                              st->ndeps);
      break;
    case MPIAR__STEP_REDUCE:
      idx = mpiar__sched_reduce(s, at(st->dbuf, st->dchunk, k), at(st->abuf, st->achunk, k),
                                at(st->bbuf, st->bchunk, k), n, deps, st->ndeps);
      if (idx >= 0 && st->final) {
        int rc = mpiar__sched_mark_final(s, idx);
        if (rc != MPIAR_SUCCESS) {
          return rc;
        }
      }
      break;
    default:
      idx = mpiar__sched_copy(s, at(st->dbuf, st->dchunk, k), at(st->abuf, st->achunk, k), n, deps,
                              st->ndeps);
      break;
    }
    if (idx < 0) {
      return (int)idx;
    }
  }
  return MPIAR_SUCCESS;
}

/* ---- the writer ---- */

static size_t gcd(size_t a, size_t b) {
  while (b != 0) {
    size_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static const char buf_letter[MPIAR__BUF_COUNT] = {'i', 'o', 's'};

int mpiar__schedfile_write(FILE *out, const char *name, const mpiar__schedule_t *scheds,
                           int nranks, int order, char *err, size_t errlen) {
  if (nranks < 1 || nranks > MPIAR__SCHEDFILE_MAX_RANKS) {
    snprintf(err, errlen, "%d ranks (1..%d)", nranks, MPIAR__SCHEDFILE_MAX_RANKS);
    return MPIAR_ERR_INVALID_ARG;
  }
  const size_t count = scheds[0].count;
  if (count == 0) {
    snprintf(err, errlen, "a schedule of 0 elements has no chunks");
    return MPIAR_ERR_INVALID_ARG;
  }
  if (scheds[0].root >= 0) {
    snprintf(err, errlen, "only allreduce schedules are written (this one has a root)");
    return MPIAR_ERR_INVALID_ARG;
  }
  size_t g = count, scratch = 0;
  for (int r = 0; r < nranks; r++) {
    const mpiar__schedule_t *s = &scheds[r];
    if (s->count != count || s->in_place != scheds[0].in_place) {
      snprintf(err, errlen, "rank %d's schedule is for another call", r);
      return MPIAR_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < s->nsteps; i++) {
      const mpiar__step_t *st = &s->steps[i];
      g = gcd(gcd(gcd(gcd(g, st->count), st->dst.off), st->a.off), st->b.off);
    }
    scratch = s->scratch_elems > scratch ? s->scratch_elems : scratch;
  }
  const size_t chunks = count / g;
  const size_t scratch_chunks = (scratch + g - 1) / g;
  if (chunks > MPIAR__SCHEDFILE_MAX_CHUNKS || scratch_chunks > MPIAR__SCHEDFILE_MAX_CHUNKS) {
    snprintf(err, errlen, "%zu chunks and %zu scratch chunks: above the format's %" PRIu32, chunks,
             scratch_chunks, MPIAR__SCHEDFILE_MAX_CHUNKS);
    return MPIAR_ERR_INVALID_ARG;
  }
  fprintf(out, "mpiar-schedule %d\n", MPIAR__SCHEDFILE_VERSION);
  if (name != NULL && name[0] != '\0') {
    fprintf(out, "name %s\n", name);
  }
  fprintf(out, "collective allreduce\nranks %d\nchunks %zu\nscratch %zu\ninplace %s\norder %s\n",
          nranks, chunks, scratch_chunks, scheds[0].in_place ? "only" : "no",
          order == MPIAR__SCHEDFILE_ORDER_CANONICAL ? "canonical" : "none");
  for (int r = 0; r < nranks; r++) {
    const mpiar__schedule_t *s = &scheds[r];
    fprintf(out, "rank %d\n", r);
    for (size_t i = 0; i < s->nsteps; i++) {
      const mpiar__step_t *st = &s->steps[i];
      const size_t n = st->count / g;
      switch (st->kind) {
      case MPIAR__STEP_SEND:
        fprintf(out, "send %d %d %c%zu %zu", st->peer, st->tag, buf_letter[st->a.buf],
                st->a.off / g, n);
        break;
      case MPIAR__STEP_RECV:
        fprintf(out, "recv %d %d %c%zu %zu", st->peer, st->tag, buf_letter[st->dst.buf],
                st->dst.off / g, n);
        break;
      case MPIAR__STEP_REDUCE:
        fprintf(out, "reduce %c%zu %c%zu %c%zu %zu%s", buf_letter[st->dst.buf], st->dst.off / g,
                buf_letter[st->a.buf], st->a.off / g, buf_letter[st->b.buf], st->b.off / g, n,
                st->final ? " final" : "");
        break;
      default:
        fprintf(out, "copy %c%zu %c%zu %zu", buf_letter[st->dst.buf], st->dst.off / g,
                buf_letter[st->a.buf], st->a.off / g, n);
        break;
      }
      if (st->ndeps > 0) {
        fputs(" :", out);
        for (uint32_t d = 0; d < st->ndeps; d++) {
          fprintf(out, " %" PRIu32, s->deps[st->dep_first + d]);
        }
      }
      fputc('\n', out);
    }
  }
  fputs("end\n", out);
  return ferror(out) ? (snprintf(err, errlen, "write error"), MPIAR_ERR_INVALID_ARG)
                     : MPIAR_SUCCESS;
}
