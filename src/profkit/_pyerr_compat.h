/* One helper both of profkit's C modules need, on every supported Python.
 *
 * take_raised_exception(): the pending exception as one object -- normalised, its traceback
 * attached -- and the error indicator cleared; NULL when nothing is pending. 3.12 has it as
 * PyErr_GetRaisedException(); 3.11 only has the (type, value, traceback) triple.
 * Header-only (static inline) so each extension stays one self-contained .c file.
 */
#ifndef PROFKIT_PYERR_COMPAT_H
#define PROFKIT_PYERR_COMPAT_H

#include <Python.h>

static inline PyObject *
take_raised_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return exc;
#endif
}

#endif /* PROFKIT_PYERR_COMPAT_H */
