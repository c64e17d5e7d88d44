/* The per-C-function cache's lookup (see natives.c), inline: the fast path of every C
 * event (dispatch.c) and natives.c's c_call_path probe it. */
#ifndef PROFKIT_PROFHOOK_NATIVES_H
#define PROFKIT_PROFHOOK_NATIVES_H

#include "profhook.h"

static inline Py_ssize_t
native_slot(void *ml, PyObject *owner, Py_ssize_t mask)
{
    uintptr_t h = ((uintptr_t)ml >> 3) * 31u + ((uintptr_t)owner >> 4);
    return (Py_ssize_t)((h ^ (h >> 16)) & (uintptr_t)mask);
}

/* The owner the name of ``f`` is taken from (borrowed; may be NULL). Every C event asks,
 * so the common owners are told apart without PyModule_Check, whose PyType_IsSubtype call
 * walks the MRO (a quarter of the C-call path's instructions on 3.11): a module itself, a
 * type, or an instance of a static type derived straight from object (str, list, dict:
 * no module subclass can be one); anything else asks PyModule_Check as before. */
static inline PyObject *
owner_of(PyCFunctionObject *f)
{
    PyObject *bound = f->m_self;
    if (bound == NULL) {
        return NULL;
    }
    PyTypeObject *type = Py_TYPE(bound);
    if (type == &PyModule_Type || PyType_FastSubclass(type, Py_TPFLAGS_TYPE_SUBCLASS)) {
        return bound;
    }
    if ((!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) && type->tp_base == &PyBaseObject_Type)
        || !PyModule_Check(bound)) {
        return (PyObject *)type;
    }
    return bound;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline Native *
natives_find(Hook *self, void *ml, PyObject *owner)
{
    if (self->natives == NULL) {
        return NULL;
    }
    Py_ssize_t mask = self->natives_mask;
    for (Py_ssize_t i = native_slot(ml, owner, mask);; i = (i + 1) & mask) {
        Native *n = &self->natives[i];
        if (n->ml == ml && n->owner == owner) {
            return n;
        }
        if (n->ml == NULL) {
            return NULL;
        }
    }
}

/* Whether the entry's owner is still the object at its address (not a newer one that
 * took the address of a dead one). */
static inline int
owner_alive(Native *n)
{
    if (n->ref == NULL) {
        return 1;
    }
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    int alive = PyWeakref_GetRef(n->ref, &obj);
    if (alive <= 0) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(obj); /* alive: someone else holds it too */
    return obj == n->owner;
#else
    return PyWeakref_GET_OBJECT(n->ref) == n->owner;
#endif
}

/* The c_return (or c_exception) of the C call whose c_call was the hook's last event
 * (Hook.last_c): its caller was accepted then and is the same frame now, and its id is
 * the one delivered then. 1: handled; 0: for c_call_path; -1: error to the program. */
static inline int
c_return_cached(Hook *self)
{
    Target *target = &self->to_python;
    if (target->direct == NULL) {
        return 0;
    }
    if (target->direct(target->owner, self->last_c_raw) < 0) {
        return contain(self, "code transition") < 0 ? -1 : 1;
    }
    return 1;
}

#endif /* PROFKIT_PROFHOOK_NATIVES_H */
