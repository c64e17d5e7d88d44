/* profkit.profilers.elt._native: recording the call trees (see native.h): each thread's
 * (parent, fid) -> node table and the enter/leave events on its stack of frames.
 *
 * Why together: these run on every call of the profiled program and share the node
 * table and the frame stack; exporting the trees is export.c's (once, at the end).
 */
#include "native.h"

/* A Python clock's reading in nanoseconds; -1 with an exception set when it fails. Runs
 * arbitrary code: the caller holds no pointer into a Thread across it. */
ELT_HIDDEN int64_t
python_ns(PyObject *clock)
{
    Py_INCREF(clock); /* the recorder may be cleared while the clock runs */
    PyObject *r = PyObject_CallNoArgs(clock);
    Py_DECREF(clock);
    if (r == NULL) {
        return -1;
    }
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    return (int64_t)v;
}

/* The key's hash: the parent's node number (0: the root) and the function. */
static inline uint64_t
hash_of(uint32_t parent, uintptr_t fid)
{
    uint64_t h = ((uint64_t)fid >> 4) * 0x9E3779B97F4A7C15ULL;
    h ^= ((uint64_t)parent + 1) * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 29);
}

/* The slot of node ``number`` for hash ``h`` in a table of ``mask + 1`` slots: the number
 * below, the hash's tag bits above (see Slot in native.h). The table is filled to at most
 * 3/4, so ``number <= mask``; at 2**32 slots the tag is empty and the slot is the number. */
static inline Slot
slot_of(uint32_t number, uint64_t h, size_t mask)
{
    return number | ((uint32_t)(h >> 32) & ~(uint32_t)mask);
}

/* A free slot for hash ``h`` (linear probing). */
static inline size_t
free_slot(const Slot *table, size_t mask, uint64_t h)
{
    size_t j = (size_t)h & mask;
    while (table[j] != 0) {
        j = (j + 1) & mask;
    }
    return j;
}

/* Twice the slots, filled from the nodes themselves in creation order (the slots keep
 * only a few bits of a hash, and fewer at each size: the nodes are read once, in order,
 * rather than the old table). */
static int
table_grow(Thread *t)
{
    size_t size = (t->mask + 1) * 2;
    Slot *table = big_alloc(size * sizeof(Slot));
    if (table == NULL) {
        return -1;
    }
    for (size_t g = 0; g < t->used; g++) {
        const Node *n = &t->numbered[g / CHUNK_NODES]->nodes[g % CHUNK_NODES];
        uint64_t h = hash_of(n->parent & NUMBER_MASK, fid_of(&t->fids, n));
        table[free_slot(table, size - 1, h)] = slot_of((uint32_t)(g + 1), h, size - 1);
    }
    big_free(t->table, (t->mask + 1) * sizeof(Slot));
    t->table = table;
    t->mask = size - 1;
    return 0;
}

/* A new chunk, last in ``t->numbered``; NULL when out of memory (or out of node numbers:
 * NUMBER_CAP). */
static Chunk *
chunk_new(Thread *t)
{
    size_t k = t->used / CHUNK_NODES;
    if (t->used >= NUMBER_CAP) {
        return NULL;
    }
    if (k >= t->numbered_cap) {
        size_t cap = t->numbered_cap ? t->numbered_cap * 2 : 16;
        Chunk **numbered = PyMem_Realloc(t->numbered, cap * sizeof(Chunk *));
        if (numbered == NULL) {
            return NULL;
        }
        t->numbered = numbered;
        t->numbered_cap = cap;
    }
    Chunk *c = chunk_alloc();
    if (c == NULL) {
        return NULL;
    }
    t->numbered[k] = c;
    return c;
}

/* The number of the child of node ``pnum`` (0: the root) for ``fid``, created on first
 * use; 0 when out of memory. Nodes never move: pointers to them stay valid across a
 * creation. */
ELT_HIDDEN uint32_t
child_of(Thread *t, uint32_t pnum, uintptr_t fid)
{
    uint64_t h = hash_of(pnum, fid);
    uint32_t low = (uint32_t)t->mask; /* a slot's number bits; the tag's are above */
    uint32_t tag = (uint32_t)(h >> 32) & ~low;
    size_t j = (size_t)h & t->mask;
    Slot slot;
    while ((slot = t->table[j]) != 0) {
        if ((slot & ~low) == tag) {
            uint32_t number = slot & low;
            const Node *n = numbered_node(t->numbered, number);
            if (fid_of(&t->fids, n) == fid && (n->parent & NUMBER_MASK) == pnum) {
                return number;
            }
        }
        j = (j + 1) & t->mask;
    }
    if ((t->used + 1) * 4 > (t->mask + 1) * 3) {
        if (table_grow(t) < 0) {
            return 0;
        }
        j = free_slot(t->table, t->mask, h);
    }
    size_t g = t->used;
    uint32_t fn = fid_intern(&t->fids, fid);
    if (fn == UINT32_MAX || (g % CHUNK_NODES == 0 && chunk_new(t) == NULL)) {
        return 0;
    }
    Node *n = &t->numbered[g / CHUNK_NODES]->nodes[g % CHUNK_NODES];
    uint32_t number = (uint32_t)(t->used + 1);
    *n = (Node){.fn = fn, .min = MIN_NONE, .parent = pnum};
    t->table[j] = slot_of(number, h, t->mask);
    t->used++;
    return number;
}

/* -- the two events ------------------------------------------------------------------ */

/* Record the call just popped off ``t`` (it is frames[t->depth]) as ending at ``now``:
 * statistics, timeline span and, with ``lines``, its event lines. */
ELT_HIDDEN int
close_frame(Recorder *self, Thread *t, int64_t now, int close_kind, int lines)
{
    Frame f = t->frames[t->depth]; /* a copy: event lines run Python code */
    int64_t duration = wrap_sub(now, f.start);
    if (close_call(t, f.node, f.number, duration, self->basetime) < 0) {
        return -1;
    }
    if (self->span_cap >= 0 && duration >= self->basetime
        && add_span(self, t, f.fid, f.start, now, t->depth) < 0) {
        return -1;
    }
    if (lines && self->emit != NULL) {
        return lines_on_close(self, t, t->depth + 1, f.node, f.kind, duration, close_kind);
    }
    return 0;
}

/* close_frame for a leave that matched the top of the stack: without a timeline or event
 * lines (the common case) only the statistics, inline, and no copy of the frame. */
static inline int
close_top(Recorder *self, Thread *t, int64_t now, int close_kind)
{
    if (self->span_cap < 0 && self->emit == NULL) {
        const Frame *f = &t->frames[t->depth];
        return close_call(t, f->node, f->number, wrap_sub(now, f->start), self->basetime);
    }
    return close_frame(self, t, now, close_kind, 1);
}

/* A call starts: ``fid`` under the top of the stack. For a C function (``callable`` set,
 * see ccalls.c) only when ``caller`` — the code that calls it — is the top of the stack
 * (a filtered-out caller's C calls stay in that caller's time), and the node is named
 * from the callable when it is new. */
ELT_ALWAYS_INLINE static inline int
enter_call(Recorder *self, uintptr_t fid, int kind, uintptr_t caller, PyObject *callable)
{
    if (gone(self)) {
        return 0;
    }
    Thread *t = caller != 0 ? known_thread(self) : current_thread(self);
    if (t == NULL) {
        return -1;
    }
    if (t == &SILENT) {
        return 0;
    }
    /* A C call: nothing to do (not even a Python clock's call) unless its caller is the
     * top of the stack; checked again below, after the clock. */
    if (caller != 0 && (t->depth == 0 || t->frames[t->depth - 1].fid != caller)) {
        return 0;
    }
    /* A Python clock is read before the push, not after: it runs arbitrary code (another
     * thread's export closing this stack, a nested enter growing it) that would
     * invalidate a frame pushed before it. The C clock runs no code and is read last, so
     * the call's time excludes the bookkeeping. */
    PyObject *clock = self->clock; /* only compared with NULL after the call */
    int64_t start = 0;
    if (clock != NULL) {
        start = python_ns(clock);
        if (start == -1 && PyErr_Occurred()) {
            return -1;
        }
        /* The clock's code may have decided this thread anew (quiet_this_thread): that
         * decision holds for this event too (t itself stays valid either way). */
        if (tls_serial == self->serial && tls_thread != t) {
            t = tls_thread;
            if (t == &SILENT) {
                return 0;
            }
        }
    }
    Node *parent = &t->root;
    uint32_t pnum = 0;
    if (t->depth) {
        parent = t->frames[t->depth - 1].node;
        pnum = t->frames[t->depth - 1].number;
    }
    if (caller != 0 && fid_of(&t->fids, parent) != caller) {
        return 0;
    }
    uint32_t num = parent->hit.last;
    Node *n = num != 0 ? numbered_node(t->numbered, num) : NULL;
    if (n == NULL || fid_of(&t->fids, n) != fid) {
        /* Callers repeat sequences of callees (a, b, c, a, b, c): the callee that came
         * after the last one last time is the next guess, before the node table. */
        Node *last = n;
        num = last != NULL ? last->hit.next : 0;
        n = num != 0 ? numbered_node(t->numbered, num) : NULL;
        if (n == NULL || fid_of(&t->fids, n) != fid) {
            num = child_of(t, pnum, fid);
            if (num == 0) {
                PyErr_NoMemory();
                return -1;
            }
            n = numbered_node(t->numbered, num);
            if (last != NULL) {
                last->hit.next = num;
            }
        }
        parent->hit.last = num;
    }
    /* No Python code runs here (strings and an int-keyed dict: nothing the garbage
     * collector tracks is allocated), so n stays valid. */
    if (callable != NULL && !(n->parent & NAMED) && name_c_node(self, t, n, callable) < 0) {
        return -1;
    }
    if (t->depth == t->cap) {
        if (t->cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(Frame)) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        Frame *frames = PyMem_Realloc(t->frames, (size_t)cap * sizeof(Frame));
        if (frames == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->frames = frames;
        t->cap = cap;
    }
    Frame *f = &t->frames[t->depth++];
    f->node = n;
    f->fid = fid;
    f->number = num;
    f->kind = kind;
    if (self->emit == NULL) { /* the hot path: no Python code from the push to here */
        f->start = clock == NULL ? monotonic_ns() : start;
        return 0;
    }
    /* Event lines run Python code: from here on, the frame is found again by index. */
    Py_ssize_t index = t->depth;
    f->start = clock == NULL ? monotonic_ns() : start; /* provisional, for an export meanwhile */
    if (self->basetime <= 0) {
        /* Every line is final at once (lines.py's write-at-once form). */
        if (emit_line(self, t, index - 1, OPEN_WORD[kind], n, "") < 0) {
            return -1;
        }
        if (t->written < index + 1) {
            t->written = index + 1;
        }
    }
    if (clock == NULL) {
        start = monotonic_ns();
        if (t->depth >= index && t->frames[index - 1].node == n) {
            t->frames[index - 1].start = start;
        }
    }
    return self->basetime > 0 ? lines_on_open(self, t, start) : 0;
}

ELT_HIDDEN int
do_enter(Recorder *self, uintptr_t fid, int kind)
{
    return enter_call(self, fid, kind, 0, NULL);
}

ELT_HIDDEN int
do_c_enter(Recorder *self, uintptr_t fid, uintptr_t caller, PyObject *callable)
{
    return enter_call(self, fid, OPEN_ENTER, caller, callable);
}

/* A C call ends: closed only when it is the top of the stack and was called by
 * ``caller`` (never a resync: an unrecorded call of the same C function, from a
 * filtered-out caller, must not close a recorded one further down). */
ELT_HIDDEN int
do_c_leave(Recorder *self, uintptr_t fid, uintptr_t caller)
{
    if (gone(self)) {
        return 0;
    }
    int64_t now = now_ns(self);
    if (now == -1 && PyErr_Occurred()) {
        return -1;
    }
    Thread *t = known_thread(self);
    if (t == &SILENT || t->depth < 2 || t->frames[t->depth - 1].fid != fid
        || t->frames[t->depth - 2].fid != caller) {
        return 0;
    }
    t->depth--;
    return close_top(self, t, now, CLOSE_LEAVE);
}

/* A call ends at ``now`` (the clock is read first, before any bookkeeping). */
ELT_HIDDEN int
leave_at(Recorder *self, uintptr_t fid, int close_kind, int64_t now)
{
    /* May call new_thread(); without event lines no Python code runs after it. */
    Thread *t = current_thread(self);
    if (t == NULL) {
        return -1;
    }
    if (t == &SILENT || t->depth == 0) {
        return 0;
    }
    if (t->frames[t->depth - 1].fid == fid) {
        t->depth--;
        return close_top(self, t, now, close_kind);
    }
    /* Resync: a deeper match means the calls above it missed their leave (closed now,
     * at the same instant); no match means it was entered before recording began. */
    for (Py_ssize_t i = t->depth - 2; i >= 0; i--) {
        if (t->frames[i].fid == fid) {
            while (t->depth > i + 1) { /* re-read: event lines run Python code */
                t->depth--;
                if (close_frame(self, t, now, CLOSE_LEAVE, 1) < 0) {
                    return -1;
                }
            }
            if (t->depth <= i) {
                return 0; /* closed meanwhile */
            }
            t->depth--;
            return close_frame(self, t, now, close_kind, 1);
        }
    }
    return 0;
}

ELT_HIDDEN int
do_leave(Recorder *self, uintptr_t fid, int close_kind)
{
    if (gone(self)) {
        return 0;
    }
    int64_t now = now_ns(self);
    if (now == -1 && PyErr_Occurred()) {
        return -1;
    }
    return leave_at(self, fid, close_kind, now);
}
