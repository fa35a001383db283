/* Debezium's value of one column, rendered as JSON straight from its bytes in a row image: the column ops of
 * a RowsPlan (_native.c) and their renderers. Each gives exactly what columns.py's converter for the column
 * gives the codec's value, as orjson writes it, or leaves the event to Python (1). Included once, by
 * _native.c (after Python.h, _bytes.h and _json.h). */
#ifndef BINLAKE_DEBEZIUM_VALUES_H
#define BINLAKE_DEBEZIUM_VALUES_H

enum {
    OP_INT = 1,          /* a: bytes 1, 2, 3, 4 or 8; b: unsigned (BIGINT UNSIGNED as "long" is signed: Java's wrap) */
    OP_UNSIGNED_DECIMAL, /* BIGINT UNSIGNED as a Connect Decimal (bigint.unsigned.handling.mode precise) */
    OP_FLOAT,            /* FLOAT: the double of its shortest float32 text (columns.shortest_float32) */
    OP_DOUBLE,
    OP_YEAR,             /* 1900 + the byte (the zero year too) */
    OP_DECIMAL,          /* a: precision, b: scale, c: DECIMAL_BYTES / DECIMAL_STRING / DECIMAL_DOUBLE */
    OP_DATE,             /* c: nullable (a zero date is null, else 0) -> days since the epoch */
    OP_DATETIME2,        /* a: fsp; b: milliseconds (else microseconds); c: nullable */
    OP_TIMESTAMP2,       /* a: fsp -> ISO 8601 text in UTC */
    OP_TIME2,            /* a: fsp; b: connect (milliseconds of a day, else signed microseconds); c: nullable */
    OP_BOOL,             /* a: bytes (BIT(1)) */
    OP_BITS,             /* a: bytes -> base64 of them little-endian */
    OP_ENUM,             /* a: bytes; labels: JSON strings, "" first (beyond them: the number as a string) */
    OP_SET,              /* a: bytes; b: labelled (else the mask as a string); labels: escaped text without quotes */
    OP_TEXT,             /* a: length bytes 1-4; b: ASCII only (else valid UTF-8 only) */
    OP_BINARY,           /* a: length bytes 1-4; b: zero-pad to (BINARY(n)); c: BINARY_BASE64 / _URL_SAFE / _HEX */
    OP_GEOMETRY,         /* a: length bytes 1-4; b: a POINT column */
    OP_VECTOR,           /* a: length bytes 1-4 -> floats as OP_FLOAT */
    OP_NULL,             /* the NULL type: no bytes, always null */
};

enum { DECIMAL_BYTES, DECIMAL_STRING, DECIMAL_DOUBLE };
enum { BINARY_BASE64, BINARY_URL_SAFE, BINARY_HEX };

typedef struct {
    int op, a, b, c;
    int present;        /* the image holds it (its bit in the event's column bitmap) */
    Py_ssize_t key;     /* its field's place in the Key struct, -1 for none */
    const char *field;  /* '"name":' or ',"name":' of the Value struct; NULL: no field (an invisible column) */
    Py_ssize_t fieldlen;
    PyObject *labels;   /* tuple of bytes, or NULL */
} Col;

static inline int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

static const int64_t POW10[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};

static inline int days_in_month(int64_t y, unsigned m) {
    static const uint8_t DAYS[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? 29 : DAYS[m];
}

/* A date Python's datetime takes (years 1-9999): columns._days of it. */
static inline int calendar_days(int64_t y, unsigned m, unsigned d, int64_t *days) {
    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1 || d > (unsigned)days_in_month(y, m)) return 1;
    *days = days_from_civil(y, m, d);
    return 0;
}

/* Fraction bytes of DATETIME2/TIMESTAMP2 as microseconds (values.read_frac); -1 beyond a second (the
 * codec's text then has more digits than the fsp: Python's business). */
static inline int64_t micros_of(const uint8_t *p, int nbytes) {
    static const int64_t SCALE[3] = {10000, 100, 1};
    if (!nbytes) return 0;
    int64_t v = (int64_t)be_uint(p, nbytes) * SCALE[nbytes - 1];
    return v < 1000000 ? v : -1;
}

/* Microseconds cut to fsp digits, as the codec's text keeps them. */
static inline int64_t cut(int64_t micros, int fsp) { return micros - micros % POW10[6 - fsp]; }

/* A Connect Decimal's value: base64 of the minimal big-endian two's complement of the integer whose
 * magnitude is mag[0:32] (big-endian) and sign `negative` (columns._unscaled_bytes). mag is clobbered. */
static int put_unscaled(Out *o, uint8_t mag[32], int negative) {
    int zero = 1;
    for (int i = 0; i < 32; i++) zero &= !mag[i];
    if (zero) negative = 0;
    if (negative) /* -m is ~(m - 1) */
        for (int i = 31; i >= 0; i--) {
            if (mag[i]--) break;
        }
    int first = 0;
    while (first < 32 && !mag[first]) first++;
    int bits = 0;
    if (first < 32) {
        bits = (31 - first) * 8;
        for (uint8_t v = mag[first]; v; v >>= 1) bits++;
    }
    int size = bits / 8 + 1;
    uint8_t out[33];
    for (int k = 0; k < size; k++) {
        int at = 32 - size + k;
        uint8_t v = at >= 0 ? mag[at] : 0;
        out[k] = negative ? (uint8_t)~v : v;
    }
    return put_base64(o, out, size, 0);
}

/* The magnitude of ASCII digits[0:n] as 32 big-endian bytes (n <= 65 digits fit 216 bits). */
static void magnitude(const char *digits, int n, uint8_t mag[32]) {
    uint32_t limb[8] = {0}; /* least significant first */
    for (int i = 0; i < n; i++) {
        uint64_t carry = (uint64_t)(digits[i] - '0');
        for (int j = 0; j < 8; j++) {
            uint64_t x = (uint64_t)limb[j] * 10 + carry;
            limb[j] = (uint32_t)x;
            carry = x >> 32;
        }
    }
    for (int j = 0; j < 8; j++) put_be(mag + 28 - 4 * j, limb[j], 4);
}

/* A FLOAT's value as columns.shortest_float32 gives it (then orjson writes the double): the shortest of
 * 6 to 9 significant digits that reads back as the same float32. 1 for a non-finite float (Python's). */
static int put_float32(Out *o, const uint8_t *p) {
    uint32_t stored = le32(p);
    float f;
    memcpy(&f, &stored, 4);
    if (!isfinite(f)) return 1;
    double value = f, chosen = value;
    for (int digits = 6; digits < 10; digits++) {
        char *text = PyOS_double_to_string(value, 'g', digits, 0, NULL);
        if (!text) return -1;
        double candidate = PyOS_string_to_double(text, NULL, NULL);
        PyMem_Free(text);
        if (candidate == -1.0 && PyErr_Occurred()) return -1;
        float narrowed = (float)candidate;
        uint32_t bits;
        memcpy(&bits, &narrowed, 4);
        if (isinf(narrowed)) return 1; /* struct.pack's OverflowError: Python's */
        if (bits == stored) {
            chosen = candidate;
            break;
        }
    }
    return put_double(o, chosen);
}

/* A DECIMAL by the mode: its unscaled value's bytes, its text, or the double of its text. */
static int put_decimal_as(Out *o, const Col *c, const uint8_t *p) {
    if (c->c == DECIMAL_BYTES) {
        char digits[80];
        int negative;
        uint8_t mag[32];
        if (decimal_digits(p, c->a, c->b, digits, &negative)) return 1;
        magnitude(digits, c->a, mag);
        return put_unscaled(o, mag, negative);
    }
    Py_ssize_t mark = o->len;
    int r = put_decimal(o, p, c->a, c->b);
    if (r || c->c == DECIMAL_STRING) return r;
    char text[80]; /* the JSON string's text: float() of it */
    Py_ssize_t n = o->len - mark - 2;
    memcpy(text, o->buf + mark + 1, n);
    text[n] = 0;
    o->len = mark;
    double v = PyOS_string_to_double(text, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    return put_double(o, v);
}

static int put_hex(Out *o, const uint8_t *s, Py_ssize_t n, Py_ssize_t pad) {
    static const char HEX[] = "0123456789abcdef";
    Py_ssize_t total = n < pad ? pad : n;
    if (total > (PY_SSIZE_T_MAX - 2) / 2 || reserve(o, total * 2 + 2) < 0) return -1;
    o->buf[o->len++] = '"';
    for (Py_ssize_t i = 0; i < total; i++) {
        uint8_t v = i < n ? s[i] : 0;
        o->buf[o->len++] = HEX[v >> 4];
        o->buf[o->len++] = HEX[v & 15];
    }
    o->buf[o->len++] = '"';
    return 0;
}

/* "YYYY-MM-DDThh:mm:ss[.f]Z" of a TIMESTAMP2 (columns._timestamp's zoned text). */
static void put_zoned(Out *o, uint64_t secs, int64_t micros, int fsp) {
    int64_t y = 1970;
    unsigned m = 1, d = 1;
    if (secs) civil((int64_t)(secs / 86400), &y, &m, &d);
    else micros = 0; /* the zero timestamp is epoch second 0, its fraction zeros */
    o->buf[o->len++] = '"';
    put_padded(o, (uint64_t)y, 4);
    o->buf[o->len++] = '-';
    put_padded(o, m, 2);
    o->buf[o->len++] = '-';
    put_padded(o, d, 2);
    o->buf[o->len++] = 'T';
    put_padded(o, secs % 86400 / 3600, 2);
    o->buf[o->len++] = ':';
    put_padded(o, secs % 3600 / 60, 2);
    o->buf[o->len++] = ':';
    put_padded(o, secs % 60, 2);
    if (fsp) {
        Py_ssize_t at = o->len;
        o->buf[o->len++] = '.';
        put_padded(o, (uint64_t)micros, 6);
        o->len = at + 1 + fsp;
    }
    PUT_LIT(o, "Z\"");
}

/* MySQL's geometry (SRID, then WKB): {"wkb":...,"srid":...}, a POINT's x and y first (columns._geometry_value,
 * columns._point). */
static int put_geometry(Out *o, const uint8_t *s, Py_ssize_t n, int point) {
    Py_ssize_t head = n < 4 ? n : 4;
    uint64_t srid = le_uint(s, (int)head);
    const uint8_t *wkb = s + head;
    Py_ssize_t wn = n - head;
    if (reserve(o, 16) < 0) return -1;
    o->buf[o->len++] = '{';
    if (point) {
        if (wn < 21) return 1; /* struct.error or IndexError: Python's */
        double xy[2];
        for (int i = 0; i < 2; i++) {
            uint8_t raw[8];
            for (int k = 0; k < 8; k++) raw[k] = wkb[5 + 8 * i + (wkb[0] == 1 ? k : 7 - k)];
            uint64_t bits = le64(raw);
            memcpy(&xy[i], &bits, 8);
        }
        PUT_LIT(o, "\"x\":");
        if (put_double(o, xy[0]) < 0 || reserve(o, 8) < 0) return -1;
        PUT_LIT(o, ",\"y\":");
        if (put_double(o, xy[1]) < 0 || reserve(o, 8) < 0) return -1;
        PUT_LIT(o, ",");
    }
    PUT_LIT(o, "\"wkb\":");
    if (put_base64(o, wkb, wn, 0) < 0 || reserve(o, 32) < 0) return -1;
    PUT_LIT(o, ",\"srid\":");
    if (srid) put_u64(o, srid);
    else PUT_LIT(o, "null");
    o->buf[o->len++] = '}';
    return 0;
}

static int put_vector(Out *o, const uint8_t *s, Py_ssize_t n) {
    if (n % 4) return 1; /* the codec raises */
    if (reserve(o, 2) < 0) return -1;
    o->buf[o->len++] = '[';
    for (Py_ssize_t i = 0; i < n; i += 4) {
        if (i) o->buf[o->len++] = ',';
        int r = put_float32(o, s + i);
        if (r) return r;
        if (reserve(o, 2) < 0) return -1;
    }
    o->buf[o->len++] = ']';
    return 0;
}

/* Render one non-NULL value at b[*pp] (< end): 0 done, 1 leave the event to Python, -1 error. */
static int put_value(Out *o, const Col *c, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    Py_ssize_t p = *pp, left = end - p;
    if (reserve(o, 64) < 0) return -1;
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
    case OP_UNSIGNED_DECIMAL: {
        if (left < 8) return 1;
        uint8_t mag[32] = {0};
        put_be(mag + 24, le64(b + p), 8);
        p += 8;
        if (put_unscaled(o, mag, 0) < 0) return -1;
        break;
    }
    case OP_FLOAT: {
        if (left < 4) return 1;
        int r = put_float32(o, b + p);
        if (r) return r;
        p += 4;
        break;
    }
    case OP_DOUBLE: {
        if (left < 8) return 1;
        uint64_t bits = le64(b + p);
        double v;
        memcpy(&v, &bits, 8);
        p += 8;
        if (put_double(o, v) < 0) return -1;
        break;
    }
    case OP_YEAR:
        if (left < 1) return 1;
        put_u64(o, 1900u + b[p]);
        p += 1;
        break;
    case OP_DECIMAL: {
        Py_ssize_t size = decimal_size(c->a, c->b);
        if (left < size) return 1;
        int r = put_decimal_as(o, c, b + p);
        if (r) return r;
        p += size;
        break;
    }
    case OP_DATE: {
        if (left < 3) return 1;
        uint32_t v = le24(b + p);
        int64_t y = v >> 9, days;
        unsigned m = v >> 5 & 15, d = v & 31;
        p += 3;
        if (y > 9999) return 1;
        if (!y || !m || !d) {
            if (c->c) PUT_LIT(o, "null");
            else PUT_LIT(o, "0");
            break;
        }
        if (calendar_days(y, m, d, &days)) return 1;
        put_i64(o, days);
        break;
    }
    case OP_DATETIME2: {
        int nfrac = (c->a + 1) / 2;
        if (left < 5 + nfrac) return 1;
        uint64_t x = be_uint(b + p, 5);
        int64_t micros = micros_of(b + p + 5, nfrac), days;
        p += 5 + nfrac;
        if (x < 0x8000000000ull || micros < 0) return 1; /* negative, or a fraction beyond a second */
        x -= 0x8000000000ull;
        uint64_t ymd = x >> 17, ym = ymd >> 5;
        int64_t y = (int64_t)(ym / 13);
        unsigned m = (unsigned)(ym % 13), d = ymd & 31, h = x >> 12 & 31, mi = x >> 6 & 63, s = x & 63;
        if (y > 9999) return 1;
        if (!y || !m || !d) {
            if (c->c) PUT_LIT(o, "null");
            else PUT_LIT(o, "0");
            break;
        }
        if (calendar_days(y, m, d, &days) || h > 23 || mi > 59 || s > 59) return 1;
        int64_t us = (days * 86400 + h * 3600 + mi * 60 + s) * 1000000 + cut(micros, c->a);
        put_i64(o, c->b ? floor_div(us, 1000) : us);
        break;
    }
    case OP_TIMESTAMP2: {
        int nfrac = (c->a + 1) / 2;
        if (left < 4 + nfrac) return 1;
        uint64_t secs = be_uint(b + p, 4);
        int64_t micros = micros_of(b + p + 4, nfrac);
        p += 4 + nfrac;
        if (micros < 0) return 1;
        put_zoned(o, secs, micros, c->a);
        break;
    }
    case OP_TIME2: {
        int nfrac = (c->a + 1) / 2;
        if (left < 3 + nfrac) return 1;
        int64_t packed = time2_packed(b + p, nfrac);
        p += 3 + nfrac;
        int negative = packed < 0;
        if (negative) packed = -packed;
        int64_t hms = packed >> 24, micros = packed & 0xFFFFFF;
        if (micros >= 1000000) return 1;
        int64_t us = (((hms >> 12 & 0x3FF) * 60 + (hms >> 6 & 63)) * 60 + (hms & 63)) * 1000000 + cut(micros, c->a);
        if (negative) us = -us;
        if (!c->b) put_i64(o, us);
        else if (us >= 0 && us < 86400000000ll) put_i64(o, us / 1000);
        else if (c->c) PUT_LIT(o, "null");
        else PUT_LIT(o, "0");
        break;
    }
    case OP_BOOL:
        if (left < c->a) return 1;
        if (be_uint(b + p, c->a)) PUT_LIT(o, "true");
        else PUT_LIT(o, "false");
        p += c->a;
        break;
    case OP_BITS: {
        if (left < c->a) return 1;
        uint8_t little[8];
        for (int i = 0; i < c->a; i++) little[i] = b[p + c->a - 1 - i];
        p += c->a;
        if (put_base64(o, little, c->a, 0) < 0) return -1;
        break;
    }
    case OP_ENUM: {
        if (left < c->a) return 1;
        uint64_t v = le_uint(b + p, c->a);
        p += c->a;
        if (v < (uint64_t)PyTuple_GET_SIZE(c->labels)) {
            PyObject *label = PyTuple_GET_ITEM(c->labels, (Py_ssize_t)v);
            if (reserve(o, PyBytes_GET_SIZE(label)) < 0) return -1;
            put(o, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label));
        } else { /* the field is a string: the number as text */
            o->buf[o->len++] = '"';
            put_u64(o, v);
            o->buf[o->len++] = '"';
        }
        break;
    }
    case OP_SET: {
        if (left < c->a) return 1;
        uint64_t mask = le_uint(b + p, c->a);
        p += c->a;
        if (!c->b) { /* without labels: the mask as text */
            o->buf[o->len++] = '"';
            put_u64(o, mask);
            o->buf[o->len++] = '"';
            break;
        }
        if (put_set_labels(o, mask, c->labels) < 0) return -1;
        break;
    }
    case OP_TEXT:
    case OP_BINARY:
    case OP_GEOMETRY:
    case OP_VECTOR: {
        if (left < c->a) return 1;
        Py_ssize_t n = (Py_ssize_t)le_uint(b + p, c->a);
        p += c->a;
        if (n > end - p) return 1;
        const uint8_t *s = b + p;
        int r;
        if (c->op == OP_TEXT) r = put_utf8(o, s, n, c->b);
        else if (c->op == OP_GEOMETRY) r = put_geometry(o, s, n, c->b);
        else if (c->op == OP_VECTOR) r = put_vector(o, s, n);
        else if (c->c == BINARY_HEX) r = put_hex(o, s, n, c->b);
        else r = put_base64_in(o, s, n, c->b, c->c == BINARY_URL_SAFE);
        if (r) return r;
        p += n;
        break;
    }
    default: /* OP_NULL is rendered by the caller */
        return 1;
    }
    *pp = p;
    return 0;
}

#endif
