/* index.c - element-wise indexing and repetition: GatherElements (torch.gather), GatherND, Compress,
 * OneHot (F.one_hot), EyeLike and Tile (Tensor.repeat).
 *
 * GatherElements' gradient adds g back where each element was read (ScatterElements with
 * reduction add, opset 16), GatherND's likewise with ScatterND (its batch dimensions made explicit
 * index columns, since ScatterND has none), and Compress's with ScatterND at NonZero(condition); Tile's sums the
 * tiles: g viewed as (r0, d0, r1, d1, ...) and summed over the r axes. OneHot and EyeLike make new
 * tensors: they pass no gradient. */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "vmath.h"
#include "../util/xalloc.h"

#include <string.h>

/* The element walk of GatherElements and ScatterElements over float32/float64 (any 4- or 8-byte
 * elements, for a gather) with int64 or int32 indices: the indices (and updates) as rows of their
 * last dimension, L long; element e of a row at (i_0 .. i_(r-2)) reads or writes the data at
 * base + v st_ax + e se, base the row's offset over the axes other than ax, v its index made
 * non-negative, and se 1 (ax not last: the row runs along the data's last axis) or 0 (ax last: v
 * says where along it). A row's indices are checked before any element moves; a bad one stops the
 * walk (bad set), and the caller's element loop then names it. */
struct elems_job {
	int nd, ax;
	int64_t dims[RT_MAX_DIMS]; /* the indices' */
	int64_t ds[RT_MAX_DIMS];   /* the data's C strides */
	int64_t len, L, se;        /* the data's axis length; the rows' length; see above */
	const void *ix;
	int ix64, red;
	const uint8_t *src;
	uint8_t *dst;
	size_t es;
	int bad;
};

/* 1 when every index of the row [ix, ix + L) is in [-len, len) */
#define ELEMS_OK(I)                                                                                              \
	static inline __attribute__((always_inline)) int elems_ok_##I(const I *restrict ix, int64_t L, int64_t len) \
	{                                                                                                        \
		uint64_t bad = 0; /* v + len past 2 len - 1 as unsigned: one compare, vectorised */               \
		for (int64_t e = 0; e < L; e++)                                                                  \
			bad |= (uint64_t)(int64_t)ix[e] + (uint64_t)len >= (uint64_t)(2 * len);                       \
		return !bad;                                                                                     \
	}
ELEMS_OK(int64_t)
ELEMS_OK(int32_t)
#undef ELEMS_OK

/* The data offset of a row at c (the indices' coordinates but the last): the axis' own left out
 * (v supplies it) */
static int64_t elems_base(const struct elems_job *j, const int64_t *c)
{
	int64_t b = 0;
	for (int i = 0; i < j->nd - 1; i++)
		b += i == j->ax ? 0 : c[i] * j->ds[i];
	return b;
}

static void elems_start(const struct elems_job *j, int64_t r, int64_t *c)
{
	for (int i = j->nd - 2; i >= 0; i--) {
		c[i] = r % j->dims[i];
		r /= j->dims[i];
	}
}

/* the next row's coordinates, its offset *b kept with them */
static inline void elems_step(const struct elems_job *j, int64_t *c, int64_t *b)
{
	for (int i = j->nd - 2; i >= 0; i--) {
		int64_t s = i == j->ax ? 0 : j->ds[i];
		*b += s;
		if (++c[i] < j->dims[i])
			return;
		*b -= s * j->dims[i];
		c[i] = 0;
	}
}

/* Rows [lo, hi) of a gather: o[e] = d[b + (v < 0 ? v + len : v) sax + e se] */
#define GATHER_RANGE(T, I)                                                                                       \
	static inline __attribute__((always_inline)) void gather_range_##T##_##I(struct elems_job *j, int64_t lo, \
										 int64_t hi)                    \
	{                                                                                                        \
		int64_t c[RT_MAX_DIMS] = {0}, L = j->L, len = j->len, sax = j->ds[j->ax], se = j->se, b;         \
		elems_start(j, lo, c);                                                                           \
		b = elems_base(j, c);                                                                            \
		const I *restrict ix = (const I *)j->ix + lo * L;                                                \
		const T *restrict d = (const T *)(const void *)j->src;                                           \
		T *restrict o = (T *)(void *)j->dst + lo * L;                                                    \
		for (int64_t r = lo; r < hi; r++, ix += L, o += L, elems_step(j, c, &b)) {                       \
			if (!elems_ok_##I(ix, L, len)) {                                                         \
				__atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);                                  \
				return;                                                                          \
			}                                                                                        \
			for (int64_t e = 0; e < L; e++) {                                                        \
				int64_t v = ix[e];                                                               \
				o[e] = d[b + (v + (v < 0 ? len : 0)) * sax + e * se];                            \
			}                                                                                        \
		}                                                                                                \
	}
GATHER_RANGE(uint32_t, int64_t)
GATHER_RANGE(uint32_t, int32_t)
GATHER_RANGE(uint64_t, int64_t)
GATHER_RANGE(uint64_t, int32_t)
#undef GATHER_RANGE

VM_CLONES static void gather_rows(void *arg, int64_t lo, int64_t hi)
{
	struct elems_job *j = arg;
	if (j->es == 4 && j->ix64)
		gather_range_uint32_t_int64_t(j, lo, hi);
	else if (j->es == 4)
		gather_range_uint32_t_int32_t(j, lo, hi);
	else if (j->ix64)
		gather_range_uint64_t_int64_t(j, lo, hi);
	else
		gather_range_uint64_t_int32_t(j, lo, hi);
}

/* An update combined into an element: the arithmetic of layout.c's combine (float32 in double,
 * rounded once; float64 in double) */
#define SCATTER_OPS(T)                                                                                           \
	static inline __attribute__((always_inline)) T sc_set_##T(T a, T u)                                      \
	{                                                                                                        \
		(void)a;                                                                                         \
		return u;                                                                                        \
	}                                                                                                        \
	static inline __attribute__((always_inline)) T sc_add_##T(T a, T u)                                      \
	{                                                                                                        \
		return (T)((double)a + u);                                                                       \
	}                                                                                                        \
	static inline __attribute__((always_inline)) T sc_mul_##T(T a, T u)                                      \
	{                                                                                                        \
		return (T)((double)a * u);                                                                       \
	}
SCATTER_OPS(float)
SCATTER_OPS(double)
#undef SCATTER_OPS

/* A scatter row: o[(v < 0 ? v + len : v) sax + e se] combined with u[e], in e's order. With o1 (the
 * axis last: sax 1, se 0), the next row too, into o1, its indices and updates the next L, the two
 * rows' elements taken in turns: each row's updates repeat addresses (GridSample's taps clipped to
 * X's edges), each repeat a load waiting on the store before it, and two rows' chains overlap
 * (ScatterElements in GridSample's gradient 1.35-1.4x faster against the forward kernel's time,
 * perf samples over 30 runs; four rows gained no more). */
#define SCATTER_ROW(T, I, NAME)                                                                                  \
	static inline __attribute__((always_inline)) void scatter_##NAME##_##T##_##I(                            \
		T *o, T *o1, const T *u, const I *restrict ix, int64_t L, int64_t len, int64_t sax, int64_t se) \
	{                                                                                                        \
		if (o1)                                                                                          \
			for (int64_t e = 0; e < L; e++) {                                                        \
				int64_t v = ix[e], w = ix[L + e];                                                \
				T *p = o + v + (v < 0 ? len : 0), *q = o1 + w + (w < 0 ? len : 0);               \
				*p = sc_##NAME##_##T(*p, u[e]);                                                  \
				*q = sc_##NAME##_##T(*q, u[L + e]);                                              \
			}                                                                                        \
		else                                                                                             \
			for (int64_t e = 0; e < L; e++) {                                                        \
				int64_t v = ix[e];                                                               \
				T *p = o + (v + (v < 0 ? len : 0)) * sax + e * se;                               \
				*p = sc_##NAME##_##T(*p, u[e]);                                                  \
			}                                                                                        \
	}
#define SCATTER_ROWS(T, I)                                                                                       \
	SCATTER_ROW(T, I, set)                                                                                   \
	SCATTER_ROW(T, I, add)                                                                                   \
	SCATTER_ROW(T, I, mul)                                                                                   \
	static inline __attribute__((always_inline)) void scatter_row_##T##_##I(                                 \
		int red, T *o, T *o1, const T *u, const I *ix, int64_t L, int64_t len, int64_t sax, int64_t se) \
	{                                                                                                        \
		if (red == 1)                                                                                    \
			scatter_add_##T##_##I(o, o1, u, ix, L, len, sax, se);                                    \
		else if (red == 2)                                                                               \
			scatter_mul_##T##_##I(o, o1, u, ix, L, len, sax, se);                                    \
		else                                                                                             \
			scatter_set_##T##_##I(o, o1, u, ix, L, len, sax, se);                                    \
	}
SCATTER_ROWS(float, int64_t)
SCATTER_ROWS(float, int32_t)
SCATTER_ROWS(double, int64_t)
SCATTER_ROWS(double, int32_t)
#undef SCATTER_ROWS
#undef SCATTER_ROW

/* Units [lo, hi): the rows' coordinates but the axis' (a unit: one row when ax is last), each unit's
 * rows along the axis in order, so that every output element takes its updates in the updates'
 * order, as the element loop did, and units write apart: any cut gives the same bits. */
VM_CLONES static void scatter_units(void *arg, int64_t lo, int64_t hi)
{
	struct elems_job *j = arg;
	struct elems_job uj = *j;
	int64_t c[RT_MAX_DIMS] = {0}, rs[RT_MAX_DIMS], L = j->L, sax = j->ds[j->ax];
	int last = j->ax == j->nd - 1;
	int64_t na = last ? 1 : j->dims[j->ax], astep;
	rs[j->nd > 1 ? j->nd - 2 : 0] = 1;
	for (int i = j->nd - 3; i >= 0; i--)
		rs[i] = rs[i + 1] * j->dims[i + 1];
	astep = last ? 0 : rs[j->ax];
	if (!last)
		uj.dims[j->ax] = 1;
	elems_start(&uj, lo, c);
	int64_t b = elems_base(j, c);
	for (int64_t un = lo; un < hi; un++, elems_step(&uj, c, &b)) {
		int64_t r0 = 0, b1 = b, two = last && un + 1 < hi, c1[RT_MAX_DIMS];
		if (two) {
			memcpy(c1, c, sizeof c1);
			elems_step(&uj, c1, &b1);
		}
		for (int i = 0; i < j->nd - 1; i++)
			r0 += c[i] * rs[i]; /* c[ax] is 0 when ax is not last */
		for (int64_t a = 0; a < na; a++) {
			int64_t r = r0 + a * astep, n = (1 + two) * L;
			const void *ix = j->ix64 ? (const void *)((const int64_t *)j->ix + r * L)
						 : (const void *)((const int32_t *)j->ix + r * L);
			if (j->ix64 ? !elems_ok_int64_t(ix, n, j->len) : !elems_ok_int32_t(ix, n, j->len)) {
				__atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
				return;
			}
#define SCATTER_TYPED(T)                                                                                         \
	do {                                                                                                     \
		T *o = (T *)(void *)j->dst, *o1 = two ? o + b1 : NULL;                                           \
		const T *u = (const T *)(const void *)j->src + r * L;                                            \
		if (j->ix64)                                                                                     \
			scatter_row_##T##_int64_t(j->red, o + b, o1, u, ix, L, j->len, sax, j->se);              \
		else                                                                                             \
			scatter_row_##T##_int32_t(j->red, o + b, o1, u, ix, L, j->len, sax, j->se);              \
	} while (0)
			if (j->es == 4)
				SCATTER_TYPED(float);
			else
				SCATTER_TYPED(double);
#undef SCATTER_TYPED
		}
		if (two) {
			un++;
			memcpy(c, c1, sizeof c1);
			b = b1;
		}
	}
}

/* The job over indices ix into data of rank nd and strides ds (shared with ScatterElements) */
static void elems_job_init(struct elems_job *j, const struct rtensor *d, const struct rtensor *ix, int ax)
{
	memset(j, 0, sizeof *j);
	j->nd = ix->ndim;
	j->ax = ax;
	memcpy(j->dims, ix->dims, sizeof j->dims);
	c_strides(d->ndim, d->dims, j->ds);
	j->len = d->dims[ax];
	j->L = ix->dims[ix->ndim - 1];
	j->se = ax == ix->ndim - 1 ? 0 : 1;
	j->ix = ix->data;
	j->ix64 = ix->dtype == DT_INT64;
}

/* ScatterElements' float32/float64 data with int64 or int32 indices, into o (the data's copy):
 * updates u combined along axis ax (red: 0 none, 1 add, 2 mul) by units (scatter_units) spread
 * over the pool. 1: done; 0: not these dtypes; -1: an index out of range (o then part written). */
int scatter_elements_rows(struct rtensor *o, const struct rtensor *ix, const struct rtensor *u, int ax, int red)
{
	if ((o->dtype != DT_FLOAT && o->dtype != DT_DOUBLE) || (ix->dtype != DT_INT64 && ix->dtype != DT_INT32) ||
	    u->dtype != o->dtype || ix->ndim != o->ndim || ix->ndim < 1)
		return 0;
	if (ix->numel == 0)
		return 1;
	struct elems_job j;
	elems_job_init(&j, o, ix, ax);
	j.src = u->data;
	j.dst = o->data;
	j.es = dtype_size(o->dtype);
	j.red = red;
	int64_t units = ix->numel / j.L / (ax == ix->ndim - 1 ? 1 : ix->dims[ax]);
	int64_t per = j.L * (ax == ix->ndim - 1 ? 1 : ix->dims[ax]);
	kernel_for(units, per < KERNEL_GRAIN ? KERNEL_GRAIN / per : 1, scatter_units, &j);
	return j.bad ? -1 : 1;
}

/* out[.., i, ..] = data[.., indices[.., i, ..], ..] along axis; out has the indices' shape. 4- and
 * 8-byte elements move by rows (elems_job), 12x faster than element by element through rt_get_i
 * (GridSample's gradient, 1.2M float32 elements: 19 -> 1.6 ms); the element loop names a bad index. */
static int gather_elements_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			       struct rtensor *const *out)
{
	const struct rtensor *d = in[0], *ix = in[1];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), d->ndim, &ax))
		return exec_status(x);
	if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
		return exec_fail(x, "indices must be int64 or int32, not %s", dtype_name(ix->dtype));
	if (ix->ndim != d->ndim)
		return exec_fail(x, "indices must have the data's rank %d, not %d", d->ndim, ix->ndim);
	for (int i = 0; i < d->ndim; i++)
		if (i != ax && ix->dims[i] > d->dims[i])
			return exec_fail(x, "indices' dimension %d (%lld) exceeds the data's (%lld)", i,
					 (long long)ix->dims[i], (long long)d->dims[i]);
	uint8_t *o = exec_alloc(x, out[0], d->dtype, ix->ndim, ix->dims);
	if (!o)
		return exec_status(x);
	size_t es = dtype_size(d->dtype);
	if ((es == 4 || es == 8) && ix->numel > 0) {
		struct elems_job j;
		elems_job_init(&j, d, ix, ax);
		j.src = d->data;
		j.dst = o;
		j.es = es;
		kernel_for(ix->numel / j.L, j.L < KERNEL_GRAIN ? KERNEL_GRAIN / j.L : 1, gather_rows, &j);
		if (!j.bad)
			return 0;
	}
	int64_t ds[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(d->ndim, d->dims, ds);
	for (int64_t e = 0; e < ix->numel; e++) {
		int64_t v = rt_get_i(ix, e), len = d->dims[ax];
		if (v < -len || v >= len)
			return exec_fail(x, "index %lld is out of range for a dimension of %lld", (long long)v, (long long)len);
		int64_t at = 0;
		for (int i = 0; i < d->ndim; i++)
			at += (i == ax ? (v < 0 ? v + len : v) : idx[i]) * ds[i];
		memcpy(o + e * (int64_t)es, (const uint8_t *)d->data + at * (int64_t)es, es);
		for (int i = d->ndim - 1; i >= 0 && ++idx[i] == ix->dims[i]; i--)
			idx[i] = 0;
	}
	return 0;
}

static int gather_elements_grad(struct ad *a, const struct node *n)
{
	if (ad_need_opset(a, 16, "the GatherElements gradient (ScatterElements with reduction)"))
		return -1;
	struct value *ix = n->in[1];
	if (ad_shape(a, ix)->dtype != DT_INT64 && !(ix = ad_cast(a, ix, DT_INT64)))
		return -1;
	struct value *ins[3] = {ad_zeros_like(a, n->in[0]), ix, ad_dy(a, n->out[0])};
	struct value *s = ins[0] ? ad_op(a, "ScatterElements", ins, 3) : NULL;
	struct node *p = ad_producer(s);
	if (!p || ad_set_str(a, p, "reduction", "add") || ad_set_int(a, p, "axis", attr_int(n, "axis", 0)))
		return -1;
	return ad_give(a, n->in[0], s);
}

/* A Tile's copy: the input's dims d and repeats r (rank nd), its C strides as; B[i] the output's
 * block under axis i (the product of d_j r_j, j >= i); axes from k on repeat once, so a block there
 * is a contiguous run of the input; the pieces are the output's blocks under axis L. */
struct tile_job {
	int k, L;
	int64_t d[RT_MAX_DIMS], r[RT_MAX_DIMS], as[RT_MAX_DIMS], B[RT_MAX_DIMS + 1], run[RT_MAX_DIMS + 1];
	size_t es;
	const uint8_t *in;
	uint8_t *out;
};

/* The output's block under axis i from the input's at src: the first tile's blocks under axis i + 1
 * written, then repeated as copies of the bytes just written */
static void tile_fill(const struct tile_job *j, int i, const uint8_t *src, uint8_t *dst)
{
	if (i >= j->k) {
		memcpy(dst, src, (size_t)j->run[i] * j->es);
		return;
	}
	size_t sub = (size_t)j->B[i + 1] * j->es, tile = (size_t)j->d[i] * sub;
	for (int64_t a = 0; a < j->d[i]; a++)
		tile_fill(j, i + 1, src + (size_t)(a * j->as[i]) * j->es, dst + (size_t)a * sub);
	for (int64_t t = 1; t < j->r[i]; t++)
		memcpy(dst + (size_t)t * tile, dst, tile);
}

/* Output blocks [b0, b1) under axis L: a piece of kernel_for. A block that repeats one d[L-1] blocks
 * before it in the same piece is a copy of that one. */
static void tile_blocks(void *arg, int64_t b0, int64_t b1)
{
	const struct tile_job *j = arg;
	size_t bytes = (size_t)j->B[j->L] * j->es;
	for (int64_t b = b0; b < b1; b++) {
		uint8_t *dst = j->out + (size_t)b * bytes;
		int64_t back = j->L ? j->d[j->L - 1] : 0;
		if (j->L && b % (back * j->r[j->L - 1]) >= back && b - back >= b0) {
			memcpy(dst, dst - (size_t)back * bytes, bytes);
			continue;
		}
		int64_t at = 0, q = b;
		for (int i = j->L - 1; i >= 0; i--) {
			int64_t len = j->d[i] * j->r[i];
			at += q % len % j->d[i] * j->as[i];
			q /= len;
		}
		tile_fill(j, j->L, j->in + (size_t)at * j->es, dst);
	}
}

/* out dims d_i r_i; out[i] = x[i mod d] per axis: contiguous runs copied, repeats copied from the
 * output, over the pool */
static int tile_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0], *r = in[1];
	int64_t rep[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	int got;
	if (rt_ints(x, r, "repeats", rep, RT_MAX_DIMS, &got))
		return exec_status(x);
	if (got != a->ndim)
		return exec_fail(x, "repeats has %d elements for %d dimensions", got, a->ndim);
	for (int i = 0; i < a->ndim; i++) {
		if (rep[i] < 0 || (a->dims[i] && rep[i] > INT64_MAX / a->dims[i]))
			return exec_fail(x, "repeats[%d] = %lld is out of range", i, (long long)rep[i]);
		dims[i] = a->dims[i] * rep[i];
	}
	uint8_t *o = exec_alloc(x, out[0], a->dtype, a->ndim, dims);
	if (!o)
		return exec_status(x);
	if (!out[0]->numel)
		return 0;
	struct tile_job j = {.k = a->ndim, .es = dtype_size(a->dtype), .in = a->data, .out = o};
	memcpy(j.d, a->dims, (size_t)a->ndim * sizeof *j.d);
	memcpy(j.r, rep, (size_t)a->ndim * sizeof *j.r);
	c_strides(a->ndim, a->dims, j.as);
	j.B[a->ndim] = j.run[a->ndim] = 1;
	for (int i = a->ndim - 1; i >= 0; i--) {
		j.B[i] = j.B[i + 1] * dims[i];
		j.run[i] = j.run[i + 1] * a->dims[i];
	}
	while (j.k > 0 && rep[j.k - 1] == 1)
		j.k--;
	/* pieces: the blocks under the first axis L (up to k) with at least 64 of them */
	int64_t blocks = 1;
	while (j.L < j.k && blocks < 64)
		blocks *= dims[j.L++];
	kernel_for(blocks, (int64_t)((size_t)KERNEL_GRAIN * 4 / ((size_t)j.B[j.L] * j.es)) + 1, tile_blocks, &j);
	return 0;
}

static int tile_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]), *rs = ad_shape(a, n->in[1]);
	int r = xs->ndim;
	if (!rs->data || rs->numel != r)
		return ad_fail(a, "repeats must be a constant to differentiate");
	if (2 * r > RT_MAX_DIMS)
		return ad_fail(a, "gradients of Tile of rank over %d are not supported", RT_MAX_DIMS / 2);
	int64_t view[RT_MAX_DIMS], axes[RT_MAX_DIMS];
	for (int i = 0; i < r; i++) {
		if (ad_dim_symbolic(a, xs->dims[i]))
			return ad_fail(a, "cannot differentiate a Tile of a symbolic dimension");
		view[2 * i] = rt_get_i(rs, i);
		view[2 * i + 1] = xs->dims[i];
		axes[i] = 2 * i;
	}
	struct value *v = ad_op2(a, "Reshape", ad_dy(a, n->out[0]), ad_ints(a, view, (size_t)(2 * r)));
	return ad_give(a, n->in[0], r ? ad_reduce(a, "ReduceSum", v, axes, r, 0) : v);
}

/* GatherND(data, indices, batch_dims b): indices (i_0 .. i_q-2, m), its first b dims the data's;
 * out (i_0 .. i_q-2, d_b+m ..): each index tuple's slice of the data within its batch. */
static int gather_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *d = in[0], *ix = in[1];
	int64_t b = attr_int(n, "batch_dims", 0);
	if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
		return exec_fail(x, "indices must be int64 or int32, not %s", dtype_name(ix->dtype));
	if (ix->ndim < 1 || b < 0 || b >= ix->ndim || b >= d->ndim)
		return exec_fail(x, "batch_dims %lld must be below the ranks of data (%d) and indices (%d)", (long long)b,
				 d->ndim, ix->ndim);
	int64_t m = ix->dims[ix->ndim - 1];
	if (m < 1 || b + m > d->ndim)
		return exec_fail(x, "index tuples of %lld values do not fit data of rank %d past %lld batch dimensions",
				 (long long)m, d->ndim, (long long)b);
	int64_t dims[RT_MAX_DIMS], nb = 1, tuples = 1, slice = 1, batch_len = 1;
	int nd = 0;
	for (int i = 0; i < b; i++) {
		if (ix->dims[i] != d->dims[i])
			return exec_fail(x, "indices' batch dimension %d (%lld) differs from the data's (%lld)", i,
					 (long long)ix->dims[i], (long long)d->dims[i]);
		nb *= d->dims[i];
	}
	for (int i = 0; i < ix->ndim - 1; i++) {
		dims[nd++] = ix->dims[i];
		if (i >= b)
			tuples *= ix->dims[i];
	}
	for (int i = (int)(b + m); i < d->ndim; i++) {
		if (nd == RT_MAX_DIMS)
			return exec_fail(x, "the output's rank is over %d", RT_MAX_DIMS);
		dims[nd++] = d->dims[i];
		slice *= d->dims[i];
	}
	for (int i = (int)b; i < d->ndim; i++)
		batch_len *= d->dims[i];
	uint8_t *o = exec_alloc(x, out[0], d->dtype, nd, dims);
	if (!o)
		return exec_status(x);
	int64_t st[RT_MAX_DIMS];
	c_strides(d->ndim, d->dims, st);
	size_t es = dtype_size(d->dtype);
	for (int64_t t = 0; t < nb * tuples; t++) {
		int64_t at = t / (tuples ? tuples : 1) * batch_len;
		for (int64_t k = 0; k < m; k++) {
			int64_t v = rt_get_i(ix, t * m + k), len = d->dims[b + k];
			if (v < -len || v >= len)
				return exec_fail(x, "index %lld is out of range for a dimension of %lld", (long long)v, (long long)len);
			at += (v < 0 ? v + len : v) * st[b + k];
		}
		memcpy(o + t * slice * (int64_t)es, (const uint8_t *)d->data + at * (int64_t)es, (size_t)slice * es);
	}
	return 0;
}

/* dData = ScatterND(zeros, indices, g, reduction add), the batch dims' coordinates put before each
 * index tuple (a constant of the indices' shape with b columns, concatenated) */
static int gather_nd_grad(struct ad *a, const struct node *n)
{
	if (ad_need_opset(a, 16, "the GatherND gradient (ScatterND with reduction)"))
		return -1;
	struct value *ix = n->in[1];
	if (ad_shape(a, ix)->dtype != DT_INT64 && !(ix = ad_cast(a, ix, DT_INT64)))
		return -1;
	int64_t b = attr_int(n, "batch_dims", 0);
	if (b > 0) {
		const struct rtensor *is = ad_shape(a, n->in[1]);
		int64_t dims[RT_MAX_DIMS], count = 1, st[RT_MAX_DIMS];
		for (int i = 0; i < is->ndim - 1; i++) {
			if (ad_dim_symbolic(a, is->dims[i]))
				return ad_fail(a, "cannot differentiate a GatherND with batch_dims over a symbolic dimension");
			dims[i] = is->dims[i];
			count *= dims[i];
		}
		dims[is->ndim - 1] = b;
		c_strides(is->ndim - 1, dims, st);
		double *c = xcalloc((size_t)(count * b) + 1, sizeof *c);
		if (!c)
			return ad_fail(a, "out of memory");
		for (int64_t t = 0; t < count; t++)
			for (int64_t k = 0; k < b; k++)
				c[t * b + k] = (double)(t / st[k] % dims[k]);
		struct value *coords = ad_tensor(a, DT_INT64, is->ndim, dims, c);
		xfree(c);
		struct value *cat[2] = {coords, ix};
		ix = coords ? ad_op(a, "Concat", cat, 2) : NULL;
		if (!ix || ad_set_int(a, ad_producer(ix), "axis", -1))
			return -1;
	}
	struct value *ins[3] = {ad_zeros_like(a, n->in[0]), ix, ad_dy(a, n->out[0])};
	struct value *s = ins[0] ? ad_op(a, "ScatterND", ins, 3) : NULL;
	if (!s || ad_set_str(a, ad_producer(s), "reduction", "add"))
		return -1;
	return ad_give(a, n->in[0], s);
}

/* Compress(input, condition, axis): the slices along axis (of the input flattened, without one)
 * whose condition is true; a condition shorter than the axis drops the rest. */
static int compress_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *d = in[0], *c = in[1];
	if (!c->data)
		return exec_fail(x, "Compress's output length depends on its condition's values, which are not known before running");
	if (c->ndim != 1)
		return exec_fail(x, "the condition must be 1-D, not of rank %d", c->ndim);
	int has_axis = node_attr(n, "axis") != NULL, ax = 0;
	if (has_axis && norm_axis(x, attr_int(n, "axis", 0), d->ndim, &ax))
		return exec_status(x);
	int64_t outer = 1, len = has_axis ? d->dims[ax] : d->numel, inner = 1, kept = 0;
	for (int i = 0; has_axis && i < d->ndim; i++)
		*(i < ax ? &outer : &inner) *= i == ax ? 1 : d->dims[i];
	if (c->dims[0] > len)
		return exec_fail(x, "the condition has %lld values for %lld slices", (long long)c->dims[0], (long long)len);
	for (int64_t j = 0; j < c->dims[0]; j++)
		kept += rt_get(c, j) != 0;
	int64_t dims[RT_MAX_DIMS];
	memcpy(dims, d->dims, sizeof dims);
	dims[has_axis ? ax : 0] = kept;
	uint8_t *o = exec_alloc(x, out[0], d->dtype, has_axis ? d->ndim : 1, dims);
	if (!o)
		return exec_status(x);
	size_t row = (size_t)inner * dtype_size(d->dtype);
	for (int64_t p = 0; p < outer; p++)
		for (int64_t j = 0; j < c->dims[0]; j++)
			if (rt_get(c, j) != 0) {
				memcpy(o, (const uint8_t *)d->data + (size_t)(p * len + j) * row, row);
				o += row;
			}
	return 0;
}

static struct value *transposed(struct ad *a, struct value *v, const int64_t *perm, int r)
{
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, (size_t)r) ? t : NULL;
}

/* dInput: g's slices put back where they were taken, ScatterND into zeros at NonZero(condition)
 * (distinct, so no reduction): over the input flattened without an axis, else with the axis moved
 * to the front and back */
static int compress_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int has_axis = node_attr(n, "axis") != NULL, r = xs->ndim;
	int64_t ax = attr_int(n, "axis", 0), col[2] = {-1, 1}, p[RT_MAX_DIMS], inv[RT_MAX_DIMS], k = 0;
	ax = ax < 0 ? ax + r : ax;
	struct value *ix = ad_op2(a, "Reshape", ad_op1(a, "NonZero", n->in[1]), ad_ints(a, col, 2));
	struct value *g = ad_dy(a, n->out[0]), *z;
	if (!has_axis) {
		struct value *ins[3] = {ad_zeros_flat(a, n->in[0], xs->dtype), ix, g};
		return ad_give(a, n->in[0], ad_op2(a, "Reshape", ad_op(a, "ScatterND", ins, 3), ad_shape_of(a, n->in[0])));
	}
	p[k++] = ax;
	for (int i = 0; i < r; i++)
		if (i != ax)
			p[k++] = i;
	for (int i = 0; i < r; i++)
		inv[p[i]] = i;
	z = ad_zeros_like(a, n->in[0]);
	if (ax > 0) {
		z = z ? transposed(a, z, p, r) : NULL;
		g = transposed(a, g, p, r);
	}
	struct value *ins[3] = {z, ix, g};
	struct value *s = z && g ? ad_op(a, "ScatterND", ins, 3) : NULL;
	return ad_give(a, n->in[0], ax > 0 && s ? transposed(a, s, inv, r) : s);
}

/* whether rt_set stores the dtype's values (strings, complex and float8 it leaves as they are) */
static int rt_set_stores(int dt)
{
	return dt != DT_UNDEFINED && dt != DT_STRING && dt != DT_COMPLEX64 && dt != DT_COMPLEX128 && dt < DT_FLOAT8E4M3FN;
}

struct fill_job {
	size_t es;
	const uint8_t *pat;
	uint8_t *out;
};

/* Elements [e0, e1) set to the es bytes at pat (a memset where they are all one byte, else the
 * first element written and its copies doubled): a piece of kernel_for */
static void fill_elems(void *arg, int64_t e0, int64_t e1)
{
	const struct fill_job *f = arg;
	uint8_t *o = f->out + (size_t)e0 * f->es;
	size_t n = (size_t)(e1 - e0) * f->es, done = f->es;
	if (!memcmp(f->pat, f->pat + 1, f->es - 1)) {
		memset(o, f->pat[0], n);
		return;
	}
	memcpy(o, f->pat, f->es);
	for (; done < n; done *= 2)
		memcpy(o + done, o, done < n - done ? done : n - done);
}

/* OneHot(indices, depth, values [off, on], axis): a new axis of depth values, on at each index
 * (negative ones count from the end) and off elsewhere, and at an index out of range */
static int one_hot_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *ix = in[0], *dp = in[1], *v = in[2];
	if (!dp->data || dp->numel != 1)
		return exec_fail(x, "depth must be a known scalar");
	if (v->numel != 2)
		return exec_fail(x, "values must be [off, on], not %lld values", (long long)v->numel);
	int64_t depth = rt_get_i(dp, 0); /* a float depth truncated and saturated: NaN is 0 */
	if (depth < 1)
		return exec_fail(x, "depth %.17g must be positive", rt_get(dp, 0));
	int ax;
	if (ix->ndim + 1 > RT_MAX_DIMS || norm_axis(x, attr_int(n, "axis", -1), ix->ndim + 1, &ax))
		return exec_status(x) ? exec_status(x) : exec_fail(x, "the output's rank is over %d", RT_MAX_DIMS);
	int64_t dims[RT_MAX_DIMS], outer = 1, inner = 1;
	for (int i = 0, k = 0; i <= ix->ndim; i++)
		dims[i] = i == ax ? depth : ix->dims[k++];
	for (int i = 0; i < ix->ndim; i++)
		*(i < ax ? &outer : &inner) *= ix->dims[i];
	if (!exec_alloc(x, out[0], v->dtype, ix->ndim + 1, dims))
		return exec_status(x);
	double off = rt_get(v, 0), on = rt_get(v, 1);
	if (!rt_set_stores(v->dtype) || !out[0]->numel) { /* (no bytes to copy) */
		for (int64_t p = 0; p < outer; p++)
			for (int64_t i = 0; i < inner; i++) {
				double h = rt_get(ix, p * inner + i);
				int64_t k = (int64_t)(h < 0 ? h + (double)depth : h);
				for (int64_t j = 0; j < depth; j++)
					rt_set(out[0], (p * depth + j) * inner + i, j == k ? on : off);
			}
		return 0;
	}
	/* off's and on's bytes as rt_set stores them: off everywhere, then on once per index in range */
	size_t es = dtype_size(v->dtype);
	uint8_t offb[16], onb[16], *o = out[0]->data;
	rt_set(out[0], 0, on);
	memcpy(onb, o, es);
	rt_set(out[0], 0, off);
	memcpy(offb, o, es);
	struct fill_job f = {.es = es, .pat = offb, .out = o};
	kernel_for(out[0]->numel, KERNEL_GRAIN, fill_elems, &f);
	for (int64_t p = 0; p < outer; p++)
		for (int64_t i = 0; i < inner; i++) {
			double h = rt_get(ix, p * inner + i);
			int64_t k = (int64_t)(h < 0 ? h + (double)depth : h);
			if (k >= 0 && k < depth)
				memcpy(o + (size_t)((p * depth + k) * inner + i) * es, onb, es);
		}
	return 0;
}

/* EyeLike(input, dtype, k): input's 2-D shape, ones where column - row = k, zeros elsewhere */
static int eye_like_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (a->ndim != 2)
		return exec_fail(x, "EyeLike needs a 2-D input, not rank %d", a->ndim);
	int dt = (int)attr_int(n, "dtype", a->dtype);
	if (!dtype_valid(dt) || dt == DT_STRING)
		return exec_fail(x, "dtype %d is not a numeric type", dt);
	if (!exec_alloc_zero(x, out[0], dt, 2, a->dims))
		return exec_status(x);
	int64_t k = attr_int(n, "k", 0);
	for (int64_t i = 0; i < a->dims[0]; i++)
		if (i + k >= 0 && i + k < a->dims[1])
			rt_set(out[0], i * a->dims[1] + i + k, 1);
	return 0;
}

/* GatherND and GatherElements read their indices and the elements they write, not the whole of
 * the data (an embedding table, a vocabulary's logits): indices + 2 x output bytes, no FLOPs */
static void gathered_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			  uint64_t *bytes)
{
	(void)n;
	*flops = 0;
	*bytes = (uint64_t)in[1]->nbytes + 2 * (uint64_t)out[0]->nbytes;
}

const struct op_impl op_gather_nd = {.run = gather_nd_run, .cost = gathered_cost, .grad = gather_nd_grad, .recompute = RC_CHEAP,
				     .nodiff = 1u << 1};
const struct op_impl op_compress = {.run = compress_run, .grad = compress_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_one_hot = {.run = one_hot_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_eye_like = {.run = eye_like_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_gather_elements = {.run = gather_elements_run, .cost = gathered_cost, .grad = gather_elements_grad,
					   .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_tile = {.run = tile_run, .grad = tile_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				.noop = op_noop_same_shape};
