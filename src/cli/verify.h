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

struct row {
	const char *name;
	double max_abs, max_rel, norm_rel; /* norm_rel: |train - plain| / |plain| in the L2 norm */
	int found, ok;
	int any_nan;       /* any NaN matched any NaN (not only the same bits) */
	int64_t nonfinite; /* NaN and infinite elements, bitwise equal on both sides (else not ok) */
	const char *missing_from; /* where a value not found is missing */
	int owned;                /* name is malloc'd */
	char why[160];            /* what differs besides the values (shape, dtype), when it does */
};

/* How compare treats what tolerances cannot: by default NaN and infinities must be equal bit for bit
 * and integers are compared as numbers; ONNX's backend tests want any NaN to equal any NaN and
 * integers and bools exact. */
enum { CMP_NAN_EQUAL = 1, CMP_EXACT_INTS = 2 };

void compare(struct row *r, const struct rtensor *a, const struct rtensor *b, double rtol, double atol, int how);
/* The table (or JSON/YAML) of rows, and the verdict. */
void report(enum cli_out fmt, const struct row *rows, size_t n_rows, int all_ok, double rtol, double atol, int n_rep,
	    int agree);
/* A tolerance: finite and >= 0; nonzero when s is not one. */
int verify_parse_tol(const char *s, double *out);

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

/* verify --gradcheck MODEL TRAIN (gradcheck.c) */
int run_gradcheck(const char *mpath, const char *tpath, const struct model_loss *ml, struct exec_binding *dims,
		  size_t *n_dims, struct exec_opts *eo, double rtol, double atol, enum cli_out fmt);

#endif
