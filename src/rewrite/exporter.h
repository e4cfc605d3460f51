/* exporter.h - what an exporter meant, stated in standard ops where the ONNX op says otherwise.
 *
 * PyTorch's F.interpolate(..., scale_factor=s, align_corners=True) resizes to floor(n s) elements
 * and maps their corners onto the input's, as if the sizes had been given; its export writes the
 * scales, whose align_corners transformation (the spec's, onnxruntime's, graphdiet's) divides by the
 * unrounded n s - 1 instead. For a model PyTorch produced, such a Resize reads sizes computed in the
 * graph, Cast(Cast(Shape(X), double) * Cast(scales, double), int64) (floor, for these positive
 * lengths), so that graphdiet, onnxruntime and PyTorch compute the same on the training graph's
 * file. (BatchNormalization's running variance, the other such case, is rewrite/step.c's.) */
#ifndef GD_EXPORTER_H
#define GD_EXPORTER_H

#include "../ir/graph.h"

/* Rewrites g's nodes as above; *n_done their number. g stays sorted. */
int exporter_semantics(struct graph *g, size_t *n_done, struct gd_err *e);

#endif
