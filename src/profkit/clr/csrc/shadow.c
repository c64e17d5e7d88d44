/* libprofkit_clr: the writer's side of the events: shadow stacks and call trees.
 *
 * Each thread's events are replayed onto a shadow stack (call-tree node, start) and the
 * completed calls add to their nodes (calls, inclusive, min, max) and, with
 * PROFKIT_TIMELINE, to the timeline's spans. Why a unit of its own: this is where a lost
 * event is repaired: each event carries the producer's depth, so the stack re-syncs
 * instead of mis-attributing every later call. Only the writer thread runs it.
 */
#include "profiler.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash_slot(thr_t *t, uint32_t parent, uint32_t id) {
    uint32_t mask = t->hash_cap - 1;
    uint32_t i = (uint32_t)(((uint64_t)parent * 0x9E3779B1u) ^ ((uint64_t)id * 0x85EBCA77u)) & mask;
    for (;;) {
        uint32_t v = t->hash[i];
        if (v == 0) return i;
        node_t *n = &t->nodes[v - 1];
        if (n->parent == parent && n->id == id) return i;
        i = (i + 1) & mask;
    }
}

static int tree_init(thr_t *t) {
    t->cap_nodes = 1024;
    t->nodes = calloc(t->cap_nodes, sizeof *t->nodes);
    t->hash_cap = 2048;
    t->hash = calloc(t->hash_cap, sizeof *t->hash);
    t->cap_stack = 256;
    t->stack = calloc(t->cap_stack, sizeof *t->stack);
    if (!t->nodes || !t->hash || !t->stack) return -1;
    t->n_nodes = 1; /* the root */
    t->nodes[0].parent = UINT32_MAX;
    t->n_stack = 1;
    t->written = 1;
    return 0;
}

static uint32_t tree_child(thr_t *t, uint32_t parent, uint32_t id) {
    if ((t->n_nodes + 1) * 2 > t->hash_cap) {
        uint32_t cap = t->hash_cap * 2;
        uint32_t *h = calloc(cap, sizeof *h);
        if (!h) return UINT32_MAX;
        free(t->hash);
        t->hash = h;
        t->hash_cap = cap;
        for (uint32_t n = 1; n < t->n_nodes; n++) t->hash[hash_slot(t, t->nodes[n].parent, t->nodes[n].id)] = n + 1;
    }
    uint32_t s = hash_slot(t, parent, id);
    if (t->hash[s]) return t->hash[s] - 1;
    if (t->n_nodes == t->cap_nodes) {
        node_t *p = realloc(t->nodes, (size_t)t->cap_nodes * 2 * sizeof *p);
        if (!p) return UINT32_MAX;
        t->nodes = p;
        t->cap_nodes *= 2;
    }
    uint32_t n = t->n_nodes++;
    memset(&t->nodes[n], 0, sizeof t->nodes[n]);
    t->nodes[n].parent = parent;
    t->nodes[n].id = id;
    t->hash[s] = n + 1;
    return n;
}

static int stack_push(thr_t *t, uint32_t id, uint64_t start) {
    if (t->n_stack == t->cap_stack) {
        frame_t *p = realloc(t->stack, (size_t)t->cap_stack * 2 * sizeof *p);
        if (!p) return -1;
        t->stack = p;
        t->cap_stack *= 2;
    }
    uint32_t node = tree_child(t, t->stack[t->n_stack - 1].node, id);
    if (node == UINT32_MAX) return -1;
    t->stack[t->n_stack].id = id;
    t->stack[t->n_stack].node = node;
    t->stack[t->n_stack].start = start;
    t->n_stack++;
    return 0;
}
/* The timeline (PROFKIT_TIMELINE): every shown call's start and end, as profkit run
 * --timeline keeps them, up to MAX_SPANS; later calls are counted, not kept. */
#define MAX_SPANS 1000000
HIDDEN span_t *g_spans;
HIDDEN size_t g_n_spans;
static size_t g_cap_spans;
HIDDEN uint64_t g_spans_dropped;

static void add_span(uint32_t tid, uint32_t method, uint64_t start, uint64_t end, uint32_t depth) {
    if (g_n_spans >= MAX_SPANS || grow((void **)&g_spans, &g_cap_spans, g_n_spans, sizeof *g_spans) < 0) {
        g_spans_dropped++;
        return;
    }
    span_t *sp = &g_spans[g_n_spans++];
    sp->tid = tid, sp->method = method, sp->depth = depth, sp->start = start, sp->end = end;
}


/* drop the top frame without recording it (only after lost events) */
static void stack_discard(thr_t *t) {
    t->n_stack--;
    if (t->written > t->n_stack) t->written = t->n_stack;
    t->resyncs++;
}

/* Pop the top frame as a call completed at `when` (ns): its node's counts and its span. */
static void complete(thr_t *t, frame_t *f, uint64_t when) {
    uint64_t dur = when >= f->start ? when - f->start : 0;
    uint32_t index = t->n_stack - 1;
    t->n_stack--;
    if (dur < S.basetime_ns) return;
    if (S.timeline) add_span(t->tid, f->id, f->start, f->start + dur, index - 1);
    node_t *n = &t->nodes[f->node];
    if (n->calls == 0 || dur < n->min) n->min = dur;
    if (dur > n->max) n->max = dur;
    n->calls++;
    n->incl += dur;
}

static void consume(thr_t *t, const ev_t *e) {
    uint32_t kind = e->kd >> 28, depth = e->kd & DEPTH_MASK;
    uint64_t when = tick_ns(e->t);
    if (kind == K_ENTER) {
        while (t->n_stack > depth) stack_discard(t);
        while (t->n_stack < depth) /* its caller's Enter was lost: a placeholder frame */
            if (stack_push(t, 0, when) < 0) return;
        if (stack_push(t, e->id, when) < 0) return;
        if (g_lines_on) lines_after_push(t, when); /* checked here: no call without lines */
        return;
    }
    while (t->n_stack > depth + 1) stack_discard(t);
    if (t->n_stack != depth + 1 || t->n_stack < 2) {
        t->resyncs++;
        return;
    }
    frame_t *f = &t->stack[t->n_stack - 1];
    if (f->id != e->id) {
        stack_discard(t);
        return;
    }
    complete(t, f, when);
    if (g_lines_on) lines_after_pop(t, t->n_stack, e->id, when >= f->start ? when - f->start : 0);
}

/* Drain one ring; returns the number of events consumed. While the process is dying
 * (writer_dying: a signal's deadline runs), lines are no longer written: the result
 * file comes first, and a deep stack's lines can take longer than the deadline. */
HIDDEN size_t drain(thr_t *t) {
    if (!t->nodes && tree_init(t) < 0) return 0;
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
    size_t n = 0;
    uint64_t now = 0;
    for (; tail != head; tail++, n++) {
        consume(t, &t->ring[tail & t->mask]);
        if ((n & 4095) == 4095) {
            atomic_store_explicit(&t->tail, tail + 1, memory_order_release);
            if (g_lines_on && writer_dying()) g_lines_on = 0;
        }
    }
    atomic_store_explicit(&t->tail, tail, memory_order_release);
    /* base time: a pending call running for the base time already is certain to show */
    if (g_lines_on && S.basetime_ns && t->written < t->n_stack) {
        now = tick_ns(ticks());
        lines_after_push(t, now);
    }
    return n;
}

/* The end of the run: every call still open on this thread's shadow stack is closed now,
 * as profkit's Python tracer closes them (a killed program's, a thread still running at
 * exit): the profile holds what was seen. No lines: like the tracer, none are written. */
HIDDEN void close_open(thr_t *t, uint64_t now) {
    if (!t->nodes) return;
    while (t->n_stack > 1) complete(t, &t->stack[t->n_stack - 1], now);
    t->written = 1;
}
