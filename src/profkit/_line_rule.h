/* The Enter/Leave line rule with base time and no orphan lines, for both C libraries: ELT
 * trace mode's recorder (profilers/elt/csrc/lines.c) and the .NET profiler
 * (clr/csrc/lines.c). The Python twin and the reasoning: profkit/profilers/elt/lines.py.
 *
 * Stack entries are numbered from 1 (the outermost call) to ``last`` (the innermost). The
 * entries below ``written`` have had their opening line written, once and never retracted;
 * the ones from ``written`` up are pending, and always form the top of the stack. An
 * opening line is written as soon as its call is certain to be shown: when the call has run
 * for the base time by an event on its thread, when it closes after at least the base
 * time, or when a descendant is shown (whose duration bounds its own from below).
 *
 * Why one header: the rule is the user's contract, and it was written out three times.
 * Each library keeps what differs: how a line is formatted and where it goes, the type of
 * its stack and clock. Plain C (no Python), static inline, so each call site compiles to
 * the loop it replaces.
 */
#ifndef PROFKIT_LINE_RULE_H
#define PROFKIT_LINE_RULE_H

#include <stdint.h>

typedef struct {
    void *ctx;
    /* Write the opening line of stack entry ``index`` (still on the stack); < 0: error. */
    int (*open)(void *ctx, int64_t index);
    /* Whether stack entry ``index`` has run for at least the base time. */
    int (*is_due)(void *ctx, int64_t index);
} pk_line_rule;

/* After a push, or at any event of the thread: open the pending entries that have run for
 * the base time, outermost first (one check per entry: pending entries are the top). */
static inline int
pk_lines_catch_up(const pk_line_rule *rule, int64_t *written, int64_t last)
{
    while (*written <= last && rule->is_due(rule->ctx, *written)) {
        if (rule->open(rule->ctx, *written) < 0) {
            return -1;
        }
        ++*written;
    }
    return 0;
}

/* Before the closing line of the entry that was at ``index`` (popped already): 0 when no
 * line is written (it was pending and is shorter than the base time, so its opening line
 * never was); 1 when its closing line is to be written now, after which ``written`` is
 * ``index`` -- a pending entry's ancestors and its own opening line are written here first
 * (``open_popped``: the popped entry's opening line); -1 on error. */
static inline int
pk_lines_before_close(const pk_line_rule *rule, int64_t written, int64_t index, int long_enough,
                      int (*open_popped)(void *ctx))
{
    if (index < written) {
        return 1;
    }
    if (!long_enough) {
        return 0;
    }
    for (int64_t d = written; d < index; d++) {
        if (rule->open(rule->ctx, d) < 0) {
            return -1;
        }
    }
    return open_popped(rule->ctx) < 0 ? -1 : 1;
}

#endif /* PROFKIT_LINE_RULE_H */
