/* steps.h - the state a training graph carries from step to step (ONNX update_binding): each
 * step's bound outputs (<param>_new, the optimizer's moments, optimizer_step, the loss scale) are
 * the next step's values of the state they are bound to. run --steps and verify --replicas of two
 * training graphs (verifysteps.c) carry it the same way. */
#ifndef GRAPHDIET_CLI_STEPS_H
#define GRAPHDIET_CLI_STEPS_H

#include "../exec/exec.h"
#include "../ir/graph.h"

/* A training step's bookkeeping: the state bindings, and the values a step reports. */
struct steps {
	uint32_t n;                  /* bindings */
	struct value **key, **next;  /* state (an initializer or input), and the output feeding it */
	struct rtensor *data;        /* the state's current data (xmalloc'd), once a step has run */
	const struct value *loss, *scale, *found, *norm;
};

/* g's bindings (each key an initializer or graph input, each value a graph output), and the
 * values a step reports: the loss (loss_name, else loss_global, else loss, else the only float
 * scalar output that is no bookkeeping; NULL when none), the loss scale, found_inf and grad_norm.
 * Nonzero with e set for a binding that is neither. steps_free after, whatever it returned. */
int steps_init(struct graph *g, const char *loss_name, struct steps *s, struct gd_err *e);
void steps_free(struct steps *s);
/* After a step run as x: the bound outputs become the state's data. */
int steps_advance(struct steps *s, const struct exec *x, struct gd_err *e);
/* The state's data (after steps_advance) becomes the initializers of its keys in g, the graph
 * steps_init read, whose next run starts from it: for replicas whose state differs (a sharded
 * graph's slices), where one set of exec_opts inputs would give every replica the same. The
 * initializers borrow s's data: run g no more once it is freed or advanced again. */
int steps_to_inits(const struct steps *s, struct graph *g, struct gd_err *e);

#endif
