/* Native JSONL emitter for `binlake dump`: frames, checks and renders the common events of a binlog
 * buffer straight into JSON lines, byte-identical to the Python renderer (ingester/dump/jsonl.py).
 *
 * It only ever renders events it fully understands. Anything else -- an unknown or rare event type,
 * a value it does not format, a table map it has not seen, any malformed or truncated byte -- makes
 * it stop *before* that event and return its position: the Python decoder then handles the event,
 * producing the same output or raising the same BinlogError. So C never reports errors, and every
 * read is bounds-checked against the event it belongs to.
 *
 * The row images are walked by a RowsPlan: a compact per-(table map, rows event type, column
 * bitmaps) description built once in Python (ingester/dump/native.py), holding the pre-encoded JSON
 * of column names and labels.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ little helpers */

#include "../_bytes.h"
#include "../_crc32.h"
#include "../_json.h"
#include "../_module.h"

/* ------------------------------------------------------------------ row plans */

enum {
    OP_INT = 1,   /* a: byte width 1, 2, 3, 4 or 8; b: unsigned */
    OP_FLOAT,
    OP_DOUBLE,
    OP_YEAR,
    OP_DECIMAL,   /* a: precision, b: scale */
    OP_DATE,
    OP_DATETIME2, /* a: fractional digits */
    OP_TIMESTAMP2,
    OP_TIME2,
    OP_BIT,       /* a: byte width (<= 8) */
    OP_ENUM,      /* a: byte width (<= 8); labels: JSON strings, "" first */
    OP_SET,       /* a: byte width (<= 8); labels: escaped text without quotes */
    OP_TEXT,      /* a: length prefix width 1-4; b: ASCII only (else valid UTF-8 only) */
    OP_BINARY,    /* a: length prefix width 1-4; b: zero-pad to this length (BINARY(n)) */
    OP_NULL,
};

typedef struct {
    int op, a, b;
    const char *key; /* '"name":' or ',"name":' */
    Py_ssize_t keylen;
    PyObject *labels; /* tuple of bytes, or NULL */
} Col;

typedef struct {
    const char *prefix; /* '{"after":{' and friends */
    Py_ssize_t prefixlen;
    Py_ssize_t ncols, nullbytes;
    Col *cols;
} Image;

typedef struct {
    PyObject_HEAD
    PyObject *spec; /* keeps every bytes object the pointers below point into alive */
    const char *head, *middle;
    Py_ssize_t headlen, middlelen;
    Py_ssize_t column_count;
    int nimages;
    Image images[2];
} RowsPlan;

static void plan_dealloc(RowsPlan *self) {
    for (int i = 0; i < self->nimages; i++) PyMem_Free(self->images[i].cols);
    Py_XDECREF(self->spec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int bytes_of(PyObject *obj, const char **s, Py_ssize_t *n) {
    if (!PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "RowsPlan: expected bytes");
        return -1;
    }
    *s = PyBytes_AS_STRING(obj);
    *n = PyBytes_GET_SIZE(obj);
    return 0;
}

/* RowsPlan((head, middle, column_count, ((prefix, ((key, op, a, b, labels|None), ...)), ...))) */
static int plan_init(RowsPlan *self, PyObject *args, PyObject *kwds) {
    PyObject *spec, *images;
    if (!PyArg_ParseTuple(args, "O!:RowsPlan", &PyTuple_Type, &spec)) return -1;
    if (self->spec) {
        PyErr_SetString(PyExc_TypeError, "RowsPlan is initialised once");
        return -1;
    }
    PyObject *head, *middle;
    if (!PyArg_ParseTuple(spec, "SSnO!", &head, &middle, &self->column_count, &PyTuple_Type, &images))
        return -1;
    Py_ssize_t nimages = PyTuple_GET_SIZE(images);
    if (nimages < 1 || nimages > 2) {
        PyErr_SetString(PyExc_ValueError, "RowsPlan: one or two images");
        return -1;
    }
    Py_INCREF(spec);
    self->spec = spec;
    bytes_of(head, &self->head, &self->headlen);
    bytes_of(middle, &self->middle, &self->middlelen);
    for (Py_ssize_t i = 0; i < nimages; i++) {
        PyObject *prefix, *cols;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(images, i), "SO!", &prefix, &PyTuple_Type, &cols)) return -1;
        Image *im = &self->images[i];
        bytes_of(prefix, &im->prefix, &im->prefixlen);
        im->ncols = PyTuple_GET_SIZE(cols);
        im->nullbytes = (im->ncols + 7) / 8;
        im->cols = PyMem_Calloc(im->ncols ? im->ncols : 1, sizeof(Col));
        if (!im->cols) {
            PyErr_NoMemory();
            return -1;
        }
        self->nimages = (int)i + 1;
        for (Py_ssize_t k = 0; k < im->ncols; k++) {
            Col *c = &im->cols[k];
            PyObject *key, *labels;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cols, k), "SiiiO", &key, &c->op, &c->a, &c->b, &labels))
                return -1;
            bytes_of(key, &c->key, &c->keylen);
            if (labels != Py_None) {
                if (!PyTuple_Check(labels)) {
                    PyErr_SetString(PyExc_TypeError, "RowsPlan: labels must be a tuple");
                    return -1;
                }
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(labels); j++)
                    if (!PyBytes_Check(PyTuple_GET_ITEM(labels, j))) {
                        PyErr_SetString(PyExc_TypeError, "RowsPlan: labels must be bytes");
                        return -1;
                    }
                c->labels = labels;
            }
            int width_ok = 1;
            switch (c->op) {
            case OP_INT: width_ok = c->a == 1 || c->a == 2 || c->a == 3 || c->a == 4 || c->a == 8; break;
            case OP_BIT: case OP_ENUM: case OP_SET: width_ok = c->a >= 1 && c->a <= 8; break;
            case OP_TEXT: case OP_BINARY: width_ok = c->a >= 1 && c->a <= 4 && c->b >= 0; break;
            case OP_DECIMAL: width_ok = c->a > 0 && c->a <= 65 && c->b >= 0 && c->b <= 30 && c->b <= c->a; break;
            case OP_DATETIME2: case OP_TIMESTAMP2: case OP_TIME2: width_ok = c->a >= 0 && c->a <= 6; break;
            case OP_FLOAT: case OP_DOUBLE: case OP_YEAR: case OP_DATE: case OP_NULL: break;
            default: width_ok = 0;
            }
            if (!width_ok || ((c->op == OP_ENUM || c->op == OP_SET) && !c->labels)) {
                PyErr_Format(PyExc_ValueError, "RowsPlan: bad column op %d (%d, %d)", c->op, c->a, c->b);
                return -1;
            }
        }
    }
    return 0;
}

static PyTypeObject RowsPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ingester.dump._native.RowsPlan",
    .tp_doc = "How to render the rows of one (table map, rows event type, column bitmaps).",
    .tp_basicsize = sizeof(RowsPlan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
};

/* ------------------------------------------------------------------ values */

/* Three zero-padded numbers with separators: "hh:mm:ss" or "YYYY-MM-DD". */
static inline void put_triple(Out *o, uint64_t a, int width, char sep, uint64_t b, uint64_t c) {
    put_padded(o, a, width);
    o->buf[o->len++] = sep;
    put_padded(o, b, 2);
    o->buf[o->len++] = sep;
    put_padded(o, c, 2);
}

#define put_hms(o, h, m, s) put_triple((o), (h), 2, ':', (m), (s))
#define put_ymd(o, y, m, d) put_triple((o), (y), 4, '-', (m), (d))

/* TIMESTAMP2/DATETIME2 fraction bytes (big-endian) as microseconds, like values.read_frac. */
static inline uint64_t fraction(const uint8_t *p, int nbytes) {
    static const uint32_t SCALE[3] = {10000, 100, 1};
    return be_uint(p, nbytes) * SCALE[nbytes - 1];
}

/* '.' and micros as 6+ digits, of which the first `keep` are kept (values.fraction cuts the text). */
static inline void put_fraction(Out *o, uint64_t micros, int keep) {
    Py_ssize_t at = o->len;
    o->buf[o->len++] = '.';
    put_padded(o, micros, 6);
    if (o->len > at + 1 + keep) o->len = at + 1 + keep;
}

/* ------------------------------------------------------------------ row images */

/* Render one row image at *pp (< end); 0 done, 1 leave the event to Python, -1 error. */
static int put_image(Out *o, const Image *im, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    Py_ssize_t p = *pp;
    if (end - p < im->nullbytes) return 1;
    const uint8_t *nulls = b + p;
    p += im->nullbytes;
    if (reserve(o, im->prefixlen) < 0) return -1;
    put(o, im->prefix, im->prefixlen);
    for (Py_ssize_t k = 0; k < im->ncols; k++) {
        const Col *c = &im->cols[k];
        if (reserve(o, c->keylen + 48) < 0) return -1;
        put(o, c->key, c->keylen);
        if (nulls[k >> 3] >> (k & 7) & 1) {
            PUT_LIT(o, "null");
            continue;
        }
        Py_ssize_t left = end - p;
        switch (c->op) {
        case OP_INT: {
            if (left < c->a) return 1;
            uint64_t v = le_uint(b + p, c->a);
            p += c->a;
            if (c->b) {
                put_u64(o, v);
            } else {
                int shift = 64 - 8 * c->a;
                put_i64(o, (int64_t)(v << shift) >> shift);
            }
            break;
        }
        case OP_FLOAT:
        case OP_DOUBLE: {
            int width = c->op == OP_FLOAT ? 4 : 8;
            if (left < width) return 1;
            double v;
            if (width == 4) {
                uint32_t bits = le32(b + p);
                float f;
                memcpy(&f, &bits, 4);
                v = f;
            } else {
                uint64_t bits = le64(b + p);
                memcpy(&v, &bits, 8);
            }
            p += width;
            if (put_double(o, v) < 0) return -1;
            break;
        }
        case OP_YEAR:
            if (left < 1) return 1;
            put_u64(o, b[p] ? b[p] + 1900u : 0);
            p += 1;
            break;
        case OP_DECIMAL: {
            Py_ssize_t size = decimal_size(c->a, c->b);
            if (left < size) return 1;
            int r = put_decimal(o, b + p, c->a, c->b);
            if (r) return r;
            p += size;
            break;
        }
        case OP_DATE: {
            if (left < 3) return 1;
            uint32_t v = le24(b + p);
            p += 3;
            o->buf[o->len++] = '"';
            put_ymd(o, v >> 9, v >> 5 & 15, v & 31);
            o->buf[o->len++] = '"';
            break;
        }
        case OP_DATETIME2:
        case OP_TIMESTAMP2: {
            int head = c->op == OP_DATETIME2 ? 5 : 4, nfrac = (c->a + 1) / 2, keep = c->a;
            if (left < head + nfrac) return 1;
            uint64_t x = be_uint(b + p, head);
            o->buf[o->len++] = '"';
            if (c->op == OP_DATETIME2) {
                if (x < 0x8000000000ull) return 1; /* negative: Python's slow path */
                x -= 0x8000000000ull;
                uint64_t ymd = x >> 17, ym = ymd >> 5;
                put_ymd(o, ym / 13, ym % 13, ymd & 31);
                o->buf[o->len++] = ' ';
                put_hms(o, x >> 12 & 31, x >> 6 & 63, x & 63);
                if (keep == 6) keep = 8; /* rows.py cuts fsp < 6 only */
            } else if (!x) {
                PUT_LIT(o, "0000-00-00 00:00:00");
            } else {
                int64_t y;
                unsigned m, d;
                civil((int64_t)(x / 86400), &y, &m, &d);
                put_ymd(o, (uint64_t)y, m, d);
                o->buf[o->len++] = ' ';
                put_hms(o, x % 86400 / 3600, x % 3600 / 60, x % 60);
            }
            if (c->a) put_fraction(o, fraction(b + p + head, nfrac), keep);
            o->buf[o->len++] = '"';
            p += head + nfrac;
            break;
        }
        case OP_TIME2: {
            int n = (c->a + 1) / 2;
            if (left < 3 + n) return 1;
            int64_t packed = time2_packed(b + p, n);
            o->buf[o->len++] = '"';
            if (packed < 0) {
                o->buf[o->len++] = '-';
                packed = -packed;
            }
            uint64_t hms = (uint64_t)packed >> 24, micros = (uint64_t)packed & 0xFFFFFF;
            put_hms(o, hms >> 12 & 0x3FF, hms >> 6 & 63, hms & 63);
            if (c->a) put_fraction(o, micros, c->a);
            o->buf[o->len++] = '"';
            p += 3 + n;
            break;
        }
        case OP_BIT:
            if (left < c->a) return 1;
            put_u64(o, be_uint(b + p, c->a));
            p += c->a;
            break;
        case OP_ENUM: {
            if (left < c->a) return 1;
            uint64_t v = le_uint(b + p, c->a);
            p += c->a;
            if (v < (uint64_t)PyTuple_GET_SIZE(c->labels)) {
                PyObject *label = PyTuple_GET_ITEM(c->labels, (Py_ssize_t)v);
                if (reserve(o, PyBytes_GET_SIZE(label)) < 0) return -1;
                put(o, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label));
            } else {
                put_u64(o, v);
            }
            break;
        }
        case OP_SET: {
            if (left < c->a) return 1;
            uint64_t mask = le_uint(b + p, c->a);
            p += c->a;
            if (put_set_labels(o, mask, c->labels) < 0) return -1;
            break;
        }
        case OP_TEXT:
        case OP_BINARY: {
            if (left < c->a) return 1;
            Py_ssize_t n = (Py_ssize_t)le_uint(b + p, c->a);
            p += c->a;
            if (n > end - p) return 1;
            int r = c->op == OP_TEXT ? put_utf8(o, b + p, n, c->b) : put_base64(o, b + p, n, c->b);
            if (r) return r;
            p += n;
            break;
        }
        case OP_NULL:
            PUT_LIT(o, "null");
            break;
        }
    }
    if (reserve(o, 2) < 0) return -1;
    o->buf[o->len++] = '}';
    *pp = p;
    return 0;
}

/* ------------------------------------------------------------------ events */

typedef struct {
    const uint8_t *ev; /* the event; its body runs from 19 to end (checksum excluded) */
    Py_ssize_t end;
    uint64_t position;
} Event;

static int put_header(Out *o, const char *head, Py_ssize_t headlen, const Event *e) {
    if (reserve(o, headlen + 160) < 0) return -1;
    put(o, head, headlen);
    put_u64(o, e->position);
    PUT_LIT(o, ",\"log_pos\":");
    put_u64(o, le32(e->ev + EV_LOG_POS));
    PUT_LIT(o, ",\"timestamp\":");
    put_u64(o, le32(e->ev + EV_TIMESTAMP));
    PUT_LIT(o, ",\"server_id\":");
    put_u64(o, le32(e->ev + EV_SERVER_ID));
    PUT_LIT(o, ",\"flags\":");
    put_u64(o, le16(e->ev + EV_FLAGS));
    return 0;
}

#define HEAD(name, code) "{\"type\":\"" name "\",\"type_code\":" #code ",\"position\":"

static int xid_event(Out *o, const Event *e) {
    static const char head[] = HEAD("xid", 16);
    if (e->end - 19 != 8) return 1;
    if (put_header(o, head, sizeof(head) - 1, e) < 0 || reserve(o, 64) < 0) return -1;
    PUT_LIT(o, ",\"xid\":");
    put_u64(o, le64(e->ev + EV_HEADER));
    PUT_LIT(o, "}\n");
    return 0;
}

/* MariaDB GTID, the common layout only (decode_gtid.mariadb_gtid's fast path). */
static int mariadb_gtid_event(Out *o, const Event *e) {
    static const char head[] = HEAD("mariadb_gtid", 162);
    const uint8_t *body = e->ev + EV_HEADER;
    Py_ssize_t n = e->end - 19, at = 13;
    if (n < 13) return 1;
    uint8_t flags = body[12];
    int has_commit = flags & 2;
    if (has_commit) at += 8;
    if (n - at != 6 || flags & (64 | 128)) return 1;
    if (put_header(o, head, sizeof(head) - 1, e) < 0 || reserve(o, 256) < 0) return -1;
    PUT_LIT(o, ",\"domain_id\":");
    put_u64(o, le32(body + 8));
    PUT_LIT(o, ",\"sequence\":");
    put_u64(o, le64(body));
    PUT_LIT(o, ",\"gtid_flags\":");
    put_u64(o, flags);
    PUT_LIT(o, ",\"commit_id\":");
    if (has_commit) put_u64(o, le64(body + 13));
    else PUT_LIT(o, "null");
    PUT_LIT(o, ",\"xid\":null,\"flags_extra\":null,\"extra_engines\":null,\"sa_seq_no\":null,\"extra\":null}\n");
    return 0;
}

/* MariaDB ANNOTATE_ROWS: the statement's text, when it is valid UTF-8. */
static int annotate_rows_event(Out *o, const Event *e) {
    static const char head[] = HEAD("annotate_rows", 160);
    if (put_header(o, head, sizeof(head) - 1, e) < 0 || reserve(o, 16) < 0) return -1;
    PUT_LIT(o, ",\"query\":");
    int r = put_utf8(o, e->ev + EV_HEADER, e->end - EV_HEADER, 0);
    if (r || reserve(o, 2) < 0) return r ? r : -1;
    PUT_LIT(o, "}\n");
    return 0;
}

typedef struct {
    PyObject *table_maps, *table_map_cache;
    int rows_v1, rows_v2; /* the format's rows post-header lengths are the usual 8 and 10 */
    PyObject *missing;    /* set to (table map, plan key) when a rows event has no plan yet */
} State;

static PyObject *S_json_cache, *S_table_id, *S_jsonl_plans;

/* A table map seen before (the decoder's cache holds its exact bytes): record it, then render its
 * header plus the map's cached JSON. */
static int table_map_event(Out *o, const Event *e, State *st) {
    static const char head[] = HEAD("table_map", 19);
    PyObject *key = PyBytes_FromStringAndSize((const char *)e->ev + EV_HEADER, e->end - EV_HEADER);
    if (!key) return -1;
    PyObject *tm = PyDict_GetItemWithError(st->table_map_cache, key);
    Py_DECREF(key);
    if (!tm) return PyErr_Occurred() ? -1 : 1;
    Py_INCREF(tm);
    int r = 1;
    PyObject *cached = PyObject_GetAttr(tm, S_json_cache);
    PyObject *table_id = PyObject_GetAttr(tm, S_table_id);
    if (!cached || !table_id) {
        r = -1;
    } else if (PyBytes_Check(cached) && PyBytes_GET_SIZE(cached) >= 1) {
        r = PyDict_SetItem(st->table_maps, table_id, tm) < 0 ? -1 : 0;
        if (!r && put_header(o, head, sizeof(head) - 1, e) < 0) r = -1;
        if (!r && reserve(o, PyBytes_GET_SIZE(cached) + 1) < 0) r = -1;
        if (!r) {
            o->buf[o->len++] = ',';
            put(o, PyBytes_AS_STRING(cached) + 1, PyBytes_GET_SIZE(cached) - 1);
            o->buf[o->len++] = '\n';
        }
    }
    Py_XDECREF(cached);
    Py_XDECREF(table_id);
    Py_DECREF(tm);
    return r;
}

static int rows_event(Out *o, const Event *e, State *st, int version) {
    const uint8_t *b = e->ev;
    Py_ssize_t p = 19, end = e->end;
    if (version == 1 ? !st->rows_v1 : !st->rows_v2) return 1;
    if (end - p < (version == 1 ? 8 : 10) + 1) return 1;
    uint64_t table_id = le32(b + p) | (uint64_t)le16(b + p + 4) << 32;
    uint32_t rows_flags = le16(b + p + 6);
    p += 8;
    if (version == 2) {
        if (le16(b + p) != 2) return 1; /* extra row data: Python renders it */
        p += 2;
    }
    Py_ssize_t width = b[p++];
    if (width >= 0xFB) return 1;
    Py_ssize_t nbytes = (width + 7) / 8, nmaps = (b[4] == 24 || b[4] == 31) ? 2 : 1;
    if (end - p < nbytes * nmaps) return 1;

    PyObject *id = PyLong_FromUnsignedLongLong(table_id);
    if (!id) return -1;
    PyObject *tm = PyDict_GetItemWithError(st->table_maps, id);
    Py_DECREF(id);
    if (!tm) return PyErr_Occurred() ? -1 : 1;
    Py_INCREF(tm);
    int r = -1;
    PyObject *plans = NULL, *plan = NULL;
    PyObject *key = PyBytes_FromStringAndSize(NULL, 1 + nbytes * nmaps);
    if (!key) goto done;
    PyBytes_AS_STRING(key)[0] = (char)b[4];
    memcpy(PyBytes_AS_STRING(key) + 1, b + p, nbytes * nmaps);
    p += nbytes * nmaps;
    plans = PyObject_GetAttr(tm, S_jsonl_plans);
    if (!plans) goto done;
    if (!PyDict_Check(plans)) {
        PyErr_SetString(PyExc_TypeError, "jsonl_plans must be a dict");
        goto done;
    }
    plan = PyDict_GetItemWithError(plans, key);
    if (!plan) {
        if (PyErr_Occurred()) goto done;
        st->missing = PyTuple_Pack(2, tm, key);
        r = st->missing ? 1 : -1;
        goto done;
    }
    if (!PyObject_TypeCheck(plan, &RowsPlanType)) {
        r = 1; /* None: Python renders this kind of event */
        goto done;
    }
    RowsPlan *pl = (RowsPlan *)plan;
    if (pl->column_count != width) {
        r = 1;
        goto done;
    }
    if (put_header(o, pl->head, pl->headlen, e) < 0) goto done;
    if (reserve(o, pl->middlelen + 80) < 0) goto done;
    put(o, pl->middle, pl->middlelen);
    put_u64(o, table_id);
    PUT_LIT(o, ",\"column_count\":");
    put_u64(o, (uint64_t)width);
    PUT_LIT(o, ",\"rows_flags\":");
    put_u64(o, rows_flags);
    PUT_LIT(o, ",\"rows\":[");
    int first = 1;
    while (p < end) {
        if (reserve(o, 1) < 0) goto done;
        if (!first) o->buf[o->len++] = ',';
        first = 0;
        Py_ssize_t row_start = p;
        for (int i = 0; i < pl->nimages; i++) {
            r = put_image(o, &pl->images[i], b, &p, end);
            if (r) goto done;
        }
        if (p == row_start) { /* images of no columns: Python reports the data */
            r = 1;
            goto done;
        }
        if (reserve(o, 1) < 0) goto done;
        o->buf[o->len++] = '}';
    }
    if (p != end) {
        r = 1;
        goto done;
    }
    if (reserve(o, 3) < 0) goto done;
    PUT_LIT(o, "]}\n");
    r = 0;
done:
    Py_XDECREF(key);
    Py_XDECREF(plans);
    Py_DECREF(tm);
    return r;
}

#define OUTPUT_CHUNK (1 << 20)

/* render(buf, pos, stop, crc32, verify, table_maps, table_map_cache, rows_v1, rows_v2)
 *   -> (json lines, position reached, missing plan (table map, key) or None) */
static PyObject *render(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, stop;
    int crc, verify;
    State st = {0};
    if (!PyArg_ParseTuple(args, "y*nnppO!O!pp:render", &view, &pos, &stop, &crc, &verify, &PyDict_Type,
                          &st.table_maps, &PyDict_Type, &st.table_map_cache, &st.rows_v1, &st.rows_v2))
        return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t size = view.len;
    if (stop > size) stop = size;
    Out o = {0};
    int failed = 0;
    while (pos >= 0 && pos < stop && o.len < OUTPUT_CHUNK) {
        if (size - pos < 19) break;
        const uint8_t *ev = buf + pos;
        Py_ssize_t ev_size = le32(ev + EV_SIZE);
        if (ev_size < 19 || ev_size > size - pos) break;
        Event e = {ev, ev_size, (uint64_t)pos};
        if (crc) {
            e.end -= 4;
            if (e.end < 19) break;
            if (verify && crc32_of(ev, e.end) != le32(ev + e.end)) break;
        }
        Py_ssize_t mark = o.len;
        int r;
        switch (ev[EV_TYPE]) {
        case 16: r = xid_event(&o, &e); break;
        case 162: r = mariadb_gtid_event(&o, &e); break;
        case 160: r = annotate_rows_event(&o, &e); break;
        case 19: r = table_map_event(&o, &e, &st); break;
        case 23: case 24: case 25: r = rows_event(&o, &e, &st, 1); break;
        case 30: case 31: case 32: r = rows_event(&o, &e, &st, 2); break;
        default: r = 1;
        }
        if (r < 0) {
            failed = 1;
            break;
        }
        if (r > 0) {
            o.len = mark;
            break;
        }
        pos += ev_size;
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (!failed) {
        PyObject *lines = PyBytes_FromStringAndSize(o.buf ? o.buf : "", o.len);
        if (lines)
            result = Py_BuildValue("(NnO)", lines, pos, st.missing ? st.missing : Py_None);
    }
    Py_XDECREF(st.missing);
    PyMem_Free(o.buf);
    return result;
}

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS,
     "Render the events of buf[pos:stop] it can as JSON lines; stop before any other event."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "Native JSONL emitter of binlake dump.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
    if (PyType_Ready(&RowsPlanType) < 0) return NULL;
    S_json_cache = PyUnicode_InternFromString("json_cache");
    S_table_id = PyUnicode_InternFromString("table_id");
    S_jsonl_plans = PyUnicode_InternFromString("jsonl_plans");
    if (!S_json_cache || !S_table_id || !S_jsonl_plans) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    /* the ops by name: ingester/dump/native.py's copies are checked against them (tests/unit) */
    static const NamedInt ops[] = {
        {"OP_INT", OP_INT}, {"OP_FLOAT", OP_FLOAT}, {"OP_DOUBLE", OP_DOUBLE}, {"OP_YEAR", OP_YEAR},
        {"OP_DECIMAL", OP_DECIMAL}, {"OP_DATE", OP_DATE}, {"OP_DATETIME2", OP_DATETIME2},
        {"OP_TIMESTAMP2", OP_TIMESTAMP2}, {"OP_TIME2", OP_TIME2}, {"OP_BIT", OP_BIT}, {"OP_ENUM", OP_ENUM},
        {"OP_SET", OP_SET}, {"OP_TEXT", OP_TEXT}, {"OP_BINARY", OP_BINARY}, {"OP_NULL", OP_NULL},
    };
    return module_with(m, ops, sizeof ops / sizeof ops[0], "RowsPlan", &RowsPlanType);
}
