/* The frame-evaluation function and its per-code cache (see evalframe.h). */
#include "evalframe.h"
#include "failrule.h"

#if EF_SUPPORTED

static inline Py_ssize_t
slot_of(void *code, Py_ssize_t mask)
{
    uintptr_t h = (uintptr_t)code >> 4;
    return (Py_ssize_t)((h ^ (h >> 16)) & (uintptr_t)mask);
}

static inline EfEntry *
cached(EvalHook *self, void *code)
{
    EfEntry *codes = self->codes;
    if (codes == NULL) {
        return NULL;
    }
    Py_ssize_t mask = self->codes_mask;
    for (Py_ssize_t i = slot_of(code, mask);; i = (i + 1) & mask) {
        if (codes[i].code == code) {
            return &codes[i];
        }
        if (codes[i].code == NULL) {
            return NULL;
        }
    }
}

EF_HIDDEN void
ef_codes_free(EvalHook *self)
{
    PyMem_Free(self->codes);
    self->codes = NULL;
    self->codes_mask = self->codes_used = 0;
}

/* Room for one more entry (kept at most half full). -1 with MemoryError. */
static int
reserve(EvalHook *self)
{
    Py_ssize_t size = self->codes_mask + 1;
    if (self->codes != NULL && (self->codes_used + 1) * 2 <= size) {
        return 0;
    }
    Py_ssize_t grown = self->codes == NULL ? 256 : size * 2;
    EfEntry *fresh = PyMem_Calloc((size_t)grown, sizeof(EfEntry));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; self->codes != NULL && i < size; i++) {
        if (self->codes[i].code != NULL) {
            Py_ssize_t j = slot_of(self->codes[i].code, grown - 1);
            while (fresh[j].code != NULL) {
                j = (j + 1) & (grown - 1);
            }
            fresh[j] = self->codes[i];
        }
    }
    PyMem_Free(self->codes);
    self->codes = fresh;
    self->codes_mask = grown - 1;
    return 0;
}

/* The failure rule (failrule.h) for the profiler's ``what``. fail() runs with ``tracing``
 * raised, as it does inside a profile function: else its own frames (and the imports it
 * makes) would pass through this hook, whose enter fails again before fail() has claimed
 * the failure, recursing without end. */
static int
contain(EvalHook *self, PyThreadState *ts, const char *what)
{
    ts->tracing++;
    int status = contain_failure(self->fail, what);
    ts->tracing--;
    return status;
}

/* First sight of a code object: the slow path's verdict, cached. Python code runs here,
 * with ``tracing`` raised as around a profile function, so the frames it evaluates are
 * not reported (and no other trace function sees them). NULL: not cached (an error,
 * contained, or one for the program: then with it set). */
EF_COLD static EfEntry *
classify(EvalHook *self, PyThreadState *ts, void *code)
{
    int status = 0, first = 0;
    PyObject *type, *value, *tb; /* a throw()'s exception, pending: kept across */
    PyErr_Fetch(&type, &value, &tb);
    ts->tracing++;
    PyObject *r = PyObject_CallOneArg(self->classify, (PyObject *)code);
    ts->tracing--;
    if (r == NULL || !PyArg_ParseTuple(r, "ii", &status, &first)) {
        Py_XDECREF(r);
        if (contain(self, ts, "function_enter") < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return NULL;
        }
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    EfEntry *e = cached(self, code); /* another thread's first call may have won */
    if (e != NULL) {
        return e;
    }
    if (reserve(self) < 0) {
        PyErr_Clear(); /* uncached: this call goes unreported */
        return NULL;
    }
    Py_ssize_t i = slot_of(code, self->codes_mask);
    while (self->codes[i].code != NULL) {
        i = (i + 1) & self->codes_mask;
    }
    e = &self->codes[i];
    e->code = code;
    e->status = status;
    e->first = first;
    self->codes_used++;
    return e;
}

/* target(fid) under the failure rule: its C form when it has one, else the bound method;
 * either with ``tracing`` raised, as around a profile function, so that the Python code
 * it may run (the recorder's first sight of a thread) is not reported. -1: an exception
 * for the program is set. */
static inline int
deliver(EvalHook *self, PyThreadState *ts, EfTarget *t, void *code, const char *what)
{
    if (t->direct != NULL) {
        ts->tracing++;
        int rc = t->direct(t->owner, (uintptr_t)code);
        ts->tracing--;
        return rc < 0 ? contain(self, ts, what) : 0;
    }
    if (t->obj == NULL) {
        return 0;
    }
    PyObject *fid = PyLong_FromVoidPtr(code);
    if (fid == NULL) {
        return contain(self, ts, what);
    }
    ts->tracing++;
    PyObject *r = PyObject_CallOneArg(t->obj, fid);
    ts->tracing--;
    Py_DECREF(fid);
    if (r == NULL) {
        return contain(self, ts, what);
    }
    Py_DECREF(r);
    return 0;
}

static inline int
running(EvalHook *self)
{
    return self->fork_generation == ef_fork_generation && PyList_GET_SIZE(self->state) > 0
           && PyList_GET_ITEM(self->state, 0) == Py_True;
}

/* deliver() while the program's exception (a throw() into a generator) is pending: it
 * is kept across the profiler, unless the profiler's failure must replace it. */
EF_COLD static int
deliver_keeping(EvalHook *self, PyThreadState *ts, EfTarget *t, void *code, const char *what)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (deliver(self, ts, t, code, what) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(type, value, tb);
    return 0;
}

/* The frame's leave (or a generator's yield) after its evaluation returned ``r``: only
 * by the hook that delivered its enter, and only while that hook still runs (stop() from
 * a callback, a fork). The program's exception, if any, is kept across the profiler. */
static inline PyObject *
after(EvalHook *self, PyThreadState *ts, EfTarget *t, void *code, PyObject *r)
{
    if (!running(self)) {
        return r;
    }
    if (r != NULL) {
        if (deliver(self, ts, t, code, "function_leave") < 0) {
            Py_CLEAR(r);
        }
        return r;
    }
    deliver_keeping(self, ts, t, code, "function_leave");
    return NULL;
}

/* A generator, coroutine or async generator frame: each resume is an enter (the first
 * one ``enter``, later ones ``resume``), each yield a ``yield_``, its end a ``leave``, as
 * the setprofile backend reports them. The call that creates it (RETURN_GENERATOR, before
 * the first RESUME) and a throw() into an unstarted one run none of its code: no event. */
EF_COLD static PyObject *
generator(EvalHook *self, PyThreadState *ts, _PyInterpreterFrame *f, int throwflag, int first)
{
    void *code = f->f_code;
    int lasti = _PyInterpreterFrame_LASTI(f);
    EfTarget *in = &self->resume;
    if (lasti < first) {
        if (f->owner != FRAME_OWNED_BY_GENERATOR || throwflag) {
            return _PyEval_EvalFrameDefault(ts, f, throwflag);
        }
        in = &self->enter;
    }
    Py_INCREF(self);
    if ((throwflag ? deliver_keeping(self, ts, in, code, "function_enter")
                   : deliver(self, ts, in, code, "function_enter")) < 0) {
        throwflag = 1; /* the profiler's failure is raised where the frame resumes */
    }
    PyObject *r = _PyEval_EvalFrameDefault(ts, f, throwflag);
    EfTarget *out = &self->leave;
    if (r != NULL && _Py_OPCODE(*f->prev_instr) == self->yield_op) {
        out = &self->yield_; /* suspended at its YIELD_VALUE */
    }
    r = after(self, ts, out, code, r);
    Py_DECREF(self);
    return r;
}

/* The frame-evaluation function: everything passes through untouched but the frames of
 * accepted code, evaluated while the hook runs and no trace or profile function of the
 * thread (or this hook's own slow path) is running. */
EF_HIDDEN PyObject *
ef_eval(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag)
{
    EvalHook *self = ef_active;
    if (self == NULL || ts->tracing || !running(self)) {
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    }
    void *code = f->f_code;
    EfEntry *e = cached(self, code);
    if (e == NULL && (e = classify(self, ts, code)) == NULL) {
        return _PyEval_EvalFrameDefault(ts, f, PyErr_Occurred() ? 1 : throwflag);
    }
    int status = e->status; /* before any Python runs: the table may grow meanwhile */
    if (status != EF_PLAIN) {
        if (status == EF_GEN) {
            return generator(self, ts, f, throwflag, e->first);
        }
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    }
    Py_INCREF(self); /* stop() from a callback drops the module's reference */
    if (deliver(self, ts, &self->enter, code, "function_enter") < 0) {
        throwflag = 1; /* the profiler's failure is raised in the frame, as a profile
                        * function's is */
    }
    PyObject *r = after(self, ts, &self->leave, code, _PyEval_EvalFrameDefault(ts, f, throwflag));
    Py_DECREF(self);
    return r;
}

#endif /* EF_SUPPORTED */
