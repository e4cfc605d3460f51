/* helpers.c - shared test utilities; see helpers.h. */
#include "helpers.h"
#include "io/format.h"
#include "ir/dtype.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "io/yaml.h"
#include "ops/blas.h"
#include "plan/plan.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *const testdata_models[] = {"mlp", "rescnn", "transformer", "tanh_chain", "rnn", "unet", NULL};

const char *model_path(char *path, size_t n, const char *model)
{
	snprintf(path, n, "%s/%s.onnx", TESTDATA, model);
	return path;
}
const char *const testdata_yaml[] = {"yaml/tiny_mlp.yaml", "yaml/unsorted.yaml", "yaml/control_deps.yaml",
				     "yaml/if_branch.yaml", "yaml/npy_param.yaml", NULL};

uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc((size_t)n + 1);
	cr_assert(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0; /* text files can be used as strings */
	fclose(f);
	*len = (size_t)n;
	return buf;
}

int npy_load(const char *path, struct rtensor *t)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	fclose(f);
	size_t len;
	uint8_t *buf = slurp(path, &len);
	struct npy n;
	struct gd_err e = {0};
	cr_assert_eq(npy_parse(buf, len, &n, &e), 0, "%s: %s", path, e.msg);
	memset(t, 0, sizeof *t);
	t->dtype = n.dtype;
	t->ndim = (int)n.ndim;
	memcpy(t->dims, n.dims, n.ndim * sizeof *n.dims);
	t->nbytes = n.nbytes;
	t->numel = (int64_t)(n.nbytes / dtype_size(n.dtype));
	t->data = malloc(n.nbytes + 1);
	memcpy(t->data, n.data, n.nbytes);
	t->known = 1;
	free(buf);
	return 1;
}

const char *ref_path(char *path, size_t n, const char *model, const char *name)
{
	snprintf(path, n, "%s/ref/%s/%s.npy", TESTDATA, model, name);
	return path;
}

size_t ref_inputs(const struct graph *g, const char *model, struct rtensor *ts, const char **names)
{
	size_t n = 0;
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		if (g->inputs[i]->init)
			continue;
		char path[512];
		cr_assert_lt(n, 8, "%s: more inputs than expected", model);
		names[n] = g->inputs[i]->name;
		cr_assert(npy_load(ref_path(path, sizeof path, model, names[n]), &ts[n]), "%s", path);
		n++;
	}
	return n;
}

struct graph *load_ok(const char *path)
{
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	cr_assert(g, "loading %s failed: %s", path, e.msg);
	return g;
}

struct graph *planned_ok(const char *model, const char *strategy, int64_t batch, struct plan_report *r)
{
	char path[512];
	struct graph *g = load_ok(model_path(path, sizeof path, model));
	struct exec_binding b = {"batch", batch};
	struct plan_opts po = {.dims = &b, .n_dims = 1};
	cr_assert_eq(ckpt_parse(strategy, &po.ckpt), 0, "%s", strategy);
	struct gd_err e = {0};
	cr_assert_eq(plan_memory(g, &po, r, &e), 0, "%s, %s: %s", model, strategy, e.msg);
	return g;
}

void write_text(char *path, size_t n, const char *name, const char *text)
{
	snprintf(path, n, "%s/%s", tmpdir(), name);
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s", path);
	cr_assert(fputs(text, f) >= 0 && fclose(f) == 0, "%s", path);
}

void train_text(char *model, char *train, size_t n, const char *name, const char *text)
{
	char file[256];
	snprintf(file, sizeof file, "%s.yaml", name);
	write_text(model, n, file, text);
	snprintf(train, n, "%s/%s_train.onnx", tmpdir(), name);
	char *argv[] = {GD_BINARY, "train", model, "-o", train, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "train %s: %s", name, r.err);
	run_free(&r);
}

struct rtensor rt_over(int dtype, int ndim, const int64_t *dims, void *data)
{
	struct rtensor t = {.dtype = dtype, .ndim = ndim, .numel = 1, .data = data};
	for (int i = 0; i < ndim; i++)
		t.numel *= (t.dims[i] = dims[i]);
	t.nbytes = (size_t)t.numel * dtype_size(dtype);
	return t;
}

void diet_factor_data(int16_t *q, float *m, float *a, float *b, float *vr, float *vc, int r, int c, int k)
{
	for (int i = 0; i < r * c; i++) {
		q[i] = (int16_t)((i * 37 % 2001) - 1000);
		m[i] = (float)((i % 7) - 3) * 1e-4f;
	}
	for (int i = 0; i < k * r; i++)
		a[i] = (float)((i * 5 % 11) - 5) * 0.37f;
	for (int i = 0; i < k * c; i++)
		b[i] = (float)((i * 3 % 13) - 6) * 1.3e-3f;
	for (int i = 0; i < r; i++)
		vr[i] = (float)(i % 3) * 1e-7f;
	for (int i = 0; i < c; i++)
		vc[i] = (float)(i % 5) * 1e-7f;
}

void diet_expect_same_update(struct exec *const *x, struct graph *const *g, const int16_t *q, int64_t n, int steps,
			     int tag)
{
	static const char *const outs[4] = {"qn", "mn", "vrn", "vcn"};
	const int16_t *q0 = exec_value(x[0], strmap_get(&g[0]->names, "qn"))->data;
	const int16_t *q1 = exec_value(x[1], strmap_get(&g[1]->names, "qn"))->data;
	int64_t far = 0, moved = 0;
	for (int64_t i = 0; i < n; i++) {
		far += abs(q0[i] - q1[i]) > steps;
		moved += q0[i] != q[i];
	}
	cr_expect_eq(far, 0, "%d: %lld of %lld values more than %d steps apart", tag, (long long)far, (long long)n, steps);
	cr_expect_gt(moved, n / 2, "%d: %lld of %lld moved", tag, (long long)moved, (long long)n);
	for (int k = 1; k < 4; k++) {
		const struct rtensor *u = exec_value(x[0], strmap_get(&g[0]->names, outs[k]));
		const struct rtensor *w = exec_value(x[1], strmap_get(&g[1]->names, outs[k]));
		cr_assert_eq(u->numel, w->numel);
		double worst = 0;
		for (int64_t i = 0; i < u->numel; i++) {
			double p = ((const float *)u->data)[i], r = ((const float *)w->data)[i];
			double d = fabs(p - r) / fmax(fabs(p), 1e-30);
			worst = d > worst ? d : worst;
		}
		cr_expect_leq(worst, 1e-6, "%d: %s: relative difference %g", tag, outs[k], worst);
	}
}

double json_num(const char *json, const char *key)
{
	char k[128];
	snprintf(k, sizeof k, "\"%s\": ", key);
	const char *p = strstr(json, k);
	cr_assert(p, "no %s in %.400s", key, json);
	return strtod(p + strlen(k), NULL);
}

struct graph *load_text(const char *name, const char *text)
{
	char path[512];
	write_text(path, sizeof path, name, text);
	return load_ok(path);
}

const char chain_yaml[] = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [8]}]\n"
			  "nodes:\n  - {op: Relu, inputs: [x], outputs: [a]}\n  - {op: Neg, inputs: [a], outputs: [b]}\n"
			  "  - {op: Tanh, inputs: [b], outputs: [y]}\noutputs: [{name: y}]\n";

uint8_t *write_mem(struct graph *g, int yaml, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	struct gd_err e = {0};
	cr_assert(f);
	int rc = yaml ? yaml_write(g, f, 16, &e) : onnx_write(g, f, &e);
	cr_assert_eq(rc, 0, "writing failed: %s", e.msg);
	fclose(f);
	return (uint8_t *)buf;
}

static char *read_back(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	char *buf = NULL;
	size_t cap = 0;
	*len = 0;
	for (;;) {
		if (*len + 4097 > cap)
			buf = realloc(buf, cap = (cap + 4097) * 2);
		size_t n = fread(buf + *len, 1, cap - *len - 1, f);
		*len += n;
		if (n == 0)
			break;
	}
	buf[*len] = 0;
	fclose(f);
	unlink(path);
	return buf;
}

/* Standard streams go through files, so no pipe can fill up and deadlock. */
struct run_result run_cmd(char *const argv[], const uint8_t *in, size_t in_len)
{
	char pin[96], pout[96], perr[96];
	static int seq;
	snprintf(pin, sizeof pin, "%s/run%d.in", tmpdir(), seq);
	snprintf(pout, sizeof pout, "%s/run%d.out", tmpdir(), seq);
	snprintf(perr, sizeof perr, "%s/run%d.err", tmpdir(), seq++);
	FILE *f = fopen(pin, "wb");
	cr_assert(f);
	if (in_len)
		fwrite(in, 1, in_len, f);
	fclose(f);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, pin, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, pout, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, perr, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0, "cannot run %s", argv[0]);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	waitpid(pid, &st, 0);
	struct run_result r = {0};
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r.out = read_back(pout, &r.out_len);
	r.err = read_back(perr, &r.err_len);
	unlink(pin);
	return r;
}

void run_free(struct run_result *r)
{
	free(r->out);
	free(r->err);
}

void python_ok(const char *code, const char *arg, const char *what)
{
	char *argv[] = {GD_PYTHON, "-c", (char *)code, (char *)arg, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s: %s", what, r.err);
	run_free(&r);
}

static char tmp_dir[64];
static pid_t tmp_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* The directory goes when the process that made it exits (Criterion runs each test in its own
 * process): thousands of runs left thousands of them behind and filled the disk. */
static void remove_tmpdir(void)
{
	if (tmp_dir[0] && tmp_owner == getpid())
		nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *tmpdir(void)
{
	if (!tmp_dir[0]) {
		strcpy(tmp_dir, "/tmp/graphdiet-test-XXXXXX");
		cr_assert(mkdtemp(tmp_dir));
		tmp_owner = getpid();
		atexit(remove_tmpdir);
	}
	return tmp_dir;
}

void expect_tensor_close(const struct rtensor *got, const struct rtensor *want, double rtol, double atol, const char *what)
{
	cr_assert_eq(got->dtype, want->dtype, "%s: %s, expected %s", what, dtype_name(got->dtype), dtype_name(want->dtype));
	cr_assert_eq(got->ndim, want->ndim, "%s: rank %d, expected %d", what, got->ndim, want->ndim);
	for (int d = 0; d < got->ndim; d++)
		cr_assert_eq(got->dims[d], want->dims[d], "%s: dimension %d is %lld, expected %lld", what, d,
			     (long long)got->dims[d], (long long)want->dims[d]);
	int flt = dtype_is_float(want->dtype);
	for (int64_t i = 0; i < want->numel; i++) {
		double g = rt_get(got, i), w = rt_get(want, i);
		if (flt)
			cr_expect((isnan(g) && isnan(w)) || g == w || fabs(g - w) <= atol + rtol * fabs(w),
				  "%s[%lld] = %.9g, expected %.9g", what, (long long)i, g, w);
		else
			cr_expect_eq(rt_get_i(got, i), rt_get_i(want, i), "%s[%lld] = %lld, expected %lld", what, (long long)i,
				     (long long)rt_get_i(got, i), (long long)rt_get_i(want, i));
	}
}

void expect_run_matches_npy(struct graph *g, npy_file_fn file, const void *ctx, double rtol, double atol, const char *what)
{
	struct rtensor ins[16];
	const char *names[16];
	size_t n = 0;
	char path[1200], msg[800];
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		if (g->inputs[i]->init)
			continue;
		cr_assert_lt(n, 16, "%s: too many inputs", what);
		file(ctx, 0, n, g->inputs[i]->name, path, sizeof path);
		cr_assert(npy_load(path, &ins[n]), "%s: no %s", what, path);
		names[n++] = g->inputs[i]->name;
	}
	struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s: %s", what, e.msg);
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		struct rtensor want;
		file(ctx, 1, k, g->outputs[k]->name, path, sizeof path);
		cr_assert(npy_load(path, &want), "%s: no %s", what, path);
		snprintf(msg, sizeof msg, "%s: %s", what, g->outputs[k]->name);
		expect_tensor_close(exec_value(x, g->outputs[k]), &want, rtol, atol, msg);
		free(want.data);
	}
	exec_free(x);
	for (size_t i = 0; i < n; i++)
		free(ins[i].data);
}

void pin_sgemm(void)
{
	if (!getenv("GRAPHDIET_SGEMM"))
		setenv("GRAPHDIET_SGEMM", strncmp(blas_sgemm_kernel(), "graphdiet", 9) ? "openblas" : "graphdiet", 1);
}

struct exec_stats stats_of(const char *name, const char *text)
{
	struct graph *g = load_text(name, text);
	struct exec_opts o = {.random_inputs = 1};
	struct exec_stats st;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, &st, &e);
	cr_assert(x, "%s", e.msg);
	exec_free(x);
	graph_free(g);
	return st;
}
