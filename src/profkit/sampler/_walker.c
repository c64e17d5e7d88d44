/* profkit.sampler._walker: read threads and frame chains of another process, in C.
 *
 * Why C: a sample's cost is dominated by the frame walk (one struct per frame: code,
 * previous, instruction pointer, owner). In Python that is ~2-4 us a frame, so a
 * 1000-deep recursion took ~4 ms a sample; here it is a few ns a frame plus one
 * process_vm_readv per 16 KiB data-stack chunk (_walker_chain.c). The Python side
 * (reader.py) keeps the policy: it names code objects, caches stacks and decides what a
 * failure means. The target is never stopped.
 *
 * read(pid, address, size) -> bytes: one process_vm_readv, OSError(errno) on failure.
 *
 * walk(pid, frame, chunk, params) -> (pairs, torn, cut)
 *   frame:  address of the innermost _PyInterpreterFrame (0: no frames)
 *   chunk:  address of the thread's newest _PyStackChunk (0: unknown)
 *   params: (span, off_code, off_prev, off_instr, off_owner, chunk_prev, chunk_size,
 *            max_depth, max_chunk)
 *   pairs are the frames innermost first as packed native uint64 (code, instr), frames
 *   owned by the C stack (owner 3) skipped; torn is 1 when the chain ended at a
 *   generator-owned frame (a yield happened while we read: see splice_callers); cut is
 *   why the walk stopped early: 0 no, 1 max_depth frames, 2 the chain loops (CUT_* in
 *   _walker.h).
 *
 * sample(pid, runtime, want_gil, thread_params, walk_params): every thread; see sample().
 *
 * Every list and chain read from the target is bounded twice: by a count (max_depth frames,
 * max_threads threads, 64 interpreters) and by a cycle check (LoopCheck in _walker.h), and
 * says which one stopped it, so a looping target costs a few elements and says so. Every
 * offset check is done by subtraction from its bound (pk_fits, pk_inside): no sum of target
 * values can wrap past 2**64 into a small number that passes.
 * A failed read raises OSError with the errno of process_vm_readv (ESRCH: the process is
 * gone; EPERM: not permitted; EFAULT: a torn chain).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>

#include "_walker.h"

static PyObject *raise_errno(int err) {
    if (err == ENOMEM) return PyErr_NoMemory();
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

#define WALK_FORMAT "(KKKKKKKKK)"
#define WALK_ARGS(w)                                                                        \
    &(w).span, &(w).off_code, &(w).off_prev, &(w).off_instr, &(w).off_owner, &(w).chunk_prev, \
        &(w).chunk_size, &(w).max_depth, &(w).max_chunk

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    long long pid_arg;
    unsigned long long frame, chunk;
    WalkParams w;
    if (!PyArg_ParseTuple(args, "LKK" WALK_FORMAT, &pid_arg, &frame, &chunk, WALK_ARGS(w)))
        return NULL;
    if (!pk_check_walk_params(&w)) {
        PyErr_SetString(PyExc_ValueError, "walk: offsets out of range");
        return NULL;
    }
    Walk one = {PyMem_RawMalloc(2 * sizeof(uint64_t) * w.max_depth), NULL, 0, 0, CUT_NONE};
    if (one.out == NULL) return PyErr_NoMemory();
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = pk_walk_chain((pid_t)pid_arg, frame, chunk, &w, &one);
    Py_END_ALLOW_THREADS
    PyObject *pairs = err ? NULL : PyBytes_FromStringAndSize((const char *)one.out, (Py_ssize_t)one.n * 16);
    PyMem_RawFree(one.out);
    if (err) return raise_errno(err);
    if (pairs == NULL) return NULL;
    return Py_BuildValue("(Nii)", pairs, one.cut_frame != 0, one.cut);
}

typedef struct {
    uint64_t interpreters_head, interp_next, interp_threads_head, tstate_span, tstate_next,
        tstate_thread_id, tstate_native_thread_id, tstate_datastack_chunk,
        tstate_datastack_top, tstate_current_frame, tstate_cframe, cframe_current_frame,
        gil_where, gil_locked, gil_holder, interp_gil, max_threads, retries;
} ThreadParams;

#define THREAD_FORMAT "(KKKKKKKKKKKKKKKKKK)"
#define THREAD_ARGS(t)                                                                      \
    &(t).interpreters_head, &(t).interp_next, &(t).interp_threads_head, &(t).tstate_span,    \
        &(t).tstate_next, &(t).tstate_thread_id, &(t).tstate_native_thread_id,               \
        &(t).tstate_datastack_chunk, &(t).tstate_datastack_top, &(t).tstate_current_frame,   \
        &(t).tstate_cframe, &(t).cframe_current_frame, &(t).gil_where, &(t).gil_locked,      \
        &(t).gil_holder, &(t).interp_gil, &(t).max_threads, &(t).retries

#define NO_OFFSET UINT64_MAX

static int read_u64(pid_t pid, uint64_t addr, uint64_t *value) {
    return pk_read_remote(pid, addr, value, 8, NULL);
}

/* Walk a thread's chain from its current frame (its thread state's bytes read into ``ts``). */
static int walk_thread(pid_t pid, const unsigned char *ts, const ThreadParams *t,
                       const WalkParams *w, Walk *walk) {
    int err = 0;
    uint64_t frame = 0;
    if (t->tstate_current_frame != NO_OFFSET) {
        frame = u64_at(ts + t->tstate_current_frame);
    } else {
        uint64_t cframe = u64_at(ts + t->tstate_cframe);
        if (cframe) err = read_u64(pid, cframe + t->cframe_current_frame, &frame);
    }
    if (err) return err;
    return pk_walk_chain(pid, frame, u64_at(ts + t->tstate_datastack_chunk), w, walk);
}

/* Where the callers of the yield-cut generator frame start in ``again`` (n when not found). */
static size_t callers_at(const Walk *again, uint64_t cut_frame, uint64_t chunk1, uint64_t top1) {
    for (size_t k = 0; k < again->n; k++)
        if (again->addrs[k] == cut_frame) return k + 1;
    for (size_t k = 0; k < again->n; k++)
        if (chunk1 < again->addrs[k] && again->addrs[k] < top1) return k;
    return again->n;
}

/* A walk cut by a yield (walk->cut_frame) still says truly what ran at the instant t1 the
 * thread's current frame was read: the generator and what it called. Only its callers are
 * missing (a suspended generator's frame has no previous). Keeping a fresh read instead, as
 * this walker once did, drew a new sample at a later instant exactly when the first one saw
 * a generator: on an idle machine, where the target runs while we read, that moved a third
 * of a tight generator's samples to its consumer (issue #12). So the t1 frames are kept and
 * their callers read again: the frames after the generator's own frame when it is running
 * again; else the innermost frame that existed at t1 (in the t1 chunk, below the t1
 * data-stack top: the consumer that resumed it) and its callers; frames pushed since are
 * not callers. If neither is found in ``t->retries`` reads, the generator's part is kept
 * alone (its leaf is right; py-spy keeps such stacks too). */
static int splice_callers(pid_t pid, uint64_t tstate, const unsigned char *ts1,
                          const ThreadParams *t, const WalkParams *w, Walk *walk, Walk *again,
                          long *retries) {
    uint64_t chunk1 = u64_at(ts1 + t->tstate_datastack_chunk);
    uint64_t top1 = u64_at(ts1 + t->tstate_datastack_top);
    unsigned char ts[4096];
    for (uint64_t attempt = 0; attempt < t->retries; attempt++) {
        (*retries)++;
        int err = pk_read_remote(pid, tstate, ts, (size_t)t->tstate_span, NULL);
        if (!err) err = walk_thread(pid, ts, t, w, again);
        if (err) return err == EFAULT ? 0 : err;
        size_t start = callers_at(again, walk->cut_frame, chunk1, top1);
        if (start < again->n) {
            for (size_t k = start; k < again->n && walk->n < w->max_depth; k++, walk->n++) {
                walk->out[2 * walk->n] = again->out[2 * k];
                walk->out[2 * walk->n + 1] = again->out[2 * k + 1];
            }
            return 0;
        }
    }
    return 0;
}

/* The thread state holding the GIL of interpreter ``interp`` (0: free or unknown). */
static int gil_holder(pid_t pid, uint64_t runtime, uint64_t interp, const ThreadParams *t,
                      uint64_t *holder) {
    uint64_t gil = t->gil_where == 1 ? runtime : 0;
    int err = 0, locked = 0;
    *holder = 0;
    if (t->gil_where == 2) err = read_u64(pid, interp + t->interp_gil, &gil);
    if (!err && gil) err = pk_read_remote(pid, gil + t->gil_locked, &locked, 4, NULL);
    if (!err && gil && locked) err = read_u64(pid, gil + t->gil_holder, holder);
    if (err == EFAULT) err = 0, *holder = 0;
    return err;
}

/* The sample's ``cut`` flags: which lists were stopped early, and why. */
#define CUT_THREADS_DEPTH 1
#define CUT_THREADS_CYCLE 2
#define CUT_INTERPS_DEPTH 4
#define CUT_INTERPS_CYCLE 8

typedef struct {
    pid_t pid;
    const ThreadParams *t;
    const WalkParams *w;
    Walk walk, again;
    long torn, retries;
    int cut;
} Sampler;

/* Walk every thread of one interpreter into ``result``; 0 or an errno that ends the sample. */
static int sample_interp(Sampler *s, uint64_t interp, uint64_t holder, PyObject *result) {
    const ThreadParams *t = s->t;
    unsigned char ts[4096];
    uint64_t tstate = 0, seen = 0;
    LoopCheck loop;
    int err = read_u64(s->pid, interp + t->interp_threads_head, &tstate);
    pk_loop_start(&loop, tstate);
    while (!err && tstate) {
        if (seen++ == t->max_threads) {
            s->cut |= CUT_THREADS_DEPTH;
            break;
        }
        int werr = pk_read_remote(s->pid, tstate, ts, (size_t)t->tstate_span, NULL);
        if (werr) {
            s->torn++;
            return werr == EFAULT ? 0 : werr; /* the list itself is unreadable */
        }
        Py_BEGIN_ALLOW_THREADS
        werr = walk_thread(s->pid, ts, t, s->w, &s->walk);
        if (!werr && s->walk.cut_frame)
            werr = splice_callers(s->pid, tstate, ts, t, s->w, &s->walk, &s->again, &s->retries);
        Py_END_ALLOW_THREADS
        if (werr && werr != EFAULT) return werr;
        if (werr) {
            s->torn++;
        } else {
            PyObject *item = Py_BuildValue(
                "(KKOy#i)", (unsigned long long)u64_at(ts + t->tstate_native_thread_id),
                (unsigned long long)u64_at(ts + t->tstate_thread_id),
                tstate == holder ? Py_True : Py_False, (const char *)s->walk.out,
                (Py_ssize_t)(s->walk.n * 16), s->walk.cut);
            int failed = item == NULL || PyList_Append(result, item) < 0;
            Py_XDECREF(item);
            if (failed) return -1;
        }
        tstate = u64_at(ts + t->tstate_next);
        if (tstate && pk_loop_step(&loop, tstate)) {
            s->cut |= CUT_THREADS_CYCLE;
            break;
        }
    }
    return err;
}

static int check_thread_params(const ThreadParams *t) {
    uint64_t frame_at = t->tstate_current_frame != NO_OFFSET ? t->tstate_current_frame
                                                             : t->tstate_cframe;
    uint64_t span = t->tstate_span;
    return span <= 4096 && pk_fits(t->tstate_next, 8, span) &&
           pk_fits(t->tstate_thread_id, 8, span) && pk_fits(t->tstate_native_thread_id, 8, span) &&
           pk_fits(t->tstate_datastack_chunk, 8, span) &&
           pk_fits(t->tstate_datastack_top, 8, span) && pk_fits(frame_at, 8, span) &&
           t->max_threads <= 65536 && t->retries <= 8;
}

/* sample(pid, runtime, want_gil, thread_params, walk_params)
 *   -> ([(native_id, thread_id, holds_gil, pairs, cut), ...], torn, retries, lists_cut)
 * Every thread of every interpreter, as reader.py's Python loop does it. A thread whose
 * read fails with EFAULT is left out (counted in torn); ESRCH / EPERM raise OSError.
 * retries counts the second reads that looked for a yield-cut generator's callers; cut is a
 * thread's walk's CUT_*, lists_cut the CUT_THREADS_* / CUT_INTERPS_* flags of the lists. */
static PyObject *sample(PyObject *self, PyObject *args) {
    (void)self;
    long long pid_arg;
    unsigned long long runtime;
    int want_gil;
    ThreadParams t;
    WalkParams w;
    if (!PyArg_ParseTuple(args, "LKp" THREAD_FORMAT WALK_FORMAT, &pid_arg, &runtime, &want_gil,
                          THREAD_ARGS(t), WALK_ARGS(w)))
        return NULL;
    if (!pk_check_walk_params(&w) || !check_thread_params(&t)) {
        PyErr_SetString(PyExc_ValueError, "sample: offsets out of range");
        return NULL;
    }
    size_t words = (size_t)w.max_depth;
    Sampler s = {(pid_t)pid_arg, &t, &w, {NULL, NULL, 0, 0, 0}, {NULL, NULL, 0, 0, 0}, 0, 0, 0};
    s.walk.out = PyMem_RawMalloc(5 * sizeof(uint64_t) * words);
    PyObject *result = s.walk.out == NULL ? NULL : PyList_New(0);
    if (result == NULL) {
        PyMem_RawFree(s.walk.out);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    s.again.out = s.walk.out + 2 * words;
    s.again.addrs = s.walk.out + 4 * words;
    uint64_t interp = 0, holder = 0;
    int ninterp = 0;
    LoopCheck loop;
    int err = read_u64(s.pid, runtime + t.interpreters_head, &interp);
    pk_loop_start(&loop, interp);
    while (!err && interp) {
        if (ninterp++ == 64) {
            s.cut |= CUT_INTERPS_DEPTH;
            break;
        }
        if (want_gil && t.gil_where) err = gil_holder(s.pid, runtime, interp, &t, &holder);
        if (!err) err = sample_interp(&s, interp, holder, result);
        if (!err) err = read_u64(s.pid, interp + t.interp_next, &interp);
        if (!err && interp && pk_loop_step(&loop, interp)) {
            s.cut |= CUT_INTERPS_CYCLE;
            break;
        }
    }
    PyMem_RawFree(s.walk.out);
    if (err == EFAULT) {
        s.torn++;
        err = 0;
    }
    if (err) {
        Py_DECREF(result);
        return err < 0 ? NULL : raise_errno(err);
    }
    return Py_BuildValue("(Nlli)", result, s.torn, s.retries, s.cut);
}

/* read(pid, address, size) -> bytes: one process_vm_readv (ctypes costs ~5 us more). */
static PyObject *read_mem(PyObject *self, PyObject *args) {
    (void)self;
    long long pid_arg;
    unsigned long long address;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "LKn", &pid_arg, &address, &size)) return NULL;
    if (size < 0 || size > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "read: size out of range");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) return NULL;
    size_t got = 0;
    int err =
        pk_read_remote((pid_t)pid_arg, address, PyBytes_AS_STRING(result), (size_t)size, &got);
    if (!err && got != (size_t)size) err = EFAULT;
    if (err) {
        Py_DECREF(result);
        return raise_errno(err);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"read", read_mem, METH_VARARGS, "read(pid, address, size) -> bytes"},
    {"sample", sample, METH_VARARGS,
     "sample(pid, runtime, want_gil, thread_params, walk_params) -> (threads, torn, retries)"},
    {"walk", walk, METH_VARARGS,
     "walk(pid, frame, chunk, params) -> (bytes, torn): (code, instr) uint64 pairs, innermost first"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "profkit.sampler._walker",
    "Out-of-process frame walk (see _walker.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walker(void) { return PyModule_Create(&module); }
