/* libprofkit_clr: the heap census (PROFKIT_CLR_HEAP), shared by census*.c.
 *
 * What the census is: at the runtime's Shutdown (or, with PROFKIT_CLR_HEAP_AT, that many
 * nanoseconds after Initialize, from a timer thread of profkit's own), a thread of profkit's own (ForceGC must
 * not be called from a managed thread) forces a full blocking GC; during it the runtime
 * reports every live object (ObjectReferences) and every root (RootReferences2), which
 * census.c writes to the census file as they come. After it, the names are added: types
 * (census_names.c: System.Byte[], generic instantiations), the fields that hold each
 * reference (by the offset it was found at), the static fields that hold objects and the
 * methods whose frames hold stack roots (census_roots.c). clr/censusfile.py reads it.
 *
 * COR_PRF_MONITOR_GC is set at Initialize only when the census is asked for: it cannot be
 * set later, and it turns concurrent (background) GC off for the whole run. So is
 * COR_PRF_MONITOR_CLASS_LOADS: the loaded classes are where static roots are looked for.
 *
 * Memory: per class seen (at most CENSUS_MAX_CLASSES) a table entry, the ids of the
 * methods holding stack roots (at most CENSUS_MAX_METHODS) and of the classes loaded
 * (at most CENSUS_MAX_LOADED); objects and their references
 * go straight to the graph files (census.c), at most CENSUS_MAX_OBJECTS objects with references and
 * CENSUS_MAX_REFS references in all (beyond those, totals stay exact, chains may miss).
 */
#ifndef PROFKIT_CLR_CENSUS_H
#define PROFKIT_CLR_CENSUS_H

#include "profiler.h"

#define PRF_MONITOR_CLASS_LOADS 0x00000002u
#define CENSUS_MAX_CLASSES (1u << 20)
#define CENSUS_MAX_METHODS 4096u
#define CENSUS_MAX_OBJECTS 4000000ull
#define CENSUS_MAX_REFS 16000000ull
#define CENSUS_MAX_LOADED (1u << 20) /* loaded classes whose statics are read */
#define CENSUS_MAX_OBJECT_REFS 100000u /* references written for one object */

/* callback slots (ICorProfilerCallback, ICorProfilerCallback2), 0-based after IUnknown */
enum { CB_ClassLoadFinished = 16, CB_ObjectReferences = 49, CB_RootReferences2 = 74 };

/* ICorProfilerInfo slots (0-based after IUnknown) the census uses */
enum {
    PI_GetObjectSize = 7,
    PI_IsArrayClass = 8,
    PI_GetCurrentThreadID = 10,
    PI_ForceGC = 25,
    PI_GetClassLayout = 37,
    PI_GetClassIDInfo2 = 38,
    PI_GetThreadAppDomain = 45,
    PI_GetAppDomainStaticAddress = 47,
    PI_GetStaticFieldInfo = 50,
    PI_GetThreadStaticAddress2 = 65,
    PI_GetAppDomainsContainingModule = 66,
    PI_EnumThreads = 68,
    PI_GetObjectSize2 = 77,
};

/* IMetaDataImport slots */
/* ICorProfilerThreadEnum slots */
enum { ENUM_Next = 4 };

enum { MD_CloseEnum = 0, MD_EnumFields = 17, MD_GetFieldProps = 54 };

typedef struct {
    ClassID id;
    uint64_t count, bytes, largest;
    ObjectID example; /* the largest object of the class */
    int has_refs;     /* an object of it held references: its fields get named */
} census_class_t;

HIDDEN extern FILE *g_census; /* the census file while it is written, else NULL */

/* census.c */
HIDDEN int census_open(void);
HIDDEN void census_take(void);
HIDDEN void census_start_timer(void);
HIDDEN void census_gc_started(int full);
HIDDEN void census_gc_finished(void);
HIDDEN HRESULT cb_ObjectReferences(void *self, ObjectID obj, ClassID cls, ULONG n, ObjectID *refs);
HIDDEN HRESULT cb_RootReferences2(void *self, ULONG n, ObjectID *refs, int *kinds, int *flags, UINT_PTR *ids);

/* census_classes.c: the per-class totals */
HIDDEN census_class_t *census_class(ClassID cls);
HIDDEN void census_each_class(void (*fn)(census_class_t *));

/* census_names.c */
HIDDEN void class_display_name(ClassID cls, char *out, size_t cap);
HIDDEN void write_field_names(census_class_t *c);
HIDDEN void *module_metadata(ModuleID mod);

/* census_roots.c */
HIDDEN void note_stack_root(UINT_PTR fid);
HIDDEN void write_method_names(void);
HIDDEN void write_static_roots(void);
HIDDEN HRESULT cb_ClassLoadFinished(void *self, ClassID cls, HRESULT status);

#endif
