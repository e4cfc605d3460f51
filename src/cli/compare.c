/* compare.c - verify's rows: one output of two runs compared, and the table of them. */
#include "../util/emit.h"
#include "verify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* b (TRAIN's) against a (the reference's): found when b has a's element count; ok when every
 * element is within atol + rtol * |a|, and NaN and infinities are equal (inf - inf is NaN). */
void compare(struct row *r, const struct rtensor *a, const struct rtensor *b, double rtol, double atol,
		    int how)
{
	r->found = a && b && b->numel == a->numel && (!a->numel || (a->data && b->data));
	r->ok = r->found;
	r->any_nan = !!(how & CMP_NAN_EQUAL);
	double dd = 0, aa = 0;
	size_t es = a ? dtype_size(a->dtype) : 0;
	int exact = (how & CMP_EXACT_INTS) && r->found && !dtype_is_float(a->dtype) && b->dtype == a->dtype;
	for (int64_t k = 0; r->found && k < a->numel; k++) {
		double pa = rt_get(a, k), pb = rt_get(b, k), d = fabs(pa - pb);
		int same_bits = a->dtype == b->dtype &&
				!memcmp((const uint8_t *)a->data + k * (int64_t)es, (const uint8_t *)b->data + k * (int64_t)es, es);
		if (!isfinite(pa) || !isfinite(pb)) {
			if (same_bits || ((how & CMP_NAN_EQUAL) && (isnan(pa) ? isnan(pb) : pa == pb))) {
				r->nonfinite++;
			} else {
				r->ok = 0;
				r->max_abs = INFINITY;
			}
			continue;
		}
		dd += d * d;
		aa += pa * pa;
		r->max_abs = fmax(r->max_abs, d);
		if (pa != 0)
			r->max_rel = fmax(r->max_rel, d / fabs(pa));
		if (exact ? !same_bits : !(d <= atol + rtol * fabs(pa)))
			r->ok = 0;
	}
	r->norm_rel = aa > 0 ? sqrt(dd / aa) : dd > 0 ? INFINITY : 0;
}

int verify_parse_tol(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return !*s || *end || errno || !(*out >= 0) || !isfinite(*out); /* NaN, inf and negatives: no tolerance */
}

/* The table (or JSON/YAML) of rows, and the verdict. */
void report(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, double rtol, double atol,
		   int n_rep, int agree)
{
	if (fmt == OUT_TEXT) {
		printf("%-40s %12s %12s %12s\n", "output", "max abs", "max rel", "norm rel");
		for (size_t i = 0; i < n_rows; i++) {
			if (rows[i].found)
				printf("%-40s %12.3g %12.3g %12.3g%s%s", rows[i].name, rows[i].max_abs, rows[i].max_rel,
				       rows[i].norm_rel, rows[i].ok ? "" : "  DIFFERS", rows[i].why);
			if (rows[i].found && rows[i].nonfinite)
				printf("  (%" PRId64 " NaN or infinite, %s)", rows[i].nonfinite,
				       rows[i].any_nan ? "equal" : "bitwise equal");
			if (rows[i].found)
				putchar('\n');
			else
				printf("%-40s %12s %12s %12s  MISSING from %s\n", rows[i].name, "-", "-", "-", rows[i].missing_from);
		}
		if (n_rep > 1)
			printf("replicas: %d, in one process; their outputs %s\n", n_rep,
			       agree ? "agree bit for bit" : "DIFFER from replica 0's");
		printf("%s: %zu outputs compared, rtol %g, atol %g\n", all_ok ? "match" : "MISMATCH", n_rows, rtol, atol);
	} else {
		struct emit em;
		emit_init(&em, stdout, fmt == OUT_YAML);
		emit_obj_begin(&em);
		emit_key(&em, "match");
		emit_bool(&em, all_ok);
		emit_key(&em, "rtol");
		emit_double(&em, rtol);
		emit_key(&em, "atol");
		emit_double(&em, atol);
		emit_key(&em, "replicas");
		emit_int(&em, n_rep > 1 ? n_rep : 1);
		emit_key(&em, "replicas_agree");
		emit_bool(&em, agree);
		emit_key(&em, "outputs");
		emit_arr_begin(&em);
		for (size_t i = 0; i < n_rows; i++) {
			emit_obj_begin(&em);
			emit_key(&em, "name");
			emit_str(&em, rows[i].name);
			emit_key(&em, "found");
			emit_bool(&em, rows[i].found);
			emit_key(&em, "max_abs");
			emit_double(&em, rows[i].max_abs);
			emit_key(&em, "max_rel");
			emit_double(&em, rows[i].max_rel);
			emit_key(&em, "norm_rel");
			emit_double(&em, rows[i].norm_rel);
			emit_key(&em, "nonfinite");
			emit_int(&em, rows[i].nonfinite);
			emit_key(&em, "match");
			emit_bool(&em, rows[i].ok);
			if (rows[i].why[0]) {
				emit_key(&em, "why");
				emit_str(&em, rows[i].why + 2);
			}
			emit_obj_end(&em);
		}
		emit_arr_end(&em);
		emit_obj_end(&em);
	}
}

