/* Included by native.h only, after its types: what the exported rows' units share (flat.c,
 * frames.c, rowsjson.c, compensate.c), apart from native.h to keep each header to one concern. */

#ifndef PROFKIT_ELT_FLATROWS_H
#define PROFKIT_ELT_FLATROWS_H

/* -- flat.c, frames.c, rowsjson.c, compensate.c -------------------------------------- */

/* Columns of one exported row (int64 each); FLAT_SIZE is the row's subtree size. */
enum { FLAT_PARENT, FLAT_FRAME, FLAT_CALLS, FLAT_INCL, FLAT_EXCL, FLAT_MIN, FLAT_MAX,
       FLAT_SIZE, FLAT_COLS };

/* One thread's call tree while export_flat turns it into rows: its own nodes (taken from
 * a stopped recorder's thread, or copied from a running one's), which nothing else can
 * reach, so Python code may run while it is held. */
typedef struct {
    PyObject *token;
    Node root;
    Chunk **chunks; /* creation order; all full but the last */
    size_t nchunks, used;
    WideTable wide; /* its wide nodes' numbers (by node number) */
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
