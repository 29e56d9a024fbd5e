/*
 * engine/pack/pack.h — pack objects (prefix pack_). A pack is a sequence of frames, each
 * a zstd-compressed run of bytes (one or more 8 kB pages of one file, or a piece of
 * a non-relation file) with its own header and checksum, so a restore can fetch any
 * frame with one range read without reading the pack from its start.
 * Format: docs/FORMAT.md.
 *
 * The one public header of the pack/ room, which also holds the envelope of whole
 * objects and the page checks (each in its section below).
 */
#ifndef PB_ENGINE_PACK_H
#define PB_ENGINE_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage/storage.h"
#include "manifest/manifest.h"

typedef struct pack_writer pack_writer;

/* Where a frame lives. offset/clen cover the frame header + payload. */
typedef struct pack_loc {
    uint32_t pack_no;
    uint64_t offset;
    uint32_t clen; /* stored length (header + compressed payload) */
    uint32_t rlen; /* raw (decompressed) length */
} pack_loc;

#define PACK_FRAME_HEADER 32u
#define PACK_HEADER_LEN 16u /* a pack's own header; its first frame starts here */
#define PACK_MAX_FRAME_RAW (1u << 20)
/* A frame's payload is never larger than its raw bytes (incompressible data is stored
 * as is), so no valid frame is longer than this. */
#define PACK_MAX_FRAME_STORED (PACK_FRAME_HEADER + PACK_MAX_FRAME_RAW)

/* Pack keys are "<dir>/pack/<pack_no %06u>". A new pack starts when the current
 * one exceeds target_size bytes. level: zstd level (1 = fast). */
int pack_writer_open(pack_writer **out, repo *r, const char *dir, uint64_t target_size,
                     int level, pb_error *err);
/* Number the packs of this writer from first (default 1), so several writers can
 * share one backup directory. Call before the first frame. */
void pack_writer_set_first(pack_writer *w, uint32_t first);
/* Compress and append one frame (len <= PACK_MAX_FRAME_RAW). */
int pack_write_frame(pack_writer *w, const void *data, size_t len, pack_loc *out,
                     pb_error *err);
/* The one way backup and rebase store what a manifest records: data as one frame
 * described by runs[0..nruns) (first/count/frame_page set by the caller: a relation's
 * pages, several runs when the changed pages of one region share the frame; or one
 * piece of a whole file), each given the frame's location. The runs must lie inside
 * the frame (PB_EINVAL otherwise: a caller's bug, nothing is written). level: zstd
 * level of this frame, 0 = the writer's. */
int pack_write_runs(pack_writer *w, const void *data, size_t len, mf_run *runs, size_t nruns,
                    int level, pb_error *err);
/* Commit the open pack. Must be called before the manifest is committed. */
int pack_writer_finish(pack_writer *w, pb_error *err);
/* Aborts any uncommitted pack. Accepts NULL. */
void pack_writer_free(pack_writer *w);
uint64_t pack_writer_stored_bytes(const pack_writer *w);
uint32_t pack_writer_packs(const pack_writer *w);
/* Seconds this writer spent in zstd and in writing and committing its packs. */
void pack_writer_times(const pack_writer *w, double *compress, double *write);
/* The lowest (fastest) zstd level a frame may use: ZSTD_minCLevel(), negative. */
int pack_level_min(void);

/* Build the key of a pack. */
void pack_key(char *out, size_t cap, const char *dir, uint32_t pack_no);

/* Verify a stored frame (header, checksum) and decompress into out (cap >= loc->rlen). */
int pack_decode_frame(const uint8_t *frame, size_t frame_len, void *out, size_t cap,
                      size_t *out_len, const char *what, pb_error *err);
/* Refuse (PB_ECORRUPT, naming key and offset) a frame location read from a manifest that
 * no writer can have produced: stored length outside [PACK_FRAME_HEADER,
 * PACK_MAX_FRAME_STORED], raw length over PACK_MAX_FRAME_RAW, an offset inside the pack
 * header, or an end past what a file offset can hold. Call it before allocating or
 * range-reading anything from the location. */
int pack_loc_check(const char *key, uint64_t offset, uint32_t clen, uint32_t rlen,
                   pb_error *err);
/* Fetch one frame with a range read and decode it. */
int pack_read_frame(repo *r, const char *dir, const pack_loc *loc, void *out, size_t cap,
                    pb_error *err);

/* A reusable decoding context for readers that decode many frames (restore, verify):
 * it keeps one zstd decompression context and one frame buffer, which makes decoding
 * an 8 kB frame about 3x cheaper than pack_decode_frame. One per thread; the
 * functions behave exactly like pack_decode_frame / pack_read_frame. */
typedef struct pack_reader pack_reader;
int pack_reader_new(pack_reader **out, pb_error *err);
void pack_reader_free(pack_reader *rd); /* accepts NULL */
int pack_reader_decode(pack_reader *rd, const uint8_t *frame, size_t frame_len, void *out,
                       size_t cap, size_t *out_len, const char *what, pb_error *err);
int pack_reader_read(pack_reader *rd, repo *r, const char *dir, const pack_loc *loc, void *out,
                     size_t cap, pb_error *err);

/* ---- the pack-reading source (engine/pack/pack_read.c) --------------------------------
 * A restore needs many frames of one pack. A read plan coalesces them (sorted by
 * offset) into a few large range reads across small gaps; the source reads each range
 * once into a buffer and serves the frames from it, and reads ahead when requests
 * run sequentially through a pack (a full backup's small files sit back to back).
 * A backup writes with several pack writers at once, so consecutive files alternate
 * between packs: the source keeps PACK_SOURCE_SLOTS buffers (least recently used
 * goes), each following its own pack.
 *
 * The limits: a request to object storage costs a round trip (tens of milliseconds),
 * in which it could have carried megabytes, so a gap of up to PACK_PLAN_GAP unneeded
 * bytes between two needed frames is read rather than split into two requests; no
 * range is longer than PACK_PLAN_MAX_RANGE (one frame longer than that is its own
 * range); what one source's buffers hold together is bounded by its budget (below). */
#define PACK_PLAN_GAP (256u << 10)
#define PACK_PLAN_MAX_RANGE (4u << 20)
#define PACK_READAHEAD_MAX (4u << 20)
#define PACK_SOURCE_SLOTS 4
/* A source's buffers together never hold more than its budget (pack_source_set_budget;
 * PACK_SOURCE_BUDGET by default): before one buffer grows, the least recently used
 * others are freed, and read-ahead is cut to a slot's share of the budget. So a
 * restore's memory is its workers' budgets plus the pack cache's, whatever the size of
 * the data (docs/DESIGN.md, memory). The default keeps every slot's full read-ahead
 * (PACK_SOURCE_SLOTS x PACK_READAHEAD_MAX): the requests of a sequential restore stay
 * as they were; the smallest budget holds one largest fetch. */
#define PACK_SOURCE_BUDGET ((uint64_t)PACK_SOURCE_SLOTS * PACK_READAHEAD_MAX)
#define PACK_SOURCE_MIN_BUDGET ((uint64_t)PACK_PLAN_MAX_RANGE + PACK_MAX_FRAME_STORED)

/* One range read of a plan: bytes [start, start + len) hold frames[first .. first+count). */
typedef struct pack_range {
    uint64_t start, len;
    size_t first, count;
} pack_range;

/* Plan the reads of n frames of the pack key (frames sorted by offset; several entries
 * may name the same frame, which several runs share). ranges has room for n entries;
 * *nranges is set. Refuses (PB_ECORRUPT, naming key and offset) a frame location no
 * writer produced (pack_loc_check), frames out of offset order, and two different
 * frames that overlap. */
int pack_plan(const char *key, const pack_loc *frames, size_t n, pack_range *ranges,
              size_t *nranges, pb_error *err);

typedef struct pack_source pack_source;
int pack_source_new(pack_source **out, repo *r, pb_error *err);
void pack_source_free(pack_source *s); /* accepts NULL */
/* Bytes [start, start + len) of the pack key (len <= PACK_PLAN_MAX_RANGE +
 * PACK_MAX_FRAME_STORED), served from a buffer when they are there, else read with
 * one range read (grown ahead when the read follows an earlier one in the same pack).
 * *out stays valid until the next call. */
int pack_source_fetch(pack_source *s, const char *key, uint64_t start, size_t len,
                      const uint8_t **out, pb_error *err);
/* Bytes read from the repository so far. */
uint64_t pack_source_fetched(const pack_source *s);
/* Bound s's buffers to bytes (>= PACK_SOURCE_MIN_BUDGET, else PB_EINVAL); what s holds
 * now is dropped. */
int pack_source_set_budget(pack_source *s, uint64_t bytes, pb_error *err);
/* Bytes s's buffers hold now (never more than its budget). */
uint64_t pack_source_held(const pack_source *s);

/* ---- one budget shared by several sources (engine/pack/pack_read.c) ----------------------
 * A restore's workers each have a source; with independent budgets their sum is reached
 * only once every worker rebuilds a large file at once, so a restore held more as the
 * database grew, up to jobs x budget (docs/DESIGN.md, memory). A source given a pool
 * holds PACK_SOURCE_FLOOR bytes of its own (one largest frame) and draws every byte
 * beyond that from the pool, up to its own budget, and gives back what it stops holding.
 * It never waits for the pool: one the pool cannot serve plans ranges no longer than its
 * floor (pack_source_plan) and reads less ahead. A source alone takes its whole budget:
 * its ranges stay PACK_PLAN_MAX_RANGE long and its requests as they were. */
#define PACK_SOURCE_FLOOR ((uint64_t)PACK_MAX_FRAME_STORED)
typedef struct pack_pool pack_pool;
int pack_pool_new(pack_pool **out, uint64_t bytes, pb_error *err);
void pack_pool_free(pack_pool *p); /* accepts NULL; after every source drawing from it */
/* Bytes the sources have drawn now, and the most they drew at once. */
uint64_t pack_pool_taken(pack_pool *p);
uint64_t pack_pool_peak(pack_pool *p);
/* s draws beyond PACK_SOURCE_FLOOR from p (which outlives s); before s's first fetch. */
void pack_source_set_pool(pack_source *s, pack_pool *p);
/* pack_plan for s: ranges as long as s can hold now (PACK_PLAN_MAX_RANGE without a pool
 * or when the pool has room, down to PACK_SOURCE_FLOOR when it has none), and that room
 * kept for s until the plan's last range is fetched, another pack is fetched or the next
 * plan. What an earlier fetch returned is valid only until this call. */
int pack_source_plan(pack_source *s, const char *key, const pack_loc *frames, size_t n,
                     pack_range *ranges, size_t *nranges, pb_error *err);

/* ---- the shared pack cache (engine/pack/pack_cache.c) ------------------------------------
 * The first PACK_CACHE_PREFIX bytes of each pack a restore touches (all of a small
 * pack, as an incremental's usually are; on a local repository only packs no larger
 * than that), read once in one request and shared by the
 * sources of all its workers, up to PACK_CACHE_BUDGET bytes in all and
 * PACK_CACHE_ENTRIES packs; past the budget the sources read for themselves. A source
 * given a cache looks there before reading (pack_source_set_cache). Thread-safe: a
 * worker that needs a pack another is reading waits for that read. */
#define PACK_CACHE_PREFIX (1u << 20)
#define PACK_CACHE_BUDGET (24u << 20)
#define PACK_CACHE_ENTRIES 4096u
typedef struct pack_cache pack_cache;
int pack_cache_new(pack_cache **out, repo *r, pb_error *err);
void pack_cache_free(pack_cache *c); /* accepts NULL; after every source using it */
/* 1 and *out at [start, start + len) of key when the cache holds those bytes (reading
 * the pack's first bytes now when it has room for them and nobody has); 0 and *out NULL
 * otherwise, and the caller reads for itself (also when the cache's read failed: the
 * caller's read reports the error). *fetched grows by the bytes this call read. c may
 * be NULL. */
int pack_cache_get(pack_cache *c, const char *key, uint64_t start, size_t len,
                   const uint8_t **out, uint64_t *fetched);
/* Bound what c holds to bytes (instead of PACK_CACHE_BUDGET); before c's first get. */
void pack_cache_set_budget(pack_cache *c, uint64_t bytes);
/* Bytes c holds (or has reserved for reads in progress). */
uint64_t pack_cache_held(pack_cache *c);
/* s looks in c (which outlives s) before reading; NULL: no cache. */
void pack_source_set_cache(pack_source *s, pack_cache *c);

/*
 * The envelope of whole compressed objects (prefix pack_, engine/pack/envelope.c):
 * manifests ("PBZOBJ01") and archived WAL ("PBWAL001") are each one object of a 32-byte
 * header and one zstd frame:
 *
 *   8 bytes magic, u64 raw length, u64 XXH3-64 of the raw bytes,
 *   u64 XXH3-64 of the payload, then the payload (one zstd frame).
 *
 * Integers are little-endian (docs/FORMAT.md). The codec is parameterised by the magic
 * and by the largest raw length its kind of object can have; it lives apart from
 * pack.c (frames inside pack objects): the WAL room uses it without the pack writer.
 */
#define PACK_ENVELOPE_HEADER 32u
#define PACK_OBJECT_MAGIC "PBZOBJ01"
#define PACK_OBJECT_MAX_RAW (1ull << 34) /* 16 GiB: a manifest of ~2 billion pages */
/* zstd cannot expand by more than this: a block yields at most 128 KiB and takes at
 * least 4 bytes (3-byte header + 1 RLE byte). */
#define PACK_ZSTD_MAX_RATIO 32768u

/* Compress len raw bytes at zstd level into one object with this 8-byte magic and
 * append it to out (out->len grows by the object's length; on failure out->len is
 * unchanged). what names the object in messages (NULL: "a <len>-byte object").
 * PB_ENOMEM, or PB_EIO when zstd fails. */
int pack_envelope_encode(const void *raw, size_t len, const char *magic, int level,
                         const char *what, pb_buf *out, pb_error *err);
/* The same for raw bytes that come in pieces (a WAL segment read in chunks): read fills
 * buf with up to cap bytes and sets *got (0 at the end). What is held is one piece and the
 * object being built, which grows with the compressed bytes, not to the raw length
 * (memory bounds). The raw length must be len exactly, else PB_EIO naming what (the source
 * changed while it was read). */
typedef int (*pack_piece_fn)(void *ctx, void *buf, size_t cap, size_t *got, pb_error *err);
#define PACK_ENVELOPE_PIECE (1u << 20)
int pack_envelope_encode_pieces(pack_piece_fn read, void *ctx, uint64_t len, const char *magic,
                                int level, const char *what, pb_buf *out, pb_error *err);
/* Verify an object with this magic and decompress it into *out (malloc'd, caller frees;
 * NULL on failure). The raw length in the header is bounded by max_raw, by SIZE_MAX and
 * by what the payload can expand to (PACK_ZSTD_MAX_RATIO), and memory grows with the
 * bytes actually decompressed, so a crafted header cannot make it allocate much more
 * than the real content. Every failure but PB_ENOMEM is PB_ECORRUPT naming what. */
int pack_envelope_decode(const void *obj, size_t len, const char *magic, uint64_t max_raw,
                         const char *what, void **out, size_t *out_len, pb_error *err);

/* The manifest envelope: magic PACK_OBJECT_MAGIC, raw length at most PACK_OBJECT_MAX_RAW. */
int pack_object_encode(const void *raw, size_t len, int level, pb_buf *out, pb_error *err);
int pack_object_decode(const void *obj, size_t len, const char *what, void **out,
                       size_t *out_len, pb_error *err);

/* Manifest version 2 chunks (one zstd frame each, level 3): the mf_codec engine/chain/chain.c
 * hands to manifest/. decompress fails with PB_ECORRUPT unless the frame yields exactly
 * raw_len bytes into dst. */
int pack_chunk_compress(const void *data, size_t len, pb_buf *out, pb_error *err);
int pack_chunk_decompress(const void *data, size_t len, void *dst, size_t raw_len,
                          pb_error *err);

/*
 * PostgreSQL page inspection (prefix page_, engine/pack/page.c): header fields, the
 * page checksum algorithm (FNV-1a based, as in PostgreSQL's checksum_impl.h),
 * and the verdict the scanner acts on.
 */
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
