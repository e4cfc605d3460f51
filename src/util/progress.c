/* progress.c - see progress.h. */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int progress_on;

double progress_begin(void)
{
	if (!progress_on)
		return 0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_end(double t0, const char *phase, const char *fmt, ...)
{
	if (!progress_on)
		return;
	double t = progress_begin() - t0;
	fprintf(stderr, "graphdiet: %s: ", phase);
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc(' ', stderr);
	}
	fprintf(stderr, "in %.2f s\n", t);
}
