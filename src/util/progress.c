/* progress.c - see progress.h. */
#include "progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int progress_on;
int progress_meter;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct {
	const char *what; /* the work being reported, NULL when none */
	pthread_t owner;
	double t0, last;
	int shown;
} meter;
static atomic_flag meter_busy = ATOMIC_FLAG_INIT;

void progress_step(const char *what, unsigned long long done, unsigned long long total)
{
	if (!progress_meter || atomic_flag_test_and_set(&meter_busy))
		return;
	double t = now();
	if (!meter.what) {
		meter.what = what;
		meter.owner = pthread_self();
		meter.t0 = t;
		meter.last = 0;
		meter.shown = 0;
	}
	if (meter.what == what && pthread_equal(meter.owner, pthread_self()) &&
	    (progress_meter == 2 || t - meter.t0 >= 1.0) && t - meter.last >= 0.1) {
		meter.last = t;
		meter.shown = 1;
		fprintf(stderr, "\rgraphdiet: %s: %llu/%llu (%.0f%%)%s", what, done, total,
			total ? 100.0 * (double)done / (double)total : 100.0, isatty(2) ? "\033[K" : "");
		fflush(stderr);
	}
	atomic_flag_clear(&meter_busy);
}

void progress_done(const char *what)
{
	if (!progress_meter || atomic_flag_test_and_set(&meter_busy))
		return;
	if (meter.what == what && pthread_equal(meter.owner, pthread_self())) {
		if (meter.shown)
			fputs(isatty(2) ? "\r\033[K" : "\n", stderr);
		meter.what = NULL;
	}
	atomic_flag_clear(&meter_busy);
}

double progress_begin(void)
{
	return progress_on ? now() : 0;
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
	/* and the anonymous part of it: the rest is mapped files (a model's weights), which the
	 * kernel can drop and read again */
	long pages = 0, rss = 0, shared = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		double mb = (double)sysconf(_SC_PAGESIZE) / 1e6;
		if (fscanf(f, "%ld %ld %ld", &pages, &rss, &shared) == 3 && rss > 0)
			fprintf(stderr, ", %ld MB anonymous, %ld MB resident", (long)((double)(rss - shared) * mb + 0.5),
				(long)((double)rss * mb + 0.5));
		fclose(f);
	}
	fputc('\n', stderr);
}
