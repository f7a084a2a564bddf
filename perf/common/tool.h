/*
 * What every command-line tool of perf/ shares: one argument parser, one --help layout, one set
 * of exit codes, and the checks that come before a run (the memory it will need, which rank
 * prints).
 *
 * A tool describes its options in a table of tool_arg_t and hands it to tool_args_parse(), which
 * needs no MPI: every rank parses the same arguments the same way before MPI starts, so a bad
 * argument ends every rank with exit code 2 and none of them waits for the others.
 *
 * Grammar: "-x VALUE", "-xVALUE", "--name VALUE", "--name=VALUE"; a flag takes no value. The word
 * after an option that takes a value is its value even when it starts with '-' (so "-e -4" is
 * reported as a bad size, not as an unknown option). Sizes are integers with an optional K, M or
 * G suffix (powers of 1024, optionally followed by "i" and/or "B"); lists are comma-separated with
 * no empty items. When an option is given twice, the last one counts. Every error names the
 * option as the user wrote it.
 */
#ifndef MPIAR_TOOL_H
#define MPIAR_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every tool. */
enum {
  TOOL_EXIT_OK = 0,   /* success */
  TOOL_EXIT_FAIL = 1, /* a failed check or a run-time error */
  TOOL_EXIT_USAGE = 2 /* bad arguments, including sizes this machine's memory cannot hold */
};

/* What tool_args_parse() found. */
enum { TOOL_PARSE_OK = 0, TOOL_PARSE_HELP = 1, TOOL_PARSE_ERROR = 2 };

typedef enum tool_arg_kind {
  TOOL_ARG_FLAG,      /* int: set to 1 (0 with .off); takes no value */
  TOOL_ARG_INT,       /* long in [lo, hi] */
  TOOL_ARG_SIZE,      /* size_t in [lo, hi] bytes */
  TOOL_ARG_DOUBLE,    /* finite double in [dlo, dhi] */
  TOOL_ARG_STRING,    /* const char *, not empty */
  TOOL_ARG_INT_LIST,  /* long[max_items]; each item in [lo, hi]; *nitems set */
  TOOL_ARG_SIZE_LIST, /* size_t[max_items]; each item in [lo, hi]; *nitems set */
  TOOL_ARG_CUSTOM     /* .parse(value, dest, err, errlen) */
} tool_arg_kind_t;

/*
 * A parser for a value of a kind of its own (a datatype name, a model). @return 0, or -1 with a
 * message in err that says what is wrong with the value (the option's name is prefixed by the
 * caller).
 */
typedef int (*tool_arg_parse_fn)(const char *value, void *dest, char *err, size_t errlen);

/*
 * One option. Ranges (lo, hi) hold for INT, SIZE and the lists' items; they must be exactly
 * representable as doubles (below 2^53), which every range of a tool is.
 */
typedef struct tool_arg {
  char short_name;       /* 'b' for -b, or 0 */
  const char *long_name; /* "size" for --size, or NULL */
  tool_arg_kind_t kind;
  void *dest;
  long long lo, hi;        /* INT, SIZE, lists */
  double dlo, dhi;         /* DOUBLE */
  int dlo_open;            /* DOUBLE: 1 when dlo itself is excluded (a value > dlo) */
  int max_items;           /* lists: capacity of dest */
  int *nitems;             /* lists: number of items parsed */
  int off;                 /* FLAG: store 0 instead of 1 (for "--no-x") */
  tool_arg_parse_fn parse; /* CUSTOM */
  const char *metavar;     /* the value's name in --help, e.g. "SIZE" */
  const char *help;        /* one or more lines; '\n' starts an indented continuation */
  int *given;              /* optional: set to 1 when the option appears */
} tool_arg_t;

/* The largest size any tool accepts on its command line: 1 TiB. */
#define TOOL_SIZE_MAX (1LL << 40)

/* A tool: its name, its usage line, its description, its options and what follows them. */
typedef struct tool_spec {
  const char *prog;     /* "mpiar-latency" */
  const char *usage;    /* "mpiexec -n P mpiar-latency [options]" */
  const char *about;    /* printed before the options */
  const char *epilogue; /* printed after the options, before the exit codes; may be NULL */
  const tool_arg_t *args;
  int nargs;
} tool_spec_t;

/*
 * Parse argv[1..argc-1] against spec (-h and --help are always known). Needs no MPI and prints
 * nothing. @return TOOL_PARSE_OK, TOOL_PARSE_HELP, or TOOL_PARSE_ERROR with a one-line message
 * in err that starts with the option's name.
 */
int tool_args_parse(const tool_spec_t *spec, int argc, char **argv, char *err, size_t errlen);

/* Print the --help text: usage, description, every option, the epilogue, the exit codes. */
void tool_args_help(const tool_spec_t *spec, FILE *f);

/*
 * Parse, and print what a user must see: --help on stdout, or an error on stderr (on the
 * launcher's rank 0 only, see tool_launcher_rank0()).
 * @return -1 to go on, else the exit code to end with (0 after --help, 2 after an error).
 */
int tool_args_run(const tool_spec_t *spec, int argc, char **argv);

/*
 * Report a bad argument found after parsing (e.g. two options that contradict each other):
 * "PROG: MESSAGE" and a pointer to --help on stderr, from the launcher's rank 0 only.
 * @return TOOL_EXIT_USAGE.
 */
int tool_usage_error(const tool_spec_t *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * 1 on the process that should print before MPI starts: rank 0 as the launcher (Hydra, Open MPI,
 * PMIx, Slurm) announces it in the environment, or any process started without a launcher.
 */
int tool_launcher_rank0(void);

/* Parse a size ("64K", "1M", "2GiB") with the grammar above. @return 0 or -1. */
int tool_parse_size(const char *text, size_t *out);

/* Format a byte count as "512 B", "64.0 KiB", "1.5 GiB" into buf. @return buf. */
const char *tool_format_bytes(double bytes, char *buf, size_t len);

/*
 * Memory the tools may take without pushing the machine into swap or the OOM killer: the size in
 * the environment variable MPIAR_TOOLS_MEMORY when set (e.g. "8G", to leave room for other
 * jobs), else MemAvailable of /proc/meminfo, else the free physical pages. 0 when unknown, -1
 * when MPIAR_TOOLS_MEMORY is malformed.
 */
double tool_available_memory(void);

/*
 * Check that `need` bytes (over all the processes of this node that the run starts) fit in the
 * memory available now (tool_available_memory(); unknown passes). @return 0, or -1 with a
 * message in err that names `what` (the options that asked for the memory) and both amounts,
 * or a malformed MPIAR_TOOLS_MEMORY.
 */
int tool_check_memory(double need, const char *what, char *err, size_t errlen);

/*
 * Check, before any measurement, that the output file @p path can be written the way the tools
 * write it (PATH.tmp, then renamed over PATH): PATH is absent or a regular file, its directory
 * exists, and PATH.tmp can be created there. @return 0, or -1 with a message in err that names
 * the path and what is wrong ("'out' is a directory, not a regular file"). Leaves nothing behind.
 */
int tool_check_output(const char *path, char *err, size_t errlen);

/*
 * Progress lines ("\r...") go to stderr only when it is a terminal: in a file or a pipe they
 * would land in the middle of the output. @return 1 if progress should be shown.
 */
int tool_progress_wanted(void);

/* ---- Timing rules of the measuring tools (tool_timing.c) ---- */

/*
 * Repetitions of a size without -i: about iter_bytes / bytes, clamped to [lo, hi], so small
 * messages get many repetitions for a stable median and large ones few. mpiar-bench and
 * mpiar-tune use TOOL_ITER_BYTES, TOOL_ITERS_MIN and TOOL_ITERS_MAX.
 */
#define TOOL_ITER_BYTES ((size_t)128 << 20)
#define TOOL_ITERS_MIN 10
#define TOOL_ITERS_MAX 1000
int tool_iters_for(size_t bytes, size_t iter_bytes, int lo, int hi);

/* Untimed repetitions before the timed ones: a tenth of them, 1 to 20. */
int tool_warmup_for(int iters);

/*
 * The sizes of a sweep: min_bytes, times factor, ... up to max_bytes, each rounded down to whole
 * elements of esize bytes (at least one) without repeats, at most max_sizes. @return how many.
 */
int tool_size_sweep(size_t min_bytes, size_t max_bytes, size_t factor, size_t esize, size_t *out,
                    int max_sizes);

/*
 * The order in which one repetition runs the n contenders of a size: a permutation of 0..n-1
 * drawn from @p seed (the same on every rank, which must run the same collectives in the same
 * order). A new order per repetition keeps a contender's place in the sequence (what ran just
 * before it, what its caches hold) from biasing its time: with a fixed order A B C ..., the same
 * schedule measured in two columns differed by up to 15 % on a loaded machine.
 */
void tool_shuffle(int *order, int n, uint64_t seed);

/* splitmix64's output for the state @p x: a mixing function whose values look random (neighbours
 * unrelated), for inputs in which a misplaced block shows. */
uint64_t tool_mix64(uint64_t x);

/* The median of v[0..n-1], which is sorted in place; NaN when n == 0. */
double tool_median(double *v, int n);

#endif /* MPIAR_TOOL_H */
