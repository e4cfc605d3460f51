/* cli.h - subcommands (one file each, as git's builtins) and what they share. */
#ifndef GD_CLI_H
#define GD_CLI_H

#include "../io/format.h"
#include "../util/err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cli_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

int cmd_info(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_ops(int argc, char **argv);

struct exec_binding;
/* Appends --dim NAME=VALUE (NAME strdup'd, VALUE at least 1) to dims (at most 64); nonzero
 * (after the usage message) when it is bad. */
int cli_add_dim(const char *cmd, const char *arg, struct exec_binding *dims, size_t *n);
/* Frees the names of dims[0..n) (cli_add_dim's) and returns rc: an option refused after --dim. */
int cli_dims_free(struct exec_binding *dims, size_t n, int rc);
/* --checkpoint S and --checkpoint-file F (opt 'c' or 'C'): into c, the file's names into *store
 * (names_free them). Nonzero (after an error message) when bad. */
struct ckpt;
struct names;
int cli_checkpoint(const char *cmd, int opt, const char *arg, struct ckpt *c, struct names *store);
/* "a,b,c" -> an argv-style list (in *list, pointing into *buf, a copy split in place; free both). */
size_t cli_split_names(const char *arg, char **buf, const char ***list);
/* --precision P (opt 'P') and --keep-fp32 OPS (opt 'K'); nonzero (after the usage message) when bad. */
struct cli_precision {
	int dtype; /* 0 or DT_FLOAT: none */
	char *buf;
	const char **keep;
	size_t n_keep;
};
int cli_precision(const char *cmd, int opt, const char *arg, struct cli_precision *p);
/* Applies it to g (rewrite/autocast.h); nothing for float32. */
struct graph;
int cli_autocast(struct graph *g, const struct cli_precision *p, struct gd_err *e);
void cli_precision_free(struct cli_precision *p);
/* --loss-scale (opt 'S'), --optimizer ('O'), --clip-grad-norm ('G'), --diet (CLI_OPT_DIET),
 * --diet-params (CLI_OPT_DIET_PARAMS), --replicas, --bucket-bytes, --loss-reduction,
 * --sync-batchnorm and --shard into so
 * (rewrite/step.h); nonzero (after the usage message)
 * when bad. cli_step_free frees what it kept. */
struct step_opts;
int cli_step(const char *cmd, int opt, const char *arg, struct step_opts *so);
void cli_step_free(struct step_opts *so);
/* Rewrites each argument --diet:ARGS as --diet=ARGS, for getopt (the documented form has a colon). */
void cli_step_argv(int argc, char **argv);
/* --base-dir DIR (every command that reads a model; cli_shared_option takes it): model_base_dir */
enum { CLI_OPT_BASE_DIR = 0x1f0 };
#define CLI_BASE_DIR_OPTION {"base-dir", required_argument, NULL, CLI_OPT_BASE_DIR}
enum { CLI_OPT_DIET = 0x100, CLI_OPT_DIET_PARAMS, CLI_OPT_REPLICAS, CLI_OPT_BUCKET, CLI_OPT_LOSS_REDUCTION, CLI_OPT_BATCH, CLI_OPT_SYNC_BN,
       CLI_OPT_SHARD };
#define CLI_STEP_OPTIONS                                                                                     \
	{"loss-scale", required_argument, NULL, 'S'}, {"clip-grad-norm", required_argument, NULL, 'G'},    \
		{"optimizer", required_argument, NULL, 'O'}, {"diet", optional_argument, NULL, CLI_OPT_DIET},   \
		{"diet-params", required_argument, NULL, CLI_OPT_DIET_PARAMS},                                  \
		{"replicas", required_argument, NULL, CLI_OPT_REPLICAS},                                        \
		{"bucket-bytes", required_argument, NULL, CLI_OPT_BUCKET},                                      \
		{"loss-reduction", required_argument, NULL, CLI_OPT_LOSS_REDUCTION},                            \
		{"sync-batchnorm", no_argument, NULL, CLI_OPT_SYNC_BN},                                        \
		{"shard", required_argument, NULL, CLI_OPT_SHARD}
#define CLI_STEP_CASES                                                                                       \
	case 'S': case 'G': case 'O': case CLI_OPT_DIET: case CLI_OPT_DIET_PARAMS: case CLI_OPT_REPLICAS:  \
	case CLI_OPT_BUCKET: case CLI_OPT_LOSS_REDUCTION: case CLI_OPT_SYNC_BN: case CLI_OPT_SHARD
/* --replicas N (at most this many) */
#define CLI_MAX_REPLICAS 4096
/* Parses a replica count; nonzero (after the usage message) when it is not 1..CLI_MAX_REPLICAS. */
int cli_replicas(const char *cmd, const char *arg, int *n);
/* --backend NAME: the backend (exec/backend.h), opened; nonzero (after the message) when it is not
 * one or cannot run here. */
struct backend;
int cli_backend(const char *arg, const struct backend **b);
/* A whole-number option value from lo to hi into *v: 0, or -1 (nothing printed) for anything else:
 * text after the digits, a leading space or '+', or a number past int64 (strtoll's ERANGE). Every
 * integer option goes through it. */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v);
/* Parses --seed N. */
int cli_parse_seed(const char *cmd, const char *arg, uint64_t *seed);

extern const struct cli_cmd cli_cmds[];

/* Prints "graphdiet: error: MSG" and a pointer to --help, returns GD_EINPUT. */
/* An option error in a subcommand: rc = x, then to its `out:` cleanup, which frees what the
 * options took. */
#define CLI_FAIL(x)       \
	do {              \
		rc = (x); \
		goto out; \
	} while (0)

/* plan --explain's text (also train --explain's, on stderr). */
struct plan_report;
void plan_explain(FILE *f, const struct plan_report *r, int all);
/* --explain (1) or --explain=all (2); -1 after a usage error for another value. */
int cli_explain_level(const char *cmd, const char *arg);

/* A .npy file, or a serialized ONNX TensorProto named *.pb, into t (its data malloc'd, aligned);
 * nonzero with e naming the file. */
struct rtensor;
int cli_tensor_load(const char *path, struct rtensor *t, struct gd_err *e);
/* The file name run -o gives an output NAME (then .npy): characters other than [A-Za-z0-9._-]
 * become '_'. */
void cli_file_name(const char *name, char *buf, size_t n);
/* --batch N (CLI_OPT_BATCH): a size of at least 1 into *n; nonzero after the usage message. */
int cli_batch(const char *cmd, const char *arg, int64_t *n);
/* Says, ahead of e's message, that --batch n met a shape the export fixed, when the error is a node
 * refusing the shapes it was given (exec_fail); other errors are left as they are. */
void cli_batch_hint(struct gd_err *e, int64_t n);
/* --loss-fn mse|cross-entropy into *fn (enum loss_fn); nonzero after the usage message. */
int cli_loss_fn(const char *cmd, const char *arg, int *fn);
/* One line: "graphdiet: error: CMD: MESSAGE (see 'graphdiet CMD --help')"; returns GD_EINPUT. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The running command's argv (main sets it), for naming the option getopt_long refused. */
extern char **cli_argv;
/* Parses a --from/--to value; returns nonzero (after cli_usage) when unknown. */
int cli_format_arg(const char *cmd, const char *opt, const char *arg, enum gd_format *out);
/* Loads a model or prints its error; returns NULL then with *rc set. */
struct graph *cli_load(const char *path, enum gd_format fmt, int *rc);
/* n graphs for n replicas (each its own, for its thread): first, then copies loaded from path;
 * cli_free_copies frees the copies and the array. Nonzero (printed) on failure. */
int cli_load_copies(const char *path, enum gd_format fmt, struct graph *first, int n, struct graph ***out);
void cli_free_copies(struct graph **g, int n);
/* Output formats for --format: text (default), json, yaml. */
enum cli_out { OUT_TEXT, OUT_JSON, OUT_YAML };
int cli_out_arg(const char *cmd, const char *arg, enum cli_out *out);
/* The options every command shares: --from (stored in *from when not NULL), --format (in *fmt),
 * --help (printed to stdout) and unknown options (a usage error). Returns 1 when the command must
 * return *rc now, 0 when the option was handled. */
int cli_shared_option(const char *cmd, int c, const char *help, enum gd_format *from, enum cli_out *fmt, int *rc);
/* The metadata key under which train records the dimensions it fixed (--dim, and --batch's
 * symbolic axis 0): "batch=8\nseq=64". */
#define CLI_DIMS_KEY "graphdiet.dims"
/* Each --dim must name a symbolic dimension of g (its inputs, outputs or value_info), or repeat the
 * value train fixed it to (CLI_DIMS_KEY): else one line naming the dim and what the graph has
 * (its symbolic dimensions, or what train fixed) and GD_EINPUT. */
int cli_check_dims(const char *path, const struct graph *g, const struct exec_binding *dims, size_t n);
/* The format to write OUT in (*to: --to, FMT_AUTO when not given, which to_src names: "--to yaml").
 * Without --to: OUT's extension (.onnx, .yaml/.yml, .dot/.gv), else ONNX for '-', a device, a
 * FIFO and a name without an extension; an unknown extension is refused. A --to the extension
 * contradicts is refused, and so is OUT naming IN itself (the same file), unless same_ok. Nonzero
 * after the usage message. */
int cli_output_format(const char *cmd, const char *in, const char *out, const char *to_src, enum gd_format *to,
		      int same_ok);
/* A note on standard error when a PyTorch export looks made in eval mode: an inference-form
 * BatchNormalization (one output, training_mode 0), or onnx::Conv_N parameters (a BatchNormalization
 * folded into a Conv). Training it is legal, but not what training the PyTorch model does. */
void cli_note_eval_export(const char *path, const struct graph *g);
/* Refuses to write binary data to a terminal, as gzip does. */
int cli_refuse_binary_tty(const char *path, enum gd_format fmt);
/* Ends a command: checks that stdout was written, maps failures to exit codes. */
int cli_finish(int rc);

#endif
