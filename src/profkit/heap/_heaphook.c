/* profkit.heap._heaphook: sampled allocation tracking for the heap half of the profiling API.
 *
 * Why C: an allocator hook runs on every PyMem_Malloc / PyObject_Malloc of the program, tens of
 * millions a second; in Python it would cost more than the program. Here an allocation that is
 * not sampled costs one thread-local subtraction and a compare; a free costs one probe of a
 * small hash table (only when something sampled is alive).
 *
 * What it does:
 *   - wraps the PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ allocators (both are called with the GIL
 *     held, so the shared log needs no lock), chaining to the allocators that were installed
 *     before it; PYMEM_DOMAIN_RAW is left alone (it runs without the GIL, where no Python
 *     stack can be read safely);
 *   - chooses allocations by bytes: each thread counts down a random number of bytes drawn from
 *     an exponential distribution with the configured mean, and the allocation that crosses
 *     zero is sampled. An allocation of size s is then sampled with probability
 *     p = 1 - exp(-s / mean), so large allocations are almost always seen, and weighting each
 *     sample by s / p makes the estimated totals unbiased (as tcmalloc and Go's heap profiler do);
 *   - records, for a sampled allocation, its address, size, weight, thread and Python stack (code
 *     objects and instruction offsets, read from the interpreter's frame records without calling
 *     Python, as tracemalloc does), and for a sampled block that is freed, a free event;
 *   - hands the log to Python on drain(), which turns offsets into line numbers.
 *
 * Re-entrancy: nothing here calls back into Python while a hook runs; the log grows with libc's
 * realloc, never the Python allocators. Code objects in the log are kept alive by a reference.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1 /* the frame record layout (internal/pycore_frame.h), as tracemalloc */
#endif
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pycore_frame.h"

#if PY_VERSION_HEX >= 0x030D0000
#define CURRENT_FRAME(ts) ((ts)->current_frame)
#define FRAME_CODE(f) (_PyFrame_GetCode(f))
#define UNCHECKED_TSTATE() PyThreadState_GetUnchecked()
#else
#define CURRENT_FRAME(ts) ((ts)->cframe->current_frame)
#define FRAME_CODE(f) ((f)->f_code)
#define UNCHECKED_TSTATE() _PyThreadState_UncheckedGet()
#endif

#define MAX_DEPTH 128

typedef struct {
    PyMemAllocatorEx previous;
    PyMemAllocatorDomain domain;
} Domain;

static Domain domains[2] = {{.domain = PYMEM_DOMAIN_MEM}, {.domain = PYMEM_DOMAIN_OBJ}};

enum { EV_ALLOC = 1, EV_FREE = 2 };

/* An object allocated by PyObject_Malloc starts at the block, or after the GC header, or
 * after the GC header and the 3.12+ pre-header: the type pointer (ob_type, one word into the
 * object) is looked for at these offsets, and Python keeps the one that is a known type. */
#define N_CAND 3
static const size_t cand_offsets[N_CAND] = {0, 2 * sizeof(void *), 4 * sizeof(void *)};

typedef struct {
    uint64_t id;         /* sample id: alloc and its free share it */
    uintptr_t ptr;       /* the block (alloc) */
    size_t size;         /* bytes asked for (alloc) */
    double weight;       /* bytes this sample stands for (alloc) */
    unsigned long thread;
    uintptr_t cand[N_CAND]; /* type-pointer candidates, read at free (free) or drain (alloc) */
    uint32_t frame_start; /* into the frame arrays */
    uint16_t depth;
    uint8_t kind;
    uint8_t domain;      /* 0: PYMEM_DOMAIN_MEM (buffers), 1: PYMEM_DOMAIN_OBJ (objects) */
} Event;

typedef struct {
    PyCodeObject *code; /* strong reference */
    int lasti;          /* in code units */
} FrameRec;

typedef struct {
    Event *events;
    size_t n_events, cap_events;
    FrameRec *frames;
    size_t n_frames, cap_frames;
} Log;

static Log log_ = {0};

/* Open addressing: sampled address -> sample id; 0 address = empty, 1 = tombstone. */
typedef struct {
    uintptr_t key;
    uint64_t id;
    size_t size;
} Slot;
static Slot *table = NULL;

/* A free is checked against this bitmap before the table: one bit per 16-byte address
 * slot, folded to 64 Ki bits, set for every sampled address. Most frees are of blocks never
 * sampled and stop at one load; the bits are rebuilt from the live entries when too many
 * stale ones have built up. */
#define FILTER_BITS (1u << 16)
static uint64_t filter[FILTER_BITS / 64];
static size_t filter_set_since_rebuild = 0;

static inline size_t
filter_index(uintptr_t key)
{
    return (size_t)((key >> 4) ^ (key >> 20)) & (FILTER_BITS - 1);
}

static inline int
filter_may_hold(uintptr_t key)
{
    size_t i = filter_index(key);
    return (filter[i >> 6] >> (i & 63)) & 1;
}
static size_t table_cap = 0, table_used = 0, table_live = 0;

static int installed = 0;
static double mean_bytes = 512.0 * 1024.0;
static uint64_t next_id = 1;
static uint64_t dropped = 0; /* samples lost to a failed log growth (counted, never silent) */
static uint64_t seed_epoch = 1;

/* initial-exec: each access reads straight from the thread pointer. The default model for a
 * shared object calls __tls_get_addr, several times on every allocation of the program. */
#define FAST_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local int64_t countdown FAST_TLS = -1; /* bytes to the next sample; < 0: draw */
static _Thread_local uint64_t rng_state FAST_TLS = 0;
static _Thread_local uint64_t rng_epoch FAST_TLS = 0;
/* > 0: this thread's allocations are not sampled (inside the hook, a drain, or pause()) */
static _Thread_local int in_hook FAST_TLS = 0;

static double
uniform01(void)
{
    if (rng_epoch != seed_epoch || rng_state == 0) {
        rng_state = (uint64_t)(uintptr_t)&rng_state ^ (seed_epoch * 0x9E3779B97F4A7C15ull) ^
                    (uint64_t)PyThread_get_thread_ident();
        if (rng_state == 0) rng_state = 0x2545F4914F6CDD1Dull;
        rng_epoch = seed_epoch;
    }
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0); /* in (0, 1) */
}

static int64_t
draw_countdown(void)
{
    double d = -log(uniform01()) * mean_bytes;
    return d < 1.0 ? 1 : (d > 4e18 ? (int64_t)4e18 : (int64_t)d);
}

/* -- the sampled-address table ------------------------------------------------------------ */

static size_t
slot_of(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static int
table_grow(void)
{
    size_t cap = table_cap ? table_cap * 2 : 1024;
    while (table_live * 2 >= cap) cap *= 2;
    Slot *fresh = calloc(cap, sizeof(Slot));
    if (fresh == NULL) return -1;
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].key > 1) {
            size_t j = slot_of(table[i].key, cap);
            while (fresh[j].key) j = (j + 1) & (cap - 1);
            fresh[j] = table[i];
        }
    }
    free(table);
    table = fresh;
    table_cap = cap;
    table_used = table_live;
    return 0;
}

static void
filter_rebuild(void)
{
    memset(filter, 0, sizeof(filter));
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].key > 1) {
            size_t b = filter_index(table[i].key);
            filter[b >> 6] |= (uint64_t)1 << (b & 63);
        }
    }
    filter_set_since_rebuild = 0;
}

static int
table_put(uintptr_t key, uint64_t id, size_t size)
{
    if ((table_used + 1) * 2 > table_cap && table_grow() < 0) return -1;
    size_t j = slot_of(key, table_cap);
    while (table[j].key > 1) {
        if (table[j].key == key) { /* a stale entry (freed through another path): replace */
            table[j].id = id;
            table[j].size = size;
            return 0;
        }
        j = (j + 1) & (table_cap - 1);
    }
    if (table[j].key == 0) table_used++;
    table[j].key = key;
    table[j].id = id;
    table[j].size = size;
    table_live++;
    size_t b = filter_index(key);
    filter[b >> 6] |= (uint64_t)1 << (b & 63);
    if (++filter_set_since_rebuild > 4 * table_live + 4096) filter_rebuild();
    return 0;
}

static Slot *
table_find(uintptr_t key)
{
    if (table_live == 0 || key <= 1 || !filter_may_hold(key)) return NULL;
    size_t j = slot_of(key, table_cap);
    while (table[j].key) {
        if (table[j].key == key) return &table[j];
        j = (j + 1) & (table_cap - 1);
    }
    return NULL;
}

/* Reads the type-pointer candidates of a live block of `size` bytes (0 where out of it). */
static void
read_candidates(uintptr_t ptr, size_t size, uintptr_t *cand)
{
    for (int k = 0; k < N_CAND; k++) {
        size_t at = cand_offsets[k] + sizeof(void *);
        cand[k] = (size >= at + sizeof(void *)) ? *(uintptr_t *)(ptr + at) : 0;
    }
}

/* -- the log ------------------------------------------------------------------------------ */

static Event *
log_event(void)
{
    if (log_.n_events == log_.cap_events) {
        size_t cap = log_.cap_events ? log_.cap_events * 2 : 4096;
        Event *grown = realloc(log_.events, cap * sizeof(Event));
        if (grown == NULL) return NULL;
        log_.events = grown;
        log_.cap_events = cap;
    }
    return &log_.events[log_.n_events++];
}

static int
log_frames_reserve(size_t n)
{
    if (log_.n_frames + n <= log_.cap_frames) return 0;
    size_t cap = log_.cap_frames ? log_.cap_frames * 2 : 16384;
    while (cap < log_.n_frames + n) cap *= 2;
    FrameRec *grown = realloc(log_.frames, cap * sizeof(FrameRec));
    if (grown == NULL) return -1;
    log_.frames = grown;
    log_.cap_frames = cap;
    return 0;
}

/* -- telling Python that the log has grown ----------------------------------------------- */

static PyObject *notify_callable = NULL; /* called (no arguments) at a safe point */
static size_t notify_threshold = 0;      /* 0: never */
static int notify_pending = 0;

static int
run_notify(void *unused)
{
    notify_pending = 0;
    if (notify_callable == NULL) return 0;
    PyObject *callable = notify_callable;
    Py_INCREF(callable);
    PyObject *r = PyObject_CallNoArgs(callable);
    Py_DECREF(callable);
    if (r == NULL) {
        /* the callable contains its own failures; anything left must not reach the program */
        PyErr_WriteUnraisable(callable);
        return 0;
    }
    Py_DECREF(r);
    return 0;
}

/* Asks the interpreter to run the callable at its next safe point (between bytecodes, in
 * the main thread) once the log holds `notify_threshold` events: so events reach the
 * profiler while the program runs, not only at collections and detach. */
static void
maybe_notify(void)
{
    if (notify_threshold == 0 || notify_pending || log_.n_events < notify_threshold) return;
    if (Py_AddPendingCall(run_notify, NULL) == 0) notify_pending = 1;
}

static int
frame_is_python(_PyInterpreterFrame *f)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (f->owner == FRAME_OWNED_BY_CSTACK) return 0;
#endif
    return !_PyFrame_IsIncomplete(f);
}

static void
record_alloc(void *ptr, size_t size, uint8_t domain)
{
    double p = -expm1(-(double)size / mean_bytes);
    double weight = p > 0 ? (double)size / p : (double)size;
    if (!(weight >= (double)size)) weight = (double)size;
    if (log_frames_reserve(MAX_DEPTH) < 0) {
        dropped++;
        return;
    }
    Event *ev = log_event();
    if (ev == NULL) {
        dropped++;
        return;
    }
    uint64_t id = next_id++;
    if (table_put((uintptr_t)ptr, id, size) < 0) {
        log_.n_events--;
        dropped++;
        return;
    }
    ev->id = id;
    ev->ptr = (uintptr_t)ptr;
    ev->domain = domain;
    memset(ev->cand, 0, sizeof(ev->cand));
    ev->size = size;
    ev->weight = weight;
    ev->thread = PyThread_get_thread_ident();
    ev->kind = EV_ALLOC;
    ev->frame_start = (uint32_t)log_.n_frames;
    uint16_t depth = 0;
    PyThreadState *ts = UNCHECKED_TSTATE();
    _PyInterpreterFrame *f = ts ? CURRENT_FRAME(ts) : NULL;
    for (; f != NULL && depth < MAX_DEPTH; f = f->previous) {
        if (!frame_is_python(f)) continue;
        PyCodeObject *code = FRAME_CODE(f);
        Py_INCREF(code);
        FrameRec *fr = &log_.frames[log_.n_frames++];
        fr->code = code;
        fr->lasti = _PyInterpreterFrame_LASTI(f);
        depth++;
    }
    ev->depth = depth;
    maybe_notify();
}

/* Called before the block goes back to the allocator: its words are still there (a
 * deallocator leaves ob_type in place), so the type can be told after the object is gone. */
static void
record_free(void *ptr, const uintptr_t *cand_read_before)
{
    Slot *slot = table_find((uintptr_t)ptr);
    if (slot == NULL) return;
    uint64_t id = slot->id;
    size_t size = slot->size;
    slot->key = 1;
    table_live--;
    Event *ev = log_event();
    if (ev == NULL) {
        dropped++;
        return;
    }
    memset(ev, 0, sizeof(*ev));
    ev->id = id;
    ev->kind = EV_FREE;
    ev->thread = PyThread_get_thread_ident();
    if (cand_read_before != NULL)
        memcpy(ev->cand, cand_read_before, sizeof(ev->cand));
    else
        read_candidates((uintptr_t)ptr, size, ev->cand);
    maybe_notify();
}

static inline void
maybe_sample(void *ptr, size_t size, uint8_t domain)
{
    if (ptr == NULL || in_hook) return;
    if (countdown < 0) countdown = draw_countdown();
    countdown -= (int64_t)size;
    if (countdown > 0) return;
    in_hook++;
    record_alloc(ptr, size, domain);
    countdown = draw_countdown();
    in_hook--;
}

/* -- the allocator functions -------------------------------------------------------------- */

static void *
hook_malloc(void *ctx, size_t size)
{
    Domain *d = ctx;
    void *ptr = d->previous.malloc(d->previous.ctx, size);
    maybe_sample(ptr, size, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

static void *
hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    Domain *d = ctx;
    void *ptr = d->previous.calloc(d->previous.ctx, nelem, elsize);
    maybe_sample(ptr, nelem * elsize, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

static void *
hook_realloc(void *ctx, void *old, size_t size)
{
    Domain *d = ctx;
    /* The old block's words are read before the allocator may move (and free) it. */
    uintptr_t cand[N_CAND] = {0};
    Slot *slot = (old != NULL && table_live) ? table_find((uintptr_t)old) : NULL;
    if (slot != NULL) read_candidates((uintptr_t)old, slot->size, cand);
    void *ptr = d->previous.realloc(d->previous.ctx, old, size);
    if (ptr == NULL) return NULL; /* old is untouched */
    /* As tracemalloc: a realloc is the old block's free and a new block's allocation. */
    if (slot != NULL) record_free(old, cand);
    maybe_sample(ptr, size, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

static void
hook_free(void *ctx, void *ptr)
{
    Domain *d = ctx;
    /* Frees are recorded even inside the hook, a drain or pause(): a sampled block freed
     * unseen would leave its address in the table, and a later drain would read the type
     * words of memory that may be unmapped by then. record_free calls no Python and no
     * Python allocator, so it is safe wherever a free can happen. */
    if (ptr != NULL && table_live && filter_may_hold((uintptr_t)ptr)) record_free(ptr, NULL);
    d->previous.free(d->previous.ctx, ptr);
}

/* -- the module ----------------------------------------------------------------------------- */

static void log_clear(Log *l);

static void
table_clear(void)
{
    free(table);
    table = NULL;
    table_cap = table_used = table_live = 0;
    memset(filter, 0, sizeof(filter));
    filter_set_since_rebuild = 0;
}

/* Once the hooks are off, frees are no longer seen: a block sampled and still alive now may
 * be freed (and its pages unmapped) before the next drain. So its type words are read now,
 * while it is certainly alive, and the table of sampled addresses is forgotten: a drain after
 * stop() reads no program memory. */
static void
settle_live_samples(void)
{
    for (size_t i = 0; i < log_.n_events; i++) {
        Event *ev = &log_.events[i];
        if (ev->kind != EV_ALLOC) continue;
        Slot *slot = table_find(ev->ptr);
        if (slot != NULL && slot->id == ev->id) read_candidates(ev->ptr, slot->size, ev->cand);
    }
    table_clear();
}

static PyObject *
heaphook_start(PyObject *self, PyObject *args)
{
    double mean;
    if (!PyArg_ParseTuple(args, "d", &mean)) return NULL;
    if (!(mean >= 1.0) || mean > 1e15) {
        PyErr_SetString(PyExc_ValueError, "the sampling mean must be between 1 byte and 1e15");
        return NULL;
    }
    if (installed) {
        PyErr_SetString(PyExc_RuntimeError, "allocation sampling is already running");
        return NULL;
    }
    /* A new session: whatever an earlier one left undrained describes blocks whose frees
     * were not seen, so it is dropped rather than reported as alive. */
    log_clear(&log_);
    table_clear();
    dropped = 0;
    notify_pending = 0;
    mean_bytes = mean;
    seed_epoch++;
    countdown = -1;
    for (int i = 0; i < 2; i++) {
        PyMem_GetAllocator(domains[i].domain, &domains[i].previous);
        PyMemAllocatorEx mine = {&domains[i], hook_malloc, hook_calloc, hook_realloc, hook_free};
        PyMem_SetAllocator(domains[i].domain, &mine);
    }
    installed = 1;
    Py_RETURN_NONE;
}

/* Uninstalls only when ours is still the installed allocator of every domain: a later hook
 * chained to us would otherwise be cut off (and would call into freed state). */
static PyObject *
heaphook_stop(PyObject *self, PyObject *unused)
{
    if (!installed) Py_RETURN_FALSE;
    for (int i = 0; i < 2; i++) {
        PyMemAllocatorEx now;
        PyMem_GetAllocator(domains[i].domain, &now);
        if (now.ctx != &domains[i] || now.malloc != hook_malloc) Py_RETURN_FALSE;
    }
    for (int i = 0; i < 2; i++) PyMem_SetAllocator(domains[i].domain, &domains[i].previous);
    installed = 0;
    settle_live_samples();
    Py_RETURN_TRUE;
}

static void
log_clear(Log *l)
{
    for (size_t i = 0; i < l->n_frames; i++) Py_XDECREF(l->frames[i].code);
    free(l->events);
    free(l->frames);
    memset(l, 0, sizeof(*l));
}

/* drain() -> (events, dropped): events is a list of
 *   ("alloc", id, size, weight, thread, ((code, line), ...))  innermost frame first, or
 *   ("free", id)
 * in the order they happened. The log is detached first, so allocations made while the
 * Python objects are built go into a fresh log, not the one being read. */
static PyObject *
heaphook_drain(PyObject *self, PyObject *unused)
{
    Log taken = log_;
    memset(&log_, 0, sizeof(log_));
    /* The objects built below are this drain's own, not the program's: never sample them
     * (with a small mean they would fill the fresh log as fast as this empties the old). */
    int was_in_hook = in_hook;
    in_hook = 1;
    uint64_t lost = dropped;
    dropped = 0;
    PyObject *alloc_s = NULL, *free_s = NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto fail;
    alloc_s = PyUnicode_InternFromString("alloc");
    free_s = PyUnicode_InternFromString("free");
    if (alloc_s == NULL || free_s == NULL) goto fail;
    for (size_t i = 0; i < taken.n_events; i++) {
        Event *ev = &taken.events[i];
        PyObject *item;
        if (ev->kind == EV_FREE) {
            item = Py_BuildValue("(OK(KKK))", free_s, (unsigned long long)ev->id,
                                 (unsigned long long)ev->cand[0], (unsigned long long)ev->cand[1],
                                 (unsigned long long)ev->cand[2]);
        } else {
            /* still alive (its sample id still at its address): read its type words now */
            Slot *slot = table_find(ev->ptr);
            if (slot != NULL && slot->id == ev->id) read_candidates(ev->ptr, slot->size, ev->cand);
            PyObject *stack = PyTuple_New(ev->depth);
            if (stack == NULL) goto fail;
            for (uint16_t k = 0; k < ev->depth; k++) {
                FrameRec *fr = &taken.frames[ev->frame_start + k];
                int line = PyCode_Addr2Line(fr->code, fr->lasti * (int)sizeof(_Py_CODEUNIT));
                PyObject *pair = Py_BuildValue("(Oi)", (PyObject *)fr->code, line);
                if (pair == NULL) {
                    Py_DECREF(stack);
                    goto fail;
                }
                PyTuple_SET_ITEM(stack, k, pair);
            }
            item = Py_BuildValue("(OKndkNbK(KKK))", alloc_s, (unsigned long long)ev->id,
                                 (Py_ssize_t)ev->size, ev->weight, ev->thread, stack,
                                 (char)ev->domain, (unsigned long long)ev->ptr,
                                 (unsigned long long)ev->cand[0], (unsigned long long)ev->cand[1],
                                 (unsigned long long)ev->cand[2]);
        }
        if (item == NULL) goto fail;
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) goto fail;
    }
    log_clear(&taken);
    Py_DECREF(alloc_s);
    Py_DECREF(free_s);
    in_hook = was_in_hook;
    return Py_BuildValue("(NK)", out, (unsigned long long)lost);
fail:
    in_hook = was_in_hook;
    log_clear(&taken);
    Py_XDECREF(alloc_s);
    Py_XDECREF(free_s);
    Py_XDECREF(out);
    return NULL;
}

/* After fork the child holds the parent's log and table: both describe the parent. */
static PyObject *
heaphook_reset(PyObject *self, PyObject *unused)
{
    log_clear(&log_);
    table_clear();
    dropped = 0;
    notify_pending = 0;
    seed_epoch++;
    Py_RETURN_NONE;
}

static PyObject *
heaphook_set_notify(PyObject *self, PyObject *args)
{
    PyObject *callable;
    Py_ssize_t threshold;
    if (!PyArg_ParseTuple(args, "On", &callable, &threshold)) return NULL;
    if (callable != Py_None && !PyCallable_Check(callable)) {
        PyErr_SetString(PyExc_TypeError, "set_notify: the first argument must be callable or None");
        return NULL;
    }
    if (threshold < 0) {
        PyErr_SetString(PyExc_ValueError, "set_notify: the threshold must be >= 0");
        return NULL;
    }
    Py_XSETREF(notify_callable, callable == Py_None ? NULL : Py_NewRef(callable));
    notify_threshold = notify_callable ? (size_t)threshold : 0;
    Py_RETURN_NONE;
}

/* pause()/resume(): this thread's allocations are not sampled in between (profkit's own
 * bookkeeping, e.g. turning a drained log into event objects, is not the program's). */
static PyObject *
heaphook_pause(PyObject *self, PyObject *unused)
{
    in_hook++;
    Py_RETURN_NONE;
}

static PyObject *
heaphook_resume(PyObject *self, PyObject *unused)
{
    if (in_hook > 0) in_hook--;
    Py_RETURN_NONE;
}

static PyObject *
heaphook_status(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{s:O,s:d,s:n,s:K}", "installed", installed ? Py_True : Py_False,
                         "mean_bytes", mean_bytes, "live_samples", (Py_ssize_t)table_live,
                         "dropped", (unsigned long long)dropped);
}

static PyMethodDef methods[] = {
    {"start", heaphook_start, METH_VARARGS, "start(mean_bytes): install the sampling hooks."},
    {"stop", heaphook_stop, METH_NOARGS,
     "stop() -> bool: uninstall when ours is still the installed allocator."},
    {"drain", heaphook_drain, METH_NOARGS, "drain() -> (events, dropped) since the last drain."},
    {"reset", heaphook_reset, METH_NOARGS, "reset(): forget everything (the child after fork)."},
    {"set_notify", heaphook_set_notify, METH_VARARGS,
     "set_notify(callable or None, threshold): call it at a safe point once the log holds "
     "threshold events."},
    {"pause", heaphook_pause, METH_NOARGS, "pause(): stop sampling this thread's allocations."},
    {"resume", heaphook_resume, METH_NOARGS, "resume(): undo one pause()."},
    {"status", heaphook_status, METH_NOARGS, "status() -> dict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "profkit.heap._heaphook",
    "Sampled allocation tracking in C (see profkit.heap).", -1, methods,
};

PyMODINIT_FUNC
PyInit__heaphook(void)
{
    return PyModule_Create(&module);
}
