/* index.c - element-wise indexing and repetition: GatherElements (torch.gather) and Tile
 * (Tensor.repeat).
 *
 * GatherElements' gradient adds g back where each element was read (ScatterElements with
 * reduction add, opset 16); Tile's sums the tiles: g viewed as (r0, d0, r1, d1, ...) and summed
 * over the r axes. */
#include "../autodiff/ad.h"
#include "kernel.h"

#include <string.h>

/* out[.., i, ..] = data[.., indices[.., i, ..], ..] along axis; out has the indices' shape */
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
	int64_t ds[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(d->ndim, d->dims, ds);
	size_t es = dtype_size(d->dtype);
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

/* out dims d_i r_i; out[i] = x[i mod d] per axis */
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
	int64_t as[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(a->ndim, a->dims, as);
	size_t es = dtype_size(a->dtype);
	for (int64_t e = 0; e < out[0]->numel; e++) {
		int64_t at = 0;
		for (int i = 0; i < a->ndim; i++)
			at += (idx[i] % a->dims[i]) * as[i];
		memcpy(o + e * (int64_t)es, (const uint8_t *)a->data + at * (int64_t)es, es);
		for (int i = a->ndim - 1; i >= 0 && ++idx[i] == dims[i]; i--)
			idx[i] = 0;
	}
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

const struct op_impl op_gather_elements = {.run = gather_elements_run, .grad = gather_elements_grad, .recompute = RC_CHEAP,
					   .nodiff = 1u << 1};
const struct op_impl op_tile = {.run = tile_run, .grad = tile_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				.noop = op_noop_same_shape};
