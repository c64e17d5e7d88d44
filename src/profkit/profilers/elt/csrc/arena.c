/* profkit.profilers.elt._native: the recorder's big blocks (the node tables) in huge
 * pages where the system offers them.
 *
 * Why: on a large program (sympy: 150k nodes, a 16 MB node table) nearly every table
 * probe and many node reads miss the cache *and* the TLB, and under virtualisation a TLB
 * miss costs a two-level page walk: measured, the one table load of a lookup took ~170 ns.
 * 2 MB pages (Linux transparent huge pages, asked for with madvise) make those walks
 * rare (table lookups: 443 -> 188 perf samples on sympy). Small blocks stay with PyMem:
 * a huge page is 2 MB of memory at first touch, which a small table must not pay. (The
 * node chunks stay PyMem's: in huge pages they measured no faster, and flat.c's export
 * frees them one by one.)
 */
#include "native.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

/* Bytes a big block of ``size`` really takes (whole huge pages), or 0 for a PyMem one. */
static size_t
mapped_size(size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= HUGE_PAGE) {
        return (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    }
#endif
    (void)size;
    return 0;
}

/* ``size`` zeroed bytes; NULL when out of memory (no exception set). */
ELT_HIDDEN void *
big_alloc(size_t size)
{
    size_t length = mapped_size(size);
    if (length == 0) {
        return PyMem_Calloc(1, size);
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Over-map by one huge page and trim, so the block starts on a huge-page boundary. */
    char *raw = mmap(NULL, length + HUGE_PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        return NULL;
    }
    char *start = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (start > raw) {
        munmap(raw, (size_t)(start - raw));
    }
    size_t tail = (size_t)((raw + length + HUGE_PAGE) - (start + length));
    if (tail > 0) {
        munmap(start + length, tail);
    }
    (void)madvise(start, length, MADV_HUGEPAGE); /* advice: without it, plain pages */
    return start;
#else
    return NULL;
#endif
}

/* Free a block of big_alloc(size). */
ELT_HIDDEN void
big_free(void *block, size_t size)
{
    if (block == NULL) {
        return;
    }
    size_t length = mapped_size(size);
    if (length == 0) {
        PyMem_Free(block);
        return;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    munmap(block, length);
#endif
}
