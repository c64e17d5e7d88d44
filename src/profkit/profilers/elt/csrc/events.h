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

#define C_FID_TAG 1u /* a C function's fid is odd: never a code object's id */

/* The PyMethodDef of a C callable (tagged: the node's fid), or 0 for anything else.
 * The types a CALL event meets most (sympy: builtins 43 %, Python functions 18 %, method
 * descriptors 16 %, classes 16 %, bound methods 4 %) are told by their type alone; only
 * the rest pays PyCFunction_Check's walk of the type's bases (PyType_IsSubtype, ~20
 * instructions). A function, a bound method or a class is never a PyCFunction. */
static inline uintptr_t
c_fid(PyObject *callable)
{
    PyTypeObject *type = Py_TYPE(callable);
    if (type == &PyCFunction_Type || type == &PyCMethod_Type) {
        return (uintptr_t)((PyCFunctionObject *)callable)->m_ml | C_FID_TAG;
    }
    if (type == &PyMethodDescr_Type) {
        return (uintptr_t)((PyMethodDescrObject *)callable)->d_method | C_FID_TAG;
    }
    if (type == &PyFunction_Type || type == &PyMethod_Type
        || PyType_FastSubclass(type, Py_TPFLAGS_TYPE_SUBCLASS)) {
        return 0;
    }
    if (PyCFunction_Check(callable)) {
        return (uintptr_t)((PyCFunctionObject *)callable)->m_ml | C_FID_TAG;
    }
    return 0;
}

/* A simple recorder: the C clock, no event lines, no timeline. Fixed when it is made
 * (Recorder_clear only makes it gone()), so hooks.c asks once, when it makes a hook, and
 * the ``simple`` forms below (``simple`` a constant where they are inlined) skip those
 * tests per event. */
static inline int
simple_recorder(Recorder *self)
{
    return self->clock == NULL && self->emit == NULL && self->span_cap < 0;
}

/* In the plain cases below, a depth test also turns SILENT away: its depth is 0 for good
 * (threads.c: nothing is ever pushed on it). */

/* do_enter(self, fid, kind)'s plain case: 1 when the call was recorded here, 0 when it is
 * not the plain case (nothing done: do_enter decides). ``simple``: simple_recorder(self)
 * is known to hold. */
ELT_ALWAYS_INLINE static inline int
enter_plain_as(Recorder *self, uintptr_t fid, int kind, int simple)
{
    if ((simple || (self->clock == NULL && self->emit == NULL)) && tls_serial == self->serial
        && !gone(self)) {
        Thread *t = tls_thread;
        if (t->depth > 0 && t->depth < t->cap) {
            Frame *top = &t->frames[t->depth - 1];
            Node *parent = top->node;
            uint32_t num = parent->hit.last;
            Node *n = num != 0 ? numbered_node(t->numbered, num) : NULL;
            if (n != NULL && fid_of(&t->fids, n) != fid) {
                num = n->hit.next; /* the callee that came after it last time */
                n = num != 0 ? numbered_node(t->numbered, num) : NULL;
                if (n != NULL && fid_of(&t->fids, n) == fid) {
                    parent->hit.last = num;
                }
            }
            if (n != NULL && fid_of(&t->fids, n) == fid) {
                Frame *f = top + 1;
                t->depth++;
                f->node = n;
                f->fid = fid;
                f->number = num;
                f->kind = kind;
                f->start = monotonic_ns(); /* last: the call's time excludes the above */
                return 1;
            }
        }
    }
    return 0;
}

#define enter_plain(self, fid, kind) enter_plain_as(self, fid, kind, 0)

/* do_enter(self, fid, kind), its plain case inline: 0, or -1 with an exception set. */
static inline int
enter_fast(Recorder *self, uintptr_t fid, int kind)
{
    return enter_plain(self, fid, kind) ? 0 : do_enter(self, fid, kind);
}

/* Whether a leave may read the C clock itself (leave_at then does the rest): the C clock
 * and a recorder not gone. */
static inline int
leave_reads_clock_as(Recorder *self, int simple)
{
    return (simple || self->clock == NULL) && !gone(self);
}

/* leave_at's plain case, past the clock: the calling thread when the top of its stack is
 * ``fid`` (close_plain closes it), else NULL (nothing done: leave_at decides). */
ELT_ALWAYS_INLINE static inline Thread *
leave_plain_as(Recorder *self, uintptr_t fid, int simple)
{
    if ((simple || (self->emit == NULL && self->span_cap < 0)) && tls_serial == self->serial) {
        Thread *t = tls_thread;
        if (t->depth > 0 && t->frames[t->depth - 1].fid == fid) {
            return t;
        }
    }
    return NULL;
}

#define leave_reads_clock(self) leave_reads_clock_as(self, 0)
#define leave_plain(self, fid) leave_plain_as(self, fid, 0)

/* Close the top of ``t``'s stack at ``now``: statistics only (no timeline, no event
 * lines: leave_plain's and c_leave_plain's case). 0, or -1 with an exception set. */
static inline int
close_plain(Recorder *self, Thread *t, int64_t now)
{
    t->depth--;
    const Frame *f = &t->frames[t->depth];
    return close_call(t, f->node, f->number, wrap_sub(now, f->start), self->basetime);
}

/* do_leave(self, fid, close_kind), its plain case inline: 0, or -1 with an exception
 * set. The clock first, as do_leave reads it. */
static inline int
leave_fast(Recorder *self, uintptr_t fid, int close_kind)
{
    if (!leave_reads_clock(self)) {
        return do_leave(self, fid, close_kind);
    }
    int64_t now = monotonic_ns();
    Thread *t = leave_plain(self, fid);
    return t != NULL ? close_plain(self, t, now) : leave_at(self, fid, close_kind, now);
}

/* do_c_enter(self, fid, caller, callable) (ccalls.c: a C call by ``caller``), its plain
 * case: as enter_plain, with the caller on top of the stack and the node named already.
 * 1 when done here (recorded, or not to be: its caller is not on top), 0 when it is not
 * the plain case (nothing done: do_c_enter decides). */
ELT_ALWAYS_INLINE static inline int
c_enter_plain_as(Recorder *self, uintptr_t fid, uintptr_t caller, int simple)
{
    if ((simple || (self->clock == NULL && self->emit == NULL)) && tls_serial == self->serial
        && !gone(self)) {
        Thread *t = tls_thread;
        if (t->depth == 0 || t->frames[t->depth - 1].fid != caller) {
            return 1; /* as enter_call: a C call of a caller not on top is not recorded */
        }
        if (t->depth < t->cap) {
            Frame *top = &t->frames[t->depth - 1];
            Node *parent = top->node;
            uint32_t num = parent->hit.last;
            Node *n = num != 0 ? numbered_node(t->numbered, num) : NULL;
            if (n != NULL && fid_of(&t->fids, n) != fid) {
                num = n->hit.next;
                n = num != 0 ? numbered_node(t->numbered, num) : NULL;
                if (n != NULL && fid_of(&t->fids, n) == fid) {
                    parent->hit.last = num;
                }
            }
            if (n != NULL && fid_of(&t->fids, n) == fid && (n->parent & NAMED)) {
                Frame *f = top + 1;
                t->depth++;
                f->node = n;
                f->fid = fid;
                f->number = num;
                f->kind = OPEN_ENTER;
                f->start = monotonic_ns();
                return 1;
            }
        }
    }
    return 0;
}

#define c_enter_plain(self, fid, caller) c_enter_plain_as(self, fid, caller, 0)

/* do_c_enter(...), its plain case inline: 0, or -1 with an exception set. */
static inline int
c_enter_fast(Recorder *self, uintptr_t fid, uintptr_t caller, PyObject *callable)
{
    return c_enter_plain(self, fid, caller) ? 0 : do_c_enter(self, fid, caller, callable);
}

/* Whether do_c_leave's plain case applies (c_leave_plain then does it all): the C clock,
 * no event lines, no timeline, the thread decided. */
static inline int
c_leave_is_plain_as(Recorder *self, int simple)
{
    return (simple || simple_recorder(self)) && !gone(self) && tls_serial == self->serial;
}

#define c_leave_is_plain(self) c_leave_is_plain_as(self, 0)

/* do_c_leave's plain case (c_leave_is_plain), past the clock: closed only when it is the
 * top of the stack and was called by ``caller``. 0, or -1 with an exception set. */
static inline int
c_leave_plain(Recorder *self, uintptr_t fid, uintptr_t caller, int64_t now)
{
    Thread *t = tls_thread;
    if (t->depth < 2 || t->frames[t->depth - 1].fid != fid
        || t->frames[t->depth - 2].fid != caller) {
        return 0;
    }
    return close_plain(self, t, now);
}

/* do_c_leave(self, fid, caller), its plain case inline. */
static inline int
c_leave_fast(Recorder *self, uintptr_t fid, uintptr_t caller)
{
    if (!c_leave_is_plain(self)) {
        return do_c_leave(self, fid, caller);
    }
    return c_leave_plain(self, fid, caller, monotonic_ns());
}

/* -- hooks.c: the above as sys.monitoring callbacks of their own --------------------- */

ELT_HIDDEN int elt_hooks_ready(void);
/* The sys.monitoring callback standing for the method ``name`` (py_start, ..., c_return),
 * or None; NULL with an exception set. */
ELT_HIDDEN PyObject *new_hook(Recorder *self, const char *name);
ELT_HIDDEN PyObject *Recorder_hook(Recorder *self, PyObject *name);

#endif /* PROFKIT_ELT_EVENTS_H */
