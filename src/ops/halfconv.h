/* halfconv.h - float16 and bfloat16 conversions that vectorise: dtype.c's rules bit for bit, branch
 * free (each case computed, then picked), for typed loops (Cast in elementwise.c, the CPU backend's
 * widening of 16-bit inputs and narrowing of outputs in exec/cpu.c). float16 rounds to nearest
 * even, a NaN quiet with its top payload bits, 65520 and up infinity, under 2^-14 a subnormal
 * (x + 0.5 rounds x to units of 2^-24 as nearbyintf(x 2^24) does); widening keeps every bit
 * (a signalling NaN stays signalling, as f32_from_f16). */
#ifndef GD_HALFCONV_H
#define GD_HALFCONV_H

#include "vmath.h"

/* o = the n elements of p converted: float16 or bfloat16 (dt) to float32, or with narrow float32
 * to dt, over the pool (halfconv.c) */
void half_convert(const void *p, void *o, int64_t n, int dt, int narrow);

static inline uint32_t cf_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline uint16_t cf_f16(float f)
{
	uint32_t x = cf_bits(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
	uint32_t nan = 0x7e00 | ((ax >> 13) & 0x1ff), sub = cf_bits(vm_bits_float(ax) + 0.5f) - 0x3f000000;
	uint32_t r = ax - ((uint32_t)112 << 23);
	r = (r + 0xfff + ((r >> 13) & 1)) >> 13;
	r = ax < 0x38800000 ? sub : r;
	r = ax >= 0x477ff000 ? 0x7c00 : r;
	return (uint16_t)(sign | (ax > 0x7f800000 ? nan : r));
}

static inline float cf_from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	uint32_t norm = e == 31 ? 0x7f800000 | (m << 13) : ((e + 112) << 23) | (m << 13);
	uint32_t sub = cf_bits((float)m * 0x1p-24f);
	return vm_bits_float(sign | (e ? norm : sub));
}

static inline uint16_t cf_bf16(float f)
{
	uint32_t x = cf_bits(f);
	return (uint16_t)((x & 0x7fffffff) > 0x7f800000 ? (x >> 16) | 0x40 : (x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline float cf_from_bf16(uint16_t h)
{
	return vm_bits_float((uint32_t)h << 16);
}

#endif
