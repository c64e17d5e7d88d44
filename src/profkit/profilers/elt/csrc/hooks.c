/* profkit.profilers.elt._native: the recorder's sys.monitoring callbacks as callables of
 * their own (``Recorder.hook(name)``; ``__profkit_monitoring__`` hands these out).
 *
 * Why: registered as the callbacks, the recorder's methods (py_start, c_call, ...) are
 * bound builtin methods, which the interpreter reaches through
 * cfunction_vectorcall_FASTCALL: the thread state read from thread-local storage (a
 * __tls_get_addr call where libpython is a shared library), the C recursion check, then
 * the method, ~35 instructions a callback on 3.12 and 3.13 (bench/elt_event_cost.py,
 * callgrind). Every PY_START, PY_RETURN, CALL and C_RETURN pays it: ~13 M callbacks in
 * the sympy run. A hook is a vectorcall object: the interpreter calls its function
 * directly, and the plain case (events.h) runs with nothing around it.
 *
 * Lifetime: a hook holds its recorder. The interpreter holds no reference to a callback
 * while calling it, so a Python call inside (new_thread, on_error) may unregister the
 * hook and free it, and the recorder with it; every path that can call Python (the
 * recorder's slow paths, report) holds the recorder itself while it runs. The plain
 * cases call no Python code and hold nothing. Keywords are never passed by the
 * interpreter and are not looked at.
 */
#include <stddef.h>

#include "native.h"
#include "events.h"

#if defined(__GNUC__)
#define ELT_NOINLINE __attribute__((noinline))
#else
#define ELT_NOINLINE
#endif

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Recorder *recorder; /* strong */
    const char *name;   /* the Recorder method it stands for */
} Hook;

#define RECORDER(hook) (((Hook *)(hook))->recorder)
#define NARGS(nargsf) PyVectorcall_NARGS(nargsf)

/* -- the slow paths: the recorder held, errors to on_error (module.c's report) -------- */

/* The status of a slow path run with ``self`` held: None, or NULL when the failure rule
 * re-raised (report). Releases ``self``. */
static PyObject *
release(Recorder *self, int status, const char *where)
{
    int failed = status < 0 && report(self, where) < 0;
    Py_DECREF(self);
    return failed ? NULL : Py_NewRef(Py_None);
}

static ELT_NOINLINE PyObject *
held_enter(Recorder *self, uintptr_t fid, int kind, const char *where)
{
    Py_INCREF(self);
    return release(self, do_enter(self, fid, kind), where);
}

/* do_leave, or leave_at(now) when the clock was ``read`` already. */
static ELT_NOINLINE PyObject *
held_leave(Recorder *self, uintptr_t fid, int kind, int read, int64_t now, const char *where)
{
    Py_INCREF(self);
    return release(self, read ? leave_at(self, fid, kind, now) : do_leave(self, fid, kind),
                   where);
}

static ELT_NOINLINE PyObject *
held_c_enter(Recorder *self, uintptr_t fid, uintptr_t caller, PyObject *callable)
{
    Py_INCREF(self);
    return release(self, do_c_enter(self, fid, caller, callable), "function_enter");
}

static ELT_NOINLINE PyObject *
held_c_leave(Recorder *self, uintptr_t fid, uintptr_t caller)
{
    Py_INCREF(self);
    return release(self, do_c_leave(self, fid, caller), "function_leave");
}

/* A plain close failed (out of memory: an exception is set). */
static ELT_NOINLINE PyObject *
held_failure(Recorder *self, const char *where)
{
    Py_INCREF(self);
    return release(self, -1, where);
}

/* -- the callbacks ------------------------------------------------------------------- */

/* Each callback comes in two forms: for a simple recorder (events.h's simple_recorder:
 * the C clock, no event lines, no timeline, as ``profkit run`` records) the plain cases
 * skip those tests; the general form makes them per event. new_hook picks one. */

/* PY_START / PY_RESUME (code, offset): the module.c methods' MONITORING_METHOD. */
#define ENTER_HOOK(NAME, KIND, WHERE, SIMPLE)                                           \
    static PyObject *NAME(PyObject *hook, PyObject *const *args, size_t nargsf,         \
                          PyObject *Py_UNUSED(kwnames))                                 \
    {                                                                                   \
        Recorder *self = RECORDER(hook);                                                \
        if (NARGS(nargsf) >= 1 && self->fork_generation == elt_fork_generation         \
            && !enter_plain_as(self, (uintptr_t)args[0], KIND, SIMPLE)) {               \
            return held_enter(self, (uintptr_t)args[0], KIND, WHERE);                   \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
ENTER_HOOK(hook_py_start, OPEN_ENTER, "function_enter", 0)
ENTER_HOOK(hook_py_resume, OPEN_RESUME, "function_resume", 0)
ENTER_HOOK(simple_py_start, OPEN_ENTER, "function_enter", 1)
ENTER_HOOK(simple_py_resume, OPEN_RESUME, "function_resume", 1)

/* PY_RETURN / PY_YIELD (code, offset, value): leave_fast, its slow paths held. */
#define LEAVE_HOOK(NAME, KIND, WHERE, SIMPLE)                                           \
    static PyObject *NAME(PyObject *hook, PyObject *const *args, size_t nargsf,         \
                          PyObject *Py_UNUSED(kwnames))                                 \
    {                                                                                   \
        Recorder *self = RECORDER(hook);                                                \
        if (NARGS(nargsf) >= 1 && self->fork_generation == elt_fork_generation) {      \
            uintptr_t fid = (uintptr_t)args[0];                                         \
            if (!leave_reads_clock_as(self, SIMPLE)) {                                  \
                return held_leave(self, fid, KIND, 0, 0, WHERE);                        \
            }                                                                           \
            int64_t now = monotonic_ns();                                               \
            Thread *t = leave_plain_as(self, fid, SIMPLE);                              \
            if (t == NULL) {                                                            \
                return held_leave(self, fid, KIND, 1, now, WHERE);                      \
            }                                                                           \
            if (close_plain(self, t, now) < 0) {                                        \
                return held_failure(self, WHERE);                                       \
            }                                                                           \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
LEAVE_HOOK(hook_py_return, CLOSE_LEAVE, "function_leave", 0)
LEAVE_HOOK(hook_py_yield, CLOSE_YIELD, "function_yield", 0)
LEAVE_HOOK(simple_py_return, CLOSE_LEAVE, "function_leave", 1)
LEAVE_HOOK(simple_py_yield, CLOSE_YIELD, "function_yield", 1)

/* CALL (code, offset, callable, arg0): ccalls.c's Recorder_c_call. */
#define C_CALL_HOOK(NAME, SIMPLE)                                                       \
    static PyObject *NAME(PyObject *hook, PyObject *const *args, size_t nargsf,         \
                          PyObject *Py_UNUSED(kwnames))                                 \
    {                                                                                   \
        if (NARGS(nargsf) >= 3) {                                                       \
            uintptr_t fid = c_fid(args[2]);                                             \
            Recorder *self = RECORDER(hook);                                            \
            if (fid != 0 && !c_enter_plain_as(self, fid, (uintptr_t)args[0], SIMPLE)) { \
                return held_c_enter(self, fid, (uintptr_t)args[0], args[2]);            \
            }                                                                           \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
C_CALL_HOOK(hook_c_call, 0)
C_CALL_HOOK(simple_c_call, 1)

/* C_RETURN / C_RAISE (code, offset, callable, arg0): ccalls.c's Recorder_c_return. */
#define C_RETURN_HOOK(NAME, SIMPLE)                                                     \
    static PyObject *NAME(PyObject *hook, PyObject *const *args, size_t nargsf,         \
                          PyObject *Py_UNUSED(kwnames))                                 \
    {                                                                                   \
        if (NARGS(nargsf) >= 3) {                                                       \
            uintptr_t fid = c_fid(args[2]);                                             \
            Recorder *self = RECORDER(hook);                                            \
            if (fid != 0) {                                                             \
                if (!c_leave_is_plain_as(self, SIMPLE)) {                               \
                    return held_c_leave(self, fid, (uintptr_t)args[0]);                 \
                }                                                                       \
                if (c_leave_plain(self, fid, (uintptr_t)args[0], monotonic_ns()) < 0) { \
                    return held_failure(self, "function_leave");                        \
                }                                                                       \
            }                                                                           \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
C_RETURN_HOOK(hook_c_return, 0)
C_RETURN_HOOK(simple_c_return, 1)

/* -- the type ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    vectorcallfunc call, simple;
} FORMS[] = {
    {"py_start", hook_py_start, simple_py_start},
    {"py_resume", hook_py_resume, simple_py_resume},
    {"py_return", hook_py_return, simple_py_return},
    {"py_yield", hook_py_yield, simple_py_yield},
    {"c_call", hook_c_call, simple_c_call},
    {"c_return", hook_c_return, simple_c_return},
};

static int
Hook_traverse(Hook *hook, visitproc visit, void *arg)
{
    Py_VISIT(hook->recorder);
    return 0;
}

static void
Hook_dealloc(Hook *hook)
{
    PyObject_GC_UnTrack(hook);
    Py_XDECREF(hook->recorder);
    PyObject_GC_Del(hook);
}

static PyObject *
Hook_get_name(Hook *hook, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(hook->name);
}

static PyObject *
Hook_repr(Hook *hook)
{
    return PyUnicode_FromFormat("<profkit recorder hook %s>", hook->name);
}

static PyGetSetDef Hook_getset[] = {
    {"__name__", (getter)Hook_get_name, NULL, "the Recorder method it stands for", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profkit.profilers.elt._native.Hook",
    .tp_basicsize = sizeof(Hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A Recorder's sys.monitoring callback (Recorder.hook): calls what the method of\n"
              "its name does, with no method call around it.",
    .tp_vectorcall_offset = offsetof(Hook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)Hook_traverse,
    .tp_dealloc = (destructor)Hook_dealloc,
    .tp_repr = (reprfunc)Hook_repr,
    .tp_getset = Hook_getset,
};

ELT_HIDDEN int
elt_hooks_ready(void)
{
    return PyType_Ready(&HookType);
}

/* The hook standing for the method ``name`` (py_start, py_resume, py_return, py_yield,
 * c_call, c_return); None for any other name. */
ELT_HIDDEN PyObject *
new_hook(Recorder *self, const char *name)
{
    for (size_t i = 0; i < sizeof FORMS / sizeof FORMS[0]; i++) {
        if (strcmp(name, FORMS[i].name) == 0) {
            Hook *hook = PyObject_GC_New(Hook, &HookType);
            if (hook == NULL) {
                return NULL;
            }
            hook->vectorcall = simple_recorder(self) ? FORMS[i].simple : FORMS[i].call;
            hook->recorder = (Recorder *)Py_NewRef((PyObject *)self);
            hook->name = FORMS[i].name;
            PyObject_GC_Track(hook);
            return (PyObject *)hook;
        }
    }
    Py_RETURN_NONE;
}

ELT_HIDDEN PyObject *
Recorder_hook(Recorder *self, PyObject *name)
{
    const char *wanted = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (wanted == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "hook() takes a method name");
        }
        return NULL;
    }
    return new_hook(self, wanted);
}
