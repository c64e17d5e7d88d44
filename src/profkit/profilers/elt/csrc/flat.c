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

/* One node of a thread's output tree while it is merged (frames, not functions). */
typedef struct {
    Py_ssize_t parent, first, last, next; /* children in creation order */
    int64_t frame, calls, incl, excl, min, max;
    int keep;
} Out;

static inline size_t
out_slot(Py_ssize_t parent, int64_t frame, size_t mask)
{
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ULL ^ (uint64_t)frame * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* One thread's rows (plain C); NULL with MemoryError set. Functions that share a frame
 * (two code objects with one name, file and line: dataclass-made methods, say) merge
 * into one node as convert() merges them: calls, times and children added up. Then
 * empty branches are pruned, and the rest written in pre-order with subtree sizes. */
static int64_t *
flatten(Copy *c, const FidFrame *table, size_t nframes, size_t *out_rows)
{
    size_t n = c->count ? c->count : 1;
    size_t slots = 16;
    while (slots < 2 * n) {
        slots *= 2;
    }
    int64_t *sumc = PyMem_Calloc(n, sizeof(int64_t));
    Py_ssize_t *index = PyMem_Malloc(n * sizeof(Py_ssize_t));
    Py_ssize_t *hash = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    Py_ssize_t *stack = PyMem_Malloc(n * sizeof(Py_ssize_t));
    Out *out = PyMem_Calloc(n, sizeof(Out));
    int64_t *rows = PyMem_Malloc(n * FLAT_COLS * sizeof(int64_t));
    if (sumc == NULL || index == NULL || hash == NULL || stack == NULL || out == NULL
        || rows == NULL) {
        PyMem_Free(rows);
        rows = NULL;
        PyErr_NoMemory();
        goto done;
    }
    for (size_t s = 0; s < slots; s++) {
        hash[s] = -1;
    }
    /* Children come after their parent in pre-order: one backward pass sees every child
     * before its parent; a node's self time excludes all its children's times. */
    for (size_t i = c->count; i-- > 1;) {
        Py_ssize_t p = c->rows[i].parent;
        sumc[p] = wrap_add(sumc[p], c->rows[i].incl);
    }
    size_t m = 1; /* out[0] is the root */
    int merged = 0;
    out[0].parent = out[0].first = out[0].last = out[0].next = -1;
    out[0].frame = -1;
    index[0] = 0;
    for (size_t i = 1; i < c->count; i++) {
        Row *r = &c->rows[i];
        Py_ssize_t parent = index[r->parent];
        int64_t frame = frame_for(table, nframes, r->fid)->frame;
        /* Every node goes through the table: two functions with one frame merge, and so
         * do the children of merged nodes (one function under two merged parents). */
        size_t s = out_slot(parent, frame, slots - 1);
        Py_ssize_t o;
        while ((o = hash[s]) >= 0 && !(out[o].parent == parent && out[o].frame == frame)) {
            s = (s + 1) & (slots - 1);
        }
        if (o >= 0) {
            merged = 1;
        }
        else {
            o = (Py_ssize_t)m++;
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
            node->excl = wrap_add(node->excl, wrap_sub(r->incl, sumc[i]));
        }
    }
    /* Kept: completed a call, or something kept below (parents precede children). */
    for (size_t o = m; o-- > 1;) {
        if (out[o].calls > 0) {
            out[o].keep = 1;
        }
        if (out[o].keep) {
            out[out[o].parent].keep = 1;
        }
    }
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
            int64_t *row = &rows[k * FLAT_COLS];
            index[o] = (Py_ssize_t)k++;
            row[FLAT_PARENT] = o == 0 ? -1 : index[node->parent];
            row[FLAT_FRAME] = node->frame;
            row[FLAT_CALLS] = node->calls;
            row[FLAT_INCL] = node->incl;
            row[FLAT_EXCL] = node->excl;
            row[FLAT_MIN] = node->min;
            row[FLAT_MAX] = node->max;
            row[FLAT_SIZE] = 1;
            if (node->parent == 0) {
                root_incl = wrap_add(root_incl, node->incl);
            }
        }
    }
    else {
        stack[top++] = 0;
    }
    while (top > 0) {
        Py_ssize_t o = stack[--top];
        Out *node = &out[o];
        int64_t *row = &rows[k * FLAT_COLS];
        index[o] = (Py_ssize_t)k++;
        row[FLAT_PARENT] = o == 0 ? -1 : index[node->parent];
        row[FLAT_FRAME] = node->frame;
        row[FLAT_CALLS] = node->calls;
        row[FLAT_INCL] = node->incl;
        row[FLAT_EXCL] = node->excl;
        row[FLAT_MIN] = node->min;
        row[FLAT_MAX] = node->max;
        row[FLAT_SIZE] = 1;
        if (node->parent == 0) {
            root_incl = wrap_add(root_incl, node->incl);
        }
        /* pushed last child first, so the first child comes out first */
        size_t mark = top;
        for (Py_ssize_t ch = node->first; ch >= 0; ch = out[ch].next) {
            if (out[ch].keep) {
                stack[top++] = ch;
            }
        }
        for (size_t a = mark, b = top; b > a + 1; a++, b--) {
            Py_ssize_t tmp = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = tmp;
        }
    }
    rows[FLAT_INCL] = root_incl;
    for (size_t j = k; j-- > 1;) {
        int64_t p = rows[j * FLAT_COLS + FLAT_PARENT];
        rows[p * FLAT_COLS + FLAT_SIZE] += rows[j * FLAT_COLS + FLAT_SIZE];
    }
    *out_rows = k;
done:
    PyMem_Free(sumc);
    PyMem_Free(index);
    PyMem_Free(hash);
    PyMem_Free(stack);
    PyMem_Free(out);
    return rows;
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
    if (intern_frames(copies, n, table, nfids, frame_of) < 0) {
        goto done;
    }
    threads = PyList_New(0);
    if (threads == NULL) {
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t m;
        int64_t *rows = flatten(&copies[i], table, nfids, &m);
        if (rows == NULL) {
            goto done;
        }
        if (m > 1) {
            PyObject *data = PyBytes_FromStringAndSize(
                (const char *)rows, (Py_ssize_t)(m * FLAT_COLS * sizeof(int64_t)));
            PyObject *pair = data == NULL ? NULL : PyTuple_Pack(2, copies[i].token, data);
            Py_XDECREF(data);
            if (pair == NULL || PyList_Append(threads, pair) < 0) {
                Py_XDECREF(pair);
                PyMem_Free(rows);
                goto done;
            }
            Py_DECREF(pair);
        }
        PyMem_Free(rows);
    }
    result = Py_BuildValue("(LO)", closed, threads);
done:
    Py_XDECREF(threads);
    PyMem_Free(fids);
    PyMem_Free(table);
    free_copies(copies, n);
    return result;
}
