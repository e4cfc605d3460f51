/* tests/ops/conv.c - forward values of the conv op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops.
 *
 * The window forms issue 47 adds (3-D Conv, ConvTranspose and pooling, integer MaxPool, MaxPool's
 * storage_order, ConvTranspose's output_shape, GlobalMaxPool, MaxUnpool, Upsample, Resize's
 * exclude_outside, tf_crop_and_resize and align_corners at scales below 1, Pad before opset 11)
 * are checked against ONNX's own backend tests (Debian's libonnx-testdata): each folder's model
 * run on its first data set, every output compared (floats within rtol 1e-4, atol 1e-5; integers
 * exactly; dtype and shape equal). */
#include "helpers.h"
#include "ir/dtype.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ONNX_DATA "/usr/share/libonnx-testdata/data/"

/* data set 0 of each test folder ONNX_DATA/T as .npy files in OUT/<T's last part>/ (argv[1] =
 * "OUT|T1,T2,..."): input_K.npy, output_K.npy; one python for the lot (importing onnx is slow) */
static const char pb_to_npy[] = "import sys, glob, os, numpy as np, onnx\n"
				"from onnx import numpy_helper\n"
				"out, tests = sys.argv[1].split('|')\n"
				"for test in tests.split(','):\n"
				"    dst = os.path.join(out, os.path.basename(test)); os.makedirs(dst, exist_ok=True)\n"
				"    for p in glob.glob('" ONNX_DATA "' + test + '/test_data_set_0/*.pb'):\n"
				"        t = onnx.TensorProto(); t.ParseFromString(open(p, 'rb').read())\n"
				"        np.save(os.path.join(dst, os.path.basename(p)[:-3] + '.npy'), numpy_helper.to_array(t))\n";

/* <out>/input_<k>.npy and output_<k>.npy (pb_to_npy's names), for expect_run_matches_npy */
static void converted_npy(const void *out, int is_output, size_t k, const char *name, char *buf, size_t n)
{
	(void)name;
	snprintf(buf, n, "%s/%s_%zu.npy", (const char *)out, is_output ? "output" : "input", k);
}

/* Runs ONNX_DATA/<test>/model.onnx on its data set 0 (converted by pb_to_npy) and compares
 * every output. */
static void onnx_backend_case(const char *test)
{
	char src[256], out[256], path[600];
	snprintf(src, sizeof src, ONNX_DATA "%s", test);
	struct stat st;
	cr_assert_eq(stat(src, &st), 0, "%s is missing: install Debian's libonnx-testdata", src);
	snprintf(out, sizeof out, "%s/%s", tmpdir(), strrchr(test, '/') + 1);
	snprintf(path, sizeof path, "%s/model.onnx", src);
	struct graph *g = load_ok(path);
	expect_run_matches_npy(g, converted_npy, out, 1e-4, 1e-5, test);
	graph_free(g);
}

/* Every case of a NULL-terminated list, its data converted first. */
static void onnx_backend_cases(const char *const *tests)
{
	char arg[4096];
	size_t at = (size_t)snprintf(arg, sizeof arg, "%s|", tmpdir());
	for (const char *const *t = tests; *t; t++)
		at += (size_t)snprintf(arg + at, sizeof arg - at, "%s%s", t == tests ? "" : ",", *t);
	cr_assert_lt(at, sizeof arg);
	python_ok(pb_to_npy, arg, "converting the ONNX backend tests' data");
	for (const char *const *t = tests; *t; t++)
		onnx_backend_case(*t);
}

static const char *const window_tests[] = {
	"node/test_averagepool_3d_default",
	"node/test_maxpool_3d_default",
	"node/test_convtranspose_3d",
	"pytorch-converted/test_Conv3d",
	"pytorch-converted/test_Conv3d_dilated",
	"pytorch-converted/test_Conv3d_dilated_strided",
	"pytorch-converted/test_Conv3d_groups",
	"pytorch-converted/test_Conv3d_no_bias",
	"pytorch-converted/test_Conv3d_stride",
	"pytorch-converted/test_Conv3d_stride_padding",
	"pytorch-converted/test_MaxPool3d",
	"pytorch-converted/test_MaxPool3d_stride",
	"pytorch-converted/test_MaxPool3d_stride_padding",
	"pytorch-converted/test_AvgPool3d",
	"pytorch-converted/test_AvgPool3d_stride",
	"pytorch-converted/test_AvgPool3d_stride1_pad0_gpu_input",
	"node/test_maxpool_2d_uint8",
	"node/test_maxpool_with_argmax_2d_precomputed_strides",
	"node/test_maxpool_with_argmax_2d_precomputed_pads",
	"node/test_convtranspose_output_shape",
	"node/test_convtranspose_pad",
	"node/test_globalmaxpool",
	"node/test_globalmaxpool_precomputed",
	"node/test_maxunpool_export_with_output_shape",
	"node/test_maxunpool_export_without_output_shape",
	NULL,
};

static const char *const resize_tests[] = {
	"node/test_resize_downsample_scales_linear_align_corners",
	"node/test_resize_downsample_scales_cubic_align_corners",
	"node/test_resize_upsample_scales_linear_align_corners",
	"node/test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
	"node/test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
	"node/test_resize_tf_crop_and_resize",
	"node/test_resize_upsample_sizes_nearest_ceil_half_pixel",
	"node/test_resize_upsample_sizes_nearest_floor_align_corners",
	"node/test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
	"node/test_upsample_nearest",
	NULL,
};

static const char *const pad_tests[] = {
	"pytorch-converted/test_ConstantPad2d",
	"pytorch-converted/test_ReflectionPad2d",
	"pytorch-converted/test_ReplicationPad2d",
	"pytorch-converted/test_ZeroPad2d",
	"pytorch-operator/test_operator_pad",
	NULL,
};

Test(conv, windows_of_every_rank_and_dtype_match_onnx_backend_tests)
{
	onnx_backend_cases(window_tests);
}

Test(conv, resize_and_upsample_modes_match_onnx_backend_tests)
{
	onnx_backend_cases(resize_tests);
}

Test(conv, pad_before_opset_11_matches_onnx_backend_tests)
{
	onnx_backend_cases(pad_tests);
}

/* Runs `node` (reading x, float32 of dims, and writing y) in a YAML graph at `opset`, whose
 * params are `params`, and compares y with want (n values, within 1e-5). */
static void expect_values(int opset, const char *params, const char *node, int ndim, const int64_t *dims,
			  const float *xv, const float *want, int n)
{
	char text[1024], shape[64] = "[";
	for (int d = 0; d < ndim; d++)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)dims[d]);
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: %d\ninputs: [{name: x, dtype: float32, shape: %s]}]\n%s%snodes:\n  - %s\n"
		 "outputs: [{name: y}]\n",
		 opset, shape, params[0] ? "params:\n" : "", params, node);
	struct graph *g = load_text("values.yaml", text);
	struct rtensor in = rt_over(DT_FLOAT, ndim, dims, (void *)xv);
	const char *name = "x";
	struct exec_opts o = {.inputs = &in, .input_names = &name, .n_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s: %s", node, e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_assert_eq(y->numel, n, "%s: %lld outputs, expected %d", node, (long long)y->numel, n);
	for (int i = 0; i < n; i++)
		cr_expect_float_eq(rt_get(y, i), want[i], 1e-5, "%s: y[%d] = %.7g, expected %.7g", node, i, rt_get(y, i),
				   want[i]);
	exec_free(x);
	graph_free(g);
}

/* Worked by hand, over X = [0 1 2 3] (1, 1, 1, 4):
 * - the align_corners bug issue 47 names: at scale 0.6, 2 outputs at x = o (4 - 1) / (4 x 0.6 - 1) =
 *   0 and 2.142857, not o (4 - 1) / (2 - 1) = 0 and 3;
 * - opset 18's axes: scales [2] for axis 3 alone, asymmetric: x = o / 2, the last clamped;
 * - Upsample-7 (scales an attribute) linear: the same numbers;
 * - Resize-10 (X, scales) nearest: floor(o / 2). */
Test(conv, resize_forms_worked_by_hand)
{
	static const int64_t d[4] = {1, 1, 1, 4};
	static const float xv[4] = {0, 1, 2, 3};
	static const float ac[2] = {0, 3 / 1.4f}, up[8] = {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3}, nn[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	expect_values(13, "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 1, 0.6]}\n",
		      "{op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: linear, coordinate_transformation_mode: align_corners}}",
		      4, d, xv, ac, 2);
	expect_values(18, "  - {name: sc, dtype: float32, shape: [1], data: [2]}\n",
		      "{op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: linear, axes: [3], coordinate_transformation_mode: asymmetric}}",
		      4, d, xv, up, 8);
	expect_values(7, "", "{op: Upsample, inputs: [x], outputs: [y], attrs: {mode: linear, scales: [1.0, 1.0, 1.0, 2.0]}}", 4, d,
		      xv, up, 8);
	expect_values(10, "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 1, 2]}\n",
		      "{op: Resize, inputs: [x, sc], outputs: [y]}", 4, d, xv, nn, 8);
}

/* LpPool (no ONNX backend test in 1.12), worked by hand: p 2 over [3 4 | 0 12] is [5 12]; p 1 over
 * a whole 2 x 2 x 2 volume is the sum of |x|, 36; p 3 with a pad of 1 each side, windows of 3 at
 * stride 2 over [1 2 2]: (1 + 8)^(1/3) and (8 + 8)^(1/3). */
Test(conv, lp_pool_of_every_rank)
{
	static const int64_t d1[3] = {1, 1, 4}, d3[5] = {1, 1, 2, 2, 2}, dp[3] = {1, 1, 3};
	static const float x1[4] = {3, 4, 0, 12}, w1[2] = {5, 12}, x3[8] = {1, -2, 3, -4, 5, -6, 7, -8}, w3[1] = {36};
	static const float xp[3] = {1, 2, 2}, wp[2] = {2.080083823f, 2.5198421f};
	expect_values(18, "", "{op: LpPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2], strides: [2]}}", 3, d1, x1, w1, 2);
	expect_values(18, "", "{op: LpPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 2, 2], p: 1}}", 5, d3, x3, w3, 1);
	expect_values(18, "", "{op: LpPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3], strides: [2], pads: [1, 1], p: 3}}",
		      3, dp, xp, wp, 2);
}
