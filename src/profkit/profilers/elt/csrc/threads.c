/* profkit.profilers.elt._native: which Thread an event belongs to (see native.h). */
#include "native.h"

/* A thread that records nothing; its depth stays 0 (nothing is ever pushed on it), which
 * events.h's plain cases rely on to turn it away with their depth tests. */
Thread SILENT;
_Thread_local uint64_t tls_serial FAST_TLS;
_Thread_local Thread *tls_thread FAST_TLS;

/* -- threads and their trees ------------------------------------------------------- */

ELT_HIDDEN Thread *
thread_new(PyObject *token)
{
    Thread *t = PyMem_Calloc(1, sizeof(Thread));
    if (t == NULL) {
        return NULL;
    }
    t->table = big_alloc(64 * sizeof(Slot));
    if (t->table == NULL || fids_init(&t->fids) < 0) {
        big_free(t->table, 64 * sizeof(Slot));
        PyMem_Free(t);
        return NULL;
    }
    t->mask = 63;
    t->root.min = MIN_NONE;
    t->written = 1;
    t->token = Py_NewRef(token);
    return t;
}

ELT_HIDDEN void
thread_free(Thread *t)
{
    for (size_t k = 0; k * CHUNK_NODES < t->used; k++) {
        chunk_free(t->numbered[k]);
    }
    names_free(&t->names);
    wide_free(&t->wide);
    fids_free(&t->fids);
    big_free(t->table, (t->mask + 1) * sizeof(Slot));
    PyMem_Free(t->numbered);
    PyMem_Free(t->frames);
    Py_XDECREF(t->token);
    PyMem_Free(t);
}


/* -- which thread ------------------------------------------------------------------ */

/* The thread-state dict's answer for this recorder: 1 and *out set when it has one, 0
 * when it has none, -1 with an exception set on failure. */
static int
dict_thread(Recorder *self, PyObject *dict, Thread **out)
{
    PyObject *hit = PyDict_GetItemWithError(dict, self->key);
    if (hit == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    void *p = PyLong_AsVoidPtr(hit);
    if (p == NULL && PyErr_Occurred()) {
        return -1;
    }
    *out = p == NULL ? &SILENT : (Thread *)p;
    return 1;
}

static inline Thread *
remember(Recorder *self, Thread *t)
{
    tls_serial = self->serial;
    tls_thread = t;
    return t;
}

/* known_thread (native.h) past its thread-local cache: the calling thread's Thread if
 * it was decided already, else &SILENT; never asks new_thread() (so runs no Python
 * code). For C calls: a thread whose first event is a C call has no recorded caller
 * yet, and asking Python then would run threading code in the middle of a new thread's
 * start-up (current_thread() would make a dummy thread). */
ELT_HIDDEN Thread *
known_thread_slow(Recorder *self)
{
    PyObject *dict = PyThreadState_GetDict();
    Thread *t;
    if (dict != NULL) {
        int found = dict_thread(self, dict, &t);
        if (found > 0) {
            return remember(self, t);
        }
        if (found < 0) {
            PyErr_Clear();
        }
    }
    return &SILENT;
}

/* The calling thread's Thread: &SILENT when it records nothing, NULL with an exception
 * set on failure. A throwaway answer (new_thread() returned False) is also &SILENT but
 * is not remembered, so the next event asks again. */
ELT_HIDDEN Thread *
lookup_thread(Recorder *self)
{
    /* Borrowed, but safe across Python calls: the thread state owns it for its life. */
    PyObject *dict = PyThreadState_GetDict();
    Thread *t;
    if (dict != NULL) {
        int found = dict_thread(self, dict, &t);
        if (found != 0) {
            return found < 0 ? NULL : remember(self, t);
        }
    }
    PyObject *new_thread = self->new_thread;
    if (new_thread == NULL) { /* cleared by the garbage collector: going away */
        return &SILENT;
    }
    Py_INCREF(new_thread); /* the recorder may be cleared while it runs */
    PyObject *token = PyObject_CallNoArgs(new_thread);
    Py_DECREF(new_thread);
    if (token == NULL) {
        return NULL;
    }
    /* new_thread() ran Python code, which may itself have decided this thread (a nested
     * event of this recorder on this thread, quiet_this_thread): that decision stands,
     * rather than a second tree for one thread. */
    if (tls_serial == self->serial) {
        Py_DECREF(token);
        return tls_thread;
    }
    if (dict != NULL) {
        int found = dict_thread(self, dict, &t);
        if (found != 0) {
            Py_DECREF(token);
            return found < 0 ? NULL : remember(self, t);
        }
    }
    if (token == Py_False) {
        Py_DECREF(token);
        return &SILENT;
    }
    t = &SILENT;
    if (token != Py_None) {
        t = thread_new(token);
        if (t == NULL) {
            Py_DECREF(token);
            PyErr_NoMemory();
            return NULL;
        }
        if (self->last == NULL) {
            self->first = t;
        }
        else {
            self->last->next = t;
        }
        self->last = t;
    }
    Py_DECREF(token);
    if (dict != NULL) {
        /* No Python code can run from here to the end (an int value, a str key): t is
         * linked and stays valid; a failure leaves it recorded but not remembered. */
        PyObject *value = PyLong_FromVoidPtr(t == &SILENT ? NULL : t);
        if (value == NULL || PyDict_SetItem(dict, self->key, value) < 0) {
            Py_XDECREF(value);
            return NULL;
        }
        Py_DECREF(value);
    }
    return remember(self, t);
}

ELT_HIDDEN PyObject *
Recorder_quiet_this_thread(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *dict = PyThreadState_GetDict();
    if (dict != NULL) {
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL || PyDict_SetItem(dict, self->key, zero) < 0) {
            Py_XDECREF(zero);
            return NULL;
        }
        Py_DECREF(zero);
    }
    remember(self, &SILENT);
    Py_RETURN_NONE;
}

/* Drop this thread's thread-state-dict entry for a recorder going away (other threads'
 * entries are out of reach; their keys never match again, and their dicts die with
 * them). Deallocation may run while an exception is pending: it is kept as it was. */
ELT_HIDDEN void
forget_this_thread(Recorder *self)
{
    if (self->key == NULL) {
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *pending = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    PyObject *dict = PyThreadState_GetDict();
    if (dict != NULL) {
        PyObject *hit = PyDict_GetItemWithError(dict, self->key);
        if (hit != NULL && PyDict_DelItem(dict, self->key) < 0) {
            hit = NULL;
        }
        if (hit == NULL) {
            PyErr_Clear();
        }
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(pending);
#else
    PyErr_Restore(type, value, tb);
#endif
}
