/* libprofkit_clr: the clock's state: the start (t0, tick0) and the ticks -> ns rate.
 *
 * The readings themselves are inline in profiler.h (the hot path takes two per call);
 * this unit owns what they are measured against, and the calibration, which the writer
 * thread refines over the run (see profiler.h's clock section for why ticks).
 */
#include "profiler.h"

HIDDEN uint64_t t0;      /* CLOCK_MONOTONIC ns at Initialize */
HIDDEN uint64_t tick0;   /* ticks at Initialize */
HIDDEN double g_ns_per_tick = 1.0;

/* Initialize's first act: the instant every time in the result file counts from. */
HIDDEN void clock_start(void) {
    t0 = now_ns();
    tick0 = ticks();
}

/* Rate over [start, now]; called at Initialize (after a short spin) and by the writer. */
HIDDEN void calibrate(void) {
    if (TICKS_ARE_NS) return;
    uint64_t ns = now_ns() - t0, tk = ticks() - tick0;
    if (tk > 0 && ns >= 1000000) g_ns_per_tick = (double)ns / (double)tk;
}


/* A first tick rate before any event is converted: spin 2 ms, then calibrate. */
HIDDEN void clock_first_rate(void) {
    while (!TICKS_ARE_NS && now_ns() - t0 < 2000000) {}
    calibrate();
}
