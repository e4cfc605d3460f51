/* emit.h - machine-readable output, JSON or block YAML from the same calls.
 *
 * Every subcommand's `--format json|yaml` goes through this, so both forms always carry the same
 * data. Usage: emit_obj_begin; emit_key + a value (or a nested begin) per member; emit_obj_end. */
#ifndef GD_EMIT_H
#define GD_EMIT_H

#include <stdint.h>
#include <stdio.h>

#define EMIT_MAX_DEPTH 32

struct emit {
	FILE *f;
	int yaml;
	int depth;
	const char *key;
	struct {
		char type, opener;
		int indent, count;
	} st[EMIT_MAX_DEPTH];
};

void emit_init(struct emit *e, FILE *f, int yaml);
void emit_obj_begin(struct emit *e);
void emit_obj_end(struct emit *e);
void emit_arr_begin(struct emit *e);
void emit_arr_end(struct emit *e);
void emit_key(struct emit *e, const char *key);
void emit_str(struct emit *e, const char *s); /* NULL emits null */
void emit_int(struct emit *e, int64_t v);
void emit_uint(struct emit *e, uint64_t v);
void emit_double(struct emit *e, double v);
void emit_bool(struct emit *e, int v);
void emit_null(struct emit *e);

#endif
