/* dtype.h - element types, numbered as ONNX TensorProto.DataType numbers them. */
#ifndef GD_DTYPE_H
#define GD_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum dtype {
	DT_UNDEFINED = 0,
	DT_FLOAT = 1,
	DT_UINT8 = 2,
	DT_INT8 = 3,
	DT_UINT16 = 4,
	DT_INT16 = 5,
	DT_INT32 = 6,
	DT_INT64 = 7,
	DT_STRING = 8,
	DT_BOOL = 9,
	DT_FLOAT16 = 10,
	DT_DOUBLE = 11,
	DT_UINT32 = 12,
	DT_UINT64 = 13,
	DT_COMPLEX64 = 14,
	DT_COMPLEX128 = 15,
	DT_BFLOAT16 = 16,
	DT_FLOAT8E4M3FN = 17,
	DT_FLOAT8E4M3FNUZ = 18,
	DT_FLOAT8E5M2 = 19,
	DT_FLOAT8E5M2FNUZ = 20,
	DT_COUNT
};

int dtype_valid(int dt);                /* a known type, DT_UNDEFINED excluded */
size_t dtype_size(enum dtype dt);       /* bytes per element; 0 for STRING and UNDEFINED */
const char *dtype_name(enum dtype dt);  /* "float32", ...; "undefined" */
int dtype_from_name(const char *name);  /* -1 if unknown; accepts ONNX upper-case names too */
const char *dtype_npy(enum dtype dt);   /* NumPy descr such as "<f4"; NULL when NumPy has none */
int dtype_from_npy(const char *descr);  /* -1 if unknown */
int dtype_is_float(enum dtype dt);

/* The 16-bit floats the executor stores (it computes in float32): IEEE binary16 and bfloat16,
 * rounded to nearest, ties to even. NaN stays NaN (quiet, its sign and top payload bits kept),
 * and what is past the largest finite value after rounding becomes infinity. */
uint16_t f16_from_f32(float f);
float f32_from_f16(uint16_t h);
uint16_t bf16_from_f32(float f);
float f32_from_bf16(uint16_t h);
/* float16 or bfloat16: the dtypes stored narrow and computed in float32 */
int dtype_is_half(int dt);

#endif
