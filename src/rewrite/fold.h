/* fold.h - binding symbolic dimensions and folding constants. */
#ifndef GD_FOLD_H
#define GD_FOLD_H

#include "../exec/exec.h"
#include "../ir/graph.h"

/* Replaces each bound symbolic dimension of the graph's inputs, outputs and value_info by its value.
 * When strict, fails naming a binding no dimension uses. Names are distinct (cli_add_dim sees to it). */
int graph_bind_dims(struct graph *g, const struct exec_binding *b, size_t n, int strict, struct gd_err *e);

/* --batch N: gives axis 0 of every graph input that is not an initializer (the data, the labels)
 * the size n, whatever it was: a static-batch export trains at another batch, where the graph
 * computes with its batch rather than storing it (Flatten, Gemm, Conv do; a Reshape to a constant
 * shape does not, and shape inference then names it). 0, or an error when no input has an axis 0. */
int graph_rebatch(struct graph *g, int64_t n, struct gd_err *e);

/* Replaces every node whose outputs shape inference computed (all its inputs known: Shape chains
 * once dimensions are bound, arithmetic on constants) by Constant nodes holding the results, and
 * drops the nodes nothing reads any more. Graph outputs are kept. A graph whose inputs still have
 * symbolic dimensions keeps its shape computations. In both, exporters' no-ops go (a Cast to the
 * same dtype, a Reshape to the same shape, Mul by 1: op_impl.noop), their readers reading their
 * input; a graph output one makes keeps its name, on that input. Returns the number of nodes
 * removed in *removed. */
int graph_fold_constants(struct graph *g, size_t *removed, struct gd_err *e);

/* Drops nodes[] where nothing reads their outputs, waits on them or needs them (graph outputs,
 * random nodes), and then the nodes only dropped ones read (nodes nothing read before stay). g is
 * sorted. */
int graph_drop_unread(struct graph *g, struct node *const *nodes, uint32_t n, struct gd_err *e);

/* Makes node n a Constant holding t's data (n keeps its name and outputs). */
int node_make_constant(struct graph *g, const struct rtensor *t, struct node *n, struct gd_err *e);

/* A new node `op` named after `name`, reading ins, with one output named after `out` (fresh
 * names); appended to g's nodes. */
struct node *graph_add_op(struct graph *g, const char *name, const char *op, struct value *const *ins, uint32_t n_in,
			  const char *out, struct gd_err *e);

/* A Constant node named after `name` (appended) holding v as a scalar of dtype; NULL with the
 * error set on failure. */
struct node *graph_add_scalar(struct graph *g, const char *name, int dtype, double v, struct gd_err *e);

/* Gives n (made by graph_add_op, without attributes) one integer attribute; -1 out of memory. */
int node_add_int(struct graph *g, struct node *n, const char *name, int64_t v);

#endif
