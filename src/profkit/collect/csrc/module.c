/* The Hook type (constructor, Python-level entry, GC support) and module init (see
 * profhook.h). */
#include "profhook.h"
#include <pthread.h>
#include <structmember.h>

/* hook(frame, event, arg): the Python-level entry (threading.setprofile's new threads,
 * sys.setprofile). Installs the C function for this thread, then handles the event.
 *
 * Only when this thread's profile object is this hook, i.e. CPython's trampoline called
 * us: a program may install its own profile function that calls the one it found
 * (``old = sys.getprofile()`` ... ``old(frame, event, arg)``), and swapping then would
 * silently remove the program's function, which the Python ``hook`` never does. */
static PyObject *
Hook_call(Hook *self, PyObject *args, PyObject *Py_UNUSED(kwargs))
{
    PyObject *frame, *event, *arg;
    if (self->state == NULL) {
        /* Hook.__new__ without __init__ (or a failed __init__): no tables to read */
        PyErr_SetString(PyExc_TypeError, "Hook object is not initialized");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!UO:hook", &PyFrame_Type, &frame, &event, &arg)) {
        return NULL;
    }
    int what = -1;
    for (int i = 0; i < (int)(sizeof(event_names) / sizeof(event_names[0])); i++) {
        if (event_names[i] != NULL && PyUnicode_Compare(event, event_names[i]) == 0) {
            what = i;
            break;
        }
    }
    if (what < 0) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_INCREF(self);
    self->last_c = NULL; /* maybe (re)installed inside a C call: its c_call unseen */
    PyThreadState *tstate = PyThreadState_Get();
    if (running(self) && tstate->c_profileobj == (PyObject *)self
        && tstate->c_profilefunc != profile_func) {
        PyEval_SetProfile(profile_func, (PyObject *)self);
    }
    int result = dispatch(self, (PyFrameObject *)frame, what, arg);
    Py_DECREF(self);
    if (result < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
none_to_null(PyObject *o)
{
    return o == Py_None ? NULL : Py_NewRef(o);
}

/* Set ``t`` to the callback ``obj`` (None: none) and, when it is a bound method whose
 * owner offers it (``owner.__profkit_idcall__(name)``, _idcall.h), to its C form. -1
 * with an exception set when the offer fails. */
static int
target_set(Target *t, PyObject *obj)
{
    Py_XSETREF(t->obj, none_to_null(obj));
    t->direct = NULL;
    t->owner = NULL;
    PyObject *owner = NULL;
    if (t->obj != NULL && PyCFunction_Check(t->obj)) {
        owner = PyCFunction_GET_SELF(t->obj);
    }
    if (owner == NULL || PyModule_Check(owner)) {
        return 0;
    }
    PyObject *offer = PyObject_GetAttrString(owner, "__profkit_idcall__");
    if (offer == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear(); /* no offer: the bound method is called */
        return 0;
    }
    const char *name = ((PyCFunctionObject *)t->obj)->m_ml->ml_name;
    PyObject *form = PyObject_CallFunction(offer, "s", name);
    Py_DECREF(offer);
    if (form == NULL) {
        return -1;
    }
    if (PyCapsule_IsValid(form, PROFKIT_IDCALL_CAPSULE)) {
        ProfkitIdCall *c = PyCapsule_GetPointer(form, PROFKIT_IDCALL_CAPSULE);
        t->direct = c->call;
        t->owner = owner;
    }
    Py_DECREF(form);
    return 0;
}

static void
target_clear(Target *t)
{
    t->direct = NULL;
    t->owner = NULL;
    Py_CLEAR(t->obj);
}

PH_HIDDEN unsigned long ph_fork_generation = 0;

static void
count_fork_in_child(void)
{
    ph_fork_generation++;
}

static int
Hook_init(Hook *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"status", "gen_code", "throwing", "state", "slow", "fail",
                            "enter", "leave", "yield_", "resume", "plain_fast", "gen_fast",
                            "transitions", "resume_op", "yield_op", "to_native",
                            "to_python", "native_id", NULL};
    PyObject *status, *gen_code, *throwing, *state, *slow, *fail, *enter, *leave, *yield_, *resume;
    PyObject *to_native = Py_None, *to_python = Py_None, *native_id = Py_None;
    long plain_fast, gen_fast;
    int transitions, resume_op, yield_op;
    if (self->state != NULL) {
        /* Once only: events read the fields (enter, slow, the cache's ids...) as borrowed
         * references across calls into Python, which could otherwise re-initialize the
         * hook and free what the running call still uses. */
        PyErr_SetString(PyExc_TypeError, "Hook object is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!O!OOOOOOllpii|$OOO:Hook", names,
                                     &PyDict_Type, &status, &PyDict_Type, &gen_code,
                                     &PyDict_Type, &throwing, &PyList_Type, &state, &slow,
                                     &fail, &enter, &leave, &yield_, &resume, &plain_fast,
                                     &gen_fast, &transitions, &resume_op, &yield_op, &to_native,
                                     &to_python, &native_id)) {
        return -1;
    }
    Py_XSETREF(self->status, Py_NewRef(status));
    Py_XSETREF(self->gen_code, Py_NewRef(gen_code));
    Py_XSETREF(self->throwing, Py_NewRef(throwing));
    Py_XSETREF(self->slow, Py_NewRef(slow));
    Py_XSETREF(self->fail, Py_NewRef(fail));
    if (target_set(&self->enter, enter) < 0 || target_set(&self->leave, leave) < 0
        || target_set(&self->yield_, yield_) < 0 || target_set(&self->resume, resume) < 0
        || target_set(&self->to_native, to_native) < 0
        || target_set(&self->to_python, to_python) < 0) {
        return -1;
    }
    Py_XSETREF(self->native_id, none_to_null(native_id));
    self->plain_fast = plain_fast;
    self->gen_fast = gen_fast;
    self->transitions = transitions;
    self->resume_op = resume_op;
    self->yield_op = yield_op;
    self->fork_generation = ph_fork_generation;
    Py_XSETREF(self->state, Py_NewRef(state)); /* last: a set ``state`` means initialized */
    return 0;
}

static int
Hook_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->status);
    Py_VISIT(self->gen_code);
    Py_VISIT(self->throwing);
    Py_VISIT(self->state);
    Py_VISIT(self->slow);
    Py_VISIT(self->fail);
    Py_VISIT(self->enter.obj);
    Py_VISIT(self->leave.obj);
    Py_VISIT(self->yield_.obj);
    Py_VISIT(self->resume.obj);
    Py_VISIT(self->to_native.obj);
    Py_VISIT(self->to_python.obj);
    Py_VISIT(self->native_id);
    return natives_traverse(self, visit, arg);
}

static int
Hook_clear(Hook *self)
{
    codes_free(self);
    natives_free(self);
    Py_CLEAR(self->status);
    Py_CLEAR(self->gen_code);
    Py_CLEAR(self->throwing);
    Py_CLEAR(self->state);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->fail);
    target_clear(&self->enter);
    target_clear(&self->leave);
    target_clear(&self->yield_);
    target_clear(&self->resume);
    target_clear(&self->to_native);
    target_clear(&self->to_python);
    Py_CLEAR(self->native_id);
    return 0;
}

static void
Hook_dealloc(Hook *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Hook_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* In a forked child: this hook, inherited and mute since the fork, records again (for
 * the profiler the collector reset in place: same tables, same callbacks). */
static PyObject *
Hook_resume_after_fork(Hook *self, PyObject *Py_UNUSED(ignored))
{
    self->fork_generation = ph_fork_generation;
    Py_RETURN_NONE;
}

static PyMethodDef Hook_methods[] = {
    {"resume_after_fork", (PyCFunction)Hook_resume_after_fork, METH_NOARGS,
     "In a forked child: record again (the hook is mute there from the fork on)."},
    {NULL, NULL, 0, NULL},
};

/* Python's own tables are read by setprofile.Backend.stop() (status.clear()). */
static PyMemberDef Hook_members[] = {
    {"status", T_OBJECT, offsetof(Hook, status), READONLY, "fid -> status (shared)"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Hook_slots[] = {
    {Py_tp_doc, "Hook(...): the setprofile backend's fast path in C (see csrc/profhook.h)."},
    {Py_tp_init, Hook_init},
    {Py_tp_call, Hook_call},
    {Py_tp_traverse, Hook_traverse},
    {Py_tp_clear, Hook_clear},
    {Py_tp_dealloc, Hook_dealloc},
    {Py_tp_members, Hook_members},
    {Py_tp_methods, Hook_methods},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec Hook_spec = {
    .name = "profkit.collect._profhook.Hook",
    .basicsize = sizeof(Hook),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Hook_slots,
};

static int
module_exec(PyObject *module)
{
    static const char *names[] = {"call", "exception", "line", "return",
                                  "c_call", "c_exception", "c_return", "opcode"};
    /* PyTrace_CALL 0, EXCEPTION 1, LINE 2, RETURN 3, C_CALL 4, C_EXCEPTION 5, C_RETURN 6,
     * OPCODE 7: the same names sys.setprofile passes to a Python function. */
    for (int i = 0; i < 8; i++) {
        if (event_names[i] == NULL) {
            event_names[i] = PyUnicode_InternFromString(names[i]);
            if (event_names[i] == NULL) {
                return -1;
            }
        }
    }
    static int atfork_registered = 0;
    if (!atfork_registered) {
        if (pthread_atfork(NULL, NULL, count_fork_in_child) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
            return -1;
        }
        atfork_registered = 1;
    }
    PyObject *type = PyType_FromModuleAndSpec(module, &Hook_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "Hook", type);
    Py_DECREF(type);
    return rc;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.collect._profhook",
    .m_doc = "The sys.setprofile backend's dispatcher in C (see csrc/profhook.h).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__profhook(void)
{
    return PyModuleDef_Init(&module_def);
}
