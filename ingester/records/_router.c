/* Native routing core of `binlake run`: frames, checks and routes the events of a whole read buffer of
 * the replication stream straight into the RecordBuilder's state (ingester/records/builder.py).
 *
 * It only handles the events of OLTP transactions that RecordBuilder.feed routes on its fast path --
 * MariaDB GTID, TABLE_MAP of a known table, rows events, XID -- plus MySQL's GTIDs, the BEGIN statements
 * the builder has decoded before (recognised by their bytes, like table maps) and MariaDB's
 * ANNOTATE_ROWS (which the builder decodes and drops), and only when it knows the outcome exactly. Anything else (another event type, a multi-packet, a non-event packet, ROTATE, any size or
 * checksum mismatch, an unknown table id or table map, a record that has to close, a value the
 * Python struct packing would refuse) stops it *before* that packet, untouched: Python then frames it
 * and feeds it to the builder, producing the same records or raising the same error. So C never
 * reports errors, and it mutates the builder's state exactly as RecordBuilder.feed would.
 *
 * The state it reads and writes back is explicit: the builder's Transaction (ingester/records/txn.py: the
 * phase, moved by txn.py's transition table TABLE, given to configure(); the GTID, commit time, count and
 * executed-GTID sets), its OpenRecords (open_records.py: the RecordWriter per topic and their size) and its
 * routing tables (table id -> route, table map bytes -> table, known BEGINs). Record writers are the Python
 * RecordWriter objects (format.py), appended to like RecordWriter.add does. The result is builder.Routed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../_bytes.h"
#include "../_crc32.h"

#define HEADER EV_HEADER
#define MAX_PACKET 0xFFFFFF
#define XID 16
#define TABLE_MAP 19
#define ROTATE 4
#define MARIADB_GTID 162
#define ANNOTATE_ROWS 160
#define QUERY 2
#define GTID 33
#define ANONYMOUS_GTID 34


/* txn.py's Phase and Input values (exported, and compared with Python's in a test); ENDS marks a TABLE
 * entry whose transition ends the transaction. */
enum { PHASE_IDLE, PHASE_IMPLICIT, PHASE_EXPLICIT, N_PHASES };
enum { INPUT_GTID, INPUT_BEGIN, INPUT_ROWS, INPUT_STATEMENT, INPUT_END, N_INPUTS };
#define ENDS 0x80

/* Given once by configure(): the classes of the state and result, txn.py's table and Phase members. */
static PyObject *TxnType, *RecordsType, *WriterClass, *ResultType, *Phases;
static uint8_t Table[N_PHASES * N_INPUTS];

/* Interned names of Transaction's, OpenRecords' and RecordWriter's slots. */
static PyObject *T_phase, *T_gtid, *T_pending, *T_commit_ts, *T_count, *T_mariadb_gtids, *T_mysql_gtids,
    *R_open, *R_bytes, *R_max_record_bytes, *R_max_open_bytes, *R_file_number, *R_fde, *S_mariadb, *S_mysql,
    *S_add, *W_size, *W_count, *W_first_seq, *W_index, *W_last_commit_ts, *W_parts, *W_table_map, *W_schema;

/* The transaction's and open records' scalar state, held in C during one call and written back at its end. */
typedef struct {
    PyObject *txn, *records;              /* borrowed: the builder's Transaction and OpenRecords */
    PyObject *routes, *table_maps, *open, *begins; /* borrowed: the builder's containers */
    PyObject *gtid, *pending;             /* owned */
    int phase;
    long long open_bytes, max_record_bytes, max_open_bytes, file_number, count;
    uint64_t commit_ts;
    int commit_ts_ok; /* fits the index's unsigned 64 bits */
    unsigned long boundary_log_pos;       /* the last transaction boundary passed (0: none) */
    unsigned long long boundary_position;
} State;

static int get_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int load(State *s, PyObject *txn, PyObject *records) {
    s->txn = txn;
    s->records = records;
    if (!(s->open = PyObject_GetAttr(records, R_open))) return -1;
    Py_DECREF(s->open); /* the OpenRecords holds it; borrowed like the other containers */
    if (!PyDict_Check(s->routes) || !PyDict_Check(s->table_maps) || !PyDict_Check(s->open) ||
        !PySet_Check(s->begins)) {
        PyErr_SetString(PyExc_TypeError, "route: the routes, table maps and open records must be dicts, the BEGINs a set");
        return -1;
    }
    long long phase;
    if (get_ll(txn, T_phase, &phase)) return -1;
    if (phase < 0 || phase >= N_PHASES) {
        PyErr_SetString(PyExc_ValueError, "route: the transaction's phase is not one of txn.Phase");
        return -1;
    }
    s->phase = (int)phase;
    if (!(s->gtid = PyObject_GetAttr(txn, T_gtid))) return -1;
    if (!PyBytes_Check(s->gtid)) {
        PyErr_SetString(PyExc_TypeError, "route: the transaction's gtid must be bytes");
        return -1;
    }
    if (!(s->pending = PyObject_GetAttr(txn, T_pending))) return -1;
    PyObject *v = PyObject_GetAttr(txn, T_commit_ts);
    if (!v) return -1;
    s->commit_ts = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    s->commit_ts_ok = !(s->commit_ts == (uint64_t)-1 && PyErr_Occurred());
    PyErr_Clear();
    if (get_ll(txn, T_count, &s->count) || get_ll(records, R_bytes, &s->open_bytes) ||
        get_ll(records, R_max_record_bytes, &s->max_record_bytes) ||
        get_ll(records, R_max_open_bytes, &s->max_open_bytes) || get_ll(records, R_file_number, &s->file_number))
        return -1;
    return 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long v) {
    PyObject *o = PyLong_FromLongLong(v);
    int rc = o ? PyObject_SetAttr(obj, name, o) : -1;
    Py_XDECREF(o);
    return rc;
}

static int store(State *s) {
    PyObject *ts = s->commit_ts_ok ? PyLong_FromUnsignedLongLong(s->commit_ts) : Py_NewRef(Py_None);
    int rc = !ts || (s->commit_ts_ok && PyObject_SetAttr(s->txn, T_commit_ts, ts)) ||
             PyObject_SetAttr(s->txn, T_phase, PyTuple_GET_ITEM(Phases, s->phase)) ||
             PyObject_SetAttr(s->txn, T_gtid, s->gtid) || PyObject_SetAttr(s->txn, T_pending, s->pending) ||
             set_ll(s->txn, T_count, s->count) || set_ll(s->records, R_bytes, s->open_bytes);
    Py_XDECREF(ts);
    return rc ? -1 : 0;
}

/* Where the event's body ends (checksum excluded), or -1 when Python must look at it: verify()'s checks. */
static Py_ssize_t verified_end(const uint8_t *ev, Py_ssize_t n, int crc, int verify) {
    if (n < HEADER || le32(ev + EV_SIZE) != (uint64_t)n) return -1;
    if (!crc) return n;
    Py_ssize_t end = n - 4;
    if (end < HEADER) return -1;
    if (verify && crc32_of(ev, end) != le32(ev + end)) return -1;
    return end;
}

/* The original commit timestamp of a MySQL GTID event's body ev[HEADER:end] (0 when it has none), read
 * like decode_gtid._gtid_fields reads it; -1 wherever that would fail (Python then raises its error). */
static int mysql_gtid_commit_ts(const uint8_t *ev, Py_ssize_t end, uint64_t *original) {
    Py_ssize_t p = HEADER + 25; /* flags, uuid, gno */
    if (end < p) return -1;
    if (end - p < 17 || ev[p] != 2) return 0; /* no logical timestamps */
    p += 17;
    if (end - p < 7) return 0;
    uint64_t ts = le32(ev + p) | (uint64_t)ev[p + 4] << 32 | (uint64_t)ev[p + 5] << 40 | (uint64_t)ev[p + 6] << 48;
    p += 7;
    if (ts & (1ULL << 55)) {
        if (end - p < 7) return -1;
        ts = le32(ev + p) | (uint64_t)ev[p + 4] << 32 | (uint64_t)ev[p + 5] << 40 | (uint64_t)ev[p + 6] << 48;
        p += 7;
    }
    *original = ts;
    if (end > p) { /* transaction length, a length-encoded integer */
        uint8_t first = ev[p++];
        Py_ssize_t more = first < 0xFB ? 0 : first == 0xFC ? 2 : first == 0xFD ? 3 : first == 0xFE ? 8 : -1;
        if (more < 0 || end - p < more) return -1;
        p += more;
    }
    if (end - p >= 4) { /* server versions */
        int both = ev[p + 3] & 0x80;
        p += 4;
        if (both && end - p < 4) return -1;
    }
    return 0;
}

/* RecordBuilder._boundary: outside a transaction the stream can resume right after this event. */
static void boundary(State *s, const uint8_t *ev, uint64_t position) {
    uint32_t log_pos = le32(ev + EV_LOG_POS);
    if (s->phase != PHASE_IDLE || !log_pos) return;
    s->boundary_log_pos = log_pos;
    s->boundary_position = position;
}

/* Transaction._end. */
static int end_transaction(State *s) {
    s->count++;
    PyObject *p = s->pending;
    if (p != Py_None) {
        int mysql = PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 3 && PyUnicode_Check(PyTuple_GET_ITEM(p, 0)) &&
                    PyUnicode_Compare(PyTuple_GET_ITEM(p, 0), S_mysql) == 0;
        if (!mysql && !(PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 4)) {
            PyErr_SetString(PyExc_TypeError, "route: the transaction's pending GTID must be a GTID tuple");
            return -1;
        }
        PyObject *gtids = PyObject_GetAttr(s->txn, mysql ? T_mysql_gtids : T_mariadb_gtids);
        if (!gtids) return -1;
        PyObject *r;
        if (mysql)
            r = PyObject_CallMethodObjArgs(gtids, S_add, PyTuple_GET_ITEM(p, 1), PyTuple_GET_ITEM(p, 2), NULL);
        else
            r = PyObject_CallMethodObjArgs(gtids, S_add, PyTuple_GET_ITEM(p, 1), PyTuple_GET_ITEM(p, 2),
                                           PyTuple_GET_ITEM(p, 3), NULL);
        Py_DECREF(gtids);
        if (!r) return -1;
        Py_DECREF(r);
    }
    Py_SETREF(s->pending, Py_NewRef(Py_None));
    Py_SETREF(s->gtid, PyBytes_FromStringAndSize("", 0));
    return s->gtid ? 0 : -1;
}

/* Transaction.step: txn.py's transition for this input from the current phase. */
static int step(State *s, int input) {
    uint8_t t = Table[s->phase * N_INPUTS + input];
    if ((t & ENDS) && end_transaction(s)) return -1;
    s->phase = t & ~ENDS;
    return 0;
}

static int get_writer_ll(PyObject *w, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(w, name);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A rows event of an accepted table: 1 when appended to its topic's open record as RecordBuilder._add and
 * RecordWriter.add do, 0 when Python must add it (a record closes, or a field does not pack), -1 on error. */
static int add_rows(State *s, PyObject *topic, PyObject *table_map, const uint8_t *ev, Py_ssize_t n,
                    uint64_t position) {
    Py_ssize_t gtid_len = PyBytes_GET_SIZE(s->gtid);
    if (!s->commit_ts_ok || gtid_len > 255 || s->file_number < 0 || s->file_number > 0xFFFFFFFFLL) return 0;
    PyObject *writer = PyDict_GetItemWithError(s->open, topic); /* borrowed */
    if (!writer && PyErr_Occurred()) return -1;
    Py_ssize_t tm_len = PyBytes_GET_SIZE(table_map);
    int same_map = 0;
    long long size = 0;
    if (writer) {
        if (get_writer_ll(writer, W_size, &size)) return -1;
        if (size + 9 + n + tm_len > s->max_record_bytes) return 0; /* the record closes: Python */
        PyObject *schema = PyObject_GetAttr(writer, W_schema); /* a map stored with a schema entry: Python */
        if (!schema) return -1;
        int with_schema = PyObject_IsTrue(schema);
        Py_DECREF(schema);
        if (with_schema) return with_schema < 0 ? -1 : 0;
        PyObject *previous = PyObject_GetAttr(writer, W_table_map);
        if (!previous) return -1;
        same_map = PyBytes_Check(previous) && PyBytes_GET_SIZE(previous) == tm_len &&
                   memcmp(PyBytes_AS_STRING(previous), PyBytes_AS_STRING(table_map), tm_len) == 0;
        Py_DECREF(previous);
    }
    Py_ssize_t stored = same_map ? 0 : tm_len;
    if (s->open_bytes + 9 + stored + n > s->max_open_bytes) return 0; /* everything is flushed: Python */
    if (!writer) {
        PyObject *fde = PyObject_GetAttr(s->records, R_fde);
        if (!fde) return -1;
        PyObject *created = PyObject_CallOneArg(WriterClass, fde);
        Py_DECREF(fde);
        if (!created) return -1;
        int rc = PyDict_SetItem(s->open, topic, created);
        Py_DECREF(created);
        if (rc) return -1;
        writer = created; /* the dict holds it */
        if (get_writer_ll(writer, W_size, &size)) return -1;
    }
    /* value parts: flags, table map length, table map, event length; then the event */
    PyObject *head = PyBytes_FromStringAndSize(NULL, 9 + stored);
    PyObject *event = PyBytes_FromStringAndSize((const char *)ev, n);
    PyObject *entry = PyBytes_FromStringAndSize(NULL, 16 + 8 + 2 + gtid_len);
    PyObject *parts = NULL, *index = NULL, *seq = NULL, *v = NULL;
    int rc = -1;
    if (!head || !event || !entry) goto done;
    uint8_t *h = (uint8_t *)PyBytes_AS_STRING(head);
    h[0] = 0;
    put_le32(h + 1, (uint32_t)stored);
    memcpy(h + 5, PyBytes_AS_STRING(table_map), stored);
    put_le32(h + 5 + stored, (uint32_t)n);
    /* index entry: sequence (file number, position, 0), commit time, type code, GTID length; the GTID */
    uint8_t *e = (uint8_t *)PyBytes_AS_STRING(entry);
    put_be(e, (uint64_t)s->file_number, 4);
    put_be(e + 4, position, 8);
    put_be(e + 12, 0, 4);
    put_be(e + 16, s->commit_ts, 8);
    e[24] = ev[EV_TYPE];
    e[25] = (uint8_t)gtid_len;
    memcpy(e + 26, PyBytes_AS_STRING(s->gtid), gtid_len);
    if (!(parts = PyObject_GetAttr(writer, W_parts)) || !(index = PyObject_GetAttr(writer, W_index))) goto done;
    if (!PyList_Check(parts) || !PyList_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "RecordWriter parts and index must be lists");
        goto done;
    }
    if (PyList_Append(parts, head) || PyList_Append(parts, event) || PyList_Append(index, entry)) goto done;
    if (PyObject_SetAttr(writer, W_table_map, table_map)) goto done;
    if (!(v = PyObject_GetAttr(writer, W_count))) goto done;
    long long count = PyLong_AsLongLong(v);
    Py_CLEAR(v);
    if (count == -1 && PyErr_Occurred()) goto done;
    if (!count) {
        if (!(seq = PyBytes_FromStringAndSize((const char *)e, 16)) || PyObject_SetAttr(writer, W_first_seq, seq))
            goto done;
    }
    if (!(v = PyLong_FromLongLong(count + 1)) || PyObject_SetAttr(writer, W_count, v)) goto done;
    Py_CLEAR(v);
    if (!(v = PyLong_FromLongLong(size + 9 + stored + n)) || PyObject_SetAttr(writer, W_size, v)) goto done;
    Py_CLEAR(v);
    if (!(v = PyLong_FromUnsignedLongLong(s->commit_ts)) || PyObject_SetAttr(writer, W_last_commit_ts, v))
        goto done;
    s->open_bytes += 9 + stored + n;
    rc = 1;
done:
    Py_XDECREF(head);
    Py_XDECREF(event);
    Py_XDECREF(entry);
    Py_XDECREF(parts);
    Py_XDECREF(index);
    Py_XDECREF(seq);
    Py_XDECREF(v);
    return rc;
}

/* The transaction's GTID text and the pending GTID (a new reference, NULL on error) to add at its end. */
static int set_gtid(State *s, const char *text, int len, PyObject *pending) {
    PyObject *gtid = pending ? PyBytes_FromStringAndSize(text, len) : NULL;
    if (!gtid) {
        Py_XDECREF(pending);
        return -1;
    }
    Py_SETREF(s->gtid, gtid);
    Py_SETREF(s->pending, pending);
    return 0;
}

/* One event as RecordBuilder.feed's fast path routes it: 1 done, 0 Python must feed it, -1 error.
 * *ended is set when it ended a transaction. Nothing is changed when it returns 0. */
static int route_event(State *s, const uint8_t *ev, Py_ssize_t n, uint64_t position, int crc, int verify,
                       const uint8_t *routable, int *ended) {
    uint8_t code = ev[EV_TYPE];
    Py_ssize_t end;
    if (routable[code]) {
        if (n < HEADER + 8 || (end = verified_end(ev, n, crc, verify)) < HEADER + 8) return 0;
        PyObject *id = PyLong_FromUnsignedLongLong(le48(ev + HEADER));
        if (!id) return -1;
        PyObject *route = PyDict_GetItemWithError(s->routes, id); /* borrowed */
        Py_DECREF(id);
        if (!route) return PyErr_Occurred() ? -1 : 0; /* Python says which table id lacks a TABLE_MAP */
        if (!PyTuple_Check(route) || PyTuple_GET_SIZE(route) < 2 || !PyBytes_Check(PyTuple_GET_ITEM(route, 0))) {
            PyErr_SetString(PyExc_TypeError, "builder routes must be (bytes, topic, ...) tuples");
            return -1;
        }
        PyObject *topic = PyTuple_GET_ITEM(route, 1);
        if (PyTuple_GET_SIZE(route) > 2 && topic != Py_None) { /* anything more attached to the map: Python */
            int attached = PyObject_IsTrue(PyTuple_GET_ITEM(route, 2));
            if (attached) return attached < 0 ? -1 : 0;
        }
        if (topic == Py_None) return step(s, INPUT_ROWS) ? -1 : 1;
        Py_INCREF(route); /* add_rows may run Python code (a new RecordWriter) */
        int added = add_rows(s, topic, PyTuple_GET_ITEM(route, 0), ev, n, position);
        Py_DECREF(route);
        if (added == 1 && step(s, INPUT_ROWS)) return -1;
        return added;
    }
    if (code == TABLE_MAP) {
        if ((end = verified_end(ev, n, crc, verify)) < 0) return 0;
        PyObject *body = PyBytes_FromStringAndSize((const char *)ev + HEADER, end - HEADER);
        if (!body) return -1;
        PyObject *known = PyDict_GetItemWithError(s->table_maps, body); /* borrowed */
        Py_DECREF(body);
        if (!known) return PyErr_Occurred() ? -1 : 0; /* a new map: Python decodes it once */
        Py_ssize_t size = PyTuple_Check(known) ? PyTuple_GET_SIZE(known) : 0;
        if (size < 2) {
            PyErr_SetString(PyExc_TypeError, "builder table maps must be (table id, topic, ...) tuples");
            return -1;
        }
        /* the route: this map's bytes, then what the known map has besides its table id */
        PyObject *route = PyTuple_New(size);
        PyObject *raw = route ? PyBytes_FromStringAndSize((const char *)ev, n) : NULL;
        if (!raw) {
            Py_XDECREF(route);
            return -1;
        }
        PyTuple_SET_ITEM(route, 0, raw);
        for (Py_ssize_t i = 1; i < size; i++) PyTuple_SET_ITEM(route, i, Py_NewRef(PyTuple_GET_ITEM(known, i)));
        int rc = PyDict_SetItem(s->routes, PyTuple_GET_ITEM(known, 0), route);
        Py_DECREF(route);
        if (rc) return -1;
        boundary(s, ev, position);
        return 1;
    }
    if (code == QUERY) { /* a BEGIN the builder has decoded before: the same bytes are the same BEGIN */
        if ((end = verified_end(ev, n, crc, verify)) < 0) return 0;
        PyObject *body = PyBytes_FromStringAndSize((const char *)ev + HEADER, end - HEADER);
        if (!body) return -1;
        int known = PySet_Contains(s->begins, body);
        Py_DECREF(body);
        if (known <= 0) return known;
        if (step(s, INPUT_BEGIN)) return -1;
        if (!PyBytes_GET_SIZE(s->gtid)) {
            s->commit_ts = (uint64_t)le32(ev + EV_TIMESTAMP) * 1000000u;
            s->commit_ts_ok = 1;
        }
        return 1;
    }
    if (code == GTID || code == ANONYMOUS_GTID) {
        if ((end = verified_end(ev, n, crc, verify)) < 0) return 0;
        uint64_t original = 0;
        if (mysql_gtid_commit_ts(ev, end, &original) < 0) return 0;
        if (step(s, INPUT_GTID)) return -1;
        if (code == GTID) {
            const uint8_t *u = ev + HEADER + 1;
            char uuid[37], text[64];
            static const char hex[] = "0123456789abcdef";
            for (int i = 0, k = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10) uuid[k++] = '-';
                uuid[k++] = hex[u[i] >> 4];
                uuid[k++] = hex[u[i] & 15];
            }
            uuid[36] = 0;
            long long gno = (long long)le64(ev + HEADER + 17);
            int len = snprintf(text, sizeof text, "%s:%lld", uuid, gno);
            if (set_gtid(s, text, len, Py_BuildValue("(OsL)", S_mysql, uuid, gno))) return -1;
        }
        s->commit_ts = original ? original : (uint64_t)le32(ev + EV_TIMESTAMP) * 1000000u;
        s->commit_ts_ok = 1;
        return 1;
    }
    if (code == ANNOTATE_ROWS) { /* the statement text of MariaDB's next rows events: decoded, then dropped */
        if (verified_end(ev, n, crc, verify) < 0) return 0;
        boundary(s, ev, position);
        return 1;
    }
    if (code == XID) {
        if (verified_end(ev, n, crc, verify) != HEADER + 8) return 0;
        if (step(s, INPUT_END)) return -1;
        boundary(s, ev, position);
        *ended = 1;
        return 1;
    }
    if (code == MARIADB_GTID) {
        if (verified_end(ev, n, crc, verify) != HEADER + 19) return 0;
        uint64_t seq = le64(ev + HEADER);
        uint32_t domain = le32(ev + HEADER + 8), server_id = le32(ev + EV_SERVER_ID);
        uint8_t flags = ev[HEADER + 12];
        if (flags & (2 | 64 | 128)) return 0; /* commit id or XA: the full decoder reads them */
        char text[64];
        int len = snprintf(text, sizeof text, "%lu-%lu-%llu", (unsigned long)domain, (unsigned long)server_id,
                           (unsigned long long)seq);
        if (step(s, INPUT_GTID)) return -1;
        if (set_gtid(s, text, len, Py_BuildValue("(OkkK)", S_mariadb, (unsigned long)domain,
                                                 (unsigned long)server_id, (unsigned long long)seq)))
            return -1;
        s->commit_ts = (uint64_t)le32(ev + EV_TIMESTAMP) * 1000000u;
        s->commit_ts_ok = 1;
        if (!(flags & 1) && step(s, INPUT_BEGIN)) return -1; /* FL_STANDALONE: one statement, no COMMIT follows */
        return 1;
    }
    return 0;
}

/* route(buf, pos, next_seq, txn, records, routes, table_maps, begins, crc, verify, routable, stop_at_commit)
 *   -> builder.Routed(pos, next_seq, events, bytes, next_position, timestamp, stopped, boundary_log_pos,
 *                     boundary_position)
 *
 * Routes the events of the complete single packets in buf[pos:] until one Python must handle (or the
 * end, or -- with stop_at_commit -- right after a transaction's end, then stopped is True).
 * next_position is the last nonzero log position routed (0 if none), timestamp that of the last event
 * routed, boundary_* the last transaction boundary passed (log position 0: none). */
static PyObject *route(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int next_seq, crc, verify, stop_at_commit;
    const char *routable;
    Py_ssize_t routable_len;
    State s;
    memset(&s, 0, sizeof s);
    if (!TxnType) {
        PyErr_SetString(PyExc_RuntimeError, "route: configure() first");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*niO!O!O!O!O!ppy#p", &view, &pos, &next_seq, (PyTypeObject *)TxnType, &s.txn,
                          (PyTypeObject *)RecordsType, &s.records, &PyDict_Type, &s.routes, &PyDict_Type,
                          &s.table_maps, &PySet_Type, &s.begins, &crc, &verify, &routable, &routable_len,
                          &stop_at_commit))
        return NULL;
    if (routable_len != 256 || pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "route: routable must hold 256 flags and pos lie in buf");
        return NULL;
    }
    if (load(&s, s.txn, s.records)) {
        Py_XDECREF(s.gtid);
        Py_XDECREF(s.pending);
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *buf = view.buf;
    Py_ssize_t end = view.len;
    long long events = 0, bytes = 0;
    unsigned long next_position = 0, timestamp = 0;
    int failed = 0, stopped = 0;
    while (end - pos >= 4) {
        uint32_t header = le32(buf + pos);
        Py_ssize_t length = header & 0xFFFFFF;
        if (length == MAX_PACKET || (int)(header >> 24) != next_seq || end - pos - 4 < length) break;
        const uint8_t *payload = buf + pos + 4;
        if (length < 20 || payload[0]) break;
        const uint8_t *ev = payload + 1;
        Py_ssize_t n = length - 1;
        if (ev[EV_TYPE] == ROTATE) break;
        uint32_t size = le32(ev + EV_SIZE), log_pos = le32(ev + EV_LOG_POS);
        uint64_t position = log_pos >= size ? log_pos - size : 0;
        int ended = 0;
        int done = route_event(&s, ev, n, position, crc, verify, (const uint8_t *)routable, &ended);
        if (done < 0) {
            failed = 1;
            break;
        }
        if (!done) break;
        pos += 4 + length;
        next_seq = (next_seq + 1) & 0xFF;
        events++;
        bytes += n;
        if (log_pos) next_position = log_pos;
        timestamp = le32(ev + EV_TIMESTAMP);
        if (ended && stop_at_commit) {
            stopped = 1;
            break;
        }
    }
    PyBuffer_Release(&view);
    if (!failed && events && store(&s)) failed = 1; /* nothing routed: nothing changed */
    Py_XDECREF(s.gtid);
    Py_XDECREF(s.pending);
    if (failed) return NULL;
    return PyObject_CallFunction(ResultType, "niLLkkOkK", pos, next_seq, events, bytes, next_position, timestamp,
                                 stopped ? Py_True : Py_False, s.boundary_log_pos, s.boundary_position);
}

/* configure(Transaction, OpenRecords, RecordWriter, Routed, table, phases): the classes route() takes and
 * makes, txn.py's transition table (N_PHASES * N_INPUTS entries) and its Phase members in order. */
static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *txn_type, *records_type, *writer_class, *result_type, *phases;
    const char *table;
    Py_ssize_t table_len;
    if (!PyArg_ParseTuple(args, "O!O!OOy#O!", &PyType_Type, &txn_type, &PyType_Type, &records_type, &writer_class,
                          &result_type, &table, &table_len, &PyTuple_Type, &phases))
        return NULL;
    if (table_len != N_PHASES * N_INPUTS || PyTuple_GET_SIZE(phases) != N_PHASES) {
        PyErr_Format(PyExc_ValueError, "configure: the transition table must have %d entries and %d phases",
                     N_PHASES * N_INPUTS, N_PHASES);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < table_len; i++) {
        if (((uint8_t)table[i] & ~ENDS) >= N_PHASES) {
            PyErr_SetString(PyExc_ValueError, "configure: a transition leads to an unknown phase");
            return NULL;
        }
    }
    memcpy(Table, table, sizeof Table);
    Py_XSETREF(TxnType, Py_NewRef(txn_type));
    Py_XSETREF(RecordsType, Py_NewRef(records_type));
    Py_XSETREF(WriterClass, Py_NewRef(writer_class));
    Py_XSETREF(ResultType, Py_NewRef(result_type));
    Py_XSETREF(Phases, Py_NewRef(phases));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"route", route, METH_VARARGS,
     "Route the events of buf[pos:] into a RecordBuilder's state until one Python must feed."},
    {"configure", configure, METH_VARARGS,
     "Give route() the state and result classes, txn.py's transition table and its phases."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_router", "Native routing core of binlake run.", -1, methods,
};

#define INTERN(var, text) \
    if (!(var = PyUnicode_InternFromString(text))) return NULL
#define EXPORT(name)                              \
    if (PyModule_AddIntConstant(m, #name, name)) { \
        Py_DECREF(m);                             \
        return NULL;                              \
    }

PyMODINIT_FUNC PyInit__router(void) {
    crc_init();
    INTERN(T_phase, "phase");
    INTERN(T_gtid, "gtid");
    INTERN(T_pending, "pending");
    INTERN(T_commit_ts, "commit_ts");
    INTERN(T_count, "count");
    INTERN(T_mariadb_gtids, "mariadb_gtids");
    INTERN(T_mysql_gtids, "mysql_gtids");
    INTERN(R_open, "open");
    INTERN(R_bytes, "bytes");
    INTERN(R_max_record_bytes, "max_record_bytes");
    INTERN(R_max_open_bytes, "max_open_bytes");
    INTERN(R_file_number, "file_number");
    INTERN(R_fde, "fde");
    INTERN(S_mariadb, "mariadb");
    INTERN(S_mysql, "mysql");
    INTERN(S_add, "add");
    INTERN(W_size, "size");
    INTERN(W_count, "count");
    INTERN(W_first_seq, "first_seq");
    INTERN(W_index, "index");
    INTERN(W_last_commit_ts, "last_commit_ts");
    INTERN(W_parts, "parts");
    INTERN(W_table_map, "table_map");
    INTERN(W_schema, "schema");
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    EXPORT(PHASE_IDLE);
    EXPORT(PHASE_IMPLICIT);
    EXPORT(PHASE_EXPLICIT);
    EXPORT(INPUT_GTID);
    EXPORT(INPUT_BEGIN);
    EXPORT(INPUT_ROWS);
    EXPORT(INPUT_STATEMENT);
    EXPORT(INPUT_END);
    EXPORT(ENDS);
    return m;
}
