/* strategy.c - see strategy.h. */
#include "strategy.h"
#include "../util/xalloc.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {"none", "speed", "memory", "auto", "list"};

const char *ckpt_name(enum ckpt_kind k)
{
	return names[k];
}

int ckpt_parse(const char *s, struct ckpt *c)
{
	memset(c, 0, sizeof *c);
	for (int k = CKPT_NONE; k <= CKPT_AUTO; k++)
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

/* Marks the forward value named name[0..len) kept. */
static int keep_name(const struct graph *g, const char *name, size_t len, uint8_t *k, struct gd_err *e)
{
	char buf[512];
	if (len >= sizeof buf)
		return err_set(e, GD_EINPUT, "checkpoint '%.40s...': the name is too long", name);
	memcpy(buf, name, len);
	buf[len] = 0;
	const struct value *v = strmap_get(&g->names, buf);
	if (!v || !value_is_activation(v))
		return err_set(e, GD_EINPUT, "checkpoint '%s' is not a value a forward node produces", buf);
	k[v->id] = 1;
	return 0;
}

int ckpt_choose(const struct graph *g, struct memmodel *m, const struct bottlenecks *bn, const struct ckpt *c,
		uint8_t **keep, struct auto_result *ar, struct gd_err *e)
{
	struct auto_result scratch;
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
					total += m->bytes[n->out[j]->id];
					if (b < bn->n && bn->v[b] == n->out[j])
						at[b++] = total;
				}
		}
		uint32_t n_ckpt = (uint32_t)ceil(sqrt((double)nf));
		b = 0;
		for (uint32_t j = 1; j <= n_ckpt && b < bn->n; j++) {
			uint64_t target = (uint64_t)((double)total * j / (n_ckpt + 1));
			while (b + 1 < bn->n && at[b] < target)
				b++;
			k[bn->v[b]->id] = 1;
		}
		xfree(at);
		break;
	}
	case CKPT_AUTO: { /* the fixed strategies' plans are candidates too */
		uint8_t *seeds[2] = {NULL, NULL};
		struct ckpt speed = {.kind = CKPT_SPEED}, memory = {.kind = CKPT_MEMORY};
		int rc = ckpt_choose(g, m, bn, &speed, &seeds[0], NULL, e) ||
				 (bn && ckpt_choose(g, m, bn, &memory, &seeds[1], NULL, e))
			     ? e->code
			     : ckpt_auto(g, m, c->budget, (const uint8_t *const *)seeds, bn ? 2 : 1, k,
					 ar ? ar : &scratch, e);
		xfree(seeds[0]);
		xfree(seeds[1]);
		return rc;
	}
	case CKPT_LIST:
		for (size_t i = 0; i < c->n_names; i++)
			if (keep_name(g, c->names[i], strlen(c->names[i]), k, e))
				return e->code;
		for (const char *p = c->list; p && *p;) {
			size_t len = strcspn(p, ",");
			if (keep_name(g, p, len, k, e))
				return e->code;
			p += len + (p[len] == ',');
		}
		break;
	}
	return 0;
}
