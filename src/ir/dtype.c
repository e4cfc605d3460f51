/* dtype.c - the element type table. One row per ONNX data type; nothing else in graphdiet
 * keeps its own list of type names or sizes. */
#include "dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *name, *onnx, *npy;
	unsigned char size, is_float;
} table[DT_COUNT] = {
	[DT_UNDEFINED] = {"undefined", "UNDEFINED", NULL, 0, 0},
	[DT_FLOAT] = {"float32", "FLOAT", "<f4", 4, 1},
	[DT_UINT8] = {"uint8", "UINT8", "|u1", 1, 0},
	[DT_INT8] = {"int8", "INT8", "|i1", 1, 0},
	[DT_UINT16] = {"uint16", "UINT16", "<u2", 2, 0},
	[DT_INT16] = {"int16", "INT16", "<i2", 2, 0},
	[DT_INT32] = {"int32", "INT32", "<i4", 4, 0},
	[DT_INT64] = {"int64", "INT64", "<i8", 8, 0},
	[DT_STRING] = {"string", "STRING", NULL, 0, 0},
	[DT_BOOL] = {"bool", "BOOL", "|b1", 1, 0},
	[DT_FLOAT16] = {"float16", "FLOAT16", "<f2", 2, 1},
	[DT_DOUBLE] = {"float64", "DOUBLE", "<f8", 8, 1},
	[DT_UINT32] = {"uint32", "UINT32", "<u4", 4, 0},
	[DT_UINT64] = {"uint64", "UINT64", "<u8", 8, 0},
	[DT_COMPLEX64] = {"complex64", "COMPLEX64", "<c8", 8, 0},
	[DT_COMPLEX128] = {"complex128", "COMPLEX128", "<c16", 16, 0},
	[DT_BFLOAT16] = {"bfloat16", "BFLOAT16", NULL, 2, 1},
	[DT_FLOAT8E4M3FN] = {"float8e4m3fn", "FLOAT8E4M3FN", NULL, 1, 1},
	[DT_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", "FLOAT8E4M3FNUZ", NULL, 1, 1},
	[DT_FLOAT8E5M2] = {"float8e5m2", "FLOAT8E5M2", NULL, 1, 1},
	[DT_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", "FLOAT8E5M2FNUZ", NULL, 1, 1},
};

int dtype_valid(int dt)
{
	return dt > DT_UNDEFINED && dt < DT_COUNT;
}

size_t dtype_size(enum dtype dt)
{
	return dt >= 0 && dt < DT_COUNT ? table[dt].size : 0;
}

const char *dtype_name(enum dtype dt)
{
	return dt >= 0 && dt < DT_COUNT ? table[dt].name : "undefined";
}

int dtype_is_float(enum dtype dt)
{
	return dt >= 0 && dt < DT_COUNT && table[dt].is_float;
}

int dtype_from_name(const char *name)
{
	for (int i = 0; i < DT_COUNT; i++)
		if (strcmp(name, table[i].name) == 0 || strcasecmp(name, table[i].onnx) == 0)
			return i;
	if (strcmp(name, "double") == 0)
		return DT_DOUBLE;
	if (strcmp(name, "half") == 0)
		return DT_FLOAT16;
	return -1;
}

const char *dtype_npy(enum dtype dt)
{
	return dt >= 0 && dt < DT_COUNT ? table[dt].npy : NULL;
}

int dtype_from_npy(const char *descr)
{
	for (int i = 0; i < DT_COUNT; i++) {
		const char *d = table[i].npy;
		/* "|u1" and "<u1" both mean one byte; '=' is native order, little-endian here. */
		if (d && (strcmp(descr, d) == 0 || (strlen(descr) == strlen(d) && strcmp(descr + 1, d + 1) == 0 &&
						      (descr[0] == '=' || descr[0] == '<' || descr[0] == '|'))))
			return i;
	}
	return -1;
}

/* ---- 16-bit floats ----
 * binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits; bfloat16: float32's top 16 bits. */

static uint32_t bits_of(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	return x;
}

static float float_of(uint32_t x)
{
	float f;
	memcpy(&f, &x, sizeof f);
	return f;
}

uint16_t f16_from_f32(float f)
{
	uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
	if (ax > 0x7f800000) /* NaN: quiet, top payload bits */
		return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x1ff));
	if (ax >= 0x477ff000) /* 65520 and up (ties to even 65536): infinity */
		return (uint16_t)(sign | 0x7c00);
	if (ax < 0x38800000) /* under 2^-14: a subnormal in units of 2^-24 (1024 of them is 2^-14) */
		return (uint16_t)(sign | (uint32_t)nearbyintf(float_of(ax) * 16777216.0f));
	/* rebias the exponent (127 -> 15), then drop 13 fraction bits rounding to even; a carry out of
	 * the fraction steps the exponent, as it should */
	uint32_t r = ax - ((uint32_t)112 << 23);
	r += 0xfff + ((r >> 13) & 1);
	return (uint16_t)(sign | (r >> 13));
}

float f32_from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0) {
		float v = ldexpf((float)m, -24);
		return sign ? -v : v;
	}
	return float_of(sign | (e == 31 ? 0x7f800000 | (m << 13) : ((e + 112) << 23) | (m << 13)));
}

uint16_t bf16_from_f32(float f)
{
	uint32_t x = bits_of(f);
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

float f32_from_bf16(uint16_t h)
{
	return float_of((uint32_t)h << 16);
}

int dtype_is_half(int dt)
{
	return dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}
