/* profkit.collect._termguard: a deadline for a SIGTERM whose Python handler cannot run.
 *
 * A profiled process whose program leaves SIGTERM at its default gets a Python handler
 * that saves the profile and then dies of SIGTERM (collect/terminate.py). A Python
 * handler runs only between bytecodes, so a process inside a long C call (a numpy
 * kernel, ``sum(range(10**12))``) would outlive a SIGTERM that kills the bare program at
 * once: ``Pool.terminate()`` would wait for it.
 *
 * So the C-level handler is wrapped: on SIGTERM it arms two one-shot POSIX timers and
 * then calls Python's own C handler (which only flags the signal for the eval loop): one
 * on the process's CPU clock (a process burning CPU in C without reaching a bytecode) and
 * one on the monotonic clock, longer (a process blocked in C, and a bound on everything;
 * longer so that a process merely starved of CPU on a loaded machine is not killed before
 * its handler had a chance). When the Python handler starts it disarms the CPU deadline
 * and moves the other out (saving takes CPU and time); when it has not started by a
 * deadline, the timer's SIGTERM (``si_code == SI_TIMER``) finds this handler again, which
 * puts back the default disposition and re-raises: the process dies of SIGTERM as the
 * bare program would, only later, and without a profile.
 *
 * Everything in the handler is async-signal-safe (timer_gettime/timer_settime,
 * sigaction, raise). POSIX timers are not inherited by fork(): install() re-creates the
 * timer in a new process. A program that installs its own SIGTERM handler replaces this
 * wrapper with Python's, and the guard is gone with it, as it should be.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static timer_t g_timer;     /* CLOCK_MONOTONIC */
static timer_t g_cpu_timer; /* CLOCK_PROCESS_CPUTIME_ID */
static pid_t g_timer_pid = 0; /* the process the timers belong to (0: none) */
static struct sigaction g_chained; /* Python's C-level handler, called after arming */
static struct timespec g_first;     /* the wall deadline armed when SIGTERM arrives */
static struct timespec g_first_cpu; /* the CPU deadline armed when SIGTERM arrives */

static void
die_of_sigterm(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
    /* SIGTERM is blocked while this handler runs: it stays pending on this thread and
     * is delivered, with the default action, when the handler returns. */
    raise(SIGTERM);
}

static void
arm_if_idle(timer_t timer, const struct timespec *after)
{
    struct itimerspec now;
    if (timer_gettime(timer, &now) == 0 && (now.it_value.tv_sec != 0 || now.it_value.tv_nsec != 0)) {
        return; /* already counting down: a second SIGTERM does not move the deadline */
    }
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_value = *after;
    timer_settime(timer, 0, &spec, NULL);
}

static void
on_sigterm(int signo, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    if (info != NULL && info->si_code == SI_TIMER) {
        die_of_sigterm();
        errno = saved_errno;
        return;
    }
    if (g_timer_pid == getpid()) {
        arm_if_idle(g_timer, &g_first);
        arm_if_idle(g_cpu_timer, &g_first_cpu);
    }
    if (g_chained.sa_flags & SA_SIGINFO) {
        if (g_chained.sa_sigaction != NULL) {
            g_chained.sa_sigaction(signo, info, context);
        }
    }
    else if (g_chained.sa_handler != SIG_DFL && g_chained.sa_handler != SIG_IGN) {
        g_chained.sa_handler(signo);
    }
    errno = saved_errno;
}

static struct timespec
timespec_of(double seconds)
{
    struct timespec ts;
    if (!(seconds > 0.001)) {
        seconds = 0.001;
    }
    if (seconds > 86400.0) {
        seconds = 86400.0;
    }
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    return ts;
}

static int
ensure_timer(void)
{
    if (g_timer_pid == getpid()) {
        return 0;
    }
    struct sigevent event;
    memset(&event, 0, sizeof event);
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGTERM;
    if (timer_create(CLOCK_MONOTONIC, &event, &g_timer) != 0) {
        return -1;
    }
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &g_cpu_timer) != 0) {
        int saved = errno;
        timer_delete(g_timer);
        errno = saved;
        return -1;
    }
    g_timer_pid = getpid();
    return 0;
}

PyDoc_STRVAR(install_doc,
    "install(cpu_deadline, wall_deadline, /)\n--\n\n"
    "Wrap SIGTERM's current C-level handler (Python's, after signal.signal) so that a\n"
    "SIGTERM arms deadlines of ``cpu_deadline`` seconds of the process's CPU time and\n"
    "``wall_deadline`` seconds before the Python handler is flagged. Raises OSError when\n"
    "the timers or the handler cannot be set.");

static PyObject *
install(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "install() takes 2 arguments");
        return NULL;
    }
    double cpu_seconds = PyFloat_AsDouble(args[0]);
    if (cpu_seconds == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    double seconds = PyFloat_AsDouble(args[1]);
    if (seconds == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    struct sigaction current;
    if (sigaction(SIGTERM, NULL, &current) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigterm) {
        current = g_chained; /* installed before (a re-install after fork): keep the chain */
    }
    if (!(current.sa_flags & SA_SIGINFO)
        && (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
        PyErr_SetString(PyExc_OSError, "SIGTERM has no handler to chain to");
        return NULL;
    }
    if (ensure_timer() != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    g_chained = current;
    g_first = timespec_of(seconds);
    g_first_cpu = timespec_of(cpu_seconds);
    struct sigaction ours = current;
    ours.sa_flags = (current.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
    ours.sa_sigaction = on_sigterm;
    if (sigaction(SIGTERM, &ours, NULL) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(extend_doc,
    "extend(seconds, /)\n--\n\n"
    "Disarm the CPU deadline and (re-)arm the wall one to ``seconds`` from now: the\n"
    "Python handler has started and needs time to save. A no-op when install() never ran\n"
    "in this process.");

static PyObject *
extend(PyObject *Py_UNUSED(module), PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (g_timer_pid == getpid()) {
        struct itimerspec spec;
        memset(&spec, 0, sizeof spec);
        if (timer_settime(g_cpu_timer, 0, &spec, NULL) != 0) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        spec.it_value = timespec_of(seconds);
        if (timer_settime(g_timer, 0, &spec, NULL) != 0) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", (PyCFunction)(void (*)(void))install, METH_FASTCALL, install_doc},
    {"extend", extend, METH_O, extend_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.collect._termguard",
    .m_doc = "A deadline for a SIGTERM whose Python handler cannot run (see _termguard.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__termguard(void)
{
    return PyModule_Create(&module_def);
}
