/* dtype.c - the element type table. One row per ONNX data type; nothing else in graphdiet
 * keeps its own list of type names or sizes. */
#include "dtype.h"

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
