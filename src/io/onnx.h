/* onnx.h - ONNX binary reader and writer (protobuf-c over proto/onnx.proto). */
#ifndef GD_ONNX_H
#define GD_ONNX_H

#include "../ir/graph.h"

#include <stdint.h>
#include <stdio.h>

/* The most an ONNX file may be: one protobuf message, which protobuf caps at 2 GiB (weights beyond
 * that go in external data). Larger files are refused before they are read, larger outputs before
 * their weights are generated. */
#define ONNX_FILE_MAX ((size_t)INT32_MAX)

/* Decodes a serialized ModelProto. `buf` must stay valid until the graph is freed (initializer
 * bytes point into it); `keep`, when not NULL, is called from graph_free to release it. The graph
 * is not yet checked or sorted. */
struct graph *onnx_read(const uint8_t *buf, size_t len, const char *path, const char *base_dir,
			void (*keep)(void *), void *keep_arg, struct gd_err *e);
/* Decodes a serialized TensorProto (ONNX's backend tests store their inputs and outputs so) into
 * a tensor allocated in `a`, its bytes there too (src TSRC_BYTES, or TSRC_STRINGS, or TSRC_NONE
 * when it holds no data). External data is refused. NULL on an error. */
struct arena;
struct tensor *onnx_read_tensor(const uint8_t *buf, size_t len, struct arena *a, struct gd_err *e);
/* Encodes g as a ModelProto on f. NPY and random initializers are materialised; external data
 * stays external. */
int onnx_write(struct graph *g, FILE *f, struct gd_err *e);
/* The same with each raw-data initializer's bytes at a file offset that is a multiple of `align`
 * (at most 8; a longer data_type varint moves them), where f is a regular file: a reader that maps
 * the file then uses them in place. Elsewhere (a pipe) it writes what onnx_write writes. */
int onnx_write_aligned(struct graph *g, FILE *f, unsigned align, struct gd_err *e);

#endif
