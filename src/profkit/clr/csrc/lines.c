/* libprofkit_clr: the article's Enter/Leave lines, formatted by the writer thread.
 *
 * "Enter: NAME" / "Leave: NAME, Duration: 12.250 us", indented by depth, with profkit's
 * base-time rule (profkit.profilers.elt.lines): a call shorter than the base time shows
 * no line, and no Leave is ever written without its Enter. Why a unit of its own: the
 * rule and the format are the user's contract, apart from the trees (shadow.c) and from
 * where the lines go (sinks.c).
 */
#include "profiler.h"
#include "../../_line_rule.h"

#include <string.h>

/* Lines are formatted by hand (no printf: it costs more than the rest of a line's work)
 * into one buffer; the indentation is capped at MAX_INDENT characters (a depth of 4096),
 * so a runaway recursion cannot make one line megabytes long. */
#define MAX_INDENT 16384
#define NAME_CAP NAME_BYTES
static char g_line[MAX_INDENT + NAME_CAP + 96];

static size_t put_u64(char *out, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static size_t line_head(uint32_t depth_index, const char *kind, size_t kind_len, uint32_t id) {
    size_t indent = (size_t)(depth_index - 1) * 4;
    if (indent > MAX_INDENT) indent = MAX_INDENT;
    memset(g_line, ' ', indent);
    memcpy(g_line + indent, kind, kind_len);
    size_t o = indent + kind_len;
    const char *name = method_name(id);
    size_t n = strnlen(name, NAME_CAP);
    memcpy(g_line + o, name, n);
    return o + n;
}

static void line_open(uint32_t depth_index, uint32_t id) {
    emit_line(g_line, line_head(depth_index, "Enter: ", 7, id));
}

/* "Leave: NAME, Duration: 12.250 us" (or "12250 ns"): exact decimal from integer ns. */
static void line_close(uint32_t depth_index, uint32_t id, uint64_t dur) {
    size_t o = line_head(depth_index, "Leave: ", 7, id);
    memcpy(g_line + o, ", Duration: ", 12);
    o += 12;
    if (S.unit_ns) {
        o += put_u64(g_line + o, dur);
        memcpy(g_line + o, " ns", 3);
    } else {
        o += put_u64(g_line + o, dur / 1000);
        uint64_t frac = dur % 1000;
        g_line[o++] = '.';
        g_line[o++] = (char)('0' + frac / 100);
        g_line[o++] = (char)('0' + frac / 10 % 10);
        g_line[o++] = (char)('0' + frac % 10);
        memcpy(g_line + o, " us", 3);
    }
    emit_line(g_line, o + 3);
}

/* What the shared line rule (_line_rule.h) needs here: the thread's shadow stack (entry 0
 * is its root, so entries are numbered as the rule numbers them), the clock, the popped id. */
typedef struct {
    thr_t *t;
    uint64_t now;
    uint32_t popped_index, popped_id;
} rule_ctx;

static int rule_open(void *ctx, int64_t index) {
    rule_ctx *c = ctx;
    line_open((uint32_t)index, c->t->stack[index].id);
    return 0;
}

static int rule_is_due(void *ctx, int64_t index) {
    rule_ctx *c = ctx;
    return c->now - c->t->stack[index].start >= S.basetime_ns;
}

static int rule_open_popped(void *ctx) {
    rule_ctx *c = ctx;
    line_open(c->popped_index, c->popped_id);
    return 0;
}

/* Base time without orphans: stack[1 .. written-1] have had their Enter line written; the
 * entries above are pending and always the top of the stack. */
HIDDEN void lines_after_push(thr_t *t, uint64_t now) {
    if (!g_lines_on) return;
    if (S.basetime_ns == 0) { /* nothing is pending: the new entry's line, and no clock */
        line_open(t->n_stack - 1, t->stack[t->n_stack - 1].id);
        t->written = t->n_stack;
        return;
    }
    rule_ctx c = {t, now, 0, 0};
    pk_line_rule rule = {&c, rule_open, rule_is_due};
    int64_t written = t->written;
    pk_lines_catch_up(&rule, &written, (int64_t)t->n_stack - 1);
    t->written = (uint32_t)written;
}

HIDDEN void lines_after_pop(thr_t *t, uint32_t index, uint32_t id, uint64_t dur) {
    if (!g_lines_on) return;
    rule_ctx c = {t, 0, index, id};
    pk_line_rule rule = {&c, rule_open, rule_is_due};
    if (pk_lines_before_close(&rule, t->written, index, dur >= S.basetime_ns, rule_open_popped) <= 0)
        return; /* hidden; its Enter line was never written */
    line_close(index, id, dur);
    t->written = index;
}
