/* Prototype, measured by `bench/elt_bench.py --sampling-ab N --pending-call`: a sampler
 * that never hands the GIL over.
 *
 * The shipped sampler is a Python thread: every sample it wakes, asks for the GIL, and the
 * program's thread stops, switches and switches back (~160 samples/s at a 1 ms setting,
 * because the GIL changes hands every sys.getswitchinterval()). Here a plain C thread
 * sleeps `interval` and queues Py_AddPendingCall(); the main thread runs the Python
 * callback itself at its next eval-breaker check: no thread switch, and the requested rate.
 *
 * Py_AddPendingCall from a thread with no thread state wakes the main thread's eval loop
 * on 3.13 only; on 3.11/3.12 the eval breaker is set by hand (an interpreter internal,
 * hence Py_BUILD_CORE_MODULE and pycore_interp.h). Not handled, as a prototype: the main
 * thread blocked in C (no samples meanwhile), fork, interpreter shutdown while running.
 */
#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE_MODULE 1
#include <Python.h>
#if PY_VERSION_HEX < 0x030D0000
#include "internal/pycore_interp.h"
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static pthread_t timer;
static atomic_int running, outstanding;
static atomic_long serviced;
static long interval_ns;
static PyObject *callback;
static PyInterpreterState *interp;

static int
run_sample(void *unused)
{
    (void)unused;
    atomic_store(&outstanding, 0);
    if (!atomic_load(&running) || callback == NULL) {
        return 0;
    }
    atomic_fetch_add(&serviced, 1);
    PyObject *r = PyObject_CallNoArgs(callback);
    if (r == NULL) {
        PyErr_WriteUnraisable(callback);
    }
    Py_XDECREF(r);
    return 0;
}

static void *
tick(void *unused)
{
    (void)unused;
    struct timespec ts = {interval_ns / 1000000000L, interval_ns % 1000000000L};
    while (atomic_load(&running)) {
        nanosleep(&ts, NULL);
        if (!atomic_load(&running) || atomic_exchange(&outstanding, 1)) {
            continue; /* stopping, or the last request is not served yet */
        }
        if (Py_AddPendingCall(run_sample, NULL) < 0) {
            atomic_store(&outstanding, 0);
            continue;
        }
#if PY_VERSION_HEX < 0x030D0000
        _Py_atomic_store_relaxed(&interp->ceval.eval_breaker, 1);
#endif
    }
    return NULL;
}

static PyObject *
start(PyObject *module, PyObject *args)
{
    PyObject *cb;
    long ns;
    if (!PyArg_ParseTuple(args, "Ol:start", &cb, &ns) || ns <= 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "interval must be > 0 ns");
        }
        return NULL;
    }
    if (atomic_load(&running)) {
        PyErr_SetString(PyExc_RuntimeError, "already running");
        return NULL;
    }
    Py_XSETREF(callback, Py_NewRef(cb));
    interp = PyInterpreterState_Get();
    interval_ns = ns;
    atomic_store(&serviced, 0);
    atomic_store(&outstanding, 0);
    atomic_store(&running, 1);
    if (pthread_create(&timer, NULL, tick, NULL) != 0) {
        atomic_store(&running, 0);
        PyErr_SetString(PyExc_OSError, "pthread_create failed");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
stop(PyObject *module, PyObject *unused)
{
    if (!atomic_exchange(&running, 0)) {
        return PyLong_FromLong(0);
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_join(timer, NULL);
    Py_END_ALLOW_THREADS
    Py_CLEAR(callback);
    return PyLong_FromLong(atomic_load(&serviced));
}

static PyMethodDef methods[] = {
    {"start", start, METH_VARARGS, "start(callback, interval_ns)"},
    {"stop", stop, METH_NOARGS, "stop() -> samples served"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pendingcall", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__pendingcall(void)
{
    return PyModule_Create(&module_def);
}
