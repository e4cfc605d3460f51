/* verify.h - what `graphdiet verify`'s modes share: the rows they compare and report
 * (compare.c), the finite-difference check (gradcheck.c), and the steps of the plain mode they
 * reuse (verify.c). */
#ifndef GRAPHDIET_CLI_VERIFY_H
#define GRAPHDIET_CLI_VERIFY_H

#include "../exec/exec.h"
#include "../ir/graph.h"
#include "cli.h"

#include <stddef.h>
#include <stdint.h>

/* How a row is judged (see compare.c for the rules and why each is the default where it is).
 * TOL_ELEMENT: every element within atol + rtol |ref|, plus, when a 16-bit reference is given, that
 * element's own 16-bit error |ref16 - ref|. TOL_SCALED: the same with atol at least rtol max|ref|
 * (float32 sums err by the magnitudes summed, not the result). TOL_NORM: the norm-relative error
 * at most slack times the 16-bit reference's (the noise floor, 0 without one) plus norm. */
enum tol_kind { TOL_ELEMENT, TOL_SCALED, TOL_NORM };

struct tol {
	enum tol_kind kind;
	double rtol, atol, norm;
	int floor;    /* TOL_NORM: a 16-bit reference gives the floor (else norm alone) */
	double slack; /* TOL_NORM: the floor's multiple allowed (1 when 0) */
};

struct row {
	const char *name;
	double max_abs, max_rel, norm_rel; /* norm_rel: |train - plain| / |plain| in the L2 norm */
	double mean_abs;
	double max_rel_floor; /* max_rel is over elements with |ref| >= this (1e-3 max|ref|) */
	double noise;         /* with a 16-bit reference: its norm_rel (the floor); else -1 */
	double off16;         /* with a 16-bit reference: |train - ref16| / |ref| in the L2 norm */
	int found, ok;
	int any_nan;       /* any NaN matched any NaN (not only the same bits) */
	int64_t nonfinite; /* NaN and infinite elements, bitwise equal on both sides (else not ok) */
	const char *missing_from; /* where a value not found is missing */
	int owned;                /* name is malloc'd */
	int has_tol;              /* tol judged this row (else the report's rtol and atol did) */
	struct tol tol;
	const char *tol_from;     /* the --tol pattern that chose tol, when one did */
	char why[160];            /* what differs besides the values (shape, dtype), when it does */
};

/* How compare treats what tolerances cannot: by default NaN and infinities must be equal bit for bit
 * and integers are compared as numbers; ONNX's backend tests want any NaN to equal any NaN and
 * integers and bools exact. */
enum { CMP_NAN_EQUAL = 1, CMP_EXACT_INTS = 2 };

/* b (TRAIN's) against a (the reference), judged by t; a16, when not NULL, is the reference run in
 * TRAIN's 16-bit precision (its difference from a is the noise floor). */
void compare(struct row *r, const struct rtensor *a, const struct rtensor *b, const struct tol *t, int how,
	     const struct rtensor *a16);
/* The table (or JSON/YAML) of rows, and the verdict: report() for rows judged by rtol and atol
 * element by element (gradcheck's), report_rows() for rows that carry their tol, under the
 * header's criterion line `crit` (`sum` ends the verdict line). */
void report(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, double rtol, double atol, int n_rep,
	    int agree);
void report_rows(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, const char *crit,
		 const char *sum, int n_rep, int agree);
/* The criterion for t: in full (the header line) and short (the verdict line's). */
void verify_tol_describe(const struct tol *t, int precision, char *crit, size_t n, char *sum, size_t sn);
/* A tolerance: finite and >= 0; nonzero when s is not one. */
int verify_parse_tol(const char *s, double *out);

/* --tol NAME=RTOL[,ATOL] (NAME a glob, fnmatch(3)): the first that matches a row judges it,
 * element by element. */
struct tol_override {
	char pattern[256];
	double rtol, atol;
	int has_atol;
	size_t hits; /* the rows it judged */
};
/* Nonzero (after the usage message) when arg is not NAME=RTOL[,ATOL]. */
int verify_parse_tol_override(const char *arg, struct tol_override *o);
/* Gives r its tol: the first override matching r->name (atol defaulting to base's, or 0), else
 * base. */
void verify_row_tol(struct row *r, const struct tol *base, struct tol_override *o, size_t n_o);
/* A note for each override that judged no row (a misspelt name). */
void verify_note_unmatched(const struct tol_override *o, size_t n_o);

/* TRAIN's 16-bit precision (DT_FLOAT16 or DT_BFLOAT16), as train --precision marks it: Casts to it
 * that MODEL (when given) does not have; 0 when none. */
int verify_precision(const struct graph *train, const struct graph *model);
/* A graph built with train --optimizer (or --diet) updates its parameters in the step: its
 * update_binding binds a parameter (not optimizer state) to <param>_new, and it has no
 * <param>_grad to compare. When train is such a graph: prints the one-line explanation (naming tpath) and returns GD_EINPUT;
 * else 0. For every mode of verify (gradcheck.c too). */
int verify_refuse_optimizer(const struct graph *train, const char *tpath);

/* The state verify carries from a skipped step to the next run of TRAIN (unskipped). */
struct carried {
	struct rtensor *t; /* data malloc'd; the executor of the next run borrows it */
	const char **names;
	size_t n;
};

void carried_free(struct carried *c);
struct exec *unskipped(struct graph *train, struct exec_opts *eo, struct exec *xt, struct carried *c,
		       struct gd_err *e);
int bind_like_train(struct graph *plain, const struct graph *train, struct exec_binding *dims, size_t *n,
		    struct gd_err *e);

/* What train --loss-fn appended to TRAIN, appended to MODEL too (fn < 0: nothing). */
struct model_loss {
	int fn;
	const char *pred, *target;
};

struct graph *load_model(const char *path, const struct model_loss *ml, int *rc);

/* The update_binding entry of a parameter that g's optimizer (train --optimizer) or --diet
 * updates, else its optimizer_step or diet_step binding; NULL when g updates nothing. */
const struct kv *verify_updated_param(const struct graph *g);
/* Whether every replica's outputs but its own loss (`local`) and those skip marks (by output
 * index; skip may be NULL) have replica 0's bits. */
int verify_replicas_agree(struct graph *const *g, struct exec *const *x, int n, const char *local,
			  const uint8_t *skip);
/* Whether output i of every replica has replica 0's bits. */
int verify_output_agrees(struct graph *const *g, struct exec *const *x, int n, uint32_t i);

/* verify --gradcheck MODEL TRAIN (gradcheck.c) */
int run_gradcheck(const char *mpath, const char *tpath, const struct model_loss *ml, struct exec_binding *dims,
		  size_t *n_dims, struct exec_opts *eo, double rtol, double atol, enum cli_out fmt);

/* verify --replicas N REF TRAIN of two training graphs with an optimizer (verifysteps.c): TRAIN
 * (loaded, the caller's) against REF step for step. */
struct verify_steps_opts {
	int n_rep;
	int shard;   /* --shard: the stage TRAIN must have been built with (enum shard_stage), or -1 */
	long steps;
	struct tol base; /* the rows' criterion, unless a --tol names them */
	struct tol_override *ov;
	size_t n_ov;
	char crit[300], sum[200]; /* the criterion in full and short (report_rows) */
};
/* o's criterion: relative 1e-6 in the L2 norm, or equal values; element by element when --rtol
 * (given & 1) or --atol (given & 2) is given. */
void verify_steps_judge(struct verify_steps_opts *o, double rtol, double atol, int given);
int run_verify_steps(const char *rpath, const char *tpath, struct graph *train, struct exec_opts *eo,
		     const struct verify_steps_opts *o, enum cli_out fmt);

#endif
