/* profkit.profilers.elt._native: trace mode's hot path in C (optional; pure Python
 * fallback in trace.py). This header holds the types every unit shares and the inline
 * hot-path helpers; the units are split by concern:
 *   module.c    the Recorder type, its methods, the failure rule, module init;
 *   threads.c   which Thread an event belongs to (TLS cache, thread-state dict);
 *   tree.c      the call trees: their node tables, enter/leave on per-thread stacks;
 *   arena.c     big blocks (the node tables) in huge pages; the wide and name tables;
 *   export.c    closing the open calls and copying the trees out; export();
 *   lines.c     event lines (lines.py's rules);
 *   timeline.c  the timeline's spans;
 *   flat.c      the end-of-run export: pruned rows in the saved file's layout;
 *   frames.c    flat.c's function -> frame index (frame_of), asked once per function;
 *   rowsjson.c  flat.c's rows as the saved file's JSON text (rows_json);
 *   compensate.c the profiler's own cost per call taken out of flat.c's rows, in place;
 *   ccalls.c    C functions as nodes of their own (sys.monitoring CALL/C_RETURN/C_RAISE);
 *   hooks.c     the sys.monitoring callbacks as vectorcall objects (no method call each).
 * hatch_build.py compiles them into one extension.
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
#ifndef PROFKIT_ELT_NATIVE_H
#define PROFKIT_ELT_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Shared between the units of one extension, invisible outside it. */
#if defined(__GNUC__)
#define ELT_HIDDEN __attribute__((visibility("hidden")))
#else
#define ELT_HIDDEN
#endif

/* For the hot path's helpers whose callers must not pay a call (each level's prologue
 * and epilogue are ~10 instructions an event). */
#if defined(__GNUC__)
#define ELT_ALWAYS_INLINE __attribute__((always_inline))
#else
#define ELT_ALWAYS_INLINE
#endif

#define CHUNK_NODES 1024
#define NO_MIN ((int64_t)1 << 62) /* trace.py's tree.NO_MIN */

/* A node's completed calls, min, max and inclusive time, in 32 bits while they fit (the
 * hot path's case: durations under 4.29 s, fewer than 2**32 - 1 calls); a node whose
 * value does not fit has ``calls == WIDE`` and keeps all four, as int64, in its thread's
 * (or tree's) wide table (arena.c), keyed by its number. A total past 32 bits only
 * (CARRIED) keeps its high part there. ``min == MIN_NONE``: no call yet (NO_MIN). */
#define WIDE UINT32_MAX
#define MIN_NONE UINT32_MAX
/* The top bits of ``parent`` while recording: NAMED, the node has a name in its thread's
 * name table (event lines, C calls); CARRIED, its total passed 32 bits: ``incl`` holds
 * the low 32, its wide entry's incl the rest (a multiple of 2**32), so a hot node with a
 * large total pays the wide table once per 4.29 s of it, not on every call. Node numbers
 * stay below them (NUMBER_CAP). */
#define NAMED 0x80000000u
#define CARRIED 0x40000000u
#define NUMBER_MASK 0x3FFFFFFFu
/* The most nodes of a thread: numbers below CARRIED (flat.c's export refuses 2**31 rows
 * anyway: its row indices are 32-bit). */
#define NUMBER_CAP ((size_t)NUMBER_MASK - CHUNK_NODES)

/* One call-tree node, 32 bytes (it was 88, 48, then 40: pytest on sympy's test_arit holds
 * ~1.2 M of them, most of the recorder's memory). Links are node numbers (creation order
 * plus one; 0: none, and as a parent the thread's root), turned into nodes through the
 * thread's numbered chunks; the function is an index into the thread's FidTable (an event
 * compares its fid with ``fids.ids[node->fn]``: one load, no lookup); names live in a side
 * table (event lines and C calls only); incl, calls, min and max are 32-bit with the wide
 * table behind them. No children list: recording finds a child through the hit links and
 * the node table; the export links children itself in side arrays (flat.c, export.c).
 * An enter reads fn and hit; a leave writes incl, calls, min, max. flat.c's export reuses
 * fields (see its comments): ``excl`` over hit, the frame in ``fn``, the kept subtree size
 * in ``parent``. */
typedef struct Node {
    union {
        struct {
            uint32_t last; /* the child found last time: loops call the same callee */
            uint32_t next; /* (in a child) the sibling found after it last time */
        } hit;
        int64_t excl; /* flat.c, once the tree is the export's: self time */
    };
    uint32_t fn;   /* the function: its index in the thread's FidTable; flat.c: the frame */
    uint32_t incl; /* completed calls' total time (ns) unless the node is wide */
    uint32_t calls, min, max;
    uint32_t parent; /* the parent's number (0: root) | NAMED | CARRIED; flat.c: kept size */
} Node;

_Static_assert(sizeof(Node) == 32, "Node is 32 bytes");

/* A thread's functions by index (fids.c): ids[0] is fid 0 (the root's); the others are
 * interned as nodes are made, through ``slots`` (open addressing on the fid, 0: empty). */
typedef struct {
    uintptr_t *ids;
    uint32_t *slots;
    size_t count, cap, mask; /* ids[0..count); slots: mask + 1 */
} FidTable;

/* One wide node's numbers (arena.c). */
typedef struct {
    uint32_t key; /* node number (a tree's: row index during flat.c's copy-out); 0: empty */
    int64_t calls, min, max, incl;
} WideEntry;

typedef struct {
    WideEntry *entries;
    size_t mask, used; /* entries == NULL: empty table */
} WideTable;

/* Names by node (event lines, C calls): the node's address -> a str, owned. */
typedef struct {
    const struct Node **keys;
    PyObject **names;
    size_t mask, used;
} NameTable;

/* A slot of a thread's node table, 4 bytes: the node's number in the bits the table's
 * mask covers and, above them, the same bits of the key's hash (the tag), so a probe
 * compares in the table and reaches for a node (a cache miss on a large program) only on a
 * likely match. Filled to at most 3/4, so every number fits under the mask; the tag is the
 * rest: 11 bits at 2**21 slots, none at 2**31 (every probe then reaches for its node:
 * slower, still right). 0: an empty slot. It was 16 bytes, then 8: on pytest of sympy's
 * test_arit (2**21 slots) 64, then 16.8, now 8.4 MB. */
typedef uint32_t Slot;

/* 1024 nodes, 32 KB: whole pages, mapped on their own (arena.c), so the export's freeing
 * them one by one gives the memory back at once, whatever else the heap holds. A
 * thread's chunks are all full but its last (``used % CHUNK_NODES`` nodes). */
typedef struct Chunk {
    Node nodes[CHUNK_NODES];
} Chunk;

typedef struct {
    Node *node;
    uintptr_t fid; /* node->fid, which a leave compares without reaching for the node */
    int64_t start;
    uint32_t number; /* the node's number: its children's parent key, its wide key */
    int kind;        /* OPEN_ENTER or OPEN_RESUME: how its event line opens */
} Frame;

enum { OPEN_ENTER, OPEN_RESUME };
enum { CLOSE_LEAVE, CLOSE_YIELD };
ELT_HIDDEN extern const char *const OPEN_WORD[2];

/* forks.c: bumped in a forked child before any Python code runs there (see forks.c) */
ELT_HIDDEN extern unsigned long elt_fork_generation;
ELT_HIDDEN int elt_watch_forks(void);
ELT_HIDDEN extern uint64_t elt_next_serial; /* the next Recorder's serial (module.c, forks.c) */
ELT_HIDDEN extern const char *const CLOSE_WORD[2];

typedef struct Thread {
    PyObject *token; /* what new_thread() returned; NULL for a silent thread */
    Node root;
    Frame *frames; /* frames[0..depth) sit above the root */
    Py_ssize_t depth, cap;
    /* event lines: stack entries (the root counts as 1) whose opening line is written;
     * the entries above are pending (lines.py's ``stack[0].kind``) */
    Py_ssize_t written;
    Slot *table; /* open addressing on (parent, fid), filled to at most 3/4 */
    size_t mask, used;
    Chunk **numbered; /* chunks by number (oldest first): node g is in numbered[g / 1024] */
    size_t numbered_cap;
    WideTable wide;
    NameTable names;
    FidTable fids;
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
    PyObject *c_names; /* C-call nodes: {fid: name} (ccalls.c) */
    int unit_ns;     /* durations in ns, else in us with three decimals */
    /* timeline (span_cap < 0: none); plain C, so export can add spans without Python */
    Py_ssize_t span_cap, nspans, spans_alloc;
    long long spans_dropped;
    struct Span *spans;
    /* stop(): nothing more is recorded, so export_flat may flatten the trees themselves
     * (no copy) and free them; exporting: an export_flat is running (it runs Python
     * code, and a second one must not take the trees from under it) */
    int stopped, exporting;
    /* fork_generation (module.c) when made: a recorder inherited by a forked child
     * records nothing there through sys.monitoring (its parent's tree is dropped) */
    unsigned long fork_generation;
} Recorder;

/* One shown call for the timeline: its thread (for its token), path, times, depth. */
typedef struct Span {
    Thread *thread;
    uintptr_t fid;
    int64_t start, end;
    Py_ssize_t depth;
} Span;


/* -- arena.c ------------------------------------------------------------------------ */

/* Zeroed blocks, in huge pages when ``size`` is large (NULL: out of memory, no exception
 * set); big_free needs the same size. */
ELT_HIDDEN void *big_alloc(size_t size);
ELT_HIDDEN void big_free(void *block, size_t size);
/* A chunk of nodes (not zeroed), mapped on its own where the system allows: freed, its
 * memory goes back to the system at once; NULL when out of memory. */
ELT_HIDDEN Chunk *chunk_alloc(void);
ELT_HIDDEN void chunk_free(Chunk *chunk);
ELT_HIDDEN PyObject *native_chunks(PyObject *module, PyObject *ignored);

/* -- threads.c ----------------------------------------------------------------------- */

ELT_HIDDEN extern Thread SILENT; /* a thread that records nothing, for good */
/* initial-exec: read straight from the thread pointer, without a __tls_get_addr call per
 * event (about 3 % of a traced program's time, measured). A dlopen'ed module gets such
 * variables from the static TLS surplus glibc reserves for this; where it cannot, the
 * import fails and profkit runs in pure Python (native.py). */
#if defined(__GNUC__) && defined(__ELF__)
#define FAST_TLS __attribute__((tls_model("initial-exec")))
#else
#define FAST_TLS
#endif
ELT_HIDDEN extern _Thread_local uint64_t tls_serial FAST_TLS;
ELT_HIDDEN extern _Thread_local Thread *tls_thread FAST_TLS;

ELT_HIDDEN Thread *thread_new(PyObject *token);
ELT_HIDDEN void thread_free(Thread *t);
ELT_HIDDEN Thread *lookup_thread(Recorder *self);
ELT_HIDDEN Thread *known_thread_slow(Recorder *self);
ELT_HIDDEN PyObject *Recorder_quiet_this_thread(Recorder *self, PyObject *ignored);
ELT_HIDDEN void forget_this_thread(Recorder *self);
ELT_HIDDEN PyObject *Recorder_reset_after_fork(Recorder *self, PyObject *ignored); /* forks.c */

static inline Thread *
current_thread(Recorder *self)
{
    if (tls_serial == self->serial) {
        return tls_thread;
    }
    return lookup_thread(self);
}

/* The calling thread's Thread if it was decided already, else &SILENT; runs no Python
 * code (threads.c, known_thread_slow, says why C calls need that). Inline like
 * current_thread: every C call's two events ask (a call was ~25 instructions each). */
static inline Thread *
known_thread(Recorder *self)
{
    if (tls_serial == self->serial) {
        return tls_thread;
    }
    return known_thread_slow(self);
}

/* -- tree.c -------------------------------------------------------------------------- */

/* Close one thread's open calls at ``now`` (adding their number to *closed); -1 with
 * MemoryError set when a timeline span could not be added. */
ELT_HIDDEN int close_open_calls(Recorder *self, Thread *t, int64_t now, long long *closed);
ELT_HIDDEN PyObject *Recorder_stop(Recorder *self, PyObject *ignored);

ELT_HIDDEN uint32_t child_of(Thread *t, uint32_t pnum, uintptr_t fid);
ELT_HIDDEN int close_frame(Recorder *self, Thread *t, int64_t now, int close_kind, int lines);
ELT_HIDDEN int do_enter(Recorder *self, uintptr_t fid, int kind);
ELT_HIDDEN int do_leave(Recorder *self, uintptr_t fid, int close_kind);
/* do_leave past its clock reading (events.h's leave_fast reads it itself) */
ELT_HIDDEN int leave_at(Recorder *self, uintptr_t fid, int close_kind, int64_t now);
ELT_HIDDEN int do_c_enter(Recorder *self, uintptr_t fid, uintptr_t caller, PyObject *callable);
ELT_HIDDEN int do_c_leave(Recorder *self, uintptr_t fid, uintptr_t caller);

/* module.c: hand the pending exception to on_error (the failure rule) */
ELT_HIDDEN int report(Recorder *self, const char *where);

/* -- ccalls.c ------------------------------------------------------------------------ */

ELT_HIDDEN int name_c_node(Recorder *self, Thread *t, Node *n, PyObject *callable);
ELT_HIDDEN PyObject *Recorder_c_call(Recorder *self, PyObject *const *args, Py_ssize_t nargs);
ELT_HIDDEN PyObject *Recorder_c_return(Recorder *self, PyObject *const *args, Py_ssize_t nargs);
ELT_HIDDEN PyObject *Recorder_export(Recorder *self, PyObject *arg);
ELT_HIDDEN PyObject *Recorder_set_calls(Recorder *self, PyObject *arg);
ELT_HIDDEN int64_t python_ns(PyObject *clock);

/* Cleared by the garbage collector (tp_clear) and still receiving events: record nothing
 * (its clock is gone too; a CLOCK_MONOTONIC reading would not compare with it). */
static inline int
gone(Recorder *self)
{
    return self->new_thread == NULL;
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

#include "wide.h"

/* -- the clock ----------------------------------------------------------------------- */

static inline int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Nanoseconds; -1 with an exception set when a Python clock fails. */
static inline int64_t
now_ns(Recorder *self)
{
    PyObject *clock = self->clock;
    return clock == NULL ? monotonic_ns() : python_ns(clock);
}

/* -- lines.c ------------------------------------------------------------------------- */

ELT_HIDDEN int emit_line(Recorder *self, Thread *t, Py_ssize_t indent, const char *head, Node *n,
                         const char *tail);
ELT_HIDDEN int lines_on_open(Recorder *self, Thread *t, int64_t now);
ELT_HIDDEN int lines_on_close(Recorder *self, Thread *t, Py_ssize_t index, Node *node,
                              int open_kind, int64_t duration, int close_kind);

/* -- timeline.c ---------------------------------------------------------------------- */

ELT_HIDDEN int add_span(Recorder *self, Thread *t, uintptr_t fid, int64_t start, int64_t end,
                        Py_ssize_t depth);
ELT_HIDDEN PyObject *Recorder_spans(Recorder *self, PyObject *ignored);

#include "flatrows.h"

#endif
