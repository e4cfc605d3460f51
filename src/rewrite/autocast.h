/* autocast.h - mixed precision: a forward graph computes in float16 or bfloat16 where it is safe.
 *
 * The policy is PyTorch autocast's, by op (flags in ops.def):
 *   - MatMul, Gemm, Conv and ConvTranspose (OPF_AMP_LOW) compute in 16 bits: their float32 inputs
 *     are cast down;
 *   - precision-sensitive ops (OPF_AMP_FP32: Softmax, LogSoftmax, LayerNormalization, the
 *     reductions, Exp, Log, Pow and the losses) compute in float32: their 16-bit inputs are cast
 *     up, so the loss is float32;
 *   - BatchNormalization's statistics and affine parameters keep float32 beside a 16-bit X
 *     (op_impl.own_width, from opset 15; float32 before);
 *   - every other op computes in its inputs' dtype. One reading both widths computes in 16 bits
 *     when its float32 inputs are fixed (initializers, constants, and values made from them alone)
 *     and fit 16 bits (finite stays finite, nonzero stays normal): they are cast down, as a Linear's
 *     bias is; otherwise it computes in float32;
 *   - in bfloat16, an op ONNX does not type for it at the model's opset (Conv, ConvTranspose and
 *     the pools before opset 22: op_impl.bf16_since) computes in float32.
 * So the activations between products (their outputs, and Relu, Tanh, Add... of them) are 16-bit:
 * that is where the memory goes. Parameters stay float32 master weights: their 16-bit copies are
 * Cast nodes, so autodiff brings their gradients back to float32 through Cast's gradient, and the
 * backward products run in 16 bits too. A value is cast at most once per width. A graph output
 * keeps its dtype (a cast of its 16-bit form takes its name). Op types listed in `keep` are
 * treated as float32 ops. */
#ifndef GD_AUTOCAST_H
#define GD_AUTOCAST_H

#include "../ir/graph.h"

struct autocast_opts {
	int dtype;                /* DT_FLOAT16 or DT_BFLOAT16 */
	const char *const *keep;  /* op types computed in float32 */
	size_t n_keep;
};

/* Rewrites g (checked and sorted; it stays so); *n_low is how many nodes now compute in 16 bits. */
int autocast(struct graph *g, const struct autocast_opts *o, size_t *n_low, struct gd_err *e);
/* "fp16"/"float16" -> DT_FLOAT16, "bf16"/"bfloat16" -> DT_BFLOAT16, "fp32"/"float32" -> DT_FLOAT;
 * -1 otherwise. */
int autocast_parse(const char *s);

#endif
