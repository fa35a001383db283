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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_bytes.h"

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

static PyMethodDef methods[] = {
    {"text_rows", text_rows, METH_VARARGS,
     "(rows, pos, seq) of the complete row packets of buf[pos:] it takes (see the module's comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_textrows", "Native reader of text result set rows (snapshots).", -1, methods,
};

PyMODINIT_FUNC PyInit__textrows(void) { return PyModule_Create(&module_def); }
