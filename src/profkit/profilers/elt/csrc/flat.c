/* profkit.profilers.elt._native: the end-of-run export in the saved file's own layout.
 *
 * Why: at the end of a long run the call tree has as many nodes as the program had
 * distinct call paths (sympy: ~90,000; pytest on sympy's test_arit: ~1.2 million), and
 * turning each into Python objects (a tuple, a capture Node, a CallNode) and back into
 * JSON rows cost more than the run itself. Here the tree is exported once, in C, as what
 * calltree/file.py stores: pre-order rows (parent, frame, calls, inclusive, exclusive,
 * min, max) with frames already interned, empty branches pruned and self times derived
 * (tree.py's ``convert`` rules), plus each row's subtree size, so Python can build nodes
 * lazily (elt/flat.py) and the saver can write the rows as JSON text without a Python
 * object per node (rows_json).
 *
 * Memory (issue #11: the export was the run's peak, three times cProfile's on that
 * pytest run): the export works in the tree's own nodes. A stopped recorder's trees are
 * taken, not copied (a running one's are copied as nodes first); its node table is freed
 * at once; merging, pruning and self times are done in place (fields the recording
 * needed become the export's, see Node in native.h); the kept nodes are numbered and
 * moved into pre-order in their own chunks, and written out chunk by chunk as rows into
 * the result, each chunk freed (its pages given back at once, arena.c) behind the copy.
 * Nodes keep no children lists (recording never walks them): the export links them in
 * two side arrays of node numbers (8 bytes a node), made after the node table (4 bytes
 * a slot, at least 5.3 a node) is freed and freed before the rows are made, so the
 * tree's part of the export's peak is what the recording's was. Peak: the larger of the
 * tree (32 bytes a node, 40 with its links) and its rows (40 bytes a row, stored column
 * by column: flatrows.h), plus a few MB, not the tree plus its rows. frames.c asks for
 * the frames, export.c closes the open calls, rowsjson.c writes the rows as JSON.
 */
#include "native.h"


/* Row indices are 32-bit in the nodes' link fields and in the rows' int32 columns;
 * flatten refuses a thread of 2**31 nodes or more (the recorder stops numbering nodes
 * below that: NUMBER_CAP), and a frame index past IDX_MAX. */
#define IDX_MAX INT32_MAX

/* A node's fields as the export reuses them (see Node in native.h): from prepare_tree on,
 * ``parent`` is the kept subtree size (0: pruned). From number_rows on, the tree's
 * ``first_child`` array holds each node's row index (ROW) instead; the parent's row is
 * not kept: in pre-order, the sizes give it (flatten). */
#define KEPT(n) ((n)->parent)

/* -- the export's own trees --------------------------------------------------------- */

static void
free_links(Tree *tree)
{
    PyMem_Free(tree->first_child);
    PyMem_Free(tree->next_sibling);
    tree->first_child = tree->next_sibling = NULL;
}

/* Free what is left of a tree's nodes. */
static void
free_nodes(Tree *tree)
{
    for (size_t c = 0; c < tree->nchunks; c++) {
        chunk_free(tree->chunks[c]);
    }
    PyMem_Free(tree->chunks);
    tree->chunks = NULL;
    tree->nchunks = tree->used = 0;
    wide_free(&tree->wide);
    fids_free(&tree->fids);
    free_links(tree);
}

/* A stopped recorder's thread gives its tree to the export: its chunks, root and wide
 * table move into ``tree`` (no node is copied) and the node table and names, which only
 * recording needs, are freed. The thread is left empty, as a new one. -1 with
 * MemoryError set. */
static int
take_tree(Thread *t, Tree *tree)
{
    Slot *table = big_alloc(64 * sizeof(Slot));
    FidTable fids;
    if (table == NULL || fids_init(&fids) < 0) {
        big_free(table, 64 * sizeof(Slot));
        PyErr_NoMemory();
        return -1;
    }
    tree->chunks = t->numbered; /* already in creation order */
    tree->nchunks = (t->used + CHUNK_NODES - 1) / CHUNK_NODES;
    t->numbered = NULL;
    t->numbered_cap = 0;
    tree->used = t->used;
    tree->root = t->root;
    tree->wide = t->wide;
    t->wide = (WideTable){NULL, 0, 0};
    tree->fids = t->fids; /* the thread's functions, its new nodes' from index 1 again */
    t->fids = fids;
    names_free(&t->names); /* strs: no Python code runs */
    t->used = 0; /* numbered[] is made anew from number 0 */
    memset(&t->root, 0, sizeof(Node));
    t->root.min = MIN_NONE;
    big_free(t->table, (t->mask + 1) * sizeof(Slot));
    t->table = table;
    t->mask = 63;
    return 0;
}

/* A running recorder's thread: its nodes copied chunk by chunk (same numbers, so the
 * links hold) with its wide table, for the export to work on while recording goes on;
 * names are not copied. Plain C. -1 with MemoryError set (``tree`` then holds what was
 * copied, for free_nodes). */
static int
copy_tree(const Thread *t, Tree *tree)
{
    size_t nchunks = (t->used + CHUNK_NODES - 1) / CHUNK_NODES;
    tree->chunks = PyMem_Calloc(nchunks ? nchunks : 1, sizeof(Chunk *));
    if (tree->chunks == NULL || wide_copy(&tree->wide, &t->wide) < 0
        || fids_copy(&tree->fids, &t->fids) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    tree->root = t->root;
    for (size_t c = 0; c < nchunks; c++) {
        Chunk *to = chunk_alloc();
        if (to == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        size_t count = c + 1 < nchunks ? CHUNK_NODES : t->used - c * CHUNK_NODES;
        memcpy(to->nodes, t->numbered[c]->nodes, count * sizeof(Node));
        tree->chunks[tree->nchunks++] = to;
        tree->used += count;
    }
    return 0;
}

/* A node's numbers as convert() starts a node from it (only completed calls count; an
 * unfinished node's min is 0), and no kept size yet (``parent``'s place: the export never
 * needs the parent once the children are linked, nor the recording's NAMED mark). A node
 * left wide has completed calls (a node without any is made narrow: zeros fit). */
static int
own_numbers(Tree *tree, Node *n, uint32_t number, int root)
{
    if (n->parent & CARRIED) { /* a total past 32 bits: the node goes wide, kept whole */
        int64_t incl = node_incl(&tree->wide, n, number);
        n->parent &= ~CARRIED;
        if (node_set_stats(&tree->wide, n, number, node_stats(&tree->wide, n, number), incl)
            < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    KEPT(n) = 0;
    WideEntry *e = n->calls == WIDE ? wide_find(&tree->wide, number) : NULL;
    if (root || n->calls == 0 || (e != NULL && e->calls <= 0)) {
        n->calls = n->min = n->max = n->incl = 0;
        return 0;
    }
    if (e != NULL) {
        if (e->min == NO_MIN) {
            e->min = 0;
        }
        if (e->max < 0) {
            e->max = 0;
        }
    }
    return 0;
}

/* One pass over the nodes in reverse creation order (a child's number is always above
 * its parent's, so a node comes after all its children): each is prepended to its
 * parent's list, which so comes out in creation order, the order the rows keep; its
 * recorded ``incl`` is taken from the parent's self time, which ``excl`` counts down
 * from the parent's ``incl`` (the first child met starts it), in the place of the
 * recording's hit links; and, its children all met, its own self time is final: never
 * below 0, as building.merge_rows has it (children longer than their caller: only a clock
 * that went back can do that), and 0 without a completed call and at the root, as
 * convert() leaves them. -1 with MemoryError set. */
static int
prepare_tree(Tree *tree)
{
    size_t count = tree->used + 1;
    uint32_t *first = PyMem_Calloc(count, sizeof(uint32_t));
    uint32_t *next = PyMem_Calloc(count, sizeof(uint32_t));
    tree->first_child = first;
    tree->next_sibling = next;
    if (first == NULL || next == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t g = tree->used; g-- > 0;) {
        uint32_t number = (uint32_t)(g + 1);
        Node *n = tree_slot(tree, g);
        int64_t incl = node_incl(&tree->wide, n, number);
        int64_t excl = first[number] == 0 ? incl : n->excl;
        n->excl = n->calls != 0 && excl > 0 ? excl : 0;
        uint32_t p = n->parent & NUMBER_MASK;
        Node *up = tree_node(tree, p);
        up->excl = wrap_sub(first[p] == 0 ? node_incl(&tree->wide, up, p) : up->excl, incl);
        next[number] = first[p];
        first[p] = number;
        if (own_numbers(tree, n, number, 0) < 0) {
            return -1;
        }
    }
    tree->root.excl = 0;
    return own_numbers(tree, &tree->root, 0, 1);
}

/* -- merge, prune, number ------------------------------------------------------------ */

/* A growable stack of (node number, value) pairs; number 0 is the root. */
typedef struct {
    uint32_t number;
    int64_t value;
} Item;

typedef struct {
    Item *items;
    size_t top, cap;
} Stack;

static int
push(Stack *s, uint32_t number, int64_t value)
{
    if (s->top == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        Item *items = PyMem_Realloc(s->items, cap * sizeof(Item));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->items = items;
        s->cap = cap;
    }
    s->items[s->top].number = number;
    s->items[s->top++].value = value;
    return 0;
}

/* Siblings by frame (their node numbers), while one node's children are merged; a
 * stamp per use instead of clearing. */
typedef struct {
    uint32_t *node;
    uint32_t *stamp;
    size_t mask;
    uint32_t now;
} Siblings;

static int
siblings_ready(Siblings *h, size_t count)
{
    size_t want = 16;
    while (want < 2 * count) {
        want *= 2;
    }
    if (want > h->mask + 1 || h->node == NULL) {
        PyMem_Free(h->node);
        PyMem_Free(h->stamp);
        h->node = PyMem_Malloc(want * sizeof(uint32_t));
        h->stamp = PyMem_Calloc(want, sizeof(uint32_t));
        if (h->node == NULL || h->stamp == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        h->mask = want - 1;
        h->now = 0;
    }
    if (++h->now == 0) { /* wrapped: every stamp is stale again */
        memset(h->stamp, 0, (h->mask + 1) * sizeof(uint32_t));
        h->now = 1;
    }
    return 0;
}

/* Fold node ``d`` (a later sibling with the same frame) into node ``a``, as convert()
 * adds a second function of one frame into the first: its completed calls and times,
 * and its children after a's (merged in turn when a's own children are). -1 with
 * MemoryError set (a's sums no longer fit in 32 bits and the wide table cannot grow). */
static int
fold(Tree *tree, uint32_t anum, uint32_t dnum)
{
    Node *a = tree_node(tree, anum), *d = tree_node(tree, dnum);
    a->excl = wrap_add(a->excl, d->excl);
    if (d->calls != 0) {
        Stats sa = node_stats(&tree->wide, a, anum), sd = node_stats(&tree->wide, d, dnum);
        if (sa.calls == 0 || sd.min < sa.min) {
            sa.min = sd.min;
        }
        if (sd.max > sa.max) {
            sa.max = sd.max;
        }
        sa.calls = wrap_add(sa.calls, sd.calls);
        int64_t incl =
            wrap_add(tree_incl(&tree->wide, a, anum), tree_incl(&tree->wide, d, dnum));
        if (node_set_stats(&tree->wide, a, anum, sa, incl) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (tree->first_child[dnum] != 0) {
        uint32_t *tail = &tree->first_child[anum];
        while (*tail != 0) {
            tail = &tree->next_sibling[*tail];
        }
        *tail = tree->first_child[dnum];
        tree->first_child[dnum] = 0;
    }
    return 0;
}

/* Give each child of node ``parent`` its frame and fold children sharing a frame into
 * the first (folds add to the children's lists, never to the parent's). Children that
 * came from folds are still functions here: each node is here exactly once, as its
 * parent's child. */
static int
merge_children(Tree *tree, uint32_t parent, Siblings *h, const FidFrame *table, size_t nframes)
{
    size_t count = 0;
    for (uint32_t ch = tree->first_child[parent]; ch != 0; ch = tree->next_sibling[ch]) {
        count++;
    }
    if (count == 0) {
        return 0;
    }
    if (siblings_ready(h, count) < 0) {
        return -1;
    }
    uint32_t *link = &tree->first_child[parent];
    while (*link != 0) {
        uint32_t number = *link;
        Node *ch = tree_node(tree, number);
        int64_t frame = frame_for(table, nframes, tree_fid(tree, ch))->frame;
        if (frame > IDX_MAX) { /* the rows' frame column is int32 */
            PyErr_SetString(PyExc_ValueError, "export_flat: a frame index past 2**31 - 1");
            return -1;
        }
        ch->fn = (uint32_t)frame;
        uint64_t hv = (uint64_t)frame * 0xC2B2AE3D27D4EB4FULL;
        size_t s = (size_t)(hv ^ (hv >> 29)) & h->mask;
        while (h->stamp[s] == h->now && (int64_t)tree_node(tree, h->node[s])->fn != frame) {
            s = (s + 1) & h->mask;
        }
        if (h->stamp[s] == h->now) {
            if (fold(tree, h->node[s], number) < 0) {
                return -1;
            }
            *link = tree->next_sibling[number]; /* ch is gone: its kept size stays 0 */
            continue;
        }
        h->stamp[s] = h->now;
        h->node[s] = number;
        link = &tree->next_sibling[number];
    }
    return 0;
}

/* Merge (pre-order), then prune and size (post-order): a node is kept when it completed
 * a call or something below it is kept; KEPT = kept nodes in its subtree. Returns the
 * number of rows (the root's size), -1 with an exception set. */
static int64_t
merge_and_size(Tree *tree, Stack *stack, Siblings *h, const FidFrame *table, size_t nframes)
{
    stack->top = 0;
    if (push(stack, 0, 0) < 0) {
        return -1;
    }
    int64_t root_incl = 0, rows = 0;
    while (stack->top > 0) {
        Item *top = &stack->items[stack->top - 1];
        uint32_t number = top->number;
        Node *n = tree_node(tree, number);
        if (top->value == 0) { /* first visit: merge its children, then go below */
            top->value = 1;
            if (merge_children(tree, number, h, table, nframes) < 0) {
                return -1;
            }
            for (uint32_t ch = tree->first_child[number]; ch != 0; ch = tree->next_sibling[ch]) {
                if (push(stack, ch, 0) < 0) {
                    return -1;
                }
            }
            continue;
        }
        stack->top--;
        int64_t below = 0;
        for (uint32_t ch = tree->first_child[number]; ch != 0; ch = tree->next_sibling[ch]) {
            const Node *c = tree_node(tree, ch);
            below += KEPT(c);
            if (n == &tree->root && KEPT(c) > 0) {
                root_incl = wrap_add(root_incl, tree_incl(&tree->wide, c, ch));
            }
        }
        if (n == &tree->root) {
            tree->root_incl = root_incl;
            rows = below + 1;
        }
        else if (n->calls != 0 || below > 0) {
            KEPT(n) = (uint32_t)(below + 1);
        }
    }
    return rows;
}

/* Number the kept nodes in pre-order (children in creation order): each gets its row
 * index, ROW, in the tree's ``first_child`` array (which its walk has read by then: the
 * children lists are read no more); a wide node's numbers move to ``rows_wide``, keyed by
 * row index (the nodes move next). The root is row 0 (written to ``root_incl``: its
 * inclusive time); no chunk holds it. -1 with an exception set. */
static int
number_rows(Tree *tree, Stack *stack, WideTable *rows_wide, int64_t *root_incl)
{
    stack->top = 0;
    int64_t next = 0;
    if (push(stack, 0, -1) < 0) {
        return -1;
    }
    while (stack->top > 0) {
        Item item = stack->items[--stack->top];
        Node *n = tree_node(tree, item.number);
        int64_t k = next++;
        size_t mark = stack->top;
        for (uint32_t ch = tree->first_child[item.number]; ch != 0; ch = tree->next_sibling[ch]) {
            if (KEPT(tree_node(tree, ch)) > 0 && push(stack, ch, k) < 0) {
                return -1;
            }
        }
        /* pushed first child first: reversed, so the first child comes out first */
        for (size_t a = mark, b = stack->top; b > a + 1; a++, b--) {
            Item tmp = stack->items[a];
            stack->items[a] = stack->items[b - 1];
            stack->items[b - 1] = tmp;
        }
        if (item.number == 0) {
            *root_incl = tree->root_incl;
            continue;
        }
        tree->first_child[item.number] = (uint32_t)k; /* ROW */
        if (n->calls == WIDE) {
            const WideEntry *e = wide_find(&tree->wide, item.number);
            WideEntry *r = wide_get(rows_wide, (uint32_t)k);
            if (r == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            r->calls = e->calls;
            r->min = e->min;
            r->max = e->max;
            r->incl = e->incl;
        }
    }
    return 0;
}

/* Move each kept node to slot ROW-1, so the chunks hold rows 1.. in order: every swap
 * puts one node in its place, and its ROW with it. Slots of nodes not kept (KEPT 0) are
 * free. */
static void
into_preorder(Tree *tree)
{
    uint32_t *row = tree->first_child; /* by slot + 1 */
    Node tmp;
    for (size_t g = 0; g < tree->used; g++) {
        Node *here = tree_slot(tree, g);
        while (KEPT(here) > 0 && (size_t)row[g + 1] - 1 != g) {
            size_t to = (size_t)row[g + 1] - 1;
            Node *there = tree_slot(tree, to);
            tmp = *there;
            *there = *here;
            *here = tmp;
            uint32_t r = row[to + 1];
            row[to + 1] = row[g + 1];
            row[g + 1] = r;
        }
    }
}

/* Row ``at``'s columns from its node (in pre-order by now), under row ``parent``; a wide
 * node's numbers go to the next wide row's entry (rows come in order: the entries are
 * ascending). */
static inline void
write_row(const FlatCols *c, size_t at, const Node *n, uint32_t parent,
          const WideTable *rows_wide, size_t *wide_next)
{
    c->parent[at] = (int32_t)parent;
    c->frame[at] = (int32_t)n->fn; /* below 2**31: merge_children checked */
    c->size[at] = (int32_t)KEPT(n);
    c->incl[at] = n->incl;
    c->excl[at] = n->excl;
    c->calls[at] = n->calls;
    c->min[at] = n->min;
    c->max[at] = n->max;
    if (n->calls == WIDE) {
        const WideEntry *e = wide_find(rows_wide, (uint32_t)at);
        size_t w = (*wide_next)++;
        c->min[at] = c->max[at] = 0;
        c->incl[at] = e->incl;
        c->wrow[w] = (int64_t)at;
        c->wcalls[w] = e->calls;
        c->wmin[w] = e->min;
        c->wmax[w] = e->max;
    }
}

/* One thread's rows as a ``bytearray``, None when nothing is kept; NULL with an exception
 * set. Functions that share a frame (two code objects with one name, file and line:
 * dataclass-made methods, say) merge into one node as convert() merges them: calls,
 * times and children added up. Then empty branches are pruned, and the rest written in
 * pre-order with subtree sizes. The tree's nodes are used up (its chunks freed). */
static PyObject *
flatten(Tree *tree, Stack *stack, Siblings *h, const FidFrame *table, size_t nframes)
{
    if (tree->used >= (size_t)IDX_MAX) {
        PyErr_SetString(PyExc_MemoryError, "export_flat: a thread of 2**31 nodes or more");
        return NULL;
    }
    int64_t rows = merge_and_size(tree, stack, h, table, nframes);
    if (rows < 0) {
        return NULL;
    }
    if (rows == 1) {
        return Py_NewRef(Py_None); /* nothing kept: the thread is left out */
    }
    int64_t root_incl = 0;
    WideTable rows_wide = {NULL, 0, 0};
    if (number_rows(tree, stack, &rows_wide, &root_incl) < 0) {
        wide_free(&rows_wide);
        return NULL;
    }
    wide_free(&tree->wide); /* by node number: the nodes move now */
    into_preorder(tree);
    free_links(tree); /* a row's index is its place now, its parent's is on the stack */
    /* Rows 1.. are slots 0..rows-2: the chunks past them hold nothing kept. */
    size_t needed = ((size_t)rows - 1 + CHUNK_NODES - 1) / CHUNK_NODES;
    while (tree->nchunks > needed) {
        chunk_free(tree->chunks[--tree->nchunks]);
    }
    /* A bytearray: compensate_rows (compensate.c) then works on it in place. Its pages
     * are touched (made resident) only as the rows are written, while the chunks behind
     * them are freed. */
    const size_t nk[2] = {(size_t)rows, rows_wide.used}; /* every wide row has an entry */
    size_t wide_next = 0;
    PyObject *result =
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)flat_bytes(nk[0], nk[1]));
    if (result == NULL) {
        wide_free(&rows_wide);
        return NULL;
    }
    FlatCols out = {0};
    (void)flat_cols(PyByteArray_AS_STRING(result), flat_bytes(nk[0], nk[1]), &out, nk);
    out.parent[0] = out.frame[0] = -1;
    out.size[0] = (int32_t)rows;
    out.calls[0] = out.min[0] = out.max[0] = 0;
    out.excl[0] = 0;
    out.incl[0] = root_incl;
    /* The rows whose subtrees hold the next row (number: row index, value: the row past
     * its subtree), innermost on top: the root's, never popped, at the bottom. */
    stack->top = 0;
    if (push(stack, 0, rows) < 0) {
        goto fail;
    }
    size_t at = 1;
    for (size_t c = 0; c < tree->nchunks; c++) {
        Chunk *chunk = tree->chunks[c];
        for (size_t i = 0; i < CHUNK_NODES && at < (size_t)rows; i++, at++) {
            const Node *n = &chunk->nodes[i];
            while (stack->items[stack->top - 1].value <= (int64_t)at) {
                stack->top--;
            }
            write_row(&out, at, n, stack->items[stack->top - 1].number, &rows_wide,
                      &wide_next);
            if (KEPT(n) > 1 && push(stack, (uint32_t)at, (int64_t)(at + KEPT(n))) < 0) {
                goto fail;
            }
        }
        chunk_free(chunk); /* its pages go back at once (arena.c) */
        tree->chunks[c] = NULL;
    }
    wide_free(&rows_wide);
    tree->nchunks = 0;
    tree->used = 0;
    return result;
fail:
    wide_free(&rows_wide);
    Py_DECREF(result);
    return NULL;
}

/* export_flat(now, frame_of) -> (closed, [(token, rows)]).
 *
 * Closes the open calls at ``now`` as export() does, then asks ``frame_of(fid)`` once per
 * distinct function for its frame index (see intern_frames; below 2**31), and returns
 * each thread's tree as a ``bytearray`` of rows (parent, frame, calls, incl, excl, min,
 * max, subtree size) in pre-order, stored column by column (flatrows.h), functions
 * sharing a frame merged, empty branches pruned;
 * threads with nothing kept are left out. After stop() the trees are taken (a later
 * export finds them empty); before, they are copied and recording goes on. */
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
    if (self->exporting) {
        PyErr_SetString(PyExc_RuntimeError, "export_flat: another export is running");
        return NULL;
    }
    self->exporting = 1;
    PyObject *frame_of = args[1];
    PyObject *result = NULL, *threads = NULL;
    long long closed = 0;
    size_t n = 0, nfids = 0;
    FidFrame *table = NULL;
    Stack stack = {0};
    Siblings siblings = {0};
    for (Thread *t = self->first; t != NULL; t = t->next) {
        n += t->token != NULL; /* NULL: cleared by the garbage collector */
    }
    Tree *trees = PyMem_Calloc(n ? n : 1, sizeof(Tree));
    if (trees == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Plain C up to intern_frames: nothing changes under these walks. */
    size_t k = 0;
    for (Thread *t = self->first; t != NULL; t = t->next) {
        if (t->token == NULL) {
            continue;
        }
        Tree *tree = &trees[k++];
        tree->token = Py_NewRef(t->token);
        if (close_open_calls(self, t, (int64_t)now, &closed) < 0
            || (self->stopped ? take_tree(t, tree) : copy_tree(t, tree)) < 0) {
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (prepare_tree(&trees[i]) < 0) {
            goto done;
        }
    }
    /* From here on only the export's own trees are used: frame_of runs Python code. */
    table = fid_table(trees, n, &nfids);
    if (table == NULL || intern_frames(trees, n, table, nfids, frame_of) < 0) {
        goto done;
    }
    threads = PyList_New(0);
    if (threads == NULL) {
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *data = flatten(&trees[i], &stack, &siblings, table, nfids);
        if (data == NULL) {
            goto done;
        }
        free_nodes(&trees[i]); /* before the next tree's rows are made */
        if (data != Py_None) {
            PyObject *pair = PyTuple_Pack(2, trees[i].token, data);
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
    PyMem_Free(table);
    PyMem_Free(stack.items);
    PyMem_Free(siblings.node);
    PyMem_Free(siblings.stamp);
    if (trees != NULL) {
        for (size_t i = 0; i < n; i++) {
            free_nodes(&trees[i]);
            Py_XDECREF(trees[i].token);
        }
        PyMem_Free(trees);
    }
    self->exporting = 0;
    return result;
}
