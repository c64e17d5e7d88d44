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
 * needed become the export's, see Node in native.h); the rows are written into the nodes'
 * own slots, moved into pre-order there, and copied out chunk by chunk into the result,
 * each chunk freed (and given back to the system) behind the copy. Peak: the tree, plus
 * a few MB, not the tree plus its rows. frames.c asks for the frames, export.c closes the
 * open calls, rowsjson.c writes the rows as JSON.
 */
#include "native.h"

#include <stddef.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* Row indices are 32-bit in the nodes' spare fields; flatten refuses a thread of 2**31
 * nodes or more, which the recorder could not hold in under ~170 GB anyway. */
#define IDX_MAX INT32_MAX
/* Chunks copied out between two returns of freed memory to the system. */
#define TRIM_EVERY 32

/* A node's slot once it is a row: the row, then its place (row index) in the result. */
enum { SLOT_TARGET = FLAT_COLS, SLOT_WORDS };
_Static_assert(offsetof(Node, out) >= SLOT_WORDS * sizeof(int64_t),
               "a row and its target fit in a node below its kept-size field");

static inline int64_t
slot_target(const Node *n)
{
    int64_t v;
    memcpy(&v, (const char *)n + SLOT_TARGET * sizeof(int64_t), sizeof v);
    return v;
}

/* -- the export's own trees --------------------------------------------------------- */

/* Free what is left of a tree's nodes (and their names, if they still own them). */
static void
free_nodes(Tree *tree)
{
    if (tree->owns_names) {
        for (size_t g = 0; g < tree->used; g++) {
            Py_XDECREF(tree_slot(tree, g)->name);
        }
        Py_XDECREF(tree->root.name);
        tree->owns_names = 0;
    }
    for (size_t c = 0; c < tree->nchunks; c++) {
        PyMem_Free(tree->chunks[c]);
    }
    PyMem_Free(tree->chunks);
    tree->chunks = NULL;
    tree->nchunks = tree->used = 0;
}

/* A stopped recorder's thread gives its tree to the export: its chunks and root move
 * into ``tree`` (no node is copied) and the node table, which only recording needs, is
 * freed. The thread is left empty, as a new one. -1 with MemoryError set. */
static int
take_tree(Thread *t, Tree *tree)
{
    size_t nchunks = 0;
    for (Chunk *c = t->chunks; c != NULL; c = c->next) {
        nchunks++;
    }
    Chunk **chunks = PyMem_Malloc((nchunks ? nchunks : 1) * sizeof(Chunk *));
    Slot *table = big_alloc(64 * sizeof(Slot));
    if (chunks == NULL || table == NULL) {
        PyMem_Free(chunks);
        big_free(table, 64 * sizeof(Slot));
        PyErr_NoMemory();
        return -1;
    }
    size_t k = nchunks;
    for (Chunk *c = t->chunks; c != NULL; c = c->next) {
        chunks[--k] = c; /* the list is newest first */
    }
    tree->chunks = chunks;
    tree->nchunks = nchunks;
    tree->used = t->used;
    tree->root = t->root;
    tree->owns_names = 1;
    t->chunks = NULL;
    t->used = 0; /* numbered[] is refilled from number 0 */
    memset(&t->root, 0, sizeof(Node));
    t->root.min = NO_MIN;
    big_free(t->table, (t->mask + 1) * sizeof(Slot));
    t->table = table;
    t->mask = 63;
    return 0;
}

/* A running recorder's thread: its tree copied as nodes (children in the same order;
 * names not copied), for the export to work on while recording goes on. Plain C. -1
 * with MemoryError set (``tree`` then holds what was copied, for free_nodes). */
static int
copy_tree(const Thread *t, Tree *tree)
{
    size_t nchunks = (t->used + CHUNK_NODES - 1) / CHUNK_NODES;
    tree->chunks = PyMem_Calloc(nchunks ? nchunks : 1, sizeof(Chunk *));
    /* (original, copy) pairs still to copy below */
    const Node **from = PyMem_Malloc((t->used + 1) * sizeof(Node *));
    Node **to = PyMem_Malloc((t->used + 1) * sizeof(Node *));
    int status = -1;
    if (tree->chunks == NULL || from == NULL || to == NULL) {
        goto done;
    }
    tree->root = t->root;
    tree->root.name = NULL;
    size_t top = 0;
    from[top] = &t->root;
    to[top++] = &tree->root;
    while (top > 0) {
        top--;
        const Node *src = from[top];
        Node *dst = to[top], *last = NULL;
        dst->first_child = NULL;
        for (const Node *ch = src->first_child; ch != NULL; ch = ch->next_sibling) {
            if (tree->used % CHUNK_NODES == 0) {
                Chunk *c = PyMem_Malloc(sizeof(Chunk));
                if (c == NULL) {
                    goto done;
                }
                c->next = NULL;
                c->used = 0;
                tree->chunks[tree->nchunks++] = c;
            }
            Chunk *c = tree->chunks[tree->nchunks - 1];
            Node *n = &c->nodes[c->used++];
            tree->used++;
            *n = *ch;
            n->name = NULL;
            n->parent = dst;
            n->next_sibling = NULL;
            if (last == NULL) {
                dst->first_child = n;
            }
            else {
                last->next_sibling = n;
            }
            last = n;
            from[top] = ch;
            to[top++] = n;
        }
    }
    status = 0;
done:
    if (status < 0) {
        PyErr_NoMemory();
    }
    PyMem_Free(from);
    PyMem_Free(to);
    return status;
}

/* First pass over every node (in any order: only the children's recorded ``incl`` is
 * read, which this pass never changes): children put back into creation order (the
 * recorder prepends), self time = inclusive - the children's inclusive when the node
 * completed a call (the root's stays 0, as convert() leaves it). */
static void
order_and_self(Node *n, int root)
{
    Node *prev = NULL, *ch = n->first_child;
    int64_t below = 0;
    while (ch != NULL) {
        Node *next = ch->next_sibling;
        ch->next_sibling = prev;
        prev = ch;
        below = wrap_add(below, ch->incl);
        ch = next;
    }
    n->first_child = prev;
    n->excl = !root && n->calls > 0 ? wrap_sub(n->incl, below) : 0;
}

/* Second pass: a node's numbers as convert() starts a node from it (only completed calls
 * count; an unfinished node's min is 0). Its name is dropped: the export never needs
 * it, and the field becomes the kept subtree size. */
static void
own_numbers(Node *n, int root)
{
    Py_XDECREF(n->name); /* a str: no Python code runs */
    n->out.size = n->out.spare = 0;
    if (root || n->calls <= 0) {
        n->calls = n->incl = n->min = n->max = 0;
        return;
    }
    if (n->min == NO_MIN) {
        n->min = 0;
    }
    if (n->max < 0) {
        n->max = 0;
    }
}

static void
prepare_tree(Tree *tree)
{
    order_and_self(&tree->root, 1);
    for (size_t g = 0; g < tree->used; g++) {
        order_and_self(tree_slot(tree, g), 0);
    }
    if (!tree->owns_names) { /* a copy: its name fields are NULL */
        tree->root.name = NULL;
    }
    own_numbers(&tree->root, 1);
    for (size_t g = 0; g < tree->used; g++) {
        own_numbers(tree_slot(tree, g), 0);
    }
    tree->owns_names = 0;
}

/* -- merge, prune, number ------------------------------------------------------------ */

/* A growable stack of (node, number) pairs. */
typedef struct {
    Node *node;
    int64_t value;
} Item;

typedef struct {
    Item *items;
    size_t top, cap;
} Stack;

static int
push(Stack *s, Node *node, int64_t value)
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
    s->items[s->top].node = node;
    s->items[s->top++].value = value;
    return 0;
}

/* Siblings by frame, while one node's children are merged; a stamp per use instead of
 * clearing. */
typedef struct {
    Node **node;
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
        h->node = PyMem_Malloc(want * sizeof(Node *));
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

/* Fold ``d`` (a later sibling with the same frame) into ``a``, as convert() adds a
 * second function of one frame into the first: its completed calls and times, and its
 * children after a's (merged in turn when a's own children are). */
static void
fold(Node *a, Node *d)
{
    a->excl = wrap_add(a->excl, d->excl);
    if (d->calls > 0) {
        if (a->calls == 0 || d->min < a->min) {
            a->min = d->min;
        }
        if (d->max > a->max) {
            a->max = d->max;
        }
        a->calls = wrap_add(a->calls, d->calls);
        a->incl = wrap_add(a->incl, d->incl);
    }
    if (d->first_child != NULL) {
        Node **tail = &a->first_child;
        while (*tail != NULL) {
            tail = &(*tail)->next_sibling;
        }
        *tail = d->first_child;
        d->first_child = NULL;
    }
}

/* Give each child of ``n`` its frame and fold children sharing a frame into the first
 * (folds add to the children's lists, never to n's). Children that came from folds are
 * still functions here: each node is here exactly once, as its parent's child. */
static int
merge_children(Node *n, Siblings *h, const FidFrame *table, size_t nframes)
{
    size_t count = 0;
    for (Node *ch = n->first_child; ch != NULL; ch = ch->next_sibling) {
        count++;
    }
    if (count == 0) {
        return 0;
    }
    if (siblings_ready(h, count) < 0) {
        return -1;
    }
    Node **link = &n->first_child;
    while (*link != NULL) {
        Node *ch = *link;
        int64_t frame = frame_for(table, nframes, ch->fid)->frame;
        ch->fid = (uintptr_t)frame;
        uint64_t hv = (uint64_t)frame * 0xC2B2AE3D27D4EB4FULL;
        size_t s = (size_t)(hv ^ (hv >> 29)) & h->mask;
        while (h->stamp[s] == h->now && (int64_t)h->node[s]->fid != frame) {
            s = (s + 1) & h->mask;
        }
        if (h->stamp[s] == h->now) {
            fold(h->node[s], ch);
            *link = ch->next_sibling; /* ch is gone: its kept size stays 0 */
            continue;
        }
        h->stamp[s] = h->now;
        h->node[s] = ch;
        link = &ch->next_sibling;
    }
    return 0;
}

/* Merge (pre-order), then prune and size (post-order): a node is kept when it completed
 * a call or something below it is kept; out.size = kept nodes in its subtree. Returns
 * the number of rows (the root's size), -1 with an exception set. */
static int64_t
merge_and_size(Tree *tree, Stack *stack, Siblings *h, const FidFrame *table, size_t nframes)
{
    stack->top = 0;
    if (push(stack, &tree->root, 0) < 0) {
        return -1;
    }
    int64_t root_incl = 0, rows = 0;
    while (stack->top > 0) {
        Item *top = &stack->items[stack->top - 1];
        Node *n = top->node;
        if (top->value == 0) { /* first visit: merge its children, then go below */
            top->value = 1;
            if (merge_children(n, h, table, nframes) < 0) {
                return -1;
            }
            for (Node *ch = n->first_child; ch != NULL; ch = ch->next_sibling) {
                if (push(stack, ch, 0) < 0) {
                    return -1;
                }
            }
            continue;
        }
        stack->top--;
        int64_t below = 0;
        for (Node *ch = n->first_child; ch != NULL; ch = ch->next_sibling) {
            below += ch->out.size;
            if (n == &tree->root && ch->out.size > 0) {
                root_incl = wrap_add(root_incl, ch->incl);
            }
        }
        if (n == &tree->root) {
            n->incl = root_incl;
            rows = below + 1;
        }
        else if (n->calls > 0 || below > 0) {
            n->out.size = (int32_t)(below + 1);
        }
    }
    return rows;
}

/* Number the kept nodes in pre-order (children in creation order) and turn each into its
 * row in its own slot, with the row's index as its target. The root is row 0 (written
 * to ``root_row``); no chunk holds it. -1 with an exception set. */
static int
number_rows(Tree *tree, Stack *stack, int64_t *root_row)
{
    stack->top = 0;
    int64_t next = 0;
    if (push(stack, &tree->root, -1) < 0) {
        return -1;
    }
    while (stack->top > 0) {
        Item item = stack->items[--stack->top];
        Node *n = item.node;
        int64_t k = next++;
        size_t mark = stack->top;
        for (Node *ch = n->first_child; ch != NULL; ch = ch->next_sibling) {
            if (ch->out.size > 0 && push(stack, ch, k) < 0) {
                return -1;
            }
        }
        /* pushed first child first: reversed, so the first child comes out first */
        for (size_t a = mark, b = stack->top; b > a + 1; a++, b--) {
            Item tmp = stack->items[a];
            stack->items[a] = stack->items[b - 1];
            stack->items[b - 1] = tmp;
        }
        int64_t row[SLOT_WORDS] = {
            [FLAT_PARENT] = item.value,
            [FLAT_FRAME] = n == &tree->root ? -1 : (int64_t)n->fid,
            [FLAT_CALLS] = n->calls,
            [FLAT_INCL] = n->incl,
            [FLAT_EXCL] = n->excl,
            [FLAT_MIN] = n->min,
            [FLAT_MAX] = n->max,
            [FLAT_SIZE] = n == &tree->root ? 0 : n->out.size,
            [SLOT_TARGET] = k,
        };
        if (n == &tree->root) {
            memcpy(root_row, row, FLAT_COLS * sizeof(int64_t));
        }
        else {
            memcpy(n, row, sizeof row); /* out.size, above the row, stays */
        }
    }
    return 0;
}

/* Move each row's slot to slot target-1, so the chunks hold rows 1.. in order: every
 * swap puts one row in its place. Slots of nodes not kept (out.size 0) are free. */
static void
into_preorder(Tree *tree)
{
    Node tmp;
    for (size_t g = 0; g < tree->used; g++) {
        Node *here = tree_slot(tree, g);
        while (here->out.size > 0 && (size_t)(slot_target(here) - 1) != g) {
            Node *there = tree_slot(tree, (size_t)(slot_target(here) - 1));
            tmp = *there;
            *there = *here;
            *here = tmp;
        }
    }
}

static void
give_back(void)
{
#if defined(__GLIBC__)
    malloc_trim(0); /* freed chunks sit between live blocks: only this returns them */
#endif
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
    int64_t root_row[FLAT_COLS];
    if (number_rows(tree, stack, root_row) < 0) {
        return NULL;
    }
    root_row[FLAT_SIZE] = rows;
    into_preorder(tree);
    /* Rows 1.. are slots 0..rows-2: the chunks past them hold nothing kept. */
    size_t needed = ((size_t)rows - 1 + CHUNK_NODES - 1) / CHUNK_NODES;
    size_t freed = 0;
    while (tree->nchunks > needed) {
        PyMem_Free(tree->chunks[--tree->nchunks]);
        freed++;
    }
    if (freed >= TRIM_EVERY) {
        give_back();
    }
    size_t row_bytes = FLAT_COLS * sizeof(int64_t);
    /* A bytearray: compensate_rows (compensate.c) then works on it in place. */
    PyObject *result =
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((size_t)rows * row_bytes));
    if (result == NULL) {
        return NULL;
    }
    char *out = PyByteArray_AS_STRING(result);
    memcpy(out, root_row, row_bytes);
    size_t at = 1;
    for (size_t c = 0; c < tree->nchunks; c++) {
        Chunk *chunk = tree->chunks[c];
        for (size_t i = 0; i < CHUNK_NODES && at < (size_t)rows; i++, at++) {
            memcpy(out + at * row_bytes, &chunk->nodes[i], row_bytes);
        }
        PyMem_Free(chunk);
        tree->chunks[c] = NULL;
        if (c % TRIM_EVERY == TRIM_EVERY - 1) {
            give_back();
        }
    }
    tree->nchunks = 0;
    tree->used = 0;
    return result;
}

/* export_flat(now, frame_of) -> (closed, [(token, rows)]).
 *
 * Closes the open calls at ``now`` as export() does, then asks ``frame_of(fid)`` once per
 * distinct function for its frame index (see intern_frames), and returns each thread's
 * tree as a ``bytearray`` of native int64 rows (parent, frame, calls, incl, excl, min, max,
 * subtree size) in pre-order, functions sharing a frame merged, empty branches pruned;
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
        prepare_tree(&trees[i]);
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
