/* The ``__profkit_idcall__`` protocol (docs/api.md): a profiler's id-shaped callback
 * (``enter(fid)``, ``leave(fid)``...) offered as a plain C function, so that a collector
 * dispatching in C (collect/csrc, the setprofile backend on 3.11) calls it with no
 * Python call in between.
 *
 * Why: on 3.11 every traced call costs two such callbacks. Through the Python calling
 * convention each one builds nothing but still goes through vectorcall, the bound
 * method, the int-to-pointer conversion of the id and the returned None: about a fifth
 * of the collector's and recorder's own cost per event (perf, sympy). The protocol keeps
 * collectors and profilers apart (neither includes the other's headers, only this one).
 *
 * The offer: ``owner.__profkit_idcall__(name)``, asked once per callback a collector
 * binds (a bound method ``owner.name``), returns a capsule named PROFKIT_IDCALL_CAPSULE
 * holding a ``ProfkitIdCall`` -- or None (then the bound method is called as usual).
 * ``call(owner, fid)`` must do exactly what ``owner.name(fid)`` does with ``fid`` the
 * int's value as ``PyLong_AsVoidPtr`` reads it, and report errors the same way: 0, or
 * -1 with an exception set (the collector then applies its failure rule, as it does to
 * an exception from the method). The caller holds the GIL and keeps ``owner`` alive (it
 * holds the bound method) for the duration of the call.
 */
#ifndef PROFKIT_IDCALL_H
#define PROFKIT_IDCALL_H

#include <Python.h>
#include <stdint.h>

#define PROFKIT_IDCALL_CAPSULE "profkit._idcall.v1"

typedef struct {
    int (*call)(PyObject *owner, uintptr_t fid);
} ProfkitIdCall;

#endif /* PROFKIT_IDCALL_H */
