/* tensor.c - lazy initializer data; see tensor.h.
 *
 * External data follows the ONNX rules: "location" is relative to the model's directory and may
 * not escape it; "offset" and "length" are optional. Random inits use Philox keyed by the seed,
 * so they are the same on every run and machine. */
#include "tensor.h"
#include "../util/fileio.h"
#include "../util/philox.h"
#include "../util/xalloc.h"
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
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

/* base_dir/rel into buf, refusing paths that leave the model's directory. */
static int ref_path(const struct tensor *t, const char *rel, char *buf, size_t n, struct gd_err *e)
{
	if (!rel || !*rel)
		return err_set(e, GD_EINPUT, "tensor '%s': no data file location", t->name);
	if (rel[0] == '/' || strstr(rel, ".."))
		return err_set(e, GD_EINPUT, "tensor '%s': data location '%s' must be relative to the model's directory",
			       t->name, rel);
	if ((size_t)snprintf(buf, n, "%s/%s", t->base_dir ? t->base_dir : ".", rel) >= n)
		return err_set(e, GD_EINPUT, "tensor '%s': data location '%s' is too long", t->name, rel);
	return 0;
}

static char *resolve(struct graph *g, const struct tensor *t, const char *rel, struct gd_err *e)
{
	char buf[4096];
	if (ref_path(t, rel, buf, sizeof buf, e))
		return NULL;
	char *p = arena_strdup(g->arena, buf);
	if (!p)
		err_oom(e);
	return p;
}

int tensor_check_source(const struct tensor *t, struct gd_err *e)
{
	char buf[4096];
	if (t->src != TSRC_NPY && t->src != TSRC_EXTERNAL)
		return 0;
	if (ref_path(t, location(t), buf, sizeof buf, e))
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

static int random_init(struct graph *g, const struct tensor *t, struct bytes *out, struct gd_err *e)
{
	int64_t n = tensor_numel(t);
	size_t es = dtype_size(t->dtype);
	if (t->dtype != DT_FLOAT && t->dtype != DT_DOUBLE)
		return err_set(e, GD_EINPUT, "tensor '%s': random init needs float32 or float64, not %s", t->name,
			       dtype_name(t->dtype));
	if (n < 0)
		return err_set(e, GD_EINPUT, "tensor '%s': random init needs a known shape", t->name);
	if ((uint64_t)n > (UINT64_C(1) << 40) / es)
		return err_set(e, GD_EINPUT, "tensor '%s': random init of %" PRId64 " elements is too large to generate",
			       t->name, n);
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
