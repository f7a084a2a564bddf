/**
 * @file mpiar_kv.h
 * @brief The allreduce-mode key-value store for data-parallel training.
 *
 * Every worker (rank of the store's communicator) holds every parameter. Gradients are summed or
 * averaged with mpiar's allreduce (`pushpull`), parameters are made identical with mpiar's
 * broadcast (`init`, `broadcast`), and the parameter-server calls `push` and `pull` do not exist
 * (they return MPIAR_ERR_UNSUPPORTED). Small tensors of one call are packed into fusion buffers
 * and reduced together; an SGD optimizer and checkpoints to a file complete the store.
 *
 * Collective calls: every call that moves data (create, init, pushpull, pushpull_batch, step,
 * step_batch, broadcast, set_optimizer, barrier, save, load, destroy) is collective over the
 * store's communicator: every worker calls it, in the same order, with the same keys. Before any
 * data moves, each such call runs a small metadata agreement (one allreduce of 24 bytes) that
 * checks the call, its keys, their dtypes and counts and every worker's local argument checks, so
 * a key initialised on some workers only, or differing arguments, give an error on every worker
 * instead of a hang or mismatched messages. `verify = 0` in the options skips the agreement for
 * pushpull, pushpull_batch, step and step_batch.
 *
 * Errors: every function returns MPIAR_SUCCESS (0) or a negative MPIAR_ERR_* code and sets the
 * detail returned by mpiar_last_error(). When a collective call fails its agreement, every worker
 * returns an error: the worker whose arguments were wrong returns the specific code (for example
 * MPIAR_ERR_KEY_UNKNOWN), the others MPIAR_ERR_MISMATCH naming that worker. A store is not
 * thread-safe: use one store from one thread at a time.
 */
#ifndef MPIAR_KV_H
#define MPIAR_KV_H

#include <stddef.h>
#include <stdint.h>

#include "mpiar.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle of a key-value store. */
typedef struct mpiar_kv mpiar_kv_t;

/**
 * A key: an integer or a string, as in MXNet. A key with a non-NULL @c name is a string key and
 * @c id is ignored; otherwise it is the integer key @c id. The integer 3 and the string "3" are
 * different keys. Build keys with MPIAR_KV_INT() and MPIAR_KV_STR().
 */
typedef struct mpiar_kv_key {
  /** The string key (copied by init; at most MPIAR_KV_KEY_MAX bytes), or NULL for an integer key.
   */
  const char *name;
  /** The integer key when @c name is NULL. */
  int64_t id;
} mpiar_kv_key_t;

/** Longest string key in bytes (without the terminating zero). */
#define MPIAR_KV_KEY_MAX 1024

/** The integer key @p i (a function, for C++ and other languages). */
static inline mpiar_kv_key_t mpiar_kv_int(int64_t i) {
  mpiar_kv_key_t k;
  k.name = NULL;
  k.id = i;
  return k;
}

/** The string key @p s, a NUL-terminated string (a function, for C++ and other languages). */
static inline mpiar_kv_key_t mpiar_kv_str(const char *s) {
  mpiar_kv_key_t k;
  k.name = s;
  k.id = 0;
  return k;
}

#ifdef __cplusplus
#define MPIAR_KV_INT(i) mpiar_kv_int((int64_t)(i))
#define MPIAR_KV_STR(s) mpiar_kv_str(s)
#else
/** The integer key @p i. */
#define MPIAR_KV_INT(i) ((mpiar_kv_key_t){NULL, (int64_t)(i)})
/** The string key @p s (a NUL-terminated string). */
#define MPIAR_KV_STR(s) ((mpiar_kv_key_t){(s), 0})
#endif

/** Use the threshold from MPIAR_FUSION_BYTES, or MPIAR_KV_FUSION_DEFAULT when it is unset. */
#define MPIAR_KV_FUSION_AUTO ((size_t)-1)
/** Default fusion threshold: 64 MiB. */
#define MPIAR_KV_FUSION_DEFAULT ((size_t)64 << 20)

/**
 * Options of a store. Always initialise with MPIAR_KV_OPTIONS_INIT so that fields added later
 * get their defaults. Every worker must pass the same options (create checks this).
 */
typedef struct mpiar_kv_options {
  /** sizeof(mpiar_kv_options_t), set by MPIAR_KV_OPTIONS_INIT (see mpiar_options_t). */
  size_t struct_size;
  /**
   * Fusion threshold in bytes: pushpull_batch and step_batch pack tensors into buffers of at
   * most this many bytes and reduce each buffer with one allreduce; a larger tensor goes alone.
   * 0 disables fusion. MPIAR_KV_FUSION_AUTO (the default): the environment variable
   * MPIAR_FUSION_BYTES (e.g. "16M"), else 64 MiB.
   */
  size_t fusion_bytes;
  /** Reduction of pushpull: MPIAR_SUM (default) or MPIAR_AVG (floating dtypes only). */
  mpiar_op_t op;
  /**
   * Allreduce algorithm of every reduction: a registry name, "auto" (mpiar's selection), or NULL
   * (the default: mpiar's selection, except rabenseifner for floating data on three or more
   * workers, so that fused and per-key results agree bit for bit).
   */
  const char *algorithm;
  /**
   * Deadline of each collective in milliseconds, as mpiar_options_t.timeout_ms (it also bounds
   * mpiar_kv_create's wait for the other workers).
   */
  int timeout_ms;
  /**
   * 1 (default): pushpull, pushpull_batch, step and step_batch run the metadata agreement before
   * moving data. 0: they skip it (one small allreduce less per call); the caller then promises
   * identical calls on every worker, and a mismatch may hang or fail inside the allreduce.
   */
  int verify;
  /**
   * Reproducible reductions (docs/kvstore.md): 1 on, 0 off, -1 (default) = MPIAR_REPRODUCIBLE.
   * On, every element is the canonical combination of the workers' values whatever the
   * algorithm, fusion, piece size or path (pushpull, batch, async), so the store no longer needs
   * to force Rabenseifner for fused and per-key results to agree.
   */
  int reproducible;
} mpiar_kv_options_t;

/** Default options: automatic fusion threshold, sum, automatic algorithm, verified calls. */
#define MPIAR_KV_OPTIONS_INIT \
  { sizeof(mpiar_kv_options_t), MPIAR_KV_FUSION_AUTO, MPIAR_SUM, NULL, 0, 1, -1 }

/** The default options, as a function. */
static inline mpiar_kv_options_t mpiar_kv_options_init(void) {
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  return o;
}

/**
 * Create a store over the workers of @p comm (collective over @p comm). The store uses its own
 * duplicate of @p comm, so @p comm may be freed while the store lives.
 *
 * @param opts options, or NULL for MPIAR_KV_OPTIONS_INIT
 * @param kv   receives the new store
 * @return MPIAR_SUCCESS; MPIAR_ERR_INVALID_ARG (NULL @p kv, an op other than SUM/AVG);
 *         MPIAR_ERR_ENV (malformed MPIAR_FUSION_BYTES); MPIAR_ERR_UNKNOWN_ALGORITHM;
 *         MPIAR_ERR_COMM; MPIAR_ERR_MPI_STATE; MPIAR_ERR_MISMATCH (options differ between workers);
 *         MPIAR_ERR_NOMEM; MPIAR_ERR_MPI.
 */
int mpiar_kv_create(MPI_Comm comm, const mpiar_kv_options_t *opts, mpiar_kv_t **kv);

/**
 * Destroy a store and free its keys, values and optimizer state (collective: it frees the
 * store's communicator). NULL is accepted and does nothing.
 */
int mpiar_kv_destroy(mpiar_kv_t *kv);

/** @return in *rank the calling worker's rank in the store (0 .. num_workers - 1). */
int mpiar_kv_rank(const mpiar_kv_t *kv, int *rank);

/** @return in *n the number of workers of the store. */
int mpiar_kv_num_workers(const mpiar_kv_t *kv, int *n);

/** Wait until every worker has called barrier (made of one mpiar allreduce of one element). */
int mpiar_kv_barrier(mpiar_kv_t *kv);

/** @return in *bytes the fusion threshold the store uses (after MPIAR_FUSION_BYTES). */
int mpiar_kv_fusion_bytes(const mpiar_kv_t *kv, size_t *bytes);

/**
 * Register @p key with a fixed dtype and element count on every worker and make worker 0's value
 * every worker's value: the store keeps a copy of worker 0's @p value, and on return @p value
 * holds it on every worker. @p value may be NULL only when @p count is 0.
 *
 * @return MPIAR_SUCCESS; MPIAR_ERR_KEY_EXISTS (the key is already registered);
 *         MPIAR_ERR_MISMATCH (the key, dtype or count differ between workers, or another worker
 *         failed its checks); MPIAR_ERR_NULL_BUFFER; MPIAR_ERR_INVALID_ARG (bad dtype, NULL
 *         store, a string key longer than MPIAR_KV_KEY_MAX); MPIAR_ERR_NOMEM; or an allreduce
 *         or broadcast error.
 */
int mpiar_kv_init(mpiar_kv_t *kv, mpiar_kv_key_t key, mpiar_dtype_t dtype, size_t count,
                  void *value);

/**
 * Look up a registered key locally (no communication). Each output may be NULL.
 * @param data receives a read-only pointer to the store's value (valid until the key's value is
 *             replaced by broadcast, step or load, or the store is destroyed)
 * @return MPIAR_SUCCESS or MPIAR_ERR_KEY_UNKNOWN.
 */
int mpiar_kv_lookup(const mpiar_kv_t *kv, mpiar_kv_key_t key, mpiar_dtype_t *dtype, size_t *count,
                    const void **data);

/**
 * out = the sum (or average, see mpiar_kv_options_t.op) of every worker's @p in, over the key's
 * registered dtype and count. @p in may equal @p out or be MPIAR_IN_PLACE (then @p out holds the
 * input). The store's value of the key is not changed.
 *
 * @return MPIAR_SUCCESS; MPIAR_ERR_KEY_UNKNOWN; MPIAR_ERR_NULL_BUFFER; MPIAR_ERR_BAD_DTYPE_OP
 *         (average of an integer key); MPIAR_ERR_MISMATCH (another worker called with another
 *         key or failed its checks); or an allreduce error.
 */
int mpiar_kv_pushpull(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *in, void *out);

/**
 * pushpull of @p n keys in one call: tensors of one dtype are packed, in call order, into fusion
 * buffers of at most the fusion threshold, and each buffer is reduced with one allreduce; a
 * tensor larger than the threshold goes alone. The order is the same on every worker because
 * the call is (verify = 1 checks the key sequence). Each result equals that of
 * mpiar_kv_pushpull() on the key bit for bit: the store reduces floating data with an algorithm
 * that sums every element in an order independent of its position in the buffer (on one or two
 * workers every algorithm does; on more, the store uses rabenseifner unless the options name an
 * algorithm; with "ring" or "auto" named, floating results may then differ from per-key
 * pushpull in the last bits).
 * ins[i] may equal outs[i] or be MPIAR_IN_PLACE. A key may appear more than once.
 *
 * @return as mpiar_kv_pushpull(); MPIAR_ERR_NULL_BUFFER also for NULL arrays with n > 0.
 */
int mpiar_kv_pushpull_batch(mpiar_kv_t *kv, size_t n, const mpiar_kv_key_t *keys,
                            const void *const *ins, void *const *outs);

/**
 * Asynchronous pushpull, for overlapping gradient reduction with the backward pass (the MXNet
 * trainer's `pushpull(idx, grad, priority=-i)`): out = the sum (or average) of every worker's
 * @p in for @p key, as mpiar_kv_pushpull(), started in the background.
 *
 * The call queues the tensor and returns. Queued tensors start when the queue holds a fusion
 * buffer's worth (the threshold of mpiar_kv_fusion_bytes()), when a tensor larger than the
 * threshold arrives, at mpiar_kv_wait_all(), and at the first test or wait on a queued request.
 * Every start point therefore depends only on the sequence of calls, which is the same on every
 * worker: async pushpulls, and the first test or wait on each of their requests, are collective
 * and must come in the same order on every worker. When several tensors start together, higher
 * @p priority starts first (ties in call order); tensors of one dtype that fit are packed into
 * one fusion buffer, reduced with one nonblocking allreduce, and copied out when it completes.
 * Results equal mpiar_kv_pushpull() of each key, bit for bit, as for pushpull_batch.
 *
 * With verify = 1, each start runs the metadata agreement over the started tensors' keys.
 * @p in and @p out must not be touched until the request completes.
 *
 * @param req receives a request completed by mpiar_test() / mpiar_wait() and friends, or NULL
 *            (the operation is then completed by mpiar_kv_wait_all())
 * @return MPIAR_SUCCESS, or an error of the local checks (no request is made then); errors of
 *         the reduction are returned by the request's completion.
 */
int mpiar_kv_pushpull_async(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *in, void *out,
                            int priority, mpiar_request_t *req);

/**
 * Start every queued asynchronous pushpull and wait until all the store's asynchronous pushpulls
 * have finished (collective). Their requests complete at once afterwards (test/wait release
 * them). @return MPIAR_SUCCESS or the first error of those operations.
 */
int mpiar_kv_wait_all(mpiar_kv_t *kv);

/**
 * Broadcast: every worker's @p value and the store's value of @p key become @p root's @p value.
 * @return MPIAR_SUCCESS; MPIAR_ERR_KEY_UNKNOWN; MPIAR_ERR_NULL_BUFFER; MPIAR_ERR_INVALID_ARG
 *         (root out of range); MPIAR_ERR_MISMATCH; or a broadcast error.
 */
int mpiar_kv_broadcast(mpiar_kv_t *kv, mpiar_kv_key_t key, void *value, int root);

/**
 * The parameter-server push does not exist in the allreduce kvstore.
 * @return MPIAR_ERR_UNSUPPORTED, detail "the allreduce kvstore has no push/pull; use pushpull".
 */
int mpiar_kv_push(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *value);

/**
 * The parameter-server pull does not exist in the allreduce kvstore.
 * @return MPIAR_ERR_UNSUPPORTED, detail "the allreduce kvstore has no push/pull; use pushpull".
 */
int mpiar_kv_pull(mpiar_kv_t *kv, mpiar_kv_key_t key, void *value);

/** Optimizers the store can apply in mpiar_kv_step(). */
typedef enum mpiar_kv_optimizer_kind {
  MPIAR_KV_OPTIMIZER_NONE = 0, /**< No optimizer: step() fails with MPIAR_ERR_UNSUPPORTED. */
  MPIAR_KV_OPTIMIZER_SGD       /**< Stochastic gradient descent with momentum and weight decay. */
} mpiar_kv_optimizer_kind_t;

/**
 * An optimizer. SGD updates, for each element, with g the gradient averaged over the workers:
 *   g' = g + weight_decay * w
 *   momentum == 0: w = w - learning_rate * g'
 *   momentum != 0: m = momentum * m - learning_rate * g';  w = w + m   (m starts at 0)
 * computed in the key's precision (float32 or float64 keys).
 */
typedef struct mpiar_kv_optimizer {
  mpiar_kv_optimizer_kind_t kind; /**< MPIAR_KV_OPTIMIZER_SGD */
  double learning_rate;           /**< > 0 */
  double momentum;                /**< in [0, 1) */
  double weight_decay;            /**< >= 0 */
} mpiar_kv_optimizer_t;

/** An SGD optimizer (a function, for C++ and other languages). */
static inline mpiar_kv_optimizer_t mpiar_kv_sgd(double lr, double momentum, double wd) {
  mpiar_kv_optimizer_t o;
  o.kind = MPIAR_KV_OPTIMIZER_SGD;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.weight_decay = wd;
  return o;
}

#ifdef __cplusplus
#define MPIAR_KV_SGD(lr, momentum, wd) mpiar_kv_sgd((lr), (momentum), (wd))
#else
/** An SGD optimizer with the given learning rate, momentum and weight decay (C: an lvalue, so
 * `&MPIAR_KV_SGD(...)` works; in C++ use mpiar_kv_sgd() and a variable). */
#define MPIAR_KV_SGD(lr, momentum, wd) \
  ((mpiar_kv_optimizer_t){MPIAR_KV_OPTIMIZER_SGD, (lr), (momentum), (wd)})
#endif

/**
 * Set the optimizer of the store (collective; every worker must pass the same values, checked).
 * Momentum state already accumulated is kept.
 * @return MPIAR_SUCCESS; MPIAR_ERR_INVALID_ARG (unknown kind, learning rate <= 0, momentum
 *         outside [0, 1), negative weight decay, non-finite values); MPIAR_ERR_MISMATCH.
 */
int mpiar_kv_set_optimizer(mpiar_kv_t *kv, const mpiar_kv_optimizer_t *opt);

/**
 * Average @p grad over the workers (on return @p grad holds the average), then apply the
 * optimizer to the store's value of @p key locally. The values stay bitwise identical on every
 * worker. Read the new value with mpiar_kv_lookup().
 * @return MPIAR_SUCCESS; MPIAR_ERR_UNSUPPORTED (no optimizer set, or a key that is not float32
 *         or float64); the errors of mpiar_kv_pushpull().
 */
int mpiar_kv_step(mpiar_kv_t *kv, mpiar_kv_key_t key, void *grad);

/**
 * Apply the optimizer to the store's value of @p key with a gradient that is already averaged
 * over the workers (for example by mpiar_kv_pushpull_async() on a store whose op is MPIAR_AVG).
 * Local: no communication. mpiar_kv_step() is pushpull (average) followed by this update, so the
 * two paths give the same bits.
 * @return MPIAR_SUCCESS; MPIAR_ERR_KEY_UNKNOWN; MPIAR_ERR_NULL_BUFFER; MPIAR_ERR_UNSUPPORTED (no
 *         optimizer, or a key that is not float32 or float64); MPIAR_ERR_NOMEM.
 */
int mpiar_kv_update(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *grad);

/** mpiar_kv_step() of @p n keys, with the gradients reduced as in mpiar_kv_pushpull_batch(). */
int mpiar_kv_step_batch(mpiar_kv_t *kv, size_t n, const mpiar_kv_key_t *keys, void *const *grads);

/**
 * Save every key (name, dtype, count, value, and SGD momentum state where there is one) to
 * @p path (collective; worker 0 writes). The file is written under a temporary name in the
 * same directory, flushed to disk, renamed to @p path and the directory flushed, so @p path
 * never names a half-written file. The format (docs/kvstore.md) has a magic, a version, each key's
 * name, dtype and count, a CRC32C of each key's data and a CRC32C over the whole file.
 * @return MPIAR_SUCCESS; MPIAR_ERR_IO (with the system's reason); MPIAR_ERR_NULL_BUFFER (NULL
 *         path); MPIAR_ERR_MISMATCH (the workers' stores differ); MPIAR_ERR_NOMEM.
 */
int mpiar_kv_save(mpiar_kv_t *kv, const char *path);

/**
 * Load a file written by mpiar_kv_save() (collective; worker 0 reads and verifies it, then
 * broadcasts the values). The file must hold exactly the store's keys with the same dtypes and
 * counts. On any error the store is left unchanged on every worker.
 * @return MPIAR_SUCCESS; MPIAR_ERR_IO (missing or unreadable file); MPIAR_ERR_CORRUPT
 *         (truncated, bad magic or version, a CRC mismatch, a malformed header);
 *         MPIAR_ERR_MISMATCH (a key missing, extra, or of another dtype or count);
 *         MPIAR_ERR_NULL_BUFFER; MPIAR_ERR_NOMEM; or a broadcast error.
 */
int mpiar_kv_load(mpiar_kv_t *kv, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* MPIAR_KV_H */
