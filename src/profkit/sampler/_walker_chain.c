/* One thread's frame chain in another process (see _walker.c for the module's contract).
 *
 * Why whole chunks: a thread's frames live in its data-stack chunks (16 KiB each, newest
 * first), so the newest chunk is read in one process_vm_readv and the frames inside it cost
 * no system call; older chunks are read when the walk reaches them, and frames outside every
 * chunk (generators' and coroutines' own frames) one by one. Every size read from the target
 * is checked before it is allocated: a torn or hostile chain cannot make a walk hold more
 * than CHUNK_BUDGET bytes, nor walk more than max_depth frames.
 */
#include <Python.h>

#include <errno.h>
#include <sys/uio.h>

#include "_walker.h"

#define MAX_REGIONS 64
#define GUESS_CHUNK (16 * 1024)
#define CHUNK_BUDGET (8u << 20)

typedef struct {
    uint64_t start, end;
    unsigned char *data;
} Region;

int pk_read_remote(pid_t pid, uint64_t addr, void *buf, size_t size, size_t *got) {
    struct iovec local = {buf, size};
    struct iovec remote = {(void *)(uintptr_t)addr, size};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) return errno ? errno : EIO;
    if (got != NULL) {
        *got = (size_t)n;
        return 0;
    }
    return (size_t)n == size ? 0 : EFAULT;
}

int pk_check_walk_params(const WalkParams *w) {
    /* Each check by subtraction from a bound: ``off + 8 <= span`` passed for an offset
     * near 2**64 (the sum wraps) and then read past the frame's copy. */
    return w->span <= 4096 && pk_fits(w->off_code, 8, w->span) &&
           pk_fits(w->off_prev, 8, w->span) && pk_fits(w->off_instr, 8, w->span) &&
           pk_fits(w->off_owner, 1, w->span) && pk_fits(w->chunk_prev, 8, 4096) &&
           pk_fits(w->chunk_size, 8, 4096) && w->max_depth >= 1 &&
           w->max_depth <= (1u << 20) && w->max_chunk <= CHUNK_BUDGET;
}

/* Read the chunk at ``chunk`` into a new region; ``*previous`` is its previous chunk or 0. */
static int load_chunk(pid_t pid, uint64_t chunk, Region *regions, int *nregions,
                      const WalkParams *w, uint64_t *previous) {
    *previous = 0;
    if (*nregions >= MAX_REGIONS) return 0;
    unsigned char *data = PyMem_RawMalloc(GUESS_CHUNK);
    if (data == NULL) return ENOMEM;
    size_t got = 0;
    int err = pk_read_remote(pid, chunk, data, GUESS_CHUNK, &got);
    if (err == EFAULT || (err == 0 && got < w->chunk_size + 8)) {
        /* The guess ran past a mapping's end: read the header, then exactly the chunk. */
        err = pk_read_remote(pid, chunk + w->chunk_size, data, 8, NULL);
        got = 0;
    }
    if (err) {
        PyMem_RawFree(data);
        return err == EFAULT ? 0 : err; /* a bad chunk pointer: walk frame by frame */
    }
    uint64_t size = got >= w->chunk_size + 8 ? u64_at(data + w->chunk_size) : u64_at(data);
    uint64_t used = 0;
    for (int i = 0; i < *nregions; i++) used += regions[i].end - regions[i].start;
    /* The size is the target's: it must hold the header words this reads, fit the budget
     * (compared by subtraction: ``used + size`` wraps for a size near 2**64) and end below
     * 2**64 (``chunk + size`` is the region's end). */
    if (size == 0 || size > w->max_chunk || size < w->chunk_size + 8 ||
        size < w->chunk_prev + 8 || used > CHUNK_BUDGET || size > CHUNK_BUDGET - used ||
        chunk > UINT64_MAX - size) {
        PyMem_RawFree(data);
        return 0; /* not a chunk we trust, or enough held: frames are read one by one */
    }
    if (size > got) {
        unsigned char *bigger = PyMem_RawRealloc(data, (size_t)size);
        if (bigger == NULL) {
            PyMem_RawFree(data);
            return ENOMEM;
        }
        data = bigger;
        err = pk_read_remote(pid, chunk, data, (size_t)size, NULL);
        if (err) {
            PyMem_RawFree(data);
            return err == EFAULT ? 0 : err;
        }
    }
    regions[*nregions].start = chunk;
    regions[*nregions].end = chunk + size;
    regions[*nregions].data = data;
    (*nregions)++;
    *previous = u64_at(data + w->chunk_prev);
    return 0;
}

/* The bytes of the frame at ``frame``: inside a region already read, in an older chunk (read
 * now), or read alone into ``one``. NULL with ``*err`` set when it cannot be read. */
static const unsigned char *frame_bytes(pid_t pid, uint64_t frame, Region *regions,
                                        int *nregions, uint64_t *pending, const WalkParams *w,
                                        unsigned char *one, int *err) {
    for (int i = *nregions - 1; i >= 0; i--)
        if (pk_inside(frame, w->span, regions[i].start, regions[i].end))
            return regions[i].data + (frame - regions[i].start);
    /* Older chunks hold the outer frames: read them as the walk reaches them. */
    while (*pending && !*err) {
        uint64_t size = 0, before = *pending;
        *err = pk_read_remote(pid, before + w->chunk_size, &size, 8, NULL);
        if (*err == EFAULT) {
            *err = 0;
            *pending = 0;
            break;
        }
        if (*err || before > UINT64_MAX - size ||
            !pk_inside(frame, w->span, before, before + size))
            break;
        *err = load_chunk(pid, before, regions, nregions, w, pending);
        if (*err || *nregions == 0) continue;
        const Region *last = &regions[*nregions - 1];
        if (last->start == before && pk_inside(frame, w->span, last->start, last->end))
            return last->data + (frame - before);
    }
    if (*err) return NULL;
    *err = pk_read_remote(pid, frame, one, (size_t)w->span, NULL);
    return *err ? NULL : one;
}

int pk_walk_chain(pid_t pid, uint64_t frame, uint64_t chunk, const WalkParams *w, Walk *walk) {
    Region regions[MAX_REGIONS];
    int nregions = 0, err = 0, last_owner = 0;
    uint64_t pending = 0, depth = 0, last = 0;
    unsigned char one[4096];
    size_t n = 0;
    LoopCheck loop;

    walk->cut = CUT_NONE;
    pk_loop_start(&loop, frame);
    if (chunk) err = load_chunk(pid, chunk, regions, &nregions, w, &pending);
    while (!err && frame) {
        if (depth == w->max_depth) {
            walk->cut = CUT_DEPTH;
            break;
        }
        depth++;
        const unsigned char *p =
            frame_bytes(pid, frame, regions, &nregions, &pending, w, one, &err);
        if (p == NULL) break;
        uint64_t code = u64_at(p + w->off_code);
        last_owner = p[w->off_owner];
        if (code && last_owner != FRAME_OWNED_BY_CSTACK) {
            walk->out[2 * n] = code;
            walk->out[2 * n + 1] = u64_at(p + w->off_instr);
            if (walk->addrs != NULL) walk->addrs[n] = frame;
            n++;
        }
        last = frame;
        frame = u64_at(p + w->off_prev);
        if (frame && pk_loop_step(&loop, frame)) {
            walk->cut = CUT_CYCLE;
            break;
        }
    }
    for (int i = 0; i < nregions; i++) PyMem_RawFree(regions[i].data);
    walk->n = n;
    /* A thread's outermost frame is never a generator's: a chain ending at one was torn by a
     * yield between reading the thread's current frame and reading this one. */
    walk->cut_frame = !err && frame == 0 && last_owner == FRAME_OWNED_BY_GENERATOR ? last : 0;
    return err;
}
