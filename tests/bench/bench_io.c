/* bench_io.c - read -> toposort -> write throughput and memory, against protobuf-c alone.
 *
 *   bench_io [--synth N] [--keep DIR] [MODEL.onnx ...]
 *
 * --keep DIR works in DIR (which must exist) and leaves the synthetic model there.
 *
 * For each model (and a synthetic N-node graph, 1,000,000 by default) it times, in the same run,
 *   protobuf-c: read the file, onnx__model__unpack, pack to a file   (the ceiling: no IR at all)
 *   graphdiet : `graphdiet convert MODEL out.onnx` (read, validate, toposort, write)
 * each in its own process: best wall time and best CPU (user+sys) time of 5 runs, and the peak RSS
 * from wait4(). Wall time on a shared machine is noisy; CPU time less so. It prints a Markdown
 * table with the ratios; the targets are time <= 2x protobuf-c and RSS < 1.5x file size. */
#include "proto/onnx.pb-c.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct file_buffer {
	ProtobufCBuffer base;
	FILE *f;
};

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	fwrite(data, 1, len, ((struct file_buffer *)b)->f);
}

/* The ceiling: protobuf-c decoding and re-encoding the file, nothing else. */
static int protobuf_c_only(const char *in, const char *out)
{
	FILE *f = fopen(in, "rb");
	if (!f)
		return 1;
	fseek(f, 0, SEEK_END);
	size_t len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(len);
	if (fread(buf, 1, len, f) != len)
		return 1;
	fclose(f);
	Onnx__Model *m = onnx__model__unpack(NULL, len, buf);
	if (!m)
		return 1;
	FILE *o = fopen(out, "wb");
	setvbuf(o, NULL, _IOFBF, 1 << 20);
	struct file_buffer fb = {{file_append}, o};
	protobuf_c_message_pack_to_buffer(&m->base, &fb.base);
	fclose(o);
	onnx__model__free_unpacked(m, NULL);
	free(buf);
	return 0;
}

struct result {
	double seconds, cpu; /* best wall and best user+sys time */
	long rss_kb;
};

enum { REPS = 5 };

static struct result measure(const char *what, const char *in, const char *out)
{
	struct result best = {1e30, 1e30, 0};
	for (int rep = 0; rep < REPS; rep++) {
		double t0 = now();
		pid_t pid = fork();
		if (pid == 0) {
			if (!strcmp(what, "protobuf-c"))
				_exit(protobuf_c_only(in, out));
			execl(GD_BINARY, GD_BINARY, "convert", in, out, (char *)NULL);
			_exit(127);
		}
		int st;
		struct rusage ru;
		wait4(pid, &st, 0, &ru);
		double dt = now() - t0;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "bench_io: %s failed on %s\n", what, in);
			exit(1);
		}
		double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
		if (dt < best.seconds)
			best.seconds = dt;
		if (cpu < best.cpu)
			best.cpu = cpu;
		if (ru.ru_maxrss > best.rss_kb)
			best.rss_kb = ru.ru_maxrss;
	}
	return best;
}

/* A synthetic graph: a chain of n nodes cycling through Relu, Add (with a shared bias),
 * Mul and Transpose (with an attribute), every tenth value with a shape in value_info. */
static void synth(const char *path, int n)
{
	static char *ops[] = {"Relu", "Add", "Mul", "Transpose"};
	Onnx__Node *nodes = calloc((size_t)n, sizeof *nodes);
	Onnx__Node **np = calloc((size_t)n, sizeof *np);
	char **names = calloc((size_t)n + 1, sizeof *names);
	char **nnames = calloc((size_t)n, sizeof *nnames);
	char ***ins = calloc((size_t)n, sizeof *ins);
	Onnx__Attribute perm = ONNX__ATTRIBUTE__INIT, *pperm = &perm;
	int64_t permv[] = {1, 0};
	perm.name = "perm";
	perm.has_type = 1;
	perm.type = 7;
	perm.n_ints = 2;
	perm.ints = permv;
	int nvi = n / 10;
	Onnx__ValueInfo *vis = calloc((size_t)nvi + 2, sizeof *vis), **vip = calloc((size_t)nvi + 2, sizeof *vip);
	Onnx__Type type = ONNX__TYPE__INIT;
	Onnx__TensorType tt = ONNX__TENSOR_TYPE__INIT;
	Onnx__Shape shape = ONNX__SHAPE__INIT;
	Onnx__Dim d0 = ONNX__DIM__INIT, d1 = ONNX__DIM__INIT, *dims[] = {&d0, &d1};
	d0.has_dim_value = d1.has_dim_value = 1;
	d0.dim_value = d1.dim_value = 64;
	shape.n_dim = 2;
	shape.dim = dims;
	tt.has_elem_type = 1;
	tt.elem_type = 1;
	tt.shape = &shape;
	type.tensor_type = &tt;
	for (int i = 0; i <= n; i++) {
		char buf[48];
		snprintf(buf, sizeof buf, i ? "/block%d/op_output_0" : "input", i);
		names[i] = strdup(buf);
	}
	for (int i = 0; i < n; i++) {
		char buf[48];
		Onnx__Node *nd = &nodes[i];
		*nd = (Onnx__Node)ONNX__NODE__INIT;
		snprintf(buf, sizeof buf, "/block%d/op", i + 1);
		nnames[i] = strdup(buf);
		nd->name = nnames[i];
		nd->op_type = ops[i % 4];
		ins[i] = calloc(2, sizeof(char *));
		ins[i][0] = names[i];
		ins[i][1] = "bias";
		nd->n_input = (i % 4 == 1 || i % 4 == 2) ? 2 : 1;
		nd->input = ins[i];
		nd->n_output = 1;
		nd->output = &names[i + 1];
		if (i % 4 == 3) {
			nd->n_attribute = 1;
			nd->attribute = &pperm;
		}
		np[i] = nd;
	}
	for (int i = 0; i < nvi + 2; i++) {
		vis[i] = (Onnx__ValueInfo)ONNX__VALUE_INFO__INIT;
		vis[i].name = i < nvi ? names[(i + 1) * 10 - 1] : i == nvi ? names[0] : names[n];
		vis[i].type = &type;
		vip[i] = &vis[i];
	}
	float biasv[64 * 64] = {0};
	int64_t bdims[] = {64, 64};
	Onnx__Tensor bias = ONNX__TENSOR__INIT, *pbias = &bias;
	bias.name = "bias";
	bias.has_data_type = 1;
	bias.data_type = 1;
	bias.n_dims = 2;
	bias.dims = bdims;
	bias.has_raw_data = 1;
	bias.raw_data = (ProtobufCBinaryData){sizeof biasv, (uint8_t *)biasv};
	Onnx__Graph g = ONNX__GRAPH__INIT;
	g.name = "synthetic";
	g.n_node = (size_t)n;
	g.node = np;
	g.n_initializer = 1;
	g.initializer = &pbias;
	g.n_input = 1;
	g.input = &vip[nvi];
	g.n_output = 1;
	g.output = &vip[nvi + 1];
	g.n_value_info = (size_t)nvi;
	g.value_info = vip;
	Onnx__OpsetId op = ONNX__OPSET_ID__INIT, *pop = &op;
	op.has_version = 1;
	op.version = 17;
	Onnx__Model m = ONNX__MODEL__INIT;
	m.has_ir_version = 1;
	m.ir_version = 8;
	m.producer_name = "bench_io";
	m.n_opset_import = 1;
	m.opset_import = &pop;
	m.graph = &g;
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	struct file_buffer fb = {{file_append}, f};
	protobuf_c_message_pack_to_buffer(&m.base, &fb.base);
	fclose(f);
	for (int i = 0; i <= n; i++)
		free(names[i]);
	for (int i = 0; i < n; i++) {
		free(nnames[i]);
		free(ins[i]);
	}
	free(names);
	free(nnames);
	free(ins);
	free(nodes);
	free(np);
	free(vis);
	free(vip);
}

static void row(const char *label, const char *path, const char *dir)
{
	struct stat st;
	if (stat(path, &st)) {
		fprintf(stderr, "bench_io: cannot stat %s\n", path);
		exit(1);
	}
	char out1[512], out2[512];
	snprintf(out1, sizeof out1, "%s/pbc-out.onnx", dir);
	snprintf(out2, sizeof out2, "%s/gd-out.onnx", dir);
	struct result p = measure("protobuf-c", path, out1);
	struct result g = measure("graphdiet", path, out2);
	double mb = st.st_size / 1048576.0;
	printf("| %s | %.1f | %.3f / %.3f | %.0f | %.3f / %.3f | %.0f | %.2fx / %.2fx | %.2fx | %.2fx |\n", label, mb,
	       p.seconds, p.cpu, p.rss_kb / 1024.0, g.seconds, g.cpu, g.rss_kb / 1024.0, g.seconds / p.seconds,
	       g.cpu / p.cpu, (g.rss_kb / 1024.0) / mb, (p.rss_kb / 1024.0) / mb);
	fflush(stdout);
	unlink(out1);
	unlink(out2);
}

int main(int argc, char **argv)
{
	int n = 1000000;
	const char *dir = NULL;
	int first_model = argc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--synth") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
			dir = argv[++i];
		else {
			first_model = i;
			break;
		}
	}
	char tmp[] = "/tmp/bench_io-XXXXXX";
	if (!dir)
		dir = mkdtemp(tmp);
	printf("| model | file MB | protobuf-c s (wall / cpu) | protobuf-c RSS MB | graphdiet s (wall / cpu) | "
	       "graphdiet RSS MB | time ratio (wall / cpu) | graphdiet RSS / file | protobuf-c RSS / file |\n"
	       "|---|---|---|---|---|---|---|---|---|\n");
	if (n > 0) {
		char path[512], label[64];
		snprintf(path, sizeof path, "%s/synth-%d.onnx", dir, n);
		synth(path, n);
		snprintf(label, sizeof label, "synthetic, %d nodes", n);
		row(label, path, dir);
		if (dir == tmp)
			unlink(path); /* with --keep the synthetic model stays for profiling */
	}
	for (int i = first_model; i < argc; i++)
		row(argv[i], argv[i], dir);
	if (dir == tmp)
		rmdir(tmp);
	return 0;
}
