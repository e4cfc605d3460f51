/* utf8.h - reading UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, nothing past
 * U+10FFFF. What writers of text formats (JSON, YAML) need to tell text from other bytes. */
#ifndef GD_UTF8_H
#define GD_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the well-formed sequence at p (n bytes left, n > 0), its code point in
 * *cp; 0 when the byte at p starts none. */
size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cp);
/* Whether all n bytes at p are well-formed UTF-8. */
int utf8_valid(const uint8_t *p, size_t n);

#endif
