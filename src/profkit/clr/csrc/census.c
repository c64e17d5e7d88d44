/* libprofkit_clr: the heap census: its file, the GC's callbacks, and taking it.
 *
 * PROFKIT_CLR_HEAP names the file. It is opened at Initialize (a new temporary file,
 * renamed when complete, as the result file is) and filled at Shutdown, or earlier by the
 * timer thread of PROFKIT_CLR_HEAP_AT (docs/clr.md says why a forced GC, not the program's
 * next one): take() starts a thread of ours that calls ForceGC; while that GC runs, the runtime calls
 * cb_RootReferences2 and cb_ObjectReferences, which write "r" records and the graph (census.h
 * says what is bounded). Callbacks of the program's own GCs are ignored: only the forced
 * one is the census. Why a unit of its own: the census's life, apart from naming.
 *
 * Records (tab-separated; addresses and ids in hex; docs/clr.md):
 *   graph <objects> <references>                     FILE.objects and FILE.refs hold them
 *   r <object> <kind> <flags> <id>                   a root (kind: 0 other, 1 stack,
 *                                                    2 finalizer, 3 handle)
 *   t <class> <count> <bytes> <example> <name>       a class's totals and largest object
 *   f <class> <offset> <name>                        a reference field of a class
 *   s <object> <Namespace.Type.Field>                an object a static field holds
 *   m <function> <name>                              a method holding stack roots
 *   gc <hresult> <ns>  names <ns>  cut <objects> <cap>  end   (the GC + walk; naming)
 *   at <asked ns> <taken ns> <1: at the asked time, 0: at the end>  (PROFKIT_CLR_HEAP_AT)
 */
#include "census.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

HIDDEN FILE *g_census;
static char g_tmp[PATH_MAX + 64], g_target[PATH_MAX];
/* The object graph, binary, beside the census file: FILE.objects holds one record of four
 * little-endian u64 per object with references (object, class, size, references), FILE.refs
 * one of two per reference (object, offset in the holder or ~0 when not found), in order. */
static FILE *g_objects_file, *g_refs_file;
static char g_objects_path[PATH_MAX + 16], g_refs_path[PATH_MAX + 16];
static _Atomic int g_walking; /* the census's GC is running: its callbacks are the census */
/* The census is asked for: the next full GC to start is the census's (the one ForceGC
 * runs, or a GC.Collect of the program's that starts first, the same moment's heap). */
static _Atomic int g_armed, g_saw_ours;
static pthread_mutex_t g_census_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_objects_written, g_refs_written, g_objects_cut;
static int g_statics_done; /* the static roots were read inside the census GC */
/* PROFKIT_CLR_HEAP_AT: the census at that many ns after Initialize (0: at the end only) */
static uint64_t g_at_ns, g_started_ns;
static pthread_mutex_t g_take_lock = PTHREAD_MUTEX_INITIALIZER; /* one census, timer or end */
static pthread_cond_t g_wake;                                    /* Shutdown wakes the timer */
static int g_taken, g_ending;

#define CENSUS_WAIT_S 600 /* the longest the census waits for its GC */
#define HR_TIMEOUT ((HRESULT)0x800705B4) /* HRESULT_FROM_WIN32(ERROR_TIMEOUT) */

typedef HRESULT (*fn_ForceGC)(void *);
typedef HRESULT (*fn_GetObjectSize2)(void *, ObjectID, size_t *);
typedef HRESULT (*fn_GetObjectSize)(void *, ObjectID, ULONG *);

/* Opens the census file when PROFKIT_CLR_HEAP asks for one: 0, or -1 (said why). */
HIDDEN int census_open(void) {
    const char *path = getenv("PROFKIT_CLR_HEAP");
    if (!path || !*path) return 0;
    g_census = open_result(path, g_target, sizeof g_target, g_tmp, sizeof g_tmp);
    if (!g_census) {
        say("profkit: clr: cannot write the heap census %s: %s; the program runs unprofiled", path,
            errno == EINVAL ? "not a regular file" : strerror(errno));
        return -1;
    }
    fprintf(g_census, "profkit-clr-heap\t2\n");
    snprintf(g_objects_path, sizeof g_objects_path, "%s.objects", g_target);
    snprintf(g_refs_path, sizeof g_refs_path, "%s.refs", g_target);
    g_objects_file = fopen(g_objects_path, "wb");
    g_refs_file = g_objects_file ? fopen(g_refs_path, "wb") : NULL;
    if (!g_refs_file) {
        say("profkit: clr: cannot write the heap census's graph %s: %s; the program runs unprofiled",
            g_objects_path, strerror(errno));
        if (g_objects_file) fclose(g_objects_file), unlink(g_objects_path);
        fclose(g_census), unlink(g_tmp);
        g_census = NULL;
        return -1;
    }
    g_started_ns = now_ns();
    const char *at = getenv("PROFKIT_CLR_HEAP_AT");
    if (at && *at) {
        char *end = NULL;
        unsigned long long ns = strtoull(at, &end, 10);
        if (*end || at[0] == '-') {
            say("profkit: clr: PROFKIT_CLR_HEAP_AT=%s is not a number of nanoseconds; the census is taken at the end",
                at);
            ns = 0;
        }
        g_at_ns = ns;
    }
    return 0;
}

static uint64_t object_size(ObjectID obj) {
    if (g_info_version >= 4) {
        size_t size = 0;
        if (((fn_GetObjectSize2)SLOT(g_info, PI_GetObjectSize2))(g_info, obj, &size) >= 0) return size;
        return 0;
    }
    ULONG size = 0;
    if (((fn_GetObjectSize)SLOT(g_info, PI_GetObjectSize))(g_info, obj, &size) >= 0) return size;
    return 0;
}

/* Where in the object `ref` is stored, scanning on from *at (the GC reports an object's
 * references in the order of their slots, so one forward scan finds them all); ~0 if not. */
static uint64_t ref_offset(ObjectID obj, uint64_t size, ObjectID ref, uint64_t *at) {
    uint64_t off = *at;
    while (off + sizeof(ObjectID) <= size && *(const ObjectID *)(obj + off) != ref) off += sizeof(ObjectID);
    if (off + sizeof(ObjectID) > size) return ~0ull;
    *at = off + sizeof(ObjectID);
    return off;
}

static void write_object(ObjectID obj, ClassID cls, uint64_t size, ULONG n, const ObjectID *refs) {
    if (g_objects_written >= CENSUS_MAX_OBJECTS || g_refs_written + n > CENSUS_MAX_REFS) {
        g_objects_cut++;
        return;
    }
    if (n > CENSUS_MAX_OBJECT_REFS) n = CENSUS_MAX_OBJECT_REFS;
    g_objects_written++;
    g_refs_written += n;
    uint64_t head[4] = {(uint64_t)obj, (uint64_t)cls, size, n}, pair[2];
    fwrite(head, sizeof head, 1, g_objects_file);
    uint64_t at = sizeof(void *); /* past the method table pointer */
    for (ULONG i = 0; i < n; i++) {
        pair[0] = (uint64_t)refs[i];
        pair[1] = ref_offset(obj, size, refs[i], &at);
        fwrite(pair, sizeof pair, 1, g_refs_file);
    }
}

/* Not the census's GC: E_FAIL, which ends the runtime's heap walk for this GC (its walk
 * stops when the callback fails), so the program's own GCs do not walk the whole heap. */
HIDDEN HRESULT cb_ObjectReferences(void *self, ObjectID obj, ClassID cls, ULONG n, ObjectID *refs) {
    (void)self;
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) return E_FAIL;
    uint64_t size = object_size(obj);
    pthread_mutex_lock(&g_census_lock);
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) { /* the census gave up waiting */
        pthread_mutex_unlock(&g_census_lock);
        return E_FAIL;
    }
    census_class_t *c = census_class(cls);
    if (c) {
        c->count++;
        c->bytes += size;
        if (size > c->largest || !c->example) c->largest = size, c->example = obj;
        c->has_refs |= n > 0;
    }
    if (n) write_object(obj, cls, size, n, refs);
    pthread_mutex_unlock(&g_census_lock);
    return S_OK;
}

HIDDEN HRESULT cb_RootReferences2(void *self, ULONG n, ObjectID *refs, int *kinds, int *flags, UINT_PTR *ids) {
    (void)self;
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) return S_OK;
    pthread_mutex_lock(&g_census_lock);
    for (ULONG i = 0; i < n && atomic_load_explicit(&g_walking, memory_order_acquire); i++) {
        if (!refs[i]) continue;
        fprintf(g_census, "r\t%lx\t%d\t%d\t%lx\n", (unsigned long)refs[i], kinds[i], flags[i], (unsigned long)ids[i]);
        if (kinds[i] == 1 && ids[i]) note_stack_root(ids[i]);
    }
    pthread_mutex_unlock(&g_census_lock);
    return S_OK;
}

static void *census_main(void *arg) {
    HRESULT *hr = arg;
    *hr = ((fn_ForceGC)SLOT(g_info, PI_ForceGC))(g_info);
    return NULL;
}

static void write_totals(census_class_t *c) {
    char name[NAME_BYTES];
    class_display_name(c->id, name, sizeof name);
    fprintf(g_census, "t\t%lx\t%llu\t%llu\t%lx\t%s\n", (unsigned long)c->id, (unsigned long long)c->count,
            (unsigned long long)c->bytes, (unsigned long)c->example, name);
}

static void close_census(void) {
    int graph_bad = ferror(g_objects_file) | ferror(g_refs_file);
    graph_bad |= fclose(g_objects_file) != 0;
    graph_bad |= fclose(g_refs_file) != 0;
    if (graph_bad) fprintf(g_census, "graph-unwritten\n"); /* an unknown record: the reader refuses it */
    fprintf(g_census, "graph\t%llu\t%llu\n", (unsigned long long)g_objects_written,
            (unsigned long long)g_refs_written);
    fprintf(g_census, "end\n");
    int bad = ferror(g_census);
    if (fclose(g_census) != 0 || bad || rename(g_tmp, g_target) != 0) {
        say("profkit: clr: cannot write the heap census %s: %s", g_target, strerror(errno));
        unlink(g_tmp), unlink(g_objects_path), unlink(g_refs_path);
    }
    g_census = NULL;
}

/* The forced GC's HRESULT; HR_TIMEOUT when it did not end within CENSUS_WAIT_S (the
 * thread is left blocked; the process's exit ends it). */
static HRESULT force_gc(void) {
    static HRESULT hr; /* static: a thread given up on may still write it */
    pthread_t thread;
    hr = E_FAIL;
    if (pthread_create(&thread, NULL, census_main, &hr) != 0) return E_FAIL;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CENSUS_WAIT_S;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0) {
        pthread_detach(thread);
        return HR_TIMEOUT;
    }
    return hr;
}

/* Forces the census GC from a thread of ours, then names what it saw; `at_ns` is how long
 * after Initialize it was taken, `timed` whether at PROFKIT_CLR_HEAP_AT (else at the end). */
static void take(int timed) {
    uint64_t start = now_ns();
    atomic_store_explicit(&g_armed, 1, memory_order_release);
    HRESULT hr = force_gc();
    pthread_mutex_lock(&g_census_lock); /* no callback is writing once this is held */
    atomic_store_explicit(&g_armed, 0, memory_order_release);
    atomic_store_explicit(&g_walking, 0, memory_order_release);
    int statics_done = g_statics_done;
    pthread_mutex_unlock(&g_census_lock);
    fprintf(g_census, "gc\t%x\t%llu\n", (unsigned)hr, (unsigned long long)(now_ns() - start));
    fprintf(g_census, "cut\t%llu\t%llu\n", (unsigned long long)g_objects_cut, (unsigned long long)CENSUS_MAX_OBJECTS);
    if (g_at_ns)
        fprintf(g_census, "at\t%llu\t%llu\t%d\n", (unsigned long long)g_at_ns,
                (unsigned long long)(start - g_started_ns), timed);
    if (hr >= 0) {
        uint64_t named = now_ns();
        census_each_class(write_totals);
        census_each_class(write_field_names);
        if (!statics_done) write_static_roots();
        write_method_names();
        fprintf(g_census, "names\t%llu\n", (unsigned long long)(now_ns() - named));
    }
    close_census();
}

/* GarbageCollectionStarted (`full`: generation 2 is collected): is this the census's GC
 * (see g_armed)? A GC of the program's under way when the census was asked for is not
 * (it started before), nor a younger generation's (its walk would list the older
 * generations' dead objects too), whatever thread runs it (a server GC's own). */
HIDDEN void census_gc_started(int full) {
    if (!full || !atomic_load_explicit(&g_armed, memory_order_acquire)) return;
    if (atomic_exchange_explicit(&g_saw_ours, 1, memory_order_acq_rel)) return; /* one GC only */
    atomic_store_explicit(&g_walking, 1, memory_order_release);
}

/* The census GC's GarbageCollectionFinished (the runtime still suspended): the objects the
 * static fields hold are read now, while they are the ones the walk saw; a census taken
 * while the program runs on would otherwise name what it holds a moment later. */
HIDDEN void census_gc_finished(void) {
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) return;
    pthread_mutex_lock(&g_census_lock);
    if (atomic_load_explicit(&g_walking, memory_order_acquire) && !g_statics_done) {
        write_static_roots();
        g_statics_done = 1;
    }
    atomic_store_explicit(&g_walking, 0, memory_order_release); /* a GC after it is not the census */
    pthread_mutex_unlock(&g_census_lock);
}

/* The timer thread of PROFKIT_CLR_HEAP_AT: waits until that long after Initialize, or
 * until Shutdown wakes it, and takes the census unless Shutdown took (or takes) it. */
static void *timer_main(void *arg) {
    (void)arg;
    struct timespec until;
    uint64_t due = g_started_ns + g_at_ns;
    until.tv_sec = (time_t)(due / 1000000000ull);
    until.tv_nsec = (long)(due % 1000000000ull);
    pthread_mutex_lock(&g_take_lock);
    while (!g_taken && !g_ending && pthread_cond_timedwait(&g_wake, &g_take_lock, &until) != ETIMEDOUT) {}
    if (!g_taken && !g_ending) {
        g_taken = 1;
        take(1);
    }
    pthread_mutex_unlock(&g_take_lock);
    return NULL;
}

/* After Initialize succeeded: start the timer thread when PROFKIT_CLR_HEAP_AT asks. */
HIDDEN void census_start_timer(void) {
    if (!g_census || !g_at_ns) return;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t thread;
    if (pthread_create(&thread, NULL, timer_main, NULL) != 0) {
        say("profkit: clr: cannot start the census timer; the census is taken at the end");
        return;
    }
    pthread_detach(thread);
}

/* At Shutdown: the census, unless the timer thread took it (waits while it takes it). */
HIDDEN void census_take(void) {
    if (!g_census && !g_at_ns) return;
    pthread_mutex_lock(&g_take_lock);
    g_ending = 1;
    if (g_at_ns) pthread_cond_broadcast(&g_wake);
    if (!g_taken && g_census) {
        g_taken = 1;
        take(0);
    }
    pthread_mutex_unlock(&g_take_lock);
}
