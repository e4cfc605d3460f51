/* run.c - `graphdiet run`: execute a graph with the reference executor. */
#include "../exec/agree.h"
#include "../exec/backend.h"
#include "../exec/comm.h"
#include "../exec/exec.h"
#include "../io/npy.h"
#include "../io/tensor.h"
#include "../util/emit.h"
#include "../util/fileio.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "steps.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char help[] =
	"usage: graphdiet run [options] GRAPH\n"
	"\n"
	"Runs GRAPH with graphdiet's reference executor (on the CPU, or a CUDA GPU) and reports its\n"
	"outputs, the time taken and the peak memory its tensors needed (with replicas: replica 0's,\n"
	"and the all-reduce's share of the time and the bytes each replica summed).\n"
	"\n"
	"options:\n"
	"  -i, --input NAME=FILE      data for graph input NAME (repeatable): a .npy file, or a\n"
	"                             serialized ONNX TensorProto named *.pb (as ONNX's backend\n"
	"                             tests store theirs, test_data_set_N/input_K.pb)\n"
	"      --random-inputs        give inputs without --input seeded random data: floats standard\n"
	"                             normal, integers over the range their use allows (token ids\n"
	"                             the vocabulary, labels the classes), bools 0 or 1\n"
	"      --seed N               seed for --random-inputs and random ops (default 0)\n"
	"      --dim NAME=VALUE       bind symbolic dimension NAME (repeatable); a NAME the graph does\n"
	"                             not have, or one train fixed to another value, is refused\n"
	"  -o, --outdir DIR           write each output to DIR/<output name>.npy (with --steps: the\n"
	"                             last step's); not '-': the report has standard output\n"
	"      --steps K              run K training steps: each step's outputs that the graph binds\n"
	"                             to state (ONNX update_binding: parameters, optimizer state, the\n"
	"                             loss scale) are the next step's values of that state; prints each\n"
	"                             step's loss, loss scale, skipped flag and gradient norm\n"
	"      --loss NAME            the output --steps reports as the loss (default: loss_global,\n"
	"                             else loss, else the only other float scalar output)\n"
	"      --shard-inputs         data parallelism, for a graph built with train --replicas N and\n"
	"                             run under mpirun -np N (one replica per rank, summing gradients\n"
	"                             with MPI_Allreduce): the inputs that are not initializers hold the\n"
	"                             whole batch, and each rank takes its slice of axis 0; only rank 0\n"
	"                             prints and writes outputs. Before the first sum the ranks compare\n"
	"                             their graphs, AllReduce sizes, parameters and options: ranks that\n"
	"                             differ end with exit 2, naming the first difference\n"
	"      --replicas N           run N replicas in this process instead (threads), each on its\n"
	"                             slice of the inputs as with --shard-inputs\n"
	"      --backend NAME         cpu (default) or cuda: run the nodes on the GPU, each tensor in\n"
	"                             device memory (ops without a CUDA kernel run on the CPU, with\n"
	"                             a note); reports the device's peak, which is the planned peak\n"
	"      --format FMT           text (default), json or yaml\n"
	"      --from FORMAT          input format: onnx or yaml\n"
	"      --base-dir DIR         the folder the model's data files are in (needed for one read\n"
	"                             from -)\n"
	"  -h, --help                 show this help\n";

struct npy_in {
	struct rtensor t;
	char *name;
};

static int load_input(const char *arg, struct npy_in *in, struct gd_err *e)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		return err_set(e, GD_EINPUT, "--input wants NAME=FILE (.npy or .pb), not '%s'", arg);
	in->name = strndup(arg, (size_t)(eq - arg));
	return cli_tensor_load(eq + 1, &in->t, e);
}

/* Two outputs whose names map to one file (a/b and a_b) would lose one: refused, naming both. */
static int distinct_files(const struct graph *g, const char *dir, struct gd_err *e)
{
	struct strmap seen;
	strmap_init(&seen);
	char (*fns)[512] = xcalloc(g->n_outputs + 1, sizeof *fns);
	int rc = fns ? 0 : err_oom(e);
	for (uint32_t i = 0; i < g->n_outputs && !rc; i++) {
		cli_file_name(g->outputs[i]->name, fns[i], sizeof fns[i]);
		const struct value *other = strmap_get(&seen, fns[i]);
		if (other)
			rc = err_set(e, GD_EINPUT, "outputs '%s' and '%s' would both be written to %s/%s.npy", other->name,
				     g->outputs[i]->name, dir, fns[i]);
		else if (strmap_put(&seen, fns[i], (void *)g->outputs[i]))
			rc = err_oom(e);
	}
	strmap_free(&seen);
	xfree(fns);
	return rc;
}

static int write_npy(const char *dir, const char *name, const struct rtensor *t, struct gd_err *e)
{
	char fn[512], path[1024];
	cli_file_name(name, fn, sizeof fn);
	snprintf(path, sizeof path, "%s/%s.npy", dir, fn);
	if (!dtype_npy(t->dtype))
		return err_set(e, GD_EINPUT, "output '%s' is %s, which .npy cannot hold", name, dtype_name(t->dtype));
	struct outfile o;
	if (outfile_open_entry(&o, path, e))
		return e->code;
	npy_write(o.f, t->dtype, (uint32_t)t->ndim, t->dims, t->data, t->nbytes);
	return outfile_commit(&o, e);
}

static void summary(const struct rtensor *t, double *mn, double *mx, double *mean)
{
	*mn = INFINITY, *mx = -INFINITY, *mean = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		double v = rt_get(t, i);
		*mn = fmin(*mn, v);
		*mx = fmax(*mx, v);
		*mean += v;
	}
	if (t->numel)
		*mean /= (double)t->numel;
}

static double scalar_of(const struct exec *x, const struct value *v)
{
	const struct rtensor *t = v ? exec_value(x, v) : NULL;
	return t && t->data && t->numel == 1 ? rt_get(t, 0) : NAN;
}

/* The value state v (a float scalar) had in the step x ran: what the step before made, or its
 * initializer (the run updated it in its buffer). */
static double state_scalar(const struct steps *s, const struct exec *x, const struct value *v)
{
	for (uint32_t i = 0; v && i < s->n; i++)
		if (s->key[i] == v && s->data[i].data)
			return rt_get(&s->data[i], 0);
	struct bytes b;
	float f;
	if (!v || !v->init || v->init->dtype != DT_FLOAT || tensor_bytes(exec_graph(x), v->init, &b, NULL) || b.n != sizeof f)
		return scalar_of(x, v);
	memcpy(&f, b.p, sizeof f);
	return f;
}

static void step_record(struct emit *em, FILE *f, const struct steps *s, const struct exec *x, int k, double secs)
{
	double loss = scalar_of(x, s->loss), scale = state_scalar(s, x, s->scale), norm = scalar_of(x, s->norm);
	int skipped = s->found && scalar_of(x, s->found) != 0;
	if (!em) {
		if (k == 1)
			fprintf(f, "%6s  %-14s %-12s %-8s %-14s %s\n", "step", "loss", "loss_scale", "skipped", "grad_norm",
				"seconds");
		char l[32] = "-", sc[32] = "-", nm[32] = "-";
		if (s->loss)
			snprintf(l, sizeof l, "%.8g", loss);
		if (s->scale)
			snprintf(sc, sizeof sc, "%.6g", scale);
		if (s->norm)
			snprintf(nm, sizeof nm, "%.8g", norm);
		fprintf(f, "%6d  %-14s %-12s %-8s %-14s %.6f\n", k, l, sc, !s->found ? "-" : skipped ? "yes" : "no", nm, secs);
		fflush(f);
		return;
	}
	emit_obj_begin(em);
	emit_key(em, "step");
	emit_int(em, k);
	emit_key(em, "loss");
	s->loss ? emit_double(em, loss) : emit_null(em);
	emit_key(em, "loss_scale");
	s->scale ? emit_double(em, scale) : emit_null(em);
	emit_key(em, "skipped");
	s->found ? emit_bool(em, skipped) : emit_null(em);
	emit_key(em, "grad_norm");
	s->norm ? emit_double(em, norm) : emit_null(em);
	emit_key(em, "seconds");
	emit_double(em, secs);
	emit_obj_end(em);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"input", required_argument, NULL, 'i'}, {"random-inputs", no_argument, NULL, 'r'},
		{"seed", required_argument, NULL, 's'},  {"dim", required_argument, NULL, 'd'},
		{"outdir", required_argument, NULL, 'o'}, {"format", required_argument, NULL, 'F'},
		{"from", required_argument, NULL, 'f'},  {"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,
		{"steps", required_argument, NULL, 'k'}, {"loss", required_argument, NULL, 'l'},
		{"shard-inputs", no_argument, NULL, 'S'}, {"replicas", required_argument, NULL, 'R'},
		{"backend", required_argument, NULL, 'B'}, {NULL, 0, NULL, 0},
	};
	int n_rep = 1;
	enum gd_format from = FMT_AUTO;
	enum cli_out fmt = OUT_TEXT;
	struct exec_opts eo = {0};
	struct npy_in ins[64];
	struct exec_binding dims[64];
	const char *inargs[64], *outdir = NULL, *loss_name = NULL, *backend_name = NULL;
	long steps = 1;
	int steps_given = 0;
	size_t n_in = 0, n_dims = 0;
	int c, rc = 0;
	int shared_rc = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":i:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (n_in == 64)
				return cli_dims_free(dims, n_dims, cli_usage("run", "too many --input options"));
			inargs[n_in++] = optarg;
			break;
		case 'r':
			eo.random_inputs = 1;
			break;
		case 's':
			if (cli_parse_seed("run", optarg, &eo.seed))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'd':
			if (cli_add_dim("run", optarg, dims, &n_dims))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'o':
			outdir = optarg;
			if (!strcmp(outdir, "-")) /* the report has standard output: no folder named '-' */
				return cli_dims_free(dims, n_dims,
						     cli_usage("run", "--outdir -: a folder for the .npy files, not standard output"));
			break;
		case 'k': {
			int64_t k;
			if (cli_parse_i64(optarg, 1, 100000000, &k))
				return cli_dims_free(dims, n_dims, cli_usage("run", "--steps %s: not a whole number from 1 to 100000000", optarg));
			steps = (long)k;
			steps_given = 1;
			break;
		}
		case 'l':
			loss_name = optarg;
			break;
		case 'S':
			eo.shard_inputs = 1;
			break;
		case 'R':
			if (cli_replicas("run", optarg, &n_rep))
				return cli_dims_free(dims, n_dims, GD_EINPUT);
			break;
		case 'B':
			backend_name = optarg;
			break;
		default:
			if (cli_shared_option("run", c, help, &from, &fmt, &shared_rc))
				return cli_dims_free(dims, n_dims, shared_rc);
			break;
		}
	}
	if (argc - optind != 1)
		return cli_dims_free(dims, n_dims,
				     cli_usage("run", argc - optind < 1 ? "no graph given" : "too many arguments"));
	int brc = backend_name ? cli_backend(backend_name, &eo.backend) : 0;
	if (brc)
		return cli_dims_free(dims, n_dims, brc);
	const char *path = argv[optind];
	struct gd_err e = {0};
	/* under mpirun: one replica per rank, and only rank 0 reports */
	struct comm *mpi = NULL;
	if (comm_mpi_launched()) {
		if (!(mpi = comm_mpi_init(NULL, NULL, &e))) {
			err_print(NULL, &e);
			comm_mpi_abort(NULL, e.code);
			return e.code;
		}
		if (mpi->size > 1 && n_rep > 1) {
			comm_mpi_finalize(mpi, &e);
			return cli_usage("run", "--replicas runs replicas in one process; under mpirun each rank is one");
		}
		eo.comm = mpi;
		if (mpi->rank && !freopen("/dev/null", "w", stdout)) {
			comm_mpi_abort(mpi, GD_EINTERNAL);
			return GD_EINTERNAL;
		}
	}
	int writer = !mpi || !mpi->rank, n_run = n_rep > 1 ? n_rep : 1;
	int together = 0; /* every rank failed at once (they disagree): none waits, no abort */
	memset(ins, 0, sizeof ins);
	for (size_t i = 0; i < n_in && !rc; i++)
		if ((rc = load_input(inargs[i], &ins[i], &e)))
			err_print(NULL, &e);
	struct graph *g = rc ? NULL : cli_load(path, from, &rc);
	struct graph **rg = NULL;
	struct exec *x = NULL, **rx = g ? xcalloc((size_t)n_run, sizeof *rx) : NULL;
	struct exec_stats *rst = g ? xcalloc((size_t)n_run, sizeof *rst) : NULL;
	if (g && (!rx || !rst)) {
		err_print(path, (err_oom(&e), &e));
		rc = e.code;
	}
	/* an --input naming nothing the graph takes is a mistake (it was ignored) */
	for (size_t i = 0; g && !rc && i < n_in; i++) {
		const struct value *v = strmap_get(&g->names, ins[i].name);
		if (!v || v->producer) {
			char have[512];
			size_t k = 0;
			have[0] = 0;
			for (uint32_t j = 0; j < g->n_inputs && k < sizeof have; j++)
				if (!g->inputs[j]->init)
					k += (size_t)snprintf(have + k, sizeof have - k, "%s%s", k ? ", " : "", g->inputs[j]->name);
			rc = err_set(&e, GD_EINPUT, "--input %s: the graph has no input '%s' (its inputs: %s)", inargs[i],
				     ins[i].name, have[0] ? have : "none");
			err_print(path, &e);
		}
	}
	if (g && !rc)
		rc = cli_check_dims(path, g, dims, n_dims);
	if (g && !rc && n_run > 1)
		rc = cli_load_copies(path, from, g, n_run, &rg);
	struct steps sts = {0};
	struct exec_stats st = {0};
	struct emit em;
	/* threads: each replica's state is its own (a sharded graph's slices), carried through its own
	 * graph (steps_to_inits), as under mpirun each rank carries its own; rsts[0] is unused (sts) */
	struct steps *rsts = NULL;
	if (g && !rc && steps_given) { /* (after an error: a --dim refused left no copies to run) */
		if (n_run > 1 && !(rsts = xcalloc((size_t)n_run, sizeof *rsts)))
			rc = err_oom(&e);
		if (!rc)
			rc = steps_init(g, loss_name, &sts, &e);
		for (int r = 1; rsts && !rc && r < n_run; r++)
			rc = steps_init(rg[r], loss_name, &rsts[r], &e);
		if (rc)
			err_print(path, &e);
	}
	if (g && !rc && steps > 1 && !sts.n) {
		rc = err_set(&e, GD_EINPUT, "--steps %ld: the graph has no state to carry from step to step (train it with "
					    "--optimizer, --diet or --loss-scale dynamic)", steps);
		err_print(path, &e);
	}
	if (g && !rc) {
		/* the caller's inputs, then the state's data once a step has made it: state i goes to
		 * slot[i], the caller's input of its name (which it replaces) or a place after them */
		struct rtensor *tv = xcalloc(n_in + sts.n + 1, sizeof *tv);
		const char **names = xcalloc(n_in + sts.n + 1, sizeof *names);
		size_t *slot = xcalloc(sts.n + 1, sizeof *slot), n_state = n_in;
		if (!tv || !names || !slot) {
			rc = err_oom(&e);
			err_print(path, &e);
		}
		for (size_t i = 0; !rc && i < n_in; i++) {
			tv[i] = ins[i].t;
			names[i] = ins[i].name;
		}
		for (uint32_t i = 0; !rc && i < sts.n; i++) {
			size_t j = 0;
			while (j < n_in && strcmp(names[j], sts.key[i]->name))
				j++;
			slot[i] = j < n_in ? j : n_state++;
			names[slot[i]] = sts.key[i]->name;
		}
		eo.inputs = tv;
		eo.input_names = names;
		eo.dims = dims;
		eo.n_dims = n_dims;
		eo.n_inputs = n_in;
		/* the ranks run one graph, on one batch, with the same parameters: else no sum is made */
		int all = 0, speak = 0;
		if (!rc && mpi && mpi->size > 1 && (rc = agree_check(mpi, g, &eo, (uint64_t)steps, &all, &speak, &e))) {
			together = all;
			if (speak)
				err_print(path, &e);
		}
		if (steps_given && fmt != OUT_TEXT) {
			emit_init(&em, stdout, fmt == OUT_YAML);
			emit_obj_begin(&em);
			emit_key(&em, "steps");
			emit_arr_begin(&em);
		}
		for (long k = 1; !rc && k <= steps; k++) {
			for (uint32_t i = 0; k > 1 && i < sts.n; i++)
				if (!rsts || slot[i] < n_in) /* (threads: only a state the caller gave by name) */
					tv[slot[i]] = sts.data[i];
			eo.n_inputs = k > 1 && !rsts ? n_state : n_in;
			eo.step = (uint64_t)(k - 1);
			for (int r = 0; r < n_run; r++) {
				exec_free(rx[r]);
				rx[r] = NULL;
			}
			if (n_run > 1)
				comm_run_replicas(rg, n_run, &eo, rx, rst, &e);
			else
				rx[0] = exec_run(g, &eo, &rst[0], &e);
			x = rx[0];
			st = rst[0];
			if (!x) {
				rc = e.code ? e.code : GD_EINTERNAL;
				if (steps_given)
					err_prefix(&e, "step %ld", k);
				if (!mpi || !mpi->together || !mpi->rank) /* every rank failed at once: one says so */
					err_print(path, &e);
				together |= mpi && mpi->together;
				break;
			}
			if (steps_given)
				step_record(fmt == OUT_TEXT ? NULL : &em, stdout, &sts, x, (int)k, st.seconds);
			if (k < steps && (rc = steps_advance(&sts, x, &e)))
				err_print(path, &e);
			for (int r = 0; rsts && k < steps && !rc && r < n_run; r++)
				if ((r && steps_advance(&rsts[r], rx[r], &e)) || steps_to_inits(r ? &rsts[r] : &sts, rg[r], &e)) {
					rc = e.code;
					err_print(path, &e);
				}
		}
		if (steps_given && fmt != OUT_TEXT)
			emit_arr_end(&em);
		free(tv);
		free(names);
		free(slot);
		if (x && outdir && writer && (rc = distinct_files(g, outdir, &e)))
			err_print(NULL, &e);
		if (x && outdir && writer && !rc) {
			if (mkdir(outdir, 0777) && errno != EEXIST) {
				rc = err_set(&e, GD_EINPUT, "cannot create %s: %s", outdir, strerror(errno));
				err_print(NULL, &e);
			}
			for (uint32_t i = 0; !rc && i < g->n_outputs; i++)
				if ((rc = write_npy(outdir, g->outputs[i]->name, exec_value(x, g->outputs[i]), &e)))
					err_print(NULL, &e);
		}
		if (x && !rc && fmt == OUT_TEXT) {
			char sh[256];
			for (uint32_t i = 0; i < g->n_outputs; i++) {
				const struct rtensor *t = exec_value(x, g->outputs[i]);
				double mn, mx, mean;
				summary(t, &mn, &mx, &mean);
				rt_shape_str(t, sh, sizeof sh);
				if (t->numel == 1)
					printf("%-24s %-8s %-16s %.9g\n", g->outputs[i]->name, dtype_name(t->dtype), sh, rt_get(t, 0));
				else
					printf("%-24s %-8s %-16s min %.6g  mean %.6g  max %.6g\n", g->outputs[i]->name,
					       dtype_name(t->dtype), sh, mn, mean, mx);
			}
			printf("peak memory: %zu bytes; %.6f s; %.3g FLOPs\n", st.peak_bytes, st.seconds, (double)st.flops);
			if (eo.backend && !eo.backend->host)
				printf("backend: %s; device peak: %zu bytes; %" PRIu64 " nodes on the CPU; %" PRIu64
				       " copies, %" PRIu64 " bytes\n", eo.backend->name, st.device_peak_bytes, st.host_nodes,
				       st.copies, st.copy_bytes);
			if (eo.comm || n_run > 1)
				printf("replicas: %d (%s); all-reduce: %" PRIu64 " sums, %" PRIu64 " bytes from each replica, "
				       "%.6f s (%.1f%% of the run)\n", mpi ? mpi->size : n_run, mpi ? "MPI" : n_run > 1 ? "threads" : "one",
				       st.comm_calls, st.comm_bytes, st.comm_seconds,
				       st.seconds > 0 ? 100 * st.comm_seconds / st.seconds : 0.0);
		} else if (x && !rc) {
			if (!steps_given) {
				emit_init(&em, stdout, fmt == OUT_YAML);
				emit_obj_begin(&em);
			}
			emit_key(&em, "peak_bytes");
			emit_uint(&em, st.peak_bytes);
			emit_key(&em, "seconds");
			emit_double(&em, st.seconds);
			emit_key(&em, "flops");
			emit_uint(&em, st.flops);
			emit_key(&em, "bytes_moved");
			emit_uint(&em, st.bytes_moved);
			emit_key(&em, "backend");
			emit_obj_begin(&em);
			emit_key(&em, "name");
			emit_str(&em, eo.backend ? eo.backend->name : "cpu");
			emit_key(&em, "device_peak_bytes");
			emit_uint(&em, eo.backend && !eo.backend->host ? st.device_peak_bytes : st.peak_bytes);
			emit_key(&em, "host_nodes");
			emit_uint(&em, st.host_nodes);
			emit_key(&em, "copies");
			emit_uint(&em, st.copies);
			emit_key(&em, "copy_bytes");
			emit_uint(&em, st.copy_bytes);
			emit_obj_end(&em);
			emit_key(&em, "replicas");
			emit_int(&em, mpi ? mpi->size : n_run);
			emit_key(&em, "allreduce");
			emit_obj_begin(&em);
			emit_key(&em, "calls");
			emit_uint(&em, st.comm_calls);
			emit_key(&em, "bytes");
			emit_uint(&em, st.comm_bytes);
			emit_key(&em, "seconds");
			emit_double(&em, st.comm_seconds);
			emit_obj_end(&em);
			emit_key(&em, "outputs");
			emit_arr_begin(&em);
			for (uint32_t i = 0; i < g->n_outputs; i++) {
				const struct rtensor *t = exec_value(x, g->outputs[i]);
				char fn[512];
				emit_obj_begin(&em);
				emit_key(&em, "name");
				emit_str(&em, g->outputs[i]->name);
				emit_key(&em, "dtype");
				emit_str(&em, dtype_name(t->dtype));
				emit_key(&em, "shape");
				emit_arr_begin(&em);
				for (int k = 0; k < t->ndim; k++)
					emit_int(&em, t->dims[k]);
				emit_arr_end(&em);
				if (outdir) {
					cli_file_name(g->outputs[i]->name, fn, sizeof fn);
					char p[1200];
					snprintf(p, sizeof p, "%s/%s.npy", outdir, fn);
					emit_key(&em, "file");
					emit_str(&em, p);
				}
				if (t->numel == 1) {
					emit_key(&em, "value");
					emit_double(&em, rt_get(t, 0));
				}
				emit_obj_end(&em);
			}
			emit_arr_end(&em);
			emit_obj_end(&em);
		} else if (steps_given && fmt != OUT_TEXT) {
			emit_obj_end(&em);
		}
	}
	steps_free(&sts);
	for (int r = 1; rsts && r < n_run; r++)
		steps_free(&rsts[r]);
	xfree(rsts);
	for (int r = 0; rx && r < n_run; r++)
		exec_free(rx[r]);
	xfree(rx);
	xfree(rst);
	cli_free_copies(rg, n_run);
	graph_free(g);
	for (size_t i = 0; i < n_in; i++) {
		xfree(ins[i].t.data);
		free(ins[i].name);
	}
	for (size_t i = 0; i < n_dims; i++)
		free((char *)dims[i].name);
	if (mpi)
		agree_release(mpi);
	rc = cli_finish(rc);
	if (rc && mpi && mpi->size > 1 && !together)
		comm_mpi_abort(mpi, rc); /* the other ranks may wait in an all-reduce */
	if (comm_mpi_finalize(mpi, &e) && !rc) {
		err_print(NULL, &e);
		rc = e.code;
	}
	return rc;
}
