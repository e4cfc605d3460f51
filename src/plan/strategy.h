/* strategy.h - which forward values a checkpointing strategy keeps for the backward pass.
 *
 *   none       every value (no rewrite)
 *   speed      the outputs of MatMul, Gemm and Conv; the cheap ops between them are recomputed
 *   memory     about sqrt(N) bottleneck tensors (N forward nodes), spaced evenly by the bytes the
 *              forward pass has produced when each is made
 *   list:A,B   the named values
 * Inputs, initializers and graph outputs are resident whatever the strategy. */
#ifndef GD_STRATEGY_H
#define GD_STRATEGY_H

#include "../exec/exec.h"
#include "bottleneck.h"

enum ckpt_kind { CKPT_NONE, CKPT_SPEED, CKPT_MEMORY, CKPT_LIST };

struct ckpt {
	enum ckpt_kind kind;
	const char *list; /* CKPT_LIST: comma-separated names */
};

/* Parses "none", "speed", "memory" or "list:A,B"; -1 if it is none of them. */
int ckpt_parse(const char *s, struct ckpt *c);
const char *ckpt_name(enum ckpt_kind k);

/* The kept set as a flag per value id (xmalloc'd, g->n_values long). Unknown names in a list are
 * input errors. */
int ckpt_choose(const struct graph *g, const struct exec *shapes, const struct bottlenecks *bn, const struct ckpt *c,
		uint8_t **keep, struct gd_err *e);

#endif
