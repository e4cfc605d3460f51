/* kernels/reduce.c - #52's kernel tests, part of test_kernels: reductions, normalizations, optimizer
 * updates and a gather's cost. Each fast path against a reference written here, bit for bit or within
 * a stated bound. */
#include "kernels.h"

/* #52 roofline: a gather's cost is the bytes it moves */
Test(exec, gather_and_slice_cost_the_bytes_they_move)
{
	/* Gather of 2 rows of a 1000 x 8 float32 table: 2 x 64 bytes read and written, 16 of indices
	 * (not the 32,000-byte table); Slice of rows 0..2 of a 100 x 4 table: 2 x 32, 8 + 8 of starts
	 * and ends (not the 1,600-byte table) */
	static const struct {
		const char *inputs, *params, *node;
		uint64_t bytes;
	} cases[] = {
		{"[{name: t, dtype: float32, shape: [1000, 8]}]", "[{name: i, dtype: int64, shape: [2], data: [5, 7]}]",
		 "{op: Gather, inputs: [t, i], outputs: [y]}", 144},
		{"[{name: t, dtype: float32, shape: [100, 4]}]",
		 "[{name: b, dtype: int64, shape: [1], data: [0]}, {name: e, dtype: int64, shape: [1], data: [2]}]",
		 "{op: Slice, inputs: [t, b, e], outputs: [y]}", 80},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[512];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: %s\nparams: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].params, cases[k].node);
		struct exec_stats st = stats_of("gather_cost.yaml", text);
		cr_expect_eq(st.flops, 0);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: bytes moved %llu", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* #52 redfast: the non-sum reductions over the last axis (ReduceMax, ReduceMin, ReduceL1,
 * ReduceProd, ReduceLogSumExp), GlobalMaxPool and AveragePool against serial walks written here,
 * bit for bit, float32 and float64, over NaNs of distinct payloads, signed zeros, infinities,
 * subnormals and huge values, at lengths around the kernels' lane counts. */

/* ReduceLogSumExp's float32 sum over a contiguous row of n elements (reduce.c's sum_exp_f32), m
 * its finite maximum: e = vm_expf(x - m), 0 where x - m < -87, added in double into 16 lane sums,
 * element r into lane r mod 16, the lanes then combined k + 8, k + 4, k + 2, k + 1 */
static double lse_lanes_f32(const float *x, int64_t n, float m)
{
	double s[16] = {0};
	for (int64_t r = 0; r < n; r++) {
		float d = x[r] - m;
		s[r % 16] += d < -87.0f ? 0.0 : (double)vm_expf(d);
	}
	for (int w = 8; w; w /= 2)
		for (int k = 0; k < w; k++)
			s[k] += s[k + w];
	return s[0];
}

/* the serial walks: m = v > m || isnan(v) ? v : m from -inf, its mirror, |x| and x summed, x
 * multiplied, and log sum exp(x - m): float64 by libm's exp in index order, float32 by
 * lse_lanes_f32 (a NaN maximum is the result) */
static double rf_reduce(const char *op, const double *v, int64_t n, int f64)
{
	double m = strcmp(op, "ReduceMin") ? -INFINITY : INFINITY, s = strcmp(op, "ReduceProd") ? 0 : 1;
	for (int64_t r = 0; r < n; r++) {
		if (!strcmp(op, "ReduceMin"))
			m = v[r] < m || isnan(v[r]) ? v[r] : m;
		else
			m = v[r] > m || isnan(v[r]) ? v[r] : m;
		s = !strcmp(op, "ReduceProd") ? s * v[r] : s + fabs(v[r]);
	}
	if (!strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin"))
		return m;
	if (strcmp(op, "ReduceLogSumExp"))
		return s;
	if (isinf(m) || (!f64 && isnan(m)))
		return m;
	s = 0;
	if (!f64) {
		static float row[1024];
		cr_assert(n <= 1024);
		for (int64_t r = 0; r < n; r++)
			row[r] = (float)v[r];
		return m + log(lse_lanes_f32(row, n, (float)m));
	}
	for (int64_t r = 0; r < n; r++)
		s += exp(v[r] - m);
	return m + log(s);
}

Test(exec, redfast_reductions_over_the_last_axis_match_the_serial_walk_bit_for_bit)
{
	static const char *const ops[] = {"ReduceMax", "ReduceMin", "ReduceL1", "ReduceProd", "ReduceLogSumExp"};
	static const int64_t lens[] = {0, 1, 5, 15, 16, 17, 33, 100, 257}, rows[] = {1, 3, 4, 9, 14, 19};
	enum { MAXN = 19 * 257 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (size_t op = 0; op < sizeof ops / sizeof *ops; op++)
		for (int f64 = 0; f64 < 2; f64++)
			for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
				for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
					int64_t len = lens[li], nr = rows[ri], dims[2] = {nr, len};
					uint32_t s = (uint32_t)(op * 7919 + li * 31 + ri);
					for (int64_t i = 0; i < nr * len; i++) {
						p64[i] = rf_value(&s, i, len);
						p32[i] = (float)p64[i];
						v[i] = f64 ? p64[i] : (double)p32[i];
					}
					char node[200];
					snprintf(node, sizeof node, "{op: %s, inputs: [x, ax], outputs: [y], attrs: {keepdims: %d}}",
						 ops[op], (int)(ri & 1));
					struct graph *g;
					const struct rtensor *y;
					struct exec *x = rf_run(node, "params: [{name: ax, dtype: int64, shape: [1], data: [-1]}]\n", f64,
								2, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
					int64_t wrong = 0, first = -1;
					for (int64_t r = 0; r < nr; r++)
						if (!rf_same_nan(y, r, rf_reduce(ops[op], v + r * len, len, f64), f64,
								 !strcmp(ops[op], "ReduceL1") || !strcmp(ops[op], "ReduceProd")) &&
						    !wrong++)
							first = r;
					cr_expect_eq(wrong, 0, "%s %s %lldx%lld: %lld outputs differ, the first row %lld", ops[op],
						     f64 ? "float64" : "float32", (long long)nr, (long long)len, (long long)wrong,
						     (long long)first);
					exec_free(x);
					graph_free(g);
				}
}

Test(exec, redfast_global_max_pool_matches_the_serial_walk_bit_for_bit)
{
	static const int64_t sizes[][2] = {{1, 1}, {3, 5}, {4, 4}, {5, 7}, {9, 13}};
	static double v[2 * 3 * 9 * 13], p64[2 * 3 * 9 * 13];
	static float p32[2 * 3 * 9 * 13];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
			int64_t sp = sizes[k][0] * sizes[k][1], dims[4] = {2, 3, sizes[k][0], sizes[k][1]};
			uint32_t s = (uint32_t)k * 101 + 7;
			for (int64_t i = 0; i < 6 * sp; i++) {
				p64[i] = rf_value(&s, i, sp);
				p32[i] = (float)p64[i];
				v[i] = f64 ? p64[i] : (double)p32[i];
			}
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run("{op: GlobalMaxPool, inputs: [x], outputs: [y]}", "", f64, 4, dims,
						f64 ? (void *)p64 : (void *)p32, &g, &y);
			for (int64_t nc = 0; nc < 6; nc++)
				cr_expect(rf_same_nan(y, nc, rf_reduce("ReduceMax", v + nc * sp, sp, f64), f64, 0), "%s %lldx%lld plane %lld",
					  f64 ? "float64" : "float32", (long long)dims[2], (long long)dims[3], (long long)nc);
			exec_free(x);
			graph_free(g);
		}
}

Test(exec, redfast_average_pool_matches_its_definition_bit_for_bit)
{
	struct avg_case {
		int64_t h, w, k[2], s[2], d[2], pad[4];
		int ceil, incl;
	} cases[] = {
		{24, 24, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
		{9, 11, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0},
		{9, 11, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1},
		{10, 10, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 0}, 1, 1},
		{10, 10, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 0}, 1, 0},
		{12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0, 1},
		{7, 300, {2, 5}, {1, 1}, {1, 2}, {1, 4, 1, 4}, 0, 0},
		{1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
		{5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	};
	enum { MAXN = 2 * 3 * 7 * 300 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct avg_case *k = &cases[c];
			int64_t dims[4] = {2, 3, k->h, k->w}, sp = k->h * k->w;
			uint32_t s = (uint32_t)c * 17 + 3;
			for (int64_t i = 0; i < 6 * sp; i++) {
				p64[i] = rf_value(&s, i, k->w);
				p32[i] = (float)p64[i];
				v[i] = f64 ? p64[i] : (double)p32[i];
			}
			char node[400];
			snprintf(node, sizeof node,
				 "{op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
				 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d, count_include_pad: %d}}",
				 (long long)k->k[0], (long long)k->k[1], (long long)k->s[0], (long long)k->s[1], (long long)k->d[0],
				 (long long)k->d[1], (long long)k->pad[0], (long long)k->pad[1], (long long)k->pad[2],
				 (long long)k->pad[3], k->ceil, k->incl);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
			int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
			double want = 0;
			for (int64_t nc = 0; nc < 6; nc++)
				for (int64_t oy = 0; oy < oh; oy++)
					for (int64_t ox = 0; ox < ow; ox++) {
						double r = rf_avg(v + nc * sp, k->h, k->w, k->k, k->s, k->d, k->pad, k->incl, oy, ox);
						int64_t o = (nc * oh + oy) * ow + ox;
						if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
							first = o, want = r;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld of %lldx%lld outputs differ, the first %lld: %a, not %a",
				     f64 ? "float64" : "float32", c, (long long)wrong, (long long)oh, (long long)ow, (long long)first,
				     first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* #52 optfast: the optimizer updates (training.c's Adam, Adagrad and Momentum, diet.c's DietAdam)
 * as typed loops over whole tensors cut over the pool: every element as the formulas in double,
 * rounded once on store, the same bits at 1 and 3 threads. */

/* Edge values: NaN, +-inf, +-0, subnormals (float32's and float64's), huge, ordinary. */
static const double opt_edges[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-45, -4.9e-324, 3e38, -1e300, -3.5, 0.25,
				   1.5, 7.0, -1e-40, 2.5e-39, 0.1};
#define OPT_NE (int)(sizeof opt_edges / sizeof *opt_edges)

/* a and b the same bits, or both NaN */
static int same_bits(double a, double b, int f64)
{
	if (isnan(a) && isnan(b))
		return 1;
	if (f64)
		return !memcmp(&a, &b, sizeof a);
	float fa = (float)a, fb = (float)b;
	return !memcmp(&fa, &fb, sizeof fa);
}

/* Adam, Adagrad, Momentum (standard, nesterov) over 4 tensors of one node: float32 and float64 of
 * 2 x 8192 + 37 elements, float32 of 1, float64 of 0; every input from the edge values. The
 * expected values are the schema's formulas, written here. */
Test(exec, training_optimizers_match_their_formulas_bit_for_bit)
{
	enum { N = 2 * 8192 + 37, G = 4 };
	static const int64_t len[G] = {N, N, 1, 0};
	static const int f64[G] = {0, 1, 0, 1};
	static const char *const ops[4] = {"Adam", "Adagrad", "Momentum", "Momentum"};
	static const char *const attrs[4] = {
		"{alpha: 0.75, beta: 0.875, epsilon: 9.5367431640625e-07, norm_coefficient: 0.0625, norm_coefficient_post: 0.03125}",
		"{decay_factor: 0.125, epsilon: 9.5367431640625e-07, norm_coefficient: 0.0625}",
		"{alpha: 0.75, beta: 0.5, mode: standard, norm_coefficient: 0.0625}",
		"{alpha: 0.75, beta: 0.5, mode: nesterov, norm_coefficient: 0.0625}"};
	const double r = 0.125, t = 3, nc = 0.0625, eps = 9.5367431640625e-07;
	static double buf[4][G][N]; /* X, G, S1, S2 of each group */
	struct rtensor ins[4 * G];
	char names_s[4 * G][16];
	const char *names[4 * G];
	for (int s = 0; s < 4; s++)
		for (int k = 0; k < G; k++) {
			for (int64_t e = 0; e < len[k]; e++) {
				double v = opt_edges[(e * (2 * s + 1) + 3 * s + k) % OPT_NE];
				if (s >= 2)
					v = fabs(v); /* the squares' sums */
				if (f64[k])
					buf[s][k][e] = v;
				else
					((float *)buf[s][k])[e] = (float)v;
			}
			ins[s * G + k] = rt_over(f64[k] ? DT_DOUBLE : DT_FLOAT, 1, &len[k], buf[s][k]);
			snprintf(names_s[s * G + k], sizeof names_s[0], "%c%d", "xgab"[s], k);
			names[s * G + k] = names_s[s * G + k];
		}
	for (int o = 0; o < 4; o++) {
		int per = o ? 3 : 4;
		char yaml[8192], decl[2048] = "", inl[256] = "[r, t", outl[256] = "", outd[512] = "";
		for (int s = 0; s < per; s++)
			for (int k = 0; k < G; k++) {
				size_t d = strlen(decl);
				snprintf(decl + d, sizeof decl - d, "%s{name: %s, dtype: %s, shape: [%lld]}", d ? ", " : "",
					 names[s * G + k], f64[k] ? "float64" : "float32", (long long)len[k]);
				d = strlen(inl);
				snprintf(inl + d, sizeof inl - d, ", %s", names[s * G + k]);
			}
		for (int s = 0; s < per - 1; s++) /* the new X (o0..), S1 (o4..), S2 (o8..) */
			for (int k = 0; k < G; k++) {
				size_t d = strlen(outl);
				snprintf(outl + d, sizeof outl - d, "%so%d", d ? ", " : "", s * G + k);
				d = strlen(outd);
				snprintf(outd + d, sizeof outd - d, "%s{name: o%d}", d ? ", " : "", s * G + k);
			}
		snprintf(yaml, sizeof yaml,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: ai.onnx.preview.training, version: 1}]\n"
			 "inputs: [%s]\nparams:\n  - {name: r, dtype: float32, shape: [], data: [0.125]}\n"
			 "  - {name: t, dtype: int64, shape: [], data: [3]}\n"
			 "nodes:\n  - {name: up, op: %s, domain: ai.onnx.preview.training, inputs: %s], outputs: [%s], attrs: %s}\n"
			 "outputs: [%s]\n",
			 decl, ops[o], inl, outl, attrs[o], outd);
		struct graph *g = load_text("optimizer.yaml", yaml);
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = per * G};
			struct gd_err e = {0};
			struct exec *x = exec_run(g, &xo, NULL, &e);
			cr_assert(x, "%s: %s", ops[o], e.msg);
			double ra = o == 0 ? r * sqrt(1 - pow(0.875, t)) / (1 - pow(0.75, t)) : o == 1 ? r / (1 + t * 0.125) : r;
			int64_t bad = 0;
			for (int k = 0; k < G; k++) {
				char on[3][16];
				const struct rtensor *res[3] = {NULL, NULL, NULL};
				for (int s = 0; s < per - 1; s++) {
					snprintf(on[s], sizeof on[s], "o%d", s * G + k);
					res[s] = exec_value(x, strmap_get(&g->names, on[s]));
					cr_assert_eq(res[s]->numel, len[k]);
				}
				for (int64_t i = 0; i < len[k]; i++) {
					double in[4];
					for (int s = 0; s < 4; s++)
						in[s] = f64[k] ? buf[s][k][i] : ((const float *)buf[s][k])[i];
					double xv = in[0], gv = nc * xv + in[1], want[3];
					if (o == 0) {
						want[1] = 0.75 * in[2] + (1 - 0.75) * gv;
						want[2] = 0.875 * in[3] + (1 - 0.875) * gv * gv;
						want[0] = (1 - 0.03125) * (xv - ra * (want[1] / (sqrt(want[2]) + eps)));
					} else if (o == 1) {
						want[1] = in[2] + gv * gv;
						want[0] = xv - ra * gv / (sqrt(want[1]) + eps);
					} else {
						want[1] = 0.75 * in[2] + 0.5 * gv;
						want[0] = o == 3 ? xv - r * (gv + 0.75 * want[1]) : xv - r * want[1];
					}
					for (int s = 0; s < per - 1; s++) {
						int ok = same_bits(rt_get(res[s], i), want[s], f64[k]);
						bad += !ok;
						if (!ok && bad < 5)
							cr_expect(0, "%s, %d threads, group %d, output %d [%lld]: %.17g, not %.17g", ops[o], th,
								  k, s, (long long)i, rt_get(res[s], i), want[s]);
					}
				}
			}
			cr_expect_eq(bad, 0, "%s, %d threads: %lld values differ", ops[o], th, (long long)bad);
			exec_free(x);
		}
		pool_set_threads(1);
		graph_free(g);
	}
}

int16_t ref_quantize(double x, double scale, double u)
{
	double y = x / scale;
	if (isnan(y))
		return 0;
	y = u < 0 ? nearbyint(y) : copysign(floor(fabs(y) + u), y);
	return (int16_t)(y > 32767 ? 32767 : y < -32767 ? -32767 : y);
}

/* DietAdam over a dense gradient: a full second moment (q of 2 x 8192 + 37, momentum on, edge
 * values in g, m and v) and a factored one (q 37 x 443, no momentum), each with g float32, float64,
 * float16 and bfloat16, rounded to nearest and stochastically, at 1 and 3 threads; the expected q',
 * m' and v' (vr', vc') from diet.h's formulas, written here, the uniforms Philox's k-th for
 * element k under the node's key. */
Test(exec, diet_adam_matches_its_formula_bit_for_bit)
{
	enum { N = 2 * 8192 + 37, R = 37, C = 443 }; /* R C <= N */
	static const int gdt[4] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
	static const char *const gname[4] = {"float32", "float64", "float16", "bfloat16"};
	static int16_t q[N];
	static float m[N], v[N], vr[R], vc[C];
	static double gd[N], vrd[R], vcd[C];
	static uint16_t gh[N];
	static float gf[N];
	const double b1 = 0.875, b2 = 0.75, eps = 9.5367431640625e-07, lr = 0.5, scale = 0.0078125, t = 3;
	for (int i = 0; i < N; i++) {
		q[i] = (int16_t)(i % 7 == 0 ? 32767 : i % 7 == 1 ? -32767 : i % 7 == 2 ? 0 : (i * 37) % 2001 - 1000);
		m[i] = (float)opt_edges[(i * 3 + 1) % OPT_NE];
		v[i] = (float)fabs(opt_edges[(i * 5 + 2) % OPT_NE]);
	}
	for (int i = 0; i < R; i++)
		vrd[i] = vr[i] = (float)(i % 5) * 0.25f;
	for (int j = 0; j < C; j++)
		vcd[j] = vc[j] = j % 3 ? (float)(j % 11) * 0.125f : 0.0f;
	for (int fac = 0; fac < 3; fac++) /* full; factored with float32 moments; with float64 ones */
		for (int d = 0; d < 4; d++)
			for (int st = 0; st < 2; st++) {
				int64_t n = fac ? R * C : N;
				for (int64_t i = 0; i < n; i++) { /* the factored case: ordinary values, signed zeros, subnormals */
					double e = fac ? (i % 13 == 0 ? -0.0 : i % 13 == 1 ? 1e-41 : (double)((i * 7919) % 1999 - 999) * 0.0012345 + (double)i * 1e-9)
						       : opt_edges[(i * 7 + 5) % OPT_NE];
					gd[i] = e;
					gf[i] = (float)e;
				}
				struct rtensor gt = rt_over(gdt[d], fac ? 2 : 1, fac ? (const int64_t[]){R, C} : (const int64_t[]){N},
							    d == 0 ? (void *)gf : d == 1 ? (void *)gd : (void *)gh);
				for (int64_t i = 0; d >= 2 && i < n; i++)
					rt_set(&gt, i, gd[i]);
				char yaml[2048];
				snprintf(yaml, sizeof yaml,
					 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
					 "inputs: [{name: q, dtype: int16, shape: %s}, {name: g, dtype: %s, shape: %s}, %s]\n"
					 "params:\n  - {name: t, dtype: int64, shape: [], data: [3]}\n"
					 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: %s,\n"
					 "     attrs: {beta1: %s, beta2: 0.75, epsilon: 9.5367431640625e-07, lr: 0.5, schedule: none,"
					 " warmup: 2.0, scale: 0.0078125, round: %s}}\n"
					 "outputs: %s\n",
					 fac ? "[37, 443]" : "[16421]", gname[d], fac ? "[37, 443]" : "[16421]",
					 fac == 2 ? "{name: vr, dtype: float64, shape: [37]}, {name: vc, dtype: float64, shape: [443]}"
					 : fac ? "{name: vr, dtype: float32, shape: [37]}, {name: vc, dtype: float32, shape: [443]}"
					     : "{name: m, dtype: float32, shape: [16421]}, {name: v, dtype: float32, shape: [16421]}",
					 fac ? "[q, g, t, '', vr, vc]" : "[q, g, t, m, v]", fac ? "[qn, '', vrn, vcn]" : "[qn, mn, vn]",
					 fac ? "0.0" : "0.875", st ? "stochastic" : "nearest",
					 fac ? "[{name: qn}, {name: vrn}, {name: vcn}]" : "[{name: qn}, {name: mn}, {name: vn}]");
				struct graph *g = load_text("diet_adam.yaml", yaml);
				const int64_t dn[1] = {N}, dq[2] = {R, C}, dr[1] = {R}, dc[1] = {C};
				struct rtensor ins[4] = {rt_over(DT_INT16, fac ? 2 : 1, fac ? dq : dn, q), gt,
							 fac == 2 ? rt_over(DT_DOUBLE, 1, dr, vrd)
							 : fac	  ? rt_over(DT_FLOAT, 1, dr, vr)
								  : rt_over(DT_FLOAT, 1, dn, m),
							 fac == 2 ? rt_over(DT_DOUBLE, 1, dc, vcd)
							 : fac	  ? rt_over(DT_FLOAT, 1, dc, vc)
								  : rt_over(DT_FLOAT, 1, dn, v)};
				const char *names[2][4] = {{"q", "g", "m", "v"}, {"q", "g", "vr", "vc"}};
				/* the reference: g at float32 precision; the factored moments summed in order */
				static double gr[N], want_v[N], want_m[N], rr[R], cc[C];
				double cmean = 0;
				for (int64_t i = 0; i < n; i++)
					gr[i] = d == 0 ? gf[i] : d == 1 ? (double)(float)gd[i] : rt_get(&gt, i);
				if (fac) {
					for (int i = 0; i < R; i++) {
						double s = 0;
						for (int j = 0; j < C; j++)
							s += gr[i * C + j] * gr[i * C + j];
						rr[i] = b2 * vr[i] + (1 - b2) * s / C; /* stored float32, or float64 */
						rr[i] = fac == 2 ? rr[i] : (float)rr[i];
					}
					for (int j = 0; j < C; j++) {
						double s = 0;
						for (int i = 0; i < R; i++)
							s += gr[i * C + j] * gr[i * C + j];
						cc[j] = b2 * vc[j] + (1 - b2) * s / R;
						cc[j] = fac == 2 ? cc[j] : (float)cc[j];
					}
				}
				double bc = 1 - pow(b2, t), lrt = lr * fmin(t / 2.0, 1);
				for (int j = 0; fac && j < C; j++)
					cmean += sqrt(cc[j] / bc) + eps;
				cmean /= C;
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct exec_opts xo = {.inputs = ins, .input_names = names[fac > 0], .n_inputs = 4};
					struct gd_err e = {0};
					struct exec *x = exec_run(g, &xo, NULL, &e);
					cr_assert(x, "%s: %s", gname[d], e.msg);
					const struct node *up = NULL;
					for (uint32_t k = 0; k < g->n_nodes; k++)
						if (g->nodes[k]->op == OP_DIET_ADAM)
							up = g->nodes[k];
					cr_assert(up);
					uint64_t key = exec_node_seed(x, up) ^ ((uint64_t)t * 0x9e3779b97f4a7c15ull);
					const struct rtensor *qn = exec_value(x, strmap_get(&g->names, "qn"));
					const struct rtensor *o1 = exec_value(x, strmap_get(&g->names, fac ? "vrn" : "mn"));
					const struct rtensor *o2 = exec_value(x, strmap_get(&g->names, fac ? "vcn" : "vn"));
					int64_t bad = 0;
					for (int64_t k = 0; k < n; k++) {
						double u = gr[k], denom;
						if (fac) {
							denom = (sqrt(rr[k / C] / bc) + eps) * (sqrt(cc[k % C] / bc) + eps) / cmean;
						} else {
							u = want_m[k] = b1 * m[k] + (1 - b1) * gr[k];
							want_v[k] = b2 * v[k] + (1 - b2) * gr[k] * gr[k];
							denom = sqrt(want_v[k] / bc) + eps;
							bad += !same_bits(rt_get(o1, k), want_m[k], 0) + !same_bits(rt_get(o2, k), want_v[k], 0);
						}
						int16_t want = ref_quantize(q[k] * scale - lrt * u / denom, scale,
									    st ? philox_uniform(key, (uint64_t)k) : -1);
						int16_t got = ((const int16_t *)qn->data)[k];
						if (got != want && bad++ < 5)
							cr_expect(0, "%s, %s, %s, %d threads: q'[%lld] %d, not %d", fac == 2 ? "factored float64" : fac ? "factored" : "full",
								  gname[d], st ? "stochastic" : "nearest", th, (long long)k, got, want);
					}
					for (int i = 0; fac && i < R + C; i++) {
						double got = rt_get(i < R ? o1 : o2, i < R ? i : i - R), want = i < R ? rr[i] : cc[i - R];
						if (!same_bits(got, want, fac == 2) && bad++ < 5)
							cr_expect(0, "%s, %s, %d threads: %s'[%d] %.9g, not %.9g", gname[d],
								  st ? "stochastic" : "nearest", th, i < R ? "vr" : "vc", i < R ? i : i - R,
								  got, want);
					}
					cr_expect_eq(bad, 0, "%s, %s, %s, %d threads: %lld values differ", fac == 2 ? "factored float64" : fac ? "factored" : "full",
						     gname[d], st ? "stochastic" : "nearest", th, (long long)bad);
					exec_free(x);
				}
				pool_set_threads(1);
				graph_free(g);
			}
}

/* #52 norms: InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
 * LpNormalization and LRN on float32 and float64 (their typed loops, norm_stat.c) against the
 * walks written here as norm.c's per-element kernels compute them: statistics in double, each sum
 * serial from 0 in index order, the result rounded once to the dtype; bit for bit (a NaN for a
 * NaN), over rf_value's specials (NaN, +-inf, +-0, subnormals, huge), at 1 and 3 threads, at sizes
 * that leave remainders of the kernels' eight chains and 256-wide blocks, and of 0 and 1 elements. */

/* a plane's (n elements from v, step 1) mean and population variance about it, serially */
static double nm_moments(const double *v, int64_t n, double *var)
{
	double s = 0, q = 0;
	for (int64_t j = 0; j < n; j++)
		s += v[j];
	double m = s / (double)n;
	for (int64_t j = 0; j < n; j++)
		q += (v[j] - m) * (v[j] - m);
	*var = q / (double)n;
	return m;
}

/* the reference of one op over v (shape dims, nd axes) into r; attributes as the cases give them */
struct nm_case {
	const char *op;
	int nd;
	int64_t dims[4];
	int64_t k;         /* GroupNorm: groups; LpNorm: p; LRN: size */
	int64_t axis;      /* LpNorm's axis; LRN's beta and bias: nm_lrn[axis] */
	int per_channel;   /* GroupNorm's scale: per channel (C), else per group */
	const char *axes;  /* MVN's axes ("" default), as a YAML list */
	uint8_t red[4];    /* MVN: the reduced axes */
};

/* LRN's beta and bias: float32 results by the roots of beta 0.75, 0.5 and 1 (bias 0: d = 0 in
 * rows of zeros), the others by pow */
static const double nm_lrn[][2] = {{0.6, 1.5}, {0.75, 1.5}, {0.75, 0}, {0.5, 2}, {1, 1.5}};

static void nm_reference(const struct nm_case *c, const double *v, const double *sc, const double *bi, double *r)
{
	int64_t n = 1, N = c->dims[0], C = c->nd > 1 ? c->dims[1] : 1;
	for (int i = 0; i < c->nd; i++)
		n *= c->dims[i];
	int64_t inner = N * C != 0 ? n / (N * C) : 0;
	double eps = (double)1e-3f, alpha = (double)2e-2f, beta = (double)(float)nm_lrn[c->axis][0], bias = nm_lrn[c->axis][1];
	if (!strcmp(c->op, "InstanceNormalization") || !strcmp(c->op, "GroupNormalization")) {
		int64_t G = c->op[0] == 'I' ? C : c->k, len = C / G * inner;
		for (int64_t p = 0; len && p < N * G; p++) {
			double var, m = nm_moments(v + p * len, len, &var), inv = 1 / sqrt(var + eps);
			for (int64_t j = 0; j < len; j++) {
				int64_t e = c->op[0] == 'I' ? p % C : c->per_channel ? p % G * (C / G) + j / inner : p % G;
				r[p * len + j] = (v[p * len + j] - m) * inv * sc[e] + bi[e];
			}
		}
	} else if (!strcmp(c->op, "LpNormalization")) {
		int64_t len = c->dims[c->axis], in = 1;
		for (int i = (int)c->axis + 1; i < c->nd; i++)
			in *= c->dims[i];
		for (int64_t o = 0; len && o < n / (len * in); o++)
			for (int64_t t = 0; t < in; t++) {
				double z = 0;
				for (int64_t j = 0; j < len; j++)
					z += c->k == 1 ? fabs(v[(o * len + j) * in + t]) : v[(o * len + j) * in + t] * v[(o * len + j) * in + t];
				z = c->k == 1 ? z : sqrt(z);
				for (int64_t j = 0; j < len; j++)
					r[(o * len + j) * in + t] = v[(o * len + j) * in + t] / z;
			}
	} else if (!strcmp(c->op, "LRN")) {
		for (int64_t i = 0; i < n; i++) {
			int64_t ch = i / inner % C, at = i - ch * inner;
			double s = 0;
			for (int64_t k = ch - (c->k - 1) / 2; k <= ch + c->k / 2; k++)
				if (k >= 0 && k < C)
					s += v[at + k * inner] * v[at + k * inner];
			r[i] = v[i] / pow(bias + alpha / (double)c->k * s, beta);
		}
	} else { /* MVN: each sum over the elements whose kept indices match, in index order */
		int64_t cnt = 1, idx[4], jdx[4];
		for (int d = 0; d < c->nd; d++)
			cnt *= c->red[d] ? c->dims[d] : 1;
		for (int64_t i = 0; i < n; i++) {
			double s = 0, q = 0;
			for (int d = c->nd - 1, t = (int)i; d >= 0; d--)
				idx[d] = t % c->dims[d], t /= (int)c->dims[d];
			for (int64_t k = 0; k < n; k++) {
				int match = 1;
				for (int d = c->nd - 1, t = (int)k; d >= 0; d--)
					jdx[d] = t % c->dims[d], t /= (int)c->dims[d];
				for (int d = 0; d < c->nd; d++)
					match &= c->red[d] || jdx[d] == idx[d];
				if (match)
					s += v[k], q += v[k] * v[k];
			}
			double m = s / (double)cnt, var = q / (double)cnt - m * m;
			r[i] = (v[i] - m) / (sqrt(var > 0 ? var : 0) + 1e-9);
		}
	}
}

Test(exec, norms_match_the_serial_walks_bit_for_bit)
{
	static const struct nm_case cases[] = {
		{"InstanceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 4, {3, 5, 4, 9}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {2, 9, 1}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {1, 17, 33}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {0, 4, 5}, 0, 0, 0, "", {0}},
		{"GroupNormalization", 4, {2, 6, 5, 7}, 3, 0, 0, "", {0}},
		{"GroupNormalization", 4, {2, 6, 5, 7}, 3, 0, 1, "", {0}},
		{"GroupNormalization", 4, {4, 12, 3, 3}, 4, 0, 1, "", {0}},
		{"GroupNormalization", 3, {3, 6, 1}, 6, 0, 0, "", {0}},
		{"LpNormalization", 2, {9, 37}, 2, 1, 0, "", {0}},
		{"LpNormalization", 2, {17, 5}, 1, 1, 0, "", {0}},
		{"LpNormalization", 3, {3, 11, 2}, 2, 1, 0, "", {0}},
		{"LpNormalization", 3, {2, 5, 300}, 1, 1, 0, "", {0}},
		{"LpNormalization", 3, {2, 7, 259}, 2, 0, 0, "", {0}},
		{"LpNormalization", 2, {1, 1}, 2, 1, 0, "", {0}},
		{"LRN", 4, {2, 7, 5, 61}, 3, 0, 0, "", {0}},
		{"LRN", 4, {2, 7, 5, 61}, 4, 1, 0, "", {0}},
		{"LRN", 3, {1, 3, 300}, 1, 2, 0, "", {0}},
		{"LRN", 3, {2, 12, 1}, 9, 3, 0, "", {0}},
		{"LRN", 4, {2, 5, 3, 97}, 5, 4, 0, "", {0}},
		{"LRN", 4, {2, 5, 3, 97}, 5, 1, 0, "", {0}},
		{"LRN", 4, {1, 6, 16, 17}, 2, 2, 0, "", {0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "", {1, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {3, 10, 4, 5}, 0, 0, 0, "", {1, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[2, 3]", {0, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {3, 9, 2, 5}, 0, 0, 0, "[-1]", {0, 0, 0, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[0, 1]", {1, 1, 0, 0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[1]", {0, 1, 0, 0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[0, 2]", {1, 0, 1, 0}},
		{"MeanVarianceNormalization", 4, {1, 4, 1, 6}, 0, 0, 0, "[0, 1, 3]", {1, 1, 0, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 4, 5}, 0, 0, 0, "[0, 1, 2, 3]", {1, 1, 1, 1}},
		{"MeanVarianceNormalization", 4, {1, 1, 1, 1}, 0, 0, 0, "", {1, 0, 1, 1}},
	};
	enum { MAXN = 2 * 7 * 5 * 61 };
	static double v[MAXN], p64[MAXN], r[MAXN];
	static float p32[MAXN];
	for (int th = 1; th <= 3; th += 2) {
		pool_set_threads(th);
		for (int f64 = 0; f64 < 2; f64++)
			for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
				const struct nm_case *c = &cases[ci];
				int64_t n = 1, C = c->dims[1], ns = c->op[0] == 'G' && !c->per_channel ? c->k : c->op[0] == 'G' || c->op[0] == 'I' ? C : 0;
				for (int i = 0; i < c->nd; i++)
					n *= c->dims[i];
				uint32_t s = (uint32_t)ci * 31 + 7;
				for (int64_t i = 0; i < n; i++) {
					p64[i] = rf_value(&s, i, c->dims[c->nd - 1] * (ci % 2 ? c->dims[c->nd - 2] : 1));
					if (fabs(p64[i]) > 1e-3 && fabs(p64[i]) < 1e3) /* every mantissa bit used: sums inexact */
						p64[i] *= 1 + 0.01 * sin((double)i);
					p32[i] = (float)p64[i];
					v[i] = f64 ? p64[i] : (double)p32[i];
				}
				double sc[32], bi[32];
				char extra[1000] = "", list[2][400] = {"", ""}, node[400];
				for (int64_t e = 0; e < ns; e++) {
					sc[e] = 0.75 + 0.5 * (double)e, bi[e] = e % 3 ? -0.25 * (double)e : 0.0;
					if (!f64)
						sc[e] = (float)sc[e], bi[e] = (float)bi[e];
					snprintf(list[0] + strlen(list[0]), 400 - strlen(list[0]), "%s%.17g", e ? ", " : "", sc[e]);
					snprintf(list[1] + strlen(list[1]), 400 - strlen(list[1]), "%s%.17g", e ? ", " : "", bi[e]);
				}
				if (c->op[0] == 'I' || c->op[0] == 'G') {
					snprintf(extra, sizeof extra,
						 "params: [{name: s, dtype: %s, shape: [%lld], data: [%s]}, {name: b, dtype: %s, shape: [%lld], data: [%s]}]\n",
						 f64 ? "float64" : "float32", (long long)ns, list[0], f64 ? "float64" : "float32",
						 (long long)ns, list[1]);
					snprintf(node, sizeof node,
						 "{op: %s, inputs: [x, s, b], outputs: [y], attrs: {epsilon: 0.001%s%.0lld}}", c->op,
						 c->op[0] == 'G' ? ", num_groups: " : "", c->op[0] == 'G' ? (long long)c->k : 0LL);
				} else if (c->op[0] == 'L' && c->op[1] == 'p')
					snprintf(node, sizeof node, "{op: LpNormalization, inputs: [x], outputs: [y], attrs: {p: %lld, axis: %lld}}",
						 (long long)c->k, (long long)c->axis);
				else if (c->op[0] == 'L')
					snprintf(node, sizeof node,
						 "{op: LRN, inputs: [x], outputs: [y], attrs: {size: %lld, alpha: 0.02, beta: %g, bias: %g}}",
						 (long long)c->k, nm_lrn[c->axis][0], nm_lrn[c->axis][1]);
				else
					snprintf(node, sizeof node, "{op: MeanVarianceNormalization, inputs: [x], outputs: [y]%s%s%s}",
						 *c->axes ? ", attrs: {axes: " : "", c->axes, *c->axes ? "}" : "");
				struct graph *g;
				const struct rtensor *y;
				struct exec *x = rf_run(node, extra, f64, c->nd, c->dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
				nm_reference(c, v, sc, bi, r);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++)
					if (!rf_same_nan(y, i, r[i], f64, 1) && !wrong++)
						first = i;
				cr_expect_eq(wrong, 0, "%s case %zu %s, %d threads: %lld of %lld differ, the first #%lld: %a, not %a",
					     c->op, ci, f64 ? "float64" : "float32", th, (long long)wrong, (long long)n, (long long)first,
					     first < 0 ? 0 : rt_get(y, first), first < 0 ? 0 : r[first]);
				exec_free(x);
				graph_free(g);
			}
	}
	pool_set_threads(1);
}

/* #52 adam: DietAdam's factored moments (8-row tiles, column strips over the pool) and
 * ReduceLogSumExp over a strided axis (runs of outputs side by side), against references written
 * here. */

/* DietAdam, factored second moment (float32 and float64), dense float32 g, three steps (q', vr',
 * vc' fed back, t = 1, 2, 3) on 45 x 1027 (5 blocks of 8 rows and 5 rows more, 1027 columns: 4 strips of 256 and 3 columns
 * more) and 7 x 19 (no whole block) with edge values in g; stochastic rounding; at 1 thread (one
 * pass) and 3 (rows and strips over the pool): every q', vr' and vc' bit against the float64
 * formulas, each row's and column's sum of squares in index order. */
/* A factored moment: b2 prev + (1 - b2) mean of p[k st]^2 over k < n, the squares summed in index
 * order in double; stored float32 unless f64. */
static double ref_moment(const float *p, int n, int st, double prev, double b2, int f64)
{
	double s = 0;
	for (int k = 0; k < n; k++)
		s += (double)p[k * st] * p[k * st];
	double v = b2 * prev + (1 - b2) * s / n;
	return f64 ? v : (float)v;
}

/* The key of step t's uniforms: the run's seed of g's DietAdam node, mixed with t as diet.c does. */
static uint64_t diet_step_key(struct exec *x, const struct graph *g, int64_t t)
{
	const struct node *up = NULL;
	for (uint32_t k = 0; k < g->n_nodes; k++)
		if (g->nodes[k]->op == OP_DIET_ADAM)
			up = g->nodes[k];
	cr_assert(up);
	return exec_node_seed(x, up) ^ ((uint64_t)t * 0x9e3779b97f4a7c15ull);
}

Test(exec, adam_factored_diet_adam_steps_match_a_float64_reference)
{
	enum { RM = 45, CM = 1027 };
	static const int shapes[2][2] = {{RM, CM}, {7, 19}};
	static int16_t q[2][RM * CM];
	static float g[RM * CM];
	static double vr[2][RM], vc[2][CM]; /* float32 moments: float32 values */
	static double rr[RM], cc[CM];
	const double b2 = 0.75, eps = 9.5367431640625e-07, lr = 0.5, scale = 0.0078125;
	for (int sh = 0; sh < 4; sh++) {
		int R = shapes[sh % 2][0], C = shapes[sh % 2][1], f64 = sh >= 2;
		const char *mt = f64 ? "float64" : "float32";
		char yaml[2048];
		snprintf(yaml, sizeof yaml,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
			 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: g, dtype: float32, shape: [%d, %d]},"
			 " {name: t, dtype: int64, shape: []}, {name: vr, dtype: %s, shape: [%d]},"
			 " {name: vc, dtype: %s, shape: [%d]}]\n"
			 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', vr, vc],"
			 " outputs: [qn, '', vrn, vcn],\n     attrs: {beta2: 0.75, epsilon: 9.5367431640625e-07, lr: 0.5,"
			 " schedule: none, warmup: 2.0, scale: 0.0078125, round: stochastic}}\n"
			 "outputs: [{name: qn}, {name: vrn}, {name: vcn}]\n",
			 R, C, R, C, mt, R, mt, C);
		struct graph *gr = load_text("diet_steps.yaml", yaml);
		for (int th = 0; th < 2; th++) { /* the state at 1 and at 3 threads: q[th], vr[th], vc[th] */
			for (int k = 0; k < R * C; k++)
				q[th][k] = (int16_t)((k * 37) % 2001 - 1000);
			for (int i = 0; i < R; i++)
				vr[th][i] = (float)(i % 5) * 0.25f;
			for (int j = 0; j < C; j++)
				vc[th][j] = (float)(j % 11) * 0.125f;
		}
		for (int64_t t = 1; t <= 3; t++) {
			for (int k = 0; k < R * C; k++) /* ordinary values, signed zeros, subnormals; edges in the small one */
				g[k] = sh % 2 && k % 5 == 0 ? (float)opt_edges[(k / 5 + (int)t) % OPT_NE]
				       : k % 13 == 0	? -0.0f
				       : k % 13 == 1	? 1e-41f
							: (float)((double)((k * 7919 + (int)t * 101) % 1999 - 999) * 0.0012345);
			double bc = 1 - pow(b2, (double)t), lrt = lr * fmin((double)t / 2.0, 1), cmean = 0;
			for (int th = 0; th < 2; th++) {
				const int64_t dq[2] = {R, C}, dr[1] = {R}, dc[1] = {C};
				int64_t tv = t;
				static float vrf[RM], vcf[CM];
				for (int i = 0; i < R + C; i++)
					*(i < R ? &vrf[i] : &vcf[i - R]) = (float)(i < R ? vr[th][i] : vc[th][i - R]);
				struct rtensor ins[5] = {rt_over(DT_INT16, 2, dq, q[th]), rt_over(DT_FLOAT, 2, dq, g),
							 rt_over(DT_INT64, 0, dq, &tv),
							 f64 ? rt_over(DT_DOUBLE, 1, dr, vr[th]) : rt_over(DT_FLOAT, 1, dr, vrf),
							 f64 ? rt_over(DT_DOUBLE, 1, dc, vc[th]) : rt_over(DT_FLOAT, 1, dc, vcf)};
				const char *names[5] = {"q", "g", "t", "vr", "vc"};
				/* the reference from this thread count's state (the same as the other's if all agree) */
				for (int i = 0; i < R; i++)
					rr[i] = ref_moment(g + i * C, C, 1, vr[th][i], b2, f64);
				cmean = 0;
				for (int j = 0; j < C; j++) {
					cc[j] = ref_moment(g + j, R, C, vc[th][j], b2, f64);
					cmean += sqrt(cc[j] / bc) + eps;
				}
				cmean /= C;
				pool_set_threads(th ? 3 : 1);
				struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = 5};
				struct gd_err e = {0};
				struct exec *x = exec_run(gr, &xo, NULL, &e);
				cr_assert(x, "%s", e.msg);
				uint64_t key = diet_step_key(x, gr, t);
				const struct rtensor *qn = exec_value(x, strmap_get(&gr->names, "qn"));
				const struct rtensor *vrn = exec_value(x, strmap_get(&gr->names, "vrn"));
				const struct rtensor *vcn = exec_value(x, strmap_get(&gr->names, "vcn"));
				int64_t bad = 0;
				for (int k = 0; k < R * C; k++) {
					double denom = (sqrt(rr[k / C] / bc) + eps) * (sqrt(cc[k % C] / bc) + eps) / cmean;
					int16_t want = ref_quantize(q[th][k] * scale - lrt * (double)g[k] / denom, scale,
								    philox_uniform(key, (uint64_t)k));
					int16_t got = ((const int16_t *)qn->data)[k];
					if (got != want && bad++ < 5)
						cr_expect(0, "%dx%d %s step %lld, %d threads: q'[%d] %d, not %d", R, C, mt, (long long)t,
							  th ? 3 : 1, k, got, want);
				}
				for (int i = 0; i < R + C; i++) {
					double got = rt_get(i < R ? vrn : vcn, i < R ? i : i - R), want = i < R ? rr[i] : cc[i - R];
					if (!same_bits(got, want, f64) && bad++ < 5)
						cr_expect(0, "%dx%d %s step %lld, %d threads: %s'[%d] %.17g, not %.17g", R, C, mt, (long long)t,
							  th ? 3 : 1, i < R ? "vr" : "vc", i < R ? i : i - R, got, want);
				}
				cr_expect_eq(bad, 0, "%dx%d %s step %lld, %d threads: %lld values differ", R, C, mt, (long long)t, th ? 3 : 1,
					     (long long)bad);
				memcpy(q[th], qn->data, sizeof(int16_t) * (size_t)(R * C)); /* the next step's state */
				for (int i = 0; i < R + C; i++)
					*(i < R ? &vr[th][i] : &vc[th][i - R]) = rt_get(i < R ? vrn : vcn, i < R ? i : i - R);
				exec_free(x);
			}
			cr_expect(!memcmp(q[0], q[1], sizeof(int16_t) * (size_t)(R * C)) && !memcmp(vr[0], vr[1], sizeof(double) * (size_t)R) &&
				  !memcmp(vc[0], vc[1], sizeof(double) * (size_t)C),
				  "%dx%d %s step %lld: 1 and 3 threads differ", R, C, mt, (long long)t);
		}
		pool_set_threads(1);
		graph_free(gr);
	}
}

/* ReduceLogSumExp of x (3, 37, 300), float32 and float64, over axes [1] (strided, 300 outputs a
 * line: runs of 256 and 44), [0] (strided by 11,100), [2] (the last), [0, 1] and [1, 2], keepdims 0
 * and 1, at 1 and 3 threads, with lines all -inf (one -inf line, x[:, :, 5] and x[1, 2, :]), NaN,
 * +inf, and values near float32's largest. Each output bit for bit against the walk written here
 * (the maximum, then exp(x - m): vm_expf for float32, libm's exp for float64, summed in double in
 * index order, but float32's contiguous rows (axes [2], [1, 2]) by lse_lanes_f32; m + log(sum), m
 * where m is infinite), and against the float64 definition
 * m + log(sum exp(x - m)) to 2 ulp + 2^-22 (float32: vm_expf's 1.1 ulp) or 1e-15 relative + 1e-15. */
Test(exec, adam_reduce_log_sum_exp_matches_its_definition)
{
	enum { A = 3, B = 37, C = 300, N = A * B * C };
	static float xf[N];
	static double xd[N];
	for (int e = 0; e < N; e++) {
		int a = e / (B * C), b = e / C % B, c = e % C;
		double v = (double)((e * 7919) % 2003 - 1001) * 0.01 + (c % 7) * 0.003;
		v = c == 5 || (a == 1 && b == 2) ? -INFINITY
		    : c == 7 && b == 3		 ? NAN
		    : c == 9 && b == 10		 ? INFINITY
		    : c % 17 == 11		 ? 3.0e38 - (double)(e % 97) * 1e36
		    : c % 17 == 12 && b == 4	 ? -INFINITY
						 : v;
		xd[e] = v;
		xf[e] = (float)v;
	}
	static const char *const axes[5] = {"[1]", "[0]", "[2]", "[0, 1]", "[1, 2]"};
	static const int red[5][3] = {{0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {1, 1, 0}, {0, 1, 1}};
	const int64_t dims[3] = {A, B, C};
	for (int f64 = 0; f64 < 2; f64++)
		for (int ax = 0; ax < 5; ax++)
			for (int keep = 0; keep < 2; keep++) {
				char yaml[1024];
				snprintf(yaml, sizeof yaml,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [3, 37, 300]}]\n"
					 "nodes:\n  - {op: ReduceLogSumExp, inputs: [x], outputs: [y], name: op,"
					 " attrs: {axes: %s, keepdims: %d}}\noutputs: [{name: y}]\n",
					 f64 ? "float64" : "float32", axes[ax], keep);
				struct graph *g = load_text("lse.yaml", yaml);
				struct rtensor in = rt_over(f64 ? DT_DOUBLE : DT_FLOAT, 3, dims, f64 ? (void *)xd : (void *)xf);
				const char *names[1] = {"x"};
				/* the outputs in index order of the kept dimensions; each output's elements in index order */
				int64_t kd[3], on = 1, len = 1;
				for (int d = 0; d < 3; d++) {
					kd[d] = red[ax][d] ? 1 : dims[d];
					on *= kd[d];
					len *= red[ax][d] ? dims[d] : 1;
				}
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct exec_opts xo = {.inputs = &in, .input_names = names, .n_inputs = 1};
					struct gd_err e = {0};
					struct exec *x = exec_run(g, &xo, NULL, &e);
					cr_assert(x, "%s", e.msg);
					const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y"));
					cr_assert_eq(y->numel, on);
					cr_assert_eq(y->ndim, keep ? 3 : 3 - (int)(red[ax][0] + red[ax][1] + red[ax][2]));
					int64_t bad = 0, far = 0;
					for (int64_t o = 0; o < on; o++) {
						int64_t oi[3] = {o / (kd[1] * kd[2]), o / kd[2] % kd[1], o % kd[2]}, ne = 0;
						static int64_t el[B * C];
						for (int64_t a = oi[0]; a < (red[ax][0] ? A : oi[0] + 1); a++) /* in index order */
							for (int64_t b = oi[1]; b < (red[ax][1] ? B : oi[1] + 1); b++)
								for (int64_t c = oi[2]; c < (red[ax][2] ? C : oi[2] + 1); c++)
									el[ne++] = (a * B + b) * C + c;
						cr_assert_eq(ne, len);
						double m = -INFINITY, s = 0, s64 = 0;
						for (int64_t k = 0; k < ne; k++) {
							double v = f64 ? xd[el[k]] : xf[el[k]];
							m = v > m || isnan(v) ? v : m;
						}
						for (int64_t k = 0; k < ne && !isinf(m); k++) {
							s += f64 ? exp(xd[el[k]] - m) : (double)vm_expf(xf[el[k]] - (float)m);
							s64 += exp((f64 ? xd[el[k]] : (double)xf[el[k]]) - m);
						}
						if (!f64 && red[ax][2] && !isinf(m) && !isnan(m)) /* contiguous rows: in lanes */
							s = lse_lanes_f32(xf + el[0], ne, (float)m);
						double want = isinf(m) ? m : m + log(s), def = isinf(m) ? m : m + log(s64);
						double got = rt_get(y, o);
						if (!same_bits(got, want, f64) && bad++ < 3)
							cr_expect(0, "%s axes %s keepdims %d, %d threads: y[%lld] %.17g, not %.17g",
								  f64 ? "float64" : "float32", axes[ax], keep, th, (long long)o, got, want);
						double tol = f64 ? 1e-15 * fabs(def) + 1e-15
								 : 2 * (nextafterf((float)fabs(def), INFINITY) - (float)fabs(def)) + 0x1p-22;
						if (isnan(def) ? !isnan(got) : isinf(def) ? got != def : !(fabs(got - def) <= tol))
							far++;
					}
					cr_expect_eq(bad, 0, "%s axes %s keepdims %d, %d threads: %lld outputs differ",
						     f64 ? "float64" : "float32", axes[ax], keep, th, (long long)bad);
					cr_expect_eq(far, 0, "%s axes %s keepdims %d, %d threads: %lld outputs off the definition",
						     f64 ? "float64" : "float32", axes[ax], keep, th, (long long)far);
					exec_free(x);
				}
				pool_set_threads(1);
				graph_free(g);
			}
}

/* #52 topklse: TopK over contiguous float32 and float64 lanes (axis 1 of (R, len)), whose runs are
 * passed over by vector compares of the values against the k-th (or, before k are held, a floor
 * from pieces' highest), against a stable sort written here: NaN above every number and every NaN
 * one value, -0 equal to +0, ties by index; largest and smallest, sorted 0 and 1, at 1 and 3
 * threads (the same bits). The indices and each value's bits (the input element's: a NaN's payload
 * and sign, a zero's sign). Lanes: k from 1 to 65 (the floor is taken for len >= 16 k and k <= 64:
 * both sides), lengths off the 16 and 64 a vector and a block hold, rows of ties among few values,
 * rows sprinkled with NaNs of both signs, +-0, +-inf and subnormals, rows all NaN, rows with a few
 * numbers among NaNs, ascending and descending rows (every element a new best), one value with
 * -0 and +0 alternating. */
static struct {
	const void *p;
	int f64, largest;
} tk_lane;

static double tk_at(const void *p, int f64, int64_t i)
{
	return f64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

/* a before b in TopK's order (largest first, or smallest), ties by index */
static int tk_cmp(const void *pa, const void *pb)
{
	int64_t i = *(const int64_t *)pa, j = *(const int64_t *)pb;
	double a = tk_at(tk_lane.p, tk_lane.f64, i), b = tk_at(tk_lane.p, tk_lane.f64, j);
	int up = isnan(a) || isnan(b) ? isnan(a) - isnan(b) : (a > b) - (a < b); /* a above b: 1 */
	if (up)
		return tk_lane.largest ? -up : up;
	return (i > j) - (i < j);
}

static double tk_value(uint64_t *s, int row, int64_t j, int64_t len)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	uint64_t r = *s >> 33;
	double nan_p = r % 3 ? NAN : -NAN;
	switch (row % 8) {
	case 0: /* ties among 37 values */
		return (double)(int)(r % 37) - 18.0;
	case 1: { /* specials among numbers */
		static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, 1e-310, -1e-310, 1e-40, -1e-40, 3e38, -3e38};
		return r % 13 == 0 ? nan_p : r % 13 < 4 ? sp[r / 13 % 10] : (double)(r % 20001) * 1e-3 - 10.0;
	}
	case 2: /* all NaN */
		return nan_p;
	case 3: /* a few numbers among NaNs */
		return r % 50 == 0 ? (double)(r % 7) - 3.0 : nan_p;
	case 4: /* ascending */
		return (double)j * 0.5 - 100.0;
	case 5: /* descending */
		return 100.0 - (double)j * 0.25;
	case 6: /* one value, -0 and +0 */
		return j % 2 ? -0.0 : 0.0;
	default: /* normal-like: the sum of four uniforms */
		return (double)((r & 255) + (r >> 8 & 255) + (r >> 16 & 255) + (r >> 24 & 255)) / 64.0 - 8.0 +
		       (j == len - 1 ? 9.0 : 0.0);
	}
}

Test(exec, topklse_topk_vector_filter_matches_a_stable_sort)
{
	static const struct { int64_t rows, len, k; } cases[] = {
		{16, 2000, 10}, {8, 1000, 1}, {8, 1031, 64}, {8, 1041, 65}, {8, 333, 40}, {8, 77, 9}, {8, 8, 1},
		{8, 17, 2},	{8, 129, 8},  {8, 4099, 3},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int largest = 0; largest < 2; largest++) {
				int64_t R = cases[c].rows, len = cases[c].len, k = cases[c].k, n = R * len;
				size_t es = f64 ? 8 : 4;
				char *xd = xmalloc((size_t)n * es), *got[2] = {NULL, NULL};
				int64_t *ref = xmalloc((size_t)n * sizeof *ref), *gi[2] = {NULL, NULL};
				uint64_t seed = 1234 + c * 4 + (uint64_t)f64 * 2 + (uint64_t)largest;
				for (int64_t r = 0; r < R; r++)
					for (int64_t j = 0; j < len; j++) {
						double v = tk_value(&seed, (int)r, j, len);
						if (f64)
							((double *)xd)[r * len + j] = v;
						else
							((float *)xd)[r * len + j] = (float)v;
					}
				tk_lane.f64 = f64;
				tk_lane.largest = largest;
				for (int64_t r = 0; r < R; r++) {
					for (int64_t j = 0; j < len; j++)
						ref[r * len + j] = j;
					tk_lane.p = xd + r * len * (int64_t)es;
					qsort(ref + r * len, (size_t)len, sizeof *ref, tk_cmp);
				}
				int64_t dims[2] = {R, len}, kd[1] = {1};
				struct rtensor in[2] = {rt_over(f64 ? DT_DOUBLE : DT_FLOAT, 2, dims, xd), rt_over(DT_INT64, 1, kd, &k)};
				const char *names[2] = {"x", "k"};
				for (int sorted = 0; sorted < 2; sorted++) {
					char yaml[600];
					snprintf(yaml, sizeof yaml,
						 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld]},"
						 " {name: k, dtype: int64, shape: [1]}]\nnodes:\n  - {op: TopK, inputs: [x, k],"
						 " outputs: [y, i], name: op, attrs: {axis: 1, largest: %d, sorted: %d}}\n"
						 "outputs: [{name: y}, {name: i}]\n",
						 f64 ? "float64" : "float32", (long long)R, (long long)len, largest, sorted);
					struct graph *g = load_text("topk.yaml", yaml);
					for (int t = 0; t < 2; t++) {
						pool_set_threads(t ? 3 : 1);
						struct exec_opts xo = {.inputs = in, .input_names = names, .n_inputs = 2};
						struct gd_err e = {0};
						struct exec *x = exec_run(g, &xo, NULL, &e);
						cr_assert(x, "%s", e.msg);
						const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y")),
								     *iy = exec_value(x, strmap_get(&g->names, "i"));
						cr_assert_eq(y->numel, R * k);
						cr_assert_eq(iy->numel, R * k);
						got[t] = xmalloc((size_t)(R * k) * es + 1);
						gi[t] = xmalloc((size_t)(R * k) * sizeof *gi[t] + 1);
						memcpy(got[t], y->data, (size_t)(R * k) * es);
						memcpy(gi[t], iy->data, (size_t)(R * k) * sizeof *gi[t]);
						exec_free(x);
					}
					pool_set_threads(1);
					graph_free(g);
					int64_t wrong = 0, first = -1;
					for (int64_t r = 0; r < R; r++)
						for (int64_t j = 0; j < k; j++) {
							int64_t at = r * k + j, want = ref[r * len + j];
							int ok = gi[0][at] == want &&
								 !memcmp(got[0] + at * (int64_t)es, xd + (r * len + want) * (int64_t)es, es);
							if (!ok && !wrong++)
								first = at;
						}
					cr_expect_eq(wrong, 0, "TopK %lldx%lld k %lld %s largest %d sorted %d: %lld wrong, the first #%lld (row %lld): index %lld, not %lld",
						     (long long)R, (long long)len, (long long)k, f64 ? "float64" : "float32", largest, sorted,
						     (long long)wrong, (long long)first, (long long)(first < 0 ? 0 : first / k),
						     (long long)(first < 0 ? 0 : gi[0][first]),
						     (long long)(first < 0 ? 0 : ref[first / k * len + first % k]));
					cr_expect(!memcmp(got[0], got[1], (size_t)(R * k) * es) &&
							  !memcmp(gi[0], gi[1], (size_t)(R * k) * sizeof *gi[0]),
						  "TopK %lldx%lld k %lld %s largest %d sorted %d: 1 and 3 threads differ", (long long)R,
						  (long long)len, (long long)k, f64 ? "float64" : "float32", largest, sorted);
					for (int t = 0; t < 2; t++) {
						xfree(got[t]);
						xfree(gi[t]);
					}
				}
				xfree(ref);
				xfree(xd);
			}
}

/* #52 lsegelu: ReduceLogSumExp's float32 rows (reduce.c's sum_exp_f32: the exponentials in 16
 * lanes of double sums) and Gelu's float32 forms (vmath.h's vm_geluf; activation.c's tanh form),
 * against references written here. */

/* 4096-element rows of one kind each (k = row mod 8): values of [-8, 8]; of [-200, 0] (most
 * exponentials below 2^-126, 0 in the sum); one value 0 among -inf; all equal (the sum is the
 * length); -inf alone; a NaN among values; +inf among values; values near +-3e38 (x - m overflows
 * to -inf) */
static float lsegelu_value(uint32_t *s, int64_t row, int64_t i)
{
	*s = *s * 1664525u + 1013904223u;
	double u = (double)(*s >> 8) / 16777216.0;
	switch (row % 8) {
	case 0: return (float)(16 * u - 8);
	case 1: return (float)(-200 * u);
	case 2: return i == 3 ? 0.0f : -INFINITY;
	case 3: return 1.25f;
	case 4: return -INFINITY;
	case 5: return i == 1 ? NAN : (float)u;
	case 6: return i == 2 ? INFINITY : (float)u;
	default: return i % 2 ? 3e38f : (float)(-3e38 * u);
	}
}

/* ReduceLogSumExp over the last axis of (rows, len), len from 1 to 4099 (the lanes' and the 64-element
 * blocks' remainders), at 1 and 3 threads: each output bit for bit against m + log(lse_lanes_f32)
 * (m itself where m is infinite or NaN), the same bits at both thread counts, and within 2 ulp +
 * 2^-22 of the float64 definition m + log(sum exp(x - m)) (vm_expf's 1.1 ulp) */
Test(exec, lsegelu_reduce_log_sum_exp_rows_match_their_lane_sums)
{
	static const int64_t lens[] = {1, 2, 15, 16, 17, 63, 64, 65, 100, 257, 4099}, rows = 19;
	static float xf[19 * 4099];
	for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
		int64_t len = lens[li], dims[2] = {rows, len};
		uint32_t s = (uint32_t)li * 977 + 1;
		for (int64_t r = 0; r < rows; r++)
			for (int64_t i = 0; i < len; i++)
				xf[r * len + i] = lsegelu_value(&s, r, i);
		float got[2][19];
		for (int t = 0; t < 2; t++) {
			pool_set_threads(t ? 3 : 1);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run("{op: ReduceLogSumExp, inputs: [x], outputs: [y], attrs: {axes: [-1], keepdims: 0}}",
						"", 0, 2, dims, xf, &g, &y);
			cr_assert_eq(y->numel, rows);
			memcpy(got[t], y->data, sizeof got[t]);
			exec_free(x);
			graph_free(g);
		}
		pool_set_threads(1);
		cr_expect(!memcmp(got[0], got[1], sizeof got[0]), "len %lld: 1 and 3 threads differ", (long long)len);
		for (int64_t r = 0; r < rows; r++) {
			const float *p = xf + r * len;
			float m = -INFINITY;
			for (int64_t i = 0; i < len; i++)
				m = p[i] > m || isnan(p[i]) ? p[i] : m;
			double s64 = 0;
			for (int64_t i = 0; i < len && isfinite(m); i++)
				s64 += exp((double)p[i] - m);
			double want = isfinite(m) ? m + log(lse_lanes_f32(p, len, m)) : m, def = isfinite(m) ? m + log(s64) : m;
			float wf = (float)want;
			cr_expect(!memcmp(&got[0][r], &wf, 4) || (isnan(wf) && isnan(got[0][r])),
				  "len %lld row %lld: %.9g, not %.9g", (long long)len, (long long)r, got[0][r], wf);
			double tol = 2 * (nextafterf((float)fabs(def), INFINITY) - (float)fabs(def)) + 0x1p-22;
			cr_expect(isnan(def) ? isnan(got[0][r]) : isinf(def) ? got[0][r] == def : fabs(got[0][r] - def) <= tol,
				  "len %lld row %lld: %.9g, the definition %.17g", (long long)len, (long long)r, got[0][r], def);
		}
	}
}

/* Gelu's float32 error in ulps of max(|y|, |x| / 2), the unit vmath/activations_within_their_ulp_bounds
 * (tests/kernels/elem.c) holds Gelu to: r its float64 definition; NaN must give NaN, an infinity
 * itself. */
static double lsegelu_ulps(float y, float x, double r)
{
	if (isnan(r) || isinf(r))
		return (isnan(r) && isnan(y)) || y == r ? 0 : INFINITY;
	float a = (float)fmax(fabs(r), 0.5 * fabsf(x));
	double u = a < 1.17549435e-38f ? 0x1p-149 : (double)(nextafterf(a, INFINITY) - a);
	return fabs((double)y - r) / u;
}

/* Gelu, erf form (vm_geluf: two polynomials, no exp) and tanh form (x e / (1 + e) below 0), over every
 * 61st float of [-10, 10] from 2^-30 on, 2^20 points evenly spaced in [-6, 6] (vm_geluf's joins at
 * |x| = 1 and 5.6 among them) and the special values: within 1.8 ulp (erf; 1.76 measured over every
 * float of [-10, 10], 2.04 before) and 2 (tanh; 1.91, 1.98 before) of the float64 definitions,
 * 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (-inf: NaN, as
 * there), the same bits at 1 and 3 threads */
Test(exec, lsegelu_gelu_forms_within_their_bounds_at_any_thread_count, .timeout = 120)
{
	static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f,
					3.4028235e38f, -3.4028235e38f, 1.0f, -1.0f, 0.99999994f, -0.99999994f, 5.6f, -5.6f,
					5.5999994f, -5.5999994f, 10, -10, 88, -88, 1e20f, -1e20f};
	enum { NSP = sizeof special / sizeof *special, NE = 1 << 20 };
	int64_t n = NSP + NE;
	for (uint32_t u = 0x30800000u; u <= 0x41200000u; u += 61)
		n += 2;
	float *in = xmalloc((size_t)n * sizeof *in), *out[2] = {xmalloc((size_t)n * sizeof(float)), xmalloc((size_t)n * sizeof(float))};
	cr_assert(in && out[0] && out[1]);
	memcpy(in, special, sizeof special);
	int64_t k = NSP;
	for (int i = 0; i < NE; i++)
		in[k++] = -6.0f + 12.0f * (float)i / (float)NE;
	for (uint32_t u = 0x30800000u; u <= 0x41200000u; u += 61) {
		in[k++] = vm_bits_float(u);
		in[k++] = vm_bits_float(u | 0x80000000u);
	}
	cr_assert_eq(k, n);
	for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
		char text[400];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 20\ninputs: [{name: x, dtype: float32, shape: [%lld]}]\n"
			 "nodes:\n  - {op: Gelu, inputs: [x], outputs: [y]%s}\noutputs: [{name: y}]\n",
			 (long long)n, tanh_form ? ", attrs: {approximate: tanh}" : "");
		struct graph *g = load_text("lsegelu_gelu.yaml", text);
		for (int t = 0; t < 2; t++) {
			pool_set_threads(t ? 3 : 1);
			struct rtensor ti = rt_over(DT_FLOAT, 1, &n, in);
			const char *name = "x";
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = &ti, .input_names = &name, .n_inputs = 1};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "%s", e.msg);
			memcpy(out[t], exec_value(x, g->outputs[0])->data, (size_t)n * sizeof(float));
			exec_free(x);
		}
		pool_set_threads(1);
		graph_free(g);
		cr_expect(!memcmp(out[0], out[1], (size_t)n * sizeof(float)), "Gelu %s: 1 and 3 threads differ",
			  tanh_form ? "tanh" : "erf");
		double worst = 0;
		float at = 0;
		for (int64_t i = 0; i < n; i++) {
			double v = in[i];
			double r = tanh_form ? 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
					     : 0.5 * v * (1 + erf(v * 0.7071067811865476));
			double err = lsegelu_ulps(out[0][i], in[i], r);
			if (err > worst)
				worst = err, at = in[i];
		}
		cr_expect_leq(worst, tanh_form ? 2.0 : 1.8, "Gelu %s: %.3f ulp at %a (%.9g)", tanh_form ? "tanh" : "erf", worst,
			      at, at);
	}
	xfree(in);
	xfree(out[0]);
	xfree(out[1]);
}

/* #52e: LogSoftmax's and SoftmaxCrossEntropyLoss's rows take their exponentials by vm_expf_row,
 * where Softmax keeps vm_expf: a term below e^-87 is 0 there instead of a tiny or subnormal one,
 * which only z, a double of at least 1, ever sees. So a row gives the bits it gives
 * with those terms at -inf, and is within 1e-6 (relative to its terms) of the definition in long
 * double. Rows of terms at max - 87 .. max - 10^4 and -inf among ordinary ones, rows whose max is
 * the only term over e^-87, odd lengths; 1 and 3 threads. */
static float *ls_far_run(const char *node, const float *x, const int64_t *lab, int64_t rows, int64_t len, int th)
{
	int64_t dims[2] = {rows, len};
	float *cx = xmalloc((size_t)(rows * len) * sizeof *cx + 1);
	int64_t *cl = xmalloc((size_t)rows * sizeof *cl + 1);
	memcpy(cx, x, (size_t)(rows * len) * sizeof *cx);
	if (lab)
		memcpy(cl, lab, (size_t)rows * sizeof *cl);
	struct rtensor ts[2] = {shape_tensor(DT_FLOAT, 2, dims, cx), shape_tensor(DT_INT64, 1, dims, cl)};
	struct shape_run r;
	shape_run(&r, node, ts, lab ? 2 : 1, th);
	float *y = xmalloc((size_t)r.y->nbytes + 1);
	memcpy(y, r.y->data, (size_t)r.y->nbytes);
	shape_done(&r);
	xfree(cx);
	xfree(cl);
	return y;
}

Test(exec, log_softmax_terms_far_below_the_max_change_nothing)
{
	static const float far[] = {-87.0f, -87.5f, -87.68f, -87.7f, -88.0f, -88.5f, -95.0f, -103.9f, -104.5f, -150.0f, -1e4f, -INFINITY};
	static const int64_t lens[] = {1, 7, 33, 200, 2001};
	const char *ls = "{op: LogSoftmax, inputs: [x], outputs: [y]}";
	const char *ce = "{op: SoftmaxCrossEntropyLoss, inputs: [x, r], outputs: [y], attrs: {reduction: none}}";
	for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
		int64_t len = lens[li], rows = 24, n = rows * len;
		float *x = xmalloc((size_t)n * sizeof *x + 1), *cut = xmalloc((size_t)n * sizeof *cut + 1);
		int64_t *lab = xmalloc((size_t)rows * sizeof *lab + 1);
		uint32_t s = 4242u + (uint32_t)li;
		for (int64_t r = 0; r < rows; r++) {
			float m = r % 3 == 0 ? 30.0f : r % 3 == 1 ? -5.0f : 1e6f; /* the row's max, at column r % len */
			for (int64_t j = 0; j < len; j++) {
				s = s * 1664525u + 1013904223u;
				float v = (float)((double)(s >> 8) / (1 << 24) * 20 - 20); /* [-20, 0) below the max */
				int64_t k = (int64_t)(s >> 4) % 12;
				float d = r % 4 == 3 || (s >> 3) % 2 ? far[k] : v; /* rows of far terms alone, else half */
				x[r * len + j] = j == r % len ? m : m + d;
				cut[r * len + j] = j != r % len && m + d - m < -87.0f ? -INFINITY : x[r * len + j];
			}
			lab[r] = (r * 7) % len; /* ordinary or far terms alike */
		}
		for (int th = 1; th <= 3; th += 2) {
			float *y = ls_far_run(ls, x, NULL, rows, len, th), *yc = ls_far_run(ls, cut, NULL, rows, len, th);
			float *c = ls_far_run(ce, x, lab, rows, len, th), *cc = ls_far_run(ce, cut, lab, rows, len, th);
			int64_t differ = 0, wrong = 0, ce_differ = 0;
			for (int64_t r = 0; r < rows; r++) {
				const float *p = x + r * len;
				long double m = p[r % len], z = 0;
				for (int64_t j = 0; j < len; j++)
					z += expl((long double)p[j] - m);
				long double lz = logl(z);
				for (int64_t j = 0; j < len; j++) {
					int64_t i = r * len + j;
					differ += cut[i] == x[i] && memcmp(&y[i], &yc[i], sizeof *y) != 0;
					long double ref = (long double)p[j] - m - lz;
					double tol = 1e-6 * (fabs(p[j]) + fabsl(m) + fabsl(lz)) + 1e-30;
					wrong += !(y[i] == ref || fabsl((long double)y[i] - ref) <= tol);
				}
				ce_differ += cut[r * len + lab[r]] == x[r * len + lab[r]] && memcmp(&c[r], &cc[r], sizeof *c) != 0;
			}
			cr_expect_eq(differ, 0, "LogSoftmax, length %lld, %d threads: %lld outputs differ from the row with its "
						"far terms at -inf", (long long)len, th, (long long)differ);
			cr_expect_eq(wrong, 0, "LogSoftmax, length %lld, %d threads: %lld outputs off the definition",
				     (long long)len, th, (long long)wrong);
			cr_expect_eq(ce_differ, 0, "SoftmaxCrossEntropyLoss, length %lld, %d threads: %lld rows differ",
				     (long long)len, th, (long long)ce_differ);
			xfree(y);
			xfree(yc);
			xfree(c);
			xfree(cc);
		}
		xfree(x);
		xfree(cut);
		xfree(lab);
	}
}
