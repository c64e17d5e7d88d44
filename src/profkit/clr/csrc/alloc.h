/* libprofkit_clr: allocations (PROFKIT_CLR_EVENTS=alloc), shared by alloc*.c.
 *
 * What it records: every object the runtime allocates passes ObjectAllocated (the flags
 * COR_PRF_ENABLE_OBJECT_ALLOCATED | COR_PRF_MONITOR_OBJECT_ALLOCATED, immutable: set at
 * Initialize; they make every allocation take the runtime's slow path). Each object's exact
 * size (GetObjectSize2) is added to the exact totals of its stratum, (type, power-of-two size
 * class), per thread: the reader scales each stratum's samples to its exact total
 * (post-stratification, clr/allocprofile.py), so the bytes by type are exact and a method's
 * estimate varies only with what its stratum shares with others. The objects are sampled by bytes with
 * the Python heap sampler's rule (heap/csrc/hook.c): a per-thread countdown drawn from an
 * exponential of mean PROFKIT_CLR_ALLOC_SAMPLE bytes (512 KiB by default), a sample weighing
 * size / (1 - exp(-size/mean)); an object of at least the mean is always a sample, weighing
 * its size. A sample's stack is a snapshot of the allocating thread (DoStackSnapshot), its
 * type named from the ClassID (census_names.c). Samples add up per site (thread, stack,
 * type): alloc_sites.c.
 *
 * Following samples across GCs (alloc_gc.c) needs COR_PRF_MONITOR_GC, which turns
 * concurrent (background) GC off for the run: at GarbageCollectionStarted the generations
 * collected and their address ranges (GetGenerationBounds) say which followed objects the
 * GC decides on; MovedReferences2 / SurvivingReferences2 say which of those survive and
 * where they are now; at GarbageCollectionFinished the rest are dead. So the live estimate
 * is exact for the generations just collected, and counts an older object that died
 * unseen until a GC of its generation. The peak is the highest live estimate measured
 * when a GC finishes (and at the end, after a last GC forced at Shutdown).
 *
 * Memory: a thread's strata table holds at most ALLOC_MAX_STRATA (32 bytes each, grown by
 * doubling; an object of a stratum beyond it counts in the thread's "other" stratum,
 * size class ALLOC_OTHER_CLASS), at most ALLOC_MAX_TRACKED followed samples (24 bytes each; a sample beyond it
 * is counted in the allocated view but not followed: "untracked"), ALLOC_MAX_SITES sites,
 * ALLOC_MAX_NAMES types and frames, ALLOC_MAX_DEPTH frames a stack.
 */
#ifndef PROFKIT_CLR_ALLOC_H
#define PROFKIT_CLR_ALLOC_H

#include "census.h" /* the Info slots both use (GetObjectSize2, ForceGC) */

#define PRF_MONITOR_OBJECT_ALLOCATED 0x00000100u
#define PRF_ENABLE_OBJECT_ALLOCATED 0x00800000u
#define PRF_ENABLE_STACK_SNAPSHOT 0x10000000u
#define PRF_MONITOR_SUSPENDS 0x00010000u

#define ALLOC_MAX_TRACKED (1u << 20)
#define ALLOC_MAX_SITES (1u << 18)
#define ALLOC_MAX_NAMES (1u << 18)
#define ALLOC_MAX_DEPTH 64
#define ALLOC_MAX_THREADS 4096u
#define ALLOC_MAX_STRATA 4096u  /* a thread's (type, size class) strata; its table at most half full */
#define ALLOC_OTHER_CLASS 255u  /* the size class of a thread's strata beyond the cap, all types */

/* callback slots, 0-based after IUnknown */
enum { CB_RuntimeSuspendStarted = 39, CB_RuntimeResumeFinished = 43, CB_ObjectAllocated = 47 };
enum { CB_MovedReferences2 = 84, CB_SurvivingReferences2 = 85 };
/* ICorProfilerInfo2 slots */
enum { PI_DoStackSnapshot = 33, PI_GetGenerationBounds = 51 };

typedef struct {
    uint32_t tid, type, depth, frames; /* frames: offset in the frame pool, outermost first */
    uint32_t sclass;                   /* the samples' size class: a site is in one stratum */
    uint64_t samples, bytes, live, at_peak, hash;
} site_t;

typedef struct {
    uint32_t tid;
    uint64_t allocated, live, peak, at_peak;
} athread_t;

/* alloc.c */
HIDDEN extern int g_alloc_on;
HIDDEN extern uint64_t g_alloc_mean;
HIDDEN extern pthread_mutex_t g_alloc_lock; /* sites, threads, followed objects */
HIDDEN int alloc_open(void);
HIDDEN HRESULT cb_ObjectAllocated(void *self, ObjectID obj, ClassID cls);
HIDDEN void alloc_write(FILE *f);

/* alloc_sites.c: sites, names, threads (callers hold g_alloc_lock, names their own lock) */
HIDDEN uint32_t alloc_type_index(ClassID cls);
HIDDEN uint32_t alloc_frame_index(FunctionID fid);
HIDDEN site_t *alloc_site(uint32_t tid, uint32_t type, uint32_t sclass, const uint32_t *frames, uint32_t depth);
HIDDEN athread_t *alloc_thread(uint32_t tid);
HIDDEN void alloc_snapshot_peak(void);
HIDDEN uint32_t alloc_write_sites(FILE *f); /* the number of types it wrote */
HIDDEN site_t *alloc_site_at(uint32_t index);
HIDDEN uint32_t alloc_site_number(const site_t *s);
HIDDEN void alloc_site_died(uint32_t site, uint64_t weight);

/* alloc_gc.c: following samples */
HIDDEN extern uint64_t g_live_bytes, g_peak_bytes, g_gcs_seen, g_untracked, g_moved, g_died;
HIDDEN void alloc_follow(ObjectID obj, uint32_t site, uint64_t weight);
HIDDEN void alloc_gc_started(int n, const BOOL *gens);
HIDDEN void alloc_gc_finished(void);
HIDDEN HRESULT cb_MovedReferences2(void *self, ULONG n, ObjectID *old, ObjectID *now, size_t *len);
HIDDEN HRESULT cb_SurvivingReferences2(void *self, ULONG n, ObjectID *start, size_t *len);
HIDDEN void alloc_final_gc(void);
HIDDEN HRESULT cb_RuntimeSuspendStarted(void *self, int reason);
HIDDEN HRESULT cb_RuntimeResumeFinished(void *self);

#endif
