/* profkit.monitor._closes: FunctionTable.feed's per-line loop in C.
 *
 * Why: in Python, each close line of a datagram (``    Leave: NAME, Duration: 12.250 us``)
 * costs a microsecond or more of interpreter work -- split out its head and duration,
 * two lookups, the self-time sums, four entry updates -- and at a million lines a second
 * that is more than one core. Here the same steps run over the body's characters in C.
 *
 * What it does is exactly what the Python loop in functions.py does, on the same objects,
 * which the Python side owns: ``heads`` (head text -> (depth, entry or None); depth -1:
 * not a close line), ``sums`` (the sender's per-depth list of ints) and the entries
 * ([self, total, closes, longest] lists of ints). Everything else goes to Python:
 * a head not yet remembered to ``head(text)``, a duration this file does not parse
 * (more than 9 digits either side of the point, or anything unusual) to
 * ``duration(text)`` (-1: malformed), and a body that is not ASCII is left to the
 * Python loop altogether (None is returned).
 *
 * Totals count a recursive function once (inclusive.py explains how, and is this file's
 * reference): ``last`` is the sender's array('q') of each depth's last close sequence
 * number (its last slot the counter), ``pending`` its dict of entry key -> records
 * [k, added, t, ...] (k and t small ints, added an int of any size, as in Python).
 *
 * feed(body, heads, sums, head, duration, last, pending) -> number of close lines, or None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static const char SEP[] = ", Duration: ";
#define SEP_LEN 12
/* records kept per name and sender: inclusive.MAX_RECORDS */
#define MAX_RECORDS 64

/* ``D[.F] unit`` with at most 9 digits each side: 1 and *ns, else 0 (Python decides). */
static int fast_duration(const char *s, Py_ssize_t n, long long *ns)
{
    Py_ssize_t i = 0, whole = 0, frac = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++;
        whole++;
    }
    if (whole == 0 || whole > 9)
        return 0;
    int dot = 0;
    if (i < n && s[i] == '.') {
        dot = 1;
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            frac++;
        }
        if (frac == 0 || frac > 9)
            return 0;
    }
    if (i >= n || s[i] != ' ')
        return 0;
    Py_ssize_t number = i;
    const char *u = s + i + 1;
    Py_ssize_t ul = n - i - 1;
    long long scale;
    if (ul == 2 && u[1] == 's' && u[0] == 'n')
        scale = 1;
    else if (ul == 2 && u[1] == 's' && u[0] == 'u')
        scale = 1000;
    else if (ul == 2 && u[1] == 's' && u[0] == 'm')
        scale = 1000000;
    else if (ul == 1 && u[0] == 's')
        scale = 1000000000;
    else
        return 0; /* "µs" is not ASCII: never here */
    if (!dot) {
        long long v = 0;
        for (Py_ssize_t j = 0; j < whole; j++)
            v = v * 10 + (s[j] - '0');
        *ns = v * scale; /* < 1e18 */
        return 1;
    }
    /* round(float(value) * scale), as Python computes it: its own correctly rounded,
     * locale-independent parse; round half to even */
    char buf[24];
    memcpy(buf, s, (size_t)number);
    buf[number] = '\0';
    double value = PyOS_string_to_double(buf, NULL, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    double x = value * (double)scale;
    double r = round(x);
    if (fabs(x - r) == 0.5)
        r = 2.0 * round(x / 2.0);
    *ns = (long long)r;
    return 1;
}

/* the first ", Duration: " in [s, end), or NULL */
static const char *find_sep(const char *s, const char *end)
{
    while (end - s >= SEP_LEN) {
        const char *comma = memchr(s, ',', (size_t)(end - s - SEP_LEN + 1));
        if (comma == NULL)
            return NULL;
        if (memcmp(comma, SEP, SEP_LEN) == 0)
            return comma;
        s = comma + 1;
    }
    return NULL;
}

/* list[i] += value (new reference semantics handled here); -1 on error */
static int add_at(PyObject *list, Py_ssize_t i, PyObject *value)
{
    PyObject *sum = PyNumber_Add(PyList_GET_ITEM(list, i), value);
    if (sum == NULL)
        return -1;
    return PyList_SetItem(list, i, sum); /* steals sum */
}

/* records[i] as a C integer (k and t are small: depths and sequence numbers) */
static long long at(PyObject *records, Py_ssize_t i)
{
    return PyLong_AsLongLong(PyList_GET_ITEM(records, i));
}

/* records[i] = v; -1 on error */
static int put(PyObject *records, Py_ssize_t i, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    return o == NULL ? -1 : PyList_SetItem(records, i, o);
}

/* records += [k, added, t]; -1 on error */
static int push(PyObject *records, Py_ssize_t k, PyObject *added, long long t)
{
    PyObject *ko = PyLong_FromSsize_t(k), *to = PyLong_FromLongLong(t);
    int r = (ko == NULL || to == NULL || PyList_Append(records, ko) < 0 ||
             PyList_Append(records, added) < 0 || PyList_Append(records, to) < 0)
                ? -1
                : 0;
    Py_XDECREF(ko);
    Py_XDECREF(to);
    return r;
}

/* inclusive.current_k: the shallowest depth below k whose frame closed after t, else k */
static long long current_k(long long k, long long t, const long long *last)
{
    while (k > 0 && last[k - 1] > t)
        k--;
    return k;
}

/* inclusive._compact: the last record's k brought up to date, records sharing it merged */
static int compact(PyObject *records, const long long *last)
{
    Py_ssize_t n = PyList_GET_SIZE(records);
    long long k = current_k(at(records, n - 3), at(records, n - 1), last);
    if (k == 0)
        return PyList_SetSlice(records, 0, n, NULL);
    if (put(records, n - 3, k) < 0)
        return -1;
    while (n >= 6 && at(records, n - 6) >= k && at(records, n - 4) > last[k - 1]) {
        if (add_at(records, n - 2, PyList_GET_ITEM(records, n - 5)) < 0 ||
            PyList_SetSlice(records, n - 6, n - 3, NULL) < 0)
            return -1;
        n -= 3;
    }
    return 0;
}

/* inclusive.counted: what a close of the entry named key at depth adds to its total,
 * as a new reference (ns less its nested calls' share already added); NULL on error */
static PyObject *counted(PyObject *pending, PyObject *key, Py_ssize_t depth, PyObject *ns,
                         long long since, const long long *last)
{
    long long now = last[depth];
    PyObject *records = PyDict_GetItemWithError(pending, key);
    if (records == NULL) {
        if (PyErr_Occurred())
            return NULL;
        if (depth > 0) {
            PyObject *fresh = Py_BuildValue("[nOL]", depth, ns, now);
            int r = fresh == NULL ? -1 : PyDict_SetItem(pending, key, fresh);
            Py_XDECREF(fresh);
            if (r < 0)
                return NULL;
        }
        return Py_NewRef(ns);
    }
    if (!PyList_Check(records) || PyList_GET_SIZE(records) % 3) {
        PyErr_SetString(PyExc_TypeError, "records are a list of [k, added, t] triples");
        return NULL;
    }
    Py_INCREF(records); /* an allocation may run arbitrary code (a collection) */
    PyObject *result = NULL, *nested = NULL;
    Py_ssize_t size = PyList_GET_SIZE(records), n = size;
    while (n >= 3 && at(records, n - 3) > depth && at(records, n - 1) > since) {
        /* a call of this function inside this one: counted again now */
        PyObject *sum = nested == NULL ? Py_NewRef(PyList_GET_ITEM(records, n - 2))
                                       : PyNumber_Add(nested, PyList_GET_ITEM(records, n - 2));
        Py_XSETREF(nested, sum);
        if (sum == NULL)
            goto done;
        n -= 3;
    }
    if (PyErr_Occurred() || (n < size && PyList_SetSlice(records, n, size, NULL) < 0))
        goto done;
    if (depth == 0) { /* nothing is open above: no later close can contain this one */
        if (PyList_SetSlice(records, 0, n, NULL) < 0)
            goto done;
    } else if (n >= 3 && at(records, n - 3) >= depth && at(records, n - 1) > last[depth - 1]) {
        /* the last record sits under the same open frames as this call: one record */
        if ((at(records, n - 3) != depth && put(records, n - 3, depth) < 0) ||
            add_at(records, n - 2, ns) < 0)
            goto done;
    } else {
        if (n >= 3 && compact(records, last) < 0)
            goto done;
        if (push(records, depth, ns, now) < 0)
            goto done;
        if (PyList_GET_SIZE(records) > 3 * MAX_RECORDS && PyList_SetSlice(records, 0, 3, NULL) < 0)
            goto done;
    }
    if (PyErr_Occurred()) /* an at() that overflowed */
        goto done;
    result = nested == NULL ? Py_NewRef(ns) : PyNumber_Subtract(ns, nested);
done:
    Py_XDECREF(nested);
    Py_DECREF(records);
    return result;
}

/* one close line: duration text [ts, te), head [hs, he); 1 counted, 0 not, -1 error */
static int close_line(const char *s, Py_ssize_t hs, Py_ssize_t he, Py_ssize_t ts, Py_ssize_t te,
                      PyObject *heads, PyObject *sums, PyObject *head_cb, PyObject *dur_cb,
                      PyObject *zero, PyObject *one, long long *last, PyObject *pending)
{
    long long fast;
    PyObject *ns;
    if (fast_duration(s + ts, te - ts, &fast)) {
        ns = PyLong_FromLongLong(fast);
    } else {
        PyObject *text = PyUnicode_FromStringAndSize(s + ts, te - ts);
        if (text == NULL)
            return -1;
        ns = PyObject_CallOneArg(dur_cb, text);
        Py_DECREF(text);
    }
    if (ns == NULL)
        return -1;
    int negative = PyObject_RichCompareBool(ns, zero, Py_LT);
    if (negative != 0) {
        Py_DECREF(ns);
        return negative < 0 ? -1 : 0; /* malformed duration: not a close line */
    }
    PyObject *key = PyUnicode_FromStringAndSize(s + hs, he - hs);
    if (key == NULL) {
        Py_DECREF(ns);
        return -1;
    }
    PyObject *parsed = PyDict_GetItemWithError(heads, key);
    if (parsed != NULL) {
        Py_INCREF(parsed);
    } else if (!PyErr_Occurred()) {
        parsed = PyObject_CallOneArg(head_cb, key);
    }
    Py_DECREF(key);
    if (parsed == NULL || !PyTuple_Check(parsed) || PyTuple_GET_SIZE(parsed) != 2) {
        if (parsed != NULL)
            PyErr_SetString(PyExc_TypeError, "head() must return (depth, entry)");
        Py_XDECREF(parsed);
        Py_DECREF(ns);
        return -1;
    }
    int result = -1;
    PyObject *own = NULL, *added = NULL;
    Py_ssize_t depth = PyLong_AsSsize_t(PyTuple_GET_ITEM(parsed, 0));
    PyObject *entry = PyTuple_GET_ITEM(parsed, 1);
    if (depth == -1 && PyErr_Occurred())
        goto done;
    if (depth < 0) {
        result = 0;
        goto done;
    }
    Py_ssize_t max_depth = PyList_GET_SIZE(sums) - 2;
    if (depth <= max_depth) {
        own = PyNumber_Subtract(ns, PyList_GET_ITEM(sums, depth + 1));
        if (own == NULL)
            goto done;
        Py_INCREF(zero);
        if (PyList_SetItem(sums, depth + 1, zero) < 0 || add_at(sums, depth, ns) < 0)
            goto done;
        int below = PyObject_RichCompareBool(own, zero, Py_LT);
        if (below < 0)
            goto done;
        if (below) {
            Py_SETREF(own, Py_NewRef(zero));
        }
    } else {
        own = Py_NewRef(zero);
    }
    long long since = 0;
    if (depth <= max_depth) { /* every close is noted, waits too (inclusive.counted) */
        since = last[depth];
        last[depth] = ++last[max_depth + 2];
    }
    if (entry != Py_None) { /* None: a wait, out of the ranking */
        if (!PyList_Check(entry) || PyList_GET_SIZE(entry) != 5) {
            PyErr_SetString(PyExc_TypeError, "an entry is a list of 5 ints");
            goto done;
        }
        /* too deep to track: its total counts every level */
        added = depth <= max_depth
                    ? counted(pending, PyList_GET_ITEM(entry, 4), depth, ns, since, last)
                    : Py_NewRef(ns);
        if (added == NULL || add_at(entry, 0, own) < 0 || add_at(entry, 1, added) < 0 ||
            add_at(entry, 2, one) < 0)
            goto done;
        int longer = PyObject_RichCompareBool(ns, PyList_GET_ITEM(entry, 3), Py_GT);
        if (longer < 0)
            goto done;
        if (longer && PyList_SetItem(entry, 3, Py_NewRef(ns)) < 0)
            goto done;
    }
    result = 1;
done:
    Py_XDECREF(own);
    Py_XDECREF(added);
    Py_DECREF(parsed);
    Py_DECREF(ns);
    return result;
}

static PyObject *feed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "feed(body, heads, sums, head, duration, last, pending)");
        return NULL;
    }
    PyObject *body = args[0], *heads = args[1], *sums = args[2], *pending = args[6];
    if (!PyUnicode_Check(body) || !PyDict_Check(heads) || !PyList_Check(sums) ||
        !PyDict_Check(pending) || PyList_GET_SIZE(sums) < 2) {
        PyErr_SetString(PyExc_TypeError, "feed(str, dict, list, head, duration, last, dict)");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(body) < 0)
        return NULL;
#endif
    if (!PyUnicode_IS_ASCII(body))
        Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_DATA(body);
    Py_ssize_t n = PyUnicode_GET_LENGTH(body);
    Py_buffer view; /* last: one long long per depth of sums, and the counter */
    if (PyObject_GetBuffer(args[5], &view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return NULL;
    if (view.itemsize != 8 || view.format == NULL || strcmp(view.format, "q") != 0 ||
        view.len != 8 * (PyList_GET_SIZE(sums) + 1)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "last is an array('q') one longer than sums");
        return NULL;
    }
    long long *last = (long long *)view.buf;
    PyObject *zero = PyLong_FromLong(0), *one = PyLong_FromLong(1);
    if (zero == NULL || one == NULL) {
        Py_XDECREF(zero);
        Py_XDECREF(one);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_INCREF(body); /* a callback cannot free the text under us */
    long closes = 0;
    Py_ssize_t line = 0;
    int failed = 0;
    while (line <= n) {
        const char *nl = memchr(s + line, '\n', (size_t)(n - line));
        Py_ssize_t end = nl ? nl - s : n;
        const char *sep = find_sep(s + line, s + end);
        if (sep != NULL) {
            Py_ssize_t he = sep - s;
            int r = close_line(s, line, he, he + SEP_LEN, end, heads, sums, args[3], args[4],
                               zero, one, last, pending);
            if (r < 0) {
                failed = 1;
                break;
            }
            closes += r;
        }
        line = end + 1;
    }
    Py_DECREF(body);
    Py_DECREF(zero);
    Py_DECREF(one);
    PyBuffer_Release(&view);
    return failed ? NULL : PyLong_FromLong(closes);
}

static PyMethodDef methods[] = {
    {"feed", (PyCFunction)(void (*)(void))feed, METH_FASTCALL,
     "feed(body, heads, sums, head, duration, last, pending) -> close lines counted, or None "
     "(not ASCII)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_closes", "FunctionTable.feed's per-line loop in C.", 0, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__closes(void)
{
    return PyModule_Create(&module_def);
}
