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

/* A live meter for work that can take more than a second: "graphdiet: WHAT: DONE/TOTAL (P%)",
 * rewritten in place on stderr at most ten times a second. progress_meter is 1 (the default)
 * when stderr is a terminal: the meter shows once the work has run a second; 2 with --progress:
 * always, from the start; 0 with -q or --quiet, or when stderr is no terminal. Only the thread
 * that first reports a piece of work reports it (replicas run in threads). */
extern int progress_meter;

void progress_step(const char *what, unsigned long long done, unsigned long long total);
/* Ends the piece of work: the meter's line is cleared (on a terminal) or ended. */
void progress_done(const char *what);

#endif
