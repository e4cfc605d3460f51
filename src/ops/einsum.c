/* einsum.c - Einsum (torch.einsum) over letter labels: "bhqd,bhkd->bhqk", implicit outputs ("ij,jk"),
 * ellipses ("...ij,...jk->...ik", without broadcasting within them), repeated labels (traces,
 * diagonals), up to 8 operands.
 *
 * The kernel walks every combination of label values, output labels outermost, so each output
 * element sums its products in one fixed order (in double, rounded once). The gradient of
 * operand k is an Einsum too: "out,others->k" over g and the other operands, where every label of k
 * appears in the output or another operand (a label summed within k alone is expanded back over),
 * and none repeats in k (a trace's gradient graphdiet refuses, saying so). */
#include "../autodiff/ad.h"
#include "kernel.h"

#include <stdio.h>
#include <string.h>

#define EIN_MAX_OPS 8

struct ein {
	int n;                                 /* operands */
	char in[EIN_MAX_OPS][RT_MAX_DIMS + 1]; /* each operand's labels, one per axis */
	char out[RT_MAX_DIMS + 1];
};

/* Parses "spec,spec->out" for operands of the given ranks (out implicit: the ellipsis' axes, then the
 * labels used once, in alphabetical order). An ellipsis '...' stands for an operand's remaining
 * axes, aligned right across the operands as numpy aligns them: it becomes letters the equation
 * does not use, so that everything after this sees explicit labels (and a gradient's equation is
 * explicit ONNX). Its axes must match in size (no broadcasting within it). */
static const char *ein_parse(const char *eq, int n_in, const int *ranks, struct ein *p)
{
	memset(p, 0, sizeof *p);
	if (!eq)
		return "no equation";
	/* the terms, '.' marking where an ellipsis stands */
	char term[EIN_MAX_OPS + 1][RT_MAX_DIMS + 2];
	int k = 0, len = 0, arrow = 0, used[128] = {0};
	memset(term, 0, sizeof term);
	for (const char *c = eq; *c; c++) {
		char *t = arrow ? term[EIN_MAX_OPS] : term[k];
		if (*c == ' ')
			continue;
		if (*c == ',' && !arrow) {
			if (++k >= EIN_MAX_OPS)
				return "too many operands";
			len = 0;
		} else if (c[0] == '-' && c[1] == '>' && !arrow) {
			arrow = 1;
			len = 0;
			c++;
		} else if (((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || !strncmp(c, "...", 3)) &&
			   len <= RT_MAX_DIMS) {
			if (*c == '.') {
				if (strchr(t, '.'))
					return "an ellipsis appears twice in a term";
				c += 2;
			}
			used[(int)*c] = 1;
			t[len++] = *c;
		} else {
			return len > RT_MAX_DIMS ? "a term has too many labels"
						 : "the equation has a character other than letters, '...', ',', '->' and spaces";
		}
	}
	p->n = k + 1;
	if (p->n != n_in)
		return "the equation's operands do not match the inputs";
	/* the ellipsis' letters, as many as the most axes it stands for */
	int ell[EIN_MAX_OPS], most = 0;
	for (int i = 0; i < p->n; i++) {
		int explicit = (int)strlen(term[i]) - (strchr(term[i], '.') != NULL);
		ell[i] = strchr(term[i], '.') ? ranks[i] - explicit : 0;
		if (ell[i] < 0)
			return "an operand has fewer axes than its term's labels";
		most = ell[i] > most ? ell[i] : most;
	}
	char fresh[RT_MAX_DIMS];
	int nf = 0;
	for (int c = 'A'; c <= 'z' && nf < most; c++)
		if (((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) && !used[c])
			fresh[nf++] = (char)c;
	for (int i = 0; i <= p->n; i++) {
		const char *t = i < p->n ? term[i] : term[EIN_MAX_OPS];
		char *dst = i < p->n ? p->in[i] : p->out;
		int e = i < p->n ? ell[i] : most, o = 0;
		if (i == p->n && !arrow)
			break;
		for (const char *c = t; *c; c++) {
			if (*c != '.') {
				if (o == RT_MAX_DIMS)
					return "a term has too many labels";
				dst[o++] = *c;
				continue;
			}
			if (o + e > RT_MAX_DIMS)
				return "a term has too many labels";
			memcpy(dst + o, fresh + (most - e), (size_t)e);
			o += e;
		}
	}
	if (!arrow) {
		int count[128] = {0}, o = most;
		memcpy(p->out, fresh, (size_t)most);
		for (int i = 0; i < p->n; i++)
			for (const char *c = term[i]; *c; c++)
				count[(int)*c]++;
		for (int c = 'A'; c <= 'z'; c++)
			if (c != '.' && count[c] == 1 && o < RT_MAX_DIMS)
				p->out[o++] = (char)c;
	}
	for (const char *c = p->out; *c; c++) {
		int found = 0;
		for (int i = 0; i < p->n && !found; i++)
			found = strchr(p->in[i], *c) != NULL;
		if (!found || strchr(c + 1, *c))
			return "an output label is missing from the inputs or repeated";
	}
	return NULL;
}

/* n's equation (into eqs[n], for messages) parsed for its operands' ranks; NULL, or why it cannot
 * be. */
static const char *ein_of(const struct node *n, const int *ranks, char *eqs, size_t size, struct ein *p)
{
	const struct attr *eq = node_attr(n, "equation");
	eqs[0] = 0;
	if (eq && eq->type == ATTR_STRING)
		snprintf(eqs, size, "%.*s", (int)eq->s.n, (const char *)eq->s.p);
	if (n->n_in > EIN_MAX_OPS)
		return "too many operands";
	return ein_parse(eqs, (int)n->n_in, ranks, p);
}

static int einsum_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	char eqs[256];
	struct ein p;
	int ranks[EIN_MAX_OPS] = {0};
	for (uint32_t i = 0; i < n->n_in && i < EIN_MAX_OPS; i++)
		ranks[i] = in[i]->ndim;
	const char *why = ein_of(n, ranks, eqs, sizeof eqs, &p);
	if (why)
		return exec_fail(x, "equation '%s': %s", eqs, why);
	/* the labels, output ones first, and their sizes (-1: not seen yet) */
	char labels[64];
	int64_t size[64];
	int nl = 0;
	for (const char *c = p.out; *c; c++) {
		labels[nl] = *c;
		size[nl++] = -1;
	}
	for (int i = 0; i < p.n; i++) {
		if ((int)strlen(p.in[i]) != in[i]->ndim)
			return exec_fail(x, "equation '%s': operand %d has rank %d, not %zu", eqs, i, in[i]->ndim,
					 strlen(p.in[i]));
		if (want_float(x, in[i], "every operand"))
			return exec_status(x);
		for (int d = 0; p.in[i][d]; d++) {
			char *at = memchr(labels, p.in[i][d], (size_t)nl);
			int l = at ? (int)(at - labels) : nl;
			if (!at) {
				labels[nl] = p.in[i][d];
				size[nl++] = -1;
			}
			if (size[l] < 0)
				size[l] = in[i]->dims[d];
			else if (size[l] != in[i]->dims[d])
				return exec_fail(x, "equation '%s': label '%c' has sizes %lld and %lld", eqs, p.in[i][d],
						 (long long)size[l], (long long)in[i]->dims[d]);
		}
	}
	int no = (int)strlen(p.out);
	int64_t odims[RT_MAX_DIMS];
	for (int l = 0; l < no; l++)
		odims[l] = size[l];
	if (!exec_alloc(x, out[0], in[0]->dtype, no, odims))
		return exec_status(x);
	/* strides of each label in each operand (a repeated label adds its axes' strides) */
	int64_t st[EIN_MAX_OPS][64], ist[RT_MAX_DIMS];
	memset(st, 0, sizeof st);
	for (int i = 0; i < p.n; i++) {
		c_strides(in[i]->ndim, in[i]->dims, ist);
		for (int d = 0; p.in[i][d]; d++)
			st[i][(char *)memchr(labels, p.in[i][d], (size_t)nl) - labels] += ist[d];
	}
	int64_t total = 1, idx[64] = {0}, off[EIN_MAX_OPS] = {0};
	for (int l = 0; l < nl; l++)
		total *= size[l];
	int64_t inner = 1; /* combinations per output element */
	for (int l = no; l < nl; l++)
		inner *= size[l];
	double acc = 0;
	for (int64_t e = 0; e < total; e++) {
		double v = 1;
		for (int i = 0; i < p.n; i++)
			v *= rt_get(in[i], off[i]);
		acc += v;
		if ((e + 1) % inner == 0) {
			rt_set(out[0], e / inner, acc);
			acc = 0;
		}
		for (int l = nl - 1; l >= 0; l--) {
			for (int i = 0; i < p.n; i++)
				off[i] += st[i][l];
			if (++idx[l] < size[l])
				break;
			for (int i = 0; i < p.n; i++)
				off[i] -= st[i][l] * size[l];
			idx[l] = 0;
		}
	}
	if (inner == 0) /* a summed label of size 0: zeros */
		for (int64_t e = 0; e < out[0]->numel; e++)
			rt_set(out[0], e, 0);
	return 0;
}

static int einsum_grad(struct ad *a, const struct node *n)
{
	char eqs[256];
	struct ein p;
	int ranks[EIN_MAX_OPS] = {0};
	for (uint32_t i = 0; i < n->n_in && i < EIN_MAX_OPS; i++)
		ranks[i] = ad_shape(a, n->in[i])->ndim;
	const char *why = ein_of(n, ranks, eqs, sizeof eqs, &p);
	if (why)
		return ad_fail(a, "equation '%s': %s", eqs, why);
	for (int k = 0; k < p.n; k++) {
		if (!ad_wants(a, n->in[k]))
			continue;
		/* k's labels that appear in the output or another operand; the rest were summed within k,
		 * so the gradient is the same along them: unsqueezed and expanded back */
		char kept[RT_MAX_DIMS + 1] = "";
		int64_t summed[RT_MAX_DIMS];
		int nk = 0, ns = 0;
		for (const char *c = p.in[k]; *c; c++) {
			int elsewhere = strchr(p.out, *c) != NULL;
			for (int i = 0; i < p.n && !elsewhere; i++)
				elsewhere = i != k && strchr(p.in[i], *c);
			if (strchr(c + 1, *c) || memchr(p.in[k], *c, (size_t)(c - p.in[k])))
				return ad_fail(a, "gradients of Einsum '%s' are not supported: label '%c' repeats in operand %d", eqs,
					       *c, k);
			if (elsewhere)
				kept[nk++] = *c;
			else
				summed[ns++] = c - p.in[k];
		}
		/* "out,others->kept" over (g, others) */
		char geq[256];
		int len = snprintf(geq, sizeof geq, "%s", p.out);
		struct value *ins[EIN_MAX_OPS];
		int m = 0;
		ins[m++] = ad_dy(a, n->out[0]);
		for (int i = 0; i < p.n; i++)
			if (i != k) {
				len += snprintf(geq + len, sizeof geq - (size_t)len, ",%s", p.in[i]);
				ins[m++] = n->in[i];
			}
		snprintf(geq + len, sizeof geq - (size_t)len, "->%s", kept);
		struct value *gk = ad_op(a, "Einsum", ins, m);
		if (!gk || ad_set_str(a, ad_producer(gk), "equation", geq))
			return -1;
		if (ns)
			gk = ad_op2(a, "Expand", ad_op2(a, "Unsqueeze", gk, ad_ints(a, summed, (size_t)ns)),
				    ad_shape_of(a, n->in[k]));
		if (ad_give(a, n->in[k], gk))
			return -1;
	}
	return 0;
}

/* two FLOPs per product term */
static void einsum_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			uint64_t *bytes)
{
	(void)bytes;
	uint64_t f = 2 * (uint64_t)out[0]->numel;
	/* the summed labels' extent: the largest operand's elements per output element, at least */
	for (uint32_t i = 0; i < n->n_in; i++)
		if (in[i] && out[0]->numel && (uint64_t)in[i]->numel > (uint64_t)out[0]->numel)
			f = 2 * (uint64_t)in[i]->numel;
	*flops = f;
}

const struct op_impl op_einsum = {.run = einsum_run, .cost = einsum_cost, .grad = einsum_grad, .recompute = RC_EXPENSIVE};
