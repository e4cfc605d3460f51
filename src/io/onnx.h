/* onnx.h - ONNX binary reader and writer (protobuf-c over proto/onnx.proto). */
#ifndef GD_ONNX_H
#define GD_ONNX_H

#include "../ir/graph.h"

#include <stdio.h>

/* Decodes a serialized ModelProto. `buf` must stay valid until the graph is freed (initializer
 * bytes point into it); `keep`, when not NULL, is called from graph_free to release it. The graph
 * is not yet checked or sorted. */
struct graph *onnx_read(const uint8_t *buf, size_t len, const char *path, const char *base_dir,
			void (*keep)(void *), void *keep_arg, struct gd_err *e);
/* Encodes g as a ModelProto on f. NPY and random initializers are materialised; external data
 * stays external. */
int onnx_write(struct graph *g, FILE *f, struct gd_err *e);

#endif
