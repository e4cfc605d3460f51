/* steps.c - the state a training graph carries from step to step (steps.h). */
#include "../util/arena.h"
#include "../util/xalloc.h"
#include "steps.h"

#include <stdlib.h>
#include <string.h>

int steps_init(struct graph *g, const char *loss_name, struct steps *s, struct gd_err *e)
{
	memset(s, 0, sizeof *s);
	size_t total = 0;
	for (size_t i = 0; g->model && i < g->model->n_ti; i++)
		total += g->model->ti[i].n_update_bind;
	s->key = xcalloc(total + 1, sizeof *s->key);
	s->next = xcalloc(total + 1, sizeof *s->next);
	s->data = xcalloc(total + 1, sizeof *s->data);
	if (!s->key || !s->next || !s->data)
		return err_oom(e);
	for (size_t i = 0; g->model && i < g->model->n_ti; i++)
		for (size_t k = 0; k < g->model->ti[i].n_update_bind; k++) {
			const struct kv *b = &g->model->ti[i].update_bind[k];
			struct value *key = strmap_get(&g->names, b->key), *next = strmap_get(&g->names, b->value);
			if (!key || !(key->init || (key->flags & VALUE_INPUT)))
				return err_set(e, GD_EINPUT, "update_binding: '%s' is not an initializer or input", b->key);
			if (!next || !(next->flags & VALUE_OUTPUT))
				return err_set(e, GD_EINPUT, "update_binding: '%s' (for '%s') is not a graph output", b->value,
					       b->key);
			s->key[s->n] = key;
			s->next[s->n++] = next;
		}
	s->scale = strmap_get(&g->names, "loss_scale");
	s->found = strmap_get(&g->names, "found_inf");
	s->norm = strmap_get(&g->names, "grad_norm");
	if (s->found && !(s->found->flags & VALUE_OUTPUT))
		s->found = NULL;
	if (s->norm && !(s->norm->flags & VALUE_OUTPUT))
		s->norm = NULL;
	if (loss_name) {
		s->loss = strmap_get(&g->names, loss_name);
		if (!s->loss || !(s->loss->flags & VALUE_OUTPUT))
			return err_set(e, GD_EINPUT, "--loss %s: the graph has no output of that name", loss_name);
		return 0;
	}
	struct value *l = strmap_get(&g->names, "loss_global"); /* replicas: the whole batch's */
	if (!(l && (l->flags & VALUE_OUTPUT)))
		l = strmap_get(&g->names, "loss");
	if (l && (l->flags & VALUE_OUTPUT)) {
		s->loss = l;
		return 0;
	}
	const struct value *only = NULL;
	int n_only = 0;
	for (uint32_t i = 0; i < g->n_outputs; i++) { /* the only float scalar output that is no bookkeeping */
		const struct value *v = g->outputs[i];
		int other = v == s->found || v == s->norm || (v->flags & VALUE_GRAD) || !v->type.has_shape ||
			    v->type.ndim || !dtype_is_float(v->type.dtype);
		for (uint32_t k = 0; k < s->n && !other; k++)
			other = v == s->next[k];
		if (!other) {
			only = v;
			n_only++;
		}
	}
	s->loss = n_only == 1 ? only : NULL;
	return 0;
}

void steps_free(struct steps *s)
{
	for (uint32_t i = 0; s->data && i < s->n; i++)
		xfree(s->data[i].data);
	free(s->key);
	free(s->next);
	free(s->data);
}

int steps_advance(struct steps *s, const struct exec *x, struct gd_err *e)
{
	for (uint32_t i = 0; i < s->n; i++) {
		const struct rtensor *t = exec_value(x, s->next[i]);
		struct rtensor c = *t;
		c.data = xmalloc(t->nbytes ? t->nbytes : 1);
		if (!c.data)
			return err_oom(e);
		memcpy(c.data, t->data, t->nbytes);
		c.owned = 0;
		xfree(s->data[i].data);
		s->data[i] = c;
	}
	return 0;
}

int steps_to_inits(const struct steps *s, struct graph *g, struct gd_err *e)
{
	for (uint32_t i = 0; i < s->n; i++) {
		const struct rtensor *d = &s->data[i];
		struct value *key = s->key[i];
		struct tensor *t = key->init ? key->init : arena_zalloc(g->arena, sizeof *t);
		int same = key->init && t->ndim == (uint32_t)d->ndim &&
			   (!d->ndim || !memcmp(t->dims, d->dims, sizeof *d->dims * (size_t)d->ndim));
		int64_t *dims = same ? t->dims : t ? arena_memdup(g->arena, d->dims, sizeof d->dims) : NULL;
		if (!t || (!dims && !same))
			return err_oom(e);
		*t = (struct tensor){.name = key->name, .dtype = d->dtype, .ndim = (uint32_t)d->ndim, .dims = dims,
				     .src = TSRC_BYTES, .field = TFIELD_RAW, .bytes = {d->data, d->nbytes}};
		if (!key->init && graph_add_init(g, key, t, e))
			return e->code;
	}
	return 0;
}
