/* tensor.h - getting at initializer bytes, wherever they are stored. */
#ifndef GD_TENSOR_H
#define GD_TENSOR_H

#include "../ir/graph.h"

/* The tensor's element bytes (little-endian, C order). BYTES data is returned where it is; external
 * and .npy files are mapped on first use and stay mapped until `g` (any graph of the model) is
 * freed; random inits are generated into the arena. Nothing is read before this is called. */
int tensor_bytes(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e);
/* Readers call this on each initializer: a file reference must stay inside the model's directory
 * and name a readable file. Nothing is read. */
int tensor_check_source(const struct tensor *t, struct gd_err *e);
/* A generated (zeros, ones, constant, random) tensor's shape is known and its bytes at most 1 TiB,
 * the cap on generating; 0 for other tensors. Nothing is generated. */
int tensor_check_generated(const struct tensor *t, struct gd_err *e);

#endif
