/* info.c - `graphdiet info`: what a model contains, without reading its weights. */
#include "../util/emit.h"
#include "../util/xalloc.h"
#include "../ops/ops.h"
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet info [options] MODEL\n"
	"\n"
	"Summarises a model: IR version, opsets and producer; inputs and outputs with their shapes;\n"
	"node count and an op histogram; parameter count and bytes. Weights are not read.\n"
	"\n"
	"options:\n"
	"      --format FMT    text (default), json or yaml\n"
	"      --from FORMAT   input format: onnx or yaml (default: extension, else content)\n"
	"      --base-dir DIR  the folder the model's data files are in (needed for one read from -)\n"
	"  -h, --help          show this help\n";

struct op_count {
	const char *op;
	uint64_t n;
	int known;
};

struct stats {
	uint64_t n_params, param_elems, param_bytes;
	uint64_t n_train, train_elems, train_bytes;
	uint64_t n_ctrl, n_subgraphs;
	struct op_count *ops;
	size_t n_ops;
};

static int by_count(const void *a, const void *b)
{
	const struct op_count *x = a, *y = b;
	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->op, y->op);
}

/* Which initializers train, as autodiff finds them: floating-point parameters from which a chain of
 * differentiable inputs leads to a graph output. Running statistics (BatchNorm's inputs 3 and 4),
 * shape constants and masks that only feed comparisons are buffers: they were counted as
 * trainable. NULL when out of memory. */
static uint8_t *trainable(const struct graph *g)
{
	uint8_t *fwd = xcalloc(g->n_values ? g->n_values : 1, 1), *bwd = xcalloc(g->n_values ? g->n_values : 1, 1);
	if (!fwd || !bwd) {
		xfree(fwd);
		xfree(bwd);
		return NULL;
	}
	for (uint32_t i = 0; i < g->n_inits; i++)
		fwd[g->inits[i]->id] = (g->inits[i]->flags & VALUE_PARAM) != 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int any = 0;
		for (uint32_t k = 0; k < n->n_in && !any; k++)
			any = n->in[k] && fwd[n->in[k]->id] && op_input_differentiable(n, k);
		for (uint32_t k = 0; any && k < n->n_out; k++)
			if (n->out[k])
				fwd[n->out[k]->id] = 1;
	}
	for (uint32_t i = 0; i < g->n_outputs; i++)
		bwd[g->outputs[i]->id] = 1;
	for (uint32_t i = g->n_nodes; i-- > 0;) {
		const struct node *n = g->nodes[i];
		int any = 0;
		for (uint32_t k = 0; k < n->n_out && !any; k++)
			any = n->out[k] && bwd[n->out[k]->id];
		for (uint32_t k = 0; any && k < n->n_in; k++)
			if (n->in[k] && op_input_differentiable(n, k))
				bwd[n->in[k]->id] = 1;
	}
	for (uint32_t i = 0; i < g->n_values; i++)
		fwd[i] = fwd[i] && bwd[i];
	xfree(bwd);
	return fwd;
}

static int gather(struct graph *g, struct stats *s)
{
	struct strmap m;
	strmap_init(&m);
	s->ops = xcalloc(g->n_nodes ? g->n_nodes : 1, sizeof *s->ops);
	if (!s->ops)
		return -1;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct node *n = g->nodes[i];
		const char *key = n->op_type;
		if (!op_domain_is_default(n->domain) && !(key = arena_printf(g->arena, "%s::%s", n->domain, n->op_type)))
			goto oom;
		struct op_count *c = strmap_get(&m, key);
		if (!c) {
			c = &s->ops[s->n_ops++];
			*c = (struct op_count){key, 0, n->op != OP_UNKNOWN};
			if (strmap_put(&m, key, c))
				goto oom;
		}
		c->n++;
		s->n_ctrl += n->n_ctrl;
		for (uint32_t k = 0; k < n->n_attr; k++)
			s->n_subgraphs += n->attr[k].type == ATTR_GRAPH ? 1 : n->attr[k].type == ATTR_GRAPHS ? n->attr[k].n : 0;
	}
	strmap_free(&m);
	qsort(s->ops, s->n_ops, sizeof *s->ops, by_count);
	uint8_t *train = trainable(g);
	if (!train)
		return -1;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		const struct tensor *t = g->inits[i]->init;
		int64_t ne = tensor_numel(t);
		uint64_t bytes = (uint64_t)ne * dtype_size(t->dtype);
		s->n_params++;
		s->param_elems += (uint64_t)ne;
		s->param_bytes += bytes;
		if (train[g->inits[i]->id]) {
			s->n_train++;
			s->train_elems += (uint64_t)ne;
			s->train_bytes += bytes;
		}
	}
	xfree(train);
	return 0;
oom:
	strmap_free(&m);
	return -1;
}

static void shape_text(const struct value *v, char *buf, size_t n)
{
	if (v->type.has_shape)
		ttype_shape_str(&v->type, buf, n);
	else
		snprintf(buf, n, "?");
}

static const char *dtype_text(const struct value *v)
{
	return v->type.has_dtype ? dtype_name(v->type.dtype) : "?";
}

static void thousands(uint64_t v, char *buf, size_t n)
{
	char tmp[32];
	int len = snprintf(tmp, sizeof tmp, "%" PRIu64, v), k = 0;
	for (int i = 0; i < len && (size_t)k + 2 < n; i++) {
		if (i && (len - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = tmp[i];
	}
	buf[k] = 0;
}

static void text_values(const char *title, struct value **vs, uint32_t n, int skip_inits)
{
	char sh[512];
	printf("%s:\n", title);
	for (uint32_t i = 0; i < n; i++) {
		if (skip_inits && vs[i]->init)
			continue;
		shape_text(vs[i], sh, sizeof sh);
		printf("  %-24s %-8s %s\n", vs[i]->name, dtype_text(vs[i]), sh);
	}
}

static void text(const char *path, struct graph *g, const struct stats *s)
{
	const struct model *m = g->model;
	char a[32], b[32], c[32];
	printf("model:     %s\n", strcmp(path, "-") ? path : "<stdin>");
	if (m->has_ir_version)
		printf("ir:        version %" PRId64 "\n", m->ir_version);
	printf("opsets:   ");
	for (size_t i = 0; i < m->n_opsets; i++)
		printf(" %s %" PRId64 "%s", m->opsets[i].domain && *m->opsets[i].domain ? m->opsets[i].domain : "ai.onnx",
		       m->opsets[i].version, i + 1 < m->n_opsets ? "," : "");
	printf("%s\n", m->n_opsets ? "" : " none");
	if (m->producer_name)
		printf("producer:  %s %s\n", m->producer_name, m->producer_version ? m->producer_version : "");
	printf("graph:     %s, %u nodes, %u values\n", g->name ? g->name : "(unnamed)", g->n_nodes, g->n_values);
	thousands(s->param_elems, a, sizeof a);
	thousands(s->param_bytes, b, sizeof b);
	thousands(s->train_elems, c, sizeof c);
	printf("params:    %" PRIu64 " tensors, %s elements, %s bytes (%" PRIu64 " trainable, %s elements)\n",
	       s->n_params, a, b, s->n_train, c);
	if (s->n_ctrl || s->n_subgraphs)
		printf("extras:    %" PRIu64 " control dependencies, %" PRIu64 " subgraphs\n", s->n_ctrl, s->n_subgraphs);
	text_values("inputs", g->inputs, g->n_inputs, 1);
	text_values("outputs", g->outputs, g->n_outputs, 0);
	printf("ops:\n");
	for (size_t i = 0; i < s->n_ops; i++)
		printf("  %-32s %6" PRIu64 "%s\n", s->ops[i].op, s->ops[i].n, s->ops[i].known ? "" : "  (unknown to graphdiet)");
}

static void emit_values(struct emit *e, const char *key, struct value **vs, uint32_t n, int skip_inits)
{
	emit_key(e, key);
	emit_arr_begin(e);
	for (uint32_t i = 0; i < n; i++) {
		const struct value *v = vs[i];
		if (skip_inits && v->init)
			continue;
		emit_obj_begin(e);
		emit_key(e, "name");
		emit_str(e, v->name);
		emit_key(e, "dtype");
		if (v->type.has_dtype)
			emit_str(e, dtype_name(v->type.dtype));
		else
			emit_null(e);
		emit_key(e, "shape");
		if (!v->type.has_shape) {
			emit_null(e);
		} else {
			emit_arr_begin(e);
			for (uint32_t k = 0; k < v->type.ndim; k++) {
				const struct dim *d = &v->type.dims[k];
				if (d->kind == DIM_VALUE)
					emit_int(e, d->value);
				else if (d->kind == DIM_PARAM)
					emit_str(e, d->param);
				else
					emit_null(e);
			}
			emit_arr_end(e);
		}
		emit_obj_end(e);
	}
	emit_arr_end(e);
}

static void structured(const char *path, struct graph *g, const struct stats *s, int yaml)
{
	const struct model *m = g->model;
	struct emit e;
	emit_init(&e, stdout, yaml);
	emit_obj_begin(&e);
	emit_key(&e, "model");
	emit_str(&e, path);
	emit_key(&e, "ir_version");
	if (m->has_ir_version)
		emit_int(&e, m->ir_version);
	else
		emit_null(&e);
	emit_key(&e, "opsets");
	emit_arr_begin(&e);
	for (size_t i = 0; i < m->n_opsets; i++) {
		emit_obj_begin(&e);
		emit_key(&e, "domain");
		emit_str(&e, m->opsets[i].domain ? m->opsets[i].domain : "");
		emit_key(&e, "version");
		emit_int(&e, m->opsets[i].version);
		emit_obj_end(&e);
	}
	emit_arr_end(&e);
	emit_key(&e, "producer_name");
	emit_str(&e, m->producer_name);
	emit_key(&e, "producer_version");
	emit_str(&e, m->producer_version);
	emit_key(&e, "graph");
	emit_str(&e, g->name);
	emit_key(&e, "nodes");
	emit_uint(&e, g->n_nodes);
	emit_key(&e, "values");
	emit_uint(&e, g->n_values);
	emit_key(&e, "control_deps");
	emit_uint(&e, s->n_ctrl);
	emit_key(&e, "subgraphs");
	emit_uint(&e, s->n_subgraphs);
	emit_key(&e, "params");
	emit_obj_begin(&e);
	emit_key(&e, "tensors");
	emit_uint(&e, s->n_params);
	emit_key(&e, "elements");
	emit_uint(&e, s->param_elems);
	emit_key(&e, "bytes");
	emit_uint(&e, s->param_bytes);
	emit_key(&e, "trainable_tensors");
	emit_uint(&e, s->n_train);
	emit_key(&e, "trainable_elements");
	emit_uint(&e, s->train_elems);
	emit_key(&e, "trainable_bytes");
	emit_uint(&e, s->train_bytes);
	emit_obj_end(&e);
	emit_values(&e, "inputs", g->inputs, g->n_inputs, 1);
	emit_values(&e, "outputs", g->outputs, g->n_outputs, 0);
	emit_key(&e, "ops");
	emit_arr_begin(&e);
	for (size_t i = 0; i < s->n_ops; i++) {
		emit_obj_begin(&e);
		emit_key(&e, "op");
		emit_str(&e, s->ops[i].op);
		emit_key(&e, "count");
		emit_uint(&e, s->ops[i].n);
		emit_key(&e, "known");
		emit_bool(&e, s->ops[i].known);
		emit_obj_end(&e);
	}
	emit_arr_end(&e);
	emit_obj_end(&e);
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'F'},
		{"from", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,
		{NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO;
	enum cli_out out = OUT_TEXT;
	int c;
	int shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		default:
			if (cli_shared_option("info", c, help, &from, &out, &shared_rc))
				return shared_rc;
			break;
		}
	}
	if (argc - optind != 1)
		return cli_usage("info", argc - optind < 1 ? "no model given" : "too many arguments");
	const char *path = argv[optind];
	int rc = 0;
	struct graph *g = cli_load(path, from, &rc);
	if (!g)
		return rc;
	struct stats s = {0};
	if (gather(g, &s)) {
		struct gd_err e = {0};
		err_oom(&e);
		err_print(path, &e);
		rc = GD_EINTERNAL;
	} else if (out == OUT_TEXT) {
		text(path, g, &s);
	} else {
		structured(path, g, &s, out == OUT_YAML);
	}
	xfree(s.ops);
	graph_free(g);
	return cli_finish(rc);
}
