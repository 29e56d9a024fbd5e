/*
 * engine/pack/page.c — PostgreSQL page header decoding, the page checksum and the
 * verdict the backup acts on (see pack.h).
 *
 * The checksum is PostgreSQL's pg_checksum_page() (src/include/storage/
 * checksum_impl.h), re-implemented here: the page is read as a 2-D array of
 * 32-bit words, 32 columns wide; each column is folded into its own FNV-1a-like
 * sum (hash = (hash ^ v) * FNV_PRIME ^ ((hash ^ v) >> 17)) seeded from a fixed
 * table, two extra rounds of zeroes mix the last words in, the columns are XORed
 * together, the block number is XORed in, and the result is reduced to 1..65535
 * (0 is never a computed checksum). Words are read in host byte order, like the
 * server does, because the page bytes were written by a server on this
 * architecture.
 */
#include "engine/pack/pack.h"

#include <string.h>

#include "common/pb.h"

#define N_SUMS 32
#define FNV_PRIME 16777619u
#define ROWS (PB_PAGE_SIZE / (sizeof(uint32_t) * N_SUMS))

/* Header layout (PageHeaderData, bufpage.h). */
#define OFF_LSN 0
#define OFF_CHECKSUM 8
#define OFF_FLAGS 10
#define OFF_LOWER 12
#define OFF_UPPER 14
#define OFF_SPECIAL 16
#define OFF_PAGESIZE_VERSION 18
#define OFF_PRUNE_XID 20
#define SIZE_OF_PAGE_HEADER 24

#define PD_VALID_FLAG_BITS 0x0007u /* PD_HAS_FREE_LINES | PD_PAGE_FULL | PD_ALL_VISIBLE */
#define MAXIMUM_ALIGNOF 8u

/* Random seeds of the 32 partial sums, fixed by PostgreSQL's on-disk format. */
static const uint32_t checksum_base_offsets[N_SUMS] = {
    0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2,
    0x83E13D2C, 0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C,
    0xF718902A, 0x0B1C9CDB, 0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979,
    0xCCA6C0B2, 0x304A0979, 0x85AA43D4, 0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E,
    0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
};

static inline uint32_t checksum_comp(uint32_t sum, uint32_t value)
{
    uint32_t tmp = sum ^ value;
    return tmp * FNV_PRIME ^ (tmp >> 17);
}

void page_read_header(const uint8_t *page, page_header *out)
{
    /* pd_lsn is {xlogid, xrecoff}: the high half first, each a host-order uint32. */
    uint64_t hi = pb_get_u32(page + OFF_LSN);
    uint64_t lo = pb_get_u32(page + OFF_LSN + 4);
    out->lsn = (hi << 32) | lo;
    out->checksum = pb_get_u16(page + OFF_CHECKSUM);
    out->flags = pb_get_u16(page + OFF_FLAGS);
    out->lower = pb_get_u16(page + OFF_LOWER);
    out->upper = pb_get_u16(page + OFF_UPPER);
    out->special = pb_get_u16(page + OFF_SPECIAL);
    out->pagesize_version = pb_get_u16(page + OFF_PAGESIZE_VERSION);
    out->prune_xid = pb_get_u32(page + OFF_PRUNE_XID);
}

/* One 32-bit word of the page in host order, from any address (the page need not be
 * aligned; the compiler makes the loads of a row one or two unaligned vector loads). */
static inline uint32_t load_word(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* pg_checksum_block() with pd_checksum taken as zero. The page may be unaligned and is
 * never modified (the server zeroes pd_checksum in place; we zero it in a copy of row 0).
 * Rows 1.. are read straight from the page: copying each row to a buffer first, as this
 * function once did, made every row's vector loads wait on the copy's narrower stores (a
 * store-forwarding stall) and kept the sums in memory, which cost more than the scalar
 * word-by-word loop (tools/bench/checksum.sh; docs/BENCHMARKS.md, "Page checksums"). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PB_PAGE_NO_CLONES)
/* An AVX2 clone chosen at run time: 8 lanes per instruction (vpmulld). PB_PAGE_NO_CLONES
 * builds the default one alone, so a unit test runs it on a machine that has AVX2. */
__attribute__((target_clones("avx2", "default")))
#endif
static uint32_t checksum_block(const uint8_t *page)
{
    uint32_t sums[N_SUMS];
    uint32_t row0[N_SUMS];

    /* Row 0 apart, so the loop over the other rows has no branch and vectorizes. */
    memcpy(row0, page, sizeof(row0));
    memset((uint8_t *)row0 + OFF_CHECKSUM, 0, 2); /* pd_checksum */
    for (size_t j = 0; j < N_SUMS; j++)
        sums[j] = checksum_comp(checksum_base_offsets[j], row0[j]);
    for (size_t i = 1; i < ROWS; i++) {
        const uint8_t *row = page + i * N_SUMS * sizeof(uint32_t);
        for (size_t j = 0; j < N_SUMS; j++)
            sums[j] = checksum_comp(sums[j], load_word(row + j * sizeof(uint32_t)));
    }
    for (int round = 0; round < 2; round++)
        for (size_t j = 0; j < N_SUMS; j++)
            sums[j] = checksum_comp(sums[j], 0);

    uint32_t result = 0;
    for (size_t j = 0; j < N_SUMS; j++)
        result ^= sums[j];
    return result;
}

uint16_t page_checksum(const uint8_t *page, uint32_t blkno)
{
    uint32_t sum = checksum_block(page) ^ blkno;
    return (uint16_t)((sum % 65535u) + 1u);
}

bool page_is_zero(const uint8_t *page)
{
    /* First byte zero and every byte equal to its predecessor: all zero. */
    return page[0] == 0 && memcmp(page, page + 1, PB_PAGE_SIZE - 1) == 0;
}

/* The header checks of PostgreSQL's PageIsVerifiedExtended(), plus pd_lower covering
 * at least the header itself. */
static bool header_sane(const page_header *h)
{
    return (h->flags & ~PD_VALID_FLAG_BITS) == 0 && h->lower >= SIZE_OF_PAGE_HEADER &&
           h->lower <= h->upper && h->upper <= h->special && h->special <= PB_PAGE_SIZE &&
           h->special % MAXIMUM_ALIGNOF == 0;
}

page_verdict page_verify(const uint8_t *page, uint32_t blkno, bool with_checksums)
{
    if (page_is_zero(page))
        return PAGE_NEW;
    page_header h;
    page_read_header(page, &h);
    if (!header_sane(&h))
        return PAGE_BAD_HEADER;
    if (with_checksums && page_checksum(page, blkno) != h.checksum)
        return PAGE_BAD_CHECKSUM;
    return PAGE_OK;
}
