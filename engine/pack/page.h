/*
 * engine/pack/page.h — PostgreSQL page inspection (prefix page_): header fields, the
 * page checksum algorithm (FNV-1a based, as in PostgreSQL's checksum_impl.h),
 * and the verdict the scanner acts on.
 */
#ifndef PB_ENGINE_PAGE_H
#define PB_ENGINE_PAGE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct page_header {
    uint64_t lsn;      /* pd_lsn as a 64-bit LSN */
    uint16_t checksum; /* pd_checksum */
    uint16_t flags;
    uint16_t lower, upper, special;
    uint16_t pagesize_version;
    uint32_t prune_xid;
} page_header;

/* Decode the header of an 8 kB page (little-endian host layout, as PostgreSQL writes it). */
void page_read_header(const uint8_t *page, page_header *out);

/* PostgreSQL's pg_checksum_page(): blkno is the block number within the relation
 * (segment number * RELSEG_SIZE + block in segment). */
uint16_t page_checksum(const uint8_t *page, uint32_t blkno);

typedef enum page_verdict {
    PAGE_OK = 0,           /* header sane, checksum matches (or checksums off) */
    PAGE_NEW = 1,          /* all zeroes: valid, new page */
    PAGE_BAD_HEADER = 2,   /* header fields impossible */
    PAGE_BAD_CHECKSUM = 3, /* header sane, checksum mismatch */
} page_verdict;

/* Inspect one page. with_checksums: the cluster has data checksums on. */
page_verdict page_verify(const uint8_t *page, uint32_t blkno, bool with_checksums);
bool page_is_zero(const uint8_t *page);

#endif
