/* profkit.profilers.elt._native: the timeline's spans (see native.h). */
#include "native.h"

/* -- timeline ---------------------------------------------------------------------- */

/* Plain C (PyMem only, no Python code): also used by export's copy. */
ELT_HIDDEN int
add_span(Recorder *self, Thread *t, uintptr_t fid, int64_t start, int64_t end, Py_ssize_t depth)
{
    if (self->nspans >= self->span_cap) {
        self->spans_dropped++;
        return 0;
    }
    if (self->nspans == self->spans_alloc) {
        Py_ssize_t alloc = self->spans_alloc ? self->spans_alloc * 2 : 1024;
        if (alloc > self->span_cap) {
            alloc = self->span_cap;
        }
        Span *spans = PyMem_Realloc(self->spans, (size_t)alloc * sizeof(Span));
        if (spans == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->spans = spans;
        self->spans_alloc = alloc;
    }
    Span *sp = &self->spans[self->nspans++];
    sp->thread = t;
    sp->fid = fid;
    sp->start = start;
    sp->end = end;
    sp->depth = depth;
    return 0;
}


/* spans() -> ([(token, fid, start, end, depth)], dropped): the timeline so far, in
 * recording order (export adds the calls it closes); a thread's token is the object
 * export returns for it. Copied in plain C first, like export's trees. */
ELT_HIDDEN PyObject *
Recorder_spans(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = self->nspans;
    Span *copy = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(Span));
    PyObject **tokens = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(PyObject *));
    if (copy == NULL || tokens == NULL) {
        PyMem_Free(copy);
        PyMem_Free(tokens);
        return PyErr_NoMemory();
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (self->spans[i].thread->token != NULL) { /* NULL: cleared by the collector */
            copy[kept] = self->spans[i];
            tokens[kept++] = Py_NewRef(self->spans[i].thread->token);
        }
    }
    long long dropped = self->spans_dropped;
    PyObject *list = PyList_New(kept);
    for (Py_ssize_t i = 0; list != NULL && i < kept; i++) {
        Span *sp = &copy[i];
        PyObject *row = Py_BuildValue(
            "(OKLLn)", tokens[i], (unsigned long long)sp->fid, (long long)sp->start,
            (long long)sp->end, sp->depth);
        if (row == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, row);
    }
    for (Py_ssize_t i = 0; i < kept; i++) {
        Py_DECREF(tokens[i]);
    }
    PyMem_Free(copy);
    PyMem_Free(tokens);
    return list == NULL ? NULL : Py_BuildValue("(NL)", list, dropped);
}
