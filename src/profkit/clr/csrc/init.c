/* libprofkit_clr: Initialize and Shutdown, the profiler's life as the runtime sees it.
 *
 * Initialize reads the settings, takes the newest ICorProfilerInfo the runtime offers,
 * opens the sinks, sets the event mask and the hooks, and starts the writer; any failure
 * is one stderr line and E_FAIL, so the runtime runs the program unprofiled. Owns the
 * runtime interface (g_info) and the lock every rare path shares (g_lock). Why a unit of
 * its own: the order of these steps is the start-up contract; each step is its owner's.
 */
#include "profiler.h"
#include "census.h"
#include "alloc.h"

#include <stdarg.h>
#include <stdlib.h>

/* ICorProfilerInfo15 .. ICorProfilerInfo3, newest first: the first one the runtime gives
 * us is the version we hold (3 is the least we need: the mapper and the WithInfo hooks). */
static const struct {
    int version;
    GUID iid;
} IID_INFOS[] = {
    {15, {0xB446462D, 0xBD22, 0x41DD, {0x87, 0x2D, 0xDC, 0x71, 0x4C, 0x49, 0xEB, 0x56}}},
    {14, {0xF460E352, 0xD76D, 0x4FE9, {0x83, 0x5F, 0xF6, 0xAF, 0x9D, 0x6E, 0x86, 0x2D}}},
    {13, {0x6E6C7EE2, 0x0701, 0x4EC2, {0x9D, 0x29, 0x2E, 0x87, 0x33, 0xB6, 0x69, 0x34}}},
    {12, {0x27b24ccd, 0x1cb1, 0x47c5, {0x96, 0xee, 0x98, 0x19, 0x0d, 0xc3, 0x09, 0x59}}},
    {11, {0x06398876, 0x8987, 0x4154, {0xB6, 0x21, 0x40, 0xA0, 0x0D, 0x6E, 0x4D, 0x04}}},
    {10, {0x2F1B5152, 0xC869, 0x40C9, {0xAA, 0x5F, 0x3A, 0xBE, 0x02, 0x6B, 0xD7, 0x20}}},
    {9, {0x008170DB, 0xF8CC, 0x4796, {0x9A, 0x51, 0xDC, 0x8A, 0xA0, 0xB4, 0x70, 0x12}}},
    {8, {0xC5AC80A6, 0x782E, 0x4716, {0x80, 0x44, 0x39, 0x59, 0x8C, 0x60, 0xCF, 0xBF}}},
    {7, {0x9AEECC0D, 0x63E0, 0x4187, {0x8C, 0x00, 0xE3, 0x12, 0xF5, 0x03, 0xF6, 0x63}}},
    {6, {0xF30A070D, 0xBFFB, 0x46A7, {0xB1, 0xD8, 0x87, 0x81, 0xEF, 0x7B, 0x69, 0x8A}}},
    {5, {0x07602928, 0xCE38, 0x4B83, {0x81, 0xE7, 0x74, 0xAD, 0xAF, 0x78, 0x12, 0x14}}},
    {4, {0x0d8fdcaa, 0x6257, 0x47bf, {0xb1, 0xbf, 0x94, 0xda, 0xc8, 0x84, 0x66, 0xee}}},
    {3, {0xB555ED4F, 0x452A, 0x4E54, {0x8B, 0x39, 0xB5, 0x36, 0x0B, 0xAD, 0x32, 0xA0}}},
};

HIDDEN void *g_info; /* ICorProfilerInfoN */
HIDDEN int g_info_version;
HIDDEN pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* methods map, metadata, records */

typedef HRESULT (*fn_QI)(void *, const GUID *, void **);
typedef HRESULT (*fn_SetEventMask)(void *, DWORD);
typedef HRESULT (*fn_SetEventMask2)(void *, DWORD, DWORD);

/* The flags a refusal can be blamed on, by their SDK names (corprof.idl's COR_PRF_MONITOR). */
static const struct {
    DWORD flag;
    const char *name, *why; /* what of ours needs it */
} FLAG_NAMES[] = {
    {PRF_ENABLE_OBJECT_ALLOCATED, "COR_PRF_ENABLE_OBJECT_ALLOCATED", "to record allocations"},
    {PRF_MONITOR_OBJECT_ALLOCATED, "COR_PRF_MONITOR_OBJECT_ALLOCATED", "to record allocations"},
    {PRF_ENABLE_STACK_SNAPSHOT, "COR_PRF_ENABLE_STACK_SNAPSHOT", "for the allocations' stacks"},
    {PRF_MONITOR_SUSPENDS, "COR_PRF_MONITOR_SUSPENDS", "for the GCs' pauses"},
    {PRF_MONITOR_GC, "COR_PRF_MONITOR_GC", "to follow objects across GCs"},
    {PRF_MONITOR_ENTERLEAVE, "COR_PRF_MONITOR_ENTERLEAVE", "to hook calls"},
    {PRF_ENABLE_FRAME_INFO, "COR_PRF_ENABLE_FRAME_INFO", "for the call hooks"},
    {PRF_ENABLE_FUNCTION_ARGS, "COR_PRF_ENABLE_FUNCTION_ARGS", "for the arguments"},
    {PRF_ENABLE_FUNCTION_RETVAL, "COR_PRF_ENABLE_FUNCTION_RETVAL", "for the return values"},
    {PRF_MONITOR_JIT_COMPILATION, "COR_PRF_MONITOR_JIT_COMPILATION", "for the code map"},
    {PRF_MONITOR_CACHE_SEARCHES, "COR_PRF_MONITOR_CACHE_SEARCHES", "for the code map"},
    {PRF_MONITOR_EXCEPTIONS, "COR_PRF_MONITOR_EXCEPTIONS", "for the exceptions"},
    {PRF_MONITOR_THREADS, "COR_PRF_MONITOR_THREADS", "for the threads"},
    {PRF_MONITOR_MODULE_LOADS, "COR_PRF_MONITOR_MODULE_LOADS", "for the loads"},
    {PRF_MONITOR_ASSEMBLY_LOADS, "COR_PRF_MONITOR_ASSEMBLY_LOADS", "for the loads"},
    {PRF_MONITOR_CLASS_LOADS, "COR_PRF_MONITOR_CLASS_LOADS", "for the heap census"},
};

/* PROFKIT_CLR_TEST_REFUSE (tests only): a mask of COR_PRF_MONITOR flags this runtime is made
 * to refuse as an older one refuses a flag it lacks (E_INVALIDARG), to test what we say. */
static DWORD g_test_refuse;

/* Sets (mask, high) as the settings ask: with BASIC_GC when the events have gc (falling back
 * to the full GC notifications on a runtime without it). */
static HRESULT try_mask(DWORD mask, DWORD high) {
    if (mask & g_test_refuse) return (HRESULT)0x80070057;
    if (high) {
        HRESULT hr = ((fn_SetEventMask2)SLOT(g_info, PI_SetEventMask2))(g_info, mask, high);
        if (hr >= 0) return hr; /* else an older runtime without BASIC_GC: the full GC notifications */
        mask |= PRF_MONITOR_GC;
    }
    return ((fn_SetEventMask)SLOT(g_info, PI_SetEventMask))(g_info, mask);
}

/* The refusal, said in one line, and left beside the result file (`<output>.refused`) so
 * profkit's runner knows the program ran unprofiled and why, and adds no line of its own. */
static void refused(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    say("%s", line);
    if (!S.output) return;
    char path[4096], target[4096], tmp[4200];
    if (snprintf(path, sizeof path, "%s.refused", S.output) >= (int)sizeof path) return;
    FILE *f = open_result(path, target, sizeof target, tmp, sizeof tmp);
    if (!f) return;
    int bad = fprintf(f, "%s\n", line) < 0;
    if (fclose(f) != 0 || bad || rename(tmp, target) != 0) unlink(tmp);
}

/* Which callbacks the runtime makes, from PROFKIT_CLR_EVENTS; 0, or -1 when the runtime
 * refused them (said which flag, when one flag's absence lets the rest be set). */
static int set_event_mask(void) {
    DWORD mask = 0, high = 0;
    /* The WithInfo hooks need at least one of the *_INFO/ARGS/RETVAL flags; FRAME_INFO is
     * the cheapest (the runtime refuses the hooks with no such flag). */
    if (S.events & EV_CALLS)
        mask |= PRF_MONITOR_ENTERLEAVE | PRF_MONITOR_JIT_COMPILATION | (S.fast_hooks ? 0 : PRF_ENABLE_FRAME_INFO);
    if (S.events & EV_ARGS) mask |= PRF_ENABLE_FUNCTION_ARGS | PRF_ENABLE_FUNCTION_RETVAL | PRF_ENABLE_FRAME_INFO;
    if (S.events & EV_EXCEPTIONS) mask |= PRF_MONITOR_EXCEPTIONS;
    if (S.events & EV_THREADS) mask |= PRF_MONITOR_THREADS;
    if (S.events & EV_LOADS) mask |= PRF_MONITOR_MODULE_LOADS | PRF_MONITOR_ASSEMBLY_LOADS;
    if (S.events & EV_JIT) mask |= PRF_MONITOR_JIT_COMPILATION | PRF_MONITOR_CACHE_SEARCHES;
    if (S.events & EV_CALLS) mask |= PRF_MONITOR_EXCEPTIONS; /* unwinding pops shadow frames */
    if (g_census) mask |= PRF_MONITOR_GC | PRF_MONITOR_CLASS_LOADS; /* the heap census (census.c) */
    if (g_alloc_on) /* allocations, followed across GCs, with their stacks (alloc.h) */
        mask |= PRF_ENABLE_OBJECT_ALLOCATED | PRF_MONITOR_OBJECT_ALLOCATED | PRF_MONITOR_GC | PRF_ENABLE_STACK_SNAPSHOT |
                PRF_MONITOR_SUSPENDS; /* the GCs' pauses */
    if ((S.events & EV_GC) && g_info_version >= 5) high |= PRF_HIGH_BASIC_GC;
    else if (S.events & EV_GC) mask |= PRF_MONITOR_GC;
    const char *test = getenv("PROFKIT_CLR_TEST_REFUSE");
    g_test_refuse = test && *test ? (DWORD)strtoul(test, NULL, 0) : 0;
    HRESULT hr = try_mask(mask, high);
    if (hr >= 0) return 0;
    /* which flag: the first whose absence the runtime accepts (the profiler is refused
     * either way, so a mask set while probing is never used) */
    for (size_t i = 0; i < sizeof FLAG_NAMES / sizeof FLAG_NAMES[0]; i++)
        if ((mask & FLAG_NAMES[i].flag) && try_mask(mask & ~FLAG_NAMES[i].flag, high) >= 0) {
            refused("profkit: clr: this runtime refused %s, needed %s (SetEventMask: HRESULT 0x%08x); the "
                    "program runs unprofiled", FLAG_NAMES[i].name, FLAG_NAMES[i].why, (unsigned)hr);
            return -1;
        }
    refused("profkit: clr: this runtime refused the event mask 0x%08x (SetEventMask: HRESULT 0x%08x); the program "
            "runs unprofiled", (unsigned)mask, (unsigned)hr);
    return -1;
}

HIDDEN HRESULT cb_Initialize(void *self, void *unk) {
    (void)self;
    clock_start();
    if (read_settings() < 0) return E_FAIL;
    for (size_t i = 0; i < sizeof IID_INFOS / sizeof IID_INFOS[0]; i++) {
        void *p = NULL;
        if (((fn_QI)UNK_SLOT(unk, UNK_QueryInterface))(unk, &IID_INFOS[i].iid, &p) == S_OK && p) {
            g_info = p;
            g_info_version = IID_INFOS[i].version;
            break;
        }
    }
    if (!g_info) {
        say("profkit: clr: this runtime has no ICorProfilerInfo3; the program runs unprofiled");
        return E_FAIL;
    }
    if (open_sinks() < 0 || census_open() < 0 || alloc_open() < 0) return E_FAIL;
    if (set_event_mask() < 0) return E_FAIL;
    if (S.events & EV_CALLS) {
        HRESULT hr = hooks_install();
        if (hr < 0) {
            say("profkit: clr: setting the enter/leave hooks failed (HRESULT 0x%08x); the program runs "
                "unprofiled", (unsigned)hr);
            return E_FAIL;
        }
    }
    if (hooks_prepare() != 0 || writer_prepare() != 0) return E_FAIL;
    clock_first_rate();
    hooks_active(1);
    if (writer_start() != 0) {
        say("profkit: clr: cannot start the writer thread; the program runs unprofiled");
        hooks_active(0);
        return E_FAIL;
    }
    if (S.output || g_lines_on) save_on_signals();
    census_start_timer();
    return S_OK;
}

HIDDEN HRESULT cb_InitializeForAttach(void) { return E_NOTIMPL; }

HIDDEN HRESULT cb_Shutdown(void *self) {
    (void)self;
    census_take();
    alloc_final_gc();
    add_pending_code();
    finish(0);
    return S_OK;
}
