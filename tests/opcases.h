/* opcases.h - the op cases (opcases.c): a graph per op variant, with broadcasting and the attribute
 * variants the kernels and gradient rules distinguish. */
#ifndef GD_TEST_OPCASES_H
#define GD_TEST_OPCASES_H

#include "ir/graph.h"

#include <stddef.h>

struct gcase {
	const char *name;   /* ending "(opset N)": the model's opset is N (an op of a later opset), else 17 */
	const char *params; /* YAML list entries for params: (float64, random) and constants */
	const char *nodes;  /* YAML list entries producing float64 `y` */
};

extern const struct gcase op_cases[];
extern const size_t n_op_cases;

/* The case's graph with its loss, in dtype ("float64", "float32"): checked and sorted. */
struct graph *op_case_graph(const struct gcase *c, const char *dtype);

#endif
