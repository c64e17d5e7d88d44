/* The allocator functions, and the byte countdown that chooses which allocations are sampled
 * (see heaphook.h). This is the hot path: every allocation and free of the program passes
 * here, so an allocation that is not sampled costs a thread-local subtraction and two compares,
 * and a free of a block that was not sampled one load from the bitmap of sampled addresses.
 */
#include "heaphook.h" /* Python.h first, as the C API asks */

#include <string.h>

typedef struct {
    PyMemAllocatorEx previous;
    PyMemAllocatorDomain domain;
} Domain;

static Domain domains[2] = {{.domain = PYMEM_DOMAIN_MEM}, {.domain = PYMEM_DOMAIN_OBJ}};

HIDDEN int installed = 0;
HIDDEN double mean_bytes = 512.0 * 1024.0;
HIDDEN uint64_t seed_epoch = 1;
HIDDEN _Thread_local int in_hook FAST_TLS = 0;

HIDDEN uint64_t tallies[2][N_ROWS][N_CLASSES];
HIDDEN uint64_t tally_samples[2][N_CLASSES];
HIDDEN double tally_weight[2][N_CLASSES];
HIDDEN _Thread_local HotThread hot FAST_TLS = {.row_at = 0 /* ROW_SAMPLED */,
                                                .bytes_left = INT64_MIN / 2 /* UNDRAWN */};
#define PAUSED_AT (ROW_PAUSED * sizeof(tally_count[0]))

HIDDEN void
tally_clear(void)
{
    memset(tally_count, 0, sizeof(tally_count));
    memset(tally_bytes, 0, sizeof(tally_bytes));
    memset(tally_samples, 0, sizeof(tally_samples));
    memset(tally_weight, 0, sizeof(tally_weight));
}

static _Thread_local uint64_t rng_state FAST_TLS = 0;
static _Thread_local uint64_t rng_epoch FAST_TLS = 0;

static double
uniform01(void)
{
    if (rng_epoch != seed_epoch || rng_state == 0) {
        rng_state = (uint64_t)(uintptr_t)&rng_state ^ (seed_epoch * 0x9E3779B97F4A7C15ull) ^
                    (uint64_t)PyThread_get_thread_ident();
        if (rng_state == 0) rng_state = 0x2545F4914F6CDD1Dull;
        rng_epoch = seed_epoch;
    }
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0); /* in (0, 1) */
}

static int64_t
draw_countdown(void)
{
    double d = -log(uniform01()) * mean_bytes;
    return d < 1.0 ? 1 : (d > 4e18 ? (int64_t)4e18 : (int64_t)d);
}

/* An allocation of at least this many bytes (the mean, rounded up) is always recorded, with
 * its exact size as its weight (probability 1: still unbiased), and takes no part in the
 * countdown, which samples the smaller ones. Why: the peak is the first number a user reads,
 * and it is usually made of a few large blocks; sampled at 1 - exp(-size/mean) each, 64 blocks
 * of 1 MiB under a 512 KiB mean gave 50-odd samples, and with a fixed seed the same 10 % short
 * on every run. Leaving them out of the countdown keeps the small allocations' sampling a
 * Poisson process over their own bytes. */
HIDDEN size_t exact_bytes = 512 * 1024;

/* A paused thread's countdown (hook_pause): no run of allocations brings it to zero. */
#define PARKED (INT64_MAX / 2)
static _Thread_local int64_t parked_countdown FAST_TLS = 0;

HIDDEN void
hook_pause(void)
{
    if (in_hook++ == 0) {
        parked_countdown = countdown;
        countdown = PARKED;
        tally_at = PAUSED_AT;
    }
}

HIDDEN void
hook_resume(void)
{
    if (in_hook > 0 && --in_hook == 0) {
        countdown = parked_countdown;
        tally_at = 0;
    }
}

/* The countdown of a thread that has not drawn one yet (a new thread, or after start): far
 * below anything a real countdown minus an allocation below exact_bytes can reach, so the
 * slow path tells "draw first" from "crossed zero" without a second thread-local. */
#define UNDRAWN (INT64_MIN / 2)

/* A sample of `size` bytes was recorded (not dropped: `dropped` did not move) in `row`. */
static void
tally_sample(int row, size_t size, uint64_t dropped_before)
{
    if (dropped != dropped_before) return;
    size_t c = size_class(size);
    tally_samples[row][c]++;
    tally_weight[row][c] += sample_weight(size, row == ROW_EXACT, mean_bytes);
}

/* Off the hot path: the countdown crossed zero (or was never drawn), or the allocation is
 * large enough to be recorded always. Kept out of line so the hook's fast path needs no saved
 * registers or stack frame. */
static __attribute__((noinline, cold)) void
sample_slow(void *ptr, size_t size, uint8_t domain)
{
    if (size >= exact_bytes) {
        if (in_hook) return;
        tally_count[ROW_EXACT][size_class(size)]++;
        tally_bytes[ROW_EXACT][size_class(size)] += size;
        in_hook++;
        uint64_t before = dropped;
        record_alloc(ptr, size, domain, 1);
        tally_sample(ROW_EXACT, size, before);
        in_hook--;
        return;
    }
    if (countdown < UNDRAWN / 2) { /* never drawn: draw, then count this allocation */
        countdown = draw_countdown() - (int64_t)size;
        if (countdown > 0) return;
    }
    if (in_hook) return; /* parked (hook_pause): not reached in practice */
    in_hook++;
    uint64_t before = dropped;
    record_alloc(ptr, size, domain, 0);
    tally_sample(ROW_SAMPLED, size, before);
    countdown = draw_countdown();
    in_hook--;
}

/* The exact tally of an allocation below exact_bytes (a bit scan and two adds to this
 * thread's row), and its bytes off the countdown: whether it is sampled (the countdown
 * crossed zero, or was never drawn). No check of in_hook here: while a thread is paused its
 * countdown is parked far above any reachable byte count and its tally row is one never
 * reported (hook_pause), so its allocations, profkit's own, take the fast path without
 * consuming the program's countdown or adding to its totals. */
static inline int
tally_is_sampled(size_t size)
{
    size_t at = tally_at + size_class(size) * sizeof(uint64_t);
    ++*(uint64_t *)((char *)tally_count + at);
    *(uint64_t *)((char *)tally_bytes + at) += size;
    int64_t left = countdown - (int64_t)size;
    countdown = left;
    return __builtin_expect(left <= 0, 0);
}

/* A reallocation's new block (it succeeded): tallied, and recorded when sampled. */
static inline void
maybe_sample(void *ptr, size_t size, uint8_t domain)
{
    if (size < exact_bytes) {
        if (tally_is_sampled(size)) sample_slow(ptr, size, domain);
        return;
    }
    sample_slow(ptr, size, domain);
}

/* Off the hot path of malloc and calloc: the allocation is sampled, or may be (exact_bytes
 * or more), or was tallied already (`tallied`: below exact_bytes, its countdown crossed
 * zero). The block is allocated here, then recorded; a failed allocation is neither: its
 * tally is taken back and its bytes are given back to the countdown. */
static __attribute__((noinline, cold)) void *
alloc_slow(Domain *d, size_t nelem, size_t elsize, int zeroed, int tallied)
{
    size_t size = nelem * elsize;
    void *ptr = zeroed ? d->previous.calloc(d->previous.ctx, nelem, elsize)
                       : d->previous.malloc(d->previous.ctx, size);
    if (ptr == NULL) {
        if (tallied) {
            size_t at = tally_at + size_class(size) * sizeof(uint64_t);
            --*(uint64_t *)((char *)tally_count + at);
            *(uint64_t *)((char *)tally_bytes + at) -= size;
            countdown += (int64_t)size;
        }
        return NULL;
    }
    sample_slow(ptr, size, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

/* The hot path: an allocation below exact_bytes that is not sampled is tallied and counted
 * down before the allocator runs, then the allocator is tail-called (no stack frame, no
 * saved registers, no check of its result). So a small allocation that fails is still in
 * the tally and the countdown: only out of memory, and then a few bytes too many in an
 * estimate that is about to matter little. Everything else (sampled, exact_bytes or more)
 * allocates in alloc_slow, which records only what succeeded. */
static void *
hook_malloc(void *ctx, size_t size)
{
    Domain *d = ctx;
    if (__builtin_expect(size < exact_bytes, 1)) {
        if (!tally_is_sampled(size)) return d->previous.malloc(d->previous.ctx, size);
        return alloc_slow(d, 1, size, 0, 1);
    }
    return alloc_slow(d, 1, size, 0, 0);
}

static void *
hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    Domain *d = ctx;
    size_t size;
    if (__builtin_mul_overflow(nelem, elsize, &size)) /* fails: neither tallied nor sampled */
        return d->previous.calloc(d->previous.ctx, nelem, elsize);
    if (__builtin_expect(size < exact_bytes, 1)) {
        if (!tally_is_sampled(size)) return d->previous.calloc(d->previous.ctx, nelem, elsize);
        return alloc_slow(d, nelem, elsize, 1, 1);
    }
    return alloc_slow(d, nelem, elsize, 1, 0);
}

static void *
hook_realloc(void *ctx, void *old, size_t size)
{
    Domain *d = ctx;
    /* The old block's words are read before the allocator may move (and free) it. */
    uintptr_t cand[N_CAND] = {0};
    Slot *slot = (old != NULL && table_live) ? table_find((uintptr_t)old) : NULL;
    if (slot != NULL) read_candidates((uintptr_t)old, slot->size, cand);
    void *ptr = d->previous.realloc(d->previous.ctx, old, size);
    if (ptr == NULL) return NULL; /* old is untouched */
    /* As tracemalloc: a realloc is the old block's free and a new block's allocation. */
    if (slot != NULL) record_free(old, cand);
    maybe_sample(ptr, size, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

/* A free whose address's bit is set in the bitmap: it may be a sampled block's. */
static __attribute__((noinline, cold)) void
free_slow(Domain *d, void *ptr)
{
    /* Frees are recorded even inside the hook, a drain or pause(): a sampled block freed
     * unseen would leave its address in the table, and a later drain would read the type
     * words of memory that may be unmapped by then. record_free calls no Python and no
     * Python allocator, so it is safe wherever a free can happen. */
    if (ptr != NULL && table_live) record_free(ptr, NULL);
    d->previous.free(d->previous.ctx, ptr);
}

/* The hot path of a free: one bit of the bitmap (clear for almost every block never
 * sampled; NULL's bit too unless a sampled address shares it, and then the slow path
 * checks), then a tail call to the allocator. */
static void
hook_free(void *ctx, void *ptr)
{
    Domain *d = ctx;
    if (__builtin_expect(filter_may_hold((uintptr_t)ptr), 0)) {
        free_slow(d, ptr);
        return;
    }
    d->previous.free(d->previous.ctx, ptr);
}

/* -- installing ---------------------------------------------------------------------------- */

HIDDEN void
hooks_install(void)
{
    if (in_hook)
        parked_countdown = UNDRAWN;
    else
        countdown = UNDRAWN;
    for (int i = 0; i < 2; i++) {
        PyMem_GetAllocator(domains[i].domain, &domains[i].previous);
        PyMemAllocatorEx mine = {&domains[i], hook_malloc, hook_calloc, hook_realloc, hook_free};
        PyMem_SetAllocator(domains[i].domain, &mine);
    }
    installed = 1;
}

/* Whether ours is still the installed allocator of every domain: a later hook chained to us
 * would otherwise be cut off by uninstalling (and would call into freed state). */
HIDDEN int
hooks_are_ours(void)
{
    for (int i = 0; i < 2; i++) {
        PyMemAllocatorEx now;
        PyMem_GetAllocator(domains[i].domain, &now);
        if (now.ctx != &domains[i] || now.malloc != hook_malloc) return 0;
    }
    return 1;
}

HIDDEN void
hooks_uninstall(void)
{
    for (int i = 0; i < 2; i++) PyMem_SetAllocator(domains[i].domain, &domains[i].previous);
    installed = 0;
}
