/* profkit.profilers.elt._native: rows_json, flat.c's rows as the saved file's JSON text.
 *
 * Why: the saver writes every row of a large tree (sympy: ~90,000) into the file; one
 * Python int and list per number cost more than the run. This writes the digits of a
 * range of rows straight into one bytes object; the layout (FLAT_* columns) is flatrows.h's.
 */
#include "native.h"

/* "00" .. "99": two digits a step, half the divisions of one a step (the saved rows are
 * ~7 numbers a row, ~10 digits each: digit by digit cost ~120 M instructions on sympy). */
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324"
    "25262728293031323334353637383940414243444546474849"
    "50515253545556575859606162636465666768697071727374"
    "75767778798081828384858687888990919293949596979899";

/* Decimal digits of v at *p; returns the new end. */
static char *
put_i64(char *p, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0) {
        *p++ = '-';
    }
    if (u < 10) {
        *p++ = (char)('0' + u);
        return p;
    }
    int len = 2;
    for (uint64_t bound = 100; len < 20 && u >= bound; bound *= 10) {
        len++;
    }
    char *q = p + len;
    while (u >= 100) {
        const char *pair = &DIGIT_PAIRS[2 * (u % 100)];
        u /= 100;
        *--q = pair[1];
        *--q = pair[0];
    }
    if (u >= 10) {
        *--q = DIGIT_PAIRS[2 * u + 1];
        *--q = DIGIT_PAIRS[2 * u];
    }
    else {
        *--q = (char)('0' + u);
    }
    return p + len;
}

/* rows_json(rows, start=0, stop=None) -> bytes: rows [start, stop) of export_flat's
 * rows as the saved file's node arrays, ``[parent,frame,calls,incl,excl,min,max],...``
 * (the subtree size is not stored). A range, so the saver writes a large tree in pieces
 * instead of holding its whole text (~32 bytes a row) at once. */
ELT_HIDDEN PyObject *
native_rows_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module; /* the module is not needed */
    if (nargs != 1 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "rows_json(rows, start=0, stop=None)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    FlatCols r = {0};
    if (flat_cols(view.buf, (size_t)view.len, &r, NULL) < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "rows_json: not whole, aligned rows");
        return NULL;
    }
    Py_ssize_t count = (Py_ssize_t)r.n, start = 0, stop = count;
    if (nargs == 3) {
        start = PyLong_AsSsize_t(args[1]);
        if (args[2] != Py_None) {
            stop = PyLong_AsSsize_t(args[2]);
        }
        if ((start == -1 || stop == -1) && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
        start = start < 0 ? 0 : start > count ? count : start;
        stop = stop < start ? start : stop > count ? count : stop;
    }
    size_t n = (size_t)(stop - start);
    /* 7 numbers of at most 20 digits and a sign, 6 commas, brackets, a separator */
    size_t most = n * (7 * 21 + 9);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(most ? most : 1));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *first = PyBytes_AS_STRING(out), *p = first;
    for (size_t at = (size_t)start; at < (size_t)stop; at++) {
        if (at > (size_t)start) {
            *p++ = ',';
        }
        *p++ = '[';
        p = put_i64(p, r.parent[at]);
        *p++ = ',';
        p = put_i64(p, r.frame[at]);
        Stats st = flat_stats(&r, at);
        const int64_t numbers[] = {st.calls, r.incl[at], r.excl[at], st.min, st.max};
        for (int k = 0; k < 5; k++) {
            *p++ = ',';
            p = put_i64(p, numbers[k]);
        }
        *p++ = ']';
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(p - first)) < 0) {
        return NULL;
    }
    return out;
}
