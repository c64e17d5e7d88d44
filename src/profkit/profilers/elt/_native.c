/* profkit.profilers.elt._native: trace mode's hot path in C (optional; pure Python
 * fallback in trace.py).
 *
 * Why it exists: in pure Python every call costs the collector's callback frame, the
 * profiler's method frame and its tree work (~250-300 ns per call on 3.12), while
 * cProfile does all of it in C. The CLR lets a profiler hand the runtime raw Enter/Leave
 * hook functions (SetEnterLeaveFunctionHooks3) that generated code calls directly; this
 * is the same idea: a Recorder whose ``py_start``/``py_return`` methods are shaped like
 * sys.monitoring callbacks, so the collector can register them as the interpreter's
 * callbacks, with no Python frame of ours in between (the ``__profkit_monitoring__``
 * protocol, see docs/api.md).
 *
 * The logic is trace.py's plain path (no event lines, no timeline) and must stay so:
 *   - one stack per thread of (node, start) frames; a node is a call-tree *path*;
 *   - enter: find/create the child node, push, read the clock *last*;
 *   - leave: read the clock *first*; pop if the top matches, else resync (close the
 *     calls above a deeper match at the same instant, or ignore an unknown leave);
 *   - a call shorter than the base time adds to no node (its caller keeps the time);
 *   - self time is not counted here: build time derives it from inclusive times.
 *
 * Threads: a thread-local cache (recorder serial -> Thread) in front of a slow path that
 * keeps the mapping in the thread state's dict (keyed by the recorder's serial, so a
 * stale entry of a dead recorder is never matched) and, for a new thread, asks Python
 * (``new_thread()`` -> token: record; None: silent for good; False: silent, ask again).
 *
 * Failure rule: the monitoring-shaped methods never raise into the profiled program;
 * an error (out of memory, a failing clock or new_thread callback) goes to ``on_error``
 * (the collector's failure rule) or, without one, to sys.unraisablehook. The id-shaped
 * ``enter``/``leave`` raise normally: their callers (the Python collector paths, tests)
 * apply the rule themselves.
 *
 * The GIL serialises everything (free-threaded builds are not supported: the module
 * declares no Py_mod_gil slot, so such a build re-enables the GIL when importing it).
 * But every call into Python (new_thread, a Python clock, on_error; and on 3.11 any
 * allocation of a tracked object, which may run the garbage collector and finalizers)
 * can run arbitrary code, switch threads, and call back into this recorder: export from
 * another thread, the same thread's enter from a finalizer, the collector detaching
 * (which drops the sys.monitoring callback, and with it maybe the last reference to the
 * recorder: the interpreter holds none while it calls a callback). So: no pointer into
 * a Thread's frames, and no count of its nodes, is kept across such a call; export
 * copies the trees in plain C before building any Python object; and the
 * monitoring-shaped methods hold a reference to the recorder while they run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define CHUNK_NODES 1024
#define NO_MIN ((int64_t)1 << 62) /* trace.py's tree.NO_MIN */

typedef struct Node {
    uintptr_t fid;
    struct Node *parent;
    struct Node *first_child;
    struct Node *next_sibling;
    struct Node *last_hit; /* the child found last time: loops call the same callee */
    int64_t calls, incl, min, max;
} Node;

typedef struct Chunk {
    struct Chunk *next;
    size_t used;
    Node nodes[CHUNK_NODES];
} Chunk;

typedef struct {
    Node *node;
    int64_t start;
} Frame;

typedef struct Thread {
    PyObject *token; /* what new_thread() returned; NULL for a silent thread */
    Node root;
    Frame *frames; /* frames[0..depth) sit above the root */
    Py_ssize_t depth, cap;
    Node **table; /* open addressing on (parent, fid) */
    size_t mask, used;
    Chunk *chunks;
    struct Thread *next; /* creation order */
} Thread;

typedef struct {
    PyObject_HEAD
    uint64_t serial;
    int64_t basetime;
    PyObject *clock;      /* NULL: CLOCK_MONOTONIC, as time.perf_counter_ns on Linux */
    PyObject *new_thread; /* () -> token | None | False */
    PyObject *on_error;   /* (exc, where) -> None, or NULL */
    PyObject *key;        /* the thread-state-dict key: a str naming this module and the
                           * serial, so no other extension's key can be taken for ours */
    Thread *first, *last;
} Recorder;

static Thread SILENT; /* a thread that records nothing, for good */
static uint64_t next_serial = 1;
static _Thread_local uint64_t tls_serial;
static _Thread_local Thread *tls_thread;

/* -- threads and their trees ------------------------------------------------------- */

static Thread *
thread_new(PyObject *token)
{
    Thread *t = PyMem_Calloc(1, sizeof(Thread));
    if (t == NULL) {
        return NULL;
    }
    t->table = PyMem_Calloc(64, sizeof(Node *));
    if (t->table == NULL) {
        PyMem_Free(t);
        return NULL;
    }
    t->mask = 63;
    t->root.min = NO_MIN;
    t->token = Py_NewRef(token);
    return t;
}

static void
thread_free(Thread *t)
{
    Chunk *c = t->chunks;
    while (c != NULL) {
        Chunk *next = c->next;
        PyMem_Free(c);
        c = next;
    }
    PyMem_Free(t->table);
    PyMem_Free(t->frames);
    Py_XDECREF(t->token);
    PyMem_Free(t);
}

static inline size_t
slot_of(const Node *parent, uintptr_t fid, size_t mask)
{
    uint64_t h = ((uint64_t)fid >> 4) * 0x9E3779B97F4A7C15ULL;
    h ^= ((uint64_t)(uintptr_t)parent >> 4) * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

static int
table_grow(Thread *t)
{
    size_t size = (t->mask + 1) * 2;
    Node **table = PyMem_Calloc(size, sizeof(Node *));
    if (table == NULL) {
        return -1;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        Node *n = t->table[i];
        if (n != NULL) {
            size_t j = slot_of(n->parent, n->fid, size - 1);
            while (table[j] != NULL) {
                j = (j + 1) & (size - 1);
            }
            table[j] = n;
        }
    }
    PyMem_Free(t->table);
    t->table = table;
    t->mask = size - 1;
    return 0;
}

/* The child of ``parent`` for ``fid``, created on first use; NULL when out of memory. */
static Node *
child_of(Thread *t, Node *parent, uintptr_t fid)
{
    size_t j = slot_of(parent, fid, t->mask);
    Node *n;
    while ((n = t->table[j]) != NULL) {
        if (n->fid == fid && n->parent == parent) {
            return n;
        }
        j = (j + 1) & t->mask;
    }
    if ((t->used + 1) * 2 > t->mask + 1) {
        if (table_grow(t) < 0) {
            return NULL;
        }
        j = slot_of(parent, fid, t->mask);
        while (t->table[j] != NULL) {
            j = (j + 1) & t->mask;
        }
    }
    Chunk *c = t->chunks;
    if (c == NULL || c->used == CHUNK_NODES) {
        c = PyMem_Malloc(sizeof(Chunk));
        if (c == NULL) {
            return NULL;
        }
        c->next = t->chunks;
        c->used = 0;
        t->chunks = c;
    }
    n = &c->nodes[c->used++];
    memset(n, 0, sizeof(Node));
    n->fid = fid;
    n->parent = parent;
    n->min = NO_MIN;
    n->next_sibling = parent->first_child;
    parent->first_child = n;
    t->table[j] = n;
    t->used++;
    return n;
}

/* Two's-complement wrap instead of signed overflow (undefined behaviour): a Python clock
 * or export(now) may hand over any 64-bit values. */
static inline int64_t
wrap_sub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t
wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline void
close_call(Node *n, int64_t duration, int64_t basetime)
{
    if (duration >= basetime) {
        n->calls++;
        n->incl = wrap_add(n->incl, duration);
        if (duration > n->max) {
            n->max = duration;
        }
        if (duration < n->min) {
            n->min = duration;
        }
    }
}

/* -- the clock ---------------------------------------------------------------------- */

static inline int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A Python clock's reading in nanoseconds; -1 with an exception set when it fails. Runs
 * arbitrary code: the caller holds no pointer into a Thread across it. */
static int64_t
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

/* Nanoseconds; -1 with an exception set when a Python clock fails. */
static inline int64_t
now_ns(Recorder *self)
{
    PyObject *clock = self->clock;
    return clock == NULL ? monotonic_ns() : python_ns(clock);
}

/* -- which thread ------------------------------------------------------------------ */

/* The thread-state dict's answer for this recorder: 1 and *out set when it has one, 0
 * when it has none, -1 with an exception set on failure. */
static int
dict_thread(Recorder *self, PyObject *dict, Thread **out)
{
    PyObject *hit = PyDict_GetItemWithError(dict, self->key);
    if (hit == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    void *p = PyLong_AsVoidPtr(hit);
    if (p == NULL && PyErr_Occurred()) {
        return -1;
    }
    *out = p == NULL ? &SILENT : (Thread *)p;
    return 1;
}

static inline Thread *
remember(Recorder *self, Thread *t)
{
    tls_serial = self->serial;
    tls_thread = t;
    return t;
}

/* The calling thread's Thread: &SILENT when it records nothing, NULL with an exception
 * set on failure. A throwaway answer (new_thread() returned False) is also &SILENT but
 * is not remembered, so the next event asks again. */
static Thread *
lookup_thread(Recorder *self)
{
    /* Borrowed, but safe across Python calls: the thread state owns it for its life. */
    PyObject *dict = PyThreadState_GetDict();
    Thread *t;
    if (dict != NULL) {
        int found = dict_thread(self, dict, &t);
        if (found != 0) {
            return found < 0 ? NULL : remember(self, t);
        }
    }
    PyObject *new_thread = self->new_thread;
    if (new_thread == NULL) { /* cleared by the garbage collector: going away */
        return &SILENT;
    }
    Py_INCREF(new_thread); /* the recorder may be cleared while it runs */
    PyObject *token = PyObject_CallNoArgs(new_thread);
    Py_DECREF(new_thread);
    if (token == NULL) {
        return NULL;
    }
    /* new_thread() ran Python code, which may itself have decided this thread (a nested
     * event of this recorder on this thread, quiet_this_thread): that decision stands,
     * rather than a second tree for one thread. */
    if (tls_serial == self->serial) {
        Py_DECREF(token);
        return tls_thread;
    }
    if (dict != NULL) {
        int found = dict_thread(self, dict, &t);
        if (found != 0) {
            Py_DECREF(token);
            return found < 0 ? NULL : remember(self, t);
        }
    }
    if (token == Py_False) {
        Py_DECREF(token);
        return &SILENT;
    }
    t = &SILENT;
    if (token != Py_None) {
        t = thread_new(token);
        if (t == NULL) {
            Py_DECREF(token);
            PyErr_NoMemory();
            return NULL;
        }
        if (self->last == NULL) {
            self->first = t;
        }
        else {
            self->last->next = t;
        }
        self->last = t;
    }
    Py_DECREF(token);
    if (dict != NULL) {
        /* No Python code can run from here to the end (an int value, a str key): t is
         * linked and stays valid; a failure leaves it recorded but not remembered. */
        PyObject *value = PyLong_FromVoidPtr(t == &SILENT ? NULL : t);
        if (value == NULL || PyDict_SetItem(dict, self->key, value) < 0) {
            Py_XDECREF(value);
            return NULL;
        }
        Py_DECREF(value);
    }
    return remember(self, t);
}

static inline Thread *
current_thread(Recorder *self)
{
    if (tls_serial == self->serial) {
        return tls_thread;
    }
    return lookup_thread(self);
}

/* -- the two events ------------------------------------------------------------------ */

/* Cleared by the garbage collector (tp_clear) and still receiving events: record nothing
 * (its clock is gone too; a CLOCK_MONOTONIC reading would not compare with it). */
static inline int
gone(Recorder *self)
{
    return self->new_thread == NULL;
}

static int
do_enter(Recorder *self, uintptr_t fid)
{
    if (gone(self)) {
        return 0;
    }
    Thread *t = current_thread(self);
    if (t == NULL) {
        return -1;
    }
    if (t == &SILENT) {
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
    Node *parent = t->depth ? t->frames[t->depth - 1].node : &t->root;
    Node *n = parent->last_hit;
    if (n == NULL || n->fid != fid) {
        n = child_of(t, parent, fid);
        if (n == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        parent->last_hit = n;
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
    f->start = clock == NULL ? monotonic_ns() : start;
    return 0;
}

static int
do_leave(Recorder *self, uintptr_t fid)
{
    if (gone(self)) {
        return 0;
    }
    int64_t now = now_ns(self);
    if (now == -1 && PyErr_Occurred()) {
        return -1;
    }
    /* May call new_thread(); from here on no Python code runs. */
    Thread *t = current_thread(self);
    if (t == NULL) {
        return -1;
    }
    if (t == &SILENT || t->depth == 0) {
        return 0;
    }
    Frame *top = &t->frames[t->depth - 1];
    if (top->node->fid == fid) {
        t->depth--;
        close_call(top->node, wrap_sub(now, top->start), self->basetime);
        return 0;
    }
    /* Resync: a deeper match means the calls above it missed their leave (closed now,
     * at the same instant); no match means it was entered before recording began. */
    for (Py_ssize_t i = t->depth - 2; i >= 0; i--) {
        if (t->frames[i].node->fid == fid) {
            while (t->depth > i) {
                Frame *f = &t->frames[--t->depth];
                close_call(f->node, wrap_sub(now, f->start), self->basetime);
            }
            return 0;
        }
    }
    return 0;
}

/* Hand the pending exception to on_error (the collector's failure rule), never straight
 * into the program. Returns -1 with an exception set only when on_error itself raised:
 * that is how the rule re-raises an exception that is the program's (one raised by its
 * signal handler while our Python callback ran), and it must then reach the program. */
static int
report(Recorder *self, const char *where)
{
    /* The collector's rule for RecursionError: the program's (it is at its limit and our
     * Python callback pushed it over), skipped, never passed on: calling on_error there
     * could overflow again, into the program. */
    if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear();
        return 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException(); /* normalised, traceback attached */
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    if (exc == NULL) { /* nothing pending: nothing to report */
        return 0;
    }
    int status = 0;
    /* A strong reference: on_error may be replaced (another attach) or the recorder
     * cleared while it runs. */
    PyObject *on_error = Py_XNewRef(self->on_error);
    if (on_error != NULL) {
        PyObject *r = PyObject_CallFunction(on_error, "Os", exc, where);
        if (r == NULL) {
            status = -1;
        }
        Py_XDECREF(r);
        Py_DECREF(on_error);
        Py_DECREF(exc);
    }
    else {
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(exc);
#else
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc,
                      PyException_GetTraceback(exc));
#endif
        PyErr_WriteUnraisable((PyObject *)self);
    }
    return status;
}

static int
fid_arg(PyObject *const *args, Py_ssize_t nargs, uintptr_t *fid)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "expected one function id");
        return -1;
    }
    void *p = PyLong_AsVoidPtr(args[0]);
    if (p == NULL && PyErr_Occurred()) {
        return -1;
    }
    *fid = (uintptr_t)p;
    return 0;
}

/* -- methods ------------------------------------------------------------------------ */

static PyObject *
Recorder_enter(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    uintptr_t fid;
    if (fid_arg(args, nargs, &fid) < 0 || do_enter(self, fid) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
Recorder_leave(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    uintptr_t fid;
    if (fid_arg(args, nargs, &fid) < 0 || do_leave(self, fid) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The interpreter holds no reference to a sys.monitoring callback while calling it, so
 * when a Python call inside detaches the collector (unregistering the callback) and the
 * program has dropped the profiler, the bound method and the recorder would be freed
 * under our feet; these two keep the recorder alive until they return. */

/* PY_START / PY_RESUME (code, offset): the function id is id(code). */
static PyObject *
Recorder_py_start(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result = Py_None;
    if (nargs >= 1) {
        Py_INCREF(self);
        if (do_enter(self, (uintptr_t)args[0]) < 0 && report(self, "function_enter") < 0) {
            result = NULL;
        }
        Py_DECREF(self);
    }
    return Py_XNewRef(result);
}

/* PY_RETURN / PY_YIELD (code, offset, value). */
static PyObject *
Recorder_py_return(Recorder *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result = Py_None;
    if (nargs >= 1) {
        Py_INCREF(self);
        if (do_leave(self, (uintptr_t)args[0]) < 0 && report(self, "function_leave") < 0) {
            result = NULL;
        }
        Py_DECREF(self);
    }
    return Py_XNewRef(result);
}

static PyObject *
Recorder_monitoring(Recorder *self, PyObject *args)
{
    const char *name;
    PyObject *on_error;
    if (!PyArg_ParseTuple(args, "sO:__profkit_monitoring__", &name, &on_error)) {
        return NULL;
    }
    const char *method;
    if (strcmp(name, "enter") == 0) {
        method = "py_start";
    }
    else if (strcmp(name, "leave") == 0) {
        method = "py_return";
    }
    else {
        Py_RETURN_NONE;
    }
    Py_XSETREF(self->on_error, on_error == Py_None ? NULL : Py_NewRef(on_error));
    return PyObject_GetAttrString((PyObject *)self, method);
}

static PyObject *
Recorder_quiet_this_thread(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *dict = PyThreadState_GetDict();
    if (dict != NULL) {
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL || PyDict_SetItem(dict, self->key, zero) < 0) {
            Py_XDECREF(zero);
            return NULL;
        }
        Py_DECREF(zero);
    }
    remember(self, &SILENT);
    Py_RETURN_NONE;
}

/* One exported thread, copied out in plain C: (parent index, fid, calls, incl, min,
 * max) rows in pre-order, and a strong reference to its token. */
typedef struct {
    Py_ssize_t parent;
    uintptr_t fid;
    int64_t calls, incl, min, max;
} Row;

typedef struct {
    PyObject *token;
    Row *rows;
    size_t count;
} Copy;

static void
free_copies(Copy *copies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Py_XDECREF(copies[i].token);
        PyMem_Free(copies[i].rows);
    }
    PyMem_Free(copies);
}

/* Close every recording thread's open calls at ``now`` (adding their number to *closed)
 * and copy its tree. Plain C only (PyMem, no object allocation, so no collection and no
 * Python code): the trees cannot change under the walk. NULL with an exception set when
 * out of memory. */
static Copy *
copy_threads(Recorder *self, int64_t now, size_t *count, long long *closed)
{
    size_t n = 0, most = 0;
    for (Thread *t = self->first; t != NULL; t = t->next) {
        if (t->token != NULL) { /* NULL: cleared by the garbage collector */
            n++;
            most = t->used + 1 > most ? t->used + 1 : most;
        }
    }
    *count = n;
    Copy *copies = PyMem_Calloc(n ? n : 1, sizeof(Copy));
    Node **work = PyMem_Malloc((most ? most : 1) * sizeof(Node *));
    Py_ssize_t *parents = PyMem_Malloc((most ? most : 1) * sizeof(Py_ssize_t));
    if (copies == NULL || work == NULL || parents == NULL) {
        goto nomem;
    }
    size_t k = 0;
    for (Thread *t = self->first; t != NULL; t = t->next) {
        if (t->token == NULL) {
            continue;
        }
        while (t->depth > 0) {
            Frame *f = &t->frames[--t->depth];
            close_call(f->node, wrap_sub(now, f->start), self->basetime);
            (*closed)++;
        }
        Copy *c = &copies[k++];
        c->token = Py_NewRef(t->token);
        c->rows = PyMem_Malloc((t->used + 1) * sizeof(Row));
        if (c->rows == NULL) {
            goto nomem;
        }
        size_t top = 0;
        work[top] = &t->root;
        parents[top++] = -1;
        while (top > 0) {
            top--;
            Node *node = work[top];
            Row *row = &c->rows[c->count];
            row->parent = parents[top];
            row->fid = node->fid;
            row->calls = node->calls;
            row->incl = node->incl;
            row->min = node->min;
            row->max = node->max;
            Py_ssize_t index = (Py_ssize_t)c->count++;
            for (Node *child = node->first_child; child != NULL; child = child->next_sibling) {
                work[top] = child;
                parents[top++] = index;
            }
        }
    }
    PyMem_Free(work);
    PyMem_Free(parents);
    return copies;
nomem:
    if (copies != NULL) {
        free_copies(copies, n);
    }
    PyMem_Free(work);
    PyMem_Free(parents);
    PyErr_NoMemory();
    return NULL;
}

/* export(now) -> (closed, [(token, nodes)]): every recording thread's open calls closed
 * at ``now`` (counted in ``closed``), and its tree flattened in pre-order as tuples
 * (parent index, fid, calls, incl, min, max); index 0 is the root. Flat and iterative,
 * so a 10,000-deep recursion exports without deep C or Python recursion. */
static PyObject *
Recorder_export(Recorder *self, PyObject *arg)
{
    long long now = PyLong_AsLongLong(arg);
    if (now == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long closed = 0;
    size_t n;
    Copy *copies = copy_threads(self, (int64_t)now, &n, &closed);
    if (copies == NULL) {
        return NULL;
    }
    /* From here on Python objects are built from the copies: whatever runs meanwhile
     * (the collector, finalizers, other threads' events) cannot touch them. */
    PyObject *threads = PyList_New((Py_ssize_t)n);
    if (threads == NULL) {
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        Copy *c = &copies[i];
        PyObject *nodes = PyList_New((Py_ssize_t)c->count);
        if (nodes == NULL) {
            goto fail;
        }
        for (size_t j = 0; j < c->count; j++) {
            Row *r = &c->rows[j];
            PyObject *row = Py_BuildValue(
                "(nKLLLL)", r->parent, (unsigned long long)r->fid, (long long)r->calls,
                (long long)r->incl, (long long)r->min, (long long)r->max);
            if (row == NULL) {
                Py_DECREF(nodes);
                goto fail;
            }
            PyList_SET_ITEM(nodes, (Py_ssize_t)j, row);
        }
        PyObject *pair = PyTuple_Pack(2, c->token, nodes);
        Py_DECREF(nodes);
        if (pair == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(threads, (Py_ssize_t)i, pair);
    }
    free_copies(copies, n);
    return Py_BuildValue("(LN)", closed, threads);
fail:
    free_copies(copies, n);
    Py_XDECREF(threads);
    return NULL;
}

/* -- type --------------------------------------------------------------------------- */

static PyObject *
Recorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"new_thread", "basetime_ns", "clock", NULL};
    PyObject *new_thread, *clock = Py_None;
    long long basetime = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "O|L$O:Recorder", kwlist, &new_thread, &basetime, &clock)) {
        return NULL;
    }
    if (!PyCallable_Check(new_thread) || (clock != Py_None && !PyCallable_Check(clock))) {
        PyErr_SetString(PyExc_TypeError, "new_thread and clock must be callable");
        return NULL;
    }
    Recorder *self = (Recorder *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->serial = next_serial++;
    self->key = PyUnicode_FromFormat("profkit.profilers.elt._native#%llu",
                                     (unsigned long long)self->serial);
    if (self->key == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->basetime = basetime;
    self->new_thread = Py_NewRef(new_thread);
    self->clock = clock == Py_None ? NULL : Py_NewRef(clock);
    return (PyObject *)self;
}

static int
Recorder_traverse(Recorder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->new_thread);
    Py_VISIT(self->clock);
    Py_VISIT(self->on_error);
    for (Thread *t = self->first; t != NULL; t = t->next) {
        Py_VISIT(t->token);
    }
    return 0;
}

/* After this the recorder records nothing (see gone()); export skips the threads, whose
 * tokens are cleared too, since a token may refer back to the recorder (a cycle only
 * this can break). */
static int
Recorder_clear(Recorder *self)
{
    Py_CLEAR(self->new_thread);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->on_error);
    for (Thread *t = self->first; t != NULL; t = t->next) {
        Py_CLEAR(t->token);
    }
    return 0;
}

/* Drop this thread's thread-state-dict entry for a recorder going away (other threads'
 * entries are out of reach; their keys never match again, and their dicts die with
 * them). Deallocation may run while an exception is pending: it is kept as it was. */
static void
forget_this_thread(Recorder *self)
{
    if (self->key == NULL) {
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *pending = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    PyObject *dict = PyThreadState_GetDict();
    if (dict != NULL) {
        PyObject *hit = PyDict_GetItemWithError(dict, self->key);
        if (hit != NULL && PyDict_DelItem(dict, self->key) < 0) {
            hit = NULL;
        }
        if (hit == NULL) {
            PyErr_Clear();
        }
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(pending);
#else
    PyErr_Restore(type, value, tb);
#endif
}

static void
Recorder_dealloc(Recorder *self)
{
    PyObject_GC_UnTrack(self);
    if (tls_serial == self->serial) {
        tls_serial = 0;
        tls_thread = NULL;
    }
    forget_this_thread(self);
    Recorder_clear(self);
    Thread *t = self->first;
    while (t != NULL) {
        Thread *next = t->next;
        thread_free(t);
        t = next;
    }
    Py_XDECREF(self->key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Recorder_get_basetime(Recorder *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->basetime);
}

static PyMethodDef Recorder_methods[] = {
    {"enter", (PyCFunction)(void (*)(void))Recorder_enter, METH_FASTCALL,
     "enter(function_id): a call (or resume) of the function starts on this thread."},
    {"leave", (PyCFunction)(void (*)(void))Recorder_leave, METH_FASTCALL,
     "leave(function_id): a call (or activation) of the function ends on this thread."},
    {"py_start", (PyCFunction)(void (*)(void))Recorder_py_start, METH_FASTCALL,
     "sys.monitoring PY_START/PY_RESUME callback: enter(id(code)); never raises."},
    {"py_return", (PyCFunction)(void (*)(void))Recorder_py_return, METH_FASTCALL,
     "sys.monitoring PY_RETURN/PY_YIELD callback: leave(id(code)); never raises."},
    {"__profkit_monitoring__", (PyCFunction)Recorder_monitoring, METH_VARARGS,
     "__profkit_monitoring__(name, on_error): the sys.monitoring-shaped form of the\n"
     "id-shaped method ``name`` ('enter' or 'leave'), or None; errors go to on_error."},
    {"quiet_this_thread", (PyCFunction)Recorder_quiet_this_thread, METH_NOARGS,
     "Record nothing more on the calling thread (what it recorded is kept)."},
    {"export", (PyCFunction)Recorder_export, METH_O,
     "export(now) -> (closed, [(token, [(parent, fid, calls, incl, min, max), ...])])."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Recorder_getset[] = {
    {"basetime_ns", (getter)Recorder_get_basetime, NULL, "calls shorter than this are not counted", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profkit.profilers.elt._native.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Recorder(new_thread, basetime_ns=0, *, clock=None): trace mode's call trees.",
    .tp_new = Recorder_new,
    .tp_traverse = (traverseproc)Recorder_traverse,
    .tp_clear = (inquiry)Recorder_clear,
    .tp_dealloc = (destructor)Recorder_dealloc,
    .tp_methods = Recorder_methods,
    .tp_getset = Recorder_getset,
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.profilers.elt._native",
    .m_doc = "Trace mode's hot path in C (see trace.py for the pure Python twin).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&RecorderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Recorder", (PyObject *)&RecorderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
