/* graph.h - the graphdiet IR: a graph of values (tensors) and nodes, owned by one arena.
 *
 * Invariants, kept by the builder functions below and checked by graph_check:
 *  - every value has a unique name within its graph and at most one producer: a node output,
 *    a graph input or an initializer;
 *  - a node input is NULL for an omitted optional input (ONNX's ""), else a value of the same
 *    graph; a subgraph refers to an enclosing graph's value through a local value whose `outer`
 *    points at it;
 *  - graph->nodes is the schedule: after graph_toposort it is topological;
 *  - strings are NUL-terminated, NULL meaning "absent" (distinct from ""), and may point into the
 *    source file's decoded form, which the graph keeps alive until graph_free.
 *
 * Everything the ONNX format carries that graphdiet does not model survives as `struct extras`
 * (undecoded protobuf fields) on the object it was found on. */
#ifndef GD_GRAPH_H
#define GD_GRAPH_H

#include "../ops/ops.h"
#include "../util/arena.h"
#include "../util/err.h"
#include "../util/strmap.h"
#include "dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Subgraphs (If/Loop bodies) nest at most this deep. Readers enforce it before recursing, so a
 * crafted file cannot overflow the stack of any stage (protobuf-c decoding included). */
#define GRAPH_MAX_DEPTH 64

struct bytes {
	const uint8_t *p;
	size_t n;
};

/* Undecoded protobuf fields, kept verbatim for lossless round trips. */
struct extra_field {
	uint32_t field;
	uint8_t wire; /* protobuf wire type */
	size_t len;
	const uint8_t *data;
};
struct extras {
	size_t n;
	struct extra_field *f;
};

struct kv {
	const char *key, *value;
	struct extras x;
};

enum dim_kind { DIM_NONE, DIM_VALUE, DIM_PARAM };
struct dim {
	enum dim_kind kind;
	int64_t value;
	const char *param;
	const char *denotation;
	struct extras x;
};

/* The tensor type of a value, as a ValueInfo gives it; which parts were present is recorded
 * so that writing gives back exactly what was read. */
struct ttype {
	int dtype;          /* enum dtype, or an unknown number graph_check rejects */
	bool has_type;      /* ValueInfo.type present */
	bool has_tensor;    /* TypeProto.tensor_type present */
	bool has_dtype;     /* TensorType.elem_type present */
	bool has_shape;     /* TensorType.shape present; ndim may be 0 (a scalar) */
	uint32_t ndim;
	struct dim *dims;
};

/* What a ValueInfo carries besides the name and the tensor type: rare, so kept out of line (NULL
 * when all absent), which keeps the millions of values autodiff makes small. */
struct value_ext {
	const char *doc;
	const char *denotation;            /* TypeProto.denotation */
	struct extras x;                   /* ValueInfo-level */
	struct extras type_x, tensor_x, shape_x;
};

enum value_flag {
	VALUE_INPUT = 1u << 0,
	VALUE_PARAM = 1u << 1, /* a floating-point initializer: trainable by default */
	VALUE_CONST = 1u << 2, /* any other initializer */
	VALUE_OUTPUT = 1u << 3,
	VALUE_LOSS = 1u << 4,
	VALUE_GRAD = 1u << 5,
	VALUE_STATE = 1u << 6,
	VALUE_INFO = 1u << 7, /* listed in graph value_info */
	VALUE_GRAD_SLOT = 1u << 8, /* read by some node at an input that takes a gradient (autodiff) */
	VALUE_PARAM_GRAD = 1u << 9, /* a gradient of a parameter, or of a value made from parameters
				     * alone, or a summand of one (autodiff; not serialized) */
};

/* Where an initializer's bytes are. Bytes are loaded only when a stage needs them. */
enum tensor_src {
	TSRC_NONE,     /* no data: an empty tensor */
	TSRC_BYTES,    /* little-endian element bytes at `bytes` (file buffer or arena) */
	TSRC_STRINGS,  /* STRING tensor: `strings` */
	TSRC_EXTERNAL, /* ONNX external data: `external` key/values, resolved against base_dir */
	TSRC_NPY,      /* a .npy file (YAML form): `path`, resolved against base_dir */
	TSRC_RANDOM,   /* synthetic init (YAML form): `rnd` */
};

enum tensor_field { TFIELD_RAW, TFIELD_TYPED }; /* how ONNX stores TSRC_BYTES data */

enum rnd_dist { RND_NORMAL, RND_UNIFORM, RND_CONSTANT };
struct rnd_init {
	enum rnd_dist dist;
	double a, b; /* normal: mean, std; uniform: low, high; constant: value */
	uint64_t seed;
};

struct tensor {
	const char *name, *doc;
	int dtype;
	uint32_t ndim;
	int64_t *dims;
	enum tensor_src src;
	enum tensor_field field;
	struct bytes bytes;
	struct bytes *strings;
	size_t n_strings;
	struct kv *external;
	size_t n_external;
	bool has_location;
	int32_t location;
	const char *path;
	const char *base_dir;
	struct rnd_init rnd;
	struct extras x;
};

struct node;
struct graph;

struct value {
	const char *name;
	const struct value_ext *ext; /* see value_ext() */
	struct ttype type;
	uint32_t flags;
	uint32_t slot;         /* output index in producer */
	struct node *producer; /* NULL for inputs, initializers and outer references */
	struct value *outer;   /* subgraph reference to an enclosing graph's value */
	struct tensor *init;   /* initializer data */
	uint32_t id;           /* index in graph->values */
};

/* v's ValueInfo extras, all absent (a shared zero struct) when v has none. */
extern const struct value_ext value_ext_none;
static inline const struct value_ext *value_ext(const struct value *v)
{
	return v->ext ? v->ext : &value_ext_none;
}
/* Gives v a copy of x (in the arena) unless all of x is absent; 0, or -1 when out of memory. */
int value_set_ext(struct graph *g, struct value *v, const struct value_ext *x);

/* Attribute types, numbered as ONNX AttributeProto.AttributeType. */
enum attr_type {
	ATTR_UNDEFINED = 0,
	ATTR_FLOAT = 1,
	ATTR_INT = 2,
	ATTR_STRING = 3,
	ATTR_TENSOR = 4,
	ATTR_GRAPH = 5,
	ATTR_FLOATS = 6,
	ATTR_INTS = 7,
	ATTR_STRINGS = 8,
	ATTR_TENSORS = 9,
	ATTR_GRAPHS = 10,
	ATTR_SPARSE_TENSOR = 11,
	ATTR_SPARSE_TENSORS = 12,
	ATTR_TYPE_PROTO = 13,
	ATTR_TYPE_PROTOS = 14,
};

/* One value, the one `type` selects (readers keep only that one; no code reads another): a union,
 * as the millions of backward Gemms autodiff makes carry an attribute each (72 bytes, 144 with a
 * field for each type: 64 MB of a 1M-node chain's training graph). */
struct attr {
	const char *name, *doc, *ref;
	int type;      /* enum attr_type */
	bool has_type; /* AttributeProto.type present */
	union {
		float f;
		int64_t i;
		struct bytes s;
		struct tensor *t;
		struct graph *g;
		float *floats;
		int64_t *ints;
		struct bytes *strings;
		struct tensor **tensors;
		struct graph **graphs;
	};
	size_t n; /* length of the list that `type` selects */
	struct extras x;
};
_Static_assert(sizeof(void *) != 8 || sizeof(struct attr) <= 72,
	       "an attribute's value is the union's one member: a backward Gemm's attribute in 72 bytes");

enum node_tag {
	TAG_FORWARD = 1u << 0,
	TAG_BACKWARD = 1u << 1,
	TAG_RECOMPUTE = 1u << 2,
	TAG_LOSS_SCALE = 1u << 3,
	TAG_DIET = 1u << 4,
	TAG_COMM = 1u << 5,
};

/* What a NodeProto carries besides what graphdiet models: rare, so kept out of line (NULL when all
 * absent), which keeps the millions of nodes autodiff makes at 96 bytes (128 with these inline:
 * 112 MB of a 1M-node chain's training graph). */
struct node_ext {
	const char *doc, *overload;
	struct kv *meta; /* metadata_props other than the ones graphdiet writes itself */
	uint32_t n_meta;
	struct extras x;
};

struct node {
	const char *name, *op_type, *domain;
	enum op_id op;
	uint32_t n_in, n_out, n_attr, n_ctrl;
	uint32_t tags;
	uint32_t index;     /* position in graph->nodes */
	struct value **in, **out;
	struct attr *attr;
	struct node **ctrl; /* control inputs: must run before this node */
	const struct node_ext *ext; /* see node_ext(); shared by a node's copies, so never written */
};
_Static_assert(sizeof(void *) != 8 || sizeof(struct node) <= 96,
	       "rare NodeProto fields out of line: autodiff makes 2.5M nodes of a 1M-node chain");

/* n's NodeProto extras, all absent (a shared zero struct) when n has none. */
extern const struct node_ext node_ext_none;
static inline const struct node_ext *node_ext(const struct node *n)
{
	return n->ext ? n->ext : &node_ext_none;
}
/* Gives n a copy of x (in the arena) unless all of x is absent, else NULL; 0, or -1 when out of
 * memory. */
int node_set_ext(struct graph *g, struct node *n, const struct node_ext *x);

struct opset {
	const char *domain;
	int64_t version;
	bool has_version;
	struct extras x;
};

struct training_info {
	struct graph *init, *algo;
	struct kv *init_bind, *update_bind;
	size_t n_init_bind, n_update_bind;
	struct extras x;
};

/* Model-level data; only the top-level graph has it. */
struct model {
	bool has_ir_version, has_model_version;
	int64_t ir_version, model_version;
	const char *producer_name, *producer_version, *domain, *doc;
	struct opset *opsets;
	size_t n_opsets;
	struct kv *meta;
	size_t n_meta;
	struct training_info *ti;
	size_t n_ti;
	struct extras x;
};

typedef void (*graph_cleanup_fn)(void *);

struct graph {
	struct arena *arena; /* shared by all subgraphs; owned by the root */
	struct graph *parent;
	struct model *model; /* NULL for subgraphs */
	const char *name, *doc;
	struct node **nodes;
	uint32_t n_nodes, cap_nodes;
	struct value **values;
	uint32_t n_values, cap_values;
	/* Graph lists, in file order; entries point into values. */
	struct value **inputs, **outputs, **infos, **inits;
	uint32_t n_inputs, n_outputs, n_infos, n_inits;
	uint32_t cap_inputs, cap_outputs, cap_infos, cap_inits;
	struct strmap names; /* value name -> value */
	struct extras x;
	/* Root only: what the arena does not own (mapped file, decoded protobuf). */
	struct graph_cleanup {
		graph_cleanup_fn fn;
		void *arg;
	} *cleanups;
	uint32_t n_cleanups;
	struct graph **subgraphs; /* root only: every subgraph, so their maps get freed */
	uint32_t n_subgraphs, cap_subgraphs;
	const char *path; /* source file, for messages */
	struct bytes file; /* root only: the model file where it is mapped (io/format.c); {NULL, 0}
			    * when it was read into memory. Pages of it may be dropped (MADV_DONTNEED):
			    * they are read again from the file */
	struct strmap files; /* root only: data files mapped on demand (io/tensor.c) */
	struct strmap fresh; /* root only: base name -> next suffix to try (graph_fresh_name) */
};

/* Construction. All return NULL / nonzero status on failure with `e` set. */
struct graph *graph_new(const char *path);           /* a root graph with a model */
struct graph *graph_new_sub(struct graph *parent);    /* a subgraph in the same arena */
void graph_free(struct graph *g);
int graph_on_free(struct graph *g, graph_cleanup_fn fn, void *arg);

/* Gives v a new name; fails if the name is taken. The name must outlive the graph (arena). */
int graph_rename_value(struct graph *g, struct value *v, const char *name, struct gd_err *e);
/* A name not yet used in g: base, else base_1, base_2, ... (in the arena). */
const char *graph_fresh_name(struct graph *g, const char *base, struct gd_err *e);
/* The same over any set of taken names; `next` remembers per base where to go on, so that n names
 * made from one base cost O(n) in all, not O(n^2). */
const char *name_fresh(struct arena *a, const struct strmap *taken, struct strmap *next, const char *base,
		       struct gd_err *e);

/* Renames v as graph_fresh_name would name it (after giving up its old name): one lookup when
 * base is free. */
int graph_rename_fresh(struct graph *g, struct value *v, const char *base, struct gd_err *e);
/* A new value (no producer) named as graph_fresh_name would name it: base if free, else base_k. */
struct value *graph_new_value(struct graph *g, const char *base, struct gd_err *e);
/* The same for the k-th value made from one base (k = 0, 1, ...): base_k (base for 0) is tried
 * first, so that a caller naming a run of values pays one lookup for each. */
struct value *graph_new_value_nth(struct graph *g, const char *base, uint64_t k, struct gd_err *e);
/* The value called `name` in g, created (with no producer) if absent. */
struct value *graph_value(struct graph *g, const char *name, struct gd_err *e);
/* The same for a name that does not outlive the call: it is copied into the arena if new. */
struct value *graph_value_copy(struct graph *g, const char *name, struct gd_err *e);
struct node *graph_add_node(struct graph *g, struct gd_err *e);
/* Sets node output i, refusing a second producer of the same value. */
int graph_set_output(struct graph *g, struct node *n, uint32_t i, const char *name, struct gd_err *e);
int graph_set_output_value(struct node *n, uint32_t i, struct value *v, struct gd_err *e);
int graph_add_input(struct graph *g, struct value *v, struct gd_err *e);
int graph_add_output(struct graph *g, struct value *v, struct gd_err *e);
int graph_add_info(struct graph *g, struct value *v, struct gd_err *e);
/* Makes v an initializer with data t (ownership stays with the arena). */
int graph_add_init(struct graph *g, struct value *v, struct tensor *t, struct gd_err *e);
/* Node n waits for node u (a control input; -1 out of memory). */
int node_wait_for(struct graph *g, struct node *n, struct node *u);
/* v is no initializer or graph input any more (something is to make it). */
void graph_unstore(struct graph *g, struct value *v);

/* The longest value name graph_check takes: what graphdiet derives from one (<name>_grad_local,
 * <name>_adam_m_new, <name>_recompute7, ...) fits its 600-byte name buffers. */
#define GRAPH_NAME_MAX 512

/* Resolves references to enclosing graphs, rejects dangling names and outputs nobody
 * produces, unknown dtypes, shapes whose size overflows, wrong op arity and data sizes that
 * disagree with shapes. Recurses into subgraphs. */
int graph_check(struct graph *g, struct gd_err *e);
/* Stable topological sort of g->nodes (and of every subgraph); see topo.c. */
int graph_toposort(struct graph *g, struct gd_err *e);

/* A forward node: neither a backward node nor a recompute clone. */
static inline bool node_is_forward(const struct node *n)
{
	return !(n->tags & (TAG_BACKWARD | TAG_RECOMPUTE));
}

/* Which forward values are made from resident values alone, and from which: on entry mark[v] (one
 * per value of g) is 0 for a value that is not resident, 1 for a resident one (an initializer) and 2
 * for a seed among those; each forward node's outputs then get 0 when an input has 0, else the
 * largest mark of its inputs (1 for none: a Constant). A 2 says "made from a seed and resident
 * values alone" (a weight's transpose, its dequantization). g is sorted. */
void graph_mark_resident(const struct graph *g, uint8_t *mark);

/* The model imports `domain` (version 1), for graphdiet's own ops; -1 when out of memory. */
int graph_need_domain(struct graph *g, const char *domain);
/* The model's metadata_props value for key (NULL: none); setting replaces it or appends the key
 * (value copied into the arena). -1 when out of memory. */
const char *model_meta(const struct graph *g, const char *key);
int model_set_meta(struct graph *g, const char *key, const char *value);

/* The suffix of a recompute clone's name and of its outputs' (<name>_recompute). */
#define RECOMPUTE_SUFFIX "_recompute"

/* What names derived from n (a recompute clone's <it>_recompute) are made from, and what random
 * ops key their numbers on: n's name, or an unnamed node's first output's, or its op type. */
static inline const char *node_base_name(const struct node *n)
{
	return n->name && *n->name ? n->name : n->n_out && n->out[0] ? n->out[0]->name : n->op_type;
}

/* An activation: a value some forward node produces. */
static inline bool value_is_activation(const struct value *v)
{
	return v && v->producer && node_is_forward(v->producer);
}

/* Tag names ("forward", "backward", "recompute", "loss_scale", "diet", "comm"): tags as a
 * comma-separated list into buf, and back (-1 for an unknown name). */
const char *node_tags_str(uint32_t tags, char *buf, size_t n);
int node_tag_parse(const char *name, size_t len, uint32_t *tag);

/* Message helpers: "node 'NAME' (Op)" with a positional name for unnamed nodes. */
const char *node_desc(const struct node *n, char *buf, size_t size);
const struct attr *node_attr(const struct node *n, const char *name);

/* "[batch, 3, 224, 224]" ("?" for an unknown dimension), truncated to fit. */
const char *ttype_shape_str(const struct ttype *t, char *buf, size_t n);
/* Element count of a fully known shape; -1 if symbolic or unknown, -2 on int64 overflow. */
int64_t ttype_numel(const struct ttype *t);
int64_t tensor_numel(const struct tensor *t); /* -2 on overflow */

/* Structural equality of two graphs (names, attributes, shapes, initializer bytes, extras,
 * model data). On a difference returns 0 and describes the first one in `why`. */
int graph_equal(const struct graph *a, const struct graph *b, char *why, size_t n);

#endif
