/* kernels/stats.c - #52's kernel tests, part of test_kernels: statistics over the batch axis
 * (BatchNormalization's forward, the sums over (0, 2, 3) of its gradient), which at 2 threads and
 * more run over the tensor in memory order, image by image, and combine the per-image sums after.
 * At 1 thread they run by channel: the two must give the same bits, and both match the definition. */
#include "kernels.h"

/* x: n c h w values of [-4, 4) off a centre that differs by channel, some planes constant */
static void stats_fill(float *x, int64_t n, int64_t c, int64_t hw, uint32_t seed)
{
	for (int64_t b = 0; b < n; b++)
		for (int64_t ch = 0; ch < c; ch++)
			for (int64_t i = 0; i < hw; i++) {
				seed = seed * 1664525u + 1013904223u;
				float v = (float)(seed >> 8) / (float)(1u << 24) * 8 - 4;
				x[(b * c + ch) * hw + i] = (ch % 5 == 3 ? 0.5f : v) + (float)ch * 0.75f;
			}
}

/* One graph of `nodes` over x (n, c, h, w) and the params, run at th threads; the outputs' bits in
 * got[k] (numel floats each) */
static void stats_run(const char *params, const char *nodes, int nout, const int64_t *d, const float *x, int th,
		      float **got, int64_t *numel)
{
	char text[8192], outs[256] = "";
	for (int k = 0; k < nout; k++)
		snprintf(outs + strlen(outs), sizeof outs - strlen(outs), "%s{name: y%d}", k ? ", " : "", k);
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [%lld, %lld, %lld, %lld]}]\n"
		 "params: [%s]\nnodes: [%s]\noutputs: [%s]\n",
		 (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3], params, nodes, outs);
	struct graph *g = load_text("stats.yaml", text);
	struct rtensor in = shape_tensor(DT_FLOAT, 4, d, (void *)x);
	static const char *names[1] = {"x"};
	pool_set_threads(th);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &in, .input_names = names, .n_inputs = 1};
	struct exec *ex = exec_run(g, &o, NULL, &e);
	pool_set_threads(1);
	cr_assert(ex, "%s: %s", nodes, e.msg);
	for (int k = 0; k < nout; k++) {
		const struct rtensor *y = exec_value(ex, g->outputs[k]);
		cr_assert_eq(y->dtype, DT_FLOAT);
		numel[k] = y->numel;
		got[k] = xmalloc(y->nbytes);
		memcpy(got[k], y->data, y->nbytes);
	}
	exec_free(ex);
	graph_free(g);
}

/* a param's YAML: name, c float32 values of f(i) */
static void stats_param(char *p, size_t cap, const char *name, int64_t c, double a, double b)
{
	size_t at = strlen(p);
	at += (size_t)snprintf(p + at, cap - at, "%s{name: %s, dtype: float32, shape: [%lld], data: [", at ? ", " : "", name,
			       (long long)c);
	for (int64_t i = 0; i < c; i++)
		at += (size_t)snprintf(p + at, cap - at, "%s%.9g", i ? ", " : "", (double)(float)(a + b * (double)(i % 7)));
	snprintf(p + at, cap - at, "]}");
}

Test(exec, stats_batch_norm_in_memory_order_keeps_the_channel_bits)
{
	/* shapes: many planes of a few hundred pixels (the plane-order passes at 3 threads), few large
	 * planes, an odd batch, and one too small to be cut (the channel path at any count) */
	static const int64_t shapes[][4] = {{8, 6, 33, 35}, {3, 5, 64, 61}, {7, 40, 9, 11}, {2, 3, 2, 3}};
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
		for (int training = 0; training < 2; training++) {
			const int64_t *d = shapes[s], n = d[0], c = d[1], hw = d[2] * d[3];
			float *x = xmalloc((size_t)(n * c * hw) * sizeof *x);
			stats_fill(x, n, c, hw, (uint32_t)(s * 2 + (size_t)training + 1));
			char params[4096] = "", node[256];
			stats_param(params, sizeof params, "s", c, 0.5, 0.25);
			stats_param(params, sizeof params, "b", c, -1, 0.5);
			stats_param(params, sizeof params, "m", c, 0.25, 0.125);
			stats_param(params, sizeof params, "v", c, 1.5, 0.5);
			snprintf(node, sizeof node,
				 "{op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y0%s], attrs: {training_mode: %d, "
				 "momentum: 0.875, epsilon: 0.001}}",
				 training ? ", y1, y2" : "", training);
			int nout = training ? 3 : 1;
			float *one[3], *three[3];
			int64_t n1[3], n3[3];
			stats_run(params, node, nout, d, x, 1, one, n1);
			stats_run(params, node, nout, d, x, 3, three, n3);
			for (int k = 0; k < nout; k++) {
				cr_assert_eq(n1[k], n3[k]);
				cr_expect(!memcmp(one[k], three[k], (size_t)n1[k] * sizeof(float)),
					  "shape %zu, training %d: output %d differs between 1 and 3 threads", s, training, k);
			}
			/* the definition, in long double: y = (x - mean) / sqrt(var + eps) * s + b, the running
			 * statistics m 0.875 + batch (1 - 0.875) */
			int64_t bad = 0;
			for (int64_t ch = 0; ch < c; ch++) {
				double sc = (float)(0.5 + 0.25 * (double)(ch % 7)), bi = (float)(-1 + 0.5 * (double)(ch % 7));
				long double mean = (float)(0.25 + 0.125 * (double)(ch % 7)), var = (float)(1.5 + 0.5 * (double)(ch % 7));
				long double rm = mean, rv = var;
				if (training) {
					long double sum = 0, sq = 0;
					for (int64_t b = 0; b < n; b++)
						for (int64_t i = 0; i < hw; i++)
							sum += x[(b * c + ch) * hw + i];
					mean = sum / (long double)(n * hw);
					for (int64_t b = 0; b < n; b++)
						for (int64_t i = 0; i < hw; i++) {
							long double e = x[(b * c + ch) * hw + i] - mean;
							sq += e * e;
						}
					var = sq / (long double)(n * hw);
					bad += fabsl(three[1][ch] - (rm * 0.875L + mean * 0.125L)) > 1e-5L * (1 + fabsl(rm));
					bad += fabsl(three[2][ch] - (rv * 0.875L + var * 0.125L)) > 1e-5L * (1 + fabsl(rv));
				}
				for (int64_t b = 0; b < n; b++)
					for (int64_t i = 0; i < hw; i++) {
						int64_t at = (b * c + ch) * hw + i;
						long double want = (x[at] - mean) / sqrtl(var + 0.001L) * sc + bi;
						int off = fabsl(three[0][at] - want) > 2e-5L * (1 + fabsl(want));
						if (off && bad < 4)
							cr_expect(0, "shape %zu, training %d, [%lld]: %.9g, not %.9Lg", s, training,
								  (long long)at, three[0][at], want);
						bad += off;
					}
			}
			cr_expect_eq(bad, 0, "shape %zu, training %d: %lld values off the definition", s, training, (long long)bad);
			for (int k = 0; k < nout; k++)
				free(one[k]), free(three[k]);
			free(x);
		}
}

Test(exec, stats_sums_over_the_batch_in_memory_order_keep_their_bits)
{
	/* ReduceSum, ReduceMean, ReduceL2 and ReduceSumSquare over axes with the batch axis first and a
	 * kept axis between (BatchNorm's gradient's (0, 2, 3)), and others; 1 against 3 threads bit for
	 * bit, and the definition in long double. The second shape's runs over (0, 3) are of 5 elements,
	 * which are summed by output, not in memory order. */
	static const int64_t shapes[][4] = {{6, 5, 67, 71}, /* runs of 4757 over 30 planes: cut at 3 threads */
					    {6, 7, 1201, 5}};
	static const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceL2", "ReduceSumSquare"};
	static const int axes[][4] = {{0, 2, 3, -1}, {0, 2, -1, -1}, {0, 3, -1, -1}, {0, 1, 3, -1}, {1, 2, 3, -1}};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
		const int64_t *d = shapes[sh];
		float *x = xmalloc(sizeof(float) * (size_t)(d[0] * d[1] * d[2] * d[3]));
		stats_fill(x, d[0], d[1], d[2] * d[3], 7);
		for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
			for (size_t a = 0; a < sizeof axes / sizeof *axes; a++) {
				char params[128] = "", node[256], list[32] = "";
				int red[4] = {0}, na = 0;
				for (int k = 0; k < 4 && axes[a][k] >= 0; k++, na++) {
					red[axes[a][k]] = 1;
					snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", k ? ", " : "", axes[a][k]);
				}
				snprintf(params, sizeof params, "{name: ax, dtype: int64, shape: [%d], data: [%s]}", na, list);
				snprintf(node, sizeof node, "{op: %s, inputs: [x, ax], outputs: [y0], attrs: {keepdims: 1}}", ops[o]);
				float *one, *three;
				int64_t n1, n3;
				stats_run(params, node, 1, d, x, 1, &one, &n1);
				stats_run(params, node, 1, d, x, 3, &three, &n3);
				cr_assert_eq(n1, n3);
				cr_expect(!memcmp(one, three, (size_t)n1 * sizeof(float)), "%s over (%s): 1 and 3 threads differ", ops[o], list);
				/* each output by the definition: walk the input, the output index with reduced axes 0 */
				long double *ref = xcalloc((size_t)n1, sizeof *ref);
				int64_t count = 1, idx[4];
				for (int k = 0; k < 4; k++)
					count *= red[k] ? d[k] : 1;
				for (idx[0] = 0; idx[0] < d[0]; idx[0]++)
					for (idx[1] = 0; idx[1] < d[1]; idx[1]++)
						for (idx[2] = 0; idx[2] < d[2]; idx[2]++)
							for (idx[3] = 0; idx[3] < d[3]; idx[3]++) {
								int64_t at = 0, out = 0;
								for (int k = 0; k < 4; k++)
									at = at * d[k] + idx[k], out = out * (red[k] ? 1 : d[k]) + (red[k] ? 0 : idx[k]);
								long double v = x[at];
								ref[out] += o >= 2 ? v * v : v;
							}
				int64_t bad = 0;
				for (int64_t i = 0; i < n1; i++) {
					long double want = o == 1 ? ref[i] / count : o == 2 ? sqrtl(ref[i]) : ref[i];
					bad += fabsl(three[i] - want) > 1e-6L * (1 + fabsl(want));
				}
				cr_expect_eq(bad, 0, "%s over (%s): %lld of %lld off the definition", ops[o], list, (long long)bad,
					     (long long)n1);
				free(ref), free(one), free(three);
			}
		free(x);
	}
}
