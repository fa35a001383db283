/* Byte readers, binlog value layouts, calendar arithmetic and a growable buffer shared by the native
 * extensions (header-only, static inline; include after Python.h). */
#ifndef BINLAKE_BYTES_H
#define BINLAKE_BYTES_H
#include <stdint.h>

/* The v4 event header (ingester/codec/header.py): byte offsets of its fields and its length. */
enum { EV_TIMESTAMP = 0, EV_TYPE = 4, EV_SERVER_ID = 5, EV_SIZE = 9, EV_LOG_POS = 13, EV_FLAGS = 17, EV_HEADER = 19 };

static inline uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t le24(const uint8_t *p) { return le16(p) | (uint32_t)p[2] << 16; }
static inline uint32_t le32(const uint8_t *p) { return le24(p) | (uint32_t)p[3] << 24; }
static inline uint64_t le48(const uint8_t *p) { return le32(p) | (uint64_t)le16(p + 4) << 32; }
static inline uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static inline void put_le32(uint8_t *p, uint32_t v) {
    p[0] = v & 0xFF, p[1] = v >> 8 & 0xFF, p[2] = v >> 16 & 0xFF, p[3] = v >> 24;
}

static inline void put_be(uint8_t *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = v & 0xFF;
}

static inline uint64_t be_uint(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

static inline uint64_t le_uint(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Packed DECIMAL: bytes of a group of 0-9 digits, and a DECIMAL(precision, scale)'s size. */
static const uint8_t DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

static inline int decimal_size(int precision, int scale) {
    int intg = precision - scale;
    return (intg / 9) * 4 + DIG2BYTES[intg % 9] + (scale / 9) * 4 + DIG2BYTES[scale % 9];
}

/* Digit groups of a packed DECIMAL, most significant first: bytes[i] bytes holding digits[i] digits (at
 * most 16 groups for precision <= 65, scale <= 30); returns the number of groups. */
static inline int decimal_groups(int precision, int scale, int bytes[16], int digits[16]) {
    int intg = precision - scale, n = 0;
    if (intg % 9) { bytes[n] = DIG2BYTES[intg % 9]; digits[n++] = intg % 9; }
    for (int i = 0; i < intg / 9; i++) { bytes[n] = 4; digits[n++] = 9; }
    for (int i = 0; i < scale / 9; i++) { bytes[n] = 4; digits[n++] = 9; }
    if (scale % 9) { bytes[n] = DIG2BYTES[scale % 9]; digits[n++] = scale % 9; }
    return n;
}

static const uint32_t POW10_9[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* The digits of a packed DECIMAL(precision, scale) (precision <= 65) at p (decimal_size bytes), most
 * significant first, into digits[0:precision] as ASCII, and its sign (values.decimal_code); 1 when a digit
 * group is corrupt (the codec raises there). */
static inline int decimal_digits(const uint8_t *p, int precision, int scale, char digits[80], int *negative) {
    uint8_t d[32];
    int size = decimal_size(precision, scale), nd = 0, at = 0;
    int groups[16], gdigits[16], ng = decimal_groups(precision, scale, groups, gdigits);
    *negative = !(p[0] & 0x80);
    for (int i = 0; i < size; i++) d[i] = *negative ? (uint8_t)~p[i] : p[i];
    d[0] ^= 0x80;
    for (int g = 0; g < ng; g++) {
        uint32_t v = (uint32_t)be_uint(d + at, groups[g]);
        at += groups[g];
        if (v >= POW10_9[gdigits[g]]) return 1;
        for (int k = gdigits[g] - 1; k >= 0; k--) {
            digits[nd + k] = (char)('0' + v % 10);
            v /= 10;
        }
        nd += gdigits[g];
    }
    return 0;
}

/* TIME2 (3 bytes of offset int part, then nfrac = 0-3 bytes of fraction, stored reversed when negative) as
 * the signed packed value hms << 24 | microseconds (values.time2). */
static inline int64_t time2_packed(const uint8_t *p, int nfrac) {
    if (nfrac == 3) return (int64_t)be_uint(p, 6) - 0x800000000000ll;
    int64_t intpart = (int64_t)be_uint(p, 3) - 0x800000, frac = 0;
    if (nfrac) {
        frac = (int64_t)be_uint(p + 3, nfrac);
        if (intpart < 0 && frac) {
            intpart += 1;
            frac -= nfrac == 1 ? 0x100 : 0x10000;
        }
        frac *= nfrac == 1 ? 10000 : 100;
    }
    return intpart * (1 << 24) + frac;
}

/* Grow a PyMem buffer *p (used *len, allocated *cap bytes) to hold n more bytes, doubling from `first`;
 * -1 with MemoryError set. */
static inline int grow_buffer(void **p, Py_ssize_t len, Py_ssize_t *cap, Py_ssize_t n, Py_ssize_t first) {
    if (*cap - len >= n) return 0;
    Py_ssize_t want = *cap ? *cap : first;
    while (want - len < n) {
        if (want > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        want *= 2;
    }
    void *q = PyMem_Realloc(*p, want);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = want;
    return 0;
}

/* Gregorian date of days since 1970-01-01 and back (Howard Hinnant's civil_from_days / days_from_civil). */
static inline void civil(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static inline int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

#endif
