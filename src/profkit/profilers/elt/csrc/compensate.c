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
 * themselves (flatrows.h's columns). Whole nanoseconds, as the rule says, so the numbers
 * are exactly the Python rule's (tests/profilers/elt/test_compensate.py compares them).
 */
#include "native.h"

#include <math.h>

/* value * num // den with Python's floor division, through 128 bits when the product of
 * two nanosecond counts passes 2**63 (a 128-bit division is a library call: ~15 M
 * instructions of sympy's end of run when every row took it). */
static inline int64_t
scaled(int64_t value, int64_t num, int64_t den)
{
    int64_t small;
    if (!__builtin_mul_overflow(value, num, &small) && den != -1) { /* usually: 64 bits do */
        int64_t q = small / den;
        return small % den != 0 && ((small < 0) != (den < 0)) ? q - 1 : q;
    }
    __int128 a = (__int128)value * num, q = a / den;
    if (a % den != 0 && ((a < 0) != (den < 0))) {
        q -= 1;
    }
    return (int64_t)q;
}

/* compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller): rows
 * (a writable buffer of export_flat's rows, flatrows.h's columns) compensated in place; a row is a C
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
    int64_t n = (int64_t)((size_t)view.len / FLAT_ROW_BYTES);
    if ((size_t)view.len % FLAT_ROW_BYTES != 0 || ((uintptr_t)view.buf % sizeof(int64_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "compensate_rows: not whole, aligned rows");
        goto fail;
    }
    FlatCols r = flat_cols(view.buf, (size_t)n);
    for (int64_t at = 0; at < n; at++) { /* checked first: the rows are left as they were */
        int64_t size = r.size[at];
        if (size < 1 || size > n - at) {
            PyErr_Format(PyExc_ValueError, "compensate_rows: row %lld: subtree size %lld",
                         (long long)at, (long long)size);
            goto fail;
        }
    }
#define IS_C(i) (r.frame[i] >= 0 && r.frame[i] < mask_len && c_mask[r.frame[i]])
    for (int64_t at = n - 1; at >= 1; at--) {
        int64_t own = r.excl[at] - r.calls[at] * cost[IS_C(at) ? 2 : 0];
        int64_t below = 0;
        for (int64_t ch = at + 1; ch < at + r.size[at]; ch += r.size[ch]) {
            own -= r.calls[ch] * cost[IS_C(ch) ? 3 : 1];
            below += r.incl[ch]; /* already compensated: later rows went first */
        }
        if (own < 0) {
            own = 0;
        }
        int64_t incl = own + below, old = r.incl[at] ? r.incl[at] : 1;
        r.min[at] = scaled(r.min[at], incl, old);
        r.max[at] = scaled(r.max[at], incl, old);
        r.excl[at] = own;
        r.incl[at] = incl;
    }
    if (n > 1) {
        /* The root: its inclusive time is its children's (flat.c), its self time 0. */
        int64_t total = 0;
        for (int64_t ch = 1; ch < r.size[0]; ch += r.size[ch]) {
            total += r.incl[ch];
        }
        r.incl[0] = total;
    }
#undef IS_C
    PyBuffer_Release(&mask);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&mask);
    PyBuffer_Release(&view);
    return NULL;
}
