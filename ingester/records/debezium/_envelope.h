/* Debezium's change events put together in C: the envelope around the Value and Key structs walk() rendered,
 * byte-identical to the Python reference composition (records/debezium/composed_events.py: rendered and
 * compose, the JSON layout; the Avro layout's messages are those JSON payloads transcoded, _avro.h) without
 * transaction metadata. Included by _native.c after _json.h and _avro.h.
 *
 * envelopes(events, shape_of, now_ns, tombstones, message) -> [message, ...]
 *   events: walk()'s list for one record; shape_of(table_map, file_number) gives the byte pieces of a table's
 *   events (table_shapes.py: TableShapes.shape), asked again whenever the table map or the binlog file
 *   changes; now_ns the processing time of every event; message the Message type (a tuple subclass: topic, key,
 *   value, headers).
 *   A delete is followed by a tombstone (value None) when tombstones is true; an update that changes the key is a
 *   delete (and its tombstone) then a create, as Debezium publishes it, with the __debezium.newkey and oldkey
 *   headers; other messages have no headers.
 *   The shape's last item is None (JSON: the pieces frame the payloads) or Avro's (key program or None, key
 *   header, value program, value header): each key and value JSON (the pieces' heads and tails empty)
 *   transcoded. Returns None (the record is Python's, which gives the same messages or raises) when shape_of
 *   gives None or a payload is one the transcoder leaves to Python.
 */
#ifndef BINLAKE_ENVELOPE_H
#define BINLAKE_ENVELOPE_H

typedef struct {
    PyObject *topic, *key_head; /* key_head None: the table has no key */
    const char *piece[8];       /* value head, source a, b, c, file JSON, key head, key tail, value tail */
    Py_ssize_t len[8];
    int avro;                   /* the payloads transcoded by programs (key, value) after headers */
    const char *program[2], *header[2];
    Py_ssize_t program_len[2], header_len[2];
} Shape;

enum { VALUE_HEAD, SOURCE_A, SOURCE_B, SOURCE_C, FILE_JSON, KEY_HEAD, KEY_TAIL, VALUE_TAIL, SHAPE_ITEMS };

/* Avro's (key program or None, key header, value program, value header). */
static int shape_avro(Shape *s, PyObject *avro) {
    s->avro = avro != Py_None;
    if (!s->avro) return 0;
    if (!PyTuple_Check(avro) || PyTuple_GET_SIZE(avro) != 4) goto bad;
    for (int role = 0; role < 2; role++) {
        PyObject *program = PyTuple_GET_ITEM(avro, 2 * role), *header = PyTuple_GET_ITEM(avro, 2 * role + 1);
        if (!PyBytes_Check(header) || (!PyBytes_Check(program) && !(role == 0 && program == Py_None))) goto bad;
        s->program[role] = program == Py_None ? NULL : PyBytes_AS_STRING(program);
        s->program_len[role] = program == Py_None ? 0 : PyBytes_GET_SIZE(program);
        s->header[role] = PyBytes_AS_STRING(header);
        s->header_len[role] = PyBytes_GET_SIZE(header);
    }
    return 0;
bad:
    PyErr_SetString(PyExc_TypeError, "envelopes: Avro's are (key program or None, key header, program, header)");
    return -1;
}

/* shape: (topic str, value head, source a, source b, source c, file JSON, key head or None, key tail, value tail,
 * Avro's or None) */
static int shape_from(Shape *s, PyObject *shape) {
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != SHAPE_ITEMS + 2 || !PyUnicode_Check(PyTuple_GET_ITEM(shape, 0))) {
        PyErr_SetString(PyExc_TypeError, "envelopes: shape_of gives (topic, 8 byte pieces, Avro's) tuples");
        return -1;
    }
    s->topic = PyTuple_GET_ITEM(shape, 0);
    s->key_head = PyTuple_GET_ITEM(shape, 1 + KEY_HEAD);
    for (int i = 0; i < SHAPE_ITEMS; i++) {
        PyObject *item = PyTuple_GET_ITEM(shape, 1 + i);
        if (item == Py_None && i == KEY_HEAD) {
            s->piece[i] = "";
            s->len[i] = 0;
            continue;
        }
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "envelopes: a shape's pieces are bytes (the key head may be None)");
            return -1;
        }
        s->piece[i] = PyBytes_AS_STRING(item);
        s->len[i] = PyBytes_GET_SIZE(item);
    }
    return shape_avro(s, PyTuple_GET_ITEM(shape, SHAPE_ITEMS + 1));
}

#define PUT_PIECE(o, s, i) put((o), (s)->piece[i], (s)->len[i])

typedef struct {
    PyObject *out, *headers;
    PyTypeObject *message;
    const Shape *shape;
    const char *gtid; /* the source's "gtid" value: a JSON string or null */
    Py_ssize_t gtid_len;
    uint64_t timestamp, server_id, position, row;
    const char *end; /* ,"ts_ms":..,"ts_us":..,"ts_ns":..} */
    Py_ssize_t end_len;
} Event;

static Out envelope_scratch;

/* Append one change event (op 'c', 'u' or 'd') as a message with these headers, and its tombstone (the same
 * headers) after a delete when asked; 1 (and nothing appended) when a payload is one the Avro transcoder leaves to
 * Python, -1 on an error. */
static int emit(const Event *e, char op, PyObject *before, PyObject *after, PyObject *key_struct, int tombstone,
                PyObject *headers) {
    const Shape *s = e->shape;
    Out *o = &envelope_scratch;
    Py_ssize_t nb = before == Py_None ? 4 : PyBytes_GET_SIZE(before), na = after == Py_None ? 4 : PyBytes_GET_SIZE(after);
    o->len = 0;
    if (reserve(o, 400 + nb + na + e->gtid_len + e->end_len + s->len[VALUE_HEAD] + s->len[SOURCE_A] + s->len[SOURCE_B]
                       + s->len[SOURCE_C] + s->len[FILE_JSON] + s->len[VALUE_TAIL]) < 0)
        return -1;
    uint64_t ts_ms = e->timestamp * 1000;
    PUT_PIECE(o, s, VALUE_HEAD);
    PUT_LIT(o, "{\"before\":");
    if (before == Py_None) PUT_LIT(o, "null");
    else put(o, PyBytes_AS_STRING(before), nb);
    PUT_LIT(o, ",\"after\":");
    if (after == Py_None) PUT_LIT(o, "null");
    else put(o, PyBytes_AS_STRING(after), na);
    PUT_LIT(o, ",\"source\":");
    PUT_PIECE(o, s, SOURCE_A);
    put_u64(o, ts_ms);
    PUT_PIECE(o, s, SOURCE_B);
    put_u64(o, ts_ms * 1000);
    PUT_LIT(o, ",\"ts_ns\":");
    put_u64(o, ts_ms * 1000000);
    PUT_PIECE(o, s, SOURCE_C);
    put_u64(o, e->server_id);
    PUT_LIT(o, ",\"gtid\":");
    put(o, e->gtid, e->gtid_len);
    PUT_LIT(o, ",\"file\":");
    PUT_PIECE(o, s, FILE_JSON);
    PUT_LIT(o, ",\"pos\":");
    put_u64(o, e->position);
    PUT_LIT(o, ",\"row\":");
    put_u64(o, e->row);
    PUT_LIT(o, ",\"thread\":null,\"query\":null},\"transaction\":null,\"op\":\"");
    o->buf[o->len++] = op;
    o->buf[o->len++] = '"';
    put(o, e->end, e->end_len);
    PUT_PIECE(o, s, VALUE_TAIL);
    PyObject *key = Py_None, *value;
    if (s->avro)
        value = transcode(s->program[1], s->program_len[1], o->buf, o->len, s->header[1], s->header_len[1]);
    else
        value = PyBytes_FromStringAndSize(o->buf, o->len);
    if (!value) return -1;
    if (value == Py_None) {
        Py_DECREF(value);
        return 1;
    }
    if (s->avro && s->key_head != Py_None && key_struct != Py_None) {
        key = s->program[0] ? transcode(s->program[0], s->program_len[0], PyBytes_AS_STRING(key_struct),
                                        PyBytes_GET_SIZE(key_struct), s->header[0], s->header_len[0])
                            : Py_NewRef(Py_None);
        if (key == Py_None || !key) {
            int r = key ? 1 : -1;
            Py_XDECREF(key);
            Py_DECREF(value);
            return r;
        }
    } else if (s->key_head != Py_None && key_struct != Py_None) {
        Py_ssize_t nk = PyBytes_GET_SIZE(key_struct);
        key = PyBytes_FromStringAndSize(NULL, s->len[KEY_HEAD] + nk + s->len[KEY_TAIL]);
        if (!key) {
            Py_DECREF(value);
            return -1;
        }
        char *q = PyBytes_AS_STRING(key);
        memcpy(q, s->piece[KEY_HEAD], s->len[KEY_HEAD]);
        memcpy(q + s->len[KEY_HEAD], PyBytes_AS_STRING(key_struct), nk);
        memcpy(q + s->len[KEY_HEAD] + nk, s->piece[KEY_TAIL], s->len[KEY_TAIL]);
    } else {
        Py_INCREF(key);
    }
    for (int round = 0; round < 1 + (op == 'd' && tombstone); round++) {
        /* a Message: allocated as tuple.__new__ allocates an instance of a tuple subclass, then filled */
        PyObject *message = e->message->tp_alloc(e->message, 4);
        if (message) {
            PyObject *items[4] = {s->topic, key, round ? Py_None : value, headers};
            for (int k = 0; k < 4; k++) PyTuple_SET_ITEM(message, k, Py_NewRef(items[k]));
        }
        if (!message || PyList_Append(e->out, message) < 0) {
            Py_XDECREF(message);
            Py_DECREF(key);
            Py_DECREF(value);
            return -1;
        }
        Py_DECREF(message);
    }
    Py_DECREF(key);
    Py_DECREF(value);
    return 0;
}

static PyObject *envelopes(PyObject *module, PyObject *args) {
    PyObject *events, *shape_of, *message;
    long long now;
    int tombstones;
    if (!PyArg_ParseTuple(args, "O!OLpO!:envelopes", &PyList_Type, &events, &shape_of, &now, &tombstones,
                          &PyType_Type, &message))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)message, &PyTuple_Type) || now < 0) {
        PyErr_SetString(PyExc_TypeError, "envelopes: message is a tuple type, now_ns >= 0");
        return NULL;
    }
    char end[96];
    int end_len = snprintf(end, sizeof end, ",\"ts_ms\":%lld,\"ts_us\":%lld,\"ts_ns\":%lld}", now / 1000000, now / 1000,
                           now);
    Event e = {.message = (PyTypeObject *)message, .end = end, .end_len = end_len};
    Shape shape;
    PyObject *shape_tuple = NULL, *last_map = NULL, *last_file = NULL;
    Out gtid = {0};
    e.out = PyList_New(0);
    e.headers = PyTuple_New(0);
    PyObject *new_key = PyUnicode_FromString("__debezium.newkey"), *old_key = PyUnicode_FromString("__debezium.oldkey");
    if (!e.out || !e.headers || !new_key || !old_key) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        if (!PyTuple_Check(ev) || PyTuple_GET_SIZE(ev) != 10 || !PyList_Check(PyTuple_GET_ITEM(ev, 9))
            || !PyUnicode_Check(PyTuple_GET_ITEM(ev, 3))) {
            PyErr_SetString(PyExc_TypeError, "envelopes: events are walk()'s tuples");
            goto fail;
        }
        PyObject *map = PyTuple_GET_ITEM(ev, 8), *file = PyTuple_GET_ITEM(ev, 0);
        if (map != last_map || !last_file || PyObject_RichCompareBool(file, last_file, Py_EQ) != 1) {
            if (PyErr_Occurred()) goto fail;
            Py_XDECREF(shape_tuple);
            shape_tuple = PyObject_CallFunctionObjArgs(shape_of, map, file, NULL);
            if (shape_tuple == Py_None) goto python;
            if (!shape_tuple || shape_from(&shape, shape_tuple) < 0) goto fail;
            last_map = map;
            last_file = file;
        }
        e.shape = &shape;
        e.position = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ev, 1));
        e.timestamp = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ev, 5));
        e.server_id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ev, 6));
        long code = PyLong_AsLong(PyTuple_GET_ITEM(ev, 7));
        if (PyErr_Occurred()) goto fail;
        char kind = code == 23 || code == 30 ? 'c' : code == 24 || code == 31 ? 'u' : code == 25 || code == 32 ? 'd' : 0;
        if (!kind) {
            PyErr_SetString(PyExc_ValueError, "envelopes: not a rows event type code");
            goto fail;
        }
        Py_ssize_t glen;
        const char *g = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(ev, 3), &glen);
        if (!g) goto fail;
        gtid.len = 0;
        if (glen == 0) {
            if (reserve(&gtid, 4) < 0) goto fail;
            PUT_LIT(&gtid, "null");
        } else if (put_utf8(&gtid, (const uint8_t *)g, glen, 0) != 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "envelopes: a GTID that is not UTF-8");
            goto fail;
        }
        e.gtid = gtid.buf;
        e.gtid_len = gtid.len;
        PyObject *rows = PyTuple_GET_ITEM(ev, 9);
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
            PyObject *row = PyList_GET_ITEM(rows, r);
            if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4) {
                PyErr_SetString(PyExc_TypeError, "envelopes: rows are (before, after, key before, key after)");
                goto fail;
            }
            PyObject *before = PyTuple_GET_ITEM(row, 0), *after = PyTuple_GET_ITEM(row, 1);
            PyObject *kb = PyTuple_GET_ITEM(row, 2), *ka = PyTuple_GET_ITEM(row, 3);
            for (int k = 0; k < 4; k++) {
                PyObject *item = PyTuple_GET_ITEM(row, k);
                if (item != Py_None && !PyBytes_Check(item)) {
                    PyErr_SetString(PyExc_TypeError, "envelopes: a row's images and keys are bytes or None");
                    goto fail;
                }
            }
            e.row = (uint64_t)r;
            int changed = 0;
            if (kind == 'u') {
                changed = PyObject_RichCompareBool(kb, ka, Py_NE);
                if (changed < 0) goto fail;
            }
            int r;
            if (changed) { /* a changed key: a delete of the old key naming the new one in a header, then a create
                            * of the new one naming the old one (Debezium's __debezium.newkey / oldkey) */
                PyObject *to_new = Py_BuildValue("((OO))", new_key, ka), *to_old = Py_BuildValue("((OO))", old_key, kb);
                r = !to_new || !to_old ? -1 : emit(&e, 'd', before, Py_None, kb, tombstones, to_new);
                if (!r) r = emit(&e, 'c', Py_None, after, ka, 0, to_old);
                Py_XDECREF(to_new);
                Py_XDECREF(to_old);
            } else {
                r = emit(&e, kind, before, after, after != Py_None ? ka : kb, tombstones, e.headers);
            }
            if (r < 0) goto fail;
            if (r) goto python;
        }
    }
    Py_XDECREF(shape_tuple);
    Py_DECREF(e.headers);
    Py_DECREF(new_key);
    Py_DECREF(old_key);
    PyMem_Free(gtid.buf);
    if (envelope_scratch.cap > SCRATCH_KEPT) {
        PyMem_Free(envelope_scratch.buf);
        envelope_scratch = (Out){0};
    }
    return e.out;
python:
    if (PyErr_Occurred()) goto fail;
    Py_XDECREF(shape_tuple);
    Py_DECREF(e.out);
    Py_DECREF(e.headers);
    Py_DECREF(new_key);
    Py_DECREF(old_key);
    PyMem_Free(gtid.buf);
    return Py_NewRef(Py_None);
fail:
    Py_XDECREF(shape_tuple);
    Py_XDECREF(e.out);
    Py_XDECREF(e.headers);
    Py_XDECREF(new_key);
    Py_XDECREF(old_key);
    PyMem_Free(gtid.buf);
    return NULL;
}

#endif
