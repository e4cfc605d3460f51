/* dot.c - Graphviz DOT output.
 *
 * Ops are boxes labelled with name and op type, graph inputs and outputs are ellipses,
 * initializers are small grey notes (or hidden). An edge is a value, labelled with its shape when
 * known. Control inputs are dashed edges. Node fill colour says what a node is for: forward
 * (white), kept forward (green, bold: a checkpoint, some output of it is read by the backward pass
 * or a recompute, and the edges that read it are green), backward (blue), recompute (orange), loss
 * scaling, diet updates and communication; ops graphdiet does not know are drawn red. Subgraphs
 * are summarised, not expanded. */
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

static const char *fill(const struct node *n, int kept)
{
	if (kept)
		return "#b6d7a8\", penwidth=\"2";
	if (n->op == OP_UNKNOWN)
		return "#f4cccc";
	if (n->tags & TAG_RECOMPUTE)
		return "#fce5cd";
	if (n->tags & TAG_BACKWARD)
		return "#cfe2f3";
	if (n->tags & TAG_LOSS_SCALE)
		return "#fff2cc";
	if (n->tags & TAG_DIET)
		return "#d9ead3";
	if (n->tags & TAG_COMM)
		return "#d9d2e9";
	return "#ffffff";
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
	uint8_t *kept = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
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
			value_node(f, g->inputs[i], "shape=ellipse, style=filled, fillcolor=\"#d9ead3\"");
	for (uint32_t i = 0; show_params && i < g->n_inits; i++)
		value_node(f, g->inits[i], "shape=note, style=filled, fillcolor=\"#eeeeee\", fontsize=8");
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		fprintf(f, "  \"n%u\" [shape=box, style=\"filled,rounded\", fillcolor=\"%s\", label=\"", i, fill(n, kept[i]));
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
		fputs("\", shape=ellipse, style=filled, fillcolor=\"#fff2cc\"];\n", f);
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
				fprintf(f, "  \"n%u\" -> \"n%u\" [%slabel=\"", v->producer->index, i,
					kept_edge(v, n) ? "color=\"#38761d\", penwidth=2, " : "");
				shape(f, v);
				fputs("\"];\n", f);
			} else if ((v->flags & VALUE_INPUT) && !v->init) {
				fprintf(f, "  \"v%u\" -> \"n%u\";\n", v->id, i);
			} else if (v->init && show_params) {
				fprintf(f, "  \"v%u\" -> \"n%u\" [color=\"#aaaaaa\"];\n", v->id, i);
			}
		}
		for (uint32_t k = 0; k < n->n_ctrl; k++)
			fprintf(f, "  \"n%u\" -> \"n%u\" [style=dashed, color=\"#cc0000\"];\n", n->ctrl[k]->index, i);
	}
	fputs("}\n", f);
	xfree(kept);
	return 0;
}
