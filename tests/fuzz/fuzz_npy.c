/* fuzz_npy.c - libFuzzer target for the .npy reader (YAML params may name .npy files). */
#include "io/npy.h"

#include <stddef.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct npy n;
	struct gd_err e = {0};
	if (npy_parse(data, size, &n, &e) == 0) {
		/* a parsed array lies inside the input */
		if (n.data < data || n.nbytes > size || (size_t)(n.data - data) > size - n.nbytes)
			__builtin_trap();
	} else if (!e.msg[0]) {
		__builtin_trap();
	}
	return 0;
}
