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

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    long long pid_arg;
    unsigned long long frame, chunk;
    unsigned long long span, off_code, off_prev, off_instr, off_owner, chunk_prev, chunk_size,
        max_depth, max_chunk;
    if (!PyArg_ParseTuple(args, "LKK(KKKKKKKKK)", &pid_arg, &frame, &chunk, &span, &off_code,
                          &off_prev, &off_instr, &off_owner, &chunk_prev, &chunk_size,
                          &max_depth, &max_chunk))
        return NULL;
    if (span > 4096 || off_code + 8 > span || off_prev + 8 > span || off_instr + 8 > span ||
        off_owner >= span || chunk_prev + 8 > 4096 || chunk_size + 8 > 4096 ||
        max_depth > (1u << 20)) {
        PyErr_SetString(PyExc_ValueError, "walk: offsets out of range");
        return NULL;
    }
    pid_t pid = (pid_t)pid_arg;
    Region regions[MAX_REGIONS];
    int nregions = 0;
    uint64_t *out = PyMem_RawMalloc(2 * sizeof(uint64_t) * (max_depth ? max_depth : 1));
    if (out == NULL) return PyErr_NoMemory();
    size_t n = 0;
    int err = 0;
    uint64_t pending = 0;
    unsigned char one[4096];
    int last_owner = 0;

    Py_BEGIN_ALLOW_THREADS
    if (chunk) err = load_chunk(pid, chunk, regions, &nregions, chunk_prev, chunk_size,
                                max_chunk, &pending);
    uint64_t depth = 0;
    while (!err && frame && depth < max_depth) {
        depth++;
        const unsigned char *p = NULL;
        for (int i = nregions - 1; i >= 0; i--) {
            if (regions[i].start <= frame && frame + span <= regions[i].end) {
                p = regions[i].data + (frame - regions[i].start);
                break;
            }
        }
        /* Older chunks hold the outer frames: read them as the walk reaches them. */
        while (p == NULL && pending && !err) {
            uint64_t size = 0;
            err = read_remote(pid, pending + chunk_size, &size, 8, NULL);
            if (err == EFAULT) {
                err = 0;
                pending = 0;
                break;
            }
            if (err || !(pending <= frame && frame + span <= pending + size)) break;
            uint64_t before = pending;
            err = load_chunk(pid, before, regions, &nregions, chunk_prev, chunk_size, max_chunk,
                             &pending);
            if (!err && nregions && regions[nregions - 1].start == before &&
                frame + span <= regions[nregions - 1].end)
                p = regions[nregions - 1].data + (frame - before);
        }
        if (err) break;
        if (p == NULL) {
            err = read_remote(pid, frame, one, (size_t)span, NULL);
            if (err) break;
            p = one;
        }
        uint64_t code = u64_at(p + off_code);
        last_owner = p[off_owner];
        if (code && p[off_owner] != FRAME_OWNED_BY_CSTACK) {
            out[2 * n] = code;
            out[2 * n + 1] = u64_at(p + off_instr);
            n++;
        }
        frame = u64_at(p + off_prev);
    }
    for (int i = 0; i < nregions; i++) PyMem_RawFree(regions[i].data);
    Py_END_ALLOW_THREADS

    if (err) {
        PyMem_RawFree(out);
        if (err == ENOMEM) return PyErr_NoMemory();
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *pairs = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * 16));
    PyMem_RawFree(out);
    if (pairs == NULL) return NULL;
    /* A chain that ends in a generator's frame was cut by a yield in mid-read. */
    return Py_BuildValue("(Ni)", pairs, frame == 0 && last_owner == FRAME_OWNED_BY_GENERATOR);
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
    {"walk", walk, METH_VARARGS,
     "walk(pid, frame, chunk, params) -> (bytes, torn): (code, instr) uint64 pairs, innermost first"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "profkit.sampler._walker",
    "Out-of-process frame walk (see _walker.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walker(void) { return PyModule_Create(&module); }
