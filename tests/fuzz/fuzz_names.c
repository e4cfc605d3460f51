/* fuzz_names.c - libFuzzer target for the --checkpoint-file reader: any input gives a list of
 * NUL-free names or a clean error. */
#include "io/names.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct names n;
	struct gd_err e = {0};
	if (names_parse(data, size, &n, &e)) {
		if (!e.msg[0])
			__builtin_trap();
		return 0;
	}
	for (size_t i = 0; i < n.n; i++)
		if (!n.v[i] || !n.v[i][0])
			__builtin_trap();
	names_free(&n);
	return 0;
}
