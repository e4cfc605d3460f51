/* exec.c - the executor loop and its allocator; see exec.h. */
#include "exec.h"
#include "../ir/flat.h"
#include "backend.h"
#include "comm.h"
#include "../io/tensor.h"
#include "../ir/symdim.h"
#include "../ops/kernel.h"
#include "../util/philox.h"
#include "../util/progress.h"
#include "../util/xalloc.h"

#include <ctype.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

/* Largest result constant folding computes during shape inference (elements). */
#define FOLD_MAX 65536

#define CHAIN_SPAN (2 * CHAIN_MAX) /* the nodes a chain may span: its steps and the Constants they read */

struct exec {
	struct graph *g;
	const struct exec_opts *o;
	struct exec *shapes;           /* a shapes-only run of g, made when random labels need it */
	struct exec_opts shapes_opts;
	int shapes_tried;
	struct rtensor *v;   /* by value id */
	uint32_t nv;         /* values when the run started: later additions to g have no slot */
	uint32_t cap;        /* ... but for exec_alias's, which grow v */
	uint32_t *left;      /* consumers still to run, by value id */
	uint8_t *pinned;     /* lives for the whole run */
	uint8_t *lazy;       /* shapes only: an initializer whose bytes are bound when a node needs them */
	uint8_t *fold;       /* by node: a Transpose whose output may be a view (fold_transposes) */
	uint8_t *swap_ok;    /* by value id: exec_swap_ok (find_swaps) */
	uint32_t *vref;      /* by value id: the live views of its bytes */
	struct rtensor *tcopies; /* by input slot: a view's transposed copy for a reader that is no product */
	size_t live, peak;           /* tensors: DESIGN.md's memory model, which plan's simulator predicts */
	size_t scratch, scratch_peak; /* kernels' workspace (im2col buffers, accumulators), apart */
	uint64_t flops, moved;
	uint64_t comm_calls, comm_bytes; /* AllReduce nodes summed over the replicas (exec_stats) */
	double comm_seconds;
	const struct backend *be;     /* a device backend, or NULL: everything runs on the CPU */
	size_t dev_live, dev_peak;    /* its memory holding tensors */
	uint64_t host_nodes, copies, copy_bytes;
	const struct node *cur;
	int compute;         /* the current node computes data */
	int widening;        /* the current node runs on float32 copies of 16-bit inputs (exec/cpu.c) */
	int outputs_scratch; /* its outputs are workspace (exec_run_cpu_into) */
	int opset;
	struct gd_err *e;
	struct strmap probes; /* symbolic dim -> stand-in value */
	struct strmap given;  /* the caller's inputs: name -> its tensor (the first of a name) */
	int64_t next_probe;
	int64_t probe_values[64];
	const char *probe_syms[64]; /* their symbols (NULL: a dim with no name) */
	struct strmap assumed;      /* the assumptions' records (symdim.h): the graph's and new ones */
	int assumed_read;
	const char **new_assumed;   /* new ones, for the graph's metadata at the end of the run */
	size_t n_new_assumed, cap_new_assumed;
	struct rtensor **args; /* run_nodes' in and out pointers, sized for the graph's widest node */
	struct rtensor *absent; /* stand-ins for its absent outputs */
	uint32_t max_in;
	int chains;          /* elementwise chains are fused (chain_start) */
	uint64_t chain_nodes; /* nodes they took */
	uint32_t chain_first, chain_last; /* the nodes of the chain under way; first > last: none */
	int chain_nd;        /* its shape */
	int64_t chain_dims[RT_MAX_DIMS];
	float *chain_out[CHAIN_MAX]; /* its steps' outputs, written; NULL: a ghost (rtensor.ghost) */
	signed char chain_step[CHAIN_SPAN]; /* node chain_first + t is step chain_step[t], or -1: a
					     * Constant it read, which runs at its turn as usual */
};

static void account(struct exec *x, size_t add, size_t sub)
{
	x->live = x->live + add - sub;
	if (x->live > x->peak)
		x->peak = x->live;
}

static void account_dev(struct exec *x, size_t add, size_t sub)
{
	x->dev_live = x->dev_live + add - sub;
	if (x->dev_live > x->dev_peak)
		x->dev_peak = x->dev_live;
}

const struct backend *exec_backend(const struct exec *x)
{
	return x->be ? x->be : &backend_cpu;
}

void exec_set_widening(struct exec *x, int on)
{
	x->widening = on;
}

int exec_status(const struct exec *x)
{
	return x->e->code;
}

int exec_opset(const struct exec *x)
{
	return x->opset;
}

int exec_probed(const struct exec *x)
{
	return x->next_probe > 0;
}

int exec_dim_symbolic(const struct exec *x, int64_t d)
{
	for (int i = 0; i < x->next_probe && i < 64; i++)
		if (d && d % x->probe_values[i] == 0)
			return 1;
	return 0;
}

/* d as k*p + r (k in [1, 4096], |r| < 1024) for the stand-in or product of two stand-ins p that
 * leaves the smallest remainder; stand-ins are primes above 10007, so an affine form over one
 * symbol, or a product of two, decodes exactly (symdim.h). */
int exec_dim_expr(const struct exec *x, int64_t d, struct symdim *out)
{
	int np = (int)(x->next_probe < 64 ? x->next_probe : 64);
	int64_t best_r = 1024;
	int found = 0;
	for (int i = 0; i < np && d > 0; i++)
		for (int j = -1; j <= i; j++) { /* j = -1: the stand-in of i alone */
			int64_t p = x->probe_values[i], q = j < 0 ? 1 : x->probe_values[j], pq;
			if (!x->probe_syms[i] || (j >= 0 && !x->probe_syms[j]) || __builtin_mul_overflow(p, q, &pq))
				continue;
			int64_t k = d / pq, r = d % pq; /* the nearest multiple, without d + pq / 2 overflowing */
			if (r > pq / 2) {
				k++;
				r -= pq;
			}
			if (k < 1 || k > 4096 || (r < 0 ? -r : r) >= best_r)
				continue;
			best_r = r < 0 ? -r : r;
			found = 1;
			const char *a = x->probe_syms[i], *b = j < 0 ? NULL : x->probe_syms[j];
			if (b && strcmp(b, a) < 0) { /* a product's symbols in order: batch*seq */
				const char *t = a;
				a = b;
				b = t;
			}
			*out = (struct symdim){.c = r, .n = 1};
			out->t[0] = (struct symdim_term){.k = k, .a = a, .b = b};
		}
	return found;
}

/* Rewrites, in a probing run's message, every number that derives from stand-ins as its
 * expression: "dimension 2: 64 vs 10009" becomes "dimension 2: 64 vs seq". */
static void name_stand_ins(const struct exec *x, char *msg, size_t size)
{
	char out[sizeof x->e->msg];
	size_t k = 0;
	for (const char *p = msg; *p && k + 1 < sizeof out;) {
		struct symdim d;
		char *end;
		if (*p >= '0' && *p <= '9' && (p == msg || !strchr("0123456789._'", p[-1]))) {
			long long v = strtoll(p, &end, 10);
			/* only what a stand-in could have made: a few times one (or two) plus a small
			 * offset; a size of the model's own (a vocabulary of 50257) stays as it is */
			if (v >= 10007 && !isalpha((unsigned char)(p == msg ? ' ' : p[-1])) && exec_dim_expr(x, v, &d) &&
			    d.t[0].k <= 64 && d.c > -64 && d.c < 64) {
				char e[128];
				symdim_str(&d, e, sizeof e);
				k += (size_t)snprintf(out + k, sizeof out - k, "%s", e);
				p = end;
				continue;
			}
			while (p < end && k + 1 < sizeof out)
				out[k++] = *p++;
			continue;
		}
		out[k++] = *p++;
	}
	out[k < sizeof out ? k : sizeof out - 1] = 0;
	snprintf(msg, size, "%s", out);
}

static int note_assumed(void *arg, const char *line, size_t len)
{
	struct exec *x = arg;
	const char *key = arena_strndup(x->g->arena, line, len);
	return !key || strmap_put(&x->assumed, key, (void *)key);
}

int exec_assume(struct exec *x, int64_t d, int64_t limit, const struct value *buffer)
{
	struct symdim s;
	char expr[128];
	if (!exec_dim_expr(x, d, &s))
		return 0;
	if (!x->assumed_read) { /* those the graph has: each is recorded once */
		x->assumed_read = 1;
		if (symdim_each_line(x->g, note_assumed, x))
			return err_oom(x->e);
	}
	/* the buffer a chain of Slices (bias[:, :, :T, :T] may be two) reads */
	while (buffer && buffer->producer && buffer->producer->op == OP_SLICE && buffer->producer->n_in)
		buffer = buffer->producer->in[0];
	const struct node *n = x->cur;
	const char *line = symdim_line(x->g->arena, symdim_str(&s, expr, sizeof expr), limit, n ? node_base_name(n) : NULL,
				       buffer ? buffer->name : NULL);
	if (!line)
		return err_oom(x->e);
	if (strmap_get(&x->assumed, line))
		return 0;
	if (x->n_new_assumed == x->cap_new_assumed) {
		size_t cap = x->cap_new_assumed ? 2 * x->cap_new_assumed : 8;
		const char **a = xrealloc(x->new_assumed, cap * sizeof *a);
		if (!a)
			return err_oom(x->e);
		x->new_assumed = a;
		x->cap_new_assumed = cap;
	}
	x->new_assumed[x->n_new_assumed++] = line;
	return strmap_put(&x->assumed, line, (void *)line) ? err_oom(x->e) : 0;
}

struct comm *exec_comm(const struct exec *x)
{
	return x->o->comm;
}

static int sharded(const struct exec *x)
{
	return x->o->shard_inputs && x->o->comm && x->o->comm->size > 1;
}

uint64_t exec_shard_offset(const struct exec *x, int64_t numel)
{
	return sharded(x) ? (uint64_t)x->o->comm->rank * (uint64_t)numel : 0;
}

struct graph *exec_graph(const struct exec *x)
{
	return x->g;
}

uint64_t exec_node_seed(const struct exec *x, const struct node *n)
{
	const struct attr *sa = node_attr(n, "seed");
	if (sa && sa->type == ATTR_INT)
		return (uint64_t)sa->i;
	/* keyed by node_base_name; a recompute clone, <that>_recompute, draws the numbers of the
	 * node it clones, and so does its k-th clone, <that>_recompute<k> */
	const char *name = node_base_name(n);
	size_t len = strlen(name), sfx = sizeof RECOMPUTE_SUFFIX - 1, nth = len;
	while (nth && name[nth - 1] >= '0' && name[nth - 1] <= '9') /* <that>_recompute<k> */
		nth--;
	if ((n->tags & TAG_RECOMPUTE) && nth > sfx && !strncmp(name + nth - sfx, RECOMPUTE_SUFFIX, sfx))
		len = nth - sfx;
	char buf[512];
	snprintf(buf, sizeof buf, "%.*s", (int)len, name);
	return x->o->seed * 0x9E3779B97F4A7C15ull ^ strmap_hash(buf);
}

uint64_t exec_step(const struct exec *x)
{
	return x->o->step;
}

int exec_fail(struct exec *x, const char *fmt, ...)
{
	char d[300];
	va_list ap;
	va_start(ap, fmt);
	int first = !x->e->code;
	int rc = err_vat(x->e, x->cur ? node_desc(x->cur, d, sizeof d) : NULL, fmt, ap);
	va_end(ap);
	if (first && x->next_probe)
		name_stand_ins(x, x->e->msg, sizeof x->e->msg);
	x->e->at_run |= first;
	return rc;
}

int exec_shape(struct exec *x, struct rtensor *t, int dtype, int ndim, const int64_t *dims)
{
	if (ndim < 0 || ndim > RT_MAX_DIMS)
		return exec_fail(x, "rank %d is not supported (at most %d)", ndim, RT_MAX_DIMS);
	size_t es = dtype_size(dtype);
	if (!dtype_valid(dtype) || !es)
		return exec_fail(x, "dtype %s is not supported by the executor", dtype_name(dtype));
	/* n: the product of the dims other than 0, which must fit as a tensor's bytes would, empty
	 * or not: kernels multiply a shape's dims in any grouping (H x W of an empty batch), so no
	 * product of them may overflow (a Conv of batch 0 padded by 2^62 made a [0, 1, 2^62, 6]) */
	int64_t n = 1;
	int empty = 0;
	for (int i = 0; i < ndim; i++) {
		if (dims[i] < 0)
			return exec_fail(x, "negative dimension %" PRId64, dims[i]);
		t->dims[i] = dims[i];
	}
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++) {
		if (dims[i] && n > INT64_MAX / dims[i] / (int64_t)es) {
			char s[RT_MAX_DIMS * 24 + 4];
			return exec_fail(x, "shape %s: its dimensions multiply past 2^63 bytes", rt_shape_str(t, s, sizeof s));
		}
		n *= dims[i] ? dims[i] : 1;
		empty |= dims[i] == 0; /* a 0 anywhere: empty, whatever the order of the dims */
	}
	n = empty ? 0 : n;
	t->dtype = dtype;
	t->numel = n;
	t->nbytes = (size_t)n * es;
	t->known = 1;
	t->swapped = 0;
	return 0;
}

/* A tensor's size comes from the model and its dimensions: one larger than the machine's memory
 * is the input's doing (exit 2, with the size); a smaller one that finds no memory is out of
 * memory (exit 3). */
static int tensor_oom(struct exec *x, size_t bytes)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0 && bytes / (size_t)page <= (size_t)pages)
		return err_oom(x->e);
	return exec_fail(x, "a tensor of %zu bytes (%.3g GB) is larger than this machine's memory; smaller dimensions "
			    "(--dim) need less", bytes, (double)bytes / 1e9);
}

/* The input of n, an OPF_REUSES node, whose buffer its output 0 (o, sized) is written over: the
 * first of o's dtype (not 16-bit) and element count that n reads last and that is no input,
 * initializer or graph output; -1 for none. The memory model's rule (plan/memsim.c). */
static int reused_input(const struct exec *x, const struct node *n, const struct rtensor *o)
{
	if (!n || !(op_table[n->op].flags & OPF_REUSES) || !n->n_out || !n->out[0] || o != &x->v[n->out[0]->id] ||
	    dtype_is_half(o->dtype))
		return -1;
	for (uint32_t k = 0; k < n->n_in; k++) {
		const struct value *v = n->in[k];
		const struct rtensor *t = v ? &x->v[v->id] : NULL;
		if (!t || !t->known || t->given || x->pinned[v->id] || t->dtype != o->dtype || t->numel != o->numel)
			continue;
		uint32_t reads = 0;
		for (uint32_t q = 0; q < n->n_in; q++)
			reads += n->in[q] == v;
		if (x->left[v->id] == reads)
			return (int)k;
	}
	return -1;
}

/* out, output 0 of the current node, takes the bytes of in, the input reused_input names: its
 * buffer when it owns one it may write (else out has one of its own); 1 when out has in's. */
static int give(struct exec *x, struct rtensor *in, struct rtensor *out)
{
	int own = in->owned && in->data && !in->view && !in->swapped && !(x->vref && x->vref[in - x->v]);
	in->given = 1;
	if (!own) {
		account(x, 0, in->nbytes); /* the bytes move; the buffer cannot */
		return 0;
	}
	out->data = in->data;
	out->owned = 1;
	in->owned = 0;
	return 1;
}

void *exec_alloc(struct exec *x, struct rtensor *out, int dtype, int ndim, const int64_t *dims)
{
	if (exec_shape(x, out, dtype, ndim, dims))
		return NULL;
	if (!x->compute || (x->o->shapes_only && out->numel > FOLD_MAX))
		return NULL;
	int k = x->be || x->widening || x->outputs_scratch ? -1 : reused_input(x, x->cur, out);
	if (k >= 0 && give(x, &x->v[x->cur->in[k]->id], out))
		return out->data;
	if (x->widening || x->outputs_scratch) { /* a float32 stand-in, counted as workspace until narrowed */
		out->data = exec_scratch(x, out->nbytes);
		out->owned = 1;
		return out->data;
	}
	out->data = xmalloc(out->nbytes ? out->nbytes : 1);
	if (!out->data) {
		tensor_oom(x, out->nbytes);
		return NULL;
	}
	out->owned = 1;
	account(x, out->nbytes, 0);
	return out->data;
}

static int detach_views(struct exec *x, struct rtensor *s, int give);

/* in, the input of n whose buffer its output 0 may take (op_taken_input), is read last by n:
 * nothing reads it after, and it is no input, initializer or graph output */
static int dies_here(const struct exec *x, const struct node *n, const struct rtensor *in)
{
	int t = n ? op_taken_input(op_table[n->op].flags, n->n_in) : -1;
	const struct value *v = t >= 0 ? n->in[t] : NULL;
	return v && in == &x->v[v->id] && x->left[v->id] == 1 && !x->pinned[v->id];
}

int exec_take(struct exec *x, struct rtensor *in, struct rtensor *out, int ndim, const int64_t *dims)
{
	const struct node *n = x->cur;
	uint32_t fl = n ? op_table[n->op].flags : 0;
	/* an update in place is made where the data is: on the device, by run_device */
	uint32_t updates = fl & (OPF_INPLACE | OPF_ADDS_TO);
	if (!dies_here(x, n, in) || !(fl & OPF_VIEW || (updates && x->compute)) || x->widening || x->outputs_scratch)
		return 0;
	if (exec_shape(x, out, in->dtype, ndim, dims))
		return -1;
	if (out->numel != in->numel)
		return 0; /* the kernel's copy says why */
	if (detach_views(x, in, 0))
		return -1;
	if (in->dev && updates) { /* a device tensor updated on the host: its copy goes back */
		x->be->free(in->dev);
		account_dev(x, 0, in->nbytes);
		in->dev = NULL;
	}
	out->data = in->data;
	out->dev = in->dev;
	out->owned = in->owned;
	in->data = in->dev = NULL;
	in->owned = 0;
	return 1;
}

void *exec_alloc_zero(struct exec *x, struct rtensor *out, int dtype, int ndim, const int64_t *dims)
{
	void *p = exec_alloc(x, out, dtype, ndim, dims);
	if (p)
		memset(p, 0, out->nbytes);
	return p;
}

static void release(struct exec *x, struct rtensor *t)
{
	if (t->view && !t->owned && x->vref)
		x->vref[t->vsrc]--;
	else
		(void)detach_views(x, t, 1); /* a failure fails the run (run_nodes) */
	if ((t->data || t->dev || t->ghost) && !t->given)
		account(x, 0, t->nbytes);
	if (t->owned)
		xfree(t->data);
	if (t->dev) {
		x->be->free(t->dev);
		account_dev(x, 0, t->nbytes);
	}
	t->data = NULL;
	t->dev = NULL;
	t->owned = 0;
	t->view = 0;
	t->ghost = 0;
	t->given = 0;
}

void exec_drop(struct exec *x, struct rtensor *t)
{
	release(x, t);
}

static void *count_scratch(struct exec *x, void *p, size_t bytes)
{
	x->scratch += bytes;
	if (x->scratch > x->scratch_peak)
		x->scratch_peak = x->scratch;
	return p;
}

void *exec_scratch(struct exec *x, size_t bytes)
{
	void *p = xcalloc(bytes ? bytes : 1, 1);
	if (!p) {
		tensor_oom(x, bytes);
		return NULL;
	}
	return count_scratch(x, p, bytes);
}

void *exec_scratch_raw(struct exec *x, size_t bytes)
{
	void *p = xmalloc(bytes ? bytes : 1);
	if (!p) {
		tensor_oom(x, bytes);
		return NULL;
	}
	return count_scratch(x, p, bytes);
}

void exec_scratch_free(struct exec *x, void *p, size_t bytes)
{
	if (p) {
		xfree(p);
		x->scratch -= bytes;
	}
}

void *exec_dev_scratch(struct exec *x, size_t bytes)
{
	const struct backend *b = exec_backend(x);
	void *p = b->alloc(bytes ? bytes : 1);
	if (!p) {
		exec_fail(x, "out of %s memory (%zu bytes of workspace)", b->name, bytes);
		return NULL;
	}
	return count_scratch(x, p, bytes);
}

void exec_dev_scratch_free(struct exec *x, void *p, size_t bytes)
{
	if (p) {
		exec_backend(x)->free(p);
		x->scratch -= bytes;
	}
}

void *exec_alloc_temp(struct exec *x, struct rtensor *t, int dtype, int ndim, const int64_t *dims)
{
	if (exec_shape(x, t, dtype, ndim, dims) || !x->compute || (x->o->shapes_only && t->numel > FOLD_MAX))
		return NULL;
	t->data = exec_scratch(x, t->nbytes);
	return t->data;
}

void exec_free_temp(struct exec *x, struct rtensor *t)
{
	exec_scratch_free(x, t->data, t->nbytes);
	t->data = NULL;
}

const char *rt_shape_str(const struct rtensor *t, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < t->ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? ", " : "", t->dims[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

double rt_get(const struct rtensor *t, int64_t i)
{
	const uint8_t *p = t->data;
	switch (t->dtype) {
	case DT_FLOAT: return ((const float *)p)[i];
	case DT_DOUBLE: return ((const double *)p)[i];
	case DT_INT64: return (double)((const int64_t *)p)[i];
	case DT_INT32: return ((const int32_t *)p)[i];
	case DT_INT16: return ((const int16_t *)p)[i];
	case DT_INT8: return ((const int8_t *)p)[i];
	case DT_UINT8: case DT_BOOL: return p[i];
	case DT_UINT16: return ((const uint16_t *)p)[i];
	case DT_UINT32: return ((const uint32_t *)p)[i];
	case DT_UINT64: return (double)((const uint64_t *)p)[i];
	case DT_FLOAT16: return f32_from_f16(((const uint16_t *)p)[i]);
	case DT_BFLOAT16: return f32_from_bf16(((const uint16_t *)p)[i]);
	default: return 0;
	}
}

/* v truncated toward zero and saturated to [lo, hi], NaN 0: rt_set's rule. */
static int64_t sat_i(double v, int64_t lo, int64_t hi)
{
	if (v != v)
		return 0;
	/* the bounds as doubles: exact up to 2^53, and INT64_MAX's rounds up to 2^63, which no int64
	 * reaches, so v at or past it saturates */
	if (v >= (double)hi)
		return hi;
	if (v <= (double)lo)
		return lo;
	return (int64_t)v;
}

int64_t rt_get_i(const struct rtensor *t, int64_t i)
{
	switch (t->dtype) {
	case DT_INT64: return ((const int64_t *)t->data)[i];
	case DT_UINT64: return (int64_t)((const uint64_t *)t->data)[i];
	default: return sat_i(rt_get(t, i), INT64_MIN, INT64_MAX);
	}
}

static uint64_t sat_u64(double v)
{
	return v != v || v <= 0 ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}

void rt_set(struct rtensor *t, int64_t i, double v)
{
	uint8_t *p = t->data;
	switch (t->dtype) {
	case DT_FLOAT: ((float *)p)[i] = (float)v; break;
	case DT_DOUBLE: ((double *)p)[i] = v; break;
	case DT_INT64: ((int64_t *)p)[i] = sat_i(v, INT64_MIN, INT64_MAX); break;
	case DT_INT32: ((int32_t *)p)[i] = (int32_t)sat_i(v, INT32_MIN, INT32_MAX); break;
	case DT_INT16: ((int16_t *)p)[i] = (int16_t)sat_i(v, INT16_MIN, INT16_MAX); break;
	case DT_INT8: ((int8_t *)p)[i] = (int8_t)sat_i(v, INT8_MIN, INT8_MAX); break;
	case DT_UINT8: p[i] = (uint8_t)sat_i(v, 0, UINT8_MAX); break;
	case DT_BOOL: p[i] = v != 0; break;
	case DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)sat_i(v, 0, UINT16_MAX); break;
	case DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)sat_i(v, 0, UINT32_MAX); break;
	case DT_UINT64: ((uint64_t *)p)[i] = sat_u64(v); break;
	case DT_FLOAT16: ((uint16_t *)p)[i] = f16_from_f32((float)v); break;
	case DT_BFLOAT16: ((uint16_t *)p)[i] = bf16_from_f32((float)v); break;
	default: break;
	}
}

void rt_set_i(struct rtensor *t, int64_t i, int64_t v)
{
	switch (t->dtype) {
	case DT_INT64: case DT_UINT64: ((int64_t *)t->data)[i] = v; break; /* exact beyond 2^53 */
	case DT_INT32: case DT_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
	case DT_INT16: case DT_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
	case DT_INT8: case DT_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
	case DT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
	default: rt_set(t, i, (double)v); break;
	}
}

int rt_ints(struct exec *x, const struct rtensor *t, const char *what, int64_t *out, int max, int *n)
{
	if (!t->data)
		return exec_fail(x, "%s must be known before running (a constant or computed from shapes)", what);
	if (t->ndim > 1 || t->numel > max)
		return exec_fail(x, "%s must be a 1-D tensor of at most %d values", what, max);
	if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
		return exec_fail(x, "%s must be int64, not %s", what, dtype_name(t->dtype));
	for (int64_t i = 0; i < t->numel; i++)
		out[i] = rt_get_i(t, i);
	*n = (int)t->numel;
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The caller's data for v, or NULL (an initializer's overrides its own: a state's next value). */
static const struct rtensor *given(const struct exec *x, const struct value *v)
{
	return strmap_get(&x->given, v->name);
}

static int bound_by_dim(const struct exec *x, const char *sym)
{
	for (size_t k = 0; k < x->o->n_dims; k++)
		if (!strcmp(x->o->dims[k].name, sym))
			return 1;
	return 0;
}

/* "graph input 'x': symbolic dimension 'batch' is not bound; use --dim batch=N", naming every
 * symbol of the graph's inputs that is unbound (v's sym first), so one try tells them all. */
static int unbound(struct exec *x, const struct value *v, const char *sym)
{
	const char *said[16] = {sym};
	int n = 1;
	for (uint32_t i = 0; i < x->g->n_inputs; i++) {
		const struct ttype *t = &x->g->inputs[i]->type;
		for (uint32_t k = 0; t->has_shape && k < t->ndim && n < 16; k++) {
			const char *s = t->dims[k].kind == DIM_PARAM ? t->dims[k].param : NULL;
			int j = 0;
			while (s && j < n && strcmp(said[j], s))
				j++;
			if (s && j == n && !bound_by_dim(x, s) && !given(x, x->g->inputs[i]))
				said[n++] = s;
		}
	}
	char names[512] = "", use[512] = "";
	size_t a = 0, b = 0;
	for (int j = 0; j < n; j++) {
		if (a < sizeof names)
			a += (size_t)snprintf(names + a, sizeof names - a, "%s'%s'", j ? ", " : "", said[j]);
		if (b < sizeof use)
			b += (size_t)snprintf(use + b, sizeof use - b, "%s--dim %s=N", j ? " " : "", said[j]);
	}
	return err_set(x->e, GD_EINPUT, "graph input '%s': symbolic dimension%s %s %s not bound; use %s", v->name,
		       n > 1 ? "s" : "", names, n > 1 ? "are" : "is", use);
}

/* A graph input's shape: its declared dims, symbolic ones bound by --dim or given stand-ins. */
static int input_shape(struct exec *x, const struct value *v, int64_t *dims, int *ndim)
{
	const struct ttype *t = &v->type;
	if (!t->has_shape)
		return err_set(x->e, GD_EINPUT, "graph input '%s' has no shape; give its data", v->name);
	*ndim = (int)t->ndim;
	if (t->ndim > RT_MAX_DIMS)
		return err_set(x->e, GD_EINPUT, "graph input '%s' has rank %u (at most %d)", v->name, t->ndim, RT_MAX_DIMS);
	for (uint32_t i = 0; i < t->ndim; i++) {
		const struct dim *d = &t->dims[i];
		if (d->kind == DIM_VALUE) {
			dims[i] = d->value;
			continue;
		}
		const char *sym = d->kind == DIM_PARAM ? d->param : NULL;
		int bound = 0;
		for (size_t k = 0; sym && k < x->o->n_dims; k++)
			if (!strcmp(x->o->dims[k].name, sym)) {
				dims[i] = x->o->dims[k].value;
				bound = 1;
			}
		if (bound)
			continue;
		if (x->o->default_dim > 0 && !x->o->probe_unbound) {
			dims[i] = x->o->default_dim;
			continue;
		}
		if (!x->o->probe_unbound && sym)
			return unbound(x, v, sym);
		if (!x->o->probe_unbound)
			return err_set(x->e, GD_EINPUT, "graph input '%s': dimension %u is unknown; give the input's data",
				       v->name, i);
		/* distinct stand-ins, far from 1 and from each other, so broadcasting stays visible */
		int64_t probe = sym ? (int64_t)(intptr_t)strmap_get(&x->probes, sym) : 0;
		if (!probe) {
			static const int64_t primes[] = {10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079};
			static const int64_t more[] = {20011, 20021, 20023, 20029, 20047, 20051, 20063, 20071};
			int64_t k = x->next_probe++;
			probe = k < 8 ? primes[k] : k < 16 ? more[k - 8] : 30011 + 2 * k; /* (beyond 16: odd, distinct) */
			if (k < 64) {
				x->probe_values[k] = probe;
				x->probe_syms[k] = sym;
			}
			if (sym && strmap_put(&x->probes, sym, (void *)(intptr_t)probe))
				return err_oom(x->e);
		}
		dims[i] = probe;
	}
	return 0;
}



/* The size of a known dimension of v: an initializer's, a static one its type declares, or one
 * a shapes-only run of the graph infers (made once, when first needed); 0 when unknown. */
static int64_t known_dim(struct exec *x, const struct value *v, int64_t axis)
{
	if (v->init && axis >= 0 && (uint32_t)axis < v->init->ndim)
		return v->init->dims[axis];
	if (v->type.has_shape && axis >= 0 && (uint32_t)axis < v->type.ndim && v->type.dims[axis].kind == DIM_VALUE)
		return v->type.dims[axis].value;
	if (!x->shapes_tried) {
		struct gd_err e = {0};
		x->shapes_tried = 1;
		x->shapes_opts = (struct exec_opts){.shapes_only = 1, .dims = x->o->dims, .n_dims = x->o->n_dims,
						    .default_dim = x->o->default_dim, .probe_unbound = x->o->probe_unbound};
		x->shapes = exec_run(x->g, &x->shapes_opts, NULL, &e); /* NULL when it cannot: no range then */
	}
	const struct rtensor *t = x->shapes && v->id < x->shapes->nv ? exec_value(x->shapes, v) : NULL;
	return t && t->known && axis >= 0 && axis < t->ndim ? t->dims[axis] : 0;
}

/* How many values an integer input's uses allow, for random data: the rows of the table a Gather
 * indexes (an embedding's vocabulary), the classes of a loss's scores; through ops that only
 * reshape it. 0: no use says (random data is then 0 or 1). */
static int64_t int_range(struct exec *x, const struct value *v, int depth)
{
	const struct graph *g = x->g;
	int64_t range = 0;
	for (uint32_t i = 0; i < g->n_nodes && depth < 4; i++) {
		const struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_in; k++) {
			if (n->in[k] != v)
				continue;
			int64_t r = 0;
			if (n->op == OP_GATHER && k == 1 && n->in[0]) {
				int64_t axis = attr_int(n, "axis", 0), rank = n->in[0]->init ? (int64_t)n->in[0]->init->ndim
											   : (int64_t)n->in[0]->type.ndim;
				r = known_dim(x, n->in[0], axis < 0 ? axis + rank : axis);
			} else if ((n->op == OP_SOFTMAX_CE_LOSS || n->op == OP_NLL_LOSS) && k == 1 && n->in[0]) {
				r = known_dim(x, n->in[0], 1);
			} else if ((n->op == OP_RESHAPE || n->op == OP_FLATTEN || n->op == OP_SQUEEZE || n->op == OP_UNSQUEEZE) &&
				   k == 0 && n->out[0]) {
				r = int_range(x, n->out[0], depth + 1);
			}
			if (r > 0 && (!range || r < range))
				range = r;
		}
	}
	return range;
}

static int bind_input(struct exec *x, const struct value *v, struct rtensor *t)
{
	const struct rtensor *in = given(x, v);
	struct rtensor part;
	int batch = !v->init && in && in->ndim > 0; /* a batch input */
	if (batch && sharded(x)) { /* this replica's slice of axis 0: a view */
		int size = x->o->comm->size;
		if (in->dims[0] % size)
			return err_set(x->e, GD_EINPUT, "input '%s': its %" PRId64 " rows cannot be shared evenly by %d replicas",
				       v->name, in->dims[0], size);
		part = *in;
		part.dims[0] /= size;
		part.numel /= size;
		part.nbytes /= (size_t)size;
		part.data = (char *)in->data + (size_t)x->o->comm->rank * part.nbytes;
		in = &part;
	}
	if (in) {
		const struct tensor *it = v->init;
		int same = !it || (in->dtype == it->dtype && (uint32_t)in->ndim == it->ndim);
		for (uint32_t i = 0; it && same && i < it->ndim; i++)
			same = in->dims[i] == it->dims[i];
		if (!same)
			return err_set(x->e, GD_EINPUT, "data for initializer '%s' must have its dtype and shape",
				       v->name);
		if (v->type.has_dtype && in->dtype != v->type.dtype)
			return err_set(x->e, GD_EINPUT, "input '%s' is %s, but the graph declares %s", v->name,
				       dtype_name(in->dtype), dtype_name(v->type.dtype));
		if (v->type.has_shape) {
			int ok = (uint32_t)in->ndim == v->type.ndim;
			for (int i = 0; ok && i < in->ndim; i++)
				ok = v->type.dims[i].kind != DIM_VALUE || v->type.dims[i].value == in->dims[i];
			if (!ok) {
				char want[256], got[256];
				size_t k = (size_t)snprintf(got, sizeof got, "[");
				for (int i = 0; i < in->ndim && k < sizeof got; i++)
					k += (size_t)snprintf(got + k, sizeof got - k, "%s%" PRId64, i ? ", " : "", in->dims[i]);
				if (k < sizeof got)
					snprintf(got + k, sizeof got - k, "]");
				return err_set(x->e, GD_EINPUT, "input '%s' has shape %s, but the graph's %s is %s%s", v->name,
					       got, x->o->comm ? "replica's slice" : "input", ttype_shape_str(&v->type, want, sizeof want),
					       x->o->comm ? " (a graph built with train --replicas N takes one replica's batch; "
							    "--shard-inputs and --replicas give each replica its slice of the whole)"
							  : "");
			}
		}
		*t = *in;
		t->owned = 0;
		t->known = 1;
		t->dev = NULL;
		account(x, t->nbytes, 0);
		return 0;
	}
	int64_t dims[RT_MAX_DIMS];
	int ndim = 0;
	if (input_shape(x, v, dims, &ndim))
		return x->e->code;
	if (!v->type.has_dtype)
		return err_set(x->e, GD_EINPUT, "graph input '%s' has no dtype", v->name);
	if (!v->init && ndim > 0 && x->o->batch_times > 1) {
		if (dims[0] > INT64_MAX / x->o->batch_times)
			return err_set(x->e, GD_EINPUT, "graph input '%s': the whole batch is too large", v->name);
		dims[0] *= x->o->batch_times;
	}
	x->compute = x->o->random_inputs;
	void *p = exec_alloc(x, t, v->type.dtype, ndim, dims);
	if (x->e->code) {
		err_prefix(x->e, "graph input '%s'", v->name);
		return x->e->code;
	}
	if (!p && !x->o->shapes_only && !x->o->random_inputs)
		return err_set(x->e, GD_EINPUT, "no data for graph input '%s'; give --input %s=FILE.npy or --random-inputs",
			       v->name, v->name);
	/* random inputs: floats are standard normal; integers (labels, token ids) uniform over the range
	 * their use allows (int_range: a vocabulary, the classes), else 0 or 1; bools 0/1 */
	int64_t range = dtype_is_float(t->dtype) || !p ? 0 : int_range(x, v, 0);
	uint64_t key = x->o->seed * 1000003u + strmap_hash(v->name);
	uint64_t off = !v->init && ndim > 0 ? exec_shard_offset(x, t->numel) : 0;
	for (int64_t i = 0; p && i < t->numel; i++) {
		if (dtype_is_float(t->dtype))
			rt_set(t, i, philox_normal(key, off + (uint64_t)i));
		else if (range > 2)
			rt_set(t, i, (double)((int64_t)(philox_uniform(key, off + (uint64_t)i) * (double)range) % range));
		else
			rt_set(t, i, philox_uniform(key, off + (uint64_t)i) < 0.5f ? 0 : 1);
	}
	return 0;
}

static int bind_bytes(struct exec *x, const struct value *v, struct rtensor *t);

static int bind_init(struct exec *x, const struct value *v, struct rtensor *t)
{
	const struct tensor *s = v->init;
	if ((int)s->ndim > RT_MAX_DIMS)
		return err_set(x->e, GD_EINPUT, "initializer '%s' has rank %u (at most %d)", v->name, s->ndim, RT_MAX_DIMS);
	if (exec_shape(x, t, s->dtype, (int)s->ndim, s->dims))
		return x->e->code;
	if (x->o->shapes_only) {
		/* shape inference needs no weights: bytes are bound for folding or shape arguments */
		x->lazy[v->id] = t->numel <= FOLD_MAX;
		return 0;
	}
	return bind_bytes(x, v, t);
}

static int bind_bytes(struct exec *x, const struct value *v, struct rtensor *t)
{
	const struct tensor *s = v->init;
	struct bytes b;
	if (tensor_bytes(x->g, s, &b, x->e))
		return x->e->code;
	if (b.n != t->nbytes)
		return err_set(x->e, GD_EINPUT, "initializer '%s' has %zu bytes, not %zu", v->name, b.n, t->nbytes);
	size_t es = dtype_size(t->dtype);
	if (((uintptr_t)b.p % es) == 0) {
		t->data = (void *)b.p; /* aligned: borrow the file's bytes */
		account(x, t->nbytes, 0);
	} else { /* unaligned in the file: kernels need aligned elements */
		t->data = xmalloc(t->nbytes ? t->nbytes : 1);
		if (!t->data)
			return err_oom(x->e);
		memcpy(t->data, b.p, t->nbytes);
		t->owned = 1;
		account(x, t->nbytes, 0);
	}
	return 0;
}

/* ---- a device backend's residency (exec/backend.h) ----
 *
 * Every tensor of a run on a device backend is in device memory (dev) from the node that makes it
 * to its last use, so the device's live bytes are the memory model's. data is then a host copy or
 * NULL: initializers and the caller's inputs keep their borrowed bytes, small integer tensors
 * (shapes, axes, a few indices) keep theirs for the CPU's shape rules, and the inputs of a node
 * that runs on the CPU get one for that node only. Tensors never change once made, so no copy goes
 * stale. */

static int host_kept(const struct rtensor *t)
{
	return !dtype_is_float(t->dtype) && t->numel <= FOLD_MAX;
}

static int to_device(struct exec *x, struct rtensor *t)
{
	if (t->dev || !t->data)
		return 0;
	if (!(t->dev = x->be->alloc(t->nbytes ? t->nbytes : 1)))
		return exec_fail(x, "out of %s memory (%zu bytes)", x->be->name, t->nbytes);
	account_dev(x, t->nbytes, 0);
	if (t->nbytes && x->be->copy(t->dev, t->data, t->nbytes, BACKEND_TO_DEVICE))
		return exec_fail(x, "copying %zu bytes to the %s device failed", t->nbytes, x->be->name);
	x->copies++;
	x->copy_bytes += t->nbytes;
	if (t->owned && !host_kept(t)) {
		xfree(t->data);
		t->data = NULL;
		t->owned = 0;
	}
	return 0;
}

static int to_host(struct exec *x, struct rtensor *t)
{
	if (t->data || !t->dev)
		return 0;
	if (!(t->data = xmalloc(t->nbytes ? t->nbytes : 1)))
		return err_oom(x->e);
	t->owned = 1;
	if (t->nbytes && x->be->copy(t->data, t->dev, t->nbytes, BACKEND_TO_HOST))
		return exec_fail(x, "copying %zu bytes from the %s device failed", t->nbytes, x->be->name);
	x->copies++;
	x->copy_bytes += t->nbytes;
	return 0;
}

static void drop_host(struct rtensor *t)
{
	if (t->dev && t->owned && !host_kept(t)) {
		xfree(t->data);
		t->data = NULL;
		t->owned = 0;
	}
}

/* A node the device backend computes: the CPU's shape rule sizes its outputs, which are then
 * allocated in device memory, and the backend's kernel fills them. */
static int run_device(struct exec *x, const struct node *n, struct rtensor **in, struct rtensor **out)
{
	for (uint32_t k = 0; k < n->n_in; k++)
		if (in[k] && ((host_kept(in[k]) && to_host(x, in[k])) || to_device(x, in[k])))
			return x->e->code;
	x->compute = 0;
	if (backend_cpu.run_node(x, n, in, out))
		return x->e->code;
	if (n->n_out && out[0]->dev && (op_table[n->op].flags & OPF_VIEW))
		return 0; /* the view took its input's buffer (exec_take) */
	/* a scatter updates its dying data in place, and a Gemm adds to its dying C in place, as on the
	 * CPU (16-bit floats aside, which the CPU widens), so the memory model holds here too */
	uint32_t fl = op_table[n->op].flags;
	int t = fl & (OPF_INPLACE | OPF_ADDS_TO) ? op_taken_input(fl, n->n_in) : -1;
	int inplace = t >= 0 && n->n_out && out[0]->known && in[t] && dies_here(x, n, in[t]) && in[t]->dev &&
		      in[t]->dtype == out[0]->dtype && in[t]->nbytes == out[0]->nbytes &&
		      !dtype_is_half(in[t]->dtype);
	/* an elementwise node writes over a dying input of its dtype and size (reused_input) */
	int r = !inplace && n->n_out && out[0]->known ? reused_input(x, n, out[0]) : -1;
	if (r >= 0 && in[r]->dev) {
		t = r;
		inplace = 1;
	}
	if (inplace) {
		if (in[t]->owned)
			xfree(in[t]->data); /* a host copy */
		out[0]->dev = in[t]->dev;
		in[t]->data = in[t]->dev = NULL;
		in[t]->owned = 0;
	}
	/* device views of the inputs and outputs */
	struct rtensor *vin = xcalloc(n->n_in + n->n_out + 1, sizeof *vin), *vout = vin + n->n_in;
	struct rtensor **pi = xcalloc(n->n_in + n->n_out + 1, sizeof *pi), **po = pi + n->n_in;
	if (!vin || !pi) {
		xfree(vin);
		xfree(pi);
		return exec_fail(x, "out of memory");
	}
	int rc = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		pi[k] = in[k] ? &vin[k] : NULL;
		if (in[k]) {
			vin[k] = *in[k];
			vin[k].data = !inplace || in[k] != in[t] ? in[k]->dev : out[0]->dev;
		}
	}
	for (uint32_t k = 0; k < n->n_out; k++) {
		struct rtensor *o = out[k];
		po[k] = o;
		if (!o->known)
			continue;
		if (!k && inplace) {
			vout[0] = *o;
			vout[0].data = o->dev;
			po[0] = &vout[0];
			continue;
		}
		if (!(o->dev = x->be->alloc(o->nbytes ? o->nbytes : 1))) {
			rc = exec_fail(x, "out of %s memory (%zu bytes for output %u)", x->be->name, o->nbytes, k);
			break;
		}
		account(x, o->nbytes, 0);
		account_dev(x, o->nbytes, 0);
		vout[k] = *o;
		vout[k].data = o->dev;
		po[k] = &vout[k];
	}
	if (!rc)
		rc = x->be->run_node(x, n, pi, po);
	xfree(vin);
	xfree(pi);
	return rc;
}

/* Shape arithmetic (Shape, Constant, nodes of small integer tensors: a Gather of dims, their
 * Concat) runs on the host whatever the backend: the CPU's shape rules read those tensors. */
static int shape_work(const struct node *n, struct rtensor *const *in)
{
	int small = 1;
	for (uint32_t k = 0; k < n->n_in; k++)
		small &= !in[k] || host_kept(in[k]);
	return small || (op_table[n->op].flags & OPF_META);
}

/* A node on the host under a device backend: shape arithmetic, or an op the backend has no kernel
 * for (said once per op and process). It runs on host copies of its inputs, and its outputs go to
 * the device. */
static int run_fallback(struct exec *x, const struct node *n, struct rtensor **in, struct rtensor **out, int shape)
{
	static atomic_uchar said[OP_COUNT + 1];
	char d[300];
	if (!shape && !atomic_exchange(&said[n->op], 1))
		fprintf(stderr, "graphdiet: note: %s has no kernel for %s (%s): it runs on the CPU, its inputs copied to the host and its outputs back\n",
			x->be->name, n->op_type, node_desc(n, d, sizeof d));
	x->host_nodes += !shape;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (in[k] && to_host(x, in[k]))
			return x->e->code;
	x->compute = 1;
	int rc = backend_cpu.run_node(x, n, in, out);
	for (uint32_t k = 0; k < n->n_in; k++)
		if (in[k])
			drop_host(in[k]);
	for (uint32_t k = 0; k < n->n_out && !rc; k++)
		rc = to_device(x, out[k]);
	return rc ? x->e->code : 0;
}

int exec_run_cpu_into(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct rtensor *w = xcalloc(n->n_out + 1, sizeof *w), **wo = xcalloc(n->n_out + 1, sizeof *wo);
	if (!w || !wo) {
		xfree(w);
		xfree(wo);
		return exec_fail(x, "out of memory");
	}
	for (uint32_t k = 0; k < n->n_out; k++)
		wo[k] = &w[k];
	x->compute = 1;
	x->outputs_scratch = 1;
	int rc = backend_cpu.run_node(x, n, in, wo);
	x->outputs_scratch = 0;
	for (uint32_t k = 0; k < n->n_out; k++) {
		if (!rc && w[k].data && out[k]->known && w[k].nbytes == out[k]->nbytes)
			memcpy(out[k]->data, w[k].data, w[k].nbytes);
		else if (!rc && out[k]->known)
			rc = exec_fail(x, "output %u's shape differs from its shape rule's", k);
		exec_scratch_free(x, w[k].data, w[k].nbytes);
	}
	xfree(w);
	xfree(wo);
	return rc ? x->e->code : 0;
}

static int has_kernel(const struct node *n)
{
	const struct op_impl *impl = op_table[n->op].impl;
	return impl && impl->run;
}

/* Refuses a graph with ops the executor has no kernel for, naming every such op once (by type),
 * with its node count and first node, in one message at the first: a user learns all that is
 * missing at once. One pass and a map, so a file of a million unknown nodes costs no more. */
static int refuse_unsupported(struct exec *x)
{
	struct graph *g = x->g;
	struct missing {
		const struct node *first;
		uint32_t count;
	} *ms = NULL;
	size_t kinds = 0, cap = 0;
	struct strmap seen;
	strmap_init(&seen);
	int oom = 0;
	for (uint32_t i = 0; i < g->n_nodes && !oom; i++) {
		const struct node *n = g->nodes[i];
		if (has_kernel(n))
			continue;
		uintptr_t k = (uintptr_t)strmap_get(&seen, n->op_type);
		if (k) {
			ms[k - 1].count++;
			continue;
		}
		if (kinds == cap) {
			struct missing *grown = xrealloc(ms, (cap = cap ? 2 * cap : 8) * sizeof *ms);
			if (!grown) {
				oom = 1;
				break;
			}
			ms = grown;
		}
		ms[kinds++] = (struct missing){n, 1};
		oom = strmap_put(&seen, n->op_type, (void *)(uintptr_t)kinds) != 0;
	}
	strmap_free(&seen);
	if (oom) {
		xfree(ms);
		return err_oom(x->e);
	}
	if (!kinds)
		return 0;
	char list[1024] = "", d[300];
	size_t len = 0;
	for (size_t k = 0; k < kinds && len < sizeof list - 1; k++) {
		const struct node *n = ms[k].first;
		len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s%s (%" PRIu32 " node%s, first %s)",
					k ? ", " : "", op_domain_is_default(n->domain) ? "" : n->domain,
					op_domain_is_default(n->domain) ? "" : "::", n->op_type, ms[k].count,
					ms[k].count == 1 ? "" : "s", node_desc(n, d, sizeof d));
	}
	x->cur = ms[0].first;
	xfree(ms);
	return exec_fail(x, "%zu op%s %s not supported by graphdiet's executor: %s ('graphdiet ops' lists what is)",
			 kinds, kinds == 1 ? "" : "s", kinds == 1 ? "is" : "are", list);
}

/* An empty name ("") where an ONNX op requires an input (below its minimum arity, or anywhere in a
 * variadic op's) is the graph's mistake: said at that node. Optional inputs each kernel handles, as
 * do graphdiet's own ops (DietAdam leaves slots empty by design). */
static int refuse_empty_inputs(struct exec *x)
{
	for (uint32_t i = 0; i < x->g->n_nodes; i++) {
		const struct node *n = x->g->nodes[i];
		const struct op_info *o = &op_table[n->op];
		/* graphdiet's own ops check their inputs themselves, as control flow does (Loop's M and
		 * cond, Scan-8's sequence_lens are optional, in variadic lists) */
		if (!op_domain_is_default(o->domain) || (o->flags & OPF_SUBGRAPH))
			continue;
		for (uint32_t k = 0; k < n->n_in && ((int)k < o->min_in || o->max_in < 0); k++) /* variadic: all */
			if (!n->in[k]) {
				x->cur = n;
				return exec_fail(x, "input %u is required, but its name is empty", k);
			}
	}
	return 0;
}

/* Transposes folded into the products. A Transpose that a MatMul or a Gemm reads (as A or B), or a
 * Conv (as X or W), is made a view of its input's bytes, which the products read with BLAS's
 * transposition flags, leading dimensions and batch strides instead of a transposed copy, and a
 * Conv on the direct kernel reads where it exchanges the first two axes (a weight gradient's X^T
 * and dY^T: conv.c); any other reader, or a Conv that cannot, is given a transposed copy as
 * workspace for its step. Its bytes are counted, from its step to its last reader's, as the
 * memory model counts every value, so the measured peak is the planned one; they are just not
 * written. When the input's bytes are to be freed or taken over (in place) while a view of them
 * lives, the view gets a copy of them first, in the same layout. So a product reads the same bytes
 * the same way whatever the schedule (recomputation gives the same bits), and which Transposes are
 * folded depends on the graph's structure alone. On the CPU, outside shape inference, and not for
 * kept values (outputs). */
static int reads_views(const struct node *n, uint32_t k)
{
	return n->op == OP_MATMUL || ((n->op == OP_GEMM || n->op == OP_CONV) && k < 2);
}

static void fold_transposes(struct exec *x)
{
	struct graph *g = x->g;
	if (x->be || x->o->shapes_only || x->o->keep_values || x->o->copy_transposes || !g->n_nodes)
		return;
	uint8_t *product = xcalloc(g->n_values, 1);
	x->fold = xcalloc(g->n_nodes, 1);
	x->vref = xcalloc(g->n_values, sizeof *x->vref);
	x->tcopies = xcalloc(x->max_in + 1, sizeof *x->tcopies);
	if (!product || !x->fold || !x->vref || !x->tcopies) {
		xfree(x->fold);
		xfree(x->vref);
		xfree(x->tcopies);
		x->fold = NULL;
		x->vref = NULL;
		x->tcopies = NULL;
	}
	for (uint32_t i = 0; x->fold && i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k] && reads_views(g->nodes[i], k))
				product[g->nodes[i]->in[k]->id] = 1;
	for (uint32_t i = 0; x->fold && i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		x->fold[i] = n->op == OP_TRANSPOSE && n->n_in == 1 && n->in[0] && n->n_out == 1 && n->out[0] &&
			     !x->pinned[n->out[0]->id] && product[n->out[0]->id];
	}
	xfree(product);
}

/* A Transpose that exchanges the first two axes and leaves the rest (perm [1, 0, 2, ...]). */
static int swaps01(const struct node *n)
{
	size_t np;
	const int64_t *p = attr_ints(n, "perm", &np);
	if (n->op != OP_TRANSPOSE || !p || np < 2 || p[0] != 1 || p[1] != 0)
		return 0;
	for (size_t i = 2; i < np; i++)
		if (p[i] != (int64_t)i)
			return 0;
	return 1;
}

/* exec_swap_ok's values: read once, by a swaps01 Transpose, and not kept. As fold_transposes, on
 * the CPU, outside shape inference, and not when values are kept or transposes copied (the
 * device parity test's bitwise run). */
static void find_swaps(struct exec *x)
{
	struct graph *g = x->g;
	if (x->be || x->o->shapes_only || x->o->keep_values || x->o->copy_transposes || !g->n_values)
		return;
	uint32_t *reads = xcalloc(g->n_values, sizeof *reads);
	x->swap_ok = xcalloc(g->n_values, 1);
	if (!reads || !x->swap_ok) {
		xfree(reads);
		xfree(x->swap_ok);
		x->swap_ok = NULL;
		return;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k])
				reads[g->nodes[i]->in[k]->id]++;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		uint32_t v = n->n_in && n->in[0] ? n->in[0]->id : 0;
		if (n->n_in == 1 && n->in[0] && swaps01(n) && reads[v] == 1 && !x->pinned[v])
			x->swap_ok[v] = 1;
	}
	xfree(reads);
}

int exec_swap_ok(const struct exec *x, const struct value *v)
{
	/* not into a float32 stand-in for a 16-bit output: narrowing copies it in order */
	return x->swap_ok && v && x->swap_ok[v->id] && !x->widening && !x->outputs_scratch;
}

/* n, a folded Transpose: its output t made a view of its input a (value src), if the products
 * can read it so (float32 or float64, rank 2 or more, the last two dimensions' strides a row-major
 * or a transposed matrix's). A view of a view (attention's K transposed again in the backward
 * pass) is one of the bytes both read, its strides the two permutations composed. 1: done; 0: the
 * kernel copies instead; -1: failed. */
#define VIEW_SPREAD 4

static int transpose_view(struct exec *x, const struct node *n, struct rtensor *a, uint32_t src, struct rtensor *t)
{
	int r = a->ndim;
	size_t np;
	const int64_t *p = attr_ints(n, "perm", &np);
	if (!a->data || a->swapped || (a->dtype != DT_FLOAT && a->dtype != DT_DOUBLE) || r < 2 || (p && (int)np != r))
		return 0;
	int64_t st[RT_MAX_DIMS], dims[RT_MAX_DIMS], vst[RT_MAX_DIMS];
	int seen[RT_MAX_DIMS] = {0};
	if (a->view) {
		rt_view_strides(a, st);
		src = a->owned ? src : a->vsrc; /* the bytes' owner: a, once it took them over, or its source */
	} else {
		c_strides(r, a->dims, st);
	}
	for (int i = 0; i < r; i++) {
		int64_t q = p ? p[i] : r - 1 - i;
		if (q < 0 || q >= r || seen[q]++)
			return 0;
		dims[i] = a->dims[q];
		vst[i] = st[q];
	}
	/* a matrix, row-major or transposed, whose rows lie at most VIEW_SPREAD rows' length apart: a
	 * product reads sparser ones (attention heads interleaved in a wide tensor) more slowly than
	 * the Transpose writes a dense copy */
	int64_t rows = dims[r - 2], cols = dims[r - 1];
	if (!(vst[r - 1] == 1 && vst[r - 2] >= cols && vst[r - 2] <= VIEW_SPREAD * cols) &&
	    !(vst[r - 2] == 1 && vst[r - 1] >= rows && vst[r - 1] <= VIEW_SPREAD * rows))
		return 0;
	for (int i = 0; i < r; i++)
		if (vst[i] > RT_VIEW_STRIDE_MAX)
			return 0;
	if (exec_shape(x, t, a->dtype, r, dims))
		return -1;
	t->data = a->data;
	t->owned = 0;
	t->view = 1;
	t->vsrc = src;
	for (int i = 0; i < RT_MAX_DIMS; i++)
		t->vst[i] = i < r ? (int32_t)vst[i] : 0;
	x->vref[src]++;
	account(x, t->nbytes, 0);
	return 1;
}

/* s's bytes are about to be freed (give: the first live view of them takes them over) or
 * overwritten: each live view of them takes a copy (its own bytes, already counted). On failure
 * (out of memory) the views have no data and the run fails. */
static int detach_views(struct exec *x, struct rtensor *s, int give)
{
	if (!x->vref || s < x->v || s >= x->v + x->nv || !x->vref[s - x->v] || !s->data)
		return 0;
	uint32_t id = (uint32_t)(s - x->v);
	int rc = 0;
	for (uint32_t i = 0; i < x->nv && x->vref[id]; i++) {
		struct rtensor *t = &x->v[i];
		if (!t->view || t->vsrc != id || t->owned)
			continue;
		x->vref[id]--;
		if (give && s->owned) {
			t->owned = 1;
			s->owned = 0; /* s's release frees nothing */
			give = 0;
			continue;
		}
		t->data = rc ? NULL : xmalloc(s->nbytes ? s->nbytes : 1);
		if (!t->data) {
			rc = rc ? rc : tensor_oom(x, s->nbytes);
			continue;
		}
		memcpy(t->data, s->data, s->nbytes);
		t->owned = 1;
	}
	return rc;
}

int exec_materialize(struct exec *x, const struct rtensor *v, struct rtensor *copy)
{
	memset(copy, 0, sizeof *copy);
	x->outputs_scratch = 1;
	void *o = exec_alloc(x, copy, v->dtype, v->ndim, v->dims);
	x->outputs_scratch = 0;
	if (!o)
		return exec_status(x);
	int64_t st[RT_MAX_DIMS];
	rt_view_strides(v, st);
	permuted_copy(v->data, v->ndim, v->dims, st, dtype_size(v->dtype), o);
	return 0;
}

/* ---- elementwise chains ----
 *
 * A run of consecutive nodes of elementwise float32 ops (chain_op) with one output shape, each
 * operand another's result, a scalar Constant among them (scalar_constant) or a tensor broadcast
 * along some axes, is computed in one pass when its first node comes (chain_run: a slice of every
 * step at a time, in cache), so the exported GELU's 5 nodes, its gradient's 11, or an Adam update
 * read and write memory once, not once per node. Each element is the same float arithmetic as the
 * nodes' own kernels: the same bits. The results that a later node or the caller reads are
 * written; the others, read only inside the chain, are ghosts: each node still makes its output at
 * its turn, as the memory model counts it (so the measured peak is the planned one), but a ghost's
 * bytes are never allocated. On the CPU, when computing, values not all kept (exec_opts.no_chains
 * turns it off). The chain's time goes to its first node in a profile. */

/* An operand t in the chain's shape (nd, d): element e reads its element (e / q) % r, when the
 * axes it does not broadcast are neighbours (a bias, a per-row scale, a whole tensor, a scalar),
 * that is when its walk over (nd, d) merges into at most one axis it steps along; 0 otherwise. */
static int chain_qr(const struct rtensor *t, int nd, const int64_t *d, int64_t *q, int64_t *r)
{
	int64_t st[RT_MAX_DIMS], D[RT_MAX_DIMS], S[RT_MAX_DIMS];
	bcast_strides(t, nd, d, st);
	int R = merge_axes(nd, d, st, D, S), kept = 0;
	*q = *r = 1;
	for (int k = 0; k < R; k++) {
		if (S[k] && (kept || S[k] != 1))
			return 0;
		if (S[k])
			*r = D[k], kept = 1;
		else if (kept)
			*q *= D[k];
	}
	return 1;
}

/* Node m, when it is a Constant of one float32 element (the exporter puts GELU's sqrt(2), 1 and
 * 0.5 between its nodes): its value in *f and t, a tensor of it (data f) to plan with. A chain
 * reads such a value from the attribute and goes on; the node itself runs at its turn. */
static int scalar_constant(struct exec *x, const struct node *m, float *f, struct rtensor *t)
{
	const struct attr *a;
	struct bytes b;
	if (m->op != OP_CONSTANT || m->n_out != 1 || !m->out[0])
		return 0;
	memset(t, 0, sizeof *t);
	if ((a = node_attr(m, "value_float")) && a->type == ATTR_FLOAT)
		*f = a->f;
	else if ((a = node_attr(m, "value")) && a->type == ATTR_TENSOR && a->t->dtype == DT_FLOAT &&
		 a->t->ndim <= RT_MAX_DIMS && !tensor_bytes(x->g, a->t, &b, NULL) && b.n == sizeof *f) {
		memcpy(f, b.p, sizeof *f);
		t->ndim = (int)a->t->ndim;
		for (int k = 0; k < t->ndim; k++)
			t->dims[k] = 1;
	} else
		return 0;
	t->dtype = DT_FLOAT;
	t->numel = 1;
	t->nbytes = sizeof *f;
	t->known = 1;
	t->data = f;
	return 1;
}

/* The buffer step s of a chain (at: its nodes) may write over: an input's from outside the chain
 * that the steps up to s read last, which the executor owns (as reused_input would give it, though
 * chain_output's accounting follows reused_input itself); NULL for none. The chain computes a
 * slice through every step before the next, so each element is read before it is written. */
static float *chain_over(struct exec *x, const uint32_t *at, int s, int64_t numel)
{
	const struct node *n = x->g->nodes[at[s]];
	for (uint32_t k = 0; numel > 1 && k < n->n_in; k++) {
		const struct value *v = n->in[k];
		struct rtensor *t = v ? &x->v[v->id] : NULL;
		if (!t || !t->known || !t->owned || !t->data || t->view || t->swapped || t->given || t->ghost ||
		    x->pinned[v->id] || (x->vref && x->vref[v->id]) || t->dtype != DT_FLOAT || t->numel != numel)
			continue;
		uint32_t reads = 0;
		for (int q = 0; q <= s; q++)
			for (uint32_t j = 0; j < x->g->nodes[at[q]]->n_in; j++)
				reads += x->g->nodes[at[q]]->in[j] == v;
		if (x->left[v->id] == reads)
			return t->data;
	}
	return NULL;
}

/* Node i, if a chain starts there: plans it, runs it and returns its length in steps (2 or more);
 * 0 when none does, -1 on failure. */
static int chain_start(struct exec *x, uint32_t i)
{
	struct graph *g = x->g;
	struct chain c = {0};
	uint32_t made[CHAIN_MAX], at[CHAIN_MAX]; /* each step's value and node */
	uint32_t kid[CHAIN_MAX];                 /* the scalar Constants read on the way: values, */
	float konst[CHAIN_MAX];                  /* their elements */
	struct rtensor kt[CHAIN_MAX];            /* and tensors of them */
	signed char step_of[CHAIN_SPAN];
	int nd = 0, n = 0, nk = 0;
	int64_t d[RT_MAX_DIMS];
	for (uint32_t j = i; j < g->n_nodes && n < CHAIN_MAX && j - i < CHAIN_SPAN; j++) {
		const struct node *m = g->nodes[j];
		if (n > 0 && nk < CHAIN_MAX && scalar_constant(x, m, &konst[nk], &kt[nk])) {
			kid[nk++] = m->out[0]->id;
			step_of[j - i] = -1;
			continue;
		}
		int ar = chain_op(m->op), ok = ar && m->n_in == (uint32_t)ar && m->n_out == 1 && m->out[0], od = 0;
		struct chain_arg arg[2];
		struct rtensor step = {.ndim = nd}, *ts[2]; /* a step's result: the chain's shape */
		int64_t dims[RT_MAX_DIMS];
		memcpy(step.dims, d, sizeof step.dims);
		for (int k = 0; ok && k < ar; k++) {
			const struct value *v = m->in[k];
			arg[k].step = -1;
			for (int s = 0; v && s < n; s++)
				arg[k].step = made[s] == v->id ? s : arg[k].step;
			ts[k] = arg[k].step >= 0 ? &step : NULL;
			for (int q = 0; v && !ts[k] && q < nk; q++)
				ts[k] = kid[q] == v->id ? &kt[q] : NULL;
			ts[k] = ts[k] ? ts[k] : v ? &x->v[v->id] : NULL;
			ok = arg[k].step >= 0 || (ts[k] && ts[k]->known && ts[k]->data && !ts[k]->view && !ts[k]->swapped &&
						   ts[k]->dtype == DT_FLOAT);
			arg[k].p = ok ? ts[k]->data : NULL;
		}
		ok = ok && !bcast_shape(NULL, ts, ar, &od, dims);
		if (ok && n == 0) {
			nd = od;
			memcpy(d, dims, sizeof dims);
		}
		ok = ok && od == nd && !memcmp(dims, d, (size_t)nd * sizeof *d);
		for (int k = 0; ok && k < ar; k++)
			ok = arg[k].step >= 0 || chain_qr(ts[k], nd, d, &arg[k].q, &arg[k].r);
		if (!ok)
			break;
		c.s[n] = (struct chain_step){m->op, arg[0], ar == 2 ? arg[1] : arg[0], NULL};
		step_of[j - i] = (signed char)n;
		at[n] = j;
		made[n++] = m->out[0]->id;
	}
	if (n < 2)
		return 0;
	int64_t numel = 1;
	for (int k = 0; k < nd; k++)
		numel *= d[k];
	size_t bytes = (size_t)numel * sizeof(float);
	int lent[CHAIN_MAX] = {0};
	for (int s = 0; s < n; s++) { /* written: what a node after the chain or the caller reads */
		uint32_t inside = 0;
		for (int t = s + 1; t < n; t++)
			for (uint32_t k = 0; k < g->nodes[at[t]]->n_in; k++)
				inside += g->nodes[at[t]]->in[k] && g->nodes[at[t]]->in[k]->id == made[s];
		c.s[s].out = NULL;
		if (!x->pinned[made[s]] && x->left[made[s]] <= inside)
			continue;
		c.s[s].out = chain_over(x, at, s, numel);
		lent[s] = c.s[s].out != NULL;
		if (!lent[s] && !(c.s[s].out = xmalloc(bytes ? bytes : 1))) {
			for (int t = 0; t < s; t++)
				if (!lent[t])
					xfree(c.s[t].out);
			return tensor_oom(x, bytes), -1;
		}
		x->chain_out[s] = c.s[s].out;
	}
	c.n = n;
	c.numel = numel;
	chain_run(&c);
	x->chain_nodes += (uint64_t)n;
	x->chain_first = i;
	x->chain_last = at[n - 1];
	memcpy(x->chain_step, step_of, at[n - 1] - i + 1);
	x->chain_nd = nd;
	memcpy(x->chain_dims, d, sizeof d);
	return n;
}

/* Node i's output t, a step of the chain under way: its shape, and its bytes or a ghost's count. */
static int chain_output(struct exec *x, uint32_t i, struct rtensor *t)
{
	int s = x->chain_step[i - x->chain_first];
	if (exec_shape(x, t, DT_FLOAT, x->chain_nd, x->chain_dims))
		return -1;
	int k = reused_input(x, x->cur, t);
	t->data = x->chain_out[s];
	t->owned = t->data != NULL;
	t->ghost = !t->data;
	x->chain_out[s] = NULL;
	for (uint32_t q = 0; t->data && q < x->cur->n_in; q++) { /* the buffer chain_over lent */
		struct rtensor *in = x->cur->in[q] ? &x->v[x->cur->in[q]->id] : NULL;
		if (in && in->data == t->data && in->owned)
			in->owned = 0;
	}
	if (k >= 0)
		x->v[x->cur->in[k]->id].given = 1; /* its bytes are t's */
	else
		account(x, t->nbytes, 0);
	return 0;
}

/* The progress meter's names for a run (util/progress.h): one object each, as it compares them. */
static const char meter_running[] = "running", meter_shapes[] = "inferring shapes";

/* ---- subgraphs (ops/control.c: If, Loop, Scan) ----
 *
 * A body runs as a run of its own, exec_run over the subgraph, whose graph inputs are the tensors
 * the node's kernel gives and whose references to enclosing values (value.outer) are bound to the
 * enclosing runs' tensors, borrowed. Those readers are no node inputs of the enclosing graph, so its
 * run keeps every value a subgraph reads for the whole run (pin_outer_reads): never freed, never
 * taken over in place, never a folded view. A body's outputs come back as copies in the enclosing
 * run's workspace, and the body's own tensors are freed with its run. */

/* Pins the values of x's graph that subgraph s, or one nested in it, reads. */
static void pin_outer_reads(struct exec *x, const struct graph *s)
{
	for (uint32_t i = 0; i < s->n_values; i++) {
		const struct value *o = s->values[i]->outer;
		if (o && o->id < x->g->n_values && x->g->values[o->id] == o)
			x->pinned[o->id] = 1;
	}
	for (uint32_t i = 0; i < s->n_nodes; i++)
		for (uint32_t k = 0; k < s->nodes[i]->n_attr; k++) {
			const struct attr *a = &s->nodes[i]->attr[k];
			if (a->type == ATTR_GRAPH && a->g)
				pin_outer_reads(x, a->g);
			for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
				pin_outer_reads(x, a->graphs[j]);
		}
}

/* The values of a subgraph's run that refer to enclosing ones: the enclosing runs' tensors. */
static int bind_outer(struct exec *x)
{
	for (uint32_t i = 0; i < x->g->n_values; i++) {
		const struct value *v = x->g->values[i], *o = v->outer;
		if (!o || v->producer || v->init || (v->flags & VALUE_INPUT))
			continue;
		struct exec *p = x->o->parent;
		while (p && !(o->id < p->nv && p->g->values[o->id] == o))
			p = p->o->parent;
		struct rtensor *t = p ? &p->v[o->id] : NULL;
		if (!t || !t->known)
			return err_set(x->e, GD_EINPUT, "'%s', a value of an enclosing graph, has not been computed", v->name);
		if (p->lazy && p->lazy[o->id]) { /* an initializer's bytes, not yet needed there */
			p->lazy[o->id] = 0;
			if (bind_bytes(p, o, t))
				return x->e->code;
		}
		if (p->be && t->dev && !t->data && to_host(p, t)) /* bodies run on the CPU: a host copy, kept */
			return x->e->code;
		x->v[v->id] = *t;
		x->v[v->id].owned = 0;
		x->v[v->id].dev = NULL;
		x->v[v->id].given = 0;
		x->pinned[v->id] = 1;
	}
	return 0;
}

int exec_shapes_only(const struct exec *x)
{
	return x->o->shapes_only;
}

int exec_subgraph(struct exec *x, struct graph *body, const struct rtensor *in, struct rtensor *out)
{
	const char **names = xcalloc(body->n_inputs + 1, sizeof *names);
	if (!names)
		return err_oom(x->e);
	for (uint32_t k = 0; k < body->n_inputs; k++)
		names[k] = body->inputs[k]->name;
	struct exec_opts so = {.shapes_only = x->o->shapes_only, .dims = x->o->dims, .n_dims = x->o->n_dims,
			       .probe_unbound = x->o->probe_unbound, .default_dim = x->o->default_dim,
			       .seed = x->o->seed, .step = x->o->step, .inputs = in, .input_names = names,
			       .n_inputs = body->n_inputs, .copy_transposes = x->o->copy_transposes,
			       .no_chains = x->o->no_chains, .parent = x};
	const struct node *cur = x->cur;
	struct exec_stats st = {0};
	struct exec *sx = exec_run(body, &so, &st, x->e);
	xfree(names);
	x->cur = cur;
	int rc = sx ? 0 : x->e->code;
	for (uint32_t k = 0; k < body->n_outputs; k++)
		memset(&out[k], 0, sizeof out[k]);
	for (uint32_t k = 0; !rc && k < body->n_outputs; k++) {
		const struct rtensor *t = exec_value(sx, body->outputs[k]);
		out[k].dtype = t->dtype;
		out[k].ndim = t->ndim;
		memcpy(out[k].dims, t->dims, sizeof t->dims);
		out[k].numel = t->numel;
		out[k].nbytes = t->nbytes;
		out[k].known = 1;
		if (t->data && !(out[k].data = exec_scratch_raw(x, t->nbytes)))
			rc = x->e->code;
		else if (t->data)
			memcpy(out[k].data, t->data, t->nbytes);
	}
	exec_free(sx);
	x->flops += st.flops;
	x->moved += st.bytes_moved;
	if (rc) {
		for (uint32_t k = 0; k < body->n_outputs; k++)
			exec_free_temp(x, &out[k]);
		char d[300];
		if (!sx)
			err_prefix(x->e, "%s: subgraph '%s'", node_desc(cur, d, sizeof d), body->name ? body->name : "");
	}
	return rc;
}

static int run_nodes(struct exec *x)
{
	struct graph *g = x->g;
	if (refuse_unsupported(x) || refuse_empty_inputs(x))
		return x->e->code;
	const char *what = x->o->shapes_only ? meter_shapes : meter_running;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		x->cur = n;
		if (!(i & 63))
			progress_step(what, i, g->n_nodes);
		struct rtensor **in = x->args, **out = x->args + x->max_in;
		int all_data = 1, any_lazy = 0;
		for (uint32_t k = 0; k < n->n_in; k++) {
			in[k] = n->in[k] ? &x->v[n->in[k]->id] : NULL;
			if (in[k] && !in[k]->known)
				return exec_fail(x, "input '%s' has not been computed", n->in[k]->name);
			any_lazy |= in[k] && x->lazy && x->lazy[n->in[k]->id];
			if (in[k] && !in[k]->data && !(x->lazy && x->lazy[n->in[k]->id]))
				all_data = 0;
		}
		/* initializers' bytes, where the node folds or the input is a shape argument (one that
		 * takes no gradient: shapes, axes, scales, indices) */
		for (uint32_t k = 0; any_lazy && k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (v && x->lazy[v->id] && (all_data || !op_input_differentiable(n, k))) {
				x->lazy[v->id] = 0;
				if (bind_bytes(x, v, in[k]))
					return x->e->code;
			}
			all_data &= !v || in[k]->data != NULL;
		}
		for (uint32_t k = 0; k < n->n_out; k++) {
			memset(&x->absent[k], 0, sizeof x->absent[k]);
			out[k] = n->out[k] ? &x->v[n->out[k]->id] : &x->absent[k];
		}
		uint32_t fl = op_table[n->op].flags;
		x->compute = !x->o->shapes_only || (fl & OPF_META) || (all_data && !(fl & OPF_RANDOM)) ||
			     op_self_compare(n);
		int comm = (op_table[n->op].flags & OPF_COMM) && x->o->comm; /* a collective: counted */
		double t0 = x->o->profile || comm ? now() : 0;
		int shape = x->be && shape_work(n, in), folded = x->fold && x->fold[i] && x->compute ?
									transpose_view(x, n, in[0], n->in[0]->id, out[0]) : 0;
		int in_chain = i >= x->chain_first && i <= x->chain_last,
		    chained = in_chain && x->chain_step[i - x->chain_first] >= 0;
		if (!in_chain && x->chains && x->compute && (chained = chain_start(x, i)) < 0)
			return x->e->code;
		if (chained && chain_output(x, i, out[0]))
			return x->e->code;
		int rc = 0;
		for (uint32_t k = 0; x->vref && !folded && k < n->n_in && !rc; k++)
			if (in[k] && in[k]->view && !reads_views(n, k)) {
				rc = exec_materialize(x, in[k], &x->tcopies[k]);
				in[k] = &x->tcopies[k];
			}
		rc = rc || folded < 0 ||
		     (!folded && !chained && (!x->be ? backend_cpu.run_node(x, n, in, out)
					 : !shape && x->be->supports_op(n, in) ? run_device(x, n, in, out)
										: run_fallback(x, n, in, out, shape)));
		for (uint32_t k = 0; x->vref && k < n->n_in; k++)
			if (in[k] == &x->tcopies[k]) {
				exec_scratch_free(x, x->tcopies[k].data, x->tcopies[k].nbytes);
				in[k] = &x->v[n->in[k]->id];
			}
		if (rc)
			return x->e->code;
		if (x->be && (x->o->profile || comm) && x->be->sync(x->e))
			return x->e->code;
		uint64_t f, b;
		op_cost(n, in, out, &f, &b);
		x->flops += f;
		if (x->o->node_flops)
			x->o->node_flops[i] = f;
		x->moved += b;
		if (comm) {
			x->comm_calls++;
			x->comm_seconds += now() - t0;
			for (uint32_t k = 0; k < n->n_in; k++)
				x->comm_bytes += in[k]->nbytes;
		}
		if (x->o->profile) {
			double dt = now() - t0;
			for (int k = 0; k < 8; k++)
				if (n->tags & (1u << k))
					x->o->profile->tag_seconds[k] += dt;
			x->o->profile->seconds[n->op] += dt;
			x->o->profile->calls[n->op]++;
			x->o->profile->flops[n->op] += f;
		}
		for (uint32_t k = 0; k < n->n_out; k++) {
			if (n->out[k] && !out[k]->known) /* an absent optional output need not be */
				return exec_fail(x, "output %u was not produced", k);
			if (!n->out[k] || (!x->pinned[n->out[k]->id] && x->left[n->out[k]->id] == 0))
				release(x, out[k]); /* nobody reads it */
		}
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (!v || x->left[v->id] == 0)
				continue;
			if (--x->left[v->id] == 0 && !x->pinned[v->id])
				release(x, &x->v[v->id]);
		}
		if (x->e->code) /* a view's copy that failed */
			return x->e->code;
	}
	x->cur = NULL;
	return 0;
}

/* The recorded assumptions (symdim.h) against the symbols' values: --dim's, and those the inputs'
 * bound shapes give their declared names. */
static int check_assumptions(struct exec *x)
{
	const struct graph *g = x->g;
	if (!g->model || !model_meta(g, SYMDIM_META_KEY))
		return 0;
	const char *names[64];
	int64_t values[64];
	size_t n = 0;
	for (size_t k = 0; k < x->o->n_dims && n < 64; k++, n++) {
		names[n] = x->o->dims[k].name;
		values[n] = x->o->dims[k].value;
	}
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct value *v = g->inputs[i];
		const struct rtensor *t = &x->v[v->id];
		for (uint32_t k = 0; t->known && v->type.has_shape && k < v->type.ndim && (int)k < t->ndim && n < 64; k++)
			if (v->type.dims[k].kind == DIM_PARAM && v->type.dims[k].param) {
				names[n] = v->type.dims[k].param;
				values[n++] = t->dims[k];
			}
	}
	return symdim_check(g, names, values, n, x->e);
}

int exec_check_bindings(struct graph *g, const struct exec_binding *b, size_t n, struct gd_err *e)
{
	const char *names[64];
	int64_t values[64];
	if (exec_record_assumptions(g))
		return err_oom(e);
	for (size_t k = 0; k < n && k < 64; k++) {
		names[k] = b[k].name;
		values[k] = b[k].value;
	}
	return symdim_check(g, names, values, n < 64 ? n : 64, e);
}

int exec_record_assumptions(struct graph *g)
{
	int sym = 0, slices = 0;
	for (uint32_t i = 0; i < g->n_inputs && !sym; i++)
		for (uint32_t k = 0; g->inputs[i]->type.has_shape && k < g->inputs[i]->type.ndim; k++)
			sym |= g->inputs[i]->type.dims[k].kind == DIM_PARAM;
	for (uint32_t i = 0; i < g->n_nodes && !slices; i++)
		slices = g->nodes[i]->op == OP_SLICE;
	if (!sym || !slices)
		return 0;
	struct gd_err e = {0};
	struct exec_opts o = {.shapes_only = 1, .probe_unbound = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	exec_free(x);
	return e.code == GD_EINTERNAL ? -1 : 0; /* (a graph shapes cannot be inferred for fails later) */
}

/* State a TrainingInfoProto's initialization graph makes (initialization_binding) that nothing
 * else gives: a key with no initializer (diet storage, read from a file), or one train described
 * (zeros) whose initialization is more than ConstantOfShape. The graph runs once, on the CPU, and
 * its outputs become those keys' initializers; shape inference (shapes_only) needs only their
 * types. */
static int run_initialization(struct exec *x, struct graph *g)
{
	for (size_t i = 0; g->model && !x->o->shapes_only && i < g->model->n_ti; i++) {
		const struct training_info *t = &g->model->ti[i];
		struct exec *ix = NULL;
		for (size_t k = 0; t->init && k < t->n_init_bind; k++) {
			struct value *key = strmap_get(&g->names, t->init_bind[k].key);
			const struct value *out = strmap_get(&t->init->names, t->init_bind[k].value);
			if (!key || !out || !out->producer || given(x, key) ||
			    (key->init && (key->init->src != TSRC_RANDOM || out->producer->op == OP_CONSTANT_OF_SHAPE)))
				continue;
			struct exec_opts io = {.seed = x->o->seed, .comm = x->o->comm}; /* (a replica's slice: shard.h) */
			if (!ix && !(ix = exec_run(t->init, &io, NULL, x->e)))
				return x->e->code;
			const struct rtensor *r = exec_value(ix, out);
			struct tensor *tt = arena_zalloc(g->arena, sizeof *tt);
			int64_t *dims = arena_memdup(g->arena, r->dims, sizeof r->dims);
			void *data = r->data ? arena_alloc(g->arena, r->nbytes + 1) : NULL;
			if (!tt || !dims || !data) {
				exec_free(ix);
				return r->data ? err_oom(x->e) : err_set(x->e, GD_EINPUT, "initialization: '%s' was not made", out->name);
			}
			memcpy(data, r->data, r->nbytes);
			*tt = (struct tensor){.name = key->name, .dtype = r->dtype, .ndim = (uint32_t)r->ndim, .dims = dims,
					      .src = TSRC_BYTES, .field = TFIELD_RAW, .bytes = {data, r->nbytes}};
			if (key->init) {
				*key->init = *tt;
			} else if (graph_add_init(g, key, tt, x->e)) {
				exec_free(ix);
				return x->e->code;
			}
		}
		exec_free(ix);
	}
	return 0;
}

struct exec *exec_run(struct graph *g, const struct exec_opts *o, struct exec_stats *st, struct gd_err *e)
{
	/* Tensors come and go at every node: let glibc reuse freed heap memory for them instead of
	 * mapping and unmapping (and zero-faulting) large blocks each time, as framework allocators do. */
	static int tuned;
	if (!tuned) {
		mallopt(M_MMAP_THRESHOLD, 256 << 20);
		mallopt(M_TRIM_THRESHOLD, 512 << 20);
		tuned = 1;
	}
	struct exec *x = xcalloc(1, sizeof *x);
	if (!x) {
		err_oom(e);
		return NULL;
	}
	x->g = g;
	x->o = o;
	x->e = e;
	x->be = o->backend && !o->backend->host ? o->backend : NULL;
	strmap_init(&x->probes);
	strmap_init(&x->assumed);
	strmap_init(&x->given);
	for (size_t k = 0; k < o->n_inputs; k++)
		if (!strmap_get(&x->given, o->input_names[k]) &&
		    strmap_put(&x->given, o->input_names[k], (void *)&o->inputs[k])) {
			err_oom(e);
			exec_free(x);
			return NULL;
		}
	if (run_initialization(x, g)) {
		exec_free(x);
		return NULL;
	}
	x->opset = o->parent ? o->parent->opset : 17;
	if (o->parent) { /* a subgraph's: the symbols' stand-ins are the enclosing run's */
		x->next_probe = o->parent->next_probe;
		memcpy(x->probe_values, o->parent->probe_values, sizeof x->probe_values);
		memcpy(x->probe_syms, o->parent->probe_syms, sizeof x->probe_syms);
	}
	for (size_t i = 0; g->model && i < g->model->n_opsets; i++)
		if (op_domain_is_default(g->model->opsets[i].domain))
			x->opset = (int)g->model->opsets[i].version;
	x->nv = x->cap = g->n_values ? g->n_values : 1;
	x->v = xcalloc(g->n_values ? g->n_values : 1, sizeof *x->v);
	x->left = xcalloc(g->n_values ? g->n_values : 1, sizeof *x->left);
	x->pinned = xcalloc(g->n_values ? g->n_values : 1, 1);
	x->lazy = o->shapes_only ? xcalloc(g->n_values ? g->n_values : 1, 1) : NULL;
	if (!x->v || !x->left || !x->pinned || (o->shapes_only && !x->lazy)) {
		err_oom(e);
		exec_free(x);
		return NULL;
	}
	double t0 = 0;
	uint32_t max_out = 1;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		x->max_in = g->nodes[i]->n_in > x->max_in ? g->nodes[i]->n_in : x->max_in;
		max_out = g->nodes[i]->n_out > max_out ? g->nodes[i]->n_out : max_out;
	}
	x->args = xcalloc((size_t)x->max_in + max_out, sizeof *x->args);
	x->absent = xcalloc(max_out, sizeof *x->absent);
	if (!x->args || !x->absent) {
		err_oom(e);
		exec_free(x);
		return NULL;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k])
				x->left[g->nodes[i]->in[k]->id]++;
	for (uint32_t i = 0; i < g->n_outputs; i++)
		x->pinned[g->outputs[i]->id] = 1;
	for (uint32_t i = 0; o->keep_values && i < g->n_values; i++)
		x->pinned[i] = 1;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (op_table[g->nodes[i]->op].flags & OPF_SUBGRAPH)
			for (uint32_t k = 0; k < g->nodes[i]->n_attr; k++) {
				const struct attr *a = &g->nodes[i]->attr[k];
				if (a->type == ATTR_GRAPH && a->g)
					pin_outer_reads(x, a->g);
				for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
					pin_outer_reads(x, a->graphs[j]);
			}
	int rc = 0;
	for (uint32_t i = 0; i < g->n_inits && !rc; i++) {
		x->pinned[g->inits[i]->id] = 1;
		rc = given(x, g->inits[i]) ? bind_input(x, g->inits[i], &x->v[g->inits[i]->id])
					   : bind_init(x, g->inits[i], &x->v[g->inits[i]->id]);
	}
	for (uint32_t i = 0; i < g->n_inputs && !rc; i++) {
		struct value *v = g->inputs[i];
		x->pinned[v->id] = 1;
		if (!v->init) /* an initializer listed as an input has its data already */
			rc = bind_input(x, v, &x->v[v->id]);
	}
	if (!rc && o->parent)
		rc = bind_outer(x);
	/* state an update replaces dies at its last reader, its next value made in its buffer: a copy
	 * of the bytes it borrows (the model's, the caller's), which are not the run's to write */
	if (!o->keep_values)
		flat_unpin_state(g, x->pinned, 1);
	for (uint32_t i = 0; i < g->n_values && !rc; i++) {
		struct rtensor *t = &x->v[i];
		if (x->pinned[i] || !t->known || !t->data || t->owned)
			continue;
		void *own = xmalloc(t->nbytes ? t->nbytes : 1);
		if (!own) {
			rc = tensor_oom(x, t->nbytes);
			break;
		}
		memcpy(own, t->data, t->nbytes);
		t->data = own;
		t->owned = 1;
	}
	if (!rc && !o->probe_unbound)
		rc = check_assumptions(x);
	if (x->be && o->shapes_only && !rc)
		rc = err_set(e, GD_EINTERNAL, "shape inference runs on the CPU, not on %s", x->be->name);
	for (uint32_t i = 0; x->be && i < g->n_values && !rc; i++) /* inputs and initializers */
		if (x->v[i].known)
			rc = to_device(x, &x->v[i]);
	if (x->be && !rc)
		rc = x->be->sync(e);
	if (!rc) {
		fold_transposes(x);
		find_swaps(x);
	}
	x->chains = !x->be && !o->shapes_only && !o->keep_values && !o->no_chains;
	x->chain_first = 1, x->chain_last = 0;
	t0 = now(); /* the nodes' time: binding inputs (reading, generating them) is not the graph's */
	if (!rc)
		rc = run_nodes(x);
	if (symdim_record(g, x->new_assumed, x->n_new_assumed) && !rc)
		rc = err_oom(e);
	progress_done(o->shapes_only ? meter_shapes : meter_running);
	if (x->be && !rc)
		rc = x->be->sync(e);
	double t1 = now();
	if (!rc)
		for (uint32_t i = 0; i < g->n_outputs && !rc; i++)
			if (!x->v[g->outputs[i]->id].known)
				rc = err_set(e, GD_EINPUT, "graph output '%s' was not computed", g->outputs[i]->name);
	for (uint32_t i = 0; x->be && i < g->n_outputs && !rc; i++)
		rc = to_host(x, &x->v[g->outputs[i]->id]);
	if (rc) {
		exec_free(x);
		return NULL;
	}
	if (st) {
		st->seconds = t1 - t0;
		st->device_peak_bytes = x->dev_peak;
		st->host_nodes = x->host_nodes;
		st->copies = x->copies;
		st->copy_bytes = x->copy_bytes;
		st->peak_bytes = x->peak;
		st->scratch_peak_bytes = x->scratch_peak;
		st->final_bytes = x->live;
		st->flops = x->flops;
		st->bytes_moved = x->moved;
		st->comm_calls = x->comm_calls;
		st->comm_bytes = x->comm_bytes;
		st->comm_seconds = x->comm_seconds;
		st->chain_nodes = x->chain_nodes;
	}
	return x;
}

const struct rtensor *exec_value(const struct exec *x, const struct value *v)
{
	static const struct rtensor unknown;
	return v->id < x->nv ? &x->v[v->id] : &unknown;
}

int exec_alias(struct exec *x, const struct value *copy, const struct value *of)
{
	if (copy->id >= x->cap) {
		uint32_t cap = x->cap * 2 > copy->id ? x->cap * 2 : copy->id + 1;
		struct rtensor *v = xrealloc(x->v, sizeof *v * cap);
		if (!v)
			return -1;
		x->v = v;
		x->cap = cap;
	}
	if (copy->id >= x->nv) { /* ids in between (values the rewrite made that copy nothing) are unknown */
		memset(x->v + x->nv, 0, sizeof *x->v * (copy->id - x->nv));
		x->nv = copy->id + 1;
	}
	x->v[copy->id] = *exec_value(x, of);
	x->v[copy->id].data = NULL;
	x->v[copy->id].dev = NULL;
	x->v[copy->id].owned = 0;
	return 0;
}

void exec_free(struct exec *x)
{
	if (!x)
		return;
	exec_free(x->shapes);
	for (uint32_t i = 0; x->v && i < x->nv; i++) {
		if (x->v[i].owned)
			xfree(x->v[i].data);
		if (x->v[i].dev)
			x->be->free(x->v[i].dev);
	}
	xfree(x->v);
	xfree(x->left);
	xfree(x->pinned);
	xfree(x->lazy);
	xfree(x->fold);
	xfree(x->swap_ok);
	xfree(x->vref);
	xfree(x->tcopies);
	xfree(x->args);
	xfree(x->absent);
	strmap_free(&x->probes);
	strmap_free(&x->assumed);
	xfree(x->new_assumed);
	strmap_free(&x->given);
	xfree(x);
}
