/* ops.c - registry tables and lookup; the rows themselves are in ops.def. */
#include "ops.h"
#include "../exec/exec.h"
#include "../ir/graph.h"
#include "../util/strmap.h"

#include <math.h>
#include <string.h>

const struct op_info op_table[OP_COUNT] = {
	[OP_UNKNOWN] = {"", "", 0, -1, 0, -1, 0, NULL},
#define OP(id, name, dom, min_in, max_in, min_out, max_out, fl, impl) \
	[OP_##id] = {name, dom, min_in, max_in, min_out, max_out, fl, &op_##impl},
#include "ops.def"
#undef OP
};

/* In op order (gen_attrs.py writes them in ops.def's), so an op's rows are found by bisection. */
const struct op_attr op_attrs[] = {
#define ATTR(op, name, type, values) {OP_##op, name, type, values},
#include "attrs.def"
#undef ATTR
};
const size_t op_attrs_count = sizeof op_attrs / sizeof *op_attrs;

const struct op_attr *op_attr_rows(enum op_id op, const char *name, int *count)
{
	size_t lo = 0, hi = op_attrs_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (op_attrs[mid].op < op)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < op_attrs_count && op_attrs[lo].op == op; lo++)
		if (strcmp(op_attrs[lo].name, name) == 0) {
			int k = 1;
			while (lo + k < op_attrs_count && op_attrs[lo + k].op == op &&
			       strcmp(op_attrs[lo + k].name, name) == 0)
				k++;
			*count = k;
			return &op_attrs[lo];
		}
	*count = 0;
	return NULL;
}

int op_input_differentiable(const struct node *n, uint32_t k)
{
	const struct op_impl *impl = n->op != OP_UNKNOWN ? op_table[n->op].impl : NULL;
	return impl && (op_table[n->op].flags & OPF_DIFF) && !(k < 32 && (impl->nodiff >> k) & 1);
}

void op_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
	     uint64_t *bytes)
{
	uint64_t f = 0, b = 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		b += in[k] ? in[k]->nbytes : 0;
	for (uint32_t k = 0; k < n->n_out; k++) {
		b += out[k] ? out[k]->nbytes : 0;
		f += out[k] ? (uint64_t)out[k]->numel : 0;
	}
	const struct op_impl *impl = n->op != OP_UNKNOWN ? op_table[n->op].impl : NULL;
	if (impl && impl->cost)
		impl->cost(n, in, out, &f, &b);
	*flops = f;
	*bytes = b;
}

int op_domain_is_default(const char *domain)
{
	return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

enum op_id op_lookup(const char *domain, const char *op_type)
{
	/* Default-domain ops go through a hash built on first use: readers call this once per node,
	 * a million times on big graphs. Other domains are few and scanned. */
	static struct strmap by_name;
	static int ready;
	if (!op_type)
		return OP_UNKNOWN;
	if (op_domain_is_default(domain)) {
		if (!ready) {
			for (int i = 1; i < OP_COUNT; i++)
				if (op_domain_is_default(op_table[i].domain) &&
				    strmap_put(&by_name, op_table[i].op_type, (void *)(intptr_t)i))
					goto scan; /* out of memory: fall back to the scan */
			ready = 1;
		}
		return (enum op_id)(intptr_t)strmap_get(&by_name, op_type);
	}
scan:
	for (int i = 1; i < OP_COUNT; i++) {
		const struct op_info *o = &op_table[i];
		if (strcmp(o->op_type, op_type) == 0 &&
		    (op_domain_is_default(domain) ? op_domain_is_default(o->domain)
						  : strcmp(o->domain, domain) == 0))
			return (enum op_id)i;
	}
	return OP_UNKNOWN;
}

int op_noop_same_shape(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	(void)in;
	(void)out;
	return 0;
}

int op_all_equal(const struct rtensor *t, double v)
{
	if (!t || !t->data)
		return 0;
	int fl = dtype_is_float(t->dtype);
	for (int64_t i = 0; i < t->numel; i++) {
		double x = rt_get(t, i);
		if (x != v || (fl && !signbit(x) != !signbit(v)))
			return 0;
	}
	return 1;
}
