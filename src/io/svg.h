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
	/* The steps of `after` that run before's steps, ascending (`after` runs before's nodes in
	 * their order, recompute segments between them); NULL: the same step numbers. */
	const uint32_t *before_at;
	uint32_t backward_step;         /* the first step of `after` past the forward pass; 0: not marked */
	const char *before_name, *after_name; /* the legend's names (NULL: "before", "after") */
};

/* Both schedules on one x axis, the steps of `after`: a node both run is at the same x in both
 * curves; the y axis in round multiples (1, 2, 5 x 10^k) of one binary unit, with gridlines; the
 * forward/backward boundary, the recompute segments shaded, the checkpoints ticked, the budget as a
 * dashed line, each peak marked with its size, and a legend. Deterministic for the same input. */
void svg_timeline(FILE *f, const struct timeline *t);

#endif
