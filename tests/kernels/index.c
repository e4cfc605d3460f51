/* kernels/index.c - #52's kernel tests, part of test_kernels: TopK, Unique, ArgMax/ArgMin, Tile and
 * the like, gathers and scatters. Each fast path against a reference written here, bit for bit or
 * within a stated bound. */
#include "kernels.h"

/* #52 select: TopK's lanes over the threads, Unique's one-element slices grouped by a hash, and
 * MaxUnpool's scatter at the default shape as typed loops, against their rules written here over
 * ties, NaN, +-0, infinities, subnormals and odd lengths (0 and 1 elements among them), float32 and
 * float64 (and int64 for Unique and MaxUnpool), bit for bit. */

/* a one-node graph over inputs (the given tensors, copied: a run may reuse them) */
static struct exec *sel_run(struct graph **g, const char *ins, const char *node, const char *outs, const struct rtensor *t,
			    const char **names, int n, void **copies)
{
	char text[1024];
	snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: [%s]\nnodes:\n  - %s\noutputs: [%s]\n", ins, node, outs);
	*g = load_text("select.yaml", text);
	struct rtensor c[4];
	for (int k = 0; k < n; k++) {
		c[k] = t[k];
		copies[k] = xmalloc((size_t)t[k].nbytes + 1);
		memcpy(copies[k], t[k].data, (size_t)t[k].nbytes);
		c[k].data = copies[k];
	}
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = c, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", node, e.msg);
	return x;
}

/* element i of a float32/float64/int64 array as rt_get reads it */
static double sel_at(int dt, const void *p, int64_t i)
{
	return dt == DT_FLOAT ? ((const float *)p)[i] : dt == DT_DOUBLE ? ((const double *)p)[i] : (double)((const int64_t *)p)[i];
}

/* a > b, NaN the largest: select.c's order */
static int sel_gt(double a, double b)
{
	return isnan(a) ? !isnan(b) : a > b;
}

/* n values of dt drawn from a few (ties), specials first, or from many (pool 0) */
static void sel_fill(int dt, void *p, int64_t n, uint64_t seed, int pool)
{
	static const double sp[] = {NAN, 0.0, -0.0, INFINITY, -INFINITY, 1e-310, -1e-40, 1.5, -2.5, 3e38, 7};
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 17;
		double v = pool ? sp[r % (uint64_t)pool] : (double)(int64_t)(r % 1000003) / 7 - 70000;
		if (dt == DT_FLOAT)
			((float *)p)[i] = (float)v;
		else if (dt == DT_DOUBLE)
			((double *)p)[i] = v;
		else
			((int64_t *)p)[i] = isnan(v) ? INT64_MIN : fabs(v) > 1e18 ? (v > 0 ? INT64_MAX : -INT64_MAX) : (int64_t)(v * 3);
	}
}

Test(exec, select_topk_matches_its_rule)
{
	static const struct { int64_t r, len, k; int ax, pool; } cases[] = {
		{5, 2000, 10, 1, 11}, {7, 301, 3, 1, 0}, {3, 1, 1, 1, 11}, {4, 7, 7, 1, 5}, {6, 100, 0, 1, 11},
		{9, 80, 9, 0, 11}, {33, 50, 5, 0, 3}, {1, 9, 2, 1, 2}, {64, 513, 20, 1, 11},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int largest = 0; largest < 2; largest++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t R = cases[c].r, len = cases[c].len, k = cases[c].k, ax = cases[c].ax;
				int64_t d0 = ax ? R : len, d1 = ax ? len : R, n = R * len;
				void *xd = xmalloc((size_t)n * 8 + 8);
				sel_fill(dt, xd, n, 11 + c, cases[c].pool);
				char ins[200], node[200];
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld]}, {name: k, dtype: int64, shape: [1]}",
					 dtype_name(dt), (long long)d0, (long long)d1);
				snprintf(node, sizeof node, "{op: TopK, inputs: [x, k], outputs: [y, i], attrs: {axis: %lld, largest: %d}}",
					 (long long)ax, largest);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 2, .dims = {d0, d1}, .numel = n, .data = xd, .nbytes = n * (f64 ? 8 : 4), .known = 1},
						       {.dtype = DT_INT64, .ndim = 1, .dims = {1}, .numel = 1, .data = &k, .nbytes = 8, .known = 1}};
				const char *names[2] = {"x", "k"};
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct graph *g;
					void *cp[2];
					struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}", t, names, 2, cp);
					const struct rtensor *y = exec_value(x, g->outputs[0]), *iy = exec_value(x, g->outputs[1]);
					cr_assert_eq(y->numel, R * k);
					int64_t wrong = 0, first = -1;
					char *taken = xmalloc((size_t)len + 1);
					for (int64_t lane = 0; lane < R; lane++) {
						memset(taken, 0, (size_t)len + 1);
						for (int64_t j = 0; j < k; j++) {
							int64_t b = -1; /* the lowest untaken index that none untaken comes before */
							for (int64_t q = 0; q < len; q++) {
								if (taken[q])
									continue;
								double vq = sel_at(dt, xd, ax ? lane * len + q : q * R + lane);
								double vb = b < 0 ? 0 : sel_at(dt, xd, ax ? lane * len + b : b * R + lane);
								if (b < 0 || (largest ? sel_gt(vq, vb) : sel_gt(vb, vq)))
									b = q;
							}
							taken[b] = 1;
							int64_t at = ax ? lane * k + j : j * R + lane;
							double v = sel_at(dt, xd, ax ? lane * len + b : b * R + lane);
							int ok = ((const int64_t *)iy->data)[at] == b;
							if (f64) {
								double u = ((const double *)y->data)[at];
								ok &= !memcmp(&u, &v, 8) || (isnan(u) && isnan(v));
							} else {
								float u = ((const float *)y->data)[at], w = (float)v;
								ok &= !memcmp(&u, &w, 4) || (isnan(u) && isnan(w));
							}
							if (!ok && !wrong++)
								first = at;
						}
					}
					cr_expect_eq(wrong, 0, "TopK case %zu %s largest %d, %d threads: %lld wrong, the first #%lld", c,
						     dtype_name(dt), largest, th, (long long)wrong, (long long)first);
					free(taken);
					exec_free(x);
					graph_free(g);
					free(cp[0]);
					free(cp[1]);
				}
				pool_set_threads(1);
				xfree(xd);
			}
}

/* int64 compared as integers (#52 select2's, below) */
static int s2_lt(int dt, const void *p, int64_t i, int64_t j);
static int s2_eq(int dt, const void *p, int64_t i, int64_t j);

Test(exec, select_unique_matches_its_rule)
{
	static const struct { int64_t n; int pool, axis; } cases[] = {
		{0, 11, 0}, {1, 11, 0}, {7, 11, 0}, {1000, 11, 0}, {1001, 2, 0}, {777, 0, 0}, {20000, 0, 0}, {513, 11, 1}, {1, 3, 1},
	};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int sorted = 0; sorted < 2; sorted++) {
				int dt = dts[d];
				int64_t n = cases[c].n;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)n * 8 + 8);
				sel_fill(dt, xd, n, 5 + c, cases[c].pool);
				char ins[200], node[200];
				/* with an axis: x is (1, n), whose slices along 1 are single elements */
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%s%lld]}", dtype_name(dt), cases[c].axis ? "1, " : "",
					 (long long)n);
				snprintf(node, sizeof node, "{op: Unique, inputs: [x], outputs: [y, i, v, c], attrs: {sorted: %d%s}}", sorted,
					 cases[c].axis ? ", axis: 1" : "");
				struct rtensor t = {.dtype = dt, .ndim = 1 + cases[c].axis, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1};
				t.dims[0] = cases[c].axis ? 1 : n;
				t.dims[1] = n;
				const char *names[1] = {"x"};
				struct graph *g;
				void *cp[1];
				struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}, {name: v}, {name: c}", &t, names, 1, cp);
				const struct rtensor *o[4];
				for (int k = 0; k < 4; k++)
					o[k] = exec_value(x, g->outputs[k]);
				/* the groups by first occurrence, then (sorted) by value: insertion sorts */
				int64_t *first = xmalloc((size_t)n * 8 + 8), *grp = xmalloc((size_t)n * 8 + 8), u = 0;
				int64_t *order = xmalloc((size_t)n * 8 + 8), *rank = xmalloc((size_t)n * 8 + 8);
				for (int64_t j = 0; j < n; j++) {
					int64_t g2 = u - 1;
					while (g2 >= 0 && !s2_eq(dt, xd, first[g2], j))
						g2--;
					if (g2 < 0)
						first[g2 = u++] = j;
					grp[j] = g2;
				}
				for (int64_t r = 0; r < u; r++) {
					int64_t s = r;
					for (; sorted && s > 0 && s2_lt(dt, xd, first[r], first[order[s - 1]]); s--)
						order[s] = order[s - 1];
					order[s] = r;
				}
				for (int64_t r = 0; r < u; r++)
					rank[order[r]] = r;
				cr_expect_eq(o[0]->numel, u, "Unique case %zu %s sorted %d: %lld groups, not %lld", c, dtype_name(dt), sorted,
					     (long long)o[0]->numel, (long long)u);
				int64_t wrong = 0;
				for (int64_t r = 0; r < u && o[0]->numel == u; r++) {
					int64_t j = first[order[r]], cnt = 0;
					for (int64_t q = 0; q < n; q++)
						cnt += grp[q] == order[r];
					wrong += memcmp((const char *)o[0]->data + r * (int64_t)es, (const char *)xd + j * (int64_t)es, es) != 0;
					wrong += ((const int64_t *)o[1]->data)[r] != j;
					wrong += ((const int64_t *)o[3]->data)[r] != cnt;
				}
				for (int64_t j = 0; j < n && o[0]->numel == u; j++)
					wrong += ((const int64_t *)o[2]->data)[j] != rank[grp[j]];
				cr_expect_eq(wrong, 0, "Unique case %zu %s sorted %d: %lld wrong", c, dtype_name(dt), sorted, (long long)wrong);
				exec_free(x);
				graph_free(g);
				free(cp[0]);
				xfree(xd);
				xfree(first);
				xfree(grp);
				xfree(order);
				xfree(rank);
			}
}

Test(exec, select_maxunpool_matches_its_rule)
{
	static const struct { int64_t n, c, h, w; } cases[] = {{2, 3, 4, 6}, {1, 1, 1, 1}, {8, 64, 5, 3}, {1, 5, 0, 4}, {3, 7, 9, 11}};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++) {
			int dt = dts[d];
			size_t es = dtype_size(dt);
			int64_t N = cases[c].n, C = cases[c].c, H = cases[c].h, W = cases[c].w, n = N * C * H * W;
			int64_t m = N * C * (2 * H) * (2 * W);
			void *xd = xmalloc((size_t)n * 8 + 8);
			int64_t *iv = xmalloc((size_t)n * 8 + 8);
			sel_fill(dt, xd, n, 7 + c, 11);
			uint64_t s = 99 + c;
			for (int64_t i = 0; i < n; i++) { /* anywhere in the output, repeats too (the later wins) */
				s = s * 6364136223846793005ULL + 1442695040888963407ULL;
				iv[i] = (int64_t)((s >> 20) % (uint64_t)m);
			}
			char ins[200];
			snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, {name: ix, dtype: int64, shape: [%lld, %lld, %lld, %lld]}",
				 dtype_name(dt), (long long)N, (long long)C, (long long)H, (long long)W, (long long)N, (long long)C, (long long)H,
				 (long long)W);
			struct rtensor t[2] = {{.dtype = dt, .ndim = 4, .dims = {N, C, H, W}, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1},
					       {.dtype = DT_INT64, .ndim = 4, .dims = {N, C, H, W}, .numel = n, .data = iv, .nbytes = n * 8, .known = 1}};
			const char *names[2] = {"x", "ix"};
			struct graph *g;
			void *cp[2];
			struct exec *x = sel_run(&g, ins, "{op: MaxUnpool, inputs: [x, ix], outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}",
						 "{name: y}", t, names, 2, cp);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			cr_assert_eq(y->numel, m);
			char *want = xcalloc((size_t)m + 1, es);
			for (int64_t i = 0; i < n; i++)
				memcpy(want + iv[i] * (int64_t)es, (const char *)xd + i * (int64_t)es, es);
			cr_expect_eq(memcmp(want, y->data, (size_t)m * es), 0, "MaxUnpool case %zu %s: other bits", c, dtype_name(dt));
			exec_free(x);
			graph_free(g);
			free(cp[0]);
			free(cp[1]);
			free(want);
			/* an index past the output: an error naming it */
			if (n) {
				iv[n - 1] = m;
				struct gd_err e = {0};
				struct graph *g2 = load_text("select.yaml", "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [1, 1, 1, 1]}, "
								    "{name: ix, dtype: int64, shape: [1, 1, 1, 1]}]\nnodes:\n  - {op: MaxUnpool, inputs: [x, ix], "
								    "outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\noutputs: [{name: y}]\n");
				int64_t bad = 4;
				float one = 1;
				struct rtensor b[2] = {{.dtype = DT_FLOAT, .ndim = 4, .dims = {1, 1, 1, 1}, .numel = 1, .data = &one, .nbytes = 4, .known = 1},
						       {.dtype = DT_INT64, .ndim = 4, .dims = {1, 1, 1, 1}, .numel = 1, .data = &bad, .nbytes = 8, .known = 1}};
				struct exec_opts o = {.inputs = b, .input_names = names, .n_inputs = 2};
				struct exec *x2 = exec_run(g2, &o, NULL, &e);
				cr_expect_null(x2);
				cr_expect(strstr(e.msg, "index 4 of I is outside the output"), "%s", e.msg);
				exec_free(x2);
				graph_free(g2);
			}
			xfree(xd);
			xfree(iv);
		}
}

/* #52 shape: Tile as copies of runs, DepthToSpace/SpaceToDepth as permuted_copy, OneHot as a fill
 * and one store per index, NonZero counted and written in chunks over the pool: each against its
 * element rule written here, over dtypes of 1, 2, 4 and 8 bytes, odd, empty and unit shapes, at 1
 * and 3 threads. */
static void shape_bytes(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(seed >> 56);
	}
}

Test(exec, tile_matches_its_rule_bit_for_bit)
{
	static const struct {
		int nd;
		int64_t d[4], r[4];
	} cases[] = {
		{4, {8, 6, 5, 7}, {1, 2, 1, 1}}, {4, {3, 5, 7, 9}, {2, 1, 3, 1}}, {4, {2, 3, 4, 5}, {1, 1, 1, 3}},
		{3, {5, 1, 7}, {3, 4, 2}},       {2, {17, 1}, {1, 5}},             {1, {13}, {4}},
		{1, {1}, {1}},                   {2, {3, 4}, {1, 1}},              {3, {2, 0, 3}, {2, 2, 2}},
		{3, {2, 3, 3}, {2, 0, 2}},       {2, {300, 41}, {3, 2}},           {4, {1, 1, 1, 1}, {3, 1, 2, 1}},
		{3, {1, 70, 5}, {1, 1, 3}},      {4, {2, 40, 3, 5}, {1, 2, 3, 4}},
	};
	static const int dts[] = {DT_UINT8, DT_INT16, DT_FLOAT, DT_DOUBLE}; /* (not float16: its NaNs' bits change on input) */
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (size_t t = 0; t < 4; t++)
			for (int th = 1; th <= 3; th += 2) {
				int nd = cases[c].nd, dt = dts[t];
				size_t es = dtype_size(dt);
				int64_t od[4], rd[1] = {nd}, on = 1, xn = 1;
				for (int i = 0; i < nd; i++) {
					od[i] = cases[c].d[i] * cases[c].r[i];
					on *= od[i];
					xn *= cases[c].d[i];
				}
				uint8_t *xd = xmalloc((size_t)xn * es + 1);
				shape_bytes(xd, (size_t)xn * es, c * 7 + t);
				int64_t rep[4];
				memcpy(rep, cases[c].r, sizeof rep);
				struct rtensor ts[2] = {shape_tensor(dt, nd, cases[c].d, xd), shape_tensor(DT_INT64, 1, rd, rep)};
				struct shape_run s;
				shape_run(&s, "{op: Tile, inputs: [x, r], outputs: [y]}", ts, 2, th);
				cr_assert_eq(s.y->numel, on, "case %zu", c);
				int64_t wrong = 0;
				for (int64_t e = 0; e < on; e++) {
					int64_t at = 0, q = e, st = 1;
					for (int i = nd - 1; i >= 0; q /= od[i], st *= cases[c].d[i--])
						at += q % od[i] % cases[c].d[i] * st;
					wrong += memcmp((const uint8_t *)s.y->data + e * es, xd + at * es, es) != 0;
				}
				cr_expect_eq(wrong, 0, "Tile case %zu %s at %d threads: %lld wrong", c, dtype_name(dt), th,
					     (long long)wrong);
				shape_done(&s);
				xfree(xd);
			}
}

Test(exec, depth_space_shuffles_match_their_rule)
{
	static const int64_t shapes[][5] = {/* N C H W block */
					    {2, 8, 3, 5, 2}, {1, 18, 7, 3, 3}, {3, 4, 4, 6, 2}, {1, 1, 1, 1, 1},
					    {2, 32, 9, 11, 4}, {0, 4, 2, 2, 2}, {2, 12, 1, 1, 2}};
	static const int dts[] = {DT_UINT8, DT_INT16, DT_FLOAT, DT_DOUBLE};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (int mode = 0; mode < 3; mode++) /* DCR, CRD, SpaceToDepth */
			for (size_t t = 0; t < 4; t++)
				for (int th = 1; th <= 3; th += 2) {
					int64_t n = shapes[c][0], ch = shapes[c][1], h = shapes[c][2], w = shapes[c][3], b = shapes[c][4];
					int64_t xd4[4] = {n, ch, h, w};
					if (mode == 2) { /* SpaceToDepth's input: the DepthToSpace output's shape */
						xd4[1] = ch / (b * b);
						xd4[2] = h * b;
						xd4[3] = w * b;
					}
					int dt = dts[t];
					size_t es = dtype_size(dt);
					int64_t xn = xd4[0] * xd4[1] * xd4[2] * xd4[3];
					uint8_t *xd = xmalloc((size_t)xn * es + 1);
					shape_bytes(xd, (size_t)xn * es, c * 31 + t * 3 + (uint64_t)mode);
					struct rtensor ts[1] = {shape_tensor(dt, 4, xd4, xd)};
					char node[160];
					snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y], attrs: {blocksize: %lld%s}}",
						 mode == 2 ? "SpaceToDepth" : "DepthToSpace", (long long)b, mode == 1 ? ", mode: CRD" : "");
					struct shape_run s;
					shape_run(&s, node, ts, 1, th);
					cr_assert_eq(s.y->numel, xn, "case %zu", c);
					/* (n, c, h b + i, w b + j) of the deep (n, C, h, w): channel (i b + j) C/b^2 + c in DCR
					 * and SpaceToDepth, c b^2 + i b + j in CRD */
					int64_t cc = ch / (b * b), wrong = 0;
					for (int64_t e = 0; e < xn; e++) {
						int64_t N = e / (cc * h * b * w * b), r = e % (cc * h * b * w * b), C = r / (h * b * w * b);
						int64_t Y = r / (w * b) % (h * b), X = r % (w * b), i = Y % b, j = X % b;
						int64_t deep = ((N * ch + (mode == 1 ? C * b * b + i * b + j : (i * b + j) * cc + C)) * h + Y / b) * w + X / b;
						const uint8_t *shallow = mode == 2 ? xd + e * es : (const uint8_t *)s.y->data + e * es;
						const uint8_t *d = mode == 2 ? (const uint8_t *)s.y->data + deep * es : xd + deep * es;
						wrong += memcmp(shallow, d, es) != 0;
					}
					cr_expect_eq(wrong, 0, "%s case %zu %s at %d threads: %lld wrong", node, c, dtype_name(dt), th,
						     (long long)wrong);
					shape_done(&s);
					xfree(xd);
				}
}

Test(exec, one_hot_matches_its_rule_bit_for_bit)
{
	static const struct {
		int dt;
		uint64_t off, on; /* the values' bits */
	} vals[] = {
		{DT_FLOAT, 0x80000000u, 0x7fc00001u},   /* -0, a NaN */
		{DT_DOUBLE, 0x3fe0000000000000u, 0xfff0000000000000u}, /* 0.5, -inf */
		{DT_INT64, (uint64_t)-3, 7},          {DT_INT32, 0x01010101u, 0}, /* off all one byte */
		{DT_UINT8, 0, 1},                     {DT_FLOAT16, 0x3c00, 0},    /* 1, 0 */
	};
	static const struct {
		int nd, axis;
		int64_t d[2], depth;
	} cases[] = {{2, 0, {5, 7}, 10}, {2, 1, {5, 7}, 3}, {2, -1, {5, 7}, 1}, {1, 0, {1}, 4},
		     {2, -1, {3, 0}, 5}, {1, -1, {3001}, 2000}, {1, 0, {777}, 13}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (size_t v = 0; v < sizeof vals / sizeof *vals; v++)
			for (int th = 1; th <= 3; th += 2) {
				int64_t nx = cases[c].d[0] * (cases[c].nd > 1 ? cases[c].d[1] : 1), depth = cases[c].depth;
				int64_t *ix = xmalloc((size_t)nx * 8 + 8), one = 1, two = 2, vd[2];
				for (int64_t i = 0; i < nx; i++) /* in range, negative, -depth, depth, below -depth, huge */
					ix[i] = (int64_t[]){i % depth, -1 - i % depth, -depth, depth, -depth - 1, INT64_MAX / 3}[i % 6];
				size_t es = dtype_size(vals[v].dt);
				memcpy(&vd[0], &vals[v].off, es); /* (little-endian: the low bytes) */
				memcpy((uint8_t *)vd + es, &vals[v].on, es);
				struct rtensor ts[3] = {shape_tensor(DT_INT64, cases[c].nd, cases[c].d, ix),
							shape_tensor(DT_INT64, 1, &one, &depth), shape_tensor(vals[v].dt, 1, &two, vd)};
				char node[160];
				snprintf(node, sizeof node, "{op: OneHot, inputs: [x, r, v], outputs: [y], attrs: {axis: %d}}",
					 cases[c].axis);
				struct shape_run s;
				shape_run(&s, node, ts, 3, th);
				int ax = cases[c].axis < 0 ? cases[c].axis + cases[c].nd + 1 : cases[c].axis;
				int64_t outer = 1, inner = 1, wrong = 0;
				for (int i = 0; i < cases[c].nd; i++)
					*(i < ax ? &outer : &inner) *= cases[c].d[i];
				cr_assert_eq(s.y->numel, outer * depth * inner, "case %zu", c);
				cr_assert_eq(s.y->dtype, vals[v].dt);
				for (int64_t p = 0; p < outer; p++)
					for (int64_t j = 0; j < depth; j++)
						for (int64_t i = 0; i < inner; i++) {
							int64_t h = ix[p * inner + i], k = h < 0 ? h + depth : h;
							const void *want = k == j ? &vals[v].on : &vals[v].off;
							wrong += memcmp((const uint8_t *)s.y->data + ((p * depth + j) * inner + i) * es, want, es) != 0;
						}
				cr_expect_eq(wrong, 0, "OneHot case %zu %s at %d threads: %lld wrong", c, dtype_name(vals[v].dt), th,
					     (long long)wrong);
				shape_done(&s);
				xfree(ix);
			}
}

Test(exec, nonzero_matches_its_rule)
{
	static const int64_t shapes[][3] = {{3, 1, 40000}, {7, 5, 3}, {1, 1, 1}, {2, 0, 3}, {1, 1, 16384}, {1, 1, 16385}};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_INT16, DT_BOOL, DT_UINT8, DT_FLOAT16};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
			for (int rank = 1; rank <= 3; rank += 2)
				for (int th = 1; th <= 3; th += 2) {
					int dt = dts[t];
					size_t es = dtype_size(dt);
					int64_t n = shapes[c][0] * shapes[c][1] * shapes[c][2], flat[1] = {n};
					uint8_t *xd = xmalloc((size_t)n * es + 1);
					shape_bytes(xd, (size_t)n * es, c * 11 + t);
					/* about half the elements zero; the rest random bits (NaNs, infinities, subnormals),
					 * and -0 among them */
					for (int64_t i = 0; i < n; i++)
						if (xd[i * es] & 1)
							memset(xd + i * es, 0, es);
						else if (!(xd[i * es] & 6) && dtype_is_float(dt))
							memset(xd + i * es, 0, es), xd[i * es + es - 1] = 0x80;
					struct rtensor ts[1] = {rank == 1 ? shape_tensor(dt, 1, flat, xd) : shape_tensor(dt, 3, shapes[c], xd)};
					struct shape_run s;
					shape_run(&s, "{op: NonZero, inputs: [x], outputs: [y]}", ts, 1, th);
					const int64_t *y = s.y->data;
					int64_t nnz = 0, wrong = 0;
					uint8_t *zero = xmalloc((size_t)n + 1);
					for (int64_t i = 0; i < n; i++) {
						if (dt == DT_FLOAT)
							zero[i] = ((const float *)xd)[i] == 0;
						else if (dt == DT_DOUBLE)
							zero[i] = ((const double *)xd)[i] == 0;
						else if (dt == DT_FLOAT16) /* +-0: no bits but the sign's */
							zero[i] = !(((const uint16_t *)xd)[i] & 0x7fff);
						else {
							uint64_t u = 0;
							memcpy(&u, xd + i * es, es);
							zero[i] = !u;
						}
						nnz += !zero[i];
					}
					cr_assert_eq(s.y->ndim, 2);
					cr_assert_eq(s.y->dims[0], rank);
					cr_assert_eq(s.y->dims[1], nnz, "case %zu %s: %lld nonzero, not %lld", c, dtype_name(dt),
						     (long long)nnz, (long long)s.y->dims[1]);
					for (int64_t i = 0, j = 0; i < n; i++) {
						if (zero[i])
							continue;
						if (rank == 1)
							wrong += y[j] != i;
						else
							wrong += y[j] != i / (shapes[c][1] * shapes[c][2]) ||
								 y[nnz + j] != i / shapes[c][2] % shapes[c][1] || y[2 * nnz + j] != i % shapes[c][2];
						j++;
					}
					xfree(zero);
					cr_expect_eq(wrong, 0, "NonZero case %zu %s rank %d at %d threads: %lld wrong", c, dtype_name(dt),
						     rank, th, (long long)wrong);
					shape_done(&s);
					xfree(xd);
				}
}

/* #52 select2: TopK's k best by insertion over keys (runs of 16 checked against the k-th at once)
 * and Unique's hash over keys, in the element's own type: against a stable sort per lane and a
 * grouping written here, over ties, NaN, +-0, infinities, subnormals, int64 past 2^53 (2^53 and
 * 2^53 + 1 are two values), odd lengths, 0 and 1 elements, float32, float64 and int64, k = 1, 5,
 * 10, 63 and the lane's length, largest and sorted 0/1, 1 and 3 threads; bit for bit. */

/* element i of p comes strictly before element j in select.c's ascending order (NaN the largest,
 * -0 = +0), int64 compared as integers */
static int s2_lt(int dt, const void *p, int64_t i, int64_t j)
{
	if (dt == DT_INT64)
		return ((const int64_t *)p)[i] < ((const int64_t *)p)[j];
	return sel_gt(sel_at(dt, p, j), sel_at(dt, p, i));
}

static int s2_eq(int dt, const void *p, int64_t i, int64_t j)
{
	return !s2_lt(dt, p, i, j) && !s2_lt(dt, p, j, i);
}

/* n values of dt: many distinct (pool 0, int64 over the whole range), or drawn from the first pool
 * of a few specials (ties); the int64 specials sit about 2^53 and the type's ends */
static void s2_fill(int dt, void *p, int64_t n, uint64_t seed, int pool)
{
	static const int64_t big[] = {(1ll << 53), (1ll << 53) + 1, -(1ll << 53) - 1, INT64_MAX, INT64_MIN, (1ll << 53) - 1,
				      -(1ll << 53), INT64_MAX - 1, 0, INT64_MIN + 1, 7};
	if (dt != DT_INT64) {
		sel_fill(dt, p, n, seed, pool);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed ^ seed >> 29;
		((int64_t *)p)[i] = pool ? big[(r >> 17) % (uint64_t)pool] : (int64_t)r;
	}
}

/* qsort's context: one lane's values, a stride apart; the order largest first or smallest first,
 * ties by index */
static struct {
	int dt, largest;
	const void *p;
	int64_t base, stride;
} s2_lane;

static int s2_cmp(const void *a, const void *b)
{
	int64_t i = *(const int64_t *)a, j = *(const int64_t *)b, pi = s2_lane.base + i * s2_lane.stride,
		pj = s2_lane.base + j * s2_lane.stride;
	int before = s2_lane.largest ? s2_lt(s2_lane.dt, s2_lane.p, pj, pi) : s2_lt(s2_lane.dt, s2_lane.p, pi, pj);
	int after = s2_lane.largest ? s2_lt(s2_lane.dt, s2_lane.p, pi, pj) : s2_lt(s2_lane.dt, s2_lane.p, pj, pi);
	return before ? -1 : after ? 1 : (i > j) - (i < j);
}

/* a sel_run's graph, run and input copies freed */
static void s2_free(struct exec *x, struct graph *g, void **cp, int n)
{
	exec_free(x);
	graph_free(g);
	for (int k = 0; k < n; k++)
		free(cp[k]);
}

/* the same bits, or both NaN */
static int s2_same(int dt, const void *p, int64_t i, const void *q, int64_t j)
{
	size_t es = dtype_size(dt);
	if (dt != DT_INT64 && isnan(sel_at(dt, p, i)) && isnan(sel_at(dt, q, j)))
		return 1;
	return !memcmp((const char *)p + i * (int64_t)es, (const char *)q + j * (int64_t)es, es);
}

Test(exec, select2_topk_matches_a_stable_sort)
{
	/* (outer, len, inner) about axis 1, k, the pool */
	static const struct { int64_t o, len, in, k; int pool; } cases[] = {
		{1, 2000, 1, 10, 0}, {3, 2000, 1, 5, 11}, {2, 777, 3, 63, 11}, {4, 257, 1, 1, 3}, {2, 63, 2, 63, 11},
		{5, 1, 1, 1, 11},    {2, 0, 3, 0, 11},    {1, 100, 1, 10, 2}, {7, 301, 1, 37, 0}, {3, 50, 5, 10, 5},
		{2, 1001, 1, 1, 1},  {1, 33, 1, 4, 0},
	};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int largest = 0; largest < 2; largest++) {
				int dt = dts[d];
				int64_t O = cases[c].o, len = cases[c].len, In = cases[c].in, k = cases[c].k, n = O * len * In;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)n * 8 + 8);
				s2_fill(dt, xd, n, 77 + c * 3 + (uint64_t)d, cases[c].pool);
				/* the reference: each lane's indices sorted, the first k */
				int64_t *ref = xmalloc((size_t)(O * In * len) * 8 + 8);
				for (int64_t o = 0; o < O; o++)
					for (int64_t i = 0; i < In; i++) {
						int64_t *r = ref + (o * In + i) * len;
						for (int64_t j = 0; j < len; j++)
							r[j] = j;
						s2_lane.dt = dt;
						s2_lane.largest = largest;
						s2_lane.p = xd;
						s2_lane.base = o * len * In + i;
						s2_lane.stride = In;
						qsort(r, (size_t)len, sizeof *r, s2_cmp);
					}
				char ins[240], node[240];
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, {name: k, dtype: int64, shape: [1]}",
					 dtype_name(dt), (long long)O, (long long)len, (long long)In);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {O, len, In}, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1},
						       {.dtype = DT_INT64, .ndim = 1, .dims = {1}, .numel = 1, .data = &k, .nbytes = 8, .known = 1}};
				const char *names[2] = {"x", "k"};
				for (int sorted = 0; sorted < 2; sorted++)
					for (int th = 1; th <= 3; th += 2) {
						snprintf(node, sizeof node,
							 "{op: TopK, inputs: [x, k], outputs: [y, i], attrs: {axis: 1, largest: %d, sorted: %d}}",
							 largest, sorted);
						pool_set_threads(th);
						struct graph *g;
						void *cp[2];
						struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}", t, names, 2, cp);
						const struct rtensor *y = exec_value(x, g->outputs[0]), *iy = exec_value(x, g->outputs[1]);
						cr_assert_eq(y->numel, O * k * In);
						int64_t wrong = 0, first = -1;
						for (int64_t o = 0; o < O; o++)
							for (int64_t j = 0; j < k; j++)
								for (int64_t i = 0; i < In; i++) {
									int64_t at = (o * k + j) * In + i, b = ref[(o * In + i) * len + j];
									int ok = ((const int64_t *)iy->data)[at] == b &&
										 s2_same(dt, y->data, at, xd, (o * len + b) * In + i);
									if (!ok && !wrong++)
										first = at;
								}
						cr_expect_eq(wrong, 0, "TopK case %zu %s largest %d sorted %d, %d threads: %lld wrong, the first #%lld",
							     c, dtype_name(dt), largest, sorted, th, (long long)wrong, (long long)first);
						s2_free(x, g, cp, 2);
					}
				pool_set_threads(1);
				xfree(ref);
				xfree(xd);
			}
}

/* Unique over x (n elements; with an axis, x is (2, n) and its slices along 1 are pairs) with the
 * outputs named in outs (y, i, v, c by position; '' where one is not asked for), against the rule: slices equal where every element is (NaN = NaN, -0 =
 * +0, int64 as integers), ascending (sorted) or by first occurrence */
static void s2_unique(int dt, const void *xd, int64_t n, int sorted, int axis, const char *outs, const char *what)
{
	size_t es = dtype_size(dt);
	int64_t rows = axis ? 2 : 1, numel = rows * n;
	char ins[200], node[240];
	snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%s%lld]}", dtype_name(dt), axis ? "2, " : "", (long long)n);
	snprintf(node, sizeof node, "{op: Unique, inputs: [x], outputs: [%s], attrs: {sorted: %d%s}}", outs, sorted,
		 axis ? ", axis: 1" : "");
	struct rtensor t = {.dtype = dt, .ndim = 1 + axis, .numel = numel, .data = (void *)xd, .nbytes = numel * (int64_t)es, .known = 1};
	t.dims[0] = axis ? 2 : n;
	t.dims[1] = n;
	const char *names[1] = {"x"};
	struct graph *g;
	void *cp[1];
	char outl[200] = "", tok[64];
	snprintf(tok, sizeof tok, "%s", outs);
	for (char *s = strtok(tok, ", "); s; s = strtok(NULL, ", "))
		if (strcmp(s, "''")) /* '': an output not asked for */
			snprintf(outl + strlen(outl), sizeof outl - strlen(outl), "%s{name: %s}", *outl ? ", " : "", s);
	struct exec *x = sel_run(&g, ins, node, outl, &t, names, 1, cp);
	/* slice j's elements are j and n + j (axis) */
	int64_t *first = xmalloc((size_t)n * 8 + 8), *grp = xmalloc((size_t)n * 8 + 8), u = 0;
	int64_t *order = xmalloc((size_t)n * 8 + 8), *rank = xmalloc((size_t)n * 8 + 8);
	for (int64_t j = 0; j < n; j++) {
		int64_t g2 = u - 1;
		for (; g2 >= 0; g2--)
			if (s2_eq(dt, xd, j, first[g2]) && (!axis || s2_eq(dt, xd, n + j, n + first[g2])))
				break;
		if (g2 < 0)
			first[g2 = u++] = j;
		grp[j] = g2;
	}
	for (int64_t r = 0; r < u; r++) {
		int64_t s = r;
		for (; sorted && s > 0; s--) {
			int64_t p = first[order[s - 1]], q = first[r];
			int later = s2_lt(dt, xd, q, p) || (axis && s2_eq(dt, xd, q, p) && s2_lt(dt, xd, n + q, n + p));
			if (!later)
				break;
			order[s] = order[s - 1];
		}
		order[s] = r;
	}
	for (int64_t r = 0; r < u; r++)
		rank[order[r]] = r;
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_assert_eq(y->numel, u * rows, "%s: %lld values, not %lld", what, (long long)y->numel, (long long)(u * rows));
	int64_t wrong = 0;
	for (int k = 1; k < (int)g->n_outputs; k++) {
		const char *nm = g->outputs[k]->name;
		const int64_t *o = exec_value(x, g->outputs[k])->data;
		for (int64_t r = 0; r < u && !strcmp(nm, "i"); r++)
			wrong += o[r] != first[order[r]];
		for (int64_t j = 0; j < n && !strcmp(nm, "v"); j++)
			wrong += o[j] != rank[grp[j]];
		for (int64_t r = 0; r < u && !strcmp(nm, "c"); r++) {
			int64_t cnt = 0;
			for (int64_t q = 0; q < n; q++)
				cnt += grp[q] == order[r];
			wrong += o[r] != cnt;
		}
	}
	for (int64_t r = 0; r < u; r++)
		for (int64_t row = 0; row < rows; row++)
			wrong += !s2_same(dt, y->data, row * u + r, xd, row * n + first[order[r]]);
	cr_expect_eq(wrong, 0, "%s: %lld wrong", what, (long long)wrong);
	s2_free(x, g, cp, 1);
	xfree(first);
	xfree(grp);
	xfree(order);
	xfree(rank);
}

Test(exec, select2_unique_int64_past_2_53)
{
	const int64_t x[3] = {1ll << 53, (1ll << 53) + 1, 1ll << 53};
	s2_unique(DT_INT64, x, 3, 1, 0, "y, i, v, c", "[2^53, 2^53 + 1, 2^53]");
	struct graph *g;
	void *cp[1];
	struct rtensor t = {.dtype = DT_INT64, .ndim = 1, .dims = {3}, .numel = 3, .data = (void *)x, .nbytes = 24, .known = 1};
	const char *names[1] = {"x"};
	struct exec *e = sel_run(&g, "{name: x, dtype: int64, shape: [3]}", "{op: Unique, inputs: [x], outputs: [y, i, v, c]}",
				 "{name: y}, {name: i}, {name: v}, {name: c}", &t, names, 1, cp);
	const struct rtensor *y = exec_value(e, g->outputs[0]), *c = exec_value(e, g->outputs[3]);
	cr_assert_eq(y->numel, 2);
	cr_expect_eq(((const int64_t *)y->data)[0], 1ll << 53);
	cr_expect_eq(((const int64_t *)y->data)[1], (1ll << 53) + 1);
	cr_expect_eq(((const int64_t *)c->data)[0], 2);
	cr_expect_eq(((const int64_t *)c->data)[1], 1);
	s2_free(e, g, cp, 1);
}

Test(exec, select2_unique_matches_its_rule)
{
	/* late: a few new values far in, after runs of the few first ones */
	static const struct { int64_t n; int pool, axis, late; } cases[] = {
		{0, 11, 0, 0},	  {1, 11, 0, 0}, {3, 2, 0, 0}, {1000, 11, 0, 0}, {4097, 3, 0, 0}, {777, 0, 0, 0}, {300, 11, 1, 0},
		{1, 3, 1, 0},	  {0, 3, 1, 0},	 {257, 2, 1, 0}, {3000, 5, 0, 1},  {1500, 1, 0, 1},
	};
	static const char *outs[] = {"y, i, v, c", "y", "y, '', '', c", "y, '', v", "y, i"};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int sorted = 0; sorted < 2; sorted++)
				for (size_t w = 0; w < sizeof outs / sizeof *outs; w++) {
					int64_t n = cases[c].n, numel = (cases[c].axis ? 2 : 1) * n;
					void *xd = xmalloc((size_t)numel * 8 + 8);
					s2_fill(dts[d], xd, numel, 31 + c, cases[c].pool);
					for (int64_t q = 0; cases[c].late && q < 9; q++) /* 9 more groups: past unique_few's 8 */
						s2_fill(dts[d], (char *)xd + (n / 3 + q * n / 15) * (int64_t)dtype_size(dts[d]), 1, 5 + (uint64_t)q, 0);
					char what[160];
					snprintf(what, sizeof what, "Unique case %zu %s sorted %d outputs [%s]", c, dtype_name(dts[d]), sorted, outs[w]);
					s2_unique(dts[d], xd, n, sorted, cases[c].axis, outs[w], what);
					xfree(xd);
				}
}

/* #52 argint: ArgMax and ArgMin over int64 and uint64 compare the integers, not their doubles
 * (2^53 + 1 rounds to 2^53, 2^63 + 1 to 2^63: as doubles, every element below ties) */
Test(exec, argmax_argmin_tell_64_bit_integers_apart)
{
	static const struct {
		const char *op, *dt, *attrs;
		int64_t want;
	} cases[] = {
		{"ArgMax", "int64", "{}", 1},  {"ArgMax", "int64", "{select_last_index: 1}", 2},
		{"ArgMin", "int64", "{}", 0},  {"ArgMin", "int64", "{select_last_index: 1}", 3},
		{"ArgMax", "uint64", "{}", 0}, {"ArgMax", "uint64", "{select_last_index: 1}", 3},
		{"ArgMin", "uint64", "{}", 1}, {"ArgMin", "uint64", "{select_last_index: 1}", 1},
	};
	const int64_t xi[4] = {1ll << 53, (1ll << 53) + 1, (1ll << 53) + 1, 1ll << 53};
	const uint64_t xu[4] = {(1ull << 63) + 1, 1ull << 63, (1ull << 63) + 1, (1ull << 63) + 1};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int u = cases[c].dt[0] == 'u';
		struct rtensor t = {.dtype = u ? DT_UINT64 : DT_INT64, .ndim = 1, .dims = {4}, .numel = 4,
				    .data = u ? (void *)xu : (void *)xi, .nbytes = 32, .known = 1};
		const char *names[1] = {"x"};
		char ins[96], node[160];
		snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [4]}", cases[c].dt);
		snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y], attrs: %s}", cases[c].op, cases[c].attrs);
		struct graph *g;
		void *cp[1];
		struct exec *e = sel_run(&g, ins, node, "{name: y}", &t, names, 1, cp);
		const struct rtensor *y = exec_value(e, g->outputs[0]);
		cr_expect_eq(((const int64_t *)y->data)[0], cases[c].want, "case %zu (%s %s %s): %lld", c, cases[c].op,
			     cases[c].dt, cases[c].attrs, (long long)((const int64_t *)y->data)[0]);
		s2_free(e, g, cp, 1);
	}
}

/* #52 grid: GatherElements' and ScatterElements' row walks (float32/float64 data, int64 and int32
 * indices, each row's indices checked first) against their element rules written here: axis first,
 * middle and last of ranks 1 to 4, indices shorter than the data off the axis, negative ones and
 * duplicates (every reduction: none, add, mul), odd and 0- and 1-element rows, data NaN, +-inf,
 * +-0, subnormals and huge, at 1 and 3 threads, bit for bit (any NaN for a NaN). */
struct gse_case {
	int nd, ax;
	int64_t d[4], i[4];
};

static const struct gse_case gse_cases[] = {
	{1, 0, {7}, {13}},
	{1, 0, {1}, {1}},
	{2, 1, {5, 9}, {4, 17}},
	{2, 0, {6, 3}, {11, 2}},
	{2, 1, {3, 4}, {3, 0}},
	{3, 1, {2, 5, 7}, {2, 9, 5}},
	{3, 2, {64, 3, 37}, {61, 3, 401}},  /* ax last over the pool's pieces */
	{3, 1, {3, 5, 4000}, {3, 7, 3001}}, /* ax middle, units of 7 rows */
	{3, 0, {9, 4, 5000}, {6, 4, 4999}}, /* ax first: one unit a row */
	{4, 2, {2, 3, 4, 5}, {2, 2, 6, 1}},
};

/* moderate values of many exponents (sums that depend on their order), specials now and then */
static void gse_fill(int dt, void *p, int64_t n, uint64_t seed)
{
	static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1e300, -1e300};
	static const float spf[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 3e38f, -3e38f};
	for (int64_t k = 0; k < n; k++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 11;
		double v = ldexp((double)(r & 0xfffff) / 0x1p20 + 0.5, (int)(r >> 20) % 24 - 12) * (r >> 50 & 1 ? -1 : 1);
		int s = k % 41 == 40 ? (int)(r >> 44) % 8 : -1;
		if (dt == DT_DOUBLE)
			((double *)p)[k] = s >= 0 ? sp[s] : v;
		else
			((float *)p)[k] = s >= 0 ? spf[s] : (float)v;
	}
}

static int gse_same(int dt, const void *a, const void *b, int64_t k)
{
	if (dt == DT_DOUBLE) {
		double x = ((const double *)a)[k], y = ((const double *)b)[k];
		return !memcmp(&x, &y, 8) || (isnan(x) && isnan(y));
	}
	float x = ((const float *)a)[k], y = ((const float *)b)[k];
	return !memcmp(&x, &y, 4) || (isnan(x) && isnan(y));
}

/* the data offset of index element k: its coordinates, the axis' one v */
static int64_t gse_at(const struct gse_case *c, int64_t k, int64_t v)
{
	int64_t at = 0, st = 1;
	for (int i = c->nd - 1; i >= 0; i--) {
		at += (i == c->ax ? v : k % c->i[i]) * st;
		k /= c->i[i];
		st *= c->d[i];
	}
	return at;
}

Test(exec, gather_scatter_elements_rows_match_their_rules)
{
	static const char *const reds[] = {"none", "add", "mul"};
	for (size_t ci = 0; ci < sizeof gse_cases / sizeof *gse_cases; ci++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int i32 = 0; i32 < 2; i32++)
				for (int th = 1; th <= 3; th += 2) {
					const struct gse_case *c = &gse_cases[ci];
					int dt = f64 ? DT_DOUBLE : DT_FLOAT, idt = i32 ? DT_INT32 : DT_INT64;
					size_t es = dtype_size(dt);
					int64_t nd = 1, ni = 1, len = c->d[c->ax];
					for (int i = 0; i < c->nd; i++)
						nd *= c->d[i], ni *= c->i[i];
					void *dd = xmalloc((size_t)nd * es + 8), *ud = xmalloc((size_t)ni * es + 8),
					     *id = xmalloc((size_t)ni * 8 + 8), *want = xmalloc((size_t)(nd > ni ? nd : ni) * es + 8);
					int64_t *vs = xmalloc((size_t)ni * 8 + 8);
					cf_fill(dt, dd, nd, 3 + ci);
					gse_fill(dt, ud, ni, 7 + ci);
					uint64_t seed = 11 + ci;
					for (int64_t k = 0; k < ni; k++) { /* few distinct ones (duplicates), half negative */
						seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
						int64_t v = (int64_t)(seed >> 33) % (len < 5 ? len : 5);
						vs[k] = seed >> 62 & 1 ? v - len : v;
						if (i32)
							((int32_t *)id)[k] = (int32_t)vs[k];
						else
							((int64_t *)id)[k] = vs[k];
					}
					char node[256];
					struct rtensor ts[3] = {shape_tensor(dt, c->nd, c->d, dd), shape_tensor(idt, c->nd, c->i, id),
								shape_tensor(dt, c->nd, c->i, ud)};
					/* GatherElements */
					snprintf(node, sizeof node, "{op: GatherElements, inputs: [x, r], outputs: [y], attrs: {axis: %d}}",
						 c->ax - (ci % 2 ? c->nd : 0));
					struct shape_run s;
					shape_run(&s, node, ts, 2, th);
					int64_t wrong = 0, first = -1;
					for (int64_t k = 0; k < ni; k++) {
						int64_t at = gse_at(c, k, vs[k] < 0 ? vs[k] + len : vs[k]);
						memcpy((char *)want + k * es, (char *)dd + at * es, es);
						if (!gse_same(dt, want, s.y->data, k) && !wrong++)
							first = k;
					}
					cr_expect_eq(wrong, 0, "GatherElements case %zu %s %s, %d threads: %lld wrong, the first #%lld", ci,
						     dtype_name(dt), dtype_name(idt), th, (long long)wrong, (long long)first);
					shape_done(&s);
					/* ScatterElements, each reduction, on a copy of the data (the run may write it in place) */
					for (int red = 0; red < 3; red++) {
						void *dc = xmalloc((size_t)nd * es + 8);
						memcpy(dc, dd, (size_t)nd * es);
						ts[0].data = dc;
						memcpy(want, dd, (size_t)nd * es);
						for (int64_t k = 0; k < ni; k++) {
							int64_t at = gse_at(c, k, vs[k] < 0 ? vs[k] + len : vs[k]);
							if (f64) {
								double *o = (double *)want + at, u = ((const double *)ud)[k];
								*o = red == 1 ? *o + u : red == 2 ? *o * u : u;
							} else {
								float *o = (float *)want + at, u = ((const float *)ud)[k];
								*o = red == 1 ? (float)((double)*o + u) : red == 2 ? (float)((double)*o * u) : u;
							}
						}
						snprintf(node, sizeof node,
							 "{op: ScatterElements, inputs: [x, r, v], outputs: [y], attrs: {axis: %d, reduction: %s}}",
							 c->ax - (ci % 2 ? 0 : c->nd), reds[red]);
						shape_run(&s, node, ts, 3, th);
						wrong = 0, first = -1;
						for (int64_t k = 0; k < nd; k++)
							if (!gse_same(dt, want, s.y->data, k) && !wrong++)
								first = k;
						cr_expect_eq(wrong, 0, "ScatterElements %s case %zu %s %s, %d threads: %lld wrong, the first #%lld",
							     reds[red], ci, dtype_name(dt), dtype_name(idt), th, (long long)wrong, (long long)first);
						shape_done(&s);
						ts[0].data = dd;
						xfree(dc);
					}
					xfree(dd);
					xfree(ud);
					xfree(id);
					xfree(want);
					xfree(vs);
				}
}

/* the graph text run on inputs x, r, v (ts) at th threads: refused, the message holding msg */
static void gse_refused(const char *text, struct rtensor *ts, int th, const char *msg)
{
	static const char *names[3] = {"x", "r", "v"};
	struct graph *g = load_text("gse.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = 3};
	pool_set_threads(th);
	struct exec *x = exec_run(g, &o, NULL, &e);
	pool_set_threads(1);
	cr_expect_null(x, "ran: %s", text);
	cr_expect(strstr(e.msg, msg), "%s: %s", text, e.msg);
	exec_free(x);
	graph_free(g);
}

/* an index out of range, and (ScatterElements) indices longer than the data off the axis: errors
 * naming them, no write past the data */
Test(exec, gather_scatter_elements_refuse_bad_indices)
{
	static const char *const nodes[] = {
		"{op: GatherElements, inputs: [x, r], outputs: [y], attrs: {axis: 1}}",
		"{op: ScatterElements, inputs: [x, r, v], outputs: [y], attrs: {axis: 1, reduction: add}}",
	};
	static const char *const msgs[] = {"index 3 is out of range for a dimension of 3", "index out of range"};
	char text[1024];
	for (int op = 0; op < 2; op++)
		for (int f64 = 0; f64 < 3; f64++) { /* float32, float64, int64 data */
			int dt = f64 == 2 ? DT_INT64 : f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t dims[2] = {2, 3}, idims[2] = {2, 40}, ix[80] = {0}, xd[6] = {0}, ud[80] = {0};
			ix[77] = 3, ix[78] = INT64_MAX, ix[79] = INT64_MIN;
			struct rtensor ts[3] = {shape_tensor(dt, 2, dims, xd), shape_tensor(DT_INT64, 2, idims, ix),
						shape_tensor(dt, 2, idims, ud)};
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [2, 3]}, {name: r, dtype: int64, "
				 "shape: [2, 40]}, {name: v, dtype: %s, shape: [2, 40]}]\nnodes:\n  - %s\noutputs: [{name: y}]\n",
				 dtype_name(dt), dtype_name(dt), nodes[op]);
			for (int th = 1; th <= 3; th += 2)
				gse_refused(text, ts, th, msgs[op]);
		}
	/* ScatterElements' indices 3 rows deep into a 2-row data: refused (they wrote past its end) */
	int64_t dims[2] = {2, 3}, idims[2] = {3, 3}, ix[9] = {0};
	float xd[6] = {0}, ud[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	struct rtensor ts[3] = {shape_tensor(DT_FLOAT, 2, dims, xd), shape_tensor(DT_INT64, 2, idims, ix),
				shape_tensor(DT_FLOAT, 2, idims, ud)};
	gse_refused("graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [2, 3]}, {name: r, dtype: int64, "
		    "shape: [3, 3]}, {name: v, dtype: float32, shape: [3, 3]}]\nnodes:\n  - {op: ScatterElements, inputs: "
		    "[x, r, v], outputs: [y], attrs: {axis: 1}}\noutputs: [{name: y}]\n",
		    ts, 1, "indices' dimension 0 (3) exceeds the data's (2)");
}

/* GridSample's gradient indexes X turned channels-last (GatherND, ScatterND over (N, P K) slices of
 * C) rather than through GatherElements and ScatterElements over (N, C, P K), which needed the
 * taps' indices copied once per channel; its gradients the same bits at 1 and 3 threads. */
Test(exec, grid_sample_gradient_copies_no_index_per_channel)
{
	struct graph *g = load_text("gsgrad.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: []\nparams:\n"
				    "  - {name: x, dtype: float32, shape: [2, 16, 5, 6], init: {dist: normal, seed: 1}}\n"
				    "  - {name: g, dtype: float32, shape: [2, 4, 7, 2], init: {dist: normal, seed: 2}}\n"
				    "nodes:\n  - {op: GridSample, inputs: [x, g], outputs: [y]}\n"
				    "  - {op: Mul, inputs: [y, y], outputs: [yy]}\n"
				    "  - {op: ReduceSum, inputs: [yy], outputs: [loss], attrs: {keepdims: 0}}\n"
				    "outputs: [{name: loss}]\n");
	const char *params[] = {"x", "g"};
	struct autodiff_opts ao = {.params = params, .n_params = 2};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	void *grads[2][2] = {{NULL}};
	for (int th = 1; th <= 3; th += 2) {
		struct exec_profile prof;
		memset(&prof, 0, sizeof prof);
		struct exec_opts o = {.profile = &prof};
		pool_set_threads(th);
		struct exec *x = exec_run(g, &o, NULL, &e);
		pool_set_threads(1);
		cr_assert(x, "%s", e.msg);
		cr_expect_eq(prof.calls[op_lookup("", "GatherElements")] + prof.calls[op_lookup("", "ScatterElements")], 0);
		cr_expect_eq(prof.calls[op_lookup("", "GatherND")], 1);
		cr_expect_eq(prof.calls[op_lookup("", "ScatterND")], 1);
		for (uint32_t i = 0, k = 0; i < g->n_outputs; i++) {
			if (strcmp(g->outputs[i]->name, "x_grad") && strcmp(g->outputs[i]->name, "g_grad"))
				continue;
			const struct rtensor *t = exec_value(x, g->outputs[i]);
			cr_assert(k < 2);
			grads[th / 2][k] = xmalloc(t->nbytes + 1);
			memcpy(grads[th / 2][k], t->data, t->nbytes);
			if (th == 3)
				cr_expect_eq(memcmp(grads[0][k], grads[1][k], t->nbytes), 0, "%s: other bits at 3 threads",
					     g->outputs[i]->name);
			k++;
		}
		exec_free(x);
	}
	for (int i = 0; i < 4; i++)
		xfree(grads[i / 2][i % 2]);
	graph_free(g);
}

/* #52 scatter max/min: ScatterElements and ScatterND with reduction max and min (opset 18), with
 * repeated indices and a NaN on either side (NumPy's maximum and minimum: the NaN wins) */
Test(exec, scatters_reduce_with_max_and_min)
{
	const double data[5] = {1, 5, -2, NAN, 0}, upd[6] = {3, 2, -7, 4, 1, NAN};
	const int64_t idx[6] = {0, 0, 2, 1, 3, 4};
	const double want_max[5] = {3, 5, -2, NAN, NAN}, want_min[5] = {1, 4, -7, NAN, NAN};
	for (int dbl = 0; dbl < 2; dbl++)
		for (int nd = 0; nd < 2; nd++)
			for (int mx = 0; mx < 2; mx++) {
				const char *dt = dbl ? "float64" : "float32";
				float df[5], uf[6];
				for (int i = 0; i < 6; i++) {
					uf[i] = (float)upd[i];
					if (i < 5)
						df[i] = (float)data[i];
				}
				struct rtensor t[3] = {
					{.dtype = dbl ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {5}, .numel = 5,
					 .data = dbl ? (void *)data : (void *)df, .nbytes = dbl ? 40 : 20, .known = 1},
					{.dtype = DT_INT64, .ndim = nd ? 2 : 1, .dims = {6, 1}, .numel = 6, .data = (void *)idx,
					 .nbytes = 48, .known = 1},
					{.dtype = dbl ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {6}, .numel = 6,
					 .data = dbl ? (void *)upd : (void *)uf, .nbytes = dbl ? 48 : 24, .known = 1}};
				const char *names[3] = {"d", "i", "u"};
				char ins[256], node[160];
				snprintf(ins, sizeof ins,
					 "{name: d, dtype: %s, shape: [5]}, {name: i, dtype: int64, shape: [%s]}, "
					 "{name: u, dtype: %s, shape: [6]}",
					 dt, nd ? "6, 1" : "6", dt);
				snprintf(node, sizeof node, "{op: %s, inputs: [d, i, u], outputs: [y], attrs: {reduction: %s}}",
					 nd ? "ScatterND" : "ScatterElements", mx ? "max" : "min");
				struct graph *g;
				void *cp[3];
				struct exec *e = sel_run(&g, ins, node, "{name: y}", t, names, 3, cp);
				const struct rtensor *y = exec_value(e, g->outputs[0]);
				for (int k = 0; k < 5; k++) {
					double got = dbl ? ((const double *)y->data)[k] : ((const float *)y->data)[k];
					double want = mx ? want_max[k] : want_min[k];
					cr_expect(isnan(want) ? isnan(got) : got == want, "%s %s %s element %d: %g, not %g",
						  nd ? "ScatterND" : "ScatterElements", mx ? "max" : "min", dt, k, got, want);
				}
				s2_free(e, g, cp, 3);
			}
}

/* nzsce: NonZero's last coordinates stored straight into the output (each chunk cut after its
 * last nonzero element), and SoftmaxCrossEntropyLoss's one-output path picking each row's
 * log-probability without writing the rows'. NonZero against its C-order walk, at 1 and 3
 * threads, over chunks (2^14 elements) that end in zeros, are all zeros or hold one element; the
 * loss against the two-output path's bits (whose log-probabilities are softmax_last's, unchanged)
 * and within 1e-6 of a double reference (relative to the terms p - max - log sum), at 1 and 3 threads. */

/* shape_run over copies of ts (a run may reuse its inputs) */
static void nzsce_run(struct shape_run *s, const char *node, const struct rtensor *ts, int n, int th, void **cp)
{
	struct rtensor c[3];
	for (int k = 0; k < n; k++) {
		c[k] = ts[k];
		cp[k] = xmalloc((size_t)ts[k].nbytes + 1);
		memcpy(cp[k], ts[k].data, (size_t)ts[k].nbytes);
		c[k].data = cp[k];
	}
	shape_run(s, node, c, n, th);
}

Test(exec, nzsce_nonzero_matches_its_walk)
{
	static const struct {
		int nd;
		int64_t dims[3];
		int pattern; /* 0 random half, 1 sparse, 2 each chunk's tail zeros, 3 all zeros, 4 last element */
	} cases[] = {
		{1, {1}, 4},	       {1, {7}, 0},	     {1, {40000}, 2},	  {2, {1024, 1024}, 0}, {2, {1000, 37}, 2},
		{2, {333, 101}, 1},    {3, {5, 129, 61}, 2}, {3, {3, 4, 20000}, 1}, {2, {300, 200}, 3},  {2, {257, 255}, 4},
		{3, {1, 1, 16385}, 2}, {2, {16384, 3}, 0},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		int64_t numel = 1;
		for (int d = 0; d < cases[ci].nd; d++)
			numel *= cases[ci].dims[d];
		for (int dt = 0; dt < 2; dt++) { /* bool, float32 (-0 is zero, NaN is not) */
			uint8_t *b = xmalloc((size_t)numel + 1);
			float *f = xmalloc((size_t)numel * sizeof *f + 1);
			uint32_t s = 12345u + (uint32_t)ci;
			int64_t nnz = 0;
			for (int64_t i = 0; i < numel; i++) {
				s = s * 1664525u + 1013904223u;
				int64_t ic = i % (1 << 14);
				int on = cases[ci].pattern == 0 ? s >> 31 :
					 cases[ci].pattern == 1 ? (s >> 24) < 3 :
					 cases[ci].pattern == 2 ? ic < 1000 && (s >> 30) :
					 cases[ci].pattern == 3 ? 0 : i == numel - 1;
				b[i] = (uint8_t)on;
				f[i] = on ? ((s >> 8) & 1 ? NAN : -1.5f) : ((s >> 9) & 1 ? -0.0f : 0.0f);
				nnz += on;
			}
			/* the reference: the C-order walk's coordinates, row d of (rank, nnz) */
			int64_t *ref = xmalloc((size_t)(cases[ci].nd * nnz) * sizeof *ref + 1);
			for (int64_t i = 0, k = 0; i < numel; i++) {
				if (!b[i])
					continue;
				for (int d = 0; d < cases[ci].nd; d++) {
					int64_t st = 1;
					for (int e = d + 1; e < cases[ci].nd; e++)
						st *= cases[ci].dims[e];
					ref[d * nnz + k] = i / st % cases[ci].dims[d];
				}
				k++;
			}
			struct rtensor t = shape_tensor(dt ? DT_FLOAT : DT_BOOL, cases[ci].nd, cases[ci].dims,
							dt ? (void *)f : (void *)b);
			for (int th = 1; th <= 3; th += 2) {
				struct shape_run r;
				void *cp[1];
				nzsce_run(&r, "{op: NonZero, inputs: [x], outputs: [y]}", &t, 1, th, cp);
				cr_assert(r.y->ndim == 2 && r.y->dims[0] == cases[ci].nd && r.y->dims[1] == nnz,
					  "NonZero case %zu: shape", ci);
				const int64_t *y = r.y->data;
				int64_t wrong = 0, first = -1;
				for (int64_t k = 0; k < cases[ci].nd * nnz; k++)
					if (y[k] != ref[k] && !wrong++)
						first = k;
				cr_expect_eq(wrong, 0, "NonZero case %zu %s, %d threads: %lld wrong, the first #%lld", ci,
					     dt ? "float32" : "bool", th, (long long)wrong, (long long)first);
				shape_done(&r);
				xfree(cp[0]);
			}
			xfree(ref);
			xfree(f);
			xfree(b);
		}
	}
}

Test(exec, nzsce_softmax_cross_entropy_picks_the_log_softmax_bits)
{
	static const struct {
		int64_t nb, c;
		const char *red;
	} cases[] = {
		{1, 1, "none"}, {3, 7, "none"}, {5, 33, "mean"}, {17, 2001, "none"}, {1100, 1000, "none"}, {64, 513, "sum"},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		int64_t nb = cases[ci].nb, c = cases[ci].c, dims[2] = {nb, c};
		float *sc = xmalloc((size_t)(nb * c) * sizeof *sc + 1);
		int64_t *lab = xmalloc((size_t)nb * sizeof *lab + 1);
		uint32_t s = 777u + (uint32_t)ci;
		for (int64_t i = 0; i < nb * c; i++) {
			s = s * 1664525u + 1013904223u;
			float v = (float)((double)(s >> 8) / (1 << 24) * 20 - 10);
			int64_t row = i / c;
			/* rows of huge values, of -inf but one, of equal values, of subnormals */
			sc[i] = row % 9 == 1 ? v * 1e7f : row % 9 == 2 ? (i % c == c / 2 ? 1.0f : -INFINITY) :
				row % 9 == 3 ? 2.5f : row % 9 == 4 ? v * 1e-39f : v;
		}
		for (int64_t i = 0; i < nb; i++) {
			s = s * 1664525u + 1013904223u;
			lab[i] = i % 7 == 5 ? -100 : (int64_t)(s >> 8) % c; /* -100: ignore_index */
		}
		char node[2][256];
		for (int k = 0; k < 2; k++)
			snprintf(node[k], sizeof node[k],
				 "{op: SoftmaxCrossEntropyLoss, inputs: [x, r], outputs: [y%s], attrs: {reduction: %s, "
				 "ignore_index: -100}}",
				 k ? ", lp" : "", cases[ci].red);
		struct rtensor ts[2] = {shape_tensor(DT_FLOAT, 2, dims, sc), shape_tensor(DT_INT64, 1, dims, lab)};
		/* the reference: each row's log-softmax at its label in double; the float one rounds
		 * p - m - log z, so its error scales with those terms (sc) */
		double total = 0, cnt = 0, scale = 0, *ref = xmalloc((size_t)nb * sizeof *ref + 1);
		double *sc_of = xmalloc((size_t)nb * sizeof *sc_of + 1);
		for (int64_t i = 0; i < nb; i++) {
			const float *p = sc + i * c;
			double m = -INFINITY, z = 0;
			for (int64_t j = 0; j < c; j++)
				m = p[j] > m ? p[j] : m;
			for (int64_t j = 0; j < c; j++)
				z += exp((double)p[j] - m);
			ref[i] = lab[i] == -100 ? 0 : -((double)p[lab[i]] - m - log(z));
			sc_of[i] = lab[i] == -100 ? 0 : fabs(p[lab[i]]) + fabs(m) + fabs(log(z));
			total += ref[i];
			scale += sc_of[i];
			cnt += lab[i] != -100;
		}
		int none = !strcmp(cases[ci].red, "none");
		int64_t ny = none ? nb : 1;
		if (!none) {
			ref[0] = cases[ci].red[0] == 'm' ? total / cnt : total;
			sc_of[0] = cases[ci].red[0] == 'm' ? scale / cnt : scale;
		}
		float *bits[2][2] = {{NULL}};
		for (int th = 1; th <= 3; th += 2)
			for (int k = 0; k < 2; k++) {
				struct shape_run r;
				void *cp[2];
				nzsce_run(&r, node[k], ts, 2, th, cp);
				cr_assert(r.y->numel == ny && r.y->dtype == DT_FLOAT, "case %zu: shape", ci);
				bits[th / 2][k] = xmalloc((size_t)ny * sizeof(float) + 1);
				memcpy(bits[th / 2][k], r.y->data, (size_t)ny * sizeof(float));
				shape_done(&r);
				xfree(cp[0]);
				xfree(cp[1]);
			}
		int64_t far = 0, other = 0;
		for (int64_t i = 0; i < ny; i++) {
			double y = bits[0][0][i];
			far += !(y == ref[i] || fabs(y - ref[i]) <= 1e-6 * sc_of[i] + 1e-6); /* +inf: a label at -inf */
		}
		for (int k = 0; k < 2; k++)
			for (int th = 0; th < 2; th++)
				other += memcmp(bits[th][k], bits[0][0], (size_t)ny * sizeof(float)) != 0;
		cr_expect_eq(far, 0, "SoftmaxCrossEntropyLoss case %zu: %lld outside 1e-6 of the reference", ci,
			     (long long)far);
		cr_expect_eq(other, 0, "SoftmaxCrossEntropyLoss case %zu: the one-output path, the two-output one and 3 "
				       "threads give other bits (%lld)", ci, (long long)other);
		for (int k = 0; k < 4; k++)
			xfree(bits[k / 2][k % 2]);
		xfree(sc_of);
		xfree(ref);
		xfree(lab);
		xfree(sc);
	}
}

/* #52e adampool: MaxPool's separable float32 path (pool.c's max_planes_sep_f32: the rows'
 * horizontal maxima, then their vertical max; planes with a NaN made again by the window walk)
 * against the window walk (rf_max, on the planes widened to double: each max is one of their elements,
 * its float bits kept); bit for bit, at 1 and 3 threads. */

Test(exec, adampool_max_pool_separable_matches_the_window_walk)
{
	static const int64_t cases[][10] = {
		/* h, w, kh, kw, sh, sw, dh, dw, pt/pb, pl/pr (ceil_mode: case 9) */
		{48, 48, 3, 3, 2, 2, 1, 1, 1, 1}, {9, 41, 3, 3, 2, 2, 1, 1, 1, 1}, {7, 37, 3, 3, 1, 1, 1, 1, 1, 1},
		{5, 17, 2, 2, 2, 2, 1, 1, 0, 0},  {4, 600, 3, 3, 2, 2, 1, 1, 1, 1}, {3, 530, 2, 2, 1, 1, 1, 1, 0, 0},
		{6, 33, 3, 5, 2, 2, 1, 1, 0, 2},  {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},   {11, 29, 3, 3, 2, 2, 2, 3, 2, 2},
		{8, 31, 3, 3, 2, 2, 1, 1, 1, 1},  {2, 2100, 3, 3, 2, 2, 1, 1, 1, 1}, {13, 16, 4, 4, 2, 2, 1, 1, 3, 3},
		{200, 70, 3, 3, 2, 2, 1, 1, 1, 1}};
	enum { NC = 6 };
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		const int64_t *cs = cases[c];
		int64_t h = cs[0], w = cs[1], sp = h * w, k[2] = {cs[2], cs[3]}, st[2] = {cs[4], cs[5]};
		int64_t d[2] = {cs[6], cs[7]}, pad[2] = {cs[8], cs[9]}, dims[4] = {2, NC / 2, h, w};
		int ceil = c == 9;
		float *v = xmalloc((size_t)(NC * sp) * sizeof *v);
		double *vd = xmalloc((size_t)(NC * sp) * sizeof *vd);
		uint32_t seed = (uint32_t)c * 29 + 5;
		/* planes 0 and 3 keep rf_value's NaNs (the walk's fallback); the others have none: their
		 * NaNs become zeros of both signs, beside its rows of zeros, of -inf and of ties */
		for (int64_t i = 0; i < NC * sp; i++) {
			v[i] = (float)rf_value(&seed, i, w);
			if (v[i] != v[i] && (i / sp) % 3)
				v[i] = i & 1 ? 0.0f : -0.0f;
		}
		if (c == 1) /* a plane with one NaN alone, in its last element */
			v[2 * sp - 1] = NAN;
		for (int64_t i = 0; i < NC * sp; i++)
			vd[i] = v[i];
		char node[400];
		snprintf(node, sizeof node,
			 "{op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
			 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d}}",
			 (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)d[0], (long long)d[1],
			 (long long)pad[0], (long long)pad[1], (long long)pad[0], (long long)pad[1], ceil);
		void *bits[2] = {NULL, NULL};
		for (int th = 0; th < 2; th++) {
			pool_set_threads(th ? 3 : 1);
			struct graph *g;
			const struct rtensor *y;
			float *cp = xmalloc((size_t)(NC * sp) * sizeof *cp);
			memcpy(cp, v, (size_t)(NC * sp) * sizeof *cp);
			struct exec *x = rf_run(node, "", 0, 4, dims, cp, &g, &y);
			int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
			for (int64_t nc = 0; nc < NC; nc++)
				for (int64_t oy = 0; oy < oh; oy++)
					for (int64_t ox = 0; ox < ow; ox++) {
						int64_t o = (nc * oh + oy) * ow + ox;
						float r = (float)rf_max(vd + nc * sp, h, w, k, st, d, pad, oy, ox, NULL);
						if (memcmp(&r, (const float *)y->data + o, 4) && !wrong++)
							first = o;
					}
			cr_expect_eq(wrong, 0, "case %zu at %d threads: %lld of %lld outputs differ, the first %lld", c,
				     th ? 3 : 1, (long long)wrong, (long long)y->numel, (long long)first);
			bits[th] = xmalloc(y->nbytes + 1);
			memcpy(bits[th], y->data, y->nbytes);
			if (th)
				cr_expect(!memcmp(bits[0], bits[1], y->nbytes), "case %zu: 1 and 3 threads differ", c);
			exec_free(x);
			graph_free(g);
			xfree(cp);
		}
		xfree(bits[0]);
		xfree(bits[1]);
		xfree(v);
		xfree(vd);
		pool_set_threads(1);
	}
}

/* #52e adampool: DietAdam's factored update in float32 first (diet.c's fac16f: q + s floor(U - s f)
 * or q + nearbyint(-f), kept where every f within 2^-20 gives one value) against the divisions
 * written here (diet.h's formulas in float64, float32 moments), nearest and stochastic, at 1 and 3
 * threads. With eps 1 and g under 2^-40, r = c = mean(c) = 1 exactly and f = g lr / scale = 3 g 2^58
 * (scale 2^-7, lr 3 2^51; A = 3 2^58 keeps the float32 path on, and its float32 product with g
 * rounds: f's error is real), so f is set lane by lane: on U (or
 * U - 1) and 2^-30, 2^-21, 2^-19 either side of it, on +-1/2 (nearest's ties) and 2^-24, 2^-21 inside
 * them, past 1/2 (to fac8), 0 and -0, and plain values of (-1/2, 1/2); q of all signs, 0 and the
 * clamps (+-32767, -32768). A second case takes ordinary g (moments of their own, eps 1e-10). U
 * comes from a first run's key. */
static void adampool_moments(const float *g, int R, int C, double eps, double *rr, double *cc, double *cmean)
{
	*cmean = 0;
	for (int pass = 0; pass < 2; pass++) /* rows, then columns: each mean square as the moment's float32 */
		for (int a = 0; a < (pass ? C : R); a++) {
			double s = 0;
			for (int b = 0; b < (pass ? R : C); b++) {
				double v = g[pass ? b * C + a : a * C + b];
				s += v * v;
			}
			double m = sqrt((double)(float)(0.02 * s / (pass ? R : C)) / 0.02) + eps; /* beta2 0.98, t 1 */
			if (pass)
				*cmean += cc[a] = m;
			else
				rr[a] = m;
		}
	*cmean /= C;
}

Test(exec, adampool_diet_adam_float32_update_matches_the_divisions)
{
	enum { RM = 6, CM = 1043 };
	static const int shapes[3][2] = {{RM, CM}, {3, 50}, {2, 7}};
	static int16_t q[RM * CM], got[2][RM * CM];
	static float g[RM * CM];
	static double rr[RM], cc[CM];
	static const int16_t qs[] = {0, 1, -1, 32767, -32767, -32768, 32766, 12345, -20000, 2};
	for (int cs = 0; cs < 2; cs++)
		for (int sh = 0; sh < 3; sh++)
			for (int st = 0; st < 2; st++) {
				int R = shapes[sh][0], C = shapes[sh][1], n = R * C;
				double lr = cs ? 1e-4 : 0x3p51, scale = cs ? 10.0 / 32767 : 0x1p-7, eps = cs ? 1e-10 : 1;
				struct graph *gr = diet_graph(R, C, eps, lr, scale, st);
				uint64_t key = 0;
				uint32_t seed = (uint32_t)(cs * 6 + sh * 2 + st + 1);
				for (int k = 0; k < n; k++) {
					seed = seed * 1664525u + 1013904223u;
					q[k] = k % 5 ? (int16_t)((int)(seed >> 16) - 32768) : qs[(k / 5) % 10];
					g[k] = cs ? (float)(((double)(seed >> 8) / 16777216.0 - 0.5) * 2.0) : 0;
				}
				for (int pass = 0; pass < 2; pass++) {
					for (int k = 0; !cs && k < n; k++) { /* f = 3 g 2^58, by the 16-lane vectors of a row */
						double u = pass && st ? philox_uniform(key, (uint64_t)k) : 0.3;
						int c = k % C % 16, vt = k % C / 16 % 5;
						if (vt == 3)
							q[k] = qs[c % 10];
						double s = q[k] < 0 || (q[k] == 0 && k % 2) ? -1 : 1, f, b = u < 0.5 ? u : u - 1;
						static const double near[] = {0, 0x1p-30, -0x1p-30, 0x1p-21, -0x1p-21, 0x1p-19, -0x1p-19};
						if (vt == 1 || vt == 3) /* 2^-19 and more from a boundary: settled */
							f = st ? s * (b + (c % 2 ? 1 : -1) * 0x1p-19 * (1 + c / 8.0))
							       : (c % 2 ? 1 : -1) * (0.5 - 0x1p-19 * (1 + c / 8.0));
						else if (vt == 2 && c < 7) /* on a boundary or within 2^-19 of it */
							f = st ? s * (b + near[c]) : (c % 2 ? -1 : 1) * (0.5 - (c < 2 ? 0 : c < 4 ? 0x1p-24 : 0x1p-21));
						else if (vt == 4 && c == 7) /* past 1/2: fac8 */
							f = k % 2 ? 0.5 + 0x1p-23 : -0.75;
						else if (c == 8)
							f = k % 2 ? 0.0 : -0.0;
						else
							f = ((double)(k * 7919 % 1999) / 1999 - 0.5) * 0.999;
						g[k] = (float)(f / 0x3p58);
					}
					if (cs) /* edges among ordinary g (a NaN or an infinity would turn the fast path off) */
						for (int k = 0; k < n; k += 89) {
							static const float edges[] = {1e-41f, -0.0f, 0.0f, 3e-5f, -40.0f};
							g[k] = edges[(k / 89) % 5];
						}
					for (int th = 0; th < 2; th++)
						diet_run(gr, q, g, R, C, th ? 3 : 1, got[th], &key);
					if (cs || !st || pass) /* the stochastic lanes on U need the key */
						break;
				}
				double cmean;
				adampool_moments(g, R, C, eps, rr, cc, &cmean);
				cr_assert(cs || (rr[0] == 1 && cc[0] == 1 && cmean == 1), "r = c = 1 exactly");
				int64_t bad = 0;
				for (int k = 0; k < n; k++) {
					double denom = rr[k / C] * cc[k % C] / cmean;
					int16_t want = ref_quantize(q[k] * scale - lr * (double)g[k] / denom, scale,
								   st ? philox_uniform(key, (uint64_t)k) : -1);
					if (got[0][k] != want && bad++ < 5)
						cr_expect(0, "case %d, %dx%d, %s: q'[%d] %d, not %d (q %d, g %a)", cs, R, C,
							  st ? "stochastic" : "nearest", k, got[0][k], want, q[k], (double)g[k]);
				}
				cr_expect_eq(bad, 0, "case %d, %dx%d, %s: %lld differ", cs, R, C, st ? "stochastic" : "nearest",
					     (long long)bad);
				cr_expect(!memcmp(got[0], got[1], sizeof(int16_t) * (size_t)n), "case %d, %dx%d: 1 and 3 threads differ",
					  cs, R, C);
				graph_free(gr);
			}
}
