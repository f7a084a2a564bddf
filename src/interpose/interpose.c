/*
 * libmpiar_pmpi.so: MPI_Allreduce (and MPI_Allreduce_c where MPI has it) replaced through the MPI
 * profiling interface, so that an unmodified MPI program runs its allreduces on mpiar when this
 * library is preloaded or linked before the MPI library.
 *
 * A call runs on mpiar when its datatype and operation map to mpiar's (see typemap.c), the
 * communicator is an intracommunicator and the arguments are ones MPI accepts. Everything else
 * goes to PMPI_Allreduce unchanged, so MPI gives its own result or its own error; the choice
 * depends only on arguments that MPI requires to be equal on every rank (count, datatype, op,
 * communicator) and on the environment, so all ranks take the same path.
 *
 * MPI_Iallreduce and MPI_Allreduce_init are not defined here: they reach MPI directly until mpiar
 * has nonblocking and persistent forms. MPI_Finalize is defined only to print the statistics.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "base/settings.h"
#include "interpose/interpose.h"

#define MPIAR_PMPI_EXPORT __attribute__((visibility("default")))

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int enabled;
static atomic_int mpi_initialized;
static atomic_int mpi_finalized;
/*
 * The interposer's thread-local state is in the initial-exec model: a library that is preloaded or
 * linked into the program is loaded with it, and each access is then one instruction instead of a
 * call to __tls_get_addr (two or three per MPI_Allreduce).
 */
#define MPIAR_PMPI_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* Set while this thread is inside mpiar, so that a nested MPI_Allreduce goes straight to MPI. */
static MPIAR_PMPI_TLS int in_mpiar;

/*
 * The last (datatype, op) this thread ran on mpiar and how (mpiar__pmpi_map() and, for a pair
 * outside the standard, the MPI library's acceptance): a loop of the same call skips the table
 * scans. Only pairs that mapped are kept, and those are predefined handles, which name the same
 * type and operation for the whole process.
 */
static MPIAR_PMPI_TLS struct {
  MPI_Datatype datatype;
  MPI_Op op;
  int valid;
  mpiar__pmpi_call_t call;
} last_pair;

/* Whether the MPI library accepts a pair outside the standard: 0 not asked yet, 1 yes, 2 no. */
static atomic_int probe_cache[MPIAR__PMPI_PROBE_SLOTS];

/*
 * Scratch of the logical operations (one 0/1 byte per element), one buffer per thread, kept from
 * call to call so that a steady state allocates nothing; it only grows. Every buffer is listed
 * so that MPI_Finalize frees them all, whichever threads made them; a thread's pointer is valid
 * only while its generation is the current one.
 */
typedef struct flag_buffer {
  unsigned char *data;
  size_t capacity;
  struct flag_buffer *next;
} flag_buffer_t;
static pthread_mutex_t flag_buffers_lock = PTHREAD_MUTEX_INITIALIZER;
static flag_buffer_t *flag_buffers;
static atomic_uint flag_generation = 1;
static MPIAR_PMPI_TLS flag_buffer_t *my_flags;
static MPIAR_PMPI_TLS unsigned my_flags_generation;

/* Buffers grow in steps of this many bytes, so that slowly growing counts rarely reallocate. */
#define FLAG_BUFFER_STEP ((size_t)64 << 10)

static void read_config(void) {
  const mpiar__settings_t *set = NULL;
  if (mpiar__settings(&set) != MPIAR_SUCCESS) {
    /* The program cannot see an error here, and guessing is worse than MPI's own allreduce. */
    fprintf(stderr, "mpiar_pmpi: %s; MPI_Allreduce passes through to MPI\n", mpiar_last_error());
    enabled = 0;
  } else {
    enabled = set->pmpi;
  }
  mpiar__pmpi_stats_configure(set->pmpi_stats[0] != '\0' ? set->pmpi_stats : NULL);
}

/* @return 1 once MPI is initialized and not yet finalized (cached after the first success). */
static int mpi_usable(void) {
  if (atomic_load_explicit(&mpi_finalized, memory_order_relaxed)) {
    return 0;
  }
  if (atomic_load_explicit(&mpi_initialized, memory_order_relaxed)) {
    return 1;
  }
  int flag = 0;
  if (PMPI_Initialized(&flag) != MPI_SUCCESS || !flag) {
    return 0;
  }
  if (PMPI_Finalized(&flag) != MPI_SUCCESS || flag) {
    return 0;
  }
  atomic_store_explicit(&mpi_initialized, 1, memory_order_relaxed);
  return 1;
}

/*
 * Ask the MPI library once whether it reduces (datatype, op): a one-element PMPI_Allreduce on a
 * communicator of this process alone, whose errors are returned. It involves no other rank, and
 * every rank gets the same answer from the same library, so all take the same path.
 */
static int mpi_accepts(MPI_Datatype datatype, MPI_Op op, int slot) {
  int known = atomic_load_explicit(&probe_cache[slot], memory_order_relaxed);
  if (known != 0) {
    return known == 1;
  }
  int accepted = 0;
  MPI_Comm self = MPI_COMM_NULL;
  /* A split (unlike a duplicate) copies no attributes of the program's. */
  if (PMPI_Comm_split(MPI_COMM_SELF, 0, 0, &self) == MPI_SUCCESS) {
    PMPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
    unsigned char in[16] = {0};
    unsigned char out[16];
    accepted = PMPI_Allreduce(in, out, 1, datatype, op, self) == MPI_SUCCESS;
    PMPI_Comm_free(&self);
  }
  atomic_store_explicit(&probe_cache[slot], accepted ? 1 : 2, memory_order_relaxed);
  return accepted;
}

/* This thread's flag buffer, with room for `bytes`; NULL without memory. */
static unsigned char *flag_scratch(size_t bytes) {
  unsigned gen = atomic_load_explicit(&flag_generation, memory_order_acquire);
  if (my_flags == NULL || my_flags_generation != gen) {
    flag_buffer_t *b = calloc(1, sizeof *b);
    if (b == NULL) {
      return NULL;
    }
    pthread_mutex_lock(&flag_buffers_lock);
    b->next = flag_buffers;
    flag_buffers = b;
    pthread_mutex_unlock(&flag_buffers_lock);
    my_flags = b;
    my_flags_generation = gen;
  }
  if (my_flags->capacity < bytes) {
    size_t cap = (bytes + FLAG_BUFFER_STEP - 1) / FLAG_BUFFER_STEP * FLAG_BUFFER_STEP;
    unsigned char *d = malloc(cap);
    if (d == NULL) {
      return NULL;
    }
    free(my_flags->data);
    my_flags->data = d;
    my_flags->capacity = cap;
  }
  return my_flags->data;
}

/* At MPI_Finalize: every thread's flag buffer, and the pointers to them become stale. */
static void free_flag_buffers(void) {
  pthread_mutex_lock(&flag_buffers_lock);
  atomic_fetch_add_explicit(&flag_generation, 1, memory_order_release);
  while (flag_buffers != NULL) {
    flag_buffer_t *b = flag_buffers;
    flag_buffers = b->next;
    free(b->data);
    free(b);
  }
  pthread_mutex_unlock(&flag_buffers_lock);
  my_flags = NULL;
}

/*
 * Decide who runs a call. @return -1 for mpiar (with *call filled), else a fallback reason.
 * Cheap checks come first; the intercommunicator test is an MPI call and comes last.
 */
static int classify(const void *sendbuf, const void *recvbuf, int64_t count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, mpiar__pmpi_call_t *call) {
  pthread_once(&config_once, read_config);
  if (!enabled) {
    return MPIAR__PMPI_FB_DISABLED;
  }
  if (!mpi_usable()) {
    return MPIAR__PMPI_FB_MPI_STATE;
  }
  if (in_mpiar) {
    return MPIAR__PMPI_FB_NESTED;
  }
  if (count < 0) {
    return MPIAR__PMPI_FB_COUNT;
  }
  if (comm == MPI_COMM_NULL) {
    return MPIAR__PMPI_FB_COMM;
  }
  if (last_pair.valid && last_pair.datatype == datatype && last_pair.op == op) {
    *call = last_pair.call;
  } else {
    int reason = mpiar__pmpi_map(datatype, op, call);
    if (reason >= 0) {
      return reason;
    }
    if (call->probe_slot >= 0 && !mpi_accepts(datatype, op, call->probe_slot)) {
      return MPIAR__PMPI_FB_DATATYPE_OP;
    }
    last_pair.datatype = datatype;
    last_pair.op = op;
    last_pair.call = *call;
    last_pair.valid = 1;
  }
  if ((uint64_t)count > SIZE_MAX / call->user_size) {
    return MPIAR__PMPI_FB_COUNT;
  }
  /* MPI reports a NULL buffer with a non-zero count and a send buffer equal to the receive
   * buffer (MPI_IN_PLACE is the way to say that) as errors of its own; let it. */
  if (count > 0 &&
      (recvbuf == NULL || (sendbuf != MPI_IN_PLACE && (sendbuf == NULL || sendbuf == recvbuf)))) {
    return MPIAR__PMPI_FB_BUFFER;
  }
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    return MPIAR__PMPI_FB_COMM;
  }
  if (inter) {
    return MPIAR__PMPI_FB_INTERCOMM;
  }
  return -1;
}

/*
 * MPI_LAND, MPI_LOR and MPI_LXOR: reduce one 0/1 byte per element with BAND, BOR or BXOR (which
 * agree with the logical operations on 0 and 1) and write the 0/1 result as the user's integer
 * type. The user's receive buffer is written only after the reduction succeeded, so a failure
 * leaves it as it was, in place or not. The bytes live in this thread's flag buffer. @p opts
 * may be NULL (the library's call without options).
 */
static int logical_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             const mpiar__pmpi_call_t *call, MPI_Comm comm, int nranks,
                             const mpiar_options_t *opts) {
  if (nranks == 1) {
    /* MPI applies no operation to a single rank's input, so the values come back unchanged
     * rather than as 0/1: a plain copy, which BOR over one rank is. */
    const void *in = (sendbuf == MPI_IN_PLACE) ? MPIAR_IN_PLACE : sendbuf;
    return mpiar_allreduce_ex(in, recvbuf, count * call->user_size, MPIAR_UINT8, MPIAR_BOR, comm,
                              opts);
  }
  const void *src = (sendbuf == MPI_IN_PLACE) ? recvbuf : sendbuf;
  unsigned char *flags = flag_scratch(count > 0 ? count : 1);
  if (flags == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "%zu bytes for a logical reduction", count);
  }
  mpiar__pmpi_to_flags(flags, src, count, call->user_size);
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, flags, count, MPIAR_UINT8, call->op, comm, opts);
  if (rc == MPIAR_SUCCESS) {
    mpiar__pmpi_from_flags(recvbuf, flags, count, call->user_size);
  }
  return rc;
}

/* @return 1 if the error handler of `comm` ends the program (MPI's default). */
static int handler_is_fatal(MPI_Comm comm) {
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(comm, &h) != MPI_SUCCESS) {
    return 0;
  }
  int fatal = (h == MPI_ERRORS_ARE_FATAL);
#if defined(MPI_ERRORS_ABORT)
  fatal = fatal || (h == MPI_ERRORS_ABORT);
#endif
  PMPI_Errhandler_free(&h);
  return fatal;
}

/*
 * Report an mpiar failure the way MPI reports its own: the communicator's error handler is
 * invoked with the MPI error class, which is also returned. When that handler is about to end
 * the program, the detail of the failure is printed first, since nothing else will show it.
 */
static int raise_error(MPI_Comm comm, int code) {
  int cls = mpiar__pmpi_error_class(code);
  if (handler_is_fatal(comm)) {
    fprintf(stderr, "mpiar_pmpi: MPI_Allreduce failed: %s: %s\n", mpiar_err_name(code),
            mpiar_last_error());
  }
  PMPI_Comm_call_errhandler(comm, cls);
  return cls;
}

/*
 * Run a call that classify() accepted. Without statistics it is the library's call without
 * options, whose automatic choice is the one mpiar_select_comm() names and whose repetition (a
 * loop over the same buffers, as benchmarks and training steps make) runs the request kept from
 * the last call: no selection, plan lookup or argument check. The statistics must name the
 * algorithm that ran, so with them the choice is asked for first and then passed explicitly
 * (which bypasses the call cache: a selection and a plan lookup per call, the price of counting).
 */
static int accelerate(const void *sendbuf, void *recvbuf, size_t count,
                      const mpiar__pmpi_call_t *call, MPI_Comm comm) {
  int nranks = 0;
  if (call->logical) {
    int mrc = PMPI_Comm_size(comm, &nranks);
    if (mrc != MPI_SUCCESS) {
      mpiar__pmpi_stats_error();
      return mrc;
    }
  }
  size_t wire_count = count * call->scale;
  const char *algorithm = NULL;
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  const mpiar_options_t *with = NULL;
  int rc = MPIAR_SUCCESS;
  if (mpiar__pmpi_stats_enabled()) {
    size_t segment = 0;
    rc = mpiar_select_comm(comm, wire_count, call->dtype, &algorithm, &segment, NULL);
    opts.algorithm = algorithm;
    opts.segment_bytes = segment;
    with = &opts;
  }
  if (rc == MPIAR_SUCCESS) {
    in_mpiar = 1;
    if (call->logical) {
      rc = logical_allreduce(sendbuf, recvbuf, count, call, comm, nranks, with);
    } else {
      const void *src = (sendbuf == MPI_IN_PLACE) ? MPIAR_IN_PLACE : sendbuf;
      rc = mpiar_allreduce_ex(src, recvbuf, wire_count, call->dtype, call->op, comm, with);
    }
    in_mpiar = 0;
  }
  if (rc != MPIAR_SUCCESS) {
    mpiar__pmpi_stats_error();
    return raise_error(comm, rc);
  }
  mpiar__pmpi_stats_accelerated(algorithm, count * call->user_size);
  return MPI_SUCCESS;
}

MPIAR_PMPI_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  mpiar__pmpi_call_t call;
  int reason = classify(sendbuf, recvbuf, count, datatype, op, comm, &call);
  if (reason >= 0) {
    mpiar__pmpi_stats_fallback(reason);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  return accelerate(sendbuf, recvbuf, (size_t)count, &call, comm);
}

#if MPIAR_PMPI_HAVE_ALLREDUCE_C
MPIAR_PMPI_EXPORT int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  mpiar__pmpi_call_t call;
  int reason = classify(sendbuf, recvbuf, (int64_t)count, datatype, op, comm, &call);
  if (reason >= 0) {
    mpiar__pmpi_stats_fallback(reason);
    return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
  }
  return accelerate(sendbuf, recvbuf, (size_t)count, &call, comm);
}
#endif

MPIAR_PMPI_EXPORT int MPI_Finalize(void) {
  pthread_once(&config_once, read_config);
  int flag = 0;
  if (PMPI_Initialized(&flag) == MPI_SUCCESS && flag && PMPI_Finalized(&flag) == MPI_SUCCESS &&
      !flag) {
    mpiar__pmpi_stats_report();
  }
  atomic_store_explicit(&mpi_finalized, 1, memory_order_relaxed);
  int rc = PMPI_Finalize();
  free_flag_buffers();
  return rc;
}
