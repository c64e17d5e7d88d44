/* profkit.profilers.elt._native: each thread's functions by index (FidTable, native.h).
 *
 * Why: a node named its function by its fid (a code object's or a PyMethodDef's address,
 * 8 bytes); pytest on sympy's test_arit holds ~1.2 M nodes of only a few thousand
 * functions. A node now keeps a 32-bit index into its thread's table instead (with incl
 * in 32 bits, 40 -> 32 bytes a node). No event looks a fid up: an event compares its fid
 * with the candidate node's, ``ids[node->fn]``; only making a node interns (tree.c's
 * child_of, already off the hot path: it probes the node table).
 */
#include "native.h"

static inline size_t
fid_slot(uintptr_t fid, size_t mask)
{
    uint64_t h = ((uint64_t)fid >> 3) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h ^ (h >> 29)) & mask;
}

ELT_HIDDEN int
fids_init(FidTable *f)
{
    *f = (FidTable){0};
    f->ids = PyMem_Malloc(64 * sizeof(uintptr_t));
    f->slots = PyMem_Calloc(128, sizeof(uint32_t));
    if (f->ids == NULL || f->slots == NULL) {
        fids_free(f);
        return -1;
    }
    f->ids[0] = 0;
    f->count = 1;
    f->cap = 64;
    f->mask = 127;
    return 0;
}

ELT_HIDDEN void
fids_free(FidTable *f)
{
    PyMem_Free(f->ids);
    PyMem_Free(f->slots);
    *f = (FidTable){0};
}

ELT_HIDDEN int
fids_copy(FidTable *to, const FidTable *from)
{
    *to = (FidTable){0};
    to->ids = PyMem_Malloc((from->count ? from->count : 1) * sizeof(uintptr_t));
    if (to->ids == NULL) {
        return -1;
    }
    memcpy(to->ids, from->ids, from->count * sizeof(uintptr_t));
    to->count = to->cap = from->count;
    return 0;
}

/* Twice the slots, refilled from ids (indices 1..count). */
static int
slots_grow(FidTable *f)
{
    size_t size = (f->mask + 1) * 2;
    uint32_t *slots = PyMem_Calloc(size, sizeof(uint32_t));
    if (slots == NULL) {
        return -1;
    }
    for (size_t i = 1; i < f->count; i++) {
        size_t j = fid_slot(f->ids[i], size - 1);
        while (slots[j] != 0) {
            j = (j + 1) & (size - 1);
        }
        slots[j] = (uint32_t)i;
    }
    PyMem_Free(f->slots);
    f->slots = slots;
    f->mask = size - 1;
    return 0;
}

ELT_HIDDEN uint32_t
fid_intern(FidTable *f, uintptr_t fid)
{
    if (fid == 0) {
        return 0;
    }
    size_t j = fid_slot(fid, f->mask);
    for (uint32_t i; (i = f->slots[j]) != 0; j = (j + 1) & f->mask) {
        if (f->ids[i] == fid) {
            return i;
        }
    }
    if (f->count >= UINT32_MAX - 1) { /* not with nodes numbered below 2**31 */
        return UINT32_MAX;
    }
    if (f->count == f->cap) {
        uintptr_t *ids = PyMem_Realloc(f->ids, f->cap * 2 * sizeof(uintptr_t));
        if (ids == NULL) {
            return UINT32_MAX;
        }
        f->ids = ids;
        f->cap *= 2;
    }
    if ((f->count + 1) * 2 > f->mask + 1) {
        if (slots_grow(f) < 0) {
            return UINT32_MAX;
        }
        j = fid_slot(fid, f->mask);
        while (f->slots[j] != 0) {
            j = (j + 1) & f->mask;
        }
    }
    uint32_t index = (uint32_t)f->count++;
    f->ids[index] = fid;
    f->slots[j] = index;
    return index;
}
