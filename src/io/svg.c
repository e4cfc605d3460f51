/* svg.c - see svg.h. Hand-written SVG 1.1: no dependency, opens in any browser. */
#include "svg.h"
#include "../util/size.h"

#include <inttypes.h>

#define W 1000
#define H 440
#define LEFT 90
#define RIGHT 30
#define TOP 50
#define BOTTOM 60
#define PW (W - LEFT - RIGHT)
#define PH (H - TOP - BOTTOM)

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

static double xpos(uint32_t step, uint32_t n)
{
	return LEFT + (n > 1 ? (double)step / (double)(n - 1) : 0) * PW;
}

static double ypos(uint64_t bytes, uint64_t top)
{
	return TOP + PH - (double)bytes / (double)top * PH;
}

/* The series as a step envelope: the largest value per pixel column. */
static void series(FILE *f, const uint64_t *live, uint32_t n, uint64_t top, const char *colour, const char *name)
{
	if (!n)
		return;
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
	uint64_t peak = 0;
	uint32_t at = 0;
	for (uint32_t col = 0, i = 0; col < PW && i < n; col++) {
		uint32_t end = (uint32_t)((uint64_t)(col + 1) * n / PW);
		if (end <= i)
			continue;
		uint64_t m = 0;
		for (; i < end; i++) {
			if (live[i] > m)
				m = live[i];
			if (live[i] > peak)
				peak = live[i], at = i;
		}
		fprintf(f, "%.1f,%.1f ", xpos(i - 1, n), ypos(m, top));
	}
	fputs("\"/>\n", f);
	char s[32];
	double x = xpos(at, n), y = ypos(peak, top);
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, colour);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"12\" text-anchor=\"%s\">%s peak %s (step %" PRIu32
		   ")</text>\n",
		x + (x > LEFT + PW * 0.7 ? -8 : 8), y - 8, colour, x > LEFT + PW * 0.7 ? "end" : "start", name,
		size_format(peak, s, sizeof s), at + 1);
}

void svg_timeline(FILE *f, const struct timeline *t)
{
	uint64_t top = t->budget;
	for (uint32_t i = 0; i < t->n_before; i++)
		top = t->before[i] > top ? t->before[i] : top;
	for (uint32_t i = 0; i < t->n_after; i++)
		top = t->after[i] > top ? t->after[i] : top;
	top = top + top / 10 + 1;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		   "font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		W, H, W, H);
	fputs("<text x=\"20\" y=\"28\" font-size=\"16\" font-weight=\"bold\">", f);
	esc(f, t->title);
	fputs("</text>\n", f);
	/* recompute segments, then the axes and the grid */
	for (uint32_t b = 0; b < t->n_bands; b++) {
		double x0 = xpos(t->band_first[b], t->n_after), x1 = xpos(t->band_first[b] + t->band_len[b], t->n_after);
		fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#fce5cd\"/>\n", x0, TOP,
			x1 - x0 < 1 ? 1 : x1 - x0, PH);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", LEFT, TOP, PW, PH);
	for (int k = 0; k <= 5; k++) {
		char s[32];
		uint64_t v = top / 5 * (uint64_t)k;
		double y = ypos(v, top);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", LEFT, y, LEFT + PW, y);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", LEFT - 6, y + 4,
			size_format(v, s, sizeof s));
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">schedule position: %" PRIu32
		   " steps before, %" PRIu32 " after (shaded: recompute segments; green ticks: checkpoints made)</text>\n",
		LEFT + PW / 2, H - 18, t->n_before, t->n_after);
	fprintf(f, "<text x=\"18\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 18 %d)\" text-anchor=\"middle\">live "
		   "bytes</text>\n",
		TOP + PH / 2, TOP + PH / 2);
	if (t->budget) {
		char s[32];
		double y = ypos(t->budget, top);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#cc0000\" stroke-dasharray=\"6,4\"/>\n",
			LEFT, y, LEFT + PW, y);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" fill=\"#cc0000\" font-size=\"12\" text-anchor=\"end\">budget %s</text>\n",
			LEFT + PW - 4, y - 5, size_format(t->budget, s, sizeof s));
	}
	for (uint32_t i = 0; i < t->n_marks; i++)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#38761d\" stroke-width=\"1.5\"/>\n",
			xpos(t->marks[i], t->n_after), TOP + PH, xpos(t->marks[i], t->n_after), TOP + PH + 8);
	series(f, t->before, t->n_before, top, "#999999", "before");
	series(f, t->after, t->n_after, top, "#1f5fbf", "after");
	fputs("<g font-size=\"12\"><rect x=\"700\" y=\"12\" width=\"12\" height=\"3\" fill=\"#999999\"/>"
	      "<text x=\"716\" y=\"18\">before checkpointing</text>"
	      "<rect x=\"850\" y=\"12\" width=\"12\" height=\"3\" fill=\"#1f5fbf\"/><text x=\"866\" y=\"18\">after</text></g>\n"
	      "</svg>\n",
	      f);
}
