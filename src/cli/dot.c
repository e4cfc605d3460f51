/* dot.c - `graphdiet dot`: a Graphviz picture of a model. */
#include "../exec/exec.h"
#include "../rewrite/fold.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet dot [options] MODEL\n"
	"\n"
	"Writes the graph as Graphviz DOT: ops as boxes, values as edges labelled with their shapes,\n"
	"control dependencies dashed; fill colours say what a node is for (forward, checkpoint, backward,\n"
	"recompute, ...), and a legend cluster shows each kind the picture uses. Render it with, for\n"
	"example, 'graphdiet dot m.onnx | dot -Tsvg > m.svg'.\n"
	"Shapes the model does not declare are inferred once every dimension is known (--dim binds\n"
	"symbolic ones); otherwise those edges are unlabelled.\n"
	"\n"
	"options:\n"
	"      --dim NAME=VALUE  bind a symbolic dimension, for the inferred shapes (repeatable)\n"
	"  -o, --output FILE   write to FILE instead of standard output\n"
	"      --from FORMAT   input format: onnx or yaml (default: extension, else content)\n"
	"      --base-dir DIR  the folder the model's data files are in (needed for one read from -)\n"
	"      --no-params     leave initializers (weights) out of the picture\n"
	"  -h, --help          show this help\n";

/* Gives the values whose shape the model does not declare the one a shapes-only run infers, for
 * the edge labels (exporters declare few). Nothing when a dimension is still symbolic or the run
 * fails: the picture is drawn all the same. */
static void infer_shapes(struct graph *g)
{
	for (uint32_t i = 0; i < g->n_inputs; i++)
		for (uint32_t k = 0; g->inputs[i]->type.has_shape && k < g->inputs[i]->type.ndim; k++)
			if (g->inputs[i]->type.dims[k].kind != DIM_VALUE && !g->inputs[i]->init)
				return;
	struct gd_err e = {0};
	struct exec_opts o = {.shapes_only = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	for (uint32_t i = 0; x && i < g->n_values; i++) {
		struct value *v = g->values[i];
		const struct rtensor *t = exec_value(x, v);
		if (v->type.has_shape || v->init || !t || !t->known)
			continue;
		struct dim *d = arena_zalloc(g->arena, (t->ndim ? (size_t)t->ndim : 1) * sizeof *d);
		if (!d)
			break;
		for (int k = 0; k < t->ndim; k++)
			d[k] = (struct dim){.kind = DIM_VALUE, .value = t->dims[k]};
		v->type.dims = d;
		v->type.ndim = (uint32_t)t->ndim;
		v->type.has_shape = v->type.has_type = v->type.has_tensor = true;
	}
	exec_free(x);
}

int cmd_dot(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'f'},
		{"no-params", no_argument, NULL, 'p'},    {"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,
		{"dim", required_argument, NULL, 'd'},    {NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO;
	struct save_opts so = SAVE_OPTS_DEFAULT;
	const char *out = "-";
	struct exec_binding dims[64];
	size_t n_dims = 0;
	int c;
	int shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'p':
			so.dot_params = 0;
			break;
		case 'd':
			if (cli_add_dim("dot", optarg, dims, &n_dims))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		default:
			if (cli_shared_option("dot", c, help, &from, NULL, &shared_rc))
				return cli_dims_free(dims, n_dims, shared_rc);
			break;
		}
	}
	int rc = argc - optind != 1 ? cli_usage("dot", argc - optind < 1 ? "no model given" : "too many arguments") : 0;
	enum gd_format to = FMT_DOT;
	if (!rc)
		rc = cli_output_format("dot", argv[optind], out, "graphdiet dot", &to, 0);
	struct graph *g = rc ? NULL : cli_load(argv[optind], from, &rc);
	struct gd_err e = {0};
	if (g && (rc = cli_check_dims(argv[optind], g, dims, n_dims)))
		;
	else if (g && n_dims && (rc = graph_bind_dims(g, dims, n_dims, 1, &e)))
		err_print(argv[optind], &e);
	if (g && !rc)
		infer_shapes(g);
	if (g && !rc && (rc = model_save(g, out, FMT_DOT, &so, &e)))
		err_print(argv[optind], &e); /* outfile errors name the output themselves */
	graph_free(g);
	for (size_t i = 0; i < n_dims; i++)
		free((char *)dims[i].name);
	return cli_finish(rc);
}
