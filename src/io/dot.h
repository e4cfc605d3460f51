/* dot.h - Graphviz DOT picture of a graph. */
#ifndef GD_DOT_H
#define GD_DOT_H

#include "../ir/graph.h"

#include <stdio.h>

int dot_write(struct graph *g, FILE *f, int show_params, struct gd_err *e);

#endif
