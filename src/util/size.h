/* size.h - byte sizes as people write them: 8GiB, 500MB, 1.5 GiB, 1048576. */
#ifndef GD_SIZE_H
#define GD_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Decimal (kB, MB, GB, TB) and binary (KiB, MiB, GiB, TiB) units, case-insensitive, optional
 * space, optional fraction; no unit means bytes. Returns -1 when malformed or over 2^64. */
int size_parse(const char *s, uint64_t *out);
/* "1.5 MiB" (binary units, 3 significant digits; plain bytes below 1 KiB). */
const char *size_format(uint64_t v, char *buf, size_t n);

#endif
