/* base64.c - RFC 4648 base64 (standard alphabet, padded). */
#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_write(FILE *f, const uint8_t *p, size_t n)
{
	char buf[4096];
	size_t k = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		buf[k++] = alphabet[(v >> 18) & 63];
		buf[k++] = alphabet[(v >> 12) & 63];
		buf[k++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		buf[k++] = i + 2 < n ? alphabet[v & 63] : '=';
		if (k + 4 > sizeof buf) {
			fwrite(buf, 1, k, f);
			k = 0;
		}
	}
	fwrite(buf, 1, k, f);
}

size_t base64_max_decoded(size_t n)
{
	return n / 4 * 3 + 3;
}

static int val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long long base64_decode(uint8_t *out, const char *s, size_t n)
{
	uint32_t acc = 0;
	int bits = 0, pad = 0;
	long long len = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = val(c);
		if (v < 0 || pad)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (uint8_t)(acc >> bits);
		}
	}
	if (pad > 2 || bits >= 6)
		return -1;
	return len;
}
