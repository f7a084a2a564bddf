/*
 * CRC32C: the known check values, chaining, and the ISA-L and portable implementations giving
 * the same value on every length 0..300 at every start offset 0..7 and on large buffers.
 */
#include <stdint.h>
#include <string.h>

#include "kv_test.h"
#include "kvstore/crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_known(const char *name, crc_fn f) {
  /* The CRC32C check value and the iSCSI (RFC 3720, B.4) test vectors. */
  KV_EXPECT(f(0, "123456789", 9) == 0xE3069283u, "%s(\"123456789\") = 0x%08X", name,
            f(0, "123456789", 9));
  KV_EXPECT(f(0, "", 0) == 0, "%s(\"\") = 0x%08X", name, f(0, "", 0));
  KV_EXPECT(f(0x12345678u, "", 0) == 0x12345678u, "%s: empty data changes the CRC", name);
  unsigned char buf[32];
  memset(buf, 0, sizeof buf);
  KV_EXPECT(f(0, buf, 32) == 0x8A9136AAu, "%s(32 zeros) = 0x%08X", name, f(0, buf, 32));
  memset(buf, 0xFF, sizeof buf);
  KV_EXPECT(f(0, buf, 32) == 0x62A8AB43u, "%s(32 x 0xFF) = 0x%08X", name, f(0, buf, 32));
  for (int i = 0; i < 32; i++) {
    buf[i] = (unsigned char)i;
  }
  KV_EXPECT(f(0, buf, 32) == 0x46DD794Eu, "%s(0..31) = 0x%08X", name, f(0, buf, 32));
  for (int i = 0; i < 32; i++) {
    buf[i] = (unsigned char)(31 - i);
  }
  KV_EXPECT(f(0, buf, 32) == 0x113FDB5Cu, "%s(31..0) = 0x%08X", name, f(0, buf, 32));
  /* Chaining: the CRC of a split buffer equals that of the whole, at every split point. */
  const char *text = "The quick brown fox jumps over the lazy dog, twice over and again.";
  size_t len = strlen(text);
  uint32_t whole = f(0, text, len);
  for (size_t cut = 0; cut <= len; cut++) {
    uint32_t two = f(f(0, text, cut), text + cut, len - cut);
    KV_EXPECT(two == whole, "%s: split at %zu gives 0x%08X, whole 0x%08X", name, cut, two, whole);
  }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint8_t rng_byte(void) {
  return (uint8_t)(test_xorshift64(&rng_state) >> 24);
}

int main(void) {
  check_known("mpiar__crc32c_portable", mpiar__crc32c_portable);
  check_known("mpiar__crc32c", mpiar__crc32c);
  printf("mpiar__crc32c uses %s\n", mpiar__crc32c_impl());
  KV_EXPECT(strcmp(mpiar__crc32c_impl(), MPIAR_HAVE_ISAL ? "isa-l" : "portable") == 0,
            "implementation %s does not follow MPIAR_HAVE_ISAL=%d", mpiar__crc32c_impl(),
            MPIAR_HAVE_ISAL);

  /* The dispatched CRC and the portable one agree everywhere (they are the same without ISA-L). */
  static unsigned char data[(1 << 20) + 16];
  for (size_t i = 0; i < sizeof data; i++) {
    data[i] = rng_byte();
  }
  for (size_t off = 0; off < 8; off++) {
    for (size_t len = 0; len <= 300; len++) {
      uint32_t seed = (uint32_t)(len * 2654435761u);
      uint32_t a = mpiar__crc32c_portable(seed, data + off, len);
      uint32_t b = mpiar__crc32c(seed, data + off, len);
      KV_EXPECT(a == b, "offset %zu length %zu: portable 0x%08X, dispatched 0x%08X", off, len, a,
                b);
    }
  }
  uint32_t a = mpiar__crc32c_portable(0, data + 3, sizeof data - 16);
  uint32_t b = mpiar__crc32c(0, data + 3, sizeof data - 16);
  KV_EXPECT(a == b, "1 MiB: portable 0x%08X, dispatched 0x%08X", a, b);
#if MPIAR_HAVE_ISAL
  check_known("mpiar__crc32c_isal", mpiar__crc32c_isal);
  a = mpiar__crc32c_isal(7, data + 5, sizeof data - 16);
  b = mpiar__crc32c_portable(7, data + 5, sizeof data - 16);
  KV_EXPECT(a == b, "1 MiB from seed 7: isa-l 0x%08X, portable 0x%08X", a, b);
#endif
  printf("crc32c: all checks passed\n");
  return 0;
}
