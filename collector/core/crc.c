/*
 * CRC-32 of the trace format (IEEE 802.3 polynomial, zlib's conventions), shared by the collector
 * (sealing blocks on the hot path) and the analyzer (validating every byte it reads): carry-less
 * multiplication where the CPU has it, else slicing by 8.  cs_crc32_simple (ops.c) is the
 * byte-at-a-time reference the tests compare against.
 */
#include <stdint.h>
#include <string.h>

#include "commscope/ops.h"

static uint32_t crc_tab[8][256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
    /* Idempotent: racing initialisers store the same values. */
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CS_CRC_FOLD 1

/*
 * CRC-32 by carry-less multiplication (Gopal et al., "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ Instruction", Intel 2009): four 128-bit lanes are folded forward 64 bytes at a
 * time, then into one lane, then Barrett-reduced to 32 bits.  About ten times the speed of the
 * tables, which matters because validation reads every byte of every trace.  The constants are
 * x^k mod P for the reflected polynomial, as in the paper.  crc is the running (inverted) state;
 * len >= 64 and a multiple of 16.
 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_fold(uint32_t crc, const unsigned char *p, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    p += 64;
    len -= 64;
    while (len >= 64) {
        __m128i a1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        __m128i a2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        __m128i a3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        __m128i a4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, a1),
                           _mm_loadu_si128((const __m128i *)(const void *)(p + 0)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, a2),
                           _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, a3),
                           _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, a4),
                           _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        len -= 64;
    }
    /* Four lanes into one. */
    __m128i a = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x11), x2), a);
    a = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x11), x3), a);
    a = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x11), x4), a);
    while (len >= 16) {
        a = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x11),
                                         _mm_loadu_si128((const __m128i *)(const void *)p)),
                           a);
        p += 16;
        len -= 16;
    }
    /* 128 bits to 64, then 64 to 32 by Barrett reduction. */
    a = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), a);
    a = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), a);
    a = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    a = _mm_clmulepi64_si128(_mm_and_si128(a, low32), poly, 0x00);
    x1 = _mm_xor_si128(x1, a);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int fold_ok = -1; /* -1 not yet asked */

static int crc_fold_ok(void)
{
    int ok = __atomic_load_n(&fold_ok, __ATOMIC_RELAXED);
    if (ok < 0) {
        __builtin_cpu_init();
        ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        __atomic_store_n(&fold_ok, ok, __ATOMIC_RELAXED);
    }
    return ok;
}
#endif

uint32_t cs_crc32(uint32_t crc, const void *buf, size_t len)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init();
    const unsigned char *p = buf;
    crc = ~crc;
#ifdef CS_CRC_FOLD
    if (len >= 64 && crc_fold_ok()) {
        size_t n = len & ~(size_t)15;
        crc = crc_fold(crc, p, n);
        p += n;
        len -= n;
    }
#endif
    while (len && ((uintptr_t)p & 7)) {
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc; /* little-endian hosts only, like the format */
        crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
              crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
              crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
