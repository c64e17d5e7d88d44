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
