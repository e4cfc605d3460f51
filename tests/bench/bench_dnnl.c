/* bench_dnnl.c - oneDNN (libdnnl, Debian's 2.6) against graphdiet's kernels on the same shapes,
 * for issue #52's question whether to adopt it. Built only where CMake finds dnnl.h and libdnnl.
 *
 *   bench_dnnl [--rounds N] [--threads 1,2] [--only gemm|conv] [--ops] [--best]
 *
 * At 1 and then 2 threads (graphdiet's pool, pool_set_threads, and oneDNN's OpenMP threads,
 * omp_set_num_threads; OMP_WAIT_POLICY=passive, set by re-running itself, so that the OpenMP
 * threads do not spin on the cores while graphdiet runs), N rounds (default 5) that take the two
 * in turns, medians in ms (--best: the least of the rounds):
 *   - sgemm: graphdiet's blas_sgemm (the kernel ops/blas.c picked, cut over the pool) against
 *     dnnl_sgemm, row-major C = A B at M x N x K;
 *   - convolutions at ResNet-50's and MobileNetV2's sizes (batch 8, 96x96 images): forward,
 *     backward-data and backward-weights. graphdiet: its executor running a one-node Conv graph
 *     (forward), and the training graphs of ReduceSum(Conv(x, w) * r) with w alone trainable
 *     (backward-weights) and x alone trainable (backward-data), less the forward graph's time
 *     (medians over the rounds), and the loss's own nodes (Mul, ReduceSum, Expand and the like) left
 *     out of the executor's per-op profile. oneDNN: its convolution primitives created with
 *     format_tag_any, so it picks its blocked layouts (nChw16c and the like); the operands are
 *     held in graphdiet's NCHW / OIHW (GOIHW) and reordered in and out each call where the
 *     primitive's layout differs: "oneDNN ms" is the primitive alone, "+reorders" with those
 *     reorders, counted in the last column.
 * Determinism: each oneDNN result (and graphdiet's) is computed twice and compared bit for bit,
 * and oneDNN's result at 2 threads against its result at 1 thread (in NCHW / OIHW, after the
 * reorder). Prints Markdown tables; the ratio is graphdiet's time over oneDNN's with reorders. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "io/yaml.h"
#include "ops/blas.h"
#include "ops/ops.h"
#include "util/pool.h"

#include <dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                                    \
	do {                                                                                           \
		dnnl_status_t s_ = (call);                                                             \
		if (s_ != dnnl_success) {                                                              \
			fprintf(stderr, "bench_dnnl: %s: status %d\n", #call, (int)s_);               \
			exit(2);                                                                       \
		}                                                                                      \
	} while (0)

#define MAX_ROUNDS 32
#define MAX_CASES 64

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int rounds = 5;
static int best; /* --best: the least time of the rounds, not the median */
static int show_ops; /* --ops: the executor's per-op times of each training graph, on stderr */
static void *first_bits[MAX_CASES]; /* oneDNN's results at the first thread count, NCHW / OIHW */
static size_t first_size[MAX_CASES];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_value(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* The median of n times in ms, or with --best the least: on a machine whose cores run other
 * work too, preemptions only add, and a call of a few ms is preempted in most rounds. */
static double median_ms(double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, by_value);
	return t[best ? 0 : n / 2] * 1e3;
}

static void fill(float *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1);
	}
}

/* Whether this case's oneDNN result at this thread count has the bits of its first thread count's
 * ("-" at the first). */
static const char *same_as_first(int id, const void *bits, size_t size)
{
	if (!first_bits[id]) {
		first_bits[id] = malloc(size);
		memcpy(first_bits[id], bits, size);
		first_size[id] = size;
		return "-";
	}
	return first_size[id] == size && !memcmp(first_bits[id], bits, size) ? "yes" : "NO";
}

/* ---- products ---- */

static void gemm_table(int threads, int *id)
{
	static const int shapes[][3] = {{1024, 1024, 1024}, {64, 4096, 4096},  {4096, 64, 4096},
					{1024, 384, 1536},  {1024, 1536, 384}, {512, 2048, 2048}};
	printf("\n| sgemm M x N x K | threads | graphdiet ms | oneDNN ms | ratio | oneDNN: same bits twice | "
	       "oneDNN: same bits as 1 thread | graphdiet: same bits twice |\n|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++, (*id)++) {
		int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
		size_t nc = (size_t)m * n;
		float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc(nc * 4),
		      *d = malloc(nc * 4), *c0 = malloc(nc * 4), *d0 = malloc(nc * 4);
		fill(a, (size_t)m * k, 1);
		fill(b, (size_t)k * n, 2);
		double tg[MAX_ROUNDS], td[MAX_ROUNDS];
		/* warm-up and the first results; dnnl_sgemm is row-major */
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c0, n);
		CHECK(dnnl_sgemm('N', 'N', m, n, k, 1, a, k, b, n, 0, d0, n));
		for (int r = 0; r < rounds; r++) {
			for (int turn = 0; turn < 2; turn++) {
				double t = now();
				if ((turn ^ r) & 1)
					CHECK(dnnl_sgemm('N', 'N', m, n, k, 1, a, k, b, n, 0, d, n));
				else
					blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
				*((turn ^ r) & 1 ? &td[r] : &tg[r]) = now() - t;
			}
		}
		double g = median_ms(tg, rounds), o = median_ms(td, rounds);
		printf("| %dx%dx%d | %d | %.2f | %.2f | %.2f | %s | %s | %s |\n", m, n, k, threads, g, o, g / o,
		       memcmp(d, d0, nc * 4) ? "NO" : "yes", same_as_first(*id, d, nc * 4),
		       memcmp(c, c0, nc * 4) ? "NO" : "yes");
		free(a), free(b), free(c), free(d), free(c0), free(d0);
	}
}

/* ---- convolutions ---- */

struct conv {
	const char *name;
	int n, c, h, w, o, k, s, p, g;
};

static int out_side(const struct conv *v, int side)
{
	return (side + 2 * v->p - v->k) / v->s + 1;
}

/* graphdiet: the one-node forward graph, or the training graph with `train` ("w" or "x") alone
 * trainable */
static struct graph *conv_graph(const struct conv *v, const char *train)
{
	char text[2048], x[160], r[160] = "", w[160];
	int xparam = train && !strcmp(train, "x");
	snprintf(x, sizeof x, "{name: x, dtype: float32, shape: [%d, %d, %d, %d]%s}", v->n, v->c, v->h, v->w,
		 xparam ? ", init: {dist: normal, seed: 3}" : "");
	snprintf(w, sizeof w, "{name: w, dtype: float32, shape: [%d, %d, %d, %d], init: {dist: normal, std: 0.1, seed: 1}}",
		 v->o, v->c / v->g, v->k, v->k);
	if (train) /* r: the upstream gradient, an input */
		snprintf(r, sizeof r, "{name: r, dtype: float32, shape: [%d, %d, %d, %d]}", v->n, v->o, out_side(v, v->h),
			 out_side(v, v->w));
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [%s%s%s]\nparams: [%s%s%s]\n"
		 "nodes: [{op: Conv, inputs: [x, w], outputs: [y], attrs: {kernel_shape: [%d, %d], strides: [%d, %d], "
		 "pads: [%d, %d, %d, %d], group: %d}}%s]\noutputs: [{name: %s}]\n",
		 xparam ? "" : x, !xparam && train ? ", " : "", r, w, xparam ? ", " : "", xparam ? x : "", v->k, v->k, v->s,
		 v->s, v->p, v->p, v->p, v->p, v->g,
		 train ? ", {op: Mul, inputs: [y, r], outputs: [z]}, {op: ReduceSum, inputs: [z], outputs: [l], attrs: {keepdims: 0}}"
		       : "",
		 train ? "l" : "y");
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "bench_dnnl", ".", &e);
	if (!g || graph_check(g, &e) || graph_toposort(g, &e)) {
		fprintf(stderr, "bench_dnnl: %s\n%s\n", e.msg, text);
		exit(2);
	}
	if (train) {
		const char *params[] = {train};
		struct autodiff_opts ao = {.params = params, .n_params = 1};
		struct autodiff_result res;
		if (autodiff(g, &ao, &res, &e) || graph_toposort(g, &e)) {
			fprintf(stderr, "bench_dnnl: %s\n", e.msg);
			exit(2);
		}
	}
	return g;
}

/* The loss's own nodes in the training graphs, and what its gradient starts from */
static int loss_op(const char *op)
{
	static const char *const ops[] = {"Mul", "ReduceSum", "Expand", "ConstantOfShape", "Constant", "Shape", "Identity"};
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (!strcmp(op, ops[i]))
			return 1;
	return 0;
}

/* One executor run of g: its node time in seconds, all of it, or with prof its convolution ops'
 * (the loss's left out). The output's bits go to out when given. */
static double gd_run(struct graph *g, int by_op, float *out, size_t n)
{
	static struct exec_profile prof;
	memset(&prof, 0, sizeof prof);
	struct exec_opts o = {.random_inputs = 1, .seed = 1, .profile = by_op ? &prof : NULL};
	struct exec_stats st;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, &st, &e);
	if (!x) {
		fprintf(stderr, "bench_dnnl: %s\n", e.msg);
		exit(2);
	}
	if (out) {
		const struct rtensor *t = exec_value(x, g->outputs[0]);
		memcpy(out, t->data, n * 4);
	}
	exec_free(x);
	if (!by_op)
		return st.seconds;
	double s = 0;
	for (int op = 1; op < OP_COUNT; op++)
		if (prof.calls[op] && !loss_op(op_table[op].op_type)) {
			s += prof.seconds[op];
			if (show_ops)
				fprintf(stderr, "  %s x%llu %.3f ms\n", op_table[op].op_type, (unsigned long long)prof.calls[op],
					prof.seconds[op] * 1e3);
		}
	if (show_ops)
		fprintf(stderr, "  (left out: the loss's nodes)\n");
	return s;
}

/* A oneDNN memory in the layout md, and the reorder from (or to) the user's layout when it
 * differs (NULL when not). */
struct dmem {
	dnnl_memory_t user, mem; /* mem is user when the layouts agree */
	dnnl_primitive_t in, out; /* reorders user -> mem, mem -> user */
};

static dnnl_primitive_t reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t p;
	CHECK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
	CHECK(dnnl_primitive_create(&p, pd));
	dnnl_primitive_desc_destroy(pd);
	return p;
}

static void dmem_init(struct dmem *m, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, int *reorders)
{
	CHECK(dnnl_memory_create(&m->user, user, eng, DNNL_MEMORY_ALLOCATE));
	m->in = m->out = NULL;
	if (dnnl_memory_desc_equal(user, want)) {
		m->mem = m->user;
		return;
	}
	CHECK(dnnl_memory_create(&m->mem, want, eng, DNNL_MEMORY_ALLOCATE));
	m->in = reorder(user, want);
	m->out = reorder(want, user);
	++*reorders;
}

static void run_reorder(dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to)
{
	dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
	CHECK(dnnl_primitive_execute(p, strm, 2, args));
	CHECK(dnnl_stream_wait(strm));
}

static void *data_of(dnnl_memory_t m)
{
	void *p;
	CHECK(dnnl_memory_get_data_handle(m, &p));
	return p;
}

static void dmem_free(struct dmem *m)
{
	if (m->mem != m->user) {
		dnnl_memory_destroy(m->mem);
		dnnl_primitive_destroy(m->in);
		dnnl_primitive_destroy(m->out);
	}
	dnnl_memory_destroy(m->user);
}

/* One phase of a convolution on oneDNN: its primitive with two operands in and one out. */
struct phase {
	dnnl_primitive_t prim;
	struct dmem in0, in1, out;
	int arg_in0, arg_in1, arg_out, reorders;
	const char *impl;
};

static void phase_init(struct phase *ph, dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *u0, dnnl_query_t q0,
		       int a0, const dnnl_memory_desc_t *u1, dnnl_query_t q1, int a1, const dnnl_memory_desc_t *uo,
		       dnnl_query_t qo, int ao)
{
	ph->reorders = 0;
	dmem_init(&ph->in0, u0, dnnl_primitive_desc_query_md(pd, q0, 0), &ph->reorders);
	dmem_init(&ph->in1, u1, dnnl_primitive_desc_query_md(pd, q1, 0), &ph->reorders);
	dmem_init(&ph->out, uo, dnnl_primitive_desc_query_md(pd, qo, 0), &ph->reorders);
	ph->arg_in0 = a0, ph->arg_in1 = a1, ph->arg_out = ao;
	CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &ph->impl));
	ph->impl = strdup(ph->impl);
	CHECK(dnnl_primitive_create(&ph->prim, pd));
	fill(data_of(ph->in0.user), dnnl_memory_desc_get_size(u0) / 4, 5);
	fill(data_of(ph->in1.user), dnnl_memory_desc_get_size(u1) / 4, 6);
}

/* Runs the phase: reorders in (timed into *reo), the primitive (into *prim), the reorder out. */
static void phase_run(struct phase *ph, double *prim, double *reo)
{
	double t = now();
	if (ph->in0.in)
		run_reorder(ph->in0.in, ph->in0.user, ph->in0.mem);
	if (ph->in1.in)
		run_reorder(ph->in1.in, ph->in1.user, ph->in1.mem);
	double t1 = now();
	dnnl_exec_arg_t args[] = {{ph->arg_in0, ph->in0.mem}, {ph->arg_in1, ph->in1.mem}, {ph->arg_out, ph->out.mem}};
	CHECK(dnnl_primitive_execute(ph->prim, strm, 3, args));
	CHECK(dnnl_stream_wait(strm));
	double t2 = now();
	if (ph->out.out)
		run_reorder(ph->out.out, ph->out.mem, ph->out.user);
	*prim = t2 - t1;
	*reo = (t1 - t) + (now() - t2);
}

static void phase_free(struct phase *ph)
{
	dnnl_primitive_destroy(ph->prim);
	dmem_free(&ph->in0);
	dmem_free(&ph->in1);
	dmem_free(&ph->out);
	free((void *)ph->impl);
}

static void conv_case(const struct conv *v, int threads, int *id)
{
	int oh = out_side(v, v->h), ow = out_side(v, v->w);
	dnnl_dims_t src = {v->n, v->c, v->h, v->w}, dst = {v->n, v->o, oh, ow}, strides = {v->s, v->s},
		    pad = {v->p, v->p};
	dnnl_dims_t wd = {v->o, v->c, v->k, v->k}, gwd = {v->g, v->o / v->g, v->c / v->g, v->k, v->k};
	dnnl_memory_desc_t src_u, dst_u, w_u, src_a, dst_a, w_a;
	CHECK(dnnl_memory_desc_init_by_tag(&src_u, 4, src, dnnl_f32, dnnl_nchw));
	CHECK(dnnl_memory_desc_init_by_tag(&dst_u, 4, dst, dnnl_f32, dnnl_nchw));
	CHECK(dnnl_memory_desc_init_by_tag(&src_a, 4, src, dnnl_f32, dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dst_a, 4, dst, dnnl_f32, dnnl_format_tag_any));
	if (v->g > 1) {
		CHECK(dnnl_memory_desc_init_by_tag(&w_u, 5, gwd, dnnl_f32, dnnl_goihw));
		CHECK(dnnl_memory_desc_init_by_tag(&w_a, 5, gwd, dnnl_f32, dnnl_format_tag_any));
	} else {
		CHECK(dnnl_memory_desc_init_by_tag(&w_u, 4, wd, dnnl_f32, dnnl_oihw));
		CHECK(dnnl_memory_desc_init_by_tag(&w_a, 4, wd, dnnl_f32, dnnl_format_tag_any));
	}
	dnnl_convolution_desc_t fd, bd, wdsc;
	dnnl_primitive_desc_t fpd, bpd, wpd;
	CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src_a, &w_a, NULL,
						 &dst_a, strides, pad, pad));
	CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
	CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_a, &w_a, &dst_a, strides, pad,
						       pad));
	CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
	CHECK(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &src_a, &w_a, NULL, &dst_a,
							  strides, pad, pad));
	CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, eng, fpd));
	struct phase ph[3];
	phase_init(&ph[0], fpd, &src_u, dnnl_query_src_md, DNNL_ARG_SRC, &w_u, dnnl_query_weights_md, DNNL_ARG_WEIGHTS,
		   &dst_u, dnnl_query_dst_md, DNNL_ARG_DST);
	phase_init(&ph[1], bpd, &dst_u, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, &w_u, dnnl_query_weights_md,
		   DNNL_ARG_WEIGHTS, &src_u, dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC);
	phase_init(&ph[2], wpd, &src_u, dnnl_query_src_md, DNNL_ARG_SRC, &dst_u, dnnl_query_diff_dst_md,
		   DNNL_ARG_DIFF_DST, &w_u, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS);
	dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd), dnnl_primitive_desc_destroy(wpd);
	struct graph *gf = conv_graph(v, NULL), *gx = conv_graph(v, "x"), *gw = conv_graph(v, "w");
	/* warm-up, and the first results */
	size_t ny = (size_t)v->n * v->o * oh * ow;
	float *y0 = malloc(ny * 4), *y1 = malloc(ny * 4);
	void *first[3];
	size_t size[3];
	double pr, re, tf[MAX_ROUNDS], tx[MAX_ROUNDS], tw[MAX_ROUNDS], dp[3][MAX_ROUNDS], dr[3][MAX_ROUNDS];
	gd_run(gf, 0, y0, ny);
	gd_run(gx, 1, NULL, 0);
	gd_run(gw, 1, NULL, 0);
	for (int i = 0; i < 3; i++)
		phase_run(&ph[i], &pr, &re);
	for (int i = 0; i < 3; i++) {
		dnnl_memory_desc_t const *um;
		CHECK(dnnl_memory_get_memory_desc(ph[i].out.user, &um));
		size[i] = dnnl_memory_desc_get_size(um);
		first[i] = malloc(size[i]);
		memcpy(first[i], data_of(ph[i].out.user), size[i]);
	}
	for (int r = 0; r < rounds; r++) {
		for (int turn = 0; turn < 2; turn++) {
			if ((turn ^ r) & 1) {
				for (int i = 0; i < 3; i++)
					phase_run(&ph[i], &dp[i][r], &dr[i][r]);
			} else {
				tf[r] = gd_run(gf, 0, y1, ny);
				tx[r] = gd_run(gx, 1, NULL, 0);
				tw[r] = gd_run(gw, 1, NULL, 0);
			}
		}
	}
	static const char *const names[] = {"forward", "backward-data", "backward-weights"};
	double *gdt[] = {tf, tx, tw};
	for (int i = 0; i < 3; i++, (*id)++) {
		double with[MAX_ROUNDS];
		for (int r = 0; r < rounds; r++)
			with[r] = dp[i][r] + dr[i][r];
		double g = median_ms(gdt[i], rounds) - (i ? median_ms(tf, rounds) : 0), p = median_ms(dp[i], rounds),
		       w = median_ms(with, rounds);
		const void *bits = data_of(ph[i].out.user);
		printf("| %s | %s | %d | %.3f | %.3f | %.3f | %.2f | %s | %s | %s | %d: %s |\n", v->name, names[i], threads, g, p,
		       w, g / w, memcmp(bits, first[i], size[i]) ? "NO" : "yes", same_as_first(*id, bits, size[i]),
		       i ? "" : memcmp(y0, y1, ny * 4) ? "NO" : "yes", ph[i].reorders, ph[i].impl);
		free(first[i]);
		phase_free(&ph[i]);
	}
	free(y0), free(y1);
	graph_free(gf), graph_free(gx), graph_free(gw);
}

static void conv_table(int threads, int *id)
{
	static const struct conv convs[] = {
		{"resnet50 conv1 7x7/2, 3->64, 96x96", 8, 3, 96, 96, 64, 7, 2, 3, 1},
		{"resnet50 3x3 64, 24x24", 8, 64, 24, 24, 64, 3, 1, 1, 1},
		{"resnet50 3x3 128, 12x12", 8, 128, 12, 12, 128, 3, 1, 1, 1},
		{"resnet50 3x3 256, 6x6", 8, 256, 6, 6, 256, 3, 1, 1, 1},
		{"resnet50 3x3 512, 3x3", 8, 512, 3, 3, 512, 3, 1, 1, 1},
		{"resnet50 1x1 256->64, 24x24", 8, 256, 24, 24, 64, 1, 1, 0, 1},
		{"resnet50 1x1 1024->256, 6x6", 8, 1024, 6, 6, 256, 1, 1, 0, 1},
		{"mobilenetv2 dw 3x3 32, 48x48", 8, 32, 48, 48, 32, 3, 1, 1, 32},
		{"mobilenetv2 dw 3x3/2 96, 48->24", 8, 96, 48, 48, 96, 3, 2, 1, 96},
		{"mobilenetv2 dw 3x3 144, 24x24", 8, 144, 24, 24, 144, 3, 1, 1, 144},
		{"mobilenetv2 dw 3x3/2 144, 24->12", 8, 144, 24, 24, 144, 3, 2, 1, 144},
		{"mobilenetv2 dw 3x3 192, 12x12", 8, 192, 12, 12, 192, 3, 1, 1, 192},
		{"mobilenetv2 1x1 24->144, 24x24", 8, 24, 24, 24, 144, 1, 1, 0, 1},
		{"mobilenetv2 1x1 32->192, 12x12", 8, 32, 12, 12, 192, 1, 1, 0, 1},
		{"mobilenetv2 1x1 144->24, 24x24", 8, 144, 24, 24, 24, 1, 1, 0, 1},
	};
	printf("\n| conv | phase | threads | graphdiet ms | oneDNN ms | oneDNN + reorders ms | ratio | oneDNN: same bits "
	       "twice | oneDNN: same bits as 1 thread | graphdiet: same bits twice | reorders: oneDNN's kernel |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
		conv_case(&convs[i], threads, id);
}

int main(int argc, char **argv)
{
	if (!getenv("OMP_WAIT_POLICY")) { /* libgomp reads it when loaded: run again with it */
		setenv("OMP_WAIT_POLICY", "passive", 1);
		execv("/proc/self/exe", argv);
		perror("bench_dnnl: execv");
		return 2;
	}
	const char *only = NULL, *list = "1,2";
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			list = argv[++i];
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--ops"))
			show_ops = 1;
		else if (!strcmp(argv[i], "--best"))
			best = 1;
		else {
			fprintf(stderr, "usage: bench_dnnl [--rounds N] [--threads 1,2] [--only gemm|conv] [--ops] [--best]\n");
			return 2;
		}
	if (rounds < 1 || rounds > MAX_ROUNDS)
		rounds = 5;
	const dnnl_version_t *ver = dnnl_version();
	CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
	printf("oneDNN %d.%d.%d (%s), OMP_WAIT_POLICY=%s; graphdiet's sgemm: %s; %d rounds, %s\n", ver->major,
	       ver->minor, ver->patch, ver->hash, getenv("OMP_WAIT_POLICY"), blas_sgemm_kernel(), rounds,
	       best ? "the least of each" : "medians");
	for (const char *t = list; *t;) {
		int threads = atoi(t), id = 0;
		pool_set_threads(threads);
		omp_set_num_threads(threads);
		if (!only || !strcmp(only, "gemm"))
			gemm_table(threads, &id);
		if (!only || !strcmp(only, "conv"))
			conv_table(threads, &id);
		t = strchr(t, ',') ? strchr(t, ',') + 1 : t + strlen(t);
	}
	dnnl_stream_destroy(strm);
	dnnl_engine_destroy(eng);
	return 0;
}
