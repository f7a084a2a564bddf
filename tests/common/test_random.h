/*
 * The tests' generators, each advancing the state it is given, so that a fixed seed makes every
 * failure reproducible: xorshift64 (shifts 13, 7, 17), xorshift64* and splitmix64, and the
 * splitmix64 finalizer as a stateless mixing function.
 */
#ifndef MPIAR_TEST_RANDOM_H
#define MPIAR_TEST_RANDOM_H

#include <stdint.h>

static inline uint64_t test_xorshift64(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static inline uint64_t test_xorshift64star(uint64_t *x) {
  *x ^= *x >> 12;
  *x ^= *x << 25;
  *x ^= *x >> 27;
  return *x * 0x2545F4914F6CDD1Dull;
}

/* splitmix64's output for the state @p x (values look random, neighbours unrelated). */
static inline uint64_t test_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static inline uint64_t test_splitmix64(uint64_t *x) {
  uint64_t z = test_mix64(*x);
  *x += 0x9E3779B97F4A7C15ull;
  return z;
}

#endif /* MPIAR_TEST_RANDOM_H */
