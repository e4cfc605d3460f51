/* svg.c - see svg.h. Hand-written SVG 1.1: no dependency, opens in any browser.
 *
 * The x axis is the steps of the `after` schedule, the longer one: it runs every node of `before`
 * in the same order, with recompute segments between them. `before` is drawn at the steps that run
 * its nodes (before_at) and held flat across the segments it does not run, so a node is at the same
 * x in both curves and the recompute shows as the blue curve's bumps over the grey one's flats.
 * With more steps than pixel columns a curve is its largest value per column, the columns shared by
 * both. Ticks are round: steps at 1, 2 or 5 x 10^k (1-based, as the text report counts them),
 * bytes at 1, 2 or 5 x 10^k of one binary unit, the largest power of 1024 not above the axis' top,
 * so that a label reads "1.5 MiB", never "6.14 MiB". */
#include "svg.h"
#include "../util/size.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define W 1000
#define H 480
#define LEFT 90
#define RIGHT 30
#define TOP 70
#define BOTTOM 70
#define PW (W - LEFT - RIGHT)
#define PH (H - TOP - BOTTOM)
#define CHAR_W 6.6 /* a 12-pixel sans-serif character's width, roughly, to lay out the legend */

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++)
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
}

/* The smallest of 1, 2, 5 x 10^p that is at least x > 0, as mantissa and exponent. */
static void nice_step(double x, int *m, int *p)
{
	*p = (int)floor(log10(x));
	double b = pow(10, *p);
	*m = x <= b ? 1 : x <= 2 * b ? 2 : x <= 5 * b ? 5 : 10;
	if (*m == 10)
		*m = 1, ++*p;
}

/* k x m x 10^p with the decimals it needs: "1.5", "200". */
static const char *tick_number(uint32_t k, int m, int p, char *buf, size_t n)
{
	snprintf(buf, n, "%.*f", p < 0 ? -p : 0, (double)k * m * pow(10, p));
	if (strchr(buf, '.')) {
		char *end = buf + strlen(buf);
		while (end[-1] == '0')
			*--end = 0;
		if (end[-1] == '.')
			end[-1] = 0;
	}
	return buf;
}

/* The x axis: n steps over ncols pixel columns (one per step while they fit). */
struct xaxis {
	uint32_t n, ncols;
};

static uint32_t col_of(const struct xaxis *a, uint32_t step)
{
	return (uint32_t)((uint64_t)step * a->ncols / a->n);
}

static double xcol(const struct xaxis *a, uint32_t c)
{
	return LEFT + (a->ncols > 1 ? (double)c * PW / (a->ncols - 1) : PW / 2.0);
}

static double xstep(const struct xaxis *a, uint32_t step)
{
	return xcol(a, col_of(a, step));
}

/* The y axis: ticks k x m x 10^p units up to n_ticks of them, the top. */
struct yaxis {
	const char *unit;
	double bytes; /* of one unit */
	int m, p;
	uint32_t n_ticks;
	double top; /* bytes */
};

static void y_axis(uint64_t max, struct yaxis *y)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double want = max ? (double)max * 1.1 : 1024; /* room above the peaks for their labels */
	int u = 0;
	for (y->bytes = 1; u < 5 && want >= y->bytes * 1024; u++)
		y->bytes *= 1024;
	y->unit = units[u];
	nice_step(want / y->bytes / 6, &y->m, &y->p);
	if (!u && y->p < 0) /* no fractions of a byte */
		y->m = 1, y->p = 0;
	double step = y->m * pow(10, y->p) * y->bytes;
	y->n_ticks = (uint32_t)ceil(want / step);
	y->top = y->n_ticks * step;
}

static double ypos(const struct yaxis *y, double bytes)
{
	return TOP + PH - bytes / y->top * PH;
}

/* One curve: live[i] at step at[i] of the axis (at NULL: i), the largest per pixel column, held
 * flat across the columns it has no step in. Returns the peak's index in live. */
static uint32_t series(FILE *f, const struct xaxis *a, const struct yaxis *y, const uint64_t *live, const uint32_t *at,
		       uint32_t n, const char *id, const char *colour)
{
	fprintf(f, "<polyline id=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", id, colour);
	uint32_t peak = 0, prev = 0;
	uint64_t prev_m = 0;
	for (uint32_t i = 0; i < n;) {
		uint32_t c = col_of(a, at ? at[i] : i);
		uint64_t m = 0;
		int first = !i;
		for (; i < n && col_of(a, at ? at[i] : i) == c; i++) {
			m = live[i] > m ? live[i] : m;
			peak = live[i] > live[peak] ? i : peak;
		}
		if (!first && c > prev + 1)
			fprintf(f, "%.1f,%.1f ", xcol(a, c - 1), ypos(y, (double)prev_m));
		fprintf(f, "%.1f,%.1f ", xcol(a, c), ypos(y, (double)m));
		prev = c;
		prev_m = m;
	}
	fputs("\"/>\n", f);
	return peak;
}

/* A peak's marker and its label, beside it away from the plot's edge, above it or below it. */
static void peak_mark(FILE *f, double x, double y, const char *colour, const char *text, int below)
{
	int right = x > LEFT + PW * 0.7;
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, colour);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"12\" text-anchor=\"%s\" stroke=\"white\" "
		   "stroke-width=\"3\" paint-order=\"stroke\">",
		x + (right ? -8 : 8),
		below ? y + 18 : y - 8, colour, right ? "end" : "start");
	esc(f, text);
	fputs("</text>\n", f);
}

static void y_ticks(FILE *f, const struct yaxis *y)
{
	for (uint32_t k = 0; k <= y->n_ticks; k++) {
		char num[48];
		double yy = ypos(y, y->top * k / y->n_ticks);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", LEFT, yy, LEFT + PW, yy);
		fprintf(f, "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s%s%s</text>\n",
			LEFT - 6, yy + 4, tick_number(k, y->m, y->p, num, sizeof num), k ? " " : "", k ? y->unit : "");
	}
	fprintf(f, "<text x=\"18\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">live "
		   "memory (%s)</text>\n",
		TOP + PH / 2, TOP + PH / 2, y->unit);
}

/* Steps 1, then d, 2d, ... (1-based, d = 1, 2 or 5 x 10^k for at most about 10 ticks). */
static void x_ticks(FILE *f, const struct xaxis *a)
{
	int m, p;
	nice_step(a->n / 10.0, &m, &p);
	uint32_t d = p < 0 ? 1 : (uint32_t)(m * pow(10, p) + 0.5);
	for (uint32_t s = 1; s <= a->n; s = s < d ? d : s + d) {
		double x = xstep(a, s - 1);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#f0f0f0\"/>\n", x, TOP, x, TOP + PH);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\"/>\n", x, TOP + PH, x, TOP + PH + 5);
		fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%" PRIu32
			   "</text>\n",
			x, TOP + PH + 18, s);
	}
}

/* The legend, one row under the title: what each line, shade and tick is. */
static void legend(FILE *f, const struct timeline *t, uint32_t n_recompute)
{
	char before[160], after[160], rc[64];
	snprintf(before, sizeof before, "%s (%" PRIu32 " steps)", t->before_name ? t->before_name : "before", t->n_before);
	snprintf(after, sizeof after, "%s (%" PRIu32 " steps)", t->after_name ? t->after_name : "after", t->n_after);
	snprintf(rc, sizeof rc, "recompute (%" PRIu32 " steps)", n_recompute);
	const struct {
		const char *text, *swatch;
		int shown;
	} items[] = {
		{before, "<rect x=\"%.1f\" y=\"44\" width=\"16\" height=\"3\" fill=\"#999999\"/>\n", 1},
		{after, "<rect x=\"%.1f\" y=\"44\" width=\"16\" height=\"3\" fill=\"#1f5fbf\"/>\n", 1},
		{rc, "<rect x=\"%.1f\" y=\"38\" width=\"16\" height=\"12\" fill=\"#fce5cd\"/>\n", t->n_bands > 0},
		{"checkpoint made", "<rect x=\"%.1f\" y=\"38\" width=\"2\" height=\"12\" fill=\"#38761d\"/>\n", t->n_marks > 0},
		{"budget", "<rect x=\"%.1f\" y=\"44\" width=\"16\" height=\"2\" fill=\"#cc0000\"/>\n", t->budget > 0},
	};
	double x = LEFT;
	fputs("<g id=\"legend\" font-size=\"12\">\n", f);
	for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
		if (!items[i].shown)
			continue;
		fprintf(f, items[i].swatch, x);
		fprintf(f, "<text x=\"%.1f\" y=\"49\">", x + 21);
		esc(f, items[i].text);
		fputs("</text>\n", f);
		x += 21 + CHAR_W * (double)strlen(items[i].text) + 18;
	}
	fputs("</g>\n", f);
}

void svg_timeline(FILE *f, const struct timeline *t)
{
	/* before_at must rise and stay on the axis, else `before` keeps its own step numbers */
	const uint32_t *at = t->n_before ? t->before_at : NULL;
	for (uint32_t i = 0; at && i < t->n_before; i++)
		if (at[i] >= t->n_after || (i && at[i] <= at[i - 1]))
			at = NULL;
	struct xaxis a = {t->n_after > t->n_before || at ? t->n_after : t->n_before, 0};
	a.n = a.n ? a.n : 1;
	a.ncols = a.n < PW ? a.n : PW;
	uint64_t max = t->budget;
	for (uint32_t i = 0; i < t->n_before; i++)
		max = t->before[i] > max ? t->before[i] : max;
	for (uint32_t i = 0; i < t->n_after; i++)
		max = t->after[i] > max ? t->after[i] : max;
	struct yaxis y;
	y_axis(max, &y);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		   "font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		W, H, W, H);
	fputs("<text x=\"20\" y=\"24\" font-size=\"16\" font-weight=\"bold\">", f);
	esc(f, t->title);
	fputs("</text>\n", f);
	/* recompute segments, a column wide per step, under the grid */
	double colw = a.ncols > 1 ? (double)PW / (a.ncols - 1) : PW;
	uint32_t n_recompute = 0;
	for (uint32_t b = 0; b < t->n_bands; b++) {
		if (!t->band_len[b] || t->band_first[b] >= a.n)
			continue;
		n_recompute += t->band_len[b];
		uint32_t last = t->band_first[b] + t->band_len[b] - 1;
		double x0 = xstep(&a, t->band_first[b]) - colw / 2, x1 = xstep(&a, last < a.n ? last : a.n - 1) + colw / 2;
		x0 = x0 < LEFT ? LEFT : x0;
		x1 = x1 > LEFT + PW ? LEFT + PW : x1;
		fprintf(f, "<rect class=\"recompute\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#fce5cd\"/>\n", x0,
			TOP, x1 - x0 < 1 ? 1 : x1 - x0, PH);
	}
	y_ticks(f, &y);
	x_ticks(f, &a);
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", LEFT, TOP, PW, PH);
	fprintf(f, "<text id=\"xtitle\" x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">schedule step (%" PRIu32
		   " steps, recompute included; the %" PRIu32 " steps of %s drawn at the steps that run the same nodes)</text>\n",
		LEFT + PW / 2, H - 24, a.n, t->n_before, t->before_name ? t->before_name : "before");
	if (t->backward_step > 0 && t->backward_step < a.n) {
		double x = (xstep(&a, t->backward_step - 1) + xstep(&a, t->backward_step)) / 2;
		fprintf(f, "<line id=\"backward\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\" "
			   "stroke-dasharray=\"2,3\"/>\n",
			x, TOP, x, TOP + PH);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#444\" text-anchor=\"end\">forward</text>\n"
			   "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#444\">backward</text>\n",
			x - 4, TOP + 13, x + 4, TOP + 13);
	}
	if (t->budget) {
		char s[32];
		double yy = ypos(&y, (double)t->budget);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#cc0000\" stroke-dasharray=\"6,4\"/>\n",
			LEFT, yy, LEFT + PW, yy);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" fill=\"#cc0000\" font-size=\"12\" text-anchor=\"end\">budget %s</text>\n",
			LEFT + PW - 4, yy - 5, size_format(t->budget, s, sizeof s));
	}
	for (uint32_t i = 0; i < t->n_marks; i++)
		if (t->marks[i] < a.n)
			fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#38761d\" stroke-width=\"1.5\"/>\n",
				xstep(&a, t->marks[i]), TOP + PH - 8, xstep(&a, t->marks[i]), TOP + PH);
	uint32_t pb = t->n_before ? series(f, &a, &y, t->before, at, t->n_before, "before", "#999999") : 0;
	uint32_t pa = t->n_after ? series(f, &a, &y, t->after, NULL, t->n_after, "after", "#1f5fbf") : 0;
	/* the peaks: the lower one's label goes under its marker where the two would overlap */
	char sb[32], sa[32], lb[128], la[128];
	double xb = xstep(&a, at ? at[pb] : pb), yb = ypos(&y, t->n_before ? (double)t->before[pb] : 0);
	double xa = xstep(&a, pa), ya = ypos(&y, t->n_after ? (double)t->after[pa] : 0);
	int near = fabs(xb - xa) < 300 && fabs(yb - ya) < 16;
	snprintf(lb, sizeof lb, "before peak %s (%sstep %" PRIu32 ")", size_format(t->n_before ? t->before[pb] : 0, sb, sizeof sb),
		 at && at[pb] != pb ? "its " : "", pb + 1);
	snprintf(la, sizeof la, "after peak %s (step %" PRIu32 ")", size_format(t->n_after ? t->after[pa] : 0, sa, sizeof sa),
		 pa + 1);
	if (t->n_before)
		peak_mark(f, xb, yb, "#777777", lb, near && yb >= ya);
	if (t->n_after)
		peak_mark(f, xa, ya, "#1f5fbf", la, near && ya > yb);
	legend(f, t, n_recompute);
	fputs("</svg>\n", f);
}
