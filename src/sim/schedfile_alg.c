/*
 * Schedule files as algorithms (schedfile_alg.h): the process's list of file entries, reading a
 * file, the builders and the verification by the simulator.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "sim/schedfile_alg.h"
#include "sim/sim.h"
#include "tuning/input.h"

#define PATH_MAX_LEN 4096

/* One verdict per in-place mode (0, 1): -1 not verified yet, 0 failed (why), 1 passed. */
typedef struct verdict {
  int state;
  char why[512];
} verdict_t;

typedef struct file_entry {
  mpiar__algorithm_t alg;        /* the entry users name */
  mpiar__algorithm_t unverified; /* the same steps, built without verification */
  char *name;                    /* "file:PATH" (alg.name and unverified.name point here) */
  int loaded;
  char error[640]; /* !loaded: why */
  mpiar__schedfile_t file;
  pthread_mutex_t lock; /* verdicts */
  verdict_t verdict[2];
  struct file_entry *next;
} file_entry_t;

static file_entry_t *entries; /* pushed at the head, never removed (read with acquire loads) */
static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;

static file_entry_t *entry_of(const mpiar__algorithm_t *alg) {
  if (alg == NULL || !(alg->flags & MPIAR__ALG_FILE)) {
    return NULL;
  }
  for (file_entry_t *e = __atomic_load_n(&entries, __ATOMIC_ACQUIRE); e != NULL; e = e->next) {
    if (&e->alg == alg || &e->unverified == alg) {
      return e;
    }
  }
  return NULL;
}

/* The entry whose name is @p name: the schedule's `algorithm`, which the plan and the simulator
 * set to the entry's name pointer. */
static file_entry_t *entry_named(const char *name) {
  for (file_entry_t *e = __atomic_load_n(&entries, __ATOMIC_ACQUIRE); e != NULL; e = e->next) {
    if (e->name == name) {
      return e;
    }
  }
  for (file_entry_t *e = __atomic_load_n(&entries, __ATOMIC_ACQUIRE); e != NULL; e = e->next) {
    if (name != NULL && strcmp(e->name, name) == 0) {
      return e;
    }
  }
  return NULL;
}

static void load(file_entry_t *e, const char *path) {
  int fd = -1;
  uint64_t size = 0;
  const char *kind = NULL;
  int rc = mpiar__input_open(path, &fd, &size, &kind);
  if (rc == MPIAR__INPUT_NOT_REGULAR) {
    snprintf(e->error, sizeof e->error, "schedule file '%.400s' is %s, not a regular file", path,
             kind);
    return;
  }
  if (rc != MPIAR__INPUT_OK) {
    snprintf(e->error, sizeof e->error, "cannot open schedule file '%.400s': %s", path,
             strerror(errno));
    return;
  }
  if (size > MPIAR__SCHEDFILE_MAX_BYTES) {
    snprintf(e->error, sizeof e->error, "schedule file '%.400s': %" PRIu64 " bytes (at most %zu)",
             path, size, MPIAR__SCHEDFILE_MAX_BYTES);
    close(fd);
    return;
  }
  char *text = malloc((size_t)size + 1);
  if (text == NULL) {
    snprintf(e->error, sizeof e->error, "schedule file '%.400s': out of memory", path);
    close(fd);
    return;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, text + got, (size_t)size - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      snprintf(e->error, sizeof e->error, "cannot read schedule file '%.400s': %s", path,
               n < 0 ? strerror(errno) : "it shrank while being read");
      free(text);
      close(fd);
      return;
    }
    got += (size_t)n;
  }
  close(fd);
  char err[512];
  rc = mpiar__schedfile_parse(path, text, got, &e->file, err, sizeof err);
  free(text);
  if (rc != MPIAR_SUCCESS) {
    snprintf(e->error, sizeof e->error, "schedule file %s", err);
    return;
  }
  e->loaded = 1;
}

static double cost_file(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                        const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)nranks, (void)bytes, (void)elem_size, (void)segment_bytes, (void)c, (void)topo;
  return 0.0; /* no closed form: mpiar-sim --schedule simulates the file */
}

static int build_unverified(mpiar__schedule_t *s) {
  file_entry_t *e = entry_named(s->algorithm);
  if (e == NULL) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "'%s' is not a schedule file's entry",
                        s->algorithm != NULL ? s->algorithm : "(null)");
  }
  if (!e->loaded) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s", e->error);
  }
  return mpiar__schedfile_instantiate(&e->file, s);
}

static int build_verified(mpiar__schedule_t *s) {
  file_entry_t *e = entry_named(s->algorithm);
  if (e == NULL) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "'%s' is not a schedule file's entry",
                        s->algorithm != NULL ? s->algorithm : "(null)");
  }
  char why[640];
  if (!mpiar__schedfile_fit(&e->alg, s->nranks, s->count, s->in_place, why, sizeof why)) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: %s", e->name, why);
  }
  return mpiar__schedfile_instantiate(&e->file, s);
}

const mpiar__algorithm_t *mpiar__schedfile_algorithm(const char *path) {
  if (path == NULL || path[0] == '\0' || strlen(path) > PATH_MAX_LEN) {
    return NULL;
  }
  for (file_entry_t *e = __atomic_load_n(&entries, __ATOMIC_ACQUIRE); e != NULL; e = e->next) {
    if (strcmp(e->name + sizeof MPIAR__ALG_FILE_PREFIX - 1, path) == 0) {
      return &e->alg;
    }
  }
  pthread_mutex_lock(&entries_lock);
  file_entry_t *e = NULL;
  for (e = entries; e != NULL; e = e->next) {
    if (strcmp(e->name + sizeof MPIAR__ALG_FILE_PREFIX - 1, path) == 0) {
      pthread_mutex_unlock(&entries_lock);
      return &e->alg;
    }
  }
  e = calloc(1, sizeof *e);
  size_t len = sizeof MPIAR__ALG_FILE_PREFIX + strlen(path);
  char *name = e != NULL ? malloc(len) : NULL;
  if (name == NULL) {
    free(e);
    pthread_mutex_unlock(&entries_lock);
    return NULL;
  }
  snprintf(name, len, "%s%s", MPIAR__ALG_FILE_PREFIX, path);
  e->name = name;
  load(e, path);
  pthread_mutex_init(&e->lock, NULL);
  e->verdict[0].state = e->verdict[1].state = -1;
  unsigned flags = MPIAR__ALG_FILE | MPIAR__ALG_MANUAL | MPIAR__ALG_NO_QUOTIENT |
                   MPIAR__ALG_ORDER_BY_POSITION;
  if (e->loaded && e->file.order == MPIAR__SCHEDFILE_ORDER_CANONICAL) {
    flags |= MPIAR__ALG_CANONICAL | MPIAR__ALG_PAIR_EXACT;
  }
  /* Its number in the argument check: from the content, so equal on every rank that holds the
   * same file, and above every registry number. */
  unsigned index = 0x40000000u | (unsigned)(e->loaded ? e->file.hash >> 34 : 0);
  mpiar__algorithm_t a = {name, build_verified, cost_file, flags, "a schedule file",
                          {NULL, 0, 0, 0}, 0, NULL, index, NULL};
  e->alg = a;
  e->unverified = a;
  e->unverified.build = build_unverified;
  e->next = entries;
  __atomic_store_n(&entries, e, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&entries_lock);
  return &e->alg;
}

const mpiar__schedfile_t *mpiar__schedfile_of(const mpiar__algorithm_t *alg, char *why,
                                              size_t len) {
  file_entry_t *e = entry_of(alg);
  if (e == NULL) {
    snprintf(why, len, "'%s' is not a schedule file", alg != NULL ? alg->name : "(null)");
    return NULL;
  }
  if (!e->loaded) {
    snprintf(why, len, "%s", e->error);
    return NULL;
  }
  return &e->file;
}

const char *mpiar__schedfile_path(const mpiar__algorithm_t *alg) {
  file_entry_t *e = entry_of(alg);
  return e != NULL ? e->name + sizeof MPIAR__ALG_FILE_PREFIX - 1 : NULL;
}

const mpiar__algorithm_t *mpiar__schedfile_unverified(const mpiar__algorithm_t *alg) {
  file_entry_t *e = entry_of(alg);
  return e != NULL ? &e->unverified : NULL;
}

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One simulated run of the file's steps; 1 if it passed, else 0 with why. */
static int simulate(file_entry_t *e, int in_place, size_t count, mpiar_dtype_t dtype,
                    mpiar_op_t op, int canonical, char *why, size_t len) {
  const int p = e->file.nranks;
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = &e->unverified;
  cfg.nranks = p;
  cfg.count = count;
  cfg.dtype = dtype;
  cfg.op = op;
  cfg.in_place = in_place;
  cfg.check_hazards = 1;
  cfg.seed = e->file.hash | 1;
  float *mem = NULL, *expect = NULL;
  const void **in = NULL;
  if (canonical) {
    mem = malloc((size_t)p * count * sizeof *mem + 1);
    expect = malloc(count * sizeof *expect + 1);
    in = malloc((size_t)p * sizeof *in);
    if (mem == NULL || expect == NULL || in == NULL) {
      free(mem), free(expect), free(in);
      snprintf(why, len, "out of memory for the verification");
      return 0;
    }
    uint64_t x = e->file.hash;
    for (size_t i = 0; i < (size_t)p * count; i++) {
      mem[i] = (float)((double)(splitmix(&x) >> 11) / 9007199254740992.0 * 2.0 - 1.0) *
               (float)(1u << (splitmix(&x) % 20));
    }
    for (int r = 0; r < p; r++) {
      in[r] = mem + (size_t)r * count;
    }
    if (mpiar_reduce_canonical(expect, in, p, count, dtype, op) != MPIAR_SUCCESS) {
      free(mem), free(expect), free(in);
      snprintf(why, len, "cannot compute the canonical reduction");
      return 0;
    }
    cfg.inputs = in;
    cfg.expect = expect;
  }
  mpiar__sim_result_t res;
  memset(&res, 0, sizeof res);
  int rc = mpiar__sim_run(&cfg, &res);
  free(mem), free(expect), free(in);
  if (rc != MPIAR_SUCCESS) {
    snprintf(why, len, "the simulator cannot run it: %.300s", mpiar_last_error());
    return 0;
  }
  if (!res.ok) {
    snprintf(why, len, "fails verification (%s %s, %zu elements%s%s): %.300s",
             mpiar_dtype_name(dtype),
             mpiar_op_name(op), count, in_place ? ", in place" : "",
             canonical ? ", against the canonical order" : "", res.error);
    return 0;
  }
  return 1;
}

static int verify(file_entry_t *e, int in_place, char *why, size_t len) {
  const mpiar__schedfile_t *f = &e->file;
  /* Two elements per chunk, one where that would be large (the same steps, scaled). */
  size_t k = (double)f->nranks * 2.0 * (double)f->chunks <= (double)(1 << 24) ? 2 : 1;
  size_t count = k * f->chunks;
  return simulate(e, in_place, count, MPIAR_INT32, MPIAR_SUM, 0, why, len) &&
         simulate(e, in_place, count, MPIAR_FLOAT32, MPIAR_SUM,
                  f->order == MPIAR__SCHEDFILE_ORDER_CANONICAL, why, len) &&
         simulate(e, in_place, count, MPIAR_FLOAT32, MPIAR_AVG, 0, why, len);
}

int mpiar__schedfile_fit(const mpiar__algorithm_t *alg, int nranks, size_t count, int in_place,
                         char *why, size_t len) {
  file_entry_t *e = entry_of(alg);
  if (e == NULL) {
    snprintf(why, len, "'%s' is not a schedule file", alg != NULL ? alg->name : "(null)");
    return 0;
  }
  if (!e->loaded) {
    snprintf(why, len, "%s", e->error);
    return 0;
  }
  if (!mpiar__schedfile_fits(&e->file, nranks, count, in_place, why, len)) {
    return 0;
  }
  verdict_t *v = &e->verdict[in_place ? 1 : 0];
  pthread_mutex_lock(&e->lock);
  if (v->state < 0) {
    v->state = verify(e, in_place, v->why, sizeof v->why);
  }
  int ok = v->state;
  if (!ok) {
    snprintf(why, len, "%s", v->why);
  }
  pthread_mutex_unlock(&e->lock);
  return ok;
}

void mpiar__schedfile_install(void) {
  __atomic_store_n(&mpiar__algorithm_file_hook, mpiar__schedfile_algorithm, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void install_at_load(void) {
  mpiar__schedfile_install();
}
