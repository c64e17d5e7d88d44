/* The per-code cache of the Python tables' rows (see profhook.h, Entry). */
#include "profhook.h"

PH_HIDDEN void
codes_free(Hook *self)
{
    if (self->codes == NULL) {
        return;
    }
    Entry *codes = self->codes;
    Py_ssize_t size = self->codes_mask + 1;
    self->caller_code = NULL; /* its status was a row of this table */
    self->last_c = NULL;
    self->codes = NULL;
    self->codes_mask = self->codes_used = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_XDECREF(codes[i].fid);
        Py_XDECREF(codes[i].raw);
    }
    PyMem_Free(codes);
}

/* Room for one more entry (kept at most half full). -1 with MemoryError. */
static int
codes_reserve(Hook *self)
{
    Py_ssize_t size = self->codes_mask + 1;
    if (self->codes != NULL && (self->codes_used + 1) * 2 <= size) {
        return 0;
    }
    Py_ssize_t grown = self->codes == NULL ? 256 : size * 2;
    Entry *fresh = PyMem_Calloc((size_t)grown, sizeof(Entry));
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; self->codes != NULL && i < size; i++) {
        Entry *old = &self->codes[i];
        if (old->code != NULL) {
            Py_ssize_t j = code_slot(old->code, grown - 1);
            while (fresh[j].code != NULL) {
                j = (j + 1) & (grown - 1);
            }
            fresh[j] = *old;
        }
    }
    PyMem_Free(self->codes);
    self->codes = fresh;
    self->codes_mask = grown - 1;
    return 0;
}

/* The code's row from the Python tables, cached. NULL without an exception when a table
 * has no (usable) row yet: the slow path classifies the code. */
static Entry *
codes_fill(Hook *self, void *code)
{
    PyObject *fid = PyLong_FromVoidPtr(code);
    if (fid == NULL) {
        return NULL;
    }
    PyObject *raw = NULL;
    long status, first = 0;
    /* Borrowed rows: nothing here may run Python code (another thread, or a finalizer,
     * could drop them), so only real ints are read (PyLong_AsLong of anything else calls
     * its __index__); any other row is the slow path's. */
    PyObject *st_obj = PyDict_GetItemWithError(self->status, fid);
    if (st_obj == NULL || !PyLong_Check(st_obj)) {
        goto unusable;
    }
    status = PyLong_AsLong(st_obj);
    if (status == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* out of range: not a status this hook knows */
        goto unusable;
    }
    if (status == self->gen_fast) {
        PyObject *row = PyDict_GetItemWithError(self->gen_code, fid);
        if (row == NULL || !PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2
            || !PyBytes_Check(PyTuple_GET_ITEM(row, 0)) || !PyLong_Check(PyTuple_GET_ITEM(row, 1))) {
            goto unusable;
        }
        first = PyLong_AsLong(PyTuple_GET_ITEM(row, 1));
        if (first == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto unusable;
        }
        raw = Py_NewRef(PyTuple_GET_ITEM(row, 0));
    }
    if (codes_reserve(self) < 0) {
        PyErr_Clear(); /* no room to cache: the slow path serves this event, as in Python */
        Py_XDECREF(raw);
        goto unusable;
    }
    Py_ssize_t i = code_slot(code, self->codes_mask);
    while (self->codes[i].code != NULL) {
        i = (i + 1) & self->codes_mask;
    }
    Entry *e = &self->codes[i];
    e->code = code;
    e->fid = fid;
    e->raw = raw;
    e->status = status;
    e->first = first;
    self->codes_used++;
    return e;

unusable:
    Py_DECREF(fid);
    return NULL;
}

/* The cached row of ``code``, filled on first sight. NULL: for the slow path (with an
 * exception set only if one must reach the program). */
PH_HIDDEN Entry *
code_entry(Hook *self, void *code)
{
    Entry *e = code_cached(self, code);
    return e != NULL ? e : codes_fill(self, code);
}
