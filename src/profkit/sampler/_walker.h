/* Shared by _walker.c (the module: thread list, samples) and _walker_chain.c (one frame
 * chain). Split by concern so each file stays reviewable; see _walker.c for the design. */
#ifndef PROFKIT_SAMPLER_WALKER_H
#define PROFKIT_SAMPLER_WALKER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* The units share these functions; the module exports only PyInit__walker. */
#if defined(__GNUC__)
#define WALKER_HIDDEN __attribute__((visibility("hidden")))
#else
#define WALKER_HIDDEN
#endif

#define FRAME_OWNED_BY_GENERATOR 1
#define FRAME_OWNED_BY_CSTACK 3

typedef struct {
    uint64_t span, off_code, off_prev, off_instr, off_owner, chunk_prev, chunk_size, max_depth,
        max_chunk;
} WalkParams;

/* Why a walk stopped before the chain's end (Walk.cut; the sample's list flags use bits). */
#define CUT_NONE 0
#define CUT_DEPTH 1 /* max_depth frames (or threads, interpreters) walked */
#define CUT_CYCLE 2 /* the chain (or list) led back to an element already walked */

/* What one walk found: ``n`` (code, instr) pairs in ``out`` (2 * max_depth words) and, when
 * ``addrs`` is not NULL, each kept frame's address; ``cut_frame`` is the generator frame the
 * chain ended at when a yield tore it (0 when the chain ended normally); ``cut`` says whether
 * the walk was stopped early (CUT_*). */
typedef struct {
    uint64_t *out, *addrs;
    size_t n;
    uint64_t cut_frame;
    int cut;
} Walk;

/* Cycle detection in O(1) memory for a walk over target pointers (Brent's algorithm): the
 * walk calls ``pk_loop_step`` with each next address; 1 means it was seen before. A torn or
 * hostile list that loops is found within three times its length plus its tail, so a cycle
 * costs a few elements, not the depth cap (a dump of a looping target once printed 16.7 M
 * lines). */
typedef struct {
    uint64_t mark, power, steps;
} LoopCheck;

static inline void pk_loop_start(LoopCheck *c, uint64_t first) {
    c->mark = first;
    c->power = 1;
    c->steps = 0;
}

static inline int pk_loop_step(LoopCheck *c, uint64_t next) {
    if (next == c->mark) return 1;
    if (++c->steps == c->power) {
        c->mark = next;
        c->power *= 2;
        c->steps = 0;
    }
    return 0;
}

/* 1 when the ``size`` bytes at ``addr`` lie inside [start, end). Written without a sum that
 * can wrap: ``addr + size <= end`` is true for an ``addr`` near 2**64 (issue #22: a hostile
 * or torn frame pointer made the walker copy from far outside its buffer). */
static inline int pk_inside(uint64_t addr, uint64_t size, uint64_t start, uint64_t end) {
    return start <= addr && addr <= end && size <= end - addr;
}

/* 1 when a field of ``width`` bytes at ``offset`` fits in a record of ``span`` bytes. */
static inline int pk_fits(uint64_t offset, uint64_t width, uint64_t span) {
    return width <= span && offset <= span - width;
}

static inline uint64_t u64_at(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One process_vm_readv; 0 or an errno (EFAULT for a short read when ``got`` is NULL). */
WALKER_HIDDEN int pk_read_remote(pid_t pid, uint64_t addr, void *buf, size_t size, size_t *got);

/* 1 when the walk parameters are sane (spans and offsets inside one page, depth bounded). */
WALKER_HIDDEN int pk_check_walk_params(const WalkParams *w);

/* Walk one frame chain from ``frame`` (no GIL needed); 0 or an errno. */
WALKER_HIDDEN int pk_walk_chain(pid_t pid, uint64_t frame, uint64_t chunk, const WalkParams *w, Walk *walk);

#endif
