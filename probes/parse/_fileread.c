/* One small file read in one call: the per-trial file reads of probes/parse/trials.py in C.
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
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

static PyMethodDef module_methods[] = {
    {"read_file", read_file, METH_VARARGS,
     "read_file(path, full_max, limit) -> None (absent) | -1 (not a regular file) | size (> full_max) | bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fileread_module = {
    PyModuleDef_HEAD_INIT, "rlhealth.probes.parse._fileread",
    "One small file read in one call (see probes/parse/trials.py).", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fileread(void)
{
    return PyModule_Create(&fileread_module);
}
