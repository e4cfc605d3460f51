/* comm.c - the collectives of data-parallel replicas (rewrite/replicas.h): AllReduce, and for
 * sharded training (ZeRO, FSDP) ReduceScatter, AllGather and Shard.
 *
 * AllReduce(X1, ..., Xk) -> (Y1, ..., Yk), domain graphdiet, attributes reduction = "sum" (the
 * only one) and replicas = N (the replicas the graph was built for). Yi is the sum of Xi over the
 * replicas, of Xi's shape and dtype (float32 or float64, all inputs the same). Several inputs are
 * a bucket: packed into one buffer, summed by one call, unpacked. The transport is the run's comm
 * (exec/comm.h); with none, N must be 1 and Y is X.
 *
 * Its gradient (for --sync-batchnorm's forward sums, rewrite/syncbn.c): every replica's loss reads
 * Yi, which is the same on all, so the gradient of the replicas' total loss with respect to a
 * replica's Xi is the sum over the replicas of their dYi: AllReduce(dY1, ..., dYk), one node. */
#include "../autodiff/ad.h"
#include "../exec/comm.h"
#include "kernel.h"
#include "ops.h"
#include "../util/xalloc.h"

#include <string.h>

/* The replicas the node was built for against the run's (a comm's size, else 1): they must agree. */
static int same_replicas(struct exec *x, const struct node *n)
{
	struct comm *c = exec_comm(x);
	int64_t want = attr_int(n, "replicas", 1), have = c ? c->size : 1;
	if (want == have)
		return 0;
	return exec_fail(x, "the graph was built for %lld replicas, and this run has %lld: run it with mpirun -np "
			    "%lld graphdiet run --shard-inputs, or graphdiet verify --replicas %lld",
			 (long long)want, (long long)have, (long long)want, (long long)want);
}

/* exec_alloc, but a shapes-only run gets the shape alone, even where the input is known: each
 * replica's slice is its own. */
static void *out_of(struct exec *x, struct rtensor *out, int dtype, int ndim, const int64_t *dims)
{
	if (exec_shapes_only(x)) {
		exec_shape(x, out, dtype, ndim, dims);
		return NULL;
	}
	return exec_alloc(x, out, dtype, ndim, dims);
}

/* The replicas attribute; 0 with the node failed when it is not 1 .. 2^20. */
static int64_t replicas_of(struct exec *x, const struct node *n)
{
	int64_t r = attr_int(n, "replicas", 1);
	if (r >= 1 && r <= (1 << 20))
		return r;
	exec_fail(x, "replicas is %lld; it must lie between 1 and 1048576", (long long)r);
	return 0;
}

/* A sum's inputs (AllReduce's, ReduceScatter's): one output each, reduction "sum", all present and
 * of one dtype, float32 or float64 (a bucket is summed in one call). Their dtype, or -1 with the
 * node failed. */
static int summands(struct exec *x, const struct node *n, struct rtensor *const *in)
{
	int dt = in[0] ? in[0]->dtype : DT_FLOAT;
	if (n->n_in != n->n_out)
		return exec_fail(x, "needs one output per input"), -1;
	if (!attr_str_is(n, "reduction", "sum", 1))
		return exec_fail(x, "reduction must be sum"), -1;
	for (uint32_t k = 0; k < n->n_in; k++) {
		if (!in[k])
			return exec_fail(x, "input %u is missing", k), -1;
		if (in[k]->dtype != DT_FLOAT && in[k]->dtype != DT_DOUBLE)
			return exec_fail(x, "input %u is %s; %s sums float32 or float64", k, dtype_name(in[k]->dtype),
					 n->op_type), -1;
		if (in[k]->dtype != dt)
			return exec_fail(x, "inputs are %s and %s; a bucket has one dtype", dtype_name(dt),
					 dtype_name(in[k]->dtype)), -1;
	}
	return dt;
}

/* An AllReduce whose element count was not known before the run (it depends on the data: see
 * exec/agree.c) compares it across the replicas before it sums: buffers of other sizes would
 * overflow one (MPI's ring algorithm writes past the shorter) or truncate a message. Every replica
 * sees every count, so all fail at once and replica 0 says so. */
static int same_count(struct exec *x, struct comm *c, uint64_t count, int dt)
{
	uint64_t mine[2] = {count, (uint64_t)dt}, *all = xmalloc(sizeof mine * (size_t)c->size);
	struct gd_err ce = {0};
	if (!all || c->allgather(c, mine, sizeof mine, all, &ce)) {
		xfree(all);
		return exec_fail(x, "%s", all ? ce.msg : "out of memory");
	}
	int r = 1;
	while (r < c->size && all[2 * r] == all[0] && all[2 * r + 1] == all[1])
		r++;
	int rc = 0;
	if (r < c->size) {
		c->together = 1;
		rc = exec_fail(x, "the ranks' sums differ in size (a count that depends on the data): rank 0 sums %llu %s "
				  "elements, rank %d %llu %s", (unsigned long long)all[0], dtype_name((enum dtype)all[1]), r,
			       (unsigned long long)all[2 * r], dtype_name((enum dtype)all[2 * r + 1]));
	}
	xfree(all);
	return rc;
}

static int all_reduce_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int dt = replicas_of(x, n) ? summands(x, n, in) : -1;
	if (dt < 0)
		return exec_status(x);
	size_t total = 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		total += in[k]->nbytes;
	int ok = 1;
	for (uint32_t k = 0; k < n->n_out; k++)
		ok &= out_of(x, out[k], dt, in[k]->ndim, in[k]->dims) != NULL;
	if (!ok)
		return exec_status(x); /* (shapes only, or out of memory) */
	struct comm *c = exec_comm(x);
	if (same_replicas(x, n))
		return exec_status(x);
	for (uint32_t k = 0; k < n->n_in; k++)
		memcpy(out[k]->data, in[k]->data, in[k]->nbytes);
	if (!c)
		return 0;
	size_t es = dtype_size(dt);
	struct gd_err ce = {0};
	int rc;
	if (n->index < c->n_check && c->check[n->index] && (rc = same_count(x, c, total / es, dt)))
		return rc;
	if (n->n_in == 1) {
		rc = c->allreduce_sum(c, out[0]->data, total / es, dt, &ce);
	} else { /* a bucket: one sum over its packed inputs */
		char *buf = exec_scratch(x, total);
		if (!buf)
			return exec_status(x);
		size_t off = 0;
		for (uint32_t k = 0; k < n->n_in; k++, off += in[k - 1]->nbytes)
			memcpy(buf + off, in[k]->data, in[k]->nbytes);
		rc = c->allreduce_sum(c, buf, total / es, dt, &ce);
		off = 0;
		for (uint32_t k = 0; !rc && k < n->n_out; k++, off += out[k - 1]->nbytes)
			memcpy(out[k]->data, buf + off, out[k]->nbytes);
		exec_scratch_free(x, buf, total);
	}
	return rc ? exec_fail(x, "%s", ce.msg) : 0;
}

static int all_reduce_grad(struct ad *a, const struct node *n)
{
	struct value **dy = xmalloc(sizeof *dy * n->n_out);
	uint32_t *which = xmalloc(sizeof *which * n->n_out), k = 0;
	int rc = dy && which ? 0 : ad_fail(a, "out of memory");
	for (uint32_t i = 0; !rc && i < n->n_out; i++)
		if ((dy[k] = n->in[i] && n->out[i] && ad_wants(a, n->in[i]) ? ad_dy(a, n->out[i]) : NULL))
			which[k++] = i;
	struct node *m = !rc && k ? ad_node(a, "AllReduce", dy, (int)k, (int)k) : NULL;
	if (!rc && k && (!m || ad_set_str(a, m, "reduction", "sum") || ad_set_int(a, m, "replicas", attr_int(n, "replicas", 1))))
		rc = -1;
	if (m) {
		m->domain = "graphdiet";
		m->op = OP_ALL_REDUCE; /* ad_node looks the type up in the default domain */
		m->tags |= TAG_COMM;
	}
	for (uint32_t j = 0; !rc && j < k; j++)
		rc = ad_give(a, n->in[which[j]], m->out[j]) ? -1 : 0;
	xfree(dy);
	xfree(which);
	return rc;
}

const struct op_impl op_all_reduce = {.run = all_reduce_run, .grad = all_reduce_grad, .recompute = RC_NEVER};

/* ---- sharded training (ZeRO, FSDP): a tensor as N slices, one per replica ----
 *
 * A tensor of numel elements is flattened, zero-padded to N k elements, k = ceil(numel / N), and
 * replica r holds elements [r k, r k + k). Three ops, each with attribute replicas = N:
 *   Shard(X) -> S                     this replica's slice of X (no communication)
 *   AllGather(S) -> Y, shape = dims   every replica's slice, unpadded, as a tensor of those dims
 *   ReduceScatter(X1, ...) -> (S1, ...), reduction = "sum"
 *                                     this replica's slice of the sum of Xi over the replicas; a
 *                                     bucket of several inputs is one call
 * AllGather and ReduceScatter are each other's gradient (the transpose of a gather is the sum of
 * what was gathered). An AllGather of the same slices gives the same bits each time, so a
 * parameter's gather recomputes as a Cast of it does (recompute.h). */

/* Elements in each replica's slice of numel elements. */
static int64_t slice_len(int64_t numel, int64_t reps)
{
	return (numel + reps - 1) / reps;
}

/* dst (k elements of es bytes) = elements [r k, r k + k) of src (numel of them), zeros past its end. */
static void take_slice(void *dst, const void *src, int64_t numel, int64_t k, int64_t r, size_t es)
{
	int64_t lo = r * k, hi = lo + k < numel ? lo + k : numel, n = hi > lo ? hi - lo : 0;
	if (n)
		memcpy(dst, (const char *)src + (size_t)lo * es, (size_t)n * es);
	memset((char *)dst + (size_t)n * es, 0, (size_t)(k - n) * es);
}

static int shard_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t reps = replicas_of(x, n);
	if (!reps)
		return exec_status(x);
	if (!in[0])
		return exec_fail(x, "its input is missing");
	int64_t k = slice_len(in[0]->numel, reps);
	void *d = out_of(x, out[0], in[0]->dtype, 1, &k);
	if (!d || same_replicas(x, n))
		return exec_status(x);
	struct comm *c = exec_comm(x);
	take_slice(d, in[0]->data, in[0]->numel, k, c ? c->rank : 0, dtype_size(in[0]->dtype));
	return 0;
}

static int all_gather_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t reps = replicas_of(x, n), numel = 1;
	size_t nd = 0;
	const int64_t *shape = attr_ints(n, "shape", &nd);
	if (!reps)
		return exec_status(x);
	if (!in[0])
		return exec_fail(x, "its input is missing");
	if (!node_attr(n, "shape") || nd > RT_MAX_DIMS)
		return exec_fail(x, "needs attribute shape, the gathered tensor's dims (at most %d)", RT_MAX_DIMS);
	for (size_t k = 0; k < nd; k++) {
		if (shape[k] < 0 || (shape[k] && numel > INT64_MAX / shape[k]))
			return exec_fail(x, "shape's dim %zu is %lld", k, (long long)shape[k]);
		numel *= shape[k];
	}
	int64_t k = slice_len(numel, reps);
	if (in[0]->ndim != 1 || in[0]->dims[0] != k)
		return exec_fail(x, "its input has %lld elements in %d dims; %lld elements over %lld replicas take "
				    "slices of %lld, in 1", (long long)in[0]->numel, in[0]->ndim, (long long)numel,
				 (long long)reps, (long long)k);
	void *d = out_of(x, out[0], in[0]->dtype, (int)nd, shape);
	if (!d || same_replicas(x, n) || !numel)
		return exec_status(x);
	struct comm *c = exec_comm(x);
	size_t es = dtype_size(in[0]->dtype), kb = (size_t)k * es;
	if (!c) {
		memcpy(d, in[0]->data, (size_t)numel * es);
		return 0;
	}
	char *all = exec_scratch_raw(x, (size_t)reps * kb);
	struct gd_err ce = {0};
	if (!all)
		return exec_status(x);
	int rc = c->allgather(c, in[0]->data, kb, all, &ce);
	if (!rc)
		memcpy(d, all, (size_t)numel * es);
	exec_scratch_free(x, all, (size_t)reps * kb);
	return rc ? exec_fail(x, "%s", ce.msg) : 0;
}

static int reduce_scatter_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t reps = replicas_of(x, n), total = 0;
	if (!reps)
		return exec_status(x);
	int dt = summands(x, n, in), ok = 1;
	if (dt < 0)
		return exec_status(x);
	for (uint32_t k = 0; k < n->n_in; k++) {
		int64_t len = slice_len(in[k]->numel, reps);
		total += len;
		ok &= out_of(x, out[k], dt, 1, &len) != NULL;
	}
	if (!ok || same_replicas(x, n))
		return exec_status(x);
	struct comm *c = exec_comm(x);
	size_t es = dtype_size(dt);
	if (!c) { /* one replica: its slice is all of it */
		for (uint32_t k = 0; k < n->n_in; k++)
			memcpy(out[k]->data, in[k]->data, in[k]->nbytes);
		return 0;
	}
	/* each replica's part of every input, in replica order: buf[r] = (slice r of X1, slice r of X2, ...) */
	size_t bytes = (size_t)reps * (size_t)total * es;
	char *buf = exec_scratch_raw(x, bytes + es);
	if (!buf)
		return exec_status(x);
	for (int64_t r = 0; r < reps; r++)
		for (uint32_t k = 0, off = 0; k < n->n_in; off += (uint32_t)out[k]->numel, k++)
			take_slice(buf + ((size_t)r * (size_t)total + off) * es, in[k]->data, in[k]->numel, out[k]->numel, r, es);
	struct gd_err ce = {0};
	/* the sum lands in a buffer of its own: the transport reads every replica's parts meanwhile */
	char *sum = exec_scratch_raw(x, (size_t)total * es + es);
	int rc = sum ? c->reduce_scatter_sum(c, buf, sum, (size_t)total, dt, &ce) : -1;
	for (uint32_t k = 0, off = 0; !rc && k < n->n_out; off += (uint32_t)out[k]->numel, k++)
		memcpy(out[k]->data, sum + (size_t)off * es, out[k]->nbytes);
	if (sum)
		exec_scratch_free(x, sum, (size_t)total * es + es);
	exec_scratch_free(x, buf, bytes + es);
	return !sum ? exec_status(x) : rc ? exec_fail(x, "%s", ce.msg) : 0;
}

/* The gradient of a gather: the sum of every replica's over this one's slice, ReduceScatter(dY). */
static int all_gather_grad(struct ad *a, const struct node *n)
{
	struct value *dy = n->out[0] && ad_wants(a, n->in[0]) ? ad_dy(a, n->out[0]) : NULL;
	if (!dy)
		return 0;
	struct node *m = ad_node(a, "ReduceScatter", &dy, 1, 1);
	if (!m || ad_set_str(a, m, "reduction", "sum") || ad_set_int(a, m, "replicas", attr_int(n, "replicas", 1)))
		return -1;
	m->domain = "graphdiet";
	m->op = OP_REDUCE_SCATTER; /* ad_node looks the type up in the default domain */
	m->tags |= TAG_COMM;
	return ad_give(a, n->in[0], m->out[0]) ? -1 : 0;
}

const struct op_impl op_shard = {.run = shard_run, .recompute = RC_CHEAP};
const struct op_impl op_all_gather = {.run = all_gather_run, .grad = all_gather_grad, .recompute = RC_CHEAP};
const struct op_impl op_reduce_scatter = {.run = reduce_scatter_run, .recompute = RC_NEVER};
