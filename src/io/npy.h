/* npy.h - NumPy .npy files (format versions 1-3), C order, little-endian. */
#ifndef GD_NPY_H
#define GD_NPY_H

#include "../util/err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPY_MAX_DIMS 32

struct npy {
	int dtype; /* enum dtype */
	uint32_t ndim;
	int64_t dims[NPY_MAX_DIMS];
	const uint8_t *data; /* into the buffer given to npy_parse */
	size_t nbytes;
};

int npy_parse(const uint8_t *buf, size_t len, struct npy *out, struct gd_err *e);
int npy_write(FILE *f, int dtype, uint32_t ndim, const int64_t *dims, const void *data, size_t nbytes);

#endif
