/* names.h - a list of tensor names in YAML (--checkpoint-file): either a list,
 *
 *     [h1, h2]
 *
 * or a mapping whose `checkpoints` key holds one, so that what `graphdiet plan --format yaml`
 * prints can be fed back (its other keys are ignored). */
#ifndef GD_NAMES_H
#define GD_NAMES_H

#include "../util/err.h"

#include <stddef.h>
#include <stdint.h>

struct names {
	char **v; /* xmalloc'd, each xmalloc'd */
	size_t n;
};

int names_parse(const uint8_t *data, size_t len, struct names *out, struct gd_err *e);
int names_read(const char *path, struct names *out, struct gd_err *e);
void names_free(struct names *n);

#endif
