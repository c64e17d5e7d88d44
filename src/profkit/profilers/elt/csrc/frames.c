/* profkit.profilers.elt._native: which frame of the saved file each function is, for
 * flat.c's export.
 *
 * Why a unit of its own: it is the one step of the flat export that runs Python code
 * (``frame_of(fid)``, once per distinct function), so it only reads trees that are the
 * export's own (see Tree in native.h); and the order it asks in is a contract of its own
 * (the frames table must come out as calltree's general path makes it).
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
            uintptr_t fid = tree_slot(&trees[i], g)->fid;
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

/* Ask frame_of(fid) for each distinct function, in the order tree.py's convert() meets
 * them (each node's children in creation order, nodes taken last-in first-out), so the
 * frames table comes out as the general path makes it. Runs Python code: the trees are
 * the export's own (prepared: children in creation order). -1 with an exception set. */
ELT_HIDDEN int
intern_frames(const Tree *trees, size_t n, FidFrame *table, size_t nfids, PyObject *frame_of)
{
    int status = -1;
    size_t cap = 1024, top = 0;
    uint32_t *stack = PyMem_Malloc(cap * sizeof(uint32_t)); /* node numbers, 0: the root */
    if (stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const Tree *tree = &trees[i];
        top = 0;
        stack[top++] = 0;
        while (top > 0) {
            uint32_t at = stack[--top];
            for (uint32_t number = tree->first_child[at]; number != 0;
                 number = tree->next_sibling[number]) {
                const Node *ch = tree_node(tree, number);
                FidFrame *entry = (FidFrame *)frame_for(table, nfids, ch->fid);
                if (entry->frame < 0) {
                    PyObject *key = PyLong_FromVoidPtr((void *)ch->fid);
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
                    entry->frame = value;
                }
                if (top == cap) {
                    uint32_t *grown = PyMem_Realloc(stack, 2 * cap * sizeof(uint32_t));
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    stack = grown;
                    cap *= 2;
                }
                stack[top++] = number;
            }
        }
    }
    status = 0;
done:
    PyMem_Free(stack);
    return status;
}
