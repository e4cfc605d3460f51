/* format.c - format selection, load and save; see format.h. */
#include "format.h"
#include "../util/fileio.h"
#include "../util/progress.h"
#include "../util/xalloc.h"
#include "dot.h"
#include "tensor.h"
#include "onnx.h"
#include "yaml.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

static const char *base_dir;

void model_base_dir(const char *dir)
{
	base_dir = dir;
}

#define ONNX_LIMIT "more than the 2 GiB one ONNX (protobuf) file can hold: keep the weights in external data"
#define YAML_LIMIT "more than the 3 GiB a YAML model may be: keep the weights in .npy files (npy:)"

struct graph *model_load(const char *path, enum gd_format fmt, struct gd_err *e)
{
	double t = progress_begin();
	struct filebuf *fb = xcalloc(1, sizeof *fb);
	int has_dir = base_dir || strcmp(path, "-");
	char *dir = base_dir ? strdup(base_dir) : has_dir ? path_dirname(path) : NULL;
	struct graph *g = NULL;
	if (!fb || (has_dir && !dir)) {
		xfree(fb);
		free(dir);
		err_oom(e);
		return NULL;
	}
	if (fmt == FMT_AUTO)
		fmt = format_from_path(path);
	/* the size is checked before a byte is read: a 4 GiB sparse file took 19-40 s and 4.1 GB to be
	 * refused as YAML, and as ONNX ran out of memory */
	if (filebuf_open_max(fb, path, fmt == FMT_ONNX ? ONNX_FILE_MAX : YAML_FILE_MAX,
			     fmt == FMT_ONNX ? ONNX_LIMIT : fmt == FMT_YAML ? YAML_LIMIT : "more than a model file may be (3 GiB)",
			     e)) {
		xfree(fb);
		free(dir);
		return NULL;
	}
	if (fmt == FMT_AUTO || fmt == FMT_DOT)
		fmt = sniff(fb->data, fb->len);
	if (fmt == FMT_ONNX && fb->len > ONNX_FILE_MAX) {
		err_set(e, GD_EINPUT, "is %zu bytes, " ONNX_LIMIT, fb->len);
		close_filebuf(fb);
		free(dir);
		return NULL;
	}
	const uint8_t *mapped = NULL;
	size_t mapped_len = 0;
	if (fmt == FMT_ONNX) {
		/* initializer bytes point into the buffer: the graph keeps it */
		if (fb->mapped) {
			mapped = fb->data;
			mapped_len = fb->len;
		}
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
		/* Nothing of the graph points into the file but its initializers' bytes, which no
		 * analysis reads: the pages reading touched (all of them, with weights between the
		 * nodes) leave the process, to be faulted in again from the page cache by whatever reads a
		 * weight. A 1M-node chain's plan: 557 MB less resident. */
		if (mapped) {
			madvise((void *)mapped, mapped_len, MADV_DONTNEED);
			g->file = (struct bytes){mapped, mapped_len};
		}
		progress_end(t, "load", "%s: %" PRIu32 " nodes, %" PRIu32 " values", path, g->n_nodes, g->n_values);
	}
	return g;
}

/* A tensor whose data lives in a file of the model's folder (external data, YAML npy:) keeps that
 * reference when the output goes into the same folder. Anywhere else the reference would name a
 * file that is not there (train -o OTHER_DIR/t.onnx, then run: "No such file"): those tensors
 * carry their bytes in the output instead, for this write (`was` gives them back). */
struct moved {
	struct tensor *t, was;
};

static int carry_data(struct graph *g, const char *path, enum gd_format fmt, struct moved **mv, size_t *n,
		      struct gd_err *e)
{
	*mv = NULL;
	*n = 0;
	if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout") || fmt == FMT_DOT)
		return 0;
	uint64_t total = 0;
	char out[PATH_MAX], dir[PATH_MAX];
	char *od = path_dirname(path);
	int have_out = od && realpath(od, out);
	free(od);
	const char *seen = NULL; /* the base_dir last resolved: a model's tensors share one */
	int same = 0;
	/* the main graph's initializers, then the initialization graphs' (diet storage's weights) */
	for (size_t h = 0; h <= (g->model ? g->model->n_ti : 0); h++) {
		const struct graph *in = h ? g->model->ti[h - 1].init : g;
		for (uint32_t i = 0; in && i < in->n_inits; i++) {
			struct tensor *t = in->inits[i]->init;
			if (!t || (t->src != TSRC_EXTERNAL && t->src != TSRC_NPY))
				continue;
			if (!seen || strcmp(seen, t->base_dir ? t->base_dir : "")) {
				seen = t->base_dir ? t->base_dir : ""; /* "": a model read from stdin has no folder */
				same = have_out && realpath(seen, dir) && !strcmp(dir, out);
			}
			if (same)
				continue;
			struct bytes b;
			struct moved *grown = *n % 64 ? *mv : xrealloc(*mv, (*n + 64) * sizeof **mv);
			if (!grown)
				return err_oom(e);
			*mv = grown;
			if (tensor_bytes(g, t, &b, e))
				return e->code;
			(*mv)[(*n)++] = (struct moved){t, *t};
			total += b.n;
			*t = (struct tensor){.name = t->name, .doc = t->doc, .dtype = t->dtype, .ndim = t->ndim, .dims = t->dims,
					     .src = TSRC_BYTES, .field = TFIELD_RAW, .bytes = b, .x = t->x};
		}
	}
	/* protobuf's limit on one message; YAML's on a file (base64: 4 characters for 3 bytes). A 4 GiB
	 * sparse data file became a 5.7 GB YAML. */
	if ((fmt == FMT_ONNX && total > ONNX_FILE_MAX - (UINT64_C(64) << 20)) ||
	    (fmt == FMT_YAML && total > (YAML_FILE_MAX - (UINT64_C(64) << 20)) / 4 * 3))
		return err_set(e, GD_EINPUT, "%s is not in the folder of the model's external data, and its %" PRIu64
					     " bytes are too many to carry inside one %s file: write the output into "
					     "that folder",
			       path, total, fmt == FMT_ONNX ? "ONNX" : "YAML");
	if (*n)
		fprintf(stderr, "graphdiet: note: %s: %zu tensors whose data files are in another folder are "
				"written into it (%" PRIu64 " bytes)\n",
			path, *n, total);
	return 0;
}

static int save_to(struct graph *g, const char *path, enum gd_format fmt, const struct save_opts *o,
		   struct gd_err *e)
{
	struct outfile out;
	if (outfile_open(&out, path, e))
		return e->code;
	int rc;
	switch (fmt) {
	case FMT_ONNX:
		rc = onnx_write_aligned(g, out.f, o ? o->align : 1, e);
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
	return outfile_commit(&out, e);
}

int model_save(struct graph *g, const char *path, enum gd_format fmt, const struct save_opts *o, struct gd_err *e)
{
	double t = progress_begin();
	if (fmt == FMT_AUTO)
		fmt = format_from_path(path);
	if (fmt == FMT_AUTO)
		return err_set(e, GD_EINPUT, "cannot tell the output format of '%s'; use --to onnx|yaml|dot", path);
	struct moved *mv;
	size_t n_mv;
	int rc = carry_data(g, path, fmt, &mv, &n_mv, e);
	if (!rc)
		rc = save_to(g, path, fmt, o, e);
	for (size_t i = 0; i < n_mv; i++)
		*mv[i].t = mv[i].was;
	xfree(mv);
	if (!rc)
		progress_end(t, "save", "%s: %" PRIu32 " nodes", path, g->n_nodes);
	return rc;
}
