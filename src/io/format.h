/* format.h - choosing a file format and loading or saving a graph in it.
 *
 * This is the one entry point the CLI uses for model files: loading reads, validates and sorts;
 * saving writes atomically (see fileio.h). */
#ifndef GD_FORMAT_H
#define GD_FORMAT_H

#include "../ir/graph.h"

enum gd_format { FMT_AUTO, FMT_ONNX, FMT_YAML, FMT_DOT };

/* "onnx", "yaml"/"yml", "dot"; FMT_AUTO if unknown. */
enum gd_format format_parse(const char *name);
/* From the extension; FMT_AUTO when it says nothing (including "-"). */
enum gd_format format_from_path(const char *path);
const char *format_name(enum gd_format f);

/* Reads `path` ("-" is stdin) as `fmt` (FMT_AUTO: by extension, else by content), then
 * graph_check and graph_toposort. The model's data files (external data, YAML npy:) are relative
 * to its folder, or to the one model_base_dir set; a model read from standard input has no folder
 * of its own, so without model_base_dir its data files are refused. */
struct graph *model_load(const char *path, enum gd_format fmt, struct gd_err *e);
/* --base-dir DIR: the folder the data files of every model loaded after it are relative to (NULL:
 * each model's own; none for standard input). */
void model_base_dir(const char *dir);

struct save_opts {
	size_t yaml_inline_max; /* tensors up to this many elements are written as numbers in YAML */
	int dot_params;         /* draw initializers in DOT */
	unsigned align;         /* ONNX: raw weights at file offsets that are multiples of it (0, 1: as
				 * they fall; see onnx_write_aligned) */
};
#define SAVE_OPTS_DEFAULT {16, 1, 1}

/* Writes g to `path` ("-" is stdout) as `fmt`, atomically. */
int model_save(struct graph *g, const char *path, enum gd_format fmt, const struct save_opts *o,
	       struct gd_err *e);

#endif
