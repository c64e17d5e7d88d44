/* Included by native.h only, after its types: what the exported rows' units share (flat.c,
 * frames.c, rowsjson.c, compensate.c), apart from native.h to keep each header to one concern. */

#ifndef PROFKIT_ELT_FLATROWS_H
#define PROFKIT_ELT_FLATROWS_H

/* -- flat.c, frames.c, rowsjson.c, compensate.c -------------------------------------- */

/* One thread's exported rows are stored column by column, not row by row, so that a row
 * takes 40 bytes (pytest on sympy's test_arit: 1.2 million rows, 48 MB; they were 64,
 * then 52 bytes, and were the end of the run's peak memory, above the recorder's tree of
 * 40-byte nodes and 4-byte table slots they are made from). For ``n`` rows and ``k``
 * wide ones, after a header of two int64s (n, k): two int64 columns of ``n`` values each
 * (FLAT_INCL, FLAT_EXCL), then three uint32 ones (FLAT_CALLS, FLAT_MIN, FLAT_MAX: as in
 * a node, a row whose three do not all fit has ``calls == WIDE`` and its min and max
 * columns unused), then three int32 ones (FLAT_PARENT, FLAT_FRAME, FLAT_SIZE: row and
 * frame indices, which flat.c keeps below 2**31; FLAT_SIZE is a row's subtree size);
 * then the wide rows, four int64 columns of ``k`` values (FLAT_WROW, ascending, and the
 * row's calls, min, max). Every column is aligned when the buffer is (the header and the
 * 40 bytes a row keep 8-byte columns on 8 bytes). Wide rows are rare: a call of 4.29 s or
 * more, 2**32 - 1 calls or more. */
enum { FLAT_INCL, FLAT_EXCL, FLAT_WIDE_COLS };
enum { FLAT_CALLS, FLAT_MIN, FLAT_MAX, FLAT_STAT_COLS };
enum { FLAT_PARENT, FLAT_FRAME, FLAT_SIZE, FLAT_NARROW_COLS };
enum { FLAT_WROW, FLAT_WCALLS, FLAT_WMIN, FLAT_WMAX, FLAT_WENTRY_COLS };
#define FLAT_HEADER_BYTES (2 * sizeof(int64_t))
#define FLAT_ROW_BYTES                                                                  \
    (FLAT_WIDE_COLS * sizeof(int64_t)                                                   \
     + (FLAT_STAT_COLS + FLAT_NARROW_COLS) * sizeof(int32_t))
#define FLAT_WENTRY_BYTES (FLAT_WENTRY_COLS * sizeof(int64_t))

_Static_assert(FLAT_ROW_BYTES % sizeof(int64_t) == 0, "the wide rows' columns stay aligned");

/* The columns of ``n`` rows and ``k`` wide ones at ``buf`` (aligned to 8 bytes). */
typedef struct {
    int64_t *incl, *excl;
    uint32_t *calls, *min, *max;
    int32_t *parent, *frame, *size;
    int64_t *wrow, *wcalls, *wmin, *wmax;
    size_t n, k;
} FlatCols;

/* Bytes of ``n`` rows with ``k`` wide ones. */
static inline size_t
flat_bytes(size_t n, size_t k)
{
    return FLAT_HEADER_BYTES + n * FLAT_ROW_BYTES + k * FLAT_WENTRY_BYTES;
}

/* The columns of the rows in ``buf`` (``len`` bytes), the header read (written first when
 * ``n`` and ``k`` are given: flat.c's new rows); -1 when ``buf`` is not such rows (the
 * header and the length disagree, or it is not aligned), with no exception set. */
static inline int
flat_cols(void *buf, size_t len, FlatCols *c, const size_t *nk)
{
    int64_t *head = buf;
    if ((uintptr_t)buf % sizeof(int64_t) != 0 || len < FLAT_HEADER_BYTES) {
        return -1;
    }
    if (nk != NULL) {
        head[0] = (int64_t)nk[0];
        head[1] = (int64_t)nk[1];
    }
    if (head[0] < 0 || head[1] < 0 || (uint64_t)head[0] > len / FLAT_ROW_BYTES
        || (uint64_t)head[1] > len / FLAT_WENTRY_BYTES
        || flat_bytes((size_t)head[0], (size_t)head[1]) != len) {
        return -1;
    }
    size_t n = (size_t)head[0], k = (size_t)head[1];
    int64_t *w = head + 2;
    uint32_t *stats = (uint32_t *)(w + FLAT_WIDE_COLS * n);
    int32_t *narrow = (int32_t *)(stats + FLAT_STAT_COLS * n);
    int64_t *wide = (int64_t *)(narrow + FLAT_NARROW_COLS * n);
    *c = (FlatCols){
        .incl = w + FLAT_INCL * n, .excl = w + FLAT_EXCL * n,
        .calls = stats + FLAT_CALLS * n, .min = stats + FLAT_MIN * n, .max = stats + FLAT_MAX * n,
        .parent = narrow + FLAT_PARENT * n, .frame = narrow + FLAT_FRAME * n,
        .size = narrow + FLAT_SIZE * n,
        .wrow = wide + FLAT_WROW * k, .wcalls = wide + FLAT_WCALLS * k,
        .wmin = wide + FLAT_WMIN * k, .wmax = wide + FLAT_WMAX * k, .n = n, .k = k,
    };
    return 0;
}

/* The wide entry of row ``at`` (whose calls are WIDE), by bisection; k when it has none
 * (rows not made by flat.c or flat.py's pack). */
static inline size_t
flat_wide_at(const FlatCols *c, size_t at)
{
    size_t lo = 0, hi = c->k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->wrow[mid] < (int64_t)at) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo < c->k && c->wrow[lo] == (int64_t)at ? lo : c->k;
}

/* Row ``at``'s calls, min and max as int64 (a wide row without its entry: zeros). */
static inline Stats
flat_stats(const FlatCols *c, size_t at)
{
    if (c->calls[at] != WIDE) {
        return (Stats){c->calls[at], c->min[at], c->max[at]};
    }
    size_t e = flat_wide_at(c, at);
    return e < c->k ? (Stats){c->wcalls[e], c->wmin[e], c->wmax[e]} : (Stats){0, 0, 0};
}

/* One thread's call tree while export_flat turns it into rows: its own nodes (taken from
 * a stopped recorder's thread, or copied from a running one's), which nothing else can
 * reach, so Python code may run while it is held. */
typedef struct {
    PyObject *token;
    Node root;
    Chunk **chunks; /* creation order; all full but the last */
    size_t nchunks, used;
    WideTable wide; /* its wide nodes' numbers (by node number) */
    FidTable fids;  /* its nodes' functions (by a node's fn, until merge_children) */
    int64_t root_incl; /* the root's inclusive time (flat.c: its kept children's) */
    /* Children lists by node number (0: the root), in creation order: nodes keep none
     * (native.h), so flat.c links them once the node table is freed (see its comments);
     * NULL until then, and again once the rows need them no more. */
    uint32_t *first_child, *next_sibling;
} Tree;

/* The node in slot ``g`` (creation order, number g + 1) of a tree's chunks. */
static inline Node *
tree_slot(const Tree *tree, size_t g)
{
    return &tree->chunks[g / CHUNK_NODES]->nodes[g % CHUNK_NODES];
}

/* The function of a tree's node (before merge_children makes ``fn`` its frame). */
static inline uintptr_t
tree_fid(const Tree *tree, const Node *n)
{
    return fid_of(&tree->fids, n);
}

/* A tree's node by number (0: its root). */
static inline Node *
tree_node(const Tree *tree, uint32_t number)
{
    return number == 0 ? (Node *)&tree->root : numbered_node(tree->chunks, number);
}

/* A function and its frame index in the saved file (-1: not asked yet). */
typedef struct {
    uintptr_t fid;
    int64_t frame;
} FidFrame;

ELT_HIDDEN PyObject *Recorder_export_flat(Recorder *self, PyObject *const *args, Py_ssize_t nargs);
ELT_HIDDEN PyObject *native_rows_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
ELT_HIDDEN PyObject *native_compensate_rows(PyObject *module, PyObject *const *args,
                                            Py_ssize_t nargs);
/* rowsums.c: per-frame sums over a column, the frame column renumbered. */
ELT_HIDDEN PyObject *native_frame_sums(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
ELT_HIDDEN PyObject *native_renumber_frames(PyObject *module, PyObject *const *args,
                                            Py_ssize_t nargs);
/* The module's functions over the rows (module.c's table), listed beside their units. */
#define FLAT_ROWS_FUNCTIONS                                                                     \
    {"compensate_rows", (PyCFunction)(void (*)(void))native_compensate_rows, METH_FASTCALL,     \
     "compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller):\n"       \
     "compensate.py's rule, in place on Recorder.export_flat's rows (see compensate.c)."},      \
    {"rows_json", (PyCFunction)(void (*)(void))native_rows_json, METH_FASTCALL,             \
     "rows_json(rows, start=0, stop=None) -> bytes: export_flat's rows as saved nodes."},   \
    {"frame_sums", (PyCFunction)(void (*)(void))native_frame_sums, METH_FASTCALL,           \
     "frame_sums(frames, values, skip=None, parents=None, wanted=None, under_root=None) "  \
     "-> dict: a column of export_flat's rows summed by frame (see rowsums.c)."},           \
    {"renumber_frames", (PyCFunction)(void (*)(void))native_renumber_frames, METH_FASTCALL, \
     "renumber_frames(frames, table): the rows' frame column renumbered in place."}
/* The distinct fids of every tree, sorted, each with frame -1; NULL with MemoryError set. */
ELT_HIDDEN FidFrame *fid_table(const Tree *trees, size_t n, size_t *out);
/* Fill table[].frame from frame_of(fid) (runs Python code); -1 with an exception set. */
ELT_HIDDEN int intern_frames(const Tree *trees, size_t n, FidFrame *table, size_t nfids,
                             PyObject *frame_of);

/* The entry of ``fid`` in the sorted table (inline: flatten looks up every node). */
static inline const FidFrame *
frame_for(const FidFrame *table, size_t n, uintptr_t fid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table[mid].fid < fid) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return &table[lo < n ? lo : n - 1]; /* every fid of the trees is in the table */
}

#endif
