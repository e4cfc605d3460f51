/* npy.c - NumPy .npy reader and writer. The header is a Python dict literal; only the three keys
 * NumPy writes are read, and anything unexpected is an error rather than a guess. */
#include "npy.h"
#include "../ir/dtype.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *find_key(const char *h, size_t n, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i + kl + 2 <= n; i++)
		if ((h[i] == '\'' || h[i] == '"') && memcmp(h + i + 1, key, kl) == 0 && h[i + 1 + kl] == h[i]) {
			const char *p = h + i + kl + 2;
			while (p < h + n && (*p == ' ' || *p == ':'))
				p++;
			return p < h + n ? p : NULL; /* the value must start inside the header */
		}
	return NULL;
}

int npy_parse(const uint8_t *buf, size_t len, struct npy *out, struct gd_err *e)
{
	memset(out, 0, sizeof *out);
	if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
		return err_set(e, GD_EINPUT, "not a .npy file (bad magic)");
	size_t hl, off;
	if (buf[6] == 1) {
		hl = (size_t)buf[8] | (size_t)buf[9] << 8;
		off = 10;
	} else if (buf[6] == 2 || buf[6] == 3) {
		if (len < 12)
			return err_set(e, GD_EINPUT, "truncated .npy header");
		hl = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
		off = 12;
	} else {
		return err_set(e, GD_EINPUT, "unsupported .npy version %d", buf[6]);
	}
	if (hl > len - off)
		return err_set(e, GD_EINPUT, "truncated .npy header");
	const char *h = (const char *)buf + off, *end = h + hl;
	const char *d = find_key(h, hl, "descr"), *fo = find_key(h, hl, "fortran_order"),
		   *sh = find_key(h, hl, "shape");
	if (!d || !fo || !sh || (*d != '\'' && *d != '"'))
		return err_set(e, GD_EINPUT, ".npy header lacks descr, fortran_order or shape");
	char descr[16];
	const char *q = memchr(d + 1, *d, (size_t)(end - d - 1));
	if (!q || (size_t)(q - d - 1) >= sizeof descr)
		return err_set(e, GD_EINPUT, "bad .npy descr");
	memcpy(descr, d + 1, (size_t)(q - d - 1));
	descr[q - d - 1] = 0;
	out->dtype = dtype_from_npy(descr);
	if (out->dtype < 0)
		return err_set(e, GD_EINPUT, "unsupported .npy dtype '%s'", descr);
	if (*sh != '(')
		return err_set(e, GD_EINPUT, "bad .npy shape");
	const char *p = sh + 1;
	int64_t numel = 1;
	int fortran = end - fo >= 4 && memcmp(fo, "True", 4) == 0;
	if (!fortran && !(end - fo >= 5 && memcmp(fo, "False", 5) == 0))
		return err_set(e, GD_EINPUT, ".npy fortran_order must be True or False");
	while (p < end && *p != ')') {
		while (p < end && (*p == ' ' || *p == ','))
			p++;
		if (p < end && *p == ')')
			break;
		if (p >= end || !isdigit((unsigned char)*p) || out->ndim == NPY_MAX_DIMS)
			return err_set(e, GD_EINPUT, "bad .npy shape");
		/* the header is not NUL-terminated: parse within it */
		int64_t v = 0;
		for (; p < end && isdigit((unsigned char)*p); p++) {
			if (v > (INT64_MAX - 9) / 10)
				return err_set(e, GD_EINPUT, ".npy shape overflows");
			v = v * 10 + (*p - '0');
		}
		out->dims[out->ndim++] = v;
	}
	if (p >= end)
		return err_set(e, GD_EINPUT, "bad .npy shape");
	/* any order of the dims: a 0 anywhere makes an empty array, whatever the others */
	for (uint32_t i = 0; i < out->ndim && numel; i++)
		numel = out->dims[i] ? numel : 0;
	for (uint32_t i = 0; i < out->ndim && numel; i++) {
		if (numel > INT64_MAX / out->dims[i])
			return err_set(e, GD_EINPUT, ".npy shape overflows");
		numel *= out->dims[i];
	}
	if (fortran && out->ndim > 1)
		return err_set(e, GD_EINPUT, "Fortran-order .npy arrays are not supported");
	size_t es = dtype_size(out->dtype);
	if ((uint64_t)numel > SIZE_MAX / es || numel * es > len - off - hl)
		return err_set(e, GD_EINPUT, ".npy data is truncated: %" PRId64 " elements of %s expected", numel,
			       dtype_name(out->dtype));
	if (numel * es < len - off - hl)
		return err_set(e, GD_EINPUT, ".npy has %zu bytes after its %" PRId64 " elements of %s",
			       len - off - hl - (size_t)numel * es, numel, dtype_name(out->dtype));
	out->data = buf + off + hl;
	out->nbytes = (size_t)numel * es;
	return 0;
}

int npy_write(FILE *f, int dtype, uint32_t ndim, const int64_t *dims, const void *data, size_t nbytes)
{
	char hdr[1024];
	int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", dtype_npy(dtype));
	for (uint32_t i = 0; i < ndim && n < 900; i++)
		n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%" PRId64 "%s", dims[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
	n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
	/* pad so that the data starts 64-byte aligned, ending in a newline */
	size_t total = 10 + (size_t)n + 1;
	size_t pad = (64 - total % 64) % 64;
	uint16_t hl = (uint16_t)((size_t)n + pad + 1);
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc(hl & 0xff, f);
	fputc(hl >> 8, f);
	fwrite(hdr, 1, (size_t)n, f);
	for (size_t i = 0; i < pad; i++)
		fputc(' ', f);
	fputc('\n', f);
	fwrite(data, 1, nbytes, f);
	return ferror(f) ? -1 : 0;
}
