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
 * ``StatsReader`` reads the vLLM stats line from its description in probes/parse/vllm.py (the
 * data ``STATS_RE`` is generated from); ``StatsSink`` queues the stats lines inside the scan.
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
struct StatsReader;

typedef struct {
    PyObject_HEAD
    struct StatsReader *reader;
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

/* ----------------------------------------------------------------- stats lines
 *
 * ``StatsReader(literals, steps, groups, fields, identity, markers)`` reads the vLLM stats line as
 * described by probes/parse/vllm.py ``STATS_LINE`` (the description ``STATS_RE`` is generated
 * from), passed as ``stats_reader_spec()`` flattens it:
 *   - literals: bytes; steps: ``(first, count, field)`` each, a literal (one of the alternatives
 *     ``literals[first:first + count]``) then field ``field`` (-1: none, the group ends); groups:
 *     ``(optional, first, last)`` each, its steps ``steps[first:last]``. One group is required; at
 *     most one optional group comes before it (matched backwards from the required group's first
 *     literal, the anchor), the others after it (each matched where it can, in order: what the
 *     regex does, since nothing required follows them);
 *   - fields: ``(dot, max_digits, value)`` each: a run of ASCII digits, with at most one "." and
 *     at least one digit when ``dot`` (a ``DECIMAL``), at most ``max_digits`` digits (0: any),
 *     read as "f" (float, as ``float()``), "i" (int, max_digits 1..18) or "s" (str);
 *   - identity: the fields whose text the memo key holds; markers: texts it notes the presence of
 *     (one bit: whether the line holds any).
 * vllm.py checks the description's shape: a literal next to a field cannot continue it (so a
 * field is the whole run of its characters there), no alternative is a prefix of another, and the
 * group before the anchor cannot hold the anchor's first character. Then the leftmost match
 * starts at the first anchor where the required group matches, or at the group before it, and no
 * step needs to backtrack.
 *
 * ``reader.line(raw)``: False when ``raw`` holds a byte other than printable ASCII or tab (the
 * caller takes the Python path), None without a match, else ``(text, key, close)``: the line as
 * text (what ``clean_line`` gives for such bytes), its memo key (bytes: the text up to its first
 * ")", the identity fields' texts, which groups matched, whether it holds a marker) and
 * the index of its first ")" (-1 if none).
 * ``reader.fields(text)``: NotImplemented for non-ASCII text, None without a match, else the
 * values of the fields (None for a field that did not match), as vllm.py ``stats_values``. */

#define MAX_FIELDS 32
#define MAX_GROUPS 32
#define MAX_COUNT_DIGITS 18     /* an "i" field's digits fit a long long */

typedef struct {
    const char *text;
    Py_ssize_t len;
} Literal;

typedef struct {
    Py_ssize_t first, count;    /* its literal alternatives: lits[first:first + count) */
    int field;                  /* the field after them, -1 for none */
} Step;

typedef struct {
    int optional;
    Py_ssize_t first, last;     /* its steps: steps[first:last) */
} Group;

typedef struct {
    int dot;
    Py_ssize_t max_digits;
    char value;
} Kind;

typedef struct StatsReader {
    PyObject_HEAD
    PyObject *literals, *marker_texts;  /* the bytes the literals and markers point into */
    Literal *lits, *markers;
    Step *steps;
    Group *groups;
    Kind *kinds;
    int *identity;
    Py_ssize_t ngroups, nfields, nidentity, nmarkers, required;
} StatsReader;

/* Spans (start, end) of the fields of a match (start -1: unmatched) and which groups matched. */
typedef struct {
    Py_ssize_t span[MAX_FIELDS][2];
    char matched[MAX_GROUPS];
} StatsMatch;

static int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int
kind_holds(const Kind *kind, unsigned char c)
{
    return is_digit(c) || (kind->dot && c == '.');
}

/* Whether p[start:end) is a whole field of this kind. */
static int
field_ok(const Kind *kind, const unsigned char *p, Py_ssize_t start, Py_ssize_t end)
{
    if (end == start)
        return 0;
    if (!kind->dot)
        return kind->max_digits == 0 || end - start <= kind->max_digits;
    Py_ssize_t dots = 0;
    for (Py_ssize_t k = start; k < end; k++)
        dots += p[k] == '.';
    return dots <= 1 && dots < end - start;
}

/* Length of the step's literal alternative at p[i:n), or -1. */
static Py_ssize_t
literal_at(const StatsReader *r, const Step *step, const unsigned char *p, Py_ssize_t i, Py_ssize_t n)
{
    for (Py_ssize_t a = step->first; a < step->first + step->count; a++) {
        const Literal *lit = &r->lits[a];
        if (n - i >= lit->len && memcmp(p + i, lit->text, (size_t)lit->len) == 0)
            return lit->len;
    }
    return -1;
}

/* Length of the step's literal alternative ending at p[end], or -1. */
static Py_ssize_t
literal_before(const StatsReader *r, const Step *step, const unsigned char *p, Py_ssize_t end)
{
    for (Py_ssize_t a = step->first; a < step->first + step->count; a++) {
        const Literal *lit = &r->lits[a];
        if (end >= lit->len && memcmp(p + end - lit->len, lit->text, (size_t)lit->len) == 0)
            return lit->len;
    }
    return -1;
}

/* The group matched forward at i: its end, or -1 (its field spans then undefined). */
static Py_ssize_t
group_forward(const StatsReader *r, const Group *g, const unsigned char *p, Py_ssize_t i, Py_ssize_t n,
              StatsMatch *m)
{
    for (Py_ssize_t s = g->first; s < g->last; s++) {
        const Step *step = &r->steps[s];
        Py_ssize_t len = literal_at(r, step, p, i, n);
        if (len < 0)
            return -1;
        i += len;
        if (step->field >= 0) {
            const Kind *kind = &r->kinds[step->field];
            Py_ssize_t j = i, dots = 0;
            if (kind->dot) {
                for (; j < n && (is_digit(p[j]) || p[j] == '.'); j++)
                    dots += p[j] == '.';
                if (dots > 1 || dots == j - i)
                    return -1;
            } else {
                while (j < n && is_digit(p[j]))
                    j++;
                if (j == i || (kind->max_digits > 0 && j - i > kind->max_digits))
                    return -1;
            }
            m->span[step->field][0] = i;
            m->span[step->field][1] = j;
            i = j;
        }
    }
    return i;
}

/* The group matched backwards, ending at end: its start, or -1 (its field spans then undefined). */
static Py_ssize_t
group_backward(const StatsReader *r, const Group *g, const unsigned char *p, Py_ssize_t end, StatsMatch *m)
{
    for (Py_ssize_t s = g->last - 1; s >= g->first; s--) {
        const Step *step = &r->steps[s];
        if (step->field >= 0) {
            const Kind *kind = &r->kinds[step->field];
            Py_ssize_t j = end;
            while (j > 0 && kind_holds(kind, p[j - 1]))
                j--;
            if (!field_ok(kind, p, j, end))
                return -1;
            m->span[step->field][0] = j;
            m->span[step->field][1] = end;
            end = j;
        }
        Py_ssize_t len = literal_before(r, step, p, end);
        if (len < 0)
            return -1;
        end -= len;
    }
    return end;
}

static void
group_unset(const StatsReader *r, Py_ssize_t g, StatsMatch *m)
{
    m->matched[g] = 0;
    for (Py_ssize_t s = r->groups[g].first; s < r->groups[g].last; s++) {
        if (r->steps[s].field >= 0)
            m->span[r->steps[s].field][0] = m->span[r->steps[s].field][1] = -1;
    }
}

/* The leftmost match in p[:n]: 1 with its fields in *m, else 0. */
static int
find_stats(const StatsReader *r, const unsigned char *p, Py_ssize_t n, StatsMatch *m)
{
    const Group *required = &r->groups[r->required];
    const Literal *anchor = &r->lits[r->steps[required->first].first];
    const unsigned char *q = p;
    Py_ssize_t end = -1;
    while ((q = find_literal(q, n - (q - p), anchor->text, anchor->len)) != NULL) {
        end = group_forward(r, required, p, q - p, n, m);
        if (end >= 0)
            break;
        q++;
    }
    if (q == NULL)
        return 0;
    m->matched[r->required] = 1;
    if (r->required == 1) {
        m->matched[0] = 1;
        if (group_backward(r, &r->groups[0], p, q - p, m) < 0)
            group_unset(r, 0, m);
    }
    for (Py_ssize_t g = r->required + 1; g < r->ngroups; g++) {
        m->matched[g] = 1;
        Py_ssize_t e = group_forward(r, &r->groups[g], p, end, n, m);
        if (e < 0)
            group_unset(r, g, m);
        else
            end = e;
    }
    return 1;
}

static int
printable(const unsigned char *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 || p[i] > 0x7e) && p[i] != '\t')
            return 0;
    }
    return 1;
}

static Py_ssize_t
first_close(const unsigned char *p, Py_ssize_t n)
{
    const unsigned char *close = memchr(p, ')', (size_t)n);
    return close == NULL ? -1 : (Py_ssize_t)(close - p);
}

/* The memo key of a matched line (see above): head, NUL, per identity field "1" and its text or
 * "0" and a NUL, NUL, per group "1" or "0", then "1" if it holds a marker, else "0". Printable
 * lines hold no NUL: the parts stay apart. New reference. */
static PyObject *
memo_key(const StatsReader *r, const unsigned char *p, Py_ssize_t n, const StatsMatch *m, Py_ssize_t close)
{
    Py_ssize_t head = close + 1, size = head + 3 + r->ngroups;
    for (Py_ssize_t k = 0; k < r->nidentity; k++) {
        const Py_ssize_t *span = m->span[r->identity[k]];
        size += 2 + (span[0] >= 0 ? span[1] - span[0] : 0);
    }
    PyObject *key = PyBytes_FromStringAndSize(NULL, size);
    if (key == NULL)
        return NULL;
    char *kb = PyBytes_AS_STRING(key);
    memcpy(kb, p, (size_t)head);
    kb += head;
    *kb++ = '\0';
    for (Py_ssize_t k = 0; k < r->nidentity; k++) {
        const Py_ssize_t *span = m->span[r->identity[k]];
        *kb++ = span[0] >= 0 ? '1' : '0';
        if (span[0] >= 0) {
            memcpy(kb, p + span[0], (size_t)(span[1] - span[0]));
            kb += span[1] - span[0];
        }
        *kb++ = '\0';
    }
    *kb++ = '\0';
    for (Py_ssize_t g = 0; g < r->ngroups; g++)
        *kb++ = m->matched[g] ? '1' : '0';
    int marked = 0;
    for (Py_ssize_t k = 0; k < r->nmarkers && !marked; k++)
        marked = find_literal(p, n, r->markers[k].text, r->markers[k].len) != NULL;
    *kb = marked ? '1' : '0';
    return key;
}

static PyObject *
StatsReader_line(StatsReader *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    PyObject *result = NULL;
    StatsMatch m;
    if (!printable(p, n)) {
        result = Py_NewRef(Py_False);
    } else if (!find_stats(self, p, n, &m)) {
        result = Py_NewRef(Py_None);
    } else {
        Py_ssize_t close = first_close(p, n);
        PyObject *key = memo_key(self, p, n, &m, close);
        PyObject *text = key ? PyUnicode_DecodeASCII((const char *)p, n, NULL) : NULL;
        if (text == NULL)
            Py_XDECREF(key);
        else
            result = Py_BuildValue("(NNn)", text, key, close);
    }
    PyBuffer_Release(&view);
    return result;
}

/* The value of a matched field (see above). New reference. */
static PyObject *
field_value(const Kind *kind, const unsigned char *p, const Py_ssize_t *span)
{
    Py_ssize_t len = span[1] - span[0];
    if (kind->value == 'i') {
        long long value = 0;
        for (Py_ssize_t k = span[0]; k < span[1]; k++)
            value = value * 10 + (p[k] - '0');
        return PyLong_FromLongLong(value);
    }
    if (kind->value == 's')
        return PyUnicode_DecodeASCII((const char *)p + span[0], len, NULL);
    char buf[64];
    char *text = len < (Py_ssize_t)sizeof(buf) ? buf : PyMem_Malloc((size_t)len + 1);
    if (text == NULL)
        return PyErr_NoMemory();
    memcpy(text, p + span[0], (size_t)len);
    text[len] = '\0';
    double value = PyOS_string_to_double(text, NULL, NULL);     /* what float(str) uses */
    if (text != buf)
        PyMem_Free(text);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(value);
}

static PyObject *
StatsReader_fields(StatsReader *self, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "fields() takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg))
        Py_RETURN_NOTIMPLEMENTED;
    const unsigned char *p = PyUnicode_DATA(arg);
    StatsMatch m;
    if (!find_stats(self, p, PyUnicode_GET_LENGTH(arg), &m))
        Py_RETURN_NONE;
    PyObject *values = PyTuple_New(self->nfields);
    if (values == NULL)
        return NULL;
    for (Py_ssize_t f = 0; f < self->nfields; f++) {
        PyObject *value = m.span[f][0] < 0 ? Py_NewRef(Py_None) : field_value(&self->kinds[f], p, m.span[f]);
        if (value == NULL) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, f, value);
    }
    return values;
}

/* The literal of a bytes object (kept alive by self). */
static int
take_literal(PyObject *item, Literal *lit)
{
    if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
        PyErr_SetString(PyExc_TypeError, "a literal is non-empty bytes");
        return -1;
    }
    lit->text = PyBytes_AS_STRING(item);
    lit->len = PyBytes_GET_SIZE(item);
    return 0;
}

/* Errors raise ValueError: the indices must stay inside the arrays they index. */
static int
StatsReader_setup(StatsReader *self, PyObject *steps, PyObject *groups, PyObject *fields, PyObject *identity)
{
    Py_ssize_t nlits = PyTuple_GET_SIZE(self->literals), nsteps = PyTuple_GET_SIZE(steps), nreq = 0;
    self->ngroups = PyTuple_GET_SIZE(groups);
    self->nfields = PyTuple_GET_SIZE(fields);
    self->nidentity = PyTuple_GET_SIZE(identity);
    self->nmarkers = PyTuple_GET_SIZE(self->marker_texts);
    self->lits = PyMem_Calloc((size_t)(nlits ? nlits : 1), sizeof(Literal));
    self->steps = PyMem_Calloc((size_t)(nsteps ? nsteps : 1), sizeof(Step));
    self->groups = PyMem_Calloc((size_t)(self->ngroups ? self->ngroups : 1), sizeof(Group));
    self->kinds = PyMem_Calloc((size_t)(self->nfields ? self->nfields : 1), sizeof(Kind));
    self->identity = PyMem_Calloc((size_t)(self->nidentity ? self->nidentity : 1), sizeof(int));
    self->markers = PyMem_Calloc((size_t)(self->nmarkers ? self->nmarkers : 1), sizeof(Literal));
    if (!self->lits || !self->steps || !self->groups || !self->kinds || !self->identity || !self->markers) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < nlits; k++) {
        if (take_literal(PyTuple_GET_ITEM(self->literals, k), &self->lits[k]) < 0)
            return -1;
    }
    for (Py_ssize_t k = 0; k < self->nmarkers; k++) {
        if (take_literal(PyTuple_GET_ITEM(self->marker_texts, k), &self->markers[k]) < 0)
            return -1;
    }
    const char *wrong = NULL;
    for (Py_ssize_t f = 0; f < self->nfields && !wrong; f++) {
        Kind *kind = &self->kinds[f];
        int dot, value;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, f), "pnC", &dot, &kind->max_digits, &value))
            return -1;
        kind->dot = dot;
        kind->value = (char)value;
        if (!(value == 'f' && dot && kind->max_digits == 0) && !(value == 's' && !dot && kind->max_digits >= 0) &&
                !(value == 'i' && !dot && kind->max_digits >= 1 && kind->max_digits <= MAX_COUNT_DIGITS))
            wrong = "a field is (True, 0, 'f'), (False, n, 's') or (False, 1..18, 'i')";
    }
    for (Py_ssize_t s = 0; s < nsteps && !wrong; s++) {
        Step *step = &self->steps[s];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(steps, s), "nni", &step->first, &step->count, &step->field))
            return -1;
        if (step->first < 0 || step->count < 1 || step->first + step->count > nlits || step->field < -1 ||
                step->field >= self->nfields)
            wrong = "a step's literals or field out of range";
    }
    for (Py_ssize_t g = 0; g < self->ngroups && !wrong; g++) {
        Group *group = &self->groups[g];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(groups, g), "pnn", &group->optional, &group->first, &group->last))
            return -1;
        if (group->first < 0 || group->first >= group->last || group->last > nsteps)
            wrong = "a group's steps out of range";
        if (!group->optional) {
            nreq++;
            self->required = g;
        }
    }
    if (!wrong && (self->ngroups > MAX_GROUPS || self->nfields > MAX_FIELDS || nreq != 1 || self->required > 1 ||
                   self->steps[self->groups[self->required].first].count != 1))
        wrong = "at most 32 groups and 32 fields; one required group, after at most one, starting with one literal";
    for (Py_ssize_t k = 0; k < self->nidentity && !wrong; k++) {
        long f = PyLong_AsLong(PyTuple_GET_ITEM(identity, k));
        if (f == -1 && PyErr_Occurred())
            return -1;
        if (f < 0 || f >= self->nfields)
            wrong = "an identity field out of range";
        self->identity[k] = (int)f;
    }
    if (wrong) {
        PyErr_SetString(PyExc_ValueError, wrong);
        return -1;
    }
    return 0;
}

static void
StatsReader_dealloc(StatsReader *self)
{
    PyMem_Free(self->groups);
    PyMem_Free(self->steps);
    PyMem_Free(self->lits);
    PyMem_Free(self->kinds);
    PyMem_Free(self->identity);
    PyMem_Free(self->markers);
    Py_XDECREF(self->literals);
    Py_XDECREF(self->marker_texts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
StatsReader_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"literals", "steps", "groups", "fields", "identity", "markers", NULL};
    PyObject *literals, *steps, *groups, *fields, *identity, *markers;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!O!O!O!:StatsReader", names, &PyTuple_Type, &literals,
                                     &PyTuple_Type, &steps, &PyTuple_Type, &groups, &PyTuple_Type, &fields,
                                     &PyTuple_Type, &identity, &PyTuple_Type, &markers))
        return NULL;
    StatsReader *self = (StatsReader *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->literals = Py_NewRef(literals);
    self->marker_texts = Py_NewRef(markers);
    if (StatsReader_setup(self, steps, groups, fields, identity) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMethodDef StatsReader_methods[] = {
    {"line", (PyCFunction)StatsReader_line, METH_O, "line(raw) -> False | None | (text, key, close)"},
    {"fields", (PyCFunction)StatsReader_fields, METH_O, "fields(text) -> NotImplemented | None | values"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StatsReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rlhealth.probes._linescan.StatsReader",
    .tp_basicsize = sizeof(StatsReader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "reads the stats lines described by probes/parse/vllm.py STATS_LINE",
    .tp_new = StatsReader_new,
    .tp_dealloc = (destructor)StatsReader_dealloc,
    .tp_methods = StatsReader_methods,
};

/* ----------------------------------------------------------------- the stats sink
 *
 * ``StatsSink(reader, stats_id, source, queues, eras, cache, resolve, new_queue, head_max,
 * cache_max, max_line)``, given to ``Collector.lines``, routes the lines matched by pattern
 * ``stats_id`` alone as probes/extractors/stats.py ``Stats.feed_raw`` does, without a Python call
 * per line:
 *   - a line the ``StatsReader`` ``reader`` finds no match in is dropped;
 *   - ``cache`` maps its memo key (``reader.line``) to ``(engine, era)``, from ``resolve(text)``
 *     on a miss (cleared when it holds ``cache_max`` keys);
 *   - ``(text, source, line number, engine, era)`` is appended to ``queues[engine]`` (made by
 *     ``new_queue(engine)`` when missing), ``era`` added to ``eras``, ``count`` incremented.
 * ``lines`` hands the sink a block's stats lines only when the sink takes each of them (printable
 * ASCII or tab, at most ``max_line`` bytes, a match's first ")" within ``head_max``) and none is
 * matched by another pattern too; otherwise they are hits, as without a sink (the caller routes
 * them in order). ``lines_before`` counts the lines of the blocks given so far. */

static int
sink_accepts(StatsSink *sink, const unsigned char *p, Py_ssize_t n)
{
    if (n > sink->max_line || !printable(p, n))
        return 0;
    if (first_close(p, n) > sink->head_max) {
        StatsMatch m;
        if (find_stats(sink->reader, p, n, &m))
            return 0;
    }
    return 1;
}

static int
sink_record(StatsSink *sink, const unsigned char *p, Py_ssize_t n, Py_ssize_t lineno)
{
    StatsMatch m;
    if (!find_stats(sink->reader, p, n, &m))
        return 0;
    PyObject *key = memo_key(sink->reader, p, n, &m, first_close(p, n));
    if (key == NULL)
        return -1;
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
    static char *names[] = {"reader", "stats_id", "source", "queues", "eras", "cache", "resolve", "new_queue", "head_max",
                            "cache_max", "max_line", NULL};
    unsigned int stats_id;
    PyObject *reader, *source, *queues, *eras, *cache, *resolve, *new_queue;
    Py_ssize_t head_max, cache_max, max_line;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!IUO!O!O!OOnnn:StatsSink", names, &StatsReaderType, &reader,
                                     &stats_id, &source,
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
    self->reader = (StatsReader *)Py_NewRef(reader);
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
    Py_XDECREF((PyObject *)self->reader);
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
    if (PyType_Ready(&StatsReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&StatsReaderType);
    if (PyModule_AddObject(m, "StatsReader", (PyObject *)&StatsReaderType) < 0) {
        Py_DECREF(&StatsReaderType);
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
