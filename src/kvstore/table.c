/* The key registry: entries in registration order and an open-addressing hash index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kvstore/kv_internal.h"

/* FNV-1a over the bytes, then a 64-bit finalizer so that nearby keys spread over the index. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return x;
}

uint64_t mpiar__kv_key_hash(mpiar_kv_key_t key) {
  /* The kind is hashed first, so the integer 3 and the string "3" hash differently. */
  unsigned char kind = key.name != NULL ? 1 : 0;
  uint64_t h = fnv1a(0xCBF29CE484222325ull, &kind, 1);
  if (key.name != NULL) {
    h = fnv1a(h, key.name, strlen(key.name));
  } else {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) {
      b[i] = (unsigned char)((uint64_t)key.id >> (8 * i));
    }
    h = fnv1a(h, b, 8);
  }
  return mix64(h);
}

int mpiar__kv_entry_is(const mpiar__kv_entry_t *e, mpiar_kv_key_t key, uint64_t hash) {
  if (e->hash != hash) {
    return 0;
  }
  if (key.name == NULL) {
    return e->name == NULL && e->id == key.id;
  }
  return e->name != NULL && strcmp(e->name, key.name) == 0;
}

const char *mpiar__kv_key_str(mpiar_kv_key_t key, char *buf, size_t size) {
  if (key.name == NULL) {
    snprintf(buf, size, "%lld", (long long)key.id);
  } else if (strlen(key.name) + 3 <= size) {
    snprintf(buf, size, "\"%s\"", key.name);
  } else {
    /* Long names are shortened so that a detail message keeps room for its reason. */
    snprintf(buf, size, "\"%.*s...\"", size > 6 ? (int)(size - 6) : 0, key.name);
  }
  return buf;
}

mpiar__kv_entry_t *mpiar__kv_table_find(const mpiar__kv_table_t *t, mpiar_kv_key_t key) {
  if (t->nslots == 0) {
    return NULL;
  }
  uint64_t h = mpiar__kv_key_hash(key);
  size_t mask = t->nslots - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    uint32_t s = t->slots[i];
    if (s == 0) {
      return NULL;
    }
    if (mpiar__kv_entry_is(t->items[s - 1], key, h)) {
      return t->items[s - 1];
    }
  }
}

static void slot_put(uint32_t *slots, size_t nslots, uint64_t hash, uint32_t value) {
  size_t mask = nslots - 1;
  size_t i = (size_t)hash & mask;
  while (slots[i] != 0) {
    i = (i + 1) & mask;
  }
  slots[i] = value;
}

int mpiar__kv_table_reserve(mpiar__kv_table_t *t) {
  if (t->n == UINT32_MAX - 1) {
    return mpiar__error(MPIAR_ERR_NOMEM, "the kvstore holds its maximum of %zu keys", t->n);
  }
  if (t->n + 1 > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    mpiar__kv_entry_t **items = realloc(t->items, cap * sizeof *items);
    if (items == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "kvstore key table of %zu entries", cap);
    }
    t->items = items;
    t->cap = cap;
  }
  /* The index stays at most half full, so probe sequences stay short. */
  if (2 * (t->n + 1) > t->nslots) {
    size_t nslots = t->nslots ? 2 * t->nslots : 32;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (slots == NULL) {
      return mpiar__error(MPIAR_ERR_NOMEM, "kvstore key index of %zu slots", nslots);
    }
    for (size_t i = 0; i < t->n; i++) {
      slot_put(slots, nslots, t->items[i]->hash, (uint32_t)(i + 1));
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
  }
  return MPIAR_SUCCESS;
}

void mpiar__kv_table_insert(mpiar__kv_table_t *t, mpiar__kv_entry_t *e) {
  t->items[t->n] = e;
  t->n++;
  slot_put(t->slots, t->nslots, e->hash, (uint32_t)t->n);
}

void mpiar__kv_table_free(mpiar__kv_table_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    mpiar__kv_entry_free(t->items[i]);
  }
  free(t->items);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

mpiar__kv_entry_t *mpiar__kv_entry_new(mpiar_kv_key_t key, mpiar_dtype_t dtype, size_t count) {
  mpiar__kv_entry_t *e = calloc(1, sizeof *e);
  if (e == NULL) {
    return NULL;
  }
  if (key.name != NULL) {
    e->name = strdup(key.name);
    if (e->name == NULL) {
      free(e);
      return NULL;
    }
  }
  e->id = key.name != NULL ? 0 : key.id;
  e->hash = mpiar__kv_key_hash(key);
  e->dtype = dtype;
  e->count = count;
  e->bytes = count * mpiar_dtype_size(dtype);
  return e;
}

void mpiar__kv_entry_free(mpiar__kv_entry_t *e) {
  if (e == NULL) {
    return;
  }
  free(e->name);
  free(e->value);
  free(e->momentum);
  free(e);
}
