/* libprofkit_clr: the heap census: its file, the GC's callbacks, and taking it.
 *
 * PROFKIT_CLR_HEAP names the file. It is opened at Initialize (a new temporary file,
 * renamed when complete, as the result file is) and filled at Shutdown: census_take()
 * starts a thread of ours that calls ForceGC; while that GC runs, the runtime calls
 * cb_RootReferences2 and cb_ObjectReferences, which write "r" and "o" records (census.h
 * says what is bounded). Callbacks of the program's own GCs are ignored: only the forced
 * one is the census. Why a unit of its own: the census's life, apart from naming.
 *
 * Records (tab-separated; addresses and ids in hex; docs/clr.md):
 *   o <object> <class> <size> <ref>[@<offset>],...   an object holding references
 *   r <object> <kind> <flags> <id>                   a root (kind: 0 other, 1 stack,
 *                                                    2 finalizer, 3 handle)
 *   t <class> <count> <bytes> <example> <name>       a class's totals and largest object
 *   f <class> <offset> <name>                        a reference field of a class
 *   s <object> <Namespace.Type.Field>                an object a static field holds
 *   m <function> <name>                              a method holding stack roots
 *   gc <hresult> <ns>  names <ns>  cut <objects> <cap>  end   (the GC + walk; naming)
 */
#include "census.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

HIDDEN FILE *g_census;
static char g_tmp[PATH_MAX + 64], g_target[PATH_MAX];
static _Atomic int g_walking; /* the forced GC is running: its callbacks are the census */
static pthread_mutex_t g_census_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_objects_written, g_refs_written, g_objects_cut;

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
    fprintf(g_census, "profkit-clr-heap\t1\n");
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

/* One reference, with the offset in the object it was found at (the GC reports an
 * object's references in the order of their slots, so one forward scan finds them all). */
static void write_ref(ObjectID obj, uint64_t size, ObjectID ref, uint64_t *at) {
    uint64_t off = *at;
    while (off + sizeof(ObjectID) <= size && *(const ObjectID *)(obj + off) != ref) off += sizeof(ObjectID);
    if (off + sizeof(ObjectID) <= size) {
        fprintf(g_census, "%lx@%lx", (unsigned long)ref, (unsigned long)off);
        *at = off + sizeof(ObjectID);
    } else {
        fprintf(g_census, "%lx", (unsigned long)ref);
    }
}

static void write_object(ObjectID obj, ClassID cls, uint64_t size, ULONG n, const ObjectID *refs) {
    if (g_objects_written >= CENSUS_MAX_OBJECTS || g_refs_written + n > CENSUS_MAX_REFS) {
        g_objects_cut++;
        return;
    }
    if (n > CENSUS_MAX_OBJECT_REFS) n = CENSUS_MAX_OBJECT_REFS;
    g_objects_written++;
    g_refs_written += n;
    fprintf(g_census, "o\t%lx\t%lx\t%llu\t", (unsigned long)obj, (unsigned long)cls, (unsigned long long)size);
    uint64_t at = sizeof(void *); /* past the method table pointer */
    for (ULONG i = 0; i < n; i++) {
        if (i) fputc(',', g_census);
        write_ref(obj, size, refs[i], &at);
    }
    fputc('\n', g_census);
}

HIDDEN HRESULT cb_ObjectReferences(void *self, ObjectID obj, ClassID cls, ULONG n, ObjectID *refs) {
    (void)self;
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) return S_OK;
    uint64_t size = object_size(obj);
    pthread_mutex_lock(&g_census_lock);
    if (!atomic_load_explicit(&g_walking, memory_order_acquire)) { /* the census gave up waiting */
        pthread_mutex_unlock(&g_census_lock);
        return S_OK;
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
    fprintf(g_census, "end\n");
    int bad = ferror(g_census);
    if (fclose(g_census) != 0 || bad || rename(g_tmp, g_target) != 0) {
        say("profkit: clr: cannot write the heap census %s: %s", g_target, strerror(errno));
        unlink(g_tmp);
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

/* At Shutdown: force the census GC from a thread of ours, then name what it saw. */
HIDDEN void census_take(void) {
    if (!g_census) return;
    uint64_t start = now_ns();
    atomic_store_explicit(&g_walking, 1, memory_order_release);
    HRESULT hr = force_gc();
    pthread_mutex_lock(&g_census_lock); /* no callback is writing once this is held */
    atomic_store_explicit(&g_walking, 0, memory_order_release);
    pthread_mutex_unlock(&g_census_lock);
    fprintf(g_census, "gc\t%x\t%llu\n", (unsigned)hr, (unsigned long long)(now_ns() - start));
    fprintf(g_census, "cut\t%llu\t%llu\n", (unsigned long long)g_objects_cut, (unsigned long long)CENSUS_MAX_OBJECTS);
    if (hr >= 0) {
        uint64_t named = now_ns();
        census_each_class(write_totals);
        census_each_class(write_field_names);
        write_static_roots();
        write_method_names();
        fprintf(g_census, "names\t%llu\n", (unsigned long long)(now_ns() - named));
    }
    close_census();
}
