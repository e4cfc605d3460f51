/* strategy.c - see strategy.h. */
#include "strategy.h"
#include "../util/xalloc.h"

#include <math.h>
#include <stdlib.h>
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

/* Marks the forward value named name[0..len) kept, or with "@k" a checkpoint of level k of the
 * backward pass (recompute.h). */
static int keep_name(const struct graph *g, const char *name, size_t len, uint8_t *k, struct gd_err *e)
{
	char buf[512];
	if (len >= sizeof buf)
		return err_set(e, GD_EINPUT, "checkpoint '%.40s...': the name is too long", name);
	memcpy(buf, name, len);
	buf[len] = 0;
	uint8_t level = RC_KEPT;
	char *at = strrchr(buf, '@');
	if (at && !strmap_get(&g->names, buf)) {
		char *end;
		long l = strtol(at + 1, &end, 10);
		if (at[1] < '0' || at[1] > '9' || *end || l < 1 || l >= RC_INNER)
			return err_set(e, GD_EINPUT, "checkpoint '%s': the level after '@' must be 1 to %d", buf,
				       RC_INNER - 1);
		*at = 0;
		level = l == 1 ? RC_KEPT : RC_AT_LEVEL(l);
	}
	const struct value *v = strmap_get(&g->names, buf);
	if (!v || !value_is_activation(v))
		return err_set(e, GD_EINPUT, "checkpoint '%s' is not a value a forward node produces", buf);
	k[v->id] = level;
	return 0;
}

/* Forward nodes. */
static uint32_t forward_nodes(const struct graph *g)
{
	uint32_t nf = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		nf += node_is_forward(g->nodes[i]);
	return nf;
}

/* n_ckpt bottlenecks (0: ceil(sqrt(forward nodes))) spaced evenly by the bytes the forward pass has
 * produced when each is made: targets at total * j / (n_ckpt + 1). */
static int spaced(const struct graph *g, const struct memmodel *m, const struct bottlenecks *bn, uint32_t n_ckpt,
		  uint8_t *k)
{
	uint64_t total = 0;
	uint64_t *at = xcalloc(bn->n ? bn->n : 1, sizeof *at);
	if (!at)
		return -1;
	uint32_t b = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		if (!node_is_forward(n))
			continue;
		for (uint32_t j = 0; j < n->n_out; j++)
			if (n->out[j]) {
				total += m->bytes[n->out[j]->id];
				if (b < bn->n && bn->v[b] == n->out[j])
					at[b++] = total;
			}
	}
	if (!n_ckpt)
		n_ckpt = (uint32_t)ceil(sqrt((double)forward_nodes(g)));
	b = 0;
	for (uint32_t j = 1; j <= n_ckpt && b < bn->n; j++) {
		uint64_t target = (uint64_t)((double)total * j / (n_ckpt + 1));
		while (b + 1 < bn->n && at[b] < target)
			b++;
		k[bn->v[b]->id] = 1;
	}
	xfree(at);
	return 0;
}

/* Appends the plan of `count` spaced bottlenecks to seeds. */
static int add_spaced(const struct graph *g, const struct memmodel *m, const struct bottlenecks *bn, uint32_t count,
		      uint8_t **seeds, size_t *n)
{
	uint8_t *k = xcalloc(g->n_values ? g->n_values : 1, 1);
	if (!k || spaced(g, m, bn, count, k)) {
		xfree(k);
		return -1;
	}
	seeds[(*n)++] = k;
	return 0;
}

/* Seeds for auto: the speed plan, and bottlenecks spaced as `memory` spaces them, ceil(sqrt(N))
 * of them, and on graphs small enough to weigh many plans every count from half to twice that
 * (at most AUTO_SPACED_SEEDS counts, evenly stepped): on a uniform chain the best single level of
 * checkpoints is such a spacing, and the DP's model, exact only for its segment costs, can miss it.
 * The speed and memory plans come first: local search starts from them (ckpt_auto). */
#define AUTO_SPACED_SEEDS 48
static int auto_seeds(const struct graph *g, struct memmodel *m, const struct bottlenecks *bn, uint8_t ***seeds,
		      size_t *n, struct gd_err *e)
{
	uint32_t root = (uint32_t)ceil(sqrt((double)forward_nodes(g)));
	uint32_t lo = 1, hi = 0, step = 1; /* the other counts: none on large graphs */
	if (bn && bn->n && g->n_nodes <= AUTO_LARGE_STEPS) {
		lo = root / 2 ? root / 2 : 1;
		hi = 2 * root < bn->n ? 2 * root : bn->n;
		step = (hi - lo) / AUTO_SPACED_SEEDS + 1;
	}
	*n = 0;
	*seeds = xcalloc(2 + (hi >= lo ? (hi - lo) / step + 1 : 0), sizeof **seeds);
	if (!*seeds)
		return err_oom(e);
	struct ckpt speed = {.kind = CKPT_SPEED};
	if (ckpt_choose(g, m, bn, &speed, &(*seeds)[(*n)++], NULL, e))
		return e->code;
	if (bn && add_spaced(g, m, bn, root, *seeds, n))
		return err_oom(e);
	for (uint32_t c = lo; c <= hi; c += step)
		if (c != root && add_spaced(g, m, bn, c, *seeds, n))
			return err_oom(e);
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
		/* every value, but a forward Cast of a value that is resident, or kept for a backward
		 * reader of its own (not such a Cast itself: g is sorted), is recast before its backward
		 * readers rather than kept: the bf16 copy of a float32 Softmax that the backward Softmax
		 * reads. (Bit 1 of k marks a value a backward node reads.) Fixed values are recomputed
		 * in every strategy (rc_forced). */
		memset(k, 1, g->n_values);
		for (uint32_t i = 0; i < g->n_nodes; i++)
			for (uint32_t j = 0; (g->nodes[i]->tags & TAG_BACKWARD) && j < g->nodes[i]->n_in; j++)
				if (g->nodes[i]->in[j])
					k[g->nodes[i]->in[j]->id] = 3;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			const struct value *u = n->n_in ? n->in[0] : NULL;
			if (node_is_forward(n) && n->op == OP_CAST && u && n->out[0] &&
			    (!value_is_activation(u) || (u->flags & VALUE_OUTPUT) || k[u->id] == 3))
				k[n->out[0]->id] = RC_DROP;
		}
		for (uint32_t v = 0; v < g->n_values; v++)
			k[v] &= 1;
		break;
	case CKPT_SPEED:
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			if (n->op == OP_MATMUL || n->op == OP_GEMM || n->op == OP_CONV)
				for (uint32_t j = 0; j < n->n_out; j++)
					if (n->out[j] && value_is_activation(n->out[j]))
						k[n->out[j]->id] = 1;
		}
		break;
	case CKPT_MEMORY:
		if (spaced(g, m, bn, 0, k))
			return err_oom(e);
		break;
	case CKPT_AUTO: { /* the fixed strategies' plans are candidates too */
		uint8_t **seeds = NULL;
		size_t n_seeds = 0;
		int rc = auto_seeds(g, m, bn, &seeds, &n_seeds, e) ||
				 ckpt_auto(g, m, c->budget, (const uint8_t *const *)seeds, n_seeds, k, ar ? ar : &scratch, e)
			     ? e->code
			     : 0;
		for (size_t i = 0; i < n_seeds; i++)
			xfree(seeds[i]);
		xfree(seeds);
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
