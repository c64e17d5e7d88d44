/* profkit.profilers.elt._native: which frame of the saved file each function is, for
 * flat.c's export.
 *
 * Why a unit of its own: it is the one step of the flat export that runs Python code
 * (``frame_of(fid)``, once per distinct function), so it only reads the plain-C copies of
 * the trees; and the order it asks in is a contract of its own (the frames table must come
 * out as calltree's general path makes it).
 */
#include "native.h"

#include <stdlib.h>

static int
cmp_fid(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct fids of every copy, sorted; NULL with MemoryError set. */
ELT_HIDDEN uintptr_t *
distinct_fids(Copy *copies, size_t n, size_t *out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += copies[i].count;
    }
    uintptr_t *fids = PyMem_Malloc((total ? total : 1) * sizeof(uintptr_t));
    if (fids == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 1; j < copies[i].count; j++) { /* row 0 is the root: no function */
            fids[k++] = copies[i].rows[j].fid;
        }
    }
    qsort(fids, k, sizeof(uintptr_t), cmp_fid);
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        if (m == 0 || fids[m - 1] != fids[j]) {
            fids[m++] = fids[j];
        }
    }
    *out = m;
    return fids;
}

/* Ask frame_of(fid) for each distinct function, in the order tree.py's convert() meets
 * them (each node's children in row order, nodes taken last-in first-out), so the frames
 * table comes out as the general path makes it. Runs Python code: only the copies are
 * read. -1 with an exception set on failure. */
ELT_HIDDEN int
intern_frames(Copy *copies, size_t n, FidFrame *table, size_t nfids, PyObject *frame_of)
{
    int status = -1;
    size_t most = 1;
    for (size_t i = 0; i < n; i++) {
        most = copies[i].count > most ? copies[i].count : most;
    }
    Py_ssize_t *first = PyMem_Malloc(most * sizeof(Py_ssize_t));
    Py_ssize_t *next = PyMem_Malloc(most * sizeof(Py_ssize_t));
    Py_ssize_t *stack = PyMem_Malloc(most * sizeof(Py_ssize_t));
    if (first == NULL || next == NULL || stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        Copy *c = &copies[i];
        for (size_t j = 0; j < c->count; j++) {
            first[j] = -1;
        }
        for (size_t j = c->count; j-- > 1;) { /* prepended backwards: ascending lists */
            Py_ssize_t p = c->rows[j].parent;
            next[j] = first[p];
            first[p] = (Py_ssize_t)j;
        }
        size_t top = 0;
        if (c->count > 0) {
            stack[top++] = 0;
        }
        while (top > 0) {
            Py_ssize_t at = stack[--top];
            for (Py_ssize_t ch = first[at]; ch >= 0; ch = next[ch]) {
                uintptr_t fid = c->rows[ch].fid;
                size_t lo = 0, hi = nfids;
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (table[mid].fid < fid) {
                        lo = mid + 1;
                    }
                    else {
                        hi = mid;
                    }
                }
                if (table[lo].frame < 0) {
                    PyObject *key = PyLong_FromVoidPtr((void *)fid);
                    PyObject *frame = key == NULL ? NULL : PyObject_CallOneArg(frame_of, key);
                    Py_XDECREF(key);
                    if (frame == NULL) {
                        goto done;
                    }
                    long long value = PyLong_AsLongLong(frame);
                    Py_DECREF(frame);
                    if (value == -1 && PyErr_Occurred()) {
                        goto done;
                    }
                    if (value < 0) {
                        PyErr_SetString(PyExc_ValueError, "frame_of must return an index >= 0");
                        goto done;
                    }
                    table[lo].frame = value;
                }
                stack[top++] = ch;
            }
        }
    }
    status = 0;
done:
    PyMem_Free(first);
    PyMem_Free(next);
    PyMem_Free(stack);
    return status;
}
