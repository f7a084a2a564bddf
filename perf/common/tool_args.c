/*
 * The argument parser of every tool in perf/ (see tool.h for the grammar). It needs no MPI and
 * prints nothing itself, so that it can be tested alone and every rank parses alike.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"
#include "base/common.h"
#include "base/settings.h"

/* Left column of --help: options are padded to this width, longer ones get a line of their own. */
#define HELP_COLUMN 20

int tool_parse_size(const char *text, size_t *out) {
  return mpiar__parse_size(text, out);
}

const char *tool_format_bytes(double bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = bytes;
  while (u < 5 && v >= 1024) {
    v /= 1024;
    u++;
  }
  if (u == 0 || v == floor(v)) {
    snprintf(buf, len, "%.0f %s", v, units[u]);
  } else {
    snprintf(buf, len, "%.1f %s", v, units[u]);
  }
  return buf;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return TOOL_PARSE_ERROR;
}

/* "[lo, hi]", or ">= lo" when hi is beyond any value a user types. */
static void int_range(const tool_arg_t *a, char *buf, size_t len) {
  if (a->hi >= (1LL << 53)) {
    snprintf(buf, len, ">= %lld", a->lo);
  } else {
    snprintf(buf, len, "in [%lld, %lld]", a->lo, a->hi);
  }
}

static int parse_int(const tool_arg_t *a, const char *shown, const char *text, long *out, char *err,
                     size_t errlen) {
  char range[96];
  int_range(a, range, sizeof range);
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (*text == '\0' || errno != 0 || *end != '\0' || v < a->lo || v > a->hi) {
    return fail(err, errlen, "%s: '%s' is not an integer %s", shown, text, range);
  }
  *out = (long)v;
  return TOOL_PARSE_OK;
}

static int parse_size(const tool_arg_t *a, const char *shown, const char *text, size_t *out,
                      char *err, size_t errlen) {
  size_t v = 0;
  if (mpiar__parse_size(text, &v) != 0) {
    return fail(err, errlen,
                "%s: '%s' is not a size in bytes (an integer, optionally with K, M or G)", shown,
                text);
  }
  if ((double)v < (double)a->lo || (double)v > (double)a->hi) {
    char lo[32];
    char hi[32];
    return fail(err, errlen, "%s: '%s' is out of range (%s .. %s)", shown, text,
                tool_format_bytes((double)a->lo, lo, sizeof lo),
                tool_format_bytes((double)a->hi, hi, sizeof hi));
  }
  *out = v;
  return TOOL_PARSE_OK;
}

static int parse_double(const tool_arg_t *a, const char *shown, const char *text, double *out,
                        char *err, size_t errlen) {
  errno = 0;
  char *end = NULL;
  double v = strtod(text, &end);
  int below = a->dlo_open ? !(v > a->dlo) : !(v >= a->dlo);
  if (*text == '\0' || errno != 0 || *end != '\0' || !isfinite(v) || below || !(v <= a->dhi)) {
    return fail(err, errlen, "%s: '%s' is not a number in %c%g, %g]", shown, text,
                a->dlo_open ? '(' : '[', a->dlo, a->dhi);
  }
  *out = v;
  return TOOL_PARSE_OK;
}

/* A comma-separated list of integers or sizes, each checked like a single value. */
static int parse_list(const tool_arg_t *a, const char *shown, const char *text, char *err,
                      size_t errlen) {
  int n = 0;
  const char *p = text;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    char item[64];
    if (len == 0) {
      return fail(err, errlen, "%s: empty item in '%s' (a comma-separated list)", shown, text);
    }
    if (len >= sizeof item) {
      return fail(err, errlen, "%s: item '%.*s' is too long", shown, (int)len, p);
    }
    if (n == a->max_items) {
      return fail(err, errlen, "%s: more than %d items in '%s'", shown, a->max_items, text);
    }
    memcpy(item, p, len);
    item[len] = '\0';
    int rc = a->kind == TOOL_ARG_INT_LIST
                 ? parse_int(a, shown, item, &((long *)a->dest)[n], err, errlen)
                 : parse_size(a, shown, item, &((size_t *)a->dest)[n], err, errlen);
    if (rc != TOOL_PARSE_OK) {
      return rc;
    }
    n++;
    if (comma == NULL) {
      break;
    }
    p = comma + 1;
  }
  *a->nitems = n;
  return TOOL_PARSE_OK;
}

static int parse_value(const tool_arg_t *a, const char *shown, const char *value, char *err,
                       size_t errlen) {
  switch (a->kind) {
  case TOOL_ARG_INT:
    return parse_int(a, shown, value, a->dest, err, errlen);
  case TOOL_ARG_SIZE:
    return parse_size(a, shown, value, a->dest, err, errlen);
  case TOOL_ARG_DOUBLE:
    return parse_double(a, shown, value, a->dest, err, errlen);
  case TOOL_ARG_STRING:
    if (*value == '\0') {
      return fail(err, errlen, "%s: empty value", shown);
    }
    *(const char **)a->dest = value;
    return TOOL_PARSE_OK;
  case TOOL_ARG_INT_LIST:
  case TOOL_ARG_SIZE_LIST:
    return parse_list(a, shown, value, err, errlen);
  case TOOL_ARG_CUSTOM: {
    char why[400];
    why[0] = '\0';
    if (a->parse(value, a->dest, why, sizeof why) != 0) {
      return fail(err, errlen, "%s: %s", shown, why[0] ? why : "bad value");
    }
    return TOOL_PARSE_OK;
  }
  default:
    return fail(err, errlen, "%s: option of unknown kind", shown);
  }
}

/* The option `arg` names: "--name[=value]" or "-x[value]". NULL if none. */
static const tool_arg_t *find(const tool_spec_t *spec, const char *arg, const char **inline_value,
                              char *shown, size_t shown_len) {
  *inline_value = NULL;
  if (arg[0] == '-' && arg[1] == '-' && arg[2] != '\0') {
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    for (int k = 0; k < spec->nargs; k++) {
      const tool_arg_t *a = &spec->args[k];
      if (a->long_name != NULL && strlen(a->long_name) == len &&
          strncmp(a->long_name, name, len) == 0) {
        *inline_value = eq != NULL ? eq + 1 : NULL;
        snprintf(shown, shown_len, "--%s", a->long_name);
        return a;
      }
    }
    return NULL;
  }
  if (arg[0] == '-' && arg[1] != '\0' && arg[1] != '-') {
    for (int k = 0; k < spec->nargs; k++) {
      const tool_arg_t *a = &spec->args[k];
      if (a->short_name != 0 && a->short_name == arg[1]) {
        *inline_value = arg[2] != '\0' ? arg + 2 : NULL;
        snprintf(shown, shown_len, "-%c", a->short_name);
        return a;
      }
    }
  }
  return NULL;
}

int tool_args_parse(const tool_spec_t *spec, int argc, char **argv, char *err, size_t errlen) {
  err[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      return TOOL_PARSE_HELP;
    }
    const char *value = NULL;
    char shown[64];
    const tool_arg_t *a = find(spec, arg, &value, shown, sizeof shown);
    if (a == NULL) {
      if (arg[0] == '-' && arg[1] != '\0') {
        /* "--name=value" is reported by its name. */
        int len = arg[1] == '-' && strchr(arg, '=') != NULL ? (int)(strchr(arg, '=') - arg)
                                                            : (int)strlen(arg);
        return fail(err, errlen, "unknown option '%.*s'", len, arg);
      }
      return fail(err, errlen, "unexpected argument '%s'", arg);
    }
    if (a->given != NULL) {
      *a->given = 1;
    }
    if (a->kind == TOOL_ARG_FLAG) {
      if (value != NULL) {
        return fail(err, errlen, "option '%s' takes no value (in '%s')", shown, arg);
      }
      *(int *)a->dest = a->off ? 0 : 1;
      continue;
    }
    if (value == NULL) {
      if (i + 1 >= argc) {
        return fail(err, errlen, "option '%s' needs a value", shown);
      }
      value = argv[++i];
    }
    int rc = parse_value(a, shown, value, err, errlen);
    if (rc != TOOL_PARSE_OK) {
      return rc;
    }
  }
  return TOOL_PARSE_OK;
}

/* Print text with every line after the first indented to the help column. */
static void print_indented(FILE *f, const char *text) {
  for (const char *p = text; *p != '\0';) {
    const char *nl = strchr(p, '\n');
    size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
    fprintf(f, "%.*s\n", (int)len, p);
    if (nl == NULL) {
      return;
    }
    p = nl + 1;
    if (*p != '\0') {
      fprintf(f, "%*s", HELP_COLUMN, "");
    }
  }
}

void tool_args_help(const tool_spec_t *spec, FILE *f) {
  fprintf(f, "Usage: %s\n\n", spec->usage);
  if (spec->about != NULL) {
    fprintf(f, "%s\n\n", spec->about);
  }
  fprintf(f, "Options:\n");
  for (int k = 0; k <= spec->nargs; k++) {
    char left[96];
    const char *help = "this text";
    if (k == spec->nargs) {
      snprintf(left, sizeof left, "  -h, --help");
    } else {
      const tool_arg_t *a = &spec->args[k];
      const char *meta = a->kind == TOOL_ARG_FLAG ? NULL : (a->metavar ? a->metavar : "VALUE");
      int w = snprintf(left, sizeof left, "  ");
      if (a->short_name != 0) {
        w += snprintf(left + w, sizeof left - (size_t)w, "-%c%s", a->short_name,
                      a->long_name != NULL ? ", " : "");
      }
      if (a->long_name != NULL) {
        w += snprintf(left + w, sizeof left - (size_t)w, "--%s", a->long_name);
      }
      if (meta != NULL) {
        snprintf(left + w, sizeof left - (size_t)w, " %s", meta);
      }
      help = a->help != NULL ? a->help : "";
    }
    if (strlen(left) + 1 >= HELP_COLUMN) {
      fprintf(f, "%s\n%*s", left, HELP_COLUMN, "");
    } else {
      fprintf(f, "%-*s", HELP_COLUMN, left);
    }
    print_indented(f, help);
  }
  if (spec->epilogue != NULL) {
    fprintf(f, "\n%s\n", spec->epilogue);
  }
  fprintf(f, "\nExit codes: 0 success; 1 a failed check or a run-time error; 2 bad arguments,\n"
             "including sizes whose buffers do not fit in the memory available on this machine.\n");
}

int tool_usage_error(const tool_spec_t *spec, const char *fmt, ...) {
  if (tool_launcher_rank0()) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", spec->prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", spec->prog);
  }
  return TOOL_EXIT_USAGE;
}

int tool_args_run(const tool_spec_t *spec, int argc, char **argv) {
  char err[512];
  int rc = tool_args_parse(spec, argc, argv, err, sizeof err);
  if (rc == TOOL_PARSE_OK) {
    return -1;
  }
  if (rc == TOOL_PARSE_HELP) {
    if (tool_launcher_rank0()) {
      tool_args_help(spec, stdout);
    }
    return TOOL_EXIT_OK;
  }
  return tool_usage_error(spec, "%s", err);
}
