/* profkit.profilers.elt._native: the end-of-run export in the saved file's own layout.
 *
 * Why: at the end of a long run the call tree has as many nodes as the program had
 * distinct call paths (sympy: ~90,000), and turning each into Python objects (a tuple, a
 * capture Node, a CallNode) and back into JSON rows cost more than the run itself. Here
 * the tree is exported once, in C, as what calltree/file.py stores: pre-order rows
 * (parent, frame, calls, inclusive, exclusive, min, max) with frames already interned,
 * empty branches pruned and self times derived (tree.py's ``convert`` rules), plus each
 * row's subtree size, so Python can build nodes lazily (elt/flat.py) and the saver can
 * write the rows as JSON text without a Python object per node (rows_json).
 * This unit merges, prunes and lays out the rows; frames.c asks for the frames, export.c
 * copies the trees, rowsjson.c writes the rows as JSON.
 */
#include "native.h"

/* One node of a thread's output tree while it is merged (frames, not functions).
 * Indices are 32-bit (72 bytes a node instead of 88: a long run's export holds one per
 * recorded node); flatten refuses a thread of 2**31 nodes or more, which the recorder
 * could not hold in under ~170 GB anyway. */
typedef int32_t Idx;
#define IDX_MAX INT32_MAX

typedef struct {
    Idx parent, first, last, next; /* children in creation order */
    int32_t keep;
    int64_t frame, calls, incl, excl, min, max;
} Out;

static inline size_t
out_slot(Idx parent, int64_t frame, size_t mask)
{
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ULL ^ (uint64_t)frame * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

static inline void
put_row(int64_t *row, const Out *node, int64_t parent_row)
{
    row[FLAT_PARENT] = parent_row;
    row[FLAT_FRAME] = node->frame;
    row[FLAT_CALLS] = node->calls;
    row[FLAT_INCL] = node->incl;
    row[FLAT_EXCL] = node->excl;
    row[FLAT_MIN] = node->min;
    row[FLAT_MAX] = node->max;
    row[FLAT_SIZE] = 1;
}

/* One thread's rows as ``bytes``; NULL with an exception set. Functions that share a
 * frame (two code objects with one name, file and line: dataclass-made methods, say)
 * merge into one node as convert() merges them: calls, times and children added up.
 * Then empty branches are pruned, and the rest written in pre-order with subtree sizes.
 *
 * Memory (the export is the run's peak; issue #11): each buffer lives only through the
 * phase that needs it. The copy's rows and the hash are freed once merged; the rows are
 * written straight into the result (sized by the kept count), not copied into it; self
 * times are summed into the nodes while merging, without a per-row array. Peak: about
 * 150 bytes a recorded node, not ~300. Only copies and the table are read, so building
 * the (untracked) bytes object cannot change anything under the walk. */
static PyObject *
flatten(Copy *c, const FidFrame *table, size_t nframes)
{
    size_t n = c->count ? c->count : 1;
    if (n >= (size_t)IDX_MAX) {
        PyErr_SetString(PyExc_MemoryError, "export_flat: a thread of 2**31 nodes or more");
        return NULL;
    }
    size_t slots = 16;
    while (slots < 2 * n) {
        slots *= 2;
    }
    PyObject *result = NULL;
    Idx *index = PyMem_Malloc(n * sizeof(Idx));
    Idx *hash = PyMem_Malloc(slots * sizeof(Idx));
    Idx *stack = NULL;
    Out *out = PyMem_Calloc(n, sizeof(Out));
    if (index == NULL || hash == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t s = 0; s < slots; s++) {
        hash[s] = -1;
    }
    size_t m = 1; /* out[0] is the root */
    int merged = 0;
    out[0].parent = out[0].first = out[0].last = out[0].next = -1;
    out[0].frame = -1;
    index[0] = 0;
    for (size_t i = 1; i < c->count; i++) {
        Row *r = &c->rows[i];
        Idx parent = index[r->parent];
        int64_t frame = frame_for(table, nframes, r->fid)->frame;
        /* Every node goes through the table: two functions with one frame merge, and so
         * do the children of merged nodes (one function under two merged parents). */
        size_t s = out_slot(parent, frame, slots - 1);
        Idx o;
        while ((o = hash[s]) >= 0 && !(out[o].parent == parent && out[o].frame == frame)) {
            s = (s + 1) & (slots - 1);
        }
        if (o >= 0) {
            merged = 1;
        }
        else {
            o = (Idx)m++;
            hash[s] = o;
            Out *node = &out[o];
            node->parent = parent;
            node->frame = frame;
            node->first = node->last = node->next = -1;
            if (out[parent].last >= 0) {
                out[out[parent].last].next = o;
            }
            else {
                out[parent].first = o;
            }
            out[parent].last = o;
        }
        index[i] = o;
        /* Self time: a completed row adds its inclusive time to its node, and each row
         * takes its inclusive time out of its parent row's node when that row completed
         * a call (the root's self time is never kept). The same sums as adding
         * ``incl - children's incl`` per completed row, in another (wrapping) order. */
        if (r->parent > 0 && c->rows[r->parent].calls > 0) {
            Out *up = &out[parent];
            up->excl = wrap_sub(up->excl, r->incl);
        }
        if (r->calls > 0) {
            Out *node = &out[o];
            int64_t lo = r->min == NO_MIN ? 0 : r->min;
            if (node->calls == 0 || lo < node->min) {
                node->min = lo;
            }
            if (r->max > node->max) {
                node->max = r->max;
            }
            node->calls = wrap_add(node->calls, r->calls);
            node->incl = wrap_add(node->incl, r->incl);
            node->excl = wrap_add(node->excl, r->incl);
        }
    }
    /* Merged: the copy and the hash are not read again. */
    PyMem_Free(hash);
    hash = NULL;
    PyMem_Free(c->rows);
    c->rows = NULL;
    c->count = 0;
    /* Kept: completed a call, or something kept below (parents precede children). */
    size_t kept = 1;
    for (size_t o = m; o-- > 1;) {
        if (out[o].calls > 0) {
            out[o].keep = 1;
        }
        if (out[o].keep) {
            kept++;
            out[out[o].parent].keep = 1;
        }
    }
    if (kept == 1) {
        result = Py_NewRef(Py_None); /* nothing kept: the thread is left out */
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(kept * FLAT_COLS * sizeof(int64_t)));
    if (result == NULL) {
        goto done;
    }
    int64_t *rows = (int64_t *)PyBytes_AS_STRING(result);
    /* Pre-order over the kept nodes, children in creation order; ``index`` now maps an
     * output node to its row. Without a merge the nodes were made in the rows' own
     * pre-order, and pruning whole subtrees keeps it: one pass in order. */
    size_t k = 0, top = 0;
    int64_t root_incl = 0;
    if (!merged) {
        for (size_t o = 0; o < m; o++) {
            Out *node = &out[o];
            if (o > 0 && !node->keep) {
                continue;
            }
            index[o] = (Idx)k;
            put_row(&rows[k++ * FLAT_COLS], node, o == 0 ? -1 : index[node->parent]);
            if (node->parent == 0) {
                root_incl = wrap_add(root_incl, node->incl);
            }
        }
    }
    else {
        stack = PyMem_Malloc(m * sizeof(Idx));
        if (stack == NULL) {
            Py_CLEAR(result);
            PyErr_NoMemory();
            goto done;
        }
        stack[top++] = 0;
    }
    while (top > 0) {
        Idx o = stack[--top];
        Out *node = &out[o];
        index[o] = (Idx)k;
        put_row(&rows[k++ * FLAT_COLS], node, o == 0 ? -1 : index[node->parent]);
        if (node->parent == 0) {
            root_incl = wrap_add(root_incl, node->incl);
        }
        /* pushed last child first, so the first child comes out first */
        size_t mark = top;
        for (Idx ch = node->first; ch >= 0; ch = out[ch].next) {
            if (out[ch].keep) {
                stack[top++] = ch;
            }
        }
        for (size_t a = mark, b = top; b > a + 1; a++, b--) {
            Idx tmp = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = tmp;
        }
    }
    rows[FLAT_INCL] = root_incl;
    for (size_t j = k; j-- > 1;) {
        int64_t p = rows[j * FLAT_COLS + FLAT_PARENT];
        rows[p * FLAT_COLS + FLAT_SIZE] += rows[j * FLAT_COLS + FLAT_SIZE];
    }
done:
    PyMem_Free(index);
    PyMem_Free(hash);
    PyMem_Free(stack);
    PyMem_Free(out);
    return result;
}

/* export_flat(now, frame_of) -> (closed, [(token, rows)]).
 *
 * Closes the open calls at ``now`` as export() does, then asks ``frame_of(fid)`` once per
 * distinct function for its frame index (see intern_frames), and returns each thread's tree as ``bytes``
 * of native int64 rows (parent, frame, calls, incl, excl, min, max, subtree size) in
 * pre-order, functions sharing a frame merged, empty branches pruned; threads with
 * nothing kept are left out. */
ELT_HIDDEN PyObject *
Recorder_export_flat(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "export_flat(now, frame_of)");
        return NULL;
    }
    long long now = PyLong_AsLongLong(args[0]);
    if (now == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *frame_of = args[1];
    long long closed = 0;
    size_t n, nfids = 0;
    Copy *copies = copy_threads(self, (int64_t)now, &n, &closed);
    if (copies == NULL) {
        return NULL;
    }
    /* From here on only the copies are used: frame_of runs Python code. */
    PyObject *result = NULL, *threads = NULL;
    FidFrame *table = NULL;
    uintptr_t *fids = distinct_fids(copies, n, &nfids);
    if (fids == NULL) {
        goto done;
    }
    table = PyMem_Malloc((nfids ? nfids : 1) * sizeof(FidFrame));
    if (table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < nfids; k++) {
        table[k].fid = fids[k];
        table[k].frame = -1;
    }
    PyMem_Free(fids); /* the table holds them now (8 bytes a node less at the peak) */
    fids = NULL;
    if (intern_frames(copies, n, table, nfids, frame_of) < 0) {
        goto done;
    }
    threads = PyList_New(0);
    if (threads == NULL) {
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *data = flatten(&copies[i], table, nfids); /* frees the copy's rows */
        if (data == NULL) {
            goto done;
        }
        if (data != Py_None) {
            PyObject *pair = PyTuple_Pack(2, copies[i].token, data);
            if (pair == NULL || PyList_Append(threads, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(data);
                goto done;
            }
            Py_DECREF(pair);
        }
        Py_DECREF(data);
    }
    result = Py_BuildValue("(LO)", closed, threads);
done:
    Py_XDECREF(threads);
    PyMem_Free(fids);
    PyMem_Free(table);
    free_copies(copies, n);
    return result;
}
