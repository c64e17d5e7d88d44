/* profkit.profilers.elt._native: the end-of-run export of the call trees (see native.h).
 *
 * Why a unit of its own: recording (tree.c) runs on every call and must stay small and
 * hot; exporting runs once, and its rule is different: first close every open call and
 * copy the trees in plain C (no Python code can run, so nothing changes under the walk),
 * only then build Python objects from the copies. flat.c's export closes the calls the
 * same way (close_open_calls), then copies the trees as nodes, or takes them once the
 * recorder is stopped.
 */
#include "native.h"

/* One exported thread, copied out in plain C: (parent index, fid, calls, incl, min,
 * max) rows in pre-order, and a strong reference to its token. */
typedef struct {
    Py_ssize_t parent;
    uintptr_t fid;
    int64_t calls, incl, min, max;
} Row;

typedef struct {
    PyObject *token;
    Row *rows;
    size_t count;
} Copy;

static void
free_copies(Copy *copies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Py_XDECREF(copies[i].token);
        PyMem_Free(copies[i].rows);
    }
    PyMem_Free(copies);
}

ELT_HIDDEN int
close_open_calls(Recorder *self, Thread *t, int64_t now, long long *closed)
{
    while (t->depth > 0) {
        Frame *f = &t->frames[--t->depth];
        int64_t duration = wrap_sub(now, f->start);
        if (close_call(t, f->node, f->number, duration, self->basetime) < 0) {
            return -1; /* MemoryError set */
        }
        if (self->span_cap >= 0 && duration >= self->basetime
            && add_span(self, t, f->fid, f->start, now, t->depth) < 0) {
            return -1; /* PyErr_NoMemory already set */
        }
        (*closed)++;
    }
    return 0;
}

/* stop(): record nothing more, for good. Events are then ignored as after the garbage
 * collector's clear (gone(): no new_thread), so the hot path pays no extra test; and
 * export_flat may take the trees themselves instead of copying them (flat.c). */
ELT_HIDDEN PyObject *
Recorder_stop(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    self->stopped = 1;
    Py_CLEAR(self->new_thread);
    Py_RETURN_NONE;
}

/* Node ``number``'s children, newest first: the order the recording's own lists had when
 * nodes kept them (the walk below pushes them so, and pops them in creation order). Nodes
 * keep no children lists (native.h): they are made here, ``first`` and ``next`` by node
 * number, from the nodes' parents. */
static void
link_children(const Thread *t, uint32_t *first, uint32_t *next)
{
    memset(first, 0, (t->used + 1) * sizeof(uint32_t));
    for (size_t g = 0; g < t->used; g++) {
        uint32_t number = (uint32_t)(g + 1);
        uint32_t p = numbered_node(t->numbered, number)->parent & NUMBER_MASK;
        next[number] = first[p];
        first[p] = number;
    }
}

/* Close every recording thread's open calls at ``now`` (adding their number to *closed)
 * and copy its tree. Plain C only (PyMem, no object allocation, so no collection and no
 * Python code): the trees cannot change under the walk. NULL with an exception set when
 * out of memory. */
static Copy *
copy_threads(Recorder *self, int64_t now, size_t *count, long long *closed)
{
    size_t n = 0, most = 0;
    for (Thread *t = self->first; t != NULL; t = t->next) {
        if (t->token != NULL) { /* NULL: cleared by the garbage collector */
            n++;
            most = t->used + 1 > most ? t->used + 1 : most;
        }
    }
    *count = n;
    Copy *copies = PyMem_Calloc(n ? n : 1, sizeof(Copy));
    uint32_t *work = PyMem_Malloc((most ? most : 1) * sizeof(uint32_t));
    Py_ssize_t *parents = PyMem_Malloc((most ? most : 1) * sizeof(Py_ssize_t));
    uint32_t *first = PyMem_Malloc((most ? most : 1) * sizeof(uint32_t));
    uint32_t *next = PyMem_Malloc((most ? most : 1) * sizeof(uint32_t));
    if (copies == NULL || work == NULL || parents == NULL || first == NULL || next == NULL) {
        goto nomem;
    }
    size_t k = 0;
    for (Thread *t = self->first; t != NULL; t = t->next) {
        if (t->token == NULL) {
            continue;
        }
        if (close_open_calls(self, t, now, closed) < 0) {
            goto fail;
        }
        Copy *c = &copies[k++];
        c->token = Py_NewRef(t->token);
        c->rows = PyMem_Malloc((t->used + 1) * sizeof(Row));
        if (c->rows == NULL) {
            goto nomem;
        }
        link_children(t, first, next);
        size_t top = 0;
        work[top] = 0; /* the root */
        parents[top++] = -1;
        while (top > 0) {
            top--;
            uint32_t number = work[top];
            const Node *node = number ? numbered_node(t->numbered, number) : &t->root;
            Stats s = node_stats(&t->wide, node, number);
            Row *row = &c->rows[c->count];
            row->parent = parents[top];
            row->fid = fid_of(&t->fids, node);
            row->calls = s.calls;
            row->incl = node_incl(&t->wide, node, number);
            row->min = s.min;
            row->max = s.max;
            Py_ssize_t index = (Py_ssize_t)c->count++;
            for (uint32_t ch = first[number]; ch != 0; ch = next[ch]) {
                work[top] = ch;
                parents[top++] = index;
            }
        }
    }
    PyMem_Free(work);
    PyMem_Free(parents);
    PyMem_Free(first);
    PyMem_Free(next);
    return copies;
nomem:
    PyErr_NoMemory();
fail:
    if (copies != NULL) {
        free_copies(copies, n);
    }
    PyMem_Free(work);
    PyMem_Free(parents);
    PyMem_Free(first);
    PyMem_Free(next);
    return NULL;
}

/* export(now) -> (closed, [(token, nodes)]): every recording thread's open calls closed
 * at ``now`` (counted in ``closed``), and its tree flattened in pre-order as tuples
 * (parent index, fid, calls, incl, min, max); index 0 is the root. Flat and iterative,
 * so a 10,000-deep recursion exports without deep C or Python recursion. */
ELT_HIDDEN PyObject *
Recorder_export(Recorder *self, PyObject *arg)
{
    long long now = PyLong_AsLongLong(arg);
    if (now == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long closed = 0;
    size_t n;
    Copy *copies = copy_threads(self, (int64_t)now, &n, &closed);
    if (copies == NULL) {
        return NULL;
    }
    /* From here on Python objects are built from the copies: whatever runs meanwhile
     * (the collector, finalizers, other threads' events) cannot touch them. */
    PyObject *threads = PyList_New((Py_ssize_t)n);
    if (threads == NULL) {
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        Copy *c = &copies[i];
        PyObject *nodes = PyList_New((Py_ssize_t)c->count);
        if (nodes == NULL) {
            goto fail;
        }
        for (size_t j = 0; j < c->count; j++) {
            Row *r = &c->rows[j];
            PyObject *row = Py_BuildValue(
                "(nKLLLL)", r->parent, (unsigned long long)r->fid, (long long)r->calls,
                (long long)r->incl, (long long)r->min, (long long)r->max);
            if (row == NULL) {
                Py_DECREF(nodes);
                goto fail;
            }
            PyList_SET_ITEM(nodes, (Py_ssize_t)j, row);
        }
        PyObject *pair = PyTuple_Pack(2, c->token, nodes);
        Py_DECREF(nodes);
        if (pair == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(threads, (Py_ssize_t)i, pair);
    }
    free_copies(copies, n);
    return Py_BuildValue("(LN)", closed, threads);
fail:
    free_copies(copies, n);
    Py_XDECREF(threads);
    return NULL;
}

/* _set_calls(count): for tests only: the completed calls of the node on top of the
 * calling thread's stack become ``count`` (min and max unchanged), as if it had run that
 * often; so the tests reach counts past 32 bits without 2**32 calls. */
ELT_HIDDEN PyObject *
Recorder_set_calls(Recorder *self, PyObject *arg)
{
    long long count = PyLong_AsLongLong(arg);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Thread *t = known_thread(self);
    if (t == &SILENT || t->depth == 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "_set_calls: no open call here, or count < 0");
        return NULL;
    }
    Frame *f = &t->frames[t->depth - 1];
    Stats s = node_stats(&t->wide, f->node, f->number);
    int64_t incl = node_incl(&t->wide, f->node, f->number);
    s.calls = count;
    f->node->parent &= ~CARRIED; /* its total, high part included, is set whole below */
    if (node_set_stats(&t->wide, f->node, f->number, s, incl) < 0) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}
