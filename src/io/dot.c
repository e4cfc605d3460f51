/* dot.c - Graphviz DOT output.
 *
 * Ops are boxes labelled with name and op type, graph inputs and outputs are ellipses,
 * initializers are small grey notes (or hidden). An edge is a value, labelled with its shape when
 * known. Control inputs are dashed edges. Node fill colour says what a node is for: forward
 * (white), kept forward (green, bold: a checkpoint, some output of it is read by the backward pass
 * or a recompute, and the edges that read it are green), backward (blue), recompute (orange), loss
 * scaling, diet updates and communication; ops graphdiet does not know are drawn red. Subgraphs
 * are summarised, not expanded. A legend cluster holds one sample of each kind of node and edge the
 * picture uses, styled as the picture styles it (one table, `looks`, for both), with its meaning. */
#include "dot.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <string.h>

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void shape(FILE *f, const struct value *v)
{
	const struct ttype *t = &v->type;
	if (!t->has_shape && v->init) {
		fputc('[', f);
		for (uint32_t i = 0; i < v->init->ndim; i++)
			fprintf(f, "%s%" PRId64, i ? "," : "", v->init->dims[i]);
		fputc(']', f);
		return;
	}
	if (!t->has_shape)
		return;
	fputc('[', f);
	for (uint32_t i = 0; i < t->ndim; i++) {
		if (i)
			fputc(',', f);
		if (t->dims[i].kind == DIM_VALUE)
			fprintf(f, "%" PRId64, t->dims[i].value);
		else if (t->dims[i].kind == DIM_PARAM)
			esc(f, t->dims[i].param);
		else
			fputc('?', f);
	}
	fputc(']', f);
}

/* What a picture element is for, each with its style: the legend draws one of each present. */
enum look {
	LOOK_FORWARD, LOOK_KEPT, LOOK_BACKWARD, LOOK_RECOMPUTE, LOOK_LOSS_SCALE, LOOK_DIET, LOOK_COMM, LOOK_UNKNOWN,
	LOOK_INPUT, LOOK_OUTPUT, LOOK_PARAM, LOOK_KEPT_EDGE, LOOK_CTRL_EDGE, LOOK_PARAM_EDGE, LOOK_COUNT
};

#define OP_STYLE "shape=box, style=\"filled,rounded\", fillcolor=\""
#define INPUT_STYLE "shape=ellipse, style=filled, fillcolor=\"#d9ead3\""
#define OUTPUT_STYLE "shape=ellipse, style=filled, fillcolor=\"#fff2cc\""
#define PARAM_STYLE "shape=note, style=filled, fillcolor=\"#eeeeee\", fontsize=8"
#define KEPT_EDGE_STYLE "color=\"#38761d\", penwidth=2, "
#define CTRL_EDGE_STYLE "style=dashed, color=\"#cc0000\""
#define PARAM_EDGE_STYLE "color=\"#aaaaaa\""

static const struct {
	const char *fill; /* of an op's box; NULL: no op */
	const char *meaning;
} looks[LOOK_COUNT] = {
	[LOOK_FORWARD] = {"#ffffff", "forward op"},
	[LOOK_KEPT] = {"#b6d7a8\", penwidth=\"2", "checkpoint: a forward op whose output\\nthe backward pass or a recompute reads"},
	[LOOK_BACKWARD] = {"#cfe2f3", "backward op (gradients, optimizer)"},
	[LOOK_RECOMPUTE] = {"#fce5cd", "recompute of a forward op"},
	[LOOK_LOSS_SCALE] = {"#fff2cc", "loss scaling"},
	[LOOK_DIET] = {"#d9ead3", "diet variable update"},
	[LOOK_COMM] = {"#d9d2e9", "communication (all-reduce)"},
	[LOOK_UNKNOWN] = {"#f4cccc", "op graphdiet does not know"},
	[LOOK_INPUT] = {NULL, "graph input"},
	[LOOK_OUTPUT] = {NULL, "graph output"},
	[LOOK_PARAM] = {NULL, "initializer (weight)"},
	[LOOK_KEPT_EDGE] = {NULL, "read from a checkpoint"},
	[LOOK_CTRL_EDGE] = {NULL, "control dependency"},
	[LOOK_PARAM_EDGE] = {NULL, "weight read"},
};

static enum look node_look(const struct node *n, int kept)
{
	return kept                          ? LOOK_KEPT
	       : n->op == OP_UNKNOWN         ? LOOK_UNKNOWN
	       : n->tags & TAG_RECOMPUTE     ? LOOK_RECOMPUTE
	       : n->tags & TAG_BACKWARD      ? LOOK_BACKWARD
	       : n->tags & TAG_LOSS_SCALE    ? LOOK_LOSS_SCALE
	       : n->tags & TAG_DIET          ? LOOK_DIET
	       : n->tags & TAG_COMM          ? LOOK_COMM
					     : LOOK_FORWARD;
}

/* The legend: a cluster with one sample of each look the picture uses, drawn as the picture draws
 * it and labelled with what it means, in one row (invisible edges keep the order); an edge's
 * sample runs from a point down to its meaning. */
static void legend(FILE *f, const uint8_t *used)
{
	static const char *value_styles[] = {[LOOK_INPUT] = INPUT_STYLE, [LOOK_OUTPUT] = OUTPUT_STYLE,
					     [LOOK_PARAM] = PARAM_STYLE};
	static const char *edge_styles[] = {[LOOK_KEPT_EDGE] = KEPT_EDGE_STYLE, [LOOK_CTRL_EDGE] = CTRL_EDGE_STYLE ", ",
					    [LOOK_PARAM_EDGE] = PARAM_EDGE_STYLE ", "};
	fputs("  subgraph cluster_legend {\n    label=\"legend\"; fontname=\"Helvetica\"; fontsize=10; style=rounded; "
	      "color=\"#aaaaaa\";\n    { rank=same;\n",
	      f);
	for (int k = 0; k < LOOK_COUNT; k++) {
		if (!used[k])
			continue;
		if (k >= LOOK_KEPT_EDGE)
			fprintf(f, "      \"legend_%d\" [shape=point, width=0.05];\n", k);
		else if (looks[k].fill)
			fprintf(f, "      \"legend_%d\" [" OP_STYLE "%s\", label=\"%s\"];\n", k, looks[k].fill, looks[k].meaning);
		else
			fprintf(f, "      \"legend_%d\" [%s, label=\"%s\"];\n", k, value_styles[k], looks[k].meaning);
	}
	fputs("    }\n", f);
	int prev = -1;
	for (int k = 0; k < LOOK_COUNT; k++) {
		if (!used[k])
			continue;
		if (k >= LOOK_KEPT_EDGE)
			fprintf(f, "    \"legend_%d_to\" [shape=plaintext, fontsize=8, label=\"%s\"];\n"
				   "    \"legend_%d\" -> \"legend_%d_to\" [%sminlen=1];\n",
				k, looks[k].meaning, k, k, edge_styles[k]);
		if (prev >= 0)
			fprintf(f, "    \"legend_%d\" -> \"legend_%d\" [style=invis];\n", prev, k);
		prev = k;
	}
	fputs("  }\n", f);
}

static void value_node(FILE *f, const struct value *v, const char *style)
{
	fprintf(f, "  \"v%u\" [label=\"", v->id);
	esc(f, v->name);
	fputs("\\n", f);
	if (v->type.has_dtype && dtype_valid(v->type.dtype))
		fputs(dtype_name(v->type.dtype), f);
	else if (v->init)
		fputs(dtype_name(v->init->dtype), f);
	shape(f, v);
	fprintf(f, "\", %s];\n", style);
}

/* A forward value the backward pass (or a recompute) reads: its producer is a checkpoint. */
static int kept_edge(const struct value *v, const struct node *reader)
{
	return value_is_activation(v) && !node_is_forward(reader);
}

int dot_write(struct graph *g, FILE *f, int show_params, struct gd_err *e)
{
	uint8_t *kept = xcalloc(g->n_nodes ? g->n_nodes : 1, 1), used[LOOK_COUNT] = {0};
	if (!kept)
		return err_oom(e);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (kept_edge(g->nodes[i]->in[k], g->nodes[i]))
				kept[g->nodes[i]->in[k]->producer->index] = 1;
	fputs("digraph \"", f);
	esc(f, g->name ? g->name : "graph");
	fputs("\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
	      "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n",
	      f);
	for (uint32_t i = 0; i < g->n_inputs; i++)
		if (!g->inputs[i]->init)
			value_node(f, g->inputs[i], INPUT_STYLE), used[LOOK_INPUT] = 1;
	for (uint32_t i = 0; show_params && i < g->n_inits; i++)
		value_node(f, g->inits[i], PARAM_STYLE), used[LOOK_PARAM] = 1;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		enum look look = node_look(n, kept[i]);
		used[look] = 1;
		fprintf(f, "  \"n%u\" [" OP_STYLE "%s\", label=\"", i, looks[look].fill);
		if (n->name && *n->name) {
			esc(f, n->name);
			fputs("\\n", f);
		}
		esc(f, n->op_type);
		for (uint32_t k = 0; k < n->n_attr; k++)
			if (n->attr[k].type == ATTR_GRAPH || n->attr[k].type == ATTR_GRAPHS) {
				fputs("\\n[", f);
				esc(f, n->attr[k].name);
				fputs(": subgraph]", f);
			}
		fputs("\"];\n", f);
	}
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct value *v = g->outputs[i];
		fprintf(f, "  \"o%u\" [label=\"", i);
		esc(f, v->name);
		fputs("\\n", f);
		shape(f, v);
		fputs("\", " OUTPUT_STYLE "];\n", f);
		used[LOOK_OUTPUT] = 1;
		if (v->producer)
			fprintf(f, "  \"n%u\" -> \"o%u\";\n", v->producer->index, i);
		else if (!v->init || show_params)
			fprintf(f, "  \"v%u\" -> \"o%u\";\n", v->id, i);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (!v)
				continue;
			if (v->producer) {
				used[LOOK_KEPT_EDGE] |= kept_edge(v, n);
				fprintf(f, "  \"n%u\" -> \"n%u\" [%slabel=\"", v->producer->index, i,
					kept_edge(v, n) ? KEPT_EDGE_STYLE : "");
				shape(f, v);
				fputs("\"];\n", f);
			} else if ((v->flags & VALUE_INPUT) && !v->init) {
				fprintf(f, "  \"v%u\" -> \"n%u\";\n", v->id, i);
			} else if (v->init && show_params) {
				fprintf(f, "  \"v%u\" -> \"n%u\" [" PARAM_EDGE_STYLE "];\n", v->id, i);
				used[LOOK_PARAM_EDGE] = 1;
			}
		}
		for (uint32_t k = 0; k < n->n_ctrl; k++)
			fprintf(f, "  \"n%u\" -> \"n%u\" [" CTRL_EDGE_STYLE "];\n", n->ctrl[k]->index, i), used[LOOK_CTRL_EDGE] = 1;
	}
	legend(f, used);
	fputs("}\n", f);
	xfree(kept);
	return 0;
}
