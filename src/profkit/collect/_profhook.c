/* The sys.setprofile backend's dispatcher in C: the fast path of setprofile._make_hook's
 * ``hook``, installed with PyEval_SetProfile as _lsprof (cProfile) installs its own.
 *
 * Why: a Python profile function costs a Python call per event, plus (3.11) a
 * FastToLocals/LocalsToFast round trip of the frame around it. On 3.11, where
 * sys.monitoring does not exist, that made the setprofile backend -- and with it ELT
 * trace mode -- 2-5x cProfile's overhead. Here an event of a function whose status is
 * known costs a probe of the hook's per-code cache and the profiler's bound method,
 * called from C.
 *
 * What it does is exactly what ``hook`` does (setprofile.py), on the same tables, which
 * the Python side owns and fills: ``status`` (fid -> REJECTED/PLAIN/GEN/PRE), ``gen_code``
 * (fid -> (co_code, offset of the first RESUME)), ``throwing`` (frames a throw() entered)
 * and ``state`` ([running]). Everything the fast path does not decide -- first sight of a
 * code, frames running at attach, a throw(), C-call transitions, a stopped session -- goes
 * to the Python ``slow(frame, event, arg)``, as it does from ``hook``. The failure rule is
 * the same too: an Exception from the profiler goes to ``fail(exc, what)``; a
 * RecursionError is the program's and is dropped; anything ``fail`` or ``slow`` raises
 * otherwise goes into the program.
 *
 * Installing: the object is callable as a Python profile function, so
 * ``threading.setprofile(hook)`` / ``sys.setprofile(hook)`` work; the first event a thread
 * delivers through that call replaces the Python-level trampoline with the C function for
 * that thread. ``sys.setprofile(None)`` removes it as usual.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include "../_pyerr_compat.h"

#if PY_VERSION_HEX < 0x030B0000
#error "profkit needs Python 3.11 or newer"
#endif

/* setprofile.py's _REJECTED; _PLAIN and _GEN arrive as plain_fast/gen_fast, and _PRE is
 * only the slow path's. */
#define ST_REJECTED 0

/* One code object's row of the Python tables, cached: ``status`` and ``gen_code`` rows
 * never change once written while the session runs (``classify`` writes them inside one
 * ``slow`` call; only ``stop()`` clears them, after setting ``state`` to stopped, and this
 * cache is read only while ``state`` says running). The key is the code object's address:
 * the session's function table keeps every classified code alive, so no other code object
 * can take that address while this hook lives. */
typedef struct {
    void *code;       /* key; NULL: empty slot */
    PyObject *fid;    /* id(code): the int the profiler is called with */
    PyObject *raw;    /* generators: co_code as gen_code holds it; else NULL */
    long status;
    long first;       /* generators: offset of the first RESUME */
} Entry;

typedef struct {
    PyObject_HEAD
    PyObject *status;     /* dict fid -> int */
    PyObject *gen_code;   /* dict fid -> (bytes, int) */
    PyObject *throwing;   /* dict */
    PyObject *state;      /* list [bool] */
    PyObject *slow;       /* (frame, event, arg) -> None */
    PyObject *fail;       /* (exc, what) -> None */
    PyObject *enter, *leave, *yield_, *resume; /* (fid) -> None, or NULL */
    long plain_fast;      /* _PLAIN, or -1 when entry/exit need more than enter/leave */
    long gen_fast;        /* _GEN, or -1 */
    int transitions;      /* C-call events wanted */
    int resume_op, yield_op;
    Entry *cache;         /* open addressing, size cache_mask + 1 (a power of two) */
    Py_ssize_t cache_mask, cache_used;
} Hook;

static PyObject *event_names[8]; /* PyTrace_CALL .. PyTrace_OPCODE -> interned str */

/* Call target(fid); an Exception goes to fail(exc, what). Returns -1 with an exception set
 * only for what must reach the program. */
static int
deliver(Hook *self, PyObject *target, PyObject *fid, const char *what)
{
    if (target == NULL) {
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(target, fid);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return -1; /* KeyboardInterrupt, SystemExit: the program's */
    }
    if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear(); /* the program's, at its limit (failure.py's rule) */
        return 0;
    }
    PyObject *exc = take_raised_exception();
    if (exc == NULL) {
        return 0;
    }
    r = PyObject_CallFunction(self->fail, "Os", exc, what);
    Py_DECREF(exc);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

static Py_ssize_t
slot_of(void *code, Py_ssize_t mask)
{
    uintptr_t h = (uintptr_t)code >> 4;
    return (Py_ssize_t)((h ^ (h >> 16)) & (uintptr_t)mask);
}

static Entry *
cache_find(Hook *self, void *code)
{
    if (self->cache == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = slot_of(code, self->cache_mask);; i = (i + 1) & self->cache_mask) {
        Entry *e = &self->cache[i];
        if (e->code == code) {
            return e;
        }
        if (e->code == NULL) {
            return NULL;
        }
    }
}

static void
cache_free(Hook *self)
{
    if (self->cache == NULL) {
        return;
    }
    Entry *cache = self->cache;
    Py_ssize_t size = self->cache_mask + 1;
    self->cache = NULL;
    self->cache_mask = self->cache_used = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_XDECREF(cache[i].fid);
        Py_XDECREF(cache[i].raw);
    }
    PyMem_Free(cache);
}

/* Room for one more entry (kept at most half full). -1 with MemoryError. */
static int
cache_reserve(Hook *self)
{
    Py_ssize_t size = self->cache_mask + 1;
    if (self->cache != NULL && (self->cache_used + 1) * 2 <= size) {
        return 0;
    }
    Py_ssize_t grown = self->cache == NULL ? 256 : size * 2;
    Entry *fresh = PyMem_Calloc((size_t)grown, sizeof(Entry));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; self->cache != NULL && i < size; i++) {
        Entry *old = &self->cache[i];
        if (old->code != NULL) {
            Py_ssize_t j = slot_of(old->code, grown - 1);
            while (fresh[j].code != NULL) {
                j = (j + 1) & (grown - 1);
            }
            fresh[j] = *old;
        }
    }
    PyMem_Free(self->cache);
    self->cache = fresh;
    self->cache_mask = grown - 1;
    return 0;
}

/* The code's row from the Python tables, cached. NULL without an exception when a table
 * has no (usable) row yet: the slow path classifies the code. */
static Entry *
cache_fill(Hook *self, void *code)
{
    PyObject *fid = PyLong_FromVoidPtr(code);
    if (fid == NULL) {
        return NULL;
    }
    PyObject *raw = NULL;
    long status, first = 0;
    /* Borrowed rows: nothing here may run Python code (another thread, or a finalizer,
     * could drop them), so only real ints are read (PyLong_AsLong of anything else calls
     * its __index__); any other row is the slow path's. */
    PyObject *st_obj = PyDict_GetItemWithError(self->status, fid);
    if (st_obj == NULL || !PyLong_Check(st_obj)) {
        goto unusable;
    }
    status = PyLong_AsLong(st_obj);
    if (status == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* out of range: not a status this hook knows */
        goto unusable;
    }
    if (status == self->gen_fast) {
        PyObject *row = PyDict_GetItemWithError(self->gen_code, fid);
        if (row == NULL || !PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2
            || !PyBytes_Check(PyTuple_GET_ITEM(row, 0)) || !PyLong_Check(PyTuple_GET_ITEM(row, 1))) {
            goto unusable;
        }
        first = PyLong_AsLong(PyTuple_GET_ITEM(row, 1));
        if (first == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto unusable;
        }
        raw = Py_NewRef(PyTuple_GET_ITEM(row, 0));
    }
    if (cache_reserve(self) < 0) {
        PyErr_Clear(); /* no room to cache: the slow path serves this event, as in Python */
        Py_XDECREF(raw);
        goto unusable;
    }
    Py_ssize_t i = slot_of(code, self->cache_mask);
    while (self->cache[i].code != NULL) {
        i = (i + 1) & self->cache_mask;
    }
    Entry *e = &self->cache[i];
    e->code = code;
    e->fid = fid;
    e->raw = raw;
    e->status = status;
    e->first = first;
    self->cache_used++;
    return e;

unusable:
    Py_DECREF(fid);
    return NULL;
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

static int running(Hook *self);

/* 1: handled; 0: for the slow path; -1: error to the program. */
static int
fast_path(Hook *self, PyFrameObject *frame, int what)
{
    if (!running(self)) {
        return 0; /* stopping: the cache may be stale, and slow() removes the hook */
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    void *key = code;
    Py_DECREF(code); /* the frame keeps it alive for this event */
    Entry *e = cache_find(self, key);
    if (e == NULL) {
        e = cache_fill(self, key);
        if (e == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
    }
    long st = e->status;
    if (st == ST_REJECTED) {
        return 1;
    }
    if (what == PyTrace_CALL) {
        if (st == self->plain_fast) {
            return deliver(self, self->enter, e->fid, "function_enter") < 0 ? -1 : 1;
        }
        if (st == self->gen_fast) {
            int op;
            long lasti;
            int found = opcode_at(e, frame, &op, &lasti);
            if (found && lasti < e->first) {
                return 1; /* before the first RESUME (throw() into an unstarted one): no code runs */
            }
            if (found && op != self->yield_op) {
                /* a throw() stops at YIELD_VALUE: that one is the slow path's */
                PyObject *target = lasti == e->first ? self->enter : self->resume;
                return deliver(self, target, e->fid, "function_enter") < 0 ? -1 : 1;
            }
        }
        return 0;
    }
    /* PyTrace_RETURN */
    if (st == self->plain_fast) {
        return deliver(self, self->leave, e->fid, "function_leave") < 0 ? -1 : 1;
    }
    if (st == self->gen_fast && PyDict_GET_SIZE(self->throwing) == 0) {
        int op;
        long lasti;
        if (opcode_at(e, frame, &op, &lasti)) {
            if (lasti < e->first) {
                return 1; /* an unstarted generator thrown into: it never entered */
            }
            /* 3.11/3.12 stop at the YIELD_VALUE, 3.13 at the RESUME after it */
            int suspended = op == self->yield_op || (op == self->resume_op && lasti != e->first);
            PyObject *target = suspended ? self->yield_ : self->leave;
            return deliver(self, target, e->fid, "function_leave") < 0 ? -1 : 1;
        }
    }
    return 0;
}

static int
running(Hook *self)
{
    return PyList_Check(self->state) && PyList_GET_SIZE(self->state) > 0
           && PyList_GET_ITEM(self->state, 0) == Py_True;
}

static int
dispatch(Hook *self, PyFrameObject *frame, int what, PyObject *arg)
{
    if (what == PyTrace_CALL || what == PyTrace_RETURN) {
        int handled = fast_path(self, frame, what);
        if (handled != 0) {
            return handled < 0 ? -1 : 0;
        }
    }
    else if (!self->transitions && running(self)) {
        return 0;
    }
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

/* The C profile function. ``obj`` is borrowed from the thread state, and slow() may
 * remove the hook (sys.setprofile(None)), dropping what may be the last reference. */
static int
profile_func(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Py_INCREF(obj);
    int result = dispatch((Hook *)obj, frame, what, arg);
    Py_DECREF(obj);
    return result;
}

/* hook(frame, event, arg): the Python-level entry (threading.setprofile's new threads,
 * sys.setprofile). Installs the C function for this thread, then handles the event.
 *
 * Only when this thread's profile object is this hook, i.e. CPython's trampoline called
 * us: a program may install its own profile function that calls the one it found
 * (``old = sys.getprofile()`` ... ``old(frame, event, arg)``), and swapping then would
 * silently remove the program's function, which the Python ``hook`` never does. */
static PyObject *
Hook_call(Hook *self, PyObject *args, PyObject *kwargs)
{
    PyObject *frame, *event, *arg;
    if (self->state == NULL) {
        /* Hook.__new__ without __init__ (or a failed __init__): no tables to read */
        PyErr_SetString(PyExc_TypeError, "Hook object is not initialized");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!UO:hook", &PyFrame_Type, &frame, &event, &arg)) {
        return NULL;
    }
    int what = -1;
    for (int i = 0; i < (int)(sizeof(event_names) / sizeof(event_names[0])); i++) {
        if (event_names[i] != NULL && PyUnicode_Compare(event, event_names[i]) == 0) {
            what = i;
            break;
        }
    }
    if (what < 0) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(self);
    PyThreadState *tstate = PyThreadState_Get();
    if (running(self) && tstate->c_profileobj == (PyObject *)self
        && tstate->c_profilefunc != profile_func) {
        PyEval_SetProfile(profile_func, (PyObject *)self);
    }
    int result = dispatch(self, (PyFrameObject *)frame, what, arg);
    Py_DECREF(self);
    if (result < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
none_to_null(PyObject *o)
{
    return o == Py_None ? NULL : Py_NewRef(o);
}

static int
Hook_init(Hook *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"status", "gen_code", "throwing", "state", "slow", "fail",
                            "enter", "leave", "yield_", "resume", "plain_fast", "gen_fast",
                            "transitions", "resume_op", "yield_op", NULL};
    PyObject *status, *gen_code, *throwing, *state, *slow, *fail, *enter, *leave, *yield_, *resume;
    long plain_fast, gen_fast;
    int transitions, resume_op, yield_op;
    if (self->state != NULL) {
        /* Once only: events read the fields (enter, slow, the cache's ids...) as borrowed
         * references across calls into Python, which could otherwise re-initialize the
         * hook and free what the running call still uses. */
        PyErr_SetString(PyExc_TypeError, "Hook object is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!O!OOOOOOllpii:Hook", names,
                                     &PyDict_Type, &status, &PyDict_Type, &gen_code,
                                     &PyDict_Type, &throwing, &PyList_Type, &state, &slow,
                                     &fail, &enter, &leave, &yield_, &resume, &plain_fast,
                                     &gen_fast, &transitions, &resume_op, &yield_op)) {
        return -1;
    }
    Py_XSETREF(self->status, Py_NewRef(status));
    Py_XSETREF(self->gen_code, Py_NewRef(gen_code));
    Py_XSETREF(self->throwing, Py_NewRef(throwing));
    Py_XSETREF(self->slow, Py_NewRef(slow));
    Py_XSETREF(self->fail, Py_NewRef(fail));
    Py_XSETREF(self->enter, none_to_null(enter));
    Py_XSETREF(self->leave, none_to_null(leave));
    Py_XSETREF(self->yield_, none_to_null(yield_));
    Py_XSETREF(self->resume, none_to_null(resume));
    self->plain_fast = plain_fast;
    self->gen_fast = gen_fast;
    self->transitions = transitions;
    self->resume_op = resume_op;
    self->yield_op = yield_op;
    Py_XSETREF(self->state, Py_NewRef(state)); /* last: a set ``state`` means initialized */
    return 0;
}

static int
Hook_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->status);
    Py_VISIT(self->gen_code);
    Py_VISIT(self->throwing);
    Py_VISIT(self->state);
    Py_VISIT(self->slow);
    Py_VISIT(self->fail);
    Py_VISIT(self->enter);
    Py_VISIT(self->leave);
    Py_VISIT(self->yield_);
    Py_VISIT(self->resume);
    return 0;
}

static int
Hook_clear(Hook *self)
{
    cache_free(self);
    Py_CLEAR(self->status);
    Py_CLEAR(self->gen_code);
    Py_CLEAR(self->throwing);
    Py_CLEAR(self->state);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->fail);
    Py_CLEAR(self->enter);
    Py_CLEAR(self->leave);
    Py_CLEAR(self->yield_);
    Py_CLEAR(self->resume);
    return 0;
}

static void
Hook_dealloc(Hook *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Hook_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Python's own tables are read by setprofile.Backend.stop() (status.clear()). */
static PyMemberDef Hook_members[] = {
    {"status", T_OBJECT, offsetof(Hook, status), READONLY, "fid -> status (shared)"},
    {NULL},
};

static PyType_Slot Hook_slots[] = {
    {Py_tp_doc, "Hook(...): the setprofile backend's fast path in C (see _profhook.c)."},
    {Py_tp_init, Hook_init},
    {Py_tp_call, Hook_call},
    {Py_tp_traverse, Hook_traverse},
    {Py_tp_clear, Hook_clear},
    {Py_tp_dealloc, Hook_dealloc},
    {Py_tp_members, Hook_members},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec Hook_spec = {
    .name = "profkit.collect._profhook.Hook",
    .basicsize = sizeof(Hook),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Hook_slots,
};

static int
module_exec(PyObject *module)
{
    static const char *names[] = {"call", "exception", "line", "return",
                                  "c_call", "c_exception", "c_return", "opcode"};
    /* PyTrace_CALL 0, EXCEPTION 1, LINE 2, RETURN 3, C_CALL 4, C_EXCEPTION 5, C_RETURN 6,
     * OPCODE 7: the same names sys.setprofile passes to a Python function. */
    for (int i = 0; i < 8; i++) {
        if (event_names[i] == NULL) {
            event_names[i] = PyUnicode_InternFromString(names[i]);
            if (event_names[i] == NULL) {
                return -1;
            }
        }
    }
    PyObject *type = PyType_FromModuleAndSpec(module, &Hook_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "Hook", type);
    Py_DECREF(type);
    return rc;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.collect._profhook",
    .m_doc = "The sys.setprofile backend's dispatcher in C (see _profhook.c).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__profhook(void)
{
    return PyModuleDef_Init(&module_def);
}
