/* anneal.h - plans with backward levels where no exact search reaches: simulated annealing over
 * every candidate's whole plan state (kept, dropped to the innermost level, or a backward
 * checkpoint of level 2 ..), each plan weighed exactly (ckpt_weigh).
 *
 * auto's ladder and local search only move values between kept and dropped, leaving the levels its
 * DP gave them, and the exact searches cover chains (chain.h) and kept sets (exact.h): on a DAG
 * with branches a plan that mixes kept values, checkpoints of several levels and values dropped
 * to the innermost level is found by neither (a 2-layer transformer's lowest peak was 4.5% above
 * such a plan's, a residual MLP's 4.2%, so budgets between them said "no plan fits").
 *
 * The search does not depend on the budget, so that auto's answer, the best plan that fits among
 * those weighed, never needs fewer FLOPs or a higher peak at a smaller budget: it sweeps a target
 * peak from the highest of the seeds down to a lower bound in ANNEAL_TARGETS steps, and keeps
 * every plan it weighs that no other beats in both peak and FLOPs. At each target it starts from
 * the best plan it has for that target (the fewest FLOPs that fit, else the lowest peak) and
 * anneals: a move sets one candidate to a random other state, half the time with the other
 * outputs of the node that makes it (a LayerNorm's mean and inverse deviation are recomputed with
 * its output or not at all), and a third of the time another candidate too. While the plan
 * exceeds the target the peak is lowered (ties to fewer FLOPs), once it fits the FLOPs among plans
 * that fit. A worse plan is taken with probability exp(-worse / T), T falling geometrically from a
 * few percent of the start's figure as plans are weighed. A last, longer run targets the lower
 * bound from the lowest peak found. Annealing proposes the same plan again and again, so plans
 * are weighed once (a table by a Zobrist hash of the candidates' flags): the weighs counted are new
 * plans. ANNEAL_SWEEPS sweeps with their own fixed seeds each keep their own plans, which are
 * merged at the end (two sweeps of half the weighs each missed less than one: a transformer's
 * plans near its lowest peak vary with the seed). The same graph gets the same plans. */
#ifndef GD_ANNEAL_H
#define GD_ANNEAL_H

#include "../util/err.h"
#include "memsim.h"

#include <stddef.h>
#include <stdint.h>

#define ANNEAL_SWEEPS 2
#define ANNEAL_TARGETS 100
#define ANNEAL_LEAST 40 /* the last run, for the lowest peak, weighs as much as this many targets */
#define ANNEAL_LEVELS 6 /* the levels a move sets: 2 .. this (deeper ones cost more moves than they
			 * gain on small DAGs: a 2-layer transformer's plans at 97% of none's peak
			 * needed 2x the FLOPs with levels to 15) */

/* A plan: every value's keep flag (xmalloc'd), its exact peak and recompute FLOPs. */
struct anneal_plan {
	uint64_t peak, flops;
	uint8_t *keep;
};

/* The plans no other plan weighed beats in both peak and FLOPs, into *out (xmalloc'd, with their
 * keep; free with anneal_free), lowest peak first. seeds[0..n_seeds): plans to start from (none
 * beaten by another needed); cand[0..n_cand): the values whose state may change; low: no plan's
 * peak is below it (the sweep's last target); weighs: new plans weighed at most, over all sweeps.
 * The plans returned are weighed again, so their figures are exact. flops: memmodel_flops(). 0, or
 * an error code with e set. */
int anneal_sweep(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
		 const struct anneal_plan *seeds, size_t n_seeds, uint64_t low, uint32_t weighs,
		 struct anneal_plan **out, size_t *n_out, uint32_t *n_weighed, struct gd_err *e);

void anneal_free(struct anneal_plan *p, size_t n);

#endif
