/* A prototype of the native piece the 3.11 (sys.setprofile) backend would need (bench
 * only, not shipped): a C profile function installed with PyEval_SetProfile, as _lsprof
 * does. Per code object it asks accept(code) once and caches the verdict in co_extra
 * (the FunctionId int if accepted, None if not); afterwards a rejected function costs a
 * pointer test, and an accepted one a call of the profiler's bound enter/leave method.
 * C calls are ignored. Errors go to on_error instead of into the program.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static Py_ssize_t extra_index = -1;
static PyObject *hooks = NULL; /* (accept, enter, leave, on_error) */

static void
free_extra(void *extra)
{
    Py_XDECREF((PyObject *)extra);
}

static PyObject *
verdict_of(PyCodeObject *code)
{
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &extra) < 0) {
        return NULL;
    }
    if (extra != NULL) {
        return (PyObject *)extra;
    }
    PyObject *ok = PyObject_CallOneArg(PyTuple_GET_ITEM(hooks, 0), (PyObject *)code);
    if (ok == NULL) {
        return NULL;
    }
    int yes = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    PyObject *verdict = yes > 0 ? PyLong_FromVoidPtr(code) : Py_NewRef(Py_None);
    if (verdict == NULL || _PyCode_SetExtra((PyObject *)code, extra_index, verdict) < 0) {
        Py_XDECREF(verdict);
        return NULL;
    }
    return verdict;
}

static int
profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    if (what != PyTrace_CALL && what != PyTrace_RETURN) {
        return 0;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    PyObject *verdict = verdict_of(code);
    Py_DECREF(code);
    if (verdict != NULL && verdict != Py_None) {
        PyObject *fn = PyTuple_GET_ITEM(hooks, what == PyTrace_CALL ? 1 : 2);
        PyObject *res = PyObject_CallOneArg(fn, verdict);
        if (res != NULL) {
            Py_DECREF(res);
            return 0;
        }
    }
    if (PyErr_Occurred()) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(hooks, 3), value ? value : Py_None);
        Py_XDECREF(r);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
    }
    return 0;
}

static PyObject *
install(PyObject *self, PyObject *args)
{
    PyObject *accept, *enter, *leave, *on_error;
    if (!PyArg_ParseTuple(args, "OOOO", &accept, &enter, &leave, &on_error)) {
        return NULL;
    }
    Py_XSETREF(hooks, PyTuple_Pack(4, accept, enter, leave, on_error));
    if (hooks == NULL) {
        return NULL;
    }
    PyEval_SetProfile(profile, NULL);
    Py_RETURN_NONE;
}

static PyObject *
uninstall(PyObject *self, PyObject *unused)
{
    PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS, "install(accept, enter, leave, on_error)"},
    {"uninstall", uninstall, METH_NOARGS, "remove the profile function"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_profhook", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__profhook(void)
{
    extra_index = _PyEval_RequestCodeExtraIndex(free_extra);
    if (extra_index < 0) {
        return NULL;
    }
    return PyModule_Create(&module);
}
