/* profkit.profilers.elt._native: compensate_rows, elt/compensate.py's rule on flat.c's
 * rows, in place.
 *
 * Why in C and in place: the rule touches every row of every thread once, at the end of
 * the run, when the process holds the most. In Python (an array copy of the rows, lists
 * of ints a row, then new bytes) it cost ~180 bytes a row at the peak (pytest on sympy's
 * test_arit, 1.2 million rows: 480 MB against 268 MB without it) and a Python loop over
 * every row. Here it is one backward pass over the rows, nothing allocated: a node's
 * children are found by their subtree sizes, so the children (later in pre-order) are
 * done before their parent and their new inclusive times are read from the rows
 * themselves. Whole nanoseconds, as the rule says, so the numbers are exactly the Python
 * rule's (tests/profilers/elt/test_compensate.py compares them).
 */
#include "native.h"

#include <math.h>

/* value * num // den with Python's floor division, through 128 bits (the product of two
 * nanosecond counts passes 2**63). */
static inline int64_t
scaled(int64_t value, int64_t num, int64_t den)
{
    __int128 a = (__int128)value * num, q = a / den;
    if (a % den != 0 && ((a < 0) != (den < 0))) {
        q -= 1;
    }
    return (int64_t)q;
}

/* compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller): rows
 * (a writable buffer of export_flat's int64 rows) compensated in place; a row is a C
 * function's when c_mask[frame] is non-zero; each cost is rounded to whole nanoseconds
 * as Python's round() does (ties to even). ValueError, the rows untouched, when they are
 * not a tree in pre-order (a subtree size runs past the rows). */
ELT_HIDDEN PyObject *
native_compensate_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "compensate_rows(rows, c_mask, python_callee, "
                                         "python_caller, c_callee, c_caller)");
        return NULL;
    }
    int64_t cost[4]; /* python in, python out, C in, C out */
    for (int i = 0; i < 4; i++) {
        double value = PyFloat_AsDouble(args[2 + i]);
        if (value == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        if (!(fabs(value) < 1e15)) {
            PyErr_SetString(PyExc_ValueError, "compensate_rows: a cost out of range");
            return NULL;
        }
        cost[i] = (int64_t)nearbyint(value); /* to nearest, ties even: Python's round() */
    }
    Py_buffer view, mask;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &mask, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *c_mask = mask.buf;
    const int64_t mask_len = (int64_t)mask.len;
    size_t row_bytes = FLAT_COLS * sizeof(int64_t);
    int64_t *rows = view.buf;
    int64_t n = (int64_t)((size_t)view.len / row_bytes);
    if ((size_t)view.len % row_bytes != 0 || ((uintptr_t)rows % sizeof(int64_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "compensate_rows: not whole, aligned rows");
        goto fail;
    }
    for (int64_t at = 0; at < n; at++) { /* checked first: the rows are left as they were */
        int64_t size = rows[at * FLAT_COLS + FLAT_SIZE];
        if (size < 1 || size > n - at) {
            PyErr_Format(PyExc_ValueError, "compensate_rows: row %lld: subtree size %lld",
                         (long long)at, (long long)size);
            goto fail;
        }
    }
#define ROW(i) (&rows[(i) * FLAT_COLS])
#define IS_C(r) ((r)[FLAT_FRAME] >= 0 && (r)[FLAT_FRAME] < mask_len && c_mask[(r)[FLAT_FRAME]])
    for (int64_t at = n - 1; at >= 1; at--) {
        int64_t *row = ROW(at);
        int64_t own = row[FLAT_EXCL] - row[FLAT_CALLS] * cost[IS_C(row) ? 2 : 0];
        int64_t below = 0;
        for (int64_t ch = at + 1; ch < at + row[FLAT_SIZE]; ch += ROW(ch)[FLAT_SIZE]) {
            const int64_t *child = ROW(ch);
            own -= child[FLAT_CALLS] * cost[IS_C(child) ? 3 : 1];
            below += child[FLAT_INCL]; /* already compensated: later rows went first */
        }
        if (own < 0) {
            own = 0;
        }
        int64_t incl = own + below, old = row[FLAT_INCL] ? row[FLAT_INCL] : 1;
        row[FLAT_MIN] = scaled(row[FLAT_MIN], incl, old);
        row[FLAT_MAX] = scaled(row[FLAT_MAX], incl, old);
        row[FLAT_EXCL] = own;
        row[FLAT_INCL] = incl;
    }
    if (n > 1) {
        /* The root: its inclusive time is its children's (flat.c), its self time 0. */
        int64_t total = 0;
        for (int64_t ch = 1; ch < rows[FLAT_SIZE]; ch += ROW(ch)[FLAT_SIZE]) {
            total += ROW(ch)[FLAT_INCL];
        }
        rows[FLAT_INCL] = total;
    }
#undef ROW
#undef IS_C
    PyBuffer_Release(&mask);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&mask);
    PyBuffer_Release(&view);
    return NULL;
}
