/* profkit.profilers.elt._native: compensate_rows, elt/compensate.py's rule on flat.c's
 * rows, in place.
 *
 * Why in C and in place: the rule touches every row of every thread once, at the end of
 * the run, when the process holds the most. In Python (an array copy of the rows, lists
 * of ints a row, then new bytes) it cost ~180 bytes a row at the peak (pytest on sympy's
 * test_arit, 1.2 million rows: 480 MB against 268 MB without it) and a Python loop over
 * every row. Here it is one backward pass over the rows, nothing allocated (unless a
 * row's shortest or longest call outgrows its 32-bit column: it then gets a wide entry
 * and the rows grow by it): a node's children are found by their subtree sizes, so the
 * children (later in pre-order) are done before their parent and their new inclusive
 * times are read from the rows themselves (flatrows.h's columns). Whole nanoseconds, as
 * the rule says, so the numbers are exactly the Python rule's
 * (tests/profilers/elt/test_compensate.py compares them).
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

/* A row's compensated min and max that do not fit its 32-bit columns (its inclusive time
 * grew: children longer than their caller, after a clock went back): they go to a new
 * wide entry once the pass is done. */
typedef struct {
    int64_t row, calls, min, max;
} Grown;

typedef struct {
    Grown *items;
    size_t n, cap;
} GrownList;

static int
grown_add(GrownList *g, Grown item)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        Grown *items = PyMem_Realloc(g->items, cap * sizeof(Grown));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->items = items;
        g->cap = cap;
    }
    g->items[g->n++] = item;
    return 0;
}

static inline int64_t
row_calls(const FlatCols *r, size_t at)
{
    return r->calls[at] != WIDE ? r->calls[at] : flat_stats(r, at).calls;
}

/* The rule on rows ``r`` (checked: every subtree size within the rows), one backward pass;
 * rows whose min or max outgrow 32 bits are left in ``grown`` (descending). -1 with
 * MemoryError set. */
static int
compensate(FlatCols *r, const char *c_mask, int64_t mask_len, const int64_t *cost,
           GrownList *grown)
{
    const int64_t n = (int64_t)r->n;
#define IS_C(i) (r->frame[i] >= 0 && r->frame[i] < mask_len && c_mask[r->frame[i]])
    for (int64_t at = n - 1; at >= 1; at--) {
        Stats s = flat_stats(r, (size_t)at);
        int64_t own = r->excl[at] - s.calls * cost[IS_C(at) ? 2 : 0];
        int64_t below = 0;
        for (int64_t ch = at + 1; ch < at + r->size[at]; ch += r->size[ch]) {
            own -= row_calls(r, (size_t)ch) * cost[IS_C(ch) ? 3 : 1];
            below += r->incl[ch]; /* already compensated: later rows went first */
        }
        if (own < 0) {
            own = 0;
        }
        int64_t incl = own + below, old = r->incl[at] ? r->incl[at] : 1;
        int64_t min = scaled(s.min, incl, old), max = scaled(s.max, incl, old);
        r->excl[at] = own;
        r->incl[at] = incl;
        if (r->calls[at] == WIDE) {
            size_t e = flat_wide_at(r, (size_t)at);
            if (e < r->k) {
                r->wmin[e] = min;
                r->wmax[e] = max;
            }
        }
        else if (min >= 0 && min <= UINT32_MAX && max >= 0 && max <= UINT32_MAX) {
            r->min[at] = (uint32_t)min;
            r->max[at] = (uint32_t)max;
        }
        else if (grown_add(grown, (Grown){at, s.calls, min, max}) < 0) {
            return -1;
        }
    }
#undef IS_C
    if (n > 1) {
        /* The root: its inclusive time is its children's (flat.c), its self time 0. */
        int64_t total = 0;
        for (int64_t ch = 1; ch < r->size[0]; ch += r->size[ch]) {
            total += r->incl[ch];
        }
        r->incl[0] = total;
    }
    return 0;
}

/* The rows in ``obj`` (a bytearray) given the ``grown`` rows' wide entries, merged into
 * the others in row order: the rows are grown by their entries. -1 with an exception. */
static int
add_wide(PyObject *obj, const GrownList *grown)
{
    Py_buffer view;
    FlatCols r = {0};
    if (!PyByteArray_Check(obj)) {
        PyErr_SetString(PyExc_ValueError, "compensate_rows: rows that grow need a bytearray");
        return -1;
    }
    (void)flat_cols(PyByteArray_AS_STRING(obj), (size_t)PyByteArray_GET_SIZE(obj), &r, NULL);
    size_t n = r.n, k = r.k, m = grown->n;
    Grown *old = PyMem_Malloc((k ? k : 1) * sizeof(Grown));
    if (old == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t e = 0; e < k; e++) {
        old[e] = (Grown){r.wrow[e], r.wcalls[e], r.wmin[e], r.wmax[e]};
    }
    const size_t nk[2] = {n, k + m};
    if (PyByteArray_Resize(obj, (Py_ssize_t)flat_bytes(n, k + m)) < 0
        || PyObject_GetBuffer(obj, &view, PyBUF_WRITABLE) < 0) {
        PyMem_Free(old);
        return -1;
    }
    (void)flat_cols(view.buf, (size_t)view.len, &r, nk);
    size_t a = 0, b = m; /* old ascending; grown descending, so read from its end */
    for (size_t e = 0; e < k + m; e++) {
        Grown g = b == 0 || (a < k && old[a].row < grown->items[b - 1].row) ? old[a++]
                                                                            : grown->items[--b];
        r.wrow[e] = g.row;
        r.wcalls[e] = g.calls;
        r.wmin[e] = g.min;
        r.wmax[e] = g.max;
        r.calls[g.row] = WIDE;
        r.min[g.row] = r.max[g.row] = 0;
    }
    PyBuffer_Release(&view);
    PyMem_Free(old);
    return 0;
}

/* compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller): rows
 * (a writable buffer of export_flat's rows, flatrows.h's columns) compensated in place; a
 * row is a C function's when c_mask[frame] is non-zero; each cost is rounded to whole
 * nanoseconds as Python's round() does (ties to even). ValueError, the rows untouched,
 * when they are not a tree in pre-order (a subtree size runs past the rows). A row whose
 * min or max no longer fits 32 bits grows the rows (a bytearray then) by its wide entry. */
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
    GrownList grown = {NULL, 0, 0};
    FlatCols r = {0};
    int ok = flat_cols(view.buf, (size_t)view.len, &r, NULL) == 0;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "compensate_rows: not whole, aligned rows");
    }
    for (size_t at = 0; ok && at < r.n; at++) { /* checked first: the rows stay as they were */
        int64_t size = r.size[at];
        if (size < 1 || (uint64_t)size > r.n - at) {
            PyErr_Format(PyExc_ValueError, "compensate_rows: row %lld: subtree size %lld",
                         (long long)at, (long long)size);
            ok = 0;
        }
    }
    ok = ok && compensate(&r, mask.buf, (int64_t)mask.len, cost, &grown) == 0;
    PyBuffer_Release(&mask);
    PyBuffer_Release(&view);
    ok = ok && (grown.n == 0 || add_wide(args[0], &grown) == 0);
    PyMem_Free(grown.items);
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
}
