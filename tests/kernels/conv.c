/* kernels/conv.c - #52's kernel tests, part of test_kernels: weight gradients, pooling, Resize, the
 * LSTM cell and quantized products. Each fast path against a reference written here, bit for bit or
 * within a stated bound. */
#include "kernels.h"

/* #52 wgrad: a Conv's weight gradient at small planes (conv_wgrad.c: the weight_grad Conv as one
 * product) against its definition summed in float64 here, dW[m, c, i, j] = sum over n, oy, ox of
 * dY[n, m, oy, ox] x[n, c, oy s + i d - p, ox s + j d - p], with dY = r (loss sum(Conv(x, w) r)):
 * 1x1, 2x2 and 3x3 images with pad 1, stride 2 into 2x2, dilation 2, strided 1 x 1, batch 1 to
 * 512, channels 1 to 17, float32 and float64; and the same bits at 1 thread and 2. */
struct wgrad_case {
	int n, c, m, h, w, k, s, d, p;
};

static void wgrad_case_run(const struct wgrad_case *k, int f64)
{
	int oh = (k->h + 2 * k->p - k->d * (k->k - 1) - 1) / k->s + 1, ow = (k->w + 2 * k->p - k->d * (k->k - 1) - 1) / k->s + 1;
	int nx = k->n * k->c * k->h * k->w, nr = k->n * k->m * oh * ow, nw = k->m * k->c * k->k * k->k;
	const char *dt = f64 ? "float64" : "float32";
	size_t es = f64 ? 8 : 4;
	double *xv = malloc((size_t)nx * 8), *rv = malloc((size_t)nr * 8);
	void *xd = malloc((size_t)nx * es), *rd = malloc((size_t)nr * es);
	for (int i = 0; i < nx; i++) { /* values exact in float32 */
		xv[i] = (float)sin(0.37 * i + k->c);
		f64 ? (void)(((double *)xd)[i] = xv[i]) : (void)(((float *)xd)[i] = (float)xv[i]);
	}
	for (int i = 0; i < nr; i++) {
		rv[i] = (float)cos(0.91 * i - k->m);
		f64 ? (void)(((double *)rd)[i] = rv[i]) : (void)(((float *)rd)[i] = (float)rv[i]);
	}
	char text[1024];
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%d, %d, %d, %d]}, {name: r, dtype: %s, "
		 "shape: [%d, %d, %d, %d]}]\nparams: [{name: w, dtype: %s, shape: [%d, %d, %d, %d], init: {dist: normal, seed: 1}}]\n"
		 "nodes:\n  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {pads: [%d, %d, %d, %d], strides: [%d, %d], "
		 "dilations: [%d, %d]}}\n  - {op: Mul, inputs: [y, r], outputs: [z]}\n"
		 "  - {op: ReduceSum, inputs: [z], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n",
		 dt, k->n, k->c, k->h, k->w, dt, k->n, k->m, oh, ow, dt, k->m, k->c, k->k, k->k, k->p, k->p, k->p, k->p, k->s,
		 k->s, k->d, k->d);
	struct graph *g = load_text("wgrad_small.yaml", text);
	const char *params[] = {"w"};
	struct autodiff_opts ao = {.params = params, .n_params = 1};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	uint32_t gi = 0;
	while (gi < g->n_outputs && strcmp(g->outputs[gi]->name, "w_grad"))
		gi++;
	cr_assert(gi < g->n_outputs, "no w_grad output");
	int dtc = f64 ? DT_DOUBLE : DT_FLOAT;
	struct rtensor t[2] = {{.dtype = dtc, .ndim = 4, .dims = {k->n, k->c, k->h, k->w}, .numel = nx, .data = xd,
				.nbytes = (size_t)nx * es, .known = 1},
			       {.dtype = dtc, .ndim = 4, .dims = {k->n, k->m, oh, ow}, .numel = nr, .data = rd,
				.nbytes = (size_t)nr * es, .known = 1}};
	const char *names[2] = {"x", "r"};
	void *first = NULL;
	for (int th = 1; th <= 2; th++) {
		pool_set_threads(th);
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
		struct exec *ex = exec_run(g, &o, NULL, &e);
		cr_assert(ex, "%s", e.msg);
		const struct rtensor *y = exec_value(ex, g->outputs[gi]);
		cr_assert_eq(y->numel, (int64_t)nw);
		if (!first) {
			int64_t bad = 0;
			for (int m = 0; m < k->m; m++)
				for (int c = 0; c < k->c; c++)
					for (int i = 0; i < k->k; i++)
						for (int j = 0; j < k->k; j++) {
							double want = 0;
							for (int n = 0; n < k->n; n++)
								for (int oy = 0; oy < oh; oy++)
									for (int ox = 0; ox < ow; ox++) {
										int iy = oy * k->s + i * k->d - k->p, ix = ox * k->s + j * k->d - k->p;
										if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
											want += rv[((n * k->m + m) * oh + oy) * ow + ox] *
												xv[((n * k->c + c) * k->h + iy) * k->w + ix];
									}
							int at = ((m * k->c + c) * k->k + i) * k->k + j;
							double got = f64 ? ((const double *)y->data)[at] : ((const float *)y->data)[at];
							bad += !(fabs(got - want) <= (f64 ? 1e-12 : 1e-5) * (1 + fabs(want)) * k->n * oh * ow);
						}
			cr_expect_eq(bad, 0, "%s n%d c%d m%d %dx%d s%d d%d p%d: %lld of %d off the definition", dt, k->n, k->c,
				     k->m, k->h, k->w, k->s, k->d, k->p, (long long)bad, nw);
			first = malloc(y->nbytes);
			memcpy(first, y->data, y->nbytes);
		} else {
			cr_expect_eq(memcmp(first, y->data, y->nbytes), 0, "%s n%d c%d m%d %dx%d: other bits at 2 threads", dt,
				     k->n, k->c, k->m, k->h, k->w);
		}
		exec_free(ex);
	}
	pool_set_threads(1);
	free(first);
	graph_free(g);
	free(xv), free(rv), free(xd), free(rd);
}

Test(exec, weight_gradients_at_small_planes_match_the_definition)
{
	static const struct wgrad_case cases[] = {
		{1, 1, 1, 1, 1, 3, 1, 1, 1},   {3, 5, 7, 1, 1, 3, 1, 1, 1},   {1, 17, 3, 2, 2, 3, 1, 1, 1},
		{3, 16, 17, 2, 2, 3, 1, 1, 1}, {3, 9, 16, 3, 3, 3, 1, 1, 1},  {1, 2, 17, 3, 3, 3, 1, 1, 1},
		{3, 17, 16, 3, 3, 3, 2, 1, 1}, {1, 4, 5, 4, 4, 3, 2, 1, 1},   {3, 16, 16, 3, 3, 3, 1, 2, 2},
		{3, 7, 17, 4, 3, 3, 1, 2, 1},  {8, 17, 32, 3, 3, 3, 1, 1, 1}, {8, 32, 17, 6, 6, 3, 1, 1, 1},
		{3, 3, 16, 12, 12, 7, 2, 1, 3}, /* a stem's 7 x 7 / 2 */
		{3, 16, 17, 6, 6, 1, 2, 1, 0}, {1, 5, 3, 5, 7, 1, 2, 1, 0}, {2, 4, 16, 7, 5, 1, 3, 1, 0}, /* 1 x 1 / s */
		/* K = N OH OW of 512 and more, as conv_wgrad takes them (float64) */
		{64, 3, 5, 3, 3, 3, 1, 1, 1},  {128, 2, 17, 2, 2, 3, 1, 1, 1}, {512, 3, 5, 1, 1, 3, 1, 1, 1},
		{128, 5, 3, 3, 3, 3, 2, 1, 1}, {64, 4, 7, 3, 3, 3, 1, 2, 2},   {128, 3, 9, 4, 4, 1, 2, 1, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		for (int f64 = 0; f64 < 2; f64++)
			wgrad_case_run(&cases[i], f64);
}

/* A strided 1 x 1 Conv's weight gradient (a downsampling shortcut) reads the input subsampled by a
 * Slice with steps: its Conv computes the one tap a weight, not sh x sw of them cropped by a Slice. */
Test(exec, strided_1x1_weight_gradients_compute_no_extra_taps)
{
	struct graph *g = load_text("ds.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [2, 8, 6, 6]}]\n"
				    "params: [{name: w, dtype: float32, shape: [16, 8, 1, 1], init: {dist: normal, seed: 1}}]\n"
				    "nodes:\n  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2]}}\n"
				    "  - {op: ReduceSum, inputs: [y], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n");
	const char *params[] = {"w"};
	struct autodiff_opts ao = {.params = params, .n_params = 1};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	int crops = 0, convs = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		crops += !strcmp(n->op_type, "Slice") && n->n_in == 4;
		convs += !strcmp(n->op_type, "Conv");
	}
	cr_expect_eq(convs, 2, "%d Convs", convs);
	cr_expect_eq(crops, 0, "the weight gradient's Conv output is cropped by %d Slice(s)", crops);
	graph_free(g);
}

/* #52 rnnvec: the float32 LSTM cell's loops (vectorised: functions of their own with restrict
 * parameters) against the cell written out here element by element, bit for bit: the forward node's
 * Y, Y_h, Y_c over 5 steps of a batch of 3, H = 21 (not a multiple of any vector width), with
 * biases and peepholes. The products are the kernel's own calls (blas_sgemm, the same shapes), so
 * every bit that differs is the cell's. */
static float lv_sig(float v)
{
	float e = vm_expf(v < 0 ? v : -v), s = 1 / (1 + e);
	return v >= 0 ? s : e * s;
}

Test(exec, lstm_cell_loops_match_the_cell_bit_for_bit)
{
	enum { T = 5, B = 3, NI = 7, H = 21, G = 4 * H };
	static float x[T * B * NI], w[G * NI], r[G * H], bias[2 * G], p[3 * H];
	float *all[] = {x, w, r, bias, p};
	size_t len[] = {T * B * NI, G * NI, G * H, 2 * G, 3 * H};
	for (int a = 0; a < 5; a++)
		for (size_t i = 0; i < len[a]; i++)
			all[a][i] = (philox_uniform(52 + (uint64_t)a, i) * 2 - 1) * (a == 0 ? 3.0f : 0.5f);
	struct graph *g = load_text("lstm.yaml",
				    "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [5, 3, 7]},\n"
				    "  {name: w, dtype: float32, shape: [1, 84, 7]}, {name: r, dtype: float32, shape: [1, 84, 21]},\n"
				    "  {name: b, dtype: float32, shape: [1, 168]}, {name: p, dtype: float32, shape: [1, 63]}]\n"
				    "nodes:\n  - {op: LSTM, inputs: [x, w, r, b, \"\", \"\", \"\", p], outputs: [y, yh, yc],"
				    " attrs: {hidden_size: 21}}\noutputs: [{name: y}, {name: yh}, {name: yc}]\n");
	struct rtensor t[5];
	const int64_t dims[5][3] = {{T, B, NI}, {1, G, NI}, {1, G, H}, {1, 2 * G}, {1, 3 * H}};
	const char *names[5] = {"x", "w", "r", "b", "p"};
	for (int a = 0; a < 5; a++) {
		int nd = a < 3 ? 3 : 2;
		t[a] = (struct rtensor){.dtype = DT_FLOAT, .ndim = nd, .numel = (int64_t)len[a], .data = all[a],
					.nbytes = (int64_t)len[a] * 4, .known = 1};
		memcpy(t[a].dims, dims[a], sizeof dims[a]);
	}
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 5};
	struct exec *ex = exec_run(g, &o, NULL, &e);
	cr_assert(ex, "%s", e.msg);
	/* the reference: X W^T + Wb + Rb for all steps, then per step H R^T and the cell */
	static float xw[T * B * G], q[B * G], h[B * H], c[B * H], y[T * B * H];
	blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T * B, G, NI, 1, x, NI, w, NI, 0, xw, G);
	for (int i = 0; i < T * B; i++)
		for (int j = 0; j < G; j++)
			xw[i * G + j] += bias[j] + bias[G + j];
	memset(h, 0, sizeof h);
	memset(c, 0, sizeof c);
	struct blas_panels pr; /* the kernel's step product: R turned into panels where they apply */
	float *buf = malloc(blas_panels_bytes(B, G, H) + 1);
	blas_panels_make(&pr, B, G, H, 1, r, H, buf);
	for (int st = 0; st < T; st++) {
		blas_panels_sgemm(&pr, h, H, q, G);
		for (int b = 0; b < B; b++)
			for (int k = 0; k < H; k++) {
				const float *gx = xw + (st * B + b) * G, *gq = q + b * G;
				float cp = c[b * H + k];
				float i = lv_sig(gx[k] + gq[k] + p[k] * cp);
				float f = lv_sig(gx[2 * H + k] + gq[2 * H + k] + p[2 * H + k] * cp);
				float cg = vm_tanhf(gx[3 * H + k] + gq[3 * H + k]), cn = f * cp + i * cg;
				float ov = lv_sig(gx[H + k] + gq[H + k] + p[H + k] * cn);
				c[b * H + k] = cn;
				h[b * H + k] = y[(st * B + b) * H + k] = ov * vm_tanhf(cn);
			}
	}
	const float *want[3] = {y, h, c};
	int64_t n[3] = {T * B * H, B * H, B * H};
	for (int k = 0; k < 3; k++) {
		const struct rtensor *got = exec_value(ex, g->outputs[k]);
		cr_assert_eq(got->numel, n[k]);
		int64_t wrong = 0;
		for (int64_t i = 0; i < n[k]; i++)
			wrong += memcmp(&want[k][i], &((const float *)got->data)[i], 4) != 0;
		cr_expect_eq(wrong, 0, "output %d: %lld of %lld elements differ", k, (long long)wrong, (long long)n[k]);
	}
	free(buf);
	exec_free(ex);
	graph_free(g);
}

/* blas.h's panels (a recurrence's step products): C = A op(B) against a float64 sum written here,
 * for B and B^T, a row stride over k, widths that leave a narrower last panel, 1 to 64 rows of A
 * and k up to 2048; the same bits at 1 and 2 threads. Where the panels do not apply (other
 * kernels, more rows) the products run as given: the same checks hold. */
Test(exec, blas_panels_products_are_the_product_at_any_threads)
{
	static const int shapes[][3] = {{16, 2048, 512}, {1, 200, 37}, {7, 130, 300}, {64, 96, 128}, {16, 512, 2048}, {65, 40, 30}};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int tb = 0; tb < 2; tb++) {
			int m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], ldb = (tb ? k : n) + 3;
			float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * (tb ? n : k) * ldb);
			float *c[2] = {malloc(sizeof(float) * m * n), malloc(sizeof(float) * m * n)};
			for (int i = 0; i < m * k; i++)
				a[i] = philox_uniform(7, (uint64_t)i) - 0.5f;
			for (int i = 0; i < (tb ? n : k) * ldb; i++)
				b[i] = philox_uniform(8, (uint64_t)i) - 0.5f;
			struct blas_panels p;
			float *buf = malloc(blas_panels_bytes(m, n, k) + 1);
			blas_panels_make(&p, m, n, k, tb, b, ldb, buf);
			for (int th = 0; th < 2; th++) {
				pool_set_threads(th + 1);
				blas_panels_sgemm(&p, a, k, c[th], n);
			}
			pool_set_threads(1);
			int64_t far = 0, differ = 0;
			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					double want = 0, mag = 0;
					for (int q = 0; q < k; q++) {
						double t = (double)a[i * k + q] * (tb ? b[j * ldb + q] : b[q * ldb + j]);
						want += t;
						mag += fabs(t);
					}
					far += fabs(c[0][i * n + j] - want) > 1e-6 * mag + 1e-30;
					differ += memcmp(&c[0][i * n + j], &c[1][i * n + j], 4) != 0;
				}
			cr_expect_eq(far, 0, "%d x %d x %d, tb %d: %lld elements off the product", m, n, k, tb, (long long)far);
			cr_expect_eq(differ, 0, "%d x %d x %d, tb %d: %lld elements differ between 1 and 2 threads", m, n, k, tb,
				     (long long)differ);
			free(a), free(b), free(c[0]), free(c[1]), free(buf);
		}
}

/* #52 resize: Resize's typed planes (resize.c) and LpPool's (conv_nd.c) against their definitions
 * written here, bit for bit (any NaN for a NaN), float32 and float64, up and down, odd sizes, over
 * rf_value's NaNs, signed zeros, infinities, subnormals and huge values; and the costs of the
 * gathers, the scatter and NegativeLogLikelihoodLoss against bytes counted by hand. */

struct rs_case {
	int nd;
	int64_t in[4], out[4]; /* out: sizes, or with scaled the scales x 4 */
	int scaled;
	const char *mode, *coord, *nearest;
};

/* ONNX's coordinate of output o on an axis of `in` resized to `out` (scale s, resized length len) */
static double rs_coord(const char *coord, int64_t o, int64_t in, double s, double len)
{
	if (!strcmp(coord, "half_pixel"))
		return ((double)o + 0.5) / s - 0.5;
	if (!strcmp(coord, "pytorch_half_pixel"))
		return len > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
	if (!strcmp(coord, "align_corners"))
		return len > 1 ? (double)o * (double)(in - 1) / (len - 1) : 0;
	if (!strcmp(coord, "asymmetric"))
		return (double)o / s;
	return ((double)o + 0.5) / s; /* tf_half_pixel_for_nn */
}

/* the taps of output o: their count, indices and weights (nearest, linear, cubic with a = -0.75) */
static int rs_taps(const struct rs_case *k, double x, int64_t in, int64_t *ix, double *w)
{
	if (!strcmp(k->mode, "nearest")) {
		double f = floor(x);
		int64_t i = !strcmp(k->nearest, "floor")  ? (int64_t)f
			    : !strcmp(k->nearest, "ceil") ? (int64_t)ceil(x)
			    : x - f == 0.5		   ? (int64_t)f + !strcmp(k->nearest, "round_prefer_ceil")
							   : (int64_t)floor(x + 0.5);
		ix[0] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
		w[0] = 1;
		return 1;
	}
	if (!strcmp(k->mode, "linear")) {
		x = x < 0 ? 0 : x;
		int64_t i = (int64_t)floor(x);
		if (i >= in - 1) {
			ix[0] = in - 1, w[0] = 1;
			return 1;
		}
		ix[0] = i, ix[1] = i + 1, w[1] = x - (double)i, w[0] = 1 - w[1];
		return 2;
	}
	double f = floor(x), a = -0.75;
	for (int t = 0; t < 4; t++) {
		int64_t i = (int64_t)f - 1 + t;
		double d = fabs(x - (f - 1 + t));
		ix[t] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
		w[t] = d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
	}
	return 4;
}

/* rf_value's data from seed: n elements in rows of row_len, as float32 (p32) or float64 (p64), and in
 * v as double */
static void rs_fill(uint32_t seed, int64_t n, int64_t row_len, int f64, double *v, float *p32, double *p64)
{
	for (int64_t i = 0; i < n; i++) {
		double d = rf_value(&seed, i, row_len);
		f64 ? (void)(p64[i] = d) : (void)(p32[i] = (float)d);
		v[i] = f64 ? d : (double)(float)d;
	}
}

Test(exec, resize_matches_its_definition_bit_for_bit)
{
	static const struct rs_case cases[] = {
		{4, {2, 3, 5, 7}, {2, 3, 11, 16}, 0, "nearest", "asymmetric", "floor"},
		{4, {2, 3, 5, 7}, {2, 3, 10, 14}, 1, "nearest", "asymmetric", "floor"}, /* x2 */
		{4, {2, 3, 9, 13}, {2, 3, 4, 5}, 0, "nearest", "half_pixel", "round_prefer_floor"},
		{4, {2, 3, 9, 13}, {2, 3, 4, 5}, 0, "nearest", "half_pixel", "round_prefer_ceil"},
		{4, {2, 3, 6, 6}, {2, 3, 9, 9}, 0, "nearest", "align_corners", "ceil"},
		{4, {2, 3, 6, 6}, {2, 3, 9, 9}, 0, "nearest", "tf_half_pixel_for_nn", "round_prefer_floor"},
		{4, {2, 3, 5, 300}, {2, 3, 12, 601}, 0, "nearest", "pytorch_half_pixel", "round_prefer_floor"},
		{4, {2, 3, 5, 7}, {3, 5, 8, 9}, 0, "nearest", "asymmetric", "round_prefer_floor"}, /* N and C too */
		{4, {2, 3, 5, 7}, {2, 3, 10, 14}, 1, "linear", "half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 13, 3}, 0, "linear", "align_corners", ""},
		{4, {2, 3, 9, 300}, {2, 3, 4, 517}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 3, 1, 7}, {2, 3, 1, 19}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 11, 15}, 0, "linear", "asymmetric", ""},
		{4, {2, 3, 8, 8}, {2, 3, 8, 8}, 0, "linear", "half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 12, 9}, 0, "cubic", "half_pixel", ""},
		{4, {2, 3, 9, 10}, {2, 3, 4, 3}, 0, "cubic", "align_corners", ""},
		{3, {3, 5, 7}, {5, 9, 4}, 0, "linear", "half_pixel", ""}, /* every axis linear: the generic loop */
		{2, {5, 7}, {11, 3}, 0, "linear", "align_corners", ""},
		{1, {37}, {80}, 0, "linear", "half_pixel", ""},
		{1, {37}, {1}, 0, "nearest", "asymmetric", "floor"},
		{4, {1, 1, 1, 1}, {1, 1, 1, 1}, 0, "cubic", "half_pixel", ""},
	};
	enum { MAXN = 2 * 3 * 9 * 300, MAXO = 3 * 5 * 12 * 601 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct rs_case *k = &cases[c];
			int r = k->nd;
			int64_t numel = 1, onum = 1, od[4];
			double s[4], len[4];
			for (int i = 0; i < r; i++) {
				numel *= k->in[i];
				od[i] = k->scaled ? k->in[i] * k->out[i] / 4 : k->out[i];
				s[i] = k->scaled ? (double)(float)(k->out[i] / 4.0) : (double)od[i] / (double)k->in[i];
				len[i] = k->scaled ? (double)k->in[i] * s[i] : (double)od[i];
				onum *= od[i];
			}
			cr_assert(numel <= MAXN && onum <= MAXO);
			rs_fill((uint32_t)c * 31 + 5, numel, k->in[r - 1], f64, v, p32, p64);
			char extra[300], node[400], list[100] = "";
			for (int i = 0; i < r; i++)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%g", i ? ", " : "",
					 k->scaled ? k->out[i] / 4.0 : (double)k->out[i]);
			snprintf(extra, sizeof extra, "params: [{name: q, dtype: %s, shape: [%d], data: [%s]}]\n",
				 k->scaled ? "float32" : "int64", r, list);
			snprintf(node, sizeof node,
				 "{op: Resize, inputs: [x, \"\", %s], outputs: [y], attrs: {mode: %s, "
				 "coordinate_transformation_mode: %s%s%s}}",
				 k->scaled ? "q" : "\"\", q", k->mode, k->coord, *k->nearest ? ", nearest_mode: " : "", k->nearest);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run(node, extra, f64, r, k->in, f64 ? (void *)p64 : (void *)p32, &g, &y);
			cr_assert_eq(y->numel, onum, "case %zu: %lld outputs", c, (long long)y->numel);
			int64_t wrong = 0, first = -1, o[4] = {0}, st[4];
			double want = 0;
			for (int i = r - 1; i >= 0; i--)
				st[i] = i == r - 1 ? 1 : st[i + 1] * k->in[i + 1];
			for (int64_t e = 0; e < onum; e++) {
				int64_t ix[4][4], cnt[4], t[4] = {0};
				double w[4][4], sum = 0;
				for (int i = 0; i < r; i++) {
					double xc = rs_coord(k->coord, o[i], k->in[i], s[i], len[i]);
					cnt[i] = rs_taps(k, xc, k->in[i], ix[i], w[i]);
				}
				for (;;) { /* every combination of the axes' taps, the last axis fastest */
					double cw = 1;
					int64_t at = 0;
					for (int i = 0; i < r; i++)
						cw *= w[i][t[i]], at += ix[i][t[i]] * st[i];
					if (cw != 0)
						sum += cw * v[at];
					int i = r - 1;
					while (i >= 0 && ++t[i] == cnt[i])
						t[i--] = 0;
					if (i < 0)
						break;
				}
				if (!rf_same_nan(y, e, sum, f64, 1) && !wrong++)
					first = e, want = sum;
				for (int i = r - 1; i >= 0 && ++o[i] == od[i]; i--)
					o[i] = 0;
			}
			cr_expect_eq(wrong, 0, "%s case %zu (%s %s %s): %lld of %lld outputs differ, the first #%lld: %a, not %a",
				     f64 ? "float64" : "float32", c, k->mode, k->coord, k->nearest, (long long)wrong, (long long)onum,
				     (long long)first, first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* ", name: [v0, v1, ...]" of n values, appended to s */
static void rs_attr(char *s, size_t cap, const char *name, const int64_t *v, int n)
{
	snprintf(s + strlen(s), cap - strlen(s), ", %s: [", name);
	for (int i = 0; i < n; i++)
		snprintf(s + strlen(s), cap - strlen(s), "%s%lld", i ? ", " : "", (long long)v[i]);
	snprintf(s + strlen(s), cap - strlen(s), "]");
}

/* LpPool p = 1 and 2: the window's |x| or pow(|x|, 2) summed in double from +0 (rows outer), then
 * pow(sum, 1 / p), as the generic loop has it */
Test(exec, lp_pool_matches_its_definition_bit_for_bit)
{
	struct lp_case {
		int64_t h, w, k[2], s[2], d[2], pad[4], p, ceil;
	} cases[] = {
		{24, 24, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 2, 0}, {24, 24, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0},
		{9, 11, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 2, 1},  {12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 2, 0},
		{7, 300, {2, 5}, {1, 1}, {1, 2}, {1, 4, 1, 4}, 1, 0}, {1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 2, 0},
		{5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 2, 0},   {5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1, 0},
	};
	enum { NC = 6, MAXN = NC * 7 * 300 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (size_t c = 0; c < 2 * sizeof cases / sizeof *cases; c++) {
		const struct lp_case *k = &cases[c / 2];
		int f64 = c & 1;
		int64_t dims[4] = {2, NC / 2, k->h, k->w}, sp = k->h * k->w;
		rs_fill((uint32_t)c * 13 + 1, NC * sp, k->w, f64, v, p32, p64);
		char node[400] = "{op: LpPool, inputs: [x], outputs: [y], attrs: {p: 1";
		node[strlen(node) - 1] = (char)('0' + k->p);
		rs_attr(node, sizeof node, "kernel_shape", k->k, 2);
		rs_attr(node, sizeof node, "strides", k->s, 2);
		rs_attr(node, sizeof node, "dilations", k->d, 2);
		rs_attr(node, sizeof node, "pads", k->pad, 4);
		snprintf(node + strlen(node), sizeof node - strlen(node), ", ceil_mode: %d}}", (int)k->ceil);
		struct graph *g;
		const struct rtensor *y;
		struct exec *x = rf_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
		int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
		double want = 0;
		for (int64_t o = 0; o < NC * oh * ow; o++) {
			int64_t nc = o / (oh * ow), oy = o / ow % oh, ox = o % ow;
			double acc = 0;
			for (int64_t t = 0; t < k->k[0] * k->k[1]; t++) {
				int64_t iy = oy * k->s[0] - k->pad[0] + t / k->k[1] * k->d[0];
				int64_t ix = ox * k->s[1] - k->pad[1] + t % k->k[1] * k->d[1];
				if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
					acc += pow(fabs(v[nc * sp + iy * k->w + ix]), (double)k->p);
			}
			double r = pow(acc, 1 / (double)k->p);
			if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
				first = o, want = r;
		}
		cr_expect_eq(wrong, 0, "%s: %s: %lld of %lld outputs differ, the first %lld: %a, not %a",
			     f64 ? "float64" : "float32", node, (long long)wrong, (long long)(NC * oh * ow), (long long)first,
			     first < 0 ? 0 : rt_get(y, first), want);
		exec_free(x);
		graph_free(g);
	}
}

/* The costs, counted by hand: GatherND of 2 rows of a 1000 x 8 float32 table (16 bytes of indices,
 * 2 x 64 read and written, not the 32,000-byte table); GatherElements of 4 of a 4 x 50 table (32 of
 * indices, 2 x 16); ScatterND of those 2 rows into the table (its copy 2 x 32,000, 16 of indices,
 * the 64 bytes of updates read and written, and read again under reduction add, 1 FLOP each of 16);
 * NegativeLogLikelihoodLoss of 4 labels over 10 classes (32 of labels, 4 scores of 4 bytes, 4 of
 * weights each with weights, a 4-byte mean; 2 FLOPs a label); Resize of 2 x 4 x 4 to 2 x 8 x 8 (512
 * written, the 128-byte input read once, 16 of scales; linear: 4 terms of 2 FLOPs an output) and
 * nearest of 8 x 8 to 2 x 2 (16 written, the 4 elements read, 32 of sizes). */
Test(exec, gathers_scatters_nll_and_resize_cost_what_they_move)
{
	static const struct {
		const char *inputs, *params, *node;
		uint64_t flops, bytes;
	} cases[] = {
		{"[{name: t, dtype: float32, shape: [1000, 8]}]", "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]",
		 "{op: GatherND, inputs: [t, i], outputs: [y]}", 0, 144},
		{"[{name: t, dtype: float32, shape: [4, 50]}]", "[{name: i, dtype: int64, shape: [4, 1], data: [1, 2, 3, 4]}]",
		 "{op: GatherElements, inputs: [t, i], outputs: [y], attrs: {axis: 1}}", 0, 64},
		{"[{name: t, dtype: float32, shape: [1000, 8]}, {name: u, dtype: float32, shape: [2, 8]}]",
		 "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]", "{op: ScatterND, inputs: [t, i, u], outputs: [y]}", 0,
		 64144},
		{"[{name: t, dtype: float32, shape: [1000, 8]}, {name: u, dtype: float32, shape: [2, 8]}]",
		 "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]",
		 "{op: ScatterND, inputs: [t, i, u], outputs: [y], attrs: {reduction: add}}", 16, 64208},
		{"[{name: s, dtype: float32, shape: [4, 10]}]", "[{name: l, dtype: int64, shape: [4], data: [1, 2, 3, 4]}]",
		 "{op: NegativeLogLikelihoodLoss, inputs: [s, l], outputs: [y]}", 8, 52},
		{"[{name: s, dtype: float32, shape: [4, 10]}, {name: w, dtype: float32, shape: [10]}]",
		 "[{name: l, dtype: int64, shape: [4], data: [1, 2, 3, 4]}]",
		 "{op: NegativeLogLikelihoodLoss, inputs: [s, l, w], outputs: [y]}", 8, 68},
		{"[{name: x, dtype: float32, shape: [1, 2, 4, 4]}]", "[{name: q, dtype: float32, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", q], outputs: [y]}", 0, 656},
		{"[{name: x, dtype: float32, shape: [1, 2, 4, 4]}]", "[{name: q, dtype: float32, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", q], outputs: [y], attrs: {mode: linear}}", 1024, 656},
		{"[{name: x, dtype: float32, shape: [1, 1, 8, 8]}]", "[{name: q, dtype: int64, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", \"\", q], outputs: [y]}", 0, 64},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[768];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: %s\nparams: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].params, cases[k].node);
		struct exec_stats st = stats_of("moved_cost.yaml", text);
		cr_expect_eq(st.flops, cases[k].flops, "%s: %llu FLOPs", cases[k].node, (unsigned long long)st.flops);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: %llu bytes moved", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* An empty X resized into a non-empty output: the taps would read outside X (they read garbage
 * before): a clear error instead. */
Test(exec, resize_of_an_empty_input_to_a_non_empty_output_fails)
{
	struct graph *g = load_text("resize_empty.yaml", "graphdiet: 1\nopset: 18\n"
							 "inputs: [{name: x, dtype: float32, shape: [1, 1, 0, 4]}]\n"
							 "params: [{name: q, dtype: int64, shape: [4], data: [1, 1, 2, 4]}]\n"
							 "nodes: [{op: Resize, inputs: [x, \"\", \"\", q], outputs: [y]}]\n"
							 "outputs: [{name: y}]\n");
	struct exec_opts o = {.random_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_expect(!x && strstr(e.msg, "X is empty but the output is not"), "%s", e.msg);
	exec_free(x);
	graph_free(g);
}

/* A crop (tf_crop_and_resize) to an empty output, one axis's box of width 0, beside an axis of 2 * 10^9:
 * nothing to compute, and no taps' table of an entry per output index of each axis (144 GB; a
 * smaller one was fuzz_pipeline's out-of-memory: the table was made first). */
Test(exec, resize_to_an_empty_output_makes_no_taps)
{
	struct graph *g = load_text("resize_none.yaml", "graphdiet: 1\nopset: 18\n"
						      "inputs: [{name: x, dtype: float32, shape: [1, 1, 2, 2]}]\n"
						      "params: [{name: roi, dtype: float32, shape: [8], data: [1, 0, 0, 0, 1, 1, 1, 1e9]},\n"
						      "         {name: s, dtype: float32, shape: [4], data: [1, 1, 1, 1]}]\n"
						      "nodes: [{op: Resize, inputs: [x, roi, s], outputs: [y],\n"
						      "         attrs: {coordinate_transformation_mode: tf_crop_and_resize, mode: cubic}}]\n"
						      "outputs: [{name: y}]\n");
	struct exec_opts o = {.random_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_expect(y->numel == 0 && y->ndim == 4 && y->dims[0] == 0 && y->dims[3] == 2000000000LL, "y is %lld x %lld",
		  (long long)y->dims[0], (long long)y->dims[3]);
	exec_free(x);
	graph_free(g);
}

/* #52 pool: MaxPool's typed runs (pool.c: AVX-512 at strides 1 and 2, the compiled loop else),
 * ArgMax/ArgMin's typed lanes (select.c) and the tiled Transpose of large planes (layout.c)
 * against definitions written here, bit for bit (values, NaN payloads, signed zeros) and index
 * for index, float32 and float64, over sizes around the vector widths and tiles. */

/* graph text `yaml` run on x (dt, shape dims, data p); its graph in *g */
static struct exec *pl_run(const char *yaml, int dt, int nd, const int64_t *dims, void *p, struct graph **g)
{
	struct rtensor t = {.dtype = dt, .ndim = nd, .numel = 1, .data = p, .known = 1};
	for (int i = 0; i < nd; i++)
		t.numel *= t.dims[i] = dims[i];
	t.nbytes = (size_t)t.numel * dtype_size(dt);
	*g = load_text("pool.yaml", yaml);
	const char *name = "x";
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", yaml, e.msg);
	return x;
}

/* data with many ties: small integers and zeros of both signs, infinities and NaNs of distinct
 * payloads */
static double pl_value(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	if (k % 13 == 0) {
		uint64_t b = 0x7ff8000000000000ull | (k % 3 + 1) | (uint64_t)(k & 16) << 59;
		double d;
		memcpy(&d, &b, 8);
		return d;
	}
	static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 1e-40, -1e-310};
	if (k % 7 == 0)
		return special[k / 7 % 6];
	return (double)(k % 5) - 2;
}

/* p32 and v (what the kernel reads, in double) from p64's n values */
static void pl_widen(int f64, int64_t n, const double *p64, float *p32, double *v)
{
	for (int64_t i = 0; i < n; i++) {
		p32[i] = (float)p64[i];
		v[i] = f64 ? p64[i] : (double)p32[i];
	}
}

Test(exec, pool_max_pool_matches_its_definition_bit_for_bit)
{
	struct mp_case {
		int64_t h, w, k[2], s[2], d[2], pad[4];
		int ceil;
	} cases[] = {
		{48, 48, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0}, /* ResNet's stem */
		{9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1},
		{11, 70, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0},
		{7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0},
		{6, 600, {2, 5}, {1, 2}, {1, 2}, {1, 4, 0, 4}, 0}, /* more than a run of 256 */
		{12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0}, /* stride 3: the compiled loop */
		{5, 17, {5, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, 1},
		{1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0},
		{2, 2, {2, 2}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1},
	};
	enum { MAXN = 2 * 3 * 6 * 600 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct mp_case *k = &cases[c];
			cr_assert(6 * k->h * k->w <= MAXN);
			int64_t dims[4] = {2, 3, k->h, k->w}, sp = k->h * k->w;
			uint32_t s = (uint32_t)c * 31 + 5;
			for (int64_t i = 0; i < 6 * sp; i++)
				p64[i] = c & 1 ? rf_value(&s, i, k->w) : pl_value(&s);
			pl_widen(f64, 6 * sp, p64, p32, v);
			char text[800];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [2, 3, %lld, %lld]}]\nnodes:\n"
				 "  - {op: MaxPool, inputs: [x], outputs: [y, i], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
				 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d}}\noutputs: [{name: y}, {name: i}]\n",
				 f64 ? "float64" : "float32", (long long)k->h, (long long)k->w, (long long)k->k[0], (long long)k->k[1],
				 (long long)k->s[0], (long long)k->s[1], (long long)k->d[0], (long long)k->d[1], (long long)k->pad[0],
				 (long long)k->pad[1], (long long)k->pad[2], (long long)k->pad[3], k->ceil);
			struct graph *g;
			struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, 4, dims, f64 ? (void *)p64 : (void *)p32, &g);
			const struct rtensor *y = exec_value(x, g->outputs[0]), *ix = exec_value(x, g->outputs[1]);
			cr_assert(ix->dtype == DT_INT64 && ix->numel == y->numel);
			int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
			for (int64_t nc = 0; nc < 6; nc++)
				for (int64_t oy = 0; oy < oh; oy++)
					for (int64_t ox = 0; ox < ow; ox++) {
						int64_t arg, o = (nc * oh + oy) * ow + ox;
						double r = rf_max(v + nc * k->h * k->w, k->h, k->w, k->k, k->s, k->d, k->pad, oy, ox, &arg);
						arg += arg < 0 ? 0 : nc * k->h * k->w; /* flattened over the whole input */
						if ((!rf_same_nan(y, o, r, f64, 0) || ((const int64_t *)ix->data)[o] != arg) && !wrong++)
							first = o;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld of %lldx%lld outputs differ, the first %lld", f64 ? "float64" : "float32",
				     c, (long long)wrong, (long long)oh, (long long)ow, (long long)first);
			exec_free(x);
			graph_free(g);
		}
}

/* ArgMax (max 1) or ArgMin's answer for the lane of n elements step apart at v, by the walk the
 * operator documents: NaN larger than every number, the first of equal extremes (the last with
 * select_last_index), NaNs equal among themselves */
static int64_t pl_arg(const double *v, int64_t n, int64_t step, int max, int last)
{
	int64_t best = 0;
	for (int64_t r = 1; r < n; r++) {
		double a = v[r * step], b = v[best * step];
		int gt = isnan(a) ? !isnan(b) : !isnan(b) && a > b, lt = isnan(b) ? !isnan(a) : !isnan(a) && a < b;
		int same = a == b || (isnan(a) && isnan(b));
		if ((max ? gt : lt) || (last && same))
			best = r;
	}
	return best;
}

Test(exec, pool_argmax_argmin_match_the_walk)
{
	/* (outer, len, inner) lanes: the last axis (inner 1) around the vector widths and the 64-wide
	 * search blocks; other axes around ARG_RUN's 256 lanes */
	static const int64_t shapes[][3] = {{3, 1, 1},	 {4, 2, 1},   {5, 15, 1},  {9, 16, 1},   {7, 17, 1},  {3, 63, 1},
					    {3, 64, 1},	 {3, 65, 1},  {4, 130, 1}, {2, 1000, 1}, {0, 5, 1},   {1, 1, 7},
					    {2, 5, 15},	 {1, 33, 16}, {2, 3, 17},  {1, 4, 255},  {2, 2, 256}, {1, 3, 257},
					    {3, 6, 300}, {4, 1, 20}};
	enum { MAXN = 6000 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
			for (int how = 0; how < 8; how++) { /* ArgMin/ArgMax x keepdims x select_last_index */
				int max = how & 1, keep = how >> 1 & 1, last = how >> 2;
				int64_t outer = shapes[c][0], len = shapes[c][1], inner = shapes[c][2], n = outer * len * inner;
				cr_assert(n <= MAXN);
				uint32_t s = (uint32_t)(c * 8 + (size_t)how) * 7 + 1;
				for (int64_t i = 0; i < n; i++) {
					int64_t lane = i / (len * inner) * inner + i % inner;
					p64[i] = how & 2 ? rf_value(&s, i, len * inner) : pl_value(&s);
					if (lane % 5 == 2) /* lanes all NaN, of two payloads */
						p64[i] = i & 1 ? NAN : -NAN;
					if (lane % 5 == 4 && i / inner % len == 0) /* a NaN first */
						p64[i] = NAN;
				}
				pl_widen(f64, n, p64, p32, v);
				char text[600];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld%s%.0lld]}]\nnodes:\n"
					 "  - {op: %s, inputs: [x], outputs: [y], attrs: {axis: %d, keepdims: %d, select_last_index: %d}}\n"
					 "outputs: [{name: y}]\n",
					 f64 ? "float64" : "float32", (long long)outer, (long long)len, inner > 1 ? ", " : "",
					 (long long)(inner > 1 ? inner : 0), max ? "ArgMax" : "ArgMin", inner > 1 ? 1 : -1, keep, last);
				int64_t dims[3] = {outer, len, inner};
				int rank = inner > 1 ? 3 : 2; /* a contiguous lane: the last axis, -1 */
				struct graph *g;
				struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, rank, dims, f64 ? (void *)p64 : (void *)p32, &g);
				const struct rtensor *y = exec_value(x, g->outputs[0]);
				cr_assert(y->dtype == DT_INT64 && y->numel == outer * inner && y->ndim == rank - !keep);
				int64_t wrong = 0, first = -1;
				for (int64_t o = 0; o < outer; o++)
					for (int64_t i = 0; i < inner; i++)
						if (((const int64_t *)y->data)[o * inner + i] !=
							    pl_arg(v + o * len * inner + i, len, inner, max, last) &&
						    !wrong++)
							first = o * inner + i;
				cr_expect_eq(wrong, 0, "%s %s (%lld, %lld, %lld) keepdims %d select_last_index %d: %lld lanes differ, the first %lld",
					     max ? "ArgMax" : "ArgMin", f64 ? "float64" : "float32", (long long)outer, (long long)len,
					     (long long)inner, keep, last, (long long)wrong, (long long)first);
				exec_free(x);
				graph_free(g);
			}
}

Test(exec, pool_large_transposes_move_every_bit)
{
	/* planes of 256 or more both ways (the tiled path; 255 the banded one), tiles cut at the
	 * edges, batches of planes, 4- and 8-byte elements */
	static const struct {
		int64_t dims[3];
		const char *perm;
	} cases[] = {
		{{256, 256, 0}, "1, 0"},    {{300, 257, 0}, "1, 0"},	{{257, 1000, 0}, "1, 0"}, {{255, 700, 0}, "1, 0"},
		{{1030, 513, 0}, "1, 0"},   {{2, 260, 300}, "0, 2, 1"}, {{3, 256, 256}, "0, 2, 1"}, {{300, 2, 260}, "2, 1, 0"},
	};
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const int64_t *d = cases[c].dims;
			int r = d[2] ? 3 : 2;
			int64_t n = d[0] * d[1] * (r == 3 ? d[2] : 1);
			size_t es = f64 ? 8 : 4;
			uint8_t *p = xmalloc((size_t)n * es);
			uint32_t s = (uint32_t)c * 3 + 11;
			for (int64_t i = 0; i < n * (int64_t)es; i += 4) { /* any bits: NaNs of every payload */
				s = s * 1664525u + 1013904223u;
				memcpy(p + i, &s, 4);
			}
			char text[600];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld%s%.0lld]}]\nnodes:\n"
				 "  - {op: Transpose, inputs: [x], outputs: [y], attrs: {perm: [%s]}}\noutputs: [{name: y}]\n",
				 f64 ? "float64" : "float32", (long long)d[0], (long long)d[1], r == 3 ? ", " : "", (long long)d[2],
				 cases[c].perm);
			struct graph *g;
			struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, r, d, p, &g);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			int perm[3];
			for (int i = 0; i < r; i++)
				perm[i] = cases[c].perm[3 * i] - '0';
			int64_t st[3] = {r == 3 ? d[1] * d[2] : d[1], r == 3 ? d[2] : 1, 1}, wrong = 0, first = -1;
			int64_t od[3] = {d[perm[0]], d[perm[1]], r == 3 ? d[perm[2]] : 1};
			for (int64_t i = 0; i < od[0]; i++)
				for (int64_t j = 0; j < od[1]; j++)
					for (int64_t k = 0; k < od[2]; k++) {
						int64_t at[3] = {0, 0, 0}, o = (i * od[1] + j) * od[2] + k;
						at[perm[0]] = i, at[perm[1]] = j;
						if (r == 3)
							at[perm[2]] = k;
						int64_t src = at[0] * st[0] + at[1] * st[1] + (r == 3 ? at[2] : 0);
						if (memcmp((const uint8_t *)y->data + o * (int64_t)es, p + src * (int64_t)es, es) && !wrong++)
							first = o;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld elements differ, the first %lld", f64 ? "float64" : "float32", c,
				     (long long)wrong, (long long)first);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* #52 quant: the integer products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) in
 * float64 GEMMs, QuantizeLinear/DequantizeLinear/DynamicQuantizeLinear as typed loops, and the
 * CPU backend's float16/bfloat16 widening in one typed loop per tensor: each against naive loops
 * written here, bit for bit. K reaches 4099 and 4608 with sums past 2^24, which a float32 sum
 * would round. */
struct qt_in {
	const char *name;
	int dt, nd;
	int64_t dims[4];
	void *data;
};

static uint64_t qt_seed = 12345;

static uint64_t qt_rand(void)
{
	qt_seed = qt_seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return qt_seed >> 17;
}

static int64_t qt_numel(const struct qt_in *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->nd; i++)
		n *= t->dims[i];
	return n;
}

/* a tensor of random integers of dt (uint8, int8, uint16, int16, int32: the low bits) */
static void *qt_ints(int dt, int64_t n)
{
	size_t es = dtype_size(dt);
	uint8_t *p = xmalloc((size_t)n * es + 1);
	for (int64_t i = 0; i < n; i++) {
		uint64_t r = qt_rand();
		memcpy(p + i * (int64_t)es, &r, es);
	}
	return p;
}

static int64_t qt_get(int dt, const void *p, int64_t i)
{
	switch (dt) {
	case DT_UINT8: return ((const uint8_t *)p)[i];
	case DT_INT8: return ((const int8_t *)p)[i];
	case DT_UINT16: return ((const uint16_t *)p)[i];
	case DT_INT16: return ((const int16_t *)p)[i];
	default: return ((const int32_t *)p)[i];
	}
}

/* big operands (uint8 at least 192, int8 64 to 127): sums of products that do not cancel */
static void qt_big(int dt, void *p, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = dt == DT_UINT8 ? ((uint8_t *)p)[i] | 0xc0 : (((uint8_t *)p)[i] & 0x3f) | 0x40;
}

/* runs one node (its YAML) on the inputs; the executor and graph in *x, *g; output k's tensor */
static const struct rtensor *qt_run(struct graph **g, struct exec **x, const char *node, const struct qt_in *in, int n_in,
				    const char *outs)
{
	char text[4096];
	int at = snprintf(text, sizeof text, "graphdiet: 1\nopset: 19\ninputs: [");
	struct rtensor t[12];
	const char *names[12];
	for (int k = 0; k < n_in; k++) {
		char shape[100] = "";
		for (int i = 0, o = 0; i < in[k].nd; i++)
			o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", i ? ", " : "", (long long)in[k].dims[i]);
		at += snprintf(text + at, sizeof text - (size_t)at, "%s{name: %s, dtype: %s, shape: [%s]}", k ? ", " : "",
			       in[k].name, dtype_name(in[k].dt), shape);
		int64_t n = qt_numel(&in[k]);
		t[k] = (struct rtensor){.dtype = in[k].dt, .ndim = in[k].nd, .numel = n, .data = in[k].data,
					.nbytes = (size_t)n * dtype_size(in[k].dt), .known = 1};
		memcpy(t[k].dims, in[k].dims, sizeof in[k].dims);
		names[k] = in[k].name;
	}
	snprintf(text + at, sizeof text - (size_t)at, "]\nnodes:\n  - %s\noutputs: [%s]\n", node, outs ? outs : "{name: y}");
	*g = load_text("quant.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = n_in};
	*x = exec_run(*g, &o, NULL, &e);
	cr_assert(*x, "%s: %s", node, e.msg);
	return exec_value(*x, (*g)->outputs[0]);
}

/* the requantisation of an exact sum, as onnxruntime's float32 arithmetic does it */
static int64_t qt_requant(int64_t acc, float mult, float zy, double lo, double hi)
{
	float v = nearbyintf((float)acc * mult) + zy;
	if (v != v)
		return 0;
	return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

static void qt_range(int dt, double *lo, double *hi)
{
	*lo = dt == DT_UINT8 || dt == DT_UINT16 ? 0 : dt == DT_INT8 ? -128 : -32768;
	*hi = dt == DT_UINT8 ? 255 : dt == DT_INT8 ? 127 : dt == DT_UINT16 ? 65535 : 32767;
}

/* MatMulInteger and QLinearMatMul: A (2, 1, M, K) by B (3, K, N) (Y (2, 3, M, N)), and a 1-D A, over
 * uint8 and int8, zero points none, scalar or per row/column; M, K, N odd, and K 4099 */
Test(exec, quant_matmul_integer_matches_naive_loops)
{
	static const int64_t shapes[][3] = {{5, 7, 3}, {1, 1, 1}, {3, 4099, 9}, {17, 33, 65}, {9, 1, 11}};
	for (int s = 0; s < 5; s++)
		for (int dt = 0; dt < 2; dt++)
			for (int zpk = 0; zpk < 3; zpk++)
				for (int one_d = 0; one_d < 2; one_d++)
					for (int ql = 0; ql < 2; ql++) {
						int64_t M = one_d ? 1 : shapes[s][0], K = shapes[s][1], N = shapes[s][2];
						int adt = dt ? DT_INT8 : DT_UINT8, bdt = dt ? DT_UINT8 : DT_INT8, ydt = dt ? DT_INT8 : DT_UINT8;
						int64_t na = one_d ? 1 : 2, nbm = one_d ? 1 : 3;
						if (ql && !zpk)
							continue; /* QLinearMatMul's zero points are inputs */
						int64_t nza = zpk == 2 && !one_d ? M : 1, nzb = zpk == 2 ? N : 1;
						struct qt_in a = {"a", adt, one_d ? 1 : 4, {0}, qt_ints(adt, na * M * K)};
						if (one_d)
							a.dims[0] = K;
						else
							a.dims[0] = 2, a.dims[1] = 1, a.dims[2] = M, a.dims[3] = K;
						struct qt_in b = {"b", bdt, one_d ? 2 : 3, {0}, qt_ints(bdt, nbm * K * N)};
						if (one_d)
							b.dims[0] = K, b.dims[1] = N;
						else
							b.dims[0] = 3, b.dims[1] = K, b.dims[2] = N;
						if (K == 4099)
							qt_big(adt, a.data, na * M * K), qt_big(bdt, b.data, nbm * K * N);
						struct qt_in za = {"za", adt, zpk == 2 && !one_d, {nza}, qt_ints(adt, nza)};
						struct qt_in zb = {"zb", bdt, zpk == 2, {nzb}, qt_ints(bdt, nzb)};
						float sa = 0.0173f, sb = 0.0291f, sy = ql ? 0.37f * (float)K / 64 : 1;
						if (K == 1) /* the multiplier 1/2: an odd sum is a tie, rounded to even */
							sa = 0.5f, sb = 0.5f, sy = 0.5f;
						struct qt_in fa = {"sa", DT_FLOAT, 0, {0}, &sa}, fb = {"sb", DT_FLOAT, 0, {0}, &sb};
						struct qt_in fy = {"sy", DT_FLOAT, 0, {0}, &sy};
						struct qt_in zy = {"zy", ydt, 0, {0}, qt_ints(ydt, 1)};
						struct qt_in in[8];
						int n_in;
						const char *node;
						if (ql) {
							struct qt_in q[8] = {a, fa, za, b, fb, zb, fy, zy};
							memcpy(in, q, sizeof q);
							n_in = 8;
							node = "{op: QLinearMatMul, inputs: [a, sa, za, b, sb, zb, sy, zy], outputs: [y]}";
						} else {
							struct qt_in q[4] = {a, b, za, zb};
							memcpy(in, q, sizeof q);
							n_in = zpk ? 4 : 2;
							node = zpk ? "{op: MatMulInteger, inputs: [a, b, za, zb], outputs: [y]}"
								   : "{op: MatMulInteger, inputs: [a, b], outputs: [y]}";
						}
						struct graph *g;
						struct exec *x;
						const struct rtensor *y = qt_run(&g, &x, node, in, n_in, NULL);
						cr_assert_eq(y->numel, (one_d ? 1 : 6) * M * N);
						cr_assert_eq(y->dtype, ql ? ydt : DT_INT32);
						double lo, hi;
						qt_range(ydt, &lo, &hi);
						float mult = sa * sb / sy, fzy = (float)qt_get(ydt, zy.data, 0);
						int64_t wrong = 0, big = 0;
						for (int64_t t = 0; t < (one_d ? 1 : 6); t++)
							for (int64_t i = 0; i < M; i++)
								for (int64_t j = 0; j < N; j++) {
									int64_t ta = one_d ? 0 : t / 3, tb = one_d ? 0 : t % 3, acc = 0;
									int64_t zai = zpk ? qt_get(adt, za.data, nza > 1 ? i : 0) : 0;
									int64_t zbj = zpk ? qt_get(bdt, zb.data, nzb > 1 ? j : 0) : 0;
									for (int64_t l = 0; l < K; l++)
										acc += (qt_get(adt, a.data, (ta * M + i) * K + l) - zai) *
										       (qt_get(bdt, b.data, (tb * K + l) * N + j) - zbj);
									big += acc >= (1 << 24) || acc <= -(1 << 24);
									int64_t e = (t * M + i) * N + j, got;
									int64_t want = ql ? qt_requant(acc, mult, fzy, lo, hi) : (int32_t)acc;
									got = ql ? qt_get(ydt, y->data, e) : ((const int32_t *)y->data)[e];
									wrong += got != want;
								}
						cr_expect_eq(wrong, 0, "%s %s, M %lld K %lld N %lld, zero points %d, 1-D %d: %lld differ",
							     ql ? "QLinearMatMul" : "MatMulInteger", dtype_name(adt), (long long)M,
							     (long long)K, (long long)N, zpk, one_d, (long long)wrong);
						if (K == 4099 && !zpk && !ql)
							cr_expect_gt(big, 0, "no sum past 2^24");
						exec_free(x);
						graph_free(g);
						free(a.data), free(b.data), free(za.data), free(zb.data), free(zy.data);
					}
}

/* ConvInteger and QLinearConv: 2-D grouped, strided, dilated, padded unevenly; 1-D; and 512 input
 * channels by 3x3 (K 4608, sums past 2^24); uint8 and int8, the weight's zero point per channel or
 * one, QLinearConv with and without a bias */
Test(exec, quant_conv_integer_matches_naive_loops)
{
	struct qc {
		int64_t n, c, h, w, m, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr;
		int one_d;
	} cs[] = {
		{2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 2, 1, 0, 2, 1, 0},
		{1, 3, 1, 11, 4, 1, 3, 1, 1, 2, 1, 1, 0, 1, 0, 1, 1},
		{1, 512, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
		{2, 1, 5, 7, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
	};
	for (int ci = 0; ci < 4; ci++)
		for (int dt = 0; dt < 2; dt++)
			for (int wzk = 0; wzk < 2; wzk++)
				for (int ql = 0; ql < 3; ql++) {
					const struct qc *c = &cs[ci];
					int xdt = dt ? DT_INT8 : DT_UINT8, wdt = dt ? DT_UINT8 : DT_INT8, ydt = dt ? DT_UINT8 : DT_INT8;
					int64_t cg = c->c / c->group, mg = c->m / c->group;
					int64_t oh = (c->h + c->pt + c->pb - (c->dh * (c->kh - 1) + 1)) / c->sh + 1;
					int64_t ow = (c->w + c->pl + c->pr - (c->dw * (c->kw - 1) + 1)) / c->sw + 1;
					struct qt_in xi = {"x", xdt, c->one_d ? 3 : 4, {c->n, c->c, c->h, c->w}, qt_ints(xdt, c->n * c->c * c->h * c->w)};
					struct qt_in wi = {"w", wdt, c->one_d ? 3 : 4, {c->m, cg, c->kh, c->kw}, qt_ints(wdt, c->m * cg * c->kh * c->kw)};
					if (c->one_d)
						xi.dims[2] = c->w, wi.dims[2] = c->kw;
					if (ci == 2)
						qt_big(xdt, xi.data, c->n * c->c * c->h * c->w), qt_big(wdt, wi.data, c->m * cg * c->kh * c->kw);
					int64_t nwz = wzk ? c->m : 1;
					struct qt_in xz = {"xz", xdt, 0, {0}, qt_ints(xdt, 1)}, wz = {"wz", wdt, wzk, {nwz}, qt_ints(wdt, nwz)};
					if (ci == 2 && !wzk) /* zero points 0: the sums do not cancel */
						*(uint8_t *)xz.data = 0, *(uint8_t *)wz.data = 0;
					float sx = 0.011f, sw = 0.023f, sy = 0.05f * (float)(cg * c->kh * c->kw);
					if (ci == 3) /* the multiplier 1/2: ties */
						sx = 0.5f, sw = 0.5f, sy = 0.5f;
					struct qt_in fx = {"sx", DT_FLOAT, 0, {0}, &sx}, fw = {"sw", DT_FLOAT, 0, {0}, &sw};
					struct qt_in fy = {"sy", DT_FLOAT, 0, {0}, &sy}, zy = {"zy", ydt, 0, {0}, qt_ints(ydt, 1)};
					struct qt_in bi = {"B", DT_INT32, 1, {c->m}, qt_ints(DT_INT32, c->m)};
					for (int64_t m = 0; m < c->m; m++) /* biases of the sums' size */
						((int32_t *)bi.data)[m] %= 1 << 20;
					char attrs[300], node[600];
					if (c->one_d)
						snprintf(attrs, sizeof attrs, "group: %lld, strides: [%lld], dilations: [%lld], pads: [%lld, %lld]",
							 (long long)c->group, (long long)c->sw, (long long)c->dw, (long long)c->pl, (long long)c->pr);
					else
						snprintf(attrs, sizeof attrs,
							 "group: %lld, strides: [%lld, %lld], dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld]",
							 (long long)c->group, (long long)c->sh, (long long)c->sw, (long long)c->dh, (long long)c->dw,
							 (long long)c->pt, (long long)c->pl, (long long)c->pb, (long long)c->pr);
					struct qt_in in[9];
					int n_in;
					if (ql) {
						struct qt_in q[9] = {xi, fx, xz, wi, fw, wz, fy, zy, bi};
						memcpy(in, q, sizeof q);
						n_in = ql == 2 ? 9 : 8;
						snprintf(node, sizeof node, "{op: QLinearConv, inputs: [x, sx, xz, w, sw, wz, sy, zy%s], outputs: [y], attrs: {%s}}",
							 ql == 2 ? ", B" : "", attrs);
					} else {
						struct qt_in q[4] = {xi, wi, xz, wz};
						memcpy(in, q, sizeof q);
						n_in = 4;
						snprintf(node, sizeof node, "{op: ConvInteger, inputs: [x, w, xz, wz], outputs: [y], attrs: {%s}}", attrs);
					}
					struct graph *g;
					struct exec *x;
					const struct rtensor *y = qt_run(&g, &x, node, in, n_in, NULL);
					cr_assert_eq(y->numel, c->n * c->m * oh * ow, "%s", node);
					double lo, hi;
					qt_range(ydt, &lo, &hi);
					float mult = sx * sw / sy, fzy = (float)qt_get(ydt, zy.data, 0);
					int64_t wrong = 0, big = 0, xzv = qt_get(xdt, xz.data, 0);
					for (int64_t i = 0; i < c->n; i++)
						for (int64_t m = 0; m < c->m; m++)
							for (int64_t oy = 0; oy < oh; oy++)
								for (int64_t ox = 0; ox < ow; ox++) {
									int64_t acc = 0, wzv = qt_get(wdt, wz.data, wzk ? m : 0);
									for (int64_t ch = 0; ch < cg; ch++)
										for (int64_t ky = 0; ky < c->kh; ky++)
											for (int64_t kx = 0; kx < c->kw; kx++) {
												int64_t iy = oy * c->sh - c->pt + ky * c->dh;
												int64_t ix = ox * c->sw - c->pl + kx * c->dw;
												if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w)
													continue;
												int64_t xv = qt_get(xdt, xi.data, ((i * c->c + m / mg * cg + ch) * c->h + iy) * c->w + ix);
												int64_t wv = qt_get(wdt, wi.data, ((m * cg + ch) * c->kh + ky) * c->kw + kx);
												acc += (xv - xzv) * (wv - wzv);
											}
									big += acc >= (1 << 24) || acc <= -(1 << 24);
									int64_t e = ((i * c->m + m) * oh + oy) * ow + ox;
									int64_t want = !ql ? (int32_t)acc
										     : qt_requant(acc + (ql == 2 ? ((const int32_t *)bi.data)[m] : 0), mult, fzy, lo, hi);
									int64_t got = ql ? qt_get(ydt, y->data, e) : ((const int32_t *)y->data)[e];
									wrong += got != want;
								}
					cr_expect_eq(wrong, 0, "%s: %lld of %lld differ", node, (long long)wrong, (long long)y->numel);
					if (ci == 2 && !ql && !wzk)
						cr_expect_gt(big, 0, "no sum past 2^24");
					exec_free(x);
					graph_free(g);
					free(xi.data), free(wi.data), free(xz.data), free(wz.data), free(zy.data), free(bi.data);
				}
}

/* the verdict of a Quantize/DequantizeLinear case, and its run and inputs freed */
static void qt_done(const char *op, int from, int to, int64_t n, int per_axis, int64_t wrong, int64_t first, struct exec *x,
		    struct graph *g, void *a, void *b)
{
	cr_expect_eq(wrong, 0, "%s %s -> %s, %lld elements%s: %lld differ, the first #%lld", op, dtype_name(from),
		     dtype_name(to), (long long)n, per_axis ? " per axis" : "", (long long)wrong, (long long)first);
	exec_free(x);
	graph_free(g);
	free(a), free(b);
}

/* float32 edge values for QuantizeLinear: NaN, infinities, signed zeros, subnormals, ties, huge */
static const float qt_edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 0.5f, 1.5f, 2.5f, -0.5f,
				 -2.5f, 127.5f, 128.5f, -128.5f, 255.5f, 3e38f, -3e38f, 65535.5f, 1e9f, 0x1p-149f};

/* QuantizeLinear of float32 and float64 to uint8, int8, uint16 and int16, per tensor over 0, 1, 7
 * and 73731 elements, and per axis (x (3, 5, 7), axis 1 and -1); scales include a subnormal */
Test(exec, quant_quantize_linear_matches_its_formula)
{
	static const int dts[] = {DT_UINT8, DT_INT8, DT_UINT16, DT_INT16};
	static const int64_t ns[] = {0, 1, 7, 73731, -1, -2};
	for (int f64 = 0; f64 < 2; f64++)
		for (int d = 0; d < 4; d++)
			for (int k = 0; k < 6; k++) {
				int src = f64 ? DT_DOUBLE : DT_FLOAT, ydt = dts[d];
				int per_axis = ns[k] < 0;
				int64_t n = per_axis ? 105 : ns[k], ax = ns[k] == -1 ? 1 : 2, nk = per_axis ? (ax == 1 ? 5 : 7) : 1;
				int64_t inner = ax == 1 ? 7 : 1;
				struct qt_in xi = {"x", src, per_axis ? 3 : 1, {n}, xmalloc((size_t)n * 8 + 1)};
				if (per_axis)
					xi.dims[0] = 3, xi.dims[1] = 5, xi.dims[2] = 7;
				for (int64_t i = 0; i < n; i++) {
					int64_t ne = (int64_t)(sizeof qt_edges / sizeof *qt_edges);
					float f = i < ne ? qt_edges[i] : ((float)(int64_t)(qt_rand() % 200000) - 100000) / 97.0f;
					double v = i < ne ? (double)f : (double)f + (double)(qt_rand() % 1000) * 1e-12;
					if (f64)
						((double *)xi.data)[i] = v;
					else
						((float *)xi.data)[i] = f;
				}
				float sc[7] = {1.0f, 0.05f, 0.3f, 1e-40f, 7.0f, 0.011f, 2.5f}; /* per tensor 1: ties */
				struct qt_in si = {"s", DT_FLOAT, per_axis, {nk}, sc};
				struct qt_in zi = {"z", ydt, per_axis, {nk}, qt_ints(ydt, nk)};
				struct qt_in in[3] = {xi, si, zi};
				char node[200];
				snprintf(node, sizeof node, "{op: QuantizeLinear, inputs: [x, s, z], outputs: [y], attrs: {axis: %d}}",
					 ax == 1 ? 1 : -1);
				struct graph *g;
				struct exec *x;
				const struct rtensor *y = qt_run(&g, &x, node, in, 3, NULL);
				cr_assert_eq(y->dtype, ydt);
				double lo, hi;
				qt_range(ydt, &lo, &hi);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++) {
					int64_t kk = per_axis ? i / inner % nk : 0;
					float xv = f64 ? (float)((const double *)xi.data)[i] : ((const float *)xi.data)[i];
					float r = nearbyintf(xv / sc[kk]) + (float)qt_get(ydt, zi.data, kk);
					int64_t want = r != r ? 0 : (int64_t)(r < lo ? lo : r > hi ? hi : r);
					if (qt_get(ydt, y->data, i) != want && !wrong++)
						first = i;
				}
				qt_done("QuantizeLinear", src, ydt, n, per_axis, wrong, first, x, g, xi.data, zi.data);
			}
}

/* DequantizeLinear of uint8, int8, uint16, int16 and int32 to float32 and float64 (the scale's
 * dtype), per tensor over 0, 1, 7 and 73731 elements and per axis; scales NaN, inf, subnormal */
Test(exec, quant_dequantize_linear_matches_its_formula)
{
	static const int dts[] = {DT_UINT8, DT_INT8, DT_UINT16, DT_INT16, DT_INT32};
	static const int64_t ns[] = {0, 1, 7, 73731, -1};
	for (int f64 = 0; f64 < 2; f64++)
		for (int d = 0; d < 5; d++)
			for (int k = 0; k < 5; k++) {
				int xdt = dts[d], sdt = f64 ? DT_DOUBLE : DT_FLOAT;
				int per_axis = ns[k] < 0;
				int64_t n = per_axis ? 105 : ns[k], nk = per_axis ? 5 : 1;
				struct qt_in xi = {"x", xdt, per_axis ? 3 : 1, {n}, qt_ints(xdt, n)};
				if (per_axis)
					xi.dims[0] = 3, xi.dims[1] = 5, xi.dims[2] = 7;
				double sc[5] = {0.05, NAN, 1e-45, INFINITY, 0.1 + 1e-12};
				float scf[5];
				for (int i = 0; i < 5; i++)
					scf[i] = (float)sc[i];
				if (!per_axis) /* one finite scale */
					sc[0] = 0.0173, scf[0] = 0.0173f;
				struct qt_in si = {"s", sdt, per_axis, {nk}, f64 ? (void *)sc : (void *)scf};
				struct qt_in zi = {"z", xdt, per_axis, {nk}, qt_ints(xdt, nk)};
				struct qt_in in[3] = {xi, si, zi};
				struct graph *g;
				struct exec *x;
				const struct rtensor *y = qt_run(&g, &x, "{op: DequantizeLinear, inputs: [x, s, z], outputs: [y]}", in, 3, NULL);
				cr_assert_eq(y->dtype, sdt);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++) {
					int64_t kk = per_axis ? i / 7 % 5 : 0;
					float r = (float)(qt_get(xdt, xi.data, i) - qt_get(xdt, zi.data, kk)) * (float)(f64 ? sc[kk] : scf[kk]);
					int same;
					if (f64) {
						double w = r;
						same = !memcmp(&w, &((const double *)y->data)[i], 8);
					} else {
						same = !memcmp(&r, &((const float *)y->data)[i], 4);
					}
					if (!same && !wrong++)
						first = i;
				}
				qt_done("DequantizeLinear", xdt, sdt, n, per_axis, wrong, first, x, g, xi.data, zi.data);
			}
}

/* DynamicQuantizeLinear over 0, 1, 7, 17 and 73731 elements: NaN, signed zeros, all positive, all
 * negative, the extremes anywhere (the tail, one of 16 lanes) */
Test(exec, quant_dynamic_quantize_linear_matches_its_formula)
{
	static const int64_t ns[] = {0, 1, 7, 17, 73731};
	for (int k = 0; k < 5; k++)
		for (int sign = 0; sign < 3; sign++) {
			int64_t n = ns[k];
			float *p = xmalloc((size_t)n * 4 + 4);
			for (int64_t i = 0; i < n; i++) {
				float v = ((float)(int64_t)(qt_rand() % 20001) - 10000) / 37.0f;
				p[i] = sign == 1 ? fabsf(v) + 1 : sign == 2 ? -fabsf(v) - 1 : v;
			}
			if (n >= 7 && sign == 0)
				p[3] = NAN, p[4] = -0.0f, p[5] = -NAN;
			if (n == 17)
				p[16] = sign == 2 ? -1000.0f : 1000.0f; /* the extreme in the tail */
			if (n == 73731)
				p[40001] = -3000.0f, p[n - 2] = 2000.5f;
			struct qt_in xi = {"x", DT_FLOAT, 1, {n}, p};
			struct graph *g;
			struct exec *x;
			const struct rtensor *y = qt_run(&g, &x, "{op: DynamicQuantizeLinear, inputs: [x], outputs: [y, s, z]}", &xi, 1,
							 "{name: y}, {name: s}, {name: z}");
			const struct rtensor *ys = exec_value(x, g->outputs[1]), *yz = exec_value(x, g->outputs[2]);
			float lo = 0, hi = 0;
			for (int64_t i = 0; i < n; i++) {
				lo = p[i] < lo ? p[i] : lo;
				hi = p[i] > hi ? p[i] : hi;
			}
			float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
			float zr = nearbyintf(fminf(fmaxf(0.0f - lo / s, 0), 255));
			cr_expect(!memcmp(&s, ys->data, 4), "scale %a, not %a", (double)*(const float *)ys->data, (double)s);
			cr_expect_eq(*(const uint8_t *)yz->data, (uint8_t)zr);
			int64_t wrong = 0;
			for (int64_t i = 0; i < n; i++) {
				float r = nearbyintf(p[i] / s) + zr;
				int64_t want = r != r ? 0 : (int64_t)(r < 0 ? 0 : r > 255 ? 255 : r);
				wrong += ((const uint8_t *)y->data)[i] != want;
			}
			cr_expect_eq(wrong, 0, "DynamicQuantizeLinear of %lld elements (%d): %lld differ", (long long)n, sign,
				     (long long)wrong);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* float16 and bfloat16 inputs widened to float32 and the output narrowed back (exec/cpu.c): Neg
 * over every 16-bit pattern (NaN payloads, subnormals, infinities) and 0, 1, 7 elements, against
 * dtype.c's per-element rule f16_from_f32(-f32_from_f16(h)) */
Test(exec, quant_half_inputs_widen_and_narrow_by_the_per_element_rule)
{
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int bf = 0; bf < 2; bf++)
		for (int k = 0; k < 4; k++) {
			int dt = bf ? DT_BFLOAT16 : DT_FLOAT16;
			int64_t n = ns[k];
			uint16_t *p = xmalloc((size_t)n * 2 + 2);
			for (int64_t i = 0; i < n; i++)
				p[i] = (uint16_t)(i < 65536 ? (uint64_t)(65535 - i) : qt_rand());
			struct qt_in xi = {"x", dt, 1, {n}, p};
			struct graph *g;
			struct exec *x;
			const struct rtensor *y = qt_run(&g, &x, "{op: Neg, inputs: [x], outputs: [y]}", &xi, 1, NULL);
			cr_assert_eq(y->dtype, dt);
			int64_t wrong = 0, first = -1;
			for (int64_t i = 0; i < n; i++) {
				float v = bf ? f32_from_bf16(p[i]) : f32_from_f16(p[i]);
				uint16_t want = bf ? bf16_from_f32(-v) : f16_from_f32(-v);
				if (((const uint16_t *)y->data)[i] != want && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "Neg %s, %lld elements: %lld differ, the first #%lld (%04x)", dtype_name(dt), (long long)n,
				     (long long)wrong, (long long)first, first >= 0 ? p[first] : 0);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* #52 pool2: AveragePool's and LpPool's interior runs (pool_sum_run: AVX-512 lanes at strides 1
 * and 2, the compiled loop at others) and Resize's linear rows over widened column taps, against
 * their definitions written here, bit for bit (any NaN for a NaN), float32 and float64, over
 * NaNs, infinities, signed zeros, subnormals, huge values and doubles of full mantissas whose
 * sums round differently in another order; runs not a multiple of 16 long, longer than 256,
 * empty windows; and the same bits (NaN payloads too) with 1 thread and 3. */

/* values of many magnitudes, full mantissas, and specials one in 17 */
static double p2_value(uint32_t *s)
{
	static const double special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-45, -1e-310, 3e38, -3e38, 1e300};
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	if (k % 17 == 0)
		return special[k / 17 % (sizeof special / sizeof *special)];
	*s = *s * 1664525u + 1013904223u;
	double m = (double)k / 16777216.0 + (double)(*s >> 4) * 0x1p-52;
	return (k & 1 ? -1 : 1) * ldexp(m, (int)(k % 29) - 14);
}

/* n values of seed as float32 (p32) or float64 (p64), and in v as the kernel reads them */
static void p2_fill(uint32_t seed, int64_t n, int f64, double *v, float *p32, double *p64)
{
	for (int64_t i = 0; i < n; i++) {
		double d = p2_value(&seed);
		f64 ? (void)(p64[i] = d) : (void)(p32[i] = (float)d);
		v[i] = f64 ? d : (double)p32[i];
	}
}

/* node run over x (dims, data p) with 1 thread and with 3: the same bytes; the 1-thread run */
static struct exec *p2_run(const char *node, const char *extra, int f64, int nd, const int64_t *dims, void *p,
			   struct graph **g, const struct rtensor **y)
{
	struct graph *g3;
	const struct rtensor *y3;
	pool_set_threads(3);
	struct exec *x3 = rf_run(node, extra, f64, nd, dims, p, &g3, &y3);
	pool_set_threads(1);
	struct exec *x = rf_run(node, extra, f64, nd, dims, p, g, y);
	cr_expect((*y)->nbytes == y3->nbytes && !memcmp((*y)->data, y3->data, y3->nbytes), "%s: 1 and 3 threads differ",
		  node);
	exec_free(x3);
	graph_free(g3);
	return x;
}

struct p2_pool {
	int64_t h, w, k[2], s[2], d[2], pad[4];
	int ceil, incl;
};

static const struct p2_pool p2_pools[] = {
	{24, 24, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0}, /* the bench's */
	{9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 1},  {9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0},
	{7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 1},  {7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0},
	{4, 600, {2, 5}, {1, 2}, {1, 2}, {1, 4, 0, 4}, 0, 0}, /* runs past 256 */
	{4, 600, {2, 3}, {2, 1}, {1, 1}, {0, 1, 1, 1}, 1, 1},  {12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0, 1}, /* stride 3 */
	{5, 50, {2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}, 1, 0},  {5, 17, {5, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, 1, 0},
	{3, 31, {2, 3}, {2, 2}, {1, 1}, {0, 1, 0, 1}, 0, 0},  {3, 50, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	{4, 33, {3, 2}, {2, 1}, {1, 1}, {2, 0, 2, 0}, 1, 1}, /* windows of one row, the rest pads */
	{4, 33, {3, 2}, {2, 1}, {1, 1}, {2, 0, 2, 0}, 1, 0},  {1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	{1, 2, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
};
#define P2_NC 48 /* planes: enough that 3 threads cut them */
#define P2_MAXN (P2_NC * 4 * 600)

/* AveragePool (lp 0) or LpPool of p = lp over p2_pools[c]: every output against rf_avg or the
 * window's pow(|x|, p) summed in double from +0 in row-major order, then pow(sum, 1 / p) */
static void p2_pool_case(size_t c, int f64, int lp)
{
	static double v[P2_MAXN], p64[P2_MAXN];
	static float p32[P2_MAXN];
	const struct p2_pool *k = &p2_pools[c];
	int64_t dims[4] = {2, P2_NC / 2, k->h, k->w}, sp = k->h * k->w;
	cr_assert(P2_NC * sp <= P2_MAXN);
	p2_fill((uint32_t)(c * 4 + (size_t)lp * 2 + (size_t)f64) * 7 + 1, P2_NC * sp, f64, v, p32, p64);
	char node[400];
	snprintf(node, sizeof node,
		 "{op: %s, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
		 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d, %s: %d}}",
		 lp ? "LpPool" : "AveragePool", (long long)k->k[0], (long long)k->k[1], (long long)k->s[0], (long long)k->s[1],
		 (long long)k->d[0], (long long)k->d[1], (long long)k->pad[0], (long long)k->pad[1], (long long)k->pad[2],
		 (long long)k->pad[3], k->ceil, lp ? "p" : "count_include_pad", lp ? lp : k->incl);
	int64_t wrong = 0, first = -1;
	double want = 0;
	struct graph *g;
	const struct rtensor *y;
	struct exec *x = p2_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
	int64_t oh = y->dims[2], ow = y->dims[3];
	for (int64_t o = 0; o < P2_NC * oh * ow; o++) {
		int64_t nc = o / (oh * ow), oy = o / ow % oh, ox = o % ow;
		double r = 0;
		if (!lp) {
			r = rf_avg(v + nc * sp, k->h, k->w, k->k, k->s, k->d, k->pad, k->incl, oy, ox);
		} else {
			for (int64_t t = 0; t < k->k[0] * k->k[1]; t++) {
				int64_t iy = oy * k->s[0] - k->pad[0] + t / k->k[1] * k->d[0];
				int64_t ix = ox * k->s[1] - k->pad[1] + t % k->k[1] * k->d[1];
				if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
					r += pow(fabs(v[nc * sp + iy * k->w + ix]), (double)lp);
			}
			r = pow(r, 1 / (double)lp);
		}
		if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
			first = o, want = r;
	}
	cr_expect_eq(wrong, 0, "%s: %s: %lld of %lld outputs differ, the first %lld: %a, not %a", f64 ? "float64" : "float32",
		     node, (long long)wrong, (long long)(P2_NC * oh * ow), (long long)first, first < 0 ? 0 : rt_get(y, first),
		     want);
	exec_free(x);
	graph_free(g);
}

Test(exec, pool2_average_pool_runs_match_the_definition_at_1_and_3_threads)
{
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof p2_pools / sizeof *p2_pools; c++)
			p2_pool_case(c, f64, 0);
}

Test(exec, pool2_lp_pool_runs_match_the_definition_at_1_and_3_threads)
{
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof p2_pools / sizeof *p2_pools; c++)
			for (int p = 1; p <= 3; p++)
				if (!p2_pools[c].incl) /* LpPool has no count_include_pad */
					p2_pool_case(c, f64, p);
}

/* Resize linear over the last two axes of (2, 24, h, w): each output's 2 x 2 taps (rs_coord,
 * rs_taps) in order, row tap outer, a term left out where its weight wh ww is 0 */
Test(exec, pool2_resize_linear_rows_match_the_definition_at_1_and_3_threads)
{
	static const struct rs_case cases[] = {
		{4, {2, 24, 24, 24}, {2, 24, 48, 48}, 0, "linear", "half_pixel", ""}, /* the bench's */
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "align_corners", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "asymmetric", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 9, 40}, {2, 24, 4, 17}, 0, "linear", "half_pixel", ""}, /* down: rows skipped */
		{4, {2, 24, 9, 40}, {2, 24, 5, 3}, 0, "linear", "align_corners", ""},
		{4, {2, 24, 5, 300}, {2, 24, 6, 601}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 1, 5}, {2, 24, 3, 1}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 6, 1}, {2, 24, 11, 7}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 5, 7}, {2, 24, 5, 7}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 5, 7}, {4, 4, 8, 6}, 1, "linear", "half_pixel", ""}, /* scales x 4 */
		{4, {2, 24, 5, 7}, {4, 4, 9, 5}, 1, "linear", "align_corners", ""},
	};
	enum { MAXN = 48 * 5 * 300, MAXO = 48 * 6 * 601 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct rs_case *k = &cases[c];
			int64_t od[4], numel = 1, onum = 1;
			double s[4], len[4];
			for (int i = 0; i < 4; i++) {
				od[i] = k->scaled ? k->in[i] * k->out[i] / 4 : k->out[i];
				s[i] = k->scaled ? (double)(float)(k->out[i] / 4.0) : (double)od[i] / (double)k->in[i];
				len[i] = k->scaled ? (double)k->in[i] * s[i] : (double)od[i];
				numel *= k->in[i], onum *= od[i];
			}
			cr_assert(numel <= MAXN && onum <= MAXO);
			p2_fill((uint32_t)c * 5 + (uint32_t)f64 + 3, numel, f64, v, p32, p64);
			char extra[300], node[400];
			snprintf(extra, sizeof extra, "params: [{name: q, dtype: %s, shape: [4], data: [%g, %g, %g, %g]}]\n",
				 k->scaled ? "float32" : "int64", k->scaled ? k->out[0] / 4.0 : (double)k->out[0],
				 k->scaled ? k->out[1] / 4.0 : (double)k->out[1], k->scaled ? k->out[2] / 4.0 : (double)k->out[2],
				 k->scaled ? k->out[3] / 4.0 : (double)k->out[3]);
			snprintf(node, sizeof node,
				 "{op: Resize, inputs: [x, \"\", %s], outputs: [y], attrs: {mode: linear, "
				 "coordinate_transformation_mode: %s}}",
				 k->scaled ? "q" : "\"\", q", k->coord);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = p2_run(node, extra, f64, 4, k->in, f64 ? (void *)p64 : (void *)p32, &g, &y);
			cr_assert_eq(y->numel, onum);
			int64_t h = k->in[2], w = k->in[3], oh = od[2], ow = od[3], wrong = 0, first = -1;
			double want = 0;
			for (int64_t o = 0; o < onum; o++) {
				int64_t plane = o / (oh * ow), ry[4], rx[4];
				double wy[4], wx[4], sum = 0;
				int ny = rs_taps(k, rs_coord(k->coord, o / ow % oh, h, s[2], len[2]), h, ry, wy);
				int nx = rs_taps(k, rs_coord(k->coord, o % ow, w, s[3], len[3]), w, rx, wx);
				for (int a = 0; a < ny; a++)
					for (int b = 0; b < nx; b++) {
						double cw = 1 * 1 * wy[a] * wx[b];
						if (cw != 0)
							sum += cw * v[(plane * h + ry[a]) * w + rx[b]];
					}
				if (!rf_same_nan(y, o, sum, f64, 1) && !wrong++)
					first = o, want = sum;
			}
			cr_expect_eq(wrong, 0, "%s case %zu (%s): %lld of %lld outputs differ, the first #%lld: %a, not %a",
				     f64 ? "float64" : "float32", c, k->coord, (long long)wrong, (long long)onum, (long long)first,
				     first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* #52 lrngrid: LRN's float32 roots (beta 0.75, 0.5, 1: Newton steps from d's bits, the window sums
 * from a ring of squared rows with zero rows past the channels, 8 lanes at a time and a padded
 * last group) against y = x / (bias + alpha / size sum(x^2))^beta written here: the squares summed
 * in double from 0 in channel order, libm's pow, one rounding to float. Bit for bit (any NaN for a
 * NaN), at 1 and 3 threads alike: window sizes 1 to 17 (17: past the ring's 16 rows), fewer channels
 * than the window, pixel counts that leave 0 to 7 lanes over, bias 0 (d = 0 where a window is all
 * zeros: pow's inf or NaN), values in [-3, 3] with zeros, -0, subnormals, huge ones (d past the
 * roots' range), infinities and NaNs; and some quotients within 2^-40 of a float's rounding boundary
 * (about one in 2^15, counted here: the lanes the kernel gives to pow). */
Test(exec, lrngrid_lrn_roots_match_pow_bit_for_bit_at_1_and_3_threads)
{
	static const struct {
		int64_t dims[4], size;
		float alpha, beta, bias;
	} cases[] = {
		{{1, 64, 48, 48}, 5, 1e-4f, 0.75f, 1.0f}, /* the bench's row, one image */
		{{2, 16, 7, 41}, 5, 0.02f, 0.75f, 2.0f},  {{2, 16, 7, 41}, 3, 0.5f, 0.5f, 1.0f},
		{{2, 16, 7, 41}, 4, 0.5f, 1.0f, 1.5f},    {{1, 9, 1, 300}, 1, 0.3f, 0.75f, 0.5f},
		{{1, 9, 1, 257}, 2, 0.3f, 0.5f, 0.0f},    {{3, 3, 1, 13}, 5, 0.02f, 0.75f, 0.0f},
		{{2, 1, 3, 3}, 7, 0.02f, 1.0f, 1.0f},     {{1, 20, 1, 15}, 16, 0.7f, 0.75f, 1.0f},
		{{1, 20, 1, 15}, 17, 0.7f, 0.75f, 1.0f},  {{1, 20, 2, 7}, 17, 0.7f, 0.5f, 3.0f},
		{{4, 6, 1, 1}, 3, 1.0f, 0.75f, 1e-3f},    {{1, 8, 1, 64}, 5, 1e-4f, 0.75f, 1e-35f},
	};
	static const double sp[] = {0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY, 1e-40, -3e-39, 3e30, -2e25, 1e19, 0x1p-126};
	int64_t near = 0;
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		const int64_t *d = cases[c].dims, C = d[1], inner = d[2] * d[3], n = d[0] * C * inner;
		int64_t lo = (cases[c].size - 1) / 2, hi = cases[c].size / 2;
		double as = (double)cases[c].alpha / (double)cases[c].size, bias = cases[c].bias, beta = cases[c].beta;
		float *x = xmalloc((size_t)n * sizeof *x), *y1 = xmalloc((size_t)n * sizeof *y1);
		uint64_t seed = 4099 + c;
		for (int64_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			uint32_t r = (uint32_t)(seed >> 32);
			x[i] = (float)(r % 53 == 0 ? sp[r / 53 % 12] : r % 13 == 0 ? 0.0 : (double)(r >> 8) / 16777216.0 * 6.0 - 3.0);
		}
		for (int th = 1; th <= 3; th += 2) {
			struct rtensor t = shape_tensor(DT_FLOAT, 4, d, x);
			struct shape_run s;
			lrn_shape_run(&s, &t, cases[c].size, (double)cases[c].alpha, beta, bias, th);
			const float *y = s.y->data;
			int64_t wrong = 0, first = -1, differ = 0;
			float want0 = 0;
			for (int64_t i = 0; i < n; i++) {
				int64_t ch = i / inner % C, at = i - ch * inner;
				double sum = 0;
				for (int64_t k = ch - lo > 0 ? ch - lo : 0; k <= ch + hi && k < C; k++)
					sum += (double)x[at + k * inner] * x[at + k * inner];
				double q = x[i] / pow(bias + as * sum, beta);
				float want = (float)q;
				near += th == 1 && (float)(q - fabs(q) * 0x1p-40) != (float)(q + fabs(q) * 0x1p-40) && q == q && fabs(q) < INFINITY;
				if (memcmp(&want, y + i, 4) && !(isnan(want) && isnan(y[i])) && !wrong++)
					first = i, want0 = want;
				if (th == 3 && memcmp(y1 + i, y + i, 4))
					differ++;
			}
			cr_expect_eq(wrong, 0, "LRN case %zu (size %lld, beta %g) at %d threads: %lld of %lld wrong, the first #%lld: %a, not %a",
				     c, (long long)cases[c].size, beta, th, (long long)wrong, (long long)n, (long long)first,
				     first < 0 ? 0.0 : (double)y[first], (double)want0);
			cr_expect_eq(differ, 0, "LRN case %zu: %lld outputs differ between 1 and 3 threads", c, (long long)differ);
			if (th == 1)
				memcpy(y1, y, (size_t)n * sizeof *y);
			shape_done(&s);
		}
		xfree(x);
		xfree(y1);
	}
	cr_expect_gt(near, 0, "no quotient near a rounding boundary: the lanes given to pow are not covered");
}

/* #52 lrngrid: GridSample float32's channel rows four planes at a time (a point's taps read once for
 * four channels, the rest one by one) against the rule written here: PyTorch's unnormalize, border
 * clipping, the bilinear taps y-major with weights wy wx (or nearest, half to even), taps outside X
 * and zero weights skipped, the sum in double from 0 in that order, rounded once. Bit for bit, any
 * NaN for a NaN, at 1 and 3 threads alike: channel counts 1, 3, 4, 5, 8 and 11 (no, some and all
 * channels in fours), odd plane sizes, more points than a block, X with zeros, -0, NaN, infinities
 * and huge values, grid points outside [-1, 1] and on the edges. */
Test(exec, lrngrid_grid_sample_planes_match_the_rule_at_1_and_3_threads)
{
	static const int64_t shapes[][6] = {{2, 4, 5, 7, 9, 10}, {1, 1, 3, 3, 2, 2}, {2, 3, 6, 5, 4, 3},
					    {1, 5, 9, 11, 13, 17}, {2, 8, 24, 24, 24, 24}, {1, 11, 7, 1, 5, 29}};
	static const double sp[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 3e38, -1e-40};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int mode = 0; mode < 8; mode++) {
			int nearest = mode & 1, border = mode >> 1 & 1, align = mode >> 2;
			int64_t N = shapes[sh][0], C = shapes[sh][1], H = shapes[sh][2], W = shapes[sh][3], OH = shapes[sh][4],
				OW = shapes[sh][5], nx = N * C * H * W, ng = N * OH * OW * 2, ny = N * C * OH * OW;
			float *xd = xmalloc((size_t)nx * sizeof *xd), *gd = xmalloc((size_t)ng * sizeof *gd);
			float *y1 = xmalloc((size_t)ny * sizeof *y1);
			uint64_t seed = 31 + sh;
			for (int64_t i = 0; i < nx + ng; i++) {
				seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
				uint32_t r = (uint32_t)(seed >> 32);
				double u = (double)(r >> 8) / 16777216.0;
				if (i < nx)
					xd[i] = (float)(r % 41 == 0 ? sp[r / 41 % 7] : u * 8 - 4);
				else
					gd[i - nx] = (float)(r % 19 == 0 ? (double)(r / 19 % 3) - 1 : u * 2.6 - 1.3);
			}
			for (int th = 1; th <= 3; th += 2) {
				char node[200];
				snprintf(node, sizeof node,
					 "{op: GridSample, inputs: [x, r], outputs: [y], attrs: {mode: %s, padding_mode: %s, align_corners: %d}}",
					 nearest ? "nearest" : "bilinear", border ? "border" : "zeros", align);
				int64_t xdims[4] = {N, C, H, W}, gdims[4] = {N, OH, OW, 2};
				struct rtensor t[2] = {shape_tensor(DT_FLOAT, 4, xdims, xd), shape_tensor(DT_FLOAT, 4, gdims, gd)};
				struct shape_run s;
				shape_run(&s, node, t, 2, th);
				cr_assert_eq(s.y->numel, ny);
				const float *y = s.y->data;
				int64_t wrong = 0, first = -1, differ = 0;
				for (int64_t n = 0; n < N; n++)
					for (int64_t pt = 0; pt < OH * OW; pt++) {
						int64_t iy[2], ix[2];
						double wy[2], wx[2];
						int ty = gsr_axis(nearest, border, align, gd[(n * OH * OW + pt) * 2 + 1], H, iy, wy);
						int tx = gsr_axis(nearest, border, align, gd[(n * OH * OW + pt) * 2], W, ix, wx);
						for (int64_t ch = 0; ch < C; ch++) {
							double v = 0;
							for (int a = 0; a < ty; a++)
								for (int b = 0; b < tx; b++) {
									double wt = wy[a] * wx[b];
									if (iy[a] >= 0 && ix[b] >= 0 && wt != 0)
										v += wt * xd[((n * C + ch) * H + iy[a]) * W + ix[b]];
								}
							int64_t o = (n * C + ch) * OH * OW + pt;
							float want = (float)v;
							if (memcmp(&want, y + o, 4) && !(isnan(want) && isnan(y[o])) && !wrong++)
								first = o;
							if (th == 3 && memcmp(y1 + o, y + o, 4))
								differ++;
						}
					}
				cr_expect_eq(wrong, 0, "GridSample shape %zu mode %d at %d threads: %lld of %lld wrong, the first #%lld",
					     sh, mode, th, (long long)wrong, (long long)ny, (long long)first);
				cr_expect_eq(differ, 0, "GridSample shape %zu mode %d: %lld outputs differ between 1 and 3 threads", sh,
					     mode, (long long)differ);
				if (th == 1)
					memcpy(y1, y, (size_t)ny * sizeof *y);
				shape_done(&s);
			}
			xfree(xd);
			xfree(gd);
			xfree(y1);
		}
}
