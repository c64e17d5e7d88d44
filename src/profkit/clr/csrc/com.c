/* libprofkit_clr: the COM plumbing: what makes this library a CoreCLR profiler.
 *
 * The runtime calls the exported DllGetClassObject with profkit's CLSID, gets a class
 * factory, and asks it for an ICorProfilerCallback11..1 object: ours is one static object
 * whose vtable maps every callback slot to its handler (the other units' cb_*) or to a
 * stub that returns S_OK. No reference counting: the object lives as long as the library.
 * Why a unit of its own: the GUIDs, vtable layout and entry points are ABI facts (see
 * clr_abi.h), apart from what any callback does. Only the two Dll* symbols are exported.
 */
#include "profiler.h"
#include "census.h"
#include "alloc.h"

#include <string.h>

static const GUID CLSID_PROFKIT = {0x819e7006, 0x936b, 0x5188, {0x81, 0xa7, 0xef, 0x70, 0x2a, 0xfa, 0xf9, 0xc2}};
static const GUID IID_IUnknown = {0x00000000, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
static const GUID IID_IClassFactory = {0x00000001, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
static const GUID IID_CALLBACKS[] = {
    {0x176FBED1, 0xA55C, 0x4796, {0x98, 0xCA, 0xA9, 0xDA, 0x0E, 0xF8, 0x83, 0xE7}}, /* 1 */
    {0x8A8CC829, 0xCCF2, 0x49fe, {0xBB, 0xAE, 0x0F, 0x02, 0x22, 0x28, 0x07, 0x1A}}, /* 2 */
    {0x4FD2ED52, 0x7731, 0x4b8d, {0x94, 0x69, 0x03, 0xD2, 0xCC, 0x30, 0x86, 0xC5}}, /* 3 */
    {0x7B63B2E3, 0x107D, 0x4d48, {0xB2, 0xF6, 0xF6, 0x1E, 0x22, 0x94, 0x70, 0xD2}}, /* 4 */
    {0x8DFBA405, 0x8C9F, 0x45F8, {0xBF, 0xFA, 0x83, 0xB1, 0x4C, 0xEF, 0x78, 0xB5}}, /* 5 */
    {0xFC13DF4B, 0x4448, 0x4F4F, {0x95, 0x0C, 0xBA, 0x8D, 0x19, 0xD0, 0x0C, 0x36}}, /* 6 */
    {0xF76A2DBA, 0x1D52, 0x4539, {0x86, 0x6C, 0x2A, 0xA5, 0x18, 0xF9, 0xEF, 0xC3}}, /* 7 */
    {0x5BED9B15, 0xC079, 0x4D47, {0xBF, 0xE2, 0x21, 0x5A, 0x14, 0x0C, 0x07, 0xE0}}, /* 8 */
    {0x27583EC3, 0xC8F5, 0x482F, {0x80, 0x52, 0x19, 0x4B, 0x8C, 0xE4, 0x70, 0x5A}}, /* 9 */
    {0xCEC5B60E, 0xC69C, 0x495F, {0x87, 0xF6, 0x84, 0xD2, 0x8E, 0xE1, 0x6F, 0xFB}}, /* 10 */
    {0x42350846, 0xAAED, 0x47F7, {0xB1, 0x28, 0xFD, 0x0C, 0x98, 0x88, 0x1C, 0xDE}}, /* 11 */
};

static int guid_eq(const GUID *a, const GUID *b) { return memcmp(a, b, sizeof(GUID)) == 0; }

typedef struct {
    void *const *vtbl;
} profiler_t;
static profiler_t g_profiler;

static HRESULT ok_stub(void) { return S_OK; } /* SysV: extra arguments are harmless */

static HRESULT cb_QueryInterface(void *self, const GUID *iid, void **out) {
    if (guid_eq(iid, &IID_IUnknown)) {
        *out = self;
        return S_OK;
    }
    for (size_t i = 0; i < sizeof IID_CALLBACKS / sizeof IID_CALLBACKS[0]; i++)
        if (guid_eq(iid, &IID_CALLBACKS[i])) {
            *out = self;
            return S_OK;
        }
    *out = NULL;
    return E_NOINTERFACE;
}
static ULONG cb_AddRef(void *self) { (void)self; return 1; }
static ULONG cb_Release(void *self) { (void)self; return 1; }

static void *g_cb_vtbl[3 + CB_COUNT];

static void build_vtable(void) {
    g_cb_vtbl[UNK_QueryInterface] = (void *)cb_QueryInterface;
    g_cb_vtbl[UNK_AddRef] = (void *)cb_AddRef;
    g_cb_vtbl[UNK_Release] = (void *)cb_Release;
    for (int i = 0; i < CB_COUNT; i++) g_cb_vtbl[3 + i] = (void *)ok_stub;
#define SET(slot, fn) g_cb_vtbl[3 + (slot)] = (void *)(fn)
    SET(CB_Initialize, cb_Initialize);
    SET(CB_Shutdown, cb_Shutdown);
    SET(CB_AssemblyLoadFinished, cb_AssemblyLoadFinished);
    SET(CB_ModuleLoadFinished, cb_ModuleLoadFinished);
    SET(CB_JITCompilationFinished, cb_JITCompilationFinished);
    SET(CB_JITCachedFunctionSearchStarted, cb_JITCachedFunctionSearchStarted);
    SET(CB_JITCachedFunctionSearchFinished, cb_JITCachedFunctionSearchFinished);
    SET(CB_JITInlining, cb_JITInlining);
    SET(CB_ThreadCreated, cb_ThreadCreated);
    SET(CB_ThreadDestroyed, cb_ThreadDestroyed);
    SET(CB_ThreadAssignedToOSThread, cb_ThreadAssigned);
    SET(CB_ExceptionThrown, cb_ExceptionThrown);
    SET(CB_ExceptionUnwindFunctionEnter, cb_ExceptionUnwindFunctionEnter);
    SET(CB_ExceptionUnwindFunctionLeave, cb_ExceptionUnwindFunctionLeave);
    SET(CB_ExceptionCatcherEnter, cb_ExceptionCatcherEnter);
    SET(CB_ThreadNameChanged, cb_ThreadNameChanged);
    SET(CB_GarbageCollectionStarted, cb_GarbageCollectionStarted);
    SET(CB_GarbageCollectionFinished, cb_GarbageCollectionFinished);
    SET(CB_InitializeForAttach, cb_InitializeForAttach);
    SET(CB_LoadAsNotificationOnly, cb_LoadAsNotificationOnly);
    SET(CB_ClassLoadFinished, cb_ClassLoadFinished);
    SET(CB_ObjectReferences, cb_ObjectReferences);
    SET(CB_RootReferences2, cb_RootReferences2);
    SET(CB_ObjectAllocated, cb_ObjectAllocated);
    SET(CB_RuntimeSuspendStarted, cb_RuntimeSuspendStarted);
    SET(CB_RuntimeResumeFinished, cb_RuntimeResumeFinished);
    SET(CB_MovedReferences2, cb_MovedReferences2);
    SET(CB_SurvivingReferences2, cb_SurvivingReferences2);
#undef SET
    g_profiler.vtbl = (void *const *)g_cb_vtbl;
}

/* ---- the class factory and the exported entry points --------------------------------- */
typedef struct {
    void *const *vtbl;
} factory_t;
static factory_t g_factory;
static void *g_cf_vtbl[5];

static HRESULT cf_QueryInterface(void *self, const GUID *iid, void **out) {
    if (guid_eq(iid, &IID_IUnknown) || guid_eq(iid, &IID_IClassFactory)) {
        *out = self;
        return S_OK;
    }
    *out = NULL;
    return E_NOINTERFACE;
}

static HRESULT cf_CreateInstance(void *self, void *outer, const GUID *iid, void **out) {
    (void)self;
    if (outer) return CLASS_E_NOAGGREGATION;
    build_vtable();
    return cb_QueryInterface(&g_profiler, iid, out);
}

static HRESULT cf_LockServer(void *self, BOOL lock) {
    (void)self, (void)lock;
    return S_OK;
}

EXPORT HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **out) {
    if (!out) return E_FAIL;
    *out = NULL;
    if (!guid_eq(clsid, &CLSID_PROFKIT)) return CLASS_E_CLASSNOTAVAILABLE;
    g_cf_vtbl[0] = (void *)cf_QueryInterface;
    g_cf_vtbl[1] = (void *)cb_AddRef;
    g_cf_vtbl[2] = (void *)cb_Release;
    g_cf_vtbl[3] = (void *)cf_CreateInstance;
    g_cf_vtbl[4] = (void *)cf_LockServer;
    g_factory.vtbl = (void *const *)g_cf_vtbl;
    return cf_QueryInterface(&g_factory, iid, out);
}

EXPORT HRESULT DllCanUnloadNow(void) { return 1; /* S_FALSE: never unload */ }
