/* cpu.c - the CPU backend: the ops' own kernels (src/ops/), on host memory.
 *
 * 16-bit floats are stored narrow and computed in float32: a node reading float16 or bfloat16 runs
 * its float32 kernel on widened copies of those inputs (workspace), and its float outputs are
 * rounded back to that dtype (to nearest even) as they are stored. So one kernel per op serves
 * every float width, and live memory holds only narrow tensors, as the memory model counts them.
 * Cast converts itself, ops that read only shapes and views (OPF_VIEW: bytes under another shape)
 * need nothing, and an op with inputs of their own width (op_impl.own_width) reads 16 bits itself.
 * Both conversions are one typed loop per tensor over the pool (half_convert, ops/halfconv.c). */
#include "backend.h"
#include "exec.h"
#include "../ops/halfconv.h"
#include "../ops/ops.h"
#include "../util/err.h"
#include "../util/xalloc.h"

#include <string.h>

/* The 16-bit dtype n's float inputs have; 0: none to widen. */
static int half_dtype(struct exec *x, const struct node *n, struct rtensor *const *in, int *dt)
{
	*dt = 0;
	const struct op_impl *impl = op_table[n->op].impl;
	if (n->op == OP_CAST || (op_table[n->op].flags & (OPF_META | OPF_VIEW)) || (impl && impl->own_width))
		return 0;
	int other = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		if (!in[k] || !dtype_is_float(in[k]->dtype))
			continue;
		if (dtype_is_half(in[k]->dtype) && (!*dt || *dt == in[k]->dtype))
			*dt = in[k]->dtype;
		else
			other = other ? other : in[k]->dtype;
	}
	if (*dt && other)
		return exec_fail(x, "inputs are %s and %s; they must have the same dtype", dtype_name(*dt),
				 dtype_name(other));
	return 0;
}

static int run_widened(struct exec *x, const struct op_impl *impl, const struct node *n, struct rtensor **in,
		       struct rtensor **out, int dt)
{
	struct rtensor *win = xcalloc(n->n_in + n->n_out + 1, sizeof *win), *wout = win + n->n_in;
	struct rtensor **wi = xcalloc(n->n_in + n->n_out + 1, sizeof *wi), **wo = wi + n->n_in;
	if (!win || !wi) {
		xfree(win);
		xfree(wi);
		return exec_fail(x, "out of memory");
	}
	int rc = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		wi[k] = in[k];
		if (!in[k] || in[k]->dtype != dt)
			continue;
		/* the same shape (already checked) in float32 */
		win[k] = *in[k];
		win[k].dtype = DT_FLOAT;
		win[k].nbytes = (size_t)in[k]->numel * sizeof(float);
		win[k].data = NULL;
		win[k].owned = 0;
		wi[k] = &win[k];
		if (in[k]->data && !rc) {
			if (!(win[k].data = exec_scratch(x, win[k].nbytes)))
				rc = exec_status(x);
			else
				half_convert(in[k]->data, win[k].data, in[k]->numel, dt, 0);
		}
	}
	for (uint32_t k = 0; k < n->n_out; k++) {
		memset(&wout[k], 0, sizeof wout[k]);
		wo[k] = &wout[k];
	}
	if (!rc) {
		exec_set_widening(x, 1);
		rc = impl->run(x, n, wi, wo);
		exec_set_widening(x, 0);
	}
	for (uint32_t k = 0; k < n->n_out && !rc; k++) {
		struct rtensor *w = &wout[k], *o = out[k];
		int narrow = w->dtype == DT_FLOAT;
		if (!w->known)
			continue;
		if (!w->data) { /* shapes only */
			rc = exec_shape(x, o, narrow ? dt : w->dtype, w->ndim, w->dims);
			continue;
		}
		if (!exec_alloc(x, o, narrow ? dt : w->dtype, w->ndim, w->dims)) {
			rc = exec_status(x);
			continue;
		}
		if (!narrow) {
			memcpy(o->data, w->data, w->nbytes);
			continue;
		}
		half_convert(w->data, o->data, w->numel, dt, 1);
	}
	for (uint32_t k = 0; k < n->n_out; k++)
		if (wout[k].data)
			exec_scratch_free(x, wout[k].data, wout[k].nbytes);
	for (uint32_t k = 0; k < n->n_in; k++)
		if (wi[k] == &win[k] && win[k].data)
			exec_scratch_free(x, win[k].data, win[k].nbytes);
	xfree(win);
	xfree(wi);
	return rc;
}

static int cpu_supports_op(const struct node *n, struct rtensor *const *in)
{
	(void)in;
	return op_table[n->op].impl && op_table[n->op].impl->run;
}

/* The kernel derives the outputs' shapes and allocates them itself (exec_alloc). */
static int cpu_run_node(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct op_impl *impl = op_table[n->op].impl;
	int half;
	if (half_dtype(x, n, in, &half))
		return exec_status(x);
	return half ? run_widened(x, impl, n, (struct rtensor **)in, (struct rtensor **)out, half) : impl->run(x, n, in, out);
}

static int cpu_open(struct gd_err *e)
{
	(void)e;
	return 0;
}

static void *cpu_alloc(size_t bytes)
{
	return xmalloc(bytes ? bytes : 1);
}

static int cpu_copy(void *dst, const void *src, size_t bytes, enum backend_copy kind)
{
	(void)kind;
	memcpy(dst, src, bytes);
	return 0;
}

static int cpu_sync(struct gd_err *e)
{
	(void)e;
	return 0;
}

const struct backend backend_cpu = {
	/* .name = */ "cpu",
	/* .host = */ 1,
	/* .open = */ cpu_open,
	/* .supports_op = */ cpu_supports_op,
	/* .alloc = */ cpu_alloc,
	/* .free = */ xfree,
	/* .copy = */ cpu_copy,
	/* .run_node = */ cpu_run_node,
	/* .sync = */ cpu_sync,
};

const struct backend *backend_find(const char *name, struct gd_err *e)
{
	const struct backend *b = NULL;
	if (!strcmp(name, "cpu"))
		b = &backend_cpu;
	else if (!strcmp(name, "cuda")) {
#ifdef GD_HAVE_CUDA
		b = &backend_cuda;
#else
		err_set(e, GD_EINPUT, "--backend cuda: this graphdiet was built without CUDA (cmake -DGRAPHDIET_CUDA=ON)");
		return NULL;
#endif
	} else {
		err_set(e, GD_EINPUT, "--backend %s: not a backend (cpu or cuda)", name);
		return NULL;
	}
	return b->open(e) ? NULL : b;
}
