/* One event: the failure rule, the fast paths, and the slow path's call (see profhook.h). */
#include "profhook.h"
#include "natives.h"
#include "failrule.h"

PH_HIDDEN PyObject *event_names[8]; /* PyTrace_CALL .. PyTrace_OPCODE -> interned str */

/* Off the hot path: kept out of line, so the per-event function stays small (its
 * prologue saved every register the rare paths need: ~19 instructions an event). */
#if defined(__GNUC__)
#define PH_COLD __attribute__((noinline, cold))
#define PH_INLINE __attribute__((always_inline)) inline
#else
#define PH_COLD
#define PH_INLINE inline
#endif

/* The failure rule (failrule.h) for the profiler's ``what``. */
PH_HIDDEN int
contain(Hook *self, const char *what)
{
    return contain_failure(self->fail, what);
}

/* target(arg): straight through the target's vectorcall slot when it has one (the
 * profiler's bound C methods do), which saves PyObject_CallOneArg's own frame on every
 * event. */
static inline PyObject *
call_one(PyObject *target, PyObject *arg)
{
    vectorcallfunc call = PyVectorcall_Function(target);
    if (call == NULL) {
        return PyObject_CallOneArg(target, arg);
    }
    PyObject *args[2] = {NULL, arg};
    PyObject *r = call(target, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_SystemError, "a profiler callback returned NULL without an exception");
    }
    return r;
}

/* Call target(fid) under the failure rule (contain): its C form when it has one and the
 * id's value is known (``raw``), which does the same. */
PH_HIDDEN int
deliver(Hook *self, Target *target, PyObject *fid, const uintptr_t *raw, const char *what)
{
    if (target->direct != NULL && raw != NULL) {
        return target->direct(target->owner, *raw) < 0 ? contain(self, what) : 0;
    }
    if (target->obj == NULL) {
        return 0;
    }
    PyObject *r = call_one(target->obj, fid);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    return contain(self, what);
}

PH_HIDDEN int
running(Hook *self)
{
    return PyList_Check(self->state) && PyList_GET_SIZE(self->state) > 0
           && PyList_GET_ITEM(self->state, 0) == Py_True;
}

/* The opcode at the frame's last instruction; 0 when out of range (slow path decides). */
static int
opcode_at(Entry *e, PyFrameObject *frame, int *op, long *lasti)
{
    *lasti = PyFrame_GetLasti(frame);
    if (*lasti < 0 || *lasti >= PyBytes_GET_SIZE(e->raw)) {
        return 0;
    }
    *op = (unsigned char)PyBytes_AS_STRING(e->raw)[*lasti];
    return 1;
}

/* throwing[id(frame)] = lasti: a throw() entered this suspended generator at its
 * YIELD_VALUE (3.11/3.12); its return says whether the throw unwound it. The record is
 * the slow path's as well (setprofile_slow.py keeps it the same way). Int keys and
 * values: no Python code runs. -1 with an exception set. */
static int
throw_note(Hook *self, PyFrameObject *frame, long lasti)
{
    PyObject *key = PyLong_FromVoidPtr(frame);
    PyObject *value = key != NULL ? PyLong_FromLong(lasti) : NULL;
    int rc = value != NULL ? PyDict_SetItem(self->throwing, key, value) : -1;
    Py_XDECREF(key);
    Py_XDECREF(value);
    return rc;
}

/* throwing.pop(id(frame), None): the offset noted, -1 when none, -2 with an exception
 * set. Only ints are read (what the two writers store); nothing else runs. */
static long
throw_pop(Hook *self, PyFrameObject *frame)
{
    if (PyDict_GET_SIZE(self->throwing) == 0) {
        return -1;
    }
    PyObject *key = PyLong_FromVoidPtr(frame);
    if (key == NULL) {
        return -2;
    }
    long at = -1;
    PyObject *hit = PyDict_GetItemWithError(self->throwing, key);
    if (hit != NULL) {
        at = PyLong_CheckExact(hit) ? PyLong_AsLong(hit) : -1;
        if (at == -1 && PyErr_Occurred()) {
            PyErr_Clear(); /* not an offset: matches none */
        }
        if (PyDict_DelItem(self->throwing, key) < 0) {
            at = -2;
        }
    }
    else if (PyErr_Occurred()) {
        at = -2;
    }
    Py_DECREF(key);
    return at;
}

/* A generator frame's ``call``: 1 handled, 0 for the slow path, -1 error. */
PH_COLD static int
generator_call(Hook *self, Entry *e, PyFrameObject *frame)
{
    int op;
    long lasti;
    if (!opcode_at(e, frame, &op, &lasti)) {
        return 0;
    }
    if (lasti < e->first) {
        return 1; /* before the first RESUME (throw() into an unstarted one): no code runs */
    }
    Target *target = &self->enter;
    if (lasti != e->first) {
        target = &self->resume;
        /* a throw() (close(): any() and all() stopping early) stops at YIELD_VALUE */
        if (op == self->yield_op && throw_note(self, frame, lasti) < 0) {
            return contain(self, "function_enter") < 0 ? -1 : 1;
        }
    }
    uintptr_t raw = (uintptr_t)e->code;
    return deliver(self, target, e->fid, &raw, "function_enter") < 0 ? -1 : 1;
}

/* A generator frame's ``return``: 1 handled, 0 for the slow path, -1 error. As
 * setprofile_slow's generator_exit: suspended is a yield, unless a throw() entered it
 * at that very offset and nothing was yielded (the throw unwound it: a leave). */
PH_COLD static int
generator_return(Hook *self, Entry *e, PyFrameObject *frame, PyObject *arg)
{
    int op;
    long lasti;
    if (!opcode_at(e, frame, &op, &lasti)) {
        return 0;
    }
    if (lasti < e->first) {
        return 1; /* an unstarted generator thrown into: it never entered */
    }
    /* 3.11/3.12 stop at the YIELD_VALUE, 3.13 at the RESUME after it */
    int suspended = op == self->yield_op || (op == self->resume_op && lasti != e->first);
    long thrown_at = throw_pop(self, frame); /* gone or not, the record goes */
    if (thrown_at == -2) {
        return contain(self, "function_leave") < 0 ? -1 : 1;
    }
    if (suspended && thrown_at == lasti && (arg == NULL || arg == Py_None)) {
        suspended = 0; /* unwound by the throw */
    }
    Target *target = suspended ? &self->yield_ : &self->leave;
    uintptr_t raw = (uintptr_t)e->code;
    return deliver(self, target, e->fid, &raw, "function_leave") < 0 ? -1 : 1;
}

/* target(fid) for a plain function's call or return: the C form straight from here (the
 * common case: no call of deliver's), else deliver. 1: handled; -1: error to the
 * program. */
static PH_INLINE int
deliver_plain(Hook *self, Target *target, Entry *e, uintptr_t raw, const char *what)
{
    if (target->direct != NULL) {
        if (target->direct(target->owner, raw) < 0) {
            return contain(self, what) < 0 ? -1 : 1;
        }
        return 1;
    }
    return deliver(self, target, e->fid, &raw, what) < 0 ? -1 : 1;
}

/* A Python frame's call or return. 1: handled; 0: for the slow path; -1: error to the
 * program. Inlined (gcc made it a function of its own once code_entry's probe moved in:
 * a call more than it saved). */
static PH_INLINE int
fast_path(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    if (!running(self)) {
        return 0; /* stopping: the cache may be stale, and slow() removes the hook */
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    void *key = code;
    Py_DECREF(code); /* the frame keeps it alive for this event */
    Entry *e = code_cached(self, key);
    if (e == NULL && (e = code_entry(self, key)) == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    long st = e->status;
    self->caller_code = key; /* entered (or returning to its caller): see caller_code */
    self->caller_status = st;
    if (st == ST_REJECTED) {
        return 1;
    }
    uintptr_t raw = (uintptr_t)key; /* the value of e->fid, id(code) */
    if (what == PyTrace_CALL) {
        if (st == self->plain_fast) {
            return deliver_plain(self, &self->enter, e, raw, "function_enter");
        }
        return st == self->gen_fast ? generator_call(self, e, frame) : 0;
    }
    /* PyTrace_RETURN */
    if (st == self->plain_fast) {
        return deliver_plain(self, &self->leave, e, raw, "function_leave");
    }
    return st == self->gen_fast ? generator_return(self, e, frame, arg) : 0;
}

/* The slow path: setprofile_slow's ``slow(frame, event, arg)``. */
PH_COLD static int
slow_event(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    if (what < 0 || what >= (int)(sizeof(event_names) / sizeof(event_names[0]))) {
        return 0;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(self->slow, (PyObject *)frame, event_names[what],
                                               arg != NULL ? arg : Py_None, NULL);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
            PyErr_Clear(); /* the program's (failure.py) */
            return 0;
        }
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* A C event's common cases, inline; c_call_path (natives.c) does the rest. A c_return
 * right after its c_call (``last_c``) reuses what that c_call found; a c_call of a
 * builtin by the code of the last Python event, with its id cached, is delivered from
 * here. 1: handled; 0: for the slow path; -1: error to the program. */
static PH_INLINE int
c_event(Hook *self, PyFrameObject *frame, int what, PyObject *arg, PyObject *last_c)
{
    if (arg == last_c && arg != NULL
        && (what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION)) {
        int handled = c_return_cached(self);
        if (handled != 0) {
            return handled;
        }
    }
    Target *target = &self->to_native;
    if (what == PyTrace_C_CALL && target->direct != NULL && arg != NULL
        && Py_IS_TYPE(arg, &PyCFunction_Type) && self->native_id != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        Py_DECREF(code); /* the frame keeps it alive for this event */
        Entry *e;
        if ((void *)code != self->caller_code && (e = code_cached(self, code)) != NULL) {
            self->caller_code = code; /* a caller returned to: the last event was a return */
            self->caller_status = e->status;
        }
        if ((void *)code == self->caller_code) {
            if (self->caller_status == ST_REJECTED) {
                return 1; /* a filtered-out caller's C calls stay in its time */
            }
            PyCFunctionObject *f = (PyCFunctionObject *)arg;
            Native *n = natives_find(self, f->m_ml, owner_of(f));
            if (n != NULL && n->has_raw && owner_alive(n)) {
                uintptr_t raw = n->raw; /* n may move: the call may grow the table */
                if (target->direct(target->owner, raw) < 0) {
                    return contain(self, "code transition") < 0 ? -1 : 1;
                }
                self->last_c = arg; /* for its c_return, if that comes next */
                self->last_c_raw = raw;
                return 1;
            }
        }
    }
    return c_call_path(self, frame, what, arg);
}

static PH_INLINE int
dispatch_event(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    PyObject *last_c = self->last_c; /* only for the event right after its c_call */
    self->last_c = NULL;
    if (what == PyTrace_CALL || what == PyTrace_RETURN) {
        int handled = fast_path(self, frame, what, arg);
        if (handled != 0) {
            return handled < 0 ? -1 : 0;
        }
    }
    else if (running(self)) {
        if (!self->transitions) {
            return 0;
        }
        int handled = c_event(self, frame, what, arg, last_c);
        if (handled != 0) {
            return handled < 0 ? -1 : 0;
        }
    }
    return slow_event(self, frame, what, arg);
}

PH_HIDDEN int
dispatch(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    return dispatch_event(self, frame, what, arg);
}

/* The C profile function. ``obj`` is borrowed from the thread state, and slow() may
 * remove the hook (sys.setprofile(None)), dropping what may be the last reference. */
PH_HIDDEN int
profile_func(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    if (((Hook *)obj)->fork_generation != ph_fork_generation) {
        return 0; /* a parent's hook in a forked child, not yet removed */
    }
    Py_INCREF(obj);
    int result = dispatch_event((Hook *)obj, frame, what, arg);
    Py_DECREF(obj);
    return result;
}
