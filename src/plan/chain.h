/* chain.h - the exact checkpointing plan of a chain of stages, with levels (Revolve, rotor).
 *
 * A chain: the forward pass is cut into stages by boundaries b_1 .. b_L, each the one activation
 * that the rest of the forward pass reads of what came before it (a single-tensor frontier) and
 * that a backward node reads; no other activation is read by a backward node; and the backward
 * pass reads the boundaries in reverse, b_j's readers all before b_(j-1)'s first. A Linear + Tanh
 * MLP is one, as are chains of convolutions, or of any ops whose backward reads only the tensors
 * between them. Such a graph's plans, kept boundaries and backward checkpoints at levels
 * (recompute.h), are the trees of Beaumont et al.'s rotor recursion: the backward pass of the
 * dropped run (i, j] starts at b_j's first reader with b_i held; it sweeps from b_i to some b_m,
 * which it stores, does (m, j] the same ways with b_m held, then (i, m - 1] from b_i again.
 *
 * The costs are graphdiet's own: three traced schedules of the graph (everything kept; every
 * boundary a level-2 checkpoint; every boundary dropped) give, per stage, its forward pass's and
 * its recompute's live bytes (with its input held, or dying in the sweep) and FLOPs, and per
 * backward node the bytes live beside the boundaries that wait for their readers (gradients,
 * parameter gradients piling up). So a plan's modelled peak is a sum of those, and a dynamic
 * program over (i, j) finds, for every budget at once, the Pareto set of (peak, recompute FLOPs)
 * of all such plans. The caller weighs the plans it returns (ckpt_weigh): where the weighed peak
 * and FLOPs are the modelled ones, the plan is the optimum of the space. */
#ifndef GD_CHAIN_H
#define GD_CHAIN_H

#include "memsim.h"

#define CHAIN_MAX 320 /* more boundaries than this: no chain plan (the DP is O(L^3) per way: 256 take 1-4 s) */

struct chain_plan {
	uint8_t *keep;          /* xmalloc'd, g's n_values */
	uint64_t peak, flops;   /* modelled: the peak, and the recompute FLOPs (with the forced ones) */
	uint32_t levels;        /* the deepest level used (1: none) */
};

struct chain_result {
	int chain;              /* the graph is a chain (the rest is set only then) */
	uint32_t n_stages;      /* L */
	uint64_t least_peak;    /* the least modelled peak of any plan of the space */
	int capped;             /* a Pareto set was cut short (CHAIN_SET), or the best plan needs more
				 * levels than keep can say: not every plan was seen */
	int incomplete;         /* an activation inside a stage is smaller than the stage's boundary: a
				 * checkpoint there, outside the space, may do better (not proved) */
	const char *why;        /* !chain: why not (static) */
};

/* The plans of the chain space for `budget`: the one with the fewest FLOPs whose modelled peak fits
 * (if any), then up to max - 2 of the Pareto set's next plans below it in peak (the FLOPs cap
 * leaves few), and the plan with the least peak (the fewest FLOPs there); into plans[0 .. *n)
 * (best first; the caller frees each keep). The proof rests on the model being exact for every
 * plan of the space, which the caller checks on the plans it weighs (and test_auto against every
 * level assignment of small chains). flops: per node
 * (memmodel_flops). -1 on error (out of memory); 0 with r->chain = 0 when the graph is no chain. */
int chain_solve(struct memmodel *m, const uint64_t *flops, uint64_t budget,
		struct chain_plan *plans, uint32_t max, uint32_t *n, struct chain_result *r, struct gd_err *e);

#endif
