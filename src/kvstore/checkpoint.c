/*
 * Collective checkpoint save and load. Worker 0 does the file work (ckpt.c); agreements make
 * every worker return the same result, and load stages everything before it changes the store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kvstore/kv_internal.h"

static const char *entry_str(const mpiar__kv_entry_t *e, char *buf, size_t size) {
  mpiar_kv_key_t key = {e->name, e->id};
  return mpiar__kv_key_str(key, buf, size);
}

int mpiar_kv_save(mpiar_kv_t *kv, const char *path) {
  mpiar__error_clear();
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "kvstore handle is NULL");
  }
  int rc = MPIAR_SUCCESS;
  int local = MPIAR_SUCCESS;
  if (path == NULL) {
    local = mpiar__error(MPIAR_ERR_NULL_BUFFER, "save: the path is NULL");
  }
  /* First every worker must hold the same keys; then worker 0 writes and reports. */
  uint64_t h = mpiar__kv_hash_add(MPIAR__KV_SAVE, mpiar__kv_layout_hash(kv));
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, "save", 0));
  if (kv->rank == 0) {
    local = mpiar__ckpt_write(path, kv->table.items, kv->table.n);
  }
  rc = mpiar__kv_agree(kv, local, MPIAR__KV_SAVE_DONE, "save", 1);
cleanup:
  return rc;
}

/*
 * Worker 0: read and verify the file, then match its records to the store's keys. On success
 * staged[i] is the record for store key i (owned by *recs).
 */
static int load_read(mpiar_kv_t *kv, const char *path, mpiar__kv_entry_t ***recs, size_t *nrecs,
                     mpiar__kv_entry_t **staged) {
  char kbuf[96];
  int rc = mpiar__ckpt_read(path, recs, nrecs);
  if (rc != 0) {
    return rc;
  }
  /* Index the file's records by key; they are unique (mpiar__ckpt_read checks). */
  mpiar__kv_table_t idx = {0};
  for (size_t i = 0; i < *nrecs && rc == 0; i++) {
    if ((rc = mpiar__kv_table_reserve(&idx)) == 0) {
      mpiar__kv_table_insert(&idx, (*recs)[i]);
    }
  }
  for (size_t i = 0; i < kv->table.n && rc == 0; i++) {
    const mpiar__kv_entry_t *e = kv->table.items[i];
    mpiar_kv_key_t key = {e->name, e->id};
    const mpiar__kv_entry_t *r = mpiar__kv_table_find(&idx, key);
    if (r == NULL) {
      rc = mpiar__error(MPIAR_ERR_MISMATCH, "load: key %s of the store is not in checkpoint '%s'",
                        entry_str(e, kbuf, sizeof kbuf), path);
    } else if (r->dtype != e->dtype || r->count != e->count) {
      rc = mpiar__error(MPIAR_ERR_MISMATCH,
                        "load: key %s is %s x %zu in the store but %s x %zu in checkpoint '%s'",
                        entry_str(e, kbuf, sizeof kbuf), mpiar_dtype_name(e->dtype), e->count,
                        mpiar_dtype_name(r->dtype), r->count, path);
    } else {
      staged[i] = (mpiar__kv_entry_t *)r;
    }
  }
  if (rc == 0 && *nrecs != kv->table.n) {
    /* Every store key matched a distinct record, so the extra records are keys the store lacks. */
    for (size_t i = 0; i < *nrecs && rc == 0; i++) {
      mpiar_kv_key_t key = {(*recs)[i]->name, (*recs)[i]->id};
      if (mpiar__kv_table_find(&kv->table, key) == NULL) {
        rc = mpiar__error(MPIAR_ERR_MISMATCH,
                          "load: checkpoint '%s' holds key %s, which the store does not have", path,
                          entry_str((*recs)[i], kbuf, sizeof kbuf));
      }
    }
  }
  free(idx.items);
  free(idx.slots);
  return rc;
}

int mpiar_kv_load(mpiar_kv_t *kv, const char *path) {
  mpiar__error_clear();
  if (kv == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "kvstore handle is NULL");
  }
  int rc = MPIAR_SUCCESS;
  size_t n = kv->table.n;
  mpiar__kv_entry_t **recs = NULL; /* worker 0: the records read from the file */
  size_t nrecs = 0;
  mpiar__kv_entry_t **staged = calloc(n ? n : 1, sizeof *staged);
  mpiar__kv_entry_t *own = NULL; /* workers > 0: staging entries, one allocation of n */
  unsigned char *has_mom = calloc(n ? n : 1, 1);

  int local = MPIAR_SUCCESS;
  if (staged == NULL || has_mom == NULL) {
    local = mpiar__error(MPIAR_ERR_NOMEM, "load: staging table of %zu keys", n);
  } else if (path == NULL) {
    local = mpiar__error(MPIAR_ERR_NULL_BUFFER, "load: the path is NULL");
  } else if (kv->rank == 0) {
    local = load_read(kv, path, &recs, &nrecs, staged);
  }
  /* The layout hash makes a store that differs between workers fail here, before any data. */
  uint64_t h = mpiar__kv_hash_add(MPIAR__KV_LOAD, mpiar__kv_layout_hash(kv));
  MPIAR__CHECK(mpiar__kv_agree(kv, local, h, "load", 1));

  /* Which keys carry momentum is known to worker 0 only; the others learn it to size staging. */
  if (kv->rank == 0) {
    for (size_t i = 0; i < n; i++) {
      has_mom[i] = staged[i]->momentum != NULL;
    }
  }
  if (n > 0) {
    MPIAR__CHECK(mpiar_bcast_ex(has_mom, n, MPIAR_UINT8, 0, kv->comm, &kv->bc));
  }
  if (kv->rank != 0) {
    own = calloc(n ? n : 1, sizeof *own);
    if (own == NULL) {
      local = mpiar__error(MPIAR_ERR_NOMEM, "load: staging of %zu keys", n);
    }
    for (size_t i = 0; i < n && local == 0; i++) {
      const mpiar__kv_entry_t *e = kv->table.items[i];
      staged[i] = &own[i];
      own[i].bytes = e->bytes;
      if (e->bytes > 0 && (own[i].value = malloc(e->bytes)) == NULL) {
        local = mpiar__error(MPIAR_ERR_NOMEM, "load: staging of %zu bytes", e->bytes);
      } else if (has_mom[i] && (own[i].momentum = malloc(e->bytes ? e->bytes : 1)) == NULL) {
        local = mpiar__error(MPIAR_ERR_NOMEM, "load: staging of %zu bytes", e->bytes);
      }
    }
  }
  MPIAR__CHECK(mpiar__kv_agree(kv, local, MPIAR__KV_LOAD_ALLOC, "load", 0));
  for (size_t i = 0; i < n; i++) {
    size_t bytes = kv->table.items[i]->bytes;
    if (bytes == 0) {
      continue;
    }
    MPIAR__CHECK(mpiar_bcast_ex(staged[i]->value, bytes, MPIAR_UINT8, 0, kv->comm, &kv->bc));
    if (has_mom[i]) {
      MPIAR__CHECK(mpiar_bcast_ex(staged[i]->momentum, bytes, MPIAR_UINT8, 0, kv->comm, &kv->bc));
    }
  }
  /* Everything arrived: only now does the store change, by swapping buffers (cannot fail). */
  for (size_t i = 0; i < n; i++) {
    mpiar__kv_entry_t *e = kv->table.items[i];
    void *v = e->value, *m = e->momentum;
    e->value = staged[i]->value;
    e->momentum = staged[i]->momentum;
    staged[i]->value = v;
    staged[i]->momentum = m;
  }

cleanup:
  if (own != NULL) {
    for (size_t i = 0; i < n; i++) {
      free(own[i].value);
      free(own[i].momentum);
    }
    free(own);
  }
  mpiar__ckpt_free(recs, nrecs);
  free(staged);
  free(has_mom);
  return rc;
}
