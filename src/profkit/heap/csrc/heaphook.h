/* profkit.heap._heaphook: sampled allocation tracking for the heap half of the profiling API.
 *
 * Why C: an allocator hook runs on every PyMem_Malloc / PyObject_Malloc of the program, tens of
 * millions a second; in Python it would cost more than the program. Here an allocation that is
 * not sampled costs one thread-local subtraction and two compares; a free costs one load from a
 * bitmap of sampled addresses (and a probe of a small hash table when the bit is set).
 *
 * What it does:
 *   - wraps the PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ allocators (both are called with the GIL
 *     held, so the shared log needs no lock), chaining to the allocators that were installed
 *     before it; PYMEM_DOMAIN_RAW is left alone (it runs without the GIL, where no Python
 *     stack can be read safely);
 *   - chooses allocations by bytes: each thread counts down a random number of bytes drawn from
 *     an exponential distribution with the configured mean, and the allocation that crosses
 *     zero is sampled. An allocation of size s is then sampled with probability
 *     p = 1 - exp(-s / mean), so large allocations are almost always seen, and weighting each
 *     sample by s / p makes the estimated totals unbiased (as tcmalloc and Go's heap profiler do);
 *   - records, for a sampled allocation, its address, size, weight, thread and Python stack (code
 *     objects and instruction offsets, read from the interpreter's frame records without calling
 *     Python, as tracemalloc does), and for a sampled block that is freed, a free event;
 *   - hands the log to Python on drain(), which turns offsets into line numbers.
 *
 * Re-entrancy: nothing here calls back into Python while a hook runs; the log grows with libc's
 * realloc, never the Python allocators. Code objects in the log are kept alive by a reference.
 *
 * The units, split by concern (hatch_build.py compiles them into one extension):
 *   hook.c    the allocator functions and the byte countdown that chooses samples;
 *   table.c   the sampled-address table (and the bitmap in front of it) a free is checked in;
 *   log.c     the event log: a sample's stack, free events, asking Python to drain;
 *   module.c  the Python functions (start, stop, drain, ...).
 */
#ifndef PROFKIT_HEAPHOOK_H
#define PROFKIT_HEAPHOOK_H

#define PY_SSIZE_T_CLEAN
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1 /* the frame record layout (internal/pycore_frame.h), as tracemalloc */
#endif
#include <Python.h>
#include <math.h>
#include <stdint.h>

/* Shared between the units, not exported: direct (PC-relative) access, no GOT load on the
 * hot path. */
#define HIDDEN __attribute__((visibility("hidden")))
/* initial-exec: each access reads straight from the thread pointer. The default model for a
 * shared object calls __tls_get_addr, several times on every allocation of the program. */
#define FAST_TLS __attribute__((tls_model("initial-exec")))

#define MAX_DEPTH 128

enum { EV_ALLOC = 1, EV_FREE = 2 };

/* An object allocated by PyObject_Malloc starts at the block, or after the GC header, or
 * after the GC header and the 3.12+ pre-header: the type pointer (ob_type, one word into the
 * object) is looked for at these offsets, and Python keeps the one that is a known type. */
#define N_CAND 3

typedef struct {
    uint64_t id;         /* sample id: alloc and its free share it */
    uintptr_t ptr;       /* the block (alloc) */
    size_t size;         /* bytes asked for (alloc) */
    double weight;       /* bytes this sample stands for (alloc) */
    unsigned long thread;
    uintptr_t cand[N_CAND]; /* type-pointer candidates, read at free (free) or drain (alloc) */
    uint32_t frame_start; /* into the frame arrays */
    uint16_t depth;
    uint8_t kind;
    uint8_t domain;      /* 0: PYMEM_DOMAIN_MEM (buffers), 1: PYMEM_DOMAIN_OBJ (objects) */
} Event;

typedef struct {
    PyCodeObject *code; /* strong reference */
    int lasti;          /* in code units */
} FrameRec;

typedef struct {
    Event *events;
    size_t n_events, cap_events;
    FrameRec *frames;
    size_t n_frames, cap_frames;
} Log;

/* Open addressing: sampled address -> sample id; 0 address = empty, 1 = tombstone. */
typedef struct {
    uintptr_t key;
    uint64_t id;
    size_t size;
} Slot;

/* -- hook.c: sampling ----------------------------------------------------------------------- */
extern HIDDEN int installed;
extern HIDDEN double mean_bytes;
extern HIDDEN size_t exact_bytes; /* recorded always, weight = size (hook.c) */
extern HIDDEN uint64_t seed_epoch;
/* > 0: this thread's allocations are not sampled (inside the hook, a drain, or pause()) */
extern HIDDEN _Thread_local int in_hook FAST_TLS;
/* pause sampling on this thread (nests), parking its countdown; resume undoes one pause */
HIDDEN void hook_pause(void);
HIDDEN void hook_resume(void);
HIDDEN void hooks_install(void);
HIDDEN int hooks_are_ours(void);
HIDDEN void hooks_uninstall(void);

/* -- hook.c: exact totals by size class (post-stratification) ------------------------------ */
/* Every allocation the hooks see is tallied, exactly, by size class (class k holds sizes in
 * [2^k, 2^(k+1)); 0 and 1 are class 0): its count and bytes. Beside them, per class, the
 * samples recorded and the sum of their weights. At the end each class's samples are scaled so
 * their weights add up to the class's exact bytes (a ratio estimator per stratum: still
 * unbiased, and the sampling noise between classes is gone; docs/heap.md). Rows: */
#define N_CLASSES 64
enum {
    ROW_SAMPLED = 0, /* below exact_bytes: sampled by the countdown */
    ROW_EXACT = 1,   /* exact_bytes or more: always recorded */
    ROW_PAUSED = 2,  /* a paused thread's (profkit's own): tallied apart, never reported */
    N_ROWS = 3
};
/* count and bytes in two planes of one array, not a struct of both: a struct's two adds are
 * vectorized by gcc (a vector built on every allocation); one array, so the hot path forms
 * one address and reaches the bytes plane by a constant displacement */
extern HIDDEN uint64_t tallies[2][N_ROWS][N_CLASSES];
#define tally_count (tallies[0])
#define tally_bytes (tallies[1])
extern HIDDEN uint64_t tally_samples[2][N_CLASSES];
extern HIDDEN double tally_weight[2][N_CLASSES];
/* The two per-thread words every allocation reads (and one it writes), in one thread-local
 * struct: the hot path loads one thread-pointer offset from the GOT for both (as two
 * variables, each took its own load).
 *   tally_at:  where this thread's allocations below exact_bytes are tallied: the byte offset
 *              of its row in tally_count and tally_bytes, ROW_SAMPLED's (0) or, while paused
 *              (hook_pause), ROW_PAUSED's. An offset, not a row number: the hot path adds it
 *              without a multiply or a sign extension;
 *   countdown: bytes to the next sample (hook.c: UNDRAWN, PARKED). */
typedef struct {
    size_t row_at;      /* tally_at */
    int64_t bytes_left; /* countdown */
} HotThread;
extern HIDDEN _Thread_local HotThread hot FAST_TLS;
#define tally_at (hot.row_at)
#define countdown (hot.bytes_left)
HIDDEN void tally_clear(void);

static inline size_t
size_class(size_t size)
{
    /* unsigned: zero-extended for free, where an int would be sign-extended */
    return 63u - (unsigned)__builtin_clzll((unsigned long long)size | 1);
}

/* The weight of a sample of `size` bytes: size / p, p = 1 - exp(-size / mean), or 1 for an
 * allocation recorded always (exact). Never below its size. */
static inline double
sample_weight(size_t size, int exact, double mean)
{
    double p = exact ? 1.0 : -expm1(-(double)size / mean);
    double weight = p > 0 ? (double)size / p : (double)size;
    return weight >= (double)size ? weight : (double)size;
}

/* -- table.c: the sampled-address table ------------------------------------------------------ */
/* A free is checked against this bitmap before the table: one bit per 16-byte address
 * slot, folded to 64 Ki bits, set for every sampled address. Most frees are of blocks never
 * sampled and stop at one load. */
#define FILTER_BITS (1u << 16)
extern HIDDEN uint64_t filter[FILTER_BITS / 64];
extern HIDDEN size_t table_live;

static inline size_t
filter_index(uintptr_t key)
{
    return (size_t)((key >> 4) ^ (key >> 20)) & (FILTER_BITS - 1);
}

static inline int
filter_may_hold(uintptr_t key)
{
    size_t i = filter_index(key);
    return (filter[i >> 6] >> (i & 63)) & 1;
}

HIDDEN int table_put(uintptr_t key, uint64_t id, size_t size);
HIDDEN Slot *table_find(uintptr_t key);
HIDDEN void table_forget(Slot *slot);
HIDDEN void table_clear(void);
HIDDEN void read_candidates(uintptr_t ptr, size_t size, uintptr_t *cand);

/* -- log.c: the event log ------------------------------------------------------------------ */
extern HIDDEN Log log_;
extern HIDDEN uint64_t dropped; /* samples lost to a failed log growth (counted, never silent) */
extern HIDDEN PyObject *notify_callable;
extern HIDDEN size_t notify_threshold;
extern HIDDEN int notify_pending;
HIDDEN void log_clear(Log *l);
HIDDEN void record_alloc(void *ptr, size_t size, uint8_t domain, int exact);
HIDDEN void record_free(void *ptr, const uintptr_t *cand_read_before);
HIDDEN void settle_live_samples(void);

#endif
