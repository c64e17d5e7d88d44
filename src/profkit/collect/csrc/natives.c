/* C calls (c_call / c_return / c_exception) on the fast path (see profhook.h).
 *
 * What the slow path does for one (setprofile_slow.make_slow): when the calling code is
 * known and accepted, ``to_native(native_id(arg))`` at c_call and ``to_python(...)`` at
 * c_return / c_exception, under the failure rule ("code transition"). The same here, with
 * native_id's answer cached per C function: native_id builds the function's qualified
 * name (a string) and looks it up, which was most of trace mode's cost on 3.11 for
 * programs making many C calls (sympy, json.tool).
 *
 * The cache key: the callable of a c_call event is a builtin function or method object
 * (3.11's ceval binds a method descriptor to its ``self`` first), made anew for every
 * bound call, so its address means nothing. What native_id's answer depends on is its
 * name, ``__module__`` + ``__qualname__``: the PyMethodDef (ml_name) and the owner
 * (``self`` when it is a type -- ``dict.fromkeys`` -- or a module -- ``builtins.len``
 * --, else ``self``'s type: ``TextIOWrapper.write``). A callable of any other kind
 * takes the slow path. The cache keeps no owner alive (see owner_is_static).
 */
#include "profhook.h"
#include "natives.h"

/* Room for one more entry (kept at most half full). -1 with MemoryError. */
static int
natives_reserve(Hook *self)
{
    Py_ssize_t size = self->natives_mask + 1;
    if (self->natives != NULL && (self->natives_used + 1) * 2 <= size) {
        return 0;
    }
    Py_ssize_t grown = self->natives == NULL ? 256 : size * 2;
    Native *fresh = PyMem_Calloc((size_t)grown, sizeof(Native));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; self->natives != NULL && i < size; i++) {
        Native *old = &self->natives[i];
        if (old->ml != NULL) {
            Py_ssize_t j = native_slot(old->ml, old->owner, grown - 1);
            while (fresh[j].ml != NULL) {
                j = (j + 1) & (grown - 1);
            }
            fresh[j] = *old;
        }
    }
    PyMem_Free(self->natives);
    self->natives = fresh;
    self->natives_mask = grown - 1;
    return 0;
}

/* Whether the cache may hold ``owner`` by its address alone: nothing (a function bound to
 * nothing) or a static type, which lives as long as the interpreter. Anything else (a
 * class of the program's, a module) is held by a weak reference: keeping it alive would
 * change the program (its weakref callbacks, its memory). */
static int
owner_is_static(PyObject *owner)
{
    return owner == NULL
           || (PyType_Check(owner) && !(((PyTypeObject *)owner)->tp_flags & Py_TPFLAGS_HEAPTYPE));
}

/* The id's value as a C-form callback takes it (Target): 0 when it has none. */
static int
raw_of(PyObject *fid, uintptr_t *raw)
{
    void *p = PyLong_AsVoidPtr(fid);
    if (p == NULL && PyErr_Occurred()) {
        PyErr_Clear(); /* the Python form gets the int and says what is wrong with it */
        return 0;
    }
    *raw = (uintptr_t)p;
    return 1;
}

/* native_id(callable), cached: a new reference, or NULL with the exception native_id
 * raised (or MemoryError) set; *has_raw tells whether *raw is its value. */
static PyObject *
native_fid(Hook *self, PyCFunctionObject *callable, uintptr_t *raw, int *has_raw)
{
    void *ml = callable->m_ml;
    PyObject *owner = owner_of(callable);
    Native *n = natives_find(self, ml, owner);
    if (n != NULL && owner_alive(n)) {
        *raw = n->raw;
        *has_raw = n->has_raw;
        return Py_NewRef(n->fid);
    }
    Py_XINCREF(owner); /* native_id runs Python code, which may drop the callable's self */
    PyObject *fid = PyObject_CallOneArg(self->native_id, (PyObject *)callable);
    PyObject *ref = NULL;
    if (fid == NULL || !PyLong_CheckExact(fid)
        || (!owner_is_static(owner) && (ref = PyWeakref_NewRef(owner, NULL)) == NULL)) {
        /* an error, an id this hook cannot cache, or an owner without weak references:
         * the answer (if any) serves this event only */
        if (fid != NULL && PyErr_Occurred()) {
            PyErr_Clear();
        }
        Py_XDECREF(owner);
        *has_raw = fid != NULL && PyLong_Check(fid) && raw_of(fid, raw);
        return fid;
    }
    *has_raw = raw_of(fid, raw);
    /* That call may have let another thread fill the same entry or grow the table; an
     * entry of a dead owner at the same address is refreshed in place (same key). */
    n = natives_find(self, ml, owner);
    if (n != NULL) {
        Py_XSETREF(n->ref, ref);
        Py_SETREF(n->fid, Py_NewRef(fid));
        n->raw = *raw;
        n->has_raw = *has_raw;
    }
    else if (natives_reserve(self) < 0) {
        PyErr_Clear(); /* no room to cache: the answer serves this event only */
        Py_XDECREF(ref);
    }
    else {
        Py_ssize_t i = native_slot(ml, owner, self->natives_mask);
        while (self->natives[i].ml != NULL) {
            i = (i + 1) & self->natives_mask;
        }
        self->natives[i] = (Native){ml, owner, ref, Py_NewRef(fid), *raw, *has_raw};
        self->natives_used++;
    }
    Py_XDECREF(owner);
    return fid;
}

/* A c_call / c_return / c_exception while running with transitions wanted. 1: handled;
 * 0: for the slow path; -1: error to the program. */
PH_HIDDEN int
c_call_path(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    if (self->native_id == NULL || arg == NULL || !PyCFunction_Check(arg)
        || (what != PyTrace_C_CALL && what != PyTrace_C_RETURN && what != PyTrace_C_EXCEPTION)) {
        return 0;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    void *key = code;
    Py_DECREF(code); /* the frame keeps it alive for this event */
    long status;
    if (key == self->caller_code) {
        status = self->caller_status; /* the code last entered or returned to */
    }
    else {
        Entry *e = code_entry(self, key);
        if (e == NULL) {
            return PyErr_Occurred() ? -1 : 0; /* a caller not classified yet: the slow path's */
        }
        status = self->caller_status = e->status;
        self->caller_code = key;
    }
    if (status == ST_REJECTED) {
        return 1; /* a filtered-out caller's C calls stay in its time */
    }
    Target *target = what == PyTrace_C_CALL ? &self->to_native : &self->to_python;
    PyObject *obj = target->obj;
    if (obj == NULL) {
        return 1;
    }
    if (target->direct != NULL) {
        /* The common case: a cached id and a C-form callback. No reference is taken (the
         * hook holds obj, which holds the owner; no Python code runs before the call),
         * so neither the id's int nor the callback is touched: each would be a cache
         * miss on a large program. */
        PyCFunctionObject *f = (PyCFunctionObject *)arg;
        Native *n = natives_find(self, f->m_ml, owner_of(f));
        if (n != NULL && n->has_raw && owner_alive(n)) {
            uintptr_t raw = n->raw; /* n may move: the call may grow the table */
            if (target->direct(target->owner, raw) < 0) {
                return contain(self, "code transition") < 0 ? -1 : 1;
            }
            if (what == PyTrace_C_CALL) { /* for its c_return, if that comes next */
                self->last_c = arg;
                self->last_c_raw = raw;
            }
            return 1;
        }
    }
    Py_INCREF(obj); /* native_id runs Python code; obj keeps target->owner alive */
    uintptr_t raw = 0;
    int has_raw = 0;
    PyObject *fid = native_fid(self, (PyCFunctionObject *)arg, &raw, &has_raw);
    int rc = fid != NULL ? deliver(self, target, fid, has_raw ? &raw : NULL, "code transition")
                         : contain(self, "code transition");
    Py_XDECREF(fid);
    Py_DECREF(obj);
    return rc < 0 ? -1 : 1;
}

PH_HIDDEN int
natives_traverse(Hook *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; self->natives != NULL && i <= self->natives_mask; i++) {
        Py_VISIT(self->natives[i].ref);
    }
    return 0;
}

PH_HIDDEN void
natives_free(Hook *self)
{
    if (self->natives == NULL) {
        return;
    }
    Native *natives = self->natives;
    Py_ssize_t size = self->natives_mask + 1;
    self->last_c = NULL;
    self->natives = NULL;
    self->natives_mask = self->natives_used = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_XDECREF(natives[i].ref);
        Py_XDECREF(natives[i].fid);
    }
    PyMem_Free(natives);
}
