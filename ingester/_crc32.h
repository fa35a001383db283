/* zlib's CRC-32 (slicing by 8 bytes), shared by the native extensions: Python's headers do not expose
 * zlib, and its headers are not on every build machine. Call crc_init() once when the module loads; include
 * after Python.h (it includes _bytes.h). */
#ifndef BINLAKE_CRC32_H
#define BINLAKE_CRC32_H
#include <stdint.h>

#include "_bytes.h"

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = crc_table[t - 1][i] >> 8 ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32_of(const uint8_t *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t a = c ^ le32(p), b = le32(p + 4);
        c = crc_table[7][a & 0xFF] ^ crc_table[6][a >> 8 & 0xFF] ^ crc_table[5][a >> 16 & 0xFF] ^
            crc_table[4][a >> 24] ^ crc_table[3][b & 0xFF] ^ crc_table[2][b >> 8 & 0xFF] ^
            crc_table[1][b >> 16 & 0xFF] ^ crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ c >> 8;
    return c ^ 0xFFFFFFFFu;
}
#endif
