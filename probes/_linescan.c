/* Matching lines of a scanned block: the per-match work of probes/scan.py in C.
 *
 * ``Collector()`` is the hyperscan match handler: called as handler(id, from, to, flags, context)
 * it records (to, id) in a C array. ``collector.lines(block, end, key_cache, keys_of)`` then
 * returns ``(newlines, hits)`` for ``block[:end]`` and empties the collector, exactly as
 * ``Scanner._scan_block_python`` computes them:
 *   - matches in (to, id) order; the line of a match is the one holding its last byte (to - 1);
 *   - a match whose to - 1 is at most the current line's end belongs to that line;
 *   - hits: one ``(line_start, line_end, newlines_before_line_start, keys)`` per matching line,
 *     ``line_end`` at the line's newline (or ``end``); ``keys`` is ``key_cache[id]`` for a line
 *     matched by one pattern (``(keys_of[id],)``, stored in ``key_cache`` when missing) and the
 *     sorted tuple of the distinct ``keys_of[id]`` of its patterns otherwise;
 *   - newlines: the number of b"\n" in ``block[:end]``.
 * A collector is used by one scan at a time (the caller makes one per scan).
 *
 * ``stats_line(raw)`` reads one vLLM stats line (probes/parse/vllm.py ``STATS_RE``) for the log
 * routing: False when ``raw`` holds a byte other than printable ASCII or tab (the caller takes the
 * Python path), None when ``STATS_RE`` does not match, else ``(text, engine, swapped, newer,
 * close)``: the line as text (what ``clean_line`` gives for such bytes), the leftmost match's
 * ``engine`` group (str or None), whether its ``swapped`` group matched, whether the line holds
 * "MM cache hit rate" or "External prefix", and the index of its first ")" (-1 if none).
 */
#define PY_SSIZE_T_CLEAN
/* Standard C and Python only (no memrchr, memmem or other libc extensions; SSE2 only behind
 * __SSE2__, with a plain path for other CPUs such as arm64): builds on glibc, musl and macOS. */
#include <Python.h>
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct {
    unsigned long long to;
    unsigned int id;
} Match;

typedef struct {
    PyObject_HEAD
    Match *items;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Collector;

/* See StatsSink_new. */
typedef struct {
    PyObject_HEAD
    PyObject *source, *queues, *eras, *cache, *resolve, *new_queue;
    unsigned int stats_id;
    Py_ssize_t head_max, cache_max, max_line, count, lines_before;
} StatsSink;

static PyTypeObject StatsSinkType;
static int sink_accepts(StatsSink *sink, const unsigned char *p, Py_ssize_t n);
static int sink_record(StatsSink *sink, const unsigned char *p, Py_ssize_t n, Py_ssize_t lineno);

#if defined(__SSE2__)
/* 16 bytes a step: compare, subtract the all-ones lanes into byte counters (at most 255 steps
 * before they could wrap), then sum the counters with psadbw. */
static Py_ssize_t
count_newlines_sse2(const unsigned char *p, Py_ssize_t n)
{
    const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    Py_ssize_t count = 0, i = 0;
    while (n - i >= 16) {
        __m128i acc = zero;
        for (int step = 0; step < 255 && n - i >= 16; step++, i += 16)
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), nl));
        __m128i sums = _mm_sad_epu8(acc, zero);
        count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
    }
    for (; i < n; i++)
        count += p[i] == '\n';
    return count;
}
#endif

static Py_ssize_t
count_newlines(const unsigned char *p, Py_ssize_t n)
{
#if defined(__SSE2__)
    return count_newlines_sse2(p, n);
#else
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += p[i] == '\n';
    return count;
#endif
}

/* Last newline in p[0:stop) or -1 (bytes.rfind semantics). */
static Py_ssize_t
rfind_newline(const unsigned char *p, Py_ssize_t stop)
{
#if defined(__SSE2__)
    /* 16 bytes a step from the end: the highest set bit of the compare mask is the last newline */
    const __m128i nl = _mm_set1_epi8('\n');
    while (stop >= 16) {
        int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + stop - 16)), nl));
        if (mask != 0) {
            int bit = 15;
            while (!(mask & (1 << bit)))
                bit--;
            return stop - 16 + bit;
        }
        stop -= 16;
    }
#endif
    while (stop-- > 0)
        if (p[stop] == '\n')
            return stop;
    return -1;
}

/* First occurrence of lit[0:len) (len >= 1) in p[0:n), or NULL. */
static const unsigned char *
find_literal(const unsigned char *p, Py_ssize_t n, const char *lit, Py_ssize_t len)
{
    const unsigned char *end = p + n;
    while (end - p >= len) {
        const unsigned char *q = memchr(p, (unsigned char)lit[0], (size_t)(end - p - len + 1));
        if (q == NULL)
            return NULL;
        if (memcmp(q + 1, lit + 1, (size_t)(len - 1)) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
}

/* First newline in p[start:stop) or -1. */
static Py_ssize_t
find_newline(const unsigned char *p, Py_ssize_t start, Py_ssize_t stop)
{
    if (start >= stop)
        return -1;
    const unsigned char *q = memchr(p + start, '\n', (size_t)(stop - start));
    return q == NULL ? -1 : (Py_ssize_t)(q - p);
}

static int
match_order(const void *a, const void *b)
{
    const Match *x = a, *y = b;
    if (x->to != y->to)
        return x->to < y->to ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static PyObject *
Collector_call(Collector *self, PyObject *args, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Collector takes positional arguments only");
        return NULL;
    }
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 3) {
        PyErr_SetString(PyExc_TypeError, "Collector(id, from, to, ...) needs at least 3 arguments");
        return NULL;
    }
    unsigned long id = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(args, 0));
    if (id == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    unsigned long long to = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(args, 2));
    if (to == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (id > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "pattern id out of range");
        return NULL;
    }
    if (self->size == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 1024;
        Match *items = PyMem_Realloc(self->items, (size_t)capacity * sizeof(Match));
        if (items == NULL)
            return PyErr_NoMemory();
        self->items = items;
        self->capacity = capacity;
    }
    self->items[self->size].to = to;
    self->items[self->size].id = (unsigned int)id;
    self->size++;
    Py_RETURN_NONE;
}

/* keys for one pattern id: key_cache[id], filled with (keys_of[id],) when missing. New reference. */
static PyObject *
single_keys(PyObject *key_cache, PyObject *keys_of, unsigned int id)
{
    PyObject *pid = PyLong_FromUnsignedLong(id);
    if (pid == NULL)
        return NULL;
    PyObject *keys = PyDict_GetItemWithError(key_cache, pid);
    if (keys != NULL) {
        Py_DECREF(pid);
        Py_INCREF(keys);
        return keys;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(pid);
        return NULL;
    }
    PyObject *key = PySequence_GetItem(keys_of, (Py_ssize_t)id);
    if (key == NULL) {
        Py_DECREF(pid);
        return NULL;
    }
    keys = PyTuple_Pack(1, key);
    Py_DECREF(key);
    if (keys == NULL || PyDict_SetItem(key_cache, pid, keys) < 0) {
        Py_DECREF(pid);
        Py_XDECREF(keys);
        return NULL;
    }
    Py_DECREF(pid);
    return keys;
}

/* Sorted tuple of the distinct keys_of[id] for items[first:last). New reference. */
static PyObject *
several_keys(PyObject *keys_of, const Match *items, Py_ssize_t first, Py_ssize_t last)
{
    PyObject *distinct = PySet_New(NULL);
    if (distinct == NULL)
        return NULL;
    for (Py_ssize_t j = first; j < last; j++) {
        PyObject *key = PySequence_GetItem(keys_of, (Py_ssize_t)items[j].id);
        if (key == NULL || PySet_Add(distinct, key) < 0) {
            Py_XDECREF(key);
            Py_DECREF(distinct);
            return NULL;
        }
        Py_DECREF(key);
    }
    PyObject *sorted = PySequence_List(distinct);
    Py_DECREF(distinct);
    if (sorted == NULL)
        return NULL;
    if (PyList_Sort(sorted) < 0) {
        Py_DECREF(sorted);
        return NULL;
    }
    PyObject *keys = PyList_AsTuple(sorted);
    Py_DECREF(sorted);
    return keys;
}

typedef struct {
    Py_ssize_t start, end, k;   /* line bounds, newlines before its start in the block */
    Py_ssize_t first, last;     /* its matches: items[first:last) */
} Line;

static PyObject *
Collector_lines(Collector *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t end;
    PyObject *key_cache, *keys_of, *sink_arg = Py_None;
    if (!PyArg_ParseTuple(args, "y*nO!O|O:lines", &view, &end, &PyDict_Type, &key_cache, &keys_of, &sink_arg))
        return NULL;
    PyObject *hits = NULL, *result = NULL;
    Line *lines = NULL;
    Py_ssize_t n = self->size;
    self->size = 0;
    StatsSink *sink = NULL;
    if (sink_arg != Py_None) {
        if (!PyObject_TypeCheck(sink_arg, &StatsSinkType)) {
            PyErr_SetString(PyExc_TypeError, "sink must be a StatsSink or None");
            goto done;
        }
        sink = (StatsSink *)sink_arg;
    }
    if (end < 0 || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "end outside the block");
        goto done;
    }
    const unsigned char *p = view.buf;
    Match *items = self->items;
    if (n > 1)
        qsort(items, (size_t)n, sizeof(Match), match_order);
    lines = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Line));
    if (lines == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: the matching lines */
    Py_ssize_t pos = 0, k = 0, i = 0, count = 0;
    while (i < n) {
        unsigned long long to = items[i].to;
        if (to > (unsigned long long)end) {
            PyErr_SetString(PyExc_ValueError, "match past the end of the block");
            goto done;
        }
        Py_ssize_t start = rfind_newline(p, to > 0 ? (Py_ssize_t)to - 1 : 0) + 1;
        if (start > pos) {
            k += count_newlines(p + pos, start - pos);
            pos = start;
        }
        Py_ssize_t line_end = find_newline(p, start, end);
        if (line_end < 0)
            line_end = end;
        Py_ssize_t first = i++;
        while (i < n && (Py_ssize_t)items[i].to - 1 <= line_end)
            i++;
        lines[count++] = (Line){start, line_end, k, first, i};
    }
    Py_ssize_t total = k + count_newlines(p + pos, end - pos);
    /* The sink takes the lines matched by the stats pattern alone, in order, when it can take
     * every line of the block that involves that pattern (else the caller routes them all, so the
     * per-engine queues keep the order of the lines). */
    int use_sink = sink != NULL;
    for (Py_ssize_t j = 0; use_sink && j < count; j++) {
        int stats = 0, other = 0;
        for (Py_ssize_t m = lines[j].first; m < lines[j].last; m++) {
            if (items[m].id == sink->stats_id)
                stats = 1;
            else
                other = 1;
        }
        if (stats && (other || !sink_accepts(sink, p + lines[j].start, lines[j].end - lines[j].start)))
            use_sink = 0;
    }
    /* pass 2: hits for the caller, stats lines to the sink */
    hits = PyList_New(0);
    if (hits == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < count; j++) {
        Line *line = &lines[j];
        if (use_sink && items[line->first].id == sink->stats_id) {     /* the stats pattern alone */
            if (sink_record(sink, p + line->start, line->end - line->start, sink->lines_before + line->k + 1) < 0)
                goto done;
            continue;
        }
        PyObject *keys = line->last - line->first == 1 ? single_keys(key_cache, keys_of, items[line->first].id)
                                                       : several_keys(keys_of, items, line->first, line->last);
        if (keys == NULL)
            goto done;
        /* several matches of one pattern on a line: the same keys as one match */
        PyObject *hit = Py_BuildValue("(nnnN)", line->start, line->end, line->k, keys);
        if (hit == NULL || PyList_Append(hits, hit) < 0) {
            Py_XDECREF(hit);
            goto done;
        }
        Py_DECREF(hit);
    }
    if (sink != NULL)
        sink->lines_before += total;
    result = Py_BuildValue("(nO)", total, hits);
done:
    PyMem_Free(lines);
    Py_XDECREF(hits);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
count_newlines_py(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start = 0, stop = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, "y*|nn:count_newlines", &view, &start, &stop))
        return NULL;
    if (stop > view.len)
        stop = view.len;
    if (start < 0)
        start = 0;
    Py_ssize_t count = start < stop ? count_newlines((const unsigned char *)view.buf + start, stop - start) : 0;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

/* ----------------------------------------------------------------- stats lines */

static int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Bytes of p[i:n] in set [0-9.] (accept_dot) or [0-9], from i; returns the end of the run. */
static Py_ssize_t
run_of(const unsigned char *p, Py_ssize_t i, Py_ssize_t n, int accept_dot)
{
    while (i < n && (is_digit(p[i]) || (accept_dot && p[i] == '.')))
        i++;
    return i;
}

/* p[i:] starts with the literal lit (length len)? */
static int
has_at(const unsigned char *p, Py_ssize_t i, Py_ssize_t n, const char *lit, Py_ssize_t len)
{
    return n - i >= len && memcmp(p + i, lit, (size_t)len) == 0;
}

#define LIT(s) s, (Py_ssize_t)(sizeof(s) - 1)

/* The end of "<number> <literal>" at i, or -1: with accept_dot a decimal number (vllm.py _NUMBER:
 * digits with at most one ".", at least one digit), else [0-9]{1,max_digits} (max_digits 0: any
 * count). The literal starts with a byte outside [0-9.], so a match takes the whole run of
 * [0-9.] bytes (no other split can match). */
static Py_ssize_t
number_then(const unsigned char *p, Py_ssize_t i, Py_ssize_t n, int accept_dot, Py_ssize_t max_digits,
            const char *lit, Py_ssize_t len)
{
    Py_ssize_t j = run_of(p, i, n, accept_dot);
    if (j == i || (max_digits > 0 && j - i > max_digits) || !has_at(p, j, n, lit, len))
        return -1;
    if (accept_dot) {
        Py_ssize_t dots = 0;
        for (Py_ssize_t k = i; k < j; k++)
            dots += p[k] == '.';
        if (dots > 1 || dots == j - i)
            return -1;
    }
    return j + len;
}

#define COUNT_DIGITS 18     /* vllm.py _COUNT: a request count longer than this is no count */

/* Spans (start, end) of the groups of a STATS_RE match; an unmatched group has start -1. */
typedef struct {
    Py_ssize_t engine[2], prompt[2], gen[2], running[2], swapped[2], waiting[2], kv[2];
} StatsMatch;

static void
span(Py_ssize_t *group, Py_ssize_t start, Py_ssize_t end)
{
    group[0] = start;
    group[1] = end;
}

/* The required part of STATS_RE after "Engine N: " (A), matched at i: its end, or -1. */
static Py_ssize_t
match_required(const unsigned char *p, Py_ssize_t i, Py_ssize_t n, StatsMatch *m)
{
    if (!has_at(p, i, n, LIT("Avg prompt throughput: ")))
        return -1;
    Py_ssize_t start = i + 23;
    i = number_then(p, start, n, 1, 0, LIT(" tokens/s, Avg generation throughput: "));
    if (i < 0)
        return -1;
    span(m->prompt, start, i - 38);
    start = i;
    i = number_then(p, start, n, 1, 0, LIT(" tokens/s, Running: "));
    if (i < 0)
        return -1;
    span(m->gen, start, i - 20);
    start = i;
    i = number_then(p, start, n, 0, COUNT_DIGITS, LIT(" reqs"));
    if (i < 0)
        return -1;
    span(m->running, start, i - 5);
    return i;
}

/* The leftmost STATS_RE match in p[:n]: 1 with its groups in *m, else 0. It starts at the first
 * "Avg prompt throughput: " where the required part matches, or at the "Engine N: " just before
 * it (no "Engine N: " can hold an "Avg", so no earlier start exists). The optional groups then
 * match where they can, in order (each may be empty, so none backtracks into another). */
static int
find_stats(const unsigned char *p, Py_ssize_t n, StatsMatch *m)
{
    Py_ssize_t at = -1, i = -1;
    const unsigned char *q = p;
    while ((q = find_literal(q, n - (q - p), "Avg prompt throughput: ", 23)) != NULL) {
        i = match_required(p, q - p, n, m);
        if (i >= 0) {
            at = q - p;
            break;
        }
        q++;
    }
    if (at < 0)
        return 0;
    span(m->engine, -1, -1);
    if (at >= 2 && p[at - 2] == ':' && p[at - 1] == ' ') {
        Py_ssize_t d = at - 2;
        while (d > 0 && is_digit(p[d - 1]))
            d--;
        if (d < at - 2 && d >= 7 && memcmp(p + d - 7, "Engine ", 7) == 0)
            span(m->engine, d, at - 2);
    }
    Py_ssize_t end;
    span(m->swapped, -1, -1);
    if (has_at(p, i, n, LIT(", Swapped: ")) && (end = number_then(p, i + 11, n, 0, 0, LIT(" reqs"))) >= 0) {
        span(m->swapped, i + 11, end - 5);
        i = end;
    }
    span(m->waiting, -1, -1);
    if (has_at(p, i, n, LIT(", Pending: ")) || has_at(p, i, n, LIT(", Waiting: "))) {
        if ((end = number_then(p, i + 11, n, 0, COUNT_DIGITS, LIT(" reqs"))) >= 0) {
            span(m->waiting, i + 11, end - 5);
            i = end;
        }
    }
    span(m->kv, -1, -1);
    if (has_at(p, i, n, LIT(", GPU KV cache usage: ")) &&
            (end = number_then(p, i + 22, n, 1, 0, LIT("%"))) >= 0)
        span(m->kv, i + 22, end - 1);
    return 1;
}

static int
contains(const unsigned char *p, Py_ssize_t n, const char *lit, Py_ssize_t len)
{
    return find_literal(p, n, lit, len) != NULL;
}

static PyObject *
stats_line(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 || p[i] > 0x7e) && p[i] != '\t') {
            result = Py_NewRef(Py_False);
            goto done;
        }
    }
    StatsMatch m;
    if (!find_stats(p, n, &m)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *engine = m.engine[0] < 0 ? Py_NewRef(Py_None)
        : PyUnicode_DecodeASCII((const char *)p + m.engine[0], m.engine[1] - m.engine[0], NULL);
    if (engine == NULL)
        goto done;
    int newer = contains(p, n, LIT("MM cache hit rate")) || contains(p, n, LIT("External prefix"));
    const unsigned char *close = memchr(p, ')', (size_t)n);
    PyObject *text = PyUnicode_DecodeASCII((const char *)p, n, NULL);
    if (text == NULL) {
        Py_DECREF(engine);
        goto done;
    }
    result = Py_BuildValue("(NNNNn)", text, engine, PyBool_FromLong(m.swapped[0] >= 0), PyBool_FromLong(newer),
                           close == NULL ? (Py_ssize_t)-1 : (Py_ssize_t)(close - p));
done:
    PyBuffer_Release(&view);
    return result;
}

/* float(p[start:end]) of a DECIMAL (as Python's float(): PyOS_string_to_double). New reference. */
static PyObject *
decimal_value(const unsigned char *p, const Py_ssize_t *group)
{
    char buf[64];
    Py_ssize_t len = group[1] - group[0];
    char *text = len < (Py_ssize_t)sizeof(buf) ? buf : PyMem_Malloc((size_t)len + 1);
    if (text == NULL)
        return PyErr_NoMemory();
    memcpy(text, p + group[0], (size_t)len);
    text[len] = '\0';
    double value = PyOS_string_to_double(text, NULL, NULL);
    if (text != buf)
        PyMem_Free(text);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(value);
}

/* int(p[start:end]) of at most COUNT_DIGITS digits. New reference. */
static PyObject *
count_value(const unsigned char *p, const Py_ssize_t *group)
{
    long long value = 0;
    for (Py_ssize_t k = group[0]; k < group[1]; k++)
        value = value * 10 + (p[k] - '0');
    return PyLong_FromLongLong(value);
}

static PyObject *
stats_fields(PyObject *Py_UNUSED(module), PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "stats_fields() takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg))
        Py_RETURN_NOTIMPLEMENTED;
    const unsigned char *p = PyUnicode_DATA(arg);
    StatsMatch m;
    if (!find_stats(p, PyUnicode_GET_LENGTH(arg), &m))
        Py_RETURN_NONE;
    PyObject *prompt = decimal_value(p, m.prompt);
    PyObject *gen = prompt ? decimal_value(p, m.gen) : NULL;
    PyObject *running = gen ? count_value(p, m.running) : NULL;
    PyObject *waiting = running ? (m.waiting[0] < 0 ? PyLong_FromLong(0) : count_value(p, m.waiting)) : NULL;
    PyObject *kv = waiting ? (m.kv[0] < 0 ? Py_NewRef(Py_None) : decimal_value(p, m.kv)) : NULL;
    if (kv == NULL) {
        Py_XDECREF(prompt);
        Py_XDECREF(gen);
        Py_XDECREF(running);
        Py_XDECREF(waiting);
        return NULL;
    }
    return Py_BuildValue("(NNNNN)", prompt, gen, running, waiting, kv);
}

/* ----------------------------------------------------------------- the stats sink
 *
 * ``StatsSink(stats_id, source, queues, eras, cache, resolve, new_queue, head_max, cache_max,
 * max_line)``, given to ``Collector.lines``, routes the lines matched by pattern ``stats_id``
 * alone as probes/bundle.py ``_Router._stats_raw`` does, without a Python call per line:
 *   - a line without a ``STATS_RE`` match is dropped;
 *   - its memo key is what ``_stats_raw`` keys on (the text up to its first ")", the ``engine``
 *     group, whether ``swapped`` did not match, and then whether the line holds the newer era's
 *     fields), as bytes; ``cache`` maps it to ``(engine, era)``, from ``resolve(text)`` on a miss
 *     (cleared when it holds ``cache_max`` keys);
 *   - ``(text, source, line number, engine, era)`` is appended to ``queues[engine]`` (made by
 *     ``new_queue(engine)`` when missing), ``era`` added to ``eras``, ``count`` incremented.
 * ``lines`` hands the sink a block's stats lines only when the sink takes each of them (printable
 * ASCII or tab, at most ``max_line`` bytes, a match's first ")" within ``head_max``) and none is
 * matched by another pattern too; otherwise they are hits, as without a sink (the caller routes
 * them in order). ``lines_before`` counts the lines of the blocks given so far. */

static int
sink_accepts(StatsSink *sink, const unsigned char *p, Py_ssize_t n)
{
    if (n > sink->max_line)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 || p[i] > 0x7e) && p[i] != '\t')
            return 0;
    }
    const unsigned char *close = memchr(p, ')', (size_t)n);
    if (close != NULL && close - p > sink->head_max) {
        StatsMatch m;
        if (find_stats(p, n, &m))
            return 0;
    }
    return 1;
}

static int
sink_record(StatsSink *sink, const unsigned char *p, Py_ssize_t n, Py_ssize_t lineno)
{
    StatsMatch m;
    if (!find_stats(p, n, &m))
        return 0;
    const unsigned char *close = memchr(p, ')', (size_t)n);
    Py_ssize_t head = close == NULL ? 0 : (Py_ssize_t)(close - p) + 1;
    int unswapped = m.swapped[0] < 0;
    int has_engine = m.engine[0] >= 0;
    int newer = unswapped && has_engine &&
                (contains(p, n, LIT("MM cache hit rate")) || contains(p, n, LIT("External prefix")));
    Py_ssize_t engine_len = has_engine ? m.engine[1] - m.engine[0] : 1;
    PyObject *key = PyBytes_FromStringAndSize(NULL, head + 1 + engine_len + 3);
    if (key == NULL)
        return -1;
    char *kb = PyBytes_AS_STRING(key);
    memcpy(kb, p, (size_t)head);
    kb[head] = '\0';                      /* printable lines hold no NUL: the fields stay apart */
    if (has_engine)
        memcpy(kb + head + 1, p + m.engine[0], (size_t)engine_len);
    else
        kb[head + 1] = '-';
    kb[head + 1 + engine_len] = '\0';
    kb[head + 2 + engine_len] = unswapped ? '1' : '0';
    kb[head + 3 + engine_len] = newer ? '1' : '0';
    PyObject *text = PyUnicode_DecodeASCII((const char *)p, n, NULL);
    PyObject *found = NULL, *queue = NULL, *number = NULL, *item = NULL, *done = NULL;
    int status = -1;
    if (text == NULL)
        goto out;
    found = PyDict_GetItemWithError(sink->cache, key);
    if (found != NULL) {
        Py_INCREF(found);
    } else {
        if (PyErr_Occurred())
            goto out;
        if (PyDict_GET_SIZE(sink->cache) >= sink->cache_max)
            PyDict_Clear(sink->cache);
        found = PyObject_CallOneArg(sink->resolve, text);
        if (found == NULL)
            goto out;
        if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2) {
            PyErr_SetString(PyExc_TypeError, "resolve(text) must return (engine, era)");
            goto out;
        }
        if (PyDict_SetItem(sink->cache, key, found) < 0)
            goto out;
    }
    PyObject *engine = PyTuple_GET_ITEM(found, 0), *era = PyTuple_GET_ITEM(found, 1);
    if (PySet_Add(sink->eras, era) < 0)
        goto out;
    queue = PyDict_GetItemWithError(sink->queues, engine);
    if (queue != NULL) {
        Py_INCREF(queue);
    } else {
        if (PyErr_Occurred())
            goto out;
        queue = PyObject_CallOneArg(sink->new_queue, engine);
        if (queue == NULL)
            goto out;
    }
    number = PyLong_FromSsize_t(lineno);
    if (number == NULL)
        goto out;
    item = PyTuple_Pack(5, text, sink->source, number, engine, era);
    if (item == NULL)
        goto out;
    static PyObject *append_name = NULL;
    if (append_name == NULL && (append_name = PyUnicode_InternFromString("append")) == NULL)
        goto out;
    done = PyObject_CallMethodOneArg(queue, append_name, item);
    if (done == NULL)
        goto out;
    sink->count++;
    status = 0;
out:
    Py_DECREF(key);
    Py_XDECREF(text);
    Py_XDECREF(found);
    Py_XDECREF(queue);
    Py_XDECREF(number);
    Py_XDECREF(item);
    Py_XDECREF(done);
    return status;
}

static PyObject *
StatsSink_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"stats_id", "source", "queues", "eras", "cache", "resolve", "new_queue", "head_max",
                            "cache_max", "max_line", NULL};
    unsigned int stats_id;
    PyObject *source, *queues, *eras, *cache, *resolve, *new_queue;
    Py_ssize_t head_max, cache_max, max_line;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "IUO!O!O!OOnnn:StatsSink", names, &stats_id, &source,
                                     &PyDict_Type, &queues, &PySet_Type, &eras, &PyDict_Type, &cache, &resolve,
                                     &new_queue, &head_max, &cache_max, &max_line))
        return NULL;
    if (!PyCallable_Check(resolve) || !PyCallable_Check(new_queue)) {
        PyErr_SetString(PyExc_TypeError, "resolve and new_queue must be callable");
        return NULL;
    }
    StatsSink *self = (StatsSink *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->stats_id = stats_id;
    self->source = Py_NewRef(source);
    self->queues = Py_NewRef(queues);
    self->eras = Py_NewRef(eras);
    self->cache = Py_NewRef(cache);
    self->resolve = Py_NewRef(resolve);
    self->new_queue = Py_NewRef(new_queue);
    self->head_max = head_max;
    self->cache_max = cache_max > 0 ? cache_max : 1;
    self->max_line = max_line;
    self->count = 0;
    self->lines_before = 0;
    return (PyObject *)self;
}

static void
StatsSink_dealloc(StatsSink *self)
{
    Py_XDECREF(self->source);
    Py_XDECREF(self->queues);
    Py_XDECREF(self->eras);
    Py_XDECREF(self->cache);
    Py_XDECREF(self->resolve);
    Py_XDECREF(self->new_queue);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef StatsSink_members[] = {
    {"count", Py_T_PYSSIZET, offsetof(StatsSink, count), Py_READONLY, "stats lines recorded"},
    {"lines_before", Py_T_PYSSIZET, offsetof(StatsSink, lines_before), Py_READONLY, "lines of the blocks given so far"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StatsSinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rlhealth.probes._linescan.StatsSink",
    .tp_basicsize = sizeof(StatsSink),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "where Collector.lines routes the lines matched by the stats pattern alone",
    .tp_new = StatsSink_new,
    .tp_dealloc = (destructor)StatsSink_dealloc,
    .tp_members = StatsSink_members,
};

static void
Collector_dealloc(Collector *self)
{
    PyMem_Free(self->items);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Collector_methods[] = {
    {"lines", (PyCFunction)Collector_lines, METH_VARARGS,
     "lines(block, end, key_cache, keys_of, sink=None) -> (newlines, hits); empties the collector"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CollectorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rlhealth.probes._linescan.Collector",
    .tp_basicsize = sizeof(Collector),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "hyperscan match handler recording (to, id); lines() turns them into matching lines",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Collector_dealloc,
    .tp_call = (ternaryfunc)Collector_call,
    .tp_methods = Collector_methods,
};

static PyMethodDef module_methods[] = {
    {"count_newlines", count_newlines_py, METH_VARARGS, "count_newlines(buffer, start=0, stop=len) -> int"},
    {"stats_line", stats_line, METH_O, "stats_line(raw) -> False | None | (text, engine, swapped, newer, close)"},
    {"stats_fields", stats_fields, METH_O,
     "stats_fields(text) -> NotImplemented | None | (prompt, gen, running, waiting, kv)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef linescan_module = {
    PyModuleDef_HEAD_INIT, "rlhealth.probes._linescan",
    "Matching lines of a scanned block (see probes/scan.py).", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__linescan(void)
{
    if (PyType_Ready(&CollectorType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&linescan_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CollectorType);
    if (PyModule_AddObject(m, "Collector", (PyObject *)&CollectorType) < 0) {
        Py_DECREF(&CollectorType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyType_Ready(&StatsSinkType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&StatsSinkType);
    if (PyModule_AddObject(m, "StatsSink", (PyObject *)&StatsSinkType) < 0) {
        Py_DECREF(&StatsSinkType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
