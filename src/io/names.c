/* names.c - see names.h. */
#include "names.h"
#include "../util/fileio.h"
#include "../util/xalloc.h"

#include <string.h>
#include <yaml.h>

void names_free(struct names *n)
{
	for (size_t i = 0; i < n->n; i++)
		xfree(n->v[i]);
	xfree(n->v);
	n->v = NULL;
	n->n = 0;
}

static int take_list(yaml_document_t *doc, yaml_node_t *list, struct names *out, struct gd_err *e)
{
	if (list->type != YAML_SEQUENCE_NODE)
		return err_set(e, GD_EINPUT, "line %zu: the checkpoints must be a list of tensor names",
			       list->start_mark.line + 1);
	size_t n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
	out->v = xcalloc(n ? n : 1, sizeof *out->v);
	if (!out->v)
		return err_oom(e);
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it = yaml_document_get_node(doc, list->data.sequence.items.start[i]);
		if (!it || it->type != YAML_SCALAR_NODE || !it->data.scalar.length)
			return err_set(e, GD_EINPUT, "line %zu: checkpoint %zu is not a tensor name",
				       it ? it->start_mark.line + 1 : 0, i + 1);
		if (memchr(it->data.scalar.value, 0, it->data.scalar.length))
			return err_set(e, GD_EINPUT, "line %zu: a tensor name holds a NUL byte", it->start_mark.line + 1);
		if (!(out->v[out->n] = xmalloc(it->data.scalar.length + 1)))
			return err_oom(e);
		memcpy(out->v[out->n], it->data.scalar.value, it->data.scalar.length);
		out->v[out->n++][it->data.scalar.length] = 0;
	}
	return 0;
}

int names_parse(const uint8_t *data, size_t len, struct names *out, struct gd_err *e)
{
	memset(out, 0, sizeof *out);
	yaml_parser_t p;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&p))
		return err_oom(e);
	yaml_parser_set_input_string(&p, data, len);
	int rc = 0;
	if (!yaml_parser_load(&p, &doc)) {
		rc = err_set(e, GD_EINPUT, "line %zu: %s", p.problem_mark.line + 1, p.problem ? p.problem : "not YAML");
		yaml_parser_delete(&p);
		return rc;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		rc = err_set(e, GD_EINPUT, "empty: expected a list of tensor names");
	} else if (root->type == YAML_MAPPING_NODE) {
		yaml_node_t *list = NULL;
		for (yaml_node_pair_t *kv = root->data.mapping.pairs.start; kv < root->data.mapping.pairs.top; kv++) {
			yaml_node_t *k = yaml_document_get_node(&doc, kv->key);
			if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == 11 &&
			    !memcmp(k->data.scalar.value, "checkpoints", 11))
				list = yaml_document_get_node(&doc, kv->value);
		}
		rc = list ? take_list(&doc, list, out, e)
			  : err_set(e, GD_EINPUT, "a mapping without a 'checkpoints' key: expected a list of tensor names");
	} else {
		rc = take_list(&doc, root, out, e);
	}
	if (rc)
		names_free(out);
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return rc;
}

int names_read(const char *path, struct names *out, struct gd_err *e)
{
	struct filebuf fb;
	if (filebuf_open(&fb, path, e))
		return e->code;
	int rc = names_parse(fb.data, fb.len, out, e);
	filebuf_close(&fb);
	return rc;
}
