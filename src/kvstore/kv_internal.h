/*
 * Internals of the kvstore shared by its files: the key entries and their registry, the store,
 * and the checkpoint file format (which needs no MPI, so that its tests run without mpiexec).
 */
#ifndef MPIAR_KV_INTERNAL_H
#define MPIAR_KV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "mpiar_kv.h"

/* One registered key: its identity, fixed dtype and count, the stored value and SGD state. */
typedef struct mpiar__kv_entry {
  char *name;    /* string key (owned), or NULL for an integer key */
  int64_t id;    /* integer key when name is NULL */
  uint64_t hash; /* mpiar__kv_key_hash() of the key */
  mpiar_dtype_t dtype;
  size_t count;
  size_t bytes;   /* count * element size */
  void *value;    /* the store's copy of the key's value (bytes), NULL when bytes == 0 */
  void *momentum; /* SGD momentum (bytes), NULL until the first step with momentum */
} mpiar__kv_entry_t;

/* Key registry: entries in registration order plus an open-addressing index on the key hash. */
typedef struct mpiar__kv_table {
  mpiar__kv_entry_t **items; /* registration order, the same on every worker */
  size_t n, cap;
  uint32_t *slots; /* 0 = empty, else index + 1 into items; size nslots (power of 2) */
  size_t nslots;
} mpiar__kv_table_t;

/* @return a 64-bit hash of the key's kind and name or number. */
uint64_t mpiar__kv_key_hash(mpiar_kv_key_t key);

/* @return 1 if the entry is the key, 0 otherwise. */
int mpiar__kv_entry_is(const mpiar__kv_entry_t *e, mpiar_kv_key_t key, uint64_t hash);

/* Format a key for messages: 7 or "weight" (quoted, shortened to fit). @return buf. */
const char *mpiar__kv_key_str(mpiar_kv_key_t key, char *buf, size_t size);

/* Find a key. @return the entry or NULL. */
mpiar__kv_entry_t *mpiar__kv_table_find(const mpiar__kv_table_t *t, mpiar_kv_key_t key);

/* Make room for one more entry (so that a later insert cannot fail). @return 0 or MPIAR_ERR_NOMEM.
 */
int mpiar__kv_table_reserve(mpiar__kv_table_t *t);

/* Insert an entry after mpiar__kv_table_reserve() succeeded; cannot fail. */
void mpiar__kv_table_insert(mpiar__kv_table_t *t, mpiar__kv_entry_t *e);

/* Free every entry and the table's arrays. */
void mpiar__kv_table_free(mpiar__kv_table_t *t);

/* Allocate an entry for a key (name copied, value and momentum not allocated). NULL if no memory.
 */
mpiar__kv_entry_t *mpiar__kv_entry_new(mpiar_kv_key_t key, mpiar_dtype_t dtype, size_t count);

/* Free an entry, its name, value and momentum. NULL is accepted. */
void mpiar__kv_entry_free(mpiar__kv_entry_t *e);

/*
 * Checkpoint file format, version 1. All header fields are little-endian; values are the
 * elements' bytes as held in memory (little-endian on the x86-64 hosts mpiar targets).
 *
 *   header, 32 bytes: magic "MPIARKV\0" | u32 version (1) | u32 flags (0) | u64 number of keys |
 *                     u64 size of the whole file in bytes
 *   one record per key, 40 bytes + name: u8 kind (0 integer, 1 string) | u8 dtype | u8 has
 *                     momentum (0/1) | u8 reserved (0) | u32 name length | i64 integer key |
 *                     u64 element count | u32 CRC32C of the value | u32 CRC32C of the momentum
 *                     (0 when absent) | name bytes (no terminating zero)
 *   data:             for each record in order, its value bytes, then its momentum bytes if any
 *   trailer, 4 bytes: u32 CRC32C of every byte before it
 */
#define MPIAR__CKPT_MAGIC "MPIARKV"
#define MPIAR__CKPT_VERSION 1u
#define MPIAR__CKPT_HEADER_BYTES 32u
#define MPIAR__CKPT_RECORD_BYTES 40u
#define MPIAR__CKPT_TRAILER_BYTES 4u

/*
 * The temporary file of a save is path + this suffix, locked exclusively (flock) while the save
 * runs. A save interrupted by the death of its process leaves it unlocked, and the next save to
 * the same path reuses and removes it; a save that finds it locked fails with MPIAR_ERR_IO.
 */
#define MPIAR__CKPT_TMP_SUFFIX ".tmp"

/*
 * Write the entries to @p path atomically: the locked temporary file above, fsync, rename,
 * fsync of the directory. On failure the file under @p path is untouched and the temporary file
 * is removed.
 */
int mpiar__ckpt_write(const char *path, mpiar__kv_entry_t *const *entries, size_t n);

/*
 * Read and verify a checkpoint file completely. On success *out holds a new array of *n entries
 * (with value and, where saved, momentum allocated) to free with mpiar__ckpt_free(). On failure
 * nothing is returned: MPIAR_ERR_IO (open or read failed), MPIAR_ERR_CORRUPT (anything else
 * wrong with the file) or MPIAR_ERR_NOMEM, with a detail.
 */
int mpiar__ckpt_read(const char *path, mpiar__kv_entry_t ***out, size_t *n);

/* Free the result of mpiar__ckpt_read(). */
void mpiar__ckpt_free(mpiar__kv_entry_t **entries, size_t n);

/*
 * Largest piece of one allreduce of the store (4 MiB); longer tensors and fusion buffers are
 * reduced piece by piece. A variable so that tests can make pieces of a few elements.
 */
extern size_t mpiar__kv_chunk_bytes;

struct mpiar__kv_async; /* async.c */

/* Node-shared fusion buffers of the asynchronous path in use at once (a ring, async.c): a bucketed
 * backward pass keeps several in flight, and each costs a window's creation once. */
#define MPIAR__KV_SHARED_RING 4

/* A fusion buffer in mpiar_alloc memory of the store's communicator (shared.c). */
typedef struct mpiar__kv_shbuf {
  unsigned char *buf; /* NULL until the first fused reduction that uses it */
  size_t cap;
} mpiar__kv_shbuf_t;

/* The store. */
struct mpiar_kv {
  MPI_Comm comm; /* the store's own duplicate of the user's communicator */
  int rank, size;
  size_t fusion_bytes; /* 0 = no fusion */
  mpiar_op_t op;       /* pushpull's reduction: MPIAR_SUM or MPIAR_AVG */
  char *algorithm;     /* owned copy of the algorithm option, or NULL */
  int verify;
  mpiar_options_t ar;       /* options of every allreduce the store runs */
  mpiar_options_t ar_float; /* options of floating-point data reductions (see kv_create) */
  mpiar_options_t bc;       /* options of every broadcast (no algorithm name) */
  mpiar__kv_table_t table;
  mpiar_kv_optimizer_t opt;
  unsigned char *fusion; /* fusion buffer, grown up to fusion_bytes and kept */
  size_t fusion_cap;
  mpiar__kv_entry_t **batch; /* entries resolved for the current batch call */
  size_t *pack;              /* indices of the tensors in the fusion buffer being filled */
  size_t batch_cap;
  struct mpiar__kv_async *async; /* asynchronous pushpulls (NULL until the first) */
  int shared; /* fusion buffers in node-shared memory (shared.c): 1, 0, -1 not asked yet */
  mpiar__kv_shbuf_t shm_fusion; /* the blocking batches' fusion buffer when shared */
  size_t shared_allocs;         /* node-shared allocations made so far (tests) */
};

/* Calls, hashed into every agreement so that two different calls never agree. */
typedef enum mpiar__kv_call {
  MPIAR__KV_CREATE = 1,
  MPIAR__KV_INIT,
  MPIAR__KV_PUSHPULL,
  MPIAR__KV_PUSHPULL_BATCH,
  MPIAR__KV_BROADCAST,
  MPIAR__KV_STEP,
  MPIAR__KV_STEP_BATCH,
  MPIAR__KV_OPTIMIZER,
  MPIAR__KV_SAVE,
  MPIAR__KV_SAVE_DONE,
  MPIAR__KV_LOAD,
  MPIAR__KV_LOAD_ALLOC,
  MPIAR__KV_PUSHPULL_ASYNC
} mpiar__kv_call_t;

/* Fold a 64-bit word into a running hash. */
uint64_t mpiar__kv_hash_add(uint64_t h, uint64_t v);

/* Hash of the store's keys, dtypes and counts in registration order. */
uint64_t mpiar__kv_layout_hash(const mpiar_kv_t *kv);

/*
 * The metadata agreement: one allreduce (MAX over three 64-bit words) of this worker's local
 * result @p local_rc and the hash of its call. Every worker learns whether any worker failed its
 * local checks and whether all hashes are equal, without any data moving.
 *
 * @return MPIAR_SUCCESS when every worker passed and the hashes agree. Otherwise an error on
 * every worker: @p local_rc (with its detail kept) on a worker that failed, and on the others
 * MPIAR_ERR_MISMATCH naming the failed worker, or MPIAR_ERR_MISMATCH for differing hashes. With
 * @p share_root set and worker 0 the only failing worker (save and load, where only worker 0
 * touches the file), every worker returns worker 0's code and detail.
 * @p what names the call for messages ("pushpull of key 7").
 */
int mpiar__kv_agree(mpiar_kv_t *kv, int local_rc, uint64_t hash, const char *what, int share_root);

/* Helpers of kvstore.c shared with async.c. */
#define MPIAR__KV_WHAT_MAX 160

/* Look a key up (form checked); MPIAR_ERR_KEY_UNKNOWN names it and this worker. */
int mpiar__kv_find_key(const mpiar_kv_t *kv, mpiar_kv_key_t key, const char *call,
                       mpiar__kv_entry_t **e);

/* Fold a key's identity, dtype and count into a call hash. */
uint64_t mpiar__kv_entry_hash(uint64_t h, const mpiar__kv_entry_t *e);

/* Local checks of one tensor of a pushpull or step. */
int mpiar__kv_check_tensor(const mpiar_kv_t *kv, const mpiar__kv_entry_t *e, const void *in,
                           const void *out, mpiar_op_t op, const char *what);

/* Options of a data reduction of @p dtype (floating data may force a position-free algorithm). */
const mpiar_options_t *mpiar__kv_data_options(const mpiar_kv_t *kv, mpiar_dtype_t dtype);

/* Whether reductions of @p dtype are cut into pieces of mpiar__kv_chunk_bytes. */
int mpiar__kv_cut(const mpiar_kv_t *kv, mpiar_dtype_t dtype);

/* Tensors queued and not yet started (tests). */
size_t mpiar__kv_async_queued(const mpiar_kv_t *kv);

/* The call-order numbers of the last (at most @p max, 64) started tensors, in start order. */
size_t mpiar__kv_async_started(const mpiar_kv_t *kv, uint64_t *orders, size_t max);

/* Complete and release every asynchronous pushpull (destroy); frees the async state and its
 * node-shared buffers (collective). */
int mpiar__kv_async_finish(mpiar_kv_t *kv);

/*
 * Node-shared fusion buffers (shared.c). decide: at creation, after the options agreement;
 * sets kv->shared (local). fit: collective, at a point every worker reaches with the same
 * @p need; makes @p s hold at least @p need bytes of node-shared memory. @return 1 when it does,
 * 0 when the store uses ordinary memory (now or from now on: a failed allocation on any worker
 * turns sharing off on every worker), or an error of the agreement (a broken communicator).
 * release: collective (destroy).
 */
void mpiar__kv_shared_decide(mpiar_kv_t *kv, int enabled);
int mpiar__kv_shared_fit(mpiar_kv_t *kv, mpiar__kv_shbuf_t *s, size_t need);
void mpiar__kv_shared_release(mpiar__kv_shbuf_t *s);

/* Whether the store puts its fusion buffers in node-shared memory, and (in *allocs, if not NULL)
 * how many node-shared allocations it has made (tests). */
int mpiar__kv_shared_state(const mpiar_kv_t *kv, size_t *allocs);

#endif /* MPIAR_KV_INTERNAL_H */
