/* Included by native.h only, after its types: what the exported rows' units share (flat.c,
 * frames.c, rowsjson.c, compensate.c), apart from native.h to keep each header to one concern. */

#ifndef PROFKIT_ELT_FLATROWS_H
#define PROFKIT_ELT_FLATROWS_H

/* -- flat.c, frames.c, rowsjson.c, compensate.c -------------------------------------- */

/* One thread's exported rows are stored column by column, not row by row, so that a row
 * takes 52 bytes, not 64 (pytest on sympy's test_arit: 1.2 million rows, 62 MB instead
 * of 77 MB; a 64-byte row outgrew the 48-byte node it was made from, and the rows were
 * the end of the run's peak memory). For ``n`` rows: five int64 columns of ``n`` values
 * each (FLAT_CALLS..FLAT_MAX), then three int32 ones (FLAT_PARENT, FLAT_FRAME, FLAT_SIZE:
 * row and frame indices, which flat.c keeps below 2**31). The int64 columns come first,
 * so every column is aligned when the buffer is. FLAT_SIZE is a row's subtree size. */
enum { FLAT_CALLS, FLAT_INCL, FLAT_EXCL, FLAT_MIN, FLAT_MAX, FLAT_WIDE_COLS };
enum { FLAT_PARENT, FLAT_FRAME, FLAT_SIZE, FLAT_NARROW_COLS };
#define FLAT_ROW_BYTES (FLAT_WIDE_COLS * sizeof(int64_t) + FLAT_NARROW_COLS * sizeof(int32_t))

/* The columns of ``n`` rows at ``buf`` (aligned to 8 bytes). */
typedef struct {
    int64_t *calls, *incl, *excl, *min, *max;
    int32_t *parent, *frame, *size;
    size_t n;
} FlatCols;

static inline FlatCols
flat_cols(void *buf, size_t n)
{
    int64_t *w = buf;
    int32_t *narrow = (int32_t *)(w + FLAT_WIDE_COLS * n);
    return (FlatCols){
        .calls = w + FLAT_CALLS * n, .incl = w + FLAT_INCL * n, .excl = w + FLAT_EXCL * n,
        .min = w + FLAT_MIN * n, .max = w + FLAT_MAX * n,
        .parent = narrow + FLAT_PARENT * n, .frame = narrow + FLAT_FRAME * n,
        .size = narrow + FLAT_SIZE * n, .n = n,
    };
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
     "frame_sums(frames, values, skip=None, parents=None, wanted=None) -> dict: a column "  \
     "of export_flat's rows summed by frame (see rowsums.c)."},                             \
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
