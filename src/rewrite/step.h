/* step.h - the end of a training step, in the graph: dynamic loss scaling, the finite check,
 * gradient clipping and the optimizer's update, with their state bound through ONNX
 * TrainingInfoProto update_binding.
 *
 * State is a graph input with an initializer (its starting value) and flagged VALUE_STATE; its next
 * value is a graph output, and update_binding maps the one to the other, so a runner (graphdiet run
 * --steps, or any ONNX runtime fed by a loop) feeds each step's outputs back as the next step's
 * inputs. Parameters updated by the optimizer are bound the same way. Names:
 *   loss_scale, loss_scale_good_steps, loss_scale_hysteresis  dynamic loss scaling
 *   found_inf        bool: some gradient held a NaN or an infinity, and the step was skipped
 *   grad_norm        the gradients' global L2 norm, before clipping
 *   optimizer_step   int64: steps taken (a skipped step does not count, as in PyTorch)
 *   <param>_adam_m, <param>_adam_v, <param>_momentum   optimizer state
 *   <state>_new      the next value of <state>, for every bound state and parameter
 * With diet variables (--diet), each chosen parameter P becomes an INT16 initializer P (value =
 * P x scale) that the forward pass dequantizes (Cast, Mul) into P_dequant, and a DietAdam node reads
 * its gradient as soon as it is complete: a control dependency makes the backward node after the
 * gradient's wait for the update, so the gradient is freed at once. Its state: P_diet_m (beta1 != 0),
 * P_diet_vr and P_diet_vc (2-D) or P_diet_v, and diet_step (int64, the steps taken). With dynamic
 * loss scaling or clipping, which need every gradient first, the updates come after them instead.
 * The order within the step is PyTorch's: backprop from the scaled loss, unscale (autodiff), check
 * every gradient for NaN and infinity, clip the unscaled gradients, update; a step that found a
 * non-finite gradient keeps every parameter and optimizer state bit for bit (Where(found_inf, old,
 * new)) and only moves the loss scale. */
#ifndef GD_STEP_H
#define GD_STEP_H

#include "../ir/graph.h"
#include "replicas.h"

enum loss_scaling_kind { LOSS_SCALE_NONE, LOSS_SCALE_FIXED, LOSS_SCALE_DYNAMIC };

struct loss_scaling {
	enum loss_scaling_kind kind;
	double init;              /* fixed: the scale; dynamic: the first one */
	double growth, backoff;   /* dynamic: the scale's factor after `interval` finite steps, and
				   * after a non-finite one */
	double min, max;          /* dynamic: backoff never goes below min; growth never above max */
	int64_t interval;         /* finite steps in a row before growing */
	int64_t hysteresis;       /* non-finite steps tolerated before backing off (1: none) */
};

enum optimizer_kind { OPTIMIZER_NONE, OPTIMIZER_SGD, OPTIMIZER_ADAM };

struct optimizer {
	enum optimizer_kind kind;
	double lr, momentum;      /* sgd; lr for adam too */
	double beta1, beta2, eps; /* adam */
};

/* Diet variables (tensor2tensor's): parameters stored as INT16 fixed point and updated by DietAdam
 * (ops/diet.h) as soon as their gradient is complete. */
struct diet {
	int on;
	double beta1, beta2, eps, lr, warmup, scale;
	int noam;                 /* schedule=noam (else none: linear warmup) */
	int stochastic;           /* round=stochastic (else nearest) */
	const char *const *params; /* --diet-params; none: every 2-D float parameter */
	size_t n_params;
};

struct step_opts {
	struct loss_scaling ls;
	double clip_norm; /* > 0: scale the gradients so their global L2 norm is at most this */
	struct optimizer opt;
	struct diet diet;
	char *diet_buf; /* the CLI's: what diet.params points into */
	struct replicas rep; /* data-parallel replicas: their all-reduce comes first (replicas.h) */
	int sized;           /* analysis (plan, check): diet storage is sized, not quantized, so that no
			      * weight is read (its INT16 initializer is a described constant) */
};

/* Parses --loss-scale fixed:S | dynamic[:k=v,...] and --optimizer sgd|adam[:k=v,...], starting
 * from the defaults; on failure, returns -1 with why[] saying what is wrong. */
int loss_scaling_parse(const char *arg, struct loss_scaling *ls, char *why, size_t n);
int optimizer_parse(const char *arg, struct optimizer *o, char *why, size_t n);
/* --diet[:beta1=0,beta2=0.98,eps=1e-10,lr=1,schedule=noam|none,warmup=2000,scale=10/32767,
 * round=stochastic|nearest] (arg: what follows the colon, or NULL); sets d->on. */
int diet_parse(const char *arg, struct diet *d, char *why, size_t n);

/* Before autodiff: sets ao's loss scaling (a fixed scale, or the name of dynamic scaling's state
 * loss_scale, which this makes) and the replicas' loss weight. */
struct autodiff_opts;
int step_begin(struct graph *g, const struct step_opts *o, struct autodiff_opts *ao, struct gd_err *e);

/* After autodiff (and any rewrite of the backward pass): appends the replicas' all-reduce, the
 * finite check, clipping, the update and the scale's update for the <param>_grad outputs. With an optimizer the gradients stop
 * being outputs; the new parameters and state are. Nothing happens when o asks for none of it.
 * Training-mode BatchNormalization's running statistics are bound as state with the rest. r (may
 * be NULL) says which parameters --diet covers. */
struct step_report {
	uint32_t diet_params, other_params; /* with --diet: the diet variables, and the rest */
	uint64_t diet_elems, other_elems;
	char others[200];                   /* the first three of the rest, comma-separated */
};
int step_build(struct graph *g, const struct step_opts *o, struct step_report *r, struct gd_err *e);

/* For the step's other builders (shard.c): v's type, dtype of those static dims (-1 out of
 * memory); the model's step TrainingInfoProto, made when there is none, and its initialization
 * graph, likewise (NULL out of memory); whether --diet makes p a diet variable. */
int step_set_type(struct graph *g, struct value *v, int dtype, uint32_t ndim, const int64_t *dims);
struct training_info *step_training_info(struct graph *g);
struct graph *step_init_graph(struct graph *g, struct training_info *ti);
int step_diet_chosen(const struct diet *d, const struct value *p);

/* The model metadata key listing the state that is not a parameter (names one per line), so that
 * a graph read back knows its optimizer state from its parameters. */
#define STEP_STATE_KEY "graphdiet.state"

/* After reading a graph: flags the values STEP_STATE_KEY lists as VALUE_STATE (not trainable). */
void step_mark_state(struct graph *g);

#endif
