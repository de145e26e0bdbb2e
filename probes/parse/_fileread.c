/* A trial's per-file work in C: the file reads of probes/parse/trials.py (read_file) and the fields
 * taken from its parsed result.json (result_fields).
 *
 * read_file(path: bytes, full_max: int, limit: int) -> None | int | bytes, exactly as
 * ``trials._open_file`` followed by ``trials._read_fd(fd, size + 1, limit)``:
 *   - None: the file does not exist (open fails with ENOENT, ENOTDIR or ELOOP);
 *   - -1: it is neither a regular file nor a directory (a FIFO, socket or device: never read);
 *   - its size (an int >= 0): it is larger than ``full_max`` (nothing read: the caller reads
 *     its head and tail);
 *   - else its bytes: one read of min(size + 1, limit) bytes; if that read filled it and stayed
 *     under ``limit``, more reads (at most 1 MiB each) until end of file or ``limit`` bytes;
 *   - OSError (with errno and strerror) when open, fstat or read fails otherwise (a directory
 *     opens and fails to read with EISDIR).
 * Opened O_RDONLY | O_NONBLOCK | O_CLOEXEC (a FIFO never blocks); always closed.
 *
 * result_fields(obj, phases, stop_groups, stop_max_chars, parse) -> (reward, exception, turns,
 * stop_reason, phases, started_at): what the Python body of ``trials._from_result`` assigns to a
 * fresh TrialRead, from the same operations in the same order (see result_fields below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#define MORE_BYTES (1024 * 1024)

/* One read(), retried on EINTR; -1 with errno set on failure. */
static Py_ssize_t
read_once(int fd, char *buf, Py_ssize_t size)
{
    Py_ssize_t n;
    do {
        Py_BEGIN_ALLOW_THREADS
        n = read(fd, buf, (size_t)size);
        Py_END_ALLOW_THREADS
    } while (n < 0 && errno == EINTR && !PyErr_CheckSignals());
    return n;
}

static PyObject *
read_file(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *path;
    Py_ssize_t full_max, limit;
    if (!PyArg_ParseTuple(args, "O!nn:read_file", &PyBytes_Type, &path, &full_max, &limit))
        return NULL;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "limit must not be negative");
        return NULL;
    }
    const char *cpath = PyBytes_AS_STRING(path);
    if ((Py_ssize_t)strlen(cpath) != PyBytes_GET_SIZE(path)) {
        PyErr_SetString(PyExc_ValueError, "open: embedded null character in path");   /* as os.open */
        return NULL;
    }
    int fd;
    do {
        Py_BEGIN_ALLOW_THREADS
        fd = open(cpath, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        Py_END_ALLOW_THREADS
    } while (fd < 0 && errno == EINTR && !PyErr_CheckSignals());
    if (fd < 0) {
        if (PyErr_Occurred())
            return NULL;
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
            Py_RETURN_NONE;
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    }
    PyObject *result = NULL;
    struct stat st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fstat(fd, &st);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        goto done;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        result = PyLong_FromLong(-1);
        goto done;
    }
    Py_ssize_t size = (Py_ssize_t)st.st_size;
    if (size > full_max) {
        result = PyLong_FromSsize_t(size);
        goto done;
    }
    Py_ssize_t want = size < limit ? size + 1 : limit;
    PyObject *data = PyBytes_FromStringAndSize(NULL, want);
    if (data == NULL)
        goto done;
    Py_ssize_t total = read_once(fd, PyBytes_AS_STRING(data), want);
    if (total < 0) {
        Py_DECREF(data);
        if (!PyErr_Occurred())
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        goto done;
    }
    if (total == want && total < limit) {
        /* the file grew past its fstat size: read on to end of file or limit */
        for (;;) {
            Py_ssize_t more = limit - total < MORE_BYTES ? limit - total : MORE_BYTES;
            if (more <= 0)
                break;
            if (_PyBytes_Resize(&data, total + more) < 0)
                goto done;
            Py_ssize_t n = read_once(fd, PyBytes_AS_STRING(data) + total, more);
            if (n < 0) {
                Py_DECREF(data);
                if (!PyErr_Occurred())
                    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
                goto done;
            }
            if (n == 0)
                break;
            total += n;
        }
    }
    if (total != PyBytes_GET_SIZE(data) && _PyBytes_Resize(&data, total) < 0)
        goto done;
    result = data;
done:
    Py_BEGIN_ALLOW_THREADS
    close(fd);
    Py_END_ALLOW_THREADS
    return result;
}

/* ---------------------------------------------------------------- result_fields
 *
 * result_fields(obj, phases, stop_groups, stop_max_chars, parse) returns, for a plain dict ``obj``
 * (a parsed result.json), the tuple (reward, exception, turns, stop_reason, phases, started_at)
 * that the Python body of ``trials._from_result`` assigns to a fresh TrialRead, with
 * ``phases`` = trials.PHASES, ``stop_groups`` = trials._STOP_REASON_GROUPS ((parent keys, leaf
 * keys) pairs), ``stop_max_chars`` = trials.STOP_REASON_MAX_CHARS and ``parse`` the timestamp
 * parser (trials._parse_iso_recent). For any other ``obj`` (a dict subclass, a non-dict) it
 * returns None and the caller runs the Python body.
 *
 * Each Python operation is done by the C-API call Python itself makes, in the same order, so
 * the values, the calls into user code and the exceptions raised are the same:
 *   - ``x.get(k)``: a plain dict is looked up (dict.get's lookup); anything else has its ``get``
 *     method called (a nested dict subclass may override it);
 *   - ``isinstance(x, T)``: on an object of an exact builtin JSON type, its type's subclass
 *     relation (bool is an int); on any other object PyObject_IsInstance (as isinstance);
 *   - ``_finite_float(x)`` = PyNumber_Float (its OverflowError, an int past the float range: None)
 *     then ``math.isfinite``, truth tests (``or``, ``if``) = PyObject_IsTrue, each as often as Python
 *     evaluates them, ``str(x)`` = PyObject_Str, ``s.strip()`` calls the method, ``s[:n]`` =
 *     PyObject_GetItem with slice(None, n), ``b >= a`` = PyObject_RichCompare then its truth,
 *     ``b - a`` = PyNumber_Subtract (two exact floats: the same double comparison and
 *     subtraction done inline), ``parse(s)`` is called through vectorcall.
 * An exception raised on the way propagates (the Python body would have assigned the fields
 * before it to a TrialRead its caller then discards).
 */

static PyObject *KEY_VERIFIER_RESULT, *KEY_RESULT, *KEY_AGENT_RESULT, *KEY_REWARDS, *KEY_REWARD,
    *KEY_EXCEPTION_INFO, *KEY_EXCEPTION_TYPE, *KEY_ERROR_TYPE, *KEY_METADATA, *KEY_N_EPISODES,
    *KEY_STARTED_AT, *KEY_FINISHED_AT, *NAME_GET, *NAME_STRIP;

/* isinstance(value, type): 1, 0, or -1 with an exception set. An object of an exact builtin JSON
 * type has that type as its __class__, so its subclass relation is the answer; any other object
 * goes through PyObject_IsInstance (what isinstance calls; it honours a __class__ override). */
static int
is_a(PyObject *value, PyTypeObject *type)
{
    PyTypeObject *t = Py_TYPE(value);
    if (t == type)
        return 1;
    if (value == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type
            || t == &PyDict_Type || t == &PyList_Type)
        return PyType_IsSubtype(t, type);
    return PyObject_IsInstance(value, (PyObject *)type);
}

/* isinstance(value, (int, float)) */
static int
is_number(PyObject *value)
{
    int is = is_a(value, &PyLong_Type);
    return is != 0 ? is : is_a(value, &PyFloat_Type);
}

/* holder.get(key), a new reference: a plain dict is looked up as dict.get looks up; any other
 * object has its ``get`` method called. */
static PyObject *
member(PyObject *holder, PyObject *key)
{
    if (PyDict_CheckExact(holder)) {
        PyObject *value = PyDict_GetItemWithError(holder, key);
        if (value == NULL && PyErr_Occurred())
            return NULL;
        return Py_NewRef(value != NULL ? value : Py_None);
    }
    return PyObject_CallMethodOneArg(holder, NAME_GET, key);
}

/* ``holder.get(key) if isinstance(holder, dict) else None``, a new reference. */
static PyObject *
member_of_dict(PyObject *holder, PyObject *key)
{
    int is_dict = is_a(holder, &PyDict_Type);
    if (is_dict < 0)
        return NULL;
    return is_dict ? member(holder, key) : Py_NewRef(Py_None);
}

/* ``_finite_float(value)``, a new reference: float(value) if it is finite, else None (an integer
 * past the float range too: float() raises OverflowError there). */
static PyObject *
finite_float(PyObject *value)
{
    PyObject *number = PyNumber_Float(value);
    if (number == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    double x = PyFloat_AsDouble(number);            /* math.isfinite's argument conversion */
    if (x == -1.0 && PyErr_Occurred()) {
        Py_DECREF(number);
        return NULL;
    }
    if (isfinite(x))
        return number;
    Py_DECREF(number);
    Py_RETURN_NONE;
}

/* ``fn(arg)`` */
static PyObject *
call_one(PyObject *fn, PyObject *arg)
{
    PyObject *argv[2] = {NULL, arg};
    return PyObject_Vectorcall(fn, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* ``bool(value.strip())``: 1, 0, or -1 with an exception set. */
static int
strips_to_something(PyObject *value)
{
    PyObject *stripped = PyObject_CallMethodNoArgs(value, NAME_STRIP);
    if (stripped == NULL)
        return -1;
    int truth = PyObject_IsTrue(stripped);
    Py_DECREF(stripped);
    return truth;
}

/* ``trials._stop_reason(obj)``, a new reference (``groups`` checked by valid_stop_groups). */
static PyObject *
stop_reason(PyObject *obj, PyObject *groups)
{
    for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(groups); g++) {
        PyObject *parent = PyTuple_GET_ITEM(PyTuple_GET_ITEM(groups, g), 0);
        PyObject *leaves = PyTuple_GET_ITEM(PyTuple_GET_ITEM(groups, g), 1);
        PyObject *holder = Py_NewRef(obj);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parent); i++) {
            PyObject *next = member_of_dict(holder, PyTuple_GET_ITEM(parent, i));
            Py_DECREF(holder);
            if (next == NULL)
                return NULL;
            holder = next;
            if (holder == Py_None)
                break;
        }
        int is_dict = is_a(holder, &PyDict_Type);
        if (is_dict <= 0) {
            Py_DECREF(holder);
            if (is_dict < 0)
                return NULL;
            continue;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(leaves); i++) {
            PyObject *value = member(holder, PyTuple_GET_ITEM(leaves, i));
            if (value == NULL) {
                Py_DECREF(holder);
                return NULL;
            }
            int found = is_a(value, &PyUnicode_Type);
            if (found > 0)
                found = strips_to_something(value);
            if (found != 0) {
                Py_DECREF(holder);
                if (found < 0) {
                    Py_DECREF(value);
                    return NULL;
                }
                return value;
            }
            Py_DECREF(value);
        }
        Py_DECREF(holder);
    }
    Py_RETURN_NONE;
}

/* ``stop.strip()[:max_chars] if stop else None``, a new reference. */
static PyObject *
clipped_stop_reason(PyObject *stop, PyObject *max_chars)
{
    int truth = stop == Py_None ? 0 : PyObject_IsTrue(stop);
    if (truth <= 0)
        return truth < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *stripped = PyObject_CallMethodNoArgs(stop, NAME_STRIP);
    if (stripped == NULL)
        return NULL;
    PyObject *head = PySlice_New(Py_None, max_chars, NULL);
    PyObject *clipped = head == NULL ? NULL : PyObject_GetItem(stripped, head);
    Py_XDECREF(head);
    Py_DECREF(stripped);
    return clipped;
}

/* ``str(exc) if exc else None`` for ``exc = first or second() or None``, a new reference;
 * ``second`` (result.get("error_type") if result is a dict) is looked up only if needed. */
static PyObject *
exception_name(PyObject *first, PyObject *result, int result_is_dict)
{
    PyObject *exc;
    int truth = PyObject_IsTrue(first);
    if (truth < 0)
        return NULL;
    if (truth) {
        exc = Py_NewRef(first);
    } else {
        exc = result_is_dict ? member(result, KEY_ERROR_TYPE) : Py_NewRef(Py_None);
        if (exc == NULL)
            return NULL;
        truth = PyObject_IsTrue(exc);
        if (truth <= 0) {
            Py_DECREF(exc);
            return truth < 0 ? NULL : Py_NewRef(Py_None);
        }
    }
    truth = PyObject_IsTrue(exc);                   /* ``if exc``: a second truth test */
    PyObject *name = truth > 0 ? PyObject_Str(exc) : truth == 0 ? Py_NewRef(Py_None) : NULL;
    Py_DECREF(exc);
    return name;
}

/* 1 if the ISO-8601 string ``s`` names its offset (``Z`` or ``+``/``-`` after the time of day), 0
 * if it is naive, -1 if it has no UTF-8 form (lone surrogates: no time either way). */
static int
aware(PyObject *s)
{
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(s, &n);
    if (text == NULL) {
        PyErr_Clear();
        return -1;
    }
    for (Py_ssize_t i = 11; i < n; i++)
        if (text[i] == 'Z' || text[i] == 'z' || text[i] == '+' || text[i] == '-')
            return 1;
    return 0;
}

/* ``b - a if a is not None and b is not None and b >= a else NULL`` (NULL with no exception: no
 * duration) for a = parse(started), b = parse(finished); a naive time paired with an aware one
 * has no duration (never read as UTC). */
static PyObject *
duration(PyObject *parse, PyObject *started, PyObject *finished)
{
    int sa = aware(started), fa = sa < 0 ? -1 : aware(finished);
    if (sa < 0 || fa < 0 || sa != fa)
        return NULL;
    PyObject *a = call_one(parse, started);
    if (a == NULL)
        return NULL;
    PyObject *b = call_one(parse, finished);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *result = NULL;
    if (a != Py_None && b != Py_None) {
        if (PyFloat_CheckExact(a) && PyFloat_CheckExact(b)) {
            double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
            if (y >= x)
                result = PyFloat_FromDouble(y - x);
        } else {
            PyObject *later = PyObject_RichCompare(b, a, Py_GE);
            int truth = later == NULL ? -1 : PyObject_IsTrue(later);
            Py_XDECREF(later);
            if (truth > 0)
                result = PyNumber_Subtract(b, a);
        }
    }
    Py_DECREF(a);
    Py_DECREF(b);
    return result;
}

/* ``{phase: duration}`` of ``read.phases``, a new reference. */
static PyObject *
phase_durations(PyObject *obj, PyObject *phases, PyObject *parse)
{
    PyObject *durations = PyDict_New();
    if (durations == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(phases); i++) {
        PyObject *phase = PyTuple_GET_ITEM(phases, i);
        PyObject *block = member(obj, phase);
        if (block == NULL)
            goto fail;
        int ok = is_a(block, &PyDict_Type);
        if (ok <= 0) {
            Py_DECREF(block);
            if (ok < 0)
                goto fail;
            continue;
        }
        PyObject *started = member(block, KEY_STARTED_AT);
        PyObject *finished = started == NULL ? NULL : member(block, KEY_FINISHED_AT);
        Py_DECREF(block);
        if (finished == NULL) {
            Py_XDECREF(started);
            goto fail;
        }
        ok = is_a(started, &PyUnicode_Type);
        if (ok > 0)
            ok = is_a(finished, &PyUnicode_Type);
        PyObject *value = ok > 0 ? duration(parse, started, finished) : NULL;
        Py_DECREF(started);
        Py_DECREF(finished);
        if (value == NULL) {
            if (ok < 0 || PyErr_Occurred())
                goto fail;
            continue;
        }
        ok = PyDict_SetItem(durations, phase, value);
        Py_DECREF(value);
        if (ok < 0)
            goto fail;
    }
    return durations;
fail:
    Py_DECREF(durations);
    return NULL;
}

/* stop_groups is a tuple of (tuple, tuple) pairs */
static int
valid_stop_groups(PyObject *groups)
{
    if (!PyTuple_Check(groups))
        return 0;
    for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(groups); g++) {
        PyObject *group = PyTuple_GET_ITEM(groups, g);
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(group, 0))
                || !PyTuple_Check(PyTuple_GET_ITEM(group, 1)))
            return 0;
    }
    return 1;
}

static PyObject *
result_fields(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "result_fields expected 5 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *obj = args[0], *phases = args[1], *groups = args[2], *max_chars = args[3], *parse = args[4];
    if (!PyTuple_Check(phases) || !valid_stop_groups(groups)) {
        PyErr_SetString(PyExc_TypeError, "result_fields: phases must be a tuple, stop_groups a tuple of (tuple, tuple)");
        return NULL;
    }
    if (!PyDict_CheckExact(obj))
        Py_RETURN_NONE;
    PyObject *verifier = NULL, *result = NULL, *agent = NULL, *rewards = NULL, *reward = NULL, *info = NULL,
        *exc_type = NULL, *metadata = NULL, *turns = NULL, *stop = NULL, *started = NULL;
    PyObject *fields[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int is;
    /* reward */
    if ((verifier = member(obj, KEY_VERIFIER_RESULT)) == NULL || (result = member(obj, KEY_RESULT)) == NULL
            || (agent = member(obj, KEY_AGENT_RESULT)) == NULL)
        goto done;
    int result_is_dict = is_a(result, &PyDict_Type);
    if (result_is_dict < 0 || (rewards = member_of_dict(verifier, KEY_REWARDS)) == NULL
            || (reward = member_of_dict(rewards, KEY_REWARD)) == NULL)
        goto done;
    if (reward == Py_None) {
        Py_DECREF(reward);
        if ((reward = member(result_is_dict ? result : obj, KEY_REWARD)) == NULL)
            goto done;
    }
    if ((is = is_number(reward)) > 0 && (is = is_a(reward, &PyBool_Type)) == 0)
        fields[0] = finite_float(reward);
    else
        fields[0] = is < 0 ? NULL : Py_NewRef(Py_None);
    if (fields[0] == NULL)
        goto done;
    /* exception */
    if ((info = member(obj, KEY_EXCEPTION_INFO)) == NULL || (exc_type = member_of_dict(info, KEY_EXCEPTION_TYPE)) == NULL
            || (fields[1] = exception_name(exc_type, result, result_is_dict)) == NULL)
        goto done;
    /* turns */
    if ((metadata = member_of_dict(agent, KEY_METADATA)) == NULL || (turns = member_of_dict(metadata, KEY_N_EPISODES)) == NULL
            || (is = is_number(turns)) < 0)
        goto done;
    if ((fields[2] = is ? finite_float(turns) : Py_NewRef(Py_None)) == NULL)
        goto done;
    /* stop reason, phases, start */
    if ((stop = stop_reason(obj, groups)) == NULL || (fields[3] = clipped_stop_reason(stop, max_chars)) == NULL
            || (fields[4] = phase_durations(obj, phases, parse)) == NULL || (started = member(obj, KEY_STARTED_AT)) == NULL
            || (is = is_a(started, &PyUnicode_Type)) < 0)
        goto done;
    if ((fields[5] = is ? call_one(parse, started) : Py_NewRef(Py_None)) == NULL)
        goto done;
    PyObject *out = PyTuple_New(6);
    if (out != NULL) {
        for (int i = 0; i < 6; i++) {
            PyTuple_SET_ITEM(out, i, fields[i]);
            fields[i] = NULL;
        }
    }
    Py_DECREF(verifier);
    Py_DECREF(result);
    Py_DECREF(agent);
    Py_DECREF(rewards);
    Py_DECREF(reward);
    Py_DECREF(info);
    Py_DECREF(exc_type);
    Py_DECREF(metadata);
    Py_DECREF(turns);
    Py_DECREF(stop);
    Py_DECREF(started);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(fields[i]);
    return out;
done:
    Py_XDECREF(verifier);
    Py_XDECREF(result);
    Py_XDECREF(agent);
    Py_XDECREF(rewards);
    Py_XDECREF(reward);
    Py_XDECREF(info);
    Py_XDECREF(exc_type);
    Py_XDECREF(metadata);
    Py_XDECREF(turns);
    Py_XDECREF(stop);
    Py_XDECREF(started);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(fields[i]);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"read_file", read_file, METH_VARARGS,
     "read_file(path, full_max, limit) -> None (absent) | -1 (not a regular file) | size (> full_max) | bytes"},
    {"result_fields", (PyCFunction)(void (*)(void))result_fields, METH_FASTCALL,
     "result_fields(obj, phases, stop_groups, stop_max_chars, parse) -> (reward, exception, turns, stop_reason, "
     "phases, started_at), or None if obj is not a plain dict"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fileread_module = {
    PyModuleDef_HEAD_INIT, "rlhealth.probes.parse._fileread",
    "A trial's file reads and result.json fields in C (see probes/parse/trials.py).", -1, module_methods, NULL, NULL, NULL, NULL,
};

static int
intern_names(void)
{
    struct { PyObject **slot; const char *text; } names[] = {
        {&KEY_VERIFIER_RESULT, "verifier_result"}, {&KEY_RESULT, "result"}, {&KEY_AGENT_RESULT, "agent_result"},
        {&KEY_REWARDS, "rewards"}, {&KEY_REWARD, "reward"}, {&KEY_EXCEPTION_INFO, "exception_info"},
        {&KEY_EXCEPTION_TYPE, "exception_type"}, {&KEY_ERROR_TYPE, "error_type"}, {&KEY_METADATA, "metadata"},
        {&KEY_N_EPISODES, "n_episodes"}, {&KEY_STARTED_AT, "started_at"}, {&KEY_FINISHED_AT, "finished_at"},
        {&NAME_GET, "get"}, {&NAME_STRIP, "strip"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC
PyInit__fileread(void)
{
    if (intern_names() < 0)
        return NULL;
    return PyModule_Create(&fileread_module);
}
