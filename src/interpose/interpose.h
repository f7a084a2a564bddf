/*
 * Internal interface of libmpiar_pmpi.so, the interposer that replaces MPI_Allreduce through the
 * MPI profiling interface: how a call is classified (run by mpiar, or handed unchanged to
 * PMPI_Allreduce for a named reason) and the statistics printed at MPI_Finalize.
 */
#ifndef MPIAR_INTERPOSE_H
#define MPIAR_INTERPOSE_H

#include <stddef.h>

#include "mpiar.h"

/*
 * Why a call was handed to PMPI_Allreduce: X(NAME, "name printed in the statistics").
 * The checks run in this order; the first that applies names the reason.
 */
#define MPIAR__PMPI_FALLBACK_MAP(X)                                                           \
  X(DISABLED, "disabled")       /* MPIAR_PMPI=0 (or malformed) */                             \
  X(MPI_STATE, "mpi-state")     /* MPI not initialized, or already finalized */               \
  X(NESTED, "nested")           /* MPI_Allreduce called from inside mpiar on this thread */   \
  X(COUNT, "count")             /* negative count, or a byte size that does not fit */        \
  X(COMM, "comm")               /* MPI_COMM_NULL or a communicator MPI rejects */             \
  X(OP, "op")                   /* MAXLOC/MINLOC, user-defined ops, MPI_OP_NULL, ... */       \
  X(DATATYPE, "datatype")       /* derived types, types with no mpiar equivalent */           \
  X(DATATYPE_OP, "datatype-op") /* a pair neither the standard nor the MPI library defines */ \
  X(BUFFER, "buffer")           /* NULL or aliased buffers: MPI reports these itself */       \
  X(INTERCOMM, "intercomm")     /* intercommunicators */

typedef enum mpiar__pmpi_fallback {
#define MPIAR__PMPI_FB_ENUM_(name, text) MPIAR__PMPI_FB_##name,
  MPIAR__PMPI_FALLBACK_MAP(MPIAR__PMPI_FB_ENUM_)
#undef MPIAR__PMPI_FB_ENUM_
      MPIAR__PMPI_FB_NREASONS
} mpiar__pmpi_fallback_t;

/* @return the printed name of a fallback reason. */
const char *mpiar__pmpi_fallback_name(int reason);

/*
 * How mpiar runs one MPI (datatype, op) pair. The data travels as `wire_count = count * scale`
 * elements of `dtype`; `logical` asks for the MPI_LAND/LOR/LXOR path, which first turns every
 * element into a 0/1 byte and reduces those bytes with BAND/BOR/BXOR.
 */
typedef struct mpiar__pmpi_call {
  mpiar_dtype_t dtype; /* element type on the wire */
  mpiar_op_t op;       /* mpiar operation on the wire elements */
  size_t scale;        /* wire elements per user element */
  size_t user_size;    /* bytes of one user element */
  int logical;         /* 1: normalise to 0/1 bytes first */
  int probe_slot;      /* >= 0: a pair outside the standard (e.g. MPI_CHAR): mpiar runs it only
                          if the MPI library accepts it; the slot caches that answer */
} mpiar__pmpi_call_t;

/* Number of (datatype, op) pairs whose acceptance by the MPI library can be cached. */
#define MPIAR__PMPI_PROBE_SLOTS 512

/*
 * Map a predefined MPI datatype and operation to an mpiar call.
 * @return -1 when mpiar can run the pair (and *call is filled; with call->probe_slot >= 0 only
 *         where the MPI library accepts it), else the fallback reason (MPIAR__PMPI_FB_OP,
 *         MPIAR__PMPI_FB_DATATYPE or MPIAR__PMPI_FB_DATATYPE_OP).
 */
int mpiar__pmpi_map(MPI_Datatype datatype, MPI_Op op, mpiar__pmpi_call_t *call);

/*
 * Turn the input of a logical reduction into one byte per element: flags[i] = (src[i] != 0).
 * An integer is zero exactly when all its bytes are, so the element's signedness does not matter.
 */
void mpiar__pmpi_to_flags(unsigned char *flags, const void *src, size_t count, size_t size);

/* Write flags[i] (0 or 1) as an integer of `size` bytes into dst[i]. */
void mpiar__pmpi_from_flags(void *dst, const unsigned char *flags, size_t count, size_t size);

/* @return the MPI error class that stands for an mpiar error code. */
int mpiar__pmpi_error_class(int mpiar_code);

/*
 * Statistics (MPIAR_PMPI_STATS). Unset, empty or "0": off, and the counters cost nothing;
 * "1": printed on stderr; any other value: the path of a file that rank 0 writes.
 * The counters are atomic, so threads may call concurrently.
 */
void mpiar__pmpi_stats_configure(const char *value);
int mpiar__pmpi_stats_enabled(void);
void mpiar__pmpi_stats_fallback(int reason);
void mpiar__pmpi_stats_accelerated(const char *algorithm, size_t bytes);
void mpiar__pmpi_stats_error(void);

/*
 * Sum the counters over MPI_COMM_WORLD (PMPI calls only) and print them on its rank 0.
 * Collective over MPI_COMM_WORLD when statistics are on; does nothing otherwise.
 */
void mpiar__pmpi_stats_report(void);

#endif /* MPIAR_INTERPOSE_H */
