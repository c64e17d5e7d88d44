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
 * The logic is trace.py's and lines.py's, and must stay so (property tests compare them):
 *   - one stack per thread of (node, start) frames; a node is a call-tree *path*;
 *   - enter: find/create the child node, push, read the clock *last*;
 *   - leave: read the clock *first*; pop if the top matches, else resync (close the
 *     calls above a deeper match at the same instant, or ignore an unknown leave);
 *   - a call shorter than the base time adds to no node (its caller keeps the time);
 *   - self time is not counted here: build time derives it from inclusive times;
 *   - event lines (``emit``): lines.py's rules, held Enter lines of the base time included;
 *   - timeline (``span_cap`` >= 0): one span per shown call, up to the cap, then counted.
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
#include "../../_pyerr_compat.h"
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
    PyObject *name; /* event lines: the function's name, looked up once per node */
} Node;

typedef struct Chunk {
    struct Chunk *next;
    size_t used;
    Node nodes[CHUNK_NODES];
} Chunk;

typedef struct {
    Node *node;
    int64_t start;
    int kind; /* OPEN_ENTER or OPEN_RESUME: how its event line opens */
} Frame;

enum { OPEN_ENTER, OPEN_RESUME };
enum { CLOSE_LEAVE, CLOSE_YIELD };
static const char *const OPEN_WORD[] = {"Enter: ", "Resume: "};
static const char *const CLOSE_WORD[] = {"Leave: ", "Yield: "};

typedef struct Thread {
    PyObject *token; /* what new_thread() returned; NULL for a silent thread */
    Node root;
    Frame *frames; /* frames[0..depth) sit above the root */
    Py_ssize_t depth, cap;
    /* event lines: stack entries (the root counts as 1) whose opening line is written;
     * the entries above are pending (lines.py's ``stack[0].kind``) */
    Py_ssize_t written;
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
    /* event lines (emit NULL: none) */
    PyObject *emit;  /* (line) -> None */
    PyObject *namer; /* (fid) -> str */
    int unit_ns;     /* durations in ns, else in us with three decimals */
    /* timeline (span_cap < 0: none); plain C, so export can add spans without Python */
    Py_ssize_t span_cap, nspans, spans_alloc;
    long long spans_dropped;
    struct Span *spans;
} Recorder;

/* One shown call for the timeline: its thread (for its token), path, times, depth. */
typedef struct Span {
    Thread *thread;
    uintptr_t fid;
    int64_t start, end;
    Py_ssize_t depth;
} Span;

static Thread SILENT; /* a thread that records nothing, for good */
static uint64_t next_serial = 1;
/* initial-exec: read straight from the thread pointer, without a __tls_get_addr call per
 * event (about 3 % of a traced program's time, measured). A dlopen'ed module gets such
 * variables from the static TLS surplus glibc reserves for this; where it cannot, the
 * import fails and profkit runs in pure Python (native.py). */
#if defined(__GNUC__) && defined(__ELF__)
#define FAST_TLS __attribute__((tls_model("initial-exec")))
#else
#define FAST_TLS
#endif
static _Thread_local uint64_t tls_serial FAST_TLS;
static _Thread_local Thread *tls_thread FAST_TLS;

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
    t->written = 1;
    t->token = Py_NewRef(token);
    return t;
}

static void
thread_free(Thread *t)
{
    Chunk *c = t->chunks;
    while (c != NULL) {
        Chunk *next = c->next;
        for (size_t i = 0; i < c->used; i++) {
            Py_XDECREF(c->nodes[i].name);
        }
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

/* -- timeline ---------------------------------------------------------------------- */

/* Plain C (PyMem only, no Python code): also used by export's copy. */
static int
add_span(Recorder *self, Thread *t, uintptr_t fid, int64_t start, int64_t end, Py_ssize_t depth)
{
    if (self->nspans >= self->span_cap) {
        self->spans_dropped++;
        return 0;
    }
    if (self->nspans == self->spans_alloc) {
        Py_ssize_t alloc = self->spans_alloc ? self->spans_alloc * 2 : 1024;
        if (alloc > self->span_cap) {
            alloc = self->span_cap;
        }
        Span *spans = PyMem_Realloc(self->spans, (size_t)alloc * sizeof(Span));
        if (spans == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->spans = spans;
        self->spans_alloc = alloc;
    }
    Span *sp = &self->spans[self->nspans++];
    sp->thread = t;
    sp->fid = fid;
    sp->start = start;
    sp->end = end;
    sp->depth = depth;
    return 0;
}

/* -- event lines (lines.py's rules; see its docstring) -------------------------------- */

/* ``indent`` levels of four spaces, ``head``, ``name``, ``tail`` (head and tail ASCII). */
static PyObject *
make_line(Py_ssize_t indent, const char *head, PyObject *name, const char *tail)
{
    Py_ssize_t hl = (Py_ssize_t)strlen(head), tl = (Py_ssize_t)strlen(tail);
    Py_ssize_t nl = PyUnicode_GET_LENGTH(name);
    if (indent > (PY_SSIZE_T_MAX - hl - tl - nl) / 4) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t il = 4 * indent;
    Py_UCS4 maxchar = PyUnicode_MAX_CHAR_VALUE(name);
    PyObject *line = PyUnicode_New(il + hl + nl + tl, maxchar < 127 ? 127 : maxchar);
    if (line == NULL) {
        return NULL;
    }
    int kind = PyUnicode_KIND(line);
    void *data = PyUnicode_DATA(line);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < il; i++) {
        PyUnicode_WRITE(kind, data, at++, ' ');
    }
    for (Py_ssize_t i = 0; i < hl; i++) {
        PyUnicode_WRITE(kind, data, at++, (unsigned char)head[i]);
    }
    if (PyUnicode_CopyCharacters(line, at, name, 0, nl) < 0) {
        Py_DECREF(line);
        return NULL;
    }
    at += nl;
    for (Py_ssize_t i = 0; i < tl; i++) {
        PyUnicode_WRITE(kind, data, at++, (unsigned char)tail[i]);
    }
    return line;
}

/* The node's function name, a new reference (cached on the node: nodes never move). */
static PyObject *
name_of(Recorder *self, Node *n)
{
    if (n->name != NULL) {
        return Py_NewRef(n->name);
    }
    PyObject *namer = Py_XNewRef(self->namer); /* the recorder may be cleared meanwhile */
    if (namer == NULL) {
        return PyUnicode_FromString("?");
    }
    PyObject *fid = PyLong_FromVoidPtr((void *)n->fid);
    PyObject *name = fid == NULL ? NULL : PyObject_CallOneArg(namer, fid);
    Py_XDECREF(fid);
    Py_DECREF(namer);
    if (name == NULL) {
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        Py_DECREF(name);
        PyErr_SetString(PyExc_TypeError, "the name callback must return a str");
        return NULL;
    }
    if (n->name == NULL) { /* the callback may have named it already (re-entry) */
        n->name = Py_NewRef(name);
    }
    return name;
}

/* Write one line for ``n``. Runs Python code: callers hold no pointer into frames. */
static int
emit_line(Recorder *self, Py_ssize_t indent, const char *head, Node *n, const char *tail)
{
    PyObject *name = name_of(self, n);
    if (name == NULL) {
        return -1;
    }
    PyObject *line = make_line(indent, head, name, tail);
    Py_DECREF(name);
    if (line == NULL) {
        return -1;
    }
    PyObject *emit = Py_XNewRef(self->emit);
    if (emit == NULL) { /* cleared meanwhile: the line goes nowhere */
        Py_DECREF(line);
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(emit, line);
    Py_DECREF(emit);
    Py_DECREF(line);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* The opening line of the stack entry ``index`` (frames[index - 1]), if it still exists. */
static int
emit_open(Recorder *self, Thread *t, Py_ssize_t index)
{
    if (index < 1 || index > t->depth) {
        return 0; /* gone meanwhile (only Python code run by a callback can do that) */
    }
    Frame f = t->frames[index - 1];
    return emit_line(self, index - 1, OPEN_WORD[f.kind], f.node, "");
}

/* Base time: write the held opening lines of calls already running for the base time. */
static int
lines_on_open(Recorder *self, Thread *t, int64_t now)
{
    while (t->written <= t->depth
           && wrap_sub(now, t->frames[t->written - 1].start) >= self->basetime) {
        Py_ssize_t index = t->written;
        if (emit_open(self, t, index) < 0) {
            return -1;
        }
        t->written = index + 1;
    }
    return 0;
}

/* The call of ``node`` at stack index ``index`` (popped already) lasted ``duration``. */
static int
lines_on_close(Recorder *self, Thread *t, Py_ssize_t index, Node *node, int open_kind,
               int64_t duration, int close_kind)
{
    if (index >= t->written) {
        if (duration < self->basetime) {
            return 0; /* hidden, and its opening line was never written */
        }
        /* Shown: its held ancestors lasted at least as long, so they are shown too. */
        for (Py_ssize_t d = t->written; d < index; d++) {
            if (emit_open(self, t, d) < 0) {
                return -1;
            }
        }
        if (emit_line(self, index - 1, OPEN_WORD[open_kind], node, "") < 0) {
            return -1;
        }
    }
    char tail[64];
    if (self->unit_ns) {
        snprintf(tail, sizeof tail, ", Duration: %lld ns", (long long)duration);
    }
    else {
        snprintf(tail, sizeof tail, ", Duration: %.3f us", (double)duration / 1000.0);
    }
    if (emit_line(self, index - 1, CLOSE_WORD[close_kind], node, tail) < 0) {
        return -1;
    }
    t->written = index;
    return 0;
}

/* -- the two events ------------------------------------------------------------------ */

/* Cleared by the garbage collector (tp_clear) and still receiving events: record nothing
 * (its clock is gone too; a CLOCK_MONOTONIC reading would not compare with it). */
static inline int
gone(Recorder *self)
{
    return self->new_thread == NULL;
}

/* Record the call just popped off ``t`` (it is frames[t->depth]) as ending at ``now``:
 * statistics, timeline span and, with ``lines``, its event lines. */
static int
close_frame(Recorder *self, Thread *t, int64_t now, int close_kind, int lines)
{
    Frame f = t->frames[t->depth]; /* a copy: event lines run Python code */
    int64_t duration = wrap_sub(now, f.start);
    close_call(f.node, duration, self->basetime);
    if (self->span_cap >= 0 && duration >= self->basetime
        && add_span(self, t, f.node->fid, f.start, now, t->depth) < 0) {
        return -1;
    }
    if (lines && self->emit != NULL) {
        return lines_on_close(self, t, t->depth + 1, f.node, f.kind, duration, close_kind);
    }
    return 0;
}

static int
do_enter(Recorder *self, uintptr_t fid, int kind)
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
        if (emit_line(self, index - 1, OPEN_WORD[kind], n, "") < 0) {
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

static int
do_leave(Recorder *self, uintptr_t fid, int close_kind)
{
    if (gone(self)) {
        return 0;
    }
    int64_t now = now_ns(self);
    if (now == -1 && PyErr_Occurred()) {
        return -1;
    }
    /* May call new_thread(); without event lines no Python code runs after it. */
    Thread *t = current_thread(self);
    if (t == NULL) {
        return -1;
    }
    if (t == &SILENT || t->depth == 0) {
        return 0;
    }
    if (t->frames[t->depth - 1].node->fid == fid) {
        t->depth--;
        return close_frame(self, t, now, close_kind, 1);
    }
    /* Resync: a deeper match means the calls above it missed their leave (closed now,
     * at the same instant); no match means it was entered before recording began. */
    for (Py_ssize_t i = t->depth - 2; i >= 0; i--) {
        if (t->frames[i].node->fid == fid) {
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
    PyObject *exc = take_raised_exception(); /* normalised, traceback attached */
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

/* The id-shaped methods: enter/resume open a call or an activation, leave/yield_ close
 * it (the kinds only change the event lines' words). */
#define ID_METHOD(NAME, CALL)                                                           \
    static PyObject *NAME(Recorder *self, PyObject *const *args, Py_ssize_t nargs)    \
    {                                                                                   \
        uintptr_t fid;                                                                  \
        if (fid_arg(args, nargs, &fid) < 0 || CALL < 0) {                               \
            return NULL;                                                                \
        }                                                                               \
        Py_RETURN_NONE;                                                                 \
    }
ID_METHOD(Recorder_enter, do_enter(self, fid, OPEN_ENTER))
ID_METHOD(Recorder_resume, do_enter(self, fid, OPEN_RESUME))
ID_METHOD(Recorder_leave, do_leave(self, fid, CLOSE_LEAVE))
ID_METHOD(Recorder_yield, do_leave(self, fid, CLOSE_YIELD))

/* The sys.monitoring-shaped methods: PY_START/PY_RESUME pass (code, offset), PY_RETURN/
 * PY_YIELD (code, offset, value); the function id is id(code).
 *
 * The interpreter holds no reference to a sys.monitoring callback while calling it, so
 * when a Python call inside detaches the collector (unregistering the callback) and the
 * program has dropped the profiler, the bound method and the recorder would be freed
 * under our feet; these keep the recorder alive until they return. */
#define MONITORING_METHOD(NAME, CALL, WHERE)                                            \
    static PyObject *NAME(Recorder *self, PyObject *const *args, Py_ssize_t nargs)    \
    {                                                                                   \
        PyObject *result = Py_None;                                                     \
        if (nargs >= 1) {                                                               \
            uintptr_t fid = (uintptr_t)args[0];                                         \
            Py_INCREF(self);                                                            \
            if (CALL < 0 && report(self, WHERE) < 0) {                                  \
                result = NULL;                                                          \
            }                                                                           \
            Py_DECREF(self);                                                            \
        }                                                                               \
        return Py_XNewRef(result);                                                      \
    }
MONITORING_METHOD(Recorder_py_start, do_enter(self, fid, OPEN_ENTER), "function_enter")
MONITORING_METHOD(Recorder_py_resume, do_enter(self, fid, OPEN_RESUME), "function_resume")
MONITORING_METHOD(Recorder_py_return, do_leave(self, fid, CLOSE_LEAVE), "function_leave")
MONITORING_METHOD(Recorder_py_yield, do_leave(self, fid, CLOSE_YIELD), "function_yield")

static PyObject *
Recorder_monitoring(Recorder *self, PyObject *args)
{
    const char *name;
    PyObject *on_error;
    if (!PyArg_ParseTuple(args, "sO:__profkit_monitoring__", &name, &on_error)) {
        return NULL;
    }
    static const char *const forms[][2] = {
        {"enter", "py_start"},
        {"resume", "py_resume"},
        {"leave", "py_return"},
        {"yield_", "py_yield"},
    };
    const char *method = NULL;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(name, forms[i][0]) == 0) {
            method = forms[i][1];
        }
    }
    if (method == NULL) {
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
            int64_t duration = wrap_sub(now, f->start);
            close_call(f->node, duration, self->basetime);
            if (self->span_cap >= 0 && duration >= self->basetime
                && add_span(self, t, f->node->fid, f->start, now, t->depth) < 0) {
                goto fail; /* PyErr_NoMemory already set */
            }
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
    PyErr_NoMemory();
fail:
    if (copies != NULL) {
        free_copies(copies, n);
    }
    PyMem_Free(work);
    PyMem_Free(parents);
    return NULL;
}

/* spans() -> ([(token, fid, start, end, depth)], dropped): the timeline so far, in
 * recording order (export adds the calls it closes); a thread's token is the object
 * export returns for it. Copied in plain C first, like export's trees. */
static PyObject *
Recorder_spans(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = self->nspans;
    Span *copy = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(Span));
    PyObject **tokens = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(PyObject *));
    if (copy == NULL || tokens == NULL) {
        PyMem_Free(copy);
        PyMem_Free(tokens);
        return PyErr_NoMemory();
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (self->spans[i].thread->token != NULL) { /* NULL: cleared by the collector */
            copy[kept] = self->spans[i];
            tokens[kept++] = Py_NewRef(self->spans[i].thread->token);
        }
    }
    long long dropped = self->spans_dropped;
    PyObject *list = PyList_New(kept);
    for (Py_ssize_t i = 0; list != NULL && i < kept; i++) {
        Span *sp = &copy[i];
        PyObject *row = Py_BuildValue(
            "(OKLLn)", tokens[i], (unsigned long long)sp->fid, (long long)sp->start,
            (long long)sp->end, sp->depth);
        if (row == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, row);
    }
    for (Py_ssize_t i = 0; i < kept; i++) {
        Py_DECREF(tokens[i]);
    }
    PyMem_Free(copy);
    PyMem_Free(tokens);
    return list == NULL ? NULL : Py_BuildValue("(NL)", list, dropped);
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
    static char *kwlist[] = {
        "new_thread", "basetime_ns", "clock", "emit", "name", "unit", "span_cap", NULL};
    PyObject *new_thread, *clock = Py_None, *emit = Py_None, *namer = Py_None;
    const char *unit = "us";
    long long basetime = 0;
    Py_ssize_t span_cap = -1;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "O|L$OOOsn:Recorder", kwlist, &new_thread, &basetime, &clock, &emit,
            &namer, &unit, &span_cap)) {
        return NULL;
    }
    if (!PyCallable_Check(new_thread) || (clock != Py_None && !PyCallable_Check(clock))) {
        PyErr_SetString(PyExc_TypeError, "new_thread and clock must be callable");
        return NULL;
    }
    if (emit != Py_None && (!PyCallable_Check(emit) || !PyCallable_Check(namer))) {
        PyErr_SetString(PyExc_TypeError, "event lines need callable emit and name");
        return NULL;
    }
    if (strcmp(unit, "us") != 0 && strcmp(unit, "ns") != 0) {
        PyErr_SetString(PyExc_ValueError, "unit must be 'us' or 'ns'");
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
    if (emit != Py_None) {
        self->emit = Py_NewRef(emit);
        self->namer = Py_NewRef(namer);
    }
    self->unit_ns = strcmp(unit, "ns") == 0;
    self->span_cap = span_cap < 0 ? -1 : span_cap;
    return (PyObject *)self;
}

static int
Recorder_traverse(Recorder *self, visitproc visit, void *arg)
{
    Py_VISIT(self->new_thread);
    Py_VISIT(self->clock);
    Py_VISIT(self->on_error);
    Py_VISIT(self->emit);
    Py_VISIT(self->namer);
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
    Py_CLEAR(self->emit);
    Py_CLEAR(self->namer);
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
    PyMem_Free(self->spans);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Recorder_get_basetime(Recorder *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->basetime);
}

static PyMethodDef Recorder_methods[] = {
    {"enter", (PyCFunction)(void (*)(void))Recorder_enter, METH_FASTCALL,
     "enter(function_id): a call of the function starts on this thread."},
    {"resume", (PyCFunction)(void (*)(void))Recorder_resume, METH_FASTCALL,
     "resume(function_id): a generator/coroutine activation starts on this thread."},
    {"leave", (PyCFunction)(void (*)(void))Recorder_leave, METH_FASTCALL,
     "leave(function_id): a call of the function ends on this thread."},
    {"yield_", (PyCFunction)(void (*)(void))Recorder_yield, METH_FASTCALL,
     "yield_(function_id): a generator/coroutine activation ends (suspends)."},
    {"py_start", (PyCFunction)(void (*)(void))Recorder_py_start, METH_FASTCALL,
     "sys.monitoring PY_START callback: enter(id(code)); never raises."},
    {"py_resume", (PyCFunction)(void (*)(void))Recorder_py_resume, METH_FASTCALL,
     "sys.monitoring PY_RESUME callback: resume(id(code)); never raises."},
    {"py_return", (PyCFunction)(void (*)(void))Recorder_py_return, METH_FASTCALL,
     "sys.monitoring PY_RETURN callback: leave(id(code)); never raises."},
    {"py_yield", (PyCFunction)(void (*)(void))Recorder_py_yield, METH_FASTCALL,
     "sys.monitoring PY_YIELD callback: yield_(id(code)); never raises."},
    {"__profkit_monitoring__", (PyCFunction)Recorder_monitoring, METH_VARARGS,
     "__profkit_monitoring__(name, on_error): the sys.monitoring-shaped form of the\n"
     "id-shaped method ``name`` (enter, resume, leave, yield_), or None; errors go to\n"
     "on_error."},
    {"quiet_this_thread", (PyCFunction)Recorder_quiet_this_thread, METH_NOARGS,
     "Record nothing more on the calling thread (what it recorded is kept)."},
    {"export", (PyCFunction)Recorder_export, METH_O,
     "export(now) -> (closed, [(token, [(parent, fid, calls, incl, min, max), ...])])."},
    {"spans", (PyCFunction)Recorder_spans, METH_NOARGS,
     "spans() -> ([(token, fid, start, end, depth), ...], dropped): the timeline."},
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
    .tp_doc = "Recorder(new_thread, basetime_ns=0, *, clock=None, emit=None, name=None,\n"
              "         unit='us', span_cap=-1): trace mode's call trees, event lines and\n"
              "timeline (see profkit/profilers/elt/native.py).",
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
