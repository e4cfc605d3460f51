/* strategy.h - which forward values a checkpointing strategy keeps for the backward pass.
 *
 *   none       every value (but the recasts below)
 *   speed      the outputs of MatMul, Gemm and Conv; the cheap ops between them are recomputed
 *   memory     about sqrt(N) bottleneck tensors (N forward nodes), spaced evenly by the bytes the
 *              forward pass has produced when each is made
 *   list:A,B   the named values (or, from --checkpoint-file, the names a YAML file lists)
 *   auto       the fewest recompute FLOPs within a budget (auto.h)
 * Inputs, initializers and graph outputs are resident whatever the strategy. Values made from
 * initializers alone are recomputed whatever the strategy (recompute.h, rc_forced), and under
 * `none` a Cast of a resident value or of one a backward node reads. */
#ifndef GD_STRATEGY_H
#define GD_STRATEGY_H

#include "../exec/exec.h"
#include "auto.h"
#include "bottleneck.h"

enum ckpt_kind { CKPT_NONE, CKPT_SPEED, CKPT_MEMORY, CKPT_AUTO, CKPT_LIST };

struct ckpt {
	enum ckpt_kind kind;
	const char *list; /* CKPT_LIST: comma-separated names, */
	char *const *names; /* ... or these (from --checkpoint-file) */
	size_t n_names;
	uint64_t budget;  /* CKPT_AUTO: the peak to stay within */
};

/* Parses "none", "speed", "memory", "auto" or "list:A,B"; -1 if it is none of them. */
int ckpt_parse(const char *s, struct ckpt *c);
const char *ckpt_name(enum ckpt_kind k);

/* The kept set as a flag per value id (xmalloc'd, g->n_values long). Unknown names in a list are
 * input errors. `memory` and `auto` need g's memory model m (with its shapes) and bottlenecks;
 * the others take NULL. `ar` (auto only) receives the auto planner's answer. */
int ckpt_choose(const struct graph *g, struct memmodel *m, const struct bottlenecks *bn, const struct ckpt *c,
		uint8_t **keep, struct auto_result *ar, struct gd_err *e);

#endif
