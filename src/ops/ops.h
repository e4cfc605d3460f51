/* ops.h - the op registry, generated from ops.def (an X-macro, as jq's opcode_list.h).
 *
 * The enum, the name table and the arity table all come from the one file, so nothing is kept in
 * sync by hand. Ops not in the table are OP_UNKNOWN: they stay opaque, so info/convert/dot still
 * work, and only stages that need semantics refuse them. */
#ifndef GD_OPS_H
#define GD_OPS_H

#include <stdint.h>

enum op_flag {
	OPF_DIFF = 1u << 0,     /* has a gradient rule */
	OPF_ELEMWISE = 1u << 1, /* elementwise with broadcasting */
	OPF_RANDOM = 1u << 2,   /* draws random numbers: recompute with the same seed */
	OPF_SUBGRAPH = 1u << 3, /* carries graph attributes */
};

enum op_id {
	OP_UNKNOWN = 0,
#define OP(id, name, domain, min_in, max_in, min_out, max_out, flags) OP_##id,
#include "ops.def"
#undef OP
	OP_COUNT
};

struct op_info {
	const char *op_type, *domain;
	int min_in, max_in, min_out, max_out;
	uint32_t flags;
};

extern const struct op_info op_table[OP_COUNT];

/* The op for (domain, op_type); "" and "ai.onnx" are the same domain. */
enum op_id op_lookup(const char *domain, const char *op_type);
/* 1 if `domain` names the default ONNX domain. */
int op_domain_is_default(const char *domain);

#endif
