/* widen.c - see widen.h. */
#include "widen.h"
#include "../io/tensor.h"

#include <string.h>

static int widened(int dt)
{
	return dt == DT_FLOAT || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

static int widen_tensor(struct graph *g, struct tensor *t, struct gd_err *e)
{
	if (!t || !widened(t->dtype))
		return 0;
	struct bytes b;
	if (tensor_bytes(g, t, &b, e))
		return e->code;
	size_t size = t->dtype == DT_FLOAT ? sizeof(float) : sizeof(uint16_t), n = b.n / size;
	double *d = arena_array(g->arena, n ? n : 1, sizeof *d);
	if (!d)
		return err_oom(e);
	for (size_t i = 0; i < n; i++) {
		float f;
		uint16_t h;
		memcpy(t->dtype == DT_FLOAT ? (void *)&f : (void *)&h, b.p + i * size, size);
		d[i] = t->dtype == DT_FLOAT ? f : t->dtype == DT_FLOAT16 ? f32_from_f16(h) : f32_from_bf16(h);
	}
	t->dtype = DT_DOUBLE;
	t->src = TSRC_BYTES;
	t->field = TFIELD_RAW;
	t->bytes = (struct bytes){(const uint8_t *)d, n * sizeof *d};
	t->external = NULL;
	t->n_external = 0;
	t->has_location = false;
	t->path = NULL;
	return 0;
}

int graph_widen_f64(struct graph *g, struct gd_err *e)
{
	for (uint32_t i = 0; i < g->n_values; i++) {
		struct value *v = g->values[i];
		if (widened(v->type.dtype))
			v->type.dtype = DT_DOUBLE;
		if (widen_tensor(g, v->init, e))
			return e->code;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_attr; k++) {
			struct attr *a = &n->attr[k];
			int names_dtype = (n->op == OP_CAST && !strcmp(a->name, "to")) || !strcmp(a->name, "dtype");
			if (a->type == ATTR_INT && names_dtype && widened((int)a->i))
				a->i = DT_DOUBLE;
			if (a->type == ATTR_TENSOR && widen_tensor(g, a->t, e))
				return e->code;
			for (size_t j = 0; a->type == ATTR_TENSORS && j < a->n; j++)
				if (widen_tensor(g, a->tensors[j], e))
					return e->code;
			if (a->type == ATTR_GRAPH && a->g && graph_widen_f64(a->g, e))
				return e->code;
			for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
				if (graph_widen_f64(a->graphs[j], e))
					return e->code;
		}
	}
	return 0;
}
