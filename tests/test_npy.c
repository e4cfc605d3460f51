/* test_npy.c - NumPy .npy files: what NumPy writes parses, what we write NumPy reads. */
#include "helpers.h"
#include "io/npy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(npy, reads_numpy_output)
{
	size_t len;
	uint8_t *buf = slurp(TESTDATA "/yaml/w.npy", &len);
	struct npy n;
	struct gd_err e = {0};
	cr_assert_eq(npy_parse(buf, len, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n.dtype, DT_FLOAT);
	cr_assert_eq(n.ndim, 2);
	cr_assert_eq(n.dims[0], 3);
	cr_assert_eq(n.dims[1], 2);
	cr_assert_eq(n.nbytes, 24);
	free(buf);
	buf = slurp(TESTDATA "/ref/mlp/target.npy", &len);
	struct gd_err e2 = {0};
	cr_assert_eq(npy_parse(buf, len, &n, &e2), 0, "%s", e2.msg);
	cr_assert_eq(n.dtype, DT_INT64);
	cr_assert_eq(n.ndim, 1);
	free(buf);
	buf = slurp(TESTDATA "/ref/mlp/loss.npy", &len);
	struct gd_err e3 = {0};
	cr_assert_eq(npy_parse(buf, len, &n, &e3), 0, "%s", e3.msg);
	cr_assert_eq(n.ndim, 0, "a scalar");
	free(buf);
}

Test(npy, rejects_truncation_and_bad_headers)
{
	size_t len;
	uint8_t *buf = slurp(TESTDATA "/yaml/w.npy", &len);
	for (size_t cut = 0; cut < len; cut++) {
		struct npy n;
		struct gd_err e = {0};
		cr_assert_eq(npy_parse(buf, cut, &n, &e), GD_EINPUT, "cut at %zu parsed", cut);
	}
	free(buf);
}

/* A .npy of header h (padded to 128 bytes, as NumPy pads to a multiple of 64) and `data` bytes
 * of payload. */
static size_t make_npy(uint8_t *buf, const char *h, size_t data)
{
	size_t hl = 128 - 10;
	cr_assert_lt(strlen(h), hl);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (uint8_t)hl, buf[9] = 0;
	memset(buf + 10, ' ', hl);
	memcpy(buf + 10, h, strlen(h));
	buf[10 + hl - 1] = '\n';
	memset(buf + 128, 0, data);
	return 128 + data;
}

/* fortran_order is True or False (Maybe was read as False); the payload is exactly the shape's
 * (trailing bytes were ignored); a 0 anywhere in the shape makes it empty, whatever the order of
 * the others (2^32 x 2^32 x 0 "overflowed", 0 x 2^32 x 2^32 did not). */
Test(npy, strict_headers_and_payloads)
{
	uint8_t buf[256];
	struct npy n;
	struct {
		const char *h;
		size_t data;
		const char *err; /* NULL: parses */
	} cases[] = {
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, NULL},
		{"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8, "fortran_order must be True or False"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 9, "has 1 bytes after its 2 elements"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }", 0, NULL},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", 0, NULL},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", 0, "overflows"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct gd_err e = {0};
		size_t len = make_npy(buf, cases[i].h, cases[i].data);
		int rc = npy_parse(buf, len, &n, &e);
		if (!cases[i].err) {
			cr_expect_eq(rc, 0, "%s: %s", cases[i].h, e.msg);
		} else {
			cr_expect_eq(rc, GD_EINPUT, "%s parsed", cases[i].h);
			cr_expect(strstr(e.msg, cases[i].err), "%s: %s", cases[i].h, e.msg);
		}
	}
}

Test(npy, numpy_reads_what_we_write)
{
	char path[256];
	snprintf(path, sizeof path, "%s/out.npy", tmpdir());
	FILE *f = fopen(path, "wb");
	int64_t dims[] = {2, 3};
	double data[6] = {0.5, 1, 2, 3, 4, -5.25};
	cr_assert_eq(npy_write(f, DT_DOUBLE, 2, dims, data, sizeof data), 0);
	fclose(f);
	char code[512];
	snprintf(code, sizeof code,
		 "import numpy as np; a = np.load('%s'); assert a.shape == (2, 3) and a.dtype == np.float64; "
		 "assert a[1, 2] == -5.25 and a[0, 0] == 0.5",
		 path);
	python_ok(code, NULL, "numpy could not read our file");
}

Test(npy, fuzz_regressions)
{
	const char *files[] = {"npy-unterminated-shape.npy", "npy-key-at-end.npy"};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		char path[512];
		snprintf(path, sizeof path, "%s/fuzz-regressions/%s", TESTDATA, files[i]);
		size_t len;
		uint8_t *buf = slurp(path, &len);
		/* exactly the file's bytes, no terminator: an over-read shows under ASan */
		uint8_t *exact = malloc(len);
		memcpy(exact, buf, len);
		struct npy n;
		struct gd_err e = {0};
		cr_assert_eq(npy_parse(exact, len, &n, &e), GD_EINPUT, "%s", files[i]);
		free(exact);
		free(buf);
	}
}
