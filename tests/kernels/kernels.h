/* kernels.h - what test_kernels' files share: #52's kernel tests, one file per op family, each
 * fast path (typed loops, vector clones, pieces over the pool) against a reference written in the
 * test. They were test_exec.c's second half; test_exec.c keeps the executor's own tests. */
#ifndef GD_TEST_KERNELS_H
#define GD_TEST_KERNELS_H
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "io/npy.h"
#include "opcases.h"
#include "ops/blas.h"
#include "ops/sgemm.h"
#include "ops/vmath.h"
#include "util/philox.h"
#include "util/pool.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One node over inputs named x, r, v (the first n of ts), run at th threads: its graph, its run
 * and its output y, until shape_done. */
struct shape_run {
	struct graph *g;
	struct exec *x;
	const struct rtensor *y;
};
void shape_run(struct shape_run *s, const char *node, struct rtensor *ts, int n, int th);
void shape_done(struct shape_run *s);
/* A tensor of dtype dt and dims[0 .. nd) over data (not copied). */
struct rtensor shape_tensor(int dt, int nd, const int64_t *dims, void *data);

/* a one-node graph `node` over x of dtype dt and shape dims (data p), run; its output y */
struct exec *rf_run(const char *node, const char *extra, int f64, int nd, const int64_t *dims, void *p,
		    struct graph **g, const struct rtensor **y);
/* test data: specials (NaNs with payloads 1..3 and both signs, zeros, infinities, subnormals,
 * huge) at random places among values of [-3, 3], some rows all zeros or all -inf, some rows
 * zeros among values of one sign, some rows finite values alone */
double rf_value(uint32_t *s, int64_t i, int64_t row_len);
/* Whether y[i] has r's bits; with any_nan, any NaN for a NaN: which of two NaNs a sum or a
 * product keeps is the compiler's operand order (x86 keeps the first's payload), here and in the
 * kernel alike: the sanitizer build's -O1 made the reference's L1 and AveragePool sums keep the
 * other payload than -O2 had */
int rf_same_nan(const struct rtensor *y, int64_t i, double r, int f64, int any_nan);
/* AveragePool by its definition: each window's elements inside the image summed in double from
 * +0 in row-major window order, over their count, or with count_include_pad over the window's
 * positions inside the padded image (the ceil_mode overhang beyond the pads not counted) */
double rf_avg(const double *v, int64_t h, int64_t w, const int64_t *k, const int64_t *st, const int64_t *d,
	      const int64_t *pad, int incl, int64_t oy, int64_t ox);
/* MaxPool by its definition: the window's elements inside the image in row-major window order, the
 * first taken, then each strictly greater one (a NaN wins only as the first; of +0 and -0 the
 * first), -inf for a window with none; its index in the plane into *arg (-1: none) where arg is not NULL */
double rf_max(const double *v, int64_t h, int64_t w, const int64_t *k, const int64_t *st, const int64_t *d,
	      const int64_t *pad, int64_t oy, int64_t ox, int64_t *arg);
/* n source elements of dtype dt: special values first, then random bits (NaN payloads, subnormals,
 * every float16 and bfloat16 pattern once their count allows) */
void cf_fill(int dt, void *data, int64_t n, uint64_t seed);
/* GridSample's rule along one axis (seq.c): grid value g over S pixels, padding pad (0 zeros, 1
 * border, 2 reflection), nearest or linear; the taps (-1: outside) into idx, their weights into w,
 * and their count */
int gsr_axis(int nearest, int pad, int align, double g, int64_t S, int64_t *idx, double *w);
/* The reference DietAdam quantize (diet.h; reduce.c): x / scale to nearest, ties to even (u < 0),
 * else floor(|y| + u) with y's sign; NaN 0; clamped to +-32767. */
int16_t ref_quantize(double x, double scale, double u);
/* DietAdam's kernel tests (elem.c, index.c): a graph of one factored DietAdam node (beta2 0.98, no
 * momentum, no schedule) over q (R x C int16) and g, rounding stochastic or nearest; and its run at
 * th threads from step 1 and zero moments: q' into qn, the node's Philox key into *key */
struct graph *diet_graph(int R, int C, double eps, double lr, double scale, int stochastic);
void diet_run(struct graph *gr, const int16_t *q, const float *g, int R, int C, int th, int16_t *qn, uint64_t *key);

/* an LRN node over t (named x) of size, alpha, beta and bias, run at th threads (elem.c, conv.c) */
void lrn_shape_run(struct shape_run *s, struct rtensor *t, int64_t size, double alpha, double beta, double bias, int th);

#endif
