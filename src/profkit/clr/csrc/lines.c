/* libprofkit_clr: the article's Enter/Leave lines, formatted by the writer thread.
 *
 * "Enter: NAME" / "Leave: NAME, Duration: 12.250 us", indented by depth, with profkit's
 * base-time rule (profkit.profilers.elt.lines): a call shorter than the base time shows
 * no line, and no Leave is ever written without its Enter. Why a unit of its own: the
 * rule and the format are the user's contract, apart from the trees (shadow.c) and from
 * where the lines go (sinks.c).
 */
#include "profiler.h"

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

/* Base time without orphans (profkit.profilers.elt.lines): stack[1 .. written-1] have had
 * their Enter line written; the entries above are pending and always the top of the stack. */
HIDDEN void lines_after_push(thr_t *t, uint64_t now) {
    if (!g_lines_on) return;
    uint32_t top = t->n_stack; /* entries 0..top-1, the new one at top-1 */
    if (S.basetime_ns == 0) {
        line_open(top - 1, t->stack[top - 1].id);
        t->written = top;
        return;
    }
    while (t->written < top && now - t->stack[t->written].start >= S.basetime_ns) {
        line_open(t->written, t->stack[t->written].id);
        t->written++;
    }
}

HIDDEN void lines_after_pop(thr_t *t, uint32_t index, uint32_t id, uint64_t dur) {
    if (!g_lines_on) return;
    if (index >= t->written) {
        if (dur < S.basetime_ns) return; /* hidden; its Enter line was never written */
        for (uint32_t d = t->written; d < index; d++) line_open(d, t->stack[d].id);
        line_open(index, id);
    }
    line_close(index, id, dur);
    t->written = index;
}
