/* comm.c - the replicas' transports; see comm.h. */
#include "comm.h"
#include "../ir/dtype.h"
#include "exec.h"
#include "../util/xalloc.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GD_HAVE_MPI
#include <mpi.h>
#endif

/* ---- N replicas in one process ---- */

struct comm_group {
	int n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int waiting, aborted;
	uint64_t generation;
	struct comm *members;
	void **bufs; /* each member's buffer in the current all-reduce */
	size_t *counts;
	int *dtypes;
};

/* Waits until every member arrives; -1 when one failed instead. */
static int barrier(struct comm_group *g)
{
	pthread_mutex_lock(&g->mu);
	uint64_t gen = g->generation;
	if (!g->aborted && ++g->waiting == g->n) {
		g->waiting = 0;
		g->generation++;
		pthread_cond_broadcast(&g->cv);
	}
	while (!g->aborted && gen == g->generation)
		pthread_cond_wait(&g->cv, &g->mu);
	int rc = g->aborted ? -1 : 0;
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* Posts this member's buffer and count, waits for all, and checks that they agree: 0, or -1 with e
 * set (the group aborted). */
static int post(struct comm *c, const void *buf, size_t count, int dtype, const char *what, struct gd_err *e)
{
	struct comm_group *g = c->impl;
	int r = c->rank;
	g->bufs[r] = (void *)buf;
	g->counts[r] = count;
	g->dtypes[r] = dtype;
	if (barrier(g))
		return err_set(e, GD_EINPUT, "another replica failed");
	for (int k = 0; k < g->n; k++)
		if (g->counts[k] != count || g->dtypes[k] != dtype) {
			comm_group_abort(g);
			return err_set(e, GD_EINPUT, "replicas disagree: replica %d %s %zu %s elements, replica %d %zu %s", r,
				       what, count, dtype_name(dtype), k, g->counts[k], dtype_name(g->dtypes[k]));
		}
	return 0;
}

/* dst = elements [lo, lo + count) summed over the members' posted buffers, in rank order: every
 * member that sums an element gets the same bits. */
static void sum_posted(const struct comm_group *g, size_t lo, size_t count, int dtype, void *dst)
{
	for (size_t i = 0; i < count; i++) {
		if (dtype == DT_FLOAT) {
			float s = ((const float *)g->bufs[0])[lo + i];
			for (int k = 1; k < g->n; k++)
				s += ((const float *)g->bufs[k])[lo + i];
			((float *)dst)[i] = s;
		} else {
			double s = ((const double *)g->bufs[0])[lo + i];
			for (int k = 1; k < g->n; k++)
				s += ((const double *)g->bufs[k])[lo + i];
			((double *)dst)[i] = s;
		}
	}
}

static int group_allreduce(struct comm *c, void *buf, size_t count, int dtype, struct gd_err *e)
{
	struct comm_group *g = c->impl;
	if (post(c, buf, count, dtype, "sums", e))
		return -1;
	void *sum = xmalloc(count * dtype_size(dtype) + 1);
	if (!sum) {
		comm_group_abort(g);
		return err_oom(e);
	}
	sum_posted(g, 0, count, dtype, sum);
	/* the others read this buffer until all have summed */
	int rc = barrier(g);
	if (!rc)
		memcpy(buf, sum, count * dtype_size(dtype));
	xfree(sum);
	return rc ? err_set(e, GD_EINPUT, "another replica failed") : 0;
}

static int group_reduce_scatter(struct comm *c, const void *in, void *out, size_t count, int dtype, struct gd_err *e)
{
	struct comm_group *g = c->impl;
	if (post(c, in, count, dtype, "reduce-scatters", e))
		return -1;
	sum_posted(g, (size_t)c->rank * count, count, dtype, out);
	/* the others read this buffer until all have summed */
	return barrier(g) ? err_set(e, GD_EINPUT, "another replica failed") : 0;
}

static int group_allgather(struct comm *c, const void *mine, size_t bytes, void *all, struct gd_err *e)
{
	struct comm_group *g = c->impl;
	if (post(c, mine, bytes, DT_UINT8, "gathers", e))
		return -1;
	for (int k = 0; k < g->n; k++)
		memcpy((char *)all + (size_t)k * bytes, g->bufs[k], bytes);
	/* the others read mine until all have copied */
	return barrier(g) ? err_set(e, GD_EINPUT, "another replica failed") : 0;
}

struct comm_group *comm_group_new(int n)
{
	struct comm_group *g = xcalloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->n = n;
	g->members = xcalloc((size_t)n, sizeof *g->members);
	g->bufs = xcalloc((size_t)n, sizeof *g->bufs);
	g->counts = xcalloc((size_t)n, sizeof *g->counts);
	g->dtypes = xcalloc((size_t)n, sizeof *g->dtypes);
	if (!g->members || !g->bufs || !g->counts || !g->dtypes) {
		xfree(g->members);
		xfree(g->bufs);
		xfree(g->counts);
		xfree(g->dtypes);
		xfree(g);
		return NULL;
	}
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	for (int r = 0; r < n; r++)
		g->members[r] = (struct comm){.rank = r, .size = n, .kind = "threads", .allreduce_sum = group_allreduce,
					      .allgather = group_allgather, .reduce_scatter_sum = group_reduce_scatter, .impl = g};
	return g;
}

struct comm *comm_group_member(struct comm_group *g, int rank)
{
	return &g->members[rank];
}

void comm_group_abort(struct comm_group *g)
{
	pthread_mutex_lock(&g->mu);
	g->aborted = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

void comm_group_free(struct comm_group *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	xfree(g->members);
	xfree(g->bufs);
	xfree(g->counts);
	xfree(g->dtypes);
	xfree(g);
}

struct replica {
	struct graph *g;
	struct exec_opts eo;
	struct exec *x;
	struct exec_stats st;
	struct gd_err e;
	struct comm_group *group;
	pthread_t thread;
};

static void *replica_run(void *arg)
{
	struct replica *r = arg;
	r->x = exec_run(r->g, &r->eo, &r->st, &r->e);
	if (!r->x)
		comm_group_abort(r->group);
	return NULL;
}

int comm_run_replicas(struct graph *const *g, int n, const struct exec_opts *o, struct exec **x, struct exec_stats *st,
		      struct gd_err *e)
{
	struct comm_group *group = comm_group_new(n);
	struct replica *rep = group ? xcalloc((size_t)n, sizeof *rep) : NULL;
	if (!rep) {
		comm_group_free(group);
		return err_oom(e);
	}
	int started = 0;
	for (int r = 0; r < n; r++) {
		rep[r] = (struct replica){.g = g[r], .eo = *o, .group = group};
		rep[r].eo.comm = comm_group_member(group, r);
		rep[r].eo.shard_inputs = 1;
		if (pthread_create(&rep[r].thread, NULL, replica_run, &rep[r])) {
			err_set(&rep[r].e, GD_EINTERNAL, "cannot start a thread for replica %d", r);
			comm_group_abort(group);
			break;
		}
		started++;
	}
	for (int r = 0; r < started; r++)
		pthread_join(rep[r].thread, NULL);
	/* the first failure, rather than its echo in the others */
	int first = -1;
	for (int r = 0; r < n && first < 0; r++)
		if (!rep[r].x && !strstr(rep[r].e.msg, "another replica failed"))
			first = r;
	for (int r = 0; r < n && first < 0; r++)
		if (!rep[r].x)
			first = r;
	if (first >= 0) {
		*e = rep[first].e;
		if (!e->code)
			err_oom(e);
		err_prefix(e, "replica %d", first);
	}
	for (int r = 0; r < n; r++) {
		if (first >= 0)
			exec_free(rep[r].x);
		else
			x[r] = rep[r].x;
		if (st && first < 0)
			st[r] = rep[r].st;
	}
	xfree(rep);
	comm_group_free(group);
	return first >= 0 ? e->code : 0;
}

/* ---- MPI ---- */

int comm_mpi_launched(void)
{
	/* Open MPI's mpirun, MPICH's hydra (and Slurm's PMI), PMIx launchers */
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

#ifdef GD_HAVE_MPI
/* "MPI_X failed on rank R: <why>", for an MPI call that returned rc */
static int mpi_fail(struct gd_err *e, const char *call, int rank, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS || len <= 0 || len > MPI_MAX_ERROR_STRING)
		len = snprintf(msg, sizeof msg, "MPI error %d", rc);
	if (rank >= 0)
		return err_set(e, GD_EINPUT, "%s failed on rank %d: %.*s", call, rank, len, msg);
	return err_set(e, GD_EINPUT, "%s failed: %.*s", call, len, msg);
}

static int mpi_allreduce(struct comm *c, void *buf, size_t count, int dtype, struct gd_err *e)
{
	MPI_Datatype t = dtype == DT_FLOAT ? MPI_FLOAT : MPI_DOUBLE;
	/* MPI counts are ints: large buffers go in pieces */
	size_t es = dtype_size(dtype), step = (size_t)1 << 30;
	for (size_t off = 0; off < count; off += step) {
		int n = (int)(count - off < step ? count - off : step);
		int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * es, n, t, MPI_SUM, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, "MPI_Allreduce", c->rank, rc);
	}
	return 0;
}

static int mpi_allgather(struct comm *c, const void *mine, size_t bytes, void *all, struct gd_err *e)
{
	if (bytes > INT_MAX)
		return err_set(e, GD_EINPUT, "MPI_Allgather of %zu bytes: more than an MPI count holds", bytes);
	int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Allgather", c->rank, rc);
}

static int mpi_reduce_scatter(struct comm *c, const void *in, void *out, size_t count, int dtype, struct gd_err *e)
{
	if (count > INT_MAX)
		return err_set(e, GD_EINPUT, "MPI_Reduce_scatter_block of %zu elements each: more than an MPI count holds",
			       count);
	MPI_Datatype t = dtype == DT_FLOAT ? MPI_FLOAT : MPI_DOUBLE;
	int rc = MPI_Reduce_scatter_block(in, out, (int)count, t, MPI_SUM, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Reduce_scatter_block", c->rank, rc);
}

struct comm *comm_mpi_init(int *argc, char ***argv, struct gd_err *e)
{
	static struct comm world;
	int rc = MPI_Init(argc, argv);
	if (rc != MPI_SUCCESS) {
		mpi_fail(e, "MPI_Init", -1, rc);
		return NULL;
	}
	world = (struct comm){.kind = "MPI", .allreduce_sum = mpi_allreduce, .allgather = mpi_allgather,
			      .reduce_scatter_sum = mpi_reduce_scatter, .rank = -1};
	/* errors come back to graphdiet, which names them; by default Open MPI ends the job itself */
	if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
		mpi_fail(e, "MPI_Comm_set_errhandler", -1, rc);
	else if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &world.rank)) != MPI_SUCCESS)
		mpi_fail(e, "MPI_Comm_rank", -1, rc);
	else if ((rc = MPI_Comm_size(MPI_COMM_WORLD, &world.size)) != MPI_SUCCESS)
		mpi_fail(e, "MPI_Comm_size", world.rank, rc);
	return rc == MPI_SUCCESS ? &world : NULL;
}

int comm_mpi_finalize(struct comm *c, struct gd_err *e)
{
	if (!c)
		return 0;
	int rc = MPI_Finalize();
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Finalize", c->rank, rc);
}

void comm_mpi_abort(struct comm *c, int code)
{
	(void)c;
	int up = 0, down = 0;
	if (MPI_Initialized(&up) == MPI_SUCCESS && up && MPI_Finalized(&down) == MPI_SUCCESS && !down)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}
#else
struct comm *comm_mpi_init(int *argc, char ***argv, struct gd_err *e)
{
	(void)argc;
	(void)argv;
	err_set(e, GD_EINPUT, "started by an MPI launcher, but this graphdiet was built without MPI (install "
			      "libopenmpi-dev and rebuild)");
	return NULL;
}

int comm_mpi_finalize(struct comm *c, struct gd_err *e)
{
	(void)c;
	(void)e;
	return 0;
}

void comm_mpi_abort(struct comm *c, int code)
{
	(void)c;
	exit(code);
}
#endif
