/* agree.h - do the replicas of a data-parallel run hold the same run before the first sum?
 *
 * Under mpirun each rank loads its own files: a stale model on one node, another --bucket-bytes or
 * --precision, other weights. MPI sums whatever buffers the ranks pass, so counts that differ
 * overflow a buffer or truncate a message, and weights that differ sum the gradients of two
 * models. agree_check compares the ranks' fingerprints of the run (exec/agree.c says what they
 * cover) before any AllReduce runs, and names the first difference. */
#ifndef GD_AGREE_H
#define GD_AGREE_H

#include "../util/err.h"

#include <stdint.h>

struct comm;
struct graph;
struct exec_opts;

/* Every replica of comm calls this with its graph g (checked and sorted), the options of its run o
 * (o->comm is c) and its number of steps. 0 on every replica when all agree. Otherwise nonzero
 * with e set, and:
 *   *together   1 when every replica returns nonzero with it (all end cleanly, no abort needed);
 *               0 for a failure of this replica alone (an MPI error, out of memory), while others
 *               may wait in a collective: end them all (comm_mpi_abort);
 *   *speak      1 when this replica prints e: only one does for a difference (replica 0, whose
 *               message names each rank), or for a failure that all know of (the lowest that
 *               failed, as its own error).
 * c->together is set as *together is. */
int agree_check(struct comm *c, struct graph *g, const struct exec_opts *o, uint64_t steps, int *together,
		int *speak, struct gd_err *e);
/* When all agree, the AllReduces whose element count depends on the data (no shapes-only run
 * could infer it) are marked in c->check, to compare their counts at each sum (ops/comm.c); this
 * frees that. */
void agree_release(struct comm *c);

#endif
