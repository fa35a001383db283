/* Native reader of a text result set's row packets (snapshots read whole tables through it).
 *
 * text_rows(buf, pos, seq, kinds, limit) walks the complete row packets of buf[pos:] and turns each
 * into a list of values, one per column, by its kind (ingester/sources/resultset.py, which holds the
 * Python reference, parse_row, and the I/O around it):
 *   'b' bytes, 'a' str (ASCII, strict), 'u' str (UTF-8, strict), 'r' str (UTF-8, errors replaced),
 *   'i' int (ASCII digits).
 * It stops before the first packet it does not take: incomplete, part of a 16 MB multi-packet, out of
 * sequence, the result's end (EOF or ERR), malformed, or a value its kind refuses. Python then handles
 * that packet, producing the same value or raising the error. So C never reports errors and never
 * reads past the packet it is in. Returns (rows, pos, seq) after the packets taken.
 *
 * text_rows_json(buf, pos, seq, kinds, limit, max_bytes, carry) takes the same packets (kinds i, a, u and
 * r only) and writes each row as the JSON array orjson writes for text_rows' list (integers without leading
 * zeros, strings escaped as orjson escapes them; an 'r' value that is not valid UTF-8 is left to Python),
 * with no Python object between. Rows are grouped into fragments (rows joined by commas, no brackets) so
 * that each group, bracketed, stays within max_bytes (a row larger than that is a group of its own); carry
 * is the bracketed size of the caller's open group (0: none), which the first fragment continues when
 * `continues`. Returns (fragments, continues, rows, last, pos, seq): last is the last row taken as
 * text_rows gives it (its key values), None when none was taken.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_bytes.h"
#include "../_json.h"

/* One value of kind k from p[0:n]; NULL with the error cleared: Python takes the packet. */
static PyObject *value(char k, const uint8_t *p, Py_ssize_t n) {
    PyObject *v;
    char digits[32];
    switch (k) {
    case 'b': return PyBytes_FromStringAndSize((const char *)p, n);
    case 'a': v = PyUnicode_DecodeASCII((const char *)p, n, NULL); break;
    case 'u': v = PyUnicode_DecodeUTF8((const char *)p, n, NULL); break;
    case 'r': v = PyUnicode_DecodeUTF8((const char *)p, n, "replace"); break;
    case 'i':
        if (n == 0 || n >= (Py_ssize_t)sizeof(digits)) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!((p[i] >= '0' && p[i] <= '9') || (i == 0 && p[i] == '-' && n > 1))) return NULL;
        }
        memcpy(digits, p, n);
        digits[n] = 0;
        v = PyLong_FromString(digits, NULL, 10);
        break;
    default: return NULL;
    }
    if (!v) PyErr_Clear();
    return v;
}

/* The row of one packet's payload, or NULL (no error set) when Python must take it. */
static PyObject *row(const uint8_t *p, Py_ssize_t n, const char *kinds, Py_ssize_t width) {
    PyObject *out = PyList_New(width);
    if (!out) {
        PyErr_Clear();
        return NULL;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t c = 0; c < width; c++) {
        if (at >= n) goto refuse;
        uint8_t b = p[at];
        uint64_t len;
        if (b < 0xFB) {
            len = b;
            at += 1;
        } else if (b == 0xFB) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(out, c, Py_None);
            at += 1;
            continue;
        } else if (b == 0xFC && n - at >= 3) {
            len = le16(p + at + 1);
            at += 3;
        } else if (b == 0xFD && n - at >= 4) {
            len = le24(p + at + 1);
            at += 4;
        } else if (b == 0xFE && n - at >= 9) {
            len = le64(p + at + 1);
            at += 9;
        } else {
            goto refuse;
        }
        if (len > (uint64_t)(n - at)) goto refuse;
        PyObject *v = value(kinds[c], p + at, (Py_ssize_t)len);
        if (!v) goto refuse;
        PyList_SET_ITEM(out, c, v);
        at += (Py_ssize_t)len;
    }
    if (at != n) goto refuse;
    return out;
refuse:
    Py_DECREF(out);
    return NULL;
}

static PyObject *text_rows(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, width;
    unsigned int seq;
    const char *kinds;
    if (!PyArg_ParseTuple(args, "y*nIy#n", &buf, &pos, &seq, &kinds, &width, &limit)) return NULL;
    const uint8_t *data = buf.buf;
    Py_ssize_t end = buf.len;
    PyObject *rows = PyList_New(0);
    if (!rows) goto fail;
    if (pos < 0 || pos > end) pos = end;
    while (end - pos >= 4 && PyList_GET_SIZE(rows) != limit) {
        uint32_t header = le32(data + pos);
        Py_ssize_t length = header & 0xFFFFFF;
        if (length == 0xFFFFFF || end - pos - 4 < length || (header >> 24) != (seq & 0xFF)) break;
        const uint8_t *p = data + pos + 4;
        if (length == 0 || p[0] == 0xFF || (p[0] == 0xFE && length < 9)) break;  /* the end, or malformed */
        PyObject *r = row(p, length, kinds, width);
        if (!r) break;
        int failed = PyList_Append(rows, r);
        Py_DECREF(r);
        if (failed) goto fail;
        pos += 4 + length;
        seq = (seq + 1) & 0xFF;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("(NnI)", rows, pos, seq);
fail:
    Py_XDECREF(rows);
    PyBuffer_Release(&buf);
    return NULL;
}

/* The length-encoded value at p[*at] (n bytes): 1 and its bytes, 0 for NULL, -1 when malformed. */
static int field(const uint8_t *p, Py_ssize_t n, Py_ssize_t *at, const uint8_t **v, Py_ssize_t *len) {
    if (*at >= n) return -1;
    uint8_t b = p[*at];
    uint64_t size;
    if (b < 0xFB) {
        size = b;
        *at += 1;
    } else if (b == 0xFB) {
        *at += 1;
        return 0;
    } else if (b == 0xFC && n - *at >= 3) {
        size = le16(p + *at + 1);
        *at += 3;
    } else if (b == 0xFD && n - *at >= 4) {
        size = le24(p + *at + 1);
        *at += 4;
    } else if (b == 0xFE && n - *at >= 9) {
        size = le64(p + *at + 1);
        *at += 9;
    } else {
        return -1;
    }
    if (size > (uint64_t)(n - *at)) return -1;
    *v = p + *at;
    *len = (Py_ssize_t)size;
    *at += (Py_ssize_t)size;
    return 1;
}

/* An integer's ASCII digits as JSON (Python's int() of them, then orjson): 1 when they are not digits. */
static int put_int_text(Out *o, const uint8_t *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    int negative = 0;
    if (n > 0 && p[0] == '-') {
        negative = 1;
        i = 1;
    }
    if (i == n || n >= 32) return 1;
    for (Py_ssize_t j = i; j < n; j++)
        if (p[j] < '0' || p[j] > '9') return 1;
    while (i < n - 1 && p[i] == '0') i++; /* ZEROFILL columns: 00042 is 42 */
    if (reserve(o, n + 1) < 0) return -1;
    if (negative && !(n - i == 1 && p[i] == '0')) o->buf[o->len++] = '-';
    put(o, (const char *)p + i, n - i);
    return 0;
}

/* One row packet as a JSON array: 0, 1 when Python must take it (o left as it was), -1 on an error. */
static int json_row(Out *o, const uint8_t *p, Py_ssize_t n, const char *kinds, Py_ssize_t width) {
    Py_ssize_t start = o->len, at = 0;
    if (reserve(o, 2) < 0) return -1;
    o->buf[o->len++] = '[';
    for (Py_ssize_t c = 0; c < width; c++) {
        const uint8_t *v = NULL;
        Py_ssize_t len = 0;
        int got = field(p, n, &at, &v, &len), r;
        if (got < 0) goto refuse;
        if (reserve(o, 5) < 0) return -1;
        if (c) o->buf[o->len++] = ',';
        if (!got) {
            PUT_LIT(o, "null");
            continue;
        }
        switch (kinds[c]) {
        case 'i': r = put_int_text(o, v, len); break;
        case 'a': r = put_utf8(o, v, len, 1); break;
        case 'u':
        case 'r': r = put_utf8(o, v, len, 0); break;
        default: r = 1;
        }
        if (r < 0) return -1;
        if (r) goto refuse;
    }
    if (at != n) goto refuse;
    if (reserve(o, 1) < 0) return -1;
    o->buf[o->len++] = ']';
    return 0;
refuse:
    o->len = start;
    return 1;
}

static PyObject *text_rows_json(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, width, max_bytes, carry, rows = 0;
    unsigned int seq;
    const char *kinds;
    if (!PyArg_ParseTuple(args, "y*nIy#nnn", &buf, &pos, &seq, &kinds, &width, &limit, &max_bytes, &carry))
        return NULL;
    const uint8_t *data = buf.buf, *last_p = NULL;
    Py_ssize_t end = buf.len, last_n = 0, group = carry, starts_cap = 16, nstarts = 0;
    Out o = {NULL, 0, 0};
    Py_ssize_t *starts = PyMem_Malloc(starts_cap * sizeof(Py_ssize_t)); /* where each new group begins in o */
    PyObject *fragments = NULL, *last = NULL, *result = NULL;
    int continues = 0;
    if (!starts) {
        PyErr_NoMemory();
        goto done;
    }
    if (pos < 0 || pos > end) pos = end;
    while (end - pos >= 4 && rows != limit) {
        uint32_t header = le32(data + pos);
        Py_ssize_t length = header & 0xFFFFFF;
        if (length == 0xFFFFFF || end - pos - 4 < length || (header >> 24) != (seq & 0xFF)) break;
        const uint8_t *p = data + pos + 4;
        if (length == 0 || p[0] == 0xFF || (p[0] == 0xFE && length < 9)) break; /* the end, or malformed */
        Py_ssize_t at = o.len;
        if (reserve(&o, 1) < 0) goto done;
        if (rows) o.buf[o.len++] = ','; /* removed again when the row starts a group */
        int r = json_row(&o, p, length, kinds, width);
        if (r < 0) goto done;
        if (r) {
            o.len = at;
            break;
        }
        Py_ssize_t size = o.len - at - (rows ? 1 : 0); /* the row's JSON */
        if (group == 0 || group + size + 1 > max_bytes) { /* a new group: bracketed, 1 + (row + 1) each */
            if (rows) {
                memmove(o.buf + at, o.buf + at + 1, size);
                o.len--;
            }
            if (nstarts == starts_cap) {
                Py_ssize_t *grown = PyMem_Realloc(starts, 2 * starts_cap * sizeof(Py_ssize_t));
                if (!grown) {
                    PyErr_NoMemory();
                    goto done;
                }
                starts = grown;
                starts_cap *= 2;
            }
            starts[nstarts++] = at;
            group = 1;
        } else if (!rows) {
            continues = 1; /* the first row joins the caller's open group */
        }
        group += size + 1;
        rows++;
        last_p = p;
        last_n = length;
        pos += 4 + length;
        seq = (seq + 1) & 0xFF;
    }
    Py_ssize_t nfragments = nstarts + continues;
    fragments = PyList_New(nfragments);
    if (!fragments) goto done;
    for (Py_ssize_t k = 0; k < nfragments; k++) {
        Py_ssize_t from = continues ? (k ? starts[k - 1] : 0) : starts[k];
        Py_ssize_t to = continues ? (k < nstarts ? starts[k] : o.len) : (k + 1 < nstarts ? starts[k + 1] : o.len);
        PyObject *b = PyBytes_FromStringAndSize(o.buf + from, to - from);
        if (!b) goto done;
        PyList_SET_ITEM(fragments, k, b);
    }
    if (last_p) {
        last = row(last_p, last_n, kinds, width);
        if (!last) { /* it was taken as JSON, so text_rows takes it too */
            PyErr_SetString(PyExc_RuntimeError, "text_rows_json: the last row has no values");
            goto done;
        }
    } else {
        last = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(OOnOnI)", fragments, continues ? Py_True : Py_False, rows, last, pos, seq);
done:
    Py_XDECREF(fragments);
    Py_XDECREF(last);
    PyMem_Free(starts);
    PyMem_Free(o.buf);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"text_rows", text_rows, METH_VARARGS,
     "(rows, pos, seq) of the complete row packets of buf[pos:] it takes (see the module's comment)."},
    {"text_rows_json", text_rows_json, METH_VARARGS,
     "(fragments, continues, rows, last, pos, seq): the same packets as JSON (see the module's comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_textrows", "Native reader of text result set rows (snapshots).", -1, methods,
};

PyMODINIT_FUNC PyInit__textrows(void) { return PyModule_Create(&module_def); }
