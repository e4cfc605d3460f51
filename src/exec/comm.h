/* comm.h - how the replicas of a data-parallel training graph talk: the transport of the
 * collectives AllReduce, AllGather and ReduceScatter (ops/comm.c).
 *
 * One interface, three transports:
 *   none     no comm (exec_opts.comm NULL): one replica, and AllReduce is the identity;
 *   group    N replicas as N threads of one process (graphdiet verify --replicas N): each sum
 *            adds the replicas' buffers in rank order, so every replica gets the same bits, and
 *            a reduce-scatter's slice holds the bits the all-reduce's would;
 *   MPI      one replica per rank under mpirun (comm_mpi_*): MPI_Allreduce(MPI_SUM) over
 *            MPI_COMM_WORLD (MPI_Allgather, MPI_Reduce_scatter_block). Built when CMake finds MPI (GD_HAVE_MPI). Errors return (the
 *            communicator's handler is MPI_ERRORS_RETURN) and each becomes a message "MPI_X failed
 *            on rank R: <MPI_Error_string>": no MPI error ends a run without graphdiet's line.
 * The executor counts the AllReduce nodes, their bytes and their time (exec_stats). */
#ifndef GD_COMM_H
#define GD_COMM_H

#include "../util/err.h"

#include <stddef.h>
#include <stdint.h>

struct comm {
	int rank, size;
	const char *kind; /* "threads" or "MPI" */
	/* Sums count elements of dtype (float32 or float64) at buf across the replicas, in place. */
	int (*allreduce_sum)(struct comm *c, void *buf, size_t count, int dtype, struct gd_err *e);
	/* Gives every replica every replica's `bytes` bytes at mine: replica r's at all + r * bytes
	 * (size * bytes in all). Each replica passes the same `bytes`. */
	int (*allgather)(struct comm *c, const void *mine, size_t bytes, void *all, struct gd_err *e);
	/* Sums size x count elements of dtype (float32 or float64) at in across the replicas, and gives
	 * replica r elements [r count, r count + count) of the sum at out (count elements). */
	int (*reduce_scatter_sum)(struct comm *c, const void *in, void *out, size_t count, int dtype, struct gd_err *e);
	void *impl;
	/* By node index of the graph run (exec/agree.c sets it, n_check entries; NULL: none): 1 for an
	 * AllReduce whose element count was not known before the run, which then compares it across
	 * the replicas before each sum (ops/comm.c). */
	uint8_t *check;
	uint32_t n_check;
	/* Set when a check failed on every replica at once: none waits for another, so the run ends
	 * without an abort, and replica 0 alone reports it. */
	int together;
};

/* A sharded tensor (rewrite/shard.h) of numel elements over n replicas: each holds a slice of
 * ceil(numel / n) elements, the last zero-padded. */
static inline int64_t shard_len(int64_t numel, int64_t n)
{
	return (numel + n - 1) / n;
}

/* ---- N replicas in one process ---- */
struct comm_group;
struct comm_group *comm_group_new(int n);
struct comm *comm_group_member(struct comm_group *g, int rank);
/* A replica failed: the others' all-reduces fail instead of waiting for it. */
void comm_group_abort(struct comm_group *g);
void comm_group_free(struct comm_group *g);

/* Runs replica r of a graph as g[r] (each its own copy: a graph belongs to one thread, as its
 * initializers load lazily into its arena) with options o plus a group member as comm and
 * shard_inputs, all at once in threads; x[r] and st[r] (may be NULL) get each one's executor and
 * stats. 0, or the status of the first replica that failed, with its error in *e. */
struct graph;
struct exec;
struct exec_opts;
struct exec_stats;
int comm_run_replicas(struct graph *const *g, int n, const struct exec_opts *o, struct exec **x, struct exec_stats *st,
		      struct gd_err *e);

/* ---- MPI ---- */
/* Whether a launcher (mpirun, mpiexec, srun) started this process. */
int comm_mpi_launched(void);
/* Initializes MPI and returns the world's comm; NULL with e set when graphdiet was built without
 * MPI or MPI failed (print e, then comm_mpi_abort). */
struct comm *comm_mpi_init(int *argc, char ***argv, struct gd_err *e);
/* Ends MPI (after comm_mpi_init; nothing for NULL); nonzero with e set when MPI_Finalize fails.
 * abort ends every rank at once (where MPI is up; else this process) with exit status code. */
int comm_mpi_finalize(struct comm *c, struct gd_err *e);
void comm_mpi_abort(struct comm *c, int code);

#endif
