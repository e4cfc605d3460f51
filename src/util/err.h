/* err.h - error statuses and messages.
 *
 * Two tiers (STYLE.md): anything that touches user input returns a status and fills a
 * struct gd_err once, where the problem is found, with the node and op it concerns; the top
 * level prefixes the file and prints it once. Broken internal invariants use ASSERT, which
 * reports file:line and exits 3. Status values are the CLI's exit codes. */
#ifndef GD_ERR_H
#define GD_ERR_H

#include <stdarg.h>

enum gd_status {
	GD_OK = 0,
	GD_ECHECK = 1,    /* a check failed: over budget, gradients differ */
	GD_EINPUT = 2,    /* bad usage or bad input */
	GD_EINTERNAL = 3, /* a bug, or the system failed us (out of memory) */
	GD_EINCONCLUSIVE = 4, /* a check could not judge: verify --gradcheck found no direction along
				* which the loss is smooth */
};

struct gd_err {
	int code;
	int at_run; /* the error is a node's refusal of its inputs while running (exec_fail) */
	char msg[1024];
};

/* Records the first error only (later ones are consequences); returns its code. */
int err_set(struct gd_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int err_oom(struct gd_err *e);
/* An input error "WHERE: message" ("message" when where is NULL), for the formatting functions of
 * the readers and passes that know where they are (a line, a node). */
int err_vat(struct gd_err *e, const char *where, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* Prepends "prefix: " to an input error's message, e.g. a line number or a node. */
void err_prefix(struct gd_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "graphdiet: error: FILE: msg" on one line; control characters are escaped. */
void err_print(const char *file, const struct gd_err *e);
void gd_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, as "graphdiet: note: ...": what was done that the user may want to know. */
void gd_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

_Noreturn void gd_assert_fail(const char *file, int line, const char *what);
#define ASSERT(c)                                                  \
	do {                                                       \
		if (!(c))                                          \
			gd_assert_fail(__FILE__, __LINE__, #c);    \
	} while (0)

#endif
