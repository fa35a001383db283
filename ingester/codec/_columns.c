/* Row images -> column buffers in Arrow's memory layout, for the land job's decoder.
 *
 * A rows event's body (after the column bitmaps) is walked by a plan built once per table map, rows
 * event type and bitmaps (streaming_job/decode/arrow_rows.py): one op per present column of each image,
 * saying how to read its value and how wide its lake value is. The result per column is a validity
 * bitmap, a data buffer and (for variable-width values) int32 offsets, which Python wraps into Arrow
 * arrays without touching a value.
 *
 * Like the JSONL emitter it never reports errors: anything malformed, truncated or outside what it
 * converts exactly as the Python reference path (codec/rows.py + streaming_job/decode/lake_types.py) does --
 * a negative DATETIME2, an impossible date, a fraction out of range -- makes decode() return None, and
 * Python decodes that event (or raises the codec's BinlogError with its position). Every read is
 * bounds-checked against the event's end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_bytes.h"

enum {
    OP_INT = 1,   /* a: stored bytes (1,2,3,4,8), b: signed, c: lake bytes (1,2,4,8,16) */
    OP_COPY,      /* a: bytes (FLOAT, DOUBLE: IEEE little-endian both sides) */
    OP_YEAR,      /* 1 byte -> int32: 0 or 1900 + v */
    OP_DECIMAL,   /* a: precision (<= 38), b: scale -> decimal128 */
    OP_DATE,      /* 3 bytes -> date32 (zero dates NULL) */
    OP_DATETIME2, /* a: fsp -> int64 microseconds, civil time (zero dates NULL) */
    OP_TIMESTAMP2,/* a: fsp -> int64 microseconds since the epoch (0 NULL) */
    OP_TIME2,     /* a: fsp -> int64 signed microseconds */
    OP_BIT,       /* a: bytes (big-endian) -> int64 (two's complement of the 64 bits) */
    OP_NUMBER,    /* a: bytes (little-endian, ENUM index / SET mask) -> int64 */
    OP_STRING,    /* a: length bytes, b: check (0 none, 1 UTF-8, 2 ASCII), c: zero-pad to -> offsets + data */
    OP_RAW_FIXED, /* a: bytes -> the value's bytes (binary), converted by Python */
    OP_RAW_PREFIXED, /* a: length bytes -> length and value bytes (binary), converted by Python */
    OP_NULL,      /* no bytes: always NULL */
    OP_LAST
};

typedef struct {
    int op, a, b, c;
} Col;

typedef struct {
    int nimages;
    Py_ssize_t ncols[2];
    Col *cols[2];
} Plan;

static const char PLAN_NAME[] = "binlake.columns.Plan";

static void plan_free(PyObject *capsule) {
    Plan *plan = PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (!plan) return;
    for (int i = 0; i < plan->nimages; i++) PyMem_Free(plan->cols[i]);
    PyMem_Free(plan);
}

static int valid_op(const Col *c) {
    switch (c->op) {
    case OP_INT:
        return (c->a == 1 || c->a == 2 || c->a == 3 || c->a == 4 || c->a == 8) &&
               (c->c == 1 || c->c == 2 || c->c == 4 || c->c == 8 || c->c == 16) && c->c >= c->a;
    case OP_COPY: return c->a == 4 || c->a == 8;
    case OP_DECIMAL: return c->a > 0 && c->a <= 38 && c->b >= 0 && c->b <= 30 && c->b <= c->a;
    case OP_DATETIME2: case OP_TIMESTAMP2: case OP_TIME2: return c->a >= 0 && c->a <= 6;
    case OP_BIT: case OP_NUMBER: case OP_RAW_FIXED: return c->a >= 1 && c->a <= (c->op == OP_RAW_FIXED ? 64 : 8);
    case OP_STRING: return c->a >= 1 && c->a <= 4 && c->b >= 0 && c->b <= 2 && c->c >= 0;
    case OP_RAW_PREFIXED: return c->a >= 1 && c->a <= 4;
    case OP_YEAR: case OP_DATE: case OP_NULL: return 1;
    default: return 0;
    }
}

/* plan(((op, a, b, c), ...), ...): one tuple per image (one or two) -> an opaque plan. */
static PyObject *make_plan(PyObject *module, PyObject *images) {
    if (!PyTuple_Check(images) || PyTuple_GET_SIZE(images) < 1 || PyTuple_GET_SIZE(images) > 2) {
        PyErr_SetString(PyExc_ValueError, "plan: one or two images");
        return NULL;
    }
    Plan *plan = PyMem_Calloc(1, sizeof(Plan));
    if (!plan) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(plan, PLAN_NAME, plan_free);
    if (!capsule) {
        PyMem_Free(plan);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(images); i++) {
        PyObject *cols = PyTuple_GET_ITEM(images, i);
        if (!PyTuple_Check(cols) || PyTuple_GET_SIZE(cols) < 1) {
            PyErr_SetString(PyExc_ValueError, "plan: an image is a non-empty tuple of column ops");
            goto fail;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(cols);
        plan->cols[i] = PyMem_Calloc(n, sizeof(Col));
        if (!plan->cols[i]) {
            PyErr_NoMemory();
            goto fail;
        }
        plan->nimages = (int)i + 1;
        plan->ncols[i] = n;
        for (Py_ssize_t k = 0; k < n; k++) {
            Col *c = &plan->cols[i][k];
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cols, k), "iiii", &c->op, &c->a, &c->b, &c->c)) goto fail;
            if (!valid_op(c)) {
                PyErr_Format(PyExc_ValueError, "plan: bad column op (%d, %d, %d, %d)", c->op, c->a, c->b, c->c);
                goto fail;
            }
        }
    }
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    uint8_t *p;
    Py_ssize_t len, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t n) { return grow_buffer((void **)&b->p, b->len, &b->cap, n, 256); }

/* One column's output. */
typedef struct {
    Buf data, offsets, valid;
    Py_ssize_t nulls;
    int unchecked; /* a value failed the string check: Python converts this column from its bytes */
} Out;

static void out_free(Out *o) {
    PyMem_Free(o->data.p);
    PyMem_Free(o->offsets.p);
    PyMem_Free(o->valid.p);
}

/* ------------------------------------------------------------------ values */

/* Strict UTF-8 (Python's decoder: no overlongs, surrogates or code points above U+10FFFF). */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F)) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F)) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int ascii_only(const uint8_t *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] & 0x80) return 0;
    return 1;
}

static const int64_t POW10[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};

/* Fraction bytes of DATETIME2/TIMESTAMP2 as microseconds cut to fsp digits (values.fraction); -1 if
 * they exceed a second (the text path would print 7 digits: Python's business). */
static inline int64_t fraction(const uint8_t *p, int fsp) {
    static const int64_t SCALE[3] = {10000, 100, 1};
    int n = (fsp + 1) / 2;
    if (!n) return 0;
    int64_t v = (int64_t)be_uint(p, n) * SCALE[n - 1];
    if (v >= 1000000) return -1;
    return v - v % POW10[6 - fsp];
}

static inline int days_in_month(int64_t y, unsigned m) {
    static const uint8_t DAYS[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? 29 : DAYS[m];
}

/* Days since the epoch of y-m-d: 0 done, 2 a zero date (NULL), 1 not a calendar date (Python's). */
static inline int date_days(int64_t y, unsigned m, unsigned d, int64_t *days) {
    if (!y || !m || !d) return 2;
    if (y > 9999 || m > 12 || d > (unsigned)days_in_month(y, m)) return 1;
    *days = days_from_civil(y, m, d);
    return 0;
}

/* Packed DECIMAL(precision <= 38, scale) -> its unscaled value; 1 on a corrupt digit group. */
static int decimal128(const uint8_t *p, int precision, int scale, __int128 *out) {
    uint8_t d[32];
    int bytes[16], digits[16], ng = decimal_groups(precision, scale, bytes, digits);
    int size = decimal_size(precision, scale), at = 0;
    int negative = !(p[0] & 0x80);
    for (int i = 0; i < size; i++) d[i] = negative ? (uint8_t)~p[i] : p[i];
    d[0] ^= 0x80;
    __int128 v = 0;
    for (int g = 0; g < ng; g++) {
        uint32_t x = (uint32_t)be_uint(d + at, bytes[g]);
        at += bytes[g];
        if (x >= POW10_9[digits[g]]) return 1;
        v = v * POW10_9[digits[g]] + x;
    }
    *out = negative ? -v : v;
    return 0;
}

/* Append one non-NULL value at b[*pp] (< end) to o: 0 done, 2 NULL after all (zero dates), 1 leave the
 * event to Python, -1 error (exception set). */
static int value(Out *o, const Col *c, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    Py_ssize_t p = *pp, left = end - p;
    uint8_t fixed[16];
    int width = 8; /* bytes of fixed[] to append */
    switch (c->op) {
    case OP_INT: {
        if (left < c->a) return 1;
        uint64_t v = le_uint(b + p, c->a);
        if (c->b && c->a < 8) {
            int shift = 64 - 8 * c->a;
            v = (uint64_t)((int64_t)(v << shift) >> shift);
        }
        uint8_t fill = c->b && (v >> 63) ? 0xFF : 0;
        memset(fixed, fill, sizeof fixed);
        for (int i = 0; i < 8; i++) fixed[i] = (uint8_t)(v >> (8 * i));
        width = c->c;
        p += c->a;
        break;
    }
    case OP_COPY:
        if (left < c->a) return 1;
        memcpy(fixed, b + p, c->a);
        width = c->a;
        p += c->a;
        break;
    case OP_YEAR: {
        if (left < 1) return 1;
        int32_t v = b[p] ? 1900 + b[p] : 0;
        memcpy(fixed, &v, 4);
        width = 4;
        p += 1;
        break;
    }
    case OP_DECIMAL: {
        int size = decimal_size(c->a, c->b);
        if (left < size) return 1;
        __int128 v;
        if (decimal128(b + p, c->a, c->b, &v)) return 1;
        memcpy(fixed, &v, 16);
        width = 16;
        p += size;
        break;
    }
    case OP_DATE: {
        if (left < 3) return 1;
        uint32_t v = le24(b + p);
        int64_t days;
        int r = date_days(v >> 9, v >> 5 & 15, v & 31, &days);
        if (r) {
            if (r == 2) *pp = p + 3;
            return r;
        }
        int32_t d32 = (int32_t)days;
        memcpy(fixed, &d32, 4);
        width = 4;
        p += 3;
        break;
    }
    case OP_DATETIME2: {
        int n = 5 + (c->a + 1) / 2;
        if (left < n) return 1;
        uint64_t x = be_uint(b + p, 5);
        if (x < 0x8000000000ull) return 1;
        x -= 0x8000000000ull;
        uint64_t ymd = x >> 17, ym = ymd >> 5;
        unsigned h = x >> 12 & 31, mi = x >> 6 & 63, s = x & 63;
        int64_t days, frac = fraction(b + p + 5, c->a);
        int r = date_days((int64_t)(ym / 13), (unsigned)(ym % 13), (unsigned)(ymd & 31), &days);
        if (r == 2) {
            *pp = p + n;
            return 2;
        }
        if (r || frac < 0 || h > 23 || mi > 59 || s > 59) return 1;
        int64_t us = (days * 86400 + h * 3600 + mi * 60 + s) * 1000000 + frac;
        memcpy(fixed, &us, 8);
        p += n;
        break;
    }
    case OP_TIMESTAMP2: {
        int n = 4 + (c->a + 1) / 2;
        if (left < n) return 1;
        int64_t secs = (int64_t)be_uint(b + p, 4), frac = fraction(b + p + 4, c->a);
        if (!secs) {
            *pp = p + n;
            return 2;
        }
        if (frac < 0) return 1;
        int64_t us = secs * 1000000 + frac;
        memcpy(fixed, &us, 8);
        p += n;
        break;
    }
    case OP_TIME2: { /* values.time2, then lake_types.time_micros of its text */
        int n = (c->a + 1) / 2;
        if (left < 3 + n) return 1;
        int64_t packed = time2_packed(b + p, n);
        int negative = packed < 0;
        if (negative) packed = -packed;
        int64_t hms = packed >> 24, micros = packed & 0xFFFFFF;
        if (micros >= 1000000) return 1;
        micros -= micros % POW10[6 - c->a];
        int64_t us = (((hms >> 12 & 0x3FF) * 60 + (hms >> 6 & 63)) * 60 + (hms & 63)) * 1000000 + micros;
        if (negative) us = -us;
        memcpy(fixed, &us, 8);
        p += 3 + n;
        break;
    }
    case OP_BIT: {
        if (left < c->a) return 1;
        uint64_t v = be_uint(b + p, c->a);
        memcpy(fixed, &v, 8);
        p += c->a;
        break;
    }
    case OP_NUMBER: {
        if (left < c->a) return 1;
        uint64_t v = le_uint(b + p, c->a);
        if (v >> 63) return 1;
        memcpy(fixed, &v, 8);
        p += c->a;
        break;
    }
    case OP_STRING:
    case OP_RAW_PREFIXED: {
        if (left < c->a) return 1;
        Py_ssize_t n = (Py_ssize_t)le_uint(b + p, c->a);
        if (n > left - c->a) return 1;
        const uint8_t *s = b + p + c->a;
        Py_ssize_t take = n, pad = 0;
        if (c->op == OP_RAW_PREFIXED) {
            s = b + p;
            take = n + c->a;
        } else {
            if (c->b == 1 && !o->unchecked && !utf8_valid(s, n)) o->unchecked = 1;
            if (c->b == 2 && !o->unchecked && !ascii_only(s, n)) o->unchecked = 1;
            if (n < c->c) pad = c->c - n;
        }
        if (o->data.len + take + pad > INT32_MAX) return 1;
        if (grow(&o->data, take + pad) < 0) return -1;
        memcpy(o->data.p + o->data.len, s, take);
        memset(o->data.p + o->data.len + take, 0, pad);
        o->data.len += take + pad;
        *pp = p + c->a + n;
        return 0;
    }
    case OP_RAW_FIXED:
        if (left < c->a) return 1;
        if (o->data.len + c->a > INT32_MAX) return 1;
        if (grow(&o->data, c->a) < 0) return -1;
        memcpy(o->data.p + o->data.len, b + p, c->a);
        o->data.len += c->a;
        *pp = p + c->a;
        return 0;
    case OP_NULL:
        return 2;
    }
    if (grow(&o->data, width) < 0) return -1;
    memcpy(o->data.p + o->data.len, fixed, width);
    o->data.len += width;
    *pp = p;
    return 0;
}

static inline int variable(const Col *c) {
    return c->op == OP_STRING || c->op == OP_RAW_FIXED || c->op == OP_RAW_PREFIXED;
}

static inline Py_ssize_t lake_width(const Col *c) {
    switch (c->op) {
    case OP_INT: return c->c;
    case OP_COPY: return c->a;
    case OP_YEAR: case OP_DATE: return 4;
    case OP_DECIMAL: return 16;
    default: return 8;
    }
}

/* Append a NULL to o (zeroed fixed-width slot, or an empty string). */
static int null_value(Out *o, const Col *c) {
    o->nulls++;
    if (variable(c) || c->op == OP_NULL) return 0;
    Py_ssize_t w = lake_width(c);
    if (grow(&o->data, w) < 0) return -1;
    memset(o->data.p + o->data.len, 0, w);
    o->data.len += w;
    return 0;
}

/* ------------------------------------------------------------------ rows */

static int set_validity(Out *o, Py_ssize_t row, int valid) {
    if ((row & 7) == 0) {
        if (grow(&o->valid, 1) < 0) return -1;
        o->valid.p[o->valid.len++] = 0;
    }
    if (valid) o->valid.p[row >> 3] |= (uint8_t)(1 << (row & 7));
    return 0;
}

static int add_offset(Out *o) {
    if (grow(&o->offsets, 4) < 0) return -1;
    int32_t at = (int32_t)o->data.len;
    memcpy(o->offsets.p + o->offsets.len, &at, 4);
    o->offsets.len += 4;
    return 0;
}

/* Walk b[p:end]: 0 done (*rows set), 1 leave the event to Python, -1 error. */
static int walk(const Plan *plan, Out **outs, const uint8_t *b, Py_ssize_t p, Py_ssize_t end, Py_ssize_t *rows) {
    Py_ssize_t row = 0;
    for (int i = 0; i < plan->nimages; i++)
        for (Py_ssize_t k = 0; k < plan->ncols[i]; k++)
            if (variable(&plan->cols[i][k]) && add_offset(&outs[i][k]) < 0) return -1;
    while (p < end) {
        for (int i = 0; i < plan->nimages; i++) {
            Py_ssize_t ncols = plan->ncols[i], nullbytes = (ncols + 7) / 8;
            if (end - p < nullbytes) return 1;
            const uint8_t *nulls = b + p;
            p += nullbytes;
            for (Py_ssize_t k = 0; k < ncols; k++) {
                const Col *c = &plan->cols[i][k];
                Out *o = &outs[i][k];
                int r = nulls[k >> 3] >> (k & 7) & 1 ? 2 : value(o, c, b, &p, end);
                if (r == 1 || r < 0) return r;
                if (r == 2 && null_value(o, c) < 0) return -1;
                if (set_validity(o, row, r == 0) < 0) return -1;
                if (variable(c) && add_offset(o) < 0) return -1;
            }
        }
        row++;
    }
    *rows = row;
    return p == end ? 0 : 1;
}

static PyObject *bytes_of(const Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? (const char *)b->p : "", b->len);
}

/* The image's columns: (validity bytes | None, data bytes, offsets bytes | None, null count, unchecked). */
static PyObject *image_result(const Plan *plan, int i, Out *outs) {
    PyObject *cols = PyTuple_New(plan->ncols[i]);
    if (!cols) return NULL;
    for (Py_ssize_t k = 0; k < plan->ncols[i]; k++) {
        Out *o = &outs[k];
        PyObject *valid = o->nulls ? bytes_of(&o->valid) : Py_NewRef(Py_None);
        PyObject *data = bytes_of(&o->data);
        PyObject *offsets = variable(&plan->cols[i][k]) ? bytes_of(&o->offsets) : Py_NewRef(Py_None);
        PyObject *col = NULL;
        if (valid && data && offsets) {
            col = Py_BuildValue("(OOOnO)", valid, data, offsets, o->nulls, o->unchecked ? Py_True : Py_False);
        }
        Py_XDECREF(valid);
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        if (!col) {
            Py_DECREF(cols);
            return NULL;
        }
        PyTuple_SET_ITEM(cols, k, col);
    }
    return cols;
}

/* decode(plan, buf, pos, end) -> (rows, (image columns, ...)) or None: Python decodes the event. */
static PyObject *decode(PyObject *module, PyObject *args) {
    PyObject *capsule;
    Py_buffer view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "Oy*nn:decode", &capsule, &view, &pos, &end)) return NULL;
    Plan *plan = PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (!plan || pos < 0 || end > view.len || pos > end) {
        if (plan) PyErr_SetString(PyExc_ValueError, "decode: pos/end outside the buffer");
        PyBuffer_Release(&view);
        return NULL;
    }
    Out *outs[2] = {NULL, NULL};
    PyObject *result = NULL;
    int r = -1;
    for (int i = 0; i < plan->nimages; i++) {
        outs[i] = PyMem_Calloc(plan->ncols[i], sizeof(Out));
        if (!outs[i]) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_ssize_t rows = 0;
    r = walk(plan, outs, view.buf, pos, end, &rows);
    if (r == 1) {
        result = Py_NewRef(Py_None);
    } else if (r == 0) {
        PyObject *images = PyTuple_New(plan->nimages);
        for (int i = 0; images && i < plan->nimages; i++) {
            PyObject *cols = image_result(plan, i, outs[i]);
            if (!cols) {
                Py_CLEAR(images);
                break;
            }
            PyTuple_SET_ITEM(images, i, cols);
        }
        if (images) result = Py_BuildValue("(nN)", rows, images);
    }
done:
    for (int i = 0; i < plan->nimages; i++) {
        if (!outs[i]) continue;
        for (Py_ssize_t k = 0; k < plan->ncols[i]; k++) out_free(&outs[i][k]);
        PyMem_Free(outs[i]);
    }
    PyBuffer_Release(&view);
    return result;
}

/* Append bits [0, n) of src (NULL: all set) to dst at bit `at` (dst zeroed beforehand). */
static void copy_bits(uint8_t *dst, Py_ssize_t at, const uint8_t *src, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++, at++)
        if (!src || src[i >> 3] >> (i & 7) & 1) dst[at >> 3] |= (uint8_t)(1 << (at & 7));
}

/* concat(chunks, width) -> one column result from several: chunks is a sequence of (rows, result
 * or None: that many NULLs), width the lake value's bytes (0: variable width, offsets + data).
 * None when the joined data would pass int32 offsets (Python joins the arrays instead). */
static PyObject *concat(PyObject *module, PyObject *args) {
    PyObject *seq;
    int width;
    if (!PyArg_ParseTuple(args, "Oi:concat", &seq, &width)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "concat: chunks must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t nchunks = PySequence_Fast_GET_SIZE(fast), rows = 0, nulls = 0, bytes = 0;
    int unchecked = 0;
    PyObject *result = NULL;
    uint8_t *valid = NULL, *data = NULL;
    int32_t *offsets = NULL;
    /* first pass: sizes */
    for (Py_ssize_t i = 0; i < nchunks; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *got;
        Py_ssize_t n;
        if (!PyArg_ParseTuple(item, "nO", &n, &got)) goto done;
        if (n < 0) {
            PyErr_SetString(PyExc_ValueError, "concat: negative row count");
            goto done;
        }
        rows += n;
        if (got == Py_None) {
            nulls += n;
            bytes += width ? n * width : 0;
            continue;
        }
        PyObject *v, *d, *o, *u;
        Py_ssize_t k;
        if (!PyArg_ParseTuple(got, "OSOnO", &v, &d, &o, &k, &u)) goto done;
        if ((v != Py_None && (!PyBytes_Check(v) || PyBytes_GET_SIZE(v) < (n + 7) / 8)) ||
            (width && PyBytes_GET_SIZE(d) != n * width) ||
            (!width && (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) != (n + 1) * 4))) {
            PyErr_SetString(PyExc_ValueError, "concat: a chunk's buffers do not match its rows");
            goto done;
        }
        nulls += k;
        bytes += PyBytes_GET_SIZE(d);
        unchecked |= PyObject_IsTrue(u) == 1;
    }
    if (!width && bytes > INT32_MAX) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    valid = nulls ? PyMem_Calloc((rows + 7) / 8 + 1, 1) : NULL;
    data = PyMem_Calloc(bytes + 1, 1);
    offsets = width ? NULL : PyMem_Malloc((rows + 1) * 4);
    if ((nulls && !valid) || !data || (!width && !offsets)) {
        PyErr_NoMemory();
        goto done;
    }
    /* second pass: copy */
    Py_ssize_t at = 0, pos = 0;
    if (offsets) offsets[0] = 0;
    for (Py_ssize_t i = 0; i < nchunks; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
        PyObject *got = PyTuple_GET_ITEM(item, 1);
        if (got == Py_None) {
            if (offsets)
                for (Py_ssize_t r = 1; r <= n; r++) offsets[at + r] = (int32_t)pos;
            else
                pos += n * width;
            at += n;
            continue;
        }
        PyObject *v = PyTuple_GET_ITEM(got, 0), *d = PyTuple_GET_ITEM(got, 1), *o = PyTuple_GET_ITEM(got, 2);
        if (valid) copy_bits(valid, at, v == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(v), n);
        memcpy(data + pos, PyBytes_AS_STRING(d), PyBytes_GET_SIZE(d));
        if (offsets) {
            const uint8_t *src = (const uint8_t *)PyBytes_AS_STRING(o);
            int32_t first;
            memcpy(&first, src, 4);
            for (Py_ssize_t r = 1; r <= n; r++) {
                int32_t off;
                memcpy(&off, src + 4 * r, 4);
                offsets[at + r] = (int32_t)(pos + off - first);
            }
        }
        pos += PyBytes_GET_SIZE(d);
        at += n;
    }
    PyObject *vb = valid ? PyBytes_FromStringAndSize((const char *)valid, (rows + 7) / 8) : Py_NewRef(Py_None);
    PyObject *db = PyBytes_FromStringAndSize((const char *)data, bytes);
    PyObject *ob = offsets ? PyBytes_FromStringAndSize((const char *)offsets, (rows + 1) * 4) : Py_NewRef(Py_None);
    if (vb && db && ob) result = Py_BuildValue("(OOOnO)", vb, db, ob, nulls, unchecked ? Py_True : Py_False);
    Py_XDECREF(vb);
    Py_XDECREF(db);
    Py_XDECREF(ob);
done:
    PyMem_Free(valid);
    PyMem_Free(data);
    PyMem_Free(offsets);
    Py_DECREF(fast);
    return result;
}

static PyMethodDef methods[] = {
    {"plan", make_plan, METH_O, "A plan of column ops for rows events of one table map, type and bitmaps."},
    {"decode", decode, METH_VARARGS, "Row images of buf[pos:end] as column buffers, or None (Python's turn)."},
    {"concat", concat, METH_VARARGS, "One column's buffers from several events' (or runs of NULLs)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_columns", "Row images to Arrow-layout column buffers.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    /* the ops by name: streaming_job/decode/arrow_rows.py's copies are checked against them (tests/unit) */
    static const struct { const char *name; int value; } ops[] = {
        {"OP_INT", OP_INT}, {"OP_COPY", OP_COPY}, {"OP_YEAR", OP_YEAR}, {"OP_DECIMAL", OP_DECIMAL},
        {"OP_DATE", OP_DATE}, {"OP_DATETIME2", OP_DATETIME2}, {"OP_TIMESTAMP2", OP_TIMESTAMP2},
        {"OP_TIME2", OP_TIME2}, {"OP_BIT", OP_BIT}, {"OP_NUMBER", OP_NUMBER}, {"OP_STRING", OP_STRING},
        {"OP_RAW_FIXED", OP_RAW_FIXED}, {"OP_RAW_PREFIXED", OP_RAW_PREFIXED}, {"OP_NULL", OP_NULL},
        {"OP_LAST", OP_LAST},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (PyModule_AddIntConstant(m, ops[i].name, ops[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
