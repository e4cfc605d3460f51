/* tensor.c - lazy initializer data; see tensor.h.
 *
 * External data follows the ONNX rules: "location" is relative to the model's directory and may
 * not escape it, by ".." or by a symlink; it names a regular file; "offset" and "length" are
 * optional. A model read from standard input has no directory (base_dir NULL) unless --base-dir
 * gave one: its file references are refused. Random inits use Philox keyed by the seed,
 * so they are the same on every run and machine. */
#include "tensor.h"
#include "../util/fileio.h"
#include "../util/philox.h"
#include "../util/xalloc.h"
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void unmap_all(void *arg)
{
	struct strmap *m = arg;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key) {
			filebuf_close(m->slots[i].val);
			xfree(m->slots[i].val);
		}
	strmap_free(m);
}

static const struct filebuf *map_file(struct graph *g, const char *path, struct gd_err *e)
{
	while (g->parent)
		g = g->parent;
	struct filebuf *fb = strmap_get(&g->files, path);
	if (fb)
		return fb;
	if (g->files.len == 0 && graph_on_free(g, unmap_all, &g->files)) {
		err_oom(e);
		return NULL;
	}
	char *key = arena_strdup(g->arena, path);
	fb = xcalloc(1, sizeof *fb);
	if (!key || !fb) {
		xfree(fb);
		err_oom(e);
		return NULL;
	}
	if (filebuf_open(fb, path, e)) {
		xfree(fb);
		err_prefix(e, "%s", path);
		return NULL;
	}
	if (strmap_put(&g->files, key, fb)) {
		filebuf_close(fb);
		xfree(fb);
		err_oom(e);
		return NULL;
	}
	return fb;
}

static const char *location(const struct tensor *t)
{
	if (t->src == TSRC_NPY)
		return t->path;
	for (size_t i = 0; i < t->n_external; i++)
		if (t->external[i].key && strcmp(t->external[i].key, "location") == 0)
			return t->external[i].value;
	return NULL;
}

/* Whether one of path's components is "..". A name that merely holds two dots (weights..v2.bin)
 * is a name. */
static int has_dotdot(const char *path)
{
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		p += *p == '/';
	}
	return 0;
}

/* The data file rel names, into buf (PATH_MAX bytes): relative to the model's directory, and,
 * once realpath has followed every symlink, a regular file inside that directory. A link to / or
 * /proc/self/environ would read another file into the model, a FIFO hang the reader, /dev/zero
 * fill memory (the class of ONNX's CVE-2024-27318). */
static int ref_path(const struct tensor *t, const char *rel, char *buf, struct gd_err *e)
{
	if (!rel || !*rel)
		return err_set(e, GD_EINPUT, "tensor '%s': no data file location", t->name);
	if (rel[0] == '/' || has_dotdot(rel))
		return err_set(e, GD_EINPUT, "tensor '%s': data location '%s' must be relative to the model's directory",
			       t->name, rel);
	char joined[PATH_MAX], root[PATH_MAX];
	const char *base = t->base_dir;
	if (!base) /* `run - -o out < m.onnx` would have copied the working directory's .env */
		return err_set(e, GD_EINPUT, "tensor '%s': data file '%s': a model read from standard input has no folder "
					     "to find it in; give --base-dir DIR",
			       t->name, rel);
	if ((size_t)snprintf(joined, sizeof joined, "%s/%s", base, rel) >= sizeof joined)
		return err_set(e, GD_EINPUT, "tensor '%s': data location '%s' is too long", t->name, rel);
	if (!realpath(base, root))
		return err_set(e, GD_EINPUT, "tensor '%s': the model's directory %s: %s", t->name, base, strerror(errno));
	if (!realpath(joined, buf))
		return err_set(e, GD_EINPUT, "tensor '%s': data file %s: %s", t->name, joined, strerror(errno));
	size_t rl = strlen(root);
	if (strcmp(root, "/") && (strncmp(buf, root, rl) || buf[rl] != '/'))
		return err_set(e, GD_EINPUT, "tensor '%s': data location '%s' leads out of the model's directory (to %s)",
			       t->name, rel, buf);
	struct stat st;
	if (stat(buf, &st))
		return err_set(e, GD_EINPUT, "tensor '%s': data file %s: %s", t->name, joined, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(e, GD_EINPUT, "tensor '%s': data file %s is a %s, not a regular file", t->name, joined,
			       file_kind(st.st_mode));
	return 0;
}

static char *resolve(struct graph *g, const struct tensor *t, const char *rel, struct gd_err *e)
{
	char buf[PATH_MAX];
	if (ref_path(t, rel, buf, e))
		return NULL;
	char *p = arena_strdup(g->arena, buf);
	if (!p)
		err_oom(e);
	return p;
}

int tensor_check_source(const struct tensor *t, struct gd_err *e)
{
	char buf[PATH_MAX];
	if (t->src != TSRC_NPY && t->src != TSRC_EXTERNAL)
		return 0;
	if (ref_path(t, location(t), buf, e))
		return e->code;
	if (access(buf, R_OK) != 0)
		return err_set(e, GD_EINPUT, "tensor '%s': data file %s: %s", t->name, buf, strerror(errno));
	return 0;
}

static int external(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e)
{
	const char *loc = location(t);
	int64_t off = 0, len = -1;
	for (size_t i = 0; i < t->n_external; i++) {
		const char *k = t->external[i].key ? t->external[i].key : "", *v = t->external[i].value;
		char *end;
		if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
			long long x = v ? strtoll(v, &end, 10) : -1;
			if (!v || *end || x < 0)
				return err_set(e, GD_EINPUT, "tensor '%s': bad external data %s '%s'", t->name, k,
					       v ? v : "");
			*(strcmp(k, "offset") == 0 ? &off : &len) = x;
		}
	}
	char *path = resolve(g, t, loc, e);
	const struct filebuf *fb = path ? map_file(g, path, e) : NULL;
	if (!fb)
		return e->code;
	if ((uint64_t)off > fb->len || (len >= 0 && (uint64_t)len > fb->len - (uint64_t)off))
		return err_set(e, GD_EINPUT, "tensor '%s': external data range %" PRId64 "+%" PRId64
					     " is outside '%s' (%zu bytes)",
			       t->name, off, len, path, fb->len);
	*out = (struct bytes){fb->data + off, len >= 0 ? (size_t)len : fb->len - (size_t)off};
	return 0;
}

static int npy(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e)
{
	char *path = resolve(g, t, t->path, e);
	const struct filebuf *fb = path ? map_file(g, path, e) : NULL;
	struct npy n;
	if (!fb)
		return e->code;
	if (npy_parse(fb->data, fb->len, &n, e)) {
		err_prefix(e, "%s", path);
		return e->code;
	}
	if (n.dtype != t->dtype || n.ndim != t->ndim || memcmp(n.dims, t->dims, n.ndim * sizeof *n.dims))
		return err_set(e, GD_EINPUT, "tensor '%s': %s holds %s data of another shape or dtype than declared",
			       t->name, path, dtype_name(n.dtype));
	*out = (struct bytes){n.data, n.nbytes};
	return 0;
}

/* Generated data (zeros, ones, constant, random) is capped at 1 TiB, whatever its kind or dtype;
 * what an output can hold is the writer's to check (onnx.c refuses over 2 GiB before generating). */
#define GEN_MAX (UINT64_C(1) << 40)

int tensor_check_generated(const struct tensor *t, struct gd_err *e)
{
	int64_t n = tensor_numel(t);
	size_t es = dtype_size(t->dtype);
	const char *kind = t->rnd.dist == RND_CONSTANT ? "constant" : "random";
	if (t->src != TSRC_RANDOM)
		return 0;
	if (n < 0)
		return err_set(e, GD_EINPUT, "tensor '%s': %s init needs a known shape", t->name, kind);
	if (!es || (uint64_t)n > GEN_MAX / es)
		return err_set(e, GD_EINPUT, "tensor '%s': %s init of %" PRId64 " elements is too large to generate",
			       t->name, kind, n);
	return 0;
}

static int random_init(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e)
{
	int64_t n = tensor_numel(t);
	size_t es = dtype_size(t->dtype);
	const char *kind = t->rnd.dist == RND_CONSTANT ? "constant" : "random";
	if (tensor_check_generated(t, e))
		return e->code;
	if (t->rnd.dist == RND_CONSTANT && t->rnd.a == 0) {
		uint8_t *z = arena_zalloc(g->arena, (size_t)n * es + 1); /* zeros: all-zero bytes in any dtype */
		if (!z)
			return err_oom(e);
		*out = (struct bytes){z, (size_t)n * es};
		return 0;
	}
	if (t->dtype != DT_FLOAT && t->dtype != DT_DOUBLE)
		return err_set(e, GD_EINPUT, "tensor '%s': %s init needs float32 or float64, not %s", t->name, kind,
			       dtype_name(t->dtype));
	uint8_t *p = arena_array(g->arena, (size_t)n, es);
	if (!p && n)
		return err_oom(e);
	for (int64_t i = 0; i < n; i++) {
		double v;
		switch (t->rnd.dist) {
		case RND_NORMAL:
			v = t->rnd.a + t->rnd.b * philox_normal(t->rnd.seed, (uint64_t)i);
			break;
		case RND_UNIFORM:
			v = t->rnd.a + (t->rnd.b - t->rnd.a) * philox_uniform(t->rnd.seed, (uint64_t)i);
			break;
		default:
			v = t->rnd.a;
			break;
		}
		if (es == 4) {
			float f = (float)v;
			memcpy(p + 4 * i, &f, 4);
		} else {
			memcpy(p + 8 * i, &v, 8);
		}
	}
	*out = (struct bytes){p, (size_t)n * es};
	return 0;
}

int tensor_bytes(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e)
{
	switch (t->src) {
	case TSRC_BYTES:
		*out = t->bytes;
		return 0;
	case TSRC_EXTERNAL:
		return external(g, t, out, e);
	case TSRC_NPY:
		return npy(g, t, out, e);
	case TSRC_RANDOM:
		return random_init(g, t, out, e);
	case TSRC_NONE:
		*out = (struct bytes){NULL, 0};
		return 0;
	default:
		return err_set(e, GD_EINPUT, "tensor '%s': string data has no byte form", t->name);
	}
}
