/*
 * CRC32C for checkpoints: ISA-L when built with it, otherwise a portable slice-by-8 table
 * implementation that processes eight bytes per step with eight 256-entry tables.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "kvstore/crc32c.h"

#if MPIAR_HAVE_ISAL
#include <isa-l/crc.h>
#endif

/* The reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82F63B78u

/*
 * table[0] is the classic byte-at-a-time table; table[k][b] is the CRC of byte b followed by k
 * zero bytes, which lets eight input bytes be folded with eight independent lookups.
 */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; bit++) {
      c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    }
    table[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; b++) {
    for (int k = 1; k < 8; k++) {
      uint32_t prev = table[k - 1][b];
      table[k][b] = (prev >> 8) ^ table[0][prev & 0xFFu];
    }
  }
}

/* Little-endian 64-bit load from any alignment (the tables assume little-endian byte order). */
static uint64_t load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) {
    v = (v << 8) | p[i];
  }
  return v;
}

uint32_t mpiar__crc32c_portable(uint32_t crc, const void *data, size_t len) {
  pthread_once(&table_once, table_build);
  const unsigned char *p = data;
  uint32_t c = ~crc;
  /* Bytes one at a time until p is 8-byte aligned, so the main loop reads aligned words. */
  while (len > 0 && ((uintptr_t)p & 7u) != 0) {
    c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFFu];
    len--;
  }
  while (len >= 8) {
    uint64_t w = load_le64(p) ^ c;
    c = table[7][w & 0xFFu] ^ table[6][(w >> 8) & 0xFFu] ^ table[5][(w >> 16) & 0xFFu] ^
        table[4][(w >> 24) & 0xFFu] ^ table[3][(w >> 32) & 0xFFu] ^ table[2][(w >> 40) & 0xFFu] ^
        table[1][(w >> 48) & 0xFFu] ^ table[0][(w >> 56) & 0xFFu];
    p += 8;
    len -= 8;
  }
  while (len > 0) {
    c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFFu];
    len--;
  }
  return ~c;
}

#if MPIAR_HAVE_ISAL
/*
 * ISA-L's crc32_iscsi neither inverts its initial value nor its result, so it is called with the
 * inverted running CRC and its result inverted back; its length is an int, so long buffers go
 * in pieces.
 */
uint32_t mpiar__crc32c_isal(uint32_t crc, const void *data, size_t len) {
  unsigned char *p = (unsigned char *)(uintptr_t)data;
  uint32_t c = ~crc;
  while (len > 0) {
    size_t piece = len > (size_t)(INT_MAX / 2) ? (size_t)(INT_MAX / 2) : len;
    c = crc32_iscsi(p, (int)piece, c);
    p += piece;
    len -= piece;
  }
  return ~c;
}
#endif

uint32_t mpiar__crc32c(uint32_t crc, const void *data, size_t len) {
#if MPIAR_HAVE_ISAL
  return mpiar__crc32c_isal(crc, data, len);
#else
  return mpiar__crc32c_portable(crc, data, len);
#endif
}

const char *mpiar__crc32c_impl(void) {
  return MPIAR_HAVE_ISAL ? "isa-l" : "portable";
}
