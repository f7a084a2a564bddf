/* Settings: one table of every MPIAR_* variable, one parser per kind (see settings.h). */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/settings.h"

int mpiar__parse_size(const char *text, size_t *out) {
  if (text == NULL || *text < '0' || *text > '9') {
    return -1;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text) {
    return -1;
  }
  unsigned shift = 0;
  switch (*end) {
  case '\0':
    break;
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    return -1;
  }
  /* Accept "64K", "64KB", "64KiB"; nothing else may follow. */
  if (shift != 0 && (*end == 'i' || *end == 'I')) {
    end++;
  }
  if (shift != 0 && (*end == 'b' || *end == 'B')) {
    end++;
  }
  if (*end != '\0') {
    return -1;
  }
  if (v > SIZE_MAX || (shift != 0 && v > (SIZE_MAX >> shift))) {
    return -1;
  }
  *out = (size_t)v << shift;
  return 0;
}

int mpiar__parse_long(const char *text, long lo, long hi, long *out) {
  if (text == NULL || *text == '\0' || isspace((unsigned char)*text)) {
    return -1;
  }
  errno = 0;
  char *end = NULL;
  long x = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || x < lo || x > hi) {
    return -1;
  }
  *out = x;
  return 0;
}

int mpiar__parse_bool(const char *text, int *out) {
  static const char *const yes[] = {"1", "on", "yes", "true"};
  static const char *const no[] = {"0", "off", "no", "false"};
  for (size_t i = 0; text != NULL && i < 4; i++) {
    if (strcasecmp(text, yes[i]) == 0) {
      *out = 1;
      return 0;
    }
    if (strcasecmp(text, no[i]) == 0) {
      *out = 0;
      return 0;
    }
  }
  return -1;
}

typedef enum kind { K_SIZE, K_LONG, K_BOOL, K_CHOICE, K_NAME, K_TEXT } kind_t;

typedef struct setting {
  const char *name;
  kind_t kind;
  size_t offset;              /* of the field in mpiar__settings_t */
  long lo, hi;                /* K_LONG range; K_SIZE: lo = smallest non-zero value */
  const char *const *choices; /* K_CHOICE: the words, NULL-terminated; the field gets the index */
  int choice_base;            /* added to the index (MPIAR_KERNEL: "auto" is -1) */
  size_t capacity;            /* K_NAME / K_TEXT: field size */
  size_t set_offset;          /* != 0: an int field set to 1 when the variable is given */
} setting_t;

#define OFF(f) offsetof(mpiar__settings_t, f)

/*
 * The grammar of an algorithm name: NAME or NAME/P=V, NAME of [a-z0-9_]+, P of [a-z]+, V a
 * decimal of 1 to 3 digits without a leading zero. Whether NAME takes P and V is in its range is
 * the registry's to say (the first call checks MPIAR_ALGORITHM against it).
 */
static int name_with_parameter(const char *v) {
  const size_t name = strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_");
  if (name == 0) {
    return 0;
  }
  if (v[name] == '\0') {
    return 1;
  }
  if (v[name] != '/') {
    return 0;
  }
  const char *p = v + name + 1;
  const size_t pname = strspn(p, "abcdefghijklmnopqrstuvwxyz");
  if (pname == 0 || p[pname] != '=') {
    return 0;
  }
  const char *d = p + pname + 1;
  const size_t ndig = strspn(d, "0123456789");
  return ndig >= 1 && ndig <= 3 && d[0] != '0' && d[ndig] == '\0';
}

static const char *const wait_words[] = {"auto", "spin", "yield", NULL};
static const char *const kernel_words[] = {"auto", "reference", "avx2", "avx512", NULL};
static const char *const progress_words[] = {"none", "thread", NULL};
static const char *const topology_words[] = {"auto", "flat", NULL};
static const char *const transport_words[] = {"auto", "mpi", NULL};

static const setting_t table[] = {
    {"MPIAR_ALGORITHM", K_NAME, OFF(algorithm), 0, 0, NULL, 0,
     sizeof(((mpiar__settings_t *)0)->algorithm), 0},
    {"MPIAR_SEGMENT_BYTES", K_SIZE, OFF(segment_bytes), (long)MPIAR__SEGMENT_MIN, 0, NULL, 0, 0,
     0},
    {"MPIAR_TIMEOUT_MS", K_LONG, OFF(timeout_ms), 0, 1L << 30, NULL, 0, 0, 0},
    {"MPIAR_WAIT", K_CHOICE, OFF(wait), 0, 0, wait_words, 0, 0, 0},
    {"MPIAR_KERNEL", K_CHOICE, OFF(kernel), 0, 0, kernel_words, -1, 0, 0},
    {"MPIAR_NUM_THREADS", K_LONG, OFF(num_threads), 1, MPIAR__THREADS_MAX, NULL, 0, 0, 0},
    {"MPIAR_DEBUG", K_BOOL, OFF(debug), 0, 0, NULL, 0, 0, 0},
    {"MPIAR_DEBUG_SCHEDULE", K_BOOL, OFF(debug_schedule), 0, 0, NULL, 0, 0, 0},
    {"MPIAR_CHECK", K_BOOL, OFF(check), 0, 0, NULL, 0, 0, 0},
    {"MPIAR_REPRODUCIBLE", K_BOOL, OFF(reproducible), 0, 0, NULL, 0, 0, 0},
    {"MPIAR_PROGRESS", K_CHOICE, OFF(progress_thread), 0, 0, progress_words, 0, 0, 0},
    {"MPIAR_TOPOLOGY", K_CHOICE, OFF(topology_flat), 0, 0, topology_words, 0, 0, 0},
    {"MPIAR_FUSION_BYTES", K_SIZE, OFF(fusion_bytes), 0, 0, NULL, 0, 0, OFF(fusion_set)},
    {"MPIAR_PMPI", K_BOOL, OFF(pmpi), 0, 0, NULL, 0, 0, 0},
    {"MPIAR_PMPI_STATS", K_TEXT, OFF(pmpi_stats), 0, 0, NULL, 0,
     sizeof(((mpiar__settings_t *)0)->pmpi_stats), 0},
    {"MPIAR_TUNING_FILE", K_TEXT, OFF(tuning_file), 0, 0, NULL, 0,
     sizeof(((mpiar__settings_t *)0)->tuning_file), 0},
    {"MPIAR_TRANSPORT", K_CHOICE, OFF(transport_mpi), 0, 0, transport_words, 0, 0, 0},
    {"MPIAR_KV_SHARED", K_BOOL, OFF(kv_shared), 0, 0, NULL, 0, 0, 0},
};
#define NSETTINGS (sizeof table / sizeof table[0])

const char *const mpiar__settings_names[] = {
    "MPIAR_ALGORITHM", "MPIAR_SEGMENT_BYTES", "MPIAR_TIMEOUT_MS", "MPIAR_WAIT",
    "MPIAR_KERNEL",    "MPIAR_NUM_THREADS",   "MPIAR_DEBUG",      "MPIAR_DEBUG_SCHEDULE",
    "MPIAR_CHECK",     "MPIAR_REPRODUCIBLE",  "MPIAR_PROGRESS",   "MPIAR_TOPOLOGY",
    "MPIAR_FUSION_BYTES", "MPIAR_PMPI",       "MPIAR_PMPI_STATS", "MPIAR_TUNING_FILE",
    "MPIAR_TRANSPORT", "MPIAR_KV_SHARED", NULL};

int mpiar__settings_number(const char *name) {
  for (int i = 0; name != NULL && mpiar__settings_names[i] != NULL; i++) {
    if (strcmp(name, mpiar__settings_names[i]) == 0) {
      return i + 1;
    }
  }
  return 0;
}

static void set_defaults(mpiar__settings_t *s) {
  memset(s, 0, sizeof *s);
  s->wait = MPIAR__WAIT_AUTO;
  s->kernel = -1;
  s->pmpi = 1;
  s->kv_shared = 1;
}

static int malformed(const setting_t *t, const char *value, const char *what) {
  return mpiar__error(MPIAR_ERR_ENV, "%s='%s' is not %s", t->name, value, what);
}

static int parse_choice(const setting_t *t, const char *value, int *field) {
  char words[256] = "";
  for (int i = 0; t->choices[i] != NULL; i++) {
    if (strcmp(value, t->choices[i]) == 0) {
      *field = i + t->choice_base;
      return MPIAR_SUCCESS;
    }
    size_t used = strlen(words);
    snprintf(words + used, sizeof words - used, "%s%s", i ? ", " : "one of ", t->choices[i]);
  }
  return malformed(t, value, words);
}

static int parse_setting(const setting_t *t, const char *value, mpiar__settings_t *s) {
  char *base = (char *)s;
  char what[96];
  switch (t->kind) {
  case K_SIZE: {
    size_t v = 0;
    if (mpiar__parse_size(value, &v) != 0) {
      return malformed(t, value, "a size (a non-negative integer, optionally with K, M or G)");
    }
    if (v != 0 && v < (size_t)t->lo) {
      snprintf(what, sizeof what, "0 or a size of at least %ld bytes", t->lo);
      return malformed(t, value, what);
    }
    *(size_t *)(base + t->offset) = v;
    break;
  }
  case K_LONG: {
    long v = 0;
    if (mpiar__parse_long(value, t->lo, t->hi, &v) != 0) {
      snprintf(what, sizeof what, "an integer in [%ld, %ld]", t->lo, t->hi);
      return malformed(t, value, what);
    }
    *(long *)(base + t->offset) = v;
    break;
  }
  case K_BOOL:
    if (mpiar__parse_bool(value, (int *)(base + t->offset)) != 0) {
      return malformed(t, value, "a boolean (1, 0, on, off, yes, no, true, false)");
    }
    break;
  case K_CHOICE: {
    int rc = parse_choice(t, value, (int *)(base + t->offset));
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
    break;
  }
  case K_NAME:
    if (strcmp(value, "auto") == 0) {
      break; /* the default: an empty name */
    }
    if (!name_with_parameter(value) && (strncmp(value, "file:", 5) != 0 || value[5] == '\0')) {
      return malformed(t, value,
                       "a name of lower-case letters, digits and '_', optionally followed by "
                       "/k=N (N a decimal of at most 3 digits without a leading zero), or "
                       "file:PATH (a schedule file)");
    }
    __attribute__((fallthrough)); /* the name is copied like a text */
  case K_TEXT:
    if (strlen(value) >= t->capacity) {
      snprintf(what, sizeof what, "at most %zu characters long", t->capacity - 1);
      return malformed(t, value, what);
    }
    memcpy(base + t->offset, value, strlen(value) + 1);
    break;
  }
  if (t->set_offset != 0) {
    *(int *)(base + t->set_offset) = 1;
  }
  return MPIAR_SUCCESS;
}

int mpiar__settings_parse_one(const char *name, const char *value, mpiar__settings_t *out) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    if (name != NULL && strcmp(name, table[i].name) == 0) {
      if (value == NULL || *value == '\0') {
        return MPIAR_SUCCESS;
      }
      return parse_setting(&table[i], value, out);
    }
  }
  return mpiar__error(MPIAR_ERR_INVALID_ARG, "'%s' is not an mpiar setting",
                      name != NULL ? name : "(null)");
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* read with acquire ordering after the first load */
static mpiar__settings_t current;
static unsigned loads; /* loads so far: the next one's generation */
static int current_rc;
static char current_detail[512];

static void load_locked(void) {
  mpiar__settings_t s;
  set_defaults(&s);
  int rc = MPIAR_SUCCESS;
  char detail[sizeof current_detail] = "";
  for (size_t i = 0; i < NSETTINGS; i++) {
    const char *v = getenv(table[i].name);
    if (v == NULL || *v == '\0') {
      continue;
    }
    mpiar__settings_t trial = s;
    int r = parse_setting(&table[i], v, &trial);
    if (r == MPIAR_SUCCESS) {
      s = trial;
    } else if (rc == MPIAR_SUCCESS) {
      rc = r;
      snprintf(detail, sizeof detail, "%s", mpiar_last_error());
      s.malformed = mpiar__settings_number(table[i].name);
    }
  }
  s.generation = ++loads;
  current = s;
  current_rc = rc;
  memcpy(current_detail, detail, sizeof detail);
  __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

int mpiar__settings(const mpiar__settings_t **out) {
  if (MPIAR__UNLIKELY(!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))) {
    pthread_mutex_lock(&lock);
    if (!loaded) {
      load_locked();
    }
    pthread_mutex_unlock(&lock);
  }
  *out = &current;
  if (MPIAR__UNLIKELY(current_rc != MPIAR_SUCCESS)) {
    return mpiar__error(current_rc, "%s", current_detail);
  }
  return MPIAR_SUCCESS;
}

void mpiar__settings_reload(void) {
  pthread_mutex_lock(&lock);
  load_locked();
  pthread_mutex_unlock(&lock);
}
