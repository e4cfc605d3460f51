/* convert.c - `graphdiet convert`: ONNX <-> YAML (and DOT), through the IR, losslessly. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet convert [options] INPUT [OUTPUT]\n"
	"\n"
	"Reads a model, validates and sorts it, and writes it in another format. Nothing is lost:\n"
	"ONNX -> YAML -> ONNX keeps every node, attribute, name, shape, initializer byte and unknown field.\n"
	"INPUT and OUTPUT may be '-' (standard input/output; OUTPUT defaults to '-').\n"
	"\n"
	"options:\n"
	"  -o, --output FILE   output file (instead of the OUTPUT argument)\n"
	"      --from FORMAT   input format: onnx or yaml (default: extension, else content)\n"
	"      --to FORMAT     output format: onnx, yaml or dot (default: extension; onnx for '-')\n"
	"      --inline N      YAML: write tensors of up to N elements as numbers, larger ones as\n"
	"                      base64 (default 16)\n"
	"  -h, --help          show this help\n";

int cmd_convert(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'f'},
		{"to", required_argument, NULL, 't'},     {"inline", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO, to = FMT_AUTO;
	struct save_opts so = SAVE_OPTS_DEFAULT;
	const char *out = NULL;
	int c;
	int shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 't':
			if (cli_format_arg("convert", "--to", optarg, &to))
				return GD_EINPUT;
			break;
		case 'i':
			so.yaml_inline_max = strtoull(optarg, &end, 10);
			if (!*optarg || *end || *optarg == '-')
				return cli_usage("convert", "--inline: '%s' is not a count", optarg);
			break;
		default:
			if (cli_shared_option("convert", c, help, &from, NULL, &shared_rc))
				return shared_rc;
			break;
		}
	}
	int nargs = argc - optind;
	if (nargs < 1 || nargs > 2 || (nargs == 2 && out))
		return cli_usage("convert", nargs < 1 ? "no input model given" : "too many arguments");
	const char *in = argv[optind];
	if (!out)
		out = nargs == 2 ? argv[optind + 1] : "-";
	if (to == FMT_AUTO)
		to = format_from_path(out);
	if (to == FMT_AUTO && strcmp(out, "-") == 0)
		to = FMT_ONNX;
	if (to == FMT_AUTO)
		return cli_usage("convert", "cannot tell the format of '%s' from its name; use --to", out);
	if (cli_refuse_binary_tty(out, to))
		return GD_EINPUT;
	int rc = 0;
	struct graph *g = cli_load(in, from, &rc);
	if (!g)
		return rc;
	struct gd_err e = {0};
	if ((rc = model_save(g, out, to, &so, &e)))
		err_print(in, &e); /* outfile errors name the output themselves */
	graph_free(g);
	return cli_finish(rc);
}
