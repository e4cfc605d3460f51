/* test_autodiff.c - the backward pass, proven two ways:
 *  - every differentiable op in the registry against central finite differences in float64, over
 *    shapes with broadcasting and every attribute variant the rules distinguish; an op without a
 *    case fails the test;
 *  - every testdata model's gradients against PyTorch's, saved by testdata/gen_models.py. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "opcases.h"
#include "io/npy.h"
#include "io/tensor.h"
#include "io/yaml.h"
#include "plan/plan.h"
#include "rewrite/fold.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct graph *build(const struct gcase *c)
{
	struct graph *g = op_case_graph(c, "float64");
	struct gd_err e = {0};
	/* materialise random parameters as bytes we can perturb in place */
	for (uint32_t i = 0; i < g->n_inits; i++) {
		struct tensor *t = g->inits[i]->init;
		struct bytes b;
		cr_assert_eq(tensor_bytes(g, t, &b, &e), 0);
		t->bytes = (struct bytes){arena_memdup(g->arena, b.p, b.n), b.n};
		t->src = TSRC_BYTES;
	}
	return g;
}

static double run_loss(struct graph *g, struct exec **keep)
{
	struct exec_opts o = {0};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	double l = rt_get(exec_value(x, g->outputs[0]), 0);
	if (keep)
		*keep = x;
	else
		exec_free(x);
	return l;
}

/* #52 rnnback (at the end): autodiff_opts.fused_rnn for gradcheck; 2: and RecurrentGrad nodes
 * recompute the gates (their input 12, the forward's, dropped) */
static int gradcheck_fused;

static void gradcheck(const struct gcase *c)
{
	struct graph *g = build(c);
	struct autodiff_opts ao = {.fused_rnn = gradcheck_fused};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", c->name, e.msg);
	for (uint32_t k = 0; gradcheck_fused == 2 && k < g->n_nodes; k++)
		if (!strcmp(g->nodes[k]->op_type, "RecurrentGrad") && g->nodes[k]->n_in == 13)
			g->nodes[k]->n_in = 12;
	cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_gt(res.n_grads, 0, "%s", c->name);
	struct exec *x;
	run_loss(g, &x);
	for (uint32_t k = 1; k < g->n_outputs; k++) {
		const struct value *gv = g->outputs[k];
		char pname[256];
		snprintf(pname, sizeof pname, "%.*s", (int)(strlen(gv->name) - 5), gv->name);
		struct value *p = strmap_get(&g->names, pname);
		cr_assert(p && p->init, "%s: %s has no parameter", c->name, gv->name);
		const struct rtensor *an = exec_value(x, gv);
		struct tensor *t = p->init;
		cr_assert_eq(an->numel * 8, (int64_t)t->bytes.n, "%s: %s has the parameter's size", c->name, gv->name);
		double *w = (double *)t->bytes.p;
		for (int64_t i = 0; i < an->numel; i++) {
			const double h = 1e-6, w0 = w[i];
			w[i] = w0 + h;
			double lp = run_loss(g, NULL);
			w[i] = w0 - h;
			double lm = run_loss(g, NULL);
			w[i] = w0;
			double num = (lp - lm) / (2 * h), ana = rt_get(an, i);
			cr_expect(fabs(num - ana) <= 1e-6 * fmax(1, fabs(num)), "%s: d loss / d %s[%lld]: analytic %.10g, numeric %.10g",
				  c->name, pname, (long long)i, ana, num);
		}
	}
	exec_free(x);
	graph_free(g);
}

Test(gradcheck, every_case)
{
	for (size_t i = 0; i < n_op_cases; i++)
		gradcheck(&op_cases[i]);
}

Test(gradcheck, every_differentiable_op_has_a_rule_and_a_case)
{
	for (int op = 1; op < OP_COUNT; op++) {
		if (!(op_table[op].flags & OPF_DIFF))
			continue;
		cr_expect(op_table[op].impl && op_table[op].impl->grad, "%s has no gradient rule", op_table[op].op_type);
		char needle[64];
		snprintf(needle, sizeof needle, "op: %s,", op_table[op].op_type);
		int found = 0;
		for (size_t i = 0; i < n_op_cases && !found; i++)
			found = strstr(op_cases[i].nodes, needle) != NULL;
		cr_expect(found, "%s has no finite-difference case", op_table[op].op_type);
	}
}

/* An activation exported as x u(x) keeps only x for the backward pass: no backward node reads the
 * forward intermediates (x / sqrt 2, erf, 1 + erf, sigmoid, tanh, ...), unless something else in the
 * forward pass reads them too (the sigmoid the second SiLU case adds again). LayerNorm as exported
 * before opset 17 keeps only its output and the per-row divisor (not x - mean). */
Test(gradcheck, decomposed_activations_and_layer_norm_keep_only_what_pytorch_saves)
{
	static const struct {
		const char *name, *interior;
	} cases[] = {
		{"SiLU as x sigmoid(x)", " s "},
		{"SiLU whose sigmoid is read again", ""},
		{"Mish as x tanh(softplus(x))", " sp t "},
		{"GELU as exported: x (1 + erf(x / sqrt 2)) / 2", " d e u "},
		{"GELU tanh form as exported, and as (x / 2) (1 + tanh(...))", " sq cube cc in kin t u "},
		{"LayerNorm as exported before opset 17", " mu d sq var ve "},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		const struct gcase *gc = NULL;
		for (size_t i = 0; i < n_op_cases; i++)
			if (!strcmp(op_cases[i].name, cases[c].name))
				gc = &op_cases[i];
		cr_assert(gc, "%s: no such case", cases[c].name);
		struct graph *g = op_case_graph(gc, "float64");
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		struct gd_err e = {0};
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		int sigmoid_read = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			for (uint32_t k = 0; !node_is_forward(n) && k < n->n_in; k++) {
				char word[64];
				snprintf(word, sizeof word, " %s ", n->in[k] ? n->in[k]->name : "");
				cr_expect(!strstr(cases[c].interior, word), "%s: backward node '%s' (%s) reads '%s'", gc->name,
					  n->name, n->op_type, n->in[k]->name);
				sigmoid_read |= n->in[k] && !strcmp(n->in[k]->name, "s");
			}
		}
		if (!*cases[c].interior) /* the shared sigmoid still passes on its other reader's gradient */
			cr_expect(sigmoid_read, "%s: the sigmoid's own rule ran", gc->name);
		graph_free(g);
	}
}

/* The op case of that name, differentiated (float64). */
static struct graph *differentiated_case(const char *name)
{
	for (size_t i = 0; i < n_op_cases; i++)
		if (!strcmp(op_cases[i].name, name)) {
			struct graph *g = op_case_graph(&op_cases[i], "float64");
			struct autodiff_opts ao = {0};
			struct autodiff_result res;
			struct gd_err e = {0};
			cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", name, e.msg);
			return g;
		}
	cr_assert_fail("no case '%s'", name);
	return NULL;
}

/* A decomposition is recognized only when its constants are constants: an epsilon that is itself a
 * trained parameter gets its gradient (the ordinary rules run; gradcheck checks its value). */
Test(gradcheck, a_trained_constant_keeps_its_gradient)
{
	struct graph *g = differentiated_case("LayerNorm chain whose epsilon is trained");
	int found = 0;
	for (uint32_t k = 0; k < g->n_outputs; k++)
		found |= !strcmp(g->outputs[k]->name, "eps_grad");
	cr_expect(found, "eps has no gradient output");
	graph_free(g);
}

/* A weight's summands made by Gemms add in their C, as PyTorch adds into .grad: the shared weight's
 * gradient is the last Gemm's product, and no Add sums it (three did). gradcheck checks its value. */
Test(gradcheck, a_shared_weights_summands_add_in_their_gemms)
{
	struct graph *g = differentiated_case("Gemm shared weight");
	const struct value *wg = strmap_get(&g->names, "w_grad");
	cr_assert(wg && wg->producer);
	cr_expect(wg->producer->op == OP_GEMM && wg->producer->n_in == 3, "w_grad is made by a %s of %u inputs",
		  wg->producer->op_type, wg->producer->n_in);
	int adds = 0; /* the sums of w's summands are named w_grad_sum..., the last w_grad */
	for (uint32_t k = 0; k < g->n_nodes; k++)
		adds += g->nodes[k]->op == OP_ADD && !strncmp(g->nodes[k]->out[0]->name, "w_grad", 6);
	cr_expect_eq(adds, 0, "%d Adds sum w's gradient", adds);
	graph_free(g);
}

/* ---- PyTorch ---- */

/* TESTDATA/<model>.onnx differentiated, on PyTorch's inputs, gives PyTorch's gradients
 * (TESTDATA/ref/<model>/), every one of them. */
static void matches_pytorch(const char *model)
{
	char path[512];
	model_path(path, sizeof path, model);
	struct graph *g = load_ok(path);
	struct rtensor ins[8];
	const char *names[8];
	size_t n = ref_inputs(g, model, ins, names);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", model, e.msg);
	/* autodiff leaves g sorted (plan and train do not sort it again): every node after the
	 * producers of its inputs, and each node's index its position */
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *nd = g->nodes[i];
		cr_assert_eq(nd->index, i, "%s", model);
		for (uint32_t k = 0; k < nd->n_in; k++)
			cr_assert(!nd->in[k] || !nd->in[k]->producer || nd->in[k]->producer->index < i,
				  "%s: node %u reads '%s' before it is made", model, i, nd->in[k]->name);
	}
	struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s: %s", model, e.msg);
	size_t compared = 0;
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		const struct value *v = g->outputs[k];
		if (!(v->flags & VALUE_GRAD))
			continue;
		ref_path(path, sizeof path, model, v->name);
		struct rtensor ref;
		cr_assert(npy_load(path, &ref), "%s: PyTorch has no gradient %s", model, v->name);
		const struct rtensor *got = exec_value(x, v);
		cr_assert_eq(got->numel, ref.numel, "%s: %s", model, v->name);
		double scale = 0, worst = 0;
		for (int64_t i = 0; i < ref.numel; i++)
			scale = fmax(scale, fabs(rt_get(&ref, i)));
		for (int64_t i = 0; i < ref.numel; i++)
			worst = fmax(worst, fabs(rt_get(got, i) - rt_get(&ref, i)));
		/* relative 1e-5 of the gradient's scale; 1e-7 absolute for gradients that are exactly
		 * zero in theory (a conv bias before a training-mode BatchNorm) */
		cr_expect(worst <= 1e-5 * scale + 1e-7, "%s: %s differs from PyTorch by %g (scale %g)", model, v->name,
			  worst, scale);
		free(ref.data);
		compared++;
	}
	/* and no PyTorch parameter was missed */
	size_t expected = 0;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		char p[600], grad[512];
		snprintf(grad, sizeof grad, "%s_grad", g->inits[i]->name);
		FILE *f = fopen(ref_path(p, sizeof p, model, grad), "rb");
		if (f) {
			expected++;
			fclose(f);
		}
	}
	cr_expect_eq(compared, expected, "%s: %zu gradients compared, PyTorch has %zu", model, compared, expected);
	exec_free(x);
	graph_free(g);
	for (size_t i = 0; i < n; i++)
		free(ins[i].data);
}

Test(pytorch, gradients_of_every_testdata_model)
{
	for (const char *const *m = testdata_models; *m; m++)
		matches_pytorch(*m);
}

/* The exporter's idioms (testdata/gen_idioms.py), dropout on, a symbolic batch in two of them. */
Test(pytorch, gradients_of_the_exporters_idioms)
{
	static const char *const idioms[] = {"idioms/slice", "idioms/dropout", "idioms/dropout0", "idioms/view_sum",
					     "idioms/pad", "idioms/relu6", "idioms/hardswish", "idioms/hardsigmoid",
					     "idioms/triu", "idioms/arange", "idioms/gather1", "idioms/deep", "idioms/gelu",
					     "idioms/gelu_tanh", "idioms/silu", "idioms/mish", "idioms/layer_norm16",
					     "idioms/pool_gather14", "idioms/resize_align", NULL};
	for (const char *const *m = idioms; *m; m++)
		matches_pytorch(*m);
}

/* Selection by value (testdata/gen_select.py): torch.topk's values, torch.logsumexp, a top-1 mixture
 * of experts (argmax, F.one_hot). */
Test(pytorch, gradients_through_selection_ops)
{
	static const char *const models[] = {"select/topk", "select/logsumexp", "select/moe", NULL};
	for (const char *const *m = models; *m; m++)
		matches_pytorch(*m);
}

/* A model exported at opset 14 (torch.onnx.export's default) whose gradients need opset 16's
 * reducing scatters (MaxPool, Gather): the training graph is raised to opset 16 and IR version 8,
 * which changes no op's meaning from 14; below 14 it is refused. */
Test(pytorch, default_opset_14_exports_train_at_opset_16)
{
	char path[512];
	struct graph *g = load_ok(model_path(path, sizeof path, "idioms/pool_gather14"));
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(g->model->opsets[0].version, 14);
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_expect_eq(g->model->opsets[0].version, 16);
	cr_expect_geq(g->model->ir_version, 8);
	graph_free(g);
}

/* --loss-fn mse: loss = mean((y - t)^2) and dL/dW = (2 / numel) x^T (y - t), computed here from
 * the run's own inputs, independently of the graph. */
#include "rewrite/loss.h"

Test(loss_fn, mse_value_and_gradient)
{
	const char *text = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float64, shape: [batch, 4]}]\n"
			   "params: [{name: w, dtype: float64, shape: [4, 3], init: {dist: normal, seed: 3}}]\n"
			   "nodes: [{op: MatMul, inputs: [x, w], outputs: [y]}]\n"
			   "outputs: [{name: y, dtype: float64, shape: [batch, 3]}]\n";
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "mse", ".", &e);
	cr_assert(g && !graph_check(g, &e) && !graph_toposort(g, &e), "%s", e.msg);
	cr_assert_eq(loss_append(g, LOSS_MSE, NULL, "target", &e), 0, "%s", e.msg);
	struct autodiff_opts ao = {.loss = "loss"};
	struct autodiff_result res;
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0);
	struct exec_binding b = {"batch", 5};
	struct exec_opts o = {.random_inputs = 1, .seed = 9, .dims = &b, .n_dims = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *xv = exec_value(x, strmap_get(&g->names, "x")), *tv = exec_value(x, strmap_get(&g->names, "target"));
	const struct rtensor *yv = exec_value(x, strmap_get(&g->names, "y")), *lv = exec_value(x, strmap_get(&g->names, "loss"));
	const struct rtensor *gw = exec_value(x, strmap_get(&g->names, "w_grad"));
	double loss = 0, d[5][3];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 3; j++) {
			d[i][j] = rt_get(yv, i * 3 + j) - rt_get(tv, i * 3 + j);
			loss += d[i][j] * d[i][j] / 15;
		}
	cr_assert_float_eq(rt_get(lv, 0), loss, 1e-12);
	for (int k = 0; k < 4; k++)
		for (int j = 0; j < 3; j++) {
			double want = 0;
			for (int i = 0; i < 5; i++)
				want += 2.0 / 15 * rt_get(xv, i * 4 + k) * d[i][j];
			cr_assert_float_eq(rt_get(gw, k * 3 + j), want, 1e-12, "w_grad[%d][%d]", k, j);
		}
	/* a product of matrices backprops through one Gemm per operand, with no transposed copy */
	const struct node *p = ((const struct value *)strmap_get(&g->names, "w_grad"))->producer;
	cr_expect_str_eq(p->op_type, "Gemm");
	cr_expect(node_attr(p, "transA") && node_attr(p, "transA")->i == 1);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		cr_expect_str_neq(g->nodes[i]->op_type, "Transpose");
	exec_free(x);
	graph_free(g);
}

/* A registered causal-mask buffer (nanoGPT's self.register_buffer("bias", tril(ones))), read only
 * through masked_fill's condition, is no parameter: no bias_grad, no warning, not in plan's
 * parameter count or bytes but in its buffers; the parameters are PyTorch's own count,
 * sum(p.numel() for p in model.parameters()), which testdata/gen_fold.py saved beside the model. A
 * frozen parameter stays a parameter, untrained. */
Test(buffers, a_causal_mask_is_no_parameter)
{
	size_t len;
	char *json = (char *)slurp(TESTDATA "/fold/gpt_mask.json", &len);
	uint64_t n_params = (uint64_t)json_num(json, "parameters"), n_buffers = (uint64_t)json_num(json, "buffers");
	free(json);
	struct graph *g = load_ok(TESTDATA "/fold/gpt_mask.onnx");
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_expect_eq(res.n_elems, n_params, "%" PRIu64 " parameters, PyTorch has %" PRIu64, res.n_elems, n_params);
	cr_expect_eq(res.n_unconnected, 0, "the buffer is no unconnected parameter");
	cr_expect_eq(res.n_buffers, 1);
	cr_expect_eq(res.buffer_bytes, 4 * n_buffers);
	for (uint32_t i = 0; i < g->n_outputs; i++)
		cr_expect(strcmp(g->outputs[i]->name, "attn.bias_grad"), "the buffer has a gradient output");
	graph_free(g);

	g = load_ok(TESTDATA "/fold/gpt_mask.onnx");
	const char *frozen = "attn.c_attn.*";
	ao = (struct autodiff_opts){.freeze = &frozen, .n_freeze = 1};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_expect_eq(res.n_elems, n_params - 3 * 8 * 8 - 3 * 8, "c_attn's weight and bias are frozen");
	cr_expect_eq(res.n_buffers, 1, "frozen parameters are no buffers");
	graph_free(g);

	g = load_ok(TESTDATA "/fold/gpt_mask.onnx");
	size_t removed;
	struct plan_opts po = {0};
	struct plan_report r;
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_eq(ckpt_parse("none", &po.ckpt), 0);
	cr_assert_eq(plan_memory(g, &po, &r, &e), 0, "%s", e.msg);
	cr_expect_eq(r.n_param_elems, n_params);
	cr_expect_eq(r.param_bytes, 4 * n_params, "param_bytes %" PRIu64, r.param_bytes);
	cr_expect_eq(r.buffer_bytes, 4 * n_buffers);
	cr_expect_eq(r.at_peak.params, 4 * n_params, "at the peak, the parameters without the buffer");
	graph_free(g);
}

/* #52 rnnback: the recurrent ops' fused backward (RecurrentGrad) against finite differences in
 * float64, on every LSTM, GRU and RNN case (directions, layouts, initial states, outputs,
 * sequence_lens, peepholes, linear_before_reset); each case's training graph holds the node. */
static void recurrent_grad_cases(int how)
{
	size_t n = 0;
	gradcheck_fused = how;
	for (size_t i = 0; i < n_op_cases; i++) {
		const char *s = op_cases[i].nodes;
		if (!strstr(s, "op: LSTM,") && !strstr(s, "op: GRU,") && !strstr(s, "op: RNN,"))
			continue;
		struct graph *g = build(&op_cases[i]);
		struct autodiff_opts ao = {.fused_rnn = 1};
		struct autodiff_result res;
		struct gd_err e = {0};
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", op_cases[i].name, e.msg);
		int fused = 0;
		for (uint32_t k = 0; k < g->n_nodes; k++)
			fused += !strcmp(g->nodes[k]->op_type, "RecurrentGrad");
		cr_expect_gt(fused, 0, "%s: no RecurrentGrad node", op_cases[i].name);
		graph_free(g);
		gradcheck(&op_cases[i]);
		n++;
	}
	gradcheck_fused = 0;
	cr_assert_geq(n, 14, "%zu recurrent cases", n);
}

Test(gradcheck, recurrent_grad_every_rnn_case)
{
	recurrent_grad_cases(1);
}

Test(gradcheck, recurrent_grad_recomputing_the_gates)
{
	recurrent_grad_cases(2);
}
