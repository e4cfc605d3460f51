/* kernels/seq.c - #52's kernel tests, part of test_kernels: Range, Trilu, CumSum, RotaryEmbedding,
 * GridSample, Einsum, Attention, Det, DFT, STFT. Each fast path against a reference written here, bit
 * for bit or within a stated bound. */
#include "kernels.h"

/* #52 einsum: Einsum's fast path (einsum.c: pairs contracted as batched GEMMs) against the sum
 * over every combination of label values written here in double: attention's two products, a
 * bilinear layer, batched products, transposes, diagonals, traces, one-operand sums, outer
 * products, ellipses, implicit outputs, sizes 1 and 0, outputs in another order than the product
 * gives; float32 within 1e-5 sqrt(K) of the sum of the terms' magnitudes, float64 within 1e-12. And
 * its cost: 2 FLOPs per combination of each pair's labels. */
struct es_case {
	const char *eq, *ref; /* ref: the equation explicit, ellipses spelled out (NULL: eq is) */
	int n;
	int64_t dims[3][4];
	int nd[3];
};

/* the sum over every combination of ref's label values (the equation explicit, letters only) of
 * ops' products, in double, into y and the magnitudes' sum into mag; the terms per element */
static int64_t es_reference(const char *ref, int n, const double *const *ops, const int64_t (*dims)[4], double *y,
			    double *mag, int64_t ny)
{
	char terms[4][16] = {{0}}, labels[32] = "";
	int64_t size[128] = {0};
	int k = 0, len = 0;
	for (const char *c = ref; *c; c++) {
		if (*c == ',' || *c == '-') {
			k++;
			len = 0;
			c += *c == '-';
			continue;
		}
		terms[k][len++] = *c;
		if (!strchr(labels, *c))
			labels[strlen(labels)] = *c;
	}
	cr_assert_eq(k, n, "%s", ref);
	for (int i = 0; i < n; i++)
		for (int d = 0; terms[i][d]; d++)
			size[(int)terms[i][d]] = dims[i][d];
	int nl = (int)strlen(labels);
	int64_t total = 1, inner = 1, idx[128] = {0};
	for (int l = 0; l < nl; l++) {
		total *= size[(int)labels[l]];
		inner *= strchr(terms[n], labels[l]) ? 1 : size[(int)labels[l]];
	}
	for (int64_t e = 0; e < ny; e++)
		y[e] = mag[e] = 0;
	for (int64_t e = 0; e < total; e++) {
		int64_t rem = e;
		for (int l = nl - 1; l >= 0; l--) {
			idx[(int)labels[l]] = rem % size[(int)labels[l]];
			rem /= size[(int)labels[l]];
		}
		double v = 1;
		for (int i = 0; i < n; i++) {
			int64_t at = 0;
			for (int d = 0; terms[i][d]; d++)
				at = at * size[(int)terms[i][d]] + idx[(int)terms[i][d]];
			v *= ops[i][at];
		}
		int64_t o = 0;
		for (int d = 0; terms[n][d]; d++)
			o = o * size[(int)terms[n][d]] + idx[(int)terms[n][d]];
		y[o] += v;
		mag[o] += fabs(v);
	}
	return inner;
}

static void es_check(const struct es_case *c, int f64)
{
	static const char *names[3] = {"a", "b", "c"};
	char text[1200], ins[600] = "", list[40] = "";
	struct rtensor t[3];
	double *val[3];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	size_t es = f64 ? 8 : 4;
	for (int i = 0; i < c->n; i++) {
		int64_t numel = 1;
		char shape[100] = "";
		for (int d = 0; d < c->nd[i]; d++) {
			numel *= c->dims[i][d];
			snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)c->dims[i][d]);
		}
		snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s{name: %s, dtype: %s, shape: [%s]}", i ? ", " : "",
			 names[i], f64 ? "float64" : "float32", shape);
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
		val[i] = xmalloc((size_t)(numel + 1) * sizeof(double));
		t[i] = (struct rtensor){.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = c->nd[i], .numel = numel,
					.data = xmalloc((size_t)(numel + 1) * es), .nbytes = (size_t)numel * es, .known = 1};
		memcpy(t[i].dims, c->dims[i], sizeof c->dims[i]);
		for (int64_t e = 0; e < numel; e++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			float v = (float)((double)(s >> 40) / (double)(1 << 24) * 2 - 1);
			val[i][e] = v;
			if (f64)
				((double *)t[i].data)[e] = v;
			else
				((float *)t[i].data)[e] = v;
		}
	}
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [%s]\nnodes:\n  - {op: Einsum, inputs: [%s], outputs: [y], attrs: {equation: \"%s\"}}\n"
		 "outputs: [{name: y}]\n",
		 ins, list, c->eq);
	struct graph *g = load_text("einsum_fast.yaml", text);
	struct exec *x3 = NULL, *x = NULL;
	for (int th = 3; th >= 1; th -= 2) { /* the same bits at 1 thread as at 3 */
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = (size_t)c->n};
		pool_set_threads(th);
		*(th == 3 ? &x3 : &x) = exec_run(g, &o, NULL, &e);
		cr_assert(th == 3 ? x3 : x, "%s: %s", c->eq, e.msg);
	}
	const struct rtensor *y = exec_value(x, g->outputs[0]), *y3 = exec_value(x3, g->outputs[0]);
	cr_expect(y->nbytes == y3->nbytes && !memcmp(y->data, y3->data, y->nbytes), "%s: 1 and 3 threads differ", c->eq);
	cr_assert_eq(y->dtype, t[0].dtype, "%s", c->eq);
	double *r = xmalloc((size_t)(y->numel + 1) * sizeof *r), *mag = xmalloc((size_t)(y->numel + 1) * sizeof *mag);
	const double *ops[3] = {val[0], val[1], val[2]};
	int64_t k = es_reference(c->ref ? c->ref : c->eq, c->n, ops, c->dims, r, mag, y->numel);
	double tol = f64 ? 1e-12 : 1e-5 * sqrt((double)(k > 1 ? k : 1));
	int bad = 0;
	for (int64_t i = 0; i < y->numel && bad < 3; i++) {
		double got = f64 ? ((const double *)y->data)[i] : ((const float *)y->data)[i];
		if (!(fabs(got - r[i]) <= tol * mag[i] + (f64 ? 1e-300 : 1e-30))) {
			cr_expect_fail("%s %s: element %lld is %.9g, the sum %.9g (magnitudes %.3g)", c->eq,
				       f64 ? "float64" : "float32", (long long)i, got, r[i], mag[i]);
			bad++;
		}
	}
	exec_free(x);
	exec_free(x3);
	graph_free(g);
	for (int i = 0; i < c->n; i++) {
		free(val[i]);
		free(t[i].data);
	}
	free(r);
	free(mag);
}

Test(exec, einsum_fast_path_against_the_sum_written_here)
{
	static const struct es_case cases[] = {
		{"bhqd,bhkd->bhqk", NULL, 2, {{2, 3, 5, 4}, {2, 3, 6, 4}}, {4, 4}},
		{"bhqk,bhkd->bhqd", NULL, 2, {{2, 3, 5, 6}, {2, 3, 6, 4}}, {4, 4}},
		{"bi,oij,bj->bo", NULL, 3, {{3, 4}, {5, 4, 6}, {3, 6}}, {2, 3, 2}},
		{"bij,bjk->bik", NULL, 2, {{2, 3, 4}, {2, 4, 5}}, {3, 3}},
		{"bjk,bij->bik", NULL, 2, {{2, 4, 5}, {2, 3, 4}}, {3, 3}},
		{"ij->ji", NULL, 1, {{3, 5}}, {2}},
		{"ii->i", NULL, 1, {{4, 4}}, {2}},
		{"bii->b", NULL, 1, {{3, 4, 4}}, {3}},
		{"ii", "ii->", 1, {{5, 5}}, {2}},
		{"ij->i", NULL, 1, {{5, 7}}, {2}},
		{"ij->j", NULL, 1, {{5, 7}}, {2}},
		{"ijk->", NULL, 1, {{3, 5, 7}}, {3}},
		{"i,j->ij", NULL, 2, {{5}, {7}}, {1, 1}},
		{"ij,ij->", NULL, 2, {{4, 5}, {4, 5}}, {2, 2}},
		{"ijk,k->i", NULL, 2, {{2, 3, 4}, {4}}, {3, 1}},
		{"ij,jk", "ij,jk->ik", 2, {{3, 4}, {4, 2}}, {2, 2}},
		{"...ij,...jk->...ik", "xyij,xyjk->xyik", 2, {{2, 3, 4, 5}, {2, 3, 5, 2}}, {4, 4}},
		{"b...d,b...d->b...", "bxd,bxd->bx", 2, {{3, 4, 5}, {3, 4, 5}}, {3, 3}},
		{"a...", "ax->xa", 1, {{3, 4}}, {2}},
		{"bij,bjk->kib", NULL, 2, {{2, 3, 4}, {2, 4, 5}}, {3, 3}},
		{"bhqd,bhkd->hkbq", NULL, 2, {{2, 3, 5, 4}, {2, 3, 6, 4}}, {4, 4}},
		{"ik,kj->ij", NULL, 2, {{7, 301}, {301, 9}}, {2, 2}},
		{"bhqd,bhkd->bhqk", NULL, 2, {{1, 3, 1, 4}, {1, 3, 6, 4}}, {4, 4}},
		{"ij,jk->ik", NULL, 2, {{1, 1}, {1, 1}}, {2, 2}},
		{"ij,jk->ik", NULL, 2, {{3, 0}, {0, 4}}, {2, 2}},
		{"ij,jk->ik", NULL, 2, {{0, 3}, {3, 4}}, {2, 2}},
		{"bij,bjk->bik", NULL, 2, {{0, 3, 4}, {0, 4, 5}}, {3, 3}},
		{"ij->i", NULL, 1, {{3, 0}}, {2}},
		{"iij,jk,kl->il", NULL, 3, {{3, 3, 4}, {4, 5}, {5, 2}}, {3, 2, 2}},
		/* big enough to be cut into pieces over 3 threads */
		{"ij->i", NULL, 1, {{300, 100}}, {2}},
		{"ij->j", NULL, 1, {{300, 100}}, {2}},
		{"i,j->ij", NULL, 2, {{300}, {100}}, {1, 1}},
		{"bij,bkj->bik", NULL, 2, {{128, 32, 32}, {128, 32, 32}}, {3, 3}},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
		for (int f64 = 0; f64 < 2; f64++)
			es_check(&cases[k], f64);
}

Test(exec, einsum_costs_two_flops_per_combination_of_each_pairs_labels)
{
	/* bhqd,bhkd->bhqk over (2,3,5,4) and (2,3,6,4): 2 x 2 3 5 6 4 = 1440 FLOPs; bytes 4 x (120 +
	 * 144 + 180) = 1776. bi,oij,bj->bo over (3,4), (5,4,6), (3,6): b i o j of the first pair, 2 x
	 * 3 4 5 6 = 720, then b o j, 2 x 3 5 6 = 180: 900; bytes 4 x (12 + 120 + 18 + 15) = 660. ii->i
	 * over (4,4): 4 additions (one per diagonal element read); bytes 4 x (16 + 4). */
	static const struct {
		const char *inputs, *node;
		uint64_t flops, bytes;
	} cases[] = {
		{"[{name: a, dtype: float32, shape: [2, 3, 5, 4]}, {name: b, dtype: float32, shape: [2, 3, 6, 4]}]",
		 "{op: Einsum, inputs: [a, b], outputs: [y], attrs: {equation: \"bhqd,bhkd->bhqk\"}}", 1440, 1776},
		{"[{name: a, dtype: float32, shape: [3, 4]}, {name: b, dtype: float32, shape: [5, 4, 6]}, "
		 "{name: c, dtype: float32, shape: [3, 6]}]",
		 "{op: Einsum, inputs: [a, b, c], outputs: [y], attrs: {equation: \"bi,oij,bj->bo\"}}", 900, 660},
		{"[{name: a, dtype: float32, shape: [4, 4]}]",
		 "{op: Einsum, inputs: [a], outputs: [y], attrs: {equation: \"ii->i\"}}", 4, 80},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[600];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].node);
		struct exec_stats st = stats_of("einsum_cost.yaml", text);
		cr_expect_eq(st.flops, cases[k].flops, "%s: %llu FLOPs", cases[k].node, (unsigned long long)st.flops);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: %llu bytes", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* #52 attn: float32 Attention as blocks of query rows, each two GEMMs with the softmax between
 * (under is_causal blocks of 16 to 128 rows that read only the keys up to their last row), against the
 * definition computed here in double from the same inputs. */

struct at_case {
	const char *name;
	int three, B, hq, hkv, L, T, D, Dv, causal, dt;
	double scale, cap;
	int mask, mdims; /* mask: 0 none, 1 float32, 2 bool; its shape, right-aligned to (B, hq, L, T) */
	int64_t md[4];
};

/* The offset of (b, h, s, d) in a 4-D (B, H, S, D) or 3-D (B, S, H D) tensor. */
static int64_t at_off(int three, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s, int64_t d)
{
	return three ? (b * S + s) * H * D + h * D + d : ((b * H + h) * S + s) * D + d;
}

/* a deterministic value in [-2, 2) */
static double at_val(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*seed >> 40) / (double)(1 << 22) - 2;
}

/* The definition in double at (b, h, i, e): softmax over j of (scale q_i . k_j, softcapped, plus the
 * mask, -inf where causal and j > i), times v; NaN where every key is masked. */
static double at_definition(const struct at_case *c, const double *q, const double *k, const double *v,
			    const double *m, int64_t b, int64_t h, int64_t i, int64_t e)
{
	int64_t hk = h / (c->hq / c->hkv);
	double scale = c->scale ? c->scale : 1 / sqrt((double)c->D), mx = -INFINITY, z = 0, acc = 0;
	double *s = malloc(sizeof *s * (size_t)(c->T + 1));
	for (int64_t j = 0; j < c->T; j++) {
		double d = 0;
		for (int64_t t = 0; t < c->D; t++)
			d += q[at_off(c->three, c->hq, c->L, c->D, b, h, i, t)] * k[at_off(c->three, c->hkv, c->T, c->D, b, hk, j, t)];
		d *= scale;
		if (c->cap > 0)
			d = c->cap * tanh(d / c->cap);
		if (c->mask) {
			int64_t idx[4] = {b, h, i, j}, off = 0, st = 1;
			for (int a = c->mdims - 1, x = 3; a >= 0; a--, x--) {
				off += (c->md[a] == 1 ? 0 : idx[x]) * st;
				st *= c->md[a];
			}
			d += c->mask == 2 ? (m[off] != 0 ? 0 : -INFINITY) : m[off];
		}
		if (c->causal && j > i)
			d = -INFINITY;
		s[j] = d;
		mx = d > mx ? d : mx;
	}
	for (int64_t j = 0; j < c->T; j++) {
		double p = mx == -INFINITY ? NAN : exp(s[j] - mx);
		z += p;
		acc += p * v[at_off(c->three, c->hkv, c->T, c->Dv, b, hk, j, e)];
	}
	free(s);
	return acc / z;
}

Test(exec, attention_matches_its_definition)
{
	static const struct at_case cases[] = {
		{"one query, one key", 0, 1, 1, 1, 1, 1, 3, 2, 0, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"one query, one key, causal", 0, 1, 1, 1, 1, 1, 3, 2, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"37 x 37, three heads", 0, 2, 3, 3, 37, 37, 8, 5, 0, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal 70 x 70, grouped-query, float mask (L, T)", 0, 2, 4, 2, 70, 70, 16, 7, 1, DT_FLOAT, 0, 0, 1, 2, {70, 70}},
		{"causal L 45 > T 29, bool mask (B, 1, L, T)", 0, 2, 2, 1, 45, 29, 5, 3, 1, DT_FLOAT, 0, 0, 2, 4, {2, 1, 45, 29}},
		{"causal 3-D L 19 < T 53, float mask (L, 1), scale", 1, 2, 3, 3, 19, 53, 4, 4, 1, DT_FLOAT, 0.3, 0, 1, 2, {19, 1}},
		{"L 33, T 130, softcap, bool mask (T)", 0, 1, 2, 2, 33, 130, 6, 5, 0, DT_FLOAT, 0, 2.5, 2, 1, {130}},
		{"causal 130 x 130, one head", 0, 1, 1, 1, 130, 130, 9, 9, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal 3-D 100 x 100, grouped-query, float mask (B, hq, L, T)", 1, 1, 4, 1, 100, 100, 8, 3, 1, DT_FLOAT, 0,
		 0, 1, 4, {1, 4, 100, 100}},
		{"causal 520 x 520 (blocks of 128), one head", 0, 1, 1, 1, 520, 520, 4, 3, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal L 300 < T 1030 (blocks of 128), bool mask (L, T)", 0, 1, 2, 1, 300, 1030, 4, 2, 1, DT_FLOAT, 0, 0, 2, 2,
		 {300, 1030}},
		{"float64: causal 70 x 70, grouped-query, float mask", 0, 2, 4, 2, 70, 70, 16, 7, 1, DT_DOUBLE, 0, 0, 1, 2, {70, 70}},
		{"float64: causal L 45 > T 29, bool mask", 0, 2, 2, 1, 45, 29, 5, 3, 1, DT_DOUBLE, 0, 0, 2, 4, {2, 1, 45, 29}},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		const struct at_case *c = &cases[ci];
		int64_t nq = (int64_t)c->B * c->hq * c->L * c->D, nk = (int64_t)c->B * c->hkv * c->T * c->D;
		int64_t nv = (int64_t)c->B * c->hkv * c->T * c->Dv, ny = (int64_t)c->B * c->hq * c->L * c->Dv, nm = 1;
		for (int a = 0; a < c->mdims; a++)
			nm *= c->md[a];
		int64_t ns[4] = {nq, nk, nv, c->mask ? nm : 0};
		double *dv[4];
		struct rtensor t[4];
		uint64_t seed = 1234 + ci;
		for (int a = 0; a < 4; a++) {
			dv[a] = malloc(sizeof(double) * (size_t)(ns[a] + 1));
			int mdt = a < 3 ? c->dt : c->mask == 2 ? DT_BOOL : DT_FLOAT;
			t[a] = (struct rtensor){.dtype = mdt, .numel = ns[a], .nbytes = (size_t)ns[a] * dtype_size(mdt), .known = 1};
			t[a].data = malloc(t[a].nbytes + 8);
			for (int64_t i = 0; i < ns[a]; i++) {
				double x = at_val(&seed);
				if (a == 3 && c->mask == 2) /* false about one in four; all of query row 3 false */
					x = x > -1 && !(c->mdims >= 2 && c->md[c->mdims - 2] > 3 && i / c->md[c->mdims - 1] % c->md[c->mdims - 2] == 3);
				else if (a == 3 && x < -1.8) /* some -inf in a float mask */
					x = -INFINITY;
				else if (c->dt == DT_FLOAT || a == 3)
					x = (float)x;
				dv[a][i] = x;
				rt_set(&t[a], i, x);
			}
		}
		const int64_t *shapes[3];
		int64_t sq[4] = {c->B, c->hq, c->L, c->D}, sk[4] = {c->B, c->hkv, c->T, c->D}, sv[4] = {c->B, c->hkv, c->T, c->Dv};
		int64_t q3[3] = {c->B, c->L, (int64_t)c->hq * c->D}, k3[3] = {c->B, c->T, (int64_t)c->hkv * c->D};
		int64_t v3[3] = {c->B, c->T, (int64_t)c->hkv * c->Dv};
		shapes[0] = c->three ? q3 : sq, shapes[1] = c->three ? k3 : sk, shapes[2] = c->three ? v3 : sv;
		char text[1600], in[3][96], ms[96] = "", attrs[256] = "";
		for (int a = 0; a < 3; a++) {
			t[a].ndim = c->three ? 3 : 4;
			memcpy(t[a].dims, shapes[a], sizeof(int64_t) * (size_t)t[a].ndim);
			const int64_t *d = shapes[a];
			if (c->three)
				snprintf(in[a], sizeof in[a], "[%lld, %lld, %lld]", (long long)d[0], (long long)d[1], (long long)d[2]);
			else
				snprintf(in[a], sizeof in[a], "[%lld, %lld, %lld, %lld]", (long long)d[0], (long long)d[1],
					 (long long)d[2], (long long)d[3]);
		}
		t[3].ndim = c->mdims;
		memcpy(t[3].dims, c->md, sizeof c->md);
		if (c->mask) {
			int k = snprintf(ms, sizeof ms, ", {name: m, dtype: %s, shape: [", c->mask == 2 ? "bool" : "float32");
			for (int a = 0; a < c->mdims; a++)
				k += snprintf(ms + k, sizeof ms - (size_t)k, "%s%lld", a ? ", " : "", (long long)c->md[a]);
			snprintf(ms + k, sizeof ms - (size_t)k, "]}");
		}
		snprintf(attrs, sizeof attrs, "is_causal: %d, scale: %g, softcap: %g, q_num_heads: %d, kv_num_heads: %d", c->causal,
			 c->scale, c->cap, c->three ? c->hq : 0, c->three ? c->hkv : 0);
		const char *dn = dtype_name(c->dt);
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 23\ninputs: [{name: q, dtype: %s, shape: %s}, {name: k, dtype: %s, shape: %s}, "
			 "{name: v, dtype: %s, shape: %s}%s]\nnodes:\n  - {op: Attention, inputs: [q, k, v%s], outputs: [y], "
			 "attrs: {%s}}\noutputs: [{name: y}]\n",
			 dn, in[0], dn, in[1], dn, in[2], ms, c->mask ? ", m" : "", attrs);
		struct graph *g = load_text("attention.yaml", text);
		const char *names[4] = {"q", "k", "v", "m"};
		void *first = NULL;
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = c->mask ? 4 : 3};
			struct exec *ex = exec_run(g, &o, NULL, &e);
			cr_assert(ex, "%s: %s", c->name, e.msg);
			const struct rtensor *y = exec_value(ex, g->outputs[0]);
			cr_assert_eq(y->numel, ny, "%s", c->name);
			if (!first) {
				int64_t bad = 0, nans = 0, firstbad = -1;
				double got0 = 0, want0 = 0;
				for (int64_t b = 0; b < c->B; b++)
					for (int64_t h = 0; h < c->hq; h++)
						for (int64_t i = 0; i < c->L; i++)
							for (int64_t e2 = 0; e2 < c->Dv; e2++) {
								int64_t at = at_off(c->three, c->hq, c->L, c->Dv, b, h, i, e2);
								double want = at_definition(c, dv[0], dv[1], dv[2], dv[3], b, h, i, e2);
								double got = rt_get(y, at);
								/* outputs are under 2: float32's rounding of S, exp and the sums */
								double tol = c->dt == DT_FLOAT ? 4e-6 : 1e-13;
								int ok = isnan(want) ? isnan(got) : fabs(got - want) <= tol;
								nans += isnan(want);
								if (!ok && !bad++)
									firstbad = at, got0 = got, want0 = want;
							}
				cr_expect_eq(bad, 0, "%s: %lld of %lld outputs off the definition, the first #%lld: %.9g, not %.9g",
					     c->name, (long long)bad, (long long)ny, (long long)firstbad, got0, want0);
				cr_expect(c->mask != 2 || c->mdims < 2 || nans > 0, "%s: a row all masked is NaN", c->name);
				first = malloc(y->nbytes + 1);
				memcpy(first, y->data, y->nbytes);
			} else {
				cr_expect_eq(memcmp(first, y->data, y->nbytes), 0, "%s: other bits with 3 threads", c->name);
			}
			exec_free(ex);
		}
		pool_set_threads(1);
		free(first);
		graph_free(g);
		for (int a = 0; a < 4; a++) {
			free(dv[a]);
			free(t[a].data);
		}
	}
}

/* #52 attn: Attention's cost counts the scores it computes: all L x T, or under is_causal each
 * query row i's min(i + 1, T) keys. 1 batch, 2 heads, D 4, Dv 2, L 5, T 3: (2 (4 + 2) + 5) FLOPs a
 * score, 2 x 15 scores, causal 2 x (1 + 2 + 3 + 3 + 3); L 3, T 5, causal: 2 x (1 + 2 + 3). */
Test(exec, attention_costs_the_scores_it_computes)
{
	static const struct {
		int L, T, causal;
		uint64_t flops;
	} cases[] = {{5, 3, 0, 17 * 30}, {5, 3, 1, 17 * 24}, {3, 5, 1, 17 * 12}, {3, 5, 0, 17 * 30}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		char text[600];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 23\ninputs: [{name: q, dtype: float32, shape: [1, 2, %d, 4]}, {name: k, dtype: "
			 "float32, shape: [1, 2, %d, 4]}, {name: v, dtype: float32, shape: [1, 2, %d, 2]}]\nnodes: [{op: "
			 "Attention, inputs: [q, k, v], outputs: [y], attrs: {is_causal: %d}}]\noutputs: [{name: y}]\n",
			 cases[c].L, cases[c].T, cases[c].T, cases[c].causal);
		struct exec_stats st = stats_of("attention_cost.yaml", text);
		cr_expect_eq(st.flops, cases[c].flops, "L %d, T %d, causal %d: %llu FLOPs, not %llu", cases[c].L, cases[c].T,
			     cases[c].causal, (unsigned long long)st.flops, (unsigned long long)cases[c].flops);
	}
}

/* #52 seq: Range, Trilu and CumSum as typed loops over the pool, bit for bit against the rule each
 * kernel's rt_get/rt_set walk computed (written here): Range's start + i delta (integers exactly,
 * floats in double rounded once), Trilu's kept triangle, CumSum's running sum in double in index
 * order, over cf_fill's values (NaN, infinities, -0, subnormals, huge), odd shapes, 0 and 1
 * elements, every axis, reverse and exclusive. */
static struct exec *seq_run(struct graph **g, const char *text, struct rtensor *t, const char *const *names, int n)
{
	*g = load_text("seq.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", text, e.msg);
	return x;
}

/* runs text on x (dtype dt, shape d) and the int64 scalar named name (k, axis) */
static struct exec *seq_run_x(struct graph **g, const char *text, int dt, int nd, const int64_t *d, void *a, int64_t n,
			      const char *name, int64_t *v)
{
	struct rtensor t[2] = {{.dtype = dt, .ndim = nd, .numel = n, .data = a, .nbytes = n * (int64_t)dtype_size(dt), .known = 1},
			       {.dtype = DT_INT64, .ndim = 0, .numel = 1, .data = v, .nbytes = 8, .known = 1}};
	memcpy(t[0].dims, d, sizeof *d * (size_t)nd);
	const char *names[2] = {"x", name};
	return seq_run(g, text, t, names, 2);
}

static void seq_dims(char *s, size_t n, const int64_t *d, int nd)
{
	s[0] = 0;
	for (int i = 0; i < nd; i++)
		snprintf(s + strlen(s), n - strlen(s), "%s%lld", i ? ", " : "", (long long)d[i]);
}

/* equal bits, or both NaN (a sum's NaN keeps either operand's payload: the compiler's order) */
static int seq_same(int dt, const void *a, const void *b)
{
	if (dt == DT_FLOAT) {
		float u, v;
		memcpy(&u, a, 4);
		memcpy(&v, b, 4);
		return !memcmp(&u, &v, 4) || (isnan(u) && isnan(v));
	}
	if (dt == DT_DOUBLE) {
		double u, v;
		memcpy(&u, a, 8);
		memcpy(&v, b, 8);
		return !memcmp(&u, &v, 8) || (isnan(u) && isnan(v));
	}
	return !memcmp(a, b, dtype_size(dt));
}

Test(exec, range_matches_start_plus_i_delta_bit_for_bit)
{
	static const struct { int dt; double f[3]; int64_t i[3]; } cases[] = {
		{DT_INT64, {0}, {-5, 1000003, 7}}, {DT_INT64, {0}, {INT64_MAX - 3, INT64_MIN, -(1LL << 62)}},
		{DT_INT64, {0}, {INT64_MIN, INT64_MIN + 40000, 3}}, {DT_INT32, {0}, {10, -20000, -3}},
		{DT_INT32, {0}, {INT32_MAX - 30000, INT32_MAX, 1}}, {DT_INT16, {0}, {-32768, 32767, 1}},
		{DT_INT64, {0}, {5, 5, 1}}, {DT_INT64, {0}, {5, 6, 1}}, {DT_INT32, {0}, {5, 4, 1}},
		{DT_FLOAT, {0.1f, 100000, 0.7f}, {0}}, {DT_FLOAT, {-3e5f, 3e5f, 0.3f}, {0}}, {DT_FLOAT, {1, 2, 3}, {0}},
		{DT_DOUBLE, {-1e3, 1e3, 0.013}, {0}}, {DT_DOUBLE, {1e17, 1e17 + 30000, 3.3}, {0}}, {DT_DOUBLE, {2, 2, 1}, {0}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int dt = cases[c].dt, fl = dt == DT_FLOAT || dt == DT_DOUBLE;
		size_t es = dtype_size(dt);
		char v[3][8];
		for (int k = 0; k < 3; k++) {
			if (dt == DT_FLOAT) {
				float f = (float)cases[c].f[k];
				memcpy(v[k], &f, 4);
			} else if (dt == DT_DOUBLE)
				memcpy(v[k], &cases[c].f[k], 8);
			else if (dt == DT_INT64)
				memcpy(v[k], &cases[c].i[k], 8);
			else if (dt == DT_INT32) {
				int32_t i = (int32_t)cases[c].i[k];
				memcpy(v[k], &i, 4);
			} else {
				int16_t i = (int16_t)cases[c].i[k];
				memcpy(v[k], &i, 2);
			}
		}
		double st = dt == DT_FLOAT ? (double)(float)cases[c].f[0] : cases[c].f[0];
		double d = dt == DT_FLOAT ? (double)(float)cases[c].f[2] : cases[c].f[2];
		double lim = dt == DT_FLOAT ? (double)(float)cases[c].f[1] : cases[c].f[1];
		__int128 ist = cases[c].i[0], idl = cases[c].i[2], span = (__int128)cases[c].i[1] - ist, len = 0;
		if (fl)
			len = ceil((lim - st) / d) > 0 ? (__int128)ceil((lim - st) / d) : 0;
		else
			for (__int128 p = ist; idl > 0 ? p < ist + span : p > ist + span; p += idl)
				len++;
		char text[400];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 18\ninputs: [{name: a, dtype: %s, shape: []}, {name: b, dtype: %s, shape: []}, "
			 "{name: d, dtype: %s, shape: []}]\nnodes:\n  - {op: Range, inputs: [a, b, d], outputs: [y]}\noutputs: [{name: y}]\n",
			 dtype_name(dt), dtype_name(dt), dtype_name(dt));
		struct rtensor t[3];
		for (int k = 0; k < 3; k++)
			t[k] = (struct rtensor){.dtype = dt, .ndim = 0, .numel = 1, .data = v[k], .nbytes = (int64_t)es, .known = 1};
		const char *names[3] = {"a", "b", "d"};
		struct graph *g;
		struct exec *x = seq_run(&g, text, t, names, 3);
		const struct rtensor *y = exec_value(x, g->outputs[0]);
		cr_assert_eq(y->numel, (int64_t)len, "Range case %zu: %lld elements, not %lld", c, (long long)y->numel, (long long)len);
		int64_t wrong = 0, first = -1;
		for (int64_t i = 0; i < y->numel; i++) {
			char w[8];
			if (dt == DT_FLOAT) {
				float f = (float)(st + (double)i * d);
				memcpy(w, &f, 4);
			} else if (dt == DT_DOUBLE) {
				double f = st + (double)i * d;
				memcpy(w, &f, 8);
			} else {
				int64_t e = (int64_t)(ist + i * idl);
				int32_t e32 = (int32_t)e;
				int16_t e16 = (int16_t)e;
				memcpy(w, dt == DT_INT64 ? (void *)&e : dt == DT_INT32 ? (void *)&e32 : (void *)&e16, es);
			}
			if (memcmp(w, (const char *)y->data + i * (int64_t)es, es) && !wrong++)
				first = i;
		}
		cr_expect_eq(wrong, 0, "Range case %zu (%s): %lld wrong, the first #%lld", c, dtype_name(dt), (long long)wrong,
			     (long long)first);
		exec_free(x);
		graph_free(g);
	}
}

Test(exec, trilu_keeps_its_triangle_bit_for_bit)
{
	static const struct { int nd; int64_t d[4]; } shapes[] = {
		{4, {2, 3, 5, 7}}, {3, {3, 1, 1}}, {3, {4, 9, 4}}, {3, {1, 0, 5}}, {2, {0, 3}}, {4, {2, 2, 17, 19}}, {2, {1, 1}}, {2, {67, 131}},
	};
	static const int64_t ks[] = {INT64_MIN, -100, -3, -1, 0, 1, 2, 5, 100, INT64_MAX};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_UINT8, DT_INT64};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
			for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
				for (int up = 0; up < 2; up++) {
					int dt = dts[di], nd = shapes[c].nd;
					size_t es = dtype_size(dt);
					int64_t n = 1, rows = shapes[c].d[nd - 2], cols = shapes[c].d[nd - 1], k = ks[ki];
					for (int i = 0; i < nd; i++)
						n *= shapes[c].d[i];
					char *a = xmalloc((size_t)n * es + 8), ds[64], text[400];
					cf_fill(dt == DT_UINT8 || dt == DT_INT64 ? DT_INT64 : dt, a, n * (int64_t)es / (dt == DT_UINT8 ? 8 : (int64_t)es) + 1, 7 + c);
					seq_dims(ds, sizeof ds, shapes[c].d, nd);
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}, {name: k, dtype: int64, shape: []}]\n"
						 "nodes:\n  - {op: Trilu, inputs: [x, k], outputs: [y], attrs: {upper: %d}}\noutputs: [{name: y}]\n",
						 dtype_name(dt), ds, up);
					struct graph *g;
					struct exec *x = seq_run_x(&g, text, dt, nd, shapes[c].d, a, n, "k", &k);
					const char *y = exec_value(x, g->outputs[0])->data;
					static const char zero[8];
					int64_t wrong = 0, first = -1;
					for (int64_t e = 0; e < n; e++) {
						int64_t j = e % cols, i = e / cols % rows;
						__int128 dk = (__int128)j - i;
						int keep = up ? dk >= k : dk <= k;
						if (memcmp(y + e * (int64_t)es, keep ? a + e * (int64_t)es : zero, es) && !wrong++)
							first = e;
					}
					cr_expect_eq(wrong, 0, "Trilu %s [%s] k %lld upper %d: %lld wrong, the first #%lld", dtype_name(dt), ds,
						     (long long)k, up, (long long)wrong, (long long)first);
					exec_free(x);
					graph_free(g);
					xfree(a);
				}
}

Test(exec, cumsum_matches_the_running_sum_in_double_bit_for_bit)
{
	static const struct { int nd; int64_t d[4]; } shapes[] = {
		{4, {2, 3, 5, 7}}, {3, {2, 3, 1100}}, {1, {1}}, {2, {0, 4}}, {2, {3, 0}}, {3, {3, 1031, 1}}, {2, {1, 1}}, {3, {2, 513, 3}},
	};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int ax = -1; ax < shapes[c].nd; ax++)
				for (int mode = 0; mode < 4; mode++) {
					int dt = f64 ? DT_DOUBLE : DT_FLOAT, nd = shapes[c].nd, rev = mode & 1, excl = mode >> 1;
					int a0 = ax < 0 ? nd - 1 : ax;
					size_t es = dtype_size(dt);
					int64_t n = 1, outer = 1, inner = 1, d = shapes[c].d[a0], axv = ax;
					for (int i = 0; i < nd; i++) {
						n *= shapes[c].d[i];
						outer *= i < a0 ? shapes[c].d[i] : 1;
						inner *= i > a0 ? shapes[c].d[i] : 1;
					}
					char *a = xmalloc((size_t)n * es + 8), *w = xmalloc((size_t)n * es + 8), ds[64], text[500];
					cf_fill(dt, a, n, 11 + c * 8 + (size_t)mode);
					if (mode == 3) /* mostly finite: the sums then carry */
						for (int64_t e = 40; e < n; e++) {
							if (f64)
								((double *)a)[e] = fmod(((double *)a)[e], 1e3);
							else
								((float *)a)[e] = fmodf(((float *)a)[e], 1e3f);
						}
					for (int64_t o = 0; o < outer; o++)
						for (int64_t i = 0; i < inner; i++) {
							double s = 0;
							for (int64_t t = 0; t < d; t++) {
								int64_t at = (o * d + (rev ? d - 1 - t : t)) * inner + i;
								double v = f64 ? ((double *)a)[at] : ((float *)a)[at];
								if (!excl)
									s += v;
								if (f64)
									((double *)w)[at] = s;
								else
									((float *)w)[at] = (float)s;
								if (excl)
									s += v;
							}
						}
					seq_dims(ds, sizeof ds, shapes[c].d, nd);
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}, {name: ax, dtype: int64, shape: []}]\n"
						 "nodes:\n  - {op: CumSum, inputs: [x, ax], outputs: [y], attrs: {reverse: %d, exclusive: %d}}\n"
						 "outputs: [{name: y}]\n",
						 dtype_name(dt), ds, rev, excl);
					struct graph *g;
					struct exec *x = seq_run_x(&g, text, dt, nd, shapes[c].d, a, n, "ax", &axv);
					const char *y = exec_value(x, g->outputs[0])->data;
					int64_t wrong = 0, first = -1;
					for (int64_t e = 0; e < n; e++)
						if (!seq_same(dt, y + e * (int64_t)es, w + e * (int64_t)es) && !wrong++)
							first = e;
					cr_expect_eq(wrong, 0, "CumSum %s [%s] axis %d reverse %d exclusive %d: %lld wrong, the first #%lld",
						     dtype_name(dt), ds, ax, rev, excl, (long long)wrong, (long long)first);
					exec_free(x);
					graph_free(g);
					xfree(a);
					xfree(w);
				}
}

/* #52 rotary: RotaryEmbedding on float32 and float64 as typed rows of the head dimension: the rule
 * (x1 c - x2 s, x2 c + x1 s in double, rounded once to the dtype) bit for bit, any NaN for a NaN,
 * over cf_fill's values (NaN, infinities, -0, subnormals, huge) in X and the caches; 3-D and 4-D X,
 * interleaved or not, a partial rotary_embedding_dim (odd halves), position_ids or 3-D caches, 0
 * and 1 rows, and more rows than one piece of the pool. */
Test(exec, rotary_embedding_matches_its_rule_bit_for_bit)
{
	static const struct { int three; int64_t B, H, S, D, rd, P; int il; } cases[] = {
		{0, 2, 3, 5, 10, 6, 7, 0}, {0, 2, 3, 5, 10, 6, 7, 1}, {1, 2, 3, 5, 10, 0, 0, 0}, {1, 2, 3, 5, 10, 4, 0, 1},
		{0, 1, 1, 1, 2, 0, 1, 0}, {0, 1, 1, 1, 2, 0, 1, 1}, {0, 0, 2, 3, 4, 0, 3, 0}, {1, 1, 2, 1, 6, 2, 0, 0},
		{0, 2, 3, 37, 130, 128, 41, 0}, {1, 2, 3, 37, 130, 126, 0, 1}, {0, 3, 2, 33, 64, 0, 50, 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT, three = cases[c].three, il = cases[c].il;
			int64_t B = cases[c].B, H = cases[c].H, S = cases[c].S, D = cases[c].D, P = cases[c].P;
			int64_t rd = cases[c].rd ? cases[c].rd : D, half = rd / 2, nx = B * H * S * D;
			int64_t nc = (P ? P : B * S) * half;
			size_t es = dtype_size(dt);
			void *xd = xmalloc((size_t)nx * 8 + 8), *cd = xmalloc((size_t)nc * 8 + 8), *sdat = xmalloc((size_t)nc * 8 + 8);
			int64_t *pd = xmalloc(sizeof *pd * (size_t)(B * S + 1));
			cf_fill(dt, xd, nx, 7 + c);
			cf_fill(dt, cd, nc, 70 + c);
			cf_fill(dt, sdat, nc, 700 + c);
			for (int64_t i = 0; i < B * S; i++)
				pd[i] = P ? (i * 7 + 3) % P : 0;
			char text[1024];
			const char *tn = dtype_name(dt);
			if (P)
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 23\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, "
					 "{name: c, dtype: %s, shape: [%lld, %lld]}, {name: s, dtype: %s, shape: [%lld, %lld]}, "
					 "{name: p, dtype: int64, shape: [%lld, %lld]}]\nnodes:\n  - {op: RotaryEmbedding, inputs: [x, c, s, p], "
					 "outputs: [y], attrs: {interleaved: %d, rotary_embedding_dim: %lld}}\noutputs: [{name: y}]\n",
					 tn, (long long)B, (long long)H, (long long)S, (long long)D, tn, (long long)P, (long long)half, tn,
					 (long long)P, (long long)half, (long long)B, (long long)S, il, (long long)cases[c].rd);
			else
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 23\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, "
					 "{name: c, dtype: %s, shape: [%lld, %lld, %lld]}, {name: s, dtype: %s, shape: [%lld, %lld, %lld]}]\n"
					 "nodes:\n  - {op: RotaryEmbedding, inputs: [x, c, s], outputs: [y], attrs: {interleaved: %d, "
					 "num_heads: %lld, rotary_embedding_dim: %lld}}\noutputs: [{name: y}]\n",
					 tn, (long long)B, (long long)S, (long long)(H * D), tn, (long long)B, (long long)S, (long long)half, tn,
					 (long long)B, (long long)S, (long long)half, il, (long long)H, (long long)cases[c].rd);
			struct graph *g = load_text("rotary.yaml", text);
			struct rtensor t[4] = {
				{.dtype = dt, .ndim = three ? 3 : 4, .numel = nx, .data = xd, .nbytes = nx * es, .known = 1},
				{.dtype = dt, .ndim = P ? 2 : 3, .numel = nc, .data = cd, .nbytes = nc * es, .known = 1},
				{.dtype = dt, .ndim = P ? 2 : 3, .numel = nc, .data = sdat, .nbytes = nc * es, .known = 1},
				{.dtype = DT_INT64, .ndim = 2, .dims = {B, S}, .numel = B * S, .data = pd, .nbytes = B * S * 8, .known = 1}};
			int64_t xd4[4] = {B, H, S, D}, xd3[3] = {B, S, H * D}, c2[2] = {P, half}, c3[3] = {B, S, half};
			memcpy(t[0].dims, three ? xd3 : xd4, sizeof(int64_t) * (three ? 3 : 4));
			memcpy(t[1].dims, P ? c2 : c3, sizeof(int64_t) * (P ? 2 : 3));
			memcpy(t[2].dims, t[1].dims, sizeof t[1].dims);
			const char *names[4] = {"x", "c", "s", "p"};
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = P ? 4 : 3};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "RotaryEmbedding: %s", e.msg);
			const char *y = exec_value(x, g->outputs[0])->data;
			int64_t wrong = 0, first = -1;
			for (int64_t b = 0; b < B; b++)
				for (int64_t h = 0; h < H; h++)
					for (int64_t s = 0; s < S; s++)
						for (int64_t d = 0; d < D; d++) {
							int64_t base = three ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
							int64_t crow = P ? pd[b * S + s] : b * S + s, j = il ? d / 2 : d % half;
							int second = il ? d % 2 : d >= half;
							int64_t i1 = il ? 2 * j : j, i2 = il ? 2 * j + 1 : j + half;
#define RGET(p, i) (f64 ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
							double want;
							if (d >= rd)
								want = RGET(xd, base + d);
							else {
								double cv = RGET(cd, crow * half + j), sv = RGET(sdat, crow * half + j);
								double x1 = RGET(xd, base + i1), x2 = RGET(xd, base + i2);
								want = second ? x2 * cv + x1 * sv : x1 * cv - x2 * sv;
							}
#undef RGET
							int ok;
							if (f64) {
								double u;
								memcpy(&u, y + (base + d) * 8, 8);
								ok = !memcmp(&want, &u, 8) || (isnan(want) && isnan(u));
							} else {
								float w = (float)want, u;
								memcpy(&u, y + (base + d) * 4, 4);
								ok = !memcmp(&w, &u, 4) || (isnan(w) && isnan(u));
							}
							if (!ok && !wrong++)
								first = base + d;
						}
			cr_expect_eq(wrong, 0, "RotaryEmbedding %s case %zu: %lld wrong, the first #%lld", tn, c, (long long)wrong,
				     (long long)first);
			exec_free(x);
			graph_free(g);
			xfree(xd);
			xfree(cd);
			xfree(sdat);
			xfree(pd);
		}
}

/* #52 rotary: GridSample's float32/float64 channel rows (a block of points' taps listed once, each
 * channel's outputs a contiguous row): 2-D bilinear and nearest, zeros/border/reflection padding,
 * align_corners or not, against the rule written here (PyTorch's unnormalize, reflect and clip in
 * double; the taps y-major with weight wy wx, zero ones and those outside X skipped; the sum in
 * double, rounded once), bit for bit, any NaN for a NaN: cf_fill's X (NaN, infinities, -0,
 * subnormals, huge), grid values NaN, +-inf, +-0, +-1, on taps and random in [-1.3, 1.3]; 1 x 1
 * planes, odd sizes and more points than a block and a piece of the pool. */
int gsr_axis(int nearest, int pad, int align, double g, int64_t S, int64_t *idx, double *w)
{
	double c = align ? (g + 1) / 2 * (double)(S - 1) : ((g + 1) * (double)S - 1) / 2, hi = (double)(S - 1);
	if (pad == 2) {
		double lo2 = align ? 0 : -1, hi2 = align ? 2 * hi : 2 * (double)S - 1;
		if (lo2 == hi2)
			c = 0;
		else {
			double lo = lo2 / 2, span = (hi2 - lo2) / 2, u = fabs(c - lo), extra = fmod(u, span);
			c = fmod(floor(u / span), 2) != 0 ? span - extra + lo : extra + lo;
		}
	}
	if (pad)
		c = c <= 0 ? 0 : c >= hi ? hi : c;
	if (nearest) {
		double r = nearbyint(c);
		idx[0] = r >= 0 && r < (double)S ? (int64_t)r : -1;
		w[0] = 1;
		return 1;
	}
	double f = floor(c);
	for (int k = 0; k < 2; k++)
		idx[k] = f + k >= 0 && f + k < (double)S ? (int64_t)(f + k) : -1;
	w[1] = c - f;
	w[0] = 1 - w[1];
	return 2;
}

Test(exec, grid_sample_matches_its_rule_bit_for_bit)
{
	static const int64_t shapes[][6] = {{2, 3, 5, 7, 4, 6}, {1, 1, 1, 1, 1, 1}, {1, 2, 1, 1, 3, 5}, {2, 5, 9, 11, 13, 17}};
	static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1, -1, 1e30, -1e30, 1.5, -1.5, 0.5};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int mode = 0; mode < 12; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int nearest = mode % 2, pad = mode / 2 % 3, align = mode / 6, dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t N = shapes[sh][0], C = shapes[sh][1], H = shapes[sh][2], W = shapes[sh][3], OH = shapes[sh][4],
					OW = shapes[sh][5], nx = N * C * H * W, ng = N * OH * OW * 2;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)nx * 8 + 8), *gd = xmalloc((size_t)ng * 8 + 8);
				cf_fill(dt, xd, nx, 5 + sh);
				uint64_t seed = 99 + sh;
				for (int64_t i = 0; i < ng; i++) {
					seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
					int64_t S = i % 2 ? H : W, k = (int64_t)(seed >> 40) % (S + 1);
					double v = i < (int64_t)(sizeof special / sizeof *special) ? special[i]
						   : i % 5 == 1 && S > 1		     ? 2.0 * (double)k / (double)(S - 1) - 1 /* on a tap */
						   : i % 5 == 3			     ? (2.0 * (double)k + 1) / (double)S - 1
										     : (double)(seed >> 11) / 0x1p53 * 2.6 - 1.3;
					if (f64)
						((double *)gd)[i] = v;
					else
						((float *)gd)[i] = (float)v;
				}
				static const char *const pads[] = {"zeros", "border", "reflection"};
				char text[1024];
				const char *tn = dtype_name(dt);
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 16\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, "
					 "{name: g, dtype: %s, shape: [%lld, %lld, %lld, 2]}]\nnodes:\n  - {op: GridSample, inputs: [x, g], "
					 "outputs: [y], attrs: {mode: %s, padding_mode: %s, align_corners: %d}}\noutputs: [{name: y}]\n",
					 tn, (long long)N, (long long)C, (long long)H, (long long)W, tn, (long long)N, (long long)OH,
					 (long long)OW, nearest ? "nearest" : "bilinear", pads[pad], align);
				struct graph *g = load_text("gridsample.yaml", text);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 4, .dims = {N, C, H, W}, .numel = nx, .data = xd, .nbytes = nx * es, .known = 1},
						       {.dtype = dt, .ndim = 4, .dims = {N, OH, OW, 2}, .numel = ng, .data = gd, .nbytes = ng * es, .known = 1}};
				const char *names[2] = {"x", "g"};
				struct gd_err e = {0};
				struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
				struct exec *x = exec_run(g, &o, NULL, &e);
				cr_assert(x, "GridSample: %s", e.msg);
				const char *y = exec_value(x, g->outputs[0])->data;
				int64_t wrong = 0, first = -1;
#define GGET(p, i) (f64 ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
				for (int64_t n = 0; n < N; n++)
					for (int64_t pt = 0; pt < OH * OW; pt++) {
						int64_t iy[2], ix[2];
						double wy[2], wx[2];
						int ty = gsr_axis(nearest, pad, align, GGET(gd, (n * OH * OW + pt) * 2 + 1), H, iy, wy);
						int tx = gsr_axis(nearest, pad, align, GGET(gd, (n * OH * OW + pt) * 2), W, ix, wx);
						for (int64_t ch = 0; ch < C; ch++) {
							double v = 0;
							for (int a = 0; a < ty; a++)
								for (int b = 0; b < tx; b++) {
									double w = wy[a] * wx[b];
									if (iy[a] >= 0 && ix[b] >= 0 && w != 0)
										v += w * GGET(xd, ((n * C + ch) * H + iy[a]) * W + ix[b]);
								}
							int64_t at = (n * C + ch) * OH * OW + pt;
							int ok;
							if (f64) {
								double u;
								memcpy(&u, y + at * 8, 8);
								ok = !memcmp(&v, &u, 8) || (isnan(v) && isnan(u));
							} else {
								float wf = (float)v, u;
								memcpy(&u, y + at * 4, 4);
								ok = !memcmp(&wf, &u, 4) || (isnan(wf) && isnan(u));
							}
							if (!ok && !wrong++)
								first = at;
						}
					}
#undef GGET
				cr_expect_eq(wrong, 0, "GridSample %s %s %s align %d, shape #%zu: %lld wrong, the first #%lld", tn,
					     nearest ? "nearest" : "bilinear", pads[pad], align, sh, (long long)wrong, (long long)first);
				exec_free(x);
				graph_free(g);
				xfree(xd);
				xfree(gd);
			}
}

/* #52 linalg: Det's lanes and DFT/STFT's lanes of lines, against references written here. */

/* Runs text's graph on inputs t (names), with th threads: a copy of output out's data (its element
 * count in *numel). */
static void *la_run(const char *text, struct rtensor *t, const char **names, int n, int th, int out, int64_t *numel)
{
	struct graph *g = load_text("linalg.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = (uint32_t)n};
	pool_set_threads(th);
	struct exec *x = exec_run(g, &o, NULL, &e);
	pool_set_threads(1);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[out]);
	void *copy = xmalloc(y->nbytes + 1);
	memcpy(copy, y->data, y->nbytes);
	*numel = y->numel;
	exec_free(x);
	graph_free(g);
	return copy;
}

/* The determinant as Det's definition computes it (LU with partial pivoting, the first largest
 * |pivot|, in double, 0 at a zero pivot): the reference the lanes must match bit for bit. */
static double la_lu_det(double *a, int m)
{
	double *row[17], det = 1; /* rows through pointers: a swap exchanges two pointers */
	for (int r = 0; r < m; r++)
		row[r] = a + r * m;
	for (int k = 0; k < m; k++) {
		double *best = row[k];
		int at = k;
		for (int i = k + 1; i < m; i++)
			if (fabs(row[i][k]) > fabs(best[k]))
				best = row[i], at = i;
		if (best[k] == 0)
			return 0;
		row[at] = row[k];
		row[k] = best;
		det = at == k ? det : -det;
		det *= best[k];
		for (int i = k + 1; i < m; i++) {
			double l = row[i][k] / best[k];
			for (int j = k + 1; j < m; j++)
				row[i][j] -= l * best[j];
		}
	}
	return det;
}

/* count m x m matrices: cf_fill's edge values (NaN, infinities, +-0, subnormals, huge) in the first
 * ones, then small integers and thirds (ties for the pivot, inexact quotients), singular matrices
 * (a repeated row, a zero column) and random ones */
static void la_matrices(int dt, void *d, int64_t count, int m, uint64_t seed)
{
	int64_t mm = (int64_t)m * m, n = count * mm;
	cf_fill(dt, d, n, seed);
	struct rtensor t = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = d};
	static const double small[] = {1, -1, 2, -2, 3, 0, -0.0, 1.0 / 3, -2.0 / 3, 0.5};
	for (int64_t b = 2; b < count; b++)
		for (int64_t e = 0; e < mm; e++) {
			uint64_t r = (uint64_t)(b * 131 + e * 7 + (int64_t)seed) * 2654435761u >> 7;
			if (b % 4 == 1)
				continue; /* cf_fill's random bits */
			double v = b % 4 == 2 ? small[r % 10] : (double)(r % 2001) / 1000 - 1;
			if (b % 8 == 3 && m > 1 && e / m == 1)
				v = rt_get(&t, b * mm + e - m); /* row 1 repeats row 0 */
			if (b % 8 == 7 && e % m == m - 1)
				v = 0; /* a zero column */
			rt_set(&t, b * mm + e, v);
		}
}

/* Det of float32 and float64 matrices of every size the lanes take (1..16, m constant for 2..4)
 * and past them (17), batches not a multiple of the 8 lanes (1, 7, 9, 45) and 0, against
 * la_lu_det bit for bit, with 1 and 3 threads; any NaN for a NaN (of two NaN operands, which one
 * a product keeps is the compiler's operand order: a -O0 build keeps the other). Also within 1e-12 of the Leibniz sum for the
 * finite 2 x 2 to 4 x 4 float64 ones, a check of the reference itself. */
Test(exec, det_lanes_match_the_lu_definition_bit_for_bit)
{
	static const int ms[] = {1, 2, 3, 4, 5, 7, 16, 17};
	static const int64_t counts[] = {0, 1, 7, 9, 45};
	for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
		for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, m = ms[mi];
				int64_t count = counts[ci], mm = (int64_t)m * m, n = count * mm;
				void *xd = xmalloc((size_t)n * 8 + 8);
				la_matrices(dt, xd, count, m, 11 + mi * 10 + ci);
				char text[512];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %d, %d]}]\n"
					 "nodes:\n  - {op: Det, inputs: [x], outputs: [y]}\noutputs: [{name: y}]\n",
					 dtype_name(dt), (long long)count, m, m);
				struct rtensor t = {.dtype = dt, .ndim = 3, .dims = {count, m, m}, .numel = n, .data = xd,
						    .nbytes = (size_t)n * dtype_size(dt), .known = 1};
				const char *names[] = {"x"};
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = xd};
				for (int th = 1; th <= 3; th += 2) {
					int64_t ny;
					void *y = la_run(text, &t, names, 1, th, 0, &ny);
					cr_assert_eq(ny, count);
					int64_t wrong = 0, first = -1;
					double a[17 * 17];
					for (int64_t b = 0; b < count; b++) {
						for (int64_t e = 0; e < mm; e++)
							a[e] = rt_get(&xt, b * mm + e);
						double d = la_lu_det(a, m);
						int ok;
						if (f64) {
							ok = !memcmp(&d, (double *)y + b, 8) || (isnan(d) && isnan(((double *)y)[b]));
						} else {
							float f = (float)d;
							ok = !memcmp(&f, (float *)y + b, 4) || (isnan(f) && isnan(((float *)y)[b]));
						}
						if (!ok && !wrong++)
							first = b;
						if (f64 && m >= 2 && m <= 4) {
							for (int64_t e = 0; e < mm; e++)
								a[e] = rt_get(&xt, b * mm + e);
							int fin = 1;
							for (int64_t e = 0; e < mm; e++)
								fin &= isfinite(a[e]) && fabs(a[e]) < 1e10;
							if (!fin)
								continue;
							double s = 0, mag = 0; /* Leibniz: the permutations of m */
							int perm[4] = {0, 1, 2, 3}, c[4] = {0}, sign = 1, i = 1;
							for (;;) {
								double p = sign;
								for (int r = 0; r < m; r++)
									p *= a[r * m + perm[r]];
								s += p;
								mag += fabs(p);
								while (i < m && c[i] >= i)
									c[i++] = 0;
								if (i >= m)
									break;
								int sw = i % 2 ? c[i] : 0, tmp = perm[sw];
								perm[sw] = perm[i];
								perm[i] = tmp;
								sign = -sign;
								c[i]++;
								i = 1;
							}
							cr_expect(fabs(((double *)y)[b] - s) <= 1e-12 * mag + 1e-300,
								  "Det %dx%d #%lld: %.17g, Leibniz %.17g", m, m, (long long)b, ((double *)y)[b], s);
						}
					}
					cr_expect_eq(wrong, 0, "Det %s %lld x %dx%d, %d threads: %lld wrong, the first #%lld",
						     dtype_name(dt), (long long)count, m, m, th, (long long)wrong, (long long)first);
					xfree(y);
				}
				xfree(xd);
			}
}

/* Det's gradient (the cofactors, Dets of the minors gathered in one Gather) of float32 and float64
 * matrices 1 x 1 to 5 x 5, times dY: gy[b] (-1)^(i+j) det(minor ij) in the dtype, the minor's
 * determinant la_lu_det's, bit for bit (any NaN for a NaN), with 1 and 3 threads. The matrix is
 * x + p, p a zero parameter whose gradient is the matrix's. */
Test(exec, det_gradient_is_the_cofactors_bit_for_bit)
{
	for (int m = 1; m <= 5; m++)
		for (int f64 = 0; f64 < 2; f64++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t count = 11, mm = (int64_t)m * m, n = count * mm;
			void *xd = xmalloc((size_t)n * 8), *gd = xmalloc((size_t)count * 8);
			la_matrices(dt, xd, count, m, 500 + m);
			cf_fill(dt, gd, count, 77);
			struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = xd};
			struct rtensor gt = {.dtype = dt, .ndim = 1, .dims = {count}, .numel = count, .data = gd};
			for (int64_t b = 0; b < 4; b++) /* dY finite: cf_fill's first are NaN and infinities */
				rt_set(&gt, b, 0.25 * (double)(b + 1));
			char text[1024];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %d, %d]}, {name: gy, dtype: %s, "
				 "shape: [%lld]}]\nparams: [{name: p, dtype: %s, shape: [%lld, %d, %d], init: zeros}]\n"
				 "nodes:\n  - {op: Add, inputs: [x, p], outputs: [z]}\n  - {op: Det, inputs: [z], outputs: [d]}\n"
				 "  - {op: Mul, inputs: [d, gy], outputs: [e]}\n"
				 "  - {op: ReduceSum, inputs: [e], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n",
				 dtype_name(dt), (long long)count, m, m, dtype_name(dt), (long long)count, dtype_name(dt),
				 (long long)count, m, m);
			struct graph *g = load_text("det_grad.yaml", text);
			const char *params[] = {"p"};
			struct autodiff_opts ao = {.params = params, .n_params = 1};
			struct autodiff_result res;
			struct gd_err e = {0};
			cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
			uint32_t gi = 0;
			while (gi < g->n_outputs && strcmp(g->outputs[gi]->name, "p_grad"))
				gi++;
			cr_assert(gi < g->n_outputs, "no p_grad output");
			struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {count, m, m}, .numel = n, .data = xd,
						.nbytes = (size_t)n * dtype_size(dt), .known = 1},
					       {.dtype = dt, .ndim = 1, .dims = {count}, .numel = count, .data = gd,
						.nbytes = (size_t)count * dtype_size(dt), .known = 1}};
			const char *names[] = {"x", "gy"};
			for (int th = 1; th <= 3; th += 2) {
				pool_set_threads(th);
				struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
				struct exec *x = exec_run(g, &o, NULL, &e);
				pool_set_threads(1);
				cr_assert(x, "%s", e.msg);
				const struct rtensor *y = exec_value(x, g->outputs[gi]);
				cr_assert_eq(y->numel, n);
				int64_t wrong = 0, first = -1;
				for (int64_t b = 0; b < count; b++)
					for (int i = 0; i < m; i++)
						for (int j = 0; j < m; j++) {
							double a[25], c;
							int k = 0;
							for (int r = 0; r < m; r++)
								for (int s = 0; s < m; s++)
									if (r != i && s != j)
										a[k++] = rt_get(&xt, b * mm + r * m + s) + 0.0;
							c = m == 1 ? 1 : la_lu_det(a, m - 1);
							double want, got = rt_get(y, b * mm + i * m + j), gb = rt_get(&gt, b);
							if (f64)
								want = gb * ((i + j) % 2 ? -c : c);
							else
								want = (float)gb * ((i + j) % 2 ? -(float)c : (float)c);
							if (m == 1)
								want = gb;
							int ok = !memcmp(&want, &got, 8) || (isnan(want) && isnan(got));
							if (!ok && !wrong++)
								first = b * mm + i * m + j;
						}
				cr_expect_eq(wrong, 0, "Det's gradient %s %dx%d, %d threads: %lld wrong, the first #%lld", dtype_name(dt), m,
					     m, th, (long long)wrong, (long long)first);
				exec_free(x);
			}
			graph_free(g);
			xfree(xd);
			xfree(gd);
		}
}

/* Gather, which Det's gradient runs on every minor, row by row: against out[o, j, i] = a[o, ix[j],
 * i] with negative int64 and int32 indices, along the first, a middle and the last axis of
 * (3, 5, 4) and (2, 7) tensors of 1-, 4- and 8-byte elements (rows of 1, 4, 8, 12, 16 and 20
 * bytes). */
Test(exec, gather_rows_match_the_definition)
{
	static const int dts[] = {DT_UINT8, DT_FLOAT, DT_DOUBLE};
	static const int64_t idx[] = {0, -1, 2, 2, -3, 1};
	for (size_t di = 0; di < 3; di++)
		for (int i32 = 0; i32 < 2; i32++)
			for (int shape = 0; shape < 2; shape++)
				for (int ax = 0; ax < (shape ? 2 : 3); ax++) {
					int dt = dts[di], nd = shape ? 2 : 3;
					int64_t dims[3] = {3, 5, 4}, outer = 1, inner = 1;
					if (shape)
						dims[0] = 2, dims[1] = 7;
					int64_t n = dims[0] * dims[1] * (nd == 3 ? dims[2] : 1), d = dims[ax];
					for (int k = 0; k < ax; k++)
						outer *= dims[k];
					for (int k = ax + 1; k < nd; k++)
						inner *= dims[k];
					size_t es = dtype_size(dt);
					char *ad = xmalloc((size_t)n * es), *id = xmalloc(6 * 8);
					for (size_t b = 0; b < (size_t)n * es; b++)
						ad[b] = (char)(b * 37 + 11);
					for (int j = 0; j < 6; j++) {
						int64_t v = idx[j] < -d || idx[j] >= d ? 0 : idx[j];
						if (i32)
							((int32_t *)id)[j] = (int32_t)v;
						else
							((int64_t *)id)[j] = v;
					}
					char text[512];
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: %s, shape: [%lld, %lld%s]}, {name: i, "
						 "dtype: %s, shape: [2, 3]}]\nnodes:\n  - {op: Gather, inputs: [a, i], outputs: [y], attrs: "
						 "{axis: %d}}\noutputs: [{name: y}]\n",
						 dtype_name(dt), (long long)dims[0], (long long)dims[1], nd == 3 ? ", 4" : "",
						 i32 ? "int32" : "int64", ax);
					struct rtensor t[2] = {{.dtype = dt, .ndim = nd, .dims = {dims[0], dims[1], dims[2]}, .numel = n,
								.data = ad, .nbytes = (size_t)n * es, .known = 1},
							       {.dtype = i32 ? DT_INT32 : DT_INT64, .ndim = 2, .dims = {2, 3}, .numel = 6,
								.data = id, .nbytes = 6 * (i32 ? 4 : 8), .known = 1}};
					const char *names[] = {"a", "i"};
					int64_t ny;
					char *y = la_run(text, t, names, 2, 1, 0, &ny);
					cr_assert_eq(ny, outer * 6 * inner);
					int wrong = 0;
					for (int64_t o = 0; o < outer; o++)
						for (int j = 0; j < 6; j++) {
							int64_t v = i32 ? ((int32_t *)id)[j] : ((int64_t *)id)[j];
							v = v < 0 ? v + d : v;
							wrong += memcmp(y + ((o * 6 + j) * inner) * (int64_t)es,
									ad + ((o * d + v) * inner) * (int64_t)es, (size_t)inner * es) != 0;
						}
					cr_expect_eq(wrong, 0, "Gather %s axis %d of rank %d, %s indices: %d rows wrong", dtype_name(dt), ax,
						     nd, i32 ? "int32" : "int64", wrong);
					xfree(y);
					xfree(ad);
					xfree(id);
				}
}

/* The DFT of line x (n elements at stride st, re and im; im NULL: real), bin k, in long double
 * from the definition: sum_t x[t] e^(s 2 pi i k t / n), the exponent reduced mod n first, the
 * table tc, ts holding cos and sin of 2 pi j / n. */
static void la_dft_bin(const double *re, const double *im, int64_t st, int64_t n, int64_t k, int s, const long double *tc,
		       const long double *ts, long double *or, long double *oi)
{
	long double sr = 0, si = 0;
	for (int64_t t = 0, e = 0; t < n; t++, e = (e + k) % n) {
		long double c = tc[e], sn = s * ts[e], xr = re[t * st], xi = im ? im[t * st] : 0;
		sr += xr * c - xi * sn;
		si += xr * sn + xi * c;
	}
	*or = sr;
	*oi = si;
}

static void la_dft_table(int64_t n, long double **tc, long double **ts)
{
	*tc = xmalloc((size_t)n * sizeof **tc);
	*ts = xmalloc((size_t)n * sizeof **ts);
	for (int64_t j = 0; j < n; j++) {
		long double a = 2 * 3.14159265358979323846264338327950288L * (long double)j / (long double)n;
		(*tc)[j] = cosl(a);
		(*ts)[j] = sinl(a);
	}
}

/* Bound on an FFT's error, against la_dft_bin, relative to the line's L2 norm: 1e-5 for float32
 * (rounding to float32 alone is 6e-8 of |X[k]| <= sqrt(n) |x|, 2e-6 |x| at n = 1000; the float
 * transform of float32 lines, signal.c, measured at most 4.6e-7 |x| to n = 2048), 1e-12 for
 * float64 (the FFT's double sums, Bluestein's through a 2n-1 < m <= 4n transform included, stay
 * under 1e-13 |x| to n = 40000); an inverse's outputs and bound are divided by n. float32 adds
 * (n + 8) 2^-146 for the float transform's subnormal intermediates, whose roundings are absolute
 * (2^-150 at most each): an element of a stage reaches each bin with a unit coefficient, n / P
 * elements of the stage after sub-transforms of P reach one bin, each through at most 8 roundings
 * (a radix-5 butterfly and its twiddle), so the stages give at most 8 n (1 + 1/2 + 1/4 ...) 2^-150
 * = n 2^-146, and the unpack's and the output's few roundings fewer than 8 2^-146 (the subnormal
 * line 8 at n = 400: 2.7e-44 measured, its bound 4.5e-42). */
static double la_fft_tol(int f64)
{
	return f64 ? 1e-12 : 1e-5;
}

/* Checks y's bins keep of each of lines lines (output element ((line * keep + k) * 2 + {0, 1})
 * against the definition over x's line values (xr, xi at stride xs: line l's at l * lstride):
 * the wrong ones counted. A line with a NaN must give NaN everywhere; one with an infinity is
 * skipped (its bins inf or NaN as the twiddles make them). */
static int64_t la_check_lines(const struct rtensor *y, int64_t lines, int64_t keep, const double *xr, const double *xi,
			      int64_t lstride, int64_t n, int inverse, int f64, int64_t kstep)
{
	int64_t wrong = 0;
	long double *tc, *ts;
	la_dft_table(n, &tc, &ts);
	for (int64_t l = 0; l < lines; l++) {
		const double *r = xr + l * lstride, *im = xi ? xi + l * lstride : NULL;
		long double norm = 0;
		int nan = 0, inf = 0;
		for (int64_t t = 0; t < n; t++) {
			double a = r[t], b = im ? im[t] : 0;
			nan |= isnan(a) || isnan(b);
			inf |= isinf(a) || isinf(b);
			norm += (long double)a * a + (long double)b * b;
		}
		if (inf && !nan)
			continue;
		double bound = (la_fft_tol(f64) * (double)sqrtl(norm) + (f64 ? 0 : (double)(n + 8) * 0x1p-146)) / (inverse ? (double)n : 1);
		for (int64_t k = 0; k < keep; k += kstep) {
			double gr = rt_get(y, (l * keep + k) * 2), gi = rt_get(y, (l * keep + k) * 2 + 1);
			if (nan) { /* (n 1: the input itself, a real line's imaginary part 0) */
				wrong += !isnan(gr) && !isnan(gi);
				continue;
			}
			long double wr, wi;
			la_dft_bin(r, im, 1, n, k, inverse ? 1 : -1, tc, ts, &wr, &wi);
			if (inverse)
				wr /= n, wi /= n;
			wrong += !(fabsl(gr - wr) <= bound && fabsl(gi - wi) <= bound);
		}
	}
	xfree(tc);
	xfree(ts);
	return wrong;
}

/* float32/float64 line values in [-1, 1), with edge lines: 5 a NaN, 6 an infinity, 7 huge
 * (1e30 / 1e300 scale), 8 subnormal */
static void la_signal(int dt, void *d, int64_t lines, int64_t len, uint64_t seed)
{
	struct rtensor t = {.dtype = dt, .ndim = 1, .dims = {lines * len}, .numel = lines * len, .data = d};
	for (int64_t l = 0; l < lines; l++)
		for (int64_t i = 0; i < len; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			double v = (double)(seed >> 11) / 0x1p53 * 2 - 1;
			if (l == 7)
				v *= dt == DT_DOUBLE ? 1e300 : 1e30;
			if (l == 8)
				v *= dt == DT_DOUBLE ? 1e-310 : 1e-40;
			if (i == len / 2 && (l == 5 || l == 6))
				v = l == 5 ? NAN : -INFINITY;
			rt_set(&t, l * len + i, v);
		}
}

/* DFT (real, real onesided, complex, complex inverse) of 11 lines (8 lanes and 3) of every kind
 * of length (radix 2, mixed radix 2-5 and 7, Bluestein at 67; 40000 and the prime 16411 past the
 * lanes, one line at a time, 40 of their bins checked) against the definition within
 * la_fft_tol; the same bits with 1 and 3 threads, and for lines 1-10 transformed on their own
 * (each in another lane). */
Test(exec, dft_lanes_match_the_definition)
{
	static const int64_t ns[] = {1, 2, 3, 5, 7, 8, 12, 16, 67, 400, 512, 1000, 16411, 40000};
	for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
		for (int mode = 0; mode < 4; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int64_t n = ns[ni], lines = n > 4096 ? 2 : 11, c = mode >= 2 ? 2 : 1;
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, onesided = mode == 1, inverse = mode == 3;
				int64_t keep = onesided ? n / 2 + 1 : n, nx = lines * n * c;
				void *xd = xmalloc((size_t)nx * 8);
				la_signal(dt, xd, lines * c, n, 900 + ni * 8 + (size_t)mode * 2 + (size_t)f64);
				/* the complex lines interleaved (real, imaginary): the generated line 2l the real
				 * parts, 2l + 1 the imaginary ones */
				double *vr = xmalloc((size_t)(lines * n) * 8), *vi = c == 2 ? xmalloc((size_t)(lines * n) * 8) : NULL;
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {nx}, .numel = nx, .data = xd};
				for (int64_t i = 0; i < lines * n; i++)
					vr[i] = rt_get(&xt, i);
				if (c == 2) {
					for (int64_t l = 0; l < lines; l++)
						for (int64_t t = 0; t < n; t++) {
							vr[l * n + t] = rt_get(&xt, (2 * l) * n + t);
							vi[l * n + t] = rt_get(&xt, (2 * l + 1) * n + t);
						}
					for (int64_t i = 0; i < lines * n; i++) {
						rt_set(&xt, 2 * i, vr[i]);
						rt_set(&xt, 2 * i + 1, vi[i]);
					}
				}
				void *first = NULL;
				for (int part = 0; part < 3; part++) { /* 1 thread, 3 threads, lines 1.. alone */
					int64_t from = part == 2 ? 1 : 0, nl = part == 2 && lines > 2 ? lines - 1 : lines;
					if (part == 2 && lines <= 2)
						break;
					char text[512];
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}]\n"
						 "nodes:\n  - {op: DFT, inputs: [x], outputs: [y], attrs: {axis: 1, onesided: %d, inverse: %d}}\n"
						 "outputs: [{name: y}]\n",
						 dtype_name(dt), (long long)nl, (long long)n, (long long)c, onesided, inverse);
					struct rtensor t = {.dtype = dt, .ndim = 3, .dims = {nl, n, c}, .numel = nl * n * c,
							    .data = (char *)xd + from * n * c * (int64_t)dtype_size(dt),
							    .nbytes = (size_t)(nl * n * c) * dtype_size(dt), .known = 1};
					const char *names[] = {"x"};
					int64_t ny;
					void *y = la_run(text, &t, names, 1, part == 1 ? 3 : 1, 0, &ny);
					cr_assert_eq(ny, nl * keep * 2);
					size_t yb = (size_t)ny * dtype_size(dt), off = (size_t)(keep * 2) * dtype_size(dt);
					if (part == 0) {
						struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
						int64_t wrong = la_check_lines(&yt, lines, keep, vr, vi, n, n, inverse, f64, n > 4096 ? n / 40 : 1);
						cr_expect_eq(wrong, 0, "DFT %s n %lld %s%s%s: %lld bins wrong", dtype_name(dt), (long long)n,
							     c == 2 ? "complex" : "real", onesided ? " onesided" : "", inverse ? " inverse" : "",
							     (long long)wrong);
						first = y;
						continue;
					}
					cr_expect_eq(memcmp(part == 1 ? first : (char *)first + off, y, part == 1 ? yb : yb), 0,
						     "DFT %s n %lld mode %d: other bits %s", dtype_name(dt), (long long)n, mode,
						     part == 1 ? "with 3 threads" : "for lines 1.. alone");
					xfree(y);
				}
				xfree(first);
				xfree(xd);
				xfree(vr);
				xfree(vi);
			}
}

/* STFT of 3 signals (real, onesided; complex, both sides) with and without a window, frame
 * lengths 1, 7, 16 and 400 at odd and even hops, float32 and float64: frame f of signal b is
 * signal[b, f step + t] w[t], t < n, checked against the definition within la_fft_tol (the
 * signals' edge lines NaN, inf, huge and subnormal among the frames), the same bits with 1 and 3
 * threads. */
Test(exec, stft_lanes_match_the_definition)
{
	static const struct { int64_t n, step, len; } cs[] = {{1, 7, 20}, {7, 3, 97}, {16, 1, 50}, {400, 161, 1200}, {400, 160, 1000}};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int mode = 0; mode < 4; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, win = mode & 1, c = mode & 2 ? 2 : 1, onesided = c == 1;
				int64_t n = cs[ci].n, step = cs[ci].step, len = cs[ci].len, B = 3, nx = B * len * c;
				int64_t frames = (len - n) / step + 1, keep = onesided ? n / 2 + 1 : n;
				/* 9 generated lines of len (NaN, inf, huge, subnormal in 5-8): 3 signals' real and
				 * imaginary parts */
				void *gen = xmalloc((size_t)(9 * len) * 8), *xd = xmalloc((size_t)nx * 8), *wd = xmalloc((size_t)n * 8);
				la_signal(dt, gen, 9, len, 40 + ci * 8 + (size_t)mode * 2 + (size_t)f64);
				struct rtensor gt = {.dtype = dt, .ndim = 1, .dims = {9 * len}, .numel = 9 * len, .data = gen};
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {nx}, .numel = nx, .data = xd};
				struct rtensor wt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd};
				for (int64_t b = 0; b < B; b++)
					for (int64_t i = 0; i < len; i++)
						for (int64_t k = 0; k < c; k++) /* real parts lines 5-7, imaginary 8, 0, 1 */
							rt_set(&xt, (b * len + i) * c + k, rt_get(&gt, ((b + 5 + 3 * k) % 9) * len + i));
				for (int64_t t = 0; t < n; t++)
					rt_set(&wt, t, 0.5 + 0.5 * sin((double)t));
				/* the frames, windowed, as lines for la_check_lines */
				int64_t lines = B * frames;
				double *fr = xmalloc((size_t)(lines * n) * 8), *fi = c == 2 ? xmalloc((size_t)(lines * n) * 8) : NULL;
				for (int64_t b = 0; b < B; b++)
					for (int64_t f = 0; f < frames; f++)
						for (int64_t t = 0; t < n; t++) {
							double h = win ? rt_get(&wt, t) : 1;
							int64_t e = (b * len + f * step + t) * c;
							fr[(b * frames + f) * n + t] = rt_get(&xt, e) * h;
							if (c == 2)
								fi[(b * frames + f) * n + t] = rt_get(&xt, e + 1) * h;
						}
				char text[768];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, "
					 "{name: w, dtype: %s, shape: [%lld]}]\nparams: [{name: st, dtype: int64, shape: [], data: [%lld]}, "
					 "{name: fl, dtype: int64, shape: [], data: [%lld]}]\nnodes:\n  - {op: STFT, inputs: [x, st, %s, fl], "
					 "outputs: [y], attrs: {onesided: %d}}\n  - {op: Identity, inputs: [w], outputs: [w2]}\n"
					 "outputs: [{name: y}, {name: w2}]\n",
					 dtype_name(dt), (long long)B, (long long)len, (long long)c, dtype_name(dt), (long long)n,
					 (long long)step, (long long)n, win ? "w" : "''", onesided);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {B, len, c}, .numel = nx, .data = xd,
							.nbytes = (size_t)nx * dtype_size(dt), .known = 1},
						       {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd,
							.nbytes = (size_t)n * dtype_size(dt), .known = 1}};
				const char *names[] = {"x", "w"};
				int64_t ny, ny3;
				void *y = la_run(text, t, names, 2, 1, 0, &ny), *y3 = la_run(text, t, names, 2, 3, 0, &ny3);
				cr_assert_eq(ny, lines * keep * 2);
				struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
				int64_t wrong = la_check_lines(&yt, lines, keep, fr, fi, n, n, 0, f64, 1);
				cr_expect_eq(wrong, 0, "STFT %s n %lld step %lld %s%s: %lld bins wrong", dtype_name(dt), (long long)n,
					     (long long)step, c == 2 ? "complex" : "real", win ? " windowed" : "", (long long)wrong);
				cr_expect_eq(memcmp(y, y3, (size_t)ny * dtype_size(dt)), 0, "STFT %s n %lld: other bits with 3 threads",
					     dtype_name(dt), (long long)n);
				xfree(y);
				xfree(y3);
				xfree(gen);
				xfree(xd);
				xfree(wd);
				xfree(fr);
				xfree(fi);
			}
}

/* #52 fft: real lines of even length n >= 32 take a complex transform of n / 2 (signal.c) and
 * every smooth length Stockham's radix-4, 2, 3, 5 and generic-prime stages: each radix with
 * twiddles (n / 2 = 2 3^2 7, 3 5^3, 11 13, 4^2, 2 3^2), Bluestein's under the half (n / 2 = 67,
 * 1009), n 2 (under 32, the complex transform), onesided and full (the mirrored half), forward and
 * inverse, float32 and float64, and a dft_length past the line (zero padding; an odd number of used
 * elements), against the definition in long double (la_check_lines: NaN lines NaN everywhere,
 * infinite lines skipped); the same bits with 3 threads as with 1. */
Test(exec, fft_real_lines_match_the_definition)
{
	static const struct { int64_t n, len; } cs[] = {{2, 2}, {36, 36}, {126, 126}, {250, 250}, {286, 286}, {32, 32},
							  {134, 134}, {2018, 2018}, {64, 21}, {90, 77}};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int mode = 0; mode < 3; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				/* (an inverse's subnormal line, 8, divided by n falls under the dtype's resolution) */
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, onesided = mode == 0, inverse = mode == 2;
				int64_t n = cs[ci].n, len = cs[ci].len, lines = inverse ? 8 : 11;
				int64_t keep = onesided ? n / 2 + 1 : n;
				void *xd = xmalloc((size_t)(lines * len) * 8);
				la_signal(dt, xd, lines, len, 7000 + ci * 8 + (size_t)mode * 2 + (size_t)f64);
				struct rtensor xt = {.dtype = dt, .ndim = 3, .dims = {lines, len, 1}, .numel = lines * len, .data = xd,
						     .nbytes = (size_t)(lines * len) * dtype_size(dt), .known = 1};
				/* the lines zero-padded to n, as the reference reads them */
				double *v = xmalloc((size_t)(lines * n) * 8);
				for (int64_t l = 0; l < lines; l++)
					for (int64_t t = 0; t < n; t++)
						v[l * n + t] = t < len ? rt_get(&xt, l * len + t) : 0;
				char text[640];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, 1]}]\n"
					 "params: [{name: dl, dtype: int64, shape: [], data: [%lld]}]\n"
					 "nodes:\n  - {op: DFT, inputs: [x, dl], outputs: [y], attrs: {axis: 1, onesided: %d, inverse: %d}}\n"
					 "outputs: [{name: y}]\n",
					 dtype_name(dt), (long long)lines, (long long)len, (long long)n, onesided, inverse);
				const char *names[] = {"x"};
				int64_t ny, ny3;
				void *y = la_run(text, &xt, names, 1, 1, 0, &ny), *y3 = la_run(text, &xt, names, 1, 3, 0, &ny3);
				cr_assert_eq(ny, lines * keep * 2);
				struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
				int64_t wrong = la_check_lines(&yt, lines, keep, v, NULL, n, n, inverse, f64, 1);
				cr_expect_eq(wrong, 0, "DFT %s n %lld of %lld real%s%s: %lld bins wrong", dtype_name(dt), (long long)n,
					     (long long)len, onesided ? " onesided" : "", inverse ? " inverse" : "", (long long)wrong);
				cr_expect_eq(memcmp(y, y3, (size_t)ny * dtype_size(dt)), 0, "DFT %s n %lld mode %d: other bits with 3 threads",
					     dtype_name(dt), (long long)n, mode);
				xfree(y);
				xfree(y3);
				xfree(v);
				xfree(xd);
			}
}

/* #52 layout2: DepthToSpace's float32 rows (shuffle.c: b input rows of W interleaved, AVX-512 for
 * b = 2) and ReduceSum's blocks with axes of 1 aside (reduce.c: Tile's gradient), against their
 * definitions here, bit for bit, with 1 and 3 threads. */

/* DepthToSpace of (N, C, H, W) by block b: y[n][c][h b + i][w b + j] is x[n][(i b + j) C' + c][h][w]
 * (DCR) or x[n][c b^2 + i b + j][h][w] (CRD), C' = C / b^2; odd widths (the mask's edges), blocks
 * 1 to 3, float32 (the rows) and float64 (the transpose's copy), cf_fill's NaNs and -0 kept. */
Test(exec, depth_to_space_rows_match_the_definition_bit_for_bit)
{
	static const int64_t cs[][5] = {{2, 8, 3, 24, 2}, {1, 4, 2, 17, 2}, {3, 4, 1, 1, 2}, {1, 8, 2, 9, 2},
					{1, 4, 3, 33, 2}, {2, 18, 2, 5, 3}, {1, 3, 2, 7, 1}, {1, 4, 1, 16, 2}};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int crd = 0; crd < 2; crd++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t n = cs[ci][0], c = cs[ci][1], h = cs[ci][2], w = cs[ci][3], b = cs[ci][4], cc = c / (b * b);
				int64_t numel = n * c * h * w;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)numel * es);
				cf_fill(dt, xd, numel, 9100 + ci * 4 + (size_t)crd * 2 + (size_t)f64);
				struct rtensor xt = {.dtype = dt, .ndim = 4, .dims = {n, c, h, w}, .numel = numel, .data = xd,
						     .nbytes = (size_t)numel * es, .known = 1};
				char text[512];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}]\n"
					 "nodes:\n  - {op: DepthToSpace, inputs: [x], outputs: [y], attrs: {blocksize: %lld, mode: %s}}\n"
					 "outputs: [{name: y}]\n",
					 dtype_name(dt), (long long)n, (long long)c, (long long)h, (long long)w, (long long)b,
					 crd ? "CRD" : "DCR");
				const char *names[] = {"x"};
				int64_t ny, ny3;
				uint8_t *y = la_run(text, &xt, names, 1, 1, 0, &ny), *y3 = la_run(text, &xt, names, 1, 3, 0, &ny3);
				cr_assert_eq(ny, numel);
				int64_t wrong = 0, at = -1;
				for (int64_t o = 0; o < numel; o++) {
					int64_t j = o % b, wi = o / b % w, i = o / (b * w) % b, hi = o / (b * w * b) % h;
					int64_t ci2 = o / (b * w * b * h) % cc, ni = o / (b * w * b * h * cc);
					int64_t ch = crd ? ci2 * b * b + i * b + j : (i * b + j) * cc + ci2;
					int64_t src = ((ni * c + ch) * h + hi) * w + wi;
					if (memcmp(y + o * (int64_t)es, (uint8_t *)xd + src * (int64_t)es, es) && !wrong++)
						at = o;
				}
				cr_expect_eq(wrong, 0, "DepthToSpace %s %s case %zu: %lld wrong, the first #%lld", dtype_name(dt),
					     crd ? "CRD" : "DCR", ci, (long long)wrong, (long long)at);
				cr_expect_eq(memcmp(y, y3, (size_t)numel * es), 0, "DepthToSpace %s case %zu: other bits with 3 threads",
					     dtype_name(dt), ci);
				xfree(y);
				xfree(y3);
				xfree(xd);
			}
}

/* ReduceSum and ReduceMean over axes split by axes of 1, the last axis kept (Tile's gradient's
 * (1, N, r, C, 1, H, 1, W) over 0, 2, 4, 6; a kept axis of 1 between reduced ones; odd sizes; and
 * reduced axes split by a kept axis of 4, not a block): each
 * output 0 plus its inputs in memory order in double, then rounded, bit for bit (any NaN for a
 * NaN), with 1 and 3 threads. */
Test(exec, reduce_sum_past_axes_of_one_matches_the_serial_sum_bit_for_bit)
{
	static const struct { int nd; int64_t dims[8]; int na; int64_t axes[4]; } cs[] = {
		{8, {1, 3, 2, 5, 1, 7, 1, 9}, 4, {0, 2, 4, 6}}, {8, {1, 2, 3, 4, 1, 1, 1, 1100}, 4, {0, 2, 4, 6}},
		{4, {3, 1, 4, 5}, 2, {0, 2}},                   {5, {2, 3, 1, 1, 13}, 2, {1, 3}},
		{5, {1, 4, 1, 3, 2}, 2, {0, 2}},                {4, {5, 1, 1, 3}, 2, {1, 2}},
		{5, {2, 3, 4, 5, 6}, 2, {1, 3}}, /* no block: the row walk */
	};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int mean = 0; mean < 2; mean++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, nd = cs[ci].nd, red[8] = {0};
				int64_t numel = 1, count = 1, st[8], ost[8];
				for (int d = 0; d < nd; d++)
					numel *= cs[ci].dims[d];
				for (int k = 0; k < cs[ci].na; k++)
					red[cs[ci].axes[k]] = 1;
				for (int d = nd - 1, s = 1, os = 1; d >= 0; d--) {
					st[d] = s, s *= (int)cs[ci].dims[d];
					ost[d] = red[d] ? 0 : os;
					os *= red[d] ? 1 : (int)cs[ci].dims[d];
					count *= red[d] ? cs[ci].dims[d] : 1;
				}
				void *xd = xmalloc((size_t)numel * 8);
				cf_fill(dt, xd, numel, 9300 + ci * 4 + (size_t)mean * 2 + (size_t)f64);
				struct rtensor xt = {.dtype = dt, .ndim = nd, .numel = numel, .data = xd,
						     .nbytes = (size_t)numel * dtype_size(dt), .known = 1};
				char shape[128] = "", axes[64] = "";
				for (int d = 0; d < nd; d++) {
					xt.dims[d] = cs[ci].dims[d];
					snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "",
						 (long long)cs[ci].dims[d]);
				}
				for (int k = 0; k < cs[ci].na; k++)
					snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%s%lld", k ? ", " : "",
						 (long long)cs[ci].axes[k]);
				char text[640];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}]\n"
					 "params: [{name: ax, dtype: int64, shape: [%d], data: [%s]}]\n"
					 "nodes:\n  - {op: %s, inputs: [x, ax], outputs: [y], attrs: {keepdims: 0}}\n"
					 "outputs: [{name: y}]\n",
					 dtype_name(dt), shape, cs[ci].na, axes, mean ? "ReduceMean" : "ReduceSum");
				const char *names[] = {"x"};
				int64_t ny, ny3, no = numel / count;
				void *y = la_run(text, &xt, names, 1, 1, 0, &ny), *y3 = la_run(text, &xt, names, 1, 3, 0, &ny3);
				cr_assert_eq(ny, no);
				double *acc = xmalloc((size_t)no * 8);
				for (int64_t o = 0; o < no; o++)
					acc[o] = 0;
				for (int64_t e = 0; e < numel; e++) {
					int64_t o = 0;
					for (int d = 0; d < nd; d++)
						o += e / st[d] % cs[ci].dims[d] * ost[d];
					acc[o] = acc[o] + rt_get(&xt, e);
				}
				struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {no}, .numel = no, .data = y};
				int64_t wrong = 0, at = -1;
				for (int64_t o = 0; o < no; o++) {
					double want = mean ? acc[o] / (double)count : acc[o], got = rt_get(&yt, o);
					if (f64 ? !(isnan(want) ? isnan(got) : memcmp(&want, &got, 8) == 0)
						: !(isnan(want) ? isnan(got) : (float)want == (float)got && signbit(want) == signbit(got)))
						if (!wrong++)
							at = o;
				}
				cr_expect_eq(wrong, 0, "%s %s case %zu: %lld wrong, the first #%lld", mean ? "ReduceMean" : "ReduceSum",
					     dtype_name(dt), ci, (long long)wrong, (long long)at);
				cr_expect_eq(memcmp(y, y3, (size_t)no * dtype_size(dt)), 0, "ReduceSum case %zu: other bits with 3 threads",
					     ci);
				xfree(acc);
				xfree(y);
				xfree(y3);
				xfree(xd);
			}
}

/* #52e fftgrid: GridSample float32's channels as vector lanes (AVX-512 where the processor has it,
 * 16 channels or more and X's plane at most 8 times the points: X turned channels-last, 16
 * channels of a point a vector, the outputs turned back) and the 2-D taps' list written out,
 * against the rule written here (gsr_axis per axis, the taps' combinations with the last axis
 * fastest, weight the product from the first axis, zero weights and taps outside X skipped, the
 * sum in double from 0, rounded once), bit for bit, any NaN for a NaN, at 1 and 3 threads alike.
 * Channels 3 (scalar rows), 16, 17, 20 and 33 (a masked last vector), a plane too large for its
 * points (scalar rows), points per image 16, 17, 31, 83 and 200 (several blocks, a piece of the
 * pool starting inside an image), linear and nearest, zeros, border and reflection padding,
 * align_corners or not, grids inside X or with every 37th point on a tap or outside; 2-D and 3-D
 * (whose first coordinate mostly at the edge, 4 of 8 taps read). X from cf_fill (NaN, infinities,
 * -0, subnormals, huge). */
Test(exec, fftgrid_grid_sample_vectors_match_the_rule_at_1_and_3_threads)
{
	/* N, C, D (0: 2-D), H, W, OD, OH, OW */
	static const int64_t shapes[][8] = {{1, 3, 0, 5, 7, 1, 4, 4},	  {2, 16, 0, 9, 4, 1, 1, 17},
					    {1, 20, 0, 9, 10, 1, 1, 31},  {2, 3, 0, 6, 13, 1, 83, 1},
					    {3, 33, 0, 11, 10, 1, 10, 20}, {2, 17, 4, 5, 6, 2, 4, 9},
					    {1, 16, 0, 30, 30, 1, 2, 3}};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int mode = 0; mode < 24; mode++) {
			int pad = mode % 3, align = mode / 3 % 2, edges = mode / 6 % 2, nearest = mode / 12, r = shapes[sh][2] ? 3 : 2;
			int64_t N = shapes[sh][0], C = shapes[sh][1], S[3] = {shapes[sh][2], shapes[sh][3], shapes[sh][4]};
			int64_t P = shapes[sh][5] * shapes[sh][6] * shapes[sh][7], plane = (r == 3 ? S[0] : 1) * S[1] * S[2];
			int64_t nx = N * C * plane, ng = N * P * r, ny = N * C * P;
			const int64_t *sp = S + 3 - r; /* the spatial sizes, first axis first */
			float *xd = xmalloc((size_t)nx * 4), *gd = xmalloc((size_t)ng * 4);
			cf_fill(DT_FLOAT, xd, nx, 17 + sh);
			uint64_t seed = 7 + sh * 8 + (uint64_t)mode;
			for (int64_t i = 0; i < ng; i++) {
				seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
				int64_t q = i / r, ax = r - 1 - i % r, size = sp[ax], k = (int64_t)(seed >> 40) % size;
				double u = (double)(seed >> 11) / 0x1p53;
				/* 3-D: the first axis's coordinate in (-1, 0) (zeros) or clipped to 0 (border), so
				 * its taps are one: 4 of 8 */
				double face = pad == 1	 ? -1.5
					      : pad	 ? -1 - 0.25 / (double)size
					      : align ? -1 - 1 / (double)(size - 1)
							 : -1 + 0.5 / (double)size;
				gd[i] = (float)(r == 3 && ax == 0 && q % 41 != 9 ? face
						: edges && q % 37 == 5 ? 2.0 * (double)k / (double)(size > 1 ? size - 1 : 1) - 1
						: edges && q % 37 == 20 ? u * 3 - 1.5
									: u * 1.6 - 0.8);
			}
			char text[1024], shx[64], shg[64];
			if (r == 3) {
				snprintf(shx, sizeof shx, "%lld, %lld, %lld, %lld, %lld", (long long)N, (long long)C, (long long)S[0],
					 (long long)S[1], (long long)S[2]);
				snprintf(shg, sizeof shg, "%lld, %lld, %lld, %lld, 3", (long long)N, (long long)shapes[sh][5],
					 (long long)shapes[sh][6], (long long)shapes[sh][7]);
			} else {
				snprintf(shx, sizeof shx, "%lld, %lld, %lld, %lld", (long long)N, (long long)C, (long long)S[1],
					 (long long)S[2]);
				snprintf(shg, sizeof shg, "%lld, %lld, %lld, 2", (long long)N, (long long)shapes[sh][6],
					 (long long)shapes[sh][7]);
			}
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 20\ninputs: [{name: x, dtype: float32, shape: [%s]}, {name: g, dtype: float32, "
				 "shape: [%s]}]\nnodes:\n  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {mode: %s, "
				 "padding_mode: %s, align_corners: %d}}\noutputs: [{name: y}]\n",
				 shx, shg, nearest ? "nearest" : "linear", pad == 2 ? "reflection" : pad ? "border" : "zeros", align);
			struct rtensor t[2] = {{.dtype = DT_FLOAT, .ndim = r + 2, .numel = nx, .data = xd, .nbytes = nx * 4, .known = 1},
					       {.dtype = DT_FLOAT, .ndim = r + 2, .numel = ng, .data = gd, .nbytes = ng * 4, .known = 1}};
			t[0].dims[0] = t[1].dims[0] = N;
			t[0].dims[1] = C;
			for (int a = 0; a < r; a++) {
				t[0].dims[2 + a] = sp[a];
				t[1].dims[1 + a] = shapes[sh][8 - r + a];
			}
			t[1].dims[r + 1] = r;
			const char *names[2] = {"x", "g"};
			int64_t n1, n3;
			float *y1 = la_run(text, t, names, 2, 1, 0, &n1), *y3 = la_run(text, t, names, 2, 3, 0, &n3);
			cr_assert_eq(n1, ny);
			cr_assert_eq(n3, ny);
			int64_t wrong = 0, first = -1, four = 0;
			for (int64_t n = 0; n < N; n++)
				for (int64_t q = 0; q < P; q++) {
					int64_t idx[3][2];
					double w[3][2];
					int tn[3], combos = 1;
					for (int a = 0; a < r; a++)
						combos *= tn[a] = gsr_axis(nearest, pad, align, gd[(n * P + q) * r + (r - 1 - a)], sp[a],
									   idx[a], w[a]);
					int64_t at[8];
					double wt[8];
					int K = 0;
					for (int c = 0; c < combos; c++) {
						int64_t o = 0;
						double ww = 1;
						for (int a = 0, rest = c; a < r; a++) {
							int below = 1;
							for (int e = a + 1; e < r; e++)
								below *= tn[e];
							int b = rest / below;
							rest %= below;
							ww *= w[a][b];
							o = idx[a][b] < 0 || o < 0 ? -1 : o * sp[a] + idx[a][b];
						}
						if (o >= 0 && ww != 0) {
							at[K] = o;
							wt[K++] = ww;
						}
					}
					four += K > 0;
					for (int64_t ch = 0; ch < C; ch++) {
						double v = 0;
						for (int k = 0; k < K; k++)
							v += wt[k] * xd[(n * C + ch) * plane + at[k]];
						float want = (float)v;
						int64_t o = (n * C + ch) * P + q;
						if (!seq_same(DT_FLOAT, &want, y1 + o) && !wrong++)
							first = o;
					}
				}
			cr_expect_eq(wrong, 0, "GridSample shape %zu mode %d: %lld of %lld wrong, the first #%lld", sh, mode,
				     (long long)wrong, (long long)ny, (long long)first);
			cr_expect_eq(memcmp(y1, y3, (size_t)ny * 4), 0, "GridSample shape %zu mode %d: other bits at 3 threads", sh,
				     mode);
			cr_expect_gt(four, 0, "GridSample shape %zu mode %d: no point reads a tap", sh, mode);
			xfree(y1);
			xfree(y3);
			xfree(xd);
			xfree(gd);
		}
}

/* #52e fftgrid: DFT's plans kept across calls (signal.c's sig_cache: the first 8 plans' tables,
 * n, sign and half the key) give the bits of the plan made in the call: each case run once (its
 * plan made, then kept while a slot is free) and again at 1 and 3 threads after every case has
 * run (its plan the kept one), bit for bit. Real lines of 512 and 400 (half), 134 (half, Bluestein's
 * 67), 16 (no half), 1009 (Bluestein); complex 67, 512 (the key of real 512 but for half) and 400
 * inverse (sign +1); past the 8 slots, real 100 and complex 36 (made per call). */
Test(exec, fftgrid_dft_kept_plans_give_the_bits_of_new_ones)
{
	static const int64_t cases[][3] = {{512, 1, 0}, {400, 1, 0}, {134, 1, 0}, {16, 1, 0},  {1009, 1, 0}, {67, 2, 0},
					   {512, 2, 0}, {400, 2, 1}, {100, 1, 0}, {36, 2, 0}};
	enum { NC = sizeof cases / sizeof *cases, LINES = 11 };
	void *first[NC], *xd[NC];
	int64_t count[NC];
	char text[NC][512];
	struct rtensor t[NC];
	for (int pass = 0; pass < 3; pass++)
		for (int i = 0; i < NC; i++) {
			int64_t n = cases[i][0], c = cases[i][1], nx = LINES * n * c;
			if (!pass) {
				xd[i] = xmalloc((size_t)nx * 4);
				la_signal(DT_FLOAT, xd[i], LINES * c, n, 77 + (uint64_t)i);
				snprintf(text[i], sizeof text[i],
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [%d, %lld, %lld]}]\n"
					 "nodes:\n  - {op: DFT, inputs: [x], outputs: [y], attrs: {axis: 1, onesided: %d, inverse: %d}}\n"
					 "outputs: [{name: y}]\n",
					 LINES, (long long)n, (long long)c, c == 1, (int)cases[i][2]);
				t[i] = (struct rtensor){.dtype = DT_FLOAT, .ndim = 3, .dims = {LINES, n, c}, .numel = nx, .data = xd[i],
							.nbytes = (size_t)nx * 4, .known = 1};
			}
			const char *names[] = {"x"};
			int64_t ny;
			void *y = la_run(text[i], &t[i], names, 1, pass == 2 ? 3 : 1, 0, &ny);
			if (!pass) {
				first[i] = y;
				count[i] = ny;
				continue;
			}
			cr_assert_eq(ny, count[i]);
			cr_expect_eq(memcmp(y, first[i], (size_t)ny * 4), 0,
				     "DFT case %d (n %lld): other bits from the kept plan at %d threads", i, (long long)cases[i][0],
				     pass == 2 ? 3 : 1);
			xfree(y);
		}
	for (int i = 0; i < NC; i++) {
		xfree(first[i]);
		xfree(xd[i]);
	}
}

/* #52 fft32: float32 lines transformed in float (signal.c's sig_plan_runf, where every radix is 2,
 * 3, 4 or 5 and no Bluestein), against the definition in long double within la_fft_tol and its
 * subnormal term (la_check_lines: NaN lines NaN everywhere, infinite ones skipped; huge and
 * subnormal lines among la_signal's 11); float64 the same shapes within 1e-12, which only a double
 * transform meets. Real lines half (n / 2 = 24: radices 4 2 3; 50: 2 5 5; 200; 256) and not (20, 30
 * under 32), a dft_length past the line (37 and 29 used: sig_load8's 8s and the rest), 28 = 4 7
 * (double: a radix 7), complex lines (60, 512), onesided, full and inverse; STFT windowed with
 * 400 at step 160 and 48 at step 5 (frames overlapping and not multiples of 8 lines). The same
 * bits at 1, 2 and 3 threads and for rows 3.. run on their own (other lanes). */
Test(exec, fft32_float_lines_match_the_definition_at_1_2_3_threads)
{
	static const struct { int64_t n, len, c, stft, step; } cs[] = {
		{20, 20, 1, 0, 0}, {48, 37, 1, 0, 0}, {100, 100, 1, 0, 0}, {400, 400, 1, 0, 0}, {512, 512, 1, 0, 0},
		{30, 29, 1, 0, 0}, {56, 56, 1, 0, 0},  {60, 60, 2, 0, 0},    {512, 512, 2, 0, 0}, {400, 1000, 1, 1, 160},
		{48, 130, 1, 1, 5}};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int mode = 0; mode < 3; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int64_t n = cs[ci].n, len = cs[ci].len, c = cs[ci].c, stft = cs[ci].stft, step = cs[ci].step;
				if (stft && mode) /* (STFT: onesided, forward) */
					continue;
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, onesided = mode == 0 && c == 1, inverse = mode == 2;
				int64_t rows = stft ? 9 : inverse ? 8 : 11, keep = onesided ? n / 2 + 1 : n;
				int64_t frames = stft ? (len - n) / step + 1 : 1, lines = rows * frames, nx = rows * len * c;
				void *gen = xmalloc((size_t)(rows * c * len) * 8), *xd = xmalloc((size_t)nx * 8), *wd = xmalloc((size_t)n * 8);
				la_signal(dt, gen, rows * c, len, 52032 + ci * 8 + (size_t)mode * 2 + (size_t)f64);
				struct rtensor gt = {.dtype = dt, .ndim = 1, .dims = {rows * c * len}, .numel = rows * c * len, .data = gen};
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {nx}, .numel = nx, .data = xd};
				struct rtensor wt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd};
				for (int64_t r = 0; r < rows; r++) /* generated line r c + k: row r's component k */
					for (int64_t t = 0; t < len; t++)
						for (int64_t k = 0; k < c; k++)
							rt_set(&xt, (r * len + t) * c + k, rt_get(&gt, (r * c + k) * len + t));
				for (int64_t t = 0; t < n; t++)
					rt_set(&wt, t, 0.54 - 0.46 * cos(2 * M_PI * (double)t / (double)n));
				/* the reference's lines: frames windowed, or the rows zero-padded to n */
				double *vr = xmalloc((size_t)(lines * n) * 8), *vi = c == 2 ? xmalloc((size_t)(lines * n) * 8) : NULL;
				for (int64_t l = 0; l < lines; l++)
					for (int64_t t = 0; t < n; t++) {
						int64_t r = l / frames, at = (l % frames) * step + t;
						double h = stft ? rt_get(&wt, t) : 1;
						vr[l * n + t] = at < len ? rt_get(&xt, (r * len + at) * c) * h : 0;
						if (c == 2)
							vi[l * n + t] = at < len ? rt_get(&xt, (r * len + at) * c + 1) : 0;
					}
				void *first = NULL;
				for (int part = 0; part < 4; part++) { /* 1, 2, 3 threads, rows 3.. alone */
					int64_t from = part == 3 ? 3 : 0, nr = rows - from;
					char text[768];
					if (stft)
						snprintf(text, sizeof text,
							 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, 1]}, "
							 "{name: w, dtype: %s, shape: [%lld]}]\nparams: [{name: st, dtype: int64, shape: [], "
							 "data: [%lld]}]\nnodes:\n  - {op: STFT, inputs: [x, st, w], outputs: [y]}\n"
							 "outputs: [{name: y}]\n",
							 dtype_name(dt), (long long)nr, (long long)len, dtype_name(dt), (long long)n, (long long)step);
					else
						snprintf(text, sizeof text,
							 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}]\n"
							 "params: [{name: dl, dtype: int64, shape: [], data: [%lld]}]\nnodes:\n  - {op: DFT, "
							 "inputs: [x, dl], outputs: [y], attrs: {axis: 1, onesided: %d, inverse: %d}}\n"
							 "outputs: [{name: y}]\n",
							 dtype_name(dt), (long long)nr, (long long)len, (long long)c, (long long)n, onesided, inverse);
					struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {nr, len, c}, .numel = nr * len * c,
								.data = (char *)xd + (size_t)(from * len * c) * dtype_size(dt),
								.nbytes = (size_t)(nr * len * c) * dtype_size(dt), .known = 1},
							       {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd,
								.nbytes = (size_t)n * dtype_size(dt), .known = 1}};
					const char *names[] = {"x", "w"};
					int64_t ny;
					void *y = la_run(text, t, names, stft ? 2 : 1, part == 1 ? 2 : part == 2 ? 3 : 1, 0, &ny);
					cr_assert_eq(ny, nr * frames * keep * 2);
					if (!part) {
						struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
						int64_t wrong = la_check_lines(&yt, lines, keep, vr, vi, n, n, inverse, f64, 1);
						cr_expect_eq(wrong, 0, "%s %s n %lld of %lld %s mode %d: %lld bins wrong", stft ? "STFT" : "DFT",
							     dtype_name(dt), (long long)n, (long long)len, c == 2 ? "complex" : "real", mode,
							     (long long)wrong);
						first = y;
						continue;
					}
					size_t off = (size_t)(from * frames * keep * 2) * dtype_size(dt);
					cr_expect_eq(memcmp((char *)first + off, y, (size_t)ny * dtype_size(dt)), 0,
						     "%s %s n %lld mode %d: other bits %s", stft ? "STFT" : "DFT", dtype_name(dt), (long long)n,
						     mode, part == 1 ? "with 2 threads" : part == 2 ? "with 3 threads" : "for rows 3.. alone");
					xfree(y);
				}
				xfree(first);
				xfree(gen);
				xfree(xd);
				xfree(wd);
				xfree(vr);
				xfree(vi);
			}
}
