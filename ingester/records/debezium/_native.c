/* Debezium's row images, native: renders each row of a rows event straight from the binlog bytes as the
 * JSON of its Value struct (the change event's before/after) and of its Key struct, byte-identical to the
 * Python reference path (records/debezium/columns.py's converters on the codec's values, serialized by
 * orjson).
 *
 * Like the other native modules it never reports errors: anything malformed or truncated, or any value it
 * does not convert exactly as the Python path does (a date Python's calendar refuses, a fraction out of
 * range, text its charset check refuses, a non-finite FLOAT), makes render() return None, and the codec's
 * Python decoder and the converters handle that event (raising the codec's BinlogError with its position
 * where the bytes are malformed). Every read is bounds-checked against the event's end.
 *
 * The rows are walked by a RowsPlan built once per (table map, rows event type, column bitmaps, Debezium
 * modes) in Python (records/debezium/native.py): per image, one entry per table column saying whether the
 * image holds it, how to read and render it, its field name's pre-encoded JSON, and its place in the key.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../_bytes.h"
#include "../../_crc32.h"
#include "../../_json.h"
#include "../../_module.h"
#include "_values.h"

/* ------------------------------------------------------------------ plans */

typedef struct {
    Py_ssize_t nullbytes;
    Col *cols; /* one per table column */
} Image;

typedef struct {
    PyObject_HEAD
    PyObject *spec; /* keeps every bytes object the pointers below point into alive */
    Py_ssize_t ncols, nkeys;
    int nimages, first_after; /* first_after: the only image is the after image (a write) */
    Image images[2];
    const char **keyfields;   /* '"name":' or ',"name":' of the Key struct's fields */
    Py_ssize_t *keylens;
} RowsPlan;

static void plan_dealloc(RowsPlan *self) {
    for (int i = 0; i < self->nimages; i++) PyMem_Free(self->images[i].cols);
    PyMem_Free(self->keyfields);
    PyMem_Free(self->keylens);
    Py_XDECREF(self->spec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int op_valid(const Col *c) {
    switch (c->op) {
    case OP_INT: return c->a == 1 || c->a == 2 || c->a == 3 || c->a == 4 || c->a == 8;
    case OP_BOOL: case OP_BITS: case OP_ENUM: case OP_SET: return c->a >= 1 && c->a <= 8 && (c->op < OP_ENUM || c->labels);
    case OP_TEXT: case OP_GEOMETRY: case OP_VECTOR: return c->a >= 1 && c->a <= 4;
    case OP_BINARY: return c->a >= 1 && c->a <= 4 && c->b >= 0 && c->c >= BINARY_BASE64 && c->c <= BINARY_HEX;
    case OP_DECIMAL:
        return c->a > 0 && c->a <= 65 && c->b >= 0 && c->b <= 30 && c->b <= c->a && c->c >= DECIMAL_BYTES &&
               c->c <= DECIMAL_DOUBLE;
    case OP_DATETIME2: case OP_TIMESTAMP2: case OP_TIME2: return c->a >= 0 && c->a <= 6;
    case OP_UNSIGNED_DECIMAL: case OP_FLOAT: case OP_DOUBLE: case OP_YEAR: case OP_DATE: case OP_NULL: return 1;
    default: return 0;
    }
}

/* One image's column: (present, field bytes | None, key place, op, a, b, c, labels tuple | None). */
static int column_init(Col *c, PyObject *entry, Py_ssize_t nkeys) {
    PyObject *field, *labels;
    if (!PyArg_ParseTuple(entry, "pOniiiiO", &c->present, &field, &c->key, &c->op, &c->a, &c->b, &c->c, &labels))
        return -1;
    if (field != Py_None) {
        if (!PyBytes_Check(field)) {
            PyErr_SetString(PyExc_TypeError, "RowsPlan: a field name must be bytes");
            return -1;
        }
        c->field = PyBytes_AS_STRING(field);
        c->fieldlen = PyBytes_GET_SIZE(field);
    }
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
    if ((c->present && !op_valid(c)) || c->key < -1 || c->key >= nkeys || (c->key >= 0 && !c->field)) {
        PyErr_Format(PyExc_ValueError, "RowsPlan: bad column (op %d: %d, %d, %d; key %zd)", c->op, c->a, c->b, c->c,
                     c->key);
        return -1;
    }
    return 0;
}

/* RowsPlan((first_after, ((column, ...), ...), (key field, ...))): one or two images of one column entry per
 * table column each (column_init), then the Key struct's field names in its order. */
static int plan_init(RowsPlan *self, PyObject *args, PyObject *kwds) {
    PyObject *spec, *images, *keys;
    if (!PyArg_ParseTuple(args, "O!:RowsPlan", &PyTuple_Type, &spec)) return -1;
    if (self->spec) {
        PyErr_SetString(PyExc_TypeError, "RowsPlan is initialised once");
        return -1;
    }
    if (!PyArg_ParseTuple(spec, "pO!O!", &self->first_after, &PyTuple_Type, &images, &PyTuple_Type, &keys)) return -1;
    Py_ssize_t nimages = PyTuple_GET_SIZE(images);
    if (nimages < 1 || nimages > 2 || (nimages == 2 && self->first_after)) {
        PyErr_SetString(PyExc_ValueError, "RowsPlan: one or two images");
        return -1;
    }
    Py_INCREF(spec);
    self->spec = spec;
    self->nkeys = PyTuple_GET_SIZE(keys);
    self->keyfields = PyMem_Calloc(self->nkeys + 1, sizeof(char *));
    self->keylens = PyMem_Calloc(self->nkeys + 1, sizeof(Py_ssize_t));
    if (!self->keyfields || !self->keylens) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < self->nkeys; j++) {
        PyObject *key = PyTuple_GET_ITEM(keys, j);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "RowsPlan: a key field name must be bytes");
            return -1;
        }
        self->keyfields[j] = PyBytes_AS_STRING(key);
        self->keylens[j] = PyBytes_GET_SIZE(key);
    }
    for (Py_ssize_t i = 0; i < nimages; i++) {
        PyObject *cols = PyTuple_GET_ITEM(images, i);
        if (!PyTuple_Check(cols) || (i && PyTuple_GET_SIZE(cols) != self->ncols)) {
            PyErr_SetString(PyExc_ValueError, "RowsPlan: an image is a tuple of an entry per table column");
            return -1;
        }
        self->ncols = PyTuple_GET_SIZE(cols);
        Image *im = &self->images[i];
        im->cols = PyMem_Calloc(self->ncols ? self->ncols : 1, sizeof(Col));
        if (!im->cols) {
            PyErr_NoMemory();
            return -1;
        }
        self->nimages = (int)i + 1;
        Py_ssize_t present = 0;
        for (Py_ssize_t k = 0; k < self->ncols; k++) {
            if (column_init(&im->cols[k], PyTuple_GET_ITEM(cols, k), self->nkeys) < 0) return -1;
            present += im->cols[k].present;
        }
        if (!present) { /* an image of no columns takes no bytes: the codec names such data malformed */
            PyErr_SetString(PyExc_ValueError, "RowsPlan: an image holds no column");
            return -1;
        }
        im->nullbytes = (present + 7) / 8;
    }
    return 0;
}

static PyTypeObject RowsPlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ingester.records.debezium._native.RowsPlan",
    .tp_doc = "How to render the row images of one (table map, rows event type, column bitmaps, modes).",
    .tp_basicsize = sizeof(RowsPlan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
};

/* ------------------------------------------------------------------ rows */

typedef struct {
    Py_ssize_t start, end; /* a key field's value in the output */
} Span;

/* Render one row image at *pp as the Value struct's JSON, noting where the key fields' values are: 0 done,
 * 1 leave the event to Python, -1 error. */
static int put_image(Out *o, const RowsPlan *pl, const Image *im, const uint8_t *b, Py_ssize_t *pp,
                     Py_ssize_t end, Span *keys) {
    Py_ssize_t p = *pp, bit = 0;
    if (end - p < im->nullbytes) return 1;
    const uint8_t *nulls = b + p;
    p += im->nullbytes;
    if (reserve(o, 1) < 0) return -1;
    o->buf[o->len++] = '{';
    for (Py_ssize_t k = 0; k < pl->ncols; k++) {
        const Col *c = &im->cols[k];
        int null = 1;
        if (c->present) {
            null = nulls[bit >> 3] >> (bit & 7) & 1 || c->op == OP_NULL;
            bit++;
        }
        Py_ssize_t mark = o->len;
        if (reserve(o, c->fieldlen + 4) < 0) return -1;
        if (c->field) put(o, c->field, c->fieldlen);
        Py_ssize_t start = o->len;
        if (null) {
            PUT_LIT(o, "null");
        } else {
            int r = put_value(o, c, b, &p, end);
            if (r) return r;
        }
        if (!c->field) o->len = mark; /* read, but not a field of the struct */
        else if (c->key >= 0) keys[c->key] = (Span){start, o->len};
    }
    if (reserve(o, 1) < 0) return -1;
    o->buf[o->len++] = '}';
    *pp = p;
    return 0;
}

/* The Key struct's JSON from its fields' values in o. */
static PyObject *key_of(const RowsPlan *pl, const Out *o, const Span *keys) {
    Py_ssize_t n = 2;
    for (Py_ssize_t j = 0; j < pl->nkeys; j++) n += pl->keylens[j] + keys[j].end - keys[j].start;
    PyObject *key = PyBytes_FromStringAndSize(NULL, n);
    if (!key) return NULL;
    char *q = PyBytes_AS_STRING(key);
    *q++ = '{';
    for (Py_ssize_t j = 0; j < pl->nkeys; j++) {
        memcpy(q, pl->keyfields[j], pl->keylens[j]);
        q += pl->keylens[j];
        memcpy(q, o->buf + keys[j].start, keys[j].end - keys[j].start);
        q += keys[j].end - keys[j].start;
    }
    *q = '}';
    return key;
}

/* One row's (before, after, key of before, key of after), None for what the event or the table has not. */
static PyObject *row_tuple(const RowsPlan *pl, const Out *o, const Py_ssize_t *cuts, Span *const *keys) {
    PyObject *items[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < pl->nimages; i++) {
        int slot = pl->first_after || i ? 1 : 0; /* 0 before, 1 after */
        items[slot] = PyBytes_FromStringAndSize(o->buf + cuts[i], cuts[i + 1] - cuts[i]);
        items[slot + 2] = pl->nkeys ? key_of(pl, o, keys[i]) : Py_NewRef(Py_None);
        if (!items[slot] || !items[slot + 2]) {
            for (int k = 0; k < 4; k++) Py_XDECREF(items[k]);
            return NULL;
        }
    }
    PyObject *row = PyTuple_New(4);
    for (int k = 0; k < 4; k++) {
        if (!items[k]) items[k] = Py_NewRef(Py_None);
        if (row) PyTuple_SET_ITEM(row, k, items[k]);
        else Py_DECREF(items[k]);
    }
    return row;
}

/* One row's images are rendered into this buffer, kept from call to call (render holds the GIL throughout
 * and calls nothing that could re-enter it). */
static Out scratch;
#define SCRATCH_KEPT (1 << 20)

/* The rows of the rows data in b[pos:end]: a list of row_tuple()s, None (Python decodes the event) or NULL. */
static PyObject *render_rows(const RowsPlan *pl, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end) {
    Out o = scratch;
    PyObject *rows = PyList_New(0), *result = NULL;
    Span *spans = PyMem_Calloc(2 * pl->nkeys + 1, sizeof(Span));
    Span *keys[2] = {spans, spans + pl->nkeys};
    if (!rows || !spans) {
        if (!spans) PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t p = pos;
    while (p < end) {
        Py_ssize_t cuts[3] = {0};
        o.len = 0;
        for (int i = 0; i < pl->nimages; i++) {
            int r = put_image(&o, pl, &pl->images[i], b, &p, end, keys[i]);
            if (r) {
                if (r > 0) result = Py_NewRef(Py_None);
                goto done;
            }
            cuts[i + 1] = o.len;
        }
        PyObject *row = row_tuple(pl, &o, cuts, keys);
        if (!row) goto done;
        int failed = PyList_Append(rows, row);
        Py_DECREF(row);
        if (failed) goto done;
    }
    result = Py_NewRef(rows);
done:
    Py_XDECREF(rows);
    PyMem_Free(spans);
    if (o.cap > SCRATCH_KEPT) { /* an unusually large row: give its memory back */
        PyMem_Free(o.buf);
        o = (Out){0};
    }
    scratch = o;
    return result;
}

/* render(plan, buf, pos, end) -> [(before, after, key of before, key of after), ...] for the rows data in
 * buf[pos:end], or None: Python decodes the event. */
static PyObject *render(PyObject *module, PyObject *args) {
    RowsPlan *pl;
    Py_buffer view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "O!y*nn:render", &RowsPlanType, &pl, &view, &pos, &end)) return NULL;
    PyObject *result = NULL;
    if (!pl->spec || pos < 0 || end > view.len || pos > end)
        PyErr_SetString(PyExc_ValueError, "render: an uninitialised plan, or pos/end outside the buffer");
    else
        result = render_rows(pl, view.buf, pos, end);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ records */

/* A binlake record's entry flags (records/format.py, records/snapshot.py) and its index entries' fixed part:
 * sequence (file number, position, sub: big-endian 4, 8, 4), commit time (8), type code, GTID length. */
enum { FLAG_IN_PAYLOAD = 1, FLAG_SNAPSHOT = 2, FLAG_SCHEMA = 4, INDEX_ENTRY = 26 };

typedef struct {
    int crc, verify, rows_v1, rows_v2;
} Format;

static PyObject *S_table_id;

/* An event's body end (its checksum excluded) once its size field and checksum check out as the codec checks
 * them; -1 otherwise. */
static Py_ssize_t event_end(const Format *f, const uint8_t *ev, Py_ssize_t n, int in_payload) {
    if (n < EV_HEADER || le32(ev + EV_SIZE) != (uint64_t)n) return -1;
    if (!f->crc || in_payload) return n;
    Py_ssize_t end = n - 4;
    if (end < EV_HEADER || (f->verify && crc32_of(ev, end) != le32(ev + end))) return -1;
    return end;
}

/* The rows event ev[0:end] of the table map `map` ((TableMap, plans)) rendered: a new list, None (Python's
 * record), NULL (error), or *missing set to ((TableMap, plans), plan key) for a plan Python has not made. */
static PyObject *rows_event(const Format *f, PyObject *map, const uint8_t *ev, Py_ssize_t end, PyObject **missing) {
    uint8_t code = ev[EV_TYPE];
    int version = code >= 23 && code <= 25 ? 1 : code >= 30 && code <= 32 ? 2 : 0;
    Py_ssize_t q = EV_HEADER;
    if (!version || !(version == 1 ? f->rows_v1 : f->rows_v2) || end - q < (version == 1 ? 8 : 10) + 1)
        return Py_NewRef(Py_None);
    uint64_t table_id = le48(ev + q);
    q += 8;
    if (version == 2) {
        if (le16(ev + q) != 2) return Py_NewRef(Py_None); /* extra row data: Python's */
        q += 2;
    }
    Py_ssize_t width = ev[q++];
    Py_ssize_t nbytes = (width + 7) / 8, nmaps = code == 24 || code == 31 ? 2 : 1;
    if (width >= 0xFB || end - q < nbytes * nmaps) return Py_NewRef(Py_None);
    PyObject *tm = PyTuple_GET_ITEM(map, 0), *plans = PyTuple_GET_ITEM(map, 1);
    PyObject *id = PyObject_GetAttr(tm, S_table_id);
    if (!id) return NULL;
    unsigned long long map_id = PyLong_AsUnsignedLongLong(id);
    Py_DECREF(id);
    if (map_id == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (map_id != table_id) return Py_NewRef(Py_None); /* the codec looks the id up among all its maps */
    PyObject *key = PyBytes_FromStringAndSize(NULL, 1 + nbytes * nmaps);
    if (!key) return NULL;
    PyBytes_AS_STRING(key)[0] = (char)code;
    memcpy(PyBytes_AS_STRING(key) + 1, ev + q, nbytes * nmaps);
    q += nbytes * nmaps;
    PyObject *plan = PyDict_GetItemWithError(plans, key);
    if (!plan) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
        *missing = Py_BuildValue("(ON)", map, key);
        return *missing ? Py_NewRef(Py_None) : NULL;
    }
    Py_DECREF(key);
    if (!PyObject_TypeCheck(plan, &RowsPlanType) || ((RowsPlan *)plan)->ncols != width) return Py_NewRef(Py_None);
    return render_rows((RowsPlan *)plan, ev, q, end);
}

/* walk(value, index, pos, crc32, verify, rows_v1, rows_v2, maps) -> the record's rows events rendered, as
 * (file number, position, sub, GTID, commit time, timestamp, server id, type code, TableMap, rows) each; None
 * when Python must read the record (records/format.record_events); or what Python must add first: (map key,
 * entry offset, position) for a table map not in `maps` (key -> (TableMap, plans)), or (map, plan key) for a
 * rows event type and column bitmaps not in the map's plans (-> RowsPlan or None). `pos`: the first entry. */
static PyObject *walk(PyObject *module, PyObject *args) {
    Py_buffer value, index;
    Py_ssize_t p;
    Format f;
    PyObject *maps;
    if (!PyArg_ParseTuple(args, "y*y*nppppO!:walk", &value, &index, &p, &f.crc, &f.verify, &f.rows_v1, &f.rows_v2,
                          &PyDict_Type, &maps))
        return NULL;
    const uint8_t *v = value.buf, *ix = index.buf;
    Py_ssize_t vn = value.len, xn = index.len, x = 0;
    PyObject *events = PyList_New(0), *map = NULL, *result = NULL, *missing = NULL;
    if (!events || p < 0) goto python;
    while (x < xn) {
        if (xn - x < INDEX_ENTRY || xn - x - INDEX_ENTRY < ix[x + 25]) goto python;
        const uint8_t *e = ix + x;
        uint64_t position = be_uint(e + 4, 8);
        Py_ssize_t entry = p, gtid_len = e[25];
        x += INDEX_ENTRY + gtid_len;
        if (vn - p < 5) goto python;
        int flags = v[p], in_payload = flags & FLAG_IN_PAYLOAD;
        Py_ssize_t m = le32(v + p + 1);
        p += 5;
        if (flags & FLAG_SNAPSHOT || m > vn - p) goto python;
        if (m) { /* the event's table map, where it changes: known by its body and schema entry */
            const uint8_t *tm = v + p;
            Py_ssize_t tm_end = event_end(&f, tm, m, in_payload), schema = 0;
            if (tm_end < 0 || tm[EV_TYPE] != 19) goto python;
            p += m;
            if (flags & FLAG_SCHEMA) {
                if (vn - p < 4 || le32(v + p) > (uint64_t)(vn - p - 4)) goto python;
                schema = le32(v + p);
                p += 4;
            }
            Py_ssize_t body = tm_end - EV_HEADER;
            PyObject *key = PyBytes_FromStringAndSize(NULL, 4 + body + schema);
            if (!key) goto fail;
            put_le32((uint8_t *)PyBytes_AS_STRING(key), (uint32_t)body);
            memcpy(PyBytes_AS_STRING(key) + 4, tm + EV_HEADER, body);
            memcpy(PyBytes_AS_STRING(key) + 4 + body, v + p, schema);
            p += schema;
            map = PyDict_GetItemWithError(maps, key);
            if (!map) {
                if (PyErr_Occurred()) {
                    Py_DECREF(key);
                    goto fail;
                }
                result = Py_BuildValue("(NnK)", key, entry, (unsigned long long)position);
                goto done;
            }
            Py_DECREF(key);
            if (!PyTuple_Check(map) || PyTuple_GET_SIZE(map) != 2 || !PyDict_Check(PyTuple_GET_ITEM(map, 1))) {
                PyErr_SetString(PyExc_TypeError, "walk: maps hold (TableMap, plans dict) tuples");
                goto fail;
            }
        }
        if (vn - p < 4) goto python;
        Py_ssize_t k = le32(v + p);
        p += 4;
        if (k > vn - p || !map) goto python;
        const uint8_t *ev = v + p;
        p += k;
        Py_ssize_t end = event_end(&f, ev, k, in_payload);
        if (end < 0) goto python;
        PyObject *rows = rows_event(&f, map, ev, end, &missing);
        if (!rows) goto fail;
        if (missing) {
            Py_DECREF(rows);
            result = missing;
            goto done;
        }
        if (rows == Py_None) {
            Py_DECREF(rows);
            goto python;
        }
        PyObject *gtid = PyUnicode_DecodeUTF8((const char *)e + INDEX_ENTRY, gtid_len, NULL);
        if (!gtid) { /* the index's decode() raises: Python's */
            Py_DECREF(rows);
            PyErr_Clear();
            goto python;
        }
        PyObject *item = Py_BuildValue("(kKkNKkkiON)", (unsigned long)be_uint(e, 4), (unsigned long long)position,
                                       (unsigned long)be_uint(e + 12, 4), gtid, (unsigned long long)be_uint(e + 16, 8),
                                       (unsigned long)le32(ev + EV_TIMESTAMP), (unsigned long)le32(ev + EV_SERVER_ID),
                                       (int)ev[EV_TYPE], PyTuple_GET_ITEM(map, 0), rows);
        if (!item || PyList_Append(events, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
    }
    if (p == vn) {
        result = Py_NewRef(events);
        goto done;
    }
python:
    result = Py_NewRef(Py_None);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(events);
    PyBuffer_Release(&value);
    PyBuffer_Release(&index);
    return result;
}

#include "_avro.h"
#include "_envelope.h"

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS,
     "The Value and Key structs' JSON of each row of a rows event's data, or None (Python's turn)."},
    {"walk", walk, METH_VARARGS, "The rows events of a binlake record rendered, or None, or what is missing."},
    {"envelopes", envelopes, METH_VARARGS, "The change events of walk()'s rows events, as messages."},
    {"avro", avro, METH_VARARGS, "A payload's JSON as Avro (Confluent's wire format, after a header), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "Debezium's row images straight from binlog bytes.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    crc_init();
    if (PyType_Ready(&RowsPlanType) < 0) return NULL;
    S_table_id = PyUnicode_InternFromString("table_id");
    if (!S_table_id) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    /* the ops and modes by name: records/debezium/native.py's copies are checked against them (tests/unit) */
    static const NamedInt names[] = {
        {"OP_INT", OP_INT}, {"OP_UNSIGNED_DECIMAL", OP_UNSIGNED_DECIMAL}, {"OP_FLOAT", OP_FLOAT},
        {"OP_DOUBLE", OP_DOUBLE}, {"OP_YEAR", OP_YEAR}, {"OP_DECIMAL", OP_DECIMAL}, {"OP_DATE", OP_DATE},
        {"OP_DATETIME2", OP_DATETIME2}, {"OP_TIMESTAMP2", OP_TIMESTAMP2}, {"OP_TIME2", OP_TIME2},
        {"OP_BOOL", OP_BOOL}, {"OP_BITS", OP_BITS}, {"OP_ENUM", OP_ENUM}, {"OP_SET", OP_SET},
        {"OP_TEXT", OP_TEXT}, {"OP_BINARY", OP_BINARY}, {"OP_GEOMETRY", OP_GEOMETRY}, {"OP_VECTOR", OP_VECTOR},
        {"OP_NULL", OP_NULL}, {"DECIMAL_BYTES", DECIMAL_BYTES}, {"DECIMAL_STRING", DECIMAL_STRING},
        {"DECIMAL_DOUBLE", DECIMAL_DOUBLE}, {"BINARY_BASE64", BINARY_BASE64},
        {"BINARY_URL_SAFE", BINARY_URL_SAFE}, {"BINARY_HEX", BINARY_HEX},
    };
    return module_with(m, names, sizeof names / sizeof names[0], "RowsPlan", &RowsPlanType);
}
