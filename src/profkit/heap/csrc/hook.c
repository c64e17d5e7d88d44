/* The allocator functions, and the byte countdown that chooses which allocations are sampled
 * (see heaphook.h). This is the hot path: every allocation and free of the program passes
 * here, so an allocation that is not sampled costs a thread-local subtraction and a compare,
 * and a free of a block that was not sampled one load from the bitmap of sampled addresses.
 */
#include "heaphook.h" /* Python.h first, as the C API asks */

#include <math.h>

typedef struct {
    PyMemAllocatorEx previous;
    PyMemAllocatorDomain domain;
} Domain;

static Domain domains[2] = {{.domain = PYMEM_DOMAIN_MEM}, {.domain = PYMEM_DOMAIN_OBJ}};

HIDDEN int installed = 0;
HIDDEN double mean_bytes = 512.0 * 1024.0;
HIDDEN uint64_t seed_epoch = 1;
HIDDEN _Thread_local int64_t countdown FAST_TLS = -1;
HIDDEN _Thread_local int in_hook FAST_TLS = 0;

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

static inline void
maybe_sample(void *ptr, size_t size, uint8_t domain)
{
    if (ptr == NULL || in_hook) return;
    if (size >= exact_bytes) {
        in_hook++;
        record_alloc(ptr, size, domain, 1);
        in_hook--;
        return;
    }
    if (countdown < 0) countdown = draw_countdown();
    countdown -= (int64_t)size;
    if (countdown > 0) return;
    in_hook++;
    record_alloc(ptr, size, domain, 0);
    countdown = draw_countdown();
    in_hook--;
}

static void *
hook_malloc(void *ctx, size_t size)
{
    Domain *d = ctx;
    void *ptr = d->previous.malloc(d->previous.ctx, size);
    maybe_sample(ptr, size, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
}

static void *
hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    Domain *d = ctx;
    void *ptr = d->previous.calloc(d->previous.ctx, nelem, elsize);
    maybe_sample(ptr, nelem * elsize, d->domain == PYMEM_DOMAIN_OBJ);
    return ptr;
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

static void
hook_free(void *ctx, void *ptr)
{
    Domain *d = ctx;
    /* Frees are recorded even inside the hook, a drain or pause(): a sampled block freed
     * unseen would leave its address in the table, and a later drain would read the type
     * words of memory that may be unmapped by then. record_free calls no Python and no
     * Python allocator, so it is safe wherever a free can happen. */
    if (ptr != NULL && table_live && filter_may_hold((uintptr_t)ptr)) record_free(ptr, NULL);
    d->previous.free(d->previous.ctx, ptr);
}

/* -- installing ---------------------------------------------------------------------------- */

HIDDEN void
hooks_install(void)
{
    countdown = -1;
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
