/* tests/ops/detect.c - forward values of NonMaxSuppression and RoiAlign (src/ops/detect.c) against
 * numbers computed apart from graphdiet, run as part of test_ops.
 *
 * Two sources, both in the layout of ONNX's backend tests and checked with `graphdiet verify
 * --against DIR/test_data_set_0 DIR/model.onnx` (floats within rtol 1e-4, atol 1e-5; the indices
 * exactly; shape and dtype equal): ONNX 1.12's own tests (Debian's libonnx-testdata: 9 of
 * NonMaxSuppression, 2 of RoiAlign, whose expected data are onnxruntime's), and
 * testdata/detect/gen_detect.py's, whose expected outputs are torchvision's ops.nms and
 * ops.roi_align (and, for RoiAlign's max mode, which torchvision has not, NumPy from the spec's
 * words, matched by onnxruntime 1.30 when generated). Bad inputs are errors naming the node. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define BACKEND_NODE "/usr/share/libonnx-testdata/data/node/"

/* verify --against DIR/test_data_set_0 DIR/model.onnx exits 0: every output matched (within atol,
 * and rtol 1e-4) */
static void verify_matches(const char *dir, const char *atol)
{
	char data[512], model[512];
	struct stat st;
	snprintf(data, sizeof data, "%s/test_data_set_0", dir);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	cr_assert_eq(stat(model, &st), 0, "%s is missing (ONNX's tests: install Debian's libonnx-testdata)", model);
	char *argv[] = {GD_BINARY, "verify", "--atol", (char *)atol, "--against", data, model, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 0, "%s: exit %d\n%s%s", dir, r.status, r.out, r.err);
	run_free(&r);
}

/* ONNX 1.12's RoiAlign data are onnxruntime's numbers truncated to 4 decimals (0.97278 is written
 * 0.9727): up to 1e-4 off, past the suite's atol 1e-5 for onnxruntime 1.30 as for graphdiet (both
 * 8.4e-5 off, 2e-7 apart), hence their atol 1e-4 here (and tests/conformance/expected_failures.txt) */
Test(detect, onnx_backend_tests)
{
	static const char *const tests[] = {
		"test_nonmaxsuppression_center_point_box_format", "test_nonmaxsuppression_flipped_coordinates",
		"test_nonmaxsuppression_identical_boxes",         "test_nonmaxsuppression_limit_output_size",
		"test_nonmaxsuppression_single_box",              "test_nonmaxsuppression_suppress_by_IOU",
		"test_nonmaxsuppression_suppress_by_IOU_and_scores", "test_nonmaxsuppression_two_batches",
		"test_nonmaxsuppression_two_classes",             "test_roialign_aligned_false",
		"test_roialign_aligned_true"};
	for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
		char dir[512];
		snprintf(dir, sizeof dir, BACKEND_NODE "%s", tests[i]);
		verify_matches(dir, strstr(tests[i], "roialign") ? "1e-4" : "1e-5");
	}
}

/* torchvision's numbers: NMS of 3 classes of 16 boxes in 2 batches, corners in either order, a
 * score threshold (scores at it removed) and a limit; center boxes at opset 10 with a scalar limit;
 * iou_threshold omitted (0: any overlap suppresses); no limit given (0: nothing selected, (0, 3));
 * RoiAlign half_pixel with adaptive sampling, opset 10's output_half_pixel, and max mode, over
 * regions partly outside X and one smaller than a pixel */
Test(detect, torchvision_cases)
{
	static const char *const cases[] = {"nms_corners_threshold", "nms_centers", "nms_default_iou",
					    "nms_no_limit_selects_none", "roialign_half_pixel_adaptive",
					    "roialign_opset10", "roialign_max"};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char dir[512];
		snprintf(dir, sizeof dir, TESTDATA "/detect/%s", cases[i]);
		verify_matches(dir, "1e-5");
	}
}

/* Shapes that do not fit, a mode the op has not, and a batch index outside X: exit 2 naming the node */
Test(detect, bad_input_is_an_error_naming_the_node)
{
	static const struct {
		const char *op, *inputs, *attrs, *msg;
	} bad[] = {
		{"NonMaxSuppression", "  - {name: a, dtype: float32, shape: [1, 6, 3]}\n  - {name: b, dtype: float32, shape: [1, 1, 6]}\n",
		 "", "boxes must be (num_batches, num_boxes, 4)"},
		{"NonMaxSuppression", "  - {name: a, dtype: float32, shape: [1, 6, 4]}\n  - {name: b, dtype: float32, shape: [1, 1, 5]}\n",
		 "", "scores must be"},
		{"NonMaxSuppression", "  - {name: a, dtype: float32, shape: [1, 6, 4]}\n  - {name: b, dtype: float32, shape: [1, 1, 6]}\n",
		 "center_point_box: 2", "center_point_box must be 0 or 1"},
		{"RoiAlign",
		 "  - {name: a, dtype: float32, shape: [1, 2, 5, 5]}\n  - {name: b, dtype: float32, shape: [3, 4]}\n"
		 "  - {name: c, dtype: int64, shape: [3]}\n",
		 "mode: min", "attribute 'mode' is 'min', not one of avg/max"},
		{"RoiAlign",
		 "  - {name: a, dtype: float32, shape: [1, 2, 5, 5]}\n  - {name: b, dtype: float32, shape: [3, 5]}\n"
		 "  - {name: c, dtype: int64, shape: [3]}\n",
		 "", "rois must be (num_rois, 4)"},
		{"RoiAlign",
		 "  - {name: a, dtype: float32, shape: [1, 2, 5, 5]}\n  - {name: b, dtype: float32, shape: [3, 4]}\n"
		 "  - {name: c, dtype: int64, shape: [2]}\n",
		 "", "batch_indices must be int64 of shape (3)"},
		{"RoiAlign",
		 "  - {name: a, dtype: float32, shape: [2, 5, 5]}\n  - {name: b, dtype: float32, shape: [3, 4]}\n"
		 "  - {name: c, dtype: int64, shape: [3]}\n",
		 "", "X must be (N, C, H, W)"},
		{"RoiAlign",
		 "  - {name: a, dtype: float32, shape: [1, 2, 5, 5]}\n  - {name: b, dtype: float32, shape: [3, 4]}\n"
		 "  - {name: c, dtype: int64, shape: [3]}\n",
		 "coordinate_transformation_mode: corners", "attribute 'coordinate_transformation_mode' is 'corners'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char text[1024], path[512];
		int roi = !strcmp(bad[i].op, "RoiAlign");
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 16\ninputs:\n%snodes:\n"
			 "  - {name: head, op: %s, inputs: [a, b%s], outputs: [y], attrs: {%s}}\n"
			 "outputs: [{name: y}]\n",
			 bad[i].inputs, bad[i].op, roi ? ", c" : "", bad[i].attrs);
		write_text(path, sizeof path, "bad_detect.yaml", text);
		char *argv[] = {GD_BINARY, "run", "--random-inputs", path, NULL};
		struct run_result r = run_cmd(argv, NULL, 0);
		char want[64];
		snprintf(want, sizeof want, "node 'head' (%s)", bad[i].op);
		cr_expect_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status, r.err);
		cr_expect(strstr(r.err, want) && strstr(r.err, bad[i].msg), "case %zu: %s", i, r.err);
		run_free(&r);
	}
}

/* NonMaxSuppression's output length depends on the values: a shapes-only run (plan) over inputs it
 * does not know says so, naming the node, with exit 2 (as NonZero's) */
Test(detect, nms_length_unknown_before_running_is_an_error)
{
	char *argv[] = {GD_BINARY, "plan", TESTDATA "/detect/nms_centers/model.onnx", NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "(NonMaxSuppression): NonMaxSuppression's output length depends on its inputs' values"), "%s",
		  r.err);
	run_free(&r);
}

/* The costs plan and run report: RoiAlign 12 operations per tap quadruple, 4 sample points per bin
 * at sampling_ratio 2 (roialign_max: Y is 5 x 3 x 3 x 2); NonMaxSuppression a sort and up to N
 * IoUs of 12 operations per box of each of B x C lists (nms_default_iou: B 2, C 3, N 16; its
 * iou_threshold omitted, so that random inputs are valid) */
Test(detect, costs)
{
	static const struct {
		const char *model;
		double flops;
	} cases[] = {{TESTDATA "/detect/roialign_max/model.onnx", 90 * 4 * 12},
		     {TESTDATA "/detect/nms_default_iou/model.onnx", 18824 /* floor(6 * 16 * (log2(17) + 12 * 16)) */}};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *argv[] = {GD_BINARY, "run", "--random-inputs", "--format", "json", (char *)cases[i].model, NULL};
		struct run_result r = run_cmd(argv, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: exit %d: %s", cases[i].model, r.status, r.err);
		cr_expect_eq(json_num(r.out, "flops"), cases[i].flops, "%s: %g FLOPs", cases[i].model, json_num(r.out, "flops"));
		run_free(&r);
	}
}
