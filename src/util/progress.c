/* progress.c - see progress.h. */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

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
	fprintf(stderr, "in %.2f s", t);
	/* resident memory, what a million-node graph is mostly limited by */
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) == 2 && rss > 0)
			fprintf(stderr, ", %ld MB resident", (long)((double)rss * (double)sysconf(_SC_PAGESIZE) / 1e6 + 0.5));
		fclose(f);
	}
	fputc('\n', stderr);
}
