/* JSON output shared by the native renderers: a growable buffer and writers of integers, base64, UTF-8 text
 * and doubles, each byte-identical to what orjson writes for the same Python value (header-only, static;
 * include after Python.h and _bytes.h). */
#ifndef BINLAKE_JSON_H
#define BINLAKE_JSON_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

static inline int reserve(Out *o, Py_ssize_t n) {
    return grow_buffer((void **)&o->buf, o->len, &o->cap, n, 1 << 16);
}

/* The put_* functions write into space already reserved by the caller. */
static inline void put(Out *o, const char *s, Py_ssize_t n) {
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

#define PUT_LIT(o, s) put((o), (s), sizeof(s) - 1)

/* v zero-padded to at least `width` digits, as Python's f"{v:0{width}d}" for v >= 0. */
static inline void put_padded(Out *o, uint64_t v, int width) {
    char tmp[20]; /* width <= 6 */
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n < width) tmp[n++] = '0';
    while (n) o->buf[o->len++] = tmp[--n];
}

static inline void put_u64(Out *o, uint64_t v) { put_padded(o, v, 1); }

static inline void put_i64(Out *o, int64_t v) {
    if (v < 0) {
        o->buf[o->len++] = '-';
        put_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(o, (uint64_t)v);
    }
}

/* A JSON string of base64 (base64.b64encode; with url_safe, base64.urlsafe_b64encode) of p[0:n], zero-padded
 * to `pad` bytes. */
static inline int put_base64_in(Out *o, const uint8_t *p, Py_ssize_t n, Py_ssize_t pad, int url_safe) {
    static const char STANDARD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char URL_SAFE[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *alphabet = url_safe ? URL_SAFE : STANDARD;
    Py_ssize_t total = n < pad ? pad : n;
    if (reserve(o, (total + 2) / 3 * 4 + 2) < 0) return -1;
    char *q = o->buf + o->len;
    *q++ = '"';
    uint8_t chunk[3];
    for (Py_ssize_t i = 0; i < total; i += 3) {
        int k = total - i < 3 ? (int)(total - i) : 3;
        for (int j = 0; j < 3; j++) chunk[j] = (j < k && i + j < n) ? p[i + j] : 0;
        uint32_t v = (uint32_t)chunk[0] << 16 | (uint32_t)chunk[1] << 8 | chunk[2];
        *q++ = alphabet[v >> 18];
        *q++ = alphabet[v >> 12 & 63];
        *q++ = k > 1 ? alphabet[v >> 6 & 63] : '=';
        *q++ = k > 2 ? alphabet[v & 63] : '=';
    }
    *q++ = '"';
    o->len = q - o->buf;
    return 0;
}

static inline int put_base64(Out *o, const uint8_t *p, Py_ssize_t n, Py_ssize_t pad) {
    return put_base64_in(o, p, n, pad, 0);
}

/* The length of the multi-byte UTF-8 sequence at s (n bytes left), or 0 unless Python's strict decoder takes it
 * (no overlongs, surrogates or > U+10FFFF). */
static inline int utf8_sequence(const uint8_t *s, Py_ssize_t n) {
    uint8_t c = s[0], lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    int len;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (int k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

/* A JSON string of UTF-8 text, escaped as orjson does. Returns 1 (leave it to Python) unless the
 * bytes are valid UTF-8 by Python's strict decoder (no overlongs, surrogates or > U+10FFFF), or
 * with ascii_only, unless they are all ASCII (single-byte charsets agree with it there). */
static inline int put_utf8(Out *o, const uint8_t *s, Py_ssize_t n, int ascii_only) {
    static const char HEX[] = "0123456789abcdef";
    if (n > (PY_SSIZE_T_MAX - 2) / 6 || reserve(o, n * 6 + 2) < 0) return -1;
    char *q = o->buf + o->len;
    *q++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\') {
                *q++ = (char)c;
            } else {
                *q++ = '\\';
                switch (c) {
                case '"': *q++ = '"'; break;
                case '\\': *q++ = '\\'; break;
                case '\b': *q++ = 'b'; break;
                case '\t': *q++ = 't'; break;
                case '\n': *q++ = 'n'; break;
                case '\f': *q++ = 'f'; break;
                case '\r': *q++ = 'r'; break;
                default:
                    *q++ = 'u'; *q++ = '0'; *q++ = '0';
                    *q++ = HEX[c >> 4]; *q++ = HEX[c & 15];
                }
            }
            i++;
            continue;
        }
        if (ascii_only) return 1;
        int len = utf8_sequence(s + i, n - i);
        if (!len) return 1;
        memcpy(q, s + i, len);
        q += len;
        i += len;
    }
    *q++ = '"';
    o->len = q - o->buf;
    return 0;
}

/* A double as orjson writes it: Python's shortest repr, but exponents without zero padding and
 * 1e-5 <= |v| < 1e-4 in positional form; NaN and infinities as null. */
static inline int put_double(Out *o, double v) {
    if (reserve(o, 32) < 0) return -1;
    if (!isfinite(v)) {
        PUT_LIT(o, "null");
        return 0;
    }
    char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!s) return -1;
    char *e = strchr(s, 'e');
    if (!e) {
        put(o, s, (Py_ssize_t)strlen(s));
    } else {
        int exp = atoi(e + 1);
        if (exp == -5) {
            const char *m = s;
            if (*m == '-') o->buf[o->len++] = *m++;
            PUT_LIT(o, "0.0000");
            for (; m < e; m++)
                if (*m != '.') o->buf[o->len++] = *m;
        } else {
            put(o, s, e - s);
            o->buf[o->len++] = 'e';
            o->buf[o->len++] = exp < 0 ? '-' : '+';
            put_u64(o, (uint64_t)(exp < 0 ? -exp : exp));
        }
    }
    PyMem_Free(s);
    return 0;
}

/* Packed DECIMAL as a JSON string with exactly `scale` fraction digits (values.decimal_code); 1 when a digit
 * group is corrupt. */
static inline int put_decimal(Out *o, const uint8_t *p, int precision, int scale) {
    char digits[80];
    int negative, nd = precision, intg = precision - scale;
    if (decimal_digits(p, precision, scale, digits, &negative)) return 1; /* corrupt digit group: Python raises */
    if (reserve(o, nd + 5) < 0) return -1;
    o->buf[o->len++] = '"';
    if (negative) o->buf[o->len++] = '-';
    int lead = 0;
    while (lead < intg - 1 && digits[lead] == '0') lead++;
    if (intg) put(o, digits + lead, intg - lead);
    else o->buf[o->len++] = '0';
    if (scale) {
        o->buf[o->len++] = '.';
        put(o, digits + intg, scale);
    }
    o->buf[o->len++] = '"';
    return 0;
}

/* A SET's value: the labels of the mask's bits (JSON-escaped bytes without quotes), joined by commas, quoted. */
static inline int put_set_labels(Out *o, uint64_t mask, PyObject *labels) {
    o->buf[o->len++] = '"';
    int first = 1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(labels) && j < 64; j++) {
        if (!(mask >> j & 1)) continue;
        PyObject *label = PyTuple_GET_ITEM(labels, j);
        if (reserve(o, PyBytes_GET_SIZE(label) + 2) < 0) return -1;
        if (!first) o->buf[o->len++] = ',';
        put(o, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label));
        first = 0;
    }
    o->buf[o->len++] = '"';
    return 0;
}

#endif
