/* control.c - control flow: If, Loop and Scan, whose bodies are graph attributes.
 *
 * A body runs as a subgraph run of its own (exec_subgraph): its inputs are the tensors given here,
 * its references to enclosing values are the enclosing runs' (ONNX's lexical scoping), and its
 * outputs come back as workspace copies, which become the node's outputs or the next iteration's
 * inputs. Shape inference runs the bodies too, shapes-only: If needs its condition known, or both
 * branches giving the same shapes; Loop needs its trip count and conditions known (they are in
 * exports, where both come from shapes and constants), as their outputs' shapes depend on them;
 * a Loop whose count comes from data is refused there, with the reason. None is differentiated
 * here: train refuses them by the missing gradient rule (a Loop of a fixed count would need its body
 * unrolled first).
 *
 * Loop (ONNX Loop-1/11/13/16): inputs M (trip count, optional), cond (optional), v_1..v_N; body
 * (iter, cond, v_1..v_N) -> (cond, v_1..v_N, s_1..s_K); outputs v_1..v_N final, s_1..s_K each the
 * iterations' values stacked on a new axis 0.
 * Scan-9+: inputs N states then num_scan_inputs sequences, sliced along scan_input_axes (reversed
 * where scan_input_directions is 1); body (states, slices) -> (states, output slices), stacked along
 * scan_output_axes. Scan-8 has a batch axis 0 on everything and sequence_lens first: each batch row
 * is a Scan-9 run on axis 0 (every row the whole length: shorter sequence_lens are refused). */
#include "kernel.h"

#include "../util/xalloc.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define LOOP_SHAPES_MAX 1000000 /* iterations shape inference runs */

static struct graph *graph_attr(const struct node *n, const char *name)
{
	const struct attr *a = node_attr(n, name);
	return a && a->type == ATTR_GRAPH ? a->g : NULL;
}

/* A workspace tensor of this dtype and shape, with data when `data` (freed with exec_free_temp). */
static int rt_make(struct exec *x, struct rtensor *t, int dtype, int nd, const int64_t *dims, int data)
{
	memset(t, 0, sizeof *t);
	if (exec_shape(x, t, dtype, nd, dims))
		return exec_status(x);
	if (data && !(t->data = exec_scratch_raw(x, t->nbytes)))
		return exec_status(x);
	return 0;
}

/* Bytes of one step along axis of t, and the count of such blocks before it. */
static void axis_blocks(const struct rtensor *t, int axis, int64_t *outer, size_t *inner)
{
	int64_t o = 1, i = 1;
	for (int k = 0; k < axis; k++)
		o *= t->dims[k];
	for (int k = axis + 1; k < t->ndim; k++)
		i *= t->dims[k];
	*outer = o;
	*inner = (size_t)i * dtype_size(t->dtype);
}

/* s = t's slice j along axis (the axis dropped): a workspace copy, or its shape alone. */
static int take_slice(struct exec *x, const struct rtensor *t, int axis, int64_t j, struct rtensor *s)
{
	int64_t dims[RT_MAX_DIMS], outer;
	size_t inner;
	for (int k = 0, d = 0; k < t->ndim; k++)
		if (k != axis)
			dims[d++] = t->dims[k];
	if (rt_make(x, s, t->dtype, t->ndim - 1, dims, t->data != NULL))
		return exec_status(x);
	axis_blocks(t, axis, &outer, &inner);
	for (int64_t o = 0; t->data && o < outer; o++)
		memcpy((char *)s->data + (size_t)o * inner, (const char *)t->data + ((size_t)(o * t->dims[axis] + j)) * inner,
		       inner);
	return 0;
}

/* d's slice j along axis = s (d has s's shape with axis inserted). */
static void put_slice(struct rtensor *d, int axis, int64_t j, const struct rtensor *s)
{
	int64_t outer;
	size_t inner;
	axis_blocks(d, axis, &outer, &inner);
	for (int64_t o = 0; d->data && s->data && o < outer; o++)
		memcpy((char *)d->data + ((size_t)(o * d->dims[axis] + j)) * inner, (const char *)s->data + (size_t)o * inner,
		       inner);
}

/* out = t, a body's result (its dtype, shape and data, or only its shape in shape inference);
 * frees t when it is workspace (owned). */
static int set_out(struct exec *x, struct rtensor *out, struct rtensor *t, int owned)
{
	int rc = 0;
	if (t->data) {
		void *p = exec_alloc(x, out, t->dtype, t->ndim, t->dims);
		if (p)
			memcpy(p, t->data, t->nbytes);
		rc = exec_status(x);
	} else if (!exec_shapes_only(x)) {
		rc = exec_fail(x, "a body's output was not computed");
	} else {
		rc = exec_shape(x, out, t->dtype, t->ndim, t->dims);
	}
	if (owned)
		exec_free_temp(x, t);
	return rc;
}

static void free_temps(struct exec *x, struct rtensor *t, uint32_t n)
{
	for (uint32_t k = 0; t && k < n; k++)
		exec_free_temp(x, &t[k]);
}

static int same_shape(const struct rtensor *a, const struct rtensor *b)
{
	if (a->dtype != b->dtype || a->ndim != b->ndim)
		return 0;
	for (int k = 0; k < a->ndim; k++)
		if (a->dims[k] != b->dims[k])
			return 0;
	return 1;
}

/* A scalar condition or count: 1 with *v set when known, 0 when only its shape is (shape
 * inference), -1 when it is not one element. */
static int scalar_of(const struct rtensor *t, double *v)
{
	if (t->numel != 1)
		return -1;
	if (!t->data)
		return 0;
	*v = rt_get(t, 0);
	return 1;
}

/* ---- If ---- */

static int if_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct graph *br[2] = {graph_attr(n, "then_branch"), graph_attr(n, "else_branch")};
	if (!br[0] || !br[1])
		return exec_fail(x, "needs the graph attributes then_branch and else_branch");
	for (int b = 0; b < 2; b++) {
		if (br[b]->n_outputs != n->n_out)
			return exec_fail(x, "%s has %u outputs, but the node has %u", b ? "else_branch" : "then_branch",
					 br[b]->n_outputs, n->n_out);
		if (br[b]->n_inputs)
			return exec_fail(x, "a branch takes no inputs, but %s has %u", b ? "else_branch" : "then_branch",
					 br[b]->n_inputs);
	}
	double c = 0;
	int known = scalar_of(in[0], &c);
	if (known < 0)
		return exec_fail(x, "the condition must have one element, not %" PRId64, in[0]->numel);
	struct rtensor *r = xcalloc(2 * (size_t)n->n_out + 1, sizeof *r);
	if (!r)
		return exec_fail(x, "out of memory");
	int rc = 0;
	if (known) { /* the branch taken */
		rc = exec_subgraph(x, br[c != 0 ? 0 : 1], NULL, r);
		for (uint32_t k = 0; !rc && k < n->n_out; k++)
			rc = set_out(x, out[k], &r[k], 1);
	} else { /* shape inference without the condition: both branches, which must agree */
		rc = exec_subgraph(x, br[0], NULL, r) || exec_subgraph(x, br[1], NULL, r + n->n_out);
		for (uint32_t k = 0; !rc && k < n->n_out; k++)
			if (!same_shape(&r[k], &r[n->n_out + k])) {
				char a[128], b[128];
				rc = exec_fail(x, "output %u is %s %s in then_branch but %s %s in else_branch, and the condition is "
						  "known only when the graph runs: its shape cannot be inferred",
					       k, dtype_name(r[k].dtype), rt_shape_str(&r[k], a, sizeof a),
					       dtype_name(r[n->n_out + k].dtype), rt_shape_str(&r[n->n_out + k], b, sizeof b));
			}
		for (uint32_t k = 0; !rc && k < n->n_out; k++) /* the two may differ: only the shape is known */
			rc = exec_shape(x, out[k], r[k].dtype, r[k].ndim, r[k].dims);
	}
	free_temps(x, r, 2 * n->n_out);
	xfree(r);
	return rc ? exec_status(x) : 0;
}

/* ---- Loop ---- */

/* Stacks the K scan outputs' slices (slices[j * cap + i] for iteration i of it) on a new axis 0
 * into out[j]; an output of no iterations is [0] of the body's declared dtype. */
static int stack_scans(struct exec *x, const struct graph *body, uint32_t first, struct rtensor *const *out,
		       struct rtensor *slices, uint32_t K, int64_t it, int64_t cap)
{
	for (uint32_t j = 0; j < K; j++) {
		struct rtensor *s = &slices[(int64_t)j * cap];
		int64_t dims[RT_MAX_DIMS] = {it};
		if (!it) {
			const struct value *v = body->outputs[first + j];
			if (exec_shape(x, out[j], v->type.has_dtype ? v->type.dtype : DT_FLOAT, 1, dims))
				return exec_status(x);
			continue;
		}
		if (s->ndim >= RT_MAX_DIMS)
			return exec_fail(x, "scan output %u: slices of rank %d stack to more than %d dimensions", j, s->ndim,
					 RT_MAX_DIMS);
		int data = 1;
		for (int64_t i = 0; i < it; i++) {
			if (!same_shape(&s[i], s)) {
				char a[128], b[128];
				return exec_fail(x, "scan output %u is %s in iteration 0 but %s in iteration %" PRId64
						    ": iterations' slices must have one shape",
						 j, rt_shape_str(s, a, sizeof a), rt_shape_str(&s[i], b, sizeof b), i);
			}
			data &= s[i].data != NULL;
		}
		memcpy(dims + 1, s->dims, sizeof *dims * (size_t)s->ndim);
		void *p = data ? exec_alloc(x, out[j], s->dtype, s->ndim + 1, dims) : NULL;
		if (exec_status(x) || (!p && exec_shape(x, out[j], s->dtype, s->ndim + 1, dims)))
			return exec_status(x);
		for (int64_t i = 0; p && i < it; i++)
			put_slice(out[j], 0, i, &s[i]);
	}
	return 0;
}

static int loop_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct graph *body = graph_attr(n, "body");
	if (!body)
		return exec_fail(x, "needs the graph attribute body");
	uint32_t N = n->n_in - 2, K;
	if (body->n_inputs != N + 2 || body->n_outputs < N + 1 || n->n_out < N)
		return exec_fail(x, "the body takes %u inputs and gives %u outputs: with %u loop-carried values it must "
				    "take %u (iteration, condition, values) and give at least %u (condition, values)",
				 body->n_inputs, body->n_outputs, N, N + 2, N + 1);
	K = body->n_outputs - 1 - N;
	if (n->n_out != N + K)
		return exec_fail(x, "has %u outputs, but its body gives %u loop-carried values and %u scan outputs", n->n_out,
				 N, K);
	double m = 0, c = 1;
	int km = in[0] ? scalar_of(in[0], &m) : 1, kc = in[1] ? scalar_of(in[1], &c) : 1;
	if (km < 0 || kc < 0)
		return exec_fail(x, "the trip count M and the condition must have one element each");
	if (!km || !kc)
		return exec_fail(x, "its %s is computed from data, known only when the graph runs: the shapes of its "
				    "outputs cannot be inferred before (plan and train need it from shapes and constants)",
				 !km ? "trip count M" : "condition");
	if (isnan(m))
		return exec_fail(x, "the trip count M is NaN");
	int64_t trips = !in[0] || m >= 9.2e18 ? INT64_MAX : m < 0 ? 0 : (int64_t)m;
	/* shape inference runs every iteration too: not one that may never end, nor a million */
	if (exec_shapes_only(x) && trips > LOOP_SHAPES_MAX)
		return exec_fail(x, "%s: the shapes of its outputs are known only when the graph runs",
				 !in[0] ? "it has no trip count M and runs until its condition turns false"
					: "its trip count M is over a million");
	struct rtensor *a = xcalloc(N + 2, sizeof *a), *r = xcalloc(body->n_outputs, sizeof *r), *cur = xcalloc(N + 1, sizeof *cur);
	struct rtensor *slices = NULL;
	int64_t cap = 0, it = 0;
	int rc = !a || !r || !cur ? exec_fail(x, "out of memory") : 0;
	int64_t iter = 0;
	uint8_t cond = 1;
	for (uint32_t k = 0; k < N && !rc; k++)
		if (!in[2 + k])
			rc = exec_fail(x, "input %u, a loop-carried value, is required", 2 + k);
	for (uint32_t k = 0; k < N && !rc; k++)
		cur[k] = *in[2 + k]; /* borrowed until the first iteration's replace them */
	for (; !rc && c != 0 && it < trips; it++) {
		iter = it;
		cond = 1;
		int64_t none[1];
		if (rt_make(x, &a[0], DT_INT64, 0, none, 0) || rt_make(x, &a[1], DT_BOOL, 0, none, 0)) {
			rc = exec_status(x);
			break;
		}
		a[0].data = &iter;
		a[1].data = &cond;
		for (uint32_t k = 0; k < N; k++)
			a[2 + k] = cur[k];
		if ((rc = exec_subgraph(x, body, a, r)))
			break;
		int kn = scalar_of(&r[0], &c);
		if (kn <= 0) {
			free_temps(x, r, body->n_outputs);
			rc = kn < 0 ? exec_fail(x, "the body's condition must have one element")
				    : exec_fail(x, "its body's condition is computed from data, known only when the graph runs: "
						   "the shapes of its outputs cannot be inferred before");
			break;
		}
		exec_free_temp(x, &r[0]);
		for (uint32_t k = 0; k < N; k++) {
			if (it)
				exec_free_temp(x, &cur[k]);
			cur[k] = r[1 + k];
		}
		if (K && it == cap) {
			int64_t nc = cap ? 2 * cap : 16;
			struct rtensor *g = xcalloc((size_t)(nc * K), sizeof *g);
			if (!g) {
				free_temps(x, r + 1 + N, K);
				rc = exec_fail(x, "out of memory");
				break;
			}
			for (uint32_t j = 0; cap && j < K; j++)
				memcpy(g + j * nc, slices + j * cap, sizeof *g * (size_t)cap);
			xfree(slices);
			slices = g;
			cap = nc;
		}
		for (uint32_t j = 0; j < K; j++)
			slices[j * cap + it] = r[1 + N + j];
	}
	for (uint32_t k = 0; k < N && !rc; k++)
		rc = set_out(x, out[k], &cur[k], it > 0);
	if (!rc)
		rc = stack_scans(x, body, 1 + N, out + N, slices, K, it, cap);
	if (it > 0)
		free_temps(x, cur, N);
	for (uint32_t j = 0; j < K; j++)
		free_temps(x, slices + j * cap, (uint32_t)it);
	xfree(slices);
	xfree(a);
	xfree(r);
	xfree(cur);
	return rc ? exec_status(x) : 0;
}

/* ---- Scan ---- */

struct scan_form {
	uint32_t N, M, K; /* states, scan inputs, scan outputs */
	int in_axis[RT_MAX_DIMS * 4], in_rev[RT_MAX_DIMS * 4], out_axis[RT_MAX_DIMS * 4], out_rev[RT_MAX_DIMS * 4];
};

/* One Scan-9 run: states st[0..N) and sequences sq[0..M) to results res[0..N+K) (workspace, or
 * shapes alone), the sequences sliced along their axes. */
static int scan_once(struct exec *x, struct graph *body, const struct scan_form *f, const struct rtensor *st,
		     const struct rtensor *sq, struct rtensor *res)
{
	int64_t L = -1;
	for (uint32_t m = 0; m < f->M; m++) {
		int ax = f->in_axis[m];
		if (ax < 0 || ax >= sq[m].ndim)
			return exec_fail(x, "scan input %u: axis %d is out of range for rank %d", m, ax, sq[m].ndim);
		if (L >= 0 && sq[m].dims[ax] != L)
			return exec_fail(x, "scan inputs differ in length (%" PRId64 " and %" PRId64 ")", L, sq[m].dims[ax]);
		L = sq[m].dims[ax];
	}
	if (L < 0)
		return exec_fail(x, "has no scan inputs");
	uint32_t nb = f->N + f->M, no = f->N + f->K;
	struct rtensor *a = xcalloc(nb, sizeof *a), *r = xcalloc(no, sizeof *r), *slices = xcalloc((size_t)(f->K * (L ? L : 1)) + 1, sizeof *slices);
	int rc = !a || !r || !slices ? exec_fail(x, "out of memory") : 0;
	for (uint32_t k = 0; k < f->N && !rc; k++)
		res[k] = st[k]; /* borrowed until the first step's replace them */
	int64_t t = 0;
	for (; t < L && !rc; t++) {
		for (uint32_t k = 0; k < f->N; k++)
			a[k] = res[k];
		uint32_t m = 0;
		for (; m < f->M && !rc; m++)
			rc = take_slice(x, &sq[m], f->in_axis[m], f->in_rev[m] ? L - 1 - t : t, &a[f->N + m]);
		if (!rc)
			rc = exec_subgraph(x, body, a, r);
		free_temps(x, a + f->N, m);
		if (rc)
			break;
		for (uint32_t k = 0; k < f->N; k++) {
			if (t)
				exec_free_temp(x, &res[k]);
			res[k] = r[k];
		}
		for (uint32_t j = 0; j < f->K; j++)
			slices[j * L + t] = r[f->N + j];
	}
	for (uint32_t j = 0; j < f->K && !rc; j++) {
		struct rtensor *s = &slices[j * L];
		int ax = f->out_axis[j], data = L > 0;
		if (!L) {
			const struct value *v = body->outputs[f->N + j];
			int64_t d0[1] = {0};
			rc = rt_make(x, &res[f->N + j], v->type.has_dtype ? v->type.dtype : DT_FLOAT, 1, d0, 0);
			continue;
		}
		if (ax < 0 || ax > s->ndim || s->ndim >= RT_MAX_DIMS) {
			rc = exec_fail(x, "scan output %u: axis %d is out of range for rank %d", j, ax, s->ndim + 1);
			break;
		}
		for (int64_t i = 0; i < L && !rc; i++) {
			data &= s[i].data != NULL;
			if (!same_shape(&s[i], s))
				rc = exec_fail(x, "scan output %u: steps' slices must have one shape", j);
		}
		int64_t dims[RT_MAX_DIMS];
		for (int k = 0, d = 0; k <= s->ndim; k++)
			dims[k] = k == ax ? L : s->dims[d++];
		if (!rc)
			rc = rt_make(x, &res[f->N + j], s->dtype, s->ndim + 1, dims, data);
		for (int64_t i = 0; !rc && data && i < L; i++)
			put_slice(&res[f->N + j], ax, f->out_rev[j] ? L - 1 - i : i, &s[i]);
	}
	for (uint32_t j = 0; j < f->K; j++)
		free_temps(x, slices + j * L, (uint32_t)t);
	if (rc) { /* the states are workspace after a step (else the caller's), the outputs once made */
		if (t > 0)
			free_temps(x, res, f->N);
		free_temps(x, res + f->N, f->K);
		memset(res, 0, sizeof *res * no);
	}
	if (!rc && t == 0) /* no steps: the states as they came, copied */
		for (uint32_t k = 0; k < f->N && !rc; k++) {
			struct rtensor c;
			rc = rt_make(x, &c, st[k].dtype, st[k].ndim, st[k].dims, st[k].data != NULL);
			if (!rc && st[k].data)
				memcpy(c.data, st[k].data, st[k].nbytes);
			res[k] = c;
		}
	xfree(a);
	xfree(r);
	xfree(slices);
	return rc ? exec_status(x) : 0;
}

/* Reads an INTS attribute of count entries into v (default 0), each in [-rank, rank) made
 * non-negative when rank > 0. */
static int scan_ints(struct exec *x, const struct node *n, const char *name, uint32_t count, int *v,
		     struct rtensor *const *ts, int extra)
{
	size_t c;
	const int64_t *a = attr_ints(n, name, &c);
	if (a && c != count)
		return exec_fail(x, "attribute %s has %zu entries for %u tensors", name, c, count);
	for (uint32_t k = 0; k < count; k++) {
		int64_t e = a ? a[k] : 0;
		int rank = ts ? ts[k]->ndim + extra : 0;
		if (rank && (e < -rank || e >= rank))
			return exec_fail(x, "attribute %s: %" PRId64 " is out of range for rank %d", name, e, rank);
		v[k] = (int)(e < 0 ? e + rank : e);
	}
	return 0;
}

static int scan_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct graph *body = graph_attr(n, "body");
	int64_t M = attr_int(n, "num_scan_inputs", -1);
	int v8 = exec_opset(x) < 9; /* Scan-8: sequence_lens, then a batch axis 0 on everything */
	uint32_t first = v8 ? 1 : 0;
	if (!body || M < 1 || (uint64_t)M > n->n_in - first)
		return exec_fail(x, "needs the graph attribute body and num_scan_inputs between 1 and its inputs");
	struct scan_form f = {.M = (uint32_t)M};
	f.N = n->n_in - first - f.M;
	if (body->n_inputs != f.N + f.M || body->n_outputs < f.N || n->n_out != body->n_outputs)
		return exec_fail(x, "the body takes %u inputs and gives %u outputs: it must take the %u states and %u scan "
				    "slices, and give the node's %u outputs",
				 body->n_inputs, body->n_outputs, f.N, f.M, n->n_out);
	f.K = body->n_outputs - f.N;
	if (f.M > RT_MAX_DIMS * 4 || f.K > RT_MAX_DIMS * 4)
		return exec_fail(x, "at most %d scan inputs and outputs", RT_MAX_DIMS * 4);
	for (uint32_t k = first; k < n->n_in; k++)
		if (!in[k])
			return exec_fail(x, "input %u is required", k);
	if (v8) {
		if (scan_ints(x, n, "directions", f.M, f.in_rev, NULL, 0))
			return exec_status(x);
	} else if (scan_ints(x, n, "scan_input_directions", f.M, f.in_rev, NULL, 0) ||
		   scan_ints(x, n, "scan_output_directions", f.K, f.out_rev, NULL, 0) ||
		   scan_ints(x, n, "scan_input_axes", f.M, f.in_axis, in + f.N, 0)) {
		return exec_status(x);
	}
	if (!v8) {
		size_t c;
		const int64_t *oa = attr_ints(n, "scan_output_axes", &c);
		if (oa && c != f.K)
			return exec_fail(x, "attribute scan_output_axes has %zu entries for %u outputs", c, f.K);
		for (uint32_t j = 0; j < f.K; j++) /* the rank is the body's slice's plus 1: checked per run */
			f.out_axis[j] = oa ? (int)oa[j] : 0;
		struct rtensor *res = xcalloc(f.N + f.K + 1, sizeof *res);
		int rc = !res ? exec_fail(x, "out of memory") : 0;
		struct rtensor *st = xcalloc(f.N + f.M + 1, sizeof *st);
		rc = rc || !st ? exec_fail(x, "out of memory") : 0;
		for (uint32_t k = 0; !rc && k < f.N + f.M; k++)
			st[k] = *in[k];
		for (uint32_t j = 0; j < f.K && !rc; j++)
			if (f.out_axis[j] < 0) /* negative: counted from the stacked output's rank, known after */
				rc = exec_fail(x, "negative scan_output_axes are not supported");
		if (!rc)
			rc = scan_once(x, body, &f, st, st + f.N, res);
		for (uint32_t k = 0; !rc && k < f.N + f.K; k++)
			rc = set_out(x, out[k], &res[k], 1);
		if (rc && res)
			free_temps(x, res, f.N + f.K);
		xfree(st);
		xfree(res);
		return rc ? exec_status(x) : 0;
	}
	/* Scan-8: each batch row a Scan-9 run over axis 0 of its slices */
	int64_t B = in[first]->ndim ? in[first]->dims[0] : -1;
	for (uint32_t k = first; k < n->n_in; k++)
		if (in[k]->ndim < 1 || in[k]->dims[0] != B)
			return exec_fail(x, "input %u: Scan-8 takes a batch axis 0 of one length on every input", k);
	for (uint32_t m = 0; m < f.M; m++)
		if (in[first + f.N + m]->ndim < 2)
			return exec_fail(x, "scan input %u has no sequence axis", m);
	if (n->n_in > 0 && in[0]) {
		for (int64_t b = 0; b < in[0]->numel; b++)
			if (!in[0]->data || rt_get_i(in[0], b) != in[first + f.N]->dims[1])
				return exec_fail(x, "sequence_lens shorter than the sequences are not supported");
	}
	struct rtensor *row = xcalloc(f.N + f.M + 1, sizeof *row), *res = xcalloc((size_t)(B * (f.N + f.K)) + 1, sizeof *res);
	int rc = !row || !res ? exec_fail(x, "out of memory") : 0;
	int64_t b = 0;
	uint32_t nt = f.N + f.K;
	for (; b < B && !rc; b++) {
		uint32_t k = 0;
		for (; k < f.N + f.M && !rc; k++)
			rc = take_slice(x, in[first + k], 0, b, &row[k]);
		if (!rc)
			rc = scan_once(x, body, &f, row, row + f.N, res + b * nt);
		free_temps(x, row, k);
	}
	for (uint32_t k = 0; k < nt && !rc; k++) {
		struct rtensor *s = &res[k];
		int data = 1;
		for (int64_t i = 0; i < B && !rc; i++) {
			data &= s[i * nt].data != NULL;
			if (!same_shape(&s[i * nt], s))
				rc = exec_fail(x, "output %u differs in shape between batch rows", k);
		}
		int64_t dims[RT_MAX_DIMS] = {B};
		if (!rc && s->ndim >= RT_MAX_DIMS)
			rc = exec_fail(x, "output %u: rank over %d", k, RT_MAX_DIMS);
		if (rc)
			break;
		memcpy(dims + 1, s->dims, sizeof *dims * (size_t)s->ndim);
		void *p = data ? exec_alloc(x, out[k], s->dtype, s->ndim + 1, dims) : NULL;
		if (exec_status(x) || (!p && exec_shape(x, out[k], s->dtype, s->ndim + 1, dims)))
			rc = exec_status(x);
		for (int64_t i = 0; p && i < B; i++)
			put_slice(out[k], 0, i, &s[i * nt]);
	}
	for (int64_t i = 0; res && i < b; i++)
		free_temps(x, res + i * nt, nt);
	xfree(row);
	xfree(res);
	return rc ? exec_status(x) : 0;
}

static void control_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			 uint64_t *bytes)
{
	(void)n, (void)in, (void)out, (void)bytes;
	*flops = 0; /* the bodies' nodes count their own (exec_subgraph) */
}

const struct op_impl op_if = {.run = if_run, .cost = control_cost, .recompute = RC_NEVER};
const struct op_impl op_loop = {.run = loop_run, .cost = control_cost, .recompute = RC_NEVER};
const struct op_impl op_scan = {.run = scan_run, .cost = control_cost, .recompute = RC_NEVER};
