/* hash.h - 64-bit fingerprints of bytes and of structured data, for comparing what two processes
 * hold without sending it (exec/agree.c: do the ranks of an MPI run hold the same graph and
 * parameters?).
 *
 * Not cryptographic: the differences it is meant to find are accidents (a stale file, another
 * option), not an adversary's collisions. hash_bytes reads 32 bytes a round in four independent
 * lanes (each a multiply-rotate-multiply of its 8-byte word, so the multiplies overlap), then folds
 * the lanes, the tail and the length through a final avalanche: gigabytes of parameters hash at
 * several GB/s. A value is hashed by chaining: h = hash_u64(h, field), h = hash_str(h, name). */
#ifndef GD_HASH_H
#define GD_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
/* h extended by v: every bit of both moves every bit of the result. */
uint64_t hash_u64(uint64_t h, uint64_t v);
/* h extended by a string; NULL (absent) hashes apart from "" */
uint64_t hash_str(uint64_t h, const char *s);

#endif
