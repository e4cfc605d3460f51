/* conv_nd.c - windows of any rank: Conv, ConvTranspose, MaxPool and AveragePool over (N, C, d1 ..
 * dr) inputs in the forms conv.c's 1-D and 2-D kernels do not take (3-D volumes and up, MaxPool on
 * integers, MaxPool's column-major Indices), with their gradient rules in standard ONNX ops;
 * LpPool; and MaxUnpool, which needs no window kernel of its own.
 *
 * The geometry is conv.c's, axis by axis (ONNX operator docs):
 *   out_i = floor((in_i + pad_begin_i + pad_end_i - d_i (k_i - 1) - 1) / s_i) + 1   (ceil: ceil_mode)
 * and for ConvTranspose out_i = s_i (in_i - 1) + output_padding_i + d_i (k_i - 1) + 1 - pads, or
 * output_shape, whose total padding may be negative: the output then runs past the taps' reach and
 * the extra elements (at the end, as output_padding's) are zero (ONNX's convtranspose_output_shape).
 * Conv is im2col + GEMM per image and group: col (Cg K, P) holds each output position's patch (K the
 * kernel's taps, P the output positions, both row-major over their axes) and Y_g = W_g col;
 * ConvTranspose is its adjoint, col = W_g^T X_g added back by col2im. This is the readable
 * reference for the rarer ranks; conv.c keeps the tuned 1-D and 2-D paths. MaxPool's Indices are
 * flattened over the whole input, ((n C + c) d1 + i1) d2 + i2 ... (storage_order 1: the spatial
 * axes in column-major order, ((n C + c) dr + ir) ... + i1 (ONNX's reference)). */
#include "../autodiff/ad.h"
#include "blas.h"
#include "conv.h"
#include "kernel.h"
#include "vmath.h"
#include "../util/pool.h"
#include "../util/xalloc.h"

#include <math.h>
#include <string.h>

#define ND_MAX (RT_MAX_DIMS - 2)

struct nd_geom {
	int r; /* spatial axes */
	int64_t n, c, m, group;
	int64_t in[ND_MAX], out[ND_MAX], k[ND_MAX], s[ND_MAX], d[ND_MAX], pb[ND_MAX], pe[ND_MAX];
};

/* Window arithmetic in 128 bits, as in conv.c: a file's numbers reach 2^63 and products must be
 * refused, not wrap. */
__extension__ typedef __int128 wide;

static int nd_ints(const struct node *n, const char *name, int64_t dflt, size_t want, int64_t *v)
{
	size_t k;
	const int64_t *p = attr_ints(n, name, &k);
	for (size_t i = 0; i < want; i++)
		v[i] = p && k == want ? p[i] : dflt;
	return p && k != want ? -1 : 0;
}

static int64_t product(const int64_t *v, int r)
{
	int64_t p = 1;
	for (int i = 0; i < r; i++)
		p *= v[i];
	return p;
}

/* Strides, dilations, pads (explicit or auto_pad) and the output size along every axis; 0, or a
 * message in *why. */
static int nd_window(const struct node *n, struct nd_geom *g, enum conv_kind kind, const char **why)
{
	int r = g->r;
	int64_t pads[2 * ND_MAX], op[ND_MAX];
	if (nd_ints(n, "strides", 1, (size_t)r, g->s) || nd_ints(n, "dilations", 1, (size_t)r, g->d) ||
	    nd_ints(n, "pads", 0, 2 * (size_t)r, pads) || nd_ints(n, "output_padding", 0, (size_t)r, op))
		return *why = "strides, dilations and output_padding need an entry per spatial axis and pads two", -1;
	int upper = attr_str_is(n, "auto_pad", "SAME_UPPER", 0), lower = attr_str_is(n, "auto_pad", "SAME_LOWER", 0);
	int valid = attr_str_is(n, "auto_pad", "VALID", 0), ceil_mode = kind == CONV_POOL && attr_int(n, "ceil_mode", 0);
	size_t no;
	const int64_t *os = kind == CONV_TRANSPOSE ? attr_ints(n, "output_shape", &no) : NULL;
	if (os && no < (size_t)r)
		return *why = "output_shape needs an entry per spatial axis", -1;
	for (int i = 0; i < r; i++) {
		g->pb[i] = valid ? 0 : pads[i], g->pe[i] = valid ? 0 : pads[i + r];
		if (g->s[i] < 1 || g->d[i] < 1 || g->k[i] < 1 || g->pb[i] < 0 || g->pe[i] < 0 || op[i] < 0)
			return *why = "kernel, strides and dilations must be positive and pads not negative", -1;
		wide ek = (wide)g->d[i] * (g->k[i] - 1) + 1, out, t;
		if (kind == CONV_TRANSPOSE) {
			wide full = (wide)g->s[i] * (g->in[i] - 1) + op[i] + ek;
			if (os || upper || lower) {
				out = os ? os[no - (size_t)r + (size_t)i] : (wide)g->in[i] * g->s[i];
				t = full - out;
				/* the larger half at the start but for SAME_UPPER (the spec's output_shape
				 * rule); a negative total: the output reaches past the taps, the extra at the end */
				g->pb[i] = t < 0 ? 0 : (int64_t)(upper ? t / 2 : t - t / 2);
				g->pe[i] = (int64_t)(t - g->pb[i]);
			} else {
				out = full - g->pb[i] - g->pe[i];
			}
		} else if (upper || lower) {
			out = ((wide)g->in[i] + g->s[i] - 1) / g->s[i];
			t = (out - 1) * g->s[i] + ek - g->in[i];
			t = t > 0 ? t : 0;
			g->pb[i] = (int64_t)(upper ? t / 2 : t - t / 2), g->pe[i] = (int64_t)(t - g->pb[i]);
		} else {
			wide span = (wide)g->in[i] + g->pb[i] + g->pe[i] - ek;
			if (span < 0)
				return *why = "the window is larger than the padded input", -1;
			out = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
		}
		if (out < 1 || out > INT64_MAX / 2)
			return *why = "the output would be empty or does not fit in 64 bits", -1;
		g->out[i] = (int64_t)out;
	}
	return 0;
}

/* Node n's geometry over X (and W), checked. */
static int nd_geometry(struct exec *x, const struct node *n, struct rtensor *const *in, enum conv_kind kind,
		       struct nd_geom *g)
{
	const struct rtensor *a = in[0], *w = kind == CONV_POOL ? NULL : in[1];
	const struct rtensor *b = kind != CONV_POOL && n->n_in > 2 ? in[2] : NULL;
	const char *why;
	memset(g, 0, sizeof *g);
	if (a->ndim < 3)
		return exec_fail(x, "X must be (N, C, spatial...), not rank %d", a->ndim);
	g->r = a->ndim - 2, g->n = a->dims[0], g->c = a->dims[1];
	memcpy(g->in, a->dims + 2, (size_t)g->r * sizeof *g->in);
	size_t nk;
	const int64_t *ks = attr_ints(n, "kernel_shape", &nk);
	if (ks && nk != (size_t)g->r)
		return exec_fail(x, "kernel_shape must have %d entries", g->r);
	if (kind == CONV_POOL) {
		if (!ks)
			return exec_fail(x, "kernel_shape must be given");
		if (pool_pads_check(x, n, ks, nk))
			return exec_status(x);
		memcpy(g->k, ks, nk * sizeof *ks);
	} else {
		g->group = attr_int(n, "group", 1);
		int fwd = kind == CONV_FORWARD;
		if (!dtype_is_float(a->dtype) || w->ndim != a->ndim || w->dtype != a->dtype || g->group < 1 ||
		    g->c % g->group || (fwd ? w->dims[0] % g->group || w->dims[1] * g->group != g->c : w->dims[0] != g->c))
			return exec_fail(x, fwd ? "W must be (M, C/group, k...) with M and C divisible by group, X and W floats of one dtype"
						: "W must be (C, M/group, k...) with C divisible by group, X and W floats of one dtype");
		g->m = fwd ? w->dims[0] : w->dims[1] * g->group;
		memcpy(g->k, w->dims + 2, (size_t)g->r * sizeof *g->k);
		for (int i = 0; ks && i < g->r; i++)
			if (ks[i] != g->k[i])
				return exec_fail(x, "kernel_shape disagrees with W");
		if (b && (b->numel != g->m || b->dtype != a->dtype))
			return exec_fail(x, "B must have the %lld output channels", (long long)g->m);
	}
	if (nd_window(n, g, kind, &why))
		return exec_fail(x, "%s", why);
	return 0;
}

/* im2col (back 0): col (ch K, P) <- the patches of image (ch, img), elements of es bytes, 0
 * outside; col2im (back 1): image += the patches col, float32 or float64 (dt). Row by row: for a
 * tap and the outer axes of a position, the last axis's positions that land inside are one range
 * (conv_inside), read at stride s. */
static void nd_patches(const struct nd_geom *g, const int64_t *img, const int64_t *pos, int64_t ch, uint8_t *image,
		       uint8_t *col, size_t es, int dt, int back)
{
	int L = g->r - 1;
	int64_t K = product(g->k, g->r), P = product(pos, g->r), plane = product(img, g->r), ow = pos[L], s = g->s[L];
	for (int64_t t = 0; t < K; t++) {
		int64_t at0 = (t % g->k[L]) * g->d[L] - g->pb[L], lo, hi;
		conv_inside(at0, s, img[L], ow, &lo, &hi);
		for (int64_t q = 0; q < P / ow; q++) {
			int64_t row = 0, st = img[L], qq = q, tt = t / g->k[L];
			int inside = 1;
			for (int i = L - 1; i >= 0; i--) {
				int64_t v = (qq % pos[i]) * g->s[i] - g->pb[i] + (tt % g->k[i]) * g->d[i];
				qq /= pos[i], tt /= g->k[i];
				inside &= v >= 0 && v < img[i];
				row += v * st;
				st *= img[i];
			}
			for (int64_t c = 0; c < ch; c++) {
				int64_t ci = (c * K + t) * P + q * ow, ii = c * plane + row + at0; /* ox 0's */
				uint8_t *cr = col + ci * (int64_t)es;
				if (!back && !inside) {
					memset(cr, 0, (size_t)ow * es);
					continue;
				}
				if (!inside)
					continue;
				if (back && dt == DT_FLOAT)
					for (int64_t ox = lo; ox < hi; ox++)
						((float *)image)[ii + ox * s] += ((const float *)col)[ci + ox];
				else if (back)
					for (int64_t ox = lo; ox < hi; ox++)
						((double *)image)[ii + ox * s] += ((const double *)col)[ci + ox];
				if (back)
					continue;
				memset(cr, 0, (size_t)lo * es);
				if (es == 4) /* the bits copied: any 32- or 64-bit dtype */
					for (int64_t ox = lo; ox < hi; ox++)
						((uint32_t *)col)[ci + ox] = ((const uint32_t *)image)[ii + ox * s];
				else
					for (int64_t ox = lo; ox < hi; ox++)
						((uint64_t *)col)[ci + ox] = ((const uint64_t *)image)[ii + ox * s];
				memset(cr + hi * (int64_t)es, 0, (size_t)(ow - hi) * es);
			}
		}
	}
}

/* Images [i0, i1) of conv_nd_run, each thread in its own colb bytes of col: a piece of kernel_for. */
struct nd_job {
	const struct nd_geom *g;
	const struct rtensor *a, *w;
	uint8_t *y, *col;
	size_t colb;
	int fwd;
};

static void nd_images(void *arg, int64_t i0, int64_t i1)
{
	const struct nd_job *j = arg;
	const struct nd_geom *g = j->g;
	int dt = j->a->dtype;
	int64_t es = (int64_t)dtype_size(dt), cg = g->c / g->group, mg = g->m / g->group, K = product(g->k, g->r);
	int64_t pin = product(g->in, g->r), pout = product(g->out, g->r);
	uint8_t *col = j->col + pool_self() * j->colb;
	for (int64_t i = i0; i < i1; i++)
		for (int64_t gi = 0; gi < g->group; gi++) {
			uint8_t *xi = (uint8_t *)j->a->data + (i * g->c + gi * cg) * pin * es;
			uint8_t *yi = j->y + (i * g->m + gi * mg) * pout * es;
			const uint8_t *wg = (const uint8_t *)j->w->data + gi * mg * cg * K * es;
			if (j->fwd) { /* Y_g (mg, P) = W_g (mg, cg K) col (cg K, P) */
				nd_patches(g, g->in, g->out, cg, xi, col, (size_t)es, dt, 0);
				conv_gemm(dt, 0, mg, pout, cg * K, wg, col, yi);
			} else { /* col (mg K, Pin) = W_g^T, W_g stored (cg, mg K), times X_g (cg, Pin) */
				conv_gemm(dt, 1, mg * K, pin, cg, wg, xi, col);
				nd_patches(g, g->out, g->in, mg, yi, col, (size_t)es, dt, 1);
			}
		}
}

/* Conv (kind CONV_FORWARD) or ConvTranspose of any rank. Y (N, M, out...). */
int conv_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		enum conv_kind kind)
{
	const struct rtensor *a = in[0], *w = in[1], *b = n->n_in > 2 ? in[2] : NULL;
	struct nd_geom g;
	if (nd_geometry(x, n, in, kind, &g))
		return exec_status(x);
	struct rtensor copy[2];
	int64_t dims[RT_MAX_DIMS] = {g.n, g.m};
	memcpy(dims + 2, g.out, (size_t)g.r * sizeof *dims);
	uint8_t *y = exec_alloc_zero(x, out[0], a->dtype, g.r + 2, dims);
	if (!y)
		return exec_status(x);
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) /* a folded Transpose's view, read as a copy */
		if (in[k]->view && !(rc = exec_materialize(x, in[k], &copy[k])))
			*(k ? &w : &a) = &copy[k];
	size_t es = dtype_size(a->dtype);
	int64_t cg = g.c / g.group, mg = g.m / g.group, K = product(g.k, g.r);
	int64_t pin = product(g.in, g.r), pout = product(g.out, g.r);
	int fwd = kind == CONV_FORWARD;
	size_t colb = (size_t)((fwd ? cg : mg) * K * (fwd ? pout : pin)) * es;
	uint8_t *col = rc ? NULL : exec_scratch_raw(x, colb * (size_t)pool_threads()); /* written in full */
	rc = rc ? rc : !col ? exec_status(x) : 0;
	struct nd_job j = {&g, a, w, y, col, colb, fwd};
	if (!rc)
		kernel_for(g.n, 1, nd_images, &j);
	exec_scratch_free(x, col, colb * (size_t)pool_threads());
	for (int64_t i = 0; !rc && b && i < g.n * g.m; i++) {
		double v = rt_get(b, i % g.m);
		for (int64_t p = 0; p < pout && a->dtype == DT_FLOAT; p++)
			((float *)y)[i * pout + p] += (float)v;
		for (int64_t p = 0; p < pout && a->dtype != DT_FLOAT; p++)
			((double *)y)[i * pout + p] += v;
	}
	if (a == &copy[0])
		exec_scratch_free(x, copy[0].data, copy[0].nbytes);
	if (w == &copy[1])
		exec_scratch_free(x, copy[1].data, copy[1].nbytes);
	return rc;
}

/* Planes [nc0, nc1) of pool_nd_run: a piece of kernel_for. Per axis and output index o (tables
 * made once: tab + 3 off[i]), the window's taps inside the image are one range [lo, hi)
 * (conv_inside), and those inside the pads a count (count_include_pad's; the ceil_mode overhang is
 * outside both). The window walks its inside taps in row-major order, the last axis's as a run, so
 * ties go to the first, as in conv.c. */
struct pool_job {
	const struct nd_geom *g;
	const struct rtensor *a;
	struct rtensor *y;
	int64_t *idx, *tab, off[ND_MAX];
	int max, lp;
	double pw;
	int include_pad, colmajor;
};

static void pool_planes(void *arg, int64_t nc0, int64_t nc1)
{
	const struct pool_job *j = arg;
	const struct nd_geom *g = j->g;
	int r = g->r, L = r - 1;
	int64_t pin = product(g->in, r), pout = product(g->out, r), st[ND_MAX], cst[ND_MAX];
	for (int i = r - 1; i >= 0; i--)
		st[i] = i == r - 1 ? 1 : st[i + 1] * g->in[i + 1];
	for (int i = 0; i < r; i++) /* storage_order 1: column-major */
		cst[i] = i == 0 ? 1 : cst[i - 1] * g->in[i - 1];
	const float *af = j->a->dtype == DT_FLOAT ? j->a->data : NULL;
	for (int64_t nc = nc0; nc < nc1; nc++) {
		int64_t o[ND_MAX] = {0};
		for (int64_t p = 0; p < pout; p++) {
			int64_t at0[ND_MAX], lo[ND_MAX], hi[ND_MAX], t[ND_MAX], cnt = 1, padded = 1, arg = -1;
			for (int i = 0; i < r; i++) {
				const int64_t *e = j->tab + 3 * (j->off[i] + o[i]);
				at0[i] = o[i] * g->s[i] - g->pb[i], lo[i] = e[0], hi[i] = e[1], t[i] = e[0];
				cnt *= hi[i] - lo[i], padded *= e[2];
			}
			double acc = j->max ? -INFINITY : 0;
			for (int go = cnt > 0; go;) { /* the outer axes' taps; the last's as a run */
				int64_t base = nc * pin + at0[L];
				for (int i = 0; i < L; i++)
					base += (at0[i] + t[i] * g->d[i]) * st[i];
				for (int64_t tl = lo[L]; tl < hi[L]; tl++) {
					int64_t at = base + tl * g->d[L];
					double v = af ? af[at] : rt_get(j->a, at);
					if (j->max && (v > acc || arg < 0)) {
						acc = v;
						arg = at - nc * pin;
					} else if (!j->max) {
						acc += j->lp ? pow(fabs(v), j->pw) : v;
					}
				}
				int i = L - 1;
				while (i >= 0 && ++t[i] == hi[i])
					t[i] = lo[i], i--;
				go = i >= 0;
			}
			cnt = j->include_pad ? padded : cnt;
			rt_set(j->y, nc * pout + p, j->max ? acc : j->lp ? pow(acc, 1 / j->pw) : cnt ? acc / (double)cnt : 0);
			if (j->idx) {
				int64_t flat = 0; /* arg's spatial coordinates, row-major or column-major */
				for (int i = 0; i < r && arg >= 0; i++)
					flat += (arg / st[i] % g->in[i]) * (j->colmajor ? cst[i] : st[i]);
				j->idx[nc * pout + p] = nc * pin + flat;
			}
			for (int i = L; i >= 0 && ++o[i] == g->out[i]; i--)
				o[i] = 0;
		}
	}
}

/* ---- LpPool of p 1 and 2 over planes of float32 or float64 ----
 * Each output the generic loop's: the window's terms summed in double in its order (rows outer,
 * columns inner) from +0, then the root. The terms: |x| for p = 1, and for p = 2 of a float32 x
 * x * x in double, which is exact and so pow(|x|, 2)'s value (pow is within 1 ulp: an exact
 * result is returned exactly); a float64 x keeps pow. The root: p = 1's pow(s, 1) is s; p = 2's
 * pow(s, 0.5) into float32 is sqrt(s) rounded to float32 wherever both neighbours of sqrt(s) round
 * there too (pow and sqrt each lie within 1 ulp of the exact root, so they are at most one apart),
 * else pow's; a float64 output keeps pow. The exponents stay run-time values: GCC turns a literal
 * pow(x, 2.0) into x * x, which differs from pow in the last bit of some doubles (a float64 case
 * of exec/lp_pool_matches_its_definition_bit_for_bit caught it). bench_roofline, 8x64x48x48 3x3 /2
 * p = 2, 1 thread: 130 -> 1.6 ms. */
static inline float lp_root_f32(double s, double half)
{
	double r = sqrt(s);
	uint64_t b;
	memcpy(&b, &r, sizeof b);
	int64_t low = (int64_t)(b & 0x1fffffff) - 0x10000000; /* the bits float32 rounds away, from half */
	if (s == 0 || (r >= 0x1p-126 && r < 0x1p127 && (low > 1 || low < -1)))
		return (float)r;
	return (float)pow(s, half);
}

/* One output (oy, ox) of a plane: its window's terms, rows outer, then the root */
static inline __attribute__((always_inline)) void lp_one(const struct pool_job *j, const void *xp, void *yp, int64_t oy,
							int64_t ox, int f64, int p2)
{
	const struct nd_geom *g = j->g;
	const int64_t *ey = j->tab + 3 * (j->off[0] + oy), *ex = j->tab + 3 * (j->off[1] + ox);
	int64_t y0 = oy * g->s[0] - g->pb[0], x0 = ox * g->s[1] - g->pb[1];
	double acc = 0;
	for (int64_t ty = ey[0]; ty < ey[1]; ty++) {
		int64_t row = (y0 + ty * g->d[0]) * g->in[1] + x0;
		for (int64_t tx = ex[0]; tx < ex[1]; tx++) {
			int64_t at = row + tx * g->d[1];
			double v = f64 ? ((const double *)xp)[at] : (double)((const float *)xp)[at];
			acc += !p2 ? fabs(v) : f64 ? pow(fabs(v), j->pw) : v * v;
		}
	}
	if (f64)
		((double *)yp)[oy * g->out[1] + ox] = p2 ? pow(acc, 1 / j->pw) : acc;
	else
		((float *)yp)[oy * g->out[1] + ox] = p2 ? lp_root_f32(acc, 1 / j->pw) : (float)acc;
}

/* acc[b] += |x[b s]| (p2: x[b s]^2 in double) for b < n: one tap of a block of outputs whose
 * windows lie inside the input */
VM_CLONES static void lp_terms_f32(double *restrict acc, const float *restrict x, int64_t s, int64_t n, int p2)
{
	if (p2)
		for (int64_t b = 0; b < n; b++)
			acc[b] += (double)x[b * s] * (double)x[b * s];
	else
		for (int64_t b = 0; b < n; b++)
			acc[b] += fabs((double)x[b * s]);
}

VM_CLONES static void lp_terms_f64(double *restrict acc, const double *restrict x, int64_t s, int64_t n)
{
	for (int64_t b = 0; b < n; b++)
		acc[b] += fabs(x[b * s]);
}

#define LP_BLOCK 256

/* A plane: the outputs whose windows lie inside the input [ix0, ix1) of each row in blocks, tap by
 * tap across the block (each output's terms in the same order: pool_sum_run's registers at strides
 * 1 and 2 on AVX-512, its roots there too, a block with a root from pow left to lp_one; else the
 * compiled loop over acc), the others one by one. float64's p = 2 keeps pow per term, one by one.
 * bench_roofline, 8x64x48x48 3x3 /2 p = 2, 1 thread: 1.6 -> 0.70 ms. */
static inline __attribute__((always_inline)) void lp_plane(const struct pool_job *j, const void *xp, void *yp,
							  int64_t ix0, int64_t ix1, int f64, int p2)
{
	const struct nd_geom *g = j->g;
	int64_t ow = g->out[1], kw = g->k[1];
	double acc[LP_BLOCK];
	if (f64 && p2)
		ix0 = ix1 = ow;
	for (int64_t oy = 0; oy < g->out[0]; oy++) {
		const int64_t *ey = j->tab + 3 * (j->off[0] + oy);
		int64_t y0 = oy * g->s[0] - g->pb[0];
		for (int64_t ox = 0; ox < ix0; ox++)
			lp_one(j, xp, yp, oy, ox, f64, p2);
		for (int64_t o0 = ix0; o0 < ix1; o0 += LP_BLOCK) {
			int64_t nb = ix1 - o0 < LP_BLOCK ? ix1 - o0 : LP_BLOCK;
			int64_t kr = ey[1] > ey[0] ? ey[1] - ey[0] : 0, dr = g->d[0] * g->in[1], o = oy * ow + o0;
			int64_t at0 = kr ? (y0 + ey[0] * g->d[0]) * g->in[1] + o0 * g->s[1] - g->pb[1] : 0;
			const void *x0 = (const uint8_t *)xp + at0 * (f64 ? 8 : 4);
			int bad = pool_sum_run((uint8_t *)yp + o * (f64 ? 8 : 4), x0, f64, p2 ? POOL_RUN_L2 : POOL_RUN_L1, 1,
					       g->s[1], nb, kr, dr, kw, g->d[1], 1, 0, 0);
			for (int64_t b = 0; bad > 0 && b < nb; b++) /* a root from pow: lp_one's */
				lp_one(j, xp, yp, oy, o0 + b, f64, p2);
			if (bad >= 0)
				continue;
			for (int64_t b = 0; b < nb; b++)
				acc[b] = 0;
			for (int64_t ty = 0; ty < kr; ty++)
				for (int64_t tx = 0; tx < kw; tx++) {
					int64_t at = at0 + ty * dr + tx * g->d[1];
					if (f64)
						lp_terms_f64(acc, (const double *)xp + at, g->s[1], nb);
					else
						lp_terms_f32(acc, (const float *)xp + at, g->s[1], nb, p2);
				}
			for (int64_t b = 0; b < nb; b++)
				if (f64)
					((double *)yp)[o + b] = acc[b];
				else
					((float *)yp)[o + b] = p2 ? lp_root_f32(acc[b], 1 / j->pw) : (float)acc[b];
		}
		for (int64_t ox = ix1 > ix0 ? ix1 : ix0; ox < ow; ox++)
			lp_one(j, xp, yp, oy, ox, f64, p2);
	}
}

static void lp_planes(void *arg, int64_t nc0, int64_t nc1)
{
	const struct pool_job *j = arg;
	const struct nd_geom *g = j->g;
	int f64 = j->a->dtype == DT_DOUBLE, p2 = j->pw == 2;
	int64_t pin = g->in[0] * g->in[1], pout = g->out[0] * g->out[1], es = f64 ? 8 : 4, ix0 = 0, ix1;
	/* the columns whose windows lie inside: a run (the window moves right with the output) */
	while (ix0 < g->out[1] && j->tab[3 * (j->off[1] + ix0)] != 0)
		ix0++;
	for (ix1 = ix0; ix1 < g->out[1] && j->tab[3 * (j->off[1] + ix1)] == 0 && j->tab[3 * (j->off[1] + ix1) + 1] == g->k[1];)
		ix1++;
	if (ix1 == ix0 || j->tab[3 * (j->off[1] + ix0) + 1] != g->k[1])
		ix0 = ix1 = 0;
	for (int64_t nc = nc0; nc < nc1; nc++) {
		const uint8_t *xp = (const uint8_t *)j->a->data + nc * pin * es;
		uint8_t *yp = (uint8_t *)j->y->data + nc * pout * es;
		if (f64)
			p2 ? lp_plane(j, xp, yp, ix0, ix1, 1, 1) : lp_plane(j, xp, yp, ix0, ix1, 1, 0);
		else
			p2 ? lp_plane(j, xp, yp, ix0, ix1, 0, 1) : lp_plane(j, xp, yp, ix0, ix1, 0, 0);
	}
}

/* MaxPool (max 1), AveragePool (0) or LpPool (2: (sum |x|^p)^(1/p) over the window, pads adding
 * 0) of any rank and dtype (MaxPool: integers too, compared exactly up to 2^53); Indices as the
 * file comment says. */
int pool_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out, int max)
{
	const struct rtensor *a = in[0];
	struct nd_geom g;
	int lp = max == 2;
	double pw = lp ? (double)attr_int(n, "p", 2) : 1;
	max = max == 1;
	if (lp && pw < 1)
		return exec_fail(x, "p must be 1 or more");
	if (!max && !dtype_is_float(a->dtype))
		return exec_fail(x, "X must be a floating-point tensor, not %s", dtype_name(a->dtype));
	if (nd_geometry(x, n, in, CONV_POOL, &g))
		return exec_status(x);
	int64_t dims[RT_MAX_DIMS] = {g.n, g.c};
	memcpy(dims + 2, g.out, (size_t)g.r * sizeof *dims);
	void *y = exec_alloc(x, out[0], a->dtype, g.r + 2, dims); /* every output gets its shape first */
	int64_t *idx = max && n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], DT_INT64, g.r + 2, dims) : NULL;
	if (!y)
		return exec_status(x);
	struct pool_job j = {.g = &g, .a = a, .y = out[0], .idx = idx, .max = max, .lp = lp, .pw = pw,
			     .include_pad = attr_int(n, "count_include_pad", 0) != 0,
			     .colmajor = attr_int(n, "storage_order", 0) != 0};
	int64_t total = 0;
	for (int i = 0; i < g.r; i++)
		j.off[i] = total, total += g.out[i];
	if (!(j.tab = xcalloc((size_t)(3 * total), sizeof *j.tab)))
		return exec_fail(x, "out of memory");
	for (int i = 0; i < g.r; i++)
		for (int64_t o = 0; o < g.out[i]; o++) {
			int64_t *e = j.tab + 3 * (j.off[i] + o), at = o * g.s[i] - g.pb[i], plo, phi;
			conv_inside(at, g.d[i], g.in[i], g.k[i], &e[0], &e[1]);
			conv_inside(at + g.pb[i], g.d[i], g.in[i] + g.pb[i] + g.pe[i], g.k[i], &plo, &phi);
			e[2] = phi - plo;
		}
	int typed = lp && g.r == 2 && (pw == 1 || pw == 2) && (a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE);
	kernel_for(g.n * g.c, 1, typed ? lp_planes : pool_planes, &j);
	xfree(j.tab);
	return 0;
}

/* MaxUnpool's default output (N, C, spatial...): the shape MaxPool's geometry inverts to. */
static int unpool_dims(const struct node *n, const struct rtensor *a, int64_t *dims, const char **why)
{
	int r = a->ndim - 2;
	int64_t k[ND_MAX], s[ND_MAX], pads[2 * ND_MAX];
	dims[0] = a->dims[0], dims[1] = a->dims[1];
	if (r < 1 || r > ND_MAX || !attr_ints(n, "kernel_shape", &(size_t){0}) || nd_ints(n, "kernel_shape", 0, (size_t)r, k) ||
	    nd_ints(n, "strides", 1, (size_t)r, s) || nd_ints(n, "pads", 0, 2 * (size_t)r, pads))
		return *why = "X must be (N, C, spatial...) and kernel_shape, strides and pads have an entry (pads two) per spatial axis", -1;
	for (int i = 0; i < r; i++) {
		wide d = (wide)(a->dims[i + 2] - 1) * s[i] + k[i] - pads[i] - pads[i + r];
		if (k[i] < 1 || s[i] < 1 || pads[i] < 0 || pads[i + r] < 0 || d < 0 || d > INT64_MAX / 2)
			return *why = "kernel_shape and strides must be positive, pads not negative, and leave an output", -1;
		dims[i + 2] = (int64_t)d;
	}
	return 0;
}

/* y[iv[j]] = x[j] in order for n elements of 4 (8) bytes, each index in [0, m): the first j
 * whose is not, or -1 */
#define UNPOOL_SCATTER(name, T)                                                                         \
	static int64_t name(void *restrict y, const void *restrict x, const int64_t *restrict iv, int64_t n, \
			    int64_t m)                                                                  \
	{                                                                                               \
		for (int64_t j = 0; j < n; j++) {                                                       \
			if ((uint64_t)iv[j] >= (uint64_t)m)                                             \
				return j;                                                               \
			((T *)y)[iv[j]] = ((const T *)x)[j];                                            \
		}                                                                                       \
		return -1;                                                                              \
	}
UNPOOL_SCATTER(unpool_scatter32, uint32_t)
UNPOOL_SCATTER(unpool_scatter64, uint64_t)

/* MaxUnpool: Y zeros but for X's elements, each at the place its index I (MaxPool's Indices,
 * flattened over the default output shape) names. With output_shape, Y has that shape and an
 * element keeps its coordinates (ONNX's reference: the index decomposed over the default shape). */
static int max_unpool_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *ix = in[1], *os = n->n_in > 2 && in[2] && in[2]->numel ? in[2] : NULL;
	const char *why;
	int64_t def[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	if (ix->ndim != a->ndim || memcmp(ix->dims, a->dims, (size_t)a->ndim * sizeof *a->dims) || ix->dtype != DT_INT64)
		return exec_fail(x, "I must be int64 and of X's shape");
	if (unpool_dims(n, a, def, &why))
		return exec_fail(x, "%s", why);
	memcpy(dims, def, sizeof dims);
	if (os) {
		int k;
		if (rt_ints(x, os, "output_shape", dims, RT_MAX_DIMS, &k))
			return exec_status(x);
		if (k != a->ndim || dims[0] != def[0] || dims[1] != def[1])
			return exec_fail(x, "output_shape must have %d entries, X's N and C first", a->ndim);
	}
	uint8_t *y = exec_alloc_zero(x, out[0], a->dtype, a->ndim, dims);
	if (!y)
		return exec_status(x);
	size_t es = dtype_size(a->dtype);
	const int64_t *iv = ix->data;
	if (!memcmp(dims, def, (size_t)a->ndim * sizeof *dims) && (es == 4 || es == 8)) {
		/* the default shape: an index is the place itself (the loop below's at), in [0, numel) */
		int64_t bad = es == 4 ? unpool_scatter32(y, a->data, iv, a->numel, out[0]->numel)
				      : unpool_scatter64(y, a->data, iv, a->numel, out[0]->numel);
		if (bad >= 0)
			return exec_fail(x, "index %lld of I is outside the output", (long long)iv[bad]);
		return 0;
	}
	for (int64_t j = 0; j < a->numel; j++) {
		int64_t rest = iv[j], at = 0, st = 1;
		for (int i = a->ndim - 1; i >= 0 && rest >= 0; i--) {
			int64_t c = rest % def[i];
			rest /= def[i];
			at += c < dims[i] ? c * st : -INT64_MAX / 2;
			st *= dims[i];
		}
		if (iv[j] < 0 || rest || at < 0)
			return exec_fail(x, "index %lld of I is outside the output", (long long)iv[j]);
		memcpy(y + at * (int64_t)es, (const uint8_t *)a->data + j * (int64_t)es, es);
	}
	return 0;
}

/* ---- gradient rules ---- */

/* The forward node's geometry from its inferred shapes: pads resolved as the kernel resolved them. */
static int nd_geom_of(struct ad *a, const struct node *n, enum conv_kind kind, struct nd_geom *g)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ys = ad_shape(a, n->out[0]);
	const char *why;
	memset(g, 0, sizeof *g);
	g->r = xs->ndim - 2, g->n = xs->dims[0], g->c = xs->dims[1], g->m = ys->dims[1];
	g->group = attr_int(n, "group", 1);
	memcpy(g->in, xs->dims + 2, (size_t)g->r * sizeof *g->in);
	if (kind == CONV_POOL)
		nd_ints(n, "kernel_shape", 1, (size_t)g->r, g->k);
	else
		memcpy(g->k, ad_shape(a, n->in[1])->dims + 2, (size_t)g->r * sizeof *g->k);
	for (int i = 0; i < g->r; i++)
		if (ad_dim_symbolic(a, g->in[i]) || ad_dim_symbolic(a, ys->dims[i + 2]))
			return ad_fail(a, "cannot differentiate a %d-D window over a symbolic spatial dimension", g->r);
	if (nd_window(n, g, kind, &why))
		return ad_fail(a, "%s", why);
	return 0;
}

static int set_nd_window(struct ad *a, struct node *c, const struct nd_geom *g, const int64_t *s, const int64_t *d,
			 const int64_t *pe, int64_t group)
{
	int64_t pads[2 * ND_MAX];
	int dil = 0;
	for (int i = 0; i < g->r; i++) {
		pads[i] = g->pb[i], pads[i + g->r] = pe[i];
		dil |= d[i] != 1;
	}
	return !c || ad_set_ints(a, c, "pads", pads, 2 * (size_t)g->r) || ad_set_ints(a, c, "strides", s, (size_t)g->r) ||
	       (dil && ad_set_ints(a, c, "dilations", d, (size_t)g->r)) || (group != 1 && ad_set_int(a, c, "group", group));
}

/* The output_padding op (per axis) that makes a ConvTranspose of the window's output g->out
 * restore g->in; whether any is nonzero. */
static int restoring_padding(const struct nd_geom *g, int64_t *op)
{
	int any = 0;
	for (int i = 0; i < g->r; i++) {
		op[i] = g->in[i] - (g->s[i] * (g->out[i] - 1) + g->d[i] * (g->k[i] - 1) + 1 - g->pb[i] - g->pe[i]);
		any |= op[i] != 0;
	}
	return any;
}

/* dX = op(g, W) (ConvTranspose for a Conv, Conv for a ConvTranspose) over the window, with end pads
 * pe and, where outpad is given, that output padding. */
static int give_input_grad(struct ad *a, const struct node *n, const char *op, const struct nd_geom *g,
			   const int64_t *pe, const int64_t *outpad)
{
	struct value *ins[2] = {ad_dy(a, n->out[0]), n->in[1]};
	struct value *dx = ad_op(a, op, ins, 2);
	if (!dx || set_nd_window(a, ad_producer(dx), g, g->s, g->d, pe, g->group) ||
	    (outpad && ad_set_ints(a, ad_producer(dx), "output_padding", outpad, (size_t)g->r)))
		return -1;
	return ad_give(a, n->in[0], dx);
}

static struct value *swap01(struct ad *a, struct value *v, int rank)
{
	int64_t perm[RT_MAX_DIMS] = {1, 0};
	for (int i = 2; i < rank; i++)
		perm[i] = i;
	struct value *t = v ? ad_op1(a, "Transpose", v) : NULL;
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, (size_t)rank) ? t : NULL;
}

/* v's channels [lo, hi) (axis 1) */
static struct value *channels(struct ad *a, struct value *v, int64_t lo, int64_t hi)
{
	int64_t ax = 1;
	struct value *ins[4] = {v, ad_ints(a, &lo, 1), ad_ints(a, &hi, 1), ad_ints(a, &ax, 1)};
	return v && ins[1] && ins[2] && ins[3] ? ad_op(a, "Slice", ins, 4) : NULL;
}

/* dW of one group: Conv(img^T, ker^T, strides d, dilations s)^T, img (N, ci, g->in...) the image
 * side, ker (N, co, g->out...) the kernel side: (co, ci, k...), the taps past k (a stride leaving
 * the padded image longer than the kernel's reach) sliced off. pe: the end pads. */
static struct value *nd_weight_grad(struct ad *a, struct value *img, struct value *ker, const struct nd_geom *g,
				    const int64_t *pe)
{
	int rank = g->r + 2;
	struct value *ins[2] = {swap01(a, img, rank), swap01(a, ker, rank)};
	struct value *c = ins[0] && ins[1] ? ad_op(a, "Conv", ins, 2) : NULL;
	if (!c || set_nd_window(a, ad_producer(c), g, g->d, g->s, pe, 1))
		return NULL;
	c = swap01(a, c, rank);
	int64_t st[ND_MAX], en[ND_MAX], ax[ND_MAX];
	int exact = 1;
	for (int i = 0; i < g->r; i++) {
		int64_t kk = (g->in[i] + g->pb[i] + pe[i] - (g->s[i] * (g->out[i] - 1) + 1)) / g->d[i] + 1;
		exact &= kk == g->k[i];
		st[i] = 0, en[i] = g->k[i], ax[i] = i + 2;
	}
	struct value *sl[4] = {c, ad_ints(a, st, (size_t)g->r), ad_ints(a, en, (size_t)g->r), ad_ints(a, ax, (size_t)g->r)};
	return exact ? c : sl[0] && sl[1] && sl[2] && sl[3] ? ad_op(a, "Slice", sl, 4) : NULL;
}

/* dW for every group, concatenated along axis 0: img_ch and ker_ch channels per group. */
static struct value *nd_grouped_weight_grad(struct ad *a, struct value *img, int64_t img_ch, struct value *ker,
					    int64_t ker_ch, const struct nd_geom *g, const int64_t *pe)
{
	if (g->group == 1)
		return nd_weight_grad(a, img, ker, g, pe);
	struct value **parts = xcalloc((size_t)g->group, sizeof *parts);
	if (!parts)
		return ad_fail(a, "out of memory"), NULL;
	int ok = 1;
	for (int64_t gi = 0; ok && gi < g->group; gi++)
		ok = (parts[gi] = nd_weight_grad(a, channels(a, img, gi * img_ch, (gi + 1) * img_ch),
						 channels(a, ker, gi * ker_ch, (gi + 1) * ker_ch), g, pe)) != NULL;
	struct value *c = ok ? ad_op(a, "Concat", parts, (int)g->group) : NULL;
	xfree(parts);
	return c && !ad_set_int(a, ad_producer(c), "axis", 0) ? c : NULL;
}

static int give_bias_nd(struct ad *a, const struct node *n, struct value *gy, int r)
{
	if (n->n_in < 3 || !n->in[2] || !ad_wants(a, n->in[2]))
		return 0;
	int64_t axes[RT_MAX_DIMS] = {0};
	for (int i = 0; i < r; i++)
		axes[i + 1] = i + 2;
	return ad_give(a, n->in[2], ad_reduce(a, "ReduceSum", gy, axes, r + 1, 0));
}

/* g spread back over the windows of the pool geometry: a depthwise ConvTranspose of kernel ones
 * with the output padding that restores X's size (AveragePool's gradient). */
static struct value *spread(struct ad *a, struct value *g, const struct nd_geom *geo, int dt)
{
	int64_t kd[RT_MAX_DIMS] = {geo->c, 1}, op[ND_MAX];
	int any = restoring_padding(geo, op);
	for (int i = 0; i < geo->r; i++)
		kd[i + 2] = geo->k[i];
	struct value *ins[2] = {g, ad_op2(a, "Expand", ad_scalar(a, dt, 1), ad_ints(a, kd, (size_t)geo->r + 2))};
	struct value *dx = ins[0] && ins[1] ? ad_op(a, "ConvTranspose", ins, 2) : NULL;
	if (!dx || set_nd_window(a, ad_producer(dx), geo, geo->s, geo->d, geo->pe, geo->c) ||
	    (any && ad_set_ints(a, ad_producer(dx), "output_padding", op, (size_t)geo->r)))
		return NULL;
	return dx;
}

/* Conv: dX = ConvTranspose(g, W) with the output padding that restores X's size. ConvTranspose
 * (tr): dX = Conv(g, W), its adjoint; where the output ran past the taps (a negative end pad:
 * output_shape), the Conv's floor drops the extra. dW per group, the image side X for a Conv and
 * g for a ConvTranspose. */
static int conv_nd_grad_both(struct ad *a, const struct node *n, int tr)
{
	struct nd_geom g;
	if (nd_geom_of(a, n, tr ? CONV_TRANSPOSE : CONV_FORWARD, &g))
		return -1;
	int64_t pe[ND_MAX], op[ND_MAX], outpad[ND_MAX];
	if (tr && nd_ints(n, "output_padding", 0, (size_t)g.r, outpad))
		return ad_fail(a, "output_padding must have an entry per spatial axis");
	int any = !tr && restoring_padding(&g, op);
	for (int i = 0; i < g.r; i++) {
		pe[i] = g.pe[i] > 0 ? g.pe[i] : 0;
		/* the output's length past the input's taps (output_padding, less the pads) is cut by the
		 * floor of the Conv that differentiates it only while less than a stride */
		if ((g.pe[i] < 0 && -g.pe[i] >= g.s[i]) || (tr && outpad[i] - g.pb[i] - g.pe[i] >= g.s[i]))
			return ad_fail(a, "output_shape or output_padding reaches a stride or more past the input's taps");
	}
	struct value *gy = ad_dy(a, n->out[0]);
	if (ad_wants(a, n->in[0]) && give_input_grad(a, n, tr ? "Conv" : "ConvTranspose", &g, pe, any ? op : NULL))
		return -1;
	if (ad_wants(a, n->in[1])) {
		struct nd_geom t = g;
		if (tr) {
			memcpy(t.in, g.out, sizeof t.in);
			memcpy(t.out, g.in, sizeof t.out);
		}
		int64_t xc = g.c / g.group, yc = g.m / g.group;
		struct value *dw = tr ? nd_grouped_weight_grad(a, gy, yc, n->in[0], xc, &t, pe)
				      : nd_grouped_weight_grad(a, n->in[0], xc, gy, yc, &t, pe);
		if (ad_give(a, n->in[1], dw))
			return -1;
	}
	return give_bias_nd(a, n, gy, g.r);
}

/* AveragePool: g divided by each window's count, spread back over the window. Without
 * count_include_pad the count excludes padding: an AveragePool of ones (pads included) times the
 * window size. */
static int average_pool_nd_grad(struct ad *a, const struct node *n)
{
	struct nd_geom g;
	if (nd_geom_of(a, n, CONV_POOL, &g))
		return -1;
	g.m = g.c;
	if (attr_int(n, "ceil_mode", 0))
		return ad_fail(a, "gradients of AveragePool with ceil_mode are not supported yet");
	int dt = ad_shape(a, n->in[0])->dtype;
	double win = (double)product(g.k, g.r);
	struct value *gy = ad_dy(a, n->out[0]), *scaled;
	if (attr_int(n, "count_include_pad", 0)) {
		scaled = ad_op2(a, "Div", gy, ad_scalar(a, dt, win));
	} else {
		struct value *ones = ad_op2(a, "Add", ad_zeros_like(a, n->in[0]), ad_scalar(a, dt, 1));
		struct value *avg = ad_op1(a, "AveragePool", ones);
		struct node *p = ad_producer(avg);
		/* the forward node's window, dilations included: each output counts the taps it read */
		if (!p || ad_set_ints(a, p, "kernel_shape", g.k, (size_t)g.r) ||
		    set_nd_window(a, p, &g, g.s, g.d, g.pe, 1) || ad_set_int(a, p, "count_include_pad", 1))
			return -1;
		scaled = ad_op2(a, "Div", gy, ad_op2(a, "Mul", avg, ad_scalar(a, dt, win)));
	}
	return ad_give(a, n->in[0], spread(a, scaled, &g, dt));
}

static int lp_pool_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return pool_nd_run(x, n, in, out, 2);
}

/* LpPool: dy/dx = x |x|^(p-2) / y^(p-1) for each window x is in, so dX = x |x|^(p-2) times the
 * windows' g / y^(p-1) spread back over them (AveragePool's spreading). p >= 2: below, |x|^(p-2) is
 * infinite at 0. */
static int lp_pool_grad(struct ad *a, const struct node *n)
{
	struct nd_geom g;
	if (nd_geom_of(a, n, CONV_POOL, &g))
		return -1;
	double p = (double)attr_int(n, "p", 2);
	int dt = ad_shape(a, n->in[0])->dtype;
	if (p < 2)
		return ad_fail(a, "gradients of LpPool with p below 2 are not supported");
	struct value *yp = p == 2 ? n->out[0] : ad_op2(a, "Pow", n->out[0], ad_scalar(a, dt, p - 1));
	struct value *xp = p == 2 ? n->in[0] : ad_op2(a, "Mul", n->in[0], ad_op2(a, "Pow", ad_op1(a, "Abs", n->in[0]), ad_scalar(a, dt, p - 2)));
	struct value *s = spread(a, ad_op2(a, "Div", ad_dy(a, n->out[0]), yp), &g, dt);
	return ad_give(a, n->in[0], ad_op2(a, "Mul", xp, s));
}

int conv_nd_grad(struct ad *a, const struct node *n)
{
	return n->op == OP_CONV || n->op == OP_CONV_TRANSPOSE ? conv_nd_grad_both(a, n, n->op == OP_CONV_TRANSPOSE)
							       : average_pool_nd_grad(a, n);
}

/* MaxUnpool: each X element's gradient is g at the place it went to: g cut to the default output
 * shape (where output_shape made it larger), flattened, gathered at I. */
static int max_unpool_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ys = ad_shape(a, n->out[0]);
	const char *why;
	int64_t def[RT_MAX_DIMS], flat = -1, st[RT_MAX_DIMS] = {0}, ax[RT_MAX_DIMS];
	if (unpool_dims(n, xs, def, &why))
		return ad_fail(a, "%s", why);
	struct value *g = ad_dy(a, n->out[0]);
	int cut = 0;
	for (int i = 0; i < xs->ndim; i++) {
		ax[i] = i;
		cut |= ys->dims[i] != def[i];
		if (i >= 2 && (ys->dims[i] < def[i] || ad_dim_symbolic(a, ys->dims[i])))
			return ad_fail(a, "cannot differentiate a MaxUnpool whose output_shape is smaller than its default one");
	}
	if (cut) {
		struct value *ins[4] = {g, ad_ints(a, st, (size_t)xs->ndim), ad_ints(a, def, (size_t)xs->ndim),
					ad_ints(a, ax, (size_t)xs->ndim)};
		g = ins[0] && ins[1] && ins[2] && ins[3] ? ad_op(a, "Slice", ins, 4) : NULL;
	}
	struct value *m1 = ad_ints(a, &flat, 1);
	struct value *ins[2] = {ad_op2(a, "Reshape", g, m1), ad_op2(a, "Reshape", n->in[1], m1)};
	struct value *gx = ins[0] && ins[1] ? ad_op(a, "GatherElements", ins, 2) : NULL;
	return ad_give(a, n->in[0], ad_op2(a, "Reshape", gx, ad_shape_of(a, n->in[0])));
}

static void per_element_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
			     uint64_t *flops, uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = (uint64_t)in[0]->numel;
}

const struct op_impl op_max_unpool = {.run = max_unpool_run, .cost = per_element_cost, .grad = max_unpool_grad, .recompute = RC_CHEAP, .nodiff = ~1u, .bf16_since = 22};
const struct op_impl op_lp_pool = {.run = lp_pool_run, .cost = pool_cost, .grad = lp_pool_grad, .recompute = RC_CHEAP, .bf16_since = 22};
