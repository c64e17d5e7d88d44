/* The sampled-address table: which blocks were sampled and are still alive (see heaphook.h).
 *
 * A free must find out, cheaply, whether its block was sampled. The bitmap (filter) answers
 * "certainly not" for almost every free with one load; only when its bit is set is the
 * open-addressing table probed. Bits are never cleared one by one (two addresses may share
 * one), so they are rebuilt from the live entries when too many stale ones have built up.
 */
#include "heaphook.h" /* Python.h first, as the C API asks */

#include <stdlib.h>
#include <string.h>

HIDDEN uint64_t filter[FILTER_BITS / 64];
HIDDEN size_t table_live = 0;

static Slot *table = NULL;
static size_t table_cap = 0, table_used = 0;
static size_t filter_set_since_rebuild = 0;

/* An object's ob_type is one word in: at the block, after the GC header (two words), after
 * the GC header and the 3.12+ pre-header (four words). */
static const size_t cand_offsets[N_CAND] = {0, 2 * sizeof(void *), 4 * sizeof(void *)};

static size_t
slot_of(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static int
table_grow(void)
{
    size_t cap = table_cap ? table_cap * 2 : 1024;
    while (table_live * 2 >= cap) cap *= 2;
    Slot *fresh = calloc(cap, sizeof(Slot));
    if (fresh == NULL) return -1;
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].key > 1) {
            size_t j = slot_of(table[i].key, cap);
            while (fresh[j].key) j = (j + 1) & (cap - 1);
            fresh[j] = table[i];
        }
    }
    free(table);
    table = fresh;
    table_cap = cap;
    table_used = table_live;
    return 0;
}

static void
filter_rebuild(void)
{
    memset(filter, 0, sizeof(filter));
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].key > 1) {
            size_t b = filter_index(table[i].key);
            filter[b >> 6] |= (uint64_t)1 << (b & 63);
        }
    }
    filter_set_since_rebuild = 0;
}

HIDDEN int
table_put(uintptr_t key, uint64_t id, size_t size)
{
    if ((table_used + 1) * 2 > table_cap && table_grow() < 0) return -1;
    size_t j = slot_of(key, table_cap);
    while (table[j].key > 1) {
        if (table[j].key == key) { /* a stale entry (freed through another path): replace */
            table[j].id = id;
            table[j].size = size;
            return 0;
        }
        j = (j + 1) & (table_cap - 1);
    }
    if (table[j].key == 0) table_used++;
    table[j].key = key;
    table[j].id = id;
    table[j].size = size;
    table_live++;
    size_t b = filter_index(key);
    filter[b >> 6] |= (uint64_t)1 << (b & 63);
    if (++filter_set_since_rebuild > 4 * table_live + 4096) filter_rebuild();
    return 0;
}

HIDDEN Slot *
table_find(uintptr_t key)
{
    if (table_live == 0 || key <= 1 || !filter_may_hold(key)) return NULL;
    size_t j = slot_of(key, table_cap);
    while (table[j].key) {
        if (table[j].key == key) return &table[j];
        j = (j + 1) & (table_cap - 1);
    }
    return NULL;
}

/* The block is freed: its slot becomes a tombstone (probing chains stay intact). */
HIDDEN void
table_forget(Slot *slot)
{
    slot->key = 1;
    table_live--;
}

HIDDEN void
table_clear(void)
{
    free(table);
    table = NULL;
    table_cap = table_used = table_live = 0;
    memset(filter, 0, sizeof(filter));
    filter_set_since_rebuild = 0;
}

/* Reads the type-pointer candidates of a live block of `size` bytes (0 where out of it). */
HIDDEN void
read_candidates(uintptr_t ptr, size_t size, uintptr_t *cand)
{
    for (int k = 0; k < N_CAND; k++) {
        size_t at = cand_offsets[k] + sizeof(void *);
        cand[k] = (size >= at + sizeof(void *)) ? *(uintptr_t *)(ptr + at) : 0;
    }
}
