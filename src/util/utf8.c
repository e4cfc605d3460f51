/* utf8.c - well-formed UTF-8; see utf8.h. */
#include "utf8.h"

size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cp)
{
	uint8_t c = p[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t k = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
	if (!k || k >= n)
		return 0;
	uint32_t v = c & (0x3f >> k);
	for (size_t j = 1; j <= k; j++) {
		if ((p[j] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[j] & 0x3f);
	}
	/* the shortest form only (RFC 3629 section 3), and no UTF-16 surrogates */
	static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
	if (v < least[k] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return k + 1;
}

int utf8_valid(const uint8_t *p, size_t n)
{
	uint32_t cp;
	for (size_t i = 0, k; i < n; i += k)
		if (!(k = utf8_decode(p + i, n - i, &cp)))
			return 0;
	return 1;
}
