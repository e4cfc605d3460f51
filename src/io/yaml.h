/* yaml.h - graphdiet's YAML text form of a graph; the format is documented in graphdiet-yaml(5). */
#ifndef GD_YAML_H
#define GD_YAML_H

#include "../ir/graph.h"

#include <stdio.h>

#define YAML_FORMAT_VERSION 1
/* The most a YAML model may be, read or written: any ONNX model's weights as base64 (4/3 of 2 GiB)
 * with room for its nodes. A larger file is refused before it is read (a 4 GiB one took 19-40 s
 * and 4.1 GB of memory to fail); weights beyond it go in .npy files. */
#define YAML_FILE_MAX ((size_t)3 << 30)

/* Parses YAML text; relative .npy paths resolve against base_dir. Not yet checked or sorted. */
struct graph *yaml_read(const uint8_t *buf, size_t len, const char *path, const char *base_dir,
			struct gd_err *e);
/* Writes g. Tensors of up to `inline_max` elements are written as number lists, larger ones as
 * base64 of their bytes; external, .npy and random initializers stay references. */
int yaml_write(struct graph *g, FILE *f, size_t inline_max, struct gd_err *e);

#endif
