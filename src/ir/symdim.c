/* symdim.c - dims as expressions over symbols, and the assumptions recorded on them; see symdim.h.
 *
 * The assumptions live in the model's metadata_props (one string, a line each) rather than in a
 * struct of the graph, so that every reader and writer keeps them without knowing about them. */
#include "symdim.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static size_t put(char *buf, size_t n, size_t k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t put(char *buf, size_t n, size_t k, const char *fmt, ...)
{
	if (k >= n)
		return k;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + k, n - k, fmt, ap);
	va_end(ap);
	return w < 0 ? n : k + (size_t)w;
}

const char *symdim_str(const struct symdim *d, char *buf, size_t n)
{
	size_t k = 0;
	if (!n)
		return buf;
	buf[0] = 0;
	for (int i = 0; i < d->n; i++) {
		const struct symdim_term *t = &d->t[i];
		int64_t m = t->k < 0 ? -t->k : t->k;
		k = put(buf, n, k, "%s", !i ? (t->k < 0 ? "-" : "") : (t->k < 0 ? " - " : " + "));
		if (m != 1)
			k = put(buf, n, k, "%" PRId64 "*", m);
		k = put(buf, n, k, "%s%s%s", t->a, t->b ? "*" : "", t->b ? t->b : "");
	}
	if (d->c && d->n)
		k = put(buf, n, k, " %c %" PRId64, d->c < 0 ? '-' : '+', d->c < 0 ? -d->c : d->c);
	else if (!d->n)
		k = put(buf, n, k, "%" PRId64, d->c);
	return buf;
}

static int is_sym_char(char c)
{
	return c && !strchr(" +-*<=;\t\n", c);
}

static const char *skip(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

int symdim_parse(struct arena *a, const char *s, size_t len, struct symdim *d)
{
	const char *p = s, *end = s + len;
	*d = (struct symdim){0};
	int sign = 1, first = 1;
	for (;;) {
		p = skip(p, end);
		if (p < end && (*p == '-' || (*p == '+' && !first))) {
			sign = *p == '-' ? -1 : 1;
			p = skip(p + 1, end);
		} else if (!first) {
			break;
		}
		first = 0;
		int64_t k = 1;
		int has_k = 0;
		if (p < end && *p >= '0' && *p <= '9') {
			k = 0;
			for (; p < end && *p >= '0' && *p <= '9'; p++) {
				if (k > (INT64_MAX - 9) / 10)
					return -1;
				k = k * 10 + (*p - '0');
			}
			has_k = 1;
			if (p < end && *p == '*')
				p++;
			else {
				if (__builtin_add_overflow(d->c, sign * k, &d->c))
					return -1;
				sign = 1;
				continue;
			}
		}
		const char *names[2] = {0};
		for (int j = 0; j < 2; j++) {
			const char *q = p;
			while (p < end && is_sym_char(*p))
				p++;
			if (p == q || (*q >= '0' && *q <= '9'))
				return -1;
			if (!(names[j] = arena_strndup(a, q, (size_t)(p - q))))
				return -1;
			if (p >= end || *p != '*')
				break;
			p++;
		}
		if (d->n == SYMDIM_TERMS || (has_k && !k))
			return -1;
		d->t[d->n++] = (struct symdim_term){.k = sign * k, .a = names[0], .b = names[1]};
		sign = 1;
	}
	return skip(p, end) == end && !first ? 0 : -1;
}

static int lookup(const char *sym, const char *const *names, const int64_t *values, size_t n, int64_t *v)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], sym)) {
			*v = values[i];
			return 0;
		}
	return -1;
}

int symdim_eval(const struct symdim *d, const char *const *names, const int64_t *values, size_t n, int64_t *out,
		const char **unbound)
{
	int64_t sum = d->c;
	for (int i = 0; i < d->n; i++) {
		const struct symdim_term *t = &d->t[i];
		int64_t a, b = 1, ab, kab;
		if (lookup(t->a, names, values, n, &a) || (t->b && lookup(t->b, names, values, n, &b))) {
			*unbound = lookup(t->a, names, values, n, &a) ? t->a : t->b;
			return -1;
		}
		if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, t->k, &kab) ||
		    __builtin_add_overflow(sum, kab, &sum)) {
			*unbound = NULL;
			return -1;
		}
	}
	*out = sum;
	return 0;
}

const char *symdim_line(struct arena *a, const char *expr, int64_t limit, const char *node, const char *buffer)
{
	return arena_printf(a, "%s <= %" PRId64 "; node %s; buffer %s", expr, limit, node ? node : "", buffer ? buffer : "");
}

int symdim_each_line(const struct graph *g, int (*fn)(void *arg, const char *line, size_t len), void *arg)
{
	const char *p = g->model ? model_meta(g, SYMDIM_META_KEY) : NULL;
	int rc = 0;
	while (p && *p && !rc) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		rc = fn(arg, p, len);
		p += len + (nl != NULL);
	}
	return rc;
}

int symdim_record(struct graph *g, const char *const *lines, size_t n)
{
	while (g->parent) /* (a subgraph's run: the model's metadata is the root's) */
		g = g->parent;
	const char *old = model_meta(g, SYMDIM_META_KEY);
	size_t len = old ? strlen(old) : 0;
	for (size_t i = 0; i < n; i++)
		len += strlen(lines[i]) + 1;
	char *all = n ? arena_alloc(g->arena, len + 1) : NULL, *q = all;
	if (!n)
		return 0;
	if (!all)
		return -1;
	if (old)
		q += sprintf(q, "%s", old);
	for (size_t i = 0; i < n; i++)
		q += sprintf(q, "%s%s", q == all ? "" : "\n", lines[i]);
	return model_set_meta(g, SYMDIM_META_KEY, all);
}

/* The text after "; KEY " in [p, end), up to the next ';' or the end, into out. */
static void field(const char *p, const char *end, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	out[0] = 0;
	for (const char *q = p; q && q < end; q = memchr(q + 1, ';', (size_t)(end - q - 1))) {
		const char *f = skip(q + 1, end);
		if ((size_t)(end - f) > kl && !memcmp(f, key, kl) && f[kl] == ' ') {
			const char *v = f + kl + 1, *ve = memchr(v, ';', (size_t)(end - v));
			size_t len = (size_t)((ve ? ve : end) - v);
			len = len < n - 1 ? len : n - 1;
			memcpy(out, v, len);
			out[len] = 0;
			return;
		}
		if (q + 1 >= end)
			break;
	}
}

int symdim_check(const struct graph *g, const char *const *names, const int64_t *values, size_t n, struct gd_err *e)
{
	const char *all = g->model ? model_meta(g, SYMDIM_META_KEY) : NULL;
	struct arena a;
	arena_init(&a);
	int rc = 0;
	for (const char *p = all; p && *p && !rc;) {
		const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
		const char *semi = memchr(p, ';', (size_t)(end - p)), *le = semi ? semi : end, *op = p;
		while (op + 1 < le && !(op[0] == '<' && op[1] == '='))
			op++;
		struct symdim d;
		struct symdim lim;
		char node[256], buffer[256];
		if (op + 1 >= le || symdim_parse(&a, p, (size_t)(op - p), &d) ||
		    symdim_parse(&a, op + 2, (size_t)(le - op - 2), &lim) || lim.n) {
			rc = err_set(e, GD_EINPUT, "metadata %s: '%.*s' is no assumption 'EXPR <= N; node NAME; buffer NAME'",
				     SYMDIM_META_KEY, (int)(end - p), p);
			break;
		}
		field(p, end, "node", node, sizeof node);
		field(p, end, "buffer", buffer, sizeof buffer);
		int64_t v;
		const char *unbound = NULL;
		long long limit = lim.c;
		if (!symdim_eval(&d, names, values, n, &v, &unbound) && v > limit) {
			char expr[256], bind[256] = "";
			size_t k = 0;
			for (int i = 0; i < d.n; i++) /* the bindings that broke it: "seq = 2048" */
				for (int j = 0; j < 1 + (d.t[i].b != NULL); j++) {
					int64_t sv = 0;
					const char *s = j ? d.t[i].b : d.t[i].a;
					lookup(s, names, values, n, &sv);
					int said = 0; /* named already, as a term's symbol before this one */
					for (int q = 0; q <= i && !said; q++)
						said = (q < i && ((d.t[q].a && !strcmp(d.t[q].a, s)) || (d.t[q].b && !strcmp(d.t[q].b, s)))) ||
						       (q == i && j && !strcmp(d.t[i].a, s));
					if (k < sizeof bind && !said)
						k += (size_t)snprintf(bind + k, sizeof bind - k, "%s%s = %" PRId64, k ? ", " : "", s, sv);
				}
			symdim_str(&d, expr, sizeof expr);
			rc = err_set(e, GD_EINPUT,
				     "node '%s' (Slice): %s breaks the assumption %s <= %lld: %s is the length of a slice of "
				     "buffer '%s', which holds %lld",
				     node, bind, expr, limit, expr, buffer, limit);
		}
		p = nl ? nl + 1 : end;
	}
	arena_free(&a);
	return rc;
}
