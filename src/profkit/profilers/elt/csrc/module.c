/* profkit.profilers.elt._native: the Recorder type and module (see native.h). */
#include "native.h"
#include "events.h"
#include "../../../_pyerr_compat.h"
#include "../../../_idcall.h"

/* Hand the pending exception to on_error (the collector's failure rule), never straight
 * into the program. Returns -1 with an exception set only when on_error itself raised:
 * that is how the rule re-raises an exception that is the program's (one raised by its
 * signal handler while our Python callback ran), and it must then reach the program. */
ELT_HIDDEN int
report(Recorder *self, const char *where)
{
    /* The collector's rule for RecursionError: the program's (it is at its limit and our
     * Python callback pushed it over), skipped, never passed on: calling on_error there
     * could overflow again, into the program. */
    if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear();
        return 0;
    }
    PyObject *exc = take_raised_exception(); /* normalised, traceback attached */
    if (exc == NULL) { /* nothing pending: nothing to report */
        return 0;
    }
    int status = 0;
    /* A strong reference: on_error may be replaced (another attach) or the recorder
     * cleared while it runs. */
    PyObject *on_error = Py_XNewRef(self->on_error);
    if (on_error != NULL) {
        PyObject *r = PyObject_CallFunction(on_error, "Os", exc, where);
        if (r == NULL) {
            status = -1;
        }
        Py_XDECREF(r);
        Py_DECREF(on_error);
        Py_DECREF(exc);
    }
    else {
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(exc);
#else
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc,
                      PyException_GetTraceback(exc));
#endif
        PyErr_WriteUnraisable((PyObject *)self);
    }
    return status;
}

static int
fid_arg(PyObject *const *args, Py_ssize_t nargs, uintptr_t *fid)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "expected one function id");
        return -1;
    }
    void *p = PyLong_AsVoidPtr(args[0]);
    *fid = (uintptr_t)p;
    return p == NULL && PyErr_Occurred() ? -1 : 0;
}

/* -- methods ------------------------------------------------------------------------ */

/* The id-shaped methods: enter/resume open a call or an activation, leave/yield_ close
 * it (the kinds only change the event lines' words). */
#define ID_METHOD(NAME, CALL)                                                           \
    static PyObject *NAME(Recorder *self, PyObject *const *args, Py_ssize_t nargs)    \
    {                                                                                   \
        uintptr_t fid;                                                                  \
        if (fid_arg(args, nargs, &fid) < 0 || CALL < 0) {                               \
            return NULL;                                                                \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
ID_METHOD(Recorder_enter, enter_fast(self, fid, OPEN_ENTER))
ID_METHOD(Recorder_resume, enter_fast(self, fid, OPEN_RESUME))
ID_METHOD(Recorder_leave, leave_fast(self, fid, CLOSE_LEAVE))
ID_METHOD(Recorder_yield, leave_fast(self, fid, CLOSE_YIELD))

/* The same four as plain C functions, for a collector dispatching in C (the
 * ``__profkit_idcall__`` protocol, _idcall.h): no argument parsing, no returned None. */
#define ID_CALL(NAME, CALL)                                                             \
    static int NAME##_c(PyObject *owner, uintptr_t fid)                                 \
    {                                                                                   \
        Recorder *self = (Recorder *)owner;                                             \
        return CALL;                                                                    \
    }                                                                                   \
    static ProfkitIdCall NAME = {NAME##_c};
ID_CALL(idcall_enter, enter_fast(self, fid, OPEN_ENTER))
ID_CALL(idcall_resume, enter_fast(self, fid, OPEN_RESUME))
ID_CALL(idcall_leave, leave_fast(self, fid, CLOSE_LEAVE))
ID_CALL(idcall_yield, leave_fast(self, fid, CLOSE_YIELD))

static PyObject *
Recorder_idcall(Recorder *Py_UNUSED(self), PyObject *name)
{
    static const struct {
        const char *name;
        ProfkitIdCall *call;
    } forms[] = {
        {"enter", &idcall_enter},
        {"resume", &idcall_resume},
        {"leave", &idcall_leave},
        {"yield_", &idcall_yield},
    };
    const char *wanted = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (wanted == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "__profkit_idcall__ takes a method name");
        }
        return NULL;
    }
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(wanted, forms[i].name) == 0) {
            return PyCapsule_New(forms[i].call, PROFKIT_IDCALL_CAPSULE, NULL);
        }
    }
    Py_RETURN_NONE;
}

/* The sys.monitoring-shaped methods: PY_START/PY_RESUME pass (code, offset), PY_RETURN/
 * PY_YIELD (code, offset, value); the function id is id(code).
 *
 * The interpreter holds no reference to a sys.monitoring callback while calling it, so
 * when a Python call inside detaches the collector (unregistering the callback) and the
 * program has dropped the profiler, the bound method and the recorder would be freed
 * under our feet; these keep the recorder alive until they return. */
#define MONITORING_METHOD(NAME, CALL, WHERE)                                            \
    static PyObject *NAME(Recorder *self, PyObject *const *args, Py_ssize_t nargs)    \
    {                                                                                   \
        PyObject *result = Py_None;                                                     \
        if (nargs >= 1 && self->fork_generation == elt_fork_generation) {              \
            uintptr_t fid = (uintptr_t)args[0];                                         \
            Py_INCREF(self);                                                            \
            if (CALL < 0 && report(self, WHERE) < 0) {                                  \
                result = NULL;                                                          \
            }                                                                           \
            Py_DECREF(self);                                                            \
        }                                                                               \
        return Py_XNewRef(result);                                                      \
    }
MONITORING_METHOD(Recorder_py_start, enter_fast(self, fid, OPEN_ENTER), "function_enter")
MONITORING_METHOD(Recorder_py_resume, enter_fast(self, fid, OPEN_RESUME), "function_resume")
MONITORING_METHOD(Recorder_py_return, leave_fast(self, fid, CLOSE_LEAVE), "function_leave")
MONITORING_METHOD(Recorder_py_yield, leave_fast(self, fid, CLOSE_YIELD), "function_yield")

static PyObject *
Recorder_monitoring(Recorder *self, PyObject *args)
{
    const char *name;
    PyObject *on_error;
    if (!PyArg_ParseTuple(args, "sO:__profkit_monitoring__", &name, &on_error)) {
        return NULL;
    }
    static const char *const forms[][2] = {
        {"enter", "py_start"},
        {"resume", "py_resume"},
        {"leave", "py_return"},
        {"yield_", "py_yield"},
    };
    const char *method = NULL;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(name, forms[i][0]) == 0) {
            method = forms[i][1];
        }
    }
    if (method == NULL) {
        Py_RETURN_NONE;
    }
    Py_XSETREF(self->on_error, on_error == Py_None ? NULL : Py_NewRef(on_error));
    return new_hook(self, method); /* hooks.c: the method without a method call */
}

/* -- type --------------------------------------------------------------------------- */

static PyObject *
Recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "new_thread", "basetime_ns", "clock", "emit", "name", "unit", "span_cap", NULL};
    PyObject *new_thread, *clock = Py_None, *emit = Py_None, *namer = Py_None;
    const char *unit = "us";
    long long basetime = 0;
    Py_ssize_t span_cap = -1;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "O|L$OOOsn:Recorder", kwlist, &new_thread, &basetime, &clock, &emit,
            &namer, &unit, &span_cap)) {
        return NULL;
    }
    if (!PyCallable_Check(new_thread) || (clock != Py_None && !PyCallable_Check(clock))) {
        PyErr_SetString(PyExc_TypeError, "new_thread and clock must be callable");
        return NULL;
    }
    if (emit != Py_None && (!PyCallable_Check(emit) || !PyCallable_Check(namer))) {
        PyErr_SetString(PyExc_TypeError, "event lines need callable emit and name");
        return NULL;
    }
    if (strcmp(unit, "us") != 0 && strcmp(unit, "ns") != 0) {
        PyErr_SetString(PyExc_ValueError, "unit must be 'us' or 'ns'");
        return NULL;
    }
    Recorder *self = (Recorder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->serial = elt_next_serial++;
    self->fork_generation = elt_fork_generation;
    self->key = PyUnicode_FromFormat("profkit.profilers.elt._native#%llu",
                                     (unsigned long long)self->serial);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->basetime = basetime;
    self->new_thread = Py_NewRef(new_thread);
    self->clock = clock == Py_None ? NULL : Py_NewRef(clock);
    if (emit != Py_None) {
        self->emit = Py_NewRef(emit);
        self->namer = Py_NewRef(namer);
    }
    self->unit_ns = strcmp(unit, "ns") == 0;
    self->c_names = PyDict_New();
    if (self->c_names == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->span_cap = span_cap < 0 ? -1 : span_cap;
    return (PyObject *)self;
}

static int
Recorder_traverse(Recorder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->new_thread);
    Py_VISIT(self->clock);
    Py_VISIT(self->on_error);
    Py_VISIT(self->emit);
    Py_VISIT(self->namer);
    Py_VISIT(self->c_names);
    for (Thread *t = self->first; t != NULL; t = t->next) {
        Py_VISIT(t->token);
    }
    return 0;
}

/* After this the recorder records nothing (see gone()); export skips the threads, whose
 * tokens are cleared too, since a token may refer back to the recorder (a cycle only
 * this can break). */
static int
Recorder_clear(Recorder *self)
{
    Py_CLEAR(self->new_thread);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->emit);
    Py_CLEAR(self->namer);
    Py_CLEAR(self->c_names);
    for (Thread *t = self->first; t != NULL; t = t->next) {
        Py_CLEAR(t->token);
    }
    return 0;
}

static void
Recorder_dealloc(Recorder *self)
{
    PyObject_GC_UnTrack(self);
    if (tls_serial == self->serial) {
        tls_serial = 0;
        tls_thread = NULL;
    }
    forget_this_thread(self);
    Recorder_clear(self);
    Thread *t = self->first;
    while (t != NULL) {
        Thread *next = t->next;
        thread_free(t);
        t = next;
    }
    Py_XDECREF(self->key);
    PyMem_Free(self->spans);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Recorder_get_basetime(Recorder *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->basetime);
}

static PyObject *
Recorder_get_c_names(Recorder *self, void *Py_UNUSED(closure))
{
    return self->c_names == NULL ? PyDict_New() : PyDict_Copy(self->c_names);
}

static PyMethodDef Recorder_methods[] = {
    {"enter", (PyCFunction)(void (*)(void))Recorder_enter, METH_FASTCALL,
     "enter(function_id): a call of the function starts on this thread."},
    {"resume", (PyCFunction)(void (*)(void))Recorder_resume, METH_FASTCALL,
     "resume(function_id): a generator/coroutine activation starts on this thread."},
    {"leave", (PyCFunction)(void (*)(void))Recorder_leave, METH_FASTCALL,
     "leave(function_id): a call of the function ends on this thread."},
    {"yield_", (PyCFunction)(void (*)(void))Recorder_yield, METH_FASTCALL,
     "yield_(function_id): a generator/coroutine activation ends (suspends)."},
    {"py_start", (PyCFunction)(void (*)(void))Recorder_py_start, METH_FASTCALL,
     "sys.monitoring PY_START callback: enter(id(code)); never raises."},
    {"py_resume", (PyCFunction)(void (*)(void))Recorder_py_resume, METH_FASTCALL,
     "sys.monitoring PY_RESUME callback: resume(id(code)); never raises."},
    {"py_return", (PyCFunction)(void (*)(void))Recorder_py_return, METH_FASTCALL,
     "sys.monitoring PY_RETURN callback: leave(id(code)); never raises."},
    {"py_yield", (PyCFunction)(void (*)(void))Recorder_py_yield, METH_FASTCALL,
     "sys.monitoring PY_YIELD callback: yield_(id(code)); never raises."},
    {"__profkit_monitoring__", (PyCFunction)Recorder_monitoring, METH_VARARGS,
     "__profkit_monitoring__(name, on_error): the sys.monitoring-shaped form of the\n"
     "id-shaped method ``name`` (enter, resume, leave, yield_), or None; errors go to\n"
     "on_error."},
    {"__profkit_idcall__", (PyCFunction)Recorder_idcall, METH_O,
     "__profkit_idcall__(name): the id-shaped method ``name`` (enter, resume, leave,\n"
     "yield_) as a C function in a capsule, for a collector dispatching in C; or None."},
    {"hook", (PyCFunction)Recorder_hook, METH_O,
     "hook(name): the method ``name`` (py_start, py_resume, py_return, py_yield, c_call,\n"
     "c_return) as a sys.monitoring callback of its own (hooks.c); or None."},
    {"c_call", (PyCFunction)(void (*)(void))Recorder_c_call, METH_FASTCALL,
     "sys.monitoring CALL callback (never raises): a C call by recorded code starts a node."},
    {"c_return", (PyCFunction)(void (*)(void))Recorder_c_return, METH_FASTCALL,
     "sys.monitoring C_RETURN/C_RAISE callback: the C call ends; never raises."},
    {"quiet_this_thread", (PyCFunction)Recorder_quiet_this_thread, METH_NOARGS,
     "Record nothing more on the calling thread (what it recorded is kept)."},
    {"export_flat", (PyCFunction)(void (*)(void))Recorder_export_flat, METH_FASTCALL,
     "export_flat(now, frame_of) -> (closed, [(token, rows)] or None): see flat.c."},
    {"reset_after_fork", (PyCFunction)Recorder_reset_after_fork, METH_NOARGS,
     "In a forked child: record afresh, the parent's trees left untouched (forks.c)."},
    {"stop", (PyCFunction)Recorder_stop, METH_NOARGS,
     "stop(): record nothing more; export_flat then takes the trees (see export.c)."},
    {"export", (PyCFunction)Recorder_export, METH_O,
     "export(now) -> (closed, [(token, [(parent, fid, calls, incl, min, max), ...])])."},
    {"_set_calls", (PyCFunction)Recorder_set_calls, METH_O,
     "_set_calls(count): tests only: the calls of the node on top of this thread's stack."},
    {"spans", (PyCFunction)Recorder_spans, METH_NOARGS,
     "spans() -> ([(token, fid, start, end, depth), ...], dropped): the timeline."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Recorder_getset[] = {
    {"basetime_ns", (getter)Recorder_get_basetime, NULL, "calls shorter than this are not counted", NULL},
    {"c_names", (getter)Recorder_get_c_names, NULL,
     "{fid: name} of the C functions recorded as nodes (a copy)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profkit.profilers.elt._native.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Recorder(new_thread, basetime_ns=0, *, clock=None, emit=None, name=None, unit='us',\n"
              "span_cap=-1): trace mode's call trees, event lines and timeline (see native.py).",
    .tp_new = Recorder_new,
    .tp_traverse = (traverseproc)Recorder_traverse,
    .tp_clear = (inquiry)Recorder_clear,
    .tp_dealloc = (destructor)Recorder_dealloc,
    .tp_methods = Recorder_methods,
    .tp_getset = Recorder_getset,
};

static PyMethodDef native_functions[] = {
    {"_chunks", (PyCFunction)native_chunks, METH_NOARGS,
     "_chunks() -> (live, peak): node chunks (48 KB) now and since the last call (tests)."},
    FLAT_ROWS_FUNCTIONS, /* flatrows.h: the functions over export_flat's rows */
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_methods = native_functions,
    .m_name = "profkit.profilers.elt._native",
    .m_doc = "Trace mode's hot path in C (see trace.py for the pure Python twin).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&RecorderType) < 0 || elt_hooks_ready() < 0 || elt_watch_forks() < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Recorder", (PyObject *)&RecorderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
