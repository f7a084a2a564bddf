/*
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF),
 * the checksum of kvstore checkpoints. "123456789" has the check value 0xE3069283.
 *
 * Two implementations give the same values: ISA-L's crc32_iscsi when the build has ISA-L
 * (MPIAR_HAVE_ISAL=1), and a portable table-driven slice-by-8 version otherwise. Both are
 * exposed so that a test can compare them.
 */
#ifndef MPIAR_KV_CRC32C_H
#define MPIAR_KV_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC32C: crc is the CRC32C of the bytes before @p data (0 for none), and the result
 * is the CRC32C of those bytes followed by @p data, so mpiar__crc32c(mpiar__crc32c(0, a), b) is
 * the CRC32C of a followed by b.
 */
uint32_t mpiar__crc32c(uint32_t crc, const void *data, size_t len);

/* The portable slice-by-8 implementation (same contract). */
uint32_t mpiar__crc32c_portable(uint32_t crc, const void *data, size_t len);

/* ISA-L's implementation behind the same contract; only in builds with ISA-L. */
#if MPIAR_HAVE_ISAL
uint32_t mpiar__crc32c_isal(uint32_t crc, const void *data, size_t len);
#endif

/* @return "isa-l" or "portable": the implementation mpiar__crc32c() uses. */
const char *mpiar__crc32c_impl(void);

#endif /* MPIAR_KV_CRC32C_H */
