/* Which process a recorder was made in, as far as its events care.
 *
 * A recorder stays registered with sys.monitoring in a forked child until profkit's
 * after-fork hook replaces it, and the after-fork hooks that run before that one
 * (threading's, the program's) would be recorded into the parent's tree, which the
 * child drops: every page written was copied for nothing (issue 22, item 13). So a
 * pthread_atfork handler bumps a generation in the child before any Python code runs
 * there, and a recorder from an older generation ignores its events. The setprofile
 * route is muted the same way in collect/_profhook. */
#include "native.h"
#include <pthread.h>

ELT_HIDDEN unsigned long elt_fork_generation = 0;

static void
count_fork_in_child(void)
{
    elt_fork_generation++;
}

/* Once per process (fork handlers are inherited); -1 with an exception set on failure. */
ELT_HIDDEN int
elt_watch_forks(void)
{
    static int registered = 0;
    if (!registered) {
        if (pthread_atfork(NULL, NULL, count_fork_in_child) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
            return -1;
        }
        registered = 1;
    }
    return 0;
}

ELT_HIDDEN uint64_t elt_next_serial = 1;

/* In a forked child, the recorder inherited from the parent starts afresh in place: no
 * thread, no span, a new serial and thread-state-dict key (so this thread's entry, and
 * the thread-local cache, name the parent's tree no more), and the child's generation,
 * so its events are recorded again. The same object stays bound in the collector's hooks
 * (nothing to rebuild there). The parent's trees and spans are left as they are, never
 * freed: their pages are shared with the parent until written, and freeing them wrote
 * every one (issue 22, item 13). */
ELT_HIDDEN PyObject *
Recorder_reset_after_fork(Recorder *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t serial = elt_next_serial++;
    PyObject *key = PyUnicode_FromFormat("profkit.profilers.elt._native#%llu",
                                         (unsigned long long)serial);
    if (key == NULL) {
        return NULL;
    }
    Py_SETREF(self->key, key);
    self->serial = serial;
    self->first = self->last = NULL;
    self->spans = NULL;
    self->nspans = self->spans_alloc = 0;
    self->spans_dropped = 0;
    self->stopped = self->exporting = 0;
    self->fork_generation = elt_fork_generation;
    Py_RETURN_NONE;
}
