/* Included by native.h only, after its types: what a 32-bit node keeps beside it: its
 * numbers beyond 32 bits and its name (arena.c), its function by index (fids.c); apart
 * from native.h to keep each header to one concern. */

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
/* Node ``n``'s 32-bit total just wrapped: 2**32 more in its entry's high part (CARRIED).
 * -1 with MemoryError set (the call is then not recorded). */
ELT_HIDDEN int wide_carry(WideTable *w, Node *n, uint32_t number);

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

/* A recording's node's inclusive time as int64 (CARRIED: high part in the wide entry). */
static inline int64_t
node_incl(const WideTable *w, const Node *n, uint32_t number)
{
    if (n->calls == WIDE) {
        return wide_find(w, number)->incl;
    }
    if (n->parent & CARRIED) {
        return wrap_add(wide_find(w, number)->incl, (int64_t)n->incl);
    }
    return n->incl;
}

/* The same for flat.c's nodes once prepared (no CARRIED node left: ``parent`` is then
 * the kept size, its bits no marks). */
static inline int64_t
tree_incl(const WideTable *w, const Node *n, uint32_t number)
{
    return n->calls == WIDE ? wide_find(w, number)->incl : (int64_t)n->incl;
}

/* Store a node's numbers and inclusive time, in the node when they all fit, else in
 * ``w``; -1 when out of memory (no exception set). */
ELT_HIDDEN int node_set_stats(WideTable *w, Node *n, uint32_t number, Stats s, int64_t incl);

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
 * statistics of trace.py's tree, in 32 bits while they fit (the total's carries past 32
 * bits go to the wide table: CARRIED). */
static inline int
close_call(Thread *t, Node *n, uint32_t number, int64_t duration, int64_t basetime)
{
    if (duration < basetime) {
        return 0;
    }
    if ((uint64_t)duration < MIN_NONE && n->calls < WIDE - 1) { /* not wide, room for one */
        uint32_t d = (uint32_t)duration;
        uint32_t incl = n->incl + d;
        if (incl < d && wide_carry(&t->wide, n, number) < 0) { /* wrapped: rare */
            return -1;
        }
        n->incl = incl;
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

/* -- fids.c: a thread's functions by index -------------------------------------------- */

/* An empty table holding fid 0 at index 0; -1 when out of memory (no exception set). */
ELT_HIDDEN int fids_init(FidTable *f);
ELT_HIDDEN void fids_free(FidTable *f);
/* ``to`` becomes a copy of ``from``'s functions (no slots: a tree's table is only read
 * by index); -1 when out of memory (no exception set). */
ELT_HIDDEN int fids_copy(FidTable *to, const FidTable *from);
/* The index of ``fid``, added when new; 0 for fid 0; UINT32_MAX when out of memory (no
 * exception set). Called when a node is made, never by an event. */
ELT_HIDDEN uint32_t fid_intern(FidTable *f, uintptr_t fid);

/* The function of node ``n`` of a thread whose table is ``f``. */
static inline uintptr_t
fid_of(const FidTable *f, const Node *n)
{
    return f->ids[n->fn];
}

#endif
