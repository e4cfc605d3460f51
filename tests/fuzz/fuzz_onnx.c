/* fuzz_onnx.c - libFuzzer target for the ONNX reader: read, check, sort, write back.
 * Any input must give a graph or a clean error status; ASan/UBSan catch the rest. */
#include "io/onnx.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	struct gd_err e = {0};
	struct graph *g = onnx_read(data, size, "fuzz", "/nonexistent", NULL, NULL, &e);
	if (!g) {
		if (!e.code || !e.msg[0])
			__builtin_trap(); /* every failure must say why */
		return 0;
	}
	if (!graph_check(g, &e) && !graph_toposort(g, &e))
		onnx_write(g, sink, &e);
	else if (!e.msg[0])
		__builtin_trap();
	graph_free(g);
	return 0;
}
