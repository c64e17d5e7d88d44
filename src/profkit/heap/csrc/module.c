/* The Python functions of profkit.heap._heaphook (see heaphook.h): start and stop the hooks,
 * drain the log into Python objects, reset after fork, pause/resume, status.
 */
#include "heaphook.h" /* Python.h first, as the C API asks */
#include "internal/pycore_frame.h" /* _Py_CODEUNIT (internal from 3.13) */

#include <math.h>
#include <string.h>

/* Forget the log, the sampled addresses and the counters, and reseed the threads' draws:
 * a new session (start) and a forked child (reset) begin from nothing. */
static void
forget_all(void)
{
    log_clear(&log_);
    table_clear();
    dropped = 0;
    notify_pending = 0;
    tally_clear();
    seed_epoch++;
}

static PyObject *
heaphook_start(PyObject *Py_UNUSED(self), PyObject *args)
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
    forget_all();
    mean_bytes = mean;
    exact_bytes = (size_t)ceil(mean);
    hooks_install();
    Py_RETURN_NONE;
}

/* Uninstalls only when ours is still the installed allocator of every domain: a later hook
 * chained to us would otherwise be cut off (and would call into freed state). */
static PyObject *
heaphook_stop(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    if (!installed || !hooks_are_ours()) Py_RETURN_FALSE;
    hooks_uninstall();
    settle_live_samples();
    Py_RETURN_TRUE;
}

/* One drain's (code, instruction) -> (code, line) pairs, direct-mapped. The stacks of a batch
 * share most of their frames (the program's outer functions, and profkit's own under them in
 * `profkit run`), and each pair cost a scan of the code's line table and a new tuple: about a
 * tenth of memory mode's delivery (callgrind, 3.11). A slot's pair holds its code object, so
 * no other code object can take that address while the drain runs. */
#define PAIR_SLOTS 256
typedef struct {
    PyCodeObject *code;
    int lasti;
    PyObject *pair; /* strong reference; NULL: empty */
} PairSlot;

static PyObject *
frame_pair(PairSlot *cache, const FrameRec *fr)
{
    size_t h = (((uintptr_t)fr->code >> 4) ^ ((size_t)(unsigned)fr->lasti * 0x9E3779B1u)) &
               (PAIR_SLOTS - 1);
    PairSlot *slot = &cache[h];
    if (slot->pair != NULL && slot->code == fr->code && slot->lasti == fr->lasti)
        return Py_NewRef(slot->pair);
    int line = PyCode_Addr2Line(fr->code, fr->lasti * (int)sizeof(_Py_CODEUNIT));
    PyObject *pair = Py_BuildValue("(Oi)", (PyObject *)fr->code, line);
    if (pair == NULL) return NULL;
    Py_XSETREF(slot->pair, Py_NewRef(pair));
    slot->code = fr->code;
    slot->lasti = fr->lasti;
    return pair;
}

static void
pairs_clear(PairSlot *cache)
{
    for (size_t i = 0; i < PAIR_SLOTS; i++) Py_CLEAR(cache[i].pair);
}

/* drain() -> (events, dropped): events is a list of
 *   ("alloc", id, size, weight, thread, ((code, line), ...), domain, address, type words)
 *   with the stack innermost frame first, or
 *   ("free", id, type words)
 * in the order they happened. The log is detached first, so allocations made while the
 * Python objects are built go into a fresh log, not the one being read. */
static PyObject *
heaphook_drain(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    Log taken = log_;
    memset(&log_, 0, sizeof(log_));
    /* The objects built below are this drain's own, not the program's: never sample them
     * (with a small mean they would fill the fresh log as fast as this empties the old). */
    hook_pause();
    uint64_t lost = dropped;
    dropped = 0;
    PyObject *alloc_s = NULL, *free_s = NULL;
    PairSlot pairs[PAIR_SLOTS] = {{0}};
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
                PyObject *pair = frame_pair(pairs, &taken.frames[ev->frame_start + k]);
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
    pairs_clear(pairs);
    Py_DECREF(alloc_s);
    Py_DECREF(free_s);
    hook_resume();
    return Py_BuildValue("(NK)", out, (unsigned long long)lost);
fail:
    hook_resume();
    log_clear(&taken);
    pairs_clear(pairs);
    Py_XDECREF(alloc_s);
    Py_XDECREF(free_s);
    Py_XDECREF(out);
    return NULL;
}

/* After fork the child holds the parent's log and table: both describe the parent. */
static PyObject *
heaphook_reset(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    forget_all();
    Py_RETURN_NONE;
}

/* In a forked child going on sampling: as reset(), but the parent's log is forgotten, not
 * freed. Its frames hold references to the parent's code objects, and releasing them wrote
 * to each one's page (and free() to the allocator's), all copied from the parent for
 * nothing (issue 22, item 13); the buffers stay the parent's, untouched. */
static PyObject *
heaphook_reset_after_fork(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    memset(&log_, 0, sizeof(log_));
    forget_all();
    Py_RETURN_NONE;
}

static PyObject *
heaphook_set_notify(PyObject *Py_UNUSED(self), PyObject *args)
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

/* on_gc(phase, info): a gc.callbacks entry that costs no Python call. After a full
 * collection (generation 2, gc.collect() included) with events waiting, it calls the
 * set_notify callable, so the frees of that collection are delivered before it returns;
 * after every other collection (the young ones come every few hundred allocations) it
 * returns at once. A Python callback for the same (a bound method, twice a collection) cost
 * memory mode a Python call per 350 allocations of small-object churn. */
static PyObject *
heaphook_on_gc(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "on_gc(phase, info): two arguments");
        return NULL;
    }
    if (log_.n_events == 0 || notify_callable == NULL || !PyUnicode_Check(args[0]) ||
        PyUnicode_CompareWithASCIIString(args[0], "stop") != 0 || !PyDict_Check(args[1]))
        Py_RETURN_NONE;
    PyObject *generation = PyDict_GetItemString(args[1], "generation"); /* borrowed */
    if (generation == NULL || !PyLong_Check(generation) || PyLong_AsLong(generation) != 2) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *callable = Py_NewRef(notify_callable);
    PyObject *r = PyObject_CallNoArgs(callable);
    Py_DECREF(callable);
    return r;
}

/* pause()/resume(): this thread's allocations are not sampled in between (profkit's own
 * bookkeeping, e.g. turning a drained log into event objects, is not the program's). */
static PyObject *
heaphook_pause(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    hook_pause();
    Py_RETURN_NONE;
}

static PyObject *
heaphook_resume(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    hook_resume();
    Py_RETURN_NONE;
}

static PyObject *
heaphook_status(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    return Py_BuildValue("{s:O,s:d,s:n,s:K}", "installed", installed ? Py_True : Py_False,
                         "mean_bytes", mean_bytes, "live_samples", (Py_ssize_t)table_live,
                         "dropped", (unsigned long long)dropped);
}

/* strata() -> (exact_bytes, [(exact, size_class, allocations, bytes, samples, weight), ...]):
 * the exact tallies by size class since start (or reset), and the samples recorded in each
 * with their summed weights; classes with nothing are left out. Still there after stop(), so
 * a profile built after detach can use them; a paused thread's allocations are not in them. */
static PyObject *
heaphook_strata(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    PyObject *rows = PyList_New(0);
    if (rows == NULL) return NULL;
    for (int row = ROW_SAMPLED; row <= ROW_EXACT; row++) {
        for (int c = 0; c < N_CLASSES; c++) {
            uint64_t count = tally_count[row][c], bytes = tally_bytes[row][c];
            if (count == 0 && tally_samples[row][c] == 0) continue;
            PyObject *item = Py_BuildValue(
                "(OiKKKd)", row == ROW_EXACT ? Py_True : Py_False, c,
                (unsigned long long)count, (unsigned long long)bytes,
                (unsigned long long)tally_samples[row][c], tally_weight[row][c]);
            if (item == NULL || PyList_Append(rows, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(rows);
                return NULL;
            }
            Py_DECREF(item);
        }
    }
    return Py_BuildValue("(nN)", (Py_ssize_t)exact_bytes, rows);
}

/* pending() -> int: events waiting in the log. Cheap enough to ask after every collection,
 * where a drain (Python objects, a lock, a delivery) would cost the program far more. */
static PyObject *
heaphook_pending(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    return PyLong_FromSize_t(log_.n_events);
}

static PyMethodDef methods[] = {
    {"start", heaphook_start, METH_VARARGS, "start(mean_bytes): install the sampling hooks."},
    {"stop", heaphook_stop, METH_NOARGS,
     "stop() -> bool: uninstall when ours is still the installed allocator."},
    {"drain", heaphook_drain, METH_NOARGS, "drain() -> (events, dropped) since the last drain."},
    {"reset", heaphook_reset, METH_NOARGS, "reset(): forget everything (the child after fork)."},
    {"reset_after_fork", heaphook_reset_after_fork, METH_NOARGS,
     "reset_after_fork(): reset() in a forked child, the parent's log left unfreed."},
    {"set_notify", heaphook_set_notify, METH_VARARGS,
     "set_notify(callable or None, threshold): call it at a safe point once the log holds "
     "threshold events."},
    {"on_gc", (PyCFunction)(void (*)(void))heaphook_on_gc, METH_FASTCALL,
     "on_gc(phase, info): for gc.callbacks: after a full collection, the set_notify callable "
     "when events wait."},
    {"pause", heaphook_pause, METH_NOARGS, "pause(): stop sampling this thread's allocations."},
    {"resume", heaphook_resume, METH_NOARGS, "resume(): undo one pause()."},
    {"strata", heaphook_strata, METH_NOARGS,
     "strata() -> (exact_bytes, rows): exact bytes by size class and the samples in each."},
    {"pending", heaphook_pending, METH_NOARGS, "pending() -> int: events waiting in the log."},
    {"status", heaphook_status, METH_NOARGS, "status() -> dict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.heap._heaphook",
    .m_doc = "Sampled allocation tracking in C (see profkit.heap).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__heaphook(void)
{
    return PyModule_Create(&module);
}
