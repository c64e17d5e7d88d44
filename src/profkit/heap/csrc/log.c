/* The event log: what the hooks saw since the last drain (see heaphook.h).
 *
 * A sampled allocation records its Python stack here, read from the interpreter's frame
 * records without calling Python; a sampled block's free records the words its type may be
 * told by. The log grows with libc's realloc, never a Python allocator (the hooks run inside
 * one). When it holds enough events, the interpreter is asked to run the drain callable at
 * its next safe point.
 */
#include "heaphook.h" /* Python.h first, as the C API asks */
#include "internal/pycore_frame.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if PY_VERSION_HEX >= 0x030D0000
#define CURRENT_FRAME(ts) ((ts)->current_frame)
#define FRAME_CODE(f) (_PyFrame_GetCode(f))
#define UNCHECKED_TSTATE() PyThreadState_GetUnchecked()
#else
#define CURRENT_FRAME(ts) ((ts)->cframe->current_frame)
#define FRAME_CODE(f) ((f)->f_code)
#define UNCHECKED_TSTATE() _PyThreadState_UncheckedGet()
#endif

HIDDEN Log log_ = {0};
HIDDEN uint64_t dropped = 0;
HIDDEN PyObject *notify_callable = NULL; /* called (no arguments) at a safe point */
HIDDEN size_t notify_threshold = 0;      /* 0: never */
HIDDEN int notify_pending = 0;

static uint64_t next_id = 1;

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

HIDDEN void
log_clear(Log *l)
{
    for (size_t i = 0; i < l->n_frames; i++) Py_XDECREF(l->frames[i].code);
    free(l->events);
    free(l->frames);
    memset(l, 0, sizeof(*l));
}

/* -- telling Python that the log has grown ----------------------------------------------- */

static int
run_notify(void *Py_UNUSED(unused))
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

/* -- events ------------------------------------------------------------------------------ */

static int
frame_is_python(_PyInterpreterFrame *f)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (f->owner == FRAME_OWNED_BY_CSTACK) return 0;
#endif
    return !_PyFrame_IsIncomplete(f);
}

HIDDEN void
record_alloc(void *ptr, size_t size, uint8_t domain, int exact)
{
    double weight = sample_weight(size, exact, mean_bytes);
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
HIDDEN void
record_free(void *ptr, const uintptr_t *cand_read_before)
{
    Slot *slot = table_find((uintptr_t)ptr);
    if (slot == NULL) return;
    uint64_t id = slot->id;
    size_t size = slot->size;
    table_forget(slot);
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

/* Once the hooks are off, frees are no longer seen: a block sampled and still alive now may
 * be freed (and its pages unmapped) before the next drain. So its type words are read now,
 * while it is certainly alive, and the table of sampled addresses is forgotten: a drain after
 * stop() reads no program memory. */
HIDDEN void
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
