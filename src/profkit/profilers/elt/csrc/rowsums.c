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

/* The highest frame of rows 1.. (row 0 is the root), -1 for none; -2 (ValueError) when a
 * frame is below 0. */
static int32_t
most_frame(const int32_t *frames, Py_ssize_t n)
{
    int32_t most = -1;
    for (Py_ssize_t r = 1; r < n; r++) {
        if (frames[r] < 0) {
            PyErr_SetString(PyExc_ValueError, "frame_sums: a frame below 0");
            return -2;
        }
        most = frames[r] > most ? frames[r] : most;
    }
    return most;
}

/* Per-frame sums in first-seen order: sums[f], seen[f] (a byte), order[0..count). */
typedef struct {
    int64_t *sums;
    char *seen;
    int32_t *order;
    Py_ssize_t count;
} FrameSums;

static int
frames_init(FrameSums *s, int32_t most)
{
    size_t slots = (size_t)most + 2; /* never 0 bytes: PyMem may answer NULL to those */
    s->sums = PyMem_Calloc(slots, sizeof(int64_t));
    s->seen = PyMem_Calloc(slots, 1);
    s->order = PyMem_Malloc(slots * sizeof(int32_t));
    s->count = 0;
    if (s->sums == NULL || s->seen == NULL || s->order == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
frames_free(FrameSums *s)
{
    PyMem_Free(s->sums);
    PyMem_Free(s->seen);
    PyMem_Free(s->order);
}

/* sums[f] += value, f noted when first seen; -1 (OverflowError) past int64. */
static int
frames_add(FrameSums *s, int32_t f, int64_t value)
{
    if (!s->seen[f]) {
        s->seen[f] = 1;
        s->order[s->count++] = f;
    }
    if (__builtin_add_overflow(s->sums[f], value, &s->sums[f])) {
        PyErr_SetString(PyExc_OverflowError, "frame_sums: a sum past int64");
        return -1;
    }
    return 0;
}

/* Sums of values[row] by frames[row] over rows 1.., leaving out the rows in ``skip``
 * (a list, ascending; NULL for none). */
static int
plain_sums(FrameSums *s, const int32_t *frames, const int64_t *values, Py_ssize_t n,
           PyObject *skip)
{
    Py_ssize_t next_skip = 0, nskip = skip != NULL ? PyList_GET_SIZE(skip) : 0;
    Py_ssize_t skip_at = -1; /* the next row to leave out (-1: none) */
    for (Py_ssize_t r = 1; r < n; r++) {
        while (skip_at < r && next_skip < nskip) {
            skip_at = PyLong_AsSsize_t(PyList_GET_ITEM(skip, next_skip++));
            if (skip_at == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        if (skip_at != r && frames_add(s, frames[r], values[r]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The path from the root to the row last read: why a stack, not an array a row. The
 * subtree totals took an int64 a row and the hot spots an int32 a row (sympy's test_arit:
 * 1.2 M rows, ~15 MB, the end of the run's peak; issue #26); in pre-order a row's parent
 * is on the path to the row before it, so a depth-sized stack holds all that is open. */
typedef struct {
    int32_t row, owner; /* owner: the row's nearest shown frame (the hot spots') */
    int64_t total;      /* the row's value plus its closed descendants' (subtree totals) */
} Level;

typedef struct {
    Level *at;
    size_t depth, room;
} Path;

static int
path_push(Path *path, Level level)
{
    if (path->depth == path->room) {
        size_t room = path->room ? 2 * path->room : 64;
        Level *at = PyMem_Realloc(path->at, room * sizeof(Level));
        if (at == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        path->at = at, path->room = room;
    }
    path->at[path->depth++] = level;
    return 0;
}

/* Row r's parent checked (before r, and on the path once ``pops`` levels are closed:
 * pre-order); -1 with ValueError when it is not. */
static int
parent_on_path(const Path *path, const int32_t *parents, Py_ssize_t r, size_t *pops)
{
    int32_t p = parents[r];
    if (p < 0 || p >= r) {
        PyErr_SetString(PyExc_ValueError, "frame_sums: a parent not before its row");
        return -1;
    }
    size_t depth = path->depth;
    while (depth > 0 && path->at[depth - 1].row != p) {
        depth--;
    }
    if (depth == 0) {
        PyErr_SetString(PyExc_ValueError, "frame_sums: rows not in pre-order");
        return -1;
    }
    *pops = path->depth - depth;
    return 0;
}

/* The top level closed: its total added to its parent's, and to its frame's sum when
 * that is wanted (the root's never is). */
static int
close_level(Path *path, FrameSums *s, const int32_t *frames, const char *wanted,
            Py_ssize_t nwanted)
{
    Level done = path->at[--path->depth];
    if (path->depth > 0) {
        int64_t *up = &path->at[path->depth - 1].total;
        if (__builtin_add_overflow(*up, done.total, up)) {
            PyErr_SetString(PyExc_OverflowError, "frame_sums: a sum past int64");
            return -1;
        }
        int32_t f = frames[done.row];
        if (f < nwanted && wanted[f]) {
            return frames_add(s, f, done.total);
        }
    }
    return 0;
}

/* Sums of the rows' subtree totals (a row's value plus its descendants') over the rows
 * whose frame is wanted, keys in the order a scan from the last row first meets them
 * (the reverse pass this replaces gave them so). */
static int
subtree_sums(FrameSums *s, const int32_t *frames, const int64_t *values, Py_ssize_t n,
             const int32_t *parents, const char *wanted, Py_ssize_t nwanted)
{
    Path path = {0};
    int ok = path_push(&path, (Level){0, -1, values[0]}) == 0;
    for (Py_ssize_t r = 1; ok && r < n; r++) {
        size_t pops;
        ok = parent_on_path(&path, parents, r, &pops) == 0;
        while (ok && pops-- > 0) {
            ok = close_level(&path, s, frames, wanted, nwanted) == 0;
        }
        ok = ok && path_push(&path, (Level){(int32_t)r, -1, values[r]}) == 0;
    }
    while (ok && path.depth > 0) {
        ok = close_level(&path, s, frames, wanted, nwanted) == 0;
    }
    PyMem_Free(path.at);
    s->count = 0;
    for (Py_ssize_t r = n - 1; ok && r > 0; r--) {
        int32_t f = frames[r];
        if (f < nwanted && wanted[f] && s->seen[f] == 1) {
            s->seen[f] = 2;
            s->order[s->count++] = f;
        }
    }
    return ok ? 0 : -1;
}

/* report/shown.py's hot spots (its _self_times_each): each row's self time to its nearest
 * shown frame, a row being shown unless its frame is flagged in ``under_root`` (when its
 * nearest shown caller is the root) or ``anywhere`` (else); the root's share to none. */
static int
owner_sums(FrameSums *s, const int32_t *frames, const int64_t *values, Py_ssize_t n,
           const int32_t *parents, const Py_buffer *anywhere, const Py_buffer *under_root)
{
    Path path = {0};
    int ok = path_push(&path, (Level){0, -1, 0}) == 0;
    for (Py_ssize_t r = 1; ok && r < n; r++) {
        size_t pops;
        ok = parent_on_path(&path, parents, r, &pops) == 0;
        if (!ok) {
            break;
        }
        path.depth -= pops;
        int32_t owner = path.at[path.depth - 1].owner, f = frames[r];
        const Py_buffer *drop = owner == -1 ? under_root : anywhere;
        if (!(f < drop->len && ((const char *)drop->buf)[f])) {
            owner = f;
        }
        ok = path_push(&path, (Level){(int32_t)r, owner, 0}) == 0
             && (owner == -1 || frames_add(s, owner, values[r]) == 0);
    }
    PyMem_Free(path.at);
    return ok ? 0 : -1;
}

/* One of the passes above over the columns; the dict of sums, or NULL with an error. */
static PyObject *
frame_sums(const int32_t *frames, const int64_t *values, Py_ssize_t n, PyObject *skip,
           const int32_t *parents, const Py_buffer *wanted, const Py_buffer *under_root)
{
    int32_t most = most_frame(frames, n);
    FrameSums s = {0};
    PyObject *out = NULL;
    if (most >= -1 && frames_init(&s, most) == 0) {
        int done = parents == NULL ? plain_sums(&s, frames, values, n, skip)
                   : under_root == NULL
                       ? subtree_sums(&s, frames, values, n, parents, wanted->buf, wanted->len)
                       : owner_sums(&s, frames, values, n, parents, wanted, under_root);
        out = done == 0 ? sums_dict(s.order, s.count, s.sums) : NULL;
    }
    frames_free(&s);
    return out;
}

/* frame_sums(frames, values, skip=None, parents=None, wanted=None, under_root=None): the
 * plain sums (skip), the subtree totals (parents, wanted) or, with under_root too, the
 * hot spots (``wanted`` then the frames dropped anywhere); see above. */
ELT_HIDDEN PyObject *
native_frame_sums(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 2 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "frame_sums(frames, values, skip=None, parents=None, "
                                         "wanted=None, under_root=None)");
        return NULL;
    }
    PyObject *skip = nargs > 2 && args[2] != Py_None ? args[2] : NULL;
    int subtree = nargs > 3 && args[3] != Py_None;
    int owners = subtree && nargs > 5 && args[5] != Py_None;
    if ((skip != NULL && !PyList_Check(skip)) || (subtree && (nargs < 5 || args[4] == Py_None))) {
        PyErr_SetString(PyExc_TypeError, "frame_sums: skip is a list; parents need wanted");
        return NULL;
    }
    Py_buffer fv, vv, pv = {0}, wv = {0}, uv = {0};
    Py_ssize_t n, nv, np = 0;
    PyObject *out = NULL;
    if (column_of(args[0], &fv, 4, 0, &n) < 0) {
        return NULL;
    }
    if (column_of(args[1], &vv, 8, 0, &nv) < 0) {
        PyBuffer_Release(&fv);
        return NULL;
    }
    int held = 0; /* buffers taken of parents, wanted, under_root */
    held += subtree && column_of(args[3], &pv, 4, 0, &np) == 0;
    held += held == 1 && PyObject_GetBuffer(args[4], &wv, PyBUF_SIMPLE) == 0;
    held += held == 2 && owners && PyObject_GetBuffer(args[5], &uv, PyBUF_SIMPLE) == 0;
    if (held == subtree * (2 + owners)) {
        if (nv != n || (subtree && np != n)) {
            PyErr_SetString(PyExc_ValueError, "frame_sums: columns of different lengths");
        }
        else {
            out = frame_sums(fv.buf, vv.buf, n, skip, subtree ? pv.buf : NULL, &wv,
                             owners ? &uv : NULL);
        }
    }
    Py_buffer *taken[] = {&pv, &wv, &uv};
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(taken[k]);
    }
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
