/* backend.h - where the executor's kernels run: one table of functions per backend (as ggml's
 * ggml_backend_i), the CPU's and, when built with -DGRAPHDIET_CUDA=ON, the CUDA one's.
 *
 * The executor (exec.c) keeps the memory model and the node order; a backend owns its memory and
 * runs the nodes it supports. Every value lives where the backend's memory is: on a device backend
 * each tensor is in device memory from the node that makes it to its last use, so the device's
 * allocations follow the memory model's live bytes exactly and its measured peak is the planned
 * one. A node the device backend lacks runs on the CPU instead: its inputs are copied to the host
 * and its outputs back (counted and logged), which is slower but never wrong. Output shapes always
 * come from the CPU kernels' shape rules (one rule per op), run without computing. */
#ifndef GD_BACKEND_H
#define GD_BACKEND_H

#include <stddef.h>

struct exec;
struct node;
struct rtensor;
struct gd_err;

enum backend_copy {
	BACKEND_TO_DEVICE,   /* host -> backend memory */
	BACKEND_TO_HOST,     /* backend memory -> host */
	BACKEND_ON_DEVICE,   /* within backend memory */
};

struct backend {
	const char *name;
	int host; /* its memory is host memory: no copies, and tensors' data is the kernels' */
	/* Readies the backend (finds the device); fails with a message when it cannot run here. */
	int (*open)(struct gd_err *e);
	/* Whether run_node computes n for these inputs (their dtypes and shapes are known). */
	int (*supports_op)(const struct node *n, struct rtensor *const *in);
	void *(*alloc)(size_t bytes);  /* NULL when out of memory */
	void (*free)(void *p);
	int (*copy)(void *dst, const void *src, size_t bytes, enum backend_copy kind);
	/* Computes n. On a device backend, in[k]->data and out[k]->data are in its memory, and out[k]'s
	 * shape and memory are set (from the CPU's shape rule) before the call; the CPU's kernels
	 * derive and allocate their outputs themselves (exec_alloc). */
	int (*run_node)(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
	int (*sync)(struct gd_err *e); /* waits for queued work; nonzero (with the message) when it failed */
};

extern const struct backend backend_cpu;
#ifdef GD_HAVE_CUDA
extern const struct backend backend_cuda;
/* For graphdiet --version: the CUDA runtime's version and device 0, or why there is none (no
 * cuBLAS loaded, no device memory taken), into buf[n]. */
void cuda_describe(char *buf, size_t n);
#endif

/* The backend called name ("cpu", "cuda"), opened; NULL with the message in e when graphdiet was
 * built without it or it cannot run on this machine. */
const struct backend *backend_find(const char *name, struct gd_err *e);

#endif
