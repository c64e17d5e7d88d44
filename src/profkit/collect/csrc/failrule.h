/* The failure rule of the collectors' C hooks (failure.py), shared by the profile
 * function (dispatch.c) and the 3.11 frame-evaluation hook (evalframe.c): two extension
 * modules, hence header-only.
 *
 * The exception set now, raised by the profiler's ``what``, goes to fail(exc, what)
 * (KeyboardInterrupt and SystemExit too: fail raises them again once the program runs and
 * contains them during start-up, failure.py says why); a RecursionError (the program's,
 * at its limit) is dropped. Returns -1 with an exception set only for what must reach the
 * program (anything ``fail`` raises). */
#ifndef PROFKIT_FAILRULE_H
#define PROFKIT_FAILRULE_H

#include <Python.h>
#include "../../_pyerr_compat.h"

static inline int
contain_failure(PyObject *fail, const char *what)
{
    if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear();
        return 0;
    }
    PyObject *exc = take_raised_exception();
    if (exc == NULL) {
        return 0;
    }
    PyObject *r = PyObject_CallFunction(fail, "Os", exc, what);
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

#endif /* PROFKIT_FAILRULE_H */
