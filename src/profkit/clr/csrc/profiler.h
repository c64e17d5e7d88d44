/* libprofkit_clr: profkit's CoreCLR profiler (a plain shared library the runtime loads
 * through CORECLR_ENABLE_PROFILING / CORECLR_PROFILER / CORECLR_PROFILER_PATH).
 *
 * What it does, and why it is shaped this way (docs/clr.md has the user's view):
 *
 * - Enter/Leave/Tailcall hooks: by default the fast ones (SetEnterLeaveFunctionHooks3),
 *   which JIT'd code calls directly, through assembly stubs that save every volatile
 *   register; or the article's WithInfo ones (the runtime's own stubs save the registers,
 *   so those are plain C). A FunctionIDMapper2 decides once per function whether it is
 *   hooked (namespace prefix filter) and hands the runtime a small method index as the
 *   client id: a declined function costs nothing.
 * - The hot path only appends a 16-byte event (time, method, kind|depth) to a bounded
 *   per-thread ring (single producer: the thread; single consumer: the writer thread).
 *   It never locks, never allocates (the ring is mapped once, on a thread's first hooked
 *   call), never blocks: a full ring drops the event and counts it.
 * - The writer thread drains the rings every millisecond and does everything slow:
 *   per-thread shadow stacks and call trees, base time without orphan lines, the
 *   article's Enter/Leave lines to a stream and/or profkit monitor UDP datagrams.
 *   Each event carries the producer's depth, so after a loss the shadow stack is
 *   re-synchronised instead of silently mis-attributing every later call.
 * - Everything else (exceptions, threads, loads, GC, JIT and ReadyToRun code) is rare
 *   and recorded under a mutex. At the end the writer writes one text file
 *   (PROFKIT_CLR_OUTPUT) that profkit turns into its saved profile format and perf map.
 *
 * Failure policy: a bad setting or a sink that cannot be opened is reported as one line
 * on stderr and Initialize fails, so the runtime runs the program unprofiled.
 *
 * The sources, one concern each (hatch_build.py compiles them into one library; this
 * header is what they share, and nothing but the two COM entry points is exported):
 *   com.c       COM plumbing: IUnknown, the callback vtable, the class factory, the
 *               exported DllGetClassObject / DllCanUnloadNow;
 *   init.c      Initialize / Shutdown: the ICorProfilerInfo version, the event mask, start-up;
 *   settings.c  the PROFKIT_* (and the article's) environment variables; say();
 *   clock.c     the time-stamp counter and its rate;
 *   metadata.c  names from metadata: "Namespace.Type.Method", UTF-16 -> UTF-8;
 *   methods.c   the FunctionIDMapper2 and the method table (client id -> name);
 *   hooks.c     the hot path: per-thread event rings, the Enter/Leave/Tailcall hooks and
 *               their assembly stubs, exception unwinding's pops;
 *   shadow.c    the writer's shadow stacks, call trees and timeline spans;
 *   lines.c     the article's Enter/Leave lines, with base time and no orphans;
 *   sinks.c     where lines go: the stream (PROFKIT_STREAM) and UDP datagrams (PROFKIT_UDP);
 *   writer.c    the writer thread, and finishing (Shutdown, exit, abort, Ctrl-C);
 *   records.c   the rare records: events, modules, the code map;
 *   threads.c   managed threads: OS thread ids, names, their callbacks;
 *   events.c    the other callbacks: loads, JIT, exceptions, GC;
 *   output.c    the result file (PROFKIT_CLR_OUTPUT);
 *   files.c     opening the stream and the result file as profkit's Python writers do;
 *   census*.c   the heap census (census.h); alloc*.c allocations and their lives (alloc.h).
 */
#ifndef PROFKIT_CLR_PROFILER_H
#define PROFKIT_CLR_PROFILER_H

#define _GNU_SOURCE /* before any system header: every unit includes this one first */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clr_abi.h"

/* Shared between the units, invisible outside the library (built with
 * -fvisibility=hidden too; this says so where it is declared). */
#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define HAVE_FAST_HOOKS 1 /* the assembly stubs in hooks.c */
#else
#define HAVE_FAST_HOOKS 0
#endif

/* ---- settings.c ---------------------------------------------------------------------- */
#define MAX_PREFIXES 32
#define EV_CALLS 1u
#define EV_EXCEPTIONS 2u
#define EV_THREADS 4u
#define EV_LOADS 8u
#define EV_GC 16u
#define EV_JIT 32u
#define EV_ARGS 64u
#define EV_ALLOC 128u /* alloc.h */
#define EV_DEFAULT (EV_CALLS | EV_EXCEPTIONS | EV_THREADS | EV_LOADS | EV_GC | EV_JIT)

typedef struct {
    char *prefixes[MAX_PREFIXES];
    size_t prefix_len[MAX_PREFIXES];
    int n_prefixes;
    uint64_t basetime_ns;
    int unit_ns;
    char *stream; /* "stderr" or a path, or NULL */
    char *output; /* the result file, or NULL */
    uint32_t events;
    uint32_t ring_events; /* per thread, a power of two */
    int fast_hooks;       /* SetEnterLeaveFunctionHooks3 with our stubs, not WithInfo */
    int timeline;         /* keep every shown call's start and end (PROFKIT_TIMELINE) */
} settings_t;

HIDDEN extern settings_t S;
HIDDEN void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
HIDDEN int read_settings(void);
HIDDEN int prefix_match(const char *name);

/* ---- clock.c --------------------------------------------------------------------------
 * The hot path reads the CPU's time-stamp counter (x86-64: rdtsc, invariant on any CPU
 * with constant_tsc/nonstop_tsc): clock_gettime costs 3-4x more in a VM (measured here:
 * 78 ns vs 21 ns), and a call takes two readings. The writer thread converts ticks to
 * nanoseconds with a rate calibrated against CLOCK_MONOTONIC at start-up and refined over
 * the run. Elsewhere CLOCK_MONOTONIC is used directly (rate 1). */
HIDDEN extern uint64_t t0;    /* CLOCK_MONOTONIC ns at Initialize */
HIDDEN extern uint64_t tick0; /* ticks at Initialize */
HIDDEN extern double g_ns_per_tick;

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#define TICKS_ARE_NS 0
#else
static inline uint64_t ticks(void) { return now_ns(); }
#define TICKS_ARE_NS 1
#endif

/* ticks -> ns since Initialize */
static inline uint64_t tick_ns(uint64_t tk) {
    if (TICKS_ARE_NS) return tk - tick0;
    return tk > tick0 ? (uint64_t)((double)(tk - tick0) * g_ns_per_tick) : 0;
}

HIDDEN void clock_start(void);
HIDDEN void clock_first_rate(void);
HIDDEN void calibrate(void);

/* ---- init.c: the runtime interfaces --------------------------------------------------- */
HIDDEN extern void *g_info; /* ICorProfilerInfoN */
HIDDEN extern int g_info_version;
HIDDEN extern pthread_mutex_t g_lock; /* methods map, metadata, records */

typedef ULONG (*fn_Release)(void *);

/* ---- metadata.c ----------------------------------------------------------------------- */
HIDDEN extern const GUID IID_IMetaDataImport;
/* The longest name kept, in bytes with its NUL (a longer one is cut, ending in "…"). */
#define NAME_BYTES 4096
HIDDEN size_t utf16_to_utf8(const WCHAR *in, size_t n, char *out, size_t cap);
HIDDEN size_t type_name(void *md, mdToken td, char *out, size_t cap);
HIDDEN int function_name(FunctionID fid, char *out, size_t cap);

/* ---- methods.c ------------------------------------------------------------------------ */
HIDDEN const char *method_name(uint32_t id);
HIDDEN uint32_t method_count(void);
HIDDEN uint32_t map_function(FunctionID fid);
HIDDEN uint32_t method_id(FunctionID fid);
HIDDEN UINT_PTR mapper(FunctionID fid, void *client_data, BOOL *hook);

/* ---- hooks.c: per-thread event rings (the hot path) ----------------------------------- */
enum { K_ENTER = 1, K_LEAVE = 2, K_TAIL = 3, K_UNWIND = 4 };
#define DEPTH_MASK 0x0FFFFFFFu

typedef struct {
    uint64_t t;
    uint32_t id;
    uint32_t kd; /* kind << 28 | depth */
} ev_t;

typedef struct {
    uint32_t id, node;
    uint64_t start;
} frame_t;

typedef struct {
    uint32_t parent, id;
    uint64_t calls, incl, min, max;
} node_t;

typedef struct thr {
    struct thr *next;
    ev_t *ring;
    size_t ring_bytes;
    uint32_t mask;
    _Atomic uint64_t head, tail, lost;
    _Atomic int dead;
    uint32_t tid;
    /* producer side (the thread itself) */
    uint32_t depth;
    uint32_t *unwind; /* client ids of frames whose unwinding began (ExceptionUnwind*) */
    uint32_t n_unwind, cap_unwind; /* n_unwind > cap_unwind: ids beyond it not kept */
    /* consumer side (the writer thread) */
    frame_t *stack;
    uint32_t n_stack, cap_stack, written;
    node_t *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *hash; /* (parent, id) -> node index + 1 */
    uint32_t hash_cap;
    uint64_t resyncs;
} thr_t;

HIDDEN extern _Atomic(thr_t *) g_threads;
HIDDEN int hooks_prepare(void);
HIDDEN HRESULT hooks_install(void);
HIDDEN void hooks_active(int on);
HIDDEN void unwind_caught(FunctionID fid);

/* ---- shadow.c ------------------------------------------------------------------------- */
typedef struct {
    uint32_t tid, method, depth;
    uint64_t start, end;
} span_t;
HIDDEN extern span_t *g_spans;
HIDDEN extern size_t g_n_spans;
HIDDEN extern uint64_t g_spans_dropped;
HIDDEN size_t drain(thr_t *t);
HIDDEN void close_open(thr_t *t, uint64_t now);

/* ---- lines.c -------------------------------------------------------------------------- */
HIDDEN void lines_after_push(thr_t *t, uint64_t now);
HIDDEN void lines_after_pop(thr_t *t, uint32_t index, uint32_t id, uint64_t dur);

/* ---- sinks.c -------------------------------------------------------------------------- */
HIDDEN extern int g_lines_on; /* a stream or UDP sink is open */
HIDDEN extern uint64_t g_udp_seq, g_udp_dropped, g_lines;
HIDDEN int open_sinks(void);
HIDDEN void emit_line(const char *line, size_t n);
HIDDEN void sinks_flush(void);

/* ---- files.c -------------------------------------------------------------------------- */
HIDDEN int follow_links(const char *path, char *final, size_t cap);
HIDDEN int open_stream_file(const char *path);
HIDDEN FILE *open_result(const char *path, char *target, size_t target_cap, char *tmp, size_t tmp_cap);

/* ---- writer.c ------------------------------------------------------------------------- */
HIDDEN int writer_prepare(void);
HIDDEN int writer_start(void);
HIDDEN void save_on_signals(void);
HIDDEN int writer_dying(void);
HIDDEN void finish(int from_signal);

/* ---- output.c ------------------------------------------------------------------------- */
HIDDEN void write_output(void);

/* ---- records.c ------------------------------------------------------------------------ */
typedef struct {
    uint64_t t;
    uint32_t tid;
    const char *kind;
    char *text;
} rec_t;
typedef struct {
    ModuleID id;
    UINT_PTR base;
    DWORD flags;
    char *path;
} module_t;
typedef struct {
    UINT_PTR start;
    size_t size;
    ModuleID module;
    char kind; /* 'j' JIT, 'r' ReadyToRun */
    char *name;
} code_t;
HIDDEN extern rec_t *g_recs;
HIDDEN extern size_t g_n_recs, g_recs_dropped;
HIDDEN extern module_t *g_modules;
HIDDEN extern size_t g_n_modules;
HIDDEN extern code_t *g_code;
HIDDEN extern size_t g_n_code;

static inline uint32_t current_tid(void) { return (uint32_t)syscall(SYS_gettid); }

HIDDEN int grow(void **arr, size_t *cap, size_t n, size_t size);
HIDDEN void record_locked(uint32_t tid, const char *kind, const char *text);
HIDDEN void record(const char *kind, const char *text);
HIDDEN int add_code(FunctionID fid, char kind);
HIDDEN void code_later(FunctionID fid, char kind);
HIDDEN void add_pending_code(void);
HIDDEN void add_module(ModuleID id, UINT_PTR base, DWORD flags, const char *path);

/* ---- threads.c ------------------------------------------------------------------------ */
typedef struct {
    ThreadID managed;
    uint32_t tid; /* 0 when named before it started: resolved at the end */
    char *name;
} tname_t;
HIDDEN extern tname_t *g_tnames;
HIDDEN extern size_t g_n_tnames;
HIDDEN void resolve_thread_names(void);
HIDDEN const char *thread_name(uint32_t tid);

/* ---- the callbacks (com.c builds their vtable) ---------------------------------------- */
HIDDEN HRESULT cb_Initialize(void *self, void *unk);
HIDDEN HRESULT cb_InitializeForAttach(void);
HIDDEN HRESULT cb_Shutdown(void *self);
HIDDEN HRESULT cb_AssemblyLoadFinished(void *self, AssemblyID id, HRESULT status);
HIDDEN HRESULT cb_ModuleLoadFinished(void *self, ModuleID id, HRESULT status);
HIDDEN HRESULT cb_JITCompilationFinished(void *self, FunctionID fid, HRESULT status, BOOL safe);
HIDDEN HRESULT cb_JITCachedFunctionSearchStarted(void *self, FunctionID fid, BOOL *use);
HIDDEN HRESULT cb_JITCachedFunctionSearchFinished(void *self, FunctionID fid, int result);
HIDDEN HRESULT cb_JITInlining(void *self, FunctionID caller, FunctionID callee, BOOL *inline_ok);
HIDDEN HRESULT cb_ThreadCreated(void *self, ThreadID managed);
HIDDEN HRESULT cb_ThreadAssigned(void *self, ThreadID managed, DWORD tid);
HIDDEN HRESULT cb_ThreadDestroyed(void *self, ThreadID managed);
HIDDEN HRESULT cb_ThreadNameChanged(void *self, ThreadID managed, ULONG cch, WCHAR *wname);
HIDDEN HRESULT cb_ExceptionThrown(void *self, ObjectID obj);
HIDDEN HRESULT cb_ExceptionCatcherEnter(void *self, FunctionID fid, ObjectID obj);
HIDDEN HRESULT cb_ExceptionUnwindFunctionEnter(void *self, FunctionID fid);
HIDDEN HRESULT cb_ExceptionUnwindFunctionLeave(void *self);
HIDDEN HRESULT cb_GarbageCollectionStarted(void *self, int n, BOOL *gens, int reason);
HIDDEN HRESULT cb_GarbageCollectionFinished(void *self);
HIDDEN HRESULT cb_LoadAsNotificationOnly(void *self, BOOL *only);

#endif
