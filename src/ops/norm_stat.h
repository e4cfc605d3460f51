/* norm_stat.h - typed float32/float64 loops of InstanceNormalization, GroupNormalization,
 * MeanVarianceNormalization, LpNormalization and LRN (norm_stat.c), for norm.c's kernels.
 *
 * Each computes what norm.c's rt_get/rt_set walk computes, in double, in the same order, so the
 * bits are the same (but which of two NaNs a result carries: the compiler's operand order). Each
 * returns 1 where a tensor is neither float32 nor float64 (the caller walks it), else 0; MVN -1
 * when out of memory. */
#ifndef GD_NORM_STAT_H
#define GD_NORM_STAT_H

#include "../exec/exec.h"

#include <stdint.h>

/* planes contiguous planes of len elements of a, each normalised by its mean and population
 * variance: y = (x - mean) / sqrt(var + eps) * scale[e] + bias[e], where the element at j of plane
 * p takes e = p % groups * (len / sub) + j / sub (InstanceNormalization: groups C, sub len;
 * GroupNormalization: groups G, sub the spatial size per channel (opset 21) or len (18)). */
int norm_stat_planes(struct rtensor *y, const struct rtensor *a, const struct rtensor *scale,
		     const struct rtensor *bias, int64_t planes, int64_t len, int64_t sub, int64_t groups, double eps);
/* a viewed (outer, len, inner), each line along len divided by its L1 (p 1) or L2 norm */
int norm_stat_lp(struct rtensor *y, const struct rtensor *a, int64_t outer, int64_t len, int64_t inner, int p);
/* a viewed (N, C, inner): x / (bias + alpha / size * sum(x^2))^beta, the sum over the channels
 * c - (size - 1) / 2 .. c + size / 2 that exist, in that order */
int norm_stat_lrn(struct rtensor *y, const struct rtensor *a, int64_t C, int64_t size, double alpha, double beta,
		  double bias);
/* (x - mean) / (sqrt(var) + 1e-9) over the axes d with red[d], var = E[x^2] - E[x]^2, each sum in
 * the elements' C order (MeanVarianceNormalization) */
int norm_stat_mvn(struct rtensor *y, const struct rtensor *a, const uint8_t *red);

#endif
