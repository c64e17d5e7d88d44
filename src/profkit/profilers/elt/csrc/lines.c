/* profkit.profilers.elt._native: event lines, by lines.py's rules (see its docstring). */
#include "native.h"
#include "../../../_line_rule.h"

const char *const OPEN_WORD[2] = {"Enter: ", "Resume: "};
const char *const CLOSE_WORD[2] = {"Leave: ", "Yield: "};

/* -- event lines (lines.py's rules; see its docstring) -------------------------------- */

/* The deepest indent, in levels: lines.py's MAX_INDENT_LEVELS (see why there). */
#define MAX_INDENT_LEVELS 1025

/* ``indent`` levels of four spaces (at most MAX_INDENT_LEVELS), ``head``, ``name``, ``tail``
 * (head and tail ASCII). */
static PyObject *
make_line(Py_ssize_t indent, const char *head, PyObject *name, const char *tail)
{
    if (indent > MAX_INDENT_LEVELS) {
        indent = MAX_INDENT_LEVELS;
    }
    Py_ssize_t hl = (Py_ssize_t)strlen(head), tl = (Py_ssize_t)strlen(tail);
    Py_ssize_t nl = PyUnicode_GET_LENGTH(name);
    if (indent > (PY_SSIZE_T_MAX - hl - tl - nl) / 4) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t il = 4 * indent;
    Py_UCS4 maxchar = PyUnicode_MAX_CHAR_VALUE(name);
    PyObject *line = PyUnicode_New(il + hl + nl + tl, maxchar < 127 ? 127 : maxchar);
    if (line == NULL) {
        return NULL;
    }
    int kind = PyUnicode_KIND(line);
    void *data = PyUnicode_DATA(line);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < il; i++) {
        PyUnicode_WRITE(kind, data, at++, ' ');
    }
    for (Py_ssize_t i = 0; i < hl; i++) {
        PyUnicode_WRITE(kind, data, at++, (unsigned char)head[i]);
    }
    if (PyUnicode_CopyCharacters(line, at, name, 0, nl) < 0) {
        Py_DECREF(line);
        return NULL;
    }
    at += nl;
    for (Py_ssize_t i = 0; i < tl; i++) {
        PyUnicode_WRITE(kind, data, at++, (unsigned char)tail[i]);
    }
    return line;
}

/* The function name of ``t``'s node ``n``, a new reference (cached in the thread's name
 * table: nodes never move while recorded). */
static PyObject *
name_of(Recorder *self, Thread *t, Node *n)
{
    if (n->parent & NAMED) {
        return Py_NewRef(name_find(&t->names, n));
    }
    PyObject *namer = Py_XNewRef(self->namer); /* the recorder may be cleared meanwhile */
    if (namer == NULL) {
        return PyUnicode_FromString("?");
    }
    PyObject *fid = PyLong_FromVoidPtr((void *)fid_of(&t->fids, n));
    PyObject *name = fid == NULL ? NULL : PyObject_CallOneArg(namer, fid);
    Py_XDECREF(fid);
    Py_DECREF(namer);
    if (name == NULL) {
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        Py_DECREF(name);
        PyErr_SetString(PyExc_TypeError, "the name callback must return a str");
        return NULL;
    }
    if (!(n->parent & NAMED)) { /* the callback may have named it already (re-entry) */
        if (name_add(&t->names, n, Py_NewRef(name)) < 0) {
            Py_DECREF(name);
            PyErr_NoMemory();
            return NULL;
        }
        n->parent |= NAMED;
    }
    return name;
}

/* Write one line for ``n``. Runs Python code: callers hold no pointer into frames. */
ELT_HIDDEN int
emit_line(Recorder *self, Thread *t, Py_ssize_t indent, const char *head, Node *n,
          const char *tail)
{
    PyObject *name = name_of(self, t, n);
    if (name == NULL) {
        return -1;
    }
    PyObject *line = make_line(indent, head, name, tail);
    Py_DECREF(name);
    if (line == NULL) {
        return -1;
    }
    PyObject *emit = Py_XNewRef(self->emit);
    if (emit == NULL) { /* cleared meanwhile: the line goes nowhere */
        Py_DECREF(line);
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(emit, line);
    Py_DECREF(emit);
    Py_DECREF(line);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* The opening line of the stack entry ``index`` (frames[index - 1]), if it still exists. */
static int
emit_open(Recorder *self, Thread *t, Py_ssize_t index)
{
    if (index < 1 || index > t->depth) {
        return 0; /* gone meanwhile (only Python code run by a callback can do that) */
    }
    Frame f = t->frames[index - 1];
    return emit_line(self, t, index - 1, OPEN_WORD[f.kind], f.node, "");
}

/* What the shared line rule (_line_rule.h) needs of this recorder: a thread's stack, the
 * clock of the current event, and the entry just popped. */
typedef struct {
    Recorder *self;
    Thread *t;
    int64_t now;
    Node *popped;
    Py_ssize_t popped_index;
    int popped_kind;
} RuleContext;

static int
rule_open(void *ctx, int64_t index)
{
    RuleContext *c = ctx;
    return emit_open(c->self, c->t, (Py_ssize_t)index);
}

static int
rule_is_due(void *ctx, int64_t index)
{
    RuleContext *c = ctx;
    if (index < 1 || index > c->t->depth) {
        return 0; /* gone meanwhile (Python code run by a callback) */
    }
    return wrap_sub(c->now, c->t->frames[index - 1].start) >= c->self->basetime;
}

static int
rule_open_popped(void *ctx)
{
    RuleContext *c = ctx;
    return emit_line(c->self, c->t, c->popped_index - 1, OPEN_WORD[c->popped_kind], c->popped, "");
}

/* Base time: write the held opening lines of calls already running for the base time. */
ELT_HIDDEN int
lines_on_open(Recorder *self, Thread *t, int64_t now)
{
    RuleContext c = {self, t, now, NULL, 0, 0};
    pk_line_rule rule = {&c, rule_open, rule_is_due};
    int64_t written = t->written;
    int rc = pk_lines_catch_up(&rule, &written, t->depth);
    t->written = (Py_ssize_t)written;
    return rc;
}

/* The call of ``node`` at stack index ``index`` (popped already) lasted ``duration``. */
ELT_HIDDEN int
lines_on_close(Recorder *self, Thread *t, Py_ssize_t index, Node *node, int open_kind,
               int64_t duration, int close_kind)
{
    RuleContext c = {self, t, 0, node, index, open_kind};
    pk_line_rule rule = {&c, rule_open, rule_is_due};
    int shown = pk_lines_before_close(&rule, t->written, index, duration >= self->basetime,
                                      rule_open_popped);
    if (shown <= 0) {
        return shown;
    }
    char tail[64];
    if (self->unit_ns) {
        snprintf(tail, sizeof tail, ", Duration: %lld ns", (long long)duration);
    }
    else {
        snprintf(tail, sizeof tail, ", Duration: %.3f us", (double)duration / 1000.0);
    }
    if (emit_line(self, t, index - 1, CLOSE_WORD[close_kind], node, tail) < 0) {
        return -1;
    }
    t->written = index;
    return 0;
}
