/* profkit.profilers.elt._native: C functions as call-tree nodes of their own.
 *
 * Why: a Python profiler that sees only Python frames charges a C function's time to
 * its caller (json.tool on 8 MB: 64 % "self" time in json.dump, really in
 * TextIOWrapper.write). cProfile reports C functions from sys.monitoring's CALL and
 * C_RETURN/C_RAISE events (3.12+); so does this, with the recorder's own methods
 * registered as the callbacks of a tool id of its own (elt/ccalls.py).
 *
 * Which callables: builtin functions and methods (PyCFunction) and method descriptors
 * (``str.join`` called as ``s.join(...)``: CALL sees the descriptor and ``self``). Both
 * carry the C function's PyMethodDef, which is the node's function id (tagged odd, so it
 * never equals a code object's id): ``"".join`` and ``str.join`` are one function, and
 * the id of a bound method object, made anew for every call, is never used. Types,
 * slot wrappers and Python functions are left alone (Python functions have their own
 * events). Names as users know them: ``TextIOWrapper.write``, ``dict.get``,
 * ``builtins.sorted``.
 *
 * Caller rule: CALL says which code calls; the call is recorded only when that code is
 * the top of the recording thread's stack, so C calls of a filtered-out caller (the
 * prefix filter, profkit's own code) stay in that caller's time, as its Python calls do.
 */
#include "native.h"
#include "events.h"

static const char *
short_type_name(PyTypeObject *type)
{
    const char *name = type->tp_name;
    const char *dot = strrchr(name, '.');
    return dot != NULL ? dot + 1 : name;
}

/* Name a new C node of ``t`` (its name-table entry, also used by event lines) and
 * remember the name in c_names. Allocates only str and int objects and sets an item of a
 * dict holding them: nothing that can start a garbage collection, so no Python code
 * runs.
 *
 * Without event lines nothing reads a node's own name (lines.c), so the node is only
 * marked and its function named once, in c_names: a str and a name-table entry for every
 * C node were ~100 bytes a node (3.12, pytest on sympy's test_arit: ~420 k C nodes,
 * ~40 MB of the run's peak). */
ELT_HIDDEN int
name_c_node(Recorder *self, Thread *t, Node *n, PyObject *callable)
{
    if (self->emit == NULL && self->c_names != NULL) {
        PyObject *key = PyLong_FromVoidPtr((void *)fid_of(&t->fids, n));
        if (key == NULL) {
            return -1;
        }
        int known = PyDict_Contains(self->c_names, key);
        Py_DECREF(key);
        if (known < 0) {
            return -1;
        }
        if (known) {
            n->parent |= NAMED;
            return 0;
        }
    }
    PyObject *name;
    if (PyCFunction_Check(callable)) {
        PyCFunctionObject *f = (PyCFunctionObject *)callable;
        PyObject *bound = f->m_self;
        const char *method = f->m_ml->ml_name;
        if (bound != NULL && PyType_Check(bound)) { /* dict.fromkeys: bound to its class */
            name = PyUnicode_FromFormat("%s.%s", short_type_name((PyTypeObject *)bound), method);
        }
        else if (bound != NULL && !PyModule_Check(bound)) { /* "".join */
            name = PyUnicode_FromFormat("%s.%s", short_type_name(Py_TYPE(bound)), method);
        }
        else if (f->m_module != NULL && PyUnicode_Check(f->m_module)) { /* builtins.sorted */
            name = PyUnicode_FromFormat("%U.%s", f->m_module, method);
        }
        else {
            name = PyUnicode_FromString(method);
        }
    }
    else {
        PyMethodDescrObject *d = (PyMethodDescrObject *)callable;
        name = PyUnicode_FromFormat("%s.%s", short_type_name(PyDescr_TYPE(d)),
                                    d->d_method->ml_name);
    }
    if (name == NULL) {
        return -1;
    }
    PyObject *key = PyLong_FromVoidPtr((void *)fid_of(&t->fids, n));
    int status = key == NULL || self->c_names == NULL
                     ? (key == NULL ? -1 : 0)
                     : PyDict_SetDefault(self->c_names, key, name) == NULL ? -1 : 0;
    Py_XDECREF(key);
    if (status < 0) {
        Py_DECREF(name);
        return -1;
    }
    if (self->emit == NULL) { /* only event lines read it */
        Py_DECREF(name);
    }
    else if (name_add(&t->names, n, name) < 0) { /* the table owns it (thread_free) */
        PyErr_NoMemory();
        return -1;
    }
    n->parent |= NAMED;
    return 0;
}

/* CALL(code, offset, callable, arg0) and C_RETURN/C_RAISE(code, offset, callable, arg0);
 * errors go to on_error, never into the program (module.c's report). */
ELT_HIDDEN PyObject *
Recorder_c_call(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs >= 3) {
        uintptr_t fid = c_fid(args[2]);
        if (fid != 0) {
            Py_INCREF(self);
            int failed = c_enter_fast(self, fid, (uintptr_t)args[0], args[2]) < 0
                         && report(self, "function_enter") < 0;
            Py_DECREF(self);
            if (failed) {
                return NULL;
            }
        }
    }
    Py_RETURN_NONE;
}

ELT_HIDDEN PyObject *
Recorder_c_return(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs >= 3) {
        uintptr_t fid = c_fid(args[2]);
        if (fid != 0) {
            Py_INCREF(self);
            int failed = c_leave_fast(self, fid, (uintptr_t)args[0]) < 0
                         && report(self, "function_leave") < 0;
            Py_DECREF(self);
            if (failed) {
                return NULL;
            }
        }
    }
    Py_RETURN_NONE;
}
