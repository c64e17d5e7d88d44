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

/* What one walk found: ``n`` (code, instr) pairs in ``out`` (2 * max_depth words) and, when
 * ``addrs`` is not NULL, each kept frame's address; ``cut_frame`` is the generator frame the
 * chain ended at when a yield tore it (0 when the chain ended normally). */
typedef struct {
    uint64_t *out, *addrs;
    size_t n;
    uint64_t cut_frame;
} Walk;

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
