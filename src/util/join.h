/* join.h - strings made from parts without printf, for names made by the million (autodiff's,
 * the recompute rewrite's), where snprintf's format parsing shows in profiles. */
#ifndef GD_JOIN_H
#define GD_JOIN_H

#include <stddef.h>
#include <stdint.h>

/* The NULL-terminated parts, one after another, into buf (n > 0 bytes, truncated to fit, always
 * terminated); returns the length written. */
size_t join(char *buf, size_t n, const char *const *parts);
#define JOIN(buf, n, ...) join((buf), (n), (const char *const[]){__VA_ARGS__, NULL})

/* k in decimal, in buf (at least 21 bytes); returns buf. */
char *u64_dec(char *buf, uint64_t k);

#endif
