/*
 * The tools' common argument parser (perf/common/tool.h) on its own: every kind of option, both
 * spellings of a value, ranges, lists, the errors (each names the option as written) and the
 * --help layout. No MPI.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_CHECK_WORDS "check failed: "
#include "../common/test_check.h"
#include "common/tool.h"

/* The options of a made-up tool, reset before every case. */
static int flag, no_flag, given_size;
static long count, ints[4];
static size_t size, sizes[3];
static double ratio;
static const char *name, *color;
static int nints, nsizes;

static int parse_color(const char *value, void *dest, char *err, size_t errlen) {
  if (strcmp(value, "red") != 0 && strcmp(value, "blue") != 0) {
    snprintf(err, errlen, "unknown color '%s' (red or blue)", value);
    return -1;
  }
  *(const char **)dest = value;
  return 0;
}

static const tool_arg_t args[] = {
    {.short_name = 'f',
     .long_name = "flag",
     .kind = TOOL_ARG_FLAG,
     .dest = &flag,
     .help = "a flag"},
    {.long_name = "no-flag", .kind = TOOL_ARG_FLAG, .dest = &flag, .off = 1, .help = "clears it"},
    {.short_name = 'n',
     .long_name = "count",
     .kind = TOOL_ARG_INT,
     .dest = &count,
     .lo = -3,
     .hi = 10,
     .metavar = "N",
     .help = "an integer in [-3, 10]"},
    {.short_name = 's',
     .kind = TOOL_ARG_SIZE,
     .dest = &size,
     .lo = 4,
     .hi = 1 << 30,
     .given = &given_size,
     .metavar = "SIZE",
     .help = "a size\nover two lines"},
    {.long_name = "ratio",
     .kind = TOOL_ARG_DOUBLE,
     .dest = &ratio,
     .dlo = 0,
     .dlo_open = 1,
     .dhi = 1,
     .metavar = "F",
     .help = "in (0, 1]"},
    {.long_name = "name",
     .kind = TOOL_ARG_STRING,
     .dest = &name,
     .metavar = "NAME",
     .help = "a name"},
    {.long_name = "ints",
     .kind = TOOL_ARG_INT_LIST,
     .dest = ints,
     .nitems = &nints,
     .max_items = 4,
     .lo = 1,
     .hi = 100,
     .metavar = "LIST",
     .help = "up to 4 integers"},
    {.long_name = "sizes",
     .kind = TOOL_ARG_SIZE_LIST,
     .dest = sizes,
     .nitems = &nsizes,
     .max_items = 3,
     .lo = 0,
     .hi = TOOL_SIZE_MAX,
     .metavar = "LIST",
     .help = "up to 3 sizes"},
    {.short_name = 'c',
     .long_name = "a-rather-long-option-name",
     .kind = TOOL_ARG_CUSTOM,
     .dest = &color,
     .parse = parse_color,
     .metavar = "COLOR",
     .help = "red or blue"},
};
static const tool_spec_t spec = {"test-tool",
                                 "test-tool [options]",
                                 "A tool for the test.",
                                 "After the options.",
                                 args,
                                 (int)(sizeof args / sizeof args[0])};

static char err[512];

/* Parse a NULL-terminated argument list. */
static int parse(const char *first, ...) {
  flag = no_flag = given_size = 0;
  count = 0;
  size = 0;
  ratio = 0;
  name = color = NULL;
  nints = nsizes = 0;
  char *argv[32] = {"test-tool"};
  int argc = 1;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *)) {
    argv[argc++] = (char *)a;
  }
  va_end(ap);
  return tool_args_parse(&spec, argc, argv, err, sizeof err);
}

/* A case that must fail with a message holding `want`. */
#define BAD(want, ...)                                                                         \
  do {                                                                                         \
    int rc_ = parse(__VA_ARGS__, NULL);                                                        \
    CHECK(rc_ == TOOL_PARSE_ERROR && strstr(err, want) != NULL, "got %d '%s', want '%s'", rc_, \
          err, want);                                                                          \
  } while (0)

int main(void) {
  /* Values, both spellings, short and long names, the last occurrence winning. */
  CHECK(parse("-f", "-n", "7", "-s", "64K", "--ratio=0.5", "--name", "x", NULL) == TOOL_PARSE_OK,
        "%s", err);
  CHECK(flag == 1 && count == 7 && size == 65536 && ratio == 0.5 && strcmp(name, "x") == 0,
        "values");
  CHECK(given_size == 1, "given");
  CHECK(parse("--count=-3", "-s4", "--flag", "--no-flag", NULL) == TOOL_PARSE_OK, "%s", err);
  CHECK(count == -3 && size == 4 && flag == 0, "count %ld size %zu flag %d", count, size, flag);
  CHECK(parse("-n", "1", "-n2", NULL) == TOOL_PARSE_OK && count == 2, "last wins");
  CHECK(parse("-s", "1GiB", NULL) == TOOL_PARSE_OK && size == (size_t)1 << 30, "1GiB");
  CHECK(parse(NULL) == TOOL_PARSE_OK && given_size == 0, "no arguments");
  CHECK(parse("-c", "red", NULL) == TOOL_PARSE_OK && strcmp(color, "red") == 0, "custom");
  /* Lists. */
  CHECK(parse("--ints", "1,2,100", "--sizes=0,1K,2M", NULL) == TOOL_PARSE_OK, "%s", err);
  CHECK(nints == 3 && ints[0] == 1 && ints[1] == 2 && ints[2] == 100, "ints");
  CHECK(nsizes == 3 && sizes[0] == 0 && sizes[1] == 1024 && sizes[2] == 2u << 20, "sizes");
  /* --help wins wherever it stands. */
  CHECK(parse("-n", "99", "--help", NULL) == TOOL_PARSE_ERROR, "an error before --help counts");
  CHECK(parse("--help", "-n", "99", NULL) == TOOL_PARSE_HELP, "--help");
  CHECK(parse("-h", NULL) == TOOL_PARSE_HELP, "-h");

  /* Errors name the option as written. */
  BAD("option '-n' needs a value", "-n");
  BAD("option '--count' needs a value", "--count");
  BAD("-n: '11' is not an integer in [-3, 10]", "-n", "11");
  BAD("--count: 'x' is not an integer in [-3, 10]", "--count=x");
  BAD("-n: '' is not an integer", "-n", "");
  BAD("-n: '99999999999999999999' is not an integer", "-n", "99999999999999999999");
  BAD("-s: '3' is out of range (4 B .. 1 GiB)", "-s", "3");
  BAD("-s: '2G' is out of range", "-s2G");
  BAD("-s: '1T' is not a size in bytes", "-s", "1T");
  BAD("-s: '-4' is not a size in bytes", "-s", "-4");
  BAD("-s: '4 ' is not a size in bytes", "-s", "4 ");
  BAD("--ratio: '0' is not a number in (0, 1]", "--ratio", "0");
  BAD("--ratio: 'inf' is not a number", "--ratio", "inf");
  BAD("--ratio: '0.5x' is not a number", "--ratio=0.5x");
  BAD("--name: empty value", "--name=");
  BAD("--ints: empty item in '1,,2'", "--ints", "1,,2");
  BAD("--ints: empty item in ',1'", "--ints", ",1");
  BAD("--ints: empty item in '1,'", "--ints", "1,");
  BAD("--ints: more than 4 items", "--ints", "1,2,3,4,5");
  BAD("--ints: '0' is not an integer in [1, 100]", "--ints", "1,0");
  BAD("--sizes: '1Q' is not a size", "--sizes", "1K,1Q");
  BAD("-c: unknown color 'green' (red or blue)", "-c", "green");
  BAD("--a-rather-long-option-name: unknown color", "--a-rather-long-option-name=x");
  BAD("option '--flag' takes no value", "--flag=1");
  BAD("option '-f' takes no value", "-fx");
  BAD("unknown option '--bogus'", "--bogus");
  BAD("unknown option '--fla'", "--fla");
  BAD("unknown option '-z'", "-z");
  BAD("unexpected argument 'extra'", "-f", "extra");
  BAD("unexpected argument '-'", "-");

  /* --help: usage, description, every option with its value's name, continuation lines
   * indented, the epilogue and the exit codes. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  tool_args_help(&spec, f);
  fclose(f);
  static const char *const want[] = {
      "Usage: test-tool [options]\n",
      "A tool for the test.",
      "  -f, --flag ",
      "  --no-flag ",
      "  -n, --count N ",
      "  -s SIZE ",
      "a size\n                    over two lines\n",
      "  --ratio F ",
      "  --name NAME ",
      "  --ints LIST ",
      "  --sizes LIST ",
      "  -c, --a-rather-long-option-name COLOR\n                    red or blue\n",
      "  -h, --help ",
      "After the options.",
      "Exit codes: 0 success"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    CHECK(strstr(text, want[i]) != NULL, "--help lacks '%s':\n%s", want[i], text);
  }
  free(text);

  char buf[32];
  CHECK(strcmp(tool_format_bytes(512, buf, sizeof buf), "512 B") == 0, "%s", buf);
  CHECK(strcmp(tool_format_bytes(65536, buf, sizeof buf), "64 KiB") == 0, "%s", buf);
  CHECK(strcmp(tool_format_bytes(1.5 * (1 << 30), buf, sizeof buf), "1.5 GiB") == 0, "%s", buf);

  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("tool argument parser: all checks passed\n");
  return 0;
}
