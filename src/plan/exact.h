/* exact.h - small DAGs planned exactly: the kept set with the fewest recompute FLOPs whose peak fits
 * a budget, found by a best-first branch and bound over the sets of values dropped.
 *
 * A search node is a drop set D of the candidates; its plan drops D (RC_DROP, the innermost level:
 * no checkpoints of the backward pass) and keeps the other candidates (RC_KEPT), every other value
 * as on entry. A node's children add one candidate past the last one in D, so each set is reached
 * once. Without levels a dropped value is recomputed once, with the dropped values on the way to
 * it from what is kept (recompute.h), so dropping more never unclones a node: FLOPs never fall
 * from a node to its children (test_exact checks it on every pair). Nodes are taken in ascending
 * order of a lower bound on the FLOPs of any plan in their subtree whose peak fits, so the first
 * time that bound reaches the FLOPs of the best plan found that fits, that plan has the fewest FLOPs
 * of all. A node is weighed (ckpt_weigh, exactly) when it is first taken, and expanded when taken
 * again with its own bound: children the bound rules out are never weighed.
 *
 * The bounds. A subtree keeps, in every plan, the candidates before its last one that it does not
 * drop. What is live at each step of g's order in every such plan (resident values, the backward
 * pass's own, each forward value to its last forward reader, a value a backward node reads from its
 * first backward reader to its last, the original or its copy, the step's outputs) plus those kept
 * candidates over their gaps (their last forward reader to their first backward one) bounds the
 * peak from below. Where that bound, with the later candidates kept too, exceeds the budget, some
 * of them must be dropped, and dropping one that a backward node reads clones its producer: the
 * cheapest cover of the excess (a fractional knapsack, bytes against FLOPs), added to the node's
 * FLOPs, bounds the subtree's FLOPs. A dropped value's clone reads its producer's inputs, and an
 * input only that producer reads (a MatMul's output under its bias Add) is then held over the
 * dropped value's gap if kept, or costs its own producer's FLOPs if dropped too: so a candidate's
 * FLOPs per byte freed are the least over those ways, and a dropped one's held inputs count in
 * the load (those the subtree may still drop as items of the cover). A subtree whose peak bound
 * exceeds the budget with all its later candidates dropped is left out, with its later siblings
 * (which keep more); at the root that proves that no kept set fits, without weighing anything.
 *
 * Candidates go in reverse topological order (the last made first), so that a candidate no
 * recompute can reach, given the candidates before it, stays unreachable in the whole subtree:
 * a value that no backward node reads, none of whose forward readers makes a dropped value, is
 * never recomputed or read by a recompute, and its plan's schedule is its parent's; such a child
 * and its subtree (every set in it is one of the parent's subtree with that value added) are not
 * weighed. Values whose keep flag nothing reads (fixed values, graph outputs) are left out too.
 *
 * An entry plan with levels (backward checkpoints) on other values: a copy may be freed and made
 * again, and FLOPs are not known to be monotone, so the search is then exhaustive (nothing pruned
 * by FLOPs; the peak bound counts a dropped value's copy only at its last backward reader). */
#ifndef GD_EXACT_H
#define GD_EXACT_H

#include "../util/err.h"
#include "memsim.h"

#include <stdint.h>

#define EXACT_CAND 64      /* more candidates than this: not tried (returns with done = 0) */
#define EXACT_WEIGHS 20000 /* plans weighed at most (max_weighs 0) */
#define EXACT_QUEUE 500000 /* search nodes waiting at most (48 bytes each): more stops the search (done = 0) */

struct exact_result {
	int found; /* a plan with peak <= budget was found: keep holds it */
	int done;  /* the search finished: found => the answer has the fewest recompute FLOPs of every
		    * kept set of the candidates (the others kept as in `keep` on entry) whose peak fits;
		    * !found => no such kept set fits */
	uint64_t peak, flops; /* the answer's, exact (ckpt_weigh) */
	uint32_t n_weighed;
	uint32_t n_cand;      /* candidates searched: those whose keep flag matters (see above) */
	uint32_t n_bounded;   /* subtrees left out by the peak bound (see above) */
	uint32_t n_falls;     /* children with fewer FLOPs than their parent: 0, or the FLOPs order
			       * proves nothing and done stays 0 unless every set was weighed */
	int exhaustive;       /* nothing was pruned by FLOPs: the entry plan has backward checkpoints
			       * (see above) */
};

/* keep: on entry the plan for every value (usually all kept: 1 for every value); cand[0..n_cand):
 * the values the search may drop. On return with found, keep is the answer; else as on entry.
 * flops: memmodel_flops(). max_weighs 0: EXACT_WEIGHS. */
int exact_kept_sets(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
		    uint64_t budget, uint32_t max_weighs, uint8_t *keep, struct exact_result *r, struct gd_err *e);

/* The same, given that a plan with `known` FLOPs fits (auto's answer): only plans with fewer are
 * sought, so far fewer are weighed. found: one with at most `known` FLOPs (its peak fits); done and
 * !found: no kept set of the candidates with fewer FLOPs than `known` fits, so the known plan is
 * optimal over them. UINT64_MAX: exact_kept_sets. */
int exact_kept_sets_below(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
			  uint64_t budget, uint64_t known, uint32_t max_weighs, uint8_t *keep, struct exact_result *r,
			  struct gd_err *e);

#endif
