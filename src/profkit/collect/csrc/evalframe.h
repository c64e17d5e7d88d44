/* profkit.collect._evalframe: the "evalframe" backend's collector (3.11 only), a PEP 523
 * frame-evaluation function that wraps _PyEval_EvalFrameDefault and reports a Python
 * frame's enter before evaluating it and its leave after.
 *
 * Why: on 3.11 a profile function (sys.setprofile, cProfile) sets ``use_tracing``, which
 * routes every bytecode through DO_TRACING, de-specializes instructions and makes a frame
 * object per call: ~0.8x cProfile's whole overhead before any profiler code runs. An
 * eval-frame function costs ~60 instructions a frame (callgrind, sympy) and leaves the
 * specializing interpreter alone. What it cannot see is C calls, so it serves only
 * masks without CODE_TRANSITIONS (evalframe.py's CAPABILITIES).
 *
 * The units: evalframe.c the frame-evaluation function (the hot path, the per-code cache
 * and the slow path's call); evalframe_type.c the EvalHook type, install/uninstall and
 * module init. On 3.12+ (sys.monitoring) the module is a stub that says why.
 *
 * Trade-off: with an eval-frame function set, 3.11 no longer inlines Python-to-Python
 * calls in the interpreter loop, so each Python call takes C stack again (as in 3.10);
 * the recursion limit still bounds the depth (tests/collect/test_evalframe.py recurses
 * to it).
 */
#ifndef PROFKIT_EVALFRAME_H
#define PROFKIT_EVALFRAME_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define EF_SUPPORTED 1
/* _PyInterpreterFrame's layout (3.11's internal header; the frame evaluation API hands
 * the function one of these). */
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE
#include "../../_pyerr_compat.h"
#include "../../_idcall.h"

#if defined(__GNUC__)
#define EF_HIDDEN __attribute__((visibility("hidden")))
#define EF_COLD __attribute__((noinline, cold))
#else
#define EF_HIDDEN
#define EF_COLD
#endif

/* evalframe.py's statuses (the slow path returns one per code object). */
#define EF_REJECTED 0
#define EF_PLAIN 1
#define EF_GEN 2

/* One code object's verdict. The key is the code's address: the session's function
 * table keeps every classified code alive while the hook lives (as profhook.h's). */
typedef struct {
    void *code;   /* NULL: empty slot */
    int status;
    int first;    /* generators: index (code units) of the first RESUME */
} EfEntry;

/* One profiler callback, (fid) -> None, with its C form when the owner offers one
 * (_idcall.h), as profhook.h's Target. */
typedef struct {
    PyObject *obj;
    int (*direct)(PyObject *owner, uintptr_t fid);
    PyObject *owner;
} EfTarget;

typedef struct {
    PyObject_HEAD
    PyObject *state;     /* list [bool]: running */
    PyObject *classify;  /* (code) -> (status, first) */
    PyObject *fail;      /* (exc, what) -> None */
    EfTarget enter, leave, yield_, resume;
    int yield_op;
    EfEntry *codes;
    Py_ssize_t codes_mask, codes_used;
    unsigned long fork_generation;
} EvalHook;

/* evalframe_type.c */
EF_HIDDEN extern EvalHook *ef_active;          /* the installed hook (strong), or NULL */
EF_HIDDEN extern unsigned long ef_fork_generation;

/* evalframe.c */
EF_HIDDEN PyObject *ef_eval(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag);
EF_HIDDEN void ef_codes_free(EvalHook *self);

#else
#define EF_SUPPORTED 0
#endif

#endif /* PROFKIT_EVALFRAME_H */
