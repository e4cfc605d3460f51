/* ops.c - `graphdiet ops`: the ops graphdiet supports, straight from the op registry (ops.def), so
 * the listing (and README's table, which a test compares with `ops --markdown`) cannot drift. */
#include "../util/emit.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char help[] =
	"usage: graphdiet ops [options]\n"
	"\n"
	"Lists the ops graphdiet supports: every one runs in the reference executor and is\n"
	"understood by shape inference and the memory model; 'gradient' says whether training can\n"
	"differentiate through it; 'recompute' how activation checkpointing treats its outputs\n"
	"(cheap: recomputed rather than kept, expensive: kept where possible, random: recomputed\n"
	"with the same seed); 'precision' what it computes in under --precision fp16|bf16 (16-bit,\n"
	"float32, or its inputs' type).\n"
	"\n"
	"options:\n"
	"      --format FMT    text (default), json or yaml\n"
	"      --markdown      a Markdown table (README's)\n"
	"  -h, --help          show this help\n";

static const char *const recompute_names[] = {"cheap", "expensive", "random", "never"};

static const char *precision(uint32_t fl)
{
	return fl & OPF_AMP_LOW ? "16-bit" : fl & OPF_AMP_FP32 ? "float32" : "inputs'";
}

/* the ops worth listing: those with a kernel (control flow's bodies are opaque to graphdiet) */
static int listed(enum op_id id)
{
	return op_table[id].impl && op_table[id].impl->run;
}

int cmd_ops(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'F'}, {"markdown", no_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	enum cli_out fmt = OUT_TEXT;
	int c, markdown = 0, shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'm')
			markdown = 1;
		else if (cli_shared_option("ops", c, help, NULL, &fmt, &shared_rc))
			return shared_rc;
	}
	if (argc != optind)
		return cli_usage("ops", "takes no arguments");
	if (markdown && fmt != OUT_TEXT)
		return cli_usage("ops", "give --markdown or --format, not both");
	if (fmt != OUT_TEXT) {
		struct emit e;
		emit_init(&e, stdout, fmt == OUT_YAML);
		emit_arr_begin(&e);
		for (int id = 1; id < OP_COUNT; id++) {
			if (!listed((enum op_id)id))
				continue;
			const struct op_info *o = &op_table[id];
			emit_obj_begin(&e);
			emit_key(&e, "op");
			emit_str(&e, o->op_type);
			emit_key(&e, "domain");
			emit_str(&e, *o->domain ? o->domain : "ai.onnx");
			emit_key(&e, "gradient");
			emit_bool(&e, o->impl->grad != NULL);
			emit_key(&e, "recompute");
			emit_str(&e, recompute_names[o->impl->recompute]);
			emit_key(&e, "precision");
			emit_str(&e, precision(o->flags));
			emit_obj_end(&e);
		}
		emit_arr_end(&e);
		return cli_finish(0);
	}
	if (markdown)
		puts("| op | domain | gradient | recompute | mixed precision |\n|---|---|---|---|---|");
	else
		printf("%-26s %-10s %-9s %-10s %s\n", "OP", "DOMAIN", "GRADIENT", "RECOMPUTE", "PRECISION");
	for (int id = 1; id < OP_COUNT; id++) {
		if (!listed((enum op_id)id))
			continue;
		const struct op_info *o = &op_table[id];
		const char *dom = *o->domain ? o->domain : "ai.onnx", *grad = o->impl->grad ? "yes" : "no";
		const char *rc = recompute_names[o->impl->recompute];
		if (markdown)
			printf("| %s | %s | %s | %s | %s |\n", o->op_type, dom, grad, rc, precision(o->flags));
		else
			printf("%-26s %-10s %-9s %-10s %s\n", o->op_type, dom, grad, rc, precision(o->flags));
	}
	return cli_finish(0);
}
