/* step.c - the end of a training step, in the graph; see step.h.
 *
 * Every new node is tagged backward (loss-scale ones loss_scale too) and appended after the
 * backward pass, in the order made, which is topological. All scalars are float32 except the
 * counters (int64); a float64 parameter gets its scalars cast. */
#include "step.h"
#include "fold.h"
#include "recompute.h"
#include "shard.h"
#include "../autodiff/ad.h"
#include "../io/tensor.h"
#include "../ops/diet.h"
#include "../ops/kernel.h"
#include "../ops/ops.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <float.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ---- */

/* "k=v,k=v" into vals, by keys (each a finite number; the callers check ranges). */
static int parse_kvs(const char *s, const char *const *keys, double *vals, int n_keys, char *why, size_t n)
{
	while (s && *s) {
		const char *eq = strchr(s, '='), *comma = strchr(s, ',');
		size_t klen = eq && (!comma || eq < comma) ? (size_t)(eq - s) : 0;
		int k = 0;
		while (k < n_keys && !(klen && strlen(keys[k]) == klen && !strncmp(keys[k], s, klen)))
			k++;
		if (k == n_keys) {
			snprintf(why, n, "'%.*s' is not one of", (int)(comma ? (size_t)(comma - s) : strlen(s)), s);
			for (int i = 0; i < n_keys; i++)
				snprintf(why + strlen(why), n - strlen(why), " %s=", keys[i]);
			return -1;
		}
		char *end = NULL;
		vals[k] = strtod(eq + 1, &end);
		if (end == eq + 1 || (*end && *end != ',') || !isfinite(vals[k])) {
			snprintf(why, n, "%s: '%.*s' is not a number", keys[k], (int)strcspn(eq + 1, ","), eq + 1);
			return -1;
		}
		s = *end ? end + 1 : end;
	}
	return 0;
}

int loss_scaling_parse(const char *arg, struct loss_scaling *ls, char *why, size_t n)
{
	*ls = (struct loss_scaling){.kind = LOSS_SCALE_DYNAMIC, .init = 65536, .growth = 2, .backoff = 0.5,
				    .interval = 2000, .min = 1, .max = 16777216, .hysteresis = 1};
	if (!strncmp(arg, "fixed:", 6)) {
		char *end = NULL;
		ls->kind = LOSS_SCALE_FIXED;
		ls->init = strtod(arg + 6, &end);
		if (end == arg + 6 || *end || !(ls->init > 0) || ls->init > FLT_MAX) {
			snprintf(why, n, "fixed:S wants S a positive float32 number");
			return -1;
		}
		return 0;
	}
	if (strcmp(arg, "dynamic") && strncmp(arg, "dynamic:", 8)) {
		snprintf(why, n, "not fixed:S or dynamic[:init=,growth=,backoff=,interval=,min=,max=,hysteresis=]");
		return -1;
	}
	static const char *const keys[] = {"init", "growth", "backoff", "interval", "min", "max", "hysteresis"};
	double v[7] = {ls->init, ls->growth, ls->backoff, (double)ls->interval, ls->min, ls->max, (double)ls->hysteresis};
	if (parse_kvs(arg[7] ? arg + 8 : NULL, keys, v, 7, why, n))
		return -1;
	const char *bad = !(v[0] > 0 && v[0] <= FLT_MAX)	  ? "init must be a positive float32 number"
			  : !(v[1] > 1)				  ? "growth must be more than 1"
			  : !(v[2] > 0 && v[2] < 1)		  ? "backoff must lie between 0 and 1"
			  : !(v[3] >= 1 && v[3] == floor(v[3]) && v[3] < 1e15) ? "interval must be a whole number, at least 1"
			  : !(v[4] > 0 && v[4] <= FLT_MAX)	  ? "min must be a positive float32 number"
			  : !(v[5] >= v[4] && v[5] <= FLT_MAX)	  ? "max must be a float32 number, at least min"
			  : !(v[6] >= 1 && v[6] == floor(v[6]) && v[6] < 1e15) ? "hysteresis must be a whole number, at least 1"
									      : NULL;
	if (bad) {
		snprintf(why, n, "%s", bad);
		return -1;
	}
	*ls = (struct loss_scaling){.kind = LOSS_SCALE_DYNAMIC, .init = v[0], .growth = v[1], .backoff = v[2],
				    .interval = (int64_t)v[3], .min = v[4], .max = v[5], .hysteresis = (int64_t)v[6]};
	return 0;
}

int optimizer_parse(const char *arg, struct optimizer *o, char *why, size_t n)
{
	static const char *const sgd[] = {"lr", "momentum"}, *const adam[] = {"lr", "beta1", "beta2", "eps"};
	size_t len = strcspn(arg, ":");
	const char *rest = arg[len] ? arg + len + 1 : NULL;
	if (len == 3 && !strncmp(arg, "sgd", 3)) {
		double v[2] = {0.01, 0};
		if (parse_kvs(rest, sgd, v, 2, why, n))
			return -1;
		if (!(v[0] > 0) || !(v[1] >= 0 && v[1] < 1)) {
			snprintf(why, n, "sgd wants lr > 0 and 0 <= momentum < 1");
			return -1;
		}
		*o = (struct optimizer){.kind = OPTIMIZER_SGD, .lr = v[0], .momentum = v[1]};
		return 0;
	}
	if (len == 4 && !strncmp(arg, "adam", 4)) {
		double v[4] = {0.001, 0.9, 0.999, 1e-8};
		if (parse_kvs(rest, adam, v, 4, why, n))
			return -1;
		if (!(v[0] > 0) || !(v[1] >= 0 && v[1] < 1) || !(v[2] >= 0 && v[2] < 1) || !(v[3] > 0)) {
			snprintf(why, n, "adam wants lr > 0, 0 <= beta1, beta2 < 1 and eps > 0");
			return -1;
		}
		*o = (struct optimizer){.kind = OPTIMIZER_ADAM, .lr = v[0], .beta1 = v[1], .beta2 = v[2], .eps = v[3]};
		return 0;
	}
	snprintf(why, n, "not sgd[:lr=,momentum=] or adam[:lr=,beta1=,beta2=,eps=]");
	return -1;
}

int diet_parse(const char *arg, struct diet *d, char *why, size_t n)
{
	const char *const *params = d->params;
	size_t n_params = d->n_params;
	*d = (struct diet){1, DIET_BETA1, DIET_BETA2, DIET_EPS, DIET_LR, DIET_WARMUP, DIET_SCALE, 1, 1, params, n_params};
	for (const char *s = arg; s && *s;) {
		size_t len = strcspn(s, ","), klen = strcspn(s, "=");
		if (klen >= len) {
			snprintf(why, n, "'%.*s' is not key=value", (int)len, s);
			return -1;
		}
		const char *v = s + klen + 1;
		size_t vlen = len - klen - 1;
#define KEY(k) (klen == strlen(k) && !strncmp(s, k, klen))
#define VAL(w) (vlen == strlen(w) && !strncmp(v, w, vlen))
		if (KEY("schedule") && (VAL("noam") || VAL("none"))) {
			d->noam = VAL("noam");
		} else if (KEY("round") && (VAL("stochastic") || VAL("nearest"))) {
			d->stochastic = VAL("stochastic");
		} else if (KEY("beta1") || KEY("beta2") || KEY("eps") || KEY("lr") || KEY("warmup") || KEY("scale")) {
			char *end = NULL;
			double x = strtod(v, &end);
			if (KEY("scale") && end && *end == '/' && end < v + vlen) /* 10/32767 */
				x /= strtod(end + 1, &end);
			int ok = end == v + vlen && isfinite(x);
			ok &= KEY("beta1") || KEY("beta2") ? x >= 0 && x < 1 : KEY("eps") ? x >= 0 : x > 0;
			if (!ok) {
				snprintf(why, n, "%.*s: '%.*s' is out of range", (int)klen, s, (int)vlen, v);
				return -1;
			}
			*(KEY("beta1") ? &d->beta1 : KEY("beta2") ? &d->beta2 : KEY("eps") ? &d->eps : KEY("lr") ? &d->lr
			  : KEY("warmup") ? &d->warmup : &d->scale) = x;
		} else {
			snprintf(why, n, "'%.*s' is not one of beta1=, beta2=, eps=, lr=, schedule=noam|none, warmup=, "
				 "scale=, round=stochastic|nearest", (int)len, s);
			return -1;
		}
#undef KEY
#undef VAL
		s += len + (s[len] == ',');
	}
	return 0;
}

/* ---- building ---- */

struct sb {
	struct graph *g;
	struct gd_err *e;
	uint32_t tags;
	int sized;                /* step_opts.sized */
	const struct replicas *rep; /* step_opts.rep */
	struct kv *bind;          /* update_binding made here (xmalloc'd), committed once at the end */
	size_t n_bind, cap_bind;
	struct kv *ibind;         /* initialization_binding made here (diet storage), the same way */
	size_t n_ibind, cap_ibind;
	char *state_names;        /* STEP_STATE_KEY's lines, grown as state is made (xmalloc'd) */
	size_t state_len, cap_state;
	struct cached {           /* constants and casts, made once per (value, dtype, tags): a
				   * forward node (diet dequantization) reads no backward constant */
		const struct value *of; /* the cast value; NULL for a constant */
		int dtype;
		uint32_t tags;
		double v;
		struct value *made;
	} cache[32];
	uint32_t n_cache;
};

static int sb_fail(struct sb *s)
{
	return s->e->code ? s->e->code : err_oom(s->e);
}

/* A node `op` over ins, its output named after `out`; NULL (error set) on failure or when an input
 * is NULL (an earlier failure). */
static struct value *op(struct sb *s, const char *opname, const char *out, int n_in, struct value *a, struct value *b,
			struct value *c)
{
	struct value *ins[3] = {a, b, c};
	for (int i = 0; i < n_in; i++)
		if (!ins[i])
			return NULL;
	struct node *nd = graph_add_op(s->g, out, opname, ins, (uint32_t)n_in, out, s->e);
	if (!nd) {
		sb_fail(s);
		return NULL;
	}
	nd->tags |= s->tags;
	return nd->out[0];
}

static struct value *op_int(struct sb *s, const char *opname, const char *out, struct value *a, const char *attr,
			    int64_t v)
{
	struct value *r = op(s, opname, out, 1, a, NULL, NULL);
	if (r && node_add_int(s->g, r->producer, attr, v)) {
		err_oom(s->e);
		return NULL;
	}
	return r;
}

static void fill(void *p, int dtype, int64_t numel, double v)
{
	for (int64_t i = 0; i < numel; i++)
		if (dtype == DT_FLOAT)
			((float *)p)[i] = (float)v;
		else if (dtype == DT_DOUBLE)
			((double *)p)[i] = v;
		else if (dtype == DT_INT64)
			((int64_t *)p)[i] = (int64_t)v;
		else if (dtype == DT_FLOAT16)
			((uint16_t *)p)[i] = f16_from_f32((float)v);
		else
			((uint16_t *)p)[i] = bf16_from_f32((float)v);
}

static struct value **cached(struct sb *s, const struct value *of, int dtype, double v)
{
	for (uint32_t i = 0; i < s->n_cache; i++)
		if (s->cache[i].of == of && s->cache[i].dtype == dtype && s->cache[i].tags == s->tags &&
		    !memcmp(&s->cache[i].v, &v, sizeof v))
			return &s->cache[i].made;
	if (s->n_cache == sizeof s->cache / sizeof *s->cache)
		return NULL;
	s->cache[s->n_cache] = (struct cached){of, dtype, s->tags, v, NULL};
	return &s->cache[s->n_cache++].made;
}

/* A scalar constant of dtype. */
static struct value *scalar(struct sb *s, int dtype, double v)
{
	struct value **c = cached(s, NULL, dtype, v);
	if (c && *c)
		return *c;
	struct node *nd = graph_add_scalar(s->g, dtype == DT_INT64 ? "step_int" : "step_const", dtype, v, s->e);
	if (!nd) {
		sb_fail(s);
		return NULL;
	}
	nd->tags |= s->tags;
	return c ? (*c = nd->out[0]) : nd->out[0];
}

int step_set_type(struct graph *g, struct value *v, int dtype, uint32_t ndim, const int64_t *dims)
{
	v->type = (struct ttype){.dtype = dtype, .has_type = true, .has_tensor = true, .has_dtype = true,
				 .has_shape = true, .ndim = ndim};
	v->type.dims = arena_array(g->arena, ndim ? ndim : 1, sizeof *v->type.dims);
	if (!v->type.dims)
		return -1;
	for (uint32_t k = 0; k < ndim; k++)
		v->type.dims[k] = (struct dim){.kind = DIM_VALUE, .value = dims[k]};
	return 0;
}

/* New state `name` (exactly), a graph input whose initializer holds `init` everywhere. A scalar's
 * bytes are stored; a float tensor's (moments, a momentum buffer: a parameter's size) are described
 * (TSRC_RANDOM, constant), made only when a run binds them, so that analysis allocates nothing of
 * a weight's size, and the written graph starts them from TrainingInfoProto.initialization
 * (step_initialization). */
static struct value *state(struct sb *s, const char *name, int dtype, uint32_t ndim, const int64_t *dims, double init)
{
	struct graph *g = s->g;
	if (strmap_get(&g->names, name)) {
		err_set(s->e, GD_EINPUT, "the model already has a value named '%s', which the training step's state needs",
			name);
		return NULL;
	}
	int64_t numel = 1;
	for (uint32_t k = 0; k < ndim; k++)
		numel *= dims[k];
	int described = ndim && (dtype == DT_FLOAT || dtype == DT_DOUBLE);
	size_t nbytes = described ? 0 : (size_t)numel * dtype_size(dtype);
	struct tensor *t = arena_zalloc(g->arena, sizeof *t);
	void *data = described ? NULL : arena_alloc(g->arena, nbytes ? nbytes : 1);
	const char *nm = arena_strdup(g->arena, name);
	struct value *v = t && (data || described) && nm ? graph_value(g, nm, s->e) : NULL;
	if (!v || step_set_type(g, v, dtype, ndim, dims)) {
		sb_fail(s);
		return NULL;
	}
	if (described)
		*t = (struct tensor){.name = nm, .dtype = dtype, .ndim = ndim, .src = TSRC_RANDOM,
				     .rnd = {.dist = RND_CONSTANT, .a = init}};
	else
		*t = (struct tensor){.name = nm, .dtype = dtype, .ndim = ndim, .src = TSRC_BYTES, .field = TFIELD_RAW,
				     .bytes = {data, nbytes}};
	if (!described)
		fill(data, dtype, numel, init);
	t->dims = ndim ? arena_memdup(g->arena, dims, ndim * sizeof *dims) : NULL;
	if ((ndim && !t->dims) || graph_add_init(g, v, t, s->e) || graph_add_input(g, v, s->e)) {
		sb_fail(s);
		return NULL;
	}
	v->flags = (v->flags & ~VALUE_PARAM) | VALUE_STATE;
	/* recorded for readers (step_mark_state) */
	size_t len = strlen(name);
	if (s->state_len + len + 2 > s->cap_state) {
		size_t cap = 2 * s->cap_state + len + 64;
		char *names = xrealloc(s->state_names, cap);
		if (!names) {
			err_oom(s->e);
			return NULL;
		}
		s->state_names = names;
		s->cap_state = cap;
	}
	memcpy(s->state_names + s->state_len, name, len);
	s->state_len += len;
	s->state_names[s->state_len++] = '\n';
	s->state_names[s->state_len] = 0;
	return v;
}

/* The model's step TrainingInfoProto: the first one, made when there is none. Its algorithm graph
 * is empty: the whole step is the main graph, so that any runtime can run it as it is. */
struct training_info *step_training_info(struct graph *g)
{
	struct model *m = g->model;
	if (!m->n_ti) {
		struct training_info *ti = arena_zalloc(g->arena, sizeof *ti);
		struct graph *algo = ti ? graph_new_sub(g) : NULL;
		if (!algo)
			return NULL;
		algo->name = "graphdiet_step";
		algo->doc = "Empty: the training step (forward, backward, update) is the main graph, whose outputs "
			    "update_binding feeds back into its initializers.";
		ti->algo = algo;
		m->ti = ti;
		m->n_ti = 1;
	}
	return &m->ti[0];
}

/* Makes `next` the output <key>_new and binds it to key. */
static int bind(struct sb *s, struct value *key, struct value *next)
{
	if (!next)
		return sb_fail(s);
	struct graph *g = s->g;
	char name[600];
	JOIN(name, sizeof name, key->name, "_new");
	const struct tensor *t = key->init;
	if (s->n_bind == s->cap_bind) {
		size_t cap = 2 * s->cap_bind + 16;
		struct kv *b = xrealloc(s->bind, cap * sizeof *b);
		if (!b)
			return err_oom(s->e);
		s->bind = b;
		s->cap_bind = cap;
	}
	if (graph_rename_fresh(g, next, name, s->e) || step_set_type(g, next, t->dtype, t->ndim, t->dims))
		return sb_fail(s);
	s->bind[s->n_bind++] = (struct kv){.key = key->name, .value = next->name};
	next->flags |= key->flags & VALUE_STATE;
	/* a runtime feeds state as an input (an initializer that is no input is a constant to it),
	 * which ONNX wants typed */
	if (!key->type.has_type && step_set_type(g, key, t->dtype, t->ndim, t->dims))
		return err_oom(s->e);
	if (!(key->flags & VALUE_INPUT) && graph_add_input(g, key, s->e))
		return s->e->code;
	return graph_add_output(g, next, s->e);
}

struct graph *step_init_graph(struct graph *g, struct training_info *ti)
{
	if (!ti->init && (ti->init = graph_new_sub(g))) {
		ti->init->name = "graphdiet_initialization";
		ti->init->doc = "The training state's first values, made here rather than stored: the optimizer "
				"state by ConstantOfShape, diet variables' INT16 storage from the float32 weights.";
	}
	return ti->init;
}

/* State v, described (state()), made by ti's initialization graph: v = ConstantOfShape(<v's
 * dims>, value=<its constant>), the output <v>_initial bound to v (initialization_binding, added
 * to *bind). What stock tools read; graphdiet's reader gives v its description back. */
static int initialize(struct sb *s, struct training_info *ti, const struct value *v, struct kv *bind)
{
	struct graph *g = s->g, *ig = step_init_graph(s->g, ti);
	const struct tensor *t = v->init;
	if (!ig)
		return err_oom(s->e);
	char name[640], out[640];
	JOIN(name, sizeof name, v->name, "_shape");
	JOIN(out, sizeof out, v->name, "_initial");
	int64_t rank = t->ndim;
	struct tensor *st = arena_zalloc(g->arena, sizeof *st), *vt = arena_zalloc(g->arena, sizeof *vt);
	int64_t *dims = arena_memdup(g->arena, t->dims, t->ndim * sizeof *dims), *one = arena_array(g->arena, 1, sizeof *one);
	void *fillv = arena_alloc(g->arena, sizeof(double));
	struct attr *a = arena_zalloc(g->arena, sizeof *a);
	const char *sn = st && vt && dims && one && fillv && a ? graph_fresh_name(ig, name, s->e) : NULL;
	struct value *sv = sn ? graph_value(ig, sn, s->e) : NULL;
	if (!sv || step_set_type(ig, sv, DT_INT64, 1, &rank))
		return sb_fail(s);
	*st = (struct tensor){.name = sn, .dtype = DT_INT64, .ndim = 1, .dims = arena_memdup(g->arena, &rank, sizeof rank),
			      .src = TSRC_BYTES, .field = TFIELD_RAW, .bytes = {(const uint8_t *)dims, t->ndim * sizeof *dims}};
	*one = 1;
	fill(fillv, t->dtype, 1, t->rnd.a);
	*vt = (struct tensor){.name = "value", .dtype = t->dtype, .ndim = 1, .dims = one, .src = TSRC_BYTES,
			      .field = TFIELD_RAW, .bytes = {fillv, dtype_size(t->dtype)}};
	*a = (struct attr){.name = "value", .type = ATTR_TENSOR, .has_type = true, .t = vt};
	struct node *n = st->dims && !graph_add_init(ig, sv, st, s->e) ?
				 graph_add_op(ig, out, "ConstantOfShape", &sv, 1, out, s->e) : NULL;
	if (!n || step_set_type(ig, n->out[0], t->dtype, t->ndim, t->dims) || graph_add_output(ig, n->out[0], s->e))
		return sb_fail(s);
	n->attr = a;
	n->n_attr = 1;
	*bind = (struct kv){.key = v->name, .value = n->out[0]->name};
	return 0;
}

/* Commits what s made: the bindings to the step's TrainingInfoProto (the described state's
 * initialization too), the state's names to the model's STEP_STATE_KEY (appended to what is
 * there). */
static int commit(struct sb *s)
{
	struct arena *a = s->g->arena;
	size_t n_init = 0;
	for (const char *p = s->state_names; p && *p; p += strcspn(p, "\n") + 1) {
		char name[600];
		snprintf(name, sizeof name, "%.*s", (int)strcspn(p, "\n"), p);
		const struct value *v = strmap_get(&s->g->names, name);
		n_init += v && v->init && v->init->src == TSRC_RANDOM;
	}
	if (n_init || s->n_ibind) {
		struct training_info *ti = step_training_info(s->g);
		struct kv *b = ti ? arena_array(a, ti->n_init_bind + s->n_ibind + n_init, sizeof *b) : NULL;
		if (!b)
			return err_oom(s->e);
		if (ti->n_init_bind)
			memcpy(b, ti->init_bind, ti->n_init_bind * sizeof *b);
		if (s->n_ibind)
			memcpy(b + ti->n_init_bind, s->ibind, s->n_ibind * sizeof *b);
		size_t k = ti->n_init_bind + s->n_ibind;
		for (const char *p = s->state_names; *p; p += strcspn(p, "\n") + 1) {
			char name[600];
			snprintf(name, sizeof name, "%.*s", (int)strcspn(p, "\n"), p);
			const struct value *v = strmap_get(&s->g->names, name);
			if (v && v->init && v->init->src == TSRC_RANDOM && initialize(s, ti, v, &b[k++]))
				return s->e->code;
		}
		ti->init_bind = b;
		ti->n_init_bind = k;
	}
	if (s->n_bind) {
		struct training_info *ti = step_training_info(s->g);
		struct kv *b = ti ? arena_array(a, ti->n_update_bind + s->n_bind, sizeof *b) : NULL;
		if (!b)
			return err_oom(s->e);
		if (ti->n_update_bind)
			memcpy(b, ti->update_bind, ti->n_update_bind * sizeof *b);
		memcpy(b + ti->n_update_bind, s->bind, s->n_bind * sizeof *b);
		ti->update_bind = b;
		ti->n_update_bind += s->n_bind;
	}
	if (!s->state_len)
		return 0;
	const char *had = model_meta(s->g, STEP_STATE_KEY);
	char *v = arena_printf(a, "%s%s", had ? had : "", s->state_names);
	return v && !model_set_meta(s->g, STEP_STATE_KEY, v) ? 0 : err_oom(s->e);
}

static void sb_free(struct sb *s)
{
	xfree(s->bind);
	xfree(s->ibind);
	xfree(s->state_names);
}

int step_begin(struct graph *g, const struct step_opts *o, struct autodiff_opts *ao, struct gd_err *e)
{
	ao->loss_scale = o->ls.kind == LOSS_SCALE_FIXED ? o->ls.init : 0;
	ao->loss_scale_value = NULL;
	ao->loss_weight = 1;
	if (!o->rep.n && (o->rep.bucket_bytes || o->rep.reduction || o->rep.sync_bn))
		return err_set(e, GD_EINPUT, "%s is for --replicas", o->rep.bucket_bytes ? "--bucket-bytes"
				       : o->rep.reduction ? "--loss-reduction" : "--sync-batchnorm");
	if (o->rep.shard && !o->rep.n)
		return err_set(e, GD_EINPUT, "--shard is for --replicas");
	if (o->rep.shard && o->opt.kind == OPTIMIZER_NONE)
		return err_set(e, GD_EINPUT, "--shard %s needs --optimizer sgd|adam: the replicas shard what the optimizer "
					     "updates (without one, the whole gradients are the graph's outputs)",
			       shard_name(o->rep.shard));
	if (o->rep.n && replicas_begin(g, &o->rep, ao->loss, &ao->loss_weight, e))
		return e->code;
	if (o->rep.shard == SHARD_PARAMETERS && shard_parameters(g, o, ao, e))
		return e->code;
	if (o->ls.kind != LOSS_SCALE_DYNAMIC)
		return 0;
	struct sb s = {.g = g, .e = e};
	struct value *v = state(&s, "loss_scale", DT_FLOAT, 0, NULL, o->ls.init);
	int rc = v ? commit(&s) : sb_fail(&s);
	sb_free(&s);
	if (!rc)
		ao->loss_scale_value = v->name;
	return rc;
}

/* v (a float32 scalar) in dtype: a parameter's, when it is not float32. One Cast per (v, dtype). */
static struct value *as(struct sb *s, struct value *v, int dtype)
{
	if (dtype == DT_FLOAT || !v)
		return v;
	struct value **c = cached(s, v, dtype, 0);
	if (c && *c)
		return *c;
	struct value *r = op_int(s, "Cast", "step_cast", v, "to", dtype);
	return c ? (*c = r) : r;
}

struct param_grad {
	struct value *p, *g;
	uint32_t out; /* g's place in the graph outputs */
	int slice;    /* g is this replica's slice of the sum (shard.h), not all of it */
};

/* The Sum of parts[0 .. n) (n >= 1; parts[0] for one). */
static struct value *sum_of(struct sb *s, struct value **parts, uint32_t n, const char *out)
{
	if (s->e->code)
		return NULL;
	struct node *nd = n == 1 ? NULL : graph_add_op(s->g, out, "Sum", parts, n, out, s->e);
	if (nd)
		nd->tags |= s->tags;
	return n == 1 ? parts[0] : nd ? nd->out[0] : NULL;
}


/* Sum over the gradients of ReduceSum(f(g)), in float32: f(g) = g*0 (0 when g is finite, else NaN)
 * or g*g; the slices' part summed over the replicas. */
static struct value *sum_over(struct sb *s, const struct param_grad *pg, uint32_t n, int square, const char *out)
{
	struct value **parts = xmalloc(sizeof *parts * (n + 1));
	if (!parts) {
		err_oom(s->e);
		return NULL;
	}
	uint32_t n_sliced = 0, k = 0;
	for (int pass = 0; pass < 2; pass++) /* the slices' parts first */
		for (uint32_t i = 0; i < n; i++) {
			if (pg[i].slice == pass)
				continue;
			int dt = pg[i].p->init->dtype;
			struct value *f = op(s, "Mul", out, 2, pg[i].g, square ? pg[i].g : scalar(s, dt, 0), NULL);
			parts[k] = op_int(s, "ReduceSum", out, f, "keepdims", 0);
			if (dt != DT_FLOAT)
				parts[k] = op_int(s, "Cast", out, parts[k], "to", DT_FLOAT);
			k++;
			n_sliced += !pass;
		}
	struct value *total = NULL;
	if (n_sliced) {
		struct value *mine = sum_of(s, parts, n_sliced, out);
		struct node *ar = mine ? replicas_all_reduce(s->g, s->rep->n, &mine, 1, s->tags | TAG_COMM, s->e) : NULL;
		parts[n_sliced - 1] = ar ? ar->out[0] : NULL;
		total = ar ? sum_of(s, parts + n_sliced - 1, n - n_sliced + 1, out) : NULL;
	} else {
		total = sum_of(s, parts, n, out);
	}
	xfree(parts);
	if (!total)
		sb_fail(s);
	return total;
}

/* Where(c, a, b) (c NULL: b) */
static struct value *pick(struct sb *s, struct value *c, struct value *a, struct value *b, const char *out)
{
	return c ? op(s, "Where", out, 3, c, a, b) : b;
}

/* The scale's update, PyTorch's GradScaler with apex/DeepSpeed's min, max and hysteresis:
 *   found_inf: hysteresis left > 1 ? one less : scale = max(scale * backoff, min);  good = 0
 *   else:      good + 1 == interval ? (scale * growth <= max ? scale *= growth), good = 0,
 *              hysteresis left = hysteresis  :  good += 1 */
static int scale_update(struct sb *s, const struct loss_scaling *ls, struct value *scale, struct value *found)
{
	struct value *good = state(s, "loss_scale_good_steps", DT_INT64, 0, NULL, 0);
	struct value *hyst = ls->hysteresis > 1 ? state(s, "loss_scale_hysteresis", DT_INT64, 0, NULL, (double)ls->hysteresis)
						: NULL;
	if (!good || (ls->hysteresis > 1 && !hyst))
		return sb_fail(s);
	const char *o = "loss_scale_update";
	struct value *one = scalar(s, DT_INT64, 1), *zero = scalar(s, DT_INT64, 0);
	struct value *succ = op(s, "Add", o, 2, good, one, NULL);
	struct value *at = op(s, "Not", o, 1, op(s, "Less", o, 2, succ, scalar(s, DT_INT64, (double)ls->interval), NULL),
			      NULL, NULL);
	struct value *grown = op(s, "Mul", o, 2, scale, scalar(s, DT_FLOAT, ls->growth), NULL);
	struct value *too_big = op(s, "Greater", o, 2, grown, scalar(s, DT_FLOAT, ls->max), NULL);
	struct value *if_finite = pick(s, at, pick(s, too_big, scale, grown, o), scale, o);
	struct value *backed = op(s, "Mul", o, 2, scale, scalar(s, DT_FLOAT, ls->backoff), NULL);
	struct value *minv = scalar(s, DT_FLOAT, ls->min);
	backed = pick(s, op(s, "Less", o, 2, backed, minv, NULL), minv, backed, o);
	struct value *tolerate = hyst ? op(s, "Greater", o, 2, hyst, one, NULL) : NULL;
	struct value *if_inf = pick(s, tolerate, scale, backed, o);
	if (bind(s, scale, pick(s, found, if_inf, if_finite, o)) ||
	    bind(s, good, pick(s, found, zero, pick(s, at, zero, succ, o), o)))
		return sb_fail(s);
	if (hyst) {
		struct value *h_inf = pick(s, tolerate, op(s, "Sub", o, 2, hyst, one, NULL), hyst, o);
		struct value *h_fin = pick(s, at, scalar(s, DT_INT64, (double)ls->hysteresis), hyst, o);
		if (bind(s, hyst, pick(s, found, h_inf, h_fin, o)))
			return sb_fail(s);
	}
	return s->e->code; /* a condition lost to an earlier failure makes pick() pass a value through */
}

/* Makes the backward node after `after` (in g's order, among the first n_old nodes) wait for u. */
static int wait_for(struct sb *s, const struct node *after, struct node *u, uint32_t n_old)
{
	struct graph *g = s->g;
	if (!after || after->index + 1 >= n_old)
		return 0;
	return node_wait_for(g, g->nodes[after->index + 1], u) ? err_oom(s->e) : 0;
}

/* The node after which gradient g is complete: its producer, or for a sum over the replicas made
 * after the backward pass (its first n_old nodes: replicas_build) the last producer of the
 * all-reduce's (reduce-scatter's) inputs (its bucket). */
static const struct node *complete(const struct value *g, uint32_t n_old)
{
	const struct node *n = g->producer, *last = NULL;
	if (!n || n->index < n_old || (n->op != OP_ALL_REDUCE && n->op != OP_REDUCE_SCATTER))
		return n;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (n->in[k]->producer && (!last || n->in[k]->producer->index > last->index))
			last = n->in[k]->producer;
	return last;
}

/* last[v]: the index of the last of the first n_old nodes to read value v, or UINT32_MAX (xmalloc'd,
 * by value id; NULL when out of memory). One pass, so that placing every update is linear. */
static uint32_t *last_readers(const struct graph *g, uint32_t n_old)
{
	uint32_t *last = xmalloc(sizeof *last * (g->n_values ? g->n_values : 1));
	if (!last)
		return NULL;
	memset(last, 0xff, sizeof *last * g->n_values);
	for (uint32_t i = 0; i < n_old; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k])
				last[g->nodes[i]->in[k]->id] = i;
	return last;
}

/* The last of the first n_old nodes that p's update must follow: its gradient's completion and
 * every reader of p (last: last_readers), so that the update is p's last reader and writes p's
 * next value over it. */
static const struct node *update_after(const struct graph *g, const uint32_t *last, const struct value *p,
				       const struct value *grad, uint32_t n_old)
{
	const struct node *made = complete(grad, n_old);
	uint32_t r = last[p->id];
	return r != UINT32_MAX && (!made || r > made->index) ? g->nodes[r] : made;
}

/* The parameters' updates; new state is bound as made, parameters last (by the caller's loop).
 * Inline (no finite check, no clipping: nothing waits for every gradient), each update runs as
 * soon as its gradient is complete and the backward pass has read its parameter for the last
 * time, and the next backward node waits for it, as an optimizer stepped from gradient hooks
 * does: the gradients made later are not live at once with it, nor the update's temporaries
 * with them. */
static int update(struct sb *s, const struct optimizer *opt, struct param_grad *pg, uint32_t n, struct value *found,
		  int inline_, uint32_t n_old)
{
	struct value *step = state(s, "optimizer_step", DT_INT64, 0, NULL, 0);
	struct value *step1 = op(s, "Add", "optimizer_step_next", 2, step, scalar(s, DT_INT64, 1), NULL);
	if (!step1 || bind(s, step, pick(s, found, step, step1, "optimizer_step_next")))
		return sb_fail(s);
	struct value *step_size = NULL, *bc2_sqrt = NULL;
	if (opt->kind == OPTIMIZER_ADAM) { /* bias corrections, as torch.optim.Adam */
		const char *o = "adam_bias_correction";
		struct value *t = op_int(s, "Cast", o, step1, "to", DT_FLOAT), *one = scalar(s, DT_FLOAT, 1);
		struct value *bc1 = op(s, "Sub", o, 2, one, op(s, "Pow", o, 2, scalar(s, DT_FLOAT, opt->beta1), t, NULL), NULL);
		struct value *bc2 = op(s, "Sub", o, 2, one, op(s, "Pow", o, 2, scalar(s, DT_FLOAT, opt->beta2), t, NULL), NULL);
		step_size = op(s, "Div", o, 2, scalar(s, DT_FLOAT, opt->lr), bc1, NULL);
		bc2_sqrt = op(s, "Sqrt", o, 1, bc2, NULL, NULL);
	}
	uint32_t *last = inline_ ? last_readers(s->g, n_old) : NULL;
	if (inline_ && !last)
		return err_oom(s->e);
	int bad = 0;
	for (uint32_t i = 0; i < n && !s->e->code; i++) {
		struct value *p = pg[i].p, *g = pg[i].g, *mine = p; /* what the update reads: p, or its slice */
		const struct tensor *t = p->init;
		int dt = t->dtype;
		/* stages 1 and 2: this replica updates its slice of p, from its slice of the sum */
		int slice = (s->rep->shard == SHARD_OPTIMIZER || s->rep->shard == SHARD_GRADIENTS) && (dt == DT_FLOAT || dt == DT_DOUBLE);
		int64_t k = (tensor_numel(t) + s->rep->n - 1) / (s->rep->n ? s->rep->n : 1);
		uint32_t ndim = slice ? 1 : t->ndim;
		const int64_t *dims = slice ? &k : t->dims;
		if (slice && (!(mine = shard_slice(s->g, s->rep->n, p, s->e)) ||
			      (!pg[i].slice && !(g = shard_slice(s->g, s->rep->n, g, s->e)))))
			break;
		char o[600], sn[600];
		JOIN(o, sizeof o, p->name, "_update");
		struct value *delta = g; /* what lr (adam: step_size) multiplies */
		if (opt->kind == OPTIMIZER_SGD && opt->momentum > 0) {
			JOIN(sn, sizeof sn, p->name, "_momentum");
			struct value *buf = state(s, sn, dt, ndim, dims, 0);
			delta = op(s, "Add", o, 2, op(s, "Mul", o, 2, buf, scalar(s, dt, opt->momentum), NULL), g,
				   NULL);
			if ((bad = bind(s, buf, pick(s, found, buf, delta, o))))
				break;
		} else if (opt->kind == OPTIMIZER_ADAM) {
			JOIN(sn, sizeof sn, p->name, "_adam_m");
			struct value *m = state(s, sn, dt, ndim, dims, 0);
			JOIN(sn, sizeof sn, p->name, "_adam_v");
			struct value *v = state(s, sn, dt, ndim, dims, 0);
			struct value *m1 = op(s, "Add", o, 2, op(s, "Mul", o, 2, m, scalar(s, dt, opt->beta1), NULL),
					      op(s, "Mul", o, 2, g, scalar(s, dt, 1 - opt->beta1), NULL), NULL);
			struct value *v1 = op(s, "Add", o, 2, op(s, "Mul", o, 2, v, scalar(s, dt, opt->beta2), NULL),
					      op(s, "Mul", o, 2, op(s, "Mul", o, 2, g, g, NULL),
						 scalar(s, dt, 1 - opt->beta2), NULL),
					      NULL);
			struct value *denom = op(s, "Add", o, 2, op(s, "Div", o, 2, op(s, "Sqrt", o, 1, v1, NULL, NULL), as(s, bc2_sqrt, dt), NULL),
						 scalar(s, dt, opt->eps), NULL);
			delta = op(s, "Div", o, 2, m1, denom, NULL);
			if ((bad = bind(s, m, pick(s, found, m, m1, o)) || bind(s, v, pick(s, found, v, v1, o))))
				break;
		}
		struct value *lr = opt->kind == OPTIMIZER_ADAM ? as(s, step_size, dt) : scalar(s, dt, opt->lr);
		struct value *p1 = op(s, "Sub", o, 2, mine, op(s, "Mul", o, 2, delta, lr, NULL), NULL);
		struct value *next = pick(s, found, mine, p1, o);
		if (slice && next) /* every replica's updated slice */
			next = shard_gather(s->g, s->rep->n, next, t, s->tags, s->e);
		if ((bad = bind(s, p, next) ||
			   (inline_ && wait_for(s, update_after(s->g, last, p, pg[i].g, n_old), p1->producer, n_old))))
			break;
	}
	xfree(last);
	return bad ? sb_fail(s) : s->e->code;
}

/* ---- diet variables ---- */

int step_diet_chosen(const struct diet *d, const struct value *p)
{
	if (!d->on || p->init->dtype != DT_FLOAT)
		return 0;
	for (size_t i = 0; i < d->n_params; i++)
		if (!fnmatch(d->params[i], p->name, 0))
			return 1;
	return !d->n_params && p->init->ndim == 2;
}

/* Diet storage q's first value, made by the initialization graph from p's float32 tensor t, which
 * moves there (external data stays where it is, unread): diet_quantize's arithmetic in standard
 * ops, bit for bit: r = Round(Cast(t, double) / scale) (float64, ties to even), then
 * Cast(Where(r == r, Clip(r, -QMAX, QMAX), 0), int16) (NaN to 0); the output <q>_initial is bound
 * to q (initialization_binding, made by commit()). */
static int diet_initialize(struct sb *s, const struct diet *d, struct value *q, const struct tensor *t)
{
	struct graph *g = s->g;
	struct training_info *ti = step_training_info(g);
	struct graph *ig = ti ? step_init_graph(s->g, ti) : NULL;
	struct tensor *wt = ig && !xgrow((void **)&s->ibind, s->n_ibind, &s->cap_ibind, sizeof *s->ibind)
				    ? arena_zalloc(g->arena, sizeof *wt) : NULL;
	char name[640];
	JOIN(name, sizeof name, q->name, "_float");
	const char *wn = wt ? graph_fresh_name(ig, name, s->e) : NULL;
	struct value *w = wn ? graph_value(ig, wn, s->e) : NULL;
	if (!w || step_set_type(ig, w, DT_FLOAT, t->ndim, t->dims))
		return sb_fail(s);
	*wt = *t;
	wt->name = wn;
	if (graph_add_init(ig, w, wt, s->e))
		return sb_fail(s);
	uint32_t tags = s->tags;
	s->g = ig; /* op() builds in the initialization graph; scalar()'s cache is the main graph's */
	s->tags = 0;
	struct node *sc = graph_add_scalar(ig, "diet_scale", DT_DOUBLE, (float)d->scale, s->e),
		    *lo = sc ? graph_add_scalar(ig, "diet_qmin", DT_DOUBLE, -DIET_QMAX, s->e) : NULL,
		    *hi = lo ? graph_add_scalar(ig, "diet_qmax", DT_DOUBLE, DIET_QMAX, s->e) : NULL,
		    *zero = hi ? graph_add_scalar(ig, "diet_zero", DT_DOUBLE, 0, s->e) : NULL;
	JOIN(name, sizeof name, q->name, "_initial");
	struct value *wd = zero ? op_int(s, "Cast", name, w, "to", DT_DOUBLE) : NULL;
	struct value *r = op(s, "Round", name, 1, op(s, "Div", name, 2, wd, wd ? sc->out[0] : NULL, NULL), NULL, NULL);
	struct value *kept = op(s, "Clip", name, 3, r, r ? lo->out[0] : NULL, r ? hi->out[0] : NULL);
	struct value *c = op(s, "Where", name, 3, op(s, "Equal", name, 2, r, r, NULL), kept, kept ? zero->out[0] : NULL);
	struct value *init = c ? op_int(s, "Cast", name, c, "to", DT_INT16) : NULL;
	s->g = g;
	s->tags = tags;
	if (!init || step_set_type(ig, init, DT_INT16, t->ndim, t->dims) || graph_add_output(ig, init, s->e))
		return sb_fail(s);
	s->ibind[s->n_ibind++] = (struct kv){.key = q->name, .value = init->name}; /* commit() binds it */
	return 0;
}

/* Parameter p becomes INT16 storage under its own name, described (as optimizer state is: no
 * weight is read), made from p's data by the initialization graph (diet_initialize; not when
 * sized: analysis only); the old float value, renamed p_dequant, is now made by the forward pass:
 * Cast(q) * scale. Returns q. */
static struct value *diet_store(struct sb *s, const struct diet *d, struct value *p)
{
	struct graph *g = s->g;
	const struct tensor *t = p->init;
	char name[600], deq[620];
	snprintf(name, sizeof name, "%s", p->name);
	JOIN(deq, sizeof deq, name, "_dequant");
	const char *nm = arena_strdup(g->arena, name);
	struct tensor *qt = arena_zalloc(g->arena, sizeof *qt);
	if (!nm || !qt || graph_rename_fresh(g, p, deq, s->e)) {
		sb_fail(s);
		return NULL;
	}
	graph_unstore(g, p);
	/* zeros stand for the values, which analysis never reads and a run gets from the initialization */
	*qt = (struct tensor){.name = nm, .dtype = DT_INT16, .ndim = t->ndim, .dims = t->dims, .src = TSRC_RANDOM,
			      .rnd = {.dist = RND_CONSTANT, .a = 0}};
	struct value *qv = graph_value(g, nm, s->e);
	if (!qv || step_set_type(g, qv, DT_INT16, t->ndim, t->dims) || graph_add_init(g, qv, qt, s->e) ||
	    (!s->sized && diet_initialize(s, d, qv, t))) {
		sb_fail(s);
		return NULL;
	}
	uint32_t tags = s->tags;
	s->tags = TAG_FORWARD;
	struct value *y = op(s, "Mul", deq, 2, op_int(s, "Cast", deq, qv, "to", DT_FLOAT), scalar(s, DT_FLOAT, d->scale), NULL);
	s->tags = tags;
	if (!y || graph_set_output_value(y->producer, 0, p, s->e)) {
		sb_fail(s);
		return NULL;
	}
	return qv;
}

static struct attr fattr(const char *name, double v)
{
	return (struct attr){.name = name, .type = ATTR_FLOAT, .has_type = true, .f = (float)v};
}

static struct attr sattr(const char *name, const char *v)
{
	return (struct attr){.name = name, .type = ATTR_STRING, .has_type = true, .s = {(const uint8_t *)v, strlen(v)}};
}

/* ---- what a diet update reads ---- */

static int all_zero(const struct node *n)
{
	const struct attr *v = node_attr(n, "value");
	if (!v)
		return 1; /* ConstantOfShape's default: a float 0 */
	if (v->type != ATTR_TENSOR || !v->t || v->t->src != TSRC_BYTES || !v->t->bytes.n)
		return 0;
	for (size_t i = 0; i < v->t->bytes.n; i++)
		if (v->t->bytes.p[i])
			return 0;
	return 1;
}

/* Where a diet update reads a gradient: its narrowest form (dY with X, and/or terms of rows with
 * their indices, in the order their sum adds them) and the nodes that no longer make it, put in
 * gone[*n_gone] (room for `cap`: a node is passed over once). */
struct diet_reads {
	struct value *grad, *fac;
	struct value **idx, **rows; /* n_rows terms (the first in idx[0] and grad without a product) */
	uint32_t n_rows;
	struct node **gone;
	uint32_t *n_gone, cap;
};

static int pass_over(struct diet_reads *r, struct node *n)
{
	if (*r->n_gone >= r->cap)
		return 0;
	r->gone[(*r->n_gone)++] = n;
	return 1;
}

static int widening(const struct node *c)
{
	return c && c->op == OP_CAST && (c->tags & TAG_BACKWARD) && c->n_in == 1 && c->in[0] && attr_int(c, "to", 0) == DT_FLOAT;
}

/* A summand that is a product Gemm(dY, X, transA=1) (or its float32 Cast, when `widened` allows)
 * sets *fac to X and gives dY; one that is ScatterND(zeros, Unsqueeze(indices), rows,
 * reduction=add) sets *idx and gives the rows; else NULL. */
static struct value *diet_summand(struct diet_reads *r, struct value *grad, const struct value *p, int widened,
				  struct value **idx, struct value **fac)
{
	struct node *s = grad->producer;
	if (widened && widening(s) && s->in[0]->producer && s->in[0]->producer->op == OP_GEMM) {
		if (!pass_over(r, s))
			return NULL;
		s = s->in[0]->producer;
	}
	if (s && s->op == OP_GEMM && (s->tags & TAG_BACKWARD) && s->n_in == 2 && s->in[0] && s->in[1] &&
	    p->init->ndim == 2 && attr_int(s, "transA", 0) == 1 && attr_int(s, "transB", 0) == 0 &&
	    attr_float(s, "alpha", 1) == 1) {
		*fac = s->in[1];
		return pass_over(r, s) ? s->in[0] : NULL;
	}
	int scatter = s && s->op == OP_SCATTER_ND && (s->tags & TAG_BACKWARD) && s->n_in == 3 && s->in[0] && s->in[1] &&
		      s->in[2] && attr_str_is(s, "reduction", "add", 0) && p->init->ndim == 2;
	const struct node *z = scatter ? s->in[0]->producer : NULL, *u = z ? s->in[1]->producer : NULL;
	if (!u || z->op != OP_CONSTANT_OF_SHAPE || !all_zero(z) || u->op != OP_UNSQUEEZE || !(u->tags & TAG_BACKWARD))
		return NULL;
	*idx = s->in[1];
	return pass_over(r, s) ? s->in[2] : NULL;
}

static struct node *sum_node(const struct value *v)
{
	struct node *a = v->producer;
	return a && a->op == OP_ADD && (a->tags & TAG_BACKWARD) && a->n_in == 2 && a->in[0] && a->in[1] ? a : NULL;
}

/* A gradient that is a sum ((L0 + L1) + L2) + ... (autodiff adds a parameter's contributions as
 * they come, PyTorch's .grad order) of at most one product, L0 or L1, and row updates: the
 * product first, then the terms in the order the sum adds them. 0 when it is some other sum. */
static int diet_sum(struct sb *s, struct diet_reads *r, const struct value *p)
{
	uint32_t n = 2, was = *r->n_gone;
	for (const struct node *a = sum_node(r->grad); sum_node(a->in[0]); a = sum_node(a->in[0]))
		n++;
	struct value **leaf = arena_array(s->g->arena, 3 * n, sizeof *leaf), **idx = leaf + n, **rows = idx + n;
	if (!leaf)
		return sb_fail(s), 0;
	uint32_t k = n;
	for (struct node *a = sum_node(r->grad); k > 0; a = sum_node(a->in[0])) {
		if (!pass_over(r, a))
			return 0;
		leaf[--k] = a->in[1];
		if (!sum_node(a->in[0]))
			leaf[--k] = a->in[0];
	}
	struct value *fac = NULL, *dy = NULL;
	uint32_t t = 0;
	for (k = 0; k < n; k++) {
		struct value *ik = NULL, *fk = NULL, *v = diet_summand(r, leaf[k], p, 1, &ik, &fk);
		if (!v || (fk && (fac || k > 1))) /* a second product, or one added after the first sum */
			break;
		if (fk) { /* L0 or L1: the first Add adds in either order */
			fac = fk;
			dy = v;
		} else {
			idx[t] = ik;
			rows[t++] = v;
		}
	}
	if (k < n || (!fac && t < 2)) {
		*r->n_gone = was;
		return 0;
	}
	r->grad = fac ? dy : rows[0];
	r->fac = fac;
	r->idx = idx;
	r->rows = rows;
	r->n_rows = t;
	return 1;
}

/* What parameter p's diet update reads in place of its gradient r->grad, which nothing else reads
 * (an inline update): a 16-bit gradient rather than its Cast to float32 (DietAdam reads the
 * gradient at float32 precision, so the widening is exact); for Gather's gradient, the rows and
 * their indices: a row-sparse update; for a Linear layer's weight gradient, dY with r->fac set to
 * X: the update makes the product a block of rows at a time, rounded as the Gemm rounds it; and for
 * a weight read by several Gathers and at most one product (a tied embedding and head), the sum of
 * their gradients as its pieces: the update adds each row's updates to the product's row. No
 * dense gradient is made but in the first. */
static void diet_narrow(struct sb *s, struct diet_reads *r, const struct value *p)
{
	struct node *c = r->grad->producer;
	if (widening(c) && pass_over(r, c))
		r->grad = c->in[0];
	if (p->init->ndim == 2 && sum_node(r->grad)) {
		diet_sum(s, r, p);
		return;
	}
	uint32_t was = *r->n_gone;
	struct value **one = arena_array(s->g->arena, 2, sizeof *one); /* the indices and the rows */
	struct value *idx = NULL, *g = one ? diet_summand(r, r->grad, p, 0, &idx, &r->fac) : NULL;
	if (!one)
		sb_fail(s);
	if (!g) {
		*r->n_gone = was;
		r->fac = NULL;
		return;
	}
	r->grad = g;
	if (idx) {
		one[0] = idx;
		one[1] = g;
		r->idx = one;
		r->rows = one + 1;
		r->n_rows = 1;
	}
}

/* DietAdam(q, grad, step, m, v1, v2[, idx[, fac[, rows[, idx2, rows2, ...]]]]) with its state made and bound
 * (Where(found, old, new) when a finite check may skip the step). Returns the node. */
static struct node *diet_adam(struct sb *s, const struct diet *d, struct value *q, const struct diet_reads *r,
			      struct value *step, struct value *found)
{
	struct graph *g = s->g;
	const struct tensor *t = q->init;
	char sn[640];
	int factored = t->ndim == 2;
	struct value *st[3] = {NULL, NULL, NULL}; /* m, v1, v2 */
	if (d->beta1 != 0) {
		JOIN(sn, sizeof sn, q->name, "_diet_m");
		st[0] = state(s, sn, DT_FLOAT, t->ndim, t->dims, 0);
	}
	JOIN(sn, sizeof sn, q->name, factored ? "_diet_vr" : "_diet_v");
	st[1] = state(s, sn, DT_FLOAT, factored ? 1 : t->ndim, t->dims, 0);
	if (factored) {
		JOIN(sn, sizeof sn, q->name, "_diet_vc");
		st[2] = state(s, sn, DT_FLOAT, 1, t->dims + 1, 0);
	}
	struct node *n = graph_add_node(g, s->e);
	uint32_t n_in = r->n_rows > 1 ? 7 + 2 * r->n_rows : r->fac && r->n_rows ? 9 : r->fac ? 8 : r->n_rows ? 7 : factored ? 6 : 5;
	uint32_t n_out = factored ? 4 : 3;
	struct value **io = n ? arena_array(g->arena, n_in + n_out, sizeof *io) : NULL;
	struct attr *a = io ? arena_array(g->arena, 8, sizeof *a) : NULL;
	JOIN(sn, sizeof sn, q->name, "_diet_adam");
	if (!a || !st[1] || (factored && !st[2]) || (d->beta1 != 0 && !st[0]) || !(n->name = graph_fresh_name(g, sn, s->e))) {
		sb_fail(s);
		return NULL;
	}
	n->op_type = "DietAdam";
	n->domain = "graphdiet";
	n->op = op_lookup("graphdiet", "DietAdam");
	n->tags = s->tags;
	n->in = io;
	n->out = io + n_in;
	n->n_in = n_in;
	n->n_out = n_out;
	struct value *ins[9] = {q, r->grad, step, st[0], st[1], st[2], r->n_rows ? r->idx[0] : NULL, r->fac,
				r->fac && r->n_rows ? r->rows[0] : NULL};
	memcpy(n->in, ins, (n_in < 9 ? n_in : 9) * sizeof *ins);
	for (uint32_t k = 1; k < r->n_rows; k++) { /* more row updates: (idx, rows) pairs from input 9 */
		n->in[7 + 2 * k] = r->idx[k];
		n->in[8 + 2 * k] = r->rows[k];
	}
	for (uint32_t k = 0; k < n_out; k++) {
		struct value *old = k ? st[k - 1] : q;
		if (!old)
			continue;
		JOIN(sn, sizeof sn, old->name, "_updated");
		const char *on = graph_fresh_name(g, sn, s->e);
		if (!on || graph_set_output(g, n, k, on, s->e)) {
			sb_fail(s);
			return NULL;
		}
	}
	a[0] = fattr("beta1", d->beta1);
	a[1] = fattr("beta2", d->beta2);
	a[2] = fattr("epsilon", d->eps);
	a[3] = fattr("lr", d->lr);
	a[4] = sattr("schedule", d->noam ? "noam" : "none");
	a[5] = fattr("warmup", d->warmup);
	a[6] = fattr("scale", d->scale);
	a[7] = sattr("round", d->stochastic ? "stochastic" : "nearest");
	n->attr = a;
	n->n_attr = 8;
	for (uint32_t k = 0; k < n_out; k++) {
		struct value *old = k ? st[k - 1] : q;
		if (old && bind(s, old, pick(s, found, old, n->out[k], sn)))
			return NULL;
	}
	return n;
}

/* The storage and update of each diet parameter (pg[i] with diet[i]). Inline (found NULL and no
 * clipping): each update waits only for its gradient, and the next backward node waits for it. */
static int diet_build(struct sb *s, const struct diet *d, struct param_grad *pg, const uint8_t *diet, uint32_t n,
		      struct value *found, int inline_, uint32_t n_old, struct node **gone, uint32_t *n_gone)
{
	struct value *step = state(s, "diet_step", DT_INT64, 0, NULL, 0);
	struct value *step1 = op(s, "Add", "diet_step_next", 2, step, scalar(s, DT_INT64, 1), NULL);
	if (!step1 || bind(s, step, pick(s, found, step, step1, "diet_step_next")) || graph_need_domain(s->g, "graphdiet"))
		return sb_fail(s);
	for (uint32_t i = 0; i < n && !s->e->code; i++) {
		if (!diet[i])
			continue;
		struct diet_reads r = {.grad = pg[i].g, .gone = gone, .n_gone = n_gone, .cap = s->g->n_nodes};
		if (inline_)
			diet_narrow(s, &r, pg[i].p);
		const struct node *made = complete(r.grad, n_old);
		for (uint32_t k = 0; k < 1 + 2 * r.n_rows; k++) { /* and after what else it reads */
			const struct value *also = k ? (k % 2 ? r.idx : r.rows)[(k - 1) / 2] : r.fac;
			if (also && also->producer && (!made || also->producer->index > made->index))
				made = also->producer;
		}
		struct value *q = diet_store(s, d, pg[i].p);
		struct node *u = q ? diet_adam(s, d, q, &r, step1, found) : NULL;
		if (!u || (inline_ && wait_for(s, made, u, n_old)))
			return sb_fail(s);
	}
	return s->e->code;
}

/* No float32 copy of a diet parameter lives from the forward pass into the backward pass: each
 * forward value made from diet storage and other resident values alone (the dequantization, a
 * transpose of it, a 16-bit cast) is dropped and recomputed right before its first backward
 * reader (recompute.h), whatever the checkpointing strategy. g is sorted. */
static int diet_recompute(struct graph *g, struct gd_err *e)
{
	uint8_t *keep = xmalloc(g->n_values ? g->n_values : 1);
	if (!keep)
		return err_oom(e);
	for (uint32_t v = 0; v < g->n_values; v++)
		keep[v] = g->values[v]->init ? 1 : 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_DIET_ADAM)
			keep[g->nodes[i]->in[0]->id] = 2;
	graph_mark_resident(g, keep);
	for (uint32_t v = 0; v < g->n_values; v++) /* only activations are dropped (rc_dropped) */
		keep[v] = keep[v] != 2;
	struct recompute_stats st;
	int rc = recompute_rewrite(g, keep, NULL, &st, e);
	xfree(keep);
	return rc;
}

/* Makes `now` the output named `was` had, at its place (was keeps a fresh <name>_<suffix>). */
static int replace_output(struct sb *s, const struct param_grad *pg, struct value *now, const char *suffix)
{
	struct value *was = pg->g;
	char name[600], old[620];
	snprintf(name, sizeof name, "%s", was->name);
	JOIN(old, sizeof old, name, "_", suffix);
	if (!now || graph_rename_fresh(s->g, was, old, s->e) || graph_rename_fresh(s->g, now, name, s->e))
		return sb_fail(s);
	now->type = was->type;
	now->flags |= VALUE_OUTPUT | VALUE_GRAD;
	was->flags &= ~(VALUE_OUTPUT | VALUE_GRAD);
	s->g->outputs[pg->out] = now;
	return 0;
}

/* PyTorch's running variance from the spec's: BatchNormalization (the ONNX spec, onnxruntime,
 * graphdiet's kernel) updates it with the batch's population variance vb, rv' = m rv + (1 - m) vb;
 * PyTorch with the unbiased one, vb n / (n - 1), n the elements per channel. Stated in standard ops
 * so that every runtime computes PyTorch's number from the same file:
 *   rv'' = rv' + (rv' - m rv) / (n - 1),  n = prod(shape(X)) / C.
 * onnxruntime's kernel writes rv' into its running-variance input's buffer, whatever the node's
 * outputs (1.30: a Mul of that initializer then read rv', in whichever order the file put them), so
 * the node is given a copy of rv (rv + 0, a forward node) and m rv reads rv itself. */
static struct value *pytorch_running_var(struct sb *s, struct node *b, struct value *next)
{
	struct value *rv = b->in[4];
	int dt = rv->init->dtype;
	uint32_t tags = s->tags;
	s->tags = b->tags;
	struct value *copy = op(s, "Add", "bn_running_var", 2, rv, scalar(s, dt, 0), NULL);
	s->tags = tags;
	if (!copy)
		return NULL;
	b->in[4] = copy;
	double m = attr_float(b, "momentum", 0.9f);
	struct value *c = scalar(s, dt, (double)tensor_numel(rv->init));
	struct value *shape = op(s, "Shape", "bn_count", 1, b->in[0], NULL, NULL);
	struct value *total = op_int(s, "ReduceProd", "bn_count", op_int(s, "Cast", "bn_count", shape, "to", dt), "keepdims", 0);
	struct value *n1 = op(s, "Sub", "bn_count", 2, op(s, "Div", "bn_count", 2, total, c, NULL), scalar(s, dt, 1), NULL);
	struct value *d = op(s, "Sub", "bn_var", 2, next, op(s, "Mul", "bn_var", 2, rv, scalar(s, dt, m), NULL), NULL);
	return op(s, "Add", "bn_var", 2, next, op(s, "Div", "bn_var", 2, d, n1, NULL), NULL);
}

/* Whether state `key` is bound already (two BatchNormalizations may share running statistics). */
static int is_bound(const struct sb *s, const char *key)
{
	for (size_t j = 0; j < s->n_bind; j++)
		if (!strcmp(s->bind[j].key, key))
			return 1;
	return 0;
}

/* Binds the running mean and variance each training-mode BatchNormalization outputs to the
 * initializers it reads them from (one binding per initializer); a PyTorch export's variance by
 * PyTorch's rule (pytorch_running_var). */
static int bind_running_stats(struct sb *s, uint32_t n_nodes)
{
	int moved = 0; /* a node reads a value made after it (pytorch_running_var's copy) */
	const char *pn = s->g->model ? s->g->model->producer_name : NULL;
	int pytorch = pn && !strcmp(pn, "pytorch");
	for (uint32_t i = 0; i < n_nodes; i++) {
		struct node *b = s->g->nodes[i];
		const struct attr *tm = node_attr(b, "training_mode");
		struct value *synced = replicas_running_stat(b); /* --sync-batchnorm's (replicas.h) */
		if (synced && !(b->out[0]->flags & VALUE_OUTPUT) && !is_bound(s, synced->name) && bind(s, synced, b->out[0]))
			return s->e->code;
		if (b->op != OP_BATCH_NORM || !node_is_forward(b) || !tm || tm->type != ATTR_INT || !tm->i)
			continue;
		for (uint32_t k = 1; k <= 2 && k < b->n_out; k++) {
			struct value *key = b->in[2 + k], *next = b->out[k];
			int bound = !next || !key || !key->init || (next->flags & VALUE_OUTPUT) || is_bound(s, key->name);
			if (!bound && k == 2 && pytorch && dtype_is_float(key->init->dtype)) {
				next = pytorch_running_var(s, b, next);
				moved = 1;
			}
			if (!bound && bind(s, key, next))
				return s->e->code;
		}
	}
	return moved && graph_toposort(s->g, s->e) ? s->e->code : 0;
}

/* Whether the replicas sum p's gradient whole however they shard (replicas_build): a diet
 * variable's (ctx: the diet), and a parameter's of another dtype than float32 or float64. */
static int whole(const struct value *p, const void *ctx)
{
	return step_diet_chosen(ctx, p) || (p->init->dtype != DT_FLOAT && p->init->dtype != DT_DOUBLE);
}

int step_build(struct graph *g, const struct step_opts *o, struct step_report *r, struct gd_err *e)
{
	if (r)
		memset(r, 0, sizeof *r);
	int dynamic = o->ls.kind == LOSS_SCALE_DYNAMIC;
	uint32_t n_old = g->n_nodes; /* the backward pass ends here: the rest is the step's */
	if (replicas_build(g, &o->rep, whole, &o->diet, e))
		return e->code;
	if (!dynamic && !(o->clip_norm > 0) && o->opt.kind == OPTIMIZER_NONE && !o->diet.on)
		return 0;
	struct sb s = {.g = g, .e = e, .tags = TAG_BACKWARD, .sized = o->sized, .rep = &o->rep};
	uint8_t *slices = shard_slices(g);
	uint8_t *diet = NULL;
	struct node **gone = NULL; /* what diet updates no longer need (diet_narrow) */
	uint32_t n_gone = 0;
	/* the gradients autodiff made: outputs <param>_grad */
	struct param_grad *pg = xmalloc(sizeof *pg * (g->n_outputs ? g->n_outputs : 1));
	uint32_t n = 0;
	int rc = 0;
	if (!pg || !slices) {
		rc = err_oom(e);
		goto out;
	}
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		struct value *p = (g->outputs[i]->flags & VALUE_GRAD) ? autodiff_param_of(g, g->outputs[i]) : NULL;
		if (p) /* a stage-3 slice's gradient, or a reduce-scatter's, is a slice */
			pg[n++] = (struct param_grad){p, g->outputs[i], i, slices[p->id] ||
						      (g->outputs[i]->producer && g->outputs[i]->producer->op == OP_REDUCE_SCATTER)};
	}
	/* diet parameters: the chosen ones (each --diet-params name must be one) */
	if (!(diet = xcalloc(n ? n : 1, 1))) {
		rc = err_oom(e);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		diet[i] = (uint8_t)step_diet_chosen(&o->diet, pg[i].p);
		if (r && o->diet.on) {
			uint64_t k = (uint64_t)tensor_numel(pg[i].p->init);
			*(diet[i] ? &r->diet_elems : &r->other_elems) += k;
			*(diet[i] ? &r->diet_params : &r->other_params) += 1;
			size_t len = strlen(r->others);
			if (!diet[i] && r->other_params <= 3 && len + strlen(pg[i].p->name) + 3 < sizeof r->others)
				snprintf(r->others + len, sizeof r->others - len, "%s%s", len ? ", " : "", pg[i].p->name);
		}
	}
	for (size_t k = 0; o->diet.on && k < o->diet.n_params; k++) {
		uint32_t i = 0;
		while (i < n && !(diet[i] && !fnmatch(o->diet.params[k], pg[i].p->name, 0)))
			i++;
		if (i == n) {
			rc = err_set(e, GD_EINPUT, "--diet-params: '%s' %s", o->diet.params[k],
				     strpbrk(o->diet.params[k], "*?[") ? "matches no trainable float32 parameter"
								     : "is not a trainable float32 parameter");
			goto out;
		}
	}
	/* with an optimizer (or as diet variables) the gradients are consumed in the graph: no outputs */
	if (o->opt.kind != OPTIMIZER_NONE || o->diet.on) {
		for (uint32_t i = 0; i < n; i++)
			if (o->opt.kind != OPTIMIZER_NONE || diet[i])
				pg[i].g->flags &= ~VALUE_OUTPUT;
		uint32_t k = 0;
		for (uint32_t i = 0; i < g->n_outputs; i++)
			if (g->outputs[i]->flags & VALUE_OUTPUT)
				g->outputs[k++] = g->outputs[i];
		g->n_outputs = k;
	}
	/* 1. every gradient checked: the sum of g*0 is 0 when all are finite, NaN otherwise */
	struct value *found = NULL, *scale = dynamic ? strmap_get(&g->names, "loss_scale") : NULL;
	if (dynamic) {
		s.tags |= TAG_LOSS_SCALE;
		found = op(&s, "IsNaN", "found_inf", 1, sum_over(&s, pg, n, 0, "finite_check"), NULL, NULL);
		if (!found || !scale || graph_rename_fresh(g, found, "found_inf", e) || step_set_type(g, found, DT_BOOL, 0, NULL) ||
		    graph_add_output(g, found, e)) {
			rc = found && !scale ? err_set(e, GD_EINTERNAL, "no loss_scale state") : sb_fail(&s);
			goto out;
		}
		s.tags &= ~TAG_LOSS_SCALE;
	}
	/* 2. clipping, as torch.nn.utils.clip_grad_norm_: g * min(1, X / (norm + 1e-6)) */
	if (o->clip_norm > 0) {
		const char *c = "clip_grad_norm";
		struct value *norm = op(&s, "Sqrt", "grad_norm", 1, sum_over(&s, pg, n, 1, c), NULL, NULL);
		if (!norm || graph_rename_fresh(g, norm, "grad_norm", e) || step_set_type(g, norm, DT_FLOAT, 0, NULL) ||
		    graph_add_output(g, norm, e)) {
			rc = sb_fail(&s);
			goto out;
		}
		struct value *one = scalar(&s, DT_FLOAT, 1);
		struct value *coef = op(&s, "Div", c, 2, scalar(&s, DT_FLOAT, o->clip_norm),
					op(&s, "Add", c, 2, norm, scalar(&s, DT_FLOAT, 1e-6), NULL), NULL);
		coef = pick(&s, op(&s, "Less", c, 2, coef, one, NULL), coef, one, c);
		for (uint32_t i = 0; i < n && !rc; i++) {
			struct value *clipped = op(&s, "Mul", c, 2, pg[i].g, as(&s, coef, pg[i].p->init->dtype), NULL);
			if (o->opt.kind == OPTIMIZER_NONE && !diet[i])
				rc = replace_output(&s, &pg[i], clipped, "unclipped");
			else if (!clipped)
				rc = sb_fail(&s);
			pg[i].g = clipped;
		}
		if (rc)
			goto out;
	}
	/* 3. the updates: diet parameters' by DietAdam, the others' by the optimizer; inline when
	 * nothing waits for every gradient */
	int inline_ = !dynamic && !(o->clip_norm > 0);
	uint32_t nr = 0;
	for (uint32_t i = 0; i < n; i++)
		nr += !diet[i];
	if (nr < n && (!(gone = xmalloc(sizeof *gone * (g->n_nodes + 1))) ? (rc = err_oom(e)) :
		       (rc = diet_build(&s, &o->diet, pg, diet, n, found, inline_, n_old, gone, &n_gone))))
		goto out;
	for (uint32_t i = 0, k = 0; i < n; i++)
		if (!diet[i])
			pg[k++] = pg[i];
	if (o->opt.kind != OPTIMIZER_NONE && (rc = update(&s, &o->opt, pg, nr, found, inline_, n_old)))
		goto out;
	/* 4. the scale */
	if (dynamic) {
		s.tags |= TAG_LOSS_SCALE;
		if ((rc = scale_update(&s, &o->ls, scale, found)))
			goto out;
	}
	/* 5. BatchNormalization's running statistics: state, as PyTorch updates them in every forward
	 * pass (a skipped step's too) */
	if ((rc = bind_running_stats(&s, n_old)))
		goto out;
	rc = e->code ? e->code : commit(&s);
	/* diet storage's dequantization is forward, and its updates wait in the backward pass; the
	 * gradients they read in narrower form are not made */
	if (!rc && o->diet.on)
		rc = graph_toposort(g, e) || graph_drop_unread(g, gone, n_gone, e) || diet_recompute(g, e) ? e->code : 0;
	else if (!rc && inline_ && o->opt.kind != OPTIMIZER_NONE) /* the inline updates to their places */
		rc = graph_toposort(g, e) ? e->code : 0;
out:
	xfree(slices);
	xfree(gone);
	xfree(pg);
	xfree(diet);
	sb_free(&s);
	return rc;
}

void step_mark_state(struct graph *g)
{
	const char *list = model_meta(g, STEP_STATE_KEY);
	char *copy = list ? strdup(list) : NULL;
	for (char *save = NULL, *name = copy ? strtok_r(copy, "\n", &save) : NULL; name; name = strtok_r(NULL, "\n", &save)) {
		struct value *v = strmap_get(&g->names, name);
		if (v && v->init)
			v->flags = (v->flags & ~VALUE_PARAM) | VALUE_STATE;
	}
	free(copy);
}
