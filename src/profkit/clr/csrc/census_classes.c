/* libprofkit_clr: the census's per-class totals (count, bytes, largest object).
 *
 * An open-addressing table keyed by ClassID, grown by doubling up to CENSUS_MAX_CLASSES
 * (a class beyond that is not counted). Only census.c's callbacks fill it, under their
 * lock; census_take() reads it after the GC. Why a unit of its own: a container, apart
 * from what is counted in it.
 */
#include "census.h"

#include <stdlib.h>

static census_class_t *g_table;
static size_t g_cap, g_used;

static census_class_t *slot_of(census_class_t *table, size_t cap, ClassID cls) {
    size_t i = (size_t)((cls >> 3) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (table[i].id && table[i].id != cls) i = (i + 1) & (cap - 1);
    return &table[i];
}

static int grow_table(void) {
    size_t cap = g_cap ? g_cap * 2 : 1024;
    if (cap > CENSUS_MAX_CLASSES) return -1;
    census_class_t *table = calloc(cap, sizeof *table);
    if (!table) return -1;
    for (size_t i = 0; i < g_cap; i++)
        if (g_table[i].id) *slot_of(table, cap, g_table[i].id) = g_table[i];
    free(g_table);
    g_table = table;
    g_cap = cap;
    return 0;
}

/* The entry of `cls`, made on first sight; NULL when the table is full. */
HIDDEN census_class_t *census_class(ClassID cls) {
    if (!cls) return NULL;
    if (g_cap) {
        census_class_t *c = slot_of(g_table, g_cap, cls);
        if (c->id) return c;
    }
    if ((g_used + 1) * 2 > g_cap && grow_table() < 0) return NULL;
    census_class_t *c = slot_of(g_table, g_cap, cls);
    c->id = cls;
    g_used++;
    return c;
}

HIDDEN void census_each_class(void (*fn)(census_class_t *)) {
    for (size_t i = 0; i < g_cap; i++)
        if (g_table[i].id) fn(&g_table[i]);
}
