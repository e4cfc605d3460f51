/* progress.h - phase timings on stderr for long work.
 *
 * `graphdiet -v <command>` (or --verbose) turns them on: each phase that ends prints
 * "graphdiet: PHASE: DETAIL in S.SS s, N MB resident" to stderr, so a user of a million-node model
 * sees where the time and memory go, and the benchmarks can break a run down. Off, the calls cost
 * a branch. */
#ifndef GD_PROGRESS_H
#define GD_PROGRESS_H

extern int progress_on;

/* Starts timing a phase; returns its start for progress_end. */
double progress_begin(void);
/* Ends the phase begun at t0: prints its name, a printf detail (or nothing when fmt is NULL), the
 * seconds since t0 and the resident memory, when progress is on. */
void progress_end(double t0, const char *phase, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
