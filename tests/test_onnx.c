/* test_onnx.c - ONNX reading and writing: byte-exact round trips, unknown fields, zero-copy
 * weights, typed and external data, control dependencies, truncated input. */
#include "helpers.h"
#include "io/format.h"
#include "io/nodewire.h"
#include "io/onnx.h"
#include "io/pbwire.h"
#include "io/tensor.h"
#include "io/yaml.h"
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "plan/plan.h"
#include "rewrite/ctrl.h"
#include "proto/onnx.pb-c.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(onnx, testdata_models_round_trip_byte_for_byte)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512];
		model_path(path, sizeof path, *m);
		size_t len, len2;
		uint8_t *orig = slurp(path, &len);
		struct graph *g = load_ok(path);
		uint8_t *out = write_mem(g, 0, &len2);
		cr_assert_eq(len2, len, "%s: %zu bytes written, %zu read", *m, len2, len);
		cr_assert_eq(memcmp(out, orig, len), 0, "%s: bytes differ", *m);
		struct gd_err e = {0};
		struct graph *g2 = onnx_read(out, len2, "mem", NULL, NULL, NULL, &e);
		cr_assert(g2, "%s", e.msg);
		cr_assert_eq(graph_check(g2, &e), 0);
		cr_assert_eq(graph_toposort(g2, &e), 0);
		char why[256];
		cr_assert(graph_equal(g, g2, why, sizeof why), "%s: %s", *m, why);
		graph_free(g2);
		graph_free(g);
		free(orig);
		free(out);
	}
}

/* A testdata model's training graph with every kind of node a save writes: checkpointed (clones
 * with control inputs, as metadata) and tagged. */
static struct graph *training_graph(const char *model)
{
	struct plan_report r;
	struct graph *g = planned_ok(model, "memory", 3, &r);
	struct gd_err e = {0};
	uint32_t n_data;
	cr_assert_eq(ctrl_encode(g, CTRL_METADATA, &n_data, &e), 0, "%s: %s", model, e.msg);
	return g;
}

/* g saved as ONNX: protobuf-c re-packs what it reads of it to the same bytes, and, with
 * `read_back`, reading it gives g again (not for a graph fresh from autodiff: its values carry
 * autodiff's flags, which no file records). Returns protobuf-c's reading (onnx__model__free_unpacked). */
static Onnx__Model *written_as_protobuf_c_packs(struct graph *g, int read_back, size_t *len)
{
	uint8_t *out = write_mem(g, 0, len);
	Onnx__Model *pm = onnx__model__unpack(NULL, *len, out);
	cr_assert(pm, "protobuf-c reads what was written");
	uint8_t *again = malloc(*len);
	cr_assert_eq(protobuf_c_message_pack(&pm->base, again), *len);
	cr_assert_eq(memcmp(again, out, *len), 0, "bytes differ from protobuf-c's");
	struct gd_err e = {0};
	struct graph *g2 = read_back ? onnx_read(out, *len, "mem", NULL, NULL, NULL, &e) : NULL;
	char why[256];
	cr_assert(g2 || !read_back, "%s", e.msg);
	cr_assert(!read_back || graph_equal(g, g2, why, sizeof why), "read back: %s", why);
	graph_free(g2);
	free(again);
	free(out);
	return pm;
}

/* Nodes are written straight from the IR (io/nodewire.c), not through protobuf-c: a training graph
 * with tags, control dependencies and every kind of attribute the rules make must come out as the
 * bytes protobuf-c gives when it re-packs what it unpacked. */
Test(onnx, nodes_written_directly_are_what_protobuf_c_packs)
{
	uint32_t waiting = 0;
	for (const char *const *m = testdata_models; *m; m++) {
		struct graph *g = training_graph(*m);
		uint32_t tagged = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			waiting += g->nodes[i]->n_ctrl > 0;
			tagged += g->nodes[i]->tags != 0;
		}
		cr_assert_eq(tagged, g->n_nodes, "%s", *m);
		size_t len;
		onnx__model__free_unpacked(written_as_protobuf_c_packs(g, 0, &len), NULL);
		graph_free(g);
	}
	cr_assert_gt(waiting, 0, "some recompute clones wait on control inputs");
}

/* A node decoded by nodewire_get must be the message protobuf-c decodes: both re-pack to the same
 * bytes. Returns 1 if the direct decoder took the node, 0 if it left it to protobuf-c. */
static int read_like_protobuf_c(const uint8_t *p, size_t n)
{
	struct arena a;
	arena_init(&a);
	Onnx__Node *mine = nodewire_get(p, n, &a);
	Onnx__Node *ref = onnx__node__unpack(NULL, n, p);
	cr_assert(ref, "protobuf-c reads the node");
	if (mine) {
		size_t len = protobuf_c_message_get_packed_size(&ref->base);
		cr_assert_eq(protobuf_c_message_get_packed_size(&mine->base), len);
		uint8_t *x = malloc(len + 1), *y = malloc(len + 1);
		protobuf_c_message_pack(&ref->base, x);
		protobuf_c_message_pack(&mine->base, y);
		cr_assert_eq(memcmp(x, y, len), 0, "the directly decoded node re-packs to other bytes");
		free(x);
		free(y);
	}
	onnx__node__free_unpacked(ref, NULL);
	arena_free(&a);
	return mine != NULL;
}

/* Training graphs' nodes (tags, control inputs, int, float and list attributes) are read without
 * protobuf-c, as protobuf-c would read them; tensor attributes (Constant) are left to it. */
Test(onnx, nodes_read_directly_are_what_protobuf_c_unpacks)
{
	for (const char *const *m = testdata_models; *m; m++) {
		struct graph *g = training_graph(*m);
		uint32_t tensor_attrs = 0;
		struct gd_err e = {0};
		for (uint32_t i = 0; i < g->n_nodes; i++)
			for (uint32_t k = 0; k < g->nodes[i]->n_attr; k++)
				tensor_attrs += g->nodes[i]->attr[k].type == ATTR_TENSOR;
		size_t len;
		uint8_t *out = write_mem(g, 0, &len);
		struct pb_stripped s;
		cr_assert_eq(pbwire_strip_raw(out, len, &s, &e), 0, "%s", e.msg);
		cr_assert_eq(s.n_node, g->n_nodes);
		size_t direct = 0;
		for (size_t i = 0; i < s.n_node; i++)
			direct += (size_t)read_like_protobuf_c(s.node[i].p, s.node[i].n);
		cr_assert_geq(direct + tensor_attrs, s.n_node, "%s: %zu of %zu nodes read directly", *m, direct, s.n_node);
		pbwire_free(&s);
		free(out);
		graph_free(g);
	}
}

/* What protobuf-c accepts but never writes: packed lists, a field given twice, empty bytes; and
 * what the direct decoder leaves to protobuf-c: unknown fields, tensor attributes. */
Test(onnx, nodes_read_directly_in_every_encoding)
{
	static const uint8_t packed[] = {
		0x0a, 0x01, 'x', 0x12, 0x01, 'y', 0x1a, 0x01, 'a', 0x1a, 0x01, 'b', /* input, output, name twice */
		0x22, 0x04, 'R', 'e', 'l', 'u',                                       /* op_type */
		0x2a, 0x25,                                                            /* attribute, 37 bytes */
		0x0a, 0x01, 'p',                                                       /* name */
		0x42, 0x0d, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xac, 0x02, /* ints 1, -1, 300 */
		0x40, 0x07,                                                            /* ints 7, unpacked */
		0x3a, 0x08, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0,            /* floats 1.5, -2, packed */
		0x4a, 0x00,                                                            /* strings: one empty */
		0x22, 0x00,                                                            /* s: empty */
		0xa0, 0x01, 0x07,                                                      /* type INTS */
		0x4a, 0x11, 0x0a, 0x03, 'k', 'e', 'y', 0x12, 0x0a, 'v', 'a', 'l', 'u', 'e', '\n', 't', 'w', 'o', '!', /* metadata */
	};
	cr_assert_eq(read_like_protobuf_c(packed, sizeof packed), 1);
	struct arena a;
	arena_init(&a);
	Onnx__Node *pn = nodewire_get(packed, sizeof packed, &a);
	cr_assert_str_eq(pn->name, "b", "the last of a field given twice wins");
	cr_assert_eq(pn->attribute[0]->n_ints, 4);
	cr_assert_eq(pn->attribute[0]->ints[1], -1);
	cr_assert_eq(pn->attribute[0]->ints[3], 7);
	cr_assert_eq(pn->attribute[0]->n_floats, 2);
	cr_assert_eq(pn->attribute[0]->floats[1], -2.0f);
	static const uint8_t unknown[] = {0x0a, 0x01, 'x', 0x92, 0x03, 0x00};       /* field 50 */
	static const uint8_t tensor[] = {0x2a, 0x04, 0x2a, 0x02, 0x08, 0x01};      /* attribute t */
	static const uint8_t truncated[] = {0x0a, 0x05, 'x'};
	cr_assert_eq(read_like_protobuf_c(unknown, sizeof unknown), 0);
	cr_assert_eq(read_like_protobuf_c(tensor, sizeof tensor), 0);
	cr_assert_null(nodewire_get(truncated, sizeof truncated, &a));
	cr_assert_null(onnx__node__unpack(NULL, sizeof truncated, truncated));
	arena_free(&a);
}

/* A node bigger than the writer's first reservation (a long list, a long doc string) is written
 * again with more room, and comes out as protobuf-c packs it; read back, it is the same graph. */
Test(onnx, big_nodes_are_written_and_read_whole)
{
	struct graph *g = load_text("big.yaml", chain_yaml);
	struct node *n = g->nodes[1];
	struct attr *a = arena_array(g->arena, 1, sizeof *a);
	int64_t *ints = arena_array(g->arena, 3000, sizeof *ints);
	char *doc = arena_alloc(g->arena, 6001);
	cr_assert(a && ints && doc);
	for (int i = 0; i < 3000; i++)
		ints[i] = -1 - i; /* ten bytes each */
	memset(doc, 'd', 6000);
	doc[6000] = 0;
	*a = (struct attr){.name = "hint", .type = ATTR_INTS, .has_type = true, .n = 3000, .ints = ints};
	n->attr = a;
	n->n_attr = 1;
	cr_assert_eq(node_set_ext(g, n, &(struct node_ext){.doc = doc}), 0);
	size_t len;
	Onnx__Model *pm = written_as_protobuf_c_packs(g, 1, &len);
	cr_assert_gt(len, 36000);
	onnx__model__free_unpacked(pm, NULL);
	graph_free(g);
}

/* A chain of 4096 Relus, node i with a doc of doc(i) bytes. */
static struct graph *chain_with_docs(size_t (*doc)(uint32_t))
{
	size_t cap = 1 << 20, len = 0;
	char *y = malloc(cap);
	len += (size_t)snprintf(y, cap, "graphdiet: 1\nopset: 17\ninputs: [{name: a0, dtype: float32, shape: [4]}]\nnodes:\n");
	for (uint32_t i = 0; i < 4096; i++) {
		size_t d = doc(i);
		while (len + d + 128 > cap)
			y = realloc(y, cap *= 2);
		len += (size_t)sprintf(y + len, "  - {op: Relu, inputs: [a%u], outputs: [a%u], doc: d", i, i + 1);
		memset(y + len, 'd', d);
		len += d;
		len += (size_t)sprintf(y + len, "}\n");
	}
	sprintf(y + len, "outputs: [{name: a4096}]\n");
	struct graph *g = load_text("docs.yaml", y);
	free(y);
	return g;
}

static size_t short_docs_between_samples(uint32_t i) { return i % 64 ? 3 : 0; }
static size_t long_docs_between_samples(uint32_t i) { return i % 64 ? 1200 : 0; }
static size_t long_docs_at_samples(uint32_t i) { return i % 64 ? 0 : 20000; }

/* g written by onnx_write into a file opened with `mode` that holds `before` already. */
static uint8_t *written_to_file(struct graph *g, const char *mode, const char *before, size_t *len)
{
	char path[128];
	snprintf(path, sizeof path, "%s/written.onnx", tmpdir());
	FILE *f = fopen(path, "wb");
	fputs(before, f);
	fclose(f);
	f = fopen(path, mode);
	if (mode[0] == 'r')
		fseek(f, 0, SEEK_END);
	fputs(before, f); /* still in f's buffer when onnx_write begins */
	struct gd_err e = {0};
	cr_assert_eq(onnx_write(g, f, &e), 0, "%s", e.msg);
	cr_assert_eq(fclose(f), 0);
	return slurp(path, len);
}

/* Into a regular file, a big graph's length is estimated from a sample of its nodes and patched
 * where it lies, or, when the estimate's varint is of another width, the file is written again:
 * either way the bytes are those written to a stream, which measures first. The samples (every
 * 64th node) are made unrepresentative on purpose: short docs between them (an estimate too low,
 * of the same width), long ones between them (too low, a byte short; the output spans chunks) and
 * long ones only at them (too high). The file already holds bytes, written or still buffered, and
 * is opened to overwrite or to append. */
Test(onnx, files_get_the_bytes_streams_get_whatever_the_length_estimate)
{
	size_t (*docs[])(uint32_t) = {short_docs_between_samples, long_docs_between_samples, long_docs_at_samples};
	size_t widths[3];
	for (size_t k = 0; k < 3; k++) {
		struct graph *g = chain_with_docs(docs[k]);
		size_t len, flen;
		onnx__model__free_unpacked(written_as_protobuf_c_packs(g, 0, &len), NULL);
		uint8_t *want = write_mem(g, 0, &len);
		widths[k] = len;
		static const char *const modes[] = {"r+b", "ab"};
		for (size_t m = 0; m < 2; m++) {
			uint8_t *got = written_to_file(g, modes[m], "head", &flen);
			cr_assert_eq(flen, len + 8, "%s: %zu bytes, not %zu", modes[m], flen, len + 8);
			cr_assert_eq(memcmp(got, "headhead", 8), 0);
			cr_assert_eq(memcmp(got + 8, want, len), 0, "%s: bytes differ from the stream's", modes[m]);
			free(got);
		}
		free(want);
		graph_free(g);
	}
	cr_assert(widths[0] < (1u << 21) && widths[1] > (1u << 22) && widths[2] < (1u << 21),
		  "the three outputs: %zu, %zu, %zu bytes", widths[0], widths[1], widths[2]);
}

/* The graph's initializers and ValueInfos are written straight from the IR too (nodewire), with
 * every field they may carry: docs, type and dimension denotations, symbolic dimensions, an empty
 * tensor; protobuf-c re-packs what it reads to the same bytes. */
Test(onnx, initializers_and_value_infos_written_directly_are_what_protobuf_c_packs)
{
	struct graph *g = load_text("vinfo.yaml",
		"graphdiet: 1\nopset: 17\n"
		"inputs:\n  - name: x\n    dtype: float32\n    shape: [{dim: batch, denotation: DATA_BATCH}, 3]\n"
		"    doc: the input\n    denotation: TENSOR\n"
		"params:\n  - {name: w, dtype: float32, shape: [3, 2], doc: weights, data: [1, 2, 3, 4, 5, -6]}\n"
		"  - {name: e, dtype: float32, shape: [0], data: []}\n"
		"nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [y]}\n"
		"outputs:\n  - {name: y, dtype: float32, shape: [batch, 2], doc: scores}\n"
		"values:\n  - {name: y, dtype: float32, shape: [batch, 2]}\n");
	size_t len;
	Onnx__Model *pm = written_as_protobuf_c_packs(g, 1, &len);
	cr_assert_eq(pm->graph->n_initializer, 2);
	cr_assert_str_eq(pm->graph->input[0]->doc_string, "the input");
	cr_assert_str_eq(pm->graph->input[0]->type->tensor_type->shape->dim[0]->denotation, "DATA_BATCH");
	cr_assert_str_eq(pm->graph->initializer[0]->doc_string, "weights");
	cr_assert_eq(pm->graph->initializer[1]->raw_data.len, 0);
	onnx__model__free_unpacked(pm, NULL);
	graph_free(g);
}

Test(onnx, weights_are_not_copied)
{
	size_t len;
	uint8_t *buf = slurp(TESTDATA "/rescnn.onnx", &len);
	struct gd_err e = {0};
	struct graph *g = onnx_read(buf, len, "mem", NULL, NULL, NULL, &e);
	cr_assert(g, "%s", e.msg);
	cr_assert_gt(g->n_inits, 0);
	for (uint32_t i = 0; i < g->n_inits; i++) {
		const struct tensor *t = g->inits[i]->init;
		cr_assert_eq(t->src, TSRC_BYTES);
		cr_assert(t->bytes.p >= buf && t->bytes.p + t->bytes.n <= buf + len,
			  "initializer '%s' points into the input buffer", t->name);
	}
	graph_free(g);
	free(buf);
}

/* The kB of the process's memory resident in the mapping that holds p (/proc/self/smaps); -1 when
 * p is in none. */
static long mapping_rss_kb(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	cr_assert(f);
	char line[512];
	int in = 0;
	long rss = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (in && sscanf(line, "Rss: %ld kB", &rss) == 1)
			break;
	}
	fclose(f);
	return rss;
}

/* Loading touches every page of a model whose weights lie between its other fields; once the graph
 * is built they leave the process (the page cache keeps them), as they do once written out, and a
 * weight read later reads its own bytes again. */
Test(onnx, model_file_pages_leave_the_process_after_loading)
{
	char yaml[512], onnx[512];
	write_text(yaml, sizeof yaml, "resident.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 512]}]\nparams:\n"
		   "  - {name: w, dtype: float32, shape: [512, 512], init: {dist: normal, seed: 3}}\n"
		   "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [y]}\noutputs: [{name: y}]\n");
	struct graph *src = load_ok(yaml);
	struct gd_err e = {0};
	struct bytes want;
	cr_assert_eq(tensor_bytes(src, src->inits[0]->init, &want, &e), 0, "%s", e.msg);
	snprintf(onnx, sizeof onnx, "%s/resident.onnx", tmpdir());
	struct save_opts so = {0};
	cr_assert_eq(model_save(src, onnx, FMT_ONNX, &so, &e), 0, "%s", e.msg);
	struct graph *g = load_ok(onnx);
	const struct tensor *t = g->inits[0]->init;
	cr_assert_eq(t->src, TSRC_BYTES);
	cr_assert_eq(t->bytes.n, (size_t)512 * 512 * 4);
	cr_assert_eq(mapping_rss_kb(t->bytes.p), 0, "the model's pages stay resident after loading");
	char again[512];
	snprintf(again, sizeof again, "%s/resident_again.onnx", tmpdir());
	cr_assert_eq(model_save(g, again, FMT_ONNX, &so, &e), 0, "%s", e.msg);
	cr_assert_eq(mapping_rss_kb(t->bytes.p), 0, "the weight stays resident after it is written");
	struct graph *g2 = load_ok(again);
	char why[256];
	cr_assert(graph_equal(g, g2, why, sizeof why), "%s", why);
	graph_free(g2);
	cr_assert_eq(memcmp(t->bytes.p, want.p, want.n), 0, "the weight reads back as written");
	cr_assert_geq(mapping_rss_kb(t->bytes.p), 1024, "reading the weight faults it in again");
	graph_free(g);
	graph_free(src);
}

/* How many of g's raw-data initializers lie at addresses that are no multiple of 8. */
static uint32_t misaligned_weights(const struct graph *g)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		const struct tensor *t = g->inits[i]->init;
		n += t->src == TSRC_BYTES && t->field == TFIELD_RAW && t->bytes.n && (uintptr_t)t->bytes.p % 8;
	}
	return n;
}

/* Saved aligned (as train saves), every weight lies at a multiple of 8 in the file, so the
 * executor uses it where the file is mapped instead of copying it; the model is the same model,
 * and its loss has the same bits. PyTorch's own files put most weights anywhere. */
Test(onnx, aligned_weights_are_run_in_place)
{
	uint32_t torch_misaligned = 0;
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512], out[512];
		model_path(path, sizeof path, *m);
		struct graph *g = load_ok(path);
		torch_misaligned += misaligned_weights(g);
		snprintf(out, sizeof out, "%s/aligned_%s.onnx", tmpdir(), *m);
		struct gd_err e = {0};
		struct save_opts so = SAVE_OPTS_DEFAULT;
		so.align = 8;
		cr_assert_eq(model_save(g, out, FMT_ONNX, &so, &e), 0, "%s: %s", *m, e.msg);
		struct graph *a = load_ok(out);
		cr_expect_eq(misaligned_weights(a), 0, "%s: %u weights misaligned", *m, misaligned_weights(a));
		char why[256];
		cr_assert(graph_equal(g, a, why, sizeof why), "%s: %s", *m, why);
		struct rtensor ins[8];
		const char *names[8];
		size_t n = ref_inputs(a, *m, ins, names);
		struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
		struct exec *x = exec_run(a, &o, NULL, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		for (uint32_t i = 0; i < a->n_inits; i++) {
			const struct tensor *t = a->inits[i]->init;
			if (t->src == TSRC_BYTES && t->bytes.n)
				cr_expect_eq(exec_value(x, a->inits[i])->data, (void *)t->bytes.p,
					     "%s: initializer '%s' was copied", *m, t->name);
		}
		struct exec *x0 = exec_run(g, &o, NULL, &e);
		cr_assert(x0, "%s: %s", *m, e.msg);
		double got = rt_get(exec_value(x, a->outputs[0]), 0), want = rt_get(exec_value(x0, g->outputs[0]), 0);
		cr_expect_eq(memcmp(&got, &want, sizeof got), 0, "%s: loss %.9g, from the file as read %.9g", *m, got, want);
		exec_free(x0);
		exec_free(x);
		graph_free(a);
		graph_free(g);
		for (size_t i = 0; i < n; i++)
			free(ins[i].data);
	}
	cr_expect_gt(torch_misaligned, 0, "no testdata model needs aligning: the test shows nothing");
}

/* protobuf-c keeps a length-delimited unknown field's length prefix in its data */
static ProtobufCMessageUnknownField unk(uint32_t field, const char *payload)
{
	static uint8_t bufs[16][32];
	static int next;
	uint8_t *b = bufs[next++ % 16];
	size_t n = strlen(payload);
	b[0] = (uint8_t)n;
	memcpy(b + 1, payload, n);
	return (ProtobufCMessageUnknownField){field, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, n + 1, b};
}

static void add_unknown(ProtobufCMessage *m, ProtobufCMessageUnknownField *f)
{
	m->n_unknown_fields = 1;
	m->unknown_fields = f;
}

/* A model with a field graphdiet does not know at every level it models. */
static uint8_t *model_with_unknowns(size_t *len)
{
	static ProtobufCMessageUnknownField u[12];
	static int64_t dims[] = {2};
	static float data[] = {1.5f, -2.0f};
	static Onnx__Dim dim = ONNX__DIM__INIT, *pdim = &dim;
	static Onnx__Shape shape = ONNX__SHAPE__INIT;
	static Onnx__TensorType tt = ONNX__TENSOR_TYPE__INIT;
	static Onnx__Type type = ONNX__TYPE__INIT;
	static Onnx__ValueInfo in = ONNX__VALUE_INFO__INIT, out = ONNX__VALUE_INFO__INIT, *pin = &in, *pout = &out;
	static Onnx__Tensor w = ONNX__TENSOR__INIT, *pw = &w;
	static Onnx__Attribute at = ONNX__ATTRIBUTE__INIT, *pat = &at;
	static Onnx__Node node = ONNX__NODE__INIT, *pnode = &node;
	static Onnx__Graph graph = ONNX__GRAPH__INIT;
	static Onnx__OpsetId op = ONNX__OPSET_ID__INIT, *pop = &op;
	static Onnx__Model m = ONNX__MODEL__INIT;
	static char *ins[] = {"x", "w"}, *outs[] = {"y"};
	const char *p[] = {"dim", "shape", "tensor_type", "type", "value_info", "tensor", "attribute", "node",
			   "graph", "opset", "model"};
	for (int i = 0; i < 11; i++)
		u[i] = unk(100 + (uint32_t)i, p[i]);
	dim.has_dim_value = 1;
	dim.dim_value = 2;
	add_unknown(&dim.base, &u[0]);
	shape.n_dim = 1;
	shape.dim = &pdim;
	add_unknown(&shape.base, &u[1]);
	tt.has_elem_type = 1;
	tt.elem_type = 1;
	tt.shape = &shape;
	add_unknown(&tt.base, &u[2]);
	type.tensor_type = &tt;
	type.denotation = "TENSOR";
	add_unknown(&type.base, &u[3]);
	in.name = "x";
	in.doc_string = "the input";
	in.type = &type;
	add_unknown(&in.base, &u[4]);
	out.name = "y";
	out.type = &type;
	w.name = "w";
	w.has_data_type = 1;
	w.data_type = 1;
	w.n_dims = 1;
	w.dims = dims;
	w.n_float_data = 2; /* typed storage must come back as typed storage */
	w.float_data = data;
	add_unknown(&w.base, &u[5]);
	at.name = "hint";
	at.has_type = 1;
	at.type = 2;
	at.has_i = 1;
	at.i = 7;
	add_unknown(&at.base, &u[6]);
	node.name = "add";
	node.op_type = "Add";
	node.n_input = 2;
	node.input = ins;
	node.n_output = 1;
	node.output = outs;
	node.n_attribute = 1;
	node.attribute = &pat;
	add_unknown(&node.base, &u[7]);
	graph.name = "g";
	graph.n_node = 1;
	graph.node = &pnode;
	graph.n_input = 1;
	graph.input = &pin;
	graph.n_output = 1;
	graph.output = &pout;
	graph.n_initializer = 1;
	graph.initializer = &pw;
	add_unknown(&graph.base, &u[8]);
	op.has_version = 1;
	op.version = 17;
	add_unknown(&op.base, &u[9]);
	m.has_ir_version = 1;
	m.ir_version = 8;
	m.n_opset_import = 1;
	m.opset_import = &pop;
	m.graph = &graph;
	add_unknown(&m.base, &u[10]);
	*len = protobuf_c_message_get_packed_size(&m.base);
	uint8_t *buf = malloc(*len);
	protobuf_c_message_pack(&m.base, buf);
	return buf;
}

Test(onnx, unknown_fields_survive_at_every_level)
{
	size_t len, len2;
	uint8_t *buf = model_with_unknowns(&len);
	struct gd_err e = {0};
	struct graph *g = onnx_read(buf, len, "mem", NULL, NULL, NULL, &e);
	cr_assert(g, "%s", e.msg);
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	cr_assert_eq(g->model->x.n, 1);
	cr_assert_eq(g->model->x.f[0].field, 110);
	cr_assert_eq(node_ext(g->nodes[0])->x.f[0].field, 107);
	uint8_t *out = write_mem(g, 0, &len2);
	cr_assert_eq(len2, len);
	cr_assert_eq(memcmp(out, buf, len), 0, "unknown fields re-encoded identically");
	/* and through YAML */
	size_t ylen;
	uint8_t *y = write_mem(g, 1, &ylen);
	cr_assert(strstr((char *)y, "field: 105"), "the tensor's unknown field is in the YAML");
	cr_assert(strstr((char *)y, "typed: true"));
	cr_assert(strstr((char *)y, "denotation: TENSOR") && strstr((char *)y, "doc: \"the input\""), "%s", (char *)y);
	struct graph *gy = yaml_read(y, ylen, "mem.yaml", NULL, &e);
	char why[300];
	cr_assert(gy, "%s", e.msg);
	cr_assert(graph_equal(g, gy, why, sizeof why), "YAML keeps all of it: %s", why);
	graph_free(gy);
	free(out);
	free(y);
	graph_free(g);
	free(buf);
}

Test(onnx, typed_float_data_becomes_element_bytes)
{
	size_t len;
	uint8_t *buf = model_with_unknowns(&len);
	struct gd_err e = {0};
	struct graph *g = onnx_read(buf, len, "mem", NULL, NULL, NULL, &e);
	cr_assert(g);
	const struct tensor *t = g->inits[0]->init;
	cr_assert_eq(t->field, TFIELD_TYPED);
	cr_assert_eq(t->bytes.n, 8);
	float f[2];
	memcpy(f, t->bytes.p, 8);
	cr_assert_eq(f[0], 1.5f);
	cr_assert_eq(f[1], -2.0f);
	graph_free(g);
	free(buf);
}

Test(onnx, control_dependencies_round_trip)
{
	struct graph *g = load_ok(TESTDATA "/yaml/control_deps.yaml");
	size_t len;
	uint8_t *buf = write_mem(g, 0, &len);
	struct gd_err e = {0};
	struct graph *g2 = onnx_read(buf, len, "mem", NULL, NULL, NULL, &e);
	cr_assert(g2, "%s", e.msg);
	cr_assert_eq(graph_toposort(g2, &e), 0);
	char why[256];
	cr_assert(graph_equal(g, g2, why, sizeof why), "%s", why);
	struct node *rc = g2->nodes[1];
	cr_assert_str_eq(rc->name, "h_recompute");
	cr_assert_eq(rc->n_ctrl, 1);
	cr_assert_str_eq(rc->ctrl[0]->name, "grad_start");
	cr_assert_eq(node_ext(rc)->n_meta, 0, "graphdiet's own metadata entry is not shown as user metadata");
	graph_free(g2);
	graph_free(g);
	free(buf);
}

Test(onnx, external_data_is_read_lazily_and_kept_as_reference)
{
	char dir[256], bin[300], model[300];
	snprintf(dir, sizeof dir, "%s", tmpdir());
	snprintf(bin, sizeof bin, "%s/weights.bin", dir);
	snprintf(model, sizeof model, "%s/ext.yaml", dir);
	FILE *f = fopen(bin, "wb");
	float vals[4] = {9, 1, 2, 3};
	fwrite(vals, 4, 4, f);
	fclose(f);
	f = fopen(model, "w");
	fputs("graphdiet: 1\nopset: 17\n"
	      "params:\n  - name: w\n    dtype: float32\n    shape: [3]\n    data_location: 1\n"
	      "    external:\n      - {key: location, value: weights.bin}\n      - {key: offset, value: \"4\"}\n"
	      "      - {key: length, value: \"12\"}\n"
	      "nodes:\n  - {name: r, op: Relu, inputs: [w], outputs: [y]}\noutputs:\n  - {name: y}\n",
	      f);
	fclose(f);
	struct graph *g = load_ok(model);
	struct tensor *t = g->inits[0]->init;
	cr_assert_eq(t->src, TSRC_EXTERNAL);
	struct bytes b;
	struct gd_err e = {0};
	cr_assert_eq(tensor_bytes(g, t, &b, &e), 0, "%s", e.msg);
	cr_assert_eq(b.n, 12);
	cr_assert_eq(memcmp(b.p, vals + 1, 12), 0);
	size_t len;
	uint8_t *buf = write_mem(g, 0, &len);
	struct graph *g2 = onnx_read(buf, len, "mem", dir, NULL, NULL, &e);
	cr_assert(g2);
	cr_assert_eq(g2->inits[0]->init->src, TSRC_EXTERNAL, "the ONNX output refers to the same file");
	char why[256];
	cr_assert(graph_equal(g, g2, why, sizeof why), "%s", why);
	graph_free(g2);
	graph_free(g);
	free(buf);
}

Test(onnx, every_truncation_is_an_error_or_a_valid_prefix)
{
	/* Cutting a model anywhere must give a clean error or a model that still checks; never a crash
	 * (run under ASan in CI). */
	size_t len;
	uint8_t *buf = slurp(TESTDATA "/mlp.onnx", &len);
	int errors = 0;
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		memcpy(copy, buf, cut);
		struct gd_err e = {0};
		struct graph *g = onnx_read(copy, cut, "mem", NULL, NULL, NULL, &e);
		if (g && !graph_check(g, &e) && !graph_toposort(g, &e))
			;
		else {
			errors++;
			cr_assert_eq(e.code, GD_EINPUT, "cut at %zu: %s", cut, e.msg);
			cr_assert(e.msg[0]);
		}
		graph_free(g);
		free(copy);
	}
	cr_assert_gt(errors, (int)len / 2, "most prefixes are rejected");
	free(buf);
}

Test(pbwire, strip_reports_raw_spans_in_order)
{
	size_t len;
	uint8_t *buf = slurp(TESTDATA "/tanh_chain.onnx", &len);
	struct pb_stripped s;
	struct gd_err e = {0};
	cr_assert_eq(pbwire_strip_raw(buf, len, &s, &e), 0, "%s", e.msg);
	cr_assert_eq(s.n_raw, 24);
	size_t raw = 0;
	for (size_t i = 0; i < s.n_raw; i++) {
		cr_assert(s.raw[i].p > buf && s.raw[i].p + s.raw[i].n <= buf + len);
		raw += s.raw[i].n;
	}
	cr_assert_eq(raw, 13056, "the 24 tensors hold 3,264 floats");
	cr_assert_lt(s.len, len - raw + 1);
	Onnx__Model *m = onnx__model__unpack(NULL, s.len, s.buf);
	cr_assert(m, "the skeleton is a valid ModelProto");
	cr_assert_eq(m->graph->n_initializer, 24);
	cr_assert_not(m->graph->initializer[0]->has_raw_data);
	onnx__model__free_unpacked(m, NULL);
	pbwire_free(&s);
	free(buf);
}

/* #48 valid: state is no initializer that is also a graph input (onnxruntime warned "Initializer
 * ... appears in graph inputs" for each); train writes it as an input whose first value the
 * initialization graph stores and outputs, and reading the file gives it its initializer back,
 * pointing into the file as the main graph's weights do. */
static const Onnx__Tensor *named_tensor(Onnx__Tensor **ts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(ts[i]->name, name))
			return ts[i];
	return NULL;
}

Test(onnx, state_is_an_input_whose_first_value_the_initialization_stores)
{
	size_t len, olen;
	uint8_t *orig = slurp(TESTDATA "/mlp.onnx", &olen);
	char out[600];
	snprintf(out, sizeof out, "%s/mlp_sgd_state.onnx", tmpdir());
	char *argv[] = {GD_BINARY, "train", TESTDATA "/mlp.onnx", "--optimizer", "sgd:momentum=0.9", "-o", out, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "train --optimizer sgd: %s", r.err);
	uint8_t *buf = slurp(out, &len);
	run_free(&r);
	Onnx__Model *m = onnx__model__unpack(NULL, len, buf), *o = onnx__model__unpack(NULL, olen, orig);
	cr_assert(m && o && m->n_training_info == 1 && m->training_info[0]->initialization);
	const Onnx__Graph *g = m->graph, *ig = m->training_info[0]->initialization;
	for (size_t i = 0; i < g->n_input; i++)
		cr_assert_null(named_tensor(g->initializer, g->n_initializer, g->input[i]->name),
			       "'%s' is both an initializer and a graph input", g->input[i]->name);
	const char *params[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
	for (size_t k = 0; k < 6; k++) {
		const Onnx__Tensor *was = named_tensor(o->graph->initializer, o->graph->n_initializer, params[k]);
		const char *bound = NULL;
		for (size_t b = 0; b < m->training_info[0]->n_initialization_binding; b++)
			if (!strcmp(m->training_info[0]->initialization_binding[b]->key, params[k]))
				bound = m->training_info[0]->initialization_binding[b]->value;
		cr_assert(bound, "%s: no initialization_binding", params[k]);
		const Onnx__Tensor *now = named_tensor(ig->initializer, ig->n_initializer, bound);
		cr_assert(was && now, "%s: the initialization graph stores no '%s'", params[k], bound);
		int output = 0;
		for (size_t i = 0; i < ig->n_output; i++)
			output |= !strcmp(ig->output[i]->name, bound) && ig->output[i]->type;
		cr_assert(output, "%s: the initialization graph does not output '%s' with its type", params[k], bound);
		cr_assert(was->raw_data.len > 0 && now->raw_data.len == was->raw_data.len &&
			  !memcmp(now->raw_data.data, was->raw_data.data, was->raw_data.len), "%s: its bytes changed", params[k]);
	}
	/* read back: the parameters are the main graph's initializers again, with the model's bytes */
	struct gd_err e = {0};
	struct graph *gr = onnx_read(buf, len, out, NULL, NULL, NULL, &e);
	cr_assert(gr, "%s", e.msg);
	for (size_t k = 0; k < 6; k++) {
		const struct value *v = strmap_get(&gr->names, params[k]);
		const Onnx__Tensor *was = named_tensor(o->graph->initializer, o->graph->n_initializer, params[k]);
		struct bytes b;
		cr_assert(v && v->init && (v->flags & VALUE_INPUT), "%s: no initializer read back", params[k]);
		cr_assert_eq(tensor_bytes(gr, v->init, &b, &e), 0, "%s", e.msg);
		cr_assert(b.n == was->raw_data.len && !memcmp(b.p, was->raw_data.data, b.n), "%s: other bytes read back",
			  params[k]);
		/* where they lie in the file (pbwire splits them off): reading the graph reads no weight */
		cr_assert(b.p >= buf && b.p + b.n <= buf + len, "%s: its weights were copied", params[k]);
	}
	graph_free(gr);
	onnx__model__free_unpacked(m, NULL);
	onnx__model__free_unpacked(o, NULL);
	free(buf);
	free(orig);
}

/* #52 rnnfast: the LSTM, GRU and RNN kernels (one product for the input projection of all steps,
 * one a step for the recurrence, the gates fused, in X's dtype) against PyTorch's nn.LSTM, nn.GRU
 * and nn.RNN on the same weights (testdata/gen_rnn_torch.py): float32 within 1e-5 relative (and
 * 2e-6 absolute, about 16 ulp of 0.5: PyTorch sums in another order), float64 within 1e-12. */
static void rnn_torch_file(const void *ctx, int is_output, size_t k, const char *name, char *buf, size_t n)
{
	(void)is_output;
	(void)k;
	snprintf(buf, n, "%s/ref/rnn_torch/%s/%s.npy", TESTDATA, (const char *)ctx, name);
}

Test(onnx, rnn_kernels_match_pytorch)
{
	static const struct {
		const char *name;
		double rtol, atol;
	} cases[] = {{"lstm_bidir", 1e-5, 2e-6}, {"gru", 1e-5, 2e-6}, {"rnn_bidir", 1e-5, 2e-6}, {"lstm2_f64", 1e-12, 1e-13}};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char path[600];
		snprintf(path, sizeof path, "%s/rnn_torch/%s.onnx", TESTDATA, cases[i].name);
		struct graph *g = load_ok(path);
		expect_run_matches_npy(g, rnn_torch_file, cases[i].name, cases[i].rtol, cases[i].atol, cases[i].name);
		graph_free(g);
	}
}

/* #52 rnnback: both backward passes of the recurrent ops (the unrolled rule in standard ops, and
 * RecurrentGrad from train --fused-rnn) against PyTorch's gradients of a scalar loss of every
 * output (testdata/gen_rnn_torch.py's <case>_loss models): with respect to x, h0, c0 and each
 * node's W, R and B, for a bidirectional batch-first LSTM with initial states, a GRU
 * (linear_before_reset 1), a bidirectional RNN (float32: within 1e-5 relative and 5e-6 absolute, 1e-5 of the
 * gradients' scale: PyTorch sums in another order)
 * and a 2-layer LSTM in float64 (1e-10). */
Test(onnx, rnn_gradients_match_pytorch)
{
	static const struct {
		const char *name, *op;
		double rtol, atol;
	} cases[] = {{"lstm_bidir_loss", "LSTM", 1e-5, 5e-6}, {"gru_loss", "GRU", 1e-5, 5e-6},
		     {"rnn_bidir_loss", "RNN", 1e-5, 5e-6}, {"lstm2_f64_loss", "LSTM", 1e-10, 1e-12}};
	for (int fused = 0; fused < 2; fused++)
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			char path[600], what[200];
			snprintf(path, sizeof path, "%s/rnn_torch/%s.onnx", TESTDATA, cases[i].name);
			snprintf(what, sizeof what, "%s (%s)", cases[i].name, fused ? "RecurrentGrad" : "unrolled");
			struct graph *g = load_ok(path);
			const char *params[16] = {"x", "h0", "c0"};
			size_t np = strcmp(cases[i].op, "LSTM") ? 2 : 3;
			for (uint32_t k = 0; k < g->n_nodes; k++)
				for (uint32_t s = 1; s <= 3 && !strcmp(g->nodes[k]->op_type, cases[i].op); s++) {
					cr_assert_lt(np, 16);
					params[np++] = g->nodes[k]->in[s]->name;
				}
			struct autodiff_opts ao = {.params = params, .n_params = np, .fused_rnn = fused};
			struct autodiff_result res;
			struct gd_err e = {0};
			cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", what, e.msg);
			cr_assert_eq(res.n_grads, np, "%s", what);
			int grads = 0;
			for (uint32_t k = 0; k < g->n_nodes; k++)
				grads += !strcmp(g->nodes[k]->op_type, "RecurrentGrad");
			cr_assert_eq(grads > 0, fused, "%s", what);
			cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", what, e.msg);
			expect_run_matches_npy(g, rnn_torch_file, cases[i].name, cases[i].rtol, cases[i].atol, what);
			graph_free(g);
		}
}
