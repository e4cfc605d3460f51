/* verify.c - `graphdiet verify`: a training graph's gradients against the model's plain ones. */
#include "../autodiff/ad.h"
#include "../exec/comm.h"
#include "../exec/exec.h"
#include "../rewrite/fold.h"
#include "../rewrite/loss.h"
#include "../rewrite/replicas.h"
#include "../rewrite/shard.h"
#include "../rewrite/widen.h"
#include "../util/philox.h"
#include "../ops/kernel.h"
#include "../ops/ops.h"
#include "../util/emit.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "verify.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char help[] =
	"usage: graphdiet verify [options] MODEL TRAIN\n"
	"       graphdiet verify [options] --gradcheck MODEL TRAIN\n"
	"       graphdiet verify [options] --against DIR TRAIN\n"
	"       graphdiet verify [options] --against test_data_set_N MODEL\n"
	"       graphdiet verify [options] --replicas N [--steps K] [--shard STAGE] REF TRAIN\n"
	"\n"
	"Builds the plain gradients of MODEL itself, runs them and the training graph TRAIN on the same\n"
	"seeded random inputs, and compares the loss and every <param>_grad. --gradcheck and --against\n"
	"check TRAIN with something other than graphdiet's own autodiff: finite differences, or\n"
	"gradients another tool saved. Exit 0 when they match, 1 when any differs or is missing (or,\n"
	"with --replicas, when the replicas disagree), 2 for bad input, a TRAIN built with --optimizer\n"
	"or --diet included (it outputs updated parameters: verify the same command without them),\n"
	"4 when --gradcheck found no smooth direction. With --replicas N, a TRAIN built with --optimizer\n"
	"is checked step for step against REF, the same train command without --shard (see --steps).\n"
	"Each row gives max abs, max rel (over elements >= 1e-3 of the largest), mean abs, norm rel\n"
	"(|train - ref| / |ref| in the L2 norm) and a verdict; the first line states the criterion.\n"
	"\n"
	"options:\n"
	"      --gradcheck       compare TRAIN's gradients, along 3 seeded random unit directions d\n"
	"                        over its parameters, with central finite differences of MODEL's\n"
	"                        loss computed in float64: grad.d against (L(p + h d) - L(p - h d)) / 2h\n"
	"                        within atol + rtol max(|fd|, |grad * d|) (default --rtol 1e-4 --atol\n"
	"                        1e-7; TRAIN in float16: --rtol 1e-2, bfloat16 5e-2, --atol 1e-4);\n"
	"                        only where the loss is smooth: a step whose runs take other branches\n"
	"                        than p's (Relu, MaxPool, Clip, a Where's condition) is made 10 times\n"
	"                        smaller (7 times at most) until two in a row are smooth and agree;\n"
	"                        when even the smallest crosses one, another direction is tried (10\n"
	"                        at most); exit 4, inconclusive, when none is smooth; a float32 or\n"
	"                        16-bit TRAIN that differs is checked again widened to float64 (its\n"
	"                        narrow floats' rounding apart), whose verdict stands\n"
	"      --against DIR     run TRAIN on the inputs DIR holds (<input>.npy) and compare its loss\n"
	"                        and every <param>_grad with DIR's <output>.npy (PyTorch's, say: see\n"
	"                        graphdiet-verify(1)); Dropout must be off in the reference. A DIR in\n"
	"                        ONNX's backend-test layout (test_data_set_N: input_K.pb, output_K.pb,\n"
	"                        serialized TensorProtos) instead binds input K to the graph's K-th\n"
	"                        input that is not an initializer and compares output K with its K-th\n"
	"                        output: shape and dtype equal, floats within the tolerance (default\n"
	"                        --rtol 1e-4 --atol 1e-5), NaN equal to NaN, integers and bools exact;\n"
	"                        an output missing is a mismatch\n"
	"      --loss-fn FN      TRAIN was built with train --loss-fn FN (mse or cross-entropy):\n"
	"                        append the same loss to MODEL (with --target and --loss as train's)\n"
	"      --target NAME     the graph input --loss-fn adds for the targets (default: target)\n"
	"      --loss NAME       with --loss-fn: the prediction (default: the only output)\n"
	"  -i, --input NAME=FILE  with --gradcheck or --steps: data for graph input NAME (.npy or .pb;\n"
	"                        --steps: the whole batch, each replica taking its slice) in place\n"
	"                        of random values (inputs a loss is undefined for: Log's, Sqrt's)\n"
	"      --seed N          seed for the inputs and random ops (default 0)\n"
	"      --rtol R          relative tolerance (default 1e-5)\n"
	"      --atol A          absolute tolerance (default 1e-7); a value passes when\n"
	"                        |train - plain| <= atol + rtol * |plain|; 0 and 0 ask for equal bits.\n"
	"                        Without either: a TRAIN in fp16 or bf16 (train --precision) passes an\n"
	"                        output when its norm rel, and its distance from MODEL's own\n"
	"                        gradients in that precision (ref16, a second reference run) are at\n"
	"                        most 1.25 floor + 2.4e-4 (fp16) or floor + 2e-3 (bf16), the floor\n"
	"                        being ref16's norm rel (twice it where the floor is 0.5 or more);\n"
	"                        with either, each element may also differ by ref16's own error\n"
	"                        there. --against DIR (float32): atol is at least rtol * max|ref| of\n"
	"                        the output; 16-bit: norm rel <= 8 unit roundoffs (3.9e-3 fp16,\n"
	"                        3.1e-2 bf16) or every element within atol\n"
	"      --tol NAME=RTOL[,ATOL]  the outputs NAME matches (a glob: 'blocks.*.ln*') are judged\n"
	"                        element by element with these tolerances (ATOL: the default's, 0\n"
	"                        under the norm criterion); the first --tol that matches wins;\n"
	"                        repeatable\n"
	"      --dim NAME=VALUE  bind a symbolic dimension (default: the size TRAIN fixed it to,\n"
	"                        as train --dim does, else 2)\n"
	"      --replicas N      TRAIN was built with train --replicas N: run N replicas of it in\n"
	"                        this process (threads), each on its slice of a batch N times as\n"
	"                        large as TRAIN's, and compare their summed gradients and\n"
	"                        <loss>_global with MODEL's on that whole batch; the replicas'\n"
	"                        outputs must also agree bit for bit\n"
	"      --steps K         two training graphs with an optimizer, REF and TRAIN (train\n"
	"                        --replicas N --optimizer O, TRAIN with --shard too): run each as\n"
	"                        N replicas for K steps (default 4), each on its slice of the same\n"
	"                        batch (random, or --input's), carrying the state from step to\n"
	"                        step as run --steps does, and compare <loss>_global and each\n"
	"                        replica's loss at every step, and after the last every state REF\n"
	"                        binds (<param>_new, the moments, optimizer_step_new): TRAIN's, or\n"
	"                        its replicas' slices of it concatenated; within norm rel 1e-6 or\n"
	"                        equal (--rtol/--atol: element by element); TRAIN's replicas must\n"
	"                        agree bit for bit but on their slices and on what REF's differ on\n"
	"                        (each replica's own BatchNorm statistics, compared replica by\n"
	"                        replica). Chosen by TRAIN having an optimizer; --input NAME=FILE\n"
	"                        gives a whole batch input\n"
	"      --shard STAGE     as --steps: TRAIN must be built with --shard STAGE (optimizer,\n"
	"                        gradients or parameters), REF without --shard\n"
	"      --backend NAME    cpu (default) or cuda: run both graphs there (on one backend the\n"
	"                        sums repeat bit for bit, so --rtol 0 --atol 0 still holds)\n"
	"      --format FMT      text (default), json or yaml\n"
	"      --base-dir DIR    the folder the models' data files are in (needed for one read from -)\n"
	"  -h, --help            show this help\n";

/* How verify judges its rows: the criterion for all but the rows a --tol names, TRAIN's 16-bit
 * precision (0: none), and the header line that says so. */
struct judge {
	struct tol base;
	struct tol_override *ov;
	size_t n_ov;
	int precision;
	char crit[300], sum[200];
};

/* A 16-bit format's unit roundoff (2^-11 fp16, 2^-8 bf16): what the default margins are made of. */
static double unit_roundoff(int precision)
{
	return precision == DT_BFLOAT16 ? 0x1p-8 : 0x1p-11;
}

/* The default criterion where no --rtol or --atol is given (see compare.c): mode 'p' is the plain
 * one (a 16-bit reference gives the floor), 'a' --against DIR, 'o' ONNX's layout. */
static void judge_init(struct judge *j, int mode, int precision, double rtol, double atol, int given)
{
	j->precision = mode == 'o' ? 0 : precision;
	if (mode == 'o')
		j->base = (struct tol){.kind = TOL_ELEMENT, .rtol = given & 1 ? rtol : 1e-4, .atol = given & 2 ? atol : 1e-5};
	else if (given || (mode == 'p' && !precision))
		j->base = (struct tol){.kind = TOL_ELEMENT, .rtol = rtol, .atol = atol};
	else if (precision)
		j->base = (struct tol){.kind = TOL_NORM, .atol = mode == 'p' ? 0 : atol, .floor = mode == 'p',
				       .norm = mode == 'p' ? unit_roundoff(precision) / 2 : 8 * unit_roundoff(precision),
				       .slack = precision == DT_FLOAT16 ? 1.25 : 1};
	else
		j->base = (struct tol){.kind = TOL_SCALED, .rtol = rtol, .atol = atol};
	/* element criteria add the reference's 16-bit error only where there is such a reference */
	verify_tol_describe(&j->base, mode == 'p' || j->base.kind == TOL_NORM ? j->precision : 0, j->crit, sizeof j->crit,
			    j->sum, sizeof j->sum);
}

static int casts_to_16(const struct graph *g)
{
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_CAST) {
			int64_t to = attr_int(g->nodes[i], "to", 0);
			if (to == DT_FLOAT16 || to == DT_BFLOAT16)
				return (int)to;
		}
	return 0;
}

int verify_precision(const struct graph *train, const struct graph *model)
{
	int p = casts_to_16(train);
	return p && (!model || !casts_to_16(model)) ? p : 0;
}

/* The update_binding entry of a parameter that train's optimizer updates (a graph built with
 * --optimizer binds optimizer_step, one with --diet diet_step; a BatchNormalization's running
 * statistics are bound without either), or NULL. */
const struct kv *verify_updated_param(const struct graph *train)
{
	const struct kv *marker = NULL, *param = NULL;
	for (size_t i = 0; train->model && i < train->model->n_ti; i++)
		for (size_t k = 0; k < train->model->ti[i].n_update_bind; k++) {
			const struct kv *b = &train->model->ti[i].update_bind[k];
			const struct value *v = strmap_get(&train->names, b->key), *n = strmap_get(&train->names, b->value);
			if (!strcmp(b->key, "optimizer_step") || !strcmp(b->key, "diet_step"))
				marker = b;
			else if (!param && v && !(v->flags & VALUE_STATE) && n && n->producer &&
				 (n->producer->tags & TAG_BACKWARD))
				param = b;
		}
	return marker ? param ? param : marker : NULL;
}

int verify_refuse_optimizer(const struct graph *train, const char *tpath)
{
	const struct kv *b = verify_updated_param(train);
	if (!b)
		return 0;
	struct gd_err e = {0};
	err_set(&e, GD_EINPUT, "TRAIN was built with train --optimizer or --diet: its outputs are the updated "
			       "parameters ('%s' from '%s'), not their gradients; verify the graph the same train "
			       "command writes without --optimizer and --diet", b->value, b->key);
	err_print(tpath, &e);
	return GD_EINPUT;
}

int verify_output_agrees(struct graph *const *g, struct exec *const *x, int n, uint32_t i)
{
	for (int r = 1; r < n; r++) {
		const struct rtensor *a = exec_value(x[0], g[0]->outputs[i]), *b = exec_value(x[r], g[r]->outputs[i]);
		if (a->nbytes != b->nbytes || (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
			return 0;
	}
	return 1;
}

int verify_replicas_agree(struct graph *const *g, struct exec *const *x, int n, const char *local,
			  const uint8_t *skip)
{
	for (uint32_t i = 0; i < g[0]->n_outputs; i++)
		if (strcmp(g[0]->outputs[i]->name, local) && !(skip && skip[i]) && !verify_output_agrees(g, x, n, i))
			return 0;
	return 1;
}

/* The end of either --against layout: the error or the report, then everything freed. */
static int against_end(int rc, const char *path, struct gd_err *e, enum cli_out fmt, struct row *rows, size_t n_rows,
		       int all_ok, const struct judge *j, struct exec *x, struct rtensor *in, size_t n_in,
		       const char **names)
{
	if (rc)
		err_print(path, e);
	else
		report_rows(fmt, rows, n_rows, all_ok, j->crit, j->sum, 1, 1);
	exec_free(x);
	for (size_t i = 0; i < n_in; i++)
		xfree(in[i].data);
	xfree(in);
	xfree(names);
	for (size_t i = 0; i < n_rows; i++)
		if (rows[i].owned)
			free((char *)rows[i].name);
	xfree(rows);
	return rc ? rc : all_ok ? 0 : GD_ECHECK;
}

/* --against DIR: TRAIN runs on the inputs DIR holds (<input>.npy), and its loss and every
 * <param>_grad are compared with DIR's (<output>.npy, as PyTorch or any tool saves them), so that
 * a training graph is checked by something other than graphdiet's own autodiff. A gradient either
 * side lacks is MISSING. Returns 0, GD_ECHECK when anything differs, or an error. */
static int against(struct graph *train, const char *tpath, const char *dir, struct exec_opts *eo,
		   const struct judge *j, enum cli_out fmt)
{
	struct gd_err e = {0};
	uint32_t n = train->n_inputs;
	struct rtensor *in = xcalloc(n + 1, sizeof *in);
	const char **names = xcalloc(n + 1, sizeof *names);
	struct row *rows = xcalloc(train->n_outputs + 1, sizeof *rows);
	size_t n_in = 0, n_rows = 0;
	char path[4096], fn[1024];
	int rc = !in || !names || !rows ? err_oom(&e) : 0, all_ok = 1;
	for (uint32_t i = 0; !rc && i < n; i++) {
		const struct value *v = train->inputs[i];
		if (v->init)
			continue;
		cli_file_name(v->name, fn, sizeof fn);
		snprintf(path, sizeof path, "%s/%s.npy", dir, fn);
		if (access(path, F_OK))
			rc = err_set(&e, GD_EINPUT, "--against %s: no %s for TRAIN's input '%s'", dir, path, v->name);
		else if (!(rc = cli_tensor_load(path, &in[n_in], &e)))
			names[n_in++] = v->name;
	}
	for (uint32_t i = 0; !rc && i < train->n_nodes; i++)
		if (train->nodes[i]->op == OP_DROPOUT && (train->nodes[i]->tags & TAG_FORWARD)) {
			fprintf(stderr, "graphdiet: note: TRAIN has Dropout: its masks are graphdiet's, so it matches a reference "
					"made without dropout (eval mode, or p = 0) only\n");
			break;
		}
	eo->random_inputs = 0;
	eo->inputs = in;
	eo->input_names = names;
	eo->n_inputs = n_in;
	struct exec *x = rc ? NULL : exec_run(train, eo, NULL, &e);
	if (!rc && !x)
		rc = e.code;
	for (uint32_t i = 0; x && i < train->n_outputs; i++) {
		const struct value *v = train->outputs[i];
		size_t len = strlen(v->name);
		int grad = len > 5 && !strcmp(v->name + len - 5, "_grad");
		cli_file_name(v->name, fn, sizeof fn);
		snprintf(path, sizeof path, "%s/%s.npy", dir, fn);
		int have = !access(path, F_OK);
		if (!grad && !have)
			continue; /* an output the reference does not give (the loss scale, optimizer state) */
		struct row *r = &rows[n_rows++];
		*r = (struct row){.name = v->name, .missing_from = dir};
		struct rtensor t = {0};
		if (have && (rc = cli_tensor_load(path, &t, &e)))
			break;
		verify_row_tol(r, &j->base, j->ov, j->n_ov);
		compare(r, have ? &t : NULL, exec_value(x, v), &r->tol, 0, NULL);
		all_ok &= r->ok;
		free(t.data);
	}
	/* a reference gradient TRAIN does not give: a row missing from TRAIN */
	DIR *d = x && !rc ? opendir(dir) : NULL;
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t len = strlen(de->d_name);
		if (len <= 9 || strcmp(de->d_name + len - 9, "_grad.npy"))
			continue;
		int seen = 0;
		for (size_t k = 0; k < n_rows && !seen; k++) {
			cli_file_name(rows[k].name, fn, sizeof fn);
			seen = strlen(fn) == len - 4 && !strncmp(fn, de->d_name, len - 4);
		}
		struct row *grown = seen ? rows : xrealloc(rows, (n_rows + 1) * sizeof *rows);
		char *name = seen || !grown ? NULL : strndup(de->d_name, len - 4);
		if (!seen && (!grown || !name)) {
			free(name);
			rc = err_oom(&e);
			break;
		}
		rows = grown;
		if (!seen) {
			rows[n_rows] = (struct row){.name = name, .missing_from = tpath, .owned = 1, .noise = -1};
			verify_row_tol(&rows[n_rows++], &j->base, j->ov, j->n_ov);
			all_ok = 0;
		}
	}
	if (d)
		closedir(d);
	return against_end(rc, tpath, &e, fmt, rows, n_rows, all_ok, j, x, in, n_in, names);
}

/* ONNX's backend-test layout: DIR (a test_data_set_N folder) holds input_K.pb and output_K.pb,
 * serialized TensorProtos. */
static int onnx_layout(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/input_0.pb", dir);
	if (!access(path, F_OK))
		return 1;
	snprintf(path, sizeof path, "%s/output_0.pb", dir);
	return !access(path, F_OK);
}

/* The number of DIR's files <what>_0.pb, <what>_1.pb, ... in a row. */
static size_t count_pb(const char *dir, const char *what)
{
	char path[4096];
	size_t k = 0;
	for (;; k++) {
		snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, what, k);
		if (access(path, F_OK))
			return k;
	}
}

/* ONNX 1.12's backend tests store bfloat16 data as uint16 (NumPy has no bfloat16): the same bits,
 * read as the bfloat16 the model declares. */
static void bf16_bits(struct rtensor *t, int declared)
{
	if (declared == DT_BFLOAT16 && t->dtype == DT_UINT16)
		t->dtype = DT_BFLOAT16;
}

/* A sequence, map or optional value (a TypeProto without tensor_type) is refused before its data
 * is read: its file is a SequenceProto or OptionalProto, not a TensorProto. */
static int not_tensor(const struct value *v, const char *what, struct gd_err *e)
{
	if (!v->type.has_type || v->type.has_tensor)
		return 0;
	return err_set(e, GD_EINPUT, "%s '%s' is not a tensor (a sequence, map or optional type): graphdiet runs "
				     "tensors only", what, v->name);
}

/* --against DIR in ONNX's layout: input K binds MODEL's K-th graph input that is not an
 * initializer, and output K is compared with MODEL's K-th graph output. Shape and dtype must be
 * equal; floats within atol + rtol |want|, any NaN equal to any NaN, integers and bools exactly
 * (ONNX's backend tests compare so, with numpy's assert_allclose). An output MODEL lacks is
 * MISSING. Returns 0, GD_ECHECK when anything differs, or an error. */
static int against_onnx(struct graph *g, const char *mpath, const char *dir, struct exec_opts *eo,
			const struct judge *j, enum cli_out fmt)
{
	struct gd_err e = {0};
	size_t n_in_files = count_pb(dir, "input"), n_want = count_pb(dir, "output"), n_in = 0, n_rows = 0;
	struct rtensor *in = xcalloc(n_in_files + 1, sizeof *in);
	const char **names = xcalloc(n_in_files + 1, sizeof *names);
	struct row *rows = xcalloc(n_want + 1, sizeof *rows);
	char path[4096];
	int rc = !in || !names || !rows ? err_oom(&e) : 0, all_ok = 1;
	for (uint32_t i = 0; !rc && n_in < n_in_files; i++) {
		while (i < g->n_inputs && g->inputs[i]->init)
			i++;
		snprintf(path, sizeof path, "%s/input_%zu.pb", dir, n_in);
		if (i == g->n_inputs)
			rc = err_set(&e, GD_EINPUT, "--against %s: %s, but the model has only %zu graph inputs that are not "
						    "initializers", dir, path, n_in);
		else if (!(rc = not_tensor(g->inputs[i], "input", &e)) && !(rc = cli_tensor_load(path, &in[n_in], &e))) {
			bf16_bits(&in[n_in], g->inputs[i]->type.dtype);
			names[n_in++] = g->inputs[i]->name;
		}
	}
	for (uint32_t k = 0; !rc && k < g->n_outputs; k++)
		rc = not_tensor(g->outputs[k], "output", &e);
	eo->random_inputs = 0;
	eo->inputs = in;
	eo->input_names = names;
	eo->n_inputs = n_in;
	struct exec *x = rc ? NULL : exec_run(g, eo, NULL, &e);
	if (!rc && !x)
		rc = e.code;
	for (size_t k = 0; x && k < n_want; k++) {
		struct rtensor want = {0};
		snprintf(path, sizeof path, "%s/output_%zu.pb", dir, k);
		if ((rc = cli_tensor_load(path, &want, &e)))
			break;
		struct row *r = &rows[n_rows++];
		const struct value *v = k < g->n_outputs ? g->outputs[k] : NULL;
		const struct rtensor *got = v ? exec_value(x, v) : NULL;
		*r = (struct row){.name = v ? v->name : strdup(path), .owned = !v, .missing_from = mpath, .noise = -1};
		if (!r->name) {
			xfree(want.data);
			rc = err_oom(&e);
			break;
		}
		char gs[64], ws[64];
		verify_row_tol(r, &j->base, j->ov, j->n_ov);
		if (got)
			bf16_bits(&want, got->dtype);
		if (got && (got->dtype != want.dtype || got->ndim != want.ndim ||
			    memcmp(got->dims, want.dims, sizeof *got->dims * (size_t)got->ndim))) {
			r->found = 1;
			snprintf(r->why, sizeof r->why, ": %s %s, want %s %s", dtype_name(got->dtype),
				 rt_shape_str(got, gs, sizeof gs), dtype_name(want.dtype), rt_shape_str(&want, ws, sizeof ws));
		} else {
			compare(r, &want, got, &r->tol, CMP_NAN_EQUAL | CMP_EXACT_INTS, NULL);
		}
		all_ok &= r->ok;
		xfree(want.data);
	}
	return against_end(rc, mpath, &e, fmt, rows, n_rows, all_ok, j, x, in, n_in, names);
}

void carried_free(struct carried *c)
{
	for (size_t i = 0; c->t && i < c->n; i++)
		xfree(c->t[i].data);
	xfree(c->t);
	xfree(c->names);
	memset(c, 0, sizeof *c);
}

/* A step TRAIN skipped (a dynamic loss scale that overflowed: found_inf true, its gradients not
 * finite by design) has nothing to compare. Training would go on from the state that step left
 * (the scale lowered; a skipped step changes nothing else), so TRAIN runs again from there, on
 * the same inputs, until a step is not skipped (at most 64 runs). Returns the executor of that
 * step (xt, or a new one, which borrows *c's data: free it after), NULL on an error. */
struct exec *unskipped(struct graph *train, struct exec_opts *eo, struct exec *xt, struct carried *c,
			      struct gd_err *e)
{
	const struct value *found = strmap_get(&train->names, "found_inf");
	int skips = 0;
	if (!found || !(found->flags & VALUE_OUTPUT) || !train->model)
		return xt;
	size_t n = 0;
	for (size_t i = 0; i < train->model->n_ti; i++)
		n += train->model->ti[i].n_update_bind;
	while (xt && rt_get(exec_value(xt, found), 0) != 0 && skips < 64) {
		struct carried next = {xcalloc(n + 1, sizeof *next.t), xcalloc(n + 1, sizeof *next.names), 0};
		int oom = !next.t || !next.names;
		for (size_t i = 0; !oom && i < train->model->n_ti; i++)
			for (size_t j = 0; j < train->model->ti[i].n_update_bind; j++) {
				const struct kv *b = &train->model->ti[i].update_bind[j];
				const struct value *v = strmap_get(&train->names, b->value);
				const struct rtensor *t = v ? exec_value(xt, v) : NULL;
				if (!t || !t->data || !t->known)
					continue;
				struct rtensor *d = &next.t[next.n];
				*d = *t;
				d->owned = 0;
				d->dev = NULL;
				if ((oom = !(d->data = xmalloc(t->nbytes ? t->nbytes : 1))))
					break;
				memcpy(d->data, t->data, t->nbytes);
				next.names[next.n++] = b->key;
			}
		exec_free(xt); /* it may have borrowed the last state: freed only now */
		xt = NULL;
		carried_free(c);
		*c = next;
		if (oom) {
			err_oom(e);
			break;
		}
		eo->inputs = c->t;
		eo->input_names = c->names;
		eo->n_inputs = c->n;
		xt = exec_run(train, eo, NULL, e);
		skips++;
	}
	eo->inputs = NULL;
	eo->input_names = NULL;
	eo->n_inputs = 0;
	if (xt && skips)
		fprintf(stderr, "graphdiet: note: TRAIN skipped %d step%s (its dynamic loss scale overflowed); the step "
				"compared is the next one, from the state %s left\n",
			skips, skips == 1 ? "" : "s", skips == 1 ? "it" : "they");
	return xt;
}

/* The dimensions TRAIN fixed (train --dim batch=4 writes [4, 20] where MODEL says [batch, 20])
 * bind MODEL's symbolic ones the same way, unless --dim names them: otherwise the two graphs would
 * run on different batches and could never match. A --dim that says otherwise is an error. A
 * static export that train --batch N rebatched is rebatched too. */
int bind_like_train(struct graph *plain, const struct graph *train, struct exec_binding *dims, size_t *n,
			   struct gd_err *e)
{
	int64_t rebatch = 0; /* train --batch N made a static export's axis 0 N */
	for (uint32_t i = 0; i < plain->n_inputs; i++) {
		const struct value *p = plain->inputs[i], *t = strmap_get(&train->names, p->name);
		if (p->init || !t || t->type.ndim != p->type.ndim)
			continue;
		for (uint32_t a = 0; a < p->type.ndim; a++) {
			const struct dim *pd = &p->type.dims[a], *td = &t->type.dims[a];
			if (a == 0 && pd->kind == DIM_VALUE && td->kind == DIM_VALUE && pd->value != td->value)
				rebatch = td->value;
			if (pd->kind != DIM_PARAM || td->kind != DIM_VALUE || *n == 64)
				continue;
			size_t k = 0;
			while (k < *n && strcmp(dims[k].name, pd->param))
				k++;
			if (k < *n && dims[k].value != td->value)
				return err_set(e, GD_EINPUT, "--dim %s=%lld, but TRAIN fixed %s to %lld (its input '%s')",
					       pd->param, (long long)dims[k].value, pd->param, (long long)td->value,
					       p->name);
			if (k == *n && (dims[k].name = strdup(pd->param)))
				dims[(*n)++].value = td->value;
		}
	}
	return rebatch ? graph_rebatch(plain, rebatch, e) : 0;
}

struct graph *load_model(const char *path, const struct model_loss *ml, int *rc)
{
	struct gd_err e = {0};
	struct graph *m = cli_load(path, FMT_AUTO, rc);
	if (m && ml->fn >= 0 && loss_append(m, (enum loss_fn)ml->fn, ml->pred, ml->target, &e)) {
		err_print(path, &e);
		*rc = e.code;
		graph_free(m);
		return NULL;
	}
	return m;
}

/* --input NAME=FILE: names[i] (strdup'd) and given[i]'s data; nonzero after the message. The
 * caller frees both, whatever this returned. */
static int load_inputs(const char *const *args, size_t n, struct rtensor *given, const char **names)
{
	struct gd_err e = {0};
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(args[i], '=');
		names[i] = eq && eq != args[i] ? strndup(args[i], (size_t)(eq - args[i])) : NULL;
		if (!eq || eq == args[i] || !eq[1])
			return cli_usage("verify", "--input wants NAME=FILE (.npy or .pb), not '%s'", args[i]);
		if (!names[i] || cli_tensor_load(eq + 1, &given[i], &e))
			return (err_print(NULL, names[i] ? &e : (err_oom(&e), &e)), e.code);
	}
	return 0;
}

int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seed", required_argument, NULL, 's'}, {"rtol", required_argument, NULL, 'r'},
		{"atol", required_argument, NULL, 'a'}, {"dim", required_argument, NULL, 'd'},
		{"format", required_argument, NULL, 'F'}, {"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,
		{"replicas", required_argument, NULL, 'R'}, {"backend", required_argument, NULL, 'B'},
		{"against", required_argument, NULL, 'A'}, {"gradcheck", no_argument, NULL, 'G'},
		{"loss-fn", required_argument, NULL, 'L'}, {"target", required_argument, NULL, 'g'},
		{"loss", required_argument, NULL, 'l'}, {"input", required_argument, NULL, 'i'},
		{"tol", required_argument, NULL, 'T'}, {"steps", required_argument, NULL, 'k'},
		{"shard", required_argument, NULL, 'H'}, {NULL, 0, NULL, 0},
	};
	int n_rep = 0;
	const struct backend *be = NULL;
	const char *backend_name = NULL, *against_dir = NULL;
	double rtol = 1e-5, atol = 1e-7;
	int fd_check = 0, rtol_given = 0, atol_given = 0;
	enum cli_out fmt = OUT_TEXT;
	struct exec_binding dims[64];
	size_t n_dims = 0;
	uint64_t seed = 0;
	int c;
	int shared_rc = 0;
	struct model_loss ml = {.fn = -1, .target = "target"};
	const char *inargs[64];
	size_t n_in = 0;
	struct tol_override ov[64];
	struct judge j = {.ov = ov};
	long steps = 0; /* --steps (0: not given) */
	int shard = -1; /* --shard */
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hi:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (cli_parse_seed("verify", optarg, &seed))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'r':
			if (verify_parse_tol(optarg, &rtol))
				return cli_dims_free(dims, n_dims, cli_usage("verify", "--rtol: '%s' is not a tolerance", optarg));
			rtol_given = 1;
			break;
		case 'a':
			if (verify_parse_tol(optarg, &atol))
				return cli_dims_free(dims, n_dims, cli_usage("verify", "--atol: '%s' is not a tolerance", optarg));
			atol_given = 1;
			break;
		case 'd':
			if (cli_add_dim("verify", optarg, dims, &n_dims))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'R':
			if (cli_replicas("verify", optarg, &n_rep))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'B':
			backend_name = optarg;
			break;
		case 'A':
			against_dir = optarg;
			break;
		case 'G':
			fd_check = 1;
			break;
		case 'L':
			if (cli_loss_fn("verify", optarg, &ml.fn))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'g':
			ml.target = optarg;
			break;
		case 'l':
			ml.pred = optarg;
			break;
		case 'T':
			if (j.n_ov == 64)
				return cli_dims_free(dims, n_dims, cli_usage("verify", "too many --tol options"));
			if (verify_parse_tol_override(optarg, &ov[j.n_ov]))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			j.n_ov++;
			break;
		case 'k': {
			int64_t k;
			if (cli_parse_i64(optarg, 1, 1000000, &k))
				return cli_dims_free(dims, n_dims, cli_usage("verify", "--steps %s: not a whole number from 1 to 1000000", optarg));
			steps = (long)k;
			break;
		}
		case 'H':
			if ((shard = shard_parse(optarg)) < 0)
				return cli_dims_free(dims, n_dims, cli_usage("verify", "--shard %s: not optimizer, gradients or parameters", optarg));
			break;
		case 'i':
			if (n_in == 64)
				return cli_dims_free(dims, n_dims, cli_usage("verify", "too many --input options"));
			inargs[n_in++] = optarg;
			break;
		default:
			if (cli_shared_option("verify", c, help, NULL, &fmt, &shared_rc))
				return cli_dims_free(dims, n_dims, shared_rc);
			break;
		}
	}
	int brc = 0;
	if (against_dir && (argc - optind != 1 || n_rep > 1))
		brc = cli_usage("verify", argc - optind != 1 ? "--against DIR takes the training graph alone"
							: "--against does not take --replicas");
	else if (!against_dir && argc - optind != 2)
		brc = cli_usage("verify", "give the model and its training graph");
	else if ((steps || shard >= 0) && (against_dir || fd_check || n_rep <= 1))
		brc = cli_usage("verify", "--steps and --shard go with --replicas N REF TRAIN (two training graphs)");
	if (!brc && backend_name)
		brc = cli_backend(backend_name, &be);
	if (!brc && against_dir) {
		struct graph *t = cli_load(argv[optind], FMT_AUTO, &brc);
		struct exec_opts eo = {.seed = seed, .dims = dims, .n_dims = n_dims, .default_dim = 2, .backend = be};
		int onnx = t && onnx_layout(against_dir);
		if (t)
			judge_init(&j, onnx ? 'o' : 'a', verify_precision(t, NULL), rtol, atol, rtol_given | atol_given << 1);
		if (t && (brc = cli_check_dims(argv[optind], t, dims, n_dims)))
			;
		else if (t && onnx)
			brc = against_onnx(t, argv[optind], against_dir, &eo, &j, fmt);
		else if (t && !(brc = verify_refuse_optimizer(t, argv[optind])))
			brc = against(t, argv[optind], against_dir, &eo, &j, fmt);
		if (t && (brc == 0 || brc == GD_ECHECK))
			verify_note_unmatched(ov, j.n_ov);
		graph_free(t);
		brc = cli_finish(brc);
	}
	if (!brc && n_in && !fd_check && n_rep <= 1)
		brc = cli_usage("verify", "--input goes with --gradcheck, or --replicas N of two training graphs");
	if (!brc && fd_check && (against_dir || n_rep > 1 || j.n_ov))
		brc = cli_usage("verify", "--gradcheck takes neither --against, --replicas nor --tol");
	struct rtensor given[64];
	const char *names[64] = {0};
	memset(given, 0, sizeof given);
	if (!brc && (fd_check || n_in))
		brc = load_inputs(inargs, n_in, given, names);
	if (!brc && fd_check) {
		struct exec_opts eo = {.random_inputs = 1, .seed = seed, .default_dim = 2, .backend = be,
				       .inputs = given, .input_names = names, .n_inputs = n_in};
		brc = cli_finish(run_gradcheck(argv[optind], argv[optind + 1], &ml, dims, &n_dims, &eo, rtol_given ? rtol : NAN,
					       atol_given ? atol : NAN, fmt));
	}
	const char *mpath = argv[optind], *tpath = brc || against_dir || fd_check ? NULL : argv[optind + 1];
	int rc = 0;
	struct gd_err e = {0};
	/* --replicas N of a TRAIN with an optimizer: REF is the unsharded replicas' training graph */
	struct graph *train = tpath && n_rep > 1 ? cli_load(tpath, FMT_AUTO, &rc) : NULL;
	if (train && (steps || shard >= 0 || verify_updated_param(train))) {
		struct verify_steps_opts so = {.n_rep = n_rep, .shard = shard, .steps = steps ? steps : 4, .ov = ov, .n_ov = j.n_ov};
		struct exec_opts eo = {.random_inputs = 1, .seed = seed, .dims = dims, .n_dims = n_dims, .default_dim = 2,
				       .backend = be, .inputs = given, .input_names = names, .n_inputs = n_in};
		verify_steps_judge(&so, rtol, atol, rtol_given | atol_given << 1);
		if (ml.fn >= 0 || ml.pred)
			rc = cli_usage("verify", "--loss-fn and --loss go with MODEL, not two training graphs");
		else if (!(rc = cli_check_dims(tpath, train, dims, n_dims)))
			rc = run_verify_steps(mpath, tpath, train, &eo, &so, fmt);
		graph_free(train);
		train = NULL;
		brc = cli_finish(rc);
		tpath = NULL;
	} else if (!rc && tpath && n_in) {
		rc = cli_usage("verify", "--input goes with --gradcheck, or --replicas N of two training graphs");
	}
	for (size_t i = 0; i < n_in; i++) {
		free((char *)names[i]);
		xfree(given[i].data);
	}
	if (brc || !tpath || rc) {
		graph_free(train);
		for (size_t i = 0; i < n_dims; i++)
			free((char *)dims[i].name);
		return brc ? brc : rc ? cli_finish(rc) : 0;
	}
	struct graph *plain = load_model(mpath, &ml, &rc);
	if (plain && !train)
		train = cli_load(tpath, FMT_AUTO, &rc);
	if (!plain) {
		graph_free(train);
		train = NULL;
	}
	struct exec *xp = NULL, *xt = NULL;
	struct carried carry = {0};
	struct row *rows = NULL; /* one per compared output: the loss and the gradients autodiff adds */
	size_t n_rows = 0;
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	if (train && ((rc = cli_check_dims(mpath, plain, dims, n_dims)) || (rc = verify_refuse_optimizer(train, tpath))))
		; /* a --dim MODEL does not have (cli.h), or a TRAIN with an optimizer */
	else if (train && bind_like_train(plain, train, dims, &n_dims, &e)) {
		err_print(tpath, &e);
		rc = e.code;
	}
	/* a 16-bit TRAIN is judged against the float32 reference with the same model's gradients in
	 * the same 16 bits as the measure of what the precision costs (compare.c) */
	if (train && !rc)
		judge_init(&j, 'p', verify_precision(train, plain), rtol, atol, rtol_given | atol_given << 1);
	struct graph *p16 = NULL;
	struct exec *x16 = NULL;
	/* --replicas N (N > 1): the replicas' graphs (the first is train) and executors */
	struct graph **rg = NULL;
	struct exec **rx = NULL;
	const char *bn = train && n_rep > 1 ? model_meta(train, REPLICAS_BATCH_NORM_KEY) : NULL;
	if (!rc && bn && !strcmp(bn, "replica")) {
		err_set(&e, GD_EINPUT, "--replicas %d: its BatchNormalization normalises each replica's slice with the "
				       "slice's own statistics (as PyTorch DDP), which is not the whole batch MODEL runs; "
				       "build it with train --sync-batchnorm to verify", n_rep);
		err_print(tpath, &e);
		rc = e.code;
	}
	if (train && !rc && n_rep > 1 && !(rc = cli_load_copies(tpath, FMT_AUTO, train, n_rep, &rg)) &&
	    !(rx = xcalloc((size_t)n_rep, sizeof *rx))) {
		err_print(tpath, (err_oom(&e), &e));
		rc = e.code;
	}
	if (train && !rc && autodiff(plain, &ao, &res, &e)) {
		err_print(mpath, &e);
		rc = e.code;
	}
	if (train && !rc && !(rows = xcalloc(plain->n_outputs + 1, sizeof *rows))) {
		err_print(mpath, (err_oom(&e), &e));
		rc = e.code;
	}
	/* the reference runs on the whole batch, the replicas on their slices of it */
	struct exec_opts eo = {.random_inputs = 1, .seed = seed, .dims = dims, .n_dims = n_dims, .default_dim = 2,
			       .batch_times = n_rep > 1 ? n_rep : 1, .backend = be};
	if (train && !rc && !(xp = exec_run(plain, &eo, NULL, &e))) {
		if (n_rep > 1 && e.code == GD_EINPUT)
			err_prefix(&e, "--replicas %d: on the whole batch (%d times TRAIN's; MODEL needs a symbolic batch "
				       "axis)", n_rep, n_rep);
		err_print(mpath, &e);
		rc = e.code;
	}
	if (xp && !rc && j.precision && (p16 = load_model(mpath, &ml, &rc))) {
		struct cli_precision prec = {.dtype = j.precision};
		struct autodiff_opts ao16 = {0};
		struct autodiff_result res16;
		if (bind_like_train(p16, train, dims, &n_dims, &e) || cli_autocast(p16, &prec, &e) ||
		    autodiff(p16, &ao16, &res16, &e) || !(x16 = exec_run(p16, &eo, NULL, &e))) {
			err_prefix(&e, "MODEL in %s (the noise floor's reference)", j.precision == DT_BFLOAT16 ? "bf16" : "fp16");
			err_print(mpath, &e);
			rc = e.code;
		}
	}
	/* a reference whose loss is NaN has nothing to compare: say so rather than match NaN with NaN */
	const struct rtensor *ploss = xp && res.loss ? exec_value(xp, res.loss) : NULL;
	for (int64_t k = 0; ploss && ploss->data && k < ploss->numel && !rc; k++)
		if (isnan(rt_get(ploss, k))) {
			rc = err_set(&e, GD_EINPUT, "the model's loss '%s' is NaN on these inputs: nothing to compare",
				     res.loss->name);
			err_print(mpath, &e);
		}
	eo.batch_times = 1;
	if (xp && !rc && n_rep > 1) {
		if ((rc = comm_run_replicas(rg, n_rep, &eo, rx, NULL, &e)))
			err_print(tpath, &e);
		xt = rx[0];
	} else if (xp && !rc && !(xt = exec_run(train, &eo, NULL, &e))) {
		err_print(tpath, &e);
		rc = e.code;
	} else if (xt && !rc && !(xt = unskipped(train, &eo, xt, &carry, &e))) {
		err_print(tpath, &e);
		rc = e.code;
	}
	/* the loss over the whole batch, when TRAIN has it (replicas) */
	char global[600];
	snprintf(global, sizeof global, "%s_global", xt && res.loss ? res.loss->name : "");
	const struct value *tglobal = xt ? strmap_get(&train->names, global) : NULL;
	if (tglobal && !(tglobal->flags & VALUE_OUTPUT))
		tglobal = NULL;
	int agree = !xt || n_rep <= 1 || verify_replicas_agree(rg, rx, n_rep, res.loss->name, NULL), all_ok = agree;
	for (uint32_t i = 0; xt && i < plain->n_outputs; i++) {
		const struct value *v = plain->outputs[i];
		if (v != res.loss && !(v->flags & VALUE_GRAD))
			continue;
		struct row *r = &rows[n_rows++];
		*r = (struct row){.name = v->name, .missing_from = tpath, .noise = -1};
		const struct value *w = v == res.loss ? tglobal : NULL;
		for (uint32_t k = 0; k < train->n_outputs && !w; k++)
			if (!strcmp(train->outputs[k]->name, v->name))
				w = train->outputs[k];
		const struct value *v16 = x16 ? strmap_get(&p16->names, v->name) : NULL;
		verify_row_tol(r, &j.base, ov, j.n_ov);
		compare(r, exec_value(xp, v), w ? exec_value(xt, w) : NULL, &r->tol, 0,
			v16 && (v16->flags & VALUE_OUTPUT) ? exec_value(x16, v16) : NULL);
		all_ok &= r->ok;
	}
	if (xt) {
		report_rows(fmt, rows, n_rows, all_ok, j.crit, j.sum, n_rep, agree);
		verify_note_unmatched(ov, j.n_ov);
	}
	if (xt && !all_ok)
		rc = GD_ECHECK;
	exec_free(xp);
	exec_free(x16);
	graph_free(p16);
	for (int r = 0; rx && r < n_rep; r++)
		exec_free(rx[r]);
	if (!rx)
		exec_free(xt);
	carried_free(&carry);
	xfree(rx);
	xfree(rows);
	cli_free_copies(rg, n_rep);
	graph_free(plain);
	graph_free(train);
	for (size_t i = 0; i < n_dims; i++)
		free((char *)dims[i].name);
	return cli_finish(rc);
}
