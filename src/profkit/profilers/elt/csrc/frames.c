/* profkit.profilers.elt._native: which frame of the saved file each function is, for
 * flat.c's export.
 *
 * Why a unit of its own: it is the one step of the flat export that runs Python code
 * (``frame_of.many(fids)`` once, or ``frame_of(fid)`` once per distinct function), so it
 * only reads trees that are the export's own (see Tree in native.h); and the order it asks
 * in is a contract of its own (the frames table must come out as calltree's general path
 * makes it).
 */
#include "native.h"

#include <stdlib.h>

static int
cmp_fid(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static inline size_t
fid_slot(uintptr_t fid, size_t mask)
{
    uint64_t h = (uint64_t)fid * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* The distinct fids of every tree, sorted, each with frame -1; NULL with MemoryError set.
 * A hash set on the way (a run has thousands of functions, not a node count's worth). */
ELT_HIDDEN FidFrame *
fid_table(const Tree *trees, size_t n, size_t *out)
{
    size_t mask = 1023, count = 0;
    int zero = 0; /* fid 0 was seen (0 marks an empty slot) */
    uintptr_t *set = PyMem_Calloc(mask + 1, sizeof(uintptr_t));
    if (set == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t g = 0; g < trees[i].used; g++) {
            uintptr_t fid = tree_fid(&trees[i], tree_slot(&trees[i], g));
            if (fid == 0) {
                zero = 1;
                continue;
            }
            size_t s = fid_slot(fid, mask);
            while (set[s] != 0 && set[s] != fid) {
                s = (s + 1) & mask;
            }
            if (set[s] == fid) {
                continue;
            }
            set[s] = fid;
            if (++count * 2 > mask + 1) { /* grow: rehash into twice the slots */
                size_t bigger = (mask + 1) * 2 - 1;
                uintptr_t *grown = PyMem_Calloc(bigger + 1, sizeof(uintptr_t));
                if (grown == NULL) {
                    PyMem_Free(set);
                    PyErr_NoMemory();
                    return NULL;
                }
                for (size_t k = 0; k <= mask; k++) {
                    if (set[k] != 0) {
                        size_t t = fid_slot(set[k], bigger);
                        while (grown[t] != 0) {
                            t = (t + 1) & bigger;
                        }
                        grown[t] = set[k];
                    }
                }
                PyMem_Free(set);
                set = grown;
                mask = bigger;
            }
        }
    }
    size_t m = 0;
    for (size_t k = 0; k <= mask; k++) {
        if (set[k] != 0) {
            set[m++] = set[k];
        }
    }
    qsort(set, m, sizeof(uintptr_t), cmp_fid);
    FidFrame *table = PyMem_Malloc((m + 1) * sizeof(FidFrame));
    if (table == NULL) {
        PyMem_Free(set);
        PyErr_NoMemory();
        return NULL;
    }
    size_t k = 0;
    if (zero) {
        table[k].fid = 0;
        table[k++].frame = -1;
    }
    for (size_t j = 0; j < m; j++, k++) {
        table[k].fid = set[j];
        table[k].frame = -1;
    }
    PyMem_Free(set);
    *out = k;
    return table;
}

/* Slots of ask_order's cache of entries (a power of two). */
#define ASK_CACHE 4096

/* The table's entries in the order tree.py's convert() meets their functions (each
 * node's children in creation order, nodes taken last-in first-out), each once, marked
 * asked (frame -2). Plain C: the trees are the export's own (prepared: children in
 * creation order). NULL with MemoryError set; *count entries. */
static FidFrame **
ask_order(const Tree *trees, size_t n, FidFrame *table, size_t nfids, size_t *count)
{
    size_t cap = 1024, top = 0, k = 0;
    uint32_t *stack = PyMem_Malloc(cap * sizeof(uint32_t)); /* node numbers, 0: the root */
    FidFrame **order = PyMem_Malloc((nfids ? nfids : 1) * sizeof(FidFrame *));
    /* The entries last found, by a hash of their fid: most nodes' functions are there, and
     * a probe is cheaper than the table's binary search (sympy: ~150,000 nodes, ~4,000
     * functions). NULL: nothing found at that slot yet. */
    FidFrame **seen = PyMem_Calloc(ASK_CACHE, sizeof(FidFrame *));
    if (stack == NULL || order == NULL || seen == NULL) {
        goto nomem;
    }
    for (size_t i = 0; i < n; i++) {
        const Tree *tree = &trees[i];
        top = 0;
        stack[top++] = 0;
        while (top > 0) {
            uint32_t at = stack[--top];
            for (uint32_t number = tree->first_child[at]; number != 0;
                 number = tree->next_sibling[number]) {
                uintptr_t fid = tree_fid(tree, tree_node(tree, number));
                FidFrame **slot = &seen[fid_slot(fid, ASK_CACHE - 1)];
                FidFrame *entry = *slot;
                if (entry == NULL || entry->fid != fid) {
                    entry = *slot = (FidFrame *)frame_for(table, nfids, fid);
                }
                if (entry->frame == -1) {
                    entry->frame = -2;
                    order[k++] = entry;
                }
                if (top == cap) {
                    uint32_t *grown = PyMem_Realloc(stack, 2 * cap * sizeof(uint32_t));
                    if (grown == NULL) {
                        goto nomem;
                    }
                    stack = grown;
                    cap *= 2;
                }
                stack[top++] = number;
            }
        }
    }
    PyMem_Free(stack);
    PyMem_Free(seen);
    *count = k;
    return order;
nomem:
    PyErr_NoMemory();
    PyMem_Free(stack);
    PyMem_Free(order);
    PyMem_Free(seen);
    return NULL;
}

/* entry's frame from what frame_of answered for it: an int >= 0. -1 with an exception set. */
static int
set_frame(FidFrame *entry, PyObject *answer)
{
    long long value = PyLong_AsLongLong(answer);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (value < 0) {
        PyErr_SetString(PyExc_ValueError, "frame_of must return an index >= 0");
        return -1;
    }
    entry->frame = value;
    return 0;
}

/* frame_of.many(fids) -> a sequence of as many frame indices: every function in one call
 * (sympy names ~5,000: a call into Python each cost more than the naming, issue #26). */
static int
ask_many(PyObject *many, FidFrame **order, size_t count)
{
    PyObject *fids = PyList_New((Py_ssize_t)count);
    if (fids == NULL) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        PyObject *key = PyLong_FromVoidPtr((void *)order[i]->fid);
        if (key == NULL) {
            Py_DECREF(fids);
            return -1;
        }
        PyList_SET_ITEM(fids, (Py_ssize_t)i, key);
    }
    PyObject *got = PyObject_CallOneArg(many, fids);
    Py_DECREF(fids);
    PyObject *seq = got == NULL ? NULL : PySequence_Fast(got, "frame_of.many: not a sequence");
    Py_XDECREF(got);
    if (seq == NULL) {
        return -1;
    }
    int status = 0;
    if ((size_t)PySequence_Fast_GET_SIZE(seq) != count) {
        PyErr_SetString(PyExc_ValueError, "frame_of.many must return one index per fid");
        status = -1;
    }
    for (size_t i = 0; status == 0 && i < count; i++) {
        status = set_frame(order[i], PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
    }
    Py_DECREF(seq);
    return status;
}

/* Ask for each distinct function's frame in ask_order's order, so the frames table comes
 * out as the general path makes it: all at once through ``frame_of.many(fids)`` when
 * frame_of has it, else ``frame_of(fid)`` one by one. Runs Python code (the trees are the
 * export's own). -1 with an exception set. */
ELT_HIDDEN int
intern_frames(const Tree *trees, size_t n, FidFrame *table, size_t nfids, PyObject *frame_of)
{
    size_t count = 0;
    FidFrame **order = ask_order(trees, n, table, nfids, &count);
    if (order == NULL) {
        return -1;
    }
    int status = -1;
    PyObject *many = PyObject_GetAttrString(frame_of, "many");
    if (many != NULL) {
        status = ask_many(many, order, count);
        Py_DECREF(many);
    }
    else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        status = 0;
        for (size_t i = 0; status == 0 && i < count; i++) {
            PyObject *key = PyLong_FromVoidPtr((void *)order[i]->fid);
            PyObject *frame = key == NULL ? NULL : PyObject_CallOneArg(frame_of, key);
            Py_XDECREF(key);
            status = frame == NULL ? -1 : set_frame(order[i], frame);
            Py_XDECREF(frame);
        }
    }
    PyMem_Free(order);
    return status;
}
