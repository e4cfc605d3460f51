/* format.c - format selection, load and save; see format.h. */
#include "format.h"
#include "../util/fileio.h"
#include "../util/progress.h"
#include "../util/xalloc.h"
#include "dot.h"
#include "onnx.h"
#include "yaml.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum gd_format format_parse(const char *name)
{
	if (!strcmp(name, "onnx"))
		return FMT_ONNX;
	if (!strcmp(name, "yaml") || !strcmp(name, "yml"))
		return FMT_YAML;
	if (!strcmp(name, "dot") || !strcmp(name, "gv"))
		return FMT_DOT;
	return FMT_AUTO;
}

enum gd_format format_from_path(const char *path)
{
	char ext[16];
	return strcmp(path, "-") ? format_parse(path_ext(path, ext, sizeof ext)) : FMT_AUTO;
}

const char *format_name(enum gd_format f)
{
	static const char *names[] = {"auto", "onnx", "yaml", "dot"};
	return names[f];
}

/* An ONNX file starts with a protobuf key; YAML is text. ModelProto's first field is almost
 * always ir_version (key 0x08), and text never has bytes below 0x09 in its first kilobyte. */
static enum gd_format sniff(const uint8_t *p, size_t n)
{
	if (n && p[0] == 0x08)
		return FMT_ONNX;
	for (size_t i = 0; i < n && i < 1024; i++)
		if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20))
			return FMT_ONNX;
	return FMT_YAML;
}

static void close_filebuf(void *fb)
{
	filebuf_close(fb);
	xfree(fb);
}

struct graph *model_load(const char *path, enum gd_format fmt, struct gd_err *e)
{
	double t = progress_begin();
	struct filebuf *fb = xcalloc(1, sizeof *fb);
	char *dir = path_dirname(strcmp(path, "-") ? path : "./-");
	struct graph *g = NULL;
	if (!fb || !dir) {
		xfree(fb);
		free(dir);
		err_oom(e);
		return NULL;
	}
	if (filebuf_open(fb, path, e)) {
		xfree(fb);
		free(dir);
		return NULL;
	}
	if (fmt == FMT_AUTO)
		fmt = format_from_path(path);
	if (fmt == FMT_AUTO || fmt == FMT_DOT)
		fmt = sniff(fb->data, fb->len);
	if (fmt == FMT_ONNX) {
		/* initializer bytes point into the buffer: the graph keeps it */
		g = onnx_read(fb->data, fb->len, path, dir, close_filebuf, fb, e);
	} else {
		g = yaml_read(fb->data, fb->len, path, dir, e);
		close_filebuf(fb);
	}
	free(dir);
	if (g && (graph_check(g, e) || graph_toposort(g, e))) {
		graph_free(g);
		g = NULL;
	} else if (g) {
		progress_end(t, "load", "%s: %" PRIu32 " nodes, %" PRIu32 " values", path, g->n_nodes, g->n_values);
	}
	return g;
}

int model_save(struct graph *g, const char *path, enum gd_format fmt, const struct save_opts *o, struct gd_err *e)
{
	struct outfile out;
	double t = progress_begin();
	if (fmt == FMT_AUTO)
		fmt = format_from_path(path);
	if (fmt == FMT_AUTO)
		return err_set(e, GD_EINPUT, "cannot tell the output format of '%s'; use --to onnx|yaml|dot", path);
	if (outfile_open(&out, path, e))
		return e->code;
	int rc;
	switch (fmt) {
	case FMT_ONNX:
		rc = onnx_write(g, out.f, e);
		break;
	case FMT_YAML:
		rc = yaml_write(g, out.f, o->yaml_inline_max, e);
		break;
	default:
		rc = dot_write(g, out.f, o->dot_params, e);
		break;
	}
	if (rc) {
		outfile_abort(&out);
		return rc;
	}
	if ((rc = outfile_commit(&out, e)))
		return rc;
	progress_end(t, "save", "%s: %" PRIu32 " nodes", path, g->n_nodes);
	return 0;
}
