/* common.c - what the subcommands share: usage errors, format options, loading with messages. */
#include "../exec/exec.h"
#include "../io/names.h"
#include "../io/npy.h"
#include "../io/onnx.h"
#include "../util/fileio.h"
#include "../util/xalloc.h"
#include "../ops/ops.h"
#include "../plan/strategy.h"
#include "../rewrite/autocast.h"
#include "../rewrite/shard.h"
#include "../rewrite/loss.h"
#include "../rewrite/step.h"
#include "../util/size.h"
#include "../exec/backend.h"
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char **cli_argv;

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "graphdiet: error: %s%s", cmd ? cmd : "", cmd ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'graphdiet %s%s--help')\n", cmd ? cmd : "", cmd ? " " : "");
	return GD_EINPUT;
}

/* getopt_long's '?' (an unknown option), ':' (one without its value) and an option of the table
 * that this command does not take, named as the user wrote them: the long form up to any '=', or
 * the short letter. An option that took its value from the next argument (optarg is that argument)
 * is the argument before it: `check --format json` named '-?' when it read "json" as the option. */
static int option_error(const char *cmd, int c)
{
	extern int optind, optopt;
	extern char *optarg;
	int at = optind - 1;
	if (c != '?' && c != ':' && optarg && at > 0 && cli_argv && optarg == cli_argv[at])
		at--;
	const char *arg = at >= 0 && cli_argv ? cli_argv[at] : NULL;
	char name[64];
	if (arg && !strncmp(arg, "--", 2))
		snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
	else if (c != '?' && c != ':' && c > ' ' && c < 127)
		snprintf(name, sizeof name, "-%c", c);
	else
		snprintf(name, sizeof name, "-%c", optopt > ' ' && optopt < 127 ? optopt : '?');
	if (c == ':')
		return cli_usage(cmd, "option '%s' needs a value", name);
	return cli_usage(cmd, "unknown option '%s'", name);
}

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
	char *end;
	if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return -1; /* strtoll would skip spaces and take '+' */
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end || errno == ERANGE || x < lo || x > hi)
		return -1;
	*v = x;
	return 0;
}

int cli_format_arg(const char *cmd, const char *opt, const char *arg, enum gd_format *out)
{
	*out = format_parse(arg);
	if (*out == FMT_AUTO)
		return cli_usage(cmd, "%s: unknown format '%s' (onnx, yaml or dot)", opt, arg);
	return 0;
}

int cli_out_arg(const char *cmd, const char *arg, enum cli_out *out)
{
	if (!strcmp(arg, "text"))
		*out = OUT_TEXT;
	else if (!strcmp(arg, "json"))
		*out = OUT_JSON;
	else if (!strcmp(arg, "yaml"))
		*out = OUT_YAML;
	else
		return cli_usage(cmd, "--format: unknown value '%s' (text, json or yaml)", arg);
	return 0;
}

struct graph *cli_load(const char *path, enum gd_format fmt, int *rc)
{
	struct gd_err e = {0};
	struct graph *g = model_load(path, fmt, &e);
	if (!g) {
		err_print(path, &e);
		*rc = e.code ? e.code : GD_EINTERNAL;
	}
	if (g)
		step_mark_state(g);
	return g;
}

int cli_load_copies(const char *path, enum gd_format fmt, struct graph *first, int n, struct graph ***out)
{
	int rc = 0;
	struct graph **g = calloc((size_t)n, sizeof *g);
	if (!g) {
		fprintf(stderr, "graphdiet: error: out of memory\n");
		return GD_EINTERNAL;
	}
	g[0] = first;
	for (int r = 1; r < n && !rc; r++)
		g[r] = cli_load(path, fmt, &rc);
	*out = g;
	return rc;
}

void cli_free_copies(struct graph **g, int n)
{
	for (int r = 1; g && r < n; r++)
		graph_free(g[r]);
	free(g);
}

int cli_refuse_binary_tty(const char *path, enum gd_format fmt)
{
	if (strcmp(path, "-") == 0 && (fmt == FMT_ONNX || fmt == FMT_AUTO) && isatty(1)) {
		fputs("graphdiet: error: refusing to write a binary ONNX model to a terminal; "
		      "use -o FILE, redirect, or --to yaml\n",
		      stderr);
		return GD_EINPUT;
	}
	return 0;
}

int cli_finish(int rc)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (!rc && errno != EPIPE) /* an error reported already is likely this one */
			fprintf(stderr, "graphdiet: error: cannot write to standard output: %s\n", strerror(errno));
		return rc ? rc : GD_EINPUT;
	}
	return rc;
}

static int parse_dim(const char *cmd, const char *arg, struct exec_binding *b)
{
	const char *eq = strchr(arg, '=');
	int64_t v;
	if (!eq || eq == arg)
		return cli_usage(cmd, "--dim wants NAME=VALUE, not '%s'", arg);
	if (cli_parse_i64(eq + 1, 0, INT64_MAX, &v))
		return cli_usage(cmd, "--dim %s: '%s' is not a size", arg, eq + 1);
	if (v == 0) /* an empty batch plans 0 FLOPs and 0 bytes: never what was meant */
		return cli_usage(cmd, "--dim %s: a dimension must be at least 1", arg);
	b->name = strndup(arg, (size_t)(eq - arg));
	b->value = v;
	return 0;
}

int cli_dims_free(struct exec_binding *dims, size_t n, int rc)
{
	for (size_t i = 0; i < n; i++)
		free((char *)dims[i].name);
	return rc;
}

int cli_add_dim(const char *cmd, const char *arg, struct exec_binding *dims, size_t *n)
{
	if (*n == 64)
		return cli_usage(cmd, "too many --dim options");
	if (parse_dim(cmd, arg, &dims[*n]))
		return GD_EINPUT;
	/* bound before: the same value is harmless, another one a mistake */
	for (size_t k = 0; k < *n; k++)
		if (!strcmp(dims[k].name, dims[*n].name)) {
			int64_t was = dims[k].value, now = dims[*n].value;
			free((char *)dims[*n].name);
			if (was != now)
				return cli_usage(cmd, "--dim %s is bound to both %lld and %lld", dims[k].name, (long long)was,
						 (long long)now);
			return 0;
		}
	(*n)++;
	return 0;
}

/* A serialized TensorProto (ONNX's test_data_set_N/input_K.pb) into t, through the model reader's
 * own decoding (io/onnx.h). */
static int pb_load(const uint8_t *buf, size_t len, struct rtensor *t, struct gd_err *e)
{
	struct arena a;
	arena_init(&a);
	const struct tensor *pt = onnx_read_tensor(buf, len, &a, e);
	int rc = pt ? 0 : e->code;
	int64_t numel = 1;
	for (uint32_t i = 0; !rc && i < pt->ndim; i++) {
		if (pt->dims[i] < 0 || (pt->dims[i] && numel > INT64_MAX / 8 / pt->dims[i]))
			rc = err_set(e, GD_EINPUT, "tensor '%s': dimension %" PRId64 " is not a size", pt->name ? pt->name : "",
				     pt->dims[i]);
		numel *= rc ? 1 : pt->dims[i];
	}
	size_t es = pt && dtype_valid(pt->dtype) ? dtype_size(pt->dtype) : 0;
	size_t have = pt && pt->src == TSRC_BYTES ? pt->bytes.n : 0;
	if (rc)
		;
	else if (!es)
		rc = err_set(e, GD_EINPUT, "tensor '%s': data type %s is not one the executor reads", pt->name ? pt->name : "",
			     dtype_valid(pt->dtype) ? dtype_name(pt->dtype) : "undefined");
	else if (pt->ndim > RT_MAX_DIMS)
		rc = err_set(e, GD_EINPUT, "rank %u is more than %d", pt->ndim, RT_MAX_DIMS);
	else if (have != (size_t)numel * es)
		rc = err_set(e, GD_EINPUT, "tensor '%s': %zu bytes of data for %" PRId64 " elements of %s",
			     pt->name ? pt->name : "", have, numel, dtype_name(pt->dtype));
	if (!rc) {
		t->dtype = pt->dtype;
		t->ndim = (int)pt->ndim;
		if (pt->ndim) /* a scalar has no dims array */
			memcpy(t->dims, pt->dims, pt->ndim * sizeof *pt->dims);
		t->numel = numel;
		t->nbytes = have;
		if (!(t->data = xmalloc(have ? have : 1))) /* aligned for the kernels */
			rc = err_oom(e);
		else if (have)
			memcpy(t->data, pt->bytes.p, have);
	}
	arena_free(&a);
	return rc;
}

static int npy_load(const uint8_t *buf, size_t len, struct rtensor *t, struct gd_err *e)
{
	struct npy n;
	int rc = npy_parse(buf, len, &n, e);
	if (!rc && n.ndim > RT_MAX_DIMS)
		rc = err_set(e, GD_EINPUT, "rank %u is more than %d", n.ndim, RT_MAX_DIMS);
	if (!rc) {
		t->dtype = n.dtype;
		t->ndim = (int)n.ndim;
		memcpy(t->dims, n.dims, n.ndim * sizeof *n.dims);
		t->numel = (int64_t)(n.nbytes / (dtype_size(n.dtype) ? dtype_size(n.dtype) : 1));
		t->nbytes = n.nbytes;
		t->data = xmalloc(n.nbytes ? n.nbytes : 1); /* aligned for the kernels */
		if (!t->data)
			rc = err_oom(e);
		else
			memcpy(t->data, n.data, n.nbytes);
	}
	return rc;
}

int cli_tensor_load(const char *path, struct rtensor *t, struct gd_err *e)
{
	struct filebuf fb;
	memset(t, 0, sizeof *t);
	if (filebuf_open(&fb, path, e)) {
		err_prefix(e, "%s", path);
		return e->code;
	}
	/* .npy by its magic; a file named .pb that is not one is a TensorProto */
	size_t pl = strlen(path);
	int npy = fb.len >= 6 && !memcmp(fb.data, "\x93NUMPY", 6);
	int rc = !npy && pl > 3 && !strcmp(path + pl - 3, ".pb") ? pb_load(fb.data, fb.len, t, e)
								   : npy_load(fb.data, fb.len, t, e);
	if (rc)
		err_prefix(e, "%s", path);
	filebuf_close(&fb);
	return rc;
}

void cli_file_name(const char *name, char *buf, size_t n)
{
	size_t k = 0;
	for (; *name && k + 1 < n; name++)
		buf[k++] = (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') || (*name >= '0' && *name <= '9') ||
				   *name == '.' || *name == '-' || *name == '_'
			   ? *name
			   : '_';
	buf[k] = 0;
	if (!k || !strcmp(buf, ".") || !strcmp(buf, ".."))
		snprintf(buf, n, "output");
}

int cli_batch(const char *cmd, const char *arg, int64_t *n)
{
	if (cli_parse_i64(arg, 1, INT64_MAX, n))
		return cli_usage(cmd, "--batch %s: not a batch size (1 or more)", arg);
	return 0;
}

void cli_batch_hint(struct gd_err *e, int64_t n)
{
	if (!e->at_run || strstr(e->msg, "--batch"))
		return; /* not a node refusing the shapes it was given */
	err_prefix(e, "--batch %lld: the export fixed its batch in a shape that does not follow (export it with a "
		      "dynamic batch axis)", (long long)n);
}

int cli_explain_level(const char *cmd, const char *arg)
{
	if (!arg)
		return 1;
	if (!strcmp(arg, "all"))
		return 2;
	cli_usage(cmd, "--explain=%s: the only value is 'all'", arg);
	return -1;
}

int cli_loss_fn(const char *cmd, const char *arg, int *fn)
{
	if (!strcmp(arg, "mse"))
		*fn = LOSS_MSE;
	else if (!strcmp(arg, "cross-entropy"))
		*fn = LOSS_CROSS_ENTROPY;
	else
		return cli_usage(cmd, "--loss-fn: '%s' is not mse or cross-entropy", arg);
	return 0;
}

int cli_parse_seed(const char *cmd, const char *arg, uint64_t *seed)
{
	char *end;
	errno = 0;
	*seed = strtoull(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || errno)
		return cli_usage(cmd, "--seed: '%s' is not a number", arg);
	return 0;
}

int cli_shared_option(const char *cmd, int c, const char *help, enum gd_format *from, enum cli_out *fmt, int *rc)
{
	extern char *optarg;
	if (c == 'f' && from) {
		*rc = cli_format_arg(cmd, "--from", optarg, from);
		return *rc != 0;
	}
	if (c == 'F' && fmt) {
		*rc = cli_out_arg(cmd, optarg, fmt);
		return *rc != 0;
	}
	if (c == CLI_OPT_BASE_DIR) {
		struct stat st;
		if (stat(optarg, &st) || !S_ISDIR(st.st_mode)) {
			*rc = cli_usage(cmd, "--base-dir %s: not a directory", optarg);
			return 1;
		}
		model_base_dir(optarg);
		return 0;
	}
	if (c == 'h') {
		fputs(help, stdout);
		*rc = cli_finish(0);
		return 1;
	}
	*rc = option_error(cmd, c);
	return 1;
}

int cli_checkpoint(const char *cmd, int opt, const char *arg, struct ckpt *c, struct names *store)
{
	if (c->kind != CKPT_NONE)
		return cli_usage(cmd, "give one --checkpoint or --checkpoint-file");
	if (opt == 'c') {
		if (ckpt_parse(arg, c))
			return cli_usage(cmd, "--checkpoint %s: not a strategy (none, speed, memory, auto, list:NAME,...)", arg);
		return 0;
	}
	struct gd_err e = {0};
	if (names_read(arg, store, &e)) {
		err_print(arg, &e);
		return e.code;
	}
	c->kind = CKPT_LIST;
	c->names = store->v;
	c->n_names = store->n;
	return 0;
}

/* "a,b,c" -> argv-style list (strdup'd copy, split in place). */
size_t cli_split_names(const char *arg, char **buf, const char ***list)
{
	*buf = strdup(arg);
	size_t n = 1;
	for (const char *p = arg; *p; p++)
		n += *p == ',';
	*list = calloc(n, sizeof **list);
	size_t k = 0;
	for (char *tok = strtok(*buf, ","); tok; tok = strtok(NULL, ","))
		(*list)[k++] = tok;
	return k;
}

int cli_precision(const char *cmd, int opt, const char *arg, struct cli_precision *p)
{
	if (opt == 'K') {
		free(p->buf);
		free(p->keep);
		p->n_keep = cli_split_names(arg, &p->buf, &p->keep);
		for (size_t i = 0; i < p->n_keep; i++)
			if (op_lookup(NULL, p->keep[i]) == OP_UNKNOWN)
				return cli_usage(cmd, "--keep-fp32 %s: '%s' is not an op type ('graphdiet ops' lists them)", arg,
						 p->keep[i]);
		return 0;
	}
	if ((p->dtype = autocast_parse(arg)) < 0)
		return cli_usage(cmd, "--precision %s: not fp32, fp16 or bf16", arg);
	return 0;
}

int cli_step(const char *cmd, int opt, const char *arg, struct step_opts *so)
{
	char why[256];
	if (opt == 'S' && loss_scaling_parse(arg, &so->ls, why, sizeof why))
		return cli_usage(cmd, "--loss-scale %s: %s", arg, why);
	if (opt == 'O' && optimizer_parse(arg, &so->opt, why, sizeof why))
		return cli_usage(cmd, "--optimizer %s: %s", arg, why);
	if (opt == 'G') {
		char *end = NULL;
		so->clip_norm = strtod(arg, &end);
		if (end == arg || *end || !(so->clip_norm > 0) || !isfinite(so->clip_norm))
			return cli_usage(cmd, "--clip-grad-norm %s: not a positive number", arg);
	}
	if (opt == CLI_OPT_REPLICAS && cli_replicas(cmd, arg, &so->rep.n))
		return GD_EINPUT;
	if (opt == CLI_OPT_BUCKET) {
		uint64_t b = 0;
		if (size_parse(arg, &b) || !b || b > SIZE_MAX)
			return cli_usage(cmd, "--bucket-bytes %s: not a size (25MiB, 1MB or bytes, above 0)", arg);
		so->rep.bucket_bytes = (size_t)b;
	}
	if (opt == CLI_OPT_LOSS_REDUCTION) {
		if (strcmp(arg, "mean") && strcmp(arg, "sum"))
			return cli_usage(cmd, "--loss-reduction %s: not mean or sum", arg);
		so->rep.reduction = !strcmp(arg, "mean") ? LOSS_REDUCTION_MEAN : LOSS_REDUCTION_SUM;
	}
	so->rep.sync_bn |= opt == CLI_OPT_SYNC_BN;
	if (opt == CLI_OPT_SHARD) {
		int stage = shard_parse(arg);
		if (stage < 0)
			return cli_usage(cmd, "--shard %s: not optimizer, gradients or parameters", arg);
		so->rep.shard = (enum shard_stage)stage;
	}
	if (opt == CLI_OPT_DIET && diet_parse(arg, &so->diet, why, sizeof why))
		return cli_usage(cmd, "--diet:%s: %s", arg, why);
	if (opt == CLI_OPT_DIET_PARAMS) {
		if (!so->diet.on)
			diet_parse(NULL, &so->diet, why, sizeof why); /* the names imply --diet */
		cli_step_free(so);
		char *buf = NULL;
		const char **names = NULL;
		so->diet.n_params = cli_split_names(arg, &buf, &names);
		so->diet.params = names;
		so->diet_buf = buf;
		if (!so->diet.n_params) /* else it would mean the default */
			return cli_usage(cmd, "--diet-params '%s': no parameter named", arg);
	}
	return 0;
}

int cli_backend(const char *arg, const struct backend **b)
{
	struct gd_err e = {0};
	if (!(*b = backend_find(arg, &e))) {
		err_print(NULL, &e);
		return e.code;
	}
	return 0;
}

int cli_replicas(const char *cmd, const char *arg, int *n)
{
	int64_t v;
	if (cli_parse_i64(arg, 1, CLI_MAX_REPLICAS, &v))
		return cli_usage(cmd, "--replicas %s: not a whole number from 1 to %d", arg, CLI_MAX_REPLICAS);
	*n = (int)v;
	return 0;
}

void cli_step_free(struct step_opts *so)
{
	free(so->diet_buf);
	free((void *)so->diet.params);
	so->diet_buf = NULL;
	so->diet.params = NULL;
	so->diet.n_params = 0;
}

void cli_step_argv(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strncmp(argv[i], "--diet:", 7))
			argv[i][6] = '=';
}

int cli_autocast(struct graph *g, const struct cli_precision *p, struct gd_err *e)
{
	if (!p->dtype || p->dtype == DT_FLOAT)
		return 0;
	struct autocast_opts ao = {.dtype = p->dtype, .keep = p->keep, .n_keep = p->n_keep};
	size_t n;
	return autocast(g, &ao, &n, e);
}

void cli_precision_free(struct cli_precision *p)
{
	free(p->buf);
	free(p->keep);
	memset(p, 0, sizeof *p);
}

/* ---- what --dim, -o and --to may say ---- */

static int has_dim(const struct graph *g, const char *name)
{
	for (uint32_t i = 0; i < g->n_values; i++) {
		const struct ttype *t = &g->values[i]->type;
		for (uint32_t k = 0; t->has_shape && k < t->ndim; k++)
			if (t->dims[k].kind == DIM_PARAM && t->dims[k].param && !strcmp(t->dims[k].param, name))
				return 1;
	}
	return 0;
}

/* The graph inputs' symbolic dimensions, distinct, as "a, b" in buf ("" when none). */
static void symbolic_dims(const struct graph *g, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct ttype *t = &g->inputs[i]->type;
		for (uint32_t d = 0; t->has_shape && d < t->ndim && k + 1 < n; d++) {
			const char *p = t->dims[d].kind == DIM_PARAM ? t->dims[d].param : NULL;
			size_t len = p ? strlen(p) : 0;
			int seen = 0;
			for (const char *q = buf; p && !seen && (q = strstr(q, p)); q += len)
				seen = (q == buf || q[-1] == ' ') && (!q[len] || q[len] == ',');
			if (p && *p && !seen)
				k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", p);
		}
	}
}

/* What train fixed NAME to (CLI_DIMS_KEY: "batch=8\nseq=64"); 0 when it did not. */
static int64_t fixed_dim(const struct graph *g, const char *name)
{
	const char *all = g->model ? model_meta(g, CLI_DIMS_KEY) : NULL;
	size_t len = strlen(name);
	for (const char *p = all; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (!strncmp(p, name, len) && p[len] == '=')
			return strtoll(p + len + 1, NULL, 10);
	return 0;
}

int cli_check_dims(const char *path, const struct graph *g, const struct exec_binding *dims, size_t n)
{
	struct gd_err e = {0};
	for (size_t k = 0; k < n && !e.code; k++) {
		const char *name = dims[k].name;
		long long v = (long long)dims[k].value, was = (long long)fixed_dim(g, name);
		if (has_dim(g, name) || was == v)
			continue; /* a script that gives train's --dim to run as well means no harm */
		char sym[256], fixed[256] = "";
		symbolic_dims(g, sym, sizeof sym);
		const char *all = g->model ? model_meta(g, CLI_DIMS_KEY) : NULL;
		size_t f = 0;
		for (const char *p = all; p && *p && f + 1 < sizeof fixed;) {
			size_t l = strcspn(p, "\n");
			f += (size_t)snprintf(fixed + f, sizeof fixed - f, "%s%.*s", f ? ", " : "; train fixed ", (int)l, p);
			p += l + (p[l] == '\n');
		}
		if (was)
			err_set(&e, GD_EINPUT, "--dim %s=%lld: train fixed %s to %lld when it built this graph (train the model "
					       "again for %s=%lld)", name, v, name, was, name, v);
		else
			err_set(&e, GD_EINPUT, "--dim %s=%lld: no dimension of the graph is called '%s' (%s%s%s)", name, v, name,
				sym[0] ? "its symbolic dimensions: " : "every dimension is fixed", sym, fixed);
	}
	if (e.code)
		err_print(path, &e);
	return e.code;
}

int cli_output_format(const char *cmd, const char *in, const char *out, const char *to_src, enum gd_format *to,
		      int same_ok)
{
	char ext[16];
	struct stat so, si;
	int std = !strcmp(out, "-"), have = !std && !stat(out, &so);
	if (!*out)
		return cli_usage(cmd, "an empty output name");
	if (have && S_ISDIR(so.st_mode)) /* said before the work, not after it */
		return cli_usage(cmd, "output '%s' is a folder, not a file", out);
	enum gd_format named = std ? FMT_AUTO : format_parse(path_ext(out, ext, sizeof ext));
	if (*to != FMT_AUTO && named != FMT_AUTO && named != *to)
		return cli_usage(cmd, "output '%s': its name says %s, but %s writes %s (name it .%s)", out,
				 format_name(named), to_src, format_name(*to), format_name(*to));
	if (*to == FMT_AUTO)
		*to = named;
	/* standard output, a device, a FIFO, a name without an extension: ONNX */
	if (*to == FMT_AUTO && (std || !ext[0] || (have && !S_ISREG(so.st_mode))))
		*to = FMT_ONNX;
	if (*to == FMT_AUTO)
		return cli_usage(cmd, "cannot tell the format of '%s' from its extension '.%s'; name it .onnx or .yaml, or "
				      "use --to", out, ext);
	if (!same_ok && have && S_ISREG(so.st_mode) && strcmp(in, "-") && !stat(in, &si) && si.st_dev == so.st_dev &&
	    si.st_ino == so.st_ino)
		return cli_usage(cmd, "output '%s' is the input model '%s': it would be replaced; write elsewhere", out, in);
	return 0;
}

/* A pytorch export's initializer named onnx::Conv_N (its number where the parameter's name
 * would be): the weight or bias of a Conv into which the eval-mode exporter folded a
 * BatchNormalization. */
static int folded_name(const char *name)
{
	static const char pfx[] = "onnx::Conv_";
	if (strncmp(name, pfx, sizeof pfx - 1) || !name[sizeof pfx - 1])
		return 0;
	return strspn(name + sizeof pfx - 1, "0123456789") == strlen(name + sizeof pfx - 1);
}

void cli_note_eval_export(const char *path, const struct graph *g)
{
	if (!g->model || !g->model->producer_name || strcmp(g->model->producer_name, "pytorch"))
		return;
	const struct node *bn = NULL;
	uint32_t n_bn = 0, n_folded = 0;
	const char *first = NULL;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		const struct attr *a = n->op == OP_BATCH_NORM ? node_attr(n, "training_mode") : NULL;
		if (n->op == OP_BATCH_NORM && n->n_out == 1 && (!a || !a->i) && n_bn++ == 0)
			bn = n;
	}
	for (uint32_t i = 0; i < g->n_inits; i++)
		if (folded_name(g->inits[i]->name) && n_folded++ == 0)
			first = g->inits[i]->name;
	if (bn)
		gd_note("%s looks like an eval-mode export (torch.onnx.export(training=TrainingMode.EVAL)): %u "
			"BatchNormalization node%s ('%s'%s) normalise%s with the running statistics, not the batch's, and "
			"any Dropout is gone; export with training=TrainingMode.TRAINING to train as PyTorch does",
			strcmp(path, "-") ? path : "<stdin>", n_bn, n_bn == 1 ? "" : "s", node_base_name(bn), n_bn == 1 ? "" : " first", n_bn == 1 ? "s" : "");
	else if (n_folded)
		gd_note("%s looks like an eval-mode export (torch.onnx.export(training=TrainingMode.EVAL)): %u parameter%s "
			"('%s'%s) %s BatchNormalization folded into a Conv, and any Dropout is gone; export with "
			"training=TrainingMode.TRAINING to train as PyTorch does",
			strcmp(path, "-") ? path : "<stdin>", n_folded, n_folded == 1 ? "" : "s", first, n_folded == 1 ? "" : " first",
			n_folded == 1 ? "holds a" : "hold a");
}
