/* err.c - error statuses and messages; see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int err_set(struct gd_err *e, int code, const char *fmt, ...)
{
	if (e && !e->code) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return e && e->code ? e->code : code;
}

int err_vat(struct gd_err *e, const char *where, const char *fmt, va_list ap)
{
	char msg[sizeof e->msg];
	vsnprintf(msg, sizeof msg, fmt, ap);
	return where ? err_set(e, GD_EINPUT, "%s: %s", where, msg) : err_set(e, GD_EINPUT, "%s", msg);
}

int err_oom(struct gd_err *e)
{
	return err_set(e, GD_EINTERNAL, "out of memory");
}

void err_prefix(struct gd_err *e, const char *fmt, ...)
{
	char old[sizeof e->msg];
	va_list ap;
	if (e->code != GD_EINPUT)
		return; /* "out of memory" and internal errors stand alone */
	memcpy(old, e->msg, sizeof old);
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n + 2 < sizeof e->msg) {
		memcpy(e->msg + n, ": ", 2);
		size_t room = sizeof e->msg - (size_t)n - 2;
		size_t len = strnlen(old, room - 1);
		memcpy(e->msg + n + 2, old, len);
		e->msg[(size_t)n + 2 + len] = 0;
	}
}

static void put_escaped(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
}

void err_print(const char *file, const struct gd_err *e)
{
	fputs("graphdiet: error: ", stderr);
	if (file) {
		put_escaped(stderr, strcmp(file, "-") ? file : "<stdin>");
		fputs(": ", stderr);
	}
	put_escaped(stderr, e->msg[0] ? e->msg : "unknown error");
	fputc('\n', stderr);
}

static void say(const char *kind, const char *fmt, va_list ap)
{
	char buf[1024];
	vsnprintf(buf, sizeof buf, fmt, ap);
	fprintf(stderr, "graphdiet: %s: ", kind);
	put_escaped(stderr, buf);
	fputc('\n', stderr);
}

void gd_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say("warning", fmt, ap);
	va_end(ap);
}

void gd_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say("note", fmt, ap);
	va_end(ap);
}

_Noreturn void gd_assert_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "graphdiet: internal error: %s:%d: assertion failed: %s\n", file, line, what);
	exit(GD_EINTERNAL);
}
