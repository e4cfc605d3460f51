/* comm.c - AllReduce, the data-parallel replicas' sum (rewrite/replicas.h).
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
	if (n->n_in != n->n_out)
		return exec_fail(x, "needs one output per input");
	if (!attr_str_is(n, "reduction", "sum", 1))
		return exec_fail(x, "reduction must be sum");
	int dt = in[0] ? in[0]->dtype : DT_FLOAT;
	size_t total = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		if (!in[k])
			return exec_fail(x, "input %u is missing", k);
		if (in[k]->dtype != DT_FLOAT && in[k]->dtype != DT_DOUBLE)
			return exec_fail(x, "input %u is %s; AllReduce sums float32 or float64", k, dtype_name(in[k]->dtype));
		if (in[k]->dtype != dt)
			return exec_fail(x, "inputs are %s and %s; a bucket has one dtype", dtype_name(dt),
					 dtype_name(in[k]->dtype));
		total += in[k]->nbytes;
	}
	int ok = 1;
	/* shapes only: never data, even for inputs known there (folded), as the sum is the replicas' */
	for (uint32_t k = 0; k < n->n_out; k++)
		ok &= exec_shapes_only(x) ? !exec_shape(x, out[k], dt, in[k]->ndim, in[k]->dims)
					  : exec_alloc(x, out[k], dt, in[k]->ndim, in[k]->dims) != NULL;
	if (!ok || exec_shapes_only(x))
		return exec_status(x); /* (or out of memory) */
	struct comm *c = exec_comm(x);
	int64_t want = attr_int(n, "replicas", 1), have = c ? c->size : 1;
	if (want != have)
		return exec_fail(x, "the graph was built for %lld replicas, and this run has %lld: run it with mpirun -np "
				    "%lld graphdiet run --shard-inputs, or graphdiet verify --replicas %lld",
				 (long long)want, (long long)have, (long long)want, (long long)want);
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
