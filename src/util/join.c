/* join.c - see join.h. */
#include "join.h"

#include <string.h>

size_t join(char *buf, size_t n, const char *const *parts)
{
	size_t len = 0;
	for (; *parts; parts++) {
		size_t l = strlen(*parts);
		if (l > n - 1 - len)
			l = n - 1 - len;
		memcpy(buf + len, *parts, l);
		len += l;
	}
	buf[len] = 0;
	return len;
}

char *u64_dec(char *buf, uint64_t k)
{
	char digits[21];
	int d = 0;
	for (uint64_t q = k; d == 0 || q; q /= 10)
		digits[d++] = (char)('0' + q % 10);
	char *s = buf;
	while (d)
		*s++ = digits[--d];
	*s = 0;
	return buf;
}
