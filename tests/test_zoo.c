/* test_zoo.c - models built from stock PyTorch modules train out of the box.
 *
 * The zoo (testdata/gen_zoo.py: torchvision CNNs, a ViT, nn.TransformerEncoderLayer GPTs,
 * nn.Transformer, nn.LSTM, nn.GRU, a GroupNorm U-Net; random init, dropout on) is generated into the
 * build tree by the zoo_gen fixture (tests/CMakeLists.txt). For every model, through the CLI as a
 * user would run it:
 *  - train -> run: the loss and every parameter's gradient within 1e-4 of PyTorch's (per tensor:
 *    max |diff| / max(max |ref|, 1e-2 x the largest gradient)), and no gradient missing;
 *  - onnxruntime runs the training graph and gets graphdiet's outputs. onnxruntime draws its own
 *    dropout masks, so here each Dropout is given graphdiet's mask (a Mul by the kept elements'
 *    scale, its mask output a Constant); everything else is onnxruntime's own computation;
 *  - --checkpoint memory gives bitwise the same outputs;
 *  - plan's peak equals the peak run measures, with and without checkpointing;
 *  - 20 steps of Adam (run --steps) lower the loss.
 * Without a generated zoo (no python3-torch) every test is skipped, and says so. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "io/format.h"
#include "ops/blas.h"
#include "rewrite/fold.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const zoo[] = {"resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
				  "vit", "gpt", "seq2seq", "lstm", "gru", "unet_gn", "gpt_dynamic", NULL};

static int have_zoo(void)
{
	char p[1024];
	for (const char *const *m = zoo; *m; m++) {
		snprintf(p, sizeof p, "%s/%s/loss.npy", GD_ZOO_DIR, *m);
		if (access(p, R_OK))
			return 0;
	}
	return 1;
}

#define NEED_ZOO()                                                                                             \
	do {                                                                                                   \
		if (!have_zoo())                                                                               \
			cr_skip_test("no zoo in " GD_ZOO_DIR ": testdata/gen_zoo.py needs python3-torch");   \
	} while (0)

/* The command line of one model: its inputs (-i NAME=FILE) and --dim bindings for its symbolic
 * dimensions, taken from PyTorch's inputs. */
struct cmdline {
	char *argv[64];
	int argc;
	char buf[24][1100];
	int nb;
};

static void arg(struct cmdline *c, const char *s)
{
	cr_assert_lt(c->argc, 62);
	c->argv[c->argc++] = (char *)s;
	c->argv[c->argc] = NULL;
}

static const char *fmt(struct cmdline *c, const char *f, const char *a, const char *b)
{
	cr_assert_lt(c->nb, 24);
	snprintf(c->buf[c->nb], sizeof c->buf[0], f, a, b);
	return c->buf[c->nb++];
}

/* whether --dim NAME=... is on c already */
static int bound(const struct cmdline *c, const char *name)
{
	size_t n = strlen(name);
	for (int i = 1; i < c->argc; i++)
		if (!strcmp(c->argv[i - 1], "--dim") && !strncmp(c->argv[i], name, n) && c->argv[i][n] == '=')
			return 1;
	return 0;
}

static void model_args(struct cmdline *c, const char *model, int inputs)
{
	char path[1024], dir[1024];
	snprintf(path, sizeof path, "%s/%s.onnx", GD_ZOO_DIR, model);
	snprintf(dir, sizeof dir, "%s/%s", GD_ZOO_DIR, model);
	struct graph *g = load_ok(path);
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct value *v = g->inputs[i];
		if (v->init)
			continue;
		char npy[1100];
		snprintf(npy, sizeof npy, "%s/%s.npy", dir, v->name);
		if (inputs) {
			arg(c, "-i");
			arg(c, fmt(c, "%s=%s", v->name, npy));
		}
		struct rtensor t;
		cr_assert(npy_load(npy, &t), "%s: no input %s", model, npy);
		for (uint32_t k = 0; v->type.has_shape && k < v->type.ndim; k++)
			if (v->type.dims[k].kind == DIM_PARAM && !bound(c, v->type.dims[k].param)) {
				char val[32];
				snprintf(val, sizeof val, "%lld", (long long)t.dims[k]);
				arg(c, "--dim");
				arg(c, fmt(c, "%s=%s", v->type.dims[k].param, val));
			}
		free(t.data);
	}
	graph_free(g);
}

/* graphdiet CMD ARGS... with the model's bindings (and inputs when `inputs`); asserts exit 0 and
 * returns its standard output (malloc'd). */
static char *gd(const char *model, int inputs, const char *const *args)
{
	struct cmdline c = {.argc = 0};
	arg(&c, GD_BINARY);
	for (; *args; args++)
		arg(&c, *args);
	model_args(&c, model, inputs);
	struct run_result r = run_cmd(c.argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s: graphdiet %s failed (%d): %s", model, c.argv[1], r.status, r.err);
	char *out = r.out;
	r.out = NULL;
	run_free(&r);
	return out;
}

static const char *tmp(char *buf, size_t n, const char *model, const char *what)
{
	snprintf(buf, n, "%s/%s_%s", tmpdir(), model, what);
	return buf;
}

/* train with extra options, then run on PyTorch's inputs with -o DIR; returns run's JSON */
static char *train_and_run(const char *model, const char *tag, const char *const *opts, char *outdir, size_t n)
{
	char src[1024], train[1024];
	snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, model);
	tmp(train, sizeof train, model, tag);
	strcat(train, ".onnx");
	const char *targs[16] = {"train", src, "-o", train};
	int k = 4;
	for (; opts && *opts; opts++)
		targs[k++] = *opts;
	targs[k] = NULL;
	free(gd(model, 0, targs));
	tmp(outdir, n, model, tag);
	const char *rargs[] = {"run", train, "-o", outdir, "--format", "json", NULL};
	return gd(model, 1, rargs);
}

/* max |a - b| / max(max |ref|, floor) */
static double rel_err(const struct rtensor *ref, const struct rtensor *got, double floor)
{
	cr_assert_eq(ref->numel, got->numel);
	double scale = floor, worst = 0;
	for (int64_t i = 0; i < ref->numel; i++)
		scale = fmax(scale, fabs(rt_get(ref, i)));
	for (int64_t i = 0; i < ref->numel; i++)
		worst = fmax(worst, fabs(rt_get(ref, i) - rt_get(got, i)));
	return worst / scale;
}

/* The graphdiet processes these tests start, whose bits they compare, multiply on this one's
 * kernel (helpers.h). */
__attribute__((constructor)) static void pin(void)
{
	pin_sgemm();
}

/* train -> run of each model gives PyTorch's loss and gradients within tol (per tensor, as the
 * header says), every one of them. */
static void gradients_match(const char *const *models, const char *suffix, double tol)
{
	for (const char *const *mm = models; *mm; mm++) {
		char name[128];
		snprintf(name, sizeof name, "%s%s", *mm, suffix);
		char out[1024], path[1200], refp[1200];
		free(train_and_run(name, "plain", NULL, out, sizeof out));
		/* every gradient graphdiet gives has PyTorch's counterpart, and the other way round */
		snprintf(path, sizeof path, "%s/%s.onnx", GD_ZOO_DIR, name);
		struct graph *g = load_ok(path);
		double largest = 0;
		for (int pass = 0; pass < 2; pass++) {
			double worst = 0;
			const char *worst_name = "";
			size_t n = 0;
			for (uint32_t i = 0; i < g->n_inits; i++) {
				const struct value *p = g->inits[i];
				if (!(p->flags & VALUE_PARAM))
					continue;
				struct rtensor ref, got;
				snprintf(refp, sizeof refp, "%s/%s/%s_grad.npy", GD_ZOO_DIR, name, p->name);
				snprintf(path, sizeof path, "%s/%s_grad.npy", out, p->name);
				int has_ref = npy_load(refp, &ref), has_got = npy_load(path, &got);
				/* buffers PyTorch does not train (BatchNorm's statistics) have neither */
				cr_assert_eq(has_ref, has_got, "%s: %s: PyTorch %s a gradient, graphdiet %s", name, p->name,
					     has_ref ? "gives" : "gives no", has_got ? "does" : "does not");
				if (!has_ref)
					continue;
				for (int64_t k = 0; pass == 0 && k < ref.numel; k++)
					largest = fmax(largest, fabs(rt_get(&ref, k)));
				double err = pass ? rel_err(&ref, &got, 1e-2 * largest) : 0;
				if (err > worst) {
					worst = err;
					worst_name = p->name;
				}
				n++;
				free(ref.data);
				free(got.data);
			}
			if (!pass)
				continue;
			struct rtensor lr, lg;
			snprintf(refp, sizeof refp, "%s/%s/loss.npy", GD_ZOO_DIR, name);
			snprintf(path, sizeof path, "%s/loss.npy", out);
			cr_assert(npy_load(refp, &lr) && npy_load(path, &lg));
			double lerr = rel_err(&lr, &lg, 1e-6);
			/* PyTorch's own float32 gradients against float64 (gen_zoo.py), for the reader */
			char noise[32] = "?";
			snprintf(refp, sizeof refp, "%s/%s/float32_noise.txt", GD_ZOO_DIR, name);
			FILE *nf = fopen(refp, "r");
			if (nf) {
				if (!fgets(noise, sizeof noise, nf))
					strcpy(noise, "?");
				noise[strcspn(noise, "\n")] = 0;
				fclose(nf);
			}
			printf("zoo %-20s %4zu gradients  worst %.2e (%s)  loss %.2e  PyTorch float32 vs float64 %s\n", name, n,
			       worst, worst_name, lerr, noise);
			cr_expect_gt(n, 0, "%s: no gradients", name);
			cr_expect_leq(worst, tol, "%s: %s differs from PyTorch's by %.3g", name, worst_name, worst);
			cr_expect_leq(lerr, tol / 10, "%s: the loss differs from PyTorch's by %.3g", name, lerr);
			free(lr.data);
			free(lg.data);
		}
		graph_free(g);
	}
}

Test(zoo, gradients_match_pytorch_with_dropout_on)
{
	NEED_ZOO();
	gradients_match(zoo, "", 1e-4);
}

/* The same models in float64 (gen_zoo.py's copies) against PyTorch in float64: no float32 rounding
 * decides a kink there, so every model is held to 1e-6 whatever its conditioning (float32
 * attributes, epsilons for one, keep it from 1e-15). */
Test(zoo, float64_gradients_match_pytorch)
{
	NEED_ZOO();
	gradients_match(zoo, "_f64", 1e-6);
}

/* Bitwise equal .npy files for every output of the plain run in `a` and `b`. */
static void same_outputs(const char *model, const char *a, const char *b)
{
	char pa[1200], pb[1200], src[1024];
	snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, model);
	struct graph *g = load_ok(src);
	size_t n = 0;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		if (!(g->inits[i]->flags & VALUE_PARAM))
			continue;
		snprintf(pa, sizeof pa, "%s/%s_grad.npy", a, g->inits[i]->name);
		snprintf(pb, sizeof pb, "%s/%s_grad.npy", b, g->inits[i]->name);
		if (access(pa, R_OK))
			continue;
		size_t la, lb;
		uint8_t *da = slurp(pa, &la), *db = slurp(pb, &lb);
		cr_expect(la == lb && !memcmp(da, db, la), "%s: %s differs in %s", model, g->inits[i]->name, b);
		free(da);
		free(db);
		n++;
	}
	cr_expect_gt(n, 0);
	graph_free(g);
}

/* ... and auto at the lowest peak it reaches, whose plans recompute segments more than once
 * (levels) on most of these models, Dropout's included. auto's lower bound is below every peak
 * a run measures. */
Test(zoo, checkpointing_is_bitwise_and_plan_equals_run)
{
	NEED_ZOO();
	for (const char *const *m = zoo; *m; m++) {
		static const char *const strategy[] = {"none", "speed", "memory", "auto"};
		char src[1024], file[4][1024], budget[32];
		snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, *m);
		const char *pl[] = {"plan", src, "--checkpoint", "auto", "--budget", "1", "--format", "json", NULL};
		char *low = gd(*m, 0, pl);
		snprintf(budget, sizeof budget, "%.0f", json_num(low, "peak_bytes_after"));
		double bound = json_num(low, "lower_bound_bytes");
		free(low);
		printf("zoo %-20s", *m);
		for (int k = 0; k < 4; k++) {
			const char *ck[] = {"--checkpoint", strategy[k], "--budget", budget, NULL};
			if (k < 3)
				ck[2] = NULL;
			char *run = train_and_run(*m, strategy[k], k ? ck : NULL, file[k], sizeof file[k]);
			if (k)
				same_outputs(*m, file[0], file[k]);
			const char *pa[] = {"plan", src, "--checkpoint", strategy[k], "--format", "json", "--budget", budget, NULL};
			if (k < 3)
				pa[6] = NULL;
			char *plan = gd(*m, 0, pa);
			double measured = json_num(run, "peak_bytes"), planned = json_num(plan, "peak_bytes_after");
			printf("  %s %.0f (plan %.0f)", strategy[k], measured, planned);
			cr_expect_eq(planned, measured, "%s, --checkpoint %s: plan says %.0f bytes, run measures %.0f", *m,
				     strategy[k], planned, measured);
			cr_expect_leq(bound, measured, "%s, --checkpoint %s: below the lower bound", *m, strategy[k]);
			free(run);
			free(plan);
		}
		printf("\n");
	}
}

/* What plan --format yaml names as checkpoints (memory, and auto at 70% of the peak, which also
 * keeps Constants' outputs), train --checkpoint-file takes: a GPT's plan once named a value train
 * did not have ('/blocks.1/attn/Constant_output_0' is not a value a forward node produces). */
Test(zoo, plans_name_checkpoints_train_takes)
{
	NEED_ZOO();
	for (const char *const *m = zoo; *m; m++) {
		char src[1024], file[1024], train[1024], budget[32];
		snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, *m);
		const char *pn[] = {"plan", src, "--format", "json", NULL};
		char *jn = gd(*m, 0, pn);
		snprintf(budget, sizeof budget, "%.0f", 0.7 * json_num(jn, "peak_bytes_after"));
		free(jn);
		for (int k = 0; k < 2; k++) {
			const char *pm[] = {"plan", src, "--checkpoint", k ? "auto" : "memory", "--format", "yaml", "--budget", budget,
					    NULL};
			if (!k)
				pm[6] = NULL;
			char *y = gd(*m, 0, pm);
			tmp(file, sizeof file, *m, k ? "auto.yaml" : "memory.yaml");
			FILE *f = fopen(file, "w");
			cr_assert(f && fputs(y, f) >= 0 && fclose(f) == 0);
			free(y);
			tmp(train, sizeof train, *m, "from_file.onnx");
			const char *ta[] = {"train", src, "--checkpoint-file", file, "-o", train, NULL};
			free(gd(*m, 0, ta));
		}
	}
}

Test(zoo, adam_lowers_the_loss_in_20_steps)
{
	NEED_ZOO();
	for (const char *const *m = zoo; *m; m++) {
		char src[1024], train[1024];
		snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, *m);
		tmp(train, sizeof train, *m, "adam.onnx");
		const char *targs[] = {"train", src, "--optimizer", "adam:lr=0.001", "-o", train, NULL};
		free(gd(*m, 0, targs));
		const char *rargs[] = {"run", train, "--steps", "20", "--format", "json", NULL};
		char *j = gd(*m, 1, rargs);
		double first = json_num(j, "loss");
		const char *last = j, *p;
		while ((p = strstr(last + 1, "\"loss\": ")))
			last = p;
		double final = json_num(last, "loss");
		printf("zoo %-20s loss %.4f -> %.4f in 20 steps of Adam\n", *m, first, final);
		cr_expect(isfinite(final) && final < first, "%s: the loss went from %g to %g", *m, first, final);
		free(j);
	}
}

Test(zoo, batchnorm_running_statistics_follow_pytorch)
{
	NEED_ZOO();
	size_t checked = 0;
	for (const char *const *m = zoo; *m; m++) {
		char out[1024], src[1024], refp[1200], path[1200];
		snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, *m);
		const char *opt[] = {"--optimizer", "sgd:lr=0.001", NULL};
		free(train_and_run(*m, "stats", opt, out, sizeof out));
		struct graph *g = load_ok(src);
		/* as the gradients: a mean whose exact value is 0 (after a 1x1 convolution of zero-mean
		 * channels) is rounding noise on both sides, so the floor is 1% of the largest statistic */
		double worst = 0, largest = 0;
		size_t n = 0;
		for (int pass = 0; pass < 2; pass++)
			for (uint32_t i = 0; i < g->n_inits; i++) {
				struct rtensor ref, got;
				snprintf(refp, sizeof refp, "%s/%s/%s_new.npy", GD_ZOO_DIR, *m, g->inits[i]->name);
				if (!npy_load(refp, &ref))
					continue;
				for (int64_t k = 0; !pass && k < ref.numel; k++)
					largest = fmax(largest, fabs(rt_get(&ref, k)));
				snprintf(path, sizeof path, "%s/%s_new.npy", out, g->inits[i]->name);
				cr_assert(npy_load(path, &got), "%s: graphdiet gives no %s_new (not bound as state?)", *m,
					  g->inits[i]->name);
				if (pass) {
					worst = fmax(worst, rel_err(&ref, &got, 1e-2 * largest));
					n++;
				}
				free(ref.data);
				free(got.data);
			}
		graph_free(g);
		if (n)
			printf("zoo %-20s %3zu running statistics, worst %.2e against PyTorch's\n", *m, n, worst);
		cr_expect_leq(worst, 1e-4, "%s: running statistics differ from PyTorch's by %.3g", *m, worst);
		checked += n;
	}
	cr_expect_gt(checked, 100, "the zoo's BatchNorm models bind their running statistics");
}

/* Dropout draws a fresh mask every step (a negligible learning rate leaves the weights as they
 * are, so the loss changes only with the mask), and a recomputed Dropout draws its own step's: three
 * Adam steps with --checkpoint memory end bitwise where they end without it. */
Test(zoo, dropout_is_fresh_each_step_and_recompute_follows)
{
	NEED_ZOO();
	const char *m = "gpt";
	char src[1024], t1[1024], t2[1024], t3[1024], o2[1024], o3[1024];
	snprintf(src, sizeof src, "%s/%s.onnx", GD_ZOO_DIR, m);
	tmp(t1, sizeof t1, m, "still.onnx");
	const char *still[] = {"train", src, "--optimizer", "sgd:lr=1e-30", "-o", t1, NULL};
	free(gd(m, 0, still));
	const char *r1[] = {"run", t1, "--steps", "2", "--format", "json", NULL};
	char *j = gd(m, 1, r1);
	const char *second = strstr(strstr(j, "\"loss\": ") + 1, "\"loss\": ");
	cr_assert(second);
	double l1 = json_num(j, "loss"), l2 = json_num(second, "loss");
	cr_expect_neq(l1, l2, "step 2 drew step 1's dropout masks (loss %g both times)", l1);
	free(j);
	tmp(t2, sizeof t2, m, "adam_none.onnx");
	tmp(t3, sizeof t3, m, "adam_memory.onnx");
	const char *a2[] = {"train", src, "--optimizer", "adam:lr=0.01", "-o", t2, NULL};
	const char *a3[] = {"train", src, "--optimizer", "adam:lr=0.01", "--checkpoint", "memory", "-o", t3, NULL};
	free(gd(m, 0, a2));
	free(gd(m, 0, a3));
	tmp(o2, sizeof o2, m, "steps_none");
	tmp(o3, sizeof o3, m, "steps_memory");
	const char *s2[] = {"run", t2, "--steps", "3", "-o", o2, NULL}, *s3[] = {"run", t3, "--steps", "3", "-o", o3, NULL};
	free(gd(m, 1, s2));
	free(gd(m, 1, s3));
	struct graph *g = load_ok(src);
	size_t n = 0;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		if (!(g->inits[i]->flags & VALUE_PARAM))
			continue;
		char pa[1200], pb[1200];
		snprintf(pa, sizeof pa, "%s/%s_new.npy", o2, g->inits[i]->name);
		snprintf(pb, sizeof pb, "%s/%s_new.npy", o3, g->inits[i]->name);
		size_t la, lb;
		uint8_t *da = slurp(pa, &la), *db = slurp(pb, &lb);
		cr_expect(la == lb && !memcmp(da, db, la), "%s after 3 steps differs with --checkpoint memory", g->inits[i]->name);
		free(da);
		free(db);
		n++;
	}
	cr_expect_gt(n, 10);
	graph_free(g);
}

/* ---- onnxruntime ---- */

#ifdef GD_ORT_DIR
/* Gives every Dropout of g graphdiet's mask (values from x, a run of g that kept every value): y =
 * X * (mask / (1 - ratio)) by a Mul, and the mask output from a Constant. Returns how many. */
static size_t fix_dropout_masks(struct graph *g, struct exec *x)
{
	struct gd_err e = {0};
	size_t fixed = 0;
	uint32_t n0 = g->n_nodes;
	for (uint32_t i = 0; i < n0; i++) {
		struct node *n = g->nodes[i];
		if (n->op != OP_DROPOUT)
			continue;
		const struct rtensor *xin = exec_value(x, n->in[0]);
		double ratio = n->n_in > 1 && n->in[1] ? rt_get(exec_value(x, n->in[1]), 0) : 0.5;
		int training = n->n_in > 2 && n->in[2] && rt_get(exec_value(x, n->in[2]), 0) != 0;
		cr_assert(xin->data);
		/* the factor per element: 1/(1 - ratio) where kept, 0 where dropped */
		struct rtensor f = *xin;
		f.data = xmalloc(f.nbytes ? f.nbytes : 1);
		f.owned = 0;
		cr_assert(f.data);
		const struct rtensor *mask = n->n_out > 1 && n->out[1] ? exec_value(x, n->out[1]) : NULL;
		cr_assert(!training || (mask && mask->data), "a training Dropout without its mask output");
		for (int64_t k = 0; k < f.numel; k++)
			rt_set(&f, k, !training ? 1 : rt_get(mask, k) != 0 ? 1 / (1 - ratio) : 0);
		struct node *c = graph_add_op(g, "zoo_dropout_factor", "Constant", NULL, 0, "zoo_dropout_factor", &e);
		cr_assert(c && !node_make_constant(g, &f, c, &e), "%s", e.msg);
		if (n->n_out > 1 && n->out[1]) { /* the mask: a Constant producing the same value */
			struct value *mv = n->out[1];
			struct rtensor mt = *exec_value(x, mv);
			struct node *mc = graph_add_op(g, "zoo_dropout_mask", "Constant", NULL, 0, "zoo_dropout_mask_tmp", &e);
			cr_assert(mc && !node_make_constant(g, &mt, mc, &e), "%s", e.msg);
			mc->out[0]->producer = NULL;
			mc->out[0] = mv;
			mv->producer = mc;
			mv->slot = 0;
		}
		struct value **ins = arena_array(g->arena, 2, sizeof *ins);
		cr_assert(ins);
		ins[0] = n->in[0];
		ins[1] = c->out[0];
		n->in = ins;
		n->n_in = 2;
		n->n_out = 1;
		n->op = OP_MUL;
		n->op_type = "Mul";
		n->n_attr = 0;
		free(f.data);
		fixed++;
	}
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	return fixed;
}
#endif

Test(zoo, onnxruntime_gets_graphdiets_outputs)
{
	NEED_ZOO();
#ifndef GD_ORT_DIR
	cr_skip_test("onnxruntime-node is not installed (npm install --ignore-scripts --prefix build/ort onnxruntime-node)");
#else
	if (access(GD_NODE, X_OK) || access(GD_ORT_DIR "/onnxruntime-node/package.json", R_OK))
		cr_skip_test("no node at %s or no onnxruntime-node in %s (apt-get install nodejs npm; npm install "
			     "--ignore-scripts --prefix build/ort onnxruntime-node@1.30.0)", GD_NODE, GD_ORT_DIR);
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	for (const char *const *m = zoo; *m; m++) {
		char out[1024], train[1200], fixed[1200], ortdir[1200], path[1300];
		free(train_and_run(*m, "for_ort", NULL, out, sizeof out));
		snprintf(train, sizeof train, "%s.onnx", out);
		struct graph *g = load_ok(train);
		/* PyTorch's inputs, and the bindings of a dynamic axis */
		struct rtensor ins[8];
		const char *names[8];
		size_t ni = 0;
		for (uint32_t i = 0; i < g->n_inputs && ni < 8; i++) {
			if (g->inputs[i]->init)
				continue;
			snprintf(path, sizeof path, "%s/%s/%s.npy", GD_ZOO_DIR, *m, g->inputs[i]->name);
			cr_assert(npy_load(path, &ins[ni]), "%s", path);
			names[ni++] = g->inputs[i]->name;
		}
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = ni, .keep_values = 1};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		size_t nd = fix_dropout_masks(g, x);
		exec_free(x);
		snprintf(fixed, sizeof fixed, "%s/%s_ort.onnx", tmpdir(), *m);
		cr_assert_eq(model_save(g, fixed, FMT_ONNX, NULL, &e), 0, "%s: %s", *m, e.msg);
		/* onnxruntime */
		snprintf(ortdir, sizeof ortdir, "%s/%s_ort_out", tmpdir(), *m);
		char feeds[8][1400];
		char *argv[16] = {GD_NODE, GD_SOURCE_DIR "/tests/ort/run_ort.cjs", fixed, ortdir};
		int argc = 4;
		for (size_t i = 0; i < ni; i++) {
			snprintf(feeds[i], sizeof feeds[i], "%s=%s/%s/%s.npy", names[i], GD_ZOO_DIR, *m, names[i]);
			argv[argc++] = feeds[i];
		}
		argv[argc] = NULL;
		struct run_result r = run_cmd(argv, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: onnxruntime failed: %s%s", *m, r.out, r.err);
		run_free(&r);
		/* graphdiet on the same graph */
		struct exec_opts o2 = {.inputs = ins, .input_names = names, .n_inputs = ni};
		x = exec_run(g, &o2, NULL, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		double largest = 0, worst = 0;
		const char *worst_name = "";
		for (int pass = 0; pass < 2; pass++)
			for (uint32_t k = 0; k < g->n_outputs; k++) {
				const struct value *v = g->outputs[k];
				const struct rtensor *ours = exec_value(x, v);
				if (!pass) {
					for (int64_t i = 0; autodiff_param_of(g, v) && i < ours->numel; i++)
						largest = fmax(largest, fabs(rt_get(ours, i)));
					continue;
				}
				struct rtensor theirs;
				snprintf(path, sizeof path, "%s/%s.npy", ortdir, v->name);
				cr_assert(npy_load(path, &theirs), "%s: onnxruntime wrote no %s", *m, v->name);
				double err = rel_err(ours, &theirs, 1e-2 * largest);
				if (err > worst) {
					worst = err;
					worst_name = v->name;
				}
				free(theirs.data);
			}
		printf("zoo %-20s onnxruntime: %zu Dropout masks given, worst %.2e (%s)\n", *m, nd, worst, worst_name);
		cr_expect_leq(worst, 1e-4, "%s: onnxruntime and graphdiet differ by %.3g in %s", *m, worst, worst_name);
		exec_free(x);
		for (size_t i = 0; i < ni; i++)
			free(ins[i].data);
		graph_free(g);
	}
#endif
}

/* Exit 77 (ctest: Skipped) without a zoo, rather than reporting tests that did not run as passed. */
int main(int argc, char *argv[])
{
	if (!have_zoo()) {
		fprintf(stderr, "test_zoo: skipped: no zoo in %s (testdata/gen_zoo.py needs python3-torch and "
				"python3-torchvision)\n", GD_ZOO_DIR);
		return 77;
	}
	struct criterion_test_set *tests = criterion_initialize();
	int rc = 0;
	if (criterion_handle_args(argc, argv, true))
		rc = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return rc;
}
