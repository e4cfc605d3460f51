/* opcases.c - one small graph per op variant, shared by the gradient checks (test_autodiff.c) and
 * the backends' parity checks (test_backend.c). Each case's nodes produce `y` from random
 * parameters; the loss sum(y*y)/2 + sum(y) gives every element of y its own gradient. */
#include "opcases.h"
#include "io/yaml.h"
#include "ir/dtype.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define P(name, shape) "  - {name: " name ", dtype: float64, shape: " shape ", init: {dist: normal, seed: %d}}\n"
#define POS(name, shape) "  - {name: " name ", dtype: float64, shape: " shape ", init: {dist: uniform, low: 0.5, high: 2, seed: %d}}\n"

const struct gcase op_cases[] = {
	{"Add broadcast", P("a", "[2, 3, 4]") P("b", "[3, 1]"), "  - {op: Add, inputs: [a, b], outputs: [y]}\n"},
	{"Sub broadcast", P("a", "[4]") P("b", "[2, 3, 4]"), "  - {op: Sub, inputs: [a, b], outputs: [y]}\n"},
	{"Mul broadcast", P("a", "[2, 1, 4]") P("b", "[3, 1]"), "  - {op: Mul, inputs: [a, b], outputs: [y]}\n"},
	{"Div", P("a", "[2, 3]") POS("b", "[3]"), "  - {op: Div, inputs: [a, b], outputs: [y]}\n"},
	{"Pow both", POS("a", "[2, 3]") P("b", "[3]"), "  - {op: Pow, inputs: [a, b], outputs: [y]}\n"},
	{"Pow constant exponent", P("a", "[5]"),
	 "  - {op: Constant, outputs: [two], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [2.0]}}}}\n"
	 "  - {op: Pow, inputs: [a, two], outputs: [y]}\n"},
	{"Neg", P("a", "[6]"), "  - {op: Neg, inputs: [a], outputs: [y]}\n"},
	{"Sqrt", POS("a", "[6]"), "  - {op: Sqrt, inputs: [a], outputs: [y]}\n"},
	{"Exp", P("a", "[6]"), "  - {op: Exp, inputs: [a], outputs: [y]}\n"},
	{"Log", POS("a", "[6]"), "  - {op: Log, inputs: [a], outputs: [y]}\n"},
	{"Erf", P("a", "[6]"), "  - {op: Erf, inputs: [a], outputs: [y]}\n"},
	{"Relu", P("a", "[3, 4]"), "  - {op: Relu, inputs: [a], outputs: [y]}\n"},
	{"Tanh", P("a", "[3, 4]"), "  - {op: Tanh, inputs: [a], outputs: [y]}\n"},
	{"Sigmoid", P("a", "[3, 4]"), "  - {op: Sigmoid, inputs: [a], outputs: [y]}\n"},
	{"Clip both bounds (ReLU6)", P("a", "[4, 5]")
	 "  - {name: lo, dtype: float64, shape: [], data: [-0.5]}\n  - {name: hi, dtype: float64, shape: [], data: [0.6]}\n",
	 "  - {op: Clip, inputs: [a, lo, hi], outputs: [y]}\n"},
	{"Clip max only", P("a", "[6]") "  - {name: hi, dtype: float64, shape: [], data: [0.2]}\n",
	 "  - {op: Clip, inputs: [a, \"\", hi], outputs: [y]}\n"},
	{"HardSigmoid", P("a", "[3, 4]"), "  - {op: HardSigmoid, inputs: [a], outputs: [y], attrs: {alpha: 0.5, beta: 0.4}}\n"},
	{"HardSwish", "  - {name: a, dtype: float64, shape: [3, 4], init: {dist: normal, mean: 0, std: 3, seed: %d}}\n",
	 "  - {op: HardSwish, inputs: [a], outputs: [y]}\n"},
	{"LeakyRelu", P("a", "[3, 4]"), "  - {op: LeakyRelu, inputs: [a], outputs: [y], attrs: {alpha: 0.1}}\n"},
	{"Elu", P("a", "[3, 4]"), "  - {op: Elu, inputs: [a], outputs: [y], attrs: {alpha: 0.7}}\n"},
	{"Selu", P("a", "[3, 4]"), "  - {op: Selu, inputs: [a], outputs: [y]}\n"},
	{"Celu", P("a", "[3, 4]"), "  - {op: Celu, inputs: [a], outputs: [y], attrs: {alpha: 2.0}}\n"},
	{"PRelu per channel", P("a", "[2, 3, 4]") P("s", "[3, 1]"), "  - {op: PRelu, inputs: [a, s], outputs: [y]}\n"},
	{"Softplus", P("a", "[3, 4]"), "  - {op: Softplus, inputs: [a], outputs: [y]}\n"},
	/* activations exported as x u(x): differentiated from x alone (activation.c) */
	{"SiLU as x sigmoid(x)", P("a", "[3, 4]"),
	 "  - {op: Sigmoid, inputs: [a], outputs: [s]}\n  - {op: Mul, inputs: [a, s], outputs: [y]}\n"},
	{"SiLU whose sigmoid is read again", P("a", "[3, 4]"),
	 "  - {op: Sigmoid, inputs: [a], outputs: [s]}\n  - {op: Mul, inputs: [s, a], outputs: [p]}\n"
	 "  - {op: Add, inputs: [p, s], outputs: [y]}\n"},
	{"Mish as x tanh(softplus(x))", P("a", "[3, 4]"),
	 "  - {op: Softplus, inputs: [a], outputs: [sp]}\n  - {op: Tanh, inputs: [sp], outputs: [t]}\n"
	 "  - {op: Mul, inputs: [a, t], outputs: [y]}\n"},
	{"GELU as exported: x (1 + erf(x / sqrt 2)) / 2", P("a", "[3, 4]"),
	 "  - {op: Constant, outputs: [r2], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [1.4142135623730951]}}}}\n"
	 "  - {op: Constant, outputs: [one], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [1.0]}}}}\n"
	 "  - {op: Constant, outputs: [half], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.5]}}}}\n"
	 "  - {op: Div, inputs: [a, r2], outputs: [d]}\n  - {op: Erf, inputs: [d], outputs: [e]}\n"
	 "  - {op: Add, inputs: [e, one], outputs: [u]}\n  - {op: Mul, inputs: [a, u], outputs: [p]}\n"
	 "  - {op: Mul, inputs: [p, half], outputs: [y]}\n"},
	{"LayerNorm as exported before opset 17", P("a", "[3, 4]") P("w", "[4]"),
	 "  - {op: Constant, outputs: [two], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [2.0]}}}}\n"
	 "  - {op: Constant, outputs: [eps], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.001]}}}}\n"
	 "  - {op: ReduceMean, inputs: [a], outputs: [mu], attrs: {axes: [-1]}}\n"
	 "  - {op: Sub, inputs: [a, mu], outputs: [d]}\n  - {op: Pow, inputs: [d, two], outputs: [sq]}\n"
	 "  - {op: ReduceMean, inputs: [sq], outputs: [var], attrs: {axes: [-1]}}\n"
	 "  - {op: Add, inputs: [var, eps], outputs: [ve]}\n  - {op: Sqrt, inputs: [ve], outputs: [s]}\n"
	 "  - {op: Div, inputs: [d, s], outputs: [xh]}\n  - {op: Mul, inputs: [xh, w], outputs: [y]}\n"},
	{"LayerNorm chain whose epsilon is trained", P("a", "[3, 4]") POS("eps", "[]"),
	 "  - {op: ReduceMean, inputs: [a], outputs: [mu], attrs: {axes: [-1]}}\n"
	 "  - {op: Sub, inputs: [a, mu], outputs: [d]}\n  - {op: Mul, inputs: [d, d], outputs: [sq]}\n"
	 "  - {op: ReduceMean, inputs: [sq], outputs: [var], attrs: {axes: [-1]}}\n"
	 "  - {op: Add, inputs: [eps, var], outputs: [ve]}\n  - {op: Sqrt, inputs: [ve], outputs: [s]}\n"
	 "  - {op: Div, inputs: [d, s], outputs: [y]}\n"},
	{"GELU tanh form as exported, and as (x / 2) (1 + tanh(...))", P("a", "[3, 4]"),
	 "  - {op: Constant, outputs: [c], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.044715]}}}}\n"
	 "  - {op: Constant, outputs: [k], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.7978845608028654]}}}}\n"
	 "  - {op: Constant, outputs: [one], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [1.0]}}}}\n"
	 "  - {op: Constant, outputs: [half], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.5]}}}}\n"
	 "  - {op: Mul, inputs: [a, a], outputs: [sq]}\n  - {op: Mul, inputs: [a, sq], outputs: [cube]}\n"
	 "  - {op: Mul, inputs: [c, cube], outputs: [cc]}\n  - {op: Add, inputs: [a, cc], outputs: [in]}\n"
	 "  - {op: Mul, inputs: [k, in], outputs: [kin]}\n  - {op: Tanh, inputs: [kin], outputs: [t]}\n"
	 "  - {op: Add, inputs: [one, t], outputs: [u]}\n  - {op: Mul, inputs: [a, u], outputs: [p]}\n"
	 "  - {op: Mul, inputs: [half, p], outputs: [y1]}\n"
	 "  - {op: Mul, inputs: [half, a], outputs: [ha]}\n  - {op: Mul, inputs: [ha, u], outputs: [y2]}\n"
	 "  - {op: Add, inputs: [y1, y2], outputs: [y]}\n"},
	{"Identity", P("a", "[3]"), "  - {op: Identity, inputs: [a], outputs: [y]}\n"},
	{"Cast", P("a", "[3]"), "  - {op: Cast, inputs: [a], outputs: [y], attrs: {to: 11}}\n"},
	{"Sum of three", P("a", "[2, 3]") P("b", "[3]") P("c", "[2, 1]"), "  - {op: Sum, inputs: [a, b, c], outputs: [y]}\n"},
	{"Where", P("a", "[2, 3]") P("b", "[3]") "  - {name: c, dtype: bool, shape: [2, 3], data: [1, 0, 1, 0, 0, 1]}\n",
	 "  - {op: Where, inputs: [c, a, b], outputs: [y]}\n"},
	{"Gemm", P("a", "[3, 4]") P("b", "[4, 2]") P("c", "[2]"),
	 "  - {op: Gemm, inputs: [a, b, c], outputs: [y], attrs: {alpha: 0.5, beta: 2.0}}\n"},
	{"Gemm transposed", P("a", "[4, 3]") P("b", "[2, 4]") P("c", "[3, 1]"),
	 "  - {op: Gemm, inputs: [a, b, c], outputs: [y], attrs: {transA: 1, transB: 1}}\n"},
	/* a weight read by four nodes, as an unrolled RNN's: its summands made by Gemms add in their C */
	{"Gemm shared weight", P("a", "[3, 4]") P("w", "[4, 4]"),
	 "  - {op: Gemm, inputs: [a, w], outputs: [h1], attrs: {transB: 1}}\n"
	 "  - {op: Gemm, inputs: [h1, w], outputs: [h2]}\n"
	 "  - {op: Gemm, inputs: [w, h2], outputs: [h3], attrs: {transB: 1, alpha: 0.5}}\n"
	 "  - {op: Tanh, inputs: [w], outputs: [s]}\n"
	 "  - {op: Gemm, inputs: [h3, s], outputs: [y], attrs: {transA: 1}}\n"},
	{"MatMul batched broadcast", P("a", "[2, 3, 4]") P("b", "[4, 5]"), "  - {op: MatMul, inputs: [a, b], outputs: [y]}\n"},
	{"MatMul broadcast both", P("a", "[2, 1, 3, 4]") P("b", "[3, 4, 2]"), "  - {op: MatMul, inputs: [a, b], outputs: [y]}\n"},
	/* PyTorch's Linear on batched input: MatMul(x, Transpose(W)); the rule gives W its gradient */
	{"MatMul of a transposed weight", P("a", "[2, 3, 4]") P("w", "[5, 4]"),
	 "  - {op: Transpose, inputs: [w], outputs: [wt], attrs: {perm: [1, 0]}}\n"
	 "  - {op: MatMul, inputs: [a, wt], outputs: [y]}\n"},
	{"MatMul 2-D of a transposed weight read twice", P("a", "[3, 4]") P("w", "[5, 4]") P("c", "[4, 5]"),
	 "  - {op: Transpose, inputs: [w], outputs: [wt]}\n"
	 "  - {op: MatMul, inputs: [a, wt], outputs: [t]}\n"
	 "  - {op: Mul, inputs: [wt, c], outputs: [u]}\n"
	 "  - {op: MatMul, inputs: [a, u], outputs: [z]}\n"
	 "  - {op: Mul, inputs: [t, z], outputs: [y]}\n"},
	/* attention as einsum exports it, a contraction with a broadcast-free batch, three operands */
	{"Einsum attention scores", P("q", "[2, 2, 3, 4]") P("k", "[2, 2, 5, 4]"),
	 "  - {op: Einsum, inputs: [q, k], outputs: [y], attrs: {equation: \"bhqd,bhkd->bhqk\"}}\n"},
	{"Einsum implicit output", P("a", "[3, 4]") P("b", "[4, 2]"), "  - {op: Einsum, inputs: [a, b], outputs: [y], attrs: {equation: \"ij,jk\"}}\n"},
	{"Einsum with ellipses, implicit and explicit", P("a", "[2, 3, 4, 5]") P("b", "[2, 3, 5, 2]"),
	 "  - {op: Einsum, inputs: [a, b], outputs: [t], attrs: {equation: \"...ij,...jk->...ik\"}}\n"
	 "  - {op: Einsum, inputs: [t], outputs: [y], attrs: {equation: \"a...\"}}\n"},
	{"Einsum summing a label within one operand", P("a", "[2, 3, 4]") P("b", "[4]"),
	 "  - {op: Einsum, inputs: [a, b], outputs: [y], attrs: {equation: \"ijk,k->i\"}}\n"},
	{"Einsum three operands", P("a", "[2, 3]") P("b", "[3, 4]") P("c", "[4]"),
	 "  - {op: Einsum, inputs: [a, b, c], outputs: [y], attrs: {equation: \"ij, jk ,k->i\"}}\n"},
	{"Conv", P("x", "[2, 3, 5, 5]") P("w", "[4, 3, 3, 3]") P("b", "[4]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {pads: [1, 1, 1, 1]}}\n"},
	{"Conv strided dilated", P("x", "[1, 2, 7, 6]") P("w", "[3, 2, 2, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2], dilations: [2, 1], pads: [0, 1, 1, 0]}}\n"},
	/* strides that leave the padded input longer than the kernel's reach: dW's Conv has its end
	 * pads cut (ResNet's stride-2 3 x 3 and 7 x 7), and what the pad cannot cover cropped (the
	 * 1 x 1 downsample; a stride of 3 by half) */
	{"Conv stride 2 on an even map", P("x", "[2, 3, 6, 6]") P("w", "[4, 3, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	{"Conv 1x1 stride 2 on an even map", P("x", "[2, 3, 4, 4]") P("w", "[2, 3, 1, 1]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2]}}\n"},
	{"Conv stride 3, the end pad half the excess", P("x", "[1, 2, 9, 8]") P("w", "[2, 2, 2, 2]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [3, 3], pads: [0, 0, 1, 1]}}\n"},
	{"Conv grouped stride 2 on an even map", P("x", "[1, 4, 6, 6]") P("w", "[4, 2, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {group: 2, strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	{"Conv grouped", P("x", "[1, 4, 5, 5]") P("w", "[6, 2, 3, 3]") P("b", "[6]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {group: 2, pads: [1, 0, 1, 0]}}\n"},
	/* depthwise, as MobileNet and EfficientNet export it: more groups than any fixed table */
	{"Conv depthwise, 70 groups, strided", P("x", "[2, 70, 5, 5]") P("w", "[70, 1, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {group: 70, strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	/* MobileNetV3's 5x5 depthwise convolutions reach 1x1 maps: the kernel is wider than the image */
	{"Conv 5x5 on a 1x1 image", P("x", "[2, 3, 1, 1]") P("w", "[3, 1, 5, 5]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {group: 3, pads: [2, 2, 2, 2]}}\n"},
	{"Conv 5x5 on a 2x2 image", P("x", "[1, 2, 2, 2]") P("w", "[2, 2, 5, 5]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {pads: [2, 2, 2, 2]}}\n"},
	{"Conv grouped, channel multiplier", P("x", "[2, 6, 4, 4]") P("w", "[9, 2, 2, 2]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {group: 3, dilations: [2, 1]}}\n"},
	{"ConvTranspose grouped", P("x", "[1, 4, 3, 3]") P("w", "[4, 3, 2, 2]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {group: 2, strides: [2, 1]}}\n"},
	{"Conv SAME_UPPER", P("x", "[1, 2, 5, 5]") P("w", "[2, 2, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {auto_pad: \"SAME_UPPER\", strides: [2, 2]}}\n"},
	{"ConvTranspose", P("x", "[2, 3, 3, 3]") P("w", "[3, 2, 3, 3]") P("b", "[2]"),
	 "  - {op: ConvTranspose, inputs: [x, w, b], outputs: [y], attrs: {strides: [2, 2], pads: [1, 1, 1, 1], output_padding: [1, 0]}}\n"},
	/* 1-D windows (Conv1d, MaxPool1d, AvgPool1d, ConvTranspose1d): the 2-D rules over an axis of 1 */
	{"Conv 1-D strided, padded, grouped", P("x", "[2, 4, 9]") P("w", "[6, 2, 3]") P("b", "[6]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {group: 2, strides: [2], pads: [1, 2], dilations: [2]}}\n"},
	{"ConvTranspose 1-D", P("x", "[1, 3, 4]") P("w", "[3, 2, 3]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {strides: [2], pads: [1, 0], output_padding: [1]}}\n"},
	{"MaxPool 1-D", P("x", "[2, 3, 7]"), "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3], strides: [2], pads: [1, 1]}}\n"},
	{"AveragePool 1-D", P("x", "[1, 2, 6]"), "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2], pads: [1, 0]}}\n"},
	{"MaxPool", P("x", "[2, 2, 5, 5]"),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	{"AveragePool", P("x", "[1, 2, 5, 5]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 2], strides: [2, 1], pads: [1, 0, 1, 1]}}\n"},
	{"AveragePool count_include_pad", P("x", "[1, 2, 4, 4]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 3], pads: [1, 1, 1, 1], count_include_pad: 1}}\n"},
	/* nn.Upsample / F.interpolate as PyTorch exports them */
	{"Resize nearest x2 (asymmetric, floor)", P("x", "[1, 2, 3, 2]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 2, 2]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: nearest, coordinate_transformation_mode: asymmetric, nearest_mode: floor}}\n"},
	{"Resize bilinear x2 (half_pixel)", P("x", "[2, 1, 3, 4]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 2, 2]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: linear}}\n"},
	{"Resize linear to sizes (align_corners)", P("x", "[1, 2, 3, 3]") "  - {name: sz, dtype: int64, shape: [4], data: [1, 2, 5, 4]}\n",
	 "  - {op: Resize, inputs: [x, \"\", \"\", sz], outputs: [y], attrs: {mode: linear, coordinate_transformation_mode: align_corners}}\n"},
	{"Resize bicubic x2 (half_pixel, a = -0.75)", P("x", "[1, 2, 3, 4]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 2, 2]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: cubic, cubic_coeff_a: -0.75}}\n"},
	{"Resize nearest down (round_prefer_ceil, pytorch_half_pixel)", P("x", "[1, 1, 5, 6]")
	 "  - {name: sz, dtype: int64, shape: [4], data: [1, 1, 3, 4]}\n",
	 "  - {op: Resize, inputs: [x, \"\", \"\", sz], outputs: [y], attrs: {coordinate_transformation_mode: pytorch_half_pixel, nearest_mode: round_prefer_ceil}}\n"},
	{"GlobalAveragePool", P("x", "[2, 3, 4, 5]"), "  - {op: GlobalAveragePool, inputs: [x], outputs: [y]}\n"},
	{"BatchNormalization training", P("x", "[3, 2, 2, 3]") P("s", "[2]") P("b", "[2]")
	 "  - {name: m, dtype: float64, shape: [2], data: [0.1, -0.2]}\n  - {name: v, dtype: float64, shape: [2], data: [1.5, 0.5]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y, rm, rv], attrs: {training_mode: 1}}\n"},
	{"BatchNormalization inference", P("x", "[3, 2, 4]") P("s", "[2]") P("b", "[2]")
	 "  - {name: m, dtype: float64, shape: [2], data: [0.1, -0.2]}\n  - {name: v, dtype: float64, shape: [2], data: [1.5, 0.5]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y]}\n"},
	{"InstanceNormalization", P("x", "[2, 3, 4, 2]") P("s", "[3]") P("b", "[3]"),
	 "  - {op: InstanceNormalization, inputs: [x, s, b], outputs: [y], attrs: {epsilon: 0.01}}\n"},
	/* GroupNorm as PyTorch exports it: the groups as InstanceNormalization's channels */
	{"InstanceNormalization of groups", P("x", "[2, 2, 6]")
	 "  - {name: s, dtype: float64, shape: [2], data: [1, 1]}\n  - {name: b, dtype: float64, shape: [2], data: [0, 0]}\n",
	 "  - {op: InstanceNormalization, inputs: [x, s, b], outputs: [y]}\n"},
	/* one replica: the identity, and its gradient an AllReduce (the identity too) of the gradients */
	{"AllReduce", P("a", "[2, 3]") P("b", "[3]"),
	 "  - {op: AllReduce, domain: graphdiet, inputs: [a, b], outputs: [ra, rb], attrs: {reduction: sum, replicas: 1}}\n"
	 "  - {op: Mul, inputs: [ra, rb], outputs: [y]}\n"},
	/* one replica: a reshape of the whole slice, and its gradient a ReduceScatter (a flatten) */
	{"AllGather", P("s", "[6]") P("w", "[2, 3]"),
	 "  - {op: AllGather, domain: graphdiet, inputs: [s], outputs: [g], attrs: {replicas: 1, shape: [2, 3]}}\n"
	 "  - {op: Mul, inputs: [g, w], outputs: [y]}\n"},
	{"LayerNormalization", P("x", "[2, 3, 4]") P("s", "[4]") P("b", "[4]"),
	 "  - {op: LayerNormalization, inputs: [x, s, b], outputs: [y], attrs: {epsilon: 0.001}}\n"},
	{"LayerNormalization two axes", P("x", "[2, 3, 4]") P("s", "[3, 4]"),
	 "  - {op: LayerNormalization, inputs: [x, s], outputs: [y], attrs: {axis: 1}}\n"},
	{"Softmax", P("x", "[2, 3, 4]"), "  - {op: Softmax, inputs: [x], outputs: [y], attrs: {axis: 1}}\n"},
	{"LogSoftmax", P("x", "[2, 5]"), "  - {op: LogSoftmax, inputs: [x], outputs: [y]}\n"},
	{"Dropout training", P("x", "[4, 5]") "  - {name: r, dtype: float64, shape: [], data: [0.3]}\n  - {name: t, dtype: bool, shape: [], data: [1]}\n",
	 "  - {op: Dropout, inputs: [x, r, t], outputs: [y], attrs: {seed: 7}}\n"},
	/* the recurrent family: every output flows into y */
	{"LSTM bidirectional, initial states, all outputs", P("x", "[3, 2, 4]") P("w", "[2, 12, 4]") P("r", "[2, 12, 3]")
	 P("b", "[2, 24]") P("h0", "[2, 2, 3]") P("c0", "[2, 2, 3]"),
	 "  - {op: LSTM, inputs: [x, w, r, b, \"\", h0, c0], outputs: [ro, rh, rc], attrs: {hidden_size: 3, direction: bidirectional}}\n"
	 "  - {op: Add, inputs: [ro, rh], outputs: [u]}\n  - {op: Mul, inputs: [u, rc], outputs: [y]}\n"},
	{"LSTM reverse, no bias, Y_h only", P("x", "[4, 1, 2]") P("w", "[1, 8, 2]") P("r", "[1, 8, 2]"),
	 "  - {op: LSTM, inputs: [x, w, r], outputs: [\"\", y], attrs: {hidden_size: 2, direction: reverse}}\n"},
	{"GRU (linear_before_reset), initial state", P("x", "[3, 2, 4]") P("w", "[1, 9, 4]") P("r", "[1, 9, 3]")
	 P("b", "[1, 18]") P("h0", "[1, 2, 3]"),
	 "  - {op: GRU, inputs: [x, w, r, b, \"\", h0], outputs: [ro, rh], attrs: {hidden_size: 3, linear_before_reset: 1}}\n"
	 "  - {op: Add, inputs: [ro, rh], outputs: [y]}\n"},
	{"GRU reset before the product (linear_before_reset 0), reverse", P("x", "[3, 2, 2]") P("w", "[1, 9, 2]") P("r", "[1, 9, 3]")
	 P("b", "[1, 18]") P("h0", "[1, 2, 3]"),
	 "  - {op: GRU, inputs: [x, w, r, b, \"\", h0], outputs: [ro, rh], attrs: {hidden_size: 3, direction: reverse}}\n"
	 "  - {op: Mul, inputs: [ro, rh], outputs: [y]}\n"},
	{"GRU bidirectional", P("x", "[2, 3, 2]") P("w", "[2, 6, 2]") P("r", "[2, 6, 2]") P("b", "[2, 12]"),
	 "  - {op: GRU, inputs: [x, w, r, b], outputs: [y], attrs: {hidden_size: 2, direction: bidirectional, linear_before_reset: 1}}\n"},
	{"RNN bidirectional", P("x", "[4, 1, 2]") P("w", "[2, 3, 2]") P("r", "[2, 3, 3]") P("b", "[2, 6]") P("h0", "[2, 1, 3]"),
	 "  - {op: RNN, inputs: [x, w, r, b, \"\", h0], outputs: [ro, rh], attrs: {hidden_size: 3, direction: bidirectional}}\n"
	 "  - {op: Mul, inputs: [ro, rh], outputs: [y]}\n"},
	{"Reshape", P("x", "[2, 3, 4]") "  - {name: s, dtype: int64, shape: [2], data: [4, -1]}\n",
	 "  - {op: Reshape, inputs: [x, s], outputs: [y]}\n"},
	{"Flatten", P("x", "[2, 3, 4]"), "  - {op: Flatten, inputs: [x], outputs: [y], attrs: {axis: 2}}\n"},
	{"Squeeze", P("x", "[2, 1, 3]") "  - {name: ax, dtype: int64, shape: [1], data: [1]}\n",
	 "  - {op: Squeeze, inputs: [x, ax], outputs: [y]}\n"},
	{"Unsqueeze", P("x", "[2, 3]") "  - {name: ax, dtype: int64, shape: [2], data: [0, 3]}\n",
	 "  - {op: Unsqueeze, inputs: [x, ax], outputs: [y]}\n"},
	{"Transpose", P("x", "[2, 3, 4]"), "  - {op: Transpose, inputs: [x], outputs: [y], attrs: {perm: [2, 0, 1]}}\n"},
	{"Concat", P("a", "[2, 1, 3]") P("b", "[2, 4, 3]"), "  - {op: Concat, inputs: [a, b], outputs: [y], attrs: {axis: 1}}\n"},
	{"Split", P("x", "[2, 5]") "  - {name: s, dtype: int64, shape: [2], data: [2, 3]}\n",
	 "  - {op: Split, inputs: [x, s], outputs: [p, q], attrs: {axis: 1}}\n  - {op: Mul, inputs: [q, q], outputs: [y]}\n"},
	{"Slice", P("x", "[4, 5]") "  - {name: st, dtype: int64, shape: [2], data: [1, -4]}\n"
	 "  - {name: en, dtype: int64, shape: [2], data: [3, 100]}\n",
	 "  - {op: Slice, inputs: [x, st, en], outputs: [y]}\n"},
	/* strided: RoPE's x[..., ::2] and x[..., 1::2], a flip, and steps with unit ones beside them */
	{"Slice step 2 from 1", P("x", "[3, 7]") "  - {name: st, dtype: int64, shape: [1], data: [1]}\n"
	 "  - {name: en, dtype: int64, shape: [1], data: [100]}\n  - {name: ax, dtype: int64, shape: [1], data: [-1]}\n"
	 "  - {name: sp, dtype: int64, shape: [1], data: [2]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax, sp], outputs: [y]}\n"},
	{"Slice reversed, strided and unit axes", P("x", "[5, 4, 6]") "  - {name: st, dtype: int64, shape: [3], data: [-1, 1, 0]}\n"
	 "  - {name: en, dtype: int64, shape: [3], data: [-100, 3, 6]}\n  - {name: ax, dtype: int64, shape: [3], data: [0, 1, 2]}\n"
	 "  - {name: sp, dtype: int64, shape: [3], data: [-2, 1, 3]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax, sp], outputs: [y]}\n"},
	{"Slice with a step past the end (one element)", P("x", "[3, 4]") "  - {name: st, dtype: int64, shape: [1], data: [1]}\n"
	 "  - {name: en, dtype: int64, shape: [1], data: [4]}\n  - {name: ax, dtype: int64, shape: [1], data: [1]}\n"
	 "  - {name: sp, dtype: int64, shape: [1], data: [9223372036854775807]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax, sp], outputs: [y]}\n"},
	{"Slice backwards with the most negative step", P("x", "[3, 4]") "  - {name: st, dtype: int64, shape: [1], data: [-1]}\n"
	 "  - {name: en, dtype: int64, shape: [1], data: [-100]}\n  - {name: ax, dtype: int64, shape: [1], data: [0]}\n"
	 "  - {name: sp, dtype: int64, shape: [1], data: [-9223372036854775808]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax, sp], outputs: [y]}\n"},
	{"Pad", P("x", "[2, 3]") "  - {name: p, dtype: int64, shape: [4], data: [1, 0, 0, 2]}\n",
	 "  - {op: Pad, inputs: [x, p], outputs: [y]}\n"},
	/* negative pads crop: the last axis loses its first column and gains two */
	{"Pad cropping", P("x", "[3, 4]") "  - {name: p, dtype: int64, shape: [4], data: [1, -1, -1, 2]}\n",
	 "  - {op: Pad, inputs: [x, p], outputs: [y]}\n"},
	/* ReflectionPad2d, ReplicationPad2d */
	{"Pad reflect", P("x", "[1, 2, 3, 4]") "  - {name: p, dtype: int64, shape: [8], data: [0, 0, 2, 1, 0, 0, 1, 3]}\n",
	 "  - {op: Pad, inputs: [x, p], outputs: [y], attrs: {mode: reflect}}\n"},
	{"Pad edge", P("x", "[2, 3]") "  - {name: p, dtype: int64, shape: [4], data: [2, 1, 0, 3]}\n",
	 "  - {op: Pad, inputs: [x, p], outputs: [y], attrs: {mode: edge}}\n"},
	{"Gather embedding", P("e", "[5, 3]") "  - {name: i, dtype: int64, shape: [2, 3], data: [0, 4, 4, 1, 0, 2]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y]}\n"},
	{"Gather axis 1, repeated indices", P("e", "[2, 4, 3]") "  - {name: i, dtype: int64, shape: [2, 2], data: [3, 0, 3, -1]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y], attrs: {axis: 1}}\n"},
	/* ViT's class token, x[:, 0] */
	{"Gather last axis, scalar index", P("e", "[2, 3, 4]") "  - {name: i, dtype: int64, shape: [], data: [2]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y], attrs: {axis: -1}}\n"},
	{"Trilu upper, k = 1", P("x", "[2, 3, 4]") "  - {name: k, dtype: int64, shape: [], data: [1]}\n",
	 "  - {op: Trilu, inputs: [x, k], outputs: [y]}\n"},
	{"Trilu lower", P("x", "[4, 3]"), "  - {op: Trilu, inputs: [x], outputs: [y], attrs: {upper: 0}}\n"},
	{"CumSum reverse exclusive", P("x", "[2, 5]") "  - {name: ax, dtype: int64, shape: [], data: [1]}\n",
	 "  - {op: CumSum, inputs: [x, ax], outputs: [y], attrs: {reverse: 1, exclusive: 1}}\n"},
	{"CumSum", P("x", "[3, 2]") "  - {name: ax, dtype: int64, shape: [], data: [0]}\n",
	 "  - {op: CumSum, inputs: [x, ax], outputs: [y]}\n"},
	/* torch.arange as a float factor */
	{"Range", P("x", "[2, 5]") "  - {name: s, dtype: float64, shape: [], data: [0.5]}\n"
	 "  - {name: l, dtype: float64, shape: [], data: [2.9]}\n  - {name: d, dtype: float64, shape: [], data: [0.5]}\n",
	 "  - {op: Range, inputs: [s, l, d], outputs: [r]}\n  - {op: Mul, inputs: [x, r], outputs: [y]}\n"},
	{"GatherElements axis 1, repeats", P("x", "[3, 4]") "  - {name: i, dtype: int64, shape: [3, 2], data: [3, 3, 0, -1, 1, 2]}\n",
	 "  - {op: GatherElements, inputs: [x, i], outputs: [y], attrs: {axis: 1}}\n"},
	{"Tile", P("x", "[2, 1, 3]") "  - {name: r, dtype: int64, shape: [3], data: [2, 3, 1]}\n",
	 "  - {op: Tile, inputs: [x, r], outputs: [y]}\n"},
	{"DepthToSpace CRD (PixelShuffle)", P("x", "[2, 8, 2, 3]"),
	 "  - {op: DepthToSpace, inputs: [x], outputs: [y], attrs: {blocksize: 2, mode: CRD}}\n"},
	{"DepthToSpace DCR", P("x", "[1, 9, 2, 2]"), "  - {op: DepthToSpace, inputs: [x], outputs: [y], attrs: {blocksize: 3}}\n"},
	{"SpaceToDepth", P("x", "[2, 2, 4, 6]"), "  - {op: SpaceToDepth, inputs: [x], outputs: [y], attrs: {blocksize: 2}}\n"},
	{"Expand", P("x", "[3, 1]") "  - {name: s, dtype: int64, shape: [3], data: [2, 3, 4]}\n",
	 "  - {op: Expand, inputs: [x, s], outputs: [y]}\n"},
	{"ReduceSum", P("x", "[2, 3, 4]") "  - {name: ax, dtype: int64, shape: [2], data: [0, 2]}\n",
	 "  - {op: ReduceSum, inputs: [x, ax], outputs: [y], attrs: {keepdims: 0}}\n"},
	{"ReduceMean", P("x", "[2, 3, 4]"), "  - {op: ReduceMean, inputs: [x], outputs: [y], attrs: {axes: [-1]}}\n"},
	{"ReduceMax", P("x", "[3, 4]"), "  - {op: ReduceMax, inputs: [x], outputs: [y], attrs: {axes: [1], keepdims: 0}}\n"},
	{"ReduceMin", P("x", "[3, 4]"), "  - {op: ReduceMin, inputs: [x], outputs: [y], attrs: {axes: [0], keepdims: 0}}\n"},
	{"Abs", P("x", "[3, 4]") "  - {name: z, dtype: float64, shape: [2], data: [0, 0]}\n",
	 "  - {op: Abs, inputs: [x], outputs: [ax]}\n  - {op: Abs, inputs: [z], outputs: [az]}\n"
	 "  - {op: ReduceSum, inputs: [az], outputs: [sz], attrs: {keepdims: 0}}\n  - {op: Add, inputs: [ax, sz], outputs: [y]}\n"},
	{"ReduceL2 (F.normalize), a row of zeros", P("x", "[3, 4]") "  - {name: z, dtype: float64, shape: [1, 4], data: [0, 0, 0, 0]}\n",
	 "  - {op: Concat, inputs: [x, z], outputs: [xz], attrs: {axis: 0}}\n"
	 "  - {op: ReduceL2, inputs: [xz], outputs: [y], attrs: {axes: [1]}}\n"},
	{"SoftmaxCrossEntropyLoss mean", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y]}\n"},
	{"SoftmaxCrossEntropyLoss weighted, ignore, spatial", P("s", "[2, 3, 2]") POS("w", "[3]")
	 "  - {name: l, dtype: int64, shape: [2, 2], data: [2, -1, 0, 1]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l, w], outputs: [y], attrs: {ignore_index: -1}}\n"},
	{"SoftmaxCrossEntropyLoss none", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y, lp], attrs: {reduction: \"none\"}}\n"},
	/* a GPT's vocabulary: more classes than any fixed table */
	{"SoftmaxCrossEntropyLoss over 4100 classes", P("s", "[1, 4100]") "  - {name: l, dtype: int64, shape: [1], data: [4099]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y]}\n"},
	{"NegativeLogLikelihoodLoss sum", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: NegativeLogLikelihoodLoss, inputs: [s, l], outputs: [y], attrs: {reduction: \"sum\"}}\n"},
	{"NegativeLogLikelihoodLoss weighted, ignore", P("s", "[4, 3]") POS("w", "[3]")
	 "  - {name: l, dtype: int64, shape: [4], data: [2, 0, 5, 1]}\n",
	 "  - {op: NegativeLogLikelihoodLoss, inputs: [s, l, w], outputs: [y], attrs: {ignore_index: 5}}\n"},
	{"SoftmaxCrossEntropyLoss sum", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [3, 3, 0]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y], attrs: {reduction: \"sum\"}}\n"},
	{"Conv SAME_LOWER dilated", P("x", "[1, 2, 6, 5]") P("w", "[2, 2, 2, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {auto_pad: \"SAME_LOWER\", dilations: [2, 1]}}\n"},
	{"MaxPool dilated, no pads", P("x", "[1, 1, 6, 6]"),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 2], dilations: [2, 2]}}\n"},
	{"Softmax default axis", P("x", "[2, 3, 4]"), "  - {op: Softmax, inputs: [x], outputs: [y]}\n"},
	{"LogSoftmax axis 0", P("x", "[3, 4]"), "  - {op: LogSoftmax, inputs: [x], outputs: [y], attrs: {axis: 0}}\n"},
	{"ReduceMax keepdims", P("x", "[3, 4]"), "  - {op: ReduceMax, inputs: [x], outputs: [y], attrs: {axes: [0]}}\n"},
	{"ReduceSum all axes", P("x", "[2, 3]"), "  - {op: ReduceSum, inputs: [x], outputs: [y]}\n"},
	{"ReduceMean two axes", P("x", "[2, 3, 4]"), "  - {op: ReduceMean, inputs: [x], outputs: [y], attrs: {axes: [0, 2], keepdims: 0}}\n"},
	{"Gemm scalar C", P("a", "[2, 3]") P("b", "[3, 4]") P("c", "[]"), "  - {op: Gemm, inputs: [a, b, c], outputs: [y]}\n"},
	{"Slice axes and negative start", P("x", "[3, 4, 5]") "  - {name: st, dtype: int64, shape: [1], data: [-3]}\n"
	 "  - {name: en, dtype: int64, shape: [1], data: [5]}\n  - {name: ax, dtype: int64, shape: [1], data: [2]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax], outputs: [y]}\n"},
	{"Split equal parts, first used", P("x", "[6, 2]"),
	 "  - {op: Split, inputs: [x], outputs: [y, q, r]}\n"},
	{"Gather negative indices", P("e", "[4, 2]") "  - {name: i, dtype: int64, shape: [3], data: [-1, 0, -1]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y]}\n"},
	{"Expand to a higher rank", P("x", "[3]") "  - {name: s, dtype: int64, shape: [3], data: [2, 1, 3]}\n",
	 "  - {op: Expand, inputs: [x, s], outputs: [y]}\n"},
	{"BatchNormalization training 2-D", P("x", "[5, 3]") P("s", "[3]") P("b", "[3]")
	 "  - {name: m, dtype: float64, shape: [3], data: [0, 0, 0]}\n  - {name: v, dtype: float64, shape: [3], data: [1, 1, 1]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y, rm, rv], attrs: {training_mode: 1}}\n"},
	/* elem */
#define U(name, shape, lo, hi) "  - {name: " name ", dtype: float64, shape: " shape ", init: {dist: uniform, low: " lo ", high: " hi ", seed: %d}}\n"
#define C64(name, v) "  - {op: Constant, outputs: [" name "], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [" v "]}}}}\n"
	{"Reciprocal", POS("a", "[2, 3]"), "  - {op: Reciprocal, inputs: [a], outputs: [y]}\n"},
	{"Mod fmod 1 (C's sign), broadcast", P("a", "[2, 3]") POS("b", "[3]"),
	 "  - {op: Mod, inputs: [a, b], outputs: [y], attrs: {fmod: 1}}\n"},
	{"Mod fmod 1, negative divisors", P("a", "[2, 3]") POS("b", "[2, 3]"),
	 "  - {op: Neg, inputs: [b], outputs: [nb]}\n  - {op: Mod, inputs: [a, nb], outputs: [y], attrs: {fmod: 1}}\n"},
	{"Max of three, broadcast", P("a", "[2, 3]") P("b", "[3]") P("c", "[2, 1]"),
	 "  - {op: Max, inputs: [a, b, c], outputs: [y]}\n"},
	{"Max with a tie (an input twice): split, summing to g", P("a", "[2, 3]") P("b", "[3]"),
	 "  - {op: Max, inputs: [a, a, b], outputs: [y]}\n"},
	{"Min of two, and of one", P("a", "[2, 3]") P("b", "[2, 3]"),
	 "  - {op: Min, inputs: [a, b], outputs: [m]}\n  - {op: Min, inputs: [m], outputs: [y]}\n"},
	{"Mean of three, broadcast", P("a", "[2, 3]") P("b", "[3]") P("c", "[2, 1]"),
	 "  - {op: Mean, inputs: [a, b, c], outputs: [y]}\n"},
	{"Sin", P("a", "[6]"), "  - {op: Sin, inputs: [a], outputs: [y]}\n"},
	{"Cos", P("a", "[6]"), "  - {op: Cos, inputs: [a], outputs: [y]}\n"},
	{"Tan", U("a", "[6]", "-1.2", "1.2"), "  - {op: Tan, inputs: [a], outputs: [y]}\n"},
	{"Asin", U("a", "[6]", "-0.9", "0.9"), "  - {op: Asin, inputs: [a], outputs: [y]}\n"},
	{"Acos", U("a", "[6]", "-0.9", "0.9"), "  - {op: Acos, inputs: [a], outputs: [y]}\n"},
	{"Atan", P("a", "[6]"), "  - {op: Atan, inputs: [a], outputs: [y]}\n"},
	{"Sinh", P("a", "[6]"), "  - {op: Sinh, inputs: [a], outputs: [y]}\n"},
	{"Cosh", P("a", "[6]"), "  - {op: Cosh, inputs: [a], outputs: [y]}\n"},
	{"Asinh", P("a", "[6]"), "  - {op: Asinh, inputs: [a], outputs: [y]}\n"},
	{"Acosh", U("a", "[6]", "1.2", "3"), "  - {op: Acosh, inputs: [a], outputs: [y]}\n"},
	{"Atanh", U("a", "[6]", "-0.9", "0.9"), "  - {op: Atanh, inputs: [a], outputs: [y]}\n"},
	{"Softsign", P("a", "[3, 4]"), "  - {op: Softsign, inputs: [a], outputs: [y]}\n"},
	{"Shrink soft (bias)", P("a", "[3, 4]"), "  - {op: Shrink, inputs: [a], outputs: [y], attrs: {lambd: 0.3, bias: 0.1}}\n"},
	{"ThresholdedRelu", P("a", "[3, 4]"), "  - {op: ThresholdedRelu, inputs: [a], outputs: [y], attrs: {alpha: 0.2}}\n"},
	{"Mish (opset 18)", P("a", "[3, 4]"), "  - {op: Mish, inputs: [a], outputs: [y]}\n"},
	{"Gelu (opset 20)", P("a", "[3, 4]"), "  - {op: Gelu, inputs: [a], outputs: [y]}\n"},
	{"Gelu tanh (opset 20)", P("a", "[3, 4]"), "  - {op: Gelu, inputs: [a], outputs: [y], attrs: {approximate: \"tanh\"}}\n"},
	{"CastLike", P("a", "[2, 3]") P("b", "[1]"), "  - {op: CastLike, inputs: [a, b], outputs: [y]}\n"},
	{"Floor Ceil Sign pass no gradient", P("a", "[3, 4]"),
	 "  - {op: Floor, inputs: [a], outputs: [f]}\n  - {op: Ceil, inputs: [a], outputs: [c]}\n"
	 "  - {op: Sign, inputs: [a], outputs: [s]}\n  - {op: Mul, inputs: [a, s], outputs: [as]}\n"
	 "  - {op: Add, inputs: [f, c], outputs: [fc]}\n  - {op: Add, inputs: [as, fc], outputs: [y]}\n"},
	{"comparisons, logic, IsInf and BitShift choose the terms", P("a", "[3, 4]") P("b", "[4]"),
	 C64("zero", "0.0")
	 "  - {op: GreaterOrEqual, inputs: [a, b], outputs: [ge]}\n  - {op: LessOrEqual, inputs: [a, zero], outputs: [le]}\n"
	 "  - {op: IsInf, inputs: [a], outputs: [inf]}\n  - {op: And, inputs: [ge, le], outputs: [c1]}\n"
	 "  - {op: Or, inputs: [c1, inf], outputs: [c2]}\n  - {op: Xor, inputs: [c2, le], outputs: [c3]}\n"
	 "  - {op: Where, inputs: [c3, a, b], outputs: [w]}\n"
	 "  - {op: Constant, outputs: [u], attrs: {value: {type: tensor, value: {dtype: uint8, shape: [4], data: [1, 2, 3, 4]}}}}\n"
	 "  - {op: Constant, outputs: [sh], attrs: {value: {type: tensor, value: {dtype: uint8, shape: [4], data: [1, 1, 2, 0]}}}}\n"
	 "  - {op: BitShift, inputs: [u, sh], outputs: [l], attrs: {direction: \"LEFT\"}}\n"
	 "  - {op: BitShift, inputs: [l, sh], outputs: [r], attrs: {direction: \"RIGHT\"}}\n"
	 "  - {op: Cast, inputs: [r], outputs: [rf], attrs: {to: 11}}\n  - {op: Add, inputs: [w, rf], outputs: [y]}\n"},
#undef U
#undef C64
	/* norm */
	{"RMSNormalization last axis (opset 23)", P("x", "[2, 3, 4]") P("s", "[4]"),
	 "  - {op: RMSNormalization, inputs: [x, s], outputs: [y], attrs: {epsilon: 0.01}}\n"},
	{"RMSNormalization axis 1, scale broadcast (opset 23)", P("x", "[2, 3, 4]") P("s", "[3, 1]"),
	 "  - {op: RMSNormalization, inputs: [x, s], outputs: [y], attrs: {axis: 1}}\n"},
	{"GroupNormalization per channel (opset 21)", P("x", "[2, 4, 3]") P("s", "[4]") P("b", "[4]"),
	 "  - {op: GroupNormalization, inputs: [x, s, b], outputs: [y], attrs: {num_groups: 2}}\n"},
	{"GroupNormalization per group (opset 18)", P("x", "[2, 6, 2, 2]") P("s", "[3]") P("b", "[3]"),
	 "  - {op: GroupNormalization, inputs: [x, s, b], outputs: [y], attrs: {num_groups: 3, epsilon: 0.001}}\n"},
	{"MeanVarianceNormalization default axes", P("x", "[2, 3, 2, 2]"),
	 "  - {op: MeanVarianceNormalization, inputs: [x], outputs: [y]}\n"},
	{"MeanVarianceNormalization axis 1", P("x", "[3, 4]"),
	 "  - {op: MeanVarianceNormalization, inputs: [x], outputs: [y], attrs: {axes: [1]}}\n"},
	{"LpNormalization p 2", P("x", "[3, 4]"), "  - {op: LpNormalization, inputs: [x], outputs: [y]}\n"},
	{"LpNormalization p 1 axis 0", P("x", "[3, 4]"),
	 "  - {op: LpNormalization, inputs: [x], outputs: [y], attrs: {p: 1, axis: 0}}\n"},
	{"LRN", P("x", "[2, 5, 2, 2]"),
	 "  - {op: LRN, inputs: [x], outputs: [y], attrs: {size: 3, alpha: 0.5, beta: 0.75, bias: 2.0}}\n"},
	{"LRN even size", P("x", "[2, 4, 3]"), "  - {op: LRN, inputs: [x], outputs: [y], attrs: {size: 2, alpha: 0.3}}\n"},
	{"Attention 4-D (opset 23)", P("q", "[2, 2, 3, 4]") P("k", "[2, 2, 5, 4]") P("v", "[2, 2, 5, 3]"),
	 "  - {op: Attention, inputs: [q, k, v], outputs: [y]}\n"},
	{"Attention 3-D grouped-query, causal, float mask, scale (opset 23)",
	 P("q", "[2, 3, 8]") P("k", "[2, 4, 4]") P("v", "[2, 4, 6]") P("m", "[3, 4]"),
	 "  - {op: Attention, inputs: [q, k, v, m], outputs: [y], attrs: {q_num_heads: 4, kv_num_heads: 2, is_causal: 1, scale: 0.7}}\n"},
	{"Attention softcap, bool mask, grouped-query 4-D (opset 23)",
	 P("q", "[1, 4, 3, 2]") P("k", "[1, 1, 4, 2]") P("v", "[1, 1, 4, 2]")
	 "  - {name: m, dtype: bool, shape: [1, 1, 3, 4], data: [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1]}\n",
	 "  - {op: Attention, inputs: [q, k, v, m], outputs: [y], attrs: {softcap: 1.5}}\n"},
	{"RotaryEmbedding 4-D, position_ids (opset 23)", P("x", "[2, 2, 3, 4]") P("c", "[6, 2]") P("s", "[6, 2]")
	 "  - {name: p, dtype: int64, shape: [2, 3], data: [0, 1, 2, 5, 3, 3]}\n",
	 "  - {op: RotaryEmbedding, inputs: [x, c, s, p], outputs: [y]}\n"},
	{"RotaryEmbedding 3-D, interleaved, partial, 3-D caches (opset 23)", P("x", "[2, 3, 12]") P("c", "[2, 3, 2]") P("s", "[2, 3, 2]"),
	 "  - {op: RotaryEmbedding, inputs: [x, c, s], outputs: [y], attrs: {num_heads: 2, interleaved: 1, rotary_embedding_dim: 4}}\n"},
	/* reduce */
	{"ReduceL1", P("x", "[3, 4]"), "  - {op: ReduceL1, inputs: [x], outputs: [y], attrs: {axes: [1], keepdims: 0}}\n"},
	{"ReduceSumSquare all axes", P("x", "[2, 3]"), "  - {op: ReduceSumSquare, inputs: [x], outputs: [y]}\n"},
	{"ReduceLogSum", POS("x", "[3, 4]"), "  - {op: ReduceLogSum, inputs: [x], outputs: [y], attrs: {axes: [0]}}\n"},
	/* torch.logsumexp */
	{"ReduceLogSumExp last axis", P("x", "[2, 3, 4]"),
	 "  - {op: ReduceLogSumExp, inputs: [x], outputs: [y], attrs: {axes: [-1], keepdims: 0}}\n"},
	{"ReduceLogSumExp two axes, large values",
	 "  - {name: x, dtype: float64, shape: [2, 3, 2], init: {dist: normal, mean: 800, std: 1, seed: %d}}\n",
	 "  - {op: ReduceLogSumExp, inputs: [x], outputs: [y], attrs: {axes: [0, 2]}}\n"},
	/* torch.topk(...).values */
	{"TopK largest along axis 1", P("x", "[3, 5]") "  - {name: k, dtype: int64, shape: [1], data: [2]}\n",
	 "  - {op: TopK, inputs: [x, k], outputs: [y, i], attrs: {axis: 1}}\n"},
	{"TopK smallest along axis 0, values only", P("x", "[4, 3]") "  - {name: k, dtype: int64, shape: [1], data: [3]}\n",
	 "  - {op: TopK, inputs: [x, k], outputs: [y], attrs: {axis: 0, largest: 0}}\n"},
	{"GatherND, a repeated tuple", P("x", "[2, 3, 4]") "  - {name: i, dtype: int64, shape: [3, 2], data: [0, 1, 1, 2, 0, 1]}\n",
	 "  - {op: GatherND, inputs: [x, i], outputs: [y]}\n"},
	{"GatherND batch_dims 1", P("x", "[2, 3, 4]") "  - {name: i, dtype: int64, shape: [2, 2, 1], data: [2, 0, 1, 1]}\n",
	 "  - {op: GatherND, inputs: [x, i], outputs: [y], attrs: {batch_dims: 1}}\n"},
	{"ReverseSequence", P("x", "[4, 3, 2]") "  - {name: l, dtype: int64, shape: [3], data: [4, 1, 3]}\n",
	 "  - {op: ReverseSequence, inputs: [x, l], outputs: [y], attrs: {batch_axis: 1, time_axis: 0}}\n"},
	{"Compress along axis 1", P("x", "[2, 4, 3]") "  - {name: c, dtype: bool, shape: [3], data: [1, 0, 1]}\n",
	 "  - {op: Compress, inputs: [x, c], outputs: [y], attrs: {axis: 1}}\n"},
	{"Compress flattened", P("x", "[2, 3]") "  - {name: c, dtype: bool, shape: [5], data: [0, 1, 1, 0, 1]}\n",
	 "  - {op: Compress, inputs: [x, c], outputs: [y]}\n"},
	{"ArgMin, Size, EyeLike, Unique pass no gradient", P("x", "[3, 4]")
	 "  - {name: c, dtype: int64, shape: [4], data: [3, 1, 3, 2]}\n",
	 "  - {op: ArgMin, inputs: [x], outputs: [am], attrs: {axis: 0, select_last_index: 1}}\n"
	 "  - {op: Cast, inputs: [am], outputs: [amf], attrs: {to: 11}}\n  - {op: EyeLike, inputs: [x], outputs: [e]}\n"
	 "  - {op: Size, inputs: [x], outputs: [sz]}\n  - {op: Cast, inputs: [sz], outputs: [szf], attrs: {to: 11}}\n"
	 "  - {op: Unique, inputs: [c], outputs: [u]}\n  - {op: Size, inputs: [u], outputs: [nu]}\n"
	 "  - {op: Cast, inputs: [nu], outputs: [nuf], attrs: {to: 11}}\n  - {op: Mul, inputs: [x, e], outputs: [xe]}\n"
	 "  - {op: Add, inputs: [xe, amf], outputs: [p]}\n  - {op: Mul, inputs: [szf, nuf], outputs: [k]}\n"
	 "  - {op: Add, inputs: [p, k], outputs: [y]}\n"},
	/* a top-1 mixture of experts' gate: argmax and F.one_hot pass no gradient, the product does */
	{"ArgMax, OneHot, Hardmax pass no gradient", P("x", "[3, 4]")
	 "  - {name: d, dtype: int64, shape: [], data: [4]}\n  - {name: v, dtype: float64, shape: [2], data: [0, 1]}\n",
	 "  - {op: ArgMax, inputs: [x], outputs: [am], attrs: {axis: 1, keepdims: 0}}\n"
	 "  - {op: OneHot, inputs: [am, d, v], outputs: [oh]}\n  - {op: Mul, inputs: [x, oh], outputs: [p]}\n"
	 "  - {op: Hardmax, inputs: [x], outputs: [hm], attrs: {axis: 0}}\n  - {op: Add, inputs: [p, hm], outputs: [y]}\n"},
	/* ReduceProd: a group without zeros, one with one zero, one with two */
	{"ReduceProd with zeros", P("a", "[3, 4]")
	 "  - {name: m, dtype: float64, shape: [3, 4], data: [1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 1]}\n",
	 "  - {op: Mul, inputs: [a, m], outputs: [am]}\n"
	 "  - {op: ReduceProd, inputs: [am], outputs: [y], attrs: {axes: [1], keepdims: 0}}\n"},
	{"ReduceProd all", POS("a", "[2, 3]"), "  - {op: ReduceProd, inputs: [a], outputs: [y]}\n"},
	/* scatters: indices constant, data and updates both trained */
	{"ScatterElements axis 1", P("d", "[3, 4]") P("u", "[3, 2]")
	 "  - {name: ix, dtype: int64, shape: [3, 2], data: [3, 0, 1, 2, 0, 3]}\n",
	 "  - {op: ScatterElements, inputs: [d, ix, u], outputs: [y], attrs: {axis: 1}}\n"},
	{"ScatterElements add, repeated indices", P("d", "[4, 2]") P("u", "[3, 2]")
	 "  - {name: ix, dtype: int64, shape: [3, 2], data: [1, 0, 1, 3, 2, 0]}\n",
	 "  - {op: ScatterElements, inputs: [d, ix, u], outputs: [y], attrs: {reduction: add}}\n"},
	{"ScatterND rows", P("d", "[4, 3]") P("u", "[2, 3]")
	 "  - {name: ix, dtype: int64, shape: [2, 1], data: [3, 1]}\n",
	 "  - {op: ScatterND, inputs: [d, ix, u], outputs: [y]}\n"},
	/* gridsample: F.grid_sample's modes and padding modes, points past [-1, 1] (the normal draws
	 * reach about +-2.5); gradients to X and to the grid, but nearest's (zero) grid is a constant */
	{"GridSample bilinear zeros", P("x", "[1, 2, 3, 4]") P("g", "[1, 3, 4, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y]}\n"},
	{"GridSample bilinear border align_corners", P("x", "[2, 1, 4, 3]") P("g", "[2, 2, 3, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {padding_mode: border, align_corners: 1}}\n"},
	{"GridSample bilinear reflection", P("x", "[1, 2, 3, 4]") P("g", "[1, 3, 4, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {padding_mode: reflection}}\n"},
	{"GridSample bilinear reflection align_corners", P("x", "[1, 1, 3, 4]") P("g", "[1, 4, 3, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {padding_mode: reflection, align_corners: 1}}\n"},
	{"GridSample bicubic zeros", P("x", "[1, 2, 4, 5]") P("g", "[1, 3, 3, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {mode: bicubic}}\n"},
	{"GridSample bicubic reflection align_corners", P("x", "[1, 1, 4, 5]") P("g", "[1, 3, 3, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {mode: bicubic, padding_mode: reflection, align_corners: 1}}\n"},
	{"GridSample bicubic border", P("x", "[1, 1, 4, 5]") P("g", "[1, 3, 3, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {mode: bicubic, padding_mode: border}}\n"},
	{"GridSample nearest (to X)", P("x", "[1, 2, 3, 4]")
	 "  - {name: g, dtype: float64, shape: [1, 2, 3, 2], data: [-0.9, 0.3, 0.2, -1.4, 0.55, 0.8, 1.3, 0.1, -0.35, 0.6, 0.05, -0.7]}\n",
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], attrs: {mode: nearest, padding_mode: border}}\n"},

	/* conv */
	{"Conv 3-D strided, padded, dilated, with bias", P("x", "[1, 2, 4, 4, 3]") P("w", "[3, 2, 2, 3, 2]") P("b", "[3]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {strides: [2, 1, 1], pads: [1, 0, 1, 0, 1, 0], dilations: [1, 1, 2]}}\n"},
	{"Conv 3-D grouped", P("x", "[2, 4, 3, 3, 3]") P("w", "[6, 2, 2, 2, 2]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {group: 2, strides: [2, 1, 2], pads: [1, 1, 1, 0, 0, 1]}}\n"},
	{"ConvTranspose 3-D with output_padding", P("x", "[1, 2, 2, 3, 2]") P("w", "[2, 3, 2, 2, 2]") P("b", "[3]"),
	 "  - {op: ConvTranspose, inputs: [x, w, b], outputs: [y], attrs: {strides: [2, 1, 2], pads: [1, 0, 0, 0, 1, 0], output_padding: [1, 0, 0]}}\n"},
	{"ConvTranspose 3-D grouped", P("x", "[1, 4, 2, 2, 2]") P("w", "[4, 1, 3, 2, 2]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {group: 2, strides: [2, 2, 1]}}\n"},
	{"ConvTranspose output_shape past the taps", P("x", "[1, 1, 3, 3]") P("w", "[1, 2, 3, 3]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {strides: [3, 2], output_shape: [10, 8]}}\n"},
	{"ConvTranspose output_shape inside the taps", P("x", "[1, 2, 3, 3]") P("w", "[2, 1, 3, 3]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2], output_shape: [5, 6]}}\n"},
	{"MaxPool 3-D", P("x", "[1, 2, 4, 5, 3]"),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 3, 2], strides: [2, 1, 1], pads: [0, 1, 1, 0, 1, 0]}}\n"},
	{"AveragePool 3-D", P("x", "[1, 2, 4, 4, 3]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 2, 2], strides: [2, 2, 1], pads: [1, 0, 0, 1, 1, 0]}}\n"},
	{"AveragePool 3-D count_include_pad", P("x", "[1, 2, 3, 4, 3]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 2, 3], pads: [1, 1, 1, 0, 1, 1], count_include_pad: 1}}\n"},
	{"GlobalMaxPool", P("x", "[2, 3, 3, 4]"), "  - {op: GlobalMaxPool, inputs: [x], outputs: [y]}\n"},
	{"MaxUnpool", P("x", "[1, 1, 2, 2]") "  - {name: i, dtype: int64, shape: [1, 1, 2, 2], data: [5, 7, 13, 15]}\n",
	 "  - {op: MaxUnpool, inputs: [x, i], outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\n"},
	{"MaxUnpool to output_shape", P("x", "[1, 1, 2, 2]") "  - {name: i, dtype: int64, shape: [1, 1, 2, 2], data: [0, 6, 9, 15]}\n"
	 "  - {name: s, dtype: int64, shape: [4], data: [1, 1, 5, 5]}\n",
	 "  - {op: MaxUnpool, inputs: [x, i, s], outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\n"},
	{"Upsample nearest (opset 9: scales input)", P("x", "[1, 2, 2, 3]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 2, 3]}\n",
	 "  - {op: Upsample, inputs: [x, sc], outputs: [y]}\n"},
	{"Upsample linear (opset 7: scales attribute)", P("x", "[1, 1, 3, 2]"),
	 "  - {op: Upsample, inputs: [x], outputs: [y], attrs: {mode: linear, scales: [1.0, 1.0, 2.0, 1.5]}}\n"},
	{"Resize tf_crop_and_resize, extrapolated", P("x", "[1, 1, 4, 4]")
	 "  - {name: roi, dtype: float32, shape: [8], data: [0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3]}\n"
	 "  - {name: sz, dtype: int64, shape: [4], data: [1, 1, 3, 5]}\n",
	 "  - {op: Resize, inputs: [x, roi, \"\", sz], outputs: [y], attrs: {mode: linear, coordinate_transformation_mode: tf_crop_and_resize, extrapolation_value: 10.0}}\n"},
	{"Resize cubic exclude_outside, down", P("x", "[1, 1, 4, 4]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 0.8, 0.8]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: cubic, cubic_coeff_a: -0.5, exclude_outside: 1}}\n"},
	{"Resize linear align_corners, scale below 1", P("x", "[1, 1, 3, 5]") "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 0.6, 0.6]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: linear, coordinate_transformation_mode: align_corners}}\n"},
	{"LpPool p 2", P("x", "[1, 2, 4, 5]"),
	 "  - {op: LpPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 3], strides: [2, 1], pads: [0, 1, 1, 0]}}\n"},
	{"LpPool 3-D p 3", P("x", "[1, 1, 3, 3, 2]"), "  - {op: LpPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 2, 2], p: 3}}\n"},
	{"Resize trilinear 3-D (depth too)", P("x", "[1, 2, 2, 3, 2]") "  - {name: sc, dtype: float32, shape: [5], data: [1, 1, 2, 2, 1.5]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: linear, coordinate_transformation_mode: align_corners}}\n"},
	{"Resize opset 18 axes", P("x", "[1, 2, 3, 4]") "  - {name: sc, dtype: float32, shape: [2], data: [2, 0.75]}\n",
	 "  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], attrs: {mode: cubic, axes: [-1, 2]}}\n"},
	{"Pad opset 2 (pads and value attributes)", P("x", "[2, 3]"),
	 "  - {op: Pad, inputs: [x], outputs: [y], attrs: {pads: [0, 1, 1, 2], value: 0.5}}\n"},
	{"Pad opset 2 reflect", P("x", "[2, 4]"),
	 "  - {op: Pad, inputs: [x], outputs: [y], attrs: {mode: reflect, pads: [1, 2, 0, 1]}}\n"},
	/* rnnform */
	/* layout 1 (batch-major X, Y and states): both outputs flattened into y */
	{"RNN layout 1, initial state", P("x", "[2, 3, 2]") P("w", "[1, 3, 2]") P("r", "[1, 3, 3]") P("b", "[1, 6]") P("h0", "[2, 1, 3]"),
	 "  - {op: RNN, inputs: [x, w, r, b, \"\", h0], outputs: [ro, rh], attrs: {hidden_size: 3, layout: 1}}\n"
	 "  - {op: Flatten, inputs: [ro], outputs: [fo], attrs: {axis: 0}}\n  - {op: Flatten, inputs: [rh], outputs: [fh], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fo, fh], outputs: [y], attrs: {axis: 1}}\n"},
	{"GRU layout 1, bidirectional, initial state", P("x", "[2, 3, 2]") P("w", "[2, 9, 2]") P("r", "[2, 9, 3]") P("b", "[2, 18]") P("h0", "[2, 2, 3]"),
	 "  - {op: GRU, inputs: [x, w, r, b, \"\", h0], outputs: [ro, rh], attrs: {hidden_size: 3, layout: 1, direction: bidirectional}}\n"
	 "  - {op: Flatten, inputs: [ro], outputs: [fo], attrs: {axis: 0}}\n  - {op: Flatten, inputs: [rh], outputs: [fh], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fo, fh], outputs: [y], attrs: {axis: 1}}\n"},
	{"LSTM layout 1, reverse, initial states, all outputs", P("x", "[2, 3, 2]") P("w", "[1, 12, 2]") P("r", "[1, 12, 3]") P("b", "[1, 24]")
	 P("h0", "[2, 1, 3]") P("c0", "[2, 1, 3]"),
	 "  - {op: LSTM, inputs: [x, w, r, b, \"\", h0, c0], outputs: [ro, rh, rc], attrs: {hidden_size: 3, layout: 1, direction: reverse}}\n"
	 "  - {op: Flatten, inputs: [ro], outputs: [fo], attrs: {axis: 0}}\n  - {op: Flatten, inputs: [rh], outputs: [fh], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [rc], outputs: [fc], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fo, fh, fc], outputs: [y], attrs: {axis: 1}}\n"},
	/* peepholes P = [Pi, Po, Pf]: i and f read C_{t-1}, o reads C_t */
	{"LSTM peepholes, bidirectional, initial states, all outputs", P("x", "[3, 2, 2]") P("w", "[2, 12, 2]") P("r", "[2, 12, 3]")
	 P("b", "[2, 24]") P("h0", "[2, 2, 3]") P("c0", "[2, 2, 3]") P("p", "[2, 9]"),
	 "  - {op: LSTM, inputs: [x, w, r, b, \"\", h0, c0, p], outputs: [ro, rh, rc], attrs: {hidden_size: 3, direction: bidirectional}}\n"
	 "  - {op: Add, inputs: [ro, rh], outputs: [u]}\n  - {op: Mul, inputs: [u, rc], outputs: [y]}\n"},
	{"LSTM peepholes, layout 1, Y only", P("x", "[2, 3, 2]") P("w", "[1, 8, 2]") P("r", "[1, 8, 2]") P("p", "[1, 6]"),
	 "  - {op: LSTM, inputs: [x, w, r, \"\", \"\", \"\", \"\", p], outputs: [y], attrs: {hidden_size: 2, layout: 1}}\n"},
	/* sequence_lens: rows past their length keep their state (a zero length included) */
	{"LSTM sequence_lens, bidirectional, peepholes, initial states, all outputs", P("x", "[3, 3, 2]") P("w", "[2, 12, 2]")
	 P("r", "[2, 12, 3]") P("b", "[2, 24]") P("h0", "[2, 3, 3]") P("c0", "[2, 3, 3]") P("p", "[2, 9]")
	 "  - {name: sl, dtype: int32, shape: [3], data: [3, 0, 2]}\n",
	 "  - {op: LSTM, inputs: [x, w, r, b, sl, h0, c0, p], outputs: [ro, rh, rc], attrs: {hidden_size: 3, direction: bidirectional}}\n"
	 "  - {op: Flatten, inputs: [ro], outputs: [fo], attrs: {axis: 0}}\n  - {op: Flatten, inputs: [rh], outputs: [fh], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [rc], outputs: [fc], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fo, fh, fc], outputs: [y], attrs: {axis: 1}}\n"},
	{"GRU sequence_lens, layout 1, reverse", P("x", "[3, 3, 2]") P("w", "[1, 9, 2]") P("r", "[1, 9, 3]") P("b", "[1, 18]") P("h0", "[3, 1, 3]")
	 "  - {name: sl, dtype: int32, shape: [3], data: [2, 3, 1]}\n",
	 "  - {op: GRU, inputs: [x, w, r, b, sl, h0], outputs: [ro, rh], attrs: {hidden_size: 3, layout: 1, direction: reverse}}\n"
	 "  - {op: Flatten, inputs: [ro], outputs: [fo], attrs: {axis: 0}}\n  - {op: Flatten, inputs: [rh], outputs: [fh], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fo, fh], outputs: [y], attrs: {axis: 1}}\n"},
	{"RNN sequence_lens, bidirectional", P("x", "[3, 2, 2]") P("w", "[2, 3, 2]") P("r", "[2, 3, 3]")
	 "  - {name: sl, dtype: int32, shape: [2], data: [1, 3]}\n",
	 "  - {op: RNN, inputs: [x, w, r, \"\", sl], outputs: [ro, rh], attrs: {hidden_size: 3, direction: bidirectional}}\n"
	 "  - {op: Mul, inputs: [ro, rh], outputs: [y]}\n"},
	/* Det: its gradient is the cofactor matrix, Dets of the minors */
	{"Det batched 3 x 3", P("x", "[2, 3, 3]"), "  - {op: Det, inputs: [x], outputs: [y]}\n"},
	{"Det 2 x 2, two batch dimensions", P("x", "[2, 1, 2, 2]"), "  - {op: Det, inputs: [x], outputs: [y]}\n"},
	{"Det 1 x 1", P("x", "[3, 1, 1]"), "  - {op: Det, inputs: [x], outputs: [y]}\n"},
	{"Det 4 x 4 (opset 11)", P("x", "[4, 4]"), "  - {op: Det, inputs: [x], outputs: [y]}\n"},
	/* quant: the quantization ops take no gradient (every input nodiff); y is a plus their integer
	 * results, piecewise constant in a, scaled down. The seeds put no rounding step within the
	 * finite difference's h. float32 inside, as onnxruntime types them at opset 17. */
	{"QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger QLinearMatMul ConvInteger QLinearConv pass no gradient",
	 P("a", "[2, 1, 4, 4]"),
	 "  - {op: Cast, inputs: [a], outputs: [af], attrs: {to: 1}}\n"
	 "  - {op: Constant, outputs: [s], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [0.05]}}}}\n"
	 "  - {op: Constant, outputs: [zp], attrs: {value: {type: tensor, value: {dtype: uint8, shape: [], data: [128]}}}}\n"
	 "  - {op: Constant, outputs: [ys], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [0.2]}}}}\n"
	 "  - {op: Constant, outputs: [w], attrs: {value: {type: tensor, value: {dtype: uint8, shape: [1, 1, 2, 2], data: [1, 3, 250, 7]}}}}\n"
	 "  - {op: Constant, outputs: [ws], attrs: {value: {type: tensor, value: {dtype: float32, shape: [1], data: [0.01]}}}}\n"
	 "  - {op: Constant, outputs: [wz], attrs: {value: {type: tensor, value: {dtype: uint8, shape: [1], data: [5]}}}}\n"
	 "  - {op: Constant, outputs: [c], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.001]}}}}\n"
	 "  - {op: QuantizeLinear, inputs: [af, s, zp], outputs: [q]}\n"
	 "  - {op: DequantizeLinear, inputs: [q, s, zp], outputs: [dq]}\n"
	 "  - {op: DynamicQuantizeLinear, inputs: [af], outputs: [d, ds, dz]}\n"
	 "  - {op: MatMulInteger, inputs: [q, d, zp, dz], outputs: [mi]}\n"
	 "  - {op: QLinearMatMul, inputs: [q, s, zp, d, ds, dz, ys, zp], outputs: [qm]}\n"
	 "  - {op: ConvInteger, inputs: [q, w, zp], outputs: [ci]}\n"
	 "  - {op: QLinearConv, inputs: [q, s, zp, w, ws, wz, ys, zp], outputs: [qc]}\n"
	 "  - {op: Cast, inputs: [dq], outputs: [t1], attrs: {to: 11}}\n  - {op: Cast, inputs: [mi], outputs: [t2], attrs: {to: 11}}\n"
	 "  - {op: Cast, inputs: [qm], outputs: [t3], attrs: {to: 11}}\n  - {op: Cast, inputs: [ci], outputs: [t4], attrs: {to: 11}}\n"
	 "  - {op: Cast, inputs: [qc], outputs: [t5], attrs: {to: 11}}\n"
	 "  - {op: ReduceSum, inputs: [t2], outputs: [r2], attrs: {keepdims: 0}}\n  - {op: ReduceSum, inputs: [t3], outputs: [r3], attrs: {keepdims: 0}}\n"
	 "  - {op: ReduceSum, inputs: [t4], outputs: [r4], attrs: {keepdims: 0}}\n  - {op: ReduceSum, inputs: [t5], outputs: [r5], attrs: {keepdims: 0}}\n"
	 "  - {op: Sum, inputs: [r2, r3, r4, r5], outputs: [r]}\n  - {op: Mul, inputs: [r, c], outputs: [rc]}\n"
	 "  - {op: Add, inputs: [t1, rc], outputs: [p]}\n  - {op: Add, inputs: [a, p], outputs: [y]}\n"},
	/* detect */
	/* forward only: constant inputs (onnxruntime's NonMaxSuppression reads float32 only), their
	 * results scaling and shifting x */
	{"NonMaxSuppression, RoiAlign pass no gradient", P("x", "[2, 3]")
	 "  - {name: f, dtype: float32, shape: [1, 1, 3, 3], data: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
	 "  - {name: r, dtype: float32, shape: [2, 4], data: [0, 0, 2, 2, 0.5, 1, 2.5, 2]}\n"
	 "  - {name: ri, dtype: int64, shape: [2], data: [0, 0]}\n"
	 "  - {name: bx, dtype: float32, shape: [1, 3, 4], data: [0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3]}\n"
	 "  - {name: sc, dtype: float32, shape: [1, 1, 3], data: [0.9, 0.8, 0.7]}\n"
	 "  - {name: mx, dtype: int64, shape: [1], data: [3]}\n  - {name: iou, dtype: float32, shape: [1], data: [0.5]}\n",
	 "  - {op: RoiAlign, inputs: [f, r, ri], outputs: [ra], attrs: {output_height: 2, output_width: 2, sampling_ratio: 2, mode: max}}\n"
	 "  - {op: ReduceSum, inputs: [ra], outputs: [rs], attrs: {keepdims: 0}}\n  - {op: Cast, inputs: [rs], outputs: [rsf], attrs: {to: 11}}\n"
	 "  - {op: NonMaxSuppression, inputs: [bx, sc, mx, iou], outputs: [sel]}\n"
	 "  - {op: Cast, inputs: [sel], outputs: [self], attrs: {to: 11}}\n"
	 "  - {op: ReduceSum, inputs: [self], outputs: [ss], attrs: {keepdims: 0}}\n"
	 "  - {op: Mul, inputs: [x, rsf], outputs: [p]}\n  - {op: Add, inputs: [p, ss], outputs: [y]}\n"},
};

/* loss = sum(y*y)/2 + sum(y): dL/dy = y + 1 is different at every element */
static const char loss_nodes[] =
	"  - {op: Mul, inputs: [y, y], outputs: [yy]}\n"
	"  - {op: ReduceSum, inputs: [yy], outputs: [s1], attrs: {keepdims: 0}}\n"
	"  - {op: ReduceSum, inputs: [y], outputs: [s2], attrs: {keepdims: 0}}\n"
	"  - {name: half, op: Constant, outputs: [h], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.5]}}}}\n"
	"  - {op: Mul, inputs: [s1, h], outputs: [s3]}\n"
	"  - {op: Add, inputs: [s3, s2], outputs: [loss]}\n";

const size_t n_op_cases = sizeof op_cases / sizeof *op_cases;

static void replace_all(char *s, const char *from, const char *to)
{
	size_t n = strlen(to), m = strlen(from);
	for (char *p = s; (p = strstr(p, from)); p += n) {
		memmove(p + n, p + m, strlen(p + m) + 1);
		memcpy(p, to, n);
	}
}

/* "float64" in the case's text (and Cast's "to: 11") as another float dtype */
static void retype(char *s, const char *dtype)
{
	char to[32];
	snprintf(to, sizeof to, "to: %d}", dtype_from_name(dtype));
	replace_all(s, "float64", dtype);
	replace_all(s, "to: 11}", to);
}

struct graph *op_case_graph(const struct gcase *c, const char *dtype)
{
	char params[4096], text[8192];
	/* give each random parameter its own seed: at most 8 (a ninth %d would read no argument) */
	int seeds = 0;
	for (const char *p = c->params; (p = strstr(p, "%d")); p += 2)
		seeds++;
	cr_assert_leq(seeds, 8, "%s: %d random parameters, seeds for 8", c->name, seeds);
	snprintf(params, sizeof params, c->params, 11, 12, 13, 14, 15, 16, 17, 18);
	const char *op = strstr(c->name, "(opset ");
	snprintf(text, sizeof text, "graphdiet: 1\nopset: %d\nparams:\n%snodes:\n%s%soutputs: [{name: loss}]\n",
		 op ? atoi(op + 7) : 17, params, c->nodes, loss_nodes);
	retype(text, dtype);
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), c->name, ".", &e);
	cr_assert(g, "%s: %s\n%s", c->name, e.msg, text);
	cr_assert_eq(graph_check(g, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	return g;
}
