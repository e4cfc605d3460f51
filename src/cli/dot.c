/* dot.c - `graphdiet dot`: a Graphviz picture of a model. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet dot [options] MODEL\n"
	"\n"
	"Writes the graph as Graphviz DOT: ops as boxes, values as edges labelled with their shapes,\n"
	"control dependencies dashed. Render it with, for example, 'graphdiet dot m.onnx | dot -Tsvg > m.svg'.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE   write to FILE instead of standard output\n"
	"      --from FORMAT   input format: onnx or yaml (default: extension, else content)\n"
	"      --no-params     leave initializers (weights) out of the picture\n"
	"  -h, --help          show this help\n";

int cmd_dot(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'f'},
		{"no-params", no_argument, NULL, 'p'},    {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO;
	struct save_opts so = SAVE_OPTS_DEFAULT;
	const char *out = "-";
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
		default:
			if (cli_shared_option("dot", c, help, &from, NULL, &shared_rc))
				return shared_rc;
			break;
		}
	}
	if (argc - optind != 1)
		return cli_usage("dot", argc - optind < 1 ? "no model given" : "too many arguments");
	int rc = 0;
	struct graph *g = cli_load(argv[optind], from, &rc);
	if (!g)
		return rc;
	struct gd_err e = {0};
	if ((rc = model_save(g, out, FMT_DOT, &so, &e)))
		err_print(argv[optind], &e); /* outfile errors name the output themselves */
	graph_free(g);
	return cli_finish(rc);
}
