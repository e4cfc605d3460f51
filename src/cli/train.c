/* train.c - `graphdiet train`: a model in, its training graph (forward + backward) out. */
#include "../autodiff/ad.h"
#include "../exec/exec.h"
#include "../io/names.h"
#include "../plan/plan.h"
#include "../rewrite/ctrl.h"
#include "../rewrite/fold.h"
#include "../rewrite/recompute.h"
#include "../rewrite/loss.h"
#include "../rewrite/step.h"
#include "../util/size.h"
#include "../util/xalloc.h"
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet train [options] MODEL\n"
	"\n"
	"Builds MODEL's backward pass in standard ONNX ops and writes the training graph: the model's\n"
	"outputs plus <param>_grad, the gradient of the loss, for every trainable parameter.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE     where to write (default: standard output); not MODEL itself\n"
	"      --to FORMAT       onnx or yaml (default: the output's extension, .onnx or .yaml; ONNX\n"
	"                        for standard output, a device such as /dev/null and a name without\n"
	"                        an extension); one the extension contradicts is refused\n"
	"      --loss NAME       the output to differentiate (default: the only scalar output);\n"
	"                        with --loss-fn, the prediction to compare with the target\n"
	"      --loss-fn FN      append a loss to a model that has none: mse, or cross-entropy\n"
	"                        over (N, C, ...) scores and int64 class labels\n"
	"      --target NAME     the new graph input holding the targets (default: target)\n"
	"      --batch N         give axis 0 of the data inputs the size N, also in an export with a\n"
	"                        static batch (where the graph computes with it, not stores it)\n"
	"      --dim NAME=VALUE  bind a symbolic dimension (repeatable); once no dimension is\n"
	"                        symbolic, shape computations are folded into constants\n"
	"      --checkpoint S    activation checkpointing: none (default), speed (keep MatMul, Gemm\n"
	"                        and Conv outputs), memory (about sqrt(N) bottlenecks), auto (the\n"
	"                        fewest recompute FLOPs within --budget) or list:NAME,NAME (NAME@2:\n"
	"                        kept at level 2 of the recompute, see graphdiet-plan(1)); the rest\n"
	"                        is recomputed in the backward pass (memory and auto need every\n"
	"                        dimension bound: --dim)\n"
	"      --checkpoint-file F  keep the tensors a YAML file lists (see graphdiet-plan(1))\n"
	"      --explain[=all]   on standard error: the bottlenecks, each recomputed segment's bytes,\n"
	"                        FLOPs and kept inputs, and the peak before and after (as plan\n"
	"                        --explain[=all]; needs every dimension bound)\n"
	"      --control-deps M  how recompute waits for backprop in the output: metadata (node order,\n"
	"                        and the edges in metadata_props; the default), order (node order\n"
	"                        only) or data (value-preserving data edges that pin the whole\n"
	"                        schedule, for runtimes that pick their own order: onnxruntime)\n"
	"      --budget SIZE     for auto: the peak to stay within (8GiB, 500MB or bytes); when no\n"
	"                        plan fits, nothing is written and the exit status is 1\n"
	"      --precision P     fp32 (default), fp16 or bf16: products (MatMul, Gemm, Conv) and the\n"
	"                        ops between them compute in 16 bits; softmax, norms, reductions and\n"
	"                        the loss in float32; parameters and their gradients stay float32\n"
	"      --keep-fp32 OPS   op types to leave in float32 under --precision (comma-separated)\n"
	"      --fused-rnn       differentiate LSTM, GRU and RNN with one RecurrentGrad node each\n"
	"                        (domain graphdiet: graphdiet runs it, onnxruntime does not) rather\n"
	"                        than the unrolled recurrence in standard ops\n"
	"      --loss-scale fixed:S  backprop from S times the loss and divide the gradients by S, so\n"
	"                        that small 16-bit gradients do not flush to zero (a power of two\n"
	"                        changes nothing in float32)\n"
	"      --loss-scale dynamic[:init=65536,growth=2,backoff=0.5,interval=2000,min=1,\n"
	"                        max=16777216,hysteresis=1]  a scale kept as state (loss_scale):\n"
	"                        every gradient is checked for NaN and infinity (output found_inf);\n"
	"                        a step that finds one is skipped and the scale backs off, and\n"
	"                        interval finite steps in a row grow it (see the man page)\n"
	"      --clip-grad-norm X  scale the gradients so that their global L2 norm (output\n"
	"                        grad_norm, from unscaled gradients) is at most X\n"
	"      --optimizer O     update the parameters in the graph: sgd[:lr=0.01,momentum=0] or\n"
	"                        adam[:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-8]; outputs\n"
	"                        <param>_new and the optimizer's next state, bound to the inputs they\n"
	"                        replace (ONNX update_binding) for graphdiet run --steps\n"
	"      --diet[:beta1=0,beta2=0.98,eps=1e-10,lr=1,schedule=noam|none,warmup=2000,\n"
	"                        scale=10/32767,round=stochastic|nearest]  diet variables: store\n"
	"                        parameters as INT16 fixed point (value = q x scale) and update them\n"
	"                        inside the backward pass with DietAdam, a factored Adam, as soon as\n"
	"                        each gradient is complete (about 2 bytes per parameter)\n"
	"      --diet-params NAMES  the diet parameters (comma-separated names or shell patterns,\n"
	"                        such as 'blocks.*.weight' or '*'; implies --diet); default: every\n"
	"                        2-D float32 parameter\n"
	"      --replicas N      data parallelism: the graph of one of N replicas, each on its own\n"
	"                        slice of the batch (--dim binds a replica's); a mean loss is\n"
	"                        weighted by 1/N and every gradient summed over the replicas\n"
	"                        (AllReduce, before the step uses it); outputs loss_global; run it\n"
	"                        with mpirun -np N graphdiet run --shard-inputs (see the man page)\n"
	"      --bucket-bytes SIZE  with --replicas: fuse gradients into all-reduces of at most SIZE\n"
	"                        bytes (25MiB as PyTorch DDP); default: one per gradient\n"
	"      --loss-reduction mean|sum  with --replicas: the loss's reduction over the batch, where\n"
	"                        it cannot be read from the graph\n"	"      --sync-batchnorm  with --replicas: training-mode BatchNormalization normalises with\n"
	"                        the statistics of all the replicas' batch (PyTorch's SyncBatchNorm,\n"
	"                        AllReduce nodes in the forward pass); default: each replica's own,\n"
	"                        as PyTorch DDP (whose running statistics are replica 0's)\n"
	"      --shard STAGE     with --replicas and --optimizer, ZeRO's sharding: each replica\n"
	"                        holds 1/N of the optimizer state (optimizer, stage 1), of the\n"
	"                        summed gradients too (gradients, stage 2: reduce-scatter), or of\n"
	"                        the parameters too (parameters, stage 3, as FSDP: each gathered\n"
	"                        before its forward and backward readers)\n"
	"      --params NAMES    train only these initializers (comma-separated names or shell\n"
	"                        patterns, such as 'fc*.weight'; each must match one); a name\n"
	"                        may be a floating-point graph input, which then gets a gradient\n"
	"                        <input>_grad too (fed each step, so no optimizer updates it)\n"
	"      --freeze NAMES    train every floating-point initializer but these (the same)\n"
	"      --from FORMAT     input format: onnx or yaml\n"
	"      --base-dir DIR    the folder the model's data files are in (needed for one read from -)\n"
	"  -h, --help            show this help\n";

/* Applies the checkpointing strategy. `memory` and `auto` need shapes (bytes), so they need every
 * dimension bound; they go through the planner, which finds the bottlenecks and weighs plans. */
static int checkpoint(struct graph *g, const struct ckpt *c, const char *loss, int explain, struct gd_err *e)
{
	if (c->kind == CKPT_MEMORY || c->kind == CKPT_AUTO || explain) {
		struct plan_opts po = {.loss = loss, .ckpt = *c, .budget = c->budget, .has_budget = c->kind == CKPT_AUTO,
				       .rewrite_only = !explain};
		struct plan_report pr;
		if (plan_memory(g, &po, &pr, e))
			return e->code;
		if (explain)
			plan_explain(stderr, &pr, explain > 1);
		if (c->kind == CKPT_AUTO && !pr.auto_plan.fits && pr.auto_plan.proved == AUTO_CHAIN) {
			char a[32], b[32], l[32];
			return err_set(e, GD_ECHECK,
				       "--checkpoint auto: no plan fits the budget %s: the least peak of any plan on the "
				       "chain's %u stage boundaries is %s (proved by an exact DP), and no plan's peak can be "
				       "below %s",
				       size_format(c->budget, b, sizeof b), pr.auto_plan.chain,
				       size_format(pr.auto_plan.chain_least, a, sizeof a),
				       size_format(pr.auto_plan.lower_bound, l, sizeof l));
		}
		if (c->kind == CKPT_AUTO && !pr.auto_plan.fits) {
			char a[32], b[32], l[32];
			return err_set(e, GD_ECHECK,
				       "--checkpoint auto: no plan found fits the budget %s: the lowest peak found is %s, and "
				       "no plan's peak can be below %s",
				       size_format(c->budget, b, sizeof b), size_format(pr.peak_after, a, sizeof a),
				       size_format(pr.auto_plan.lower_bound, l, sizeof l));
		}
		return 0;
	}
	uint8_t *keep = NULL; /* `none` too: it recasts (ckpt_choose, rc_forced) */
	struct recompute_stats st;
	int rc = ckpt_choose(g, NULL, NULL, c, &keep, NULL, e) || recompute_rewrite(g, keep, NULL, &st, e) ? e->code : 0;
	xfree(keep);
	return rc;
}

/* Records under CLI_DIMS_KEY what the training graph fixes: each --dim, and the symbolic axis 0 of
 * the data inputs --batch n sets (before graph_rebatch makes it a number), so that run, plan and
 * verify can say so when given another value. */
static int record_dims(struct graph *g, const struct exec_binding *dims, size_t n, int64_t batch)
{
	char buf[2048] = "";
	size_t k = 0;
	const char *had = g->model ? model_meta(g, CLI_DIMS_KEY) : NULL;
	if (!g->model)
		return 0;
	if (had)
		k = (size_t)snprintf(buf, sizeof buf, "%s", had);
	for (size_t i = 0; i < n && k < sizeof buf; i++)
		k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s=%" PRId64, k ? "\n" : "", dims[i].name, dims[i].value);
	for (uint32_t i = 0; batch && i < g->n_inputs && k < sizeof buf; i++) {
		const struct ttype *t = &g->inputs[i]->type;
		const char *p = !g->inputs[i]->init && t->has_shape && t->ndim && t->dims[0].kind == DIM_PARAM ? t->dims[0].param
														 : NULL;
		char line[300];
		snprintf(line, sizeof line, "\n%s=", p ? p : "");
		/* once, and not over a --dim of the same name: a line of buf that starts NAME= */
		if (p && *p && strncmp(buf, line + 1, strlen(line + 1)) && !strstr(buf, line))
			k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s=%" PRId64, k ? "\n" : "", p, batch);
	}
	return k && k < sizeof buf ? model_set_meta(g, CLI_DIMS_KEY, buf) : 0;
}

/* With --diet: which parameters are diet variables, and what happens to the rest (a note on
 * standard error; always 0). */
static int diet_note(const struct step_opts *so, const struct step_report *r)
{
	if (!so->diet.on)
		return 0;
	static const char *const opt[] = {NULL, "sgd", "adam"};
	fprintf(stderr, "graphdiet: note: --diet: %" PRIu32 " parameter%s (%" PRIu64 " elements) are diet variables",
		r->diet_params, r->diet_params == 1 ? "" : "s", r->diet_elems);
	if (!r->other_params)
		fputs("\n", stderr);
	else if (so->opt.kind != OPTIMIZER_NONE)
		fprintf(stderr, "; %" PRIu32 " (%" PRIu64 " elements: %s%s) are left to --optimizer %s\n", r->other_params,
			r->other_elems, r->others, r->other_params > 3 ? ", ..." : "", opt[so->opt.kind]);
	else
		fprintf(stderr, "; %" PRIu32 " (%" PRIu64 " elements: %s%s) keep <param>_grad outputs and are not updated "
			"in the graph (add --optimizer, or --diet-params '*')\n", r->other_params, r->other_elems, r->others,
			r->other_params > 3 ? ", ..." : "");
	return 0;
}

int cmd_train(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"to", required_argument, NULL, 't'},
		{"loss", required_argument, NULL, 'l'},   {"params", required_argument, NULL, 'p'},
		{"freeze", required_argument, NULL, 'z'}, {"from", required_argument, NULL, 'f'},
		{"loss-fn", required_argument, NULL, 'L'}, {"target", required_argument, NULL, 'T'},
		{"dim", required_argument, NULL, 'd'},
		{"checkpoint", required_argument, NULL, 'c'}, {"checkpoint-file", required_argument, NULL, 'C'},
		{"budget", required_argument, NULL, 'b'}, {"explain", optional_argument, NULL, 'x'},
		{"batch", required_argument, NULL, CLI_OPT_BATCH},
		{"control-deps", required_argument, NULL, 'D'},
		{"precision", required_argument, NULL, 'P'}, {"keep-fp32", required_argument, NULL, 'K'},
		{"fused-rnn", no_argument, NULL, 'R'},
		CLI_STEP_OPTIONS,
		{"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,         {NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO, to = FMT_AUTO;
	char to_src[64] = "";
	struct autodiff_opts ao = {0};
	const char *out = "-", *target = "target";
	int loss_fn = -1;
	int64_t batch = 0;
	struct ckpt ckpt = {0};
	struct exec_binding dims[64];
	size_t n_dims = 0;
	char *pbuf = NULL, *fbuf = NULL;
	struct names file_names = {0};
	struct cli_precision prec = {0};
	struct step_opts so = {0};
	struct graph *g = NULL;
	int c, has_budget = 0, rc = 0, explain = 0;
	enum ctrl_mode ctrl = CTRL_METADATA;
	uint32_t n_data = 0;
	int shared_rc = 0;
	optind = 1;
	cli_step_argv(argc, argv);
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 'C':
			if ((rc = cli_checkpoint("train", c, optarg, &ckpt, &file_names)))
				goto out;
			break;
		case 'x':
			if ((explain = cli_explain_level("train", optarg)) < 0)
				CLI_FAIL(GD_EINPUT);
			break;
		case 'P':
		case 'K':
			if ((rc = cli_precision("train", c, optarg, &prec)))
				goto out;
			break;
		CLI_STEP_CASES:
			if ((rc = cli_step("train", c, optarg, &so)))
				goto out;
			break;
		case 'D':
			if (ctrl_parse(optarg, &ctrl))
				CLI_FAIL(cli_usage("train", "--control-deps %s: not order, data or metadata", optarg));
			break;
		case 'b':
			if (size_parse(optarg, &ckpt.budget))
				CLI_FAIL(cli_usage("train", "--budget: '%s' is not a size (8GiB, 500MB or bytes)", optarg));
			has_budget = 1;
			break;
		case 'o':
			out = optarg;
			break;
		case 't':
			if (cli_format_arg("train", "--to", optarg, &to))
				CLI_FAIL(GD_EINPUT);
			snprintf(to_src, sizeof to_src, "--to %s", optarg);
			break;
		case 'l':
			ao.loss = optarg;
			break;
		case 'R':
			ao.fused_rnn = 1;
			break;
		case 'p':
			free(pbuf);
			ao.n_params = cli_split_names(optarg, &pbuf, (const char ***)&ao.params);
			break;
		case 'z':
			free(fbuf);
			ao.n_freeze = cli_split_names(optarg, &fbuf, (const char ***)&ao.freeze);
			break;
		case 'L':
			if (cli_loss_fn("train", optarg, &loss_fn))
				CLI_FAIL(GD_EINPUT);
			break;
		case 'T':
			target = optarg;
			break;
		case 'd':
			if (cli_add_dim("train", optarg, dims, &n_dims))
				CLI_FAIL(GD_EINPUT);
			break;
		case CLI_OPT_BATCH:
			if (cli_batch("train", optarg, &batch))
				CLI_FAIL(GD_EINPUT);
			break;
		default:
			if (cli_shared_option("train", c, help, &from, NULL, &shared_rc))
				CLI_FAIL(shared_rc);
			break;
		}
	}
	if (argc - optind != 1)
		rc = cli_usage("train", argc - optind < 1 ? "no model given" : "too many arguments");
	else if (ao.params && ao.freeze)
		rc = cli_usage("train", "give --params or --freeze, not both");
	else if ((ckpt.kind == CKPT_AUTO) != has_budget)
		rc = cli_usage("train", has_budget ? "--budget is for --checkpoint auto" : "--checkpoint auto needs --budget SIZE");
	if (!rc)
		rc = cli_output_format("train", argv[optind], out, to_src, &to, 0);
	if (!rc)
		rc = cli_refuse_binary_tty(out, to);
	g = rc ? NULL : cli_load(argv[optind], from, &rc);
	if (g) {
		struct gd_err e = {0};
		struct autodiff_result res;
		struct step_report rep;
		struct save_opts save = SAVE_OPTS_DEFAULT;
		save.align = 8; /* run uses the main graph's weights where the file is mapped, not copies (state
				 * moved to the initialization graph is packed, and copied when read) */
		size_t folded = 0;
		cli_note_eval_export(argv[optind], g);
		if ((rc = cli_check_dims(argv[optind], g, dims, n_dims)))
			goto out;
		if ((n_dims || batch) && record_dims(g, dims, n_dims, batch))
			rc = err_oom(&e);
		if (batch && !rc)
			rc = graph_rebatch(g, batch, &e);
		if (n_dims && !rc && !(rc = exec_check_bindings(g, dims, n_dims, &e)))
			rc = graph_bind_dims(g, dims, n_dims, 1, &e);
		if (!rc)
			rc = graph_fold_constants(g, &folded, &e);
		if (!rc && loss_fn >= 0) {
			rc = loss_append(g, (enum loss_fn)loss_fn, ao.loss, target, &e);
			ao.loss = rc ? NULL : loss_name(g); /* "loss", unless the model has one */
		}
		if (rc || (rc = cli_autocast(g, &prec, &e)) || (rc = step_begin(g, &so, &ao, &e)) ||
		    (rc = autodiff(g, &ao, &res, &e)) || (rc = step_build(g, &so, &rep, &e)) || (rc = diet_note(&so, &rep)) ||
		    (rc = checkpoint(g, &ckpt, ao.loss, explain, &e)) || (rc = ctrl_encode(g, ctrl, &n_data, &e)) ||
		    (rc = model_save(g, out, to, &save, &e))) {
			if (batch && rc == GD_EINPUT)
				cli_batch_hint(&e, batch);
			err_print(argv[optind], &e);
		}
	}
out:
	graph_free(g);
	free((void *)ao.params);
	free((void *)ao.freeze);
	free(pbuf);
	free(fbuf);
	names_free(&file_names);
	cli_precision_free(&prec);
	cli_step_free(&so);
	for (size_t i = 0; i < n_dims; i++)
		free((char *)dims[i].name);
	return cli_finish(rc);
}
