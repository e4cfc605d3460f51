/* conv.h - the window geometry of Conv, ConvTranspose and pooling, which sizes their outputs: one
 * rule that the CPU kernels (conv.c) and the CUDA backend both follow. A 1-D window (input (N, C, L))
 * is the 2-D one over (N, C, 1, L), the same memory: H = 1, its attributes' one entry W's. */
#ifndef GD_CONV_H
#define GD_CONV_H

#include "../exec/exec.h"
#include "../ir/graph.h"

struct conv_geom {
	int64_t n, c, h, w;     /* input */
	int64_t m, oh, ow;      /* output channels and size */
	int64_t kh, kw, sh, sw, dh, dw;
	int64_t pt, pl, pb, pr; /* pads: top, left, bottom, right */
	int64_t group;
	int one_d;              /* the node is 1-D: its tensors have rank 3 */
};

enum conv_kind { CONV_FORWARD, CONV_TRANSPOSE, CONV_POOL };

/* Node n's geometry over its inputs (X, and W for the convolutions), checked: fails the node when
 * the attributes or shapes are not ones graphdiet runs. */
int conv_geometry(struct exec *x, const struct node *n, struct rtensor *const *in, enum conv_kind kind,
		  struct conv_geom *g);

/* A pooling node's explicit pads (auto_pad NOTSET or absent) against its kernel_shape (r axes):
 * each pad smaller than the kernel along its axis, as onnxruntime requires (a window wholly in the
 * padding has no element: MaxPool's -inf, AveragePool's 0/0); fails the node otherwise. */
int pool_pads_check(struct exec *x, const struct node *n, const int64_t *k, size_t r);

/* The taps [*lo, *hi) of a window row or column (k taps, step apart, the first at `at`) that land
 * in [0, size): the part of the kernel inside the image, empty with *lo == *hi. */
static inline void conv_inside(int64_t at, int64_t step, int64_t size, int64_t k, int64_t *lo, int64_t *hi)
{
	int64_t e = size - at <= 0 ? 0 : (size - at + step - 1) / step, b = at >= 0 ? 0 : (-at + step - 1) / step;
	*hi = e < k ? e : k;
	*lo = b < *hi ? b : *hi;
}

/* y (n, m, oh, ow) = Conv(a, w) over g, float32, by the direct kernel (conv_direct.c): w (m, c,
 * kh, kw), or with CONV_FLIP a ConvTranspose's (c, m, kh, kw) read flipped (its stride-1
 * equivalent), or with CONV_W_SWAPPED (c, m, kh, kw) as it is (a folded Transpose's view of it
 * exchanged); a (n, c, h, w), or with CONV_A_SWAPPED (c, n, h, w). With swapped, y is written
 * (m, n, oh, ow) and *swapped set. 1: not run here (no AVX-512, groups, or fewer than 16 output
 * channels); 0: done; -1: out of memory, the node failed. */
#define CONV_FLIP 1
#define CONV_A_SWAPPED 2
#define CONV_W_SWAPPED 4
int conv_direct(struct exec *x, const float *a, const float *w, int how, const struct conv_geom *g, float *y,
		int *swapped);

/* y = Conv(a, w) over g (or with transpose a ConvTranspose, g in its terms), float32 or float64,
 * by conv_group.c's direct kernels for a grouped window with few channels a group (depthwise), or
 * a grouped Conv whose kernel is larger than its output (grouped weight gradients); a and w may be
 * views that exchange their first two axes. Every element of y is written, without bias.
 * 1: not run here (one group, many channels a group, or float32 without AVX-512); 0: done; -1: out
 * of memory, the node failed. */
int conv_group(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g, int transpose,
	       void *y);

/* y = Conv(a, w) over g as a weight gradient's Conv (conv_wgrad.c): a (n, c, h, w) or a view of it
 * with its first two axes exchanged, w row-major or such a view, float64, one group, no
 * bias; the output swapped (y (m, n, oh, ow), *swapped set) when swapped is given. 1: not run here
 * (conv_wgrad_fits: not a weight gradient's shape); 0: done; -1: out of memory, the node failed. */
int conv_wgrad_fits(const struct conv_geom *g);
int conv_wgrad(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g,
	       uint8_t *y, int *swapped);

/* The windows of any rank (conv_nd.c), for what the 1-D and 2-D kernels here do not take: 3-D
 * volumes and up, integer MaxPool, storage_order. Conv (CONV_FORWARD) or ConvTranspose; MaxPool
 * (max) or AveragePool; the gradient of a Conv, ConvTranspose or AveragePool node. */
struct ad;
int conv_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		enum conv_kind kind);
/* The n outputs t of a pool whose windows start at p + t sw (float64 when f64; kr rows dr apart,
 * kw taps dw apart, all inside the input) into y: each window's terms (x; |x|; float32's x * x in
 * double) summed in double from +0 in the window's row-major order, each output in its own lane,
 * then the mean (over cnt, POOL_RUN_MEAN), the sum (POOL_RUN_L1) or its square root (POOL_RUN_L2,
 * float32 only), rounded to the dtype; POOL_RUN_MEAN for `rows` rows of such outputs, their windows
 * rs elements apart and their outputs ys apart (the others take one). Where the processor and the
 * stride allow it (AVX-512, strides 1 and 2): 1 when an output needs its caller (a NaN mean, whose
 * payload the walk picks; a root lp_root_f32 takes from pow), else 0; elsewhere -1, nothing
 * written. */
enum { POOL_RUN_MEAN, POOL_RUN_L1, POOL_RUN_L2 };
int pool_sum_run(void *y, const void *p, int f64, int kind, double cnt, int64_t sw, int64_t n, int64_t kr, int64_t dr,
		 int64_t kw, int64_t dw, int64_t rows, int64_t rs, int64_t ys);
int pool_nd_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out, int max);
int conv_nd_grad(struct ad *a, const struct node *n);

/* C (m, n) = op(A) (m, k) B (k, n), float32 or float64 (dt); A stored (m, k), or (k, m) when ta. */
void conv_gemm(int dt, int ta, int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c);
/* A pooling node's cost: an operation per window element (pool.c). */
void pool_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
	       uint64_t *bytes);

/* Shared by conv.c's and pool.c's kernels and gradient rules. The output's shape (n, ch, oh, ow),
 * or (n, ch, ow) for a 1-D node; its rank. */
int conv_out_dims(const struct conv_geom *g, int64_t ch, int64_t *dims);
/* The window geometry of a forward node, resolved to explicit pads from its inferred shapes
 * (transpose: a ConvTranspose's); -1 with the rule failed. */
int conv_geom_of(struct ad *a, const struct node *n, int transpose, struct conv_geom *g);
/* Node c's pads (g's), strides, dilations and group attributes. */
int conv_set_window(struct ad *a, struct node *c, const struct conv_geom *g, int64_t sh, int64_t sw, int64_t dh,
		    int64_t dw, int64_t group);
/* A 1-D node's rules run the 2-D ones over (N, C, 1, L): conv_lift adds the axis of 1, conv_drop
 * takes it away again (both no-ops for a 2-D node). */
struct value;
struct value *conv_lift(struct ad *a, struct value *v, const struct conv_geom *g);
struct value *conv_drop(struct ad *a, struct value *v, const struct conv_geom *g);

#endif
