/* profkit.collect._profhook: the sys.setprofile backend's dispatcher in C, the fast path
 * of setprofile._make_hook's ``hook``, installed with PyEval_SetProfile as _lsprof
 * (cProfile) installs its own. This header holds what the units share; they are split by
 * concern:
 *   codes.c     the per-code cache of the Python tables' rows (status, generator bytecode);
 *   natives.c   C calls: the per-C-function cache of ids and the c_call/c_return path
 *               (natives.h: the cache's lookup, inline for dispatch.c's fast path);
 *   dispatch.c  one event: the failure rule, the fast paths, the slow path's call;
 *   module.c    the Hook type (constructor, Python-level entry, GC) and module init.
 * hatch_build.py compiles them into one extension.
 *
 * Why: a Python profile function costs a Python call per event, plus (3.11) a
 * FastToLocals/LocalsToFast round trip of the frame around it. On 3.11, where
 * sys.monitoring does not exist, that made the setprofile backend -- and with it ELT
 * trace mode -- 2-5x cProfile's overhead. Here an event of a function whose status is
 * known costs a probe of the hook's per-code cache and the profiler's bound method,
 * called from C -- or, when the profiler offers one (``__profkit_idcall__``, _idcall.h),
 * its C function, called directly; a C call (c_call/c_return/c_exception) made by such
 * a function costs a second probe, of the per-C-function cache, and the same callback.
 *
 * What it does is exactly what ``hook`` does (setprofile.py, _pyhook.py), on the same
 * tables, which the Python side owns and fills: ``status`` (fid -> REJECTED/PLAIN/GEN/
 * PRE), ``gen_code`` (fid -> (co_code, offset of the first RESUME)), ``throwing`` (frames
 * a throw() entered, which the fast path keeps too: dispatch.c) and ``state``
 * ([running]). Everything the fast path does not decide -- first sight of a code, frames
 * running at attach, a C call of an unknown caller, a stopped session -- goes to the
 * Python ``slow(frame, event, arg)``, as it does
 * from ``hook``. The failure rule is the same too: an exception from the profiler goes to
 * ``fail(exc, what)``; a RecursionError is the program's and is dropped; anything
 * ``fail`` or ``slow`` raises otherwise goes into the program.
 *
 * Installing: the object is callable as a Python profile function, so
 * ``threading.setprofile(hook)`` / ``sys.setprofile(hook)`` work; the first event a thread
 * delivers through that call replaces the Python-level trampoline with the C function for
 * that thread. ``sys.setprofile(None)`` removes it as usual.
 */
#ifndef PROFKIT_PROFHOOK_H
#define PROFKIT_PROFHOOK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include "../../_pyerr_compat.h"
#include "../../_idcall.h"

#if PY_VERSION_HEX < 0x030B0000
#error "profkit needs Python 3.11 or newer"
#endif

/* Symbols shared between the units, not exported from the extension. */
#if defined(__GNUC__)
#define PH_HIDDEN __attribute__((visibility("hidden")))
#else
#define PH_HIDDEN
#endif

/* setprofile_slow.py's REJECTED; PLAIN and GEN arrive as plain_fast/gen_fast, and PRE is
 * only the slow path's. */
#define ST_REJECTED 0

/* One code object's row of the Python tables, cached: ``status`` and ``gen_code`` rows
 * never change once written while the session runs (``classify`` writes them inside one
 * ``slow`` call; only ``stop()`` clears them, after setting ``state`` to stopped, and this
 * cache is read only while ``state`` says running). The key is the code object's address:
 * the session's function table keeps every classified code alive, so no other code object
 * can take that address while this hook lives. */
typedef struct {
    void *code;       /* key; NULL: empty slot */
    PyObject *fid;    /* id(code): the int the profiler is called with */
    PyObject *raw;    /* generators: co_code as gen_code holds it; else NULL */
    long status;
    long first;       /* generators: offset of the first RESUME */
} Entry;

/* One C function's id, cached (natives.c). The key is what the function's name depends
 * on: its PyMethodDef and the owner its qualified name is taken from (the type it is
 * bound to or whose instance it is bound to, or its module). The owner is not kept
 * alive: a weak reference tells whether the object at its address is still it. */
typedef struct {
    void *ml;         /* key; NULL: empty slot */
    PyObject *owner;  /* key, borrowed; may be NULL (a function bound to nothing) */
    PyObject *ref;    /* a weak reference to owner; NULL for a static type or NULL owner */
    PyObject *fid;    /* native_id(callable): the int the profiler is called with */
    uintptr_t raw;    /* fid's value for a C-form callback (see Target) */
    int has_raw;      /* 0: fid does not convert; only the Python form takes it */
} Native;

/* One profiler callback, (fid) -> None. When it is a bound method whose owner offers it
 * as a C function (the ``__profkit_idcall__`` protocol, _idcall.h), ``direct`` is that
 * function: called with the id's value, it skips the Python call (vectorcall, the int's
 * conversion, the returned None) on every event. */
typedef struct {
    PyObject *obj;    /* the callback, or NULL */
    int (*direct)(PyObject *owner, uintptr_t fid); /* or NULL: call obj */
    PyObject *owner;  /* borrowed: obj (a bound method) keeps it alive */
} Target;

typedef struct {
    PyObject_HEAD
    PyObject *status;     /* dict fid -> int */
    PyObject *gen_code;   /* dict fid -> (bytes, int) */
    PyObject *throwing;   /* dict */
    PyObject *state;      /* list [bool] */
    PyObject *slow;       /* (frame, event, arg) -> None */
    PyObject *fail;       /* (exc, what) -> None */
    Target enter, leave, yield_, resume;  /* (fid) -> None */
    Target to_native, to_python;          /* (fid) -> None */
    PyObject *native_id;  /* (callable) -> fid; NULL: C calls take the slow path */
    long plain_fast;      /* PLAIN, or -1 when entry/exit need more than enter/leave */
    long gen_fast;        /* GEN, or -1 */
    int transitions;      /* C-call events wanted */
    int resume_op, yield_op;
    /* open addressing, sizes mask + 1 (powers of two), kept at most half full */
    Entry *codes;
    Py_ssize_t codes_mask, codes_used;
    Native *natives;
    Py_ssize_t natives_mask, natives_used;
    /* The code of the last Python event and its status (a row of ``codes``: rows never
     * change while running, and a classified code is kept alive, so its address is its
     * own): C calls are mostly made by the code last entered or returned to. */
    void *caller_code;
    long caller_status;
    /* The callable of a c_call just delivered through a C-form target, and its id's
     * value, when that c_call was the hook's last event (dispatch clears it at every
     * event): its c_return (or c_exception) is then the very next event, the call of a C
     * function that called nothing profiled (len, list.append: most C calls), and needs
     * neither the frame's code nor the C-function cache. The callable is alive from its
     * c_call to its c_return, so no other object has its address meanwhile. */
    PyObject *last_c;
    uintptr_t last_c_raw;
    /* ph_fork_generation when the hook was made: a hook inherited by a forked child is
     * mute there (see ph_fork_generation). */
    unsigned long fork_generation;
} Hook;

/* module.c: bumped in a forked child by a pthread_atfork handler, before any Python code
 * runs there. The parent's hook stays installed in the child until profkit's own
 * after-fork hook removes it; until then (threading's and the program's after-fork hooks
 * run first) it would record into the parent's call tree, copying its pages on write
 * for nothing: the child drops that tree (issue 22, item 13). */
PH_HIDDEN extern unsigned long ph_fork_generation;

/* codes.c */
PH_HIDDEN Entry *code_entry(Hook *self, void *code);

static inline Py_ssize_t
code_slot(void *code, Py_ssize_t mask)
{
    uintptr_t h = (uintptr_t)code >> 4;
    return (Py_ssize_t)((h ^ (h >> 16)) & (uintptr_t)mask);
}

/* The cached row of ``code``, NULL when it has none yet (code_entry fills it): inline,
 * since every Python event asks (a call of code_entry was ~30 instructions an event). */
static inline Entry *
code_cached(Hook *self, void *code)
{
    Entry *codes = self->codes;
    if (codes == NULL) {
        return NULL;
    }
    Py_ssize_t mask = self->codes_mask;
    for (Py_ssize_t i = code_slot(code, mask);; i = (i + 1) & mask) {
        Entry *e = &codes[i];
        if (e->code == code) {
            return e;
        }
        if (e->code == NULL) {
            return NULL;
        }
    }
}
PH_HIDDEN void codes_free(Hook *self);

/* natives.c */
PH_HIDDEN int c_call_path(Hook *self, PyFrameObject *frame, int what, PyObject *arg);
PH_HIDDEN int natives_traverse(Hook *self, visitproc visit, void *arg);
PH_HIDDEN void natives_free(Hook *self);

/* dispatch.c */
PH_HIDDEN int contain(Hook *self, const char *what);
PH_HIDDEN int deliver(Hook *self, Target *target, PyObject *fid, const uintptr_t *raw,
                      const char *what);
PH_HIDDEN int running(Hook *self);
PH_HIDDEN int dispatch(Hook *self, PyFrameObject *frame, int what, PyObject *arg);
PH_HIDDEN int profile_func(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);
PH_HIDDEN extern PyObject *event_names[8];

#endif /* PROFKIT_PROFHOOK_H */
