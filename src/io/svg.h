/* svg.h - pictures as SVG: live memory over a training step's schedule. */
#ifndef GD_SVG_H
#define GD_SVG_H

#include <stdint.h>
#include <stdio.h>

struct timeline {
	const char *title;
	const uint64_t *before, *after; /* live bytes after each step's outputs are allocated */
	uint32_t n_before, n_after;
	const uint32_t *marks;          /* steps of `after` that make a checkpoint */
	uint32_t n_marks;
	const uint32_t *band_first, *band_len; /* recompute segments in `after` */
	uint32_t n_bands;
	uint64_t budget;                /* 0: none */
};

/* Both schedules on one axis of schedule position (0 to 1), the peaks labelled, the recompute
 * segments shaded, the checkpoints ticked and the budget drawn as a line. */
void svg_timeline(FILE *f, const struct timeline *t);

#endif
