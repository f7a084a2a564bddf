/*
 * Which MPI (datatype, op) pairs mpiar runs, and how.
 *
 * Only predefined datatypes are looked up: a derived datatype, however simple, is not in the
 * table and goes to PMPI_Allreduce. The operations each type class accepts are the ones the MPI
 * standard defines (MPI-4.0, section 6.9.2); any other pair is handed to MPI, so that MPI decides
 * what it means (an error, or an extension of that MPI library) and the result is always MPI's.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "base/common.h"
#include "interpose/interpose.h"

/* Type classes of the MPI standard's reduction table. */
enum type_class {
  TC_SIGNED,   /* C integer, signed */
  TC_UNSIGNED, /* C integer, unsigned */
  TC_FLOAT,    /* floating point: SUM, PROD, MIN, MAX only */
  TC_BOOL,     /* MPI_C_BOOL: logical operations only */
  TC_BYTE      /* MPI_BYTE: bitwise operations only */
};

/* Operation kinds: arithmetic, bitwise and logical reductions. */
enum op_kind { OK_ARITH, OK_BITWISE, OK_LOGICAL };

/* Bits of type_entry_t.ext: operation kinds the standard does not define on the type. */
#define EXT_ARITH (1u << OK_ARITH)
#define EXT_BITWISE (1u << OK_BITWISE)
#define EXT_LOGICAL (1u << OK_LOGICAL)

typedef struct type_entry {
  MPI_Datatype handle;
  unsigned char tclass;
  unsigned char size;
  signed char fdtype; /* mpiar type of a floating type; -1 for the others */
  unsigned char ext;  /* EXT_*: kinds run only where the MPI library accepts them (a probe) */
} type_entry_t;

_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "float and double must be binary32/64");

/* char's signedness on this platform decides how MPI_CHAR's minimum and maximum compare. */
#if CHAR_MIN < 0
#define TC_CHAR TC_SIGNED
#else
#define TC_CHAR TC_UNSIGNED
#endif

/*
 * The most common types come first because the lookup is a linear scan.
 *
 * MPI_CHAR is meant for printable characters and the standard lists it for no reduction, but MPI
 * libraries accept it (MPICH and Open MPI do, with every operation), and benchmarks use it: OSU's
 * osu_allreduce reduces MPI_CHAR by default. It runs on mpiar where the MPI library accepts the
 * pair, as char of this platform (signed or not). MPI_AINT, MPI_OFFSET and MPI_COUNT are the
 * standard's "multi-language" integer types (signed), with every operation but the logical ones,
 * which also depend on the library.
 */
static const type_entry_t types[] = {
    {MPI_FLOAT, TC_FLOAT, 4, MPIAR_FLOAT32, 0},
    {MPI_DOUBLE, TC_FLOAT, 8, MPIAR_FLOAT64, 0},
    {MPI_INT, TC_SIGNED, sizeof(int), -1, 0},
    {MPI_CHAR, TC_CHAR, 1, -1, EXT_ARITH | EXT_BITWISE | EXT_LOGICAL},
    {MPI_LONG, TC_SIGNED, sizeof(long), -1, 0},
    {MPI_UNSIGNED, TC_UNSIGNED, sizeof(unsigned), -1, 0},
    {MPI_UNSIGNED_LONG, TC_UNSIGNED, sizeof(unsigned long), -1, 0},
    {MPI_LONG_LONG, TC_SIGNED, sizeof(long long), -1, 0},
    {MPI_LONG_LONG_INT, TC_SIGNED, sizeof(long long), -1, 0},
    {MPI_UNSIGNED_LONG_LONG, TC_UNSIGNED, sizeof(unsigned long long), -1, 0},
    {MPI_INT8_T, TC_SIGNED, 1, -1, 0},
    {MPI_UINT8_T, TC_UNSIGNED, 1, -1, 0},
    {MPI_INT16_T, TC_SIGNED, 2, -1, 0},
    {MPI_UINT16_T, TC_UNSIGNED, 2, -1, 0},
    {MPI_INT32_T, TC_SIGNED, 4, -1, 0},
    {MPI_UINT32_T, TC_UNSIGNED, 4, -1, 0},
    {MPI_INT64_T, TC_SIGNED, 8, -1, 0},
    {MPI_UINT64_T, TC_UNSIGNED, 8, -1, 0},
    {MPI_SIGNED_CHAR, TC_SIGNED, 1, -1, 0},
    {MPI_UNSIGNED_CHAR, TC_UNSIGNED, 1, -1, 0},
    {MPI_SHORT, TC_SIGNED, sizeof(short), -1, 0},
    {MPI_UNSIGNED_SHORT, TC_UNSIGNED, sizeof(unsigned short), -1, 0},
    {MPI_AINT, TC_SIGNED, sizeof(MPI_Aint), -1, EXT_LOGICAL},
    {MPI_OFFSET, TC_SIGNED, sizeof(MPI_Offset), -1, EXT_LOGICAL},
    {MPI_COUNT, TC_SIGNED, sizeof(MPI_Count), -1, EXT_LOGICAL},
    {MPI_C_BOOL, TC_BOOL, sizeof(_Bool), -1, 0},
    {MPI_BYTE, TC_BYTE, 1, -1, 0},
#if defined(MPI_C_FLOAT16)
    {MPI_C_FLOAT16, TC_FLOAT, 2, MPIAR_FLOAT16, 0},
#elif defined(MPIX_C_FLOAT16)
    {MPIX_C_FLOAT16, TC_FLOAT, 2, MPIAR_FLOAT16, 0},
#endif
#if defined(MPIX_BFLOAT16)
    {MPIX_BFLOAT16, TC_FLOAT, 2, MPIAR_BFLOAT16, 0},
#endif
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static const struct {
  MPI_Op handle;
  mpiar_op_t op;
  int kind;
} ops[] = {
    {MPI_SUM, MPIAR_SUM, OK_ARITH},     {MPI_PROD, MPIAR_PROD, OK_ARITH},
    {MPI_MIN, MPIAR_MIN, OK_ARITH},     {MPI_MAX, MPIAR_MAX, OK_ARITH},
    {MPI_BAND, MPIAR_BAND, OK_BITWISE}, {MPI_BOR, MPIAR_BOR, OK_BITWISE},
    {MPI_BXOR, MPIAR_BXOR, OK_BITWISE}, {MPI_LAND, MPIAR_BAND, OK_LOGICAL},
    {MPI_LOR, MPIAR_BOR, OK_LOGICAL},   {MPI_LXOR, MPIAR_BXOR, OK_LOGICAL},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

_Static_assert(NTYPES *NOPS <= MPIAR__PMPI_PROBE_SLOTS, "raise MPIAR__PMPI_PROBE_SLOTS");

/* @return the index of `op` in ops[], or -1. */
static int lookup_op(MPI_Op op) {
  for (size_t i = 0; i < NOPS; i++) {
    if (ops[i].handle == op) {
      return (int)i;
    }
  }
  return -1;
}

/* @return the mpiar integer type of `size` bytes and the given signedness, or -1 if none. */
static int integer_dtype(size_t size, int is_signed) {
  switch (size) {
  case 1:
    return is_signed ? MPIAR_INT8 : MPIAR_UINT8;
  case 4:
    return is_signed ? MPIAR_INT32 : MPIAR_UINT32;
  case 8:
    return is_signed ? MPIAR_INT64 : MPIAR_UINT64;
  default:
    return -1;
  }
}

int mpiar__pmpi_map(MPI_Datatype datatype, MPI_Op op, mpiar__pmpi_call_t *call) {
  int oi = lookup_op(op);
  if (oi < 0) {
    return MPIAR__PMPI_FB_OP;
  }
  const int kind = ops[oi].kind;
  const type_entry_t *t = NULL;
  size_t ti = 0;
  for (; ti < NTYPES; ti++) {
    if (types[ti].handle == datatype) {
      t = &types[ti];
      break;
    }
  }
  if (t == NULL || datatype == MPI_DATATYPE_NULL) {
    return MPIAR__PMPI_FB_DATATYPE;
  }

  call->op = ops[oi].op;
  call->scale = 1;
  call->user_size = t->size;
  call->logical = 0;
  call->probe_slot = (t->ext & (1u << kind)) ? (int)(ti * NOPS + (size_t)oi) : -1;
  int dtype = -1;
  switch (t->tclass) {
  case TC_SIGNED:
  case TC_UNSIGNED:
    if (kind == OK_LOGICAL) {
      call->logical = 1;
      dtype = MPIAR_UINT8;
    } else if (kind == OK_BITWISE) {
      /* Bitwise results do not depend on how bytes group into elements, so a width mpiar lacks
       * (16-bit integers) travels as bytes. */
      dtype = integer_dtype(t->size, t->tclass == TC_SIGNED);
      if (dtype < 0) {
        dtype = MPIAR_UINT8;
        call->scale = t->size;
      }
    } else {
      dtype = integer_dtype(t->size, t->tclass == TC_SIGNED);
      if (dtype < 0) {
        return MPIAR__PMPI_FB_DATATYPE;
      }
    }
    break;
  case TC_FLOAT:
    if (kind != OK_ARITH) {
      return MPIAR__PMPI_FB_DATATYPE_OP;
    }
    dtype = t->fdtype;
    break;
  case TC_BOOL:
    if (kind != OK_LOGICAL) {
      return MPIAR__PMPI_FB_DATATYPE_OP;
    }
    call->logical = 1;
    dtype = MPIAR_UINT8;
    break;
  case TC_BYTE:
    if (kind != OK_BITWISE) {
      return MPIAR__PMPI_FB_DATATYPE_OP;
    }
    dtype = MPIAR_UINT8;
    break;
  default:
    return MPIAR__PMPI_FB_DATATYPE;
  }
  call->dtype = (mpiar_dtype_t)dtype;
  if (!mpiar_op_supported(call->dtype, call->op)) {
    return MPIAR__PMPI_FB_DATATYPE_OP;
  }
  return -1;
}

void mpiar__pmpi_to_flags(unsigned char *flags, const void *src, size_t count, size_t size) {
  const unsigned char *s = src;
  /* The fixed widths get their own loops so that the compiler can vectorise them. */
  switch (size) {
  case 1:
    for (size_t i = 0; i < count; i++) {
      flags[i] = s[i] != 0;
    }
    break;
  case 2:
    for (size_t i = 0; i < count; i++) {
      uint16_t v;
      memcpy(&v, s + 2 * i, 2);
      flags[i] = v != 0;
    }
    break;
  case 4:
    for (size_t i = 0; i < count; i++) {
      uint32_t v;
      memcpy(&v, s + 4 * i, 4);
      flags[i] = v != 0;
    }
    break;
  case 8:
    for (size_t i = 0; i < count; i++) {
      uint64_t v;
      memcpy(&v, s + 8 * i, 8);
      flags[i] = v != 0;
    }
    break;
  default:
    for (size_t i = 0; i < count; i++) {
      unsigned char any = 0;
      for (size_t b = 0; b < size; b++) {
        any |= s[i * size + b];
      }
      flags[i] = any != 0;
    }
    break;
  }
}

void mpiar__pmpi_from_flags(void *dst, const unsigned char *flags, size_t count, size_t size) {
  unsigned char *d = dst;
  switch (size) {
  case 1:
    memcpy(d, flags, count);
    break;
  case 2:
    for (size_t i = 0; i < count; i++) {
      uint16_t v = flags[i];
      memcpy(d + 2 * i, &v, 2);
    }
    break;
  case 4:
    for (size_t i = 0; i < count; i++) {
      uint32_t v = flags[i];
      memcpy(d + 4 * i, &v, 4);
    }
    break;
  case 8:
    for (size_t i = 0; i < count; i++) {
      uint64_t v = flags[i];
      memcpy(d + 8 * i, &v, 8);
    }
    break;
  default:
    /* Any other integer width: the value 1 is all-zero bytes but the least significant one,
     * whose position depends on the byte order. */
    for (size_t i = 0; i < count; i++) {
      unsigned char *e = d + i * size;
      memset(e, 0, size);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      e[size - 1] = flags[i];
#else
      e[0] = flags[i];
#endif
    }
    break;
  }
}

int mpiar__pmpi_error_class(int mpiar_code) {
  switch (mpiar_code) {
  case MPIAR_SUCCESS:
    return MPI_SUCCESS;
  case MPIAR_ERR_INVALID_ARG:
  case MPIAR_ERR_MISMATCH:
  case MPIAR_ERR_KEY_UNKNOWN:
  case MPIAR_ERR_KEY_EXISTS:
    return MPI_ERR_ARG;
  case MPIAR_ERR_NULL_BUFFER:
  case MPIAR_ERR_OVERLAP:
    return MPI_ERR_BUFFER;
  case MPIAR_ERR_UNSUPPORTED:
    return MPI_ERR_UNSUPPORTED_OPERATION;
  case MPIAR_ERR_BAD_DTYPE_OP:
    return MPI_ERR_OP;
  case MPIAR_ERR_NOMEM:
    return MPI_ERR_NO_MEM;
  case MPIAR_ERR_COMM:
    return MPI_ERR_COMM;
  case MPIAR_ERR_IO:
    return MPI_ERR_IO;
  case MPIAR_ERR_INTERNAL:
    return MPI_ERR_INTERN;
  case MPIAR_ERR_MPI:
  case MPIAR_ERR_MPI_STATE:
  case MPIAR_ERR_UNKNOWN_ALGORITHM:
  case MPIAR_ERR_TIMEOUT:
  case MPIAR_ERR_COMM_BROKEN:
  case MPIAR_ERR_ENV:
  case MPIAR_ERR_ISA_UNAVAILABLE:
  case MPIAR_ERR_CORRUPT:
    return MPI_ERR_OTHER;
  default:
    return MPI_ERR_UNKNOWN;
  }
}
