/* Timestamps of log lines and ISO-8601 strings: probes/parse/timestamps.py's two parsers in C.
 *
 * ``line_timestamp(text, reference_epoch)`` returns exactly what ``_line_timestamp_python``
 * returns (a float bit for bit, or None) for a str ``text`` of ASCII characters and a
 * ``reference_epoch`` that is None or a float or int in [0, 253402300799]; for anything else
 * (non-str or non-ASCII text, another reference type or range) it returns ``NotImplemented``.
 * On ASCII text the Python patterns reduce to:
 *   - ``\s`` is [\t\n\v\f\r\x1c-\x1f ] (what str.isspace() accepts below 128), ``\d`` is [0-9],
 *     ``\b`` is the boundary between [A-Za-z0-9_] and the rest;
 *   - every pattern is matched at its leftmost start (``search``) or at the line start (``match``),
 *     with the backtracking spelled out where a pattern has choices (see each reader);
 *   - the forms are tried in the Python order: dmesg -T, syslog (both anchored: a match returns,
 *     valid date or not), the leftmost ISO match (returned when its date and time are valid, else
 *     the next form is tried), vLLM, bracketed glog, bare glog (each returns when it matches).
 * The value follows the Python arithmetic: the day's start and the time of day are an exact
 * integer (years 1-9999 stay far below 2**53), then ``+ float("0." + digits)`` and ``- offset``
 * as double operations. float("0." + digits) with at most 9 digits is the correctly rounded
 * quotient digits / 10**len(digits) of two exactly representable doubles, which IEEE division
 * gives. The year of the yearless forms is the UTC year of ``datetime.fromtimestamp(reference)``
 * (microsecond rounding half-even included), moved back one when the stamp would be more than
 * 86400 s after the reference (only when a reference is given).
 *
 * ``parse_iso(text)`` returns exactly ``_parse_iso_python(text)`` for the strict shapes
 * ``YYYY-MM-DD[T ]HH:MM:SS``, optionally ``.fff`` or ``.ffffff``, optionally ``Z`` or
 * ``[+-]HH:MM`` (HH <= 23, MM <= 59), with a valid date and time and fewer than 2**53
 * microseconds from the epoch: ``datetime.fromisoformat`` accepts these on 3.11-3.13 and the
 * timestamp is total microseconds / 10**6, correctly rounded both in Python and as a double
 * division. Anything else: ``NotImplemented``.
 *
 * ``set_fallback(line_fn, iso_fn)`` stores the Python definitions; ``line_timestamp_with_fallback``
 * and ``parse_iso_with_fallback`` are the two parsers calling them (with the same arguments)
 * instead of returning NotImplemented, so a caller needs no Python wrapper.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned char uchar;

#define MAX_REFERENCE 253402300799.0    /* 9999-12-31T23:59:59Z */
#define EXACT_LIMIT 9007199254740992LL  /* 2**53 */

static PyObject *line_fallback = NULL;
static PyObject *iso_fallback = NULL;

static inline int
is_digit(uchar c)
{
    return (unsigned)(c - '0') < 10u;
}

static inline int
is_space(uchar c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
}

static inline int
is_word(uchar c)
{
    return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static inline int
two(const uchar *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

static inline int
digits_at(const uchar *s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t count)
{
    if (i + count > n)
        return 0;
    for (Py_ssize_t k = 0; k < count; k++)
        if (!is_digit(s[i + k]))
            return 0;
    return 1;
}

static Py_ssize_t
skip_space(const uchar *s, Py_ssize_t n, Py_ssize_t i)
{
    while (i < n && is_space(s[i]))
        i++;
    return i;
}

/* "HH:MM:SS" at s[i..i+8) (digits only, ranges not checked). */
static int
clock_at(const uchar *s, Py_ssize_t n, Py_ssize_t i, int *hh, int *mi, int *ss)
{
    if (i + 8 > n || !digits_at(s, n, i, 2) || s[i + 2] != ':' || !digits_at(s, n, i + 3, 2) ||
        s[i + 5] != ':' || !digits_at(s, n, i + 6, 2))
        return 0;
    *hh = two(s + i);
    *mi = two(s + i + 3);
    *ss = two(s + i + 6);
    return 1;
}

/* ------------------------------------------------------------------ calendar (proleptic Gregorian) */

static inline int
is_leap(long y)
{
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

static int
days_in_month(long y, int m)
{
    static const int days[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m];
}

/* Days from 1970-01-01 to y-m-d (a valid date). */
static int64_t
days_from_civil(long y, int m, int d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The year of day ``days`` after 1970-01-01 (days >= 0). */
static long
year_of_days(int64_t days)
{
    days += 719468;
    const int64_t era = days / 146097;
    const int64_t doe = days - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    return (long)(yoe + era * 400 + (mp >= 10));
}

/* Seconds since the epoch of a UTC date and time, or 0 when datetime() refuses it (year 1-9999,
 * month 1-12, day within the month, hh <= 23, mi <= 59, ss <= 59): _mk / _epoch. */
static int
epoch_seconds(long y, int mo, int d, int hh, int mi, int ss, int64_t *out)
{
    if (y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
        hh > 23 || mi > 59 || ss > 59)
        return 0;
    *out = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss;
    return 1;
}

/* ------------------------------------------------------------------ the reference time */

typedef struct {
    int given;          /* reference_epoch is not None */
    double epoch;       /* its value (0 when None) */
    long year;          /* _year_of(reference_epoch); 0 until computed */
} Reference;

/* datetime.fromtimestamp(r, timezone.utc).year for 0 <= r <= MAX_REFERENCE. CPython rounds r to
 * microseconds half-even (Python/pytime.c: the fraction times 1e6, rounded; a whole 1e6 carries
 * into the seconds): that carries exactly when fraction * 1e6 >= 999999.5 (999999.5 itself
 * rounds to the even 1000000). */
static long
year_of_reference(double r)
{
    int64_t whole = (int64_t)r;                         /* r >= 0: truncation is modf's integral part */
    volatile double micros = (r - (double)whole) * 1e6; /* modf's exact fraction, times 1e6 */
    if (micros >= 999999.5)
        whole += 1;
    return year_of_days(whole / 86400);
}

/* _yearless: 1 with *out set, or 0 for None. */
static int
yearless(Reference *ref, int mo, int d, int hh, int mi, int ss, double *out)
{
    if (ref->year == 0)
        ref->year = year_of_reference(ref->epoch);
    int64_t secs;
    if (!epoch_seconds(ref->year, mo, d, hh, mi, ss, &secs))
        return 0;
    double t = (double)secs;
    if (ref->given && t > ref->epoch + 86400.0) {
        if (!epoch_seconds(ref->year - 1, mo, d, hh, mi, ss, &secs))
            return 0;
        t = (double)secs;
    }
    *out = t;
    return 1;
}

/* float("0." + s[i..i+count)) for 1 <= count <= 9 digits. */
static double
fraction(const uchar *s, Py_ssize_t i, Py_ssize_t count)
{
    static const double scale[10] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    long v = 0;
    for (Py_ssize_t k = 0; k < count; k++)
        v = v * 10 + (s[i + k] - '0');
    return (double)v / scale[count];
}

/* Up to 9 digits from s[i]: their count. */
static Py_ssize_t
fraction_digits(const uchar *s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t k = 0;
    while (k < 9 && i + k < n && is_digit(s[i + k]))
        k++;
    return k;
}

/* ------------------------------------------------------------------ the forms */

enum { NO_MATCH, MATCH_NONE, MATCH_VALUE };

static const char MONTHS[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char WEEKDAYS[7][4] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

/* (Jan|...|Dec) at s[i..i+3): its number 1-12, or 0. */
static int
month_at(const uchar *s, Py_ssize_t n, Py_ssize_t i)
{
    if (i + 3 > n)
        return 0;
    for (int m = 0; m < 12; m++)
        if (memcmp(s + i, MONTHS[m], 3) == 0)
            return m + 1;
    return 0;
}

/* `` +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})`` from s[i]: the index after it, or -1. Spaces and
 * digits never overlap, so the greedy match is the only one. */
static Py_ssize_t
day_and_clock(const uchar *s, Py_ssize_t n, Py_ssize_t i, int *d, int *hh, int *mi, int *ss)
{
    if (i >= n || s[i] != ' ')
        return -1;
    while (i < n && s[i] == ' ')
        i++;
    if (!digits_at(s, n, i, 1))
        return -1;
    if (digits_at(s, n, i + 1, 1)) {
        *d = two(s + i);
        i += 2;
    }
    else {
        *d = s[i] - '0';
        i += 1;
    }
    if (i >= n || s[i] != ' ' || !clock_at(s, n, i + 1, hh, mi, ss))
        return -1;
    return i + 9;
}

/* ``^\s*\[(?:Mon|...|Sun) (Jan|...|Dec) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\]`` -> _mk. */
static int
read_dmesg(const uchar *s, Py_ssize_t n, double *out)
{
    Py_ssize_t i = skip_space(s, n, 0);
    if (i + 9 > n || s[i] != '[')
        return NO_MATCH;
    int weekday = 0;
    for (int w = 0; w < 7 && !weekday; w++)
        weekday = memcmp(s + i + 1, WEEKDAYS[w], 3) == 0;
    int mo = month_at(s, n, i + 5);
    if (!weekday || s[i + 4] != ' ' || !mo)
        return NO_MATCH;
    int d, hh, mi, ss;
    i = day_and_clock(s, n, i + 8, &d, &hh, &mi, &ss);
    if (i < 0 || i + 6 > n || s[i] != ' ' || !digits_at(s, n, i + 1, 4) || s[i + 5] != ']')
        return NO_MATCH;
    long y = two(s + i + 1) * 100 + two(s + i + 3);
    int64_t secs;
    if (!epoch_seconds(y, mo, d, hh, mi, ss, &secs))
        return MATCH_NONE;
    *out = (double)secs;
    return MATCH_VALUE;
}

/* ``^\s*(Jan|...|Dec) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) `` -> _yearless. */
static int
read_syslog(const uchar *s, Py_ssize_t n, Reference *ref, double *out)
{
    Py_ssize_t i = skip_space(s, n, 0);
    int mo = month_at(s, n, i);
    if (!mo)
        return NO_MATCH;
    int d, hh, mi, ss;
    i = day_and_clock(s, n, i + 3, &d, &hh, &mi, &ss);
    if (i < 0 || i >= n || s[i] != ' ')
        return NO_MATCH;
    return yearless(ref, mo, d, hh, mi, ss, out) ? MATCH_VALUE : MATCH_NONE;
}

/* The leftmost ``(\d{4})-(\d{2})-(\d{2})[ T_](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?
 * (Z|[+-]\d{2}:?\d{2})?``: MATCH_VALUE when its date and time are valid, else NO_MATCH (the
 * Python code then tries the next form, not a later ISO match). Every match has its first "-" 4
 * characters after its start, so the candidates are the "-" in order. The optional groups never
 * make the match fail: the fraction takes up to 9 digits (nothing after it can need them back),
 * and ``:?`` is tried as ":" first (``+HH:MM``), then empty (``+HHMM``). */
static int
read_iso(const uchar *s, Py_ssize_t n, double *out)
{
    if (n < 19)
        return NO_MATCH;
    const uchar *dash = memchr(s + 4, '-', (size_t)(n - 4));
    Py_ssize_t p = -1;
    for (; dash != NULL; dash = memchr(dash + 1, '-', (size_t)(n - (dash + 1 - s)))) {
        Py_ssize_t c = dash - s - 4;     /* c + 19 <= n below keeps dash + 1 inside the text */
        if (c + 19 > n)
            break;
        if (digits_at(s, n, c, 4) && digits_at(s, n, c + 5, 2) && s[c + 7] == '-' && digits_at(s, n, c + 8, 2) &&
            (s[c + 10] == ' ' || s[c + 10] == 'T' || s[c + 10] == '_') && s[c + 13] == ':' && s[c + 16] == ':' &&
            digits_at(s, n, c + 11, 2) && digits_at(s, n, c + 14, 2) && digits_at(s, n, c + 17, 2)) {
            p = c;
            break;
        }
    }
    if (p < 0)
        return NO_MATCH;
    Py_ssize_t i = p + 19, frac_at = 0, frac_len = 0;
    if (i + 1 < n && (s[i] == '.' || s[i] == ',') && is_digit(s[i + 1])) {
        frac_at = i + 1;
        frac_len = fraction_digits(s, n, frac_at);
        i = frac_at + frac_len;
    }
    long offset = 0;
    if (i < n && (s[i] == '+' || s[i] == '-') && digits_at(s, n, i + 1, 2)) {
        Py_ssize_t minutes_at = -1;
        if (i + 3 < n && s[i + 3] == ':') {
            if (digits_at(s, n, i + 4, 2))
                minutes_at = i + 4;
        }
        else if (digits_at(s, n, i + 3, 2))
            minutes_at = i + 3;
        if (minutes_at > 0)
            offset = (s[i] == '-' ? -1 : 1) * (two(s + i + 1) * 3600L + two(s + minutes_at) * 60L);
    }
    int64_t secs;
    if (!epoch_seconds(two(s + p) * 100 + two(s + p + 2), two(s + p + 5), two(s + p + 8),
                       two(s + p + 11), two(s + p + 14), two(s + p + 17), &secs))
        return NO_MATCH;
    double t = (double)secs;
    if (frac_len)
        t += fraction(s, frac_at, frac_len);
    *out = t - (double)offset;
    return MATCH_VALUE;
}

/* The leftmost ``\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|WARN) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})``
 * -> _yearless. At most one keyword ends at a given place (their last four letters differ), and
 * two matches cannot overlap (inside one, no keyword can start after a word boundary), so the
 * match with the leftmost "-" is the leftmost match. */
static int
read_vllm(const uchar *s, Py_ssize_t n, Reference *ref, double *out)
{
    static const struct { const char *word; Py_ssize_t len; } KEYWORDS[] = {
        {"INFO", 4}, {"WARNING", 7}, {"ERROR", 5}, {"DEBUG", 5}, {"CRITICAL", 8}, {"WARN", 4},
    };
    if (n < 19)
        return NO_MATCH;
    const uchar *dash = memchr(s + 7, '-', (size_t)(n - 7));
    for (; dash != NULL; dash = dash + 1 < s + n ? memchr(dash + 1, '-', (size_t)(n - (dash + 1 - s))) : NULL) {
        Py_ssize_t q = dash - s;
        int hh, mi, ss;
        if (q + 12 > n || s[q - 3] != ' ' || !digits_at(s, n, q - 2, 2) || !digits_at(s, n, q + 1, 2) ||
            s[q + 3] != ' ' || !clock_at(s, n, q + 4, &hh, &mi, &ss))
            continue;
        Py_ssize_t end = q - 3;
        for (size_t k = 0; k < sizeof KEYWORDS / sizeof KEYWORDS[0]; k++) {
            Py_ssize_t start = end - KEYWORDS[k].len;
            if (start >= 0 && memcmp(s + start, KEYWORDS[k].word, (size_t)KEYWORDS[k].len) == 0 &&
                (start == 0 || !is_word(s[start - 1])))
                return yearless(ref, two(s + q - 2), two(s + q + 1), hh, mi, ss, out) ? MATCH_VALUE : MATCH_NONE;
        }
    }
    return NO_MATCH;
}

/* The leftmost ``\[[IWEF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?`` -> _yearless,
 * plus the fraction. ``(\d{1,2})(\d{2}) `` is "MMDD " (tried first) or "MDD ". */
static int
read_glog(const uchar *s, Py_ssize_t n, Reference *ref, double *out)
{
    const uchar *open = n > 0 ? memchr(s, '[', (size_t)n) : NULL;
    for (; open != NULL; open = open + 1 < s + n ? memchr(open + 1, '[', (size_t)(n - (open + 1 - s))) : NULL) {
        Py_ssize_t p = open - s;
        if (p + 14 > n || (s[p + 1] != 'I' && s[p + 1] != 'W' && s[p + 1] != 'E' && s[p + 1] != 'F'))
            continue;
        int mo, d, hh, mi, ss;
        Py_ssize_t i;
        if (digits_at(s, n, p + 2, 4) && p + 6 < n && s[p + 6] == ' ') {
            mo = two(s + p + 2);
            d = two(s + p + 4);
            i = p + 7;
        }
        else if (digits_at(s, n, p + 2, 3) && p + 5 < n && s[p + 5] == ' ') {
            mo = s[p + 2] - '0';
            d = two(s + p + 3);
            i = p + 6;
        }
        else
            continue;
        if (!clock_at(s, n, i, &hh, &mi, &ss))
            continue;
        i += 8;
        double t;
        if (!yearless(ref, mo, d, hh, mi, ss, &t))
            return MATCH_NONE;
        if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1]))
            t += fraction(s, i + 1, fraction_digits(s, n, i + 1));
        *out = t;
        return MATCH_VALUE;
    }
    return NO_MATCH;
}

/* ``^\s*(?:\([^)]{1,200}\)\s*)?[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.\d+ +\d+ `` -> _yearless.
 * The group matches when the first ")" after the "(" is 1-200 characters after it; a line
 * starting with "(" otherwise cannot match. Digits, spaces and ")" never overlap with what
 * follows them, so the greedy match is the only one. */
static int
read_glog_bare(const uchar *s, Py_ssize_t n, Reference *ref, double *out)
{
    Py_ssize_t i = skip_space(s, n, 0);
    if (i < n && s[i] == '(') {
        Py_ssize_t avail = n - (i + 1);
        const uchar *close = avail > 0 ? memchr(s + i + 1, ')', (size_t)(avail < 201 ? avail : 201)) : NULL;
        if (close == NULL || close == s + i + 1)
            return NO_MATCH;
        i = skip_space(s, n, close - s + 1);
    }
    if (i + 15 > n || (s[i] != 'I' && s[i] != 'W' && s[i] != 'E' && s[i] != 'F') ||
        !digits_at(s, n, i + 1, 4) || s[i + 5] != ' ')
        return NO_MATCH;
    int hh, mi, ss;
    if (!clock_at(s, n, i + 6, &hh, &mi, &ss) || s[i + 14] != '.')
        return NO_MATCH;
    Py_ssize_t j = i + 15;
    if (j >= n || !is_digit(s[j]))
        return NO_MATCH;
    while (j < n && is_digit(s[j]))
        j++;
    if (j >= n || s[j] != ' ')
        return NO_MATCH;
    while (j < n && s[j] == ' ')
        j++;
    if (j >= n || !is_digit(s[j]))
        return NO_MATCH;
    while (j < n && is_digit(s[j]))
        j++;
    if (j >= n || s[j] != ' ')
        return NO_MATCH;
    return yearless(ref, two(s + i + 1), two(s + i + 3), hh, mi, ss, out) ? MATCH_VALUE : MATCH_NONE;
}

/* ------------------------------------------------------------------ the module functions */

/* A str's characters are readable by kind (always so from 3.12; a legacy 3.11 str may need
 * preparing, and one that cannot be prepared goes to the fallback with its error cleared). */
static int
is_ready(PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        PyErr_Clear();
        return 0;
    }
#else
    (void)text;
#endif
    return 1;
}

/* The result of line_timestamp, or NotImplemented (a new reference; NULL only on error). */
static PyObject *
line_timestamp_impl(PyObject *text, PyObject *reference)
{
    if (!PyUnicode_Check(text) || !is_ready(text) || !PyUnicode_IS_ASCII(text))
        Py_RETURN_NOTIMPLEMENTED;
    Reference ref = {0, 0.0, 0};
    if (reference != Py_None) {
        if (PyFloat_CheckExact(reference))
            ref.epoch = PyFloat_AS_DOUBLE(reference);
        else if (PyLong_CheckExact(reference)) {
            int overflow;
            long long v = PyLong_AsLongLongAndOverflow(reference, &overflow);
            if (overflow || v < 0 || v > (long long)MAX_REFERENCE)
                Py_RETURN_NOTIMPLEMENTED;
            ref.epoch = (double)v;
        }
        else
            Py_RETURN_NOTIMPLEMENTED;
        if (!(ref.epoch >= 0.0 && ref.epoch <= MAX_REFERENCE))   /* NaN too */
            Py_RETURN_NOTIMPLEMENTED;
        ref.given = 1;
    }
    const uchar *s = (const uchar *)PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    double t = 0.0;
    int r = read_dmesg(s, n, &t);
    if (r == NO_MATCH)
        r = read_syslog(s, n, &ref, &t);
    if (r == NO_MATCH)
        r = read_iso(s, n, &t);
    if (r == NO_MATCH)
        r = read_vllm(s, n, &ref, &t);
    if (r == NO_MATCH)
        r = read_glog(s, n, &ref, &t);
    if (r == NO_MATCH)
        r = read_glog_bare(s, n, &ref, &t);
    if (r == MATCH_VALUE)
        return PyFloat_FromDouble(t);
    Py_RETURN_NONE;
}

/* The result of parse_iso, or NotImplemented (a new reference). */
static PyObject *
parse_iso_impl(PyObject *text)
{
    if (!PyUnicode_Check(text) || !is_ready(text) || !PyUnicode_IS_ASCII(text))
        Py_RETURN_NOTIMPLEMENTED;
    const uchar *s = (const uchar *)PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n < 19 || !digits_at(s, n, 0, 4) || s[4] != '-' || !digits_at(s, n, 5, 2) || s[7] != '-' ||
        !digits_at(s, n, 8, 2) || (s[10] != 'T' && s[10] != ' '))
        Py_RETURN_NOTIMPLEMENTED;
    int hh, mi, ss;
    if (!clock_at(s, n, 11, &hh, &mi, &ss))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t i = 19;
    long micros = 0;
    if (i < n && s[i] == '.') {
        Py_ssize_t k = 0;
        while (i + 1 + k < n && is_digit(s[i + 1 + k]))
            k++;
        if (k != 3 && k != 6)
            Py_RETURN_NOTIMPLEMENTED;
        for (Py_ssize_t j = 0; j < k; j++)
            micros = micros * 10 + (s[i + 1 + j] - '0');
        if (k == 3)
            micros *= 1000;
        i += 1 + k;
    }
    long offset = 0;
    if (i < n) {
        if (s[i] == 'Z' && i + 1 == n)
            i += 1;
        else if ((s[i] == '+' || s[i] == '-') && i + 6 == n && digits_at(s, n, i + 1, 2) && s[i + 3] == ':' &&
                 digits_at(s, n, i + 4, 2) && two(s + i + 1) <= 23 && two(s + i + 4) <= 59) {
            offset = (s[i] == '-' ? -1 : 1) * (two(s + i + 1) * 3600L + two(s + i + 4) * 60L);
            i += 6;
        }
        else
            Py_RETURN_NOTIMPLEMENTED;
    }
    int64_t secs;
    if (!epoch_seconds(two(s) * 100 + two(s + 2), two(s + 5), two(s + 8), hh, mi, ss, &secs))
        Py_RETURN_NOTIMPLEMENTED;
    int64_t total_us = (secs - offset) * 1000000 + micros;
    if (total_us >= EXACT_LIMIT || total_us <= -EXACT_LIMIT)
        Py_RETURN_NOTIMPLEMENTED;
    return PyFloat_FromDouble((double)total_us / 1e6);
}

static PyObject *
wrong_arguments(const char *name, Py_ssize_t nargs)
{
    PyErr_Format(PyExc_TypeError, "%s expected 2 arguments, got %zd", name, nargs);
    return NULL;
}

static PyObject *
line_timestamp(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return wrong_arguments("line_timestamp", nargs);
    return line_timestamp_impl(args[0], args[1]);
}

static PyObject *
parse_iso(PyObject *Py_UNUSED(module), PyObject *text)
{
    return parse_iso_impl(text);
}

static PyObject *
line_timestamp_with_fallback(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return wrong_arguments("line_timestamp_with_fallback", nargs);
    PyObject *result = line_timestamp_impl(args[0], args[1]);
    if (result != Py_NotImplemented)
        return result;
    Py_DECREF(result);
    if (line_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "line_timestamp_with_fallback: set_fallback() was not called");
        return NULL;
    }
    return PyObject_Vectorcall(line_fallback, args, 2, NULL);
}

static PyObject *
parse_iso_with_fallback(PyObject *Py_UNUSED(module), PyObject *text)
{
    PyObject *result = parse_iso_impl(text);
    if (result != Py_NotImplemented)
        return result;
    Py_DECREF(result);
    if (iso_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "parse_iso_with_fallback: set_fallback() was not called");
        return NULL;
    }
    return PyObject_CallOneArg(iso_fallback, text);
}

static PyObject *
set_fallback(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *line_fn, *iso_fn;
    if (!PyArg_ParseTuple(args, "OO:set_fallback", &line_fn, &iso_fn))
        return NULL;
    if (!PyCallable_Check(line_fn) || !PyCallable_Check(iso_fn)) {
        PyErr_SetString(PyExc_TypeError, "set_fallback: both fallbacks must be callable");
        return NULL;
    }
    Py_INCREF(line_fn);
    Py_INCREF(iso_fn);
    Py_XSETREF(line_fallback, line_fn);
    Py_XSETREF(iso_fallback, iso_fn);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"line_timestamp", (PyCFunction)(void (*)(void))line_timestamp, METH_FASTCALL,
     "line_timestamp(text, reference_epoch) -> float | None | NotImplemented (not handled here)"},
    {"parse_iso", parse_iso, METH_O, "parse_iso(text) -> float | NotImplemented (not handled here)"},
    {"line_timestamp_with_fallback", (PyCFunction)(void (*)(void))line_timestamp_with_fallback, METH_FASTCALL,
     "line_timestamp_with_fallback(text, reference_epoch) -> float | None: line_timestamp, else the fallback"},
    {"parse_iso_with_fallback", parse_iso_with_fallback, METH_O,
     "parse_iso_with_fallback(text) -> float | None: parse_iso, else the fallback"},
    {"set_fallback", set_fallback, METH_VARARGS,
     "set_fallback(line_fn, iso_fn): what the *_with_fallback functions call for what they do not handle"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef timestamps_module = {
    PyModuleDef_HEAD_INIT, "rlhealth.probes.parse._timestamps",
    "Timestamps of log lines and ISO-8601 strings (see probes/parse/timestamps.py).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__timestamps(void)
{
    return PyModule_Create(&timestamps_module);
}
