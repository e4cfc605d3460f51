/* convert.c - `graphdiet convert`: ONNX <-> YAML (and DOT), through the IR, losslessly. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
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
	"      --base-dir DIR  the folder the model's data files are in (needed for one read from -)\n"
	"      --to FORMAT     output format: onnx, yaml or dot (default: the output's extension; ONNX\n"
	"                      for '-', a device such as /dev/null and a name without an extension);\n"
	"                      one the extension contradicts is refused\n"
	"      --inline N      YAML: write tensors of up to N elements as numbers, larger ones as\n"
	"                      base64 (default 16)\n"
	"  -h, --help          show this help\n";

int cmd_convert(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'f'},
		{"to", required_argument, NULL, 't'},     {"inline", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,         {NULL, 0, NULL, 0},
	};
	enum gd_format from = FMT_AUTO, to = FMT_AUTO;
	struct save_opts so = SAVE_OPTS_DEFAULT;
	const char *out = NULL;
	char to_src[64] = "";
	int c;
	int shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		int64_t n;
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 't':
			if (cli_format_arg("convert", "--to", optarg, &to))
				return GD_EINPUT;
			snprintf(to_src, sizeof to_src, "--to %s", optarg);
			break;
		case 'i':
			if (cli_parse_i64(optarg, 0, INT64_MAX, &n))
				return cli_usage("convert", "--inline: '%s' is not a count (0 to %" PRId64 ")", optarg, INT64_MAX);
			so.yaml_inline_max = (size_t)n;
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
	/* rewriting INPUT in place is allowed: the output replaces it atomically, and a --to that
	 * would change its format disagrees with its extension */
	if (cli_output_format("convert", in, out, to_src, &to, 1) || cli_refuse_binary_tty(out, to))
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
