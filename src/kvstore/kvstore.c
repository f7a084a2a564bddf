/*
 * The allreduce-mode kvstore: key registration with broadcast, pushpull with tensor fusion, the
 * SGD optimizer, and the metadata agreement that turns mismatched calls into errors.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "base/common.h"
#include "base/settings.h"
#include "core/comm_check.h"
#include "core/interrupt.h"
#include "kvstore/kv_internal.h"

/* Room for a call and a key in messages, e.g. `pushpull of key "layer1.weight"`. */
#define KV_WHAT_MAX MPIAR__KV_WHAT_MAX

static const char *const no_push_pull = "the allreduce kvstore has no push/pull; use pushpull";

uint64_t mpiar__kv_hash_add(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

uint64_t mpiar__kv_layout_hash(const mpiar_kv_t *kv) {
  uint64_t h = mpiar__kv_hash_add(0, kv->table.n);
  for (size_t i = 0; i < kv->table.n; i++) {
    const mpiar__kv_entry_t *e = kv->table.items[i];
    h = mpiar__kv_hash_add(h, e->hash);
    h = mpiar__kv_hash_add(h, (uint64_t)e->dtype);
    h = mpiar__kv_hash_add(h, e->count);
  }
  return h;
}

/*
 * The agreement costs one allreduce of 24 bytes, a latency-bound message (a few microseconds on
 * one node), paid once per call and once per batch, not per tensor. The three words are reduced
 * with MAX:
 *   w[0] = (rank + 1) << 8 | -code on a worker whose local checks failed, else 0: the highest
 *          failing worker and its code;
 *   w[1] = hash, w[2] = ~hash: MAX of both gives the largest and (inverted) the smallest hash,
 *          which are equal exactly when every worker made the same call.
 * A failing worker contributes 0 to w[1] and w[2], so it never disturbs the hash check.
 */
int mpiar__kv_agree(mpiar_kv_t *kv, int local_rc, uint64_t hash, const char *what, int share_root) {
  char saved[512];
  saved[0] = '\0';
  if (local_rc != 0) {
    /* mpiar's calls clear the thread's detail on entry; keep ours across the allreduce. */
    snprintf(saved, sizeof saved, "%s", mpiar_last_error());
  }
  uint64_t w[3] = {0, 0, 0};
  if (local_rc != 0) {
    w[0] = ((uint64_t)(kv->rank + 1) << 8) | (uint64_t)(-local_rc & 0xFF);
  } else {
    w[1] = hash;
    w[2] = ~hash;
  }
  int rc = mpiar_allreduce_ex(MPIAR_IN_PLACE, w, 3, MPIAR_UINT64, MPIAR_MAX, kv->comm, &kv->ar);
  if (rc != 0) {
    return rc;
  }
  if (w[0] != 0) {
    int failed = (int)(w[0] >> 8) - 1;
    int code = -(int)(w[0] & 0xFF);
    if (share_root && failed == 0) {
      /* Only worker 0 failed: it sends its detail so that every worker reports the same. */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", saved);
      rc = mpiar_bcast_ex(msg, sizeof msg, MPIAR_UINT8, 0, kv->comm, &kv->bc);
      if (rc != 0) {
        return rc;
      }
      msg[sizeof msg - 1] = '\0';
      if (kv->rank == 0) {
        return mpiar__error(local_rc, "%s", saved);
      }
      return mpiar__error(code, "worker 0: %s", msg);
    }
    if (local_rc != 0) {
      return mpiar__error(local_rc, "%s", saved);
    }
    return mpiar__error(MPIAR_ERR_MISMATCH,
                        "%s: worker %d failed its checks with %s (see that worker's error); no "
                        "data moved",
                        what, failed, mpiar_err_name(code));
  }
  if (w[1] != ~w[2]) {
    return mpiar__error(MPIAR_ERR_MISMATCH,
                        "%s does not match on every worker (another call, key, dtype, count or "
                        "option on some worker); no data moved",
                        what);
  }
  return MPIAR_SUCCESS;
}

/*
 * The store's own duplicate of @p comm, made with MPI_Comm_idup so that the deadline (the
 * options', else MPIAR_TIMEOUT_MS) bounds the wait for the other workers.
 */
static int duplicate(MPI_Comm comm, int timeout_ms, MPI_Comm *out) {
  /* Malformed settings are this worker's local error, shared in the options agreement: the
   * duplicate is made all the same, so that no worker waits for this one. */
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  int rc;
  long ms = mpiar__deadline_ms(timeout_ms, set);
  *out = MPI_COMM_NULL;
  if ((rc = mpiar__check_comm(comm)) != MPIAR_SUCCESS) {
    return mpiar__error(rc, "mpiar_kv_create: %s", mpiar_last_error());
  }
  /* On a timeout or an interruption the duplication is left to MPI (it forbids freeing the
   * request of a nonblocking collective). */
  MPI_Request q = MPI_REQUEST_NULL;
  switch (mpiar__comm_idup_wait(comm, out, &q, ms > 0 ? MPI_Wtime() + (double)ms * 1e-3 : 0, 0)) {
  case MPIAR__DUP_DONE:
    return MPIAR_SUCCESS;
  case MPIAR__DUP_TIMEOUT:
    *out = MPI_COMM_NULL;
    return mpiar__error(MPIAR_ERR_TIMEOUT,
                        "mpiar_kv_create: timed out after %ld ms waiting for every worker", ms);
  case MPIAR__DUP_INTERRUPTED:
    *out = MPI_COMM_NULL;
    return mpiar__error(MPIAR_ERR_INTERRUPTED,
                        "mpiar_kv_create: the wait for every worker was interrupted by the "
                        "calling thread's interrupt check (mpiar_set_interrupt)");
  default:
    *out = MPI_COMM_NULL;
    return mpiar__error(MPIAR_ERR_MPI, "mpiar_kv_create: MPI_Comm_idup failed");
  }
}

static int check_kv(const mpiar_kv_t *kv) {
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "kvstore handle is NULL");
  }
  return MPIAR_SUCCESS;
}

static int known_algorithm(const char *name) {
  /* Registry names and parameterised ones (NAME/k=N), as the allreduce takes them. */
  return mpiar_algorithm_check(name) == MPIAR_SUCCESS;
}

static uint64_t hash_string(uint64_t h, const char *s) {
  if (s == NULL) {
    return mpiar__kv_hash_add(h, 0);
  }
  mpiar_kv_key_t k = {s, 0};
  return mpiar__kv_hash_add(h, mpiar__kv_key_hash(k));
}

static void kv_free(mpiar_kv_t *kv) {
  mpiar__kv_table_free(&kv->table);
  free(kv->algorithm);
  free(kv->fusion);
  free(kv->batch);
  free(kv->pack);
  free(kv);
}

int mpiar_kv_create(MPI_Comm comm, const mpiar_kv_options_t *opts, mpiar_kv_t **out) {
  mpiar__error_clear();
  int rc = MPIAR_SUCCESS;
  mpiar_kv_t *kv = NULL;
  int flag = 0;
  if (out == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_kv_create: the output pointer is NULL");
  }
  *out = NULL;
  MPI_Initialized(&flag);
  if (!flag) {
    return mpiar__error(MPIAR_ERR_MPI_STATE, "mpiar_kv_create: MPI is not initialized");
  }
  MPI_Finalized(&flag);
  if (flag) {
    return mpiar__error(MPIAR_ERR_MPI_STATE, "mpiar_kv_create: MPI is already finalized");
  }
  if (comm == MPI_COMM_NULL) {
    return mpiar__error(MPIAR_ERR_COMM, "mpiar_kv_create: the communicator is MPI_COMM_NULL");
  }
  mpiar_kv_options_t o = MPIAR_KV_OPTIONS_INIT;
  if (opts != NULL) {
    size_t need = offsetof(mpiar_kv_options_t, verify) + sizeof(int);
    if (opts->struct_size < need || opts->struct_size > 4096) {
      return mpiar__error(MPIAR_ERR_INVALID_ARG,
                          "mpiar_kv_create: the options were not initialised with "
                          "MPIAR_KV_OPTIONS_INIT (size field %zu)",
                          opts->struct_size);
    }
    memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    o.struct_size = sizeof o;
  }
  kv = calloc(1, sizeof *kv);
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "mpiar_kv_create: store");
  }
  kv->comm = MPI_COMM_NULL;
  MPIAR__CHECK(duplicate(comm, o.timeout_ms, &kv->comm));
  MPI_Comm_rank(kv->comm, &kv->rank);
  MPI_Comm_size(kv->comm, &kv->size);
  kv->ar = (mpiar_options_t)MPIAR_OPTIONS_INIT;
  kv->ar.timeout_ms = o.timeout_ms;

  /* Local checks; a failure still joins the agreement, so that no worker waits for it. */
  const mpiar__settings_t *env = NULL;
  int local = mpiar__settings(&env);
  if (local != MPIAR_SUCCESS) {
    /* the settings' own detail, from the call above */
  } else if (o.op != MPIAR_SUM && o.op != MPIAR_AVG) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG,
                         "mpiar_kv_create: op must be MPIAR_SUM or MPIAR_AVG, not %d", (int)o.op);
  } else if (o.verify != 0 && o.verify != 1) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_kv_create: verify must be 0 or 1, not %d",
                         o.verify);
  } else if (!known_algorithm(o.algorithm)) {
    local = mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "mpiar_kv_create: unknown algorithm '%s'",
                         o.algorithm);
  } else if (o.fusion_bytes == MPIAR_KV_FUSION_AUTO) {
    const mpiar__settings_t *set = NULL;
    local = mpiar__settings(&set);
    kv->fusion_bytes = set->fusion_set ? set->fusion_bytes : MPIAR_KV_FUSION_DEFAULT;
  } else {
    kv->fusion_bytes = o.fusion_bytes;
  }
  if (local == 0 && o.algorithm != NULL && strcmp(o.algorithm, "auto") != 0) {
    kv->algorithm = strdup(o.algorithm);
    if (kv->algorithm == NULL) {
      local = mpiar__error(MPIAR_ERR_NOMEM, "mpiar_kv_create: algorithm name");
    }
  }
  kv->ar.algorithm = kv->algorithm;
  /*
   * Fused and per-key reductions of floating data must give the same bits, so every element must
   * be summed in an order that does not depend on where it sits in the buffer. The ring sums
   * block b starting at rank b + 1, an order that moves with the element's position, and the
   * automatic choice may pick different algorithms for a tensor alone and inside a fusion
   * buffer. Rabenseifner combines every element along the same rank tree, so the store uses it
   * for floating data on three or more workers unless the caller names an algorithm.
   */
  const mpiar__settings_t *settings = NULL;
  if (local == 0) {
    local = mpiar__settings(&settings);
  }
  int reproducible = o.reproducible >= 0 ? o.reproducible : (settings ? settings->reproducible : 0);
  if (o.reproducible < -1 || o.reproducible > 1) {
    local =
        mpiar__error(MPIAR_ERR_INVALID_ARG,
                     "mpiar_kv_create: reproducible must be -1, 0 or 1, not %d", o.reproducible);
  }
  kv->ar.reproducible = reproducible;
  kv->ar_float = kv->ar;
  /* On one or two workers every algorithm reduces each element as x0 op x1: the automatic
   * choice keeps fused and per-key results equal there. In reproducible mode every algorithm
   * reduces in the canonical order, which does not depend on the position either. */
  if (o.algorithm == NULL && kv->size > 2 && !reproducible) {
    /* The registry says which entries combine an element in an order that moves with its
     * position (MPIAR__ALG_ORDER_BY_POSITION, proven by ctest -R sim_registry). */
    const mpiar__algorithm_t *a = mpiar__algorithm_find("rabenseifner");
    if (a == NULL || (a->flags & MPIAR__ALG_ORDER_BY_POSITION)) {
      local = mpiar__error(MPIAR_ERR_INTERNAL,
                           "mpiar_kv_create: rabenseifner's reduction order depends on the "
                           "position; fused and per-key results could differ");
    }
    kv->ar_float.algorithm = "rabenseifner";
  }
  /* The algorithm option names an allreduce; broadcasts keep mpiar's own choice. */
  kv->bc = kv->ar;
  kv->bc.algorithm = NULL;
  kv->op = o.op;
  kv->verify = o.verify;

  /* Packing must be the same on every worker, so the options that shape it must agree. */
  uint64_t h = mpiar__kv_hash_add(MPIAR__KV_CREATE, kv->fusion_bytes);
  h = mpiar__kv_hash_add(h, (uint64_t)kv->op);
  h = mpiar__kv_hash_add(h, (uint64_t)kv->verify);
  h = mpiar__kv_hash_add(h, (uint64_t)kv->ar.reproducible);
  h = hash_string(h, kv->algorithm);
  /* Whether fusion buffers may be node-shared changes which path a fused reduction takes, and
   * every worker must take the same one. */
  int shared = settings != NULL ? settings->kv_shared : 0;
  h = mpiar__kv_hash_add(h, (uint64_t)shared);
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, "mpiar_kv_create (options)", 0));
  mpiar__kv_shared_decide(kv, shared);
  *out = kv;
  kv = NULL;

cleanup:
  if (kv != NULL) {
    if (kv->comm != MPI_COMM_NULL) {
      MPI_Comm_free(&kv->comm);
    }
    kv_free(kv);
  }
  return rc;
}

int mpiar_kv_destroy(mpiar_kv_t *kv) {
  mpiar__error_clear();
  if (kv == NULL) {
    return MPIAR_SUCCESS;
  }
  /* Asynchronous pushpulls still in progress are completed first (collective). */
  int rc = mpiar__kv_async_finish(kv);
  mpiar__kv_shared_release(&kv->shm_fusion);
  if (kv->comm != MPI_COMM_NULL && MPI_Comm_free(&kv->comm) != MPI_SUCCESS && rc == MPIAR_SUCCESS) {
    rc = mpiar__error(MPIAR_ERR_MPI, "mpiar_kv_destroy: MPI_Comm_free failed");
  }
  kv_free(kv);
  return rc;
}

int mpiar_kv_rank(const mpiar_kv_t *kv, int *rank) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc == 0 && rank == NULL) {
    rc = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_kv_rank: output pointer is NULL");
  }
  if (rc == 0) {
    *rank = kv->rank;
  }
  return rc;
}

int mpiar_kv_num_workers(const mpiar_kv_t *kv, int *n) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc == 0 && n == NULL) {
    rc = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_kv_num_workers: output pointer is NULL");
  }
  if (rc == 0) {
    *n = kv->size;
  }
  return rc;
}

int mpiar_kv_fusion_bytes(const mpiar_kv_t *kv, size_t *bytes) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc == 0 && bytes == NULL) {
    rc = mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_kv_fusion_bytes: output pointer is NULL");
  }
  if (rc == 0) {
    *bytes = kv->fusion_bytes;
  }
  return rc;
}

int mpiar_kv_barrier(mpiar_kv_t *kv) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  /* No worker gets the result of an allreduce before every worker has contributed to it. */
  uint8_t token = 0;
  return mpiar_allreduce_ex(MPIAR_IN_PLACE, &token, 1, MPIAR_UINT8, MPIAR_MAX, kv->comm, &kv->ar);
}

/* Check a key's form: a string key must fit MPIAR_KV_KEY_MAX. */
static int check_key(mpiar_kv_key_t key, const char *call) {
  if (key.name != NULL && strnlen(key.name, MPIAR_KV_KEY_MAX + 1) > MPIAR_KV_KEY_MAX) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: string key longer than %d bytes", call,
                        MPIAR_KV_KEY_MAX);
  }
  return MPIAR_SUCCESS;
}

/* Find a registered key or fail with MPIAR_ERR_KEY_UNKNOWN naming it and this worker. */
int mpiar__kv_find_key(const mpiar_kv_t *kv, mpiar_kv_key_t key, const char *call,
                       mpiar__kv_entry_t **e) {
  int rc = check_key(key, call);
  if (rc != 0) {
    return rc;
  }
  *e = mpiar__kv_table_find(&kv->table, key);
  if (*e == NULL) {
    char kbuf[96];
    return mpiar__error(MPIAR_ERR_KEY_UNKNOWN, "%s: key %s is not initialized on worker %d", call,
                        mpiar__kv_key_str(key, kbuf, sizeof kbuf), kv->rank);
  }
  return MPIAR_SUCCESS;
}

static const char *what_key(char *buf, size_t size, const char *call, mpiar_kv_key_t key) {
  char kbuf[96];
  snprintf(buf, size, "%s of key %s", call, mpiar__kv_key_str(key, kbuf, sizeof kbuf));
  return buf;
}

uint64_t mpiar__kv_entry_hash(uint64_t h, const mpiar__kv_entry_t *e) {
  h = mpiar__kv_hash_add(h, e->hash);
  h = mpiar__kv_hash_add(h, (uint64_t)e->dtype);
  return mpiar__kv_hash_add(h, e->count);
}

int mpiar_kv_init(mpiar_kv_t *kv, mpiar_kv_key_t key, mpiar_dtype_t dtype, size_t count,
                  void *value) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  mpiar__kv_entry_t *e = NULL;
  char what[KV_WHAT_MAX];
  what_key(what, sizeof what, "init", key);
  size_t esize = mpiar_dtype_size(dtype);

  /* Everything that can fail locally happens before the agreement, the allocation included. */
  int local = check_key(key, "init");
  if (local != 0) {
  } else if (esize == 0) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: invalid dtype %d", what, (int)dtype);
  } else if (count > SIZE_MAX / esize) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: %zu elements overflow size_t", what, count);
  } else if (value == NULL && count > 0) {
    local = mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: value is NULL with count %zu", what, count);
  } else if (mpiar__kv_table_find(&kv->table, key) != NULL) {
    local = mpiar__error(MPIAR_ERR_KEY_EXISTS, "%s: the key is already initialized", what);
  } else if ((local = mpiar__kv_table_reserve(&kv->table)) != 0) {
  } else if ((e = mpiar__kv_entry_new(key, dtype, count)) == NULL ||
             (e->bytes > 0 && (e->value = malloc(e->bytes)) == NULL)) {
    local = mpiar__error(MPIAR_ERR_NOMEM, "%s: %zu bytes", what, count * esize);
  }
  uint64_t h = mpiar__kv_hash_add(MPIAR__KV_INIT, mpiar__kv_key_hash(key));
  h = mpiar__kv_hash_add(h, (uint64_t)dtype);
  h = mpiar__kv_hash_add(h, count);
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  if (e->bytes > 0) {
    if (kv->rank == 0) {
      memcpy(e->value, value, e->bytes);
    }
    MPIAR__CHECK(mpiar_bcast_ex(e->value, e->bytes, MPIAR_UINT8, 0, kv->comm, &kv->bc));
    if (kv->rank != 0) {
      memcpy(value, e->value, e->bytes);
    }
  }
  mpiar__kv_table_insert(&kv->table, e);
  e = NULL;

cleanup:
  mpiar__kv_entry_free(e);
  return rc;
}

int mpiar_kv_lookup(const mpiar_kv_t *kv, mpiar_kv_key_t key, mpiar_dtype_t *dtype, size_t *count,
                    const void **data) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  mpiar__kv_entry_t *e = NULL;
  if (rc == 0) {
    rc = mpiar__kv_find_key(kv, key, "lookup", &e);
  }
  if (rc != 0) {
    return rc;
  }
  if (dtype != NULL) {
    *dtype = e->dtype;
  }
  if (count != NULL) {
    *count = e->count;
  }
  if (data != NULL) {
    *data = e->value;
  }
  return MPIAR_SUCCESS;
}

/* Local checks of one tensor of a pushpull or step. */
int mpiar__kv_check_tensor(const mpiar_kv_t *kv, const mpiar__kv_entry_t *e, const void *in,
                           const void *out, mpiar_op_t op, const char *what) {
  if (e->count > 0 && out == NULL) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: output buffer is NULL", what);
  }
  if (e->count > 0 && in == NULL) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: input buffer is NULL", what);
  }
  if (!mpiar_op_supported(e->dtype, op)) {
    return mpiar__error(MPIAR_ERR_BAD_DTYPE_OP, "%s: the store's op %s is not defined on %s", what,
                        mpiar_op_name(op), mpiar_dtype_name(e->dtype));
  }
  (void)kv;
  return MPIAR_SUCCESS;
}

/* Options of a data reduction of @p dtype (see ar_float in mpiar_kv_create). */
const mpiar_options_t *mpiar__kv_data_options(const mpiar_kv_t *kv, mpiar_dtype_t dtype) {
  return mpiar__dtype_is_float(dtype) ? &kv->ar_float : &kv->ar;
}

size_t mpiar__kv_chunk_bytes = (size_t)4 << 20;

int mpiar__kv_cut(const mpiar_kv_t *kv, mpiar_dtype_t dtype) {
  /* mpiar's automatic choice pipelines long vectors itself (segmented ring), and a named
   * algorithm is the caller's: neither is cut. */
  return mpiar__kv_data_options(kv, dtype) == &kv->ar_float &&
         kv->ar_float.algorithm != kv->ar.algorithm;
}

/*
 * Allreduce of @p count elements in pieces of at most mpiar__kv_chunk_bytes. A tensor of
 * hundreds of megabytes reduced in one piece streams every buffer through memory twice (the
 * received half, then the reduction reading it back); pieces of a few megabytes are reduced
 * while the received data is still in cache. Only the store's own Rabenseifner (floating data,
 * three or more workers) is cut, and cutting changes no bit there: every element is reduced on
 * its own, in an order that does not depend on its position in the buffer.
 */
static int allreduce_chunked(mpiar_kv_t *kv, const void *send, void *out, size_t count,
                             mpiar_dtype_t dtype, mpiar_op_t op) {
  size_t es = mpiar_dtype_size(dtype);
  size_t chunk = mpiar__kv_cut(kv, dtype) ? mpiar__kv_chunk_bytes / es : count;
  if (chunk == 0) {
    chunk = 1;
  }
  for (size_t off = 0; off < count; off += chunk) {
    size_t len = count - off < chunk ? count - off : chunk;
    const void *s = send == MPIAR_IN_PLACE ? MPIAR_IN_PLACE : (const char *)send + off * es;
    int rc = mpiar_allreduce_ex(s, (char *)out + off * es, len, dtype, op, kv->comm,
                                mpiar__kv_data_options(kv, dtype));
    if (rc != MPIAR_SUCCESS) {
      return rc;
    }
  }
  return MPIAR_SUCCESS;
}

/* One allreduce on the caller's buffers; in == out means in place. */
static int reduce_direct(mpiar_kv_t *kv, const mpiar__kv_entry_t *e, const void *in, void *out,
                         mpiar_op_t op) {
  if (e->count == 0) {
    return MPIAR_SUCCESS;
  }
  const void *send = (in == out) ? MPIAR_IN_PLACE : in;
  return allreduce_chunked(kv, send, out, e->count, e->dtype, op);
}

int mpiar_kv_pushpull(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *in, void *out) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  what_key(what, sizeof what, "pushpull", key);
  mpiar__kv_entry_t *e = NULL;
  if (in == MPIAR_IN_PLACE) {
    in = out;
  }
  int local = mpiar__kv_find_key(kv, key, "pushpull", &e);
  if (local == 0) {
    local = mpiar__kv_check_tensor(kv, e, in, out, kv->op, what);
  }
  if (kv->verify) {
    uint64_t h = local == 0 ? mpiar__kv_entry_hash(MPIAR__KV_PUSHPULL, e) : 0;
    MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  } else if (local != 0) {
    return local;
  }
  rc = reduce_direct(kv, e, in, out, kv->op);

cleanup:
  return rc;
}

/* Make room for a batch of n tensors (entry and pack index arrays). */
static int batch_reserve(mpiar_kv_t *kv, size_t n) {
  if (n <= kv->batch_cap) {
    return MPIAR_SUCCESS;
  }
  mpiar__kv_entry_t **b = realloc(kv->batch, n * sizeof *b);
  if (b == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "batch of %zu keys", n);
  }
  kv->batch = b;
  size_t *p = realloc(kv->pack, n * sizeof *p);
  if (p == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "batch of %zu keys", n);
  }
  kv->pack = p;
  kv->batch_cap = n;
  return MPIAR_SUCCESS;
}

/*
 * Reduce the fusion buffer holding the tensors kv->pack[0..np) of one dtype. A single tensor is
 * reduced on the caller's buffers directly (no copies); several are copied in, reduced with one
 * allreduce in place and copied out.
 */
static int flush_pack(mpiar_kv_t *kv, size_t np, const void *const *ins, void *const *outs,
                      mpiar_op_t op) {
  if (np == 0) {
    return MPIAR_SUCCESS;
  }
  if (np == 1) {
    size_t i = kv->pack[0];
    return reduce_direct(kv, kv->batch[i], ins[i] == MPIAR_IN_PLACE ? outs[i] : ins[i], outs[i],
                         op);
  }
  size_t bytes = 0;
  for (size_t k = 0; k < np; k++) {
    bytes += kv->batch[kv->pack[k]]->bytes;
  }
  /* Every worker gets here with the same pack (after the batch's agreement, or by the caller's
   * promise with verify = 0), so the shared buffer's allocation is collective by construction. */
  int rc = mpiar__kv_shared_fit(kv, &kv->shm_fusion, bytes);
  if (rc < 0) {
    return rc;
  }
  unsigned char *fusion = rc == 1 ? kv->shm_fusion.buf : kv->fusion;
  size_t off = 0, count = 0;
  for (size_t k = 0; k < np; k++) {
    size_t i = kv->pack[k];
    const void *src = ins[i] == MPIAR_IN_PLACE ? outs[i] : ins[i];
    memcpy(fusion + off, src, kv->batch[i]->bytes);
    off += kv->batch[i]->bytes;
    count += kv->batch[i]->count;
  }
  mpiar_dtype_t dtype = kv->batch[kv->pack[0]]->dtype;
  rc = allreduce_chunked(kv, MPIAR_IN_PLACE, fusion, count, dtype, op);
  if (rc != 0) {
    return rc;
  }
  off = 0;
  for (size_t k = 0; k < np; k++) {
    size_t i = kv->pack[k];
    memcpy(outs[i], fusion + off, kv->batch[i]->bytes);
    off += kv->batch[i]->bytes;
  }
  return MPIAR_SUCCESS;
}

/* Local checks that step adds to those of pushpull, and the momentum state it needs. */
static int step_prepare(const mpiar_kv_t *kv, mpiar__kv_entry_t *e, const char *what) {
  if (kv->opt.kind != MPIAR_KV_OPTIMIZER_SGD) {
    return mpiar__error(MPIAR_ERR_UNSUPPORTED, "%s: no optimizer is set (mpiar_kv_set_optimizer)",
                        what);
  }
  if (e->dtype != MPIAR_FLOAT32 && e->dtype != MPIAR_FLOAT64) {
    return mpiar__error(MPIAR_ERR_UNSUPPORTED,
                        "%s: the SGD optimizer updates float32 and float64 keys, not %s", what,
                        mpiar_dtype_name(e->dtype));
  }
  if (kv->opt.momentum != 0 && e->momentum == NULL) {
    /* Momentum starts at zero; one byte for empty keys keeps "has momentum" meaningful. */
    e->momentum = calloc(e->bytes ? e->bytes : 1, 1);
    if (e->momentum == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "%s: momentum of %zu bytes", what, e->bytes);
    }
  }
  return MPIAR_SUCCESS;
}

/*
 * Local checks of a batch: resolve the keys into kv->batch, check the buffers, size the fusion
 * buffer. @return the local result and, in *hash, the hash of the call's key sequence.
 */
static int batch_prepare(mpiar_kv_t *kv, mpiar__kv_call_t call, size_t n,
                         const mpiar_kv_key_t *keys, const void *const *ins, void *const *outs,
                         mpiar_op_t op, const char *name, uint64_t *hash) {
  char what[KV_WHAT_MAX];
  if (n > 0 && (keys == NULL || ins == NULL || outs == NULL)) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: NULL key or buffer array with %zu keys", name,
                        n);
  }
  int rc = batch_reserve(kv, n);
  if (rc != 0) {
    return rc;
  }
  uint64_t h = mpiar__kv_hash_add((uint64_t)call, n);
  size_t fused_max = 0;
  for (size_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "%s (key %zu of %zu)", name, i, n);
    rc = mpiar__kv_find_key(kv, keys[i], what, &kv->batch[i]);
    if (rc != 0) {
      return rc;
    }
    const mpiar__kv_entry_t *e = kv->batch[i];
    const void *in = ins[i] == MPIAR_IN_PLACE ? outs[i] : ins[i];
    if (call == MPIAR__KV_STEP_BATCH && (rc = step_prepare(kv, kv->batch[i], what)) != 0) {
      return rc;
    }
    rc = mpiar__kv_check_tensor(kv, e, in, outs[i], op, what);
    if (rc != 0) {
      return rc;
    }
    h = mpiar__kv_entry_hash(h, e);
    if (e->bytes <= kv->fusion_bytes) {
      fused_max += e->bytes;
    }
  }
  /* The fusion buffer grows to what this batch can use, at most the threshold, and is kept. */
  if (fused_max > kv->fusion_bytes) {
    fused_max = kv->fusion_bytes;
  }
  if (fused_max > kv->fusion_cap) {
    unsigned char *f = realloc(kv->fusion, fused_max);
    if (f == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "%s: fusion buffer of %zu bytes", name, fused_max);
    }
    kv->fusion = f;
    kv->fusion_cap = fused_max;
  }
  *hash = h;
  return MPIAR_SUCCESS;
}

/*
 * Reduce the prepared batch. The packing order is fixed by the call alone: dtype by dtype in
 * enumeration order, and within a dtype in call order, so it is the same on every worker.
 * A tensor larger than the threshold is reduced alone, straight on the caller's buffers; the
 * others fill a buffer until the next would overflow it.
 */
static int batch_run(mpiar_kv_t *kv, size_t n, const void *const *ins, void *const *outs,
                     mpiar_op_t op) {
  int rc = MPIAR_SUCCESS;
  for (int dt = 0; dt < MPIAR__DTYPE_COUNT; dt++) {
    size_t np = 0, filled = 0;
    for (size_t i = 0; i < n; i++) {
      const mpiar__kv_entry_t *e = kv->batch[i];
      if ((int)e->dtype != dt || e->count == 0) {
        continue;
      }
      if (e->bytes > kv->fusion_bytes) {
        const void *in = ins[i] == MPIAR_IN_PLACE ? outs[i] : ins[i];
        MPIAR__CHECK(reduce_direct(kv, e, in, outs[i], op));
        continue;
      }
      if (filled + e->bytes > kv->fusion_bytes) {
        MPIAR__CHECK(flush_pack(kv, np, ins, outs, op));
        np = 0;
        filled = 0;
      }
      kv->pack[np++] = i;
      filled += e->bytes;
    }
    MPIAR__CHECK(flush_pack(kv, np, ins, outs, op));
  }
cleanup:
  return rc;
}

int mpiar_kv_pushpull_batch(mpiar_kv_t *kv, size_t n, const mpiar_kv_key_t *keys,
                            const void *const *ins, void *const *outs) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  snprintf(what, sizeof what, "pushpull_batch of %zu keys", n);
  uint64_t h = 0;
  int local =
      batch_prepare(kv, MPIAR__KV_PUSHPULL_BATCH, n, keys, ins, outs, kv->op, "pushpull_batch", &h);
  if (kv->verify) {
    MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  } else if (local != 0) {
    return local;
  }
  rc = batch_run(kv, n, ins, outs, kv->op);
cleanup:
  return rc;
}

int mpiar_kv_broadcast(mpiar_kv_t *kv, mpiar_kv_key_t key, void *value, int root) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  what_key(what, sizeof what, "broadcast", key);
  mpiar__kv_entry_t *e = NULL;
  int local = mpiar__kv_find_key(kv, key, "broadcast", &e);
  if (local != 0) {
  } else if (root < 0 || root >= kv->size) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: root %d is not a worker (0..%d)", what, root,
                         kv->size - 1);
  } else if (value == NULL && e->count > 0) {
    local = mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: value is NULL", what);
  }
  uint64_t h = 0;
  if (local == 0) {
    h = mpiar__kv_hash_add(mpiar__kv_entry_hash(MPIAR__KV_BROADCAST, e), (uint64_t)root);
  }
  /* Broadcast always verifies: a wrong root would otherwise pair mismatched messages. */
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  if (e->bytes > 0) {
    MPIAR__CHECK(mpiar_bcast_ex(value, e->bytes, MPIAR_UINT8, root, kv->comm, &kv->bc));
    memcpy(e->value, value, e->bytes);
  }
cleanup:
  return rc;
}

int mpiar_kv_push(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *value) {
  (void)kv;
  (void)key;
  (void)value;
  return mpiar__error(MPIAR_ERR_UNSUPPORTED, "%s", no_push_pull);
}

int mpiar_kv_pull(mpiar_kv_t *kv, mpiar_kv_key_t key, void *value) {
  (void)kv;
  (void)key;
  (void)value;
  return mpiar__error(MPIAR_ERR_UNSUPPORTED, "%s", no_push_pull);
}

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

int mpiar_kv_set_optimizer(mpiar_kv_t *kv, const mpiar_kv_optimizer_t *opt) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  int local = MPIAR_SUCCESS;
  if (opt == NULL) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "set_optimizer: the optimizer is NULL");
  } else if (opt->kind != MPIAR_KV_OPTIMIZER_SGD && opt->kind != MPIAR_KV_OPTIMIZER_NONE) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "set_optimizer: unknown optimizer kind %d",
                         (int)opt->kind);
  } else if (opt->kind == MPIAR_KV_OPTIMIZER_SGD &&
             !(isfinite(opt->learning_rate) && opt->learning_rate > 0)) {
    local =
        mpiar__error(MPIAR_ERR_INVALID_ARG,
                     "set_optimizer: learning rate %g must be finite and > 0", opt->learning_rate);
  } else if (opt->kind == MPIAR_KV_OPTIMIZER_SGD && !(opt->momentum >= 0 && opt->momentum < 1)) {
    local = mpiar__error(MPIAR_ERR_INVALID_ARG, "set_optimizer: momentum %g must be in [0, 1)",
                         opt->momentum);
  } else if (opt->kind == MPIAR_KV_OPTIMIZER_SGD &&
             !(isfinite(opt->weight_decay) && opt->weight_decay >= 0)) {
    local =
        mpiar__error(MPIAR_ERR_INVALID_ARG,
                     "set_optimizer: weight decay %g must be finite and >= 0", opt->weight_decay);
  }
  uint64_t h = MPIAR__KV_OPTIMIZER;
  if (local == 0) {
    h = mpiar__kv_hash_add(h, (uint64_t)opt->kind);
    h = mpiar__kv_hash_add(h, double_bits(opt->learning_rate));
    h = mpiar__kv_hash_add(h, double_bits(opt->momentum));
    h = mpiar__kv_hash_add(h, double_bits(opt->weight_decay));
  }
  /* Identical hyper-parameters on every worker keep the weights bitwise identical. */
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, "set_optimizer", 0));
  kv->opt = *opt;
cleanup:
  return rc;
}

/*
 * SGD on one key, in the key's own precision, element by element; the same code on every worker
 * with the same averaged gradient gives the same bits.
 */
static void sgd_apply(const mpiar_kv_optimizer_t *o, mpiar__kv_entry_t *e, const void *grad) {
  size_t n = e->count;
  if (e->dtype == MPIAR_FLOAT32) {
    float lr = (float)o->learning_rate, mom = (float)o->momentum, wd = (float)o->weight_decay;
    float *w = e->value, *m = e->momentum;
    const float *g = grad;
    if (m != NULL) {
      for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * w[i];
        m[i] = mom * m[i] - lr * gi;
        w[i] = w[i] + m[i];
      }
    } else {
      for (size_t i = 0; i < n; i++) {
        float gi = g[i] + wd * w[i];
        w[i] = w[i] - lr * gi;
      }
    }
  } else {
    double lr = o->learning_rate, mom = o->momentum, wd = o->weight_decay;
    double *w = e->value, *m = e->momentum;
    const double *g = grad;
    if (m != NULL) {
      for (size_t i = 0; i < n; i++) {
        double gi = g[i] + wd * w[i];
        m[i] = mom * m[i] - lr * gi;
        w[i] = w[i] + m[i];
      }
    } else {
      for (size_t i = 0; i < n; i++) {
        double gi = g[i] + wd * w[i];
        w[i] = w[i] - lr * gi;
      }
    }
  }
}

int mpiar_kv_update(mpiar_kv_t *kv, mpiar_kv_key_t key, const void *grad) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  what_key(what, sizeof what, "update", key);
  mpiar__kv_entry_t *e = NULL;
  if ((rc = mpiar__kv_find_key(kv, key, "update", &e)) != 0 ||
      (rc = step_prepare(kv, e, what)) != 0) {
    return rc;
  }
  if (e->count > 0 && grad == NULL) {
    return mpiar__error(MPIAR_ERR_NULL_BUFFER, "%s: the gradient is NULL", what);
  }
  sgd_apply(&kv->opt, e, grad);
  return MPIAR_SUCCESS;
}

int mpiar_kv_step(mpiar_kv_t *kv, mpiar_kv_key_t key, void *grad) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  what_key(what, sizeof what, "step", key);
  mpiar__kv_entry_t *e = NULL;
  int local = mpiar__kv_find_key(kv, key, "step", &e);
  if (local == 0) {
    local = step_prepare(kv, e, what);
  }
  if (local == 0) {
    local = mpiar__kv_check_tensor(kv, e, grad, grad, MPIAR_AVG, what);
  }
  if (kv->verify) {
    uint64_t h = local == 0 ? mpiar__kv_entry_hash(MPIAR__KV_STEP, e) : 0;
    MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  } else if (local != 0) {
    return local;
  }
  MPIAR__CHECK(reduce_direct(kv, e, grad, grad, MPIAR_AVG));
  sgd_apply(&kv->opt, e, grad);
cleanup:
  return rc;
}

int mpiar_kv_step_batch(mpiar_kv_t *kv, size_t n, const mpiar_kv_key_t *keys, void *const *grads) {
  mpiar__error_clear();
  int rc = check_kv(kv);
  if (rc != 0) {
    return rc;
  }
  char what[KV_WHAT_MAX];
  snprintf(what, sizeof what, "step_batch of %zu keys", n);
  uint64_t h = 0;
  const void *const *ins = (const void *const *)grads;
  int local =
      batch_prepare(kv, MPIAR__KV_STEP_BATCH, n, keys, ins, grads, MPIAR_AVG, "step_batch", &h);
  if (kv->verify) {
    MPIAR__CHECK(mpiar__kv_agree(kv, local, h, what, 0));
  } else if (local != 0) {
    return local;
  }
  MPIAR__CHECK(batch_run(kv, n, ins, grads, MPIAR_AVG));
  for (size_t i = 0; i < n; i++) {
    sgd_apply(&kv->opt, kv->batch[i], grads[i]);
  }
cleanup:
  return rc;
}
