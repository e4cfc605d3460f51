/* layout.c - ops that move or select elements without arithmetic: Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Concat, Split, Slice, Gather, Expand, Shape, Constant, ConstantOfShape,
 * ScatterND, ScatterElements.
 *
 * Ops whose output shape depends on an input's values (Reshape's shape, Slice's starts, ...) need
 * that input known when shapes are inferred; exported graphs compute them from Shape, which the
 * executor folds. Axes moved from attributes to inputs in opset 13 (Squeeze, Unsqueeze, Split);
 * both forms are read. Results are copies, but for a view (Reshape, Flatten, Squeeze, Unsqueeze)
 * whose input dies at it, which takes over the input's buffer (exec_take), as runtimes that alias
 * views need no second buffer then; the memory model counts the same (plan/memsim.h). */
#include "../io/tensor.h"
#include "../autodiff/ad.h"
#include "kernel.h"
#include "../util/xalloc.h"

#include <string.h>

/* Output 0 takes in's elements under a new shape. */
static int copy_as(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, int nd, const int64_t *dims)
{
	int taken = exec_take(x, in[0], out[0], nd, dims);
	if (taken)
		return taken < 0 ? exec_status(x) : 0;
	void *p = exec_alloc(x, out[0], in[0]->dtype, nd, dims);
	if (!p)
		return exec_status(x);
	if (out[0]->numel != in[0]->numel)
		return exec_fail(x, "cannot take %lld elements into %lld", (long long)in[0]->numel, (long long)out[0]->numel);
	memcpy(p, in[0]->data, in[0]->nbytes);
	return 0;
}

static int reshape_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t shape[RT_MAX_DIMS];
	int nd, infer = -1;
	if (rt_ints(x, in[1], "the shape input", shape, RT_MAX_DIMS, &nd))
		return exec_status(x);
	int allowzero = (int)attr_int(n, "allowzero", 0);
	int64_t known = 1;
	int over = 0; /* the product overflowed; an error unless a 0 entry (anywhere) makes it 0 */
	for (int i = 0; i < nd; i++) {
		if (shape[i] == 0 && !allowzero) {
			if (i >= in[0]->ndim)
				return exec_fail(x, "shape entry %d is 0 but the input has rank %d", i, in[0]->ndim);
			shape[i] = in[0]->dims[i];
		}
		if (shape[i] == -1) {
			if (infer >= 0)
				return exec_fail(x, "the shape has more than one -1");
			infer = i;
			continue;
		}
		if (shape[i] < 0)
			return exec_fail(x, "invalid shape entry %lld", (long long)shape[i]);
		over |= __builtin_mul_overflow(known, shape[i], &known);
	}
	for (int i = 0; i < nd && over; i++)
		if (shape[i] == 0)
			over = 0, known = 0;
	if (over)
		return exec_fail(x, "the shape's elements do not fit in 64 bits");
	if (infer >= 0) {
		if (known == 0 || in[0]->numel % known)
			return exec_fail(x, "cannot reshape %lld elements with a -1 entry", (long long)in[0]->numel);
		shape[infer] = in[0]->numel / known;
	}
	return copy_as(x, in, out, nd, shape);
}

static int flatten_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int r = in[0]->ndim, axis;
	int64_t a = attr_int(n, "axis", 1);
	if (a < -r || a > r)
		return exec_fail(x, "axis %lld is out of range for rank %d", (long long)a, r);
	axis = (int)(a < 0 ? a + r : a);
	int64_t dims[2] = {1, 1};
	for (int i = 0; i < r; i++)
		dims[i >= axis] *= in[0]->dims[i];
	return copy_as(x, in, out, 2, dims);
}

static int squeeze_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t axes[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	int na, r = in[0]->ndim, nd = 0, drop[RT_MAX_DIMS] = {0};
	if (node_axes(x, n, in, axes, &na))
		return exec_status(x);
	for (int i = 0; i < na; i++) {
		int ax;
		if (norm_axis(x, axes[i], r, &ax))
			return exec_status(x);
		if (in[0]->dims[ax] != 1)
			return exec_fail(x, "cannot squeeze dimension %d of size %lld", ax, (long long)in[0]->dims[ax]);
		drop[ax] = 1;
	}
	for (int i = 0; i < r; i++)
		if (!(na ? drop[i] : in[0]->dims[i] == 1))
			dims[nd++] = in[0]->dims[i];
	return copy_as(x, in, out, nd, dims);
}

static int unsqueeze_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t axes[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	int na, add[RT_MAX_DIMS] = {0};
	if (node_axes(x, n, in, axes, &na))
		return exec_status(x);
	int r = in[0]->ndim + na;
	if (r > RT_MAX_DIMS)
		return exec_fail(x, "result rank exceeds %d", RT_MAX_DIMS);
	for (int i = 0; i < na; i++) {
		int ax;
		if (norm_axis(x, axes[i], r, &ax))
			return exec_status(x);
		if (add[ax])
			return exec_fail(x, "axis %d is given twice", ax);
		add[ax] = 1;
	}
	for (int i = 0, j = 0; i < r; i++)
		dims[i] = add[i] ? 1 : in[0]->dims[j++];
	return copy_as(x, in, out, r, dims);
}

static int transpose_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct rtensor *a = in[0];
	int r = a->ndim, perm[RT_MAX_DIMS], seen[RT_MAX_DIMS] = {0};
	size_t np;
	const int64_t *p = attr_ints(n, "perm", &np);
	if (p && (int)np != r)
		return exec_fail(x, "perm has %zu entries for rank %d", np, r);
	int64_t dims[RT_MAX_DIMS], st[RT_MAX_DIMS], pst[RT_MAX_DIMS];
	for (int i = 0; i < r; i++) {
		perm[i] = p ? (int)p[i] : r - 1 - i;
		if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]++)
			return exec_fail(x, "perm is not a permutation of 0..%d", r - 1);
		dims[i] = a->dims[perm[i]];
	}
	uint8_t *o = exec_alloc(x, out[0], a->dtype, r, dims);
	if (!o || !a->numel)
		return exec_status(x);
	c_strides(r, a->dims, st);
	if (a->swapped && r >= 2) { /* the bytes hold (d1, d0, ...): axis 0 steps d1's stride there */
		int64_t ph[RT_MAX_DIMS];
		memcpy(ph, a->dims, sizeof ph);
		ph[0] = a->dims[1], ph[1] = a->dims[0];
		c_strides(r, ph, st);
		int64_t s0 = st[0];
		st[0] = st[1], st[1] = s0;
	}
	for (int i = 0; i < r; i++)
		pst[i] = st[perm[i]];
	permuted_copy(a->data, r, dims, pst, dtype_size(a->dtype), o);
	return 0;
}

static int concat_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *f = in[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), f->ndim, &ax))
		return exec_status(x);
	int64_t dims[RT_MAX_DIMS];
	memcpy(dims, f->dims, sizeof dims);
	dims[ax] = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		const struct rtensor *t = in[k];
		if (t->ndim != f->ndim || t->dtype != f->dtype)
			return exec_fail(x, "input %u has another rank or dtype than input 0", k);
		for (int i = 0; i < f->ndim; i++)
			if (i != ax && t->dims[i] != f->dims[i])
				return exec_fail(x, "input %u differs from input 0 in dimension %d", k, i);
		dims[ax] += t->dims[ax];
	}
	uint8_t *o = exec_alloc(x, out[0], f->dtype, f->ndim, dims);
	if (!o)
		return exec_status(x);
	size_t es = dtype_size(f->dtype);
	int64_t outer = 1, inner = 1;
	for (int i = 0; i < ax; i++)
		outer *= dims[i];
	for (int i = ax + 1; i < f->ndim; i++)
		inner *= dims[i];
	int64_t off = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		int64_t chunk = in[k]->dims[ax] * inner;
		for (int64_t o2 = 0; o2 < outer; o2++)
			memcpy(o + (o2 * dims[ax] * inner + off) * es, (const uint8_t *)in[k]->data + o2 * chunk * es,
			       (size_t)chunk * es);
		off += chunk;
	}
	return 0;
}

/* Split's piece sizes into sizes[n->n_out]: from its second input, its `split` attribute, or equal
 * pieces (the last one smaller). */
static int split_sizes(struct exec *x, const struct node *n, struct rtensor *const *in, int ax, int64_t *sizes)
{
	const struct rtensor *a = in[0];
	int ns = (int)n->n_out;
	if (n->n_in > 1 && in[1]) {
		int got;
		if (rt_ints(x, in[1], "split", sizes, ns, &got))
			return exec_status(x);
		if (got != ns)
			return exec_fail(x, "split has %d sizes for %d outputs", got, ns);
	} else {
		size_t k;
		const int64_t *s = attr_ints(n, "split", &k);
		if (s && (int)k != ns)
			return exec_fail(x, "split has %zu sizes for %d outputs", k, ns);
		int64_t d = a->dims[ax], each = (d + ns - 1) / ns;
		for (int i = 0; i < ns; i++)
			sizes[i] = s ? s[i] : (i + 1 < ns ? each : d - each * (ns - 1));
	}
	int64_t total = 0;
	for (int i = 0; i < ns; i++) {
		if (sizes[i] < 0 || sizes[i] > a->dims[ax])
			return exec_fail(x, "split size %lld out of range", (long long)sizes[i]);
		total += sizes[i];
	}
	if (total != a->dims[ax])
		return exec_fail(x, "split sizes add up to %lld, not %lld", (long long)total, (long long)a->dims[ax]);
	return 0;
}

static int split_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int ax, ns = (int)n->n_out;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax))
		return exec_status(x);
	int64_t *sizes = xcalloc((size_t)ns + 1, sizeof *sizes);
	if (!sizes)
		return exec_fail(x, "out of memory");
	if (split_sizes(x, n, in, ax, sizes)) {
		xfree(sizes);
		return exec_status(x);
	}
	size_t es = dtype_size(a->dtype);
	int64_t outer = 1, inner = 1, off = 0;
	for (int i = 0; i < ax; i++)
		outer *= a->dims[i];
	for (int i = ax + 1; i < a->ndim; i++)
		inner *= a->dims[i];
	for (int k = 0; k < ns; k++) {
		int64_t dims[RT_MAX_DIMS];
		memcpy(dims, a->dims, sizeof dims);
		dims[ax] = sizes[k];
		uint8_t *o = exec_alloc(x, out[k], a->dtype, a->ndim, dims);
		if (!o && exec_status(x))
			break;
		for (int64_t o2 = 0; o && o2 < outer; o2++)
			memcpy(o + o2 * sizes[k] * inner * es, (const uint8_t *)a->data + (o2 * a->dims[ax] * inner + off) * es,
			       (size_t)(sizes[k] * inner) * es);
		off += sizes[k] * inner;
	}
	xfree(sizes);
	return exec_status(x);
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Slice's rule along an axis of d elements (ONNX's clamping): the first index taken and how many,
 * stepping by s (nonzero). Shared by the kernel and the gradient. */
static void slice_bounds(int64_t d, int64_t lo, int64_t hi, int64_t s, int64_t *first, int64_t *count)
{
	if (lo < 0) /* (d >= 0: no overflow, even from INT64_MIN; the clamps below do the rest) */
		lo += d;
	if (hi < 0)
		hi += d;
	if (s > 0) {
		lo = clamp(lo, 0, d);
		hi = clamp(hi, 0, d);
		*count = hi <= lo ? 0 : s >= hi - lo ? 1 : (hi - lo - 1) / s + 1; /* no overflow, whatever s */
	} else {
		lo = clamp(lo, -1, d - 1);
		hi = clamp(hi, -1, d - 1);
		*count = lo <= hi ? 0 : s <= hi - lo ? 1 : (lo - hi - 1) / -s + 1; /* (-s only when |s| < lo - hi) */
	}
	*first = lo;
}

/* Slice's copy: the output (R >= 2 axes of dims) from the input (element strides astr), axis d
 * read from b[d] in steps of st[d]. */
struct sjob {
	const uint8_t *a;
	uint8_t *o;
	size_t es;
	int R;
	int64_t b[RT_MAX_DIMS], st[RT_MAX_DIMS], dims[RT_MAX_DIMS], astr[RT_MAX_DIMS];
};

/* Output planes [p0, p1) (the last two axes), row by row: a piece of kernel_for. Short rows (a
 * kernel's 3 x 3 window cropped from 4 x 4) are copied inline, a call each would cost more. */
static void slice_planes(void *arg, int64_t p0, int64_t p1)
{
	const struct sjob *j = arg;
	size_t es = j->es;
	int R = j->R;
	int64_t rows = j->dims[R - 2], row = j->dims[R - 1], step = j->st[R - 1];
	/* (a huge step keeps one element: no product for it) */
	int64_t rstride = rows > 1 ? j->st[R - 2] * j->astr[R - 2] : 0, cstride = row > 1 ? step * j->astr[R - 1] : 1;
	for (int64_t p = p0; p < p1; p++) {
		/* from the indices: a step may be huge where its axis keeps one element */
		int64_t src = j->b[R - 2] * j->astr[R - 2] + j->b[R - 1] * j->astr[R - 1];
		for (int64_t d = R - 3, k = p; d >= 0; d--) {
			src += (j->b[d] + k % j->dims[d] * j->st[d]) * j->astr[d];
			k /= j->dims[d];
		}
		uint8_t *q = j->o + (size_t)(p * rows * row) * es;
		for (int64_t r = 0; r < rows; r++, q += (size_t)row * es) {
			const uint8_t *s = j->a + (size_t)(src + r * rstride) * es;
			if (cstride == 1 && row * (int64_t)es >= 64)
				memcpy(q, s, (size_t)row * es);
			else if (es == 4)
				for (int64_t c = 0; c < row; c++)
					((uint32_t *)q)[c] = ((const uint32_t *)s)[c * cstride];
			else
				for (int64_t c = 0; c < row; c++)
					memcpy(q + (size_t)c * es, s + (size_t)(c * cstride) * es, es);
		}
	}
}

/* Slice-1's attributes (the opsets before 10 take no inputs but the data): starts and ends, both
 * required, and axes, which default to 0, 1, ... */
static int slice_attrs(struct exec *x, const struct node *n, int64_t *starts, int *ns, int64_t *ends, int *ne,
		       int64_t *axes, int *na)
{
	const char *names[3] = {"starts", "ends", "axes"};
	int64_t *to[3] = {starts, ends, axes};
	int *len[3] = {ns, ne, na};
	for (int k = 0; k < 3; k++) {
		const struct attr *a = node_attr(n, names[k]);
		*len[k] = 0;
		if (!a && k < 2)
			return exec_fail(x, "Slice before opset 10 needs the attribute '%s'", names[k]);
		if (a && a->type != ATTR_INTS)
			return exec_fail(x, "attribute '%s' must be a list of ints", names[k]);
		if (a && a->n > RT_MAX_DIMS)
			return exec_fail(x, "attribute '%s' has %zu entries (at most %d)", names[k], a->n, RT_MAX_DIMS);
		for (size_t i = 0; a && i < a->n; i++)
			to[k][i] = a->ints[i];
		*len[k] = a ? (int)a->n : 0;
	}
	return 0;
}

static int slice_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int64_t starts[RT_MAX_DIMS], ends[RT_MAX_DIMS], axes[RT_MAX_DIMS], steps[RT_MAX_DIMS];
	int ns, ne, na = 0, nst = 0;
	if (n->n_in < 3) { /* opset 1-9: starts, ends and axes are attributes, every step 1 */
		if (slice_attrs(x, n, starts, &ns, ends, &ne, axes, &na))
			return exec_status(x);
	} else if (!in[1] || !in[2]) {
		return exec_fail(x, "starts and ends are required");
	} else if (rt_ints(x, in[1], "starts", starts, RT_MAX_DIMS, &ns) ||
		   rt_ints(x, in[2], "ends", ends, RT_MAX_DIMS, &ne) ||
		   (n->n_in > 3 && in[3] && rt_ints(x, in[3], "axes", axes, RT_MAX_DIMS, &na)) ||
		   (n->n_in > 4 && in[4] && rt_ints(x, in[4], "steps", steps, RT_MAX_DIMS, &nst))) {
		return exec_status(x);
	}
	if (ns != ne || (na && na != ns) || (nst && nst != ns))
		return exec_fail(x, "starts, ends, axes and steps differ in length");
	int64_t b[RT_MAX_DIMS], st[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	for (int i = 0; i < a->ndim; i++) {
		b[i] = 0;
		st[i] = 1;
		dims[i] = a->dims[i];
	}
	int open = 0;
	for (int k = 0; k < ns; k++) {
		int ax;
		if (norm_axis(x, na ? axes[k] : k, a->ndim, &ax))
			return exec_status(x);
		int64_t s = nst ? steps[k] : 1, d = a->dims[ax];
		if (s == 0)
			return exec_fail(x, "a step of 0");
		st[ax] = s;
		/* a fixed buffer sliced [:T] by a symbolic T: the slice is T long, assuming T <= d, which
		 * is recorded (symdim.h), rather than clamped to d */
		if (s == 1 && starts[k] >= 0 && starts[k] < d && ends[k] > d && ends[k] < (int64_t)1 << 40 &&
		    !exec_dim_symbolic(x, d) && exec_dim_symbolic(x, ends[k])) {
			b[ax] = starts[k];
			dims[ax] = ends[k] - starts[k];
			open = 1;
			if (exec_assume(x, ends[k], d, n->in[0]))
				return exec_status(x);
			continue;
		}
		slice_bounds(d, starts[k], ends[k], s, &b[ax], &dims[ax]);
	}
	if (open) /* (its shape only: the data is not there to copy) */
		return exec_shape(x, out[0], a->dtype, a->ndim, dims);
	uint8_t *o = exec_alloc(x, out[0], a->dtype, a->ndim, dims);
	if (!o || out[0]->numel == 0)
		return exec_status(x);
	/* the output's planes (its last two axes) cut over the threads; rank < 2 as (1, 1, n) */
	struct sjob j = {.a = a->data, .o = o, .es = dtype_size(a->dtype), .R = a->ndim < 2 ? 2 : a->ndim};
	int64_t astr[RT_MAX_DIMS];
	c_strides(a->ndim, a->dims, astr);
	for (int d = 0, lead = j.R - a->ndim; d < j.R; d++) {
		int sd = d - lead;
		j.b[d] = sd < 0 ? 0 : b[sd];
		j.st[d] = sd < 0 ? 1 : st[sd];
		j.dims[d] = sd < 0 ? 1 : dims[sd];
		j.astr[d] = sd < 0 ? 0 : astr[sd];
	}
	int64_t plane = j.dims[j.R - 2] * j.dims[j.R - 1];
	kernel_for(out[0]->numel / plane, KERNEL_GRAIN / plane + 1, slice_planes, &j);
	return 0;
}

static int gather_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *ix = in[1];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax))
		return exec_status(x);
	if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
		return exec_fail(x, "indices must be int64 or int32, not %s", dtype_name(ix->dtype));
	int nd = a->ndim - 1 + ix->ndim;
	if (nd > RT_MAX_DIMS)
		return exec_fail(x, "result rank exceeds %d", RT_MAX_DIMS);
	int64_t dims[RT_MAX_DIMS];
	int k = 0;
	for (int i = 0; i < ax; i++)
		dims[k++] = a->dims[i];
	for (int i = 0; i < ix->ndim; i++)
		dims[k++] = ix->dims[i];
	for (int i = ax + 1; i < a->ndim; i++)
		dims[k++] = a->dims[i];
	uint8_t *o = exec_alloc(x, out[0], a->dtype, nd, dims);
	if (!o)
		return exec_status(x);
	size_t es = dtype_size(a->dtype);
	int64_t outer = 1, inner = 1, d = a->dims[ax];
	for (int i = 0; i < ax; i++)
		outer *= a->dims[i];
	for (int i = ax + 1; i < a->ndim; i++)
		inner *= a->dims[i];
	for (int64_t j = 0; j < ix->numel; j++) {
		int64_t v = rt_get_i(ix, j);
		if (v < -d || v >= d)
			return exec_fail(x, "index %lld is out of range for a dimension of %lld", (long long)v, (long long)d);
	}
	/* a row of the input at a time, written in order (index by index over all rows wrote single
	 * elements a whole output apart: Det's gradient's 144 elements of each of 65536 rows took
	 * 166 ms, now 9 ms) */
	const int64_t *i64 = ix->dtype == DT_INT64 ? ix->data : NULL;
	size_t w = (size_t)inner * es;
	for (int64_t o2 = 0; o2 < outer; o2++) {
		const uint8_t *row = (const uint8_t *)a->data + o2 * d * (int64_t)w;
		uint8_t *to = o + o2 * ix->numel * (int64_t)w;
		for (int64_t j = 0; j < ix->numel; j++, to += w) {
			int64_t v = i64 ? i64[j] : rt_get_i(ix, j);
			const uint8_t *from = row + (v < 0 ? v + d : v) * (int64_t)w;
			if (w == 4)
				memcpy(to, from, 4);
			else if (w == 8)
				memcpy(to, from, 8);
			else
				memcpy(to, from, w);
		}
	}
	return 0;
}

/* Expand's copy: output rows of D[R-1] elements, the input read at strides S (0 along a broadcast
 * axis; the last one's 0 or 1, the input being dense). */
struct ejob {
	const uint8_t *in;
	uint8_t *o;
	size_t es;
	int R;
	int64_t D[RT_MAX_DIMS], S[RT_MAX_DIMS];
};

/* Output rows [r0, r1): a copy of an input row, or one element repeated. A piece of kernel_for. */
static void expand_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct ejob *j = arg;
	size_t es = j->es;
	int64_t row = j->D[j->R - 1];
	for (int64_t r = r0; r < r1; r++) {
		int64_t src = 0, k = r;
		for (int d = j->R - 2; d >= 0; d--) {
			src += k % j->D[d] * j->S[d];
			k /= j->D[d];
		}
		const uint8_t *s = j->in + (size_t)src * es;
		uint8_t *q = j->o + (size_t)(r * row) * es;
		if (j->S[j->R - 1])
			memcpy(q, s, (size_t)row * es);
		else if (es == 4)
			for (int64_t c = 0; c < row; c++)
				memcpy(q + (size_t)c * 4, s, 4);
		else if (es == 8)
			for (int64_t c = 0; c < row; c++)
				memcpy(q + (size_t)c * 8, s, 8);
		else
			for (int64_t c = 0; c < row; c++)
				memcpy(q + (size_t)c * es, s, es);
	}
}

static int expand_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	int64_t shape[RT_MAX_DIMS];
	int ns;
	if (rt_ints(x, in[1], "the shape input", shape, RT_MAX_DIMS, &ns))
		return exec_status(x);
	struct rtensor target = {.ndim = ns};
	memcpy(target.dims, shape, (size_t)ns * sizeof *shape);
	struct rtensor *pair[2] = {in[0], &target};
	int nd;
	int64_t dims[RT_MAX_DIMS], st[RT_MAX_DIMS];
	if (bcast_shape(x, pair, 2, &nd, dims))
		return exec_status(x);
	uint8_t *o = exec_alloc(x, out[0], in[0]->dtype, nd, dims);
	if (!o)
		return exec_status(x);
	bcast_strides(in[0], nd, dims, st);
	/* the walk as few axes as the input's strides allow (a scalar's broadcast is one row of
	 * stride 0: a fill) */
	struct ejob j = {.in = in[0]->data, .o = o, .es = dtype_size(in[0]->dtype)};
	j.R = merge_axes(nd, dims, st, j.D, j.S);
	if (!j.R) {
		j.D[0] = 1;
		j.R = 1;
	}
	int64_t row = j.D[j.R - 1];
	if (out[0]->numel)
		kernel_for(out[0]->numel / row, KERNEL_GRAIN / row + 1, expand_rows, &j);
	return 0;
}

static int shape_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int r = in[0]->ndim;
	int64_t s = attr_int(n, "start", 0), e = attr_int(n, "end", r);
	s = clamp(s < 0 ? s + r : s, 0, r);
	e = clamp(e < 0 ? e + r : e, 0, r);
	int64_t len = e > s ? e - s : 0;
	/* OPF_META: computed even in shape inference, from the input's shape alone */
	int64_t *o = exec_alloc(x, out[0], DT_INT64, 1, &len);
	if (!o)
		return exec_status(x);
	for (int64_t i = 0; i < len; i++)
		o[i] = in[0]->dims[s + i];
	return 0;
}

/* A tensor attribute's elements as a new output. */
static int from_tensor(struct exec *x, const struct node *n, const struct tensor *t, struct rtensor *out)
{
	struct bytes b;
	if ((int)t->ndim > RT_MAX_DIMS)
		return exec_fail(x, "constant of rank %u", t->ndim);
	void *o = exec_alloc(x, out, t->dtype, (int)t->ndim, t->dims);
	if (!o)
		return exec_status(x);
	(void)n;
	if (tensor_bytes(exec_graph(x), t, &b, NULL) || b.n != out->nbytes)
		return exec_fail(x, "the constant's data does not match its shape");
	if (b.n) /* an empty constant has no data pointer */
		memcpy(o, b.p, b.n);
	return 0;
}

static int constant_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)in;
	const struct attr *a;
	if ((a = node_attr(n, "value")) && a->type == ATTR_TENSOR)
		return from_tensor(x, n, a->t, out[0]);
	int64_t one = 1, cnt;
	if ((a = node_attr(n, "value_float")) || (a = node_attr(n, "value_int"))) {
		int dt = a->type == ATTR_FLOAT ? DT_FLOAT : DT_INT64;
		void *o = exec_alloc(x, out[0], dt, 0, &one);
		if (o)
			rt_set(out[0], 0, dt == DT_FLOAT ? a->f : (double)a->i);
		if (o && dt == DT_INT64)
			*(int64_t *)o = a->i;
		return exec_status(x);
	}
	if ((a = node_attr(n, "value_floats")) || (a = node_attr(n, "value_ints"))) {
		int dt = a->type == ATTR_FLOATS ? DT_FLOAT : DT_INT64;
		cnt = (int64_t)a->n;
		void *o = exec_alloc(x, out[0], dt, 1, &cnt);
		if (o)
			memcpy(o, dt == DT_FLOAT ? (const void *)a->floats : (const void *)a->ints, out[0]->nbytes);
		return exec_status(x);
	}
	return exec_fail(x, "Constant without a value attribute graphdiet supports");
}

static int constant_of_shape_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				 struct rtensor *const *out)
{
	int64_t shape[RT_MAX_DIMS];
	int ns;
	if (rt_ints(x, in[0], "the shape input", shape, RT_MAX_DIMS, &ns))
		return exec_status(x);
	const struct attr *a = node_attr(n, "value");
	int dt = a && a->type == ATTR_TENSOR ? a->t->dtype : DT_FLOAT;
	uint8_t *o = exec_alloc_zero(x, out[0], dt, ns, shape);
	if (!o)
		return exec_status(x);
	if (a && a->type == ATTR_TENSOR) {
		struct bytes b;
		size_t es = dtype_size(dt), nz = 0;
		if (tensor_bytes(exec_graph(x), a->t, &b, NULL) || b.n != es)
			return exec_fail(x, "value must hold one element");
		for (size_t k = 0; k < es; k++)
			nz |= ((const uint8_t *)b.p)[k];
		if (nz && es == 4) {
			uint32_t v;
			memcpy(&v, b.p, 4);
			for (int64_t i = 0; i < out[0]->numel; i++)
				((uint32_t *)(void *)o)[i] = v;
		} else if (nz) { /* zeros are there already */
			for (int64_t i = 0; i < out[0]->numel; i++)
				memcpy(o + i * es, b.p, es);
		}
	}
	return 0;
}

/* A scatter's reduction: max and min (opset 18) as NumPy's maximum and minimum, a NaN on either
 * side the result (ONNX's reference scatters with them) */
enum red { R_NONE, R_ADD, R_MUL, R_MAX, R_MIN };

static int reduction_of(struct exec *x, const struct node *n, enum red *r)
{
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	*r = R_NONE;
	for (int k = 0; k < 5; k++)
		if (attr_str_is(n, "reduction", names[k], k == 0)) {
			*r = (enum red)k;
			return 0;
		}
	return exec_fail(x, "reduction must be none, add, mul, max or min");
}

static inline double combine_d(double c, double v, enum red r)
{
	switch (r) {
	case R_ADD:
		return c + v;
	case R_MUL:
		return c * v;
	case R_MAX:
		return c != c || v != v ? c + v : c > v ? c : v;
	case R_MIN:
		return c != c || v != v ? c + v : c < v ? c : v;
	default:
		return v;
	}
}

/* float32 c combined with v, in double as rt_get/rt_set's path computes it */
static inline float combine_f(float c, float v, enum red r)
{
	return (float)combine_d(c, v, r);
}

static void combine(struct rtensor *o, int64_t at, const struct rtensor *u, int64_t from, enum red r)
{
	if (o->dtype == DT_FLOAT && u->dtype == DT_FLOAT) { /* the same arithmetic, without the dispatch */
		float *po = o->data;
		po[at] = combine_f(po[at], ((const float *)u->data)[from], r);
		return;
	}
	rt_set(o, at, combine_d(rt_get(o, at), rt_get(u, from), r));
}

static void combine_row(float *o, const float *u, int64_t n, enum red r)
{
	for (int64_t e = 0; e < n; e++)
		o[e] = combine_f(o[e], u[e], r);
}

static int scatter_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *ix = in[1], *u = in[2];
	enum red red;
	if (reduction_of(x, n, &red))
		return exec_status(x);
	if (ix->ndim < 1 || ix->dims[ix->ndim - 1] > a->ndim || u->dtype != a->dtype)
		return exec_fail(x, "indices and updates do not fit the data");
	int taken = exec_take(x, in[0], out[0], a->ndim, a->dims); /* in place when the data dies here */
	if (taken < 0 || (!taken && !exec_alloc(x, out[0], a->dtype, a->ndim, a->dims)))
		return exec_status(x);
	if (!taken)
		memcpy(out[0]->data, a->data, a->nbytes);
	int64_t k = ix->dims[ix->ndim - 1], nidx = ix->numel / (k ? k : 1), slice = 1, st[RT_MAX_DIMS];
	for (int i = (int)k; i < a->ndim; i++)
		slice *= a->dims[i];
	if (u->numel != nidx * slice)
		return exec_fail(x, "updates hold %lld elements, not %lld", (long long)u->numel, (long long)(nidx * slice));
	c_strides(a->ndim, a->dims, st);
	for (int64_t j = 0; j < nidx; j++) {
		int64_t off = 0;
		for (int64_t d = 0; d < k; d++) {
			int64_t v = rt_get_i(ix, j * k + d);
			if (v < 0)
				v += a->dims[d];
			if (v < 0 || v >= a->dims[d])
				return exec_fail(x, "index out of range");
			off += v * st[d];
		}
		if (a->dtype == DT_FLOAT) /* an embedding's gradient: combine's arithmetic on a row, no dispatch */
			combine_row((float *)out[0]->data + off, (const float *)u->data + j * slice, slice, red);
		else
			for (int64_t e = 0; e < slice; e++)
				combine(out[0], off + e, u, j * slice + e, red);
	}
	return 0;
}

static int scatter_elements_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *ix = in[1], *u = in[2];
	int ax;
	enum red red;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax) || reduction_of(x, n, &red))
		return exec_status(x);
	if (ix->ndim != a->ndim || u->ndim != a->ndim || u->numel != ix->numel || u->dtype != a->dtype)
		return exec_fail(x, "indices and updates must match the data's rank and each other");
	for (int i = 0; i < a->ndim; i++) /* else a row past the data's end was written */
		if (i != ax && ix->dims[i] > a->dims[i])
			return exec_fail(x, "indices' dimension %d (%lld) exceeds the data's (%lld)", i,
					 (long long)ix->dims[i], (long long)a->dims[i]);
	int taken = exec_take(x, in[0], out[0], a->ndim, a->dims); /* in place when the data dies here */
	if (taken < 0 || (!taken && !exec_alloc(x, out[0], a->dtype, a->ndim, a->dims)))
		return exec_status(x);
	if (!taken)
		memcpy(out[0]->data, a->data, a->nbytes);
	int rows = red <= R_MUL ? scatter_elements_rows(out[0], ix, u, ax, (int)red) : 0; /* float32/float64 (index.c) */
	if (rows)
		return rows < 0 ? exec_fail(x, "index out of range") : 0;
	int64_t st[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(a->ndim, a->dims, st);
	for (int64_t j = 0; j < ix->numel; j++) {
		int64_t off = 0, v = rt_get_i(ix, j);
		if (v < 0)
			v += a->dims[ax];
		if (v < 0 || v >= a->dims[ax])
			return exec_fail(x, "index out of range");
		for (int d = 0; d < a->ndim; d++)
			off += (d == ax ? v : idx[d]) * st[d];
		combine(out[0], off, u, j, red);
		for (int d = a->ndim - 1; d >= 0; d--) {
			if (++idx[d] < ix->dims[d])
				break;
			idx[d] = 0;
		}
	}
	return 0;
}


/* Pad (constant mode): pads (2*rank: begins then ends; negative crops), optional constant value. */
enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

static int pad_mode(const struct node *n)
{
	return attr_str_is(n, "mode", "reflect", 0) ? PAD_REFLECT
	       : attr_str_is(n, "mode", "edge", 0)  ? PAD_EDGE
	       : attr_str_is(n, "mode", "constant", 1) ? PAD_CONSTANT
						       : -1;
}

/* The input index an output position i - begin reads along an axis of d elements: reflected about
 * the edge elements (reflect: numpy's, PyTorch's ReflectionPad) or repeating them (edge). */
static int64_t pad_source(int mode, int64_t i, int64_t d)
{
	if (mode == PAD_EDGE)
		return i < 0 ? 0 : i >= d ? d - 1 : i;
	return i < 0 ? -i : i >= d ? 2 * (d - 1) - i : i;
}

/* Pad before opset 11 (opset 2's form) holds its pads and constant in attributes, `pads` (opset 1:
 * `paddings`) and `value`: *t over them, a pads input of its own, or 0 when the node has neither. */
static int pad_attr(const struct node *n, struct rtensor *t)
{
	size_t k;
	const int64_t *p = attr_ints(n, "pads", &k);
	p = p ? p : attr_ints(n, "paddings", &k);
	if (!p || (n->n_in > 1 && n->in[1]) || k > 2 * RT_MAX_DIMS)
		return 0;
	memset(t, 0, sizeof *t);
	t->dtype = DT_INT64, t->ndim = 1, t->dims[0] = t->numel = (int64_t)k, t->data = (void *)p, t->known = 1;
	t->nbytes = k * sizeof *p;
	return 1;
}

static int pad_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *pin = n->n_in > 1 ? in[1] : NULL;
	int64_t pads[2 * RT_MAX_DIMS], dims[RT_MAX_DIMS], axes[RT_MAX_DIMS];
	int np, na = a->ndim, mode = pad_mode(n);
	struct rtensor old;
	if (mode < 0)
		return exec_fail(x, "mode must be constant, reflect or edge");
	if (pad_attr(n, &old))
		pin = &old;
	if (!pin)
		return exec_fail(x, "Pad needs its pads: an input (opset 11 or later) or the attribute (before)");
	if (rt_ints(x, pin, "pads", pads, 2 * RT_MAX_DIMS, &np))
		return exec_status(x);
	if (n->n_in > 3 && in[3]) {
		if (rt_ints(x, in[3], "axes", axes, RT_MAX_DIMS, &na))
			return exec_status(x);
	} else {
		for (int i = 0; i < na; i++)
			axes[i] = i;
	}
	if (np != 2 * na)
		return exec_fail(x, "pads has %d entries for %d axes", np, na);
	int64_t begin[RT_MAX_DIMS] = {0}, end[RT_MAX_DIMS] = {0};
	for (int k = 0; k < na; k++) {
		int ax;
		if (norm_axis(x, axes[k], a->ndim, &ax))
			return exec_status(x);
		begin[ax] = pads[k];
		end[ax] = pads[k + na];
	}
	/* pads come from the file: their sums are checked (2^62 + 2^62 overflowed), and a negative one
	 * crops at most the dimension (so that -pad, the gradient's, is a number too) */
	for (int i = 0; i < a->ndim; i++) {
		if (begin[i] < -a->dims[i] || end[i] < -a->dims[i])
			return exec_fail(x, "padding removes more than dimension %d holds", i);
		if (__builtin_add_overflow(a->dims[i], begin[i], &dims[i]) || __builtin_add_overflow(dims[i], end[i], &dims[i]))
			return exec_fail(x, "padding dimension %d (%lld) by %lld and %lld does not fit in 64 bits", i,
					 (long long)a->dims[i], (long long)begin[i], (long long)end[i]);
		if (dims[i] < 0)
			return exec_fail(x, "padding removes more than dimension %d holds", i);
	}
	for (int i = 0; mode != PAD_CONSTANT && i < a->ndim; i++)
		if ((begin[i] || end[i]) && (a->dims[i] == 0 || (mode == PAD_REFLECT && (begin[i] >= a->dims[i] ||
											 end[i] >= a->dims[i]))))
			return exec_fail(x, "%s padding of dimension %d (%lld) by %lld and %lld", mode == PAD_REFLECT ? "reflect" : "edge",
					 i, (long long)a->dims[i], (long long)begin[i], (long long)end[i]);
	uint8_t *o = exec_alloc_zero(x, out[0], a->dtype, a->ndim, dims);
	if (!o)
		return exec_status(x);
	if (mode != PAD_CONSTANT) { /* every output element reads one input element */
		size_t es = dtype_size(a->dtype);
		int64_t ast[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
		c_strides(a->ndim, a->dims, ast);
		for (int64_t e = 0; e < out[0]->numel; e++) {
			int64_t src = 0;
			for (int d = 0; d < a->ndim; d++)
				src += pad_source(mode, idx[d] - begin[d], a->dims[d]) * ast[d];
			memcpy(o + e * (int64_t)es, (const uint8_t *)a->data + src * (int64_t)es, es);
			for (int d = a->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--)
				idx[d] = 0;
		}
		return 0;
	}
	double cv = n->n_in > 2 && in[2] && in[2]->data ? rt_get(in[2], 0) : pin == &old ? attr_float(n, "value", 0) : 0;
	for (int64_t i = 0; cv != 0 && i < out[0]->numel; i++)
		rt_set(out[0], i, cv);
	size_t es = dtype_size(a->dtype);
	int64_t ost[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(a->ndim, dims, ost);
	/* row by row along the last axis: the run of each input row that lands inside the output */
	int last = a->ndim - 1;
	int64_t row = a->ndim ? a->dims[last] : 1, b0 = a->ndim ? begin[last] : 0, lim = a->ndim ? dims[last] : 1;
	int64_t j0 = b0 < 0 ? -b0 : 0, j1 = lim - b0 < row ? lim - b0 : row;
	for (int64_t i = 0; row && i < a->numel; i += row) {
		int64_t dst = 0, inside = j0 < j1;
		for (int d = 0; d < last; d++) {
			int64_t p = idx[d] + begin[d];
			inside &= p >= 0 && p < dims[d];
			dst += p * ost[d];
		}
		if (inside)
			memcpy(o + (dst + j0 + b0) * es, (const uint8_t *)a->data + (i + j0) * es, (size_t)(j1 - j0) * es);
		for (int d = last - 1; d >= 0; d--) {
			if (++idx[d] < a->dims[d])
				break;
			idx[d] = 0;
		}
	}
	return 0;
}

/* ---- gradient rules ---- */

/* Reshape, Flatten, Squeeze, Unsqueeze: the gradient takes the input's shape back. */
/* g back to the input's shape; a 0 there is a dimension of 0 (allowzero, opset 14), not "copy" */
static int reshape_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int zero = 0;
	for (int i = 0; i < xs->ndim; i++)
		zero |= xs->dims[i] == 0;
	struct value *g = ad_op2(a, "Reshape", ad_dy(a, n->out[0]), ad_shape_of(a, n->in[0]));
	if (g && zero && (ad_need_opset(a, 14, "the gradient of a Reshape of an empty tensor (allowzero)") ||
			  ad_set_int(a, ad_producer(g), "allowzero", 1)))
		return -1;
	return ad_give(a, n->in[0], g);
}

static int transpose_grad(struct ad *a, const struct node *n)
{
	int r = ad_shape(a, n->in[0])->ndim;
	size_t np;
	const int64_t *p = attr_ints(n, "perm", &np);
	int64_t inv[RT_MAX_DIMS];
	for (int i = 0; i < r; i++)
		inv[p ? p[i] : r - 1 - i] = i;
	struct value *t = ad_op1(a, "Transpose", ad_dy(a, n->out[0]));
	return !t || ad_set_ints(a, ad_producer(t), "perm", inv, (size_t)r) ? -1 : ad_give(a, n->in[0], t);
}

static int concat_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *ys = ad_shape(a, n->out[0]);
	int ax = (int)attr_int(n, "axis", 0);
	ax = ax < 0 ? ax + ys->ndim : ax;
	if (ad_dim_symbolic(a, ys->dims[ax])) /* the split sizes are only known at run time */
		return ad_fail(a, "cannot differentiate a Concat along a symbolic dimension yet");
	int64_t *sizes = xcalloc(n->n_in + 1, sizeof *sizes);
	if (!sizes)
		return ad_fail(a, "out of memory");
	for (uint32_t k = 0; k < n->n_in; k++)
		sizes[k] = ad_shape(a, n->in[k])->dims[ax];
	struct value *ins[2] = {ad_dy(a, n->out[0]), ad_ints(a, sizes, n->n_in)};
	xfree(sizes);
	struct node *s = ins[1] ? ad_node(a, "Split", ins, 2, (int)n->n_in) : NULL;
	if (!s || ad_set_int(a, s, "axis", ax))
		return -1;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (ad_give(a, n->in[k], s->out[k]))
			return -1;
	return 0;
}

static int split_grad(struct ad *a, const struct node *n)
{
	struct value **parts = xcalloc(n->n_out + 1, sizeof *parts);
	if (!parts)
		return ad_fail(a, "out of memory");
	for (uint32_t k = 0; k < n->n_out; k++) {
		parts[k] = ad_dy(a, n->out[k]);
		if (!parts[k] && !(parts[k] = ad_zeros_like(a, n->out[k]))) {
			xfree(parts);
			return -1;
		}
	}
	struct value *c = ad_op(a, "Concat", parts, (int)n->n_out);
	xfree(parts);
	int ax = (int)attr_int(n, "axis", 0);
	return !c || ad_set_int(a, ad_producer(c), "axis", ax) ? -1 : ad_give(a, n->in[0], c);
}

static struct value *pad_axis(struct ad *a, struct value *g, int r, int ax, int64_t before, int64_t after)
{
	int64_t pads[2 * (RT_MAX_DIMS + 1)] = {0};
	pads[ax] = before;
	pads[ax + r] = after;
	struct value *ins[2] = {g, ad_ints(a, pads, (size_t)(2 * r))};
	return ins[1] ? ad_op(a, "Pad", ins, 2) : NULL;
}

static struct value *slice_axis(struct ad *a, struct value *g, int64_t ax, int64_t start, int64_t end, int64_t step)
{
	struct value *ins[5] = {g, ad_ints(a, &start, 1), ad_ints(a, &end, 1), ad_ints(a, &ax, 1), ad_ints(a, &step, 1)};
	return ad_op(a, "Slice", ins, 5);
}

/* [0 (r times), Shape(g)]: g's shape where Pad's trailing pads are */
static struct value *shape_after_zeros(struct ad *a, struct value *g, int r)
{
	int64_t zeros[RT_MAX_DIMS] = {0};
	struct value *parts[2] = {ad_ints(a, zeros, (size_t)r), ad_op1(a, "Shape", g)};
	struct value *c = parts[0] && parts[1] ? ad_op(a, "Concat", parts, 2) : NULL;
	return !c || ad_set_int(a, ad_producer(c), "axis", 0) ? NULL : c;
}

/* Slice: the gradient is g put back where it was read, zeros elsewhere. Unit steps are one Pad for
 * all such axes. Along an axis with step s, the count slices taken from `first` are spread s apart:
 * g (a negative step flipped first) gains an axis of 1 after it, padded to s (zeros between the
 * elements), merged back (count s), cut to what fits and padded to the input's length at first. */
static int slice_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ys = ad_shape(a, n->out[0]);
	int r = xs->ndim;
	if (n->n_in < 3 || !n->in[1] || !n->in[2])
		return ad_fail(a, "Slice before opset 10 (starts and ends as attributes) is not differentiated");
	const struct rtensor *st = ad_shape(a, n->in[1]), *en = ad_shape(a, n->in[2]);
	const struct rtensor *axs = n->n_in > 3 && n->in[3] ? ad_shape(a, n->in[3]) : NULL;
	const struct rtensor *sts = n->n_in > 4 && n->in[4] ? ad_shape(a, n->in[4]) : NULL;
	if (!st->data || !en->data || (axs && !axs->data) || (sts && !sts->data))
		return ad_fail(a, "starts, ends, axes and steps must be constants to differentiate");
	int64_t pads[2 * RT_MAX_DIMS] = {0}, cur[RT_MAX_DIMS + 1];
	memcpy(cur, ys->dims, sizeof ys->dims[0] * (size_t)r);
	struct value *g = ad_dy(a, n->out[0]);
	int unit = 0, any_open = 0;
	int64_t open[2 * RT_MAX_DIMS] = {0};
	for (int64_t k = 0; k < st->numel && g; k++) {
		int64_t ax = axs ? rt_get_i(axs, k) : k, step = sts ? rt_get_i(sts, k) : 1, first, count;
		if (ax < 0)
			ax += r;
		int64_t d = xs->dims[ax];
		if (ad_dim_symbolic(a, d))
			return ad_fail(a, "cannot differentiate a Slice along a symbolic dimension yet");
		if (step == 0)
			return ad_fail(a, "a step of 0");
		slice_bounds(d, rt_get_i(st, k), rt_get_i(en, k), step, &first, &count);
		if (step == 1 && ad_dim_symbolic(a, ys->dims[ax]) && ys->dims[ax] > d - first) {
			/* a fixed buffer sliced [first:T] by a symbolic T (the Slice rule's open slice): dy is
			 * T long, and what follows it, d - first - T, is known only at run time */
			pads[ax] = first;
			pads[ax + r] = d - first;
			open[ax] = open[ax + r] = 1; /* [ax + r]: where the trailing pad takes Shape(g) off */
			unit = any_open = 1;
			continue;
		}
		if (count <= 1) /* one element or none: the step does not matter (and count x step cannot overflow) */
			step = 1;
		if (step == 1) {
			pads[ax] = first;
			pads[ax + r] = d - first - count;
			unit = 1;
			continue;
		}
		for (int i = 0; i < r; i++)
			if (ad_dim_symbolic(a, cur[i]) || open[i])
				return ad_fail(a, "cannot differentiate a strided Slice of a symbolic shape yet");
		if (step < 0) { /* taken backwards: flip g, and it reads forwards from its last element */
			g = slice_axis(a, g, ax, -1, INT64_MIN, -1);
			first += (count - 1) * step;
			step = -step;
		}
		int64_t one = ax + 1, merged[RT_MAX_DIMS];
		memcpy(merged, cur, sizeof merged);
		merged[ax] = count * step;
		g = ad_op2(a, "Unsqueeze", g, ad_ints(a, &one, 1));
		g = g ? pad_axis(a, g, r + 1, (int)ax + 1, 0, step - 1) : NULL;
		g = g ? ad_op2(a, "Reshape", g, ad_ints(a, merged, (size_t)r)) : NULL;
		int64_t len = count * step;
		if (first + len > d) { /* the last element's trailing zeros run past the end */
			g = g ? slice_axis(a, g, ax, 0, d - first, 1) : NULL;
			len = d - first;
		}
		g = g ? pad_axis(a, g, r, (int)ax, first, d - first - len) : NULL;
		cur[ax] = d;
	}
	if (g && unit) {
		struct value *ins[2] = {g, ad_ints(a, pads, (size_t)(2 * r))};
		if (any_open) /* pads - open * [0 .. 0, Shape(g)]: the open axes' trailing pads less g's length */
			ins[1] = ad_op2(a, "Sub", ins[1], ad_op2(a, "Mul", ad_ints(a, open, (size_t)(2 * r)), shape_after_zeros(a, g, r)));
		g = ins[1] ? ad_op(a, "Pad", ins, 2) : NULL;
	}
	return ad_give(a, n->in[0], g);
}

/* Pad's gradient is the slice of g that held the input. */
/* Reflect and edge padding: along each padded axis, every position's gradient goes to the input
 * element it read (pad_source), a ScatterElements adding along the axis (opset 16). */
static int pad_source_grad(struct ad *a, const struct node *n, const struct rtensor *xs, const struct rtensor *ps)
{
	if (ad_need_opset(a, 16, "the gradient of reflect and edge Pad (ScatterElements with reduction)"))
		return -1;
	int r = xs->ndim, mode = pad_mode(n);
	int64_t cur[RT_MAX_DIMS];
	struct value *g = ad_dy(a, n->out[0]);
	for (int i = 0; i < r; i++) {
		if (ad_dim_symbolic(a, xs->dims[i]))
			return ad_fail(a, "cannot differentiate a %s Pad of a symbolic shape yet", mode == PAD_REFLECT ? "reflect" : "edge");
		cur[i] = xs->dims[i] + rt_get_i(ps, i) + rt_get_i(ps, i + r);
	}
	for (int ax = 0; ax < r && g; ax++) {
		int64_t b = rt_get_i(ps, ax), d = xs->dims[ax], len = cur[ax];
		if (!b && !rt_get_i(ps, ax + r))
			continue;
		int64_t *src = xcalloc((size_t)len + 1, sizeof *src), view[RT_MAX_DIMS], zd[RT_MAX_DIMS];
		if (!src)
			return ad_fail(a, "out of memory");
		for (int64_t i = 0; i < len; i++)
			src[i] = pad_source(mode, i - b, d);
		for (int i = 0; i < r; i++) {
			view[i] = i == ax ? len : 1;
			zd[i] = i == ax ? d : cur[i];
		}
		struct value *ix = ad_op2(a, "Expand", ad_op2(a, "Reshape", ad_ints(a, src, (size_t)len), ad_ints(a, view, (size_t)r)),
					  ad_ints(a, cur, (size_t)r));
		xfree(src);
		struct value *ins[3] = {ad_op2(a, "Expand", ad_scalar(a, xs->dtype, 0), ad_ints(a, zd, (size_t)r)), ix, g};
		g = ins[0] && ins[1] ? ad_op(a, "ScatterElements", ins, 3) : NULL;
		struct node *p = ad_producer(g);
		if (!p || ad_set_int(a, p, "axis", ax) || ad_set_str(a, p, "reduction", "add"))
			return -1;
		cur[ax] = d;
	}
	return ad_give(a, n->in[0], g);
}

static int pad_grad(struct ad *a, const struct node *n)
{
	struct rtensor old;
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ps = pad_attr(n, &old) ? &old : n->n_in > 1 ? ad_shape(a, n->in[1]) : NULL;
	int r = xs->ndim;
	if (!ps || !ps->data || ps->numel != 2 * r || (n->n_in > 3 && n->in[3]))
		return ad_fail(a, "pads must be a constant for every axis to differentiate");
	if (pad_mode(n) != PAD_CONSTANT)
		return pad_source_grad(a, n, xs, ps);
	/* the pads undone: Pad by their negation crops what was added and puts zeros back where a
	 * negative pad cropped (a Slice from pads[i] would read a negative pad from the end) */
	int64_t neg[2 * RT_MAX_DIMS];
	for (int i = 0; i < 2 * r; i++)
		neg[i] = -rt_get_i(ps, i);
	struct value *ins[2] = {ad_dy(a, n->out[0]), ad_ints(a, neg, (size_t)(2 * r))};
	return ad_give(a, n->in[0], ins[1] ? ad_op(a, "Pad", ins, 2) : NULL);
}

static struct value *permute(struct ad *a, struct value *v, const int64_t *perm, int r)
{
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, (size_t)r) ? t : NULL;
}

/* Gather: ScatterND adds each slice of g into the slice of the input it was read from. Along axis 0
 * (embeddings) directly; along axis k the input's axis k is moved to the front first (and g's
 * index dimensions with it), and the sum moved back. */
static int gather_grad(struct ad *a, const struct node *n)
{
	if (ad_need_opset(a, 16, "the Gather gradient (ScatterND with reduction)"))
		return -1;
	const struct rtensor *xs = ad_shape(a, n->in[0]), *is = ad_shape(a, n->in[1]);
	int r = xs->ndim, q = is->ndim;
	int64_t ax = attr_int(n, "axis", 0);
	ax = ax < 0 ? ax + r : ax;
	struct value *ix = n->in[1], *g = ad_dy(a, n->out[0]), *zeros = ad_zeros_like(a, n->in[0]);
	if (ad_shape(a, ix)->dtype != DT_INT64 && !(ix = ad_cast(a, ix, DT_INT64)))
		return -1;
	int64_t xp[RT_MAX_DIMS], xinv[RT_MAX_DIMS], gp[2 * RT_MAX_DIMS], k = 0;
	if (ax > 0) { /* x: (ax, the rest in order); g: (index dims, the rest in order) */
		xp[0] = ax;
		for (int i = 0; i < r; i++)
			if (i != ax)
				xp[++k] = i;
		for (int i = 0; i < r; i++)
			xinv[xp[i]] = i;
		k = 0;
		for (int i = 0; i < q; i++)
			gp[k++] = ax + i;
		for (int i = 0; i < r - 1 + q; i++)
			if (i < ax || i >= ax + q)
				gp[k++] = i;
		zeros = permute(a, zeros, xp, r);
		g = permute(a, g, gp, r - 1 + q);
	}
	int64_t last = -1;
	struct value *ins[3] = {zeros, ad_op2(a, "Unsqueeze", ix, ad_ints(a, &last, 1)), g};
	struct value *s = ins[0] && ins[1] && ins[2] ? ad_op(a, "ScatterND", ins, 3) : NULL;
	if (!s || ad_set_str(a, ad_producer(s), "reduction", "add"))
		return -1;
	return ad_give(a, n->in[0], ax > 0 ? permute(a, s, xinv, r) : s);
}

static int expand_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_unbroadcast(a, ad_dy(a, n->out[0]), n->in[0], ad_shape(a, n->out[0])));
}

/* layout ops move bytes and compute nothing */
static void move_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	(void)n;
	(void)in;
	(void)out;
	(void)bytes;
	*flops = 0;
}

/* a gather (Gather, Slice) reads only the elements it writes, and its indices: not the whole of
 * input 0 (an embedding table) */
static void gather_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			uint64_t *bytes)
{
	*flops = 0;
	*bytes = 2 * (uint64_t)out[0]->nbytes;
	for (uint32_t k = 1; k < n->n_in; k++)
		*bytes += in[k] ? in[k]->nbytes : 0;
}

/* No-ops (op_impl.noop). A Transpose is one only under the identity permutation (a square
 * matrix keeps its shape turned); a Concat of one input is one. A Slice whose steps are positive
 * and whose output has the input's shape took every element in order: on an axis of n, the last
 * index start + (n - 1) step <= n - 1 forces start 0, and step 1 unless n is 1. */
static int transpose_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)out;
	size_t np;
	const int64_t *p = attr_ints(n, "perm", &np);
	for (size_t k = 0; p && k < np; k++)
		if (p[k] != (int64_t)k)
			return -1;
	return p || in[0]->ndim <= 1 ? 0 : -1;
}

static int concat_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)in;
	(void)out;
	return n->n_in == 1 ? 0 : -1;
}

static int slice_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)out;
	const struct rtensor *steps = n->n_in > 4 ? in[4] : NULL;
	if (steps && !steps->data)
		return -1;
	for (int64_t k = 0; steps && k < steps->numel; k++)
		if (rt_get(steps, k) <= 0)
			return -1;
	return 0;
}

const struct op_impl op_reshape = {.run = reshape_run, .cost = move_cost, .grad = reshape_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				   .noop = op_noop_same_shape};
const struct op_impl op_flatten = {.run = flatten_run, .cost = move_cost, .grad = reshape_grad, .recompute = RC_CHEAP,
				   .noop = op_noop_same_shape};
const struct op_impl op_squeeze = {.run = squeeze_run, .cost = move_cost, .grad = reshape_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				   .noop = op_noop_same_shape};
const struct op_impl op_unsqueeze = {.run = unsqueeze_run, .cost = move_cost, .grad = reshape_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_transpose = {.run = transpose_run, .cost = move_cost, .grad = transpose_grad, .recompute = RC_CHEAP,
				     .noop = transpose_noop};
const struct op_impl op_concat = {.run = concat_run, .cost = move_cost, .grad = concat_grad, .recompute = RC_CHEAP, .noop = concat_noop};
const struct op_impl op_split = {.run = split_run, .cost = move_cost, .grad = split_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_slice = {.run = slice_run, .cost = gather_cost, .grad = slice_grad, .recompute = RC_CHEAP, .nodiff = ~1u,
				 .noop = slice_noop};
const struct op_impl op_gather = {.run = gather_run, .cost = gather_cost, .grad = gather_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_expand = {.run = expand_run, .cost = move_cost, .grad = expand_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				  .noop = op_noop_same_shape};
const struct op_impl op_shape = {.run = shape_run, .cost = move_cost, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_constant = {.run = constant_run, .cost = move_cost, .recompute = RC_CHEAP};
const struct op_impl op_constant_of_shape = {.run = constant_of_shape_run, .cost = move_cost, .recompute = RC_CHEAP, .nodiff = ~0u};
/* Scatters (ScatterND, ScatterElements): without a reduction, data's gradient is g with the
 * written places zeroed (the same scatter of zeros into g) and the updates' is g gathered at them
 * (GatherND, GatherElements); with reduction add, data's is g itself. Updates written twice to one
 * place (no reduction) take the gradient at each, as onnxruntime's rule does; mul, max and min are
 * refused. */
static int scatter_grad(struct ad *a, const struct node *n, const char *gather)
{
	int add = attr_str_is(n, "reduction", "add", 0);
	if (!add && !attr_str_is(n, "reduction", "none", 1))
		return ad_fail(a, "no gradient rule for a scatter with reduction mul, max or min");
	struct value *g = ad_dy(a, n->out[0]);
	if (!g)
		return 0;
	int64_t axis = attr_int(n, "axis", 0);
	if (ad_wants(a, n->in[0])) {
		struct value *ins[3] = {g, n->in[1], ad_zeros_like(a, n->in[2])};
		struct value *d = add ? g : ad_op(a, n->op_type, ins, 3);
		if (!d || (!add && n->op == OP_SCATTER_ELEMENTS && ad_set_int(a, ad_producer(d), "axis", axis)) ||
		    ad_give(a, n->in[0], d))
			return -1;
	}
	if (ad_wants(a, n->in[2])) {
		struct value *u = ad_op2(a, gather, g, n->in[1]);
		if (!u || (n->op == OP_SCATTER_ELEMENTS && ad_set_int(a, ad_producer(u), "axis", axis)) || ad_give(a, n->in[2], u))
			return -1;
	}
	return 0;
}

static int scatter_nd_grad(struct ad *a, const struct node *n)
{
	return scatter_grad(a, n, "GatherND");
}

static int scatter_elements_grad(struct ad *a, const struct node *n)
{
	return scatter_grad(a, n, "GatherElements");
}

/* A scatter copies the data (read and written, unless it is taken in place, which a cost cannot
 * tell), reads the indices and the updates, and writes the updates' places, reading them first
 * under a reduction (1 FLOP an update). */
static void scatter_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			 uint64_t *bytes)
{
	int red = !attr_str_is(n, "reduction", "none", 1);
	*flops = red ? (uint64_t)in[2]->numel : 0;
	*bytes = (uint64_t)in[0]->nbytes + out[0]->nbytes + in[1]->nbytes + (2u + (unsigned)red) * (uint64_t)in[2]->nbytes;
}

const struct op_impl op_scatter_nd = {.run = scatter_nd_run, .cost = scatter_cost, .grad = scatter_nd_grad, .recompute = RC_CHEAP,
				      .nodiff = 1u << 1};
const struct op_impl op_scatter_elements = {.run = scatter_elements_run, .cost = scatter_cost, .grad = scatter_elements_grad,
					    .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_pad = {.run = pad_run, .cost = move_cost, .grad = pad_grad, .recompute = RC_CHEAP, .nodiff = ~1u};
const struct op_impl op_opaque = {.recompute = RC_NEVER};
