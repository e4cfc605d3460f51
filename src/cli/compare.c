/* compare.c - verify's rows: one output of two runs compared, judged, and the table of them.
 *
 * Each row gives four measures of TRAIN's output t against the reference r: the largest absolute
 * difference, the largest relative one over the elements with |r| >= 1e-3 max|r| (below that, an
 * element's relative error measures how far a sum cancelled, not how well it was computed: a
 * passing row said `max rel 4.44`), the mean absolute difference, and the norm-relative error
 * |t - r| / |r| in the L2 norm. The verdict is one of three criteria (verify.h's tol):
 *
 *   TOL_ELEMENT  |t - r| <= atol + rtol |r| + |r16 - r| for every element, where r16 is the
 *                reference run in TRAIN's 16-bit precision when there is one (else the last term is
 *                0): an element may differ by what 16 bits cost it in the reference itself.
 *   TOL_SCALED   the same with atol raised to rtol max|r|: a float32 gradient is a sum whose
 *                rounding error scales with the magnitudes summed, so an element that sums to nearly
 *                0 is held to the tensor's accuracy, not its own (a correct CNN against PyTorch
 *                differed by 1.6e-7 where rtol |r| + atol allowed 1e-7).
 *   TOL_NORM     |t - r| / |r| and |t - r16| / |r| both at most slack |r16 - r| / |r| + norm:
 *                TRAIN in 16 bits may be as far from the float32 reference, and from the same
 *                model's gradients in the same 16 bits, as those are from each other (the noise
 *                floor, measured on these inputs), plus a margin of half the format's unit
 *                roundoff. A TRAIN with no loss scale gives r16's bits exactly; a loss scale moves
 *                fp16 values out of its subnormals (below 6.1e-5), which changes their rounding:
 *                |t - r| grew to 1.14 floors on a LLaMA-like model, |t - r16| to 0.47, so slack
 *                is 1.25 for fp16 (bf16 has float32's range: a power-of-two scale changes no bit,
 *                slack 1). A gradient scaled by 1.01 is 1% from r16 whatever the floor's
 *                direction, so the second bound catches it where the floor is under about 0.8%;
 *                the first, with |t - r| about sqrt(floor^2 + 1e-4), where the floor is under 1.2%
 *                (fp16) or 2.5% (bf16), unless 16 bits shrink or grow that gradient as a whole and
 *                the error undoes it (bf16 grew a BERT's by 0.7%: x0.99 passed the first bound).
 *                Where the floor is 0.5 or more the output is rounding noise at this precision (a
 *                gradient that is 0 up to rounding, like a bias before a BatchNormalization: a
 *                loss-scaled fp16 rescnn's was 1.34 floors from r): slack 2 there.
 *                Against saved gradients there is no 16-bit reference: the floor is 0, the margin 8 unit
 *                roundoffs (3.9e-3 fp16, 3.1e-2 bf16: bf16's own noise reached 1.2% on the
 *                transformer), and an output within atol everywhere passes too (a gradient that is
 *                0 up to rounding, like a bias before a BatchNormalization, has no norm to be
 *                relative to). A 1% error hides only in a floor as large (a bf16 MLP whose ReLUs
 *                flip: 15%; a gradient that is 0 up to rounding).
 *
 * NaN and infinities must be equal bit for bit (or any NaN to any NaN, CMP_NAN_EQUAL) whatever the
 * criterion. */
#include "../util/emit.h"
#include "../util/xalloc.h"
#include "verify.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void compare(struct row *r, const struct rtensor *a, const struct rtensor *b, const struct tol *t, int how,
	     const struct rtensor *a16)
{
	r->found = a && b && b->numel == a->numel && (!a->numel || (a->data && b->data));
	r->ok = r->found;
	r->any_nan = !!(how & CMP_NAN_EQUAL);
	r->has_tol = 1;
	r->tol = *t;
	r->noise = r->off16 = -1;
	if (!r->found)
		return;
	if (a16 && (a16->numel != a->numel || (a->numel && !a16->data)))
		a16 = NULL;
	double amax = 0;
	for (int64_t k = 0; k < a->numel; k++)
		if (isfinite(rt_get(a, k)))
			amax = fmax(amax, fabs(rt_get(a, k)));
	r->max_rel_floor = 1e-3 * amax;
	double atol = t->kind == TOL_SCALED ? fmax(t->atol, t->rtol * amax) : t->atol;
	double dd = 0, aa = 0, nn = 0, oo = 0, sum = 0;
	int64_t n_finite = 0;
	size_t es = dtype_size(a->dtype);
	int exact = (how & CMP_EXACT_INTS) && !dtype_is_float(a->dtype) && b->dtype == a->dtype;
	for (int64_t k = 0; k < a->numel; k++) {
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
		double noise = a16 ? fabs(rt_get(a16, k) - pa) : 0, off = a16 ? fabs(rt_get(a16, k) - pb) : 0;
		if (!isfinite(noise) || !isfinite(off))
			noise = off = 0; /* the 16-bit reference overflowed here: it says nothing of the precision */
		oo += off * off;
		dd += d * d;
		aa += pa * pa;
		nn += noise * noise;
		sum += d;
		n_finite++;
		r->max_abs = fmax(r->max_abs, d);
		if (pa != 0 && fabs(pa) >= r->max_rel_floor)
			r->max_rel = fmax(r->max_rel, d / fabs(pa));
		if (t->kind != TOL_NORM && (exact ? !same_bits : !(d <= atol + t->rtol * fabs(pa) + noise)))
			r->ok = 0;
	}
	r->norm_rel = aa > 0 ? sqrt(dd / aa) : dd > 0 ? INFINITY : 0;
	r->mean_abs = n_finite ? sum / (double)n_finite : 0;
	if (a16) {
		r->noise = aa > 0 ? sqrt(nn / aa) : nn > 0 ? INFINITY : 0;
		r->off16 = aa > 0 ? sqrt(oo / aa) : oo > 0 ? INFINITY : 0;
	}
	/* an output the 16-bit reference misses by half its norm or more is rounding noise at this
	 * precision (a gradient that is 0 up to rounding: a bias before a BatchNormalization), and two
	 * roundings of noise differ by their own size: twice the floor */
	double slack = r->noise >= 0.5 ? 2 : t->slack > 0 ? t->slack : 1, bound = slack * fmax(r->noise, 0) + t->norm;
	if (t->kind == TOL_NORM && !((r->norm_rel <= bound && r->off16 <= bound) || r->max_abs <= t->atol))
		r->ok = 0;
}

int verify_parse_tol(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return !*s || *end || errno || !(*out >= 0) || !isfinite(*out); /* NaN, inf and negatives: no tolerance */
}

int verify_parse_tol_override(const char *arg, struct tol_override *o)
{
	const char *eq = strrchr(arg, '=');
	char buf[64];
	*o = (struct tol_override){0};
	if (!eq || eq == arg || !eq[1] || strlen(eq + 1) >= sizeof buf)
		return cli_usage("verify", "--tol wants NAME=RTOL[,ATOL] (NAME may be a glob), not '%s'", arg);
	if ((size_t)(eq - arg) >= sizeof o->pattern)
		return cli_usage("verify", "--tol: a NAME of %zu bytes (at most %zu)", (size_t)(eq - arg),
				 sizeof o->pattern - 1);
	memcpy(o->pattern, arg, (size_t)(eq - arg));
	strcpy(buf, eq + 1);
	char *comma = strchr(buf, ',');
	if (comma)
		*comma = 0;
	if (verify_parse_tol(buf, &o->rtol) || (comma && verify_parse_tol(comma + 1, &o->atol)))
		return cli_usage("verify", "--tol %s: '%s' is not RTOL[,ATOL] (finite numbers, 0 or more)", arg, eq + 1);
	o->has_atol = comma != NULL;
	return 0;
}

void verify_row_tol(struct row *r, const struct tol *base, struct tol_override *o, size_t n_o)
{
	r->tol = *base;
	r->has_tol = 1;
	for (size_t i = 0; i < n_o; i++) {
		if (fnmatch(o[i].pattern, r->name, 0))
			continue;
		o[i].hits++;
		/* an element criterion: the base's atol (0 under a norm criterion) unless given */
		r->tol = (struct tol){.kind = base->kind == TOL_SCALED ? TOL_SCALED : TOL_ELEMENT, .rtol = o[i].rtol,
				      .atol = o[i].has_atol ? o[i].atol : base->kind == TOL_NORM ? 0 : base->atol};
		r->tol_from = o[i].pattern;
		return;
	}
}

void verify_note_unmatched(const struct tol_override *o, size_t n_o)
{
	for (size_t i = 0; i < n_o; i++)
		if (!o[i].hits)
			gd_note("--tol %s matched no output compared", o[i].pattern);
}

void verify_tol_describe(const struct tol *t, int precision, char *crit, size_t n, char *sum, size_t sn)
{
	const char *p = precision == DT_BFLOAT16 ? "bf16" : "fp16", *noise = precision ? " + |ref16 - ref|" : "";
	char k[32] = "";
	if (t->slack > 1)
		snprintf(k, sizeof k, "%g * ", t->slack);
	if (t->kind == TOL_NORM && t->floor) {
		snprintf(crit, n, "norm rel and vs ref16 <= %sfloor + %g (floor: the norm rel of MODEL's own gradients in "
				  "%s, ref16; vs ref16: |train - ref16| / |ref|)", k, t->norm, p);
		snprintf(sum, sn, "norm rel and vs ref16 <= %sfloor + %g", k, t->norm);
	} else if (t->kind == TOL_NORM) {
		snprintf(crit, n, "norm rel <= %g, or |train - ref| <= %g everywhere (TRAIN computes in %s)", t->norm,
			 t->atol, p);
		snprintf(sum, sn, "norm rel <= %g", t->norm);
	} else {
		snprintf(crit, n, "|train - ref| <= %s + rtol * |ref|%s, rtol %g, atol %g",
			 t->kind == TOL_SCALED ? "max(atol, rtol * max|ref|)" : "atol", noise, t->rtol, t->atol);
		snprintf(sum, sn, "rtol %g, atol %g%s%s", t->rtol, t->atol,
			 t->kind == TOL_SCALED ? " (at least rtol * max|ref|)" : "",
			 precision ? ", plus the 16-bit reference's own error" : "");
	}
}

static const char *verdict(const struct row *r)
{
	return !r->found ? "MISSING" : r->ok ? "ok" : "DIFFERS";
}

/* A row's own tolerance, when a --tol chose it (the header's criterion judged the others). */
static void row_tol_text(const struct row *r, char *buf, size_t n)
{
	buf[0] = 0;
	if (r->has_tol && r->tol_from)
		snprintf(buf, n, "  (--tol %s: rtol %g, atol %g)", r->tol_from, r->tol.rtol, r->tol.atol);
}

static const char *kind_name(enum tol_kind k)
{
	return k == TOL_NORM ? "norm" : k == TOL_SCALED ? "scaled" : "element";
}

void report_rows(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, const char *crit,
		 const char *sum, int n_rep, int agree)
{
	int any_noise = 0;
	for (size_t i = 0; i < n_rows; i++)
		any_noise |= rows[i].found && rows[i].noise >= 0;
	if (fmt == OUT_TEXT) {
		printf("criterion: %s\n", crit);
		printf("%-40s %11s %11s %11s %11s", "output", "max abs", "max rel", "mean abs", "norm rel");
		if (any_noise)
			printf(" %11s %11s", "floor", "vs ref16");
		printf("  verdict\n");
		for (size_t i = 0; i < n_rows; i++) {
			const struct row *r = &rows[i];
			char tt[600];
			row_tol_text(r, tt, sizeof tt);
			if (!r->found) {
				printf("%-40s %11s %11s %11s %11s%s  MISSING from %s\n", r->name, "-", "-", "-", "-",
				       any_noise ? "           -           -" : "", r->missing_from);
				continue;
			}
			printf("%-40s %11.3g %11.3g %11.3g %11.3g", r->name, r->max_abs, r->max_rel, r->mean_abs, r->norm_rel);
			if (any_noise)
				printf(" %11.3g %11.3g", r->noise, r->off16);
			printf("  %s%s%s", verdict(r), r->why, tt);
			if (r->nonfinite)
				printf("  (%" PRId64 " NaN or infinite, %s)", r->nonfinite, r->any_nan ? "equal" : "bitwise equal");
			putchar('\n');
		}
		if (n_rep > 1)
			printf("replicas: %d, in one process; their outputs %s\n", n_rep,
			       agree ? "agree bit for bit" : "DIFFER from replica 0's");
		size_t n_bad = 0;
		for (size_t i = 0; i < n_rows; i++)
			n_bad += !rows[i].ok;
		printf("%s: %zu outputs compared, %s", all_ok ? "match" : "MISMATCH", n_rows, sum);
		if (n_bad)
			printf("; %zu not ok", n_bad);
		putchar('\n');
		return;
	}
	struct emit em;
	emit_init(&em, stdout, fmt == OUT_YAML);
	emit_obj_begin(&em);
	emit_key(&em, "match");
	emit_bool(&em, all_ok);
	emit_key(&em, "criterion");
	emit_str(&em, crit);
	/* the header's tolerances, as before: the first row's base (a --tol row has its own below) */
	const struct row *first = NULL;
	for (size_t i = 0; i < n_rows && !first; i++)
		if (rows[i].has_tol && !rows[i].tol_from)
			first = &rows[i];
	emit_key(&em, "rtol");
	emit_double(&em, first ? first->tol.rtol : 0);
	emit_key(&em, "atol");
	emit_double(&em, first ? first->tol.atol : 0);
	emit_key(&em, "replicas");
	emit_int(&em, n_rep > 1 ? n_rep : 1);
	emit_key(&em, "replicas_agree");
	emit_bool(&em, agree);
	emit_key(&em, "outputs");
	emit_arr_begin(&em);
	for (size_t i = 0; i < n_rows; i++) {
		const struct row *r = &rows[i];
		emit_obj_begin(&em);
		emit_key(&em, "name");
		emit_str(&em, r->name);
		emit_key(&em, "found");
		emit_bool(&em, r->found);
		emit_key(&em, "verdict");
		emit_str(&em, verdict(r));
		emit_key(&em, "max_abs");
		emit_double(&em, r->max_abs);
		emit_key(&em, "max_rel");
		emit_double(&em, r->max_rel);
		emit_key(&em, "max_rel_floor");
		emit_double(&em, r->max_rel_floor);
		emit_key(&em, "mean_abs");
		emit_double(&em, r->mean_abs);
		emit_key(&em, "norm_rel");
		emit_double(&em, r->norm_rel);
		if (r->noise >= 0) {
			emit_key(&em, "floor");
			emit_double(&em, r->noise);
			emit_key(&em, "vs_ref16");
			emit_double(&em, r->off16);
		}
		emit_key(&em, "nonfinite");
		emit_int(&em, r->nonfinite);
		emit_key(&em, "match");
		emit_bool(&em, r->ok);
		if (r->has_tol) {
			emit_key(&em, "criterion");
			emit_str(&em, kind_name(r->tol.kind));
			emit_key(&em, "rtol");
			emit_double(&em, r->tol.rtol);
			emit_key(&em, "atol");
			emit_double(&em, r->tol.atol);
			if (r->tol.kind == TOL_NORM) {
				emit_key(&em, "norm_margin");
				emit_double(&em, r->tol.norm);
			}
			if (r->tol_from) {
				emit_key(&em, "tol_from");
				emit_str(&em, r->tol_from);
			}
		}
		if (r->why[0]) {
			emit_key(&em, "why");
			emit_str(&em, r->why + 2);
		}
		emit_obj_end(&em);
	}
	emit_arr_end(&em);
	emit_obj_end(&em);
}

/* Rows judged element by element by one rtol and atol (gradcheck's directions). */
void report(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, double rtol, double atol, int n_rep,
	    int agree)
{
	struct tol t = {.kind = TOL_ELEMENT, .rtol = rtol, .atol = atol};
	struct row *own = xcalloc(n_rows + 1, sizeof *own);
	char crit[200], sum[200];
	verify_tol_describe(&t, 0, crit, sizeof crit, sum, sizeof sum);
	for (size_t i = 0; own && i < n_rows; i++) {
		own[i] = rows[i];
		if (!own[i].has_tol) {
			own[i].has_tol = 1;
			own[i].tol = t;
			own[i].noise = -1;
			own[i].mean_abs = own[i].max_abs; /* one number per row */
		}
	}
	report_rows(fmt, own ? own : rows, n_rows, all_ok, crit, sum, n_rep, agree);
	xfree(own);
}
