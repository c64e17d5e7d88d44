/* A prototype of the smallest native piece profkit's sys.monitoring backend would need
 * (bench only, not shipped): a vectorcall object registered as the PY_START / PY_RETURN
 * callback that calls the profiler's bound method with id(code) -- no Python frame of
 * profkit's own in between -- and hands any exception to an error callback instead of
 * letting it escape into the profiled program. Built on demand by collector_bench.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

static Py_ssize_t extra_index = -1;

static void
free_extra(void *extra)
{
    Py_XDECREF((PyObject *)extra);
}

typedef struct {
    PyObject_HEAD
    PyObject *target;    /* the profiler's bound method: target(function_id) */
    PyObject *on_error;  /* on_error(exception): profkit's failure rule */
    vectorcallfunc vectorcall;
} Trampoline;

static PyObject *
trampoline_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Trampoline *self = (Trampoline *)op;
    if (PyVectorcall_NARGS(nargsf) < 1) {
        PyErr_SetString(PyExc_TypeError, "trampoline needs the code object");
        return NULL;
    }
    /* id(code), cached on the code object itself (co_extra): no allocation per event. */
    PyObject *code = args[0];
    void *extra = NULL;
    if (!PyCode_Check(code) || PyUnstable_Code_GetExtra(code, extra_index, &extra) < 0) {
        return NULL;
    }
    PyObject *fid = (PyObject *)extra;
    if (fid == NULL) {
        fid = PyLong_FromVoidPtr(code);
        if (fid == NULL || PyUnstable_Code_SetExtra(code, extra_index, fid) < 0) {
            Py_XDECREF(fid);
            return NULL;
        }
    }
    PyObject *res = PyObject_CallOneArg(self->target, fid);
    if (res == NULL) {
        PyObject *exc = PyErr_GetRaisedException();
        PyObject *r = PyObject_CallOneArg(self->on_error, exc);
        Py_XDECREF(r);
        Py_DECREF(exc);
        PyErr_Clear();
    }
    else {
        Py_DECREF(res);
    }
    Py_RETURN_NONE;
}

static PyObject *
trampoline_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *target, *on_error;
    if (!PyArg_ParseTuple(args, "OO", &target, &on_error)) {
        return NULL;
    }
    Trampoline *self = (Trampoline *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->target = Py_NewRef(target);
    self->on_error = Py_NewRef(on_error);
    self->vectorcall = trampoline_vectorcall;
    return (PyObject *)self;
}

static void
trampoline_dealloc(PyObject *op)
{
    Trampoline *self = (Trampoline *)op;
    Py_XDECREF(self->target);
    Py_XDECREF(self->on_error);
    Py_TYPE(op)->tp_free(op);
}

static PyTypeObject TrampolineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_trampoline.Trampoline",
    .tp_basicsize = sizeof(Trampoline),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = trampoline_new,
    .tp_dealloc = trampoline_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Trampoline, vectorcall),
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_trampoline", NULL, -1, NULL};

PyMODINIT_FUNC
PyInit__trampoline(void)
{
    if (PyType_Ready(&TrampolineType) < 0) {
        return NULL;
    }
    extra_index = PyUnstable_Eval_RequestCodeExtraIndex(free_extra);
    if (extra_index < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Trampoline", (PyObject *)&TrampolineType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
