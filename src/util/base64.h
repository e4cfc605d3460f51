/* base64.h - RFC 4648 base64, used by the YAML form for raw tensor bytes and unknown fields. */
#ifndef GD_BASE64_H
#define GD_BASE64_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void base64_write(FILE *f, const uint8_t *p, size_t n);
/* Decodes into out (at least base64_max_decoded(n) bytes); returns the length or -1 if invalid.
 * Whitespace is skipped. */
long long base64_decode(uint8_t *out, const char *s, size_t n);
size_t base64_max_decoded(size_t n);

#endif
