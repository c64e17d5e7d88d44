/* profkit.sampler._walker: walk one thread's frame chain in another process, in C.
 *
 * Why C: a sample's cost is dominated by the frame walk (one struct per frame: code,
 * previous, instruction pointer, owner). In Python that is ~2-4 us a frame, so a
 * 1000-deep recursion took ~4 ms a sample; here it is a few ns a frame plus one
 * process_vm_readv per 16 KiB data-stack chunk. The Python side (reader.py) keeps the
 * policy: it names code objects, caches stacks and decides what a failure means.
 *
 * read(pid, address, size) -> bytes: one process_vm_readv, OSError(errno) on failure.
 *
 * walk(pid, frame, chunk, params) -> bytes
 *   frame:  address of the innermost _PyInterpreterFrame (0: no frames)
 *   chunk:  address of the thread's newest _PyStackChunk (0: unknown)
 *   params: (span, off_code, off_prev, off_instr, off_owner, chunk_prev, chunk_size,
 *            max_depth, max_chunk)
 * Returns (pairs, torn): the frames innermost first as packed native uint64 pairs
 * (code, instr), frames owned by the C stack (owner 3) skipped; torn is 1 when the chain
 * ended at a generator-owned frame (a thread's outermost frame never is one: the
 * generator yielded while we read, and the caller should read again). A failed read raises OSError with
 * the errno of process_vm_readv (ESRCH: the process is gone; EPERM: not permitted;
 * EFAULT: a torn chain). The target is never stopped.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#define MAX_REGIONS 64
#define FRAME_OWNED_BY_GENERATOR 1
#define FRAME_OWNED_BY_CSTACK 3
#define GUESS_CHUNK (16 * 1024)
/* Most chunk bytes one walk holds (a torn or hostile chain cannot make it allocate more). */
#define CHUNK_BUDGET (8u << 20)

typedef struct {
    uint64_t start, end;
    unsigned char *data;
} Region;

static int read_remote(pid_t pid, uint64_t addr, void *buf, size_t size, size_t *got) {
    struct iovec local = {buf, size};
    struct iovec remote = {(void *)(uintptr_t)addr, size};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) return errno ? errno : EIO;
    if (got != NULL) {
        *got = (size_t)n;
        return 0;
    }
    return (size_t)n == size ? 0 : EFAULT;
}

static uint64_t u64_at(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Read the chunk at ``chunk`` into a new region; returns its previous chunk or 0. */
static int load_chunk(pid_t pid, uint64_t chunk, Region *regions, int *nregions,
                      uint64_t off_prev, uint64_t off_size, uint64_t max_chunk,
                      uint64_t *previous) {
    *previous = 0;
    if (*nregions >= MAX_REGIONS) return 0;
    unsigned char *data = PyMem_RawMalloc(GUESS_CHUNK);
    if (data == NULL) return ENOMEM;
    size_t got = 0;
    int err = read_remote(pid, chunk, data, GUESS_CHUNK, &got);
    if (err == EFAULT || (err == 0 && got < off_size + 8)) {
        /* The guess ran past a mapping's end: read the header, then exactly the chunk. */
        err = read_remote(pid, chunk + off_size, data, 8, NULL);
        got = 0;
    }
    if (err) {
        PyMem_RawFree(data);
        return err == EFAULT ? 0 : err; /* a bad chunk pointer: walk frame by frame */
    }
    uint64_t size = got >= off_size + 8 ? u64_at(data + off_size) : u64_at(data);
    if (size == 0 || size > max_chunk || size < off_size + 8) {
        PyMem_RawFree(data);
        return 0; /* not a chunk we trust: frames in it are read one by one */
    }
    uint64_t used = 0;
    for (int i = 0; i < *nregions; i++) used += regions[i].end - regions[i].start;
    if (used + size > CHUNK_BUDGET) {
        PyMem_RawFree(data);
        return 0; /* enough held for one walk: further frames are read one by one */
    }
    if (size > got) {
        unsigned char *bigger = PyMem_RawRealloc(data, (size_t)size);
        if (bigger == NULL) {
            PyMem_RawFree(data);
            return ENOMEM;
        }
        data = bigger;
        err = read_remote(pid, chunk, data, (size_t)size, NULL);
        if (err) {
            PyMem_RawFree(data);
            return err == EFAULT ? 0 : err;
        }
    }
    regions[*nregions].start = chunk;
    regions[*nregions].end = chunk + size;
    regions[*nregions].data = data;
    (*nregions)++;
    *previous = u64_at(data + off_prev);
    return 0;
}

typedef struct {
    uint64_t span, off_code, off_prev, off_instr, off_owner, chunk_prev, chunk_size, max_depth,
        max_chunk;
} WalkParams;

static int check_walk_params(const WalkParams *w) {
    return w->span <= 4096 && w->off_code + 8 <= w->span && w->off_prev + 8 <= w->span &&
           w->off_instr + 8 <= w->span && w->off_owner < w->span && w->chunk_prev + 8 <= 4096 &&
           w->chunk_size + 8 <= 4096 && w->max_depth >= 1 && w->max_depth <= (1u << 20);
}

/* Walk one frame chain (no GIL needed). ``out`` holds 2 * max_depth words; ``*cut`` is set
 * when the chain ended at a generator's frame (a yield happened while we read). */
static int walk_chain(pid_t pid, uint64_t frame, uint64_t chunk, const WalkParams *w,
                      uint64_t *out, size_t *count, int *cut) {
    Region regions[MAX_REGIONS];
    int nregions = 0;
    size_t n = 0;
    int err = 0;
    uint64_t pending = 0;
    unsigned char one[4096];
    int last_owner = 0;

    if (chunk) err = load_chunk(pid, chunk, regions, &nregions, w->chunk_prev, w->chunk_size,
                                w->max_chunk, &pending);
    uint64_t depth = 0;
    while (!err && frame && depth < w->max_depth) {
        depth++;
        const unsigned char *p = NULL;
        for (int i = nregions - 1; i >= 0; i--) {
            if (regions[i].start <= frame && frame + w->span <= regions[i].end) {
                p = regions[i].data + (frame - regions[i].start);
                break;
            }
        }
        /* Older chunks hold the outer frames: read them as the walk reaches them. */
        while (p == NULL && pending && !err) {
            uint64_t size = 0;
            err = read_remote(pid, pending + w->chunk_size, &size, 8, NULL);
            if (err == EFAULT) {
                err = 0;
                pending = 0;
                break;
            }
            if (err || !(pending <= frame && frame + w->span <= pending + size)) break;
            uint64_t before = pending;
            err = load_chunk(pid, before, regions, &nregions, w->chunk_prev, w->chunk_size,
                             w->max_chunk, &pending);
            if (!err && nregions && regions[nregions - 1].start == before &&
                frame + w->span <= regions[nregions - 1].end)
                p = regions[nregions - 1].data + (frame - before);
        }
        if (err) break;
        if (p == NULL) {
            err = read_remote(pid, frame, one, (size_t)w->span, NULL);
            if (err) break;
            p = one;
        }
        uint64_t code = u64_at(p + w->off_code);
        last_owner = p[w->off_owner];
        if (code && p[w->off_owner] != FRAME_OWNED_BY_CSTACK) {
            out[2 * n] = code;
            out[2 * n + 1] = u64_at(p + w->off_instr);
            n++;
        }
        frame = u64_at(p + w->off_prev);
    }
    for (int i = 0; i < nregions; i++) PyMem_RawFree(regions[i].data);
    *count = n;
    *cut = frame == 0 && last_owner == FRAME_OWNED_BY_GENERATOR;
    return err;
}

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
    if (!check_walk_params(&w)) {
        PyErr_SetString(PyExc_ValueError, "walk: offsets out of range");
        return NULL;
    }
    uint64_t *out = PyMem_RawMalloc(2 * sizeof(uint64_t) * w.max_depth);
    if (out == NULL) return PyErr_NoMemory();
    size_t n = 0;
    int cut = 0, err;
    Py_BEGIN_ALLOW_THREADS
    err = walk_chain((pid_t)pid_arg, frame, chunk, &w, out, &n, &cut);
    Py_END_ALLOW_THREADS
    if (err) {
        PyMem_RawFree(out);
        return raise_errno(err);
    }
    PyObject *pairs = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * 16));
    PyMem_RawFree(out);
    if (pairs == NULL) return NULL;
    return Py_BuildValue("(Ni)", pairs, cut);
}

typedef struct {
    uint64_t interpreters_head, interp_next, interp_threads_head, tstate_span, tstate_next,
        tstate_thread_id, tstate_native_thread_id, tstate_datastack_chunk, tstate_current_frame,
        tstate_cframe, cframe_current_frame, gil_where, gil_locked, gil_holder, interp_gil,
        max_threads, retries;
} ThreadParams;

#define THREAD_FORMAT "(KKKKKKKKKKKKKKKKK)"
#define THREAD_ARGS(t)                                                                      \
    &(t).interpreters_head, &(t).interp_next, &(t).interp_threads_head, &(t).tstate_span,    \
        &(t).tstate_next, &(t).tstate_thread_id, &(t).tstate_native_thread_id,               \
        &(t).tstate_datastack_chunk, &(t).tstate_current_frame, &(t).tstate_cframe,          \
        &(t).cframe_current_frame, &(t).gil_where, &(t).gil_locked, &(t).gil_holder,         \
        &(t).interp_gil, &(t).max_threads, &(t).retries

#define NO_OFFSET UINT64_MAX

static int read_u64(pid_t pid, uint64_t addr, uint64_t *value) {
    return read_remote(pid, addr, value, 8, NULL);
}

/* The innermost frame of a thread state (bytes already read into ``ts``). */
static int current_frame(pid_t pid, const unsigned char *ts, const ThreadParams *t,
                         uint64_t *frame) {
    if (t->tstate_current_frame != NO_OFFSET) {
        *frame = u64_at(ts + t->tstate_current_frame);
        return 0;
    }
    uint64_t cframe = u64_at(ts + t->tstate_cframe);
    *frame = 0;
    return cframe ? read_u64(pid, cframe + t->cframe_current_frame, frame) : 0;
}

/* sample(pid, runtime, want_gil, thread_params, walk_params)
 *   -> ([(native_id, thread_id, holds_gil, pairs), ...], torn, retries)
 * Every thread of every interpreter, as reader.py's Python loop does it. A thread whose
 * read fails with EFAULT is left out (counted in torn); ESRCH / EPERM raise OSError. */
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
    if (!check_walk_params(&w) || t.tstate_span > 4096 || t.tstate_next + 8 > t.tstate_span ||
        t.tstate_thread_id + 8 > t.tstate_span || t.tstate_native_thread_id + 8 > t.tstate_span ||
        t.tstate_datastack_chunk + 8 > t.tstate_span ||
        (t.tstate_current_frame != NO_OFFSET && t.tstate_current_frame + 8 > t.tstate_span) ||
        (t.tstate_current_frame == NO_OFFSET && t.tstate_cframe + 8 > t.tstate_span) ||
        t.max_threads > 65536 || t.retries > 8) {
        PyErr_SetString(PyExc_ValueError, "sample: offsets out of range");
        return NULL;
    }
    pid_t pid = (pid_t)pid_arg;
    PyObject *result = PyList_New(0);
    if (result == NULL) return NULL;
    uint64_t *out = PyMem_RawMalloc(2 * sizeof(uint64_t) * w.max_depth);
    if (out == NULL) {
        Py_DECREF(result);
        return PyErr_NoMemory();
    }
    unsigned char ts[4096];
    long torn = 0, retries = 0;
    int err = 0;
    uint64_t interp = 0;
    int ninterp = 0;
    err = read_u64(pid, runtime + t.interpreters_head, &interp);
    while (!err && interp && ninterp++ < 64) {
        uint64_t holder = 0, tstate = 0;
        if (want_gil && t.gil_where) {
            uint64_t gil = t.gil_where == 1 ? runtime : 0;
            if (t.gil_where == 2) err = read_u64(pid, interp + t.interp_gil, &gil);
            int locked = 0;
            if (!err && gil) err = read_remote(pid, gil + t.gil_locked, &locked, 4, NULL);
            if (!err && gil && locked) err = read_u64(pid, gil + t.gil_holder, &holder);
            if (err == EFAULT) err = 0, holder = 0;
        }
        if (!err) err = read_u64(pid, interp + t.interp_threads_head, &tstate);
        uint64_t seen = 0;
        while (!err && tstate && seen++ < t.max_threads) {
            size_t n = 0;
            int cut = 0, werr = 0;
            werr = read_remote(pid, tstate, ts, (size_t)t.tstate_span, NULL);
            if (werr) {
                if (werr != EFAULT) err = werr;
                torn++;
                break; /* the list itself is unreadable: stop this interpreter */
            }
            for (uint64_t attempt = 0; attempt <= t.retries; attempt++) {
                uint64_t frame = 0;
                if (attempt) {
                    retries++;
                    werr = read_remote(pid, tstate, ts, (size_t)t.tstate_span, NULL);
                    if (werr) break;
                }
                Py_BEGIN_ALLOW_THREADS
                werr = current_frame(pid, ts, &t, &frame);
                if (!werr)
                    werr = walk_chain(pid, frame, u64_at(ts + t.tstate_datastack_chunk), &w,
                                      out, &n, &cut);
                Py_END_ALLOW_THREADS
                if (werr || !cut) break;
            }
            if (werr && werr != EFAULT) {
                err = werr;
                break;
            }
            if (werr) {
                torn++;
            } else {
                PyObject *item = Py_BuildValue(
                    "(KKOy#)", (unsigned long long)u64_at(ts + t.tstate_native_thread_id),
                    (unsigned long long)u64_at(ts + t.tstate_thread_id),
                    tstate == holder ? Py_True : Py_False, (const char *)out,
                    (Py_ssize_t)(n * 16));
                if (item == NULL || PyList_Append(result, item) < 0) {
                    Py_XDECREF(item);
                    Py_DECREF(result);
                    PyMem_RawFree(out);
                    return NULL;
                }
                Py_DECREF(item);
            }
            tstate = u64_at(ts + t.tstate_next);
        }
        if (!err) err = read_u64(pid, interp + t.interp_next, &interp);
    }
    PyMem_RawFree(out);
    if (err == EFAULT) {
        torn++;
        err = 0;
    }
    if (err) {
        Py_DECREF(result);
        return raise_errno(err);
    }
    return Py_BuildValue("(Nll)", result, torn, retries);
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
    int err = read_remote((pid_t)pid_arg, address, PyBytes_AS_STRING(result), (size_t)size, &got);
    if (!err && got != (size_t)size) err = EFAULT;
    if (err) {
        Py_DECREF(result);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
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
