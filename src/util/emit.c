/* emit.c - JSON / YAML emitter; see emit.h.
 *
 * YAML layout: a mapping's keys sit at its indent; a nested container opened after "key:" starts
 * on the next line two columns in, one opened after "- " starts on the dash's line. Empty
 * containers print as {} and []. Strings are always double-quoted with JSON escapes, which YAML
 * reads the same way, so one quoting routine serves both forms. */
#include "emit.h"

#include "utf8.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void emit_init(struct emit *e, FILE *f, int yaml)
{
	e->f = f;
	e->yaml = yaml;
	e->depth = 0;
	e->key = NULL;
}

/* s double-quoted. Text that is not UTF-8 (a node name is any bytes) is escaped byte by byte as its
 * Latin-1 reading, which both forms can hold: a byte 0xff is \u00ff in JSON and \xff in YAML
 * (the same code point, U+00FF; a UTF-8 reader refuses the raw byte). Control characters, C1
 * controls and the non-characters U+FFFE/U+FFFF (which YAML may not hold raw) are \u escapes. */
static void quote(FILE *f, const char *s, int yaml)
{
	fputc('"', f);
	const uint8_t *p = (const uint8_t *)s;
	for (size_t n = strlen(s), i = 0, k; i < n; i += k) {
		uint32_t c;
		if (!(k = utf8_decode(p + i, n - i, &c))) {
			fprintf(f, yaml ? "\\x%02x" : "\\u00%02x", p[i]);
			k = 1;
		} else if (c == '"' || c == '\\') {
			fprintf(f, "\\%c", (int)c);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xfffe || c == 0xffff) {
			fprintf(f, "\\u%04x", (unsigned)c);
		} else {
			fwrite(p + i, 1, k, f);
		}
	}
	fputc('"', f);
}

/* Starts a member of the innermost container: separators, indentation, key or dash. */
static void member(struct emit *e)
{
	if (e->depth == 0)
		return;
	int d = e->depth - 1;
	int first = e->st[d].count++ == 0;
	char type = e->st[d].type;
	if (e->yaml) {
		if (first && e->st[d].opener == 'k')
			fputc('\n', e->f);
		if (first && e->st[d].opener == 'd')
			fputc(' ', e->f);
		else
			fprintf(e->f, "%*s", e->st[d].indent, "");
		if (type == 'o') {
			quote(e->f, e->key ? e->key : "", 1);
			fputs(":", e->f);
		} else {
			fputs("-", e->f);
		}
	} else {
		fputs(first ? "\n" : ",\n", e->f);
		fprintf(e->f, "%*s", e->st[d].indent, "");
		if (type == 'o') {
			quote(e->f, e->key ? e->key : "", 0);
			fputs(": ", e->f);
		}
	}
	e->key = NULL;
}

static void scalar_end(struct emit *e)
{
	if (e->yaml || e->depth == 0)
		fputc('\n', e->f);
}

static void begin(struct emit *e, char type)
{
	int d = e->depth;
	char opener = d == 0 ? 'r' : e->st[d - 1].type == 'o' ? 'k' : 'd';
	int indent = e->yaml ? (d == 0 ? 0 : e->st[d - 1].indent + 2) : (d + 1) * 2;
	member(e);
	if (!e->yaml)
		fputc(type == 'o' ? '{' : '[', e->f);
	if (d < EMIT_MAX_DEPTH) {
		e->st[d].type = type;
		e->st[d].opener = opener;
		e->st[d].indent = indent;
		e->st[d].count = 0;
	}
	e->depth++;
}

static void end(struct emit *e, char type)
{
	int d = --e->depth;
	if (e->yaml) {
		if (e->st[d].count == 0)
			fputs(e->st[d].opener == 'r' ? (type == 'o' ? "{}\n" : "[]\n") : (type == 'o' ? " {}\n" : " []\n"),
			      e->f);
		return;
	}
	if (e->st[d].count)
		fprintf(e->f, "\n%*s", e->st[d].indent - 2, "");
	fputc(type == 'o' ? '}' : ']', e->f);
	if (d == 0)
		fputc('\n', e->f);
}

void emit_obj_begin(struct emit *e) { begin(e, 'o'); }
void emit_obj_end(struct emit *e) { end(e, 'o'); }
void emit_arr_begin(struct emit *e) { begin(e, 'a'); }
void emit_arr_end(struct emit *e) { end(e, 'a'); }

void emit_key(struct emit *e, const char *key)
{
	e->key = key;
}

static void pre(struct emit *e)
{
	member(e);
	if (e->yaml && e->depth > 0)
		fputc(' ', e->f);
}

void emit_str(struct emit *e, const char *s)
{
	pre(e);
	if (s)
		quote(e->f, s, e->yaml);
	else
		fputs("null", e->f);
	scalar_end(e);
}

void emit_int(struct emit *e, int64_t v)
{
	pre(e);
	fprintf(e->f, "%" PRId64, v);
	scalar_end(e);
}

void emit_uint(struct emit *e, uint64_t v)
{
	pre(e);
	fprintf(e->f, "%" PRIu64, v);
	scalar_end(e);
}

void emit_double(struct emit *e, double v)
{
	pre(e);
	if (isfinite(v))
		fprintf(e->f, "%.17g", v);
	else
		fputs("null", e->f);
	scalar_end(e);
}

void emit_bool(struct emit *e, int v)
{
	pre(e);
	fputs(v ? "true" : "false", e->f);
	scalar_end(e);
}

void emit_null(struct emit *e)
{
	pre(e);
	fputs("null", e->f);
	scalar_end(e);
}
