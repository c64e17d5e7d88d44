/* libprofkit_clr: following the sampled objects across GCs (alloc.h says why and how).
 *
 * The followed objects are an array of (address, weight, site), sorted by address when a
 * GC starts, so each range the GC reports finds its objects by binary search. A GC's
 * callbacks come while the program's threads are stopped; they take g_alloc_lock, which
 * a sampling thread holds only for a few instructions and never while calling the runtime.
 * Why a unit of its own: the GC's view of the objects, apart from sampling and sites.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

HIDDEN uint64_t g_live_bytes, g_peak_bytes, g_gcs_seen, g_untracked, g_moved, g_died;

typedef struct {
    ObjectID addr, now;
    uint64_t weight;
    uint32_t site;
    uint8_t condemned, survived;
} obj_t;
static obj_t *g_objs;
static size_t g_n_objs, g_cap_objs;
static int g_in_gc;

typedef struct {
    int generation; /* COR_PRF_GC_GENERATION: 0, 1, 2, 3 the large object heap, 4 pinned */
    ObjectID start;
    UINT_PTR length, reserved;
} gen_range_t; /* COR_PRF_GC_GENERATION_RANGE */
typedef HRESULT (*fn_GetGenerationBounds)(void *, ULONG, ULONG *, gen_range_t *);
typedef HRESULT (*fn_ForceGC)(void *);

/* caller holds g_alloc_lock */
HIDDEN void alloc_follow(ObjectID obj, uint32_t site, uint64_t weight) {
    g_live_bytes += weight;
    if (g_n_objs >= ALLOC_MAX_TRACKED || grow((void **)&g_objs, &g_cap_objs, g_n_objs, sizeof *g_objs) < 0) {
        g_untracked++; /* counted as alive to the end: never seen to die */
        return;
    }
    obj_t *o = &g_objs[g_n_objs++];
    memset(o, 0, sizeof *o);
    o->addr = obj, o->weight = weight, o->site = site;
}

static int by_address(const void *a, const void *b) {
    ObjectID x = ((const obj_t *)a)->addr, y = ((const obj_t *)b)->addr;
    return x < y ? -1 : x > y;
}

/* The first followed object at or above `addr` (the array is sorted during a GC). */
static size_t lower_bound(ObjectID addr) {
    size_t lo = 0, hi = g_n_objs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_objs[mid].addr < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Which followed objects this GC decides on: those in the generations it collects. */
HIDDEN void alloc_gc_started(int n, const BOOL *gens) {
    gen_range_t small[64], *ranges = small;
    ULONG count = 0;
    fn_GetGenerationBounds bounds = (fn_GetGenerationBounds)SLOT(g_info, PI_GetGenerationBounds);
    HRESULT hr = bounds(g_info, 64, &count, small);
    if (hr >= 0 && count > 64 && (ranges = calloc(count, sizeof *ranges)) != NULL)
        hr = bounds(g_info, count, &count, ranges);
    if (!ranges) ranges = small, count = count > 64 ? 64 : count;
    int full = n > 2 && gens[2];
    pthread_mutex_lock(&g_alloc_lock);
    g_in_gc = 1;
    if (g_n_objs) /* none followed yet: g_objs is NULL, which qsort may not be given */
        qsort(g_objs, g_n_objs, sizeof *g_objs, by_address);
    for (size_t i = 0; i < g_n_objs; i++) {
        obj_t *o = &g_objs[i];
        o->survived = 0;
        o->condemned = hr < 0 ? full : 0; /* no bounds: a full GC decides on everything */
        for (ULONG r = 0; hr >= 0 && r < count; r++)
            if (o->addr >= ranges[r].start && o->addr - ranges[r].start < ranges[r].length) {
                int g = ranges[r].generation;
                o->condemned = g >= 0 && g < n && gens[g];
                break;
            }
    }
    pthread_mutex_unlock(&g_alloc_lock);
    if (ranges != small) free(ranges);
}

/* Survivors in [start, start + len), now at `now` + their offset. */
static void survived(ObjectID start, ObjectID now, size_t len) {
    for (size_t i = lower_bound(start); i < g_n_objs && g_objs[i].addr - start < len; i++) {
        obj_t *o = &g_objs[i];
        if (!o->condemned) continue;
        o->survived = 1;
        o->now = now + (o->addr - start);
    }
}

HIDDEN HRESULT cb_MovedReferences2(void *self, ULONG n, ObjectID *old, ObjectID *now, size_t *len) {
    (void)self;
    pthread_mutex_lock(&g_alloc_lock);
    if (g_in_gc)
        for (ULONG i = 0; i < n; i++) survived(old[i], now[i], len[i]);
    pthread_mutex_unlock(&g_alloc_lock);
    return S_OK;
}

HIDDEN HRESULT cb_SurvivingReferences2(void *self, ULONG n, ObjectID *start, size_t *len) {
    (void)self;
    pthread_mutex_lock(&g_alloc_lock);
    if (g_in_gc)
        for (ULONG i = 0; i < n; i++) survived(start[i], start[i], len[i]);
    pthread_mutex_unlock(&g_alloc_lock);
    return S_OK;
}

/* The GC is over: the objects it decided on and did not report are dead; the rest moved. */
HIDDEN void alloc_gc_finished(void) {
    pthread_mutex_lock(&g_alloc_lock);
    if (g_in_gc) {
        size_t kept = 0;
        for (size_t i = 0; i < g_n_objs; i++) {
            obj_t o = g_objs[i];
            if (o.condemned && !o.survived) {
                g_live_bytes -= o.weight < g_live_bytes ? o.weight : g_live_bytes;
                alloc_site_died(o.site, o.weight);
                g_died++;
                continue;
            }
            if (o.condemned && o.now != o.addr) g_moved++, o.addr = o.now;
            g_objs[kept++] = o;
        }
        g_n_objs = kept;
        g_in_gc = 0;
        g_gcs_seen++;
        alloc_snapshot_peak();
    }
    pthread_mutex_unlock(&g_alloc_lock);
}

static void *final_gc_main(void *arg) {
    *(HRESULT *)arg = ((fn_ForceGC)SLOT(g_info, PI_ForceGC))(g_info);
    return NULL;
}

/* At Shutdown: one full GC from a thread of ours (ForceGC must not be called from a managed
 * thread), so what is alive at the end is known, not estimated; waits at most 60 s. */
HIDDEN void alloc_final_gc(void) {
    static HRESULT hr; /* static: a thread given up on may still write it */
    pthread_t thread;
    if (!g_alloc_on || pthread_create(&thread, NULL, final_gc_main, &hr) != 0) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0) pthread_detach(thread);
}

/* The runtime's suspensions, as records: a GC's pause is its suspension (reason 1, for a GC;
 * 7, preparing one) to the resumption after it (clr/allocprofile.py pairs them). */
HIDDEN HRESULT cb_RuntimeSuspendStarted(void *self, int reason) {
    (void)self;
    char text[16];
    snprintf(text, sizeof text, "%d", reason);
    if (g_alloc_on) record("suspend", text);
    return S_OK;
}

HIDDEN HRESULT cb_RuntimeResumeFinished(void *self) {
    (void)self;
    if (g_alloc_on) record("resume", "");
    return S_OK;
}
