/* The common case of an enter and a leave, inline where an event arrives (module.c's
 * C forms and sys.monitoring-shaped methods); tree.c's enter_call/leave_at do every
 * other case, and these only decide the plain one the same way.
 *
 * The plain case: the C clock, no event lines, the thread decided (its thread-local
 * cache), a frame on its stack, and for an enter the callee found where the last two
 * guesses put it (the parent's last child, or the child after that one: enter_call's
 * ``hit``), room for the frame; for a leave, the top of the stack matching and no
 * timeline. Why: each event otherwise paid a call into tree.c whose prologue saves six
 * registers for its rare paths (Python clock, event lines, new nodes), ~15 instructions
 * of ~70 (callgrind, bench/elt_event_cost.py). */
#ifndef PROFKIT_ELT_EVENTS_H
#define PROFKIT_ELT_EVENTS_H

#include "native.h"

/* do_enter(self, fid, kind), its plain case inline: 0, or -1 with an exception set. */
static inline int
enter_fast(Recorder *self, uintptr_t fid, int kind)
{
    if (self->clock == NULL && self->emit == NULL && tls_serial == self->serial
        && !gone(self)) {
        Thread *t = tls_thread;
        if (t != &SILENT && t->depth > 0 && t->depth < t->cap) {
            Frame *top = &t->frames[t->depth - 1];
            Node *parent = top->node;
            uint32_t num = parent->hit.last;
            Node *n = num != 0 ? numbered_node(t->numbered, num) : NULL;
            if (n != NULL && n->fid != fid) {
                num = n->hit.next; /* the callee that came after it last time */
                n = num != 0 ? numbered_node(t->numbered, num) : NULL;
                if (n != NULL && n->fid == fid) {
                    parent->hit.last = num;
                }
            }
            if (n != NULL && n->fid == fid) {
                Frame *f = top + 1;
                t->depth++;
                f->node = n;
                f->fid = fid;
                f->number = num;
                f->kind = kind;
                f->start = monotonic_ns(); /* last: the call's time excludes the above */
                return 0;
            }
        }
    }
    return do_enter(self, fid, kind);
}

/* do_leave(self, fid, close_kind), its plain case inline: 0, or -1 with an exception
 * set. The clock first, as do_leave reads it. */
static inline int
leave_fast(Recorder *self, uintptr_t fid, int close_kind)
{
    if (self->clock != NULL || gone(self)) {
        return do_leave(self, fid, close_kind);
    }
    int64_t now = monotonic_ns();
    if (self->emit == NULL && self->span_cap < 0 && tls_serial == self->serial) {
        Thread *t = tls_thread;
        if (t != &SILENT && t->depth > 0 && t->frames[t->depth - 1].fid == fid) {
            t->depth--;
            const Frame *f = &t->frames[t->depth];
            return close_call(t, f->node, f->number, wrap_sub(now, f->start), self->basetime);
        }
    }
    return leave_at(self, fid, close_kind, now);
}

/* do_c_enter(self, fid, caller, callable) (ccalls.c: a C call by ``caller``), its plain
 * case inline: as enter_fast, with the caller on top of the stack and the node named
 * already. 0, or -1 with an exception set. */
static inline int
c_enter_fast(Recorder *self, uintptr_t fid, uintptr_t caller, PyObject *callable)
{
    if (self->clock == NULL && self->emit == NULL && tls_serial == self->serial
        && !gone(self)) {
        Thread *t = tls_thread;
        if (t == &SILENT || t->depth == 0 || t->frames[t->depth - 1].fid != caller) {
            return 0; /* as enter_call: a C call of a caller not on top is not recorded */
        }
        if (t->depth < t->cap) {
            Frame *top = &t->frames[t->depth - 1];
            Node *parent = top->node;
            uint32_t num = parent->hit.last;
            Node *n = num != 0 ? numbered_node(t->numbered, num) : NULL;
            if (n != NULL && n->fid != fid) {
                num = n->hit.next;
                n = num != 0 ? numbered_node(t->numbered, num) : NULL;
                if (n != NULL && n->fid == fid) {
                    parent->hit.last = num;
                }
            }
            if (n != NULL && n->fid == fid && (n->parent & NAMED)) {
                Frame *f = top + 1;
                t->depth++;
                f->node = n;
                f->fid = fid;
                f->number = num;
                f->kind = OPEN_ENTER;
                f->start = monotonic_ns();
                return 0;
            }
        }
    }
    return do_c_enter(self, fid, caller, callable);
}

/* do_c_leave(self, fid, caller), its plain case inline: the clock first, then closed
 * only when it is the top of the stack and was called by ``caller``. */
static inline int
c_leave_fast(Recorder *self, uintptr_t fid, uintptr_t caller)
{
    if (self->clock != NULL || self->emit != NULL || self->span_cap >= 0 || gone(self)
        || tls_serial != self->serial) {
        return do_c_leave(self, fid, caller);
    }
    int64_t now = monotonic_ns();
    Thread *t = tls_thread;
    if (t == &SILENT || t->depth < 2 || t->frames[t->depth - 1].fid != fid
        || t->frames[t->depth - 2].fid != caller) {
        return 0;
    }
    t->depth--;
    const Frame *f = &t->frames[t->depth];
    return close_call(t, f->node, f->number, wrap_sub(now, f->start), self->basetime);
}

#endif /* PROFKIT_ELT_EVENTS_H */
