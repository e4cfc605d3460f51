/* tests/ops/signal.c - forward values of the signal-processing ops (DFT, STFT, MelWeightMatrix, the
 * window generators) against numbers computed apart from graphdiet, run as part of test_ops.
 *
 * Each case is a folder in the layout of ONNX's backend tests (model.onnx, test_data_set_0/) run
 * through `graphdiet verify --against`: ONNX 1.12's own DFT, STFT and MelWeightMatrix tests, and
 * the cases testdata/signal_cases.py writes with NumPy's answers (numpy.fft, the spec's window
 * formulas, the spec's mel steps), compared in float64 to 1e-9. The window ops' own backend tests
 * are not among them: ONNX 1.12's expected windows are off the spec's formulas by ~7e-5
 * (tests/conformance/expected_failures.txt). */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_NODE_TESTS "/usr/share/libonnx-testdata/data/node"

/* graphdiet verify --against dir/test_data_set_0 dir/model.onnx [--rtol tol --atol tol]: its exit
 * status; on a status other than want, the test fails with its stderr. */
static void verify_case(const char *dir, const char *tol, int want)
{
	char data[1024], model[1024];
	snprintf(data, sizeof data, "%s/test_data_set_0", dir);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	char *argv[] = {GD_BINARY, "verify", "--against", data, model, tol ? "--rtol" : NULL, (char *)tol, "--atol",
			(char *)tol, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, want, "%s: exit %d, want %d\n%s%s", dir, r.status, want, r.out ? r.out : "",
		     r.err ? r.err : "");
	if (want == 2 && r.status == 2)
		cr_expect(r.err && strstr(r.err, "error:") && strstr(r.err, "model.onnx"),
			  "%s: the error names no file: %s", dir, r.err ? r.err : "");
	run_free(&r);
}

Test(signal, dft_stft_and_mel_match_onnx_backend_tests)
{
	static const char *const tests[] = {"test_dft", "test_dft_axis", "test_dft_inverse", "test_stft",
					    "test_stft_with_window", "test_melweightmatrix"};
	for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
		char dir[512];
		snprintf(dir, sizeof dir, "%s/%s", ONNX_NODE_TESTS, tests[i]);
		verify_case(dir, NULL, 0);
	}
}

Test(signal, ops_match_numpy_and_refuse_bad_input)
{
	char dir[512], path[1024];
	snprintf(dir, sizeof dir, "%s/signal_%08x", tmpdir(), (unsigned)rand());
	python_ok("import runpy\nrunpy.run_path('" TESTDATA "/signal_cases.py', run_name='__main__')\n", dir,
		  "writing the signal cases (testdata/signal_cases.py)");
	snprintf(path, sizeof path, "%s/list.txt", dir);
	size_t len;
	char *list = (char *)slurp(path, &len), *save = NULL;
	int ran = 0, bad = 0;
	for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[256];
		int want;
		cr_assert_eq(sscanf(line, "%255s %d", name, &want), 2, "list.txt: %s", line);
		snprintf(path, sizeof path, "%s/%s", dir, name);
		/* float32 cases hold float32 rounding of NumPy's float64 answers */
		verify_case(path, strstr(name, "float32") ? "1e-5" : "1e-9", want);
		ran++;
		bad += want != 0;
	}
	free(list);
	/* 14 lengths x 3 DFTs, 8 dft_length cases, 5 axis and dtype cases, 4 STFTs, 36 windows, 3 mels */
	cr_expect_eq(ran - bad, 98, "%d cases ran", ran - bad);
	cr_expect_eq(bad, 8, "%d bad-input cases ran", bad);
}
