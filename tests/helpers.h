/* helpers.h - shared test utilities: paths, loading, running the CLI. */
#ifndef GD_TEST_HELPERS_H
#define GD_TEST_HELPERS_H

#include "exec/exec.h"
#include "ir/graph.h"

#include <stddef.h>
#include <stdint.h>

#define TESTDATA GD_SOURCE_DIR "/testdata"

extern const char *const testdata_models[]; /* NULL-terminated names: TESTDATA/<name>.onnx, ref/<name>/ */
extern const char *const testdata_yaml[];   /* NULL-terminated, relative to TESTDATA */
/* TESTDATA/<model>.onnx into path[n]; returns path. */
const char *model_path(char *path, size_t n, const char *model);

/* Whole file into a malloc'd buffer; asserts on failure. */
uint8_t *slurp(const char *path, size_t *len);
/* A .npy file as an executor tensor (malloc'd, aligned data); 0 when the file does not exist. */
int npy_load(const char *path, struct rtensor *t);
/* testdata/ref/<model>/<name>.npy (PyTorch's numbers) into path[n]; returns path. */
const char *ref_path(char *path, size_t n, const char *model, const char *name);
/* The inputs PyTorch fed `model`, from testdata/ref/<model>/: one per graph input of g that is not
 * an initializer (at most 8; names point into g). Returns how many. */
size_t ref_inputs(const struct graph *g, const char *model, struct rtensor *ts, const char **names);
/* model_load with an assertion that it worked. */
struct graph *load_ok(const char *path);
/* TESTDATA/<model>.onnx planned with checkpoint `strategy` at batch = `batch` (plan_memory, which
 * builds the training graph and rewrites it), with assertions that it worked. */
struct plan_report;
struct graph *planned_ok(const char *model, const char *strategy, int64_t batch, struct plan_report *r);
/* Writes `text` to `name` in the temporary directory; its path goes to path[n]. */
void write_text(char *path, size_t n, const char *name, const char *text);
/* write_text of a model `name`.yaml, then `graphdiet train` of it to <name>_train.onnx beside it,
 * asserting that it worked; the paths go to model[n] and train[n]. */
void train_text(char *model, char *train, size_t n, const char *name, const char *text);
/* The number after "key": in a JSON text graphdiet printed; asserts that it is there. */
double json_num(const char *json, const char *key);
/* write_text, then load_ok. */
struct graph *load_text(const char *name, const char *text);
/* x (8 floats) -> Relu -> a -> Neg -> b -> Tanh -> y, in YAML. */
extern const char chain_yaml[];
/* Serialises g as ONNX (fmt 0) or YAML (fmt 1) into a malloc'd buffer. */
uint8_t *write_mem(struct graph *g, int yaml, size_t *len);

struct run_result {
	int status; /* exit code, or 128+signal */
	char *out, *err;
	size_t out_len, err_len;
};
/* Runs argv (argv[0] is a path) with optional stdin data; captures output. */
struct run_result run_cmd(char *const argv[], const uint8_t *in, size_t in_len);
void run_free(struct run_result *r);
/* Runs Debian's python3 -c code (with sys.argv[1] = arg when given); asserts it exits 0, naming
 * `what` and showing its stderr otherwise. */
void python_ok(const char *code, const char *arg, const char *what);
/* An executor tensor over data (not owned). */
struct rtensor rt_over(int dtype, int ndim, const int64_t *dims, void *data);
/* Arbitrary but fixed data for a DietAdam over factors: q and m (r x c), the factors a (k x r) and
 * b (k x c), the second moments vr (r) and vc (c). */
void diet_factor_data(int16_t *q, float *m, float *a, float *b, float *vr, float *vc, int r, int c, int k);
/* Two runs x[0], x[1] of graphs g[0], g[1] that update INT16 q (n elements, before) by DietAdam
 * into outputs qn, mn, vrn, vcn made the same update: q' at most `steps` grid steps apart (0: the
 * same bits), more than half of q moved, the moments equal to float32 rounding. `tag` names the
 * case in messages. */
void diet_expect_same_update(struct exec *const *x, struct graph *const *g, const int16_t *q, int64_t n, int steps,
			     int tag);
/* A fresh temporary directory (removed at exit is not needed: under /tmp). */
/* Expects got to equal want: dtype, shape, floats within atol + rtol |want| (NaN equal to NaN),
 * other dtypes exactly. */
void expect_tensor_close(const struct rtensor *got, const struct rtensor *want, double rtol, double atol, const char *what);
/* The .npy file of g's k-th input (initializers not counted) or k-th output, named `name`, into buf. */
typedef void (*npy_file_fn)(const void *ctx, int is_output, size_t k, const char *name, char *buf, size_t n);
/* Runs g on the .npy inputs `file` names and expects every output to equal its .npy file
 * (expect_tensor_close). */
void expect_run_matches_npy(struct graph *g, npy_file_fn file, const void *ctx, double rtol, double atol, const char *what);
const char *tmpdir(void);
/* Every graphdiet process a test binary starts from here on multiplies float32 on the kernel this
 * process picks (ops/blas.c times graphdiet's and OpenBLAS's once per process and takes graphdiet's
 * only when clearly faster): on a loaded machine two processes could pick differently (seen: a
 * plain and a checkpointed run of the zoo's LSTM, and a run with and without --replicas 1, under a
 * load of 7 to 10 on 2 cores), and tests that compare bits across processes would see the two
 * kernels' roundings, not a defect. Sets GRAPHDIET_SGEMM, unless the caller has set it. For a
 * constructor of the test binaries whose tests compare processes' bits and none of the pick's. */
void pin_sgemm(void);
/* The run statistics (FLOPs, bytes) of the YAML model `text`, named name, on random inputs. */
struct exec_stats stats_of(const char *name, const char *text);

#endif
