/* profkit's own declarations of the few CoreCLR profiling ABI facts libprofkit_clr uses.
 *
 * Written from the documented interfaces (corprof.idl, cor.h): on Linux the runtime's
 * PAL makes WCHAR 16 bits, ULONG/DWORD/HRESULT/BOOL 32 bits, and COM methods use the
 * platform's C calling convention with the object pointer first. An interface pointer
 * points at a pointer to its vtable; a method is found by its *slot* (its position in
 * the interface, counting the three IUnknown methods and every base interface first).
 * We never call a slot beyond the interface version we obtained.
 */
#ifndef PROFKIT_CLR_ABI_H
#define PROFKIT_CLR_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t HRESULT;
typedef uint32_t ULONG;
typedef uint32_t DWORD;
typedef int32_t BOOL;
typedef uint16_t WCHAR;
typedef uint32_t mdToken;
typedef uintptr_t UINT_PTR;
typedef UINT_PTR FunctionID, ModuleID, ClassID, ThreadID, AssemblyID, ObjectID;

#define S_OK ((HRESULT)0)
#define S_FALSE ((HRESULT)1)
#define E_NOINTERFACE ((HRESULT)0x80004002)
#define E_FAIL ((HRESULT)0x80004005)
#define E_NOTIMPL ((HRESULT)0x80004001)
#define CLASS_E_NOAGGREGATION ((HRESULT)0x80040110)
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111)

typedef struct {
    uint32_t d1;
    uint16_t d2, d3;
    uint8_t d4[8];
} GUID;

typedef struct {
    UINT_PTR start;
    size_t size;
} CodeInfo; /* COR_PRF_CODE_INFO */

/* COR_PRF_MONITOR bits (corprof.idl) */
#define PRF_MONITOR_MODULE_LOADS 0x00000004u
#define PRF_MONITOR_ASSEMBLY_LOADS 0x00000008u
#define PRF_MONITOR_JIT_COMPILATION 0x00000020u
#define PRF_MONITOR_EXCEPTIONS 0x00000040u
#define PRF_MONITOR_GC 0x00000080u
#define PRF_MONITOR_THREADS 0x00000200u
#define PRF_MONITOR_ENTERLEAVE 0x00001000u
#define PRF_MONITOR_CACHE_SEARCHES 0x00020000u
#define PRF_ENABLE_FUNCTION_ARGS 0x02000000u
#define PRF_ENABLE_FUNCTION_RETVAL 0x04000000u
#define PRF_ENABLE_FRAME_INFO 0x08000000u
/* COR_PRF_HIGH_MONITOR (SetEventMask2, ICorProfilerInfo5+) */
#define PRF_HIGH_BASIC_GC 0x00000010u

/* ICorProfilerCallback slots, 0-based after IUnknown's three (add 3 for the vtable). */
enum {
    CB_Initialize = 0,
    CB_Shutdown = 1,
    CB_AssemblyLoadFinished = 7,
    CB_ModuleLoadFinished = 11,
    CB_JITCompilationFinished = 21,
    CB_JITCachedFunctionSearchStarted = 22,
    CB_JITCachedFunctionSearchFinished = 23,
    CB_JITInlining = 25,
    CB_ThreadCreated = 26,
    CB_ThreadDestroyed = 27,
    CB_ThreadAssignedToOSThread = 28,
    CB_ExceptionThrown = 51,
    CB_ExceptionSearchCatcherFound = 56,
    CB_ExceptionUnwindFunctionEnter = 59,
    CB_ExceptionUnwindFunctionLeave = 60,
    CB_ExceptionCatcherEnter = 63,
    /* ICorProfilerCallback2 */
    CB_ThreadNameChanged = 69,
    CB_GarbageCollectionStarted = 70,
    CB_GarbageCollectionFinished = 72,
    /* ICorProfilerCallback3 */
    CB_InitializeForAttach = 77,
    /* ICorProfilerCallback4 */
    CB_GetReJITParameters = 81,
    /* ICorProfilerCallback6 */
    CB_GetAssemblyReferences = 87,
    /* ICorProfilerCallback11 */
    CB_LoadAsNotificationOnly = 94,
    CB_COUNT = 95 /* ICorProfilerCallback .. ICorProfilerCallback11 */
};

/* ICorProfilerInfo slots (0-based after IUnknown), through ICorProfilerInfo5. */
enum {
    PI_GetClassFromObject = 0,
    PI_GetThreadInfo = 9,
    PI_GetClassIDInfo = 11,
    PI_GetFunctionInfo = 12,
    PI_SetEventMask = 13,
    PI_GetTokenAndMetaDataFromFunction = 16,
    PI_GetModuleMetaData = 18,
    PI_GetAssemblyInfo = 23,
    /* ICorProfilerInfo2 */
    PI_GetCodeInfo2 = 39,
    /* ICorProfilerInfo3 */
    PI_SetFunctionIDMapper2 = 56,
    PI_SetEnterLeaveFunctionHooks3 = 58,
    PI_SetEnterLeaveFunctionHooks3WithInfo = 59,
    PI_GetRuntimeInformation = 64,
    PI_GetModuleInfo2 = 67,
    /* ICorProfilerInfo5 */
    PI_SetEventMask2 = 79,
};

/* IMetaDataImport slots (0-based after IUnknown). */
enum {
    MD_GetTypeDefProps = 9,
    MD_GetMethodProps = 27,
    MD_GetNestedClassProps = 59,
};

/* IUnknown slots */
enum { UNK_QueryInterface = 0, UNK_AddRef = 1, UNK_Release = 2 };

/* The vtable of an interface pointer, and slot s (0-based after IUnknown). */
#define VTBL(obj) (*(void *const *const *)(obj))
#define SLOT(obj, s) (VTBL(obj)[3 + (s)])
#define UNK_SLOT(obj, s) (VTBL(obj)[(s)])

#endif
