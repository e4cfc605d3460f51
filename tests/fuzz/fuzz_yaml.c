/* fuzz_yaml.c - libFuzzer target for the YAML reader: read, check, sort, write YAML back.
 * Writing ONNX is left out: it materialises random inits, whose size the input chooses. */
#include "io/yaml.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	struct gd_err e = {0};
	struct graph *g = yaml_read(data, size, "fuzz", "/nonexistent", &e);
	if (!g) {
		if (!e.code || !e.msg[0])
			__builtin_trap();
		return 0;
	}
	if (!graph_check(g, &e) && !graph_toposort(g, &e))
		yaml_write(g, sink, 16, &e);
	else if (!e.msg[0])
		__builtin_trap();
	graph_free(g);
	return 0;
}
