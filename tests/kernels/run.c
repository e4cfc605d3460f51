/* kernels/run.c - test_kernels' one-node runs (kernels.h). */
#include "kernels.h"

/* node (YAML) over inputs named x, r, v (n of them) of ts, run with th threads */
void shape_run(struct shape_run *s, const char *node, struct rtensor *ts, int n, int th)
{
	char text[1024], ins[512] = "";
	static const char *names[3] = {"x", "r", "v"};
	for (int i = 0; i < n; i++) {
		char dims[128] = "";
		for (int d = 0; d < ts[i].ndim; d++)
			snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "", (long long)ts[i].dims[d]);
		snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s{name: %s, dtype: %s, shape: [%s]}", i ? ", " : "",
			 names[i], dtype_name(ts[i].dtype), dims);
	}
	snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: [%s]\nnodes:\n  - %s\noutputs: [{name: y}]\n", ins,
		 node);
	s->g = load_text("shape.yaml", text);
	pool_set_threads(th);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = n};
	s->x = exec_run(s->g, &o, NULL, &e);
	pool_set_threads(1);
	cr_assert(s->x, "%s: %s", node, e.msg);
	s->y = exec_value(s->x, s->g->outputs[0]);
}

void shape_done(struct shape_run *s)
{
	exec_free(s->x);
	graph_free(s->g);
}

struct rtensor shape_tensor(int dt, int nd, const int64_t *dims, void *data)
{
	struct rtensor t = {.dtype = dt, .ndim = nd, .numel = 1, .data = data, .known = 1};
	for (int i = 0; i < nd; i++)
		t.numel *= t.dims[i] = dims[i];
	t.nbytes = (size_t)t.numel * dtype_size(dt);
	return t;
}

/* a one-node graph `node` over x of dtype dt and shape dims (data p), run; its output y */
struct exec *rf_run(const char *node, const char *extra, int f64, int nd, const int64_t *dims, void *p,
		    struct graph **g, const struct rtensor **y)
{
	char shape[200] = "", text[1200];
	int64_t numel = 1;
	for (int i = 0; i < nd; i++) {
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "", (long long)dims[i]);
		numel *= dims[i];
	}
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}]\n%snodes:\n  - %s\noutputs: [{name: y}]\n",
		 f64 ? "float64" : "float32", shape, extra, node);
	*g = load_text("redfast.yaml", text);
	struct rtensor t = {.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = nd, .numel = numel, .data = p,
			    .nbytes = (size_t)numel * (f64 ? 8 : 4), .known = 1};
	memcpy(t.dims, dims, (size_t)nd * sizeof *dims);
	const char *name = "x";
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", node, e.msg);
	*y = exec_value(x, (*g)->outputs[0]);
	return x;
}

/* test data: specials (NaNs with payloads 1..3 and both signs, zeros, infinities, subnormals,
 * huge) at random places among values of [-3, 3], some rows all zeros or all -inf, some rows
 * zeros among values of one sign, some rows finite values alone */
double rf_value(uint32_t *s, int64_t i, int64_t row_len)
{
	static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 1e-40, -1e-40, 1e-310, -1e-310, 3e38, -3e38, 1e300};
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	int64_t row = row_len ? i / row_len : 0;
	if (row % 7 == 3)
		return k & 1 ? 0.0 : -0.0;
	if (row % 7 == 5)
		return -INFINITY;
	if (row % 7 == 1) /* zeros of both signs the row's largest (or smallest: rows ReduceMin reads
			   * as negated) */
		return k % 8 == 0 ? (k & 16 ? 0.0 : -0.0) : (row & 8 ? 1 : -1) * (1 + (double)(k % 4096) / 4096);
	if (row % 7 == 6) /* finite values alone, over a range whose exponentials sum inexactly */
		return ((double)(k % 4096) / 4096 - 0.5) * 120 + (double)(k % 7) * 1e-5;
	if (k % 61 == 0) {
		uint64_t b = 0x7ff8000000000000ull | (k % 3 + 1) | (uint64_t)(k & 8) << 60;
		double d;
		memcpy(&d, &b, 8);
		return d;
	}
	if (k % 5 == 0)
		return special[k / 5 % (sizeof special / sizeof *special)];
	return ((double)(k % 4096) / 4096 - 0.5) * 6;
}

/* Whether y[i] has r's bits; with any_nan, any NaN for a NaN: which of two NaNs a sum or a
 * product keeps is the compiler's operand order (x86 keeps the first's payload), here and in the
 * kernel alike: the sanitizer build's -O1 made the reference's L1 and AveragePool sums keep the
 * other payload than -O2 had */
int rf_same_nan(const struct rtensor *y, int64_t i, double r, int f64, int any_nan)
{
	if (any_nan && isnan(r))
		return f64 ? isnan(((const double *)y->data)[i]) : isnan(((const float *)y->data)[i]);
	if (f64)
		return !memcmp((const double *)y->data + i, &r, 8);
	float rf = (float)r;
	return !memcmp((const float *)y->data + i, &rf, 4);
}

/* AveragePool by its definition: each window's elements inside the image summed in double from
 * +0 in row-major window order, over their count, or with count_include_pad over the window's
 * positions inside the padded image (the ceil_mode overhang beyond the pads not counted) */
double rf_avg(const double *v, int64_t h, int64_t w, const int64_t *k, const int64_t *st, const int64_t *d,
	      const int64_t *pad, int incl, int64_t oy, int64_t ox)
{
	double s = 0;
	int64_t cnt = 0;
	for (int64_t i = 0; i < k[0]; i++)
		for (int64_t j = 0; j < k[1]; j++) {
			int64_t iy = oy * st[0] - pad[0] + i * d[0], ix = ox * st[1] - pad[1] + j * d[1];
			if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
				s += v[iy * w + ix];
				cnt++;
			} else if (incl && iy >= -pad[0] && iy < h + pad[2] && ix >= -pad[1] && ix < w + pad[3]) {
				cnt++;
			}
		}
	return cnt ? s / (double)cnt : 0;
}

/* n source elements of dtype dt: special values first, then random bits (NaN payloads, subnormals,
 * every float16 and bfloat16 pattern once their count allows) */
void cf_fill(int dt, void *data, int64_t n, uint64_t seed)
{
	static const float sf[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 65504, 65519.99f, 65520,
				   -65520, 1e30f, 3e9f, -3e9f, 2.5f, -2.5f, 0x1p-25f, 0x1.8p-24f, 0x1p-24f, 0x1.ffcp-15f,
				   1.00048828125f, 1.00146484375f, 0x1.00018p0f, 0x1.00008p0f, 2147483648.0f, 1e20f, -1e20f};
	static const double sd[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1e-40, 0x1.000001p0, 0x1.0000010000001p0,
				    65519.999999, 65520, 9.3e18, -9.3e18, 2147483647.5, -2147483648.9, 2147483648.0, 1e300};
	static const int64_t si[] = {INT64_MIN, INT64_MAX, 0, 1, -1, 2147483648LL, -2147483649LL, (1LL << 53) + 1, 65505, 4294967295LL};
	size_t es = dtype_size(dt);
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 11 ^ seed << 29;
		char *p = (char *)data + i * es;
		switch (dt) {
		case DT_FLOAT: {
			float f;
			uint32_t u = (uint32_t)r;
			memcpy(&f, &u, 4);
			if (i < (int64_t)(sizeof sf / sizeof *sf))
				f = sf[i];
			else if (i % 3 == 0) /* near float16's range, where its rounding cases are */
				f = ldexpf((float)(r & 0xffffff) / 0x1p24f, (int)(r >> 32) % 45 - 28) * (r >> 63 ? -1 : 1);
			memcpy(p, &f, 4);
			break;
		}
		case DT_DOUBLE: {
			double d;
			memcpy(&d, &r, 8);
			if (i < (int64_t)(sizeof sd / sizeof *sd))
				d = sd[i];
			else if (i % 3 == 0)
				d = ldexp((double)(r & 0xfffffffffffffULL) / 0x1p52, (int)(r >> 52) % 80 - 40);
			memcpy(p, &d, 8);
			break;
		}
		case DT_FLOAT16: case DT_BFLOAT16: {
			uint16_t h = (uint16_t)(n >= 65536 ? (uint64_t)i : r);
			memcpy(p, &h, 2);
			break;
		}
		case DT_BOOL: *(uint8_t *)p = (uint8_t)(i % 7 == 3 ? r : (uint64_t)(i % 2)); break; /* a few bytes not 0 or 1 */
		case DT_INT32: {
			int32_t v = i < (int64_t)(sizeof si / sizeof *si) ? (int32_t)si[i] : (int32_t)r;
			memcpy(p, &v, 4);
			break;
		}
		default: {
			int64_t v = i < (int64_t)(sizeof si / sizeof *si) ? si[i] : (int64_t)r >> (r & 31);
			memcpy(p, &v, 8);
			break;
		}
		}
	}
}

struct graph *diet_graph(int R, int C, double eps, double lr, double scale, int stochastic)
{
	char yaml[2048];
	snprintf(yaml, sizeof yaml,
		 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
		 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: g, dtype: float32, shape: [%d, %d]},"
		 " {name: t, dtype: int64, shape: []}, {name: vr, dtype: float32, shape: [%d]},"
		 " {name: vc, dtype: float32, shape: [%d]}]\n"
		 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', vr, vc],"
		 " outputs: [qn, '', vrn, vcn],\n     attrs: {beta2: 0.98, epsilon: %.17g, lr: %.17g,"
		 " schedule: none, warmup: 1.0, scale: %.17g, round: %s}}\n"
		 "outputs: [{name: qn}, {name: vrn}, {name: vcn}]\n",
		 R, C, R, C, R, C, eps, lr, scale, stochastic ? "stochastic" : "nearest");
	return load_text("diet.yaml", yaml);
}

void diet_run(struct graph *gr, const int16_t *q, const float *g, int R, int C, int th, int16_t *qn, uint64_t *key)
{
	float *vr = xcalloc((size_t)R + 1, sizeof *vr), *vc = xcalloc((size_t)C + 1, sizeof *vc);
	const int64_t dq[2] = {R, C}, dr[1] = {R}, dc[1] = {C};
	int64_t tv = 1;
	struct rtensor ins[5] = {rt_over(DT_INT16, 2, dq, (void *)q), rt_over(DT_FLOAT, 2, dq, (void *)g),
				 rt_over(DT_INT64, 0, dq, &tv), rt_over(DT_FLOAT, 1, dr, vr), rt_over(DT_FLOAT, 1, dc, vc)};
	const char *names[5] = {"q", "g", "t", "vr", "vc"};
	pool_set_threads(th);
	struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = 5};
	struct gd_err e = {0};
	struct exec *x = exec_run(gr, &xo, NULL, &e);
	cr_assert(x, "%s", e.msg);
	for (uint32_t n = 0; n < gr->n_nodes; n++)
		if (gr->nodes[n]->op == OP_DIET_ADAM)
			*key = exec_node_seed(x, gr->nodes[n]) ^ 0x9e3779b97f4a7c15ull; /* t = 1 */
	memcpy(qn, exec_value(x, strmap_get(&gr->names, "qn"))->data, sizeof(int16_t) * (size_t)(R * C));
	exec_free(x);
	pool_set_threads(1);
	xfree(vr);
	xfree(vc);
}

void lrn_shape_run(struct shape_run *s, struct rtensor *t, int64_t size, double alpha, double beta, double bias, int th)
{
	char node[300];
	snprintf(node, sizeof node, "{op: LRN, inputs: [x], outputs: [y], attrs: {size: %lld, alpha: %.9g, beta: %.9g, bias: %.9g}}",
		 (long long)size, alpha, beta, bias);
	shape_run(s, node, t, 1, th);
}

double rf_max(const double *v, int64_t h, int64_t w, const int64_t *k, const int64_t *st, const int64_t *d,
	      const int64_t *pad, int64_t oy, int64_t ox, int64_t *arg)
{
	double m = -INFINITY;
	int64_t at = -1;
	for (int64_t i = 0; i < k[0]; i++)
		for (int64_t j = 0; j < k[1]; j++) {
			int64_t iy = oy * st[0] - pad[0] + i * d[0], ix = ox * st[1] - pad[1] + j * d[1];
			if (iy < 0 || iy >= h || ix < 0 || ix >= w)
				continue;
			if (at < 0 || v[iy * w + ix] > m) {
				m = v[iy * w + ix];
				at = iy * w + ix;
			}
		}
	if (arg)
		*arg = at;
	return m;
}
