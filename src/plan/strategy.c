/* strategy.c - see strategy.h. */
#include "strategy.h"
#include "../util/xalloc.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"none", "speed", "memory", "list"};

const char *ckpt_name(enum ckpt_kind k)
{
	return names[k];
}

int ckpt_parse(const char *s, struct ckpt *c)
{
	memset(c, 0, sizeof *c);
	for (int k = CKPT_NONE; k <= CKPT_MEMORY; k++)
		if (!strcmp(s, names[k])) {
			c->kind = (enum ckpt_kind)k;
			return 0;
		}
	if (!strncmp(s, "list:", 5) && s[5]) {
		c->kind = CKPT_LIST;
		c->list = s + 5;
		return 0;
	}
	return -1;
}

int ckpt_choose(const struct graph *g, const struct exec *shapes, const struct bottlenecks *bn, const struct ckpt *c,
		uint8_t **keep, struct gd_err *e)
{
	uint8_t *k = xcalloc(g->n_values ? g->n_values : 1, 1);
	if (!k)
		return err_oom(e);
	*keep = k;
	switch (c->kind) {
	case CKPT_NONE:
		memset(k, 1, g->n_values);
		break;
	case CKPT_SPEED:
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			if (n->op_type && (!strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm") || !strcmp(n->op_type, "Conv")))
				for (uint32_t j = 0; j < n->n_out; j++)
					if (n->out[j] && value_is_activation(n->out[j]))
						k[n->out[j]->id] = 1;
		}
		break;
	case CKPT_MEMORY: {
		/* the bytes produced so far when each bottleneck is made; targets at total*j/(m+1) */
		uint32_t nf = 0;
		uint64_t total = 0;
		uint64_t *at = xcalloc(bn->n ? bn->n : 1, sizeof *at);
		if (!at)
			return err_oom(e);
		uint32_t b = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			if (!node_is_forward(n))
				continue;
			nf++;
			for (uint32_t j = 0; j < n->n_out; j++)
				if (n->out[j]) {
					total += exec_value(shapes, n->out[j])->nbytes;
					if (b < bn->n && bn->v[b] == n->out[j])
						at[b++] = total;
				}
		}
		uint32_t m = (uint32_t)ceil(sqrt((double)nf));
		b = 0;
		for (uint32_t j = 1; j <= m && b < bn->n; j++) {
			uint64_t target = (uint64_t)((double)total * j / (m + 1));
			while (b + 1 < bn->n && at[b] < target)
				b++;
			k[bn->v[b]->id] = 1;
		}
		xfree(at);
		break;
	}
	case CKPT_LIST:
		for (const char *p = c->list; *p;) {
			size_t len = strcspn(p, ",");
			char name[512];
			if (len >= sizeof name)
				return err_set(e, GD_EINPUT, "--checkpoint list: a name is too long");
			memcpy(name, p, len);
			name[len] = 0;
			const struct value *v = strmap_get(&g->names, name);
			if (!v || !value_is_activation(v))
				return err_set(e, GD_EINPUT, "--checkpoint list: '%s' is not a value a forward node produces", name);
			k[v->id] = 1;
			p += len + (p[len] == ',');
		}
		break;
	}
	return 0;
}
