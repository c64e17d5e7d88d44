/* The EvalHook type, install/uninstall, and module init (see evalframe.h). */
#include "evalframe.h"

#if EF_SUPPORTED
#include <pthread.h>

EF_HIDDEN EvalHook *ef_active = NULL;
EF_HIDDEN unsigned long ef_fork_generation = 0;
static PyTypeObject *hook_type = NULL; /* the EvalHook type (the module's, kept) */

/* In a forked child, before any Python code runs there: the parent's hook stays
 * installed until profkit's after-fork hook takes it out or resumes it, and until then
 * it is mute (profhook's ph_fork_generation says why). */
static void
count_fork_in_child(void)
{
    ef_fork_generation++;
}

/* Set ``t`` to the callback ``obj`` (None: none) and its C form when its owner offers
 * one (``__profkit_idcall__``, _idcall.h; profhook's target_set). */
static int
target_set(EfTarget *t, PyObject *obj)
{
    Py_XSETREF(t->obj, obj == Py_None ? NULL : Py_NewRef(obj));
    t->direct = NULL;
    t->owner = NULL;
    PyObject *owner = t->obj != NULL && PyCFunction_Check(t->obj) ? PyCFunction_GET_SELF(t->obj) : NULL;
    if (owner == NULL || PyModule_Check(owner)) {
        return 0;
    }
    PyObject *offer = PyObject_GetAttrString(owner, "__profkit_idcall__");
    if (offer == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    PyObject *form = PyObject_CallFunction(offer, "s", ((PyCFunctionObject *)t->obj)->m_ml->ml_name);
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

static int
EvalHook_init(EvalHook *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"state", "classify", "fail", "enter", "leave", "yield_", "resume",
                            "yield_op", NULL};
    PyObject *state, *classify, *fail, *enter, *leave, *yield_, *resume;
    int yield_op;
    if (self->state != NULL) {
        PyErr_SetString(PyExc_TypeError, "EvalHook object is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOOOOi:EvalHook", names, &PyList_Type,
                                     &state, &classify, &fail, &enter, &leave, &yield_,
                                     &resume, &yield_op)) {
        return -1;
    }
    Py_XSETREF(self->classify, Py_NewRef(classify));
    Py_XSETREF(self->fail, Py_NewRef(fail));
    if (target_set(&self->enter, enter) < 0 || target_set(&self->leave, leave) < 0
        || target_set(&self->yield_, yield_) < 0 || target_set(&self->resume, resume) < 0) {
        return -1;
    }
    self->yield_op = yield_op;
    self->fork_generation = ef_fork_generation;
    Py_XSETREF(self->state, Py_NewRef(state)); /* last: a set ``state`` means initialized */
    return 0;
}

static int
EvalHook_traverse(EvalHook *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->state);
    Py_VISIT(self->classify);
    Py_VISIT(self->fail);
    Py_VISIT(self->enter.obj);
    Py_VISIT(self->leave.obj);
    Py_VISIT(self->yield_.obj);
    Py_VISIT(self->resume.obj);
    return 0;
}

static int
EvalHook_clear(EvalHook *self)
{
    EfTarget *targets[] = {&self->enter, &self->leave, &self->yield_, &self->resume};
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        targets[i]->direct = NULL;
        targets[i]->owner = NULL;
        Py_CLEAR(targets[i]->obj);
    }
    Py_CLEAR(self->classify);
    Py_CLEAR(self->fail);
    Py_CLEAR(self->state);
    ef_codes_free(self);
    return 0;
}

static void
EvalHook_dealloc(EvalHook *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    EvalHook_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Why this interpreter's frame evaluation cannot be taken over now, or None. */
static PyObject *
conflict(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    if (current == _PyEval_EvalFrameDefault || current == ef_eval) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString("another frame-evaluation function (PEP 523: a debugger, a "
                                "JIT) is installed");
}

/* install(hook): make ``hook`` the active one and the frame-evaluation function ours. */
static PyObject *
install(PyObject *module, PyObject *hook)
{
    if (hook_type == NULL || !PyObject_TypeCheck(hook, hook_type)
        || ((EvalHook *)hook)->state == NULL) {
        PyErr_SetString(PyExc_TypeError, "install() needs an initialized EvalHook");
        return NULL;
    }
    PyObject *why = conflict(module, NULL);
    if (why != Py_None) {
        return why;
    }
    Py_DECREF(why);
    Py_XSETREF(ef_active, (EvalHook *)Py_NewRef(hook));
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), ef_eval);
    Py_RETURN_NONE;
}

/* uninstall(hook): if ``hook`` is the active one, no hook is; the frame evaluation goes
 * back to the default if it is still ours (frames running inside the hook finish there). */
static PyObject *
uninstall(PyObject *Py_UNUSED(module), PyObject *hook)
{
    if ((PyObject *)ef_active != hook) {
        Py_RETURN_NONE;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == ef_eval) {
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
    Py_CLEAR(ef_active);
    Py_RETURN_NONE;
}

/* In a forked child: ``hook``, mute since the fork, records again. */
static PyObject *
resume_after_fork(PyObject *Py_UNUSED(module), PyObject *hook)
{
    if ((PyObject *)ef_active == hook) {
        ef_active->fork_generation = ef_fork_generation;
    }
    Py_RETURN_NONE;
}

static PyType_Slot EvalHook_slots[] = {
    {Py_tp_doc, "EvalHook(...): the evalframe backend's hook (see csrc/evalframe.h)."},
    {Py_tp_init, EvalHook_init},
    {Py_tp_traverse, EvalHook_traverse},
    {Py_tp_clear, EvalHook_clear},
    {Py_tp_dealloc, EvalHook_dealloc},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec EvalHook_spec = {
    .name = "profkit.collect._evalframe.EvalHook",
    .basicsize = sizeof(EvalHook),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = EvalHook_slots,
};

static PyMethodDef methods[] = {
    {"conflict", conflict, METH_NOARGS, "Why the frame evaluation cannot be ours, or None."},
    {"install", install, METH_O, "Install an EvalHook; a reason (str) when refused, else None."},
    {"uninstall", uninstall, METH_O, "Remove the EvalHook if it is the installed one."},
    {"resume_after_fork", resume_after_fork, METH_O, "In a forked child: record again."},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *module)
{
    static int atfork_registered = 0;
    if (!atfork_registered) {
        if (pthread_atfork(NULL, NULL, count_fork_in_child) != 0) {
            PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
            return -1;
        }
        atfork_registered = 1;
    }
    PyObject *type = PyType_FromModuleAndSpec(module, &EvalHook_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "EvalHook", type);
    Py_XSETREF(hook_type, (PyTypeObject *)type);
    return rc != 0 ? rc : PyModule_AddObjectRef(module, "UNAVAILABLE", Py_None);
}

#else /* 3.12+: sys.monitoring is the cheap collector there */

static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};

static int
module_exec(PyObject *module)
{
    PyObject *why = PyUnicode_FromString("the evalframe backend is for Python 3.11 only "
                                         "(3.12+ has sys.monitoring)");
    int rc = why != NULL ? PyModule_AddObjectRef(module, "UNAVAILABLE", why) : -1;
    Py_XDECREF(why);
    return rc;
}

#endif

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profkit.collect._evalframe",
    .m_doc = "The evalframe backend's frame-evaluation hook (3.11; see csrc/evalframe.h).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__evalframe(void)
{
    return PyModuleDef_Init(&module_def);
}
