/* A change event's payload JSON (as binlake's JSON path writes it: objects with their schema's fields in order,
 * no whitespace) transcoded to Confluent's Avro wire format, byte-identical to the Python reference path
 * (layouts.py AvroLayout: orjson.loads, avro_schema.payload_fixer, fastavro's schemaless_writer). Included by
 * _native.c after _json.h; the native composer (_envelope.h) transcodes its messages with it.
 *
 * avro(program, json, header) -> bytes | None
 *   program: the payload's Connect schema compiled by avro_program.py (ops below); header: the magic byte and
 *   schema id. None for anything it does not transcode exactly as Python does (a field out of order, whitespace,
 *   a null where the schema needs a value, an integer out of its Avro type's range, a float that Avro's float
 *   cannot hold, base64 that is not canonical, a lone surrogate, text that is not UTF-8, an unknown op): the
 *   Python path then writes the same bytes or raises its error. Every read of the program and of the JSON is
 *   bounds-checked.
 *
 * The program, pre-order (integers little-endian):
 *   'R' u16 n, then per field: u16 key length, the key as JSON text (quoted), the field's program
 *   'U' u8 null's branch, u8 the value's branch, u32 length, the value's program (a union with null)
 *   'A' u32 length, the items' program
 *   'i' int, 'l' long, 'f' float, 'd' double, 'b' boolean, 's' string, 'y' bytes (JSON: base64 text)
 */
#ifndef BINLAKE_AVRO_H
#define BINLAKE_AVRO_H

enum { AV_RECORD = 'R', AV_UNION = 'U', AV_ARRAY = 'A', AV_INT = 'i', AV_LONG = 'l', AV_FLOAT = 'f',
       AV_DOUBLE = 'd', AV_BOOLEAN = 'b', AV_STRING = 's', AV_BYTES = 'y' };

typedef struct {
    const uint8_t *p;
    Py_ssize_t len, pc;
    int depth; /* of nested values: at most AV_MAX_DEPTH (a Connect schema of a table nests a few) */
} Program;

enum { AV_MAX_DEPTH = 64 };

typedef struct {
    const char *s, *end;
} Json;

/* 0 (done), 1 (not exactly as Python: None), -1 (an exception is set) */
#define AV_TRY(call)                                                                                               \
    do {                                                                                                           \
        int r_ = (call);                                                                                           \
        if (r_) return r_;                                                                                         \
    } while (0)

static int prog_uint(Program *pr, int n, uint32_t *v) {
    if (pr->len - pr->pc < n) return 1;
    *v = (uint32_t)le_uint(pr->p + pr->pc, n);
    pr->pc += n;
    return 0;
}

static int json_literal(Json *j, const char *lit, Py_ssize_t n) {
    if (j->end - j->s < n || memcmp(j->s, lit, n)) return 0;
    j->s += n;
    return 1;
}

#define JSON_LIT(j, s) json_literal((j), (s), sizeof(s) - 1)

/* Avro's long at q (at most 10 bytes: zigzag, then 7 bits a byte, low first); the bytes written. */
static int put_varint(char *q, int64_t v) {
    uint64_t u = (uint64_t)v, z = u << 1 ^ (0 - (u >> 63));
    int n = 0;
    while (z >= 0x80) {
        q[n++] = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    q[n++] = (char)z;
    return n;
}

static int av_long(Out *o, int64_t v) {
    if (reserve(o, 10) < 0) return -1;
    o->len += put_varint(o->buf + o->len, v);
    return 0;
}

/* Insert a block count before what was written since `at` (Avro's arrays: the count, items, then 0). */
static int av_insert_count(Out *o, Py_ssize_t at, int64_t count) {
    char head[10];
    int n = put_varint(head, count);
    if (reserve(o, n) < 0) return -1;
    memmove(o->buf + at + n, o->buf + at, o->len - at);
    memcpy(o->buf + at, head, n);
    o->len += n;
    return 0;
}

static int is_digit(const char *s, const char *end) { return s < end && *s >= '0' && *s <= '9'; }

/* A JSON number's text at j: its end, and whether it is an integer (no fraction or exponent); NULL if none. */
static const char *json_number(const Json *j, int *integer) {
    const char *s = j->s;
    if (s < j->end && *s == '-') s++;
    if (!is_digit(s, j->end)) return NULL;
    if (*s == '0') s++;
    else
        while (is_digit(s, j->end)) s++;
    *integer = 1;
    if (s < j->end && *s == '.') {
        s++;
        if (!is_digit(s, j->end)) return NULL;
        while (is_digit(s, j->end)) s++;
        *integer = 0;
    }
    if (s < j->end && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < j->end && (*s == '+' || *s == '-')) s++;
        if (!is_digit(s, j->end)) return NULL;
        while (is_digit(s, j->end)) s++;
        *integer = 0;
    }
    return s;
}

/* A JSON integer in [lo, hi]. */
static int json_int(Json *j, int64_t lo, int64_t hi, int64_t *v) {
    int integer;
    const char *end = json_number(j, &integer);
    if (!end || !integer) return 1;
    const char *s = j->s;
    int negative = *s == '-';
    s += negative;
    if (end - s > 19) return 1;
    uint64_t u = 0; /* at most 19 digits: fits */
    for (; s < end; s++) u = u * 10 + (uint64_t)(*s - '0');
    if (u > (uint64_t)INT64_MAX + negative) return 1;
    *v = negative ? (int64_t)(0 - u) : (int64_t)u;
    if (*v < lo || *v > hi) return 1;
    j->s = end;
    return 0;
}

/* A JSON number as Python's float of orjson's value: an integer converted (correctly rounded, as float(int)),
 * else the text correctly rounded; 1 if it is not finite. */
static int json_double(Json *j, double *v) {
    int integer;
    const char *end = json_number(j, &integer);
    if (!end) return 1;
    if (integer) {
        int64_t i;
        AV_TRY(json_int(j, INT64_MIN, INT64_MAX, &i));
        *v = (double)i;
        return 0;
    }
    char text[64];
    Py_ssize_t n = end - j->s;
    if (n >= (Py_ssize_t)sizeof text) return 1;
    memcpy(text, j->s, n);
    text[n] = 0;
    char *stop;
    double d = PyOS_string_to_double(text, &stop, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    if (stop != text + n || !isfinite(d)) return 1;
    *v = d;
    j->s = end;
    return 0;
}

static int hex4(const char *s, const char *end, uint32_t *v) {
    if (end - s < 4) return 1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* An escape after its backslash at *s: the code point (a surrogate pair joined); 1 for a lone surrogate. */
static int json_escape(const char **s, const char *end, uint32_t *cp) {
    if (*s >= end) return 1;
    char c = *(*s)++;
    switch (c) {
    case '"': case '\\': case '/': *cp = (uint32_t)c; return 0;
    case 'b': *cp = '\b'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'u': break;
    default: return 1;
    }
    AV_TRY(hex4(*s, end, cp));
    *s += 4;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) return 1;
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        uint32_t low;
        if (end - *s < 6 || (*s)[0] != '\\' || (*s)[1] != 'u' || hex4(*s + 2, end, &low) || low < 0xDC00 || low > 0xDFFF)
            return 1;
        *s += 6;
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    }
    return 0;
}

static char *put_code_point(char *q, uint32_t cp) {
    if (cp < 0x80) {
        *q++ = (char)cp;
    } else if (cp < 0x800) {
        *q++ = (char)(0xC0 | cp >> 6);
        *q++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *q++ = (char)(0xE0 | cp >> 12);
        *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *q++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *q++ = (char)(0xF0 | cp >> 18);
        *q++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *q++ = (char)(0x80 | (cp & 0x3F));
    }
    return q;
}

/* The end of the JSON string at j (the closing quote), or NULL. */
static const char *string_end(const Json *j) {
    if (j->s >= j->end || *j->s != '"') return NULL;
    for (const char *s = j->s + 1; s < j->end; s++) {
        if (*s == '"') return s;
        if (*s == '\\') s++;
    }
    return NULL;
}

/* Avro's string: a JSON string's text as UTF-8 (strict, as orjson reads it), length-prefixed. */
static int av_string(Json *j, Out *o) {
    const char *close = string_end(j);
    if (!close) return 1;
    const char *s = j->s + 1;
    Py_ssize_t at = o->len, room = 10; /* the text goes after room for its length, then moves back */
    if (reserve(o, room + (close - s)) < 0) return -1;
    char *q = o->buf + at + room;
    while (s < close) {
        uint8_t c = (uint8_t)*s;
        if (c == '\\') {
            uint32_t cp;
            s++;
            AV_TRY(json_escape(&s, close, &cp));
            q = put_code_point(q, cp); /* never longer than its escape */
        } else if (c < 0x20) {
            return 1;
        } else if (c < 0x80) {
            *q++ = (char)c;
            s++;
        } else {
            int n = utf8_sequence((const uint8_t *)s, close - s);
            if (!n) return 1;
            memcpy(q, s, n);
            q += n;
            s += n;
        }
    }
    Py_ssize_t n = q - (o->buf + at + room);
    Py_ssize_t head = put_varint(o->buf + at, n); /* within the room */
    memmove(o->buf + at + head, o->buf + at + room, n);
    o->len = at + head + n;
    j->s = close + 1;
    return 0;
}

static int base64_digit(char c) {
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Avro's bytes of a JSON string of base64 (base64.b64decode's bytes), length-prefixed; only canonical text
 * (whole quads, '=' padding at the end only). */
static int av_base64(Json *j, Out *o) {
    const char *close = string_end(j);
    if (!close) return 1;
    const char *s = j->s + 1;
    Py_ssize_t n = close - s;
    if (n % 4) return 1;
    int pad = n && s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    Py_ssize_t size = n / 4 * 3 - pad;
    AV_TRY(av_long(o, size));
    if (reserve(o, n / 4 * 3) < 0) return -1;
    uint8_t *q = (uint8_t *)o->buf + o->len;
    for (Py_ssize_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            int d = base64_digit(s[i + k]);
            if (d < 0) {
                if (!(last && s[i + k] == '=' && k >= 4 - pad)) return 1;
                d = 0;
            }
            v = v << 6 | (uint32_t)d;
        }
        *q++ = (uint8_t)(v >> 16);
        *q++ = (uint8_t)(v >> 8);
        *q++ = (uint8_t)v;
    }
    o->len += size;
    j->s = close + 1;
    return 0;
}

static int av_value(Program *pr, Json *j, Out *o);

static int av_record(Program *pr, Json *j, Out *o) {
    uint32_t n, keylen;
    AV_TRY(prog_uint(pr, 2, &n));
    if (!JSON_LIT(j, "{")) return 1;
    for (uint32_t i = 0; i < n; i++) {
        if (i && !JSON_LIT(j, ",")) return 1;
        AV_TRY(prog_uint(pr, 2, &keylen));
        if (pr->len - pr->pc < (Py_ssize_t)keylen) return 1;
        if (!json_literal(j, (const char *)pr->p + pr->pc, keylen) || !JSON_LIT(j, ":")) return 1;
        pr->pc += keylen;
        AV_TRY(av_value(pr, j, o));
    }
    return JSON_LIT(j, "}") ? 0 : 1;
}

static int av_union(Program *pr, Json *j, Out *o) {
    uint32_t null_branch, branch, len;
    AV_TRY(prog_uint(pr, 1, &null_branch));
    AV_TRY(prog_uint(pr, 1, &branch));
    AV_TRY(prog_uint(pr, 4, &len));
    if (pr->len - pr->pc < (Py_ssize_t)len) return 1;
    if (JSON_LIT(j, "null")) {
        pr->pc += len;
        return av_long(o, null_branch);
    }
    AV_TRY(av_long(o, branch));
    Py_ssize_t end = pr->pc + len;
    AV_TRY(av_value(pr, j, o));
    return pr->pc == end ? 0 : 1;
}

static int av_array(Program *pr, Json *j, Out *o) {
    uint32_t len;
    AV_TRY(prog_uint(pr, 4, &len));
    if (pr->len - pr->pc < (Py_ssize_t)len || !JSON_LIT(j, "[")) return 1;
    Py_ssize_t items = pr->pc, at = o->len;
    int64_t count = 0;
    while (!JSON_LIT(j, "]")) {
        if (count && !JSON_LIT(j, ",")) return 1;
        pr->pc = items;
        AV_TRY(av_value(pr, j, o));
        if (pr->pc != items + (Py_ssize_t)len) return 1;
        count++;
    }
    pr->pc = items + len;
    if (count && av_insert_count(o, at, count) < 0) return -1;
    return av_long(o, 0);
}

static int av_op(Program *pr, Json *j, Out *o);

static int av_value(Program *pr, Json *j, Out *o) {
    if (pr->depth >= AV_MAX_DEPTH) return 1;
    pr->depth++;
    int r = av_op(pr, j, o);
    pr->depth--;
    return r;
}

/* One op of the program at pr->pc and the JSON value at j. */
static int av_op(Program *pr, Json *j, Out *o) {
    if (pr->pc >= pr->len) return 1;
    int op = pr->p[pr->pc++];
    int64_t i;
    double d;
    switch (op) {
    case AV_RECORD: return av_record(pr, j, o);
    case AV_UNION: return av_union(pr, j, o);
    case AV_ARRAY: return av_array(pr, j, o);
    case AV_INT:
        AV_TRY(json_int(j, INT32_MIN, INT32_MAX, &i));
        return av_long(o, i);
    case AV_LONG:
        AV_TRY(json_int(j, INT64_MIN, INT64_MAX, &i));
        return av_long(o, i);
    case AV_FLOAT: {
        AV_TRY(json_double(j, &d));
        float f = (float)d; /* rounded to nearest, as struct.pack('<f') */
        if (isinf(f)) return 1;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (reserve(o, 4) < 0) return -1;
        put_le32((uint8_t *)o->buf + o->len, bits);
        o->len += 4;
        return 0;
    }
    case AV_DOUBLE: {
        AV_TRY(json_double(j, &d));
        uint64_t bits;
        memcpy(&bits, &d, 8);
        if (reserve(o, 8) < 0) return -1;
        put_le32((uint8_t *)o->buf + o->len, (uint32_t)bits);
        put_le32((uint8_t *)o->buf + o->len + 4, (uint32_t)(bits >> 32));
        o->len += 8;
        return 0;
    }
    case AV_BOOLEAN:
        if (reserve(o, 1) < 0) return -1;
        if (JSON_LIT(j, "true")) o->buf[o->len++] = 1;
        else if (JSON_LIT(j, "false")) o->buf[o->len++] = 0;
        else return 1;
        return 0;
    case AV_STRING: return av_string(j, o);
    case AV_BYTES: return av_base64(j, o);
    default: return 1;
    }
}

static Out avro_out; /* reused from call to call (the GIL is held throughout) */

/* The message of a payload's JSON: the header, then its Avro; a new reference to None when the program does
 * not transcode it exactly (Python's turn), NULL with an exception set. */
static PyObject *transcode(const char *program, Py_ssize_t program_len, const char *json, Py_ssize_t json_len,
                           const char *header, Py_ssize_t header_len) {
    Out *o = &avro_out;
    o->len = 0;
    if (reserve(o, header_len + json_len) < 0) return NULL;
    put(o, header, header_len);
    Program pr = {(const uint8_t *)program, program_len, 0, 0};
    Json j = {json, json + json_len};
    int r = av_value(&pr, &j, o);
    PyObject *result = r < 0 ? NULL
                       : r || pr.pc != pr.len || j.s != j.end ? Py_NewRef(Py_None)
                                                              : PyBytes_FromStringAndSize(o->buf, o->len);
    if (o->cap > SCRATCH_KEPT) { /* a huge message: give its memory back */
        PyMem_Free(o->buf);
        *o = (Out){0};
    }
    return result;
}

static PyObject *avro(PyObject *module, PyObject *args) {
    const char *program, *json, *header;
    Py_ssize_t program_len, json_len, header_len;
    if (!PyArg_ParseTuple(args, "y#y#y#:avro", &program, &program_len, &json, &json_len, &header, &header_len))
        return NULL;
    return transcode(program, program_len, json, json_len, header, header_len);
}

#endif
