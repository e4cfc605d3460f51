/* auto.h - `--checkpoint auto --budget B`: the kept set with the fewest recompute FLOPs whose peak
 * is at most B.
 *
 * A chain (chain.h) is solved exactly first: when the DP's best plan weighs what it modelled, it
 * is the answer, proved optimal over the chain's plans with levels, and nothing below runs. Small
 * graphs get, after what follows, exact.h's best-first search over kept sets for a plan with fewer
 * FLOPs than the answer (proved optimal over kept sets when it finishes). Otherwise:
 *
 * The forward schedule is cut into groups at candidate positions t (after the t-th forward node).
 * A cut at t keeps its frontier: every activation made at or before t that a forward node after t
 * reads. For a chain that is the one tensor between two layers; where no single tensor separates
 * the graph (a U-Net's skip connections, an unrolled RNN's state, a residual stream) it is the
 * several tensors that together do, so multi-tensor cuts come for free. Each group between two
 * cuts is either stored (every activation it makes is kept) or recomputed (only the cut frontier
 * is kept; the rest is recomputed in the backward pass when backprop reaches the group, at the
 * FLOPs of the nodes that made it). A recomputed run of groups is rebuilt all at once, or with
 * checkpoints of the backward pass (levels, recompute.h): up to an inner cut whose frontier is
 * kept while the groups after it are done the same ways, then the groups before it again; each
 * run's Pareto set of (bytes, FLOPs) over such nestings is found first (struct nests).
 *
 * A dynamic program over the cuts, in the style of Beaumont et al.'s heterogeneous chains, finds
 * for an activation budget A the plan with the fewest recompute FLOPs whose modelled peak, the
 * kept bytes up to and including a group plus the bytes it recomputes, stays within A at every
 * group. Each state holds the Pareto set of (kept bytes, FLOPs) pairs, so the DP is exact over
 * this model when the sets are not thinned (graphs of up to AUTO_EXACT_NODES forward nodes).
 *
 * The model leaves out the backward pass's own buffers, so the DP is run for a fixed ladder of
 * activation budgets, and every distinct plan (with the speed and memory strategies' plans) is
 * then weighed exactly (memsim_schedule: the
 * schedule the rewrite would make, to the byte). The answer is the plan with the fewest FLOPs
 * whose exact peak fits B, ties going to the lower peak. The ladder does not depend on B, so as B
 * falls the answer's peak never rises. When no plan fits, the answer is the one with the lowest
 * peak, marked infeasible, with a lower bound on the peak of any plan. */
#ifndef GD_AUTO_H
#define GD_AUTO_H

#include "../exec/exec.h"
#include "../ir/graph.h"
#include "memsim.h"

#define AUTO_EXACT_NODES 128
#define AUTO_CHAIN 1 /* struct auto_result's proved: over plans on the chain's boundaries (chain.h) */
#define AUTO_KEPT 2  /* ... over kept sets, without levels (exact.h) */
#define AUTO_ALL 3   /* ... over every plan: it recomputes no more than keeping everything does */
#define AUTO_LARGE_STEPS 50000 /* training graphs larger weigh only a search's plans */

struct auto_result {
	uint64_t peak, flops; /* exact, for the answer */
	int fits;
	uint64_t lower_bound; /* no plan's peak can be lower */
	uint32_t n_plans;     /* distinct plans weighed exactly */
	uint32_t n_cuts;      /* candidate cut positions */
	int searched;         /* local search ran (graphs of up to AUTO_LARGE_STEPS steps) */
	uint32_t chain;       /* the graph is a chain of this many stages (chain.h); 0: none */
	const char *no_chain; /* why not a chain, or why its DP proved nothing (static; may be NULL) */
	int proved;           /* AUTO_CHAIN: the answer is the optimum of the chain space (its weighed
			       * peak and FLOPs are the exact DP's), or with !fits: no plan of it fits;
			       * AUTO_KEPT: the optimum over kept sets (no levels) of kept_cands values;
			       * AUTO_ALL: it recomputes no more than keeping everything does */
	uint32_t kept_cands;  /* values the search over kept sets had (0: not run) */
	int no_kept_set;      /* that search proved that no kept set fits */
	uint64_t chain_least; /* with chain: the least peak of any plan of the space */
	uint32_t levels;      /* the answer's deepest backward level (1: none) */
	uint32_t annealed;    /* plans the annealing sweep weighed (anneal.h; 0: it did not run) */
};

/* Fills keep (g->n_values flags, zeroed) for a sorted training graph g with memory model m. The kept sets
 * `seeds` (other strategies' answers; may be none) are weighed with the DP's plans; local search
 * starts from the DP's plans and the first AUTO_SEARCH_SEEDS seeds, the rest are candidates only. */
#define AUTO_SEARCH_SEEDS 2
int ckpt_auto(const struct graph *g, struct memmodel *m, uint64_t budget, const uint8_t *const *seeds,
	      size_t n_seeds, uint8_t *keep, struct auto_result *r, struct gd_err *e);

/* The exact peak and recompute FLOPs of kept set `keep` on the schedule the rewrite would make
 * (recompute_schedule, memsim_schedule); flops[i] are node i's. `area` (may be NULL): the live
 * bytes summed over the steps, in 256-byte units. */
int ckpt_weigh(struct memmodel *m, const uint8_t *keep, const uint64_t *flops, uint64_t *peak, uint64_t *rflops,
	       uint64_t *area, struct gd_err *e);

#endif
