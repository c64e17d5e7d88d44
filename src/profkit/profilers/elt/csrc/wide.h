/* Included by native.h only, after its types: a node's numbers beyond 32 bits and its
 * name (arena.c), apart from native.h to keep each header to one concern. */

#ifndef PROFKIT_ELT_WIDE_H
#define PROFKIT_ELT_WIDE_H

/* -- arena.c: a node's numbers that do not fit in 32 bits; names ----------------------- */

/* The entry of ``key``, NULL when there is none. */
ELT_HIDDEN WideEntry *wide_find(const WideTable *w, uint32_t key);
/* The entry of ``key``, made (zeroed) when there is none; NULL when out of memory. */
ELT_HIDDEN WideEntry *wide_get(WideTable *w, uint32_t key);
ELT_HIDDEN int wide_copy(WideTable *to, const WideTable *from);
ELT_HIDDEN void wide_free(WideTable *w);

/* A call of ``duration`` that does not fit the node's 32-bit fields (or a node already
 * wide): recorded with the wide table. -1 with MemoryError set when out of memory (the
 * call is then not recorded at all, as an enter out of memory records none). */
ELT_HIDDEN int wide_close(WideTable *w, Node *n, uint32_t number, int64_t duration);

/* A node's completed calls, min and max as int64 (min NO_MIN: none yet). */
typedef struct {
    int64_t calls, min, max;
} Stats;

static inline Stats
node_stats(const WideTable *w, const Node *n, uint32_t number)
{
    if (n->calls == WIDE) {
        const WideEntry *e = wide_find(w, number);
        return (Stats){e->calls, e->min, e->max};
    }
    return (Stats){n->calls, n->min == MIN_NONE ? NO_MIN : n->min, n->max};
}

/* Store a node's numbers, in the node when they fit, else in ``w``; -1 when out of
 * memory (no exception set). */
ELT_HIDDEN int node_set_stats(WideTable *w, Node *n, uint32_t number, Stats s);

ELT_HIDDEN PyObject *name_find(const NameTable *t, const Node *n); /* borrowed, or NULL */
/* Give ``name`` (a reference, taken either way) to node ``n``; -1 when out of memory. */
ELT_HIDDEN int name_add(NameTable *t, const Node *n, PyObject *name);
/* Drop every name (strs: no Python code runs). */
ELT_HIDDEN void names_free(NameTable *t);

/* The node numbered ``number`` (its creation order plus one) of ``chunks`` (a thread's
 * numbered chunks, or a tree's). */
static inline Node *
numbered_node(Chunk *const *chunks, uint32_t number)
{
    size_t g = (size_t)number - 1;
    return &chunks[g / CHUNK_NODES]->nodes[g % CHUNK_NODES];
}

/* A completed call of ``n`` (node ``number`` of thread ``t``) lasting ``duration``: the
 * statistics of trace.py's tree, in 32 bits while they fit. */
static inline int
close_call(Thread *t, Node *n, uint32_t number, int64_t duration, int64_t basetime)
{
    if (duration < basetime) {
        return 0;
    }
    if ((uint64_t)duration < MIN_NONE && n->calls < WIDE - 1) { /* not wide, room for one */
        uint32_t d = (uint32_t)duration;
        n->incl = wrap_add(n->incl, duration);
        n->calls++;
        if (d > n->max) {
            n->max = d;
        }
        if (d < n->min) {
            n->min = d;
        }
        return 0;
    }
    return wide_close(&t->wide, n, number, duration);
}

#endif
