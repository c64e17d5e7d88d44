/* profkit.profilers.elt._native: the recorder's storage beside its node chunks: big
 * blocks (the node tables) in huge pages where the system offers them, and the side
 * tables of what does not fit in a 32-byte Node (wide numbers, names).
 *
 * Why: on a large program (sympy: 150k nodes) nearly every table probe and many node
 * reads miss the cache *and* the TLB, and under virtualisation a TLB miss costs a
 * two-level page walk (measured: ~170 ns for the one table load of a lookup). 2 MB pages
 * (transparent huge pages, asked for with madvise) make those walks rare (table lookups:
 * 443 -> 188 perf samples on sympy). Small blocks stay with PyMem: a huge page is 2 MB
 * at first touch. Node chunks are not in huge pages (no faster, measured) but mapped on
 * their own, in whole pages: from the heap, interleaved with the program's blocks, the
 * export's freed chunks did not all go back (pytest on sympy's test_arit peaked ~20 MB
 * higher).
 */
#include "native.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

/* Bytes a big block of ``size`` really takes (whole huge pages), or 0 for a PyMem one. */
static size_t
mapped_size(size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= HUGE_PAGE) {
        return (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    }
#endif
    (void)size;
    return 0;
}

/* ``size`` zeroed bytes; NULL when out of memory (no exception set). */
ELT_HIDDEN void *
big_alloc(size_t size)
{
    size_t length = mapped_size(size);
    if (length == 0) {
        return PyMem_Calloc(1, size);
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Over-map by one huge page and trim, so the block starts on a huge-page boundary. */
    char *raw = mmap(NULL, length + HUGE_PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        return NULL;
    }
    char *start = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (start > raw) {
        munmap(raw, (size_t)(start - raw));
    }
    size_t tail = (size_t)((raw + length + HUGE_PAGE) - (start + length));
    if (tail > 0) {
        munmap(start + length, tail);
    }
    (void)madvise(start, length, MADV_HUGEPAGE); /* advice: without it, plain pages */
    return start;
#else
    return NULL;
#endif
}

/* Chunks alive now and at most since the last reset (chunks(): tests; tracemalloc does
 * not see mapped blocks). The GIL serialises the counts. */
static size_t chunks_live, chunks_peak;

ELT_HIDDEN Chunk *
chunk_alloc(void)
{
#if defined(__linux__)
    _Static_assert(sizeof(Chunk) % 4096 == 0, "a chunk is whole pages");
    void *block = mmap(NULL, sizeof(Chunk), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Chunk *chunk = block == MAP_FAILED ? NULL : block;
#else
    Chunk *chunk = PyMem_Malloc(sizeof(Chunk));
#endif
    if (chunk != NULL && ++chunks_live > chunks_peak) {
        chunks_peak = chunks_live;
    }
    return chunk;
}

ELT_HIDDEN void
chunk_free(Chunk *chunk)
{
    if (chunk == NULL) {
        return;
    }
    chunks_live--;
#if defined(__linux__)
    munmap(chunk, sizeof(Chunk));
#else
    PyMem_Free(chunk);
#endif
}

/* _chunks() -> (live, peak), the peak then reset to live: node chunks, for tests. */
ELT_HIDDEN PyObject *
native_chunks(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    PyObject *r = Py_BuildValue("(nn)", (Py_ssize_t)chunks_live, (Py_ssize_t)chunks_peak);
    chunks_peak = chunks_live;
    return r;
}

/* Free a block of big_alloc(size). */
ELT_HIDDEN void
big_free(void *block, size_t size)
{
    if (block == NULL) {
        return;
    }
    size_t length = mapped_size(size);
    if (length == 0) {
        PyMem_Free(block);
        return;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    munmap(block, length);
#endif
}

/* -- side tables: nodes are most of the recorder's memory on a large program, so a node
 * keeps its numbers in 32 bits and no name; the rare node whose numbers do not fit (a call
 * of 4.29 s or more, a negative duration from a Python clock, 2**32 - 1 calls; a total's
 * carries) keeps them here, exactly, as int64, and names (event lines, C calls) are kept
 * by node. Small open-addressing tables, never looked up on the hot path. */

static inline size_t
key_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* -- wide numbers ------------------------------------------------------------------- */

ELT_HIDDEN WideEntry *
wide_find(const WideTable *w, uint32_t key)
{
    if (w->entries == NULL) {
        return NULL;
    }
    for (size_t j = key_slot(key, w->mask);; j = (j + 1) & w->mask) {
        if (w->entries[j].key == key) {
            return &w->entries[j];
        }
        if (w->entries[j].key == 0) {
            return NULL;
        }
    }
}

static int
wide_grow(WideTable *w)
{
    size_t size = w->entries == NULL ? 16 : (w->mask + 1) * 2;
    WideEntry *entries = PyMem_Calloc(size, sizeof(WideEntry));
    if (entries == NULL) {
        return -1;
    }
    if (w->entries != NULL) {
        for (size_t i = 0; i <= w->mask; i++) {
            if (w->entries[i].key != 0) {
                size_t j = key_slot(w->entries[i].key, size - 1);
                while (entries[j].key != 0) {
                    j = (j + 1) & (size - 1);
                }
                entries[j] = w->entries[i];
            }
        }
    }
    PyMem_Free(w->entries);
    w->entries = entries;
    w->mask = size - 1;
    return 0;
}

ELT_HIDDEN WideEntry *
wide_get(WideTable *w, uint32_t key)
{
    WideEntry *e = wide_find(w, key);
    if (e != NULL) {
        return e;
    }
    if ((w->entries == NULL || (w->used + 1) * 2 > w->mask + 1) && wide_grow(w) < 0) {
        return NULL;
    }
    size_t j = key_slot(key, w->mask);
    while (w->entries[j].key != 0) {
        j = (j + 1) & w->mask;
    }
    w->entries[j] = (WideEntry){key, 0, NO_MIN, 0, 0};
    w->used++;
    return &w->entries[j];
}

ELT_HIDDEN int
wide_copy(WideTable *to, const WideTable *from)
{
    *to = (WideTable){NULL, 0, 0};
    if (from->entries == NULL) {
        return 0;
    }
    to->entries = PyMem_Malloc((from->mask + 1) * sizeof(WideEntry));
    if (to->entries == NULL) {
        return -1;
    }
    memcpy(to->entries, from->entries, (from->mask + 1) * sizeof(WideEntry));
    to->mask = from->mask;
    to->used = from->used;
    return 0;
}

ELT_HIDDEN void
wide_free(WideTable *w)
{
    PyMem_Free(w->entries);
    *w = (WideTable){NULL, 0, 0};
}

/* The node's entry, made from its 32-bit fields when it has none (the node then says
 * WIDE); NULL when out of memory. */
static WideEntry *
widen(WideTable *w, Node *n, uint32_t number)
{
    if (n->calls == WIDE) {
        return wide_find(w, number);
    }
    WideEntry *e = wide_get(w, number);
    if (e == NULL) {
        return NULL;
    }
    e->calls = n->calls;
    e->min = n->min == MIN_NONE ? NO_MIN : n->min;
    e->max = n->max;
    e->incl = n->incl;
    n->calls = WIDE;
    n->min = n->max = n->incl = 0;
    return e;
}

ELT_HIDDEN int
wide_close(WideTable *w, Node *n, uint32_t number, int64_t duration)
{
    int64_t high = 0; /* a CARRIED node's high part (widen keeps the low 32 bits) */
    int carried = n->calls != WIDE && (n->parent & CARRIED);
    if (carried) {
        high = wide_find(w, number)->incl;
    }
    WideEntry *e = widen(w, n, number);
    if (e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (carried) {
        e->incl = wrap_add(e->incl, high);
        n->parent &= ~CARRIED;
    }
    e->incl = wrap_add(e->incl, duration);
    e->calls = wrap_add(e->calls, 1);
    if (duration > e->max) {
        e->max = duration;
    }
    if (duration < e->min) {
        e->min = duration;
    }
    return 0;
}

ELT_HIDDEN int
wide_carry(WideTable *w, Node *n, uint32_t number)
{
    WideEntry *e = wide_get(w, number);
    if (e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (!(n->parent & CARRIED)) {
        e->incl = 0;
        n->parent |= CARRIED;
    }
    e->incl = wrap_add(e->incl, (int64_t)1 << 32);
    return 0;
}

/* (not for a CARRIED node: its callers take the mark off first) */
ELT_HIDDEN int
node_set_stats(WideTable *w, Node *n, uint32_t number, Stats s, int64_t incl)
{
    if (n->calls != WIDE && s.calls >= 0 && s.calls < (int64_t)WIDE && s.max >= 0
        && s.max < (int64_t)MIN_NONE
        && (s.min == NO_MIN || (s.min >= 0 && s.min < (int64_t)MIN_NONE)) && incl >= 0
        && incl <= (int64_t)UINT32_MAX) {
        n->calls = (uint32_t)s.calls;
        n->min = s.min == NO_MIN ? MIN_NONE : (uint32_t)s.min;
        n->max = (uint32_t)s.max;
        n->incl = (uint32_t)incl;
        return 0;
    }
    WideEntry *e = widen(w, n, number);
    if (e == NULL) {
        return -1;
    }
    e->calls = s.calls;
    e->min = s.min;
    e->max = s.max;
    e->incl = incl;
    return 0;
}

/* -- names ---------------------------------------------------------------------------- */

ELT_HIDDEN PyObject *
name_find(const NameTable *t, const Node *n)
{
    if (t->keys == NULL) {
        return NULL;
    }
    for (size_t j = key_slot((uint64_t)(uintptr_t)n >> 4, t->mask);; j = (j + 1) & t->mask) {
        if (t->keys[j] == n) {
            return t->names[j];
        }
        if (t->keys[j] == NULL) {
            return NULL;
        }
    }
}

static int
names_grow(NameTable *t)
{
    size_t size = t->keys == NULL ? 64 : (t->mask + 1) * 2;
    const Node **keys = PyMem_Calloc(size, sizeof(Node *));
    PyObject **names = PyMem_Calloc(size, sizeof(PyObject *));
    if (keys == NULL || names == NULL) {
        PyMem_Free(keys);
        PyMem_Free(names);
        return -1;
    }
    if (t->keys != NULL) {
        for (size_t i = 0; i <= t->mask; i++) {
            if (t->keys[i] != NULL) {
                size_t j = key_slot((uint64_t)(uintptr_t)t->keys[i] >> 4, size - 1);
                while (keys[j] != NULL) {
                    j = (j + 1) & (size - 1);
                }
                keys[j] = t->keys[i];
                names[j] = t->names[i];
            }
        }
    }
    PyMem_Free(t->keys);
    PyMem_Free(t->names);
    t->keys = keys;
    t->names = names;
    t->mask = size - 1;
    return 0;
}

ELT_HIDDEN int
name_add(NameTable *t, const Node *n, PyObject *name)
{
    if ((t->keys == NULL || (t->used + 1) * 2 > t->mask + 1) && names_grow(t) < 0) {
        Py_DECREF(name);
        return -1;
    }
    size_t j = key_slot((uint64_t)(uintptr_t)n >> 4, t->mask);
    while (t->keys[j] != NULL && t->keys[j] != n) {
        j = (j + 1) & t->mask;
    }
    if (t->keys[j] == n) {
        Py_SETREF(t->names[j], name); /* a str: no Python code runs */
        return 0;
    }
    t->keys[j] = n;
    t->names[j] = name;
    t->used++;
    return 0;
}

ELT_HIDDEN void
names_free(NameTable *t)
{
    if (t->keys != NULL) {
        for (size_t i = 0; i <= t->mask; i++) {
            if (t->keys[i] != NULL) {
                Py_DECREF(t->names[i]);
            }
        }
    }
    PyMem_Free(t->keys);
    PyMem_Free(t->names);
    *t = (NameTable){NULL, NULL, 0, 0};
}
