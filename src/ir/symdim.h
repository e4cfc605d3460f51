/* symdim.h - a dimension as an expression over the model's symbols, and the assumptions on them.
 *
 * A dim that derives from a symbolic one is, in the forms exporters' shape arithmetic makes, a sum
 * of terms k*sym or k*sym*sym2 plus a constant: `seq`, `seq + 1`, `2*batch`, `batch*seq`. That is
 * what this module prints and parses (symdim_str, symdim_parse) and evaluates once the symbols are
 * bound (symdim_eval).
 *
 * Where shape inference meets an unbound symbol it runs on distinct stand-in values (exec.c), and
 * the executor turns every stand-in-derived number back into its expression before anything shows
 * it (exec_dim_expr): errors name symbols, never stand-ins. This is the first step of DESIGN.md's
 * symbolic dims; what it does not do is carry expressions through ops as data, so a dim that is no
 * sum of such terms (min(seq, 1024)) cannot be named, and two symbols whose sum is taken are told
 * apart only by their coefficients (a stand-in is a prime above 10000, far from the others' sums).
 *
 * Assumptions. A Slice whose end derives from a symbol, on an axis of fixed size N (a registered
 * causal-mask buffer sliced [:T], RoPE's tables, position_ids[:, :seq]) would be clamped to N by
 * ONNX's rule; shape inference instead gives it the symbolic length and records the assumption
 * `expr <= N`, with the node and the buffer. The assumptions travel in the model's metadata_props
 * under SYMDIM_META_KEY, one a line: `seq <= 64; node /attn/Slice; buffer attn.bias`, so that a
 * training graph written from the model keeps them, and they are checked whenever the symbols are
 * bound (--dim, or the shapes of given inputs): a binding that breaks one is an input error naming
 * the node and the buffer. */
#ifndef GD_SYMDIM_H
#define GD_SYMDIM_H

#include "graph.h"

#include <stddef.h>
#include <stdint.h>

#define SYMDIM_TERMS 4
#define SYMDIM_META_KEY "graphdiet.assume"

struct symdim_term {
	int64_t k;
	const char *a, *b; /* k*a, or k*a*b when b is set */
};

struct symdim {
	int64_t c;
	int n;
	struct symdim_term t[SYMDIM_TERMS];
};

/* "seq", "seq + 1", "2*batch", "batch*seq - 3", "7" into buf (truncated to fit); returns buf. */
const char *symdim_str(const struct symdim *d, char *buf, size_t n);

/* Parses what symdim_str writes; symbol names (any run of characters other than space, '+', '-',
 * '*', '<', '=' and ';', not starting with a digit) point into a copy made in arena a. 0, or -1 when
 * the text is no such expression (or out of memory). */
int symdim_parse(struct arena *a, const char *s, size_t len, struct symdim *d);

/* The value of d with symbol i bound to values[i] (names[i]); 0, or -1 with *unbound set to a
 * symbol that has no value (or to NULL on overflow). */
int symdim_eval(const struct symdim *d, const char *const *names, const int64_t *values, size_t n, int64_t *out,
		const char **unbound);

/* The record of the assumption "expr <= limit" that node `node` makes on buffer `buffer`, in a. */
const char *symdim_line(struct arena *a, const char *expr, int64_t limit, const char *node, const char *buffer);
/* Calls fn on each record of g's metadata (not NUL-terminated: len bytes) until it returns nonzero. */
int symdim_each_line(const struct graph *g, int (*fn)(void *arg, const char *line, size_t len), void *arg);
/* Appends records (none of them there yet) to the metadata of g's model (its root graph's), in one
 * copy. -1 when out of memory. */
int symdim_record(struct graph *g, const char *const *lines, size_t n);

/* Checks g's recorded assumptions against the bindings (names[i] = values[i]); an assumption whose
 * symbols are not all bound is left for a later check. 0, or GD_EINPUT with e set:
 * "node '/attn/Slice': seq = 2048 breaks the assumption seq <= 64 (the length of the slice of buffer
 * 'attn.bias', 64 long)". A malformed record is an input error too. */
int symdim_check(const struct graph *g, const char *const *names, const int64_t *values, size_t n, struct gd_err *e);

#endif
