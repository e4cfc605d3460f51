/* hash.c - 64-bit fingerprints; see hash.h. */
#include "hash.h"

#include <string.h>

#define K0 0x9e3779b97f4a7c15ull /* 2^64 / golden ratio */
#define K1 0xc2b2ae3d27d4eb4full
#define K2 0x165667b19e3779f9ull
#define K3 0xd6e8feb86659fd93ull

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v); /* the machine's order: ranks of one run share it */
	return v;
}

/* splitmix64's finalizer: each input bit flips each output bit with probability near 1/2 */
static inline uint64_t avalanche(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t lane(uint64_t acc, uint64_t w)
{
	return rotl(acc + w * K1, 31) * K0;
}

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = p;
	uint64_t a0 = seed + K0, a1 = seed ^ K1, a2 = seed - K2, a3 = ~seed ^ K3;
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		a0 = lane(a0, load64(b + i));
		a1 = lane(a1, load64(b + i + 8));
		a2 = lane(a2, load64(b + i + 16));
		a3 = lane(a3, load64(b + i + 24));
	}
	uint64_t h = rotl(a0, 1) + rotl(a1, 7) + rotl(a2, 12) + rotl(a3, 18);
	for (; i + 8 <= n; i += 8)
		h = lane(h, load64(b + i));
	if (i < n) {
		unsigned char t[8] = {0};
		memcpy(t, b + i, n - i);
		h = lane(h, load64(t) ^ ((uint64_t)(n - i) << 59));
	}
	return avalanche(h ^ (uint64_t)n * K2);
}

uint64_t hash_u64(uint64_t h, uint64_t v)
{
	return avalanche(rotl(h, 23) * K3 ^ (v + K0));
}

uint64_t hash_str(uint64_t h, const char *s)
{
	return s ? hash_u64(h, hash_bytes(s, strlen(s), 1)) : hash_u64(h, K2);
}
