/* shuffle.c - DepthToSpace (nn.PixelShuffle) and SpaceToDepth (nn.PixelUnshuffle): channels moved
 * to blocks of pixels and back.
 *
 * With block b, DepthToSpace takes X (N, C, H, W) to (N, C/b^2, H b, W b): in DCR mode (the
 * default) X is viewed as (N, b, b, C/b^2, H, W) and permuted (0, 3, 4, 1, 5, 2); in CRD mode (what
 * PyTorch exports) as (N, C/b^2, b, b, H, W) permuted (0, 1, 4, 2, 5, 3). SpaceToDepth is DCR's
 * inverse. Each is a permutation of elements, so the kernel is the Transpose's copy of that view
 * (permuted_copy; float32 DepthToSpace by output rows, each b input rows interleaved), and each
 * one's gradient is the other (or, for CRD, the inverse Reshape-Transpose-Reshape). */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "simd.h"

#include <string.h>

struct shuffle {
	int64_t view[6], perm[6]; /* the 6-D view of the input and its permutation */
	int64_t out[4];           /* the output's shape */
};

/* to_space: DepthToSpace (crd: its CRD mode), else SpaceToDepth; 0, or a message */
static const char *shuffle_of(const int64_t *d, int64_t b, int to_space, int crd, struct shuffle *s)
{
	int64_t n = d[0], c = d[1], h = d[2], w = d[3];
	if (b < 1 || b > (to_space ? c : h < w ? h : w)) /* (and b * b cannot overflow) */
		return to_space ? "blocksize must be from 1 to the channels" : "blocksize must be from 1 to the height and width";
	if (to_space) {
		if (c % (b * b))
			return "the channels must be a multiple of blocksize squared";
		int64_t cc = c / (b * b);
		int64_t dcr_v[6] = {n, b, b, cc, h, w}, dcr_p[6] = {0, 3, 4, 1, 5, 2};
		int64_t crd_v[6] = {n, cc, b, b, h, w}, crd_p[6] = {0, 1, 4, 2, 5, 3};
		memcpy(s->view, crd ? crd_v : dcr_v, sizeof s->view);
		memcpy(s->perm, crd ? crd_p : dcr_p, sizeof s->perm);
		int64_t o[4] = {n, cc, h * b, w * b};
		memcpy(s->out, o, sizeof o);
	} else {
		if (h % b || w % b)
			return "the height and width must be multiples of blocksize";
		int64_t v[6] = {n, c, h / b, b, w / b, b}, p[6] = {0, 3, 5, 1, 2, 4};
		memcpy(s->view, v, sizeof v);
		memcpy(s->perm, p, sizeof p);
		int64_t o[4] = {n, c * b * b, h / b, w / b};
		memcpy(s->out, o, sizeof o);
	}
	return NULL;
}

/* DepthToSpace of float32 by output rows: row r of the output (N, C/b^2, H, b, W b), in view
 * dimensions (N, C/b^2, H, b) at input offset src, is b input rows of W interleaved, row j at
 * src + j sb (sb: the view's stride of its last axis). permuted_copy took the (W, b) planes as
 * 24 x 2 transposes, a masked 16 x 16 register block per 16 rows of 2: 1.41 ms for 8x256x24x24
 * block 2 (one thread) against its gradient's 1.07; rows interleaved, two permutes per 32 outputs,
 * 0.20 ms. Moves only (every bit, NaNs' too), each row on its own: the same bits on any threads. */
struct to_space {
	const uint32_t *in;
	uint32_t *out;
	int64_t d[4], st[4], b, w, sb;
};

#ifdef SIMD_X86
/* out[2 i + j] = in[i + j sb], i < w, j < 2 */
static SIMD_TARGET void zip2_avx512(const uint32_t *in, int64_t sb, int64_t w, uint32_t *out)
{
	const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
	for (int64_t i = 0; i < w; i += 16) {
		int64_t m = w - i < 16 ? w - i : 16;
		__mmask16 k = simd_lanes(m);
		__m512i a = _mm512_maskz_loadu_epi32(k, in + i), c = _mm512_maskz_loadu_epi32(k, in + sb + i);
		_mm512_mask_storeu_epi32(out + 2 * i, simd_lanes(2 * m), _mm512_permutex2var_epi32(a, lo, c));
		if (m > 8)
			_mm512_mask_storeu_epi32(out + 2 * i + 16, simd_lanes(2 * m - 16), _mm512_permutex2var_epi32(a, hi, c));
	}
}
#endif

static void to_space_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct to_space *j = arg;
	int64_t b = j->b, w = j->w, sb = j->sb;
	for (int64_t r = r0; r < r1; r++) {
		int64_t src = 0, k = r;
		for (int d = 3; d >= 0; d--) {
			src += k % j->d[d] * j->st[d];
			k /= j->d[d];
		}
		const uint32_t *p = j->in + src;
		uint32_t *o = j->out + r * w * b;
#ifdef SIMD_X86
		if (b == 2 && simd_avx512()) {
			zip2_avx512(p, sb, w, o);
			continue;
		}
#endif
		for (int64_t i = 0; i < w; i++)
			for (int64_t c = 0; c < b; c++)
				o[i * b + c] = p[i + c * sb];
	}
}

static int shuffle_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		       int to_space)
{
	const struct rtensor *a = in[0];
	if (a->ndim != 4)
		return exec_fail(x, "X must be (N, C, H, W), not of rank %d", a->ndim);
	struct shuffle s;
	const char *why = shuffle_of(a->dims, attr_int(n, "blocksize", 0), to_space,
				     to_space && attr_str_is(n, "mode", "CRD", 0), &s);
	if (why)
		return exec_fail(x, "%s", why);
	uint8_t *o = exec_alloc(x, out[0], a->dtype, 4, s.out);
	if (!o)
		return exec_status(x);
	/* the 6-D view permuted: a transpose's copy (runs of W or of b kept whole, tiled where the
	 * contiguous axis moves), any dtype by its element size */
	int64_t vs[6], pd[6], st[6];
	c_strides(6, s.view, vs);
	for (int i = 0; i < 6; i++) {
		pd[i] = s.view[s.perm[i]];
		st[i] = vs[s.perm[i]];
	}
	if (to_space && dtype_size(a->dtype) == 4 && a->numel) { /* W, the rows' axis, is at stride 1 */
		struct to_space j = {.in = (const uint32_t *)a->data, .out = (uint32_t *)o, .b = pd[5], .w = pd[4], .sb = st[5]};
		memcpy(j.d, pd, sizeof j.d);
		memcpy(j.st, st, sizeof j.st);
		int64_t rows = pd[0] * pd[1] * pd[2] * pd[3];
		kernel_for(rows, KERNEL_GRAIN / (j.w * j.b) + 1, to_space_rows, &j);
		return 0;
	}
	permuted_copy(a->data, 6, pd, st, dtype_size(a->dtype), o);
	return 0;
}

static int depth_to_space_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	return shuffle_run(x, n, in, out, 1);
}

static int space_to_depth_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	return shuffle_run(x, n, in, out, 0);
}

/* g viewed as the permuted 6-D shape, permuted back, reshaped to the input's shape */
static int shuffle_grad(struct ad *a, const struct node *n, int to_space)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	struct shuffle s;
	const char *why = shuffle_of(xs->dims, attr_int(n, "blocksize", 0), to_space,
				     to_space && attr_str_is(n, "mode", "CRD", 0), &s);
	if (why)
		return ad_fail(a, "%s", why);
	for (int i = 0; i < 4; i++)
		if (ad_dim_symbolic(a, xs->dims[i]))
			return ad_fail(a, "cannot differentiate a %s of a symbolic shape yet", n->op_type);
	int64_t pd[6], inv[6];
	for (int i = 0; i < 6; i++) {
		pd[i] = s.view[s.perm[i]];
		inv[s.perm[i]] = i;
	}
	struct value *g = ad_op2(a, "Reshape", ad_dy(a, n->out[0]), ad_ints(a, pd, 6));
	struct value *t = g ? ad_op1(a, "Transpose", g) : NULL;
	if (!t || ad_set_ints(a, ad_producer(t), "perm", inv, 6))
		return -1;
	return ad_give(a, n->in[0], ad_op2(a, "Reshape", t, ad_ints(a, xs->dims, 4)));
}

static int depth_to_space_grad(struct ad *a, const struct node *n)
{
	return shuffle_grad(a, n, 1);
}

static int space_to_depth_grad(struct ad *a, const struct node *n)
{
	return shuffle_grad(a, n, 0);
}

const struct op_impl op_depth_to_space = {.run = depth_to_space_run, .grad = depth_to_space_grad, .recompute = RC_CHEAP};
const struct op_impl op_space_to_depth = {.run = space_to_depth_run, .grad = space_to_depth_grad, .recompute = RC_CHEAP};
