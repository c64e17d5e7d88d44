/* profkit.profilers.elt._native: per-frame sums over one column of export_flat's rows, and
 * the frame column's renumbering, for the end of a run's whole-tree passes.
 *
 * Why in C: at the end of ``profkit run`` the printed tree's hot spots (report/shown.py),
 * its heavy-import test (report/rules.py) and the calibration thread's removal
 * (elt/build.py) each walked every row in a Python loop, ~1,000 instructions a row, and a
 * long run has hundreds of thousands (sympy: 153,000; issue #26). Each is one pass here,
 * over the columns as memoryviews give them (int32 frames and parents, int64 values), with
 * the same results as the Python rules they replace (which stay as the fallback and as the
 * tests' model): sums by frame in a dict whose keys are in the order rows first give them.
 */
#include "native.h"

/* A 1-D buffer of ``size``-byte items (memoryview.cast's), its item count in *n. */
static int
column_of(PyObject *obj, Py_buffer *view, size_t size, int writable, Py_ssize_t *n)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if ((size_t)view->len % size != 0 || (uintptr_t)view->buf % size != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "rows: not a column of whole, aligned items");
        return -1;
    }
    *n = view->len / (Py_ssize_t)size;
    return 0;
}

/* The frames' sums as a dict, keys in first-seen order (order[0..count)); NULL on error. */
static PyObject *
sums_dict(const int32_t *order, Py_ssize_t count, const int64_t *sums)
{
    PyObject *out = PyDict_New();
    for (Py_ssize_t k = 0; out != NULL && k < count; k++) {
        PyObject *key = PyLong_FromLong(order[k]);
        PyObject *value = key == NULL ? NULL : PyLong_FromLongLong(sums[order[k]]);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
            Py_CLEAR(out);
        }
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return out;
}

/* Sums of values[row] by frames[row] over rows 1.. (row 0 is the root), leaving out the
 * rows in ``skip`` (ascending) when ``parents`` is NULL; with ``parents`` (and ``wanted``,
 * a byte a frame), the sums of the rows' subtree totals (each row's value plus its
 * descendants', found through the parent column, later rows first) over the rows whose
 * frame is wanted. Frames must lie in [0, 2**31); OverflowError past int64. */
static PyObject *
frame_sums(const int32_t *frames, const int64_t *values, Py_ssize_t n, PyObject *skip,
           const int32_t *parents, const char *wanted, Py_ssize_t nwanted)
{
    int32_t most = -1;
    for (Py_ssize_t r = 1; r < n; r++) {
        if (frames[r] < 0) {
            PyErr_SetString(PyExc_ValueError, "frame_sums: a frame below 0");
            return NULL;
        }
        most = frames[r] > most ? frames[r] : most;
    }
    size_t slots = (size_t)most + 2; /* never 0 bytes: PyMem may answer NULL to those */
    int64_t *sums = PyMem_Calloc(slots, sizeof(int64_t));
    char *seen = PyMem_Calloc(slots, 1);
    int32_t *order = PyMem_Malloc(slots * sizeof(int32_t));
    int64_t *total = parents != NULL ? PyMem_Malloc(((size_t)n + 1) * sizeof(int64_t)) : NULL;
    PyObject *out = NULL;
    Py_ssize_t count = 0, next_skip = 0, nskip = skip != NULL ? PyList_GET_SIZE(skip) : 0;
    Py_ssize_t skip_at = -1; /* the next row to leave out (-1: none) */
    if (sums == NULL || seen == NULL || order == NULL || (parents != NULL && total == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    if (parents != NULL) {
        memcpy(total, values, (size_t)n * sizeof(int64_t));
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        Py_ssize_t r = parents != NULL ? n - i : i;
        int32_t f = frames[r];
        int64_t value = values[r];
        if (parents != NULL) {
            int32_t p = parents[r];
            if (p < 0 || p >= r) {
                PyErr_SetString(PyExc_ValueError, "frame_sums: a parent not before its row");
                goto done;
            }
            value = total[r];
            if (__builtin_add_overflow(total[p], value, &total[p])) {
                goto overflow;
            }
            if (f >= nwanted || !wanted[f]) {
                continue;
            }
        }
        else {
            while (skip_at < r && next_skip < nskip) {
                skip_at = PyLong_AsSsize_t(PyList_GET_ITEM(skip, next_skip++));
                if (skip_at == -1 && PyErr_Occurred()) {
                    goto done;
                }
            }
            if (skip_at == r) {
                continue;
            }
        }
        if (!seen[f]) {
            seen[f] = 1;
            order[count++] = f;
        }
        if (__builtin_add_overflow(sums[f], value, &sums[f])) {
            goto overflow;
        }
    }
    out = sums_dict(order, count, sums);
    goto done;
overflow:
    PyErr_SetString(PyExc_OverflowError, "frame_sums: a sum past int64");
done:
    PyMem_Free(sums);
    PyMem_Free(seen);
    PyMem_Free(order);
    PyMem_Free(total);
    return out;
}

/* frame_sums(frames, values, skip=None, parents=None, wanted=None): see above. */
ELT_HIDDEN PyObject *
native_frame_sums(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 2 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError,
                        "frame_sums(frames, values, skip=None, parents=None, wanted=None)");
        return NULL;
    }
    PyObject *skip = nargs > 2 && args[2] != Py_None ? args[2] : NULL;
    int subtree = nargs > 3 && args[3] != Py_None;
    if ((skip != NULL && !PyList_Check(skip)) || (subtree && (nargs < 5 || args[4] == Py_None))) {
        PyErr_SetString(PyExc_TypeError, "frame_sums: skip is a list; parents need wanted");
        return NULL;
    }
    Py_buffer fv, vv, pv = {0}, wv = {0};
    Py_ssize_t n, nv, np = 0;
    PyObject *out = NULL;
    if (column_of(args[0], &fv, 4, 0, &n) < 0) {
        return NULL;
    }
    if (column_of(args[1], &vv, 8, 0, &nv) < 0) {
        PyBuffer_Release(&fv);
        return NULL;
    }
    if (subtree && column_of(args[3], &pv, 4, 0, &np) < 0) {
        goto release;
    }
    if (subtree && PyObject_GetBuffer(args[4], &wv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&pv);
        subtree = 0;
        goto release;
    }
    if (nv != n || (subtree && np != n)) {
        PyErr_SetString(PyExc_ValueError, "frame_sums: columns of different lengths");
    }
    else {
        out = frame_sums(fv.buf, vv.buf, n, skip, subtree ? pv.buf : NULL, wv.buf, wv.len);
    }
    if (subtree) {
        PyBuffer_Release(&pv);
        PyBuffer_Release(&wv);
    }
release:
    PyBuffer_Release(&fv);
    PyBuffer_Release(&vv);
    return out;
}

/* renumber_frames(frames, table): frames[r] = table[frames[r]] in place for every row
 * whose frame is >= 0 (the root's -1 stays); ValueError, nothing changed, when a frame
 * is past the table. */
ELT_HIDDEN PyObject *
native_renumber_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "renumber_frames(frames, table)");
        return NULL;
    }
    Py_buffer fv, tv;
    Py_ssize_t n, nt;
    if (column_of(args[0], &fv, 4, 1, &n) < 0) {
        return NULL;
    }
    if (column_of(args[1], &tv, 4, 0, &nt) < 0) {
        PyBuffer_Release(&fv);
        return NULL;
    }
    int32_t *frames = fv.buf;
    const int32_t *table = tv.buf;
    int ok = 1;
    for (Py_ssize_t r = 0; r < n; r++) {
        ok &= frames[r] < nt;
    }
    if (ok) {
        for (Py_ssize_t r = 0; r < n; r++) {
            frames[r] = frames[r] >= 0 ? table[frames[r]] : frames[r];
        }
    }
    else {
        PyErr_SetString(PyExc_ValueError, "renumber_frames: a frame past the table");
    }
    PyBuffer_Release(&fv);
    PyBuffer_Release(&tv);
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
}
