/* profkit.profilers.elt._native: rows_json, flat.c's rows as the saved file's JSON text.
 *
 * Why: the saver writes every row of a large tree (sympy: ~90,000) into the file; one
 * Python int and list per number cost more than the run. This writes the digits straight
 * into one bytes object; the layout (FLAT_* columns) is flat.c's.
 */
#include "native.h"

/* Decimal digits of v at *p; returns the new end. */
static char *
put_i64(char *p, int64_t v)
{
    char tmp[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *p++ = '-';
    }
    while (k > 0) {
        *p++ = tmp[--k];
    }
    return p;
}

/* rows_json(rows) -> bytes: export_flat's rows as the saved file's node arrays,
 * ``[parent,frame,calls,incl,excl,min,max],...`` (the subtree size is not stored). */
ELT_HIDDEN PyObject *
native_rows_json(PyObject *module, PyObject *arg)
{
    (void)module; /* METH_O: the module is not needed */
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    size_t row_bytes = FLAT_COLS * sizeof(int64_t);
    if (view.len % (Py_ssize_t)row_bytes != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "rows_json: not whole rows");
        return NULL;
    }
    size_t n = (size_t)view.len / row_bytes;
    /* 7 numbers of at most 20 digits and a sign, 6 commas, brackets, a separator */
    size_t most = n * (7 * 21 + 9);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(most ? most : 1));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *start = PyBytes_AS_STRING(out), *p = start;
    for (size_t i = 0; i < n; i++) {
        int64_t row[FLAT_COLS];
        memcpy(row, (const char *)view.buf + i * row_bytes, row_bytes);
        if (i > 0) {
            *p++ = ',';
        }
        *p++ = '[';
        for (int k = 0; k < FLAT_SIZE; k++) {
            if (k > 0) {
                *p++ = ',';
            }
            p = put_i64(p, row[k]);
        }
        *p++ = ']';
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, (Py_ssize_t)(p - start)) < 0) {
        return NULL;
    }
    return out;
}
