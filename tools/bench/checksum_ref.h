/* tools/bench/checksum_ref.h — a straightforward PostgreSQL page checksum, word by word,
 * to hold engine/pack/page.c's vectorized one against (page_test.c) and to time it against
 * (tools/bench/checksum_bench.c). It follows the definition in PostgreSQL's
 * src/include/storage/checksum_impl.h: 2048 32-bit words in host order, word k folded into
 * partial sum k % 32 (seeded from the fixed table) with hash = (hash ^ v) * 16777619 ^
 * ((hash ^ v) >> 17), pd_checksum (bytes 8-9) taken as zero, two rounds of zeroes, the sums
 * XORed, the block number XORed in, reduced to 1..65535. It keeps no row layout and asks the
 * compiler for no vectorization, so a layout slip in page.c shows up as a mismatch. */
#ifndef PB_TEST_CHECKSUM_REF_H
#define PB_TEST_CHECKSUM_REF_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#define CHECKSUM_REF_PLAIN __attribute__((optimize("no-tree-vectorize", "no-unroll-loops")))
#else
#define CHECKSUM_REF_PLAIN
#endif

CHECKSUM_REF_PLAIN static inline uint16_t checksum_ref(const uint8_t *page, uint32_t blkno)
{
    static const uint32_t seeds[32] = {
        0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2,
        0x83E13D2C, 0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C,
        0xF718902A, 0x0B1C9CDB, 0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979,
        0xCCA6C0B2, 0x304A0979, 0x85AA43D4, 0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E,
        0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
    };
    uint32_t sums[32];
    memcpy(sums, seeds, sizeof(sums));
    for (unsigned k = 0; k < 8192 / 4; k++) {
        uint32_t v;
        memcpy(&v, page + 4 * k, 4);
        if (k == 2) /* the word holding pd_checksum (bytes 8-9) and pd_flags */
            memcpy(&v, (const uint8_t[4]){0, 0, page[10], page[11]}, 4);
        uint32_t t = sums[k % 32] ^ v;
        sums[k % 32] = t * 16777619u ^ (t >> 17);
    }
    uint32_t result = 0;
    for (unsigned j = 0; j < 32; j++) {
        for (int round = 0; round < 2; round++) {
            uint32_t t = sums[j];
            sums[j] = t * 16777619u ^ (t >> 17);
        }
        result ^= sums[j];
    }
    return (uint16_t)(((result ^ blkno) % 65535u) + 1u);
}

#endif
