/*
 * engine/wal/wal.h — the WAL room (prefix arch_): the WAL archive in the repository,
 * WAL file names, timeline history files and the archive-get spool. Segments are stored
 * under "wal/<timeline>/<name>.zst" and history files under "wal/history/<name>.zst", each
 * in the object envelope (engine/pack/pack.h, magic "PBWAL001") whose header carries the
 * raw size and hash, so a second push of the same segment is recognised as identical and
 * a different one is refused.
 *
 * Files: archive.c (push, get, read, list), walname.c (names and keys), history.c
 * (history files), spool.c (archive-get spool and prefetch), local_file.c (WAL files in
 * the local file system), decode.c and reader.c (the WAL record decoder), walsource.c
 * (archived WAL as a segment source for the decoder). The room uses common/, the repository's storage and the
 * envelope, nothing of the backup path.
 */
#ifndef PB_ENGINE_WAL_H
#define PB_ENGINE_WAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/pgver/pgver.h"
#include "engine/storage/storage.h"

/* ---- the archive (archive.c) ----------------------------------------------------- */

/* Store the file at path (its basename is the WAL file name). */
int arch_push(repo *r, const char *path, pb_error *err);
/* Fetch name into dest_path (written atomically). PB_ENOENT when not archived. */
int arch_get(repo *r, const char *name, const char *dest_path, pb_error *err);
/* Is this WAL file present? */
int arch_exists(repo *r, const char *name, bool *present, pb_error *err);
/* Key of a WAL file in the repository ("" for a name that is not a WAL file name, which
 * every repo_* call refuses; walname.c). */
void arch_key(char *out, size_t cap, const char *name);

/* Fetch and verify one archived WAL or history file into memory (*out malloc'd, caller
 * frees). PB_ENOENT when not archived. */
int arch_read(repo *r, const char *name, uint8_t **out, size_t *out_len, pb_error *err);

/* The hash of the raw content of an archived WAL or history file (pb_hash64, as its
 * envelope header records it), read from the header alone (one small ranged read): a
 * cache of what a segment holds is keyed on it. PB_ENOENT when not archived,
 * PB_ECORRUPT when the header is not a WAL object's. */
int arch_object_hash(repo *r, const char *name, uint64_t *hash, pb_error *err);

/* Verify and decompress an archived object as arch_read does, for an object already in
 * memory (the fuzz target; *out malloc'd, caller frees). PB_EINVAL for a name that is
 * not a WAL file name, PB_ECORRUPT naming the object's key for anything wrong in it. */
int arch_decode(const uint8_t *obj, size_t len, const char *name, uint8_t **out,
                size_t *out_len, pb_error *err);

/* List archived WAL file names (without the repository's ".zst" suffix). kinds is a mask
 * of ARCH_LIST_SEGMENTS (full segments only: no .partial or .backup) and
 * ARCH_LIST_HISTORY. cb returning non-zero stops the listing; that value is returned. */
#define ARCH_LIST_SEGMENTS 1u
#define ARCH_LIST_HISTORY 2u
typedef int (*arch_list_cb)(void *ctx, const char *name);
int arch_list(repo *r, unsigned kinds, arch_list_cb cb, void *ctx, pb_error *err);

/* PostgreSQL's WAL page (XLOG_BLCKSZ): the reader refuses WAL of another. */
#define ARCH_WAL_PAGE 8192u

/* Check the long page header that starts WAL segment `name` (a plain segment name),
 * a file of len bytes whose first ARCH_LONG_PHD bytes are page: the page address is where
 * the name puts the segment, its timeline the name's or an earlier one, and the segment
 * and page sizes agree. PB_ECORRUPT naming what (the file or object), expected and found. */
#define ARCH_LONG_PHD 40
int arch_check_first_page(const uint8_t *page, uint64_t len, const char *name,
                          const char *what, pb_error *err);
/* The WAL file at path (archive_command's %p, archive.c) against its name: *segment
 * false for a file with no long header (history, .backup: nothing checked), else the page
 * magic and arch_check_first_page, PB_EINVAL naming the file when they do not match; on
 * success *sysid is the segment's xlp_sysid, the cluster it belongs to. */
int arch_check_local_segment(const char *path, bool *segment, uint64_t *sysid, pb_error *err);

/* ---- names (walname.c) ------------------------------------------------------------
 * Segment names <-> (timeline, segment number) for a wal_segment_size (a power of two
 * between 1 MiB and 1 GiB), as PostgreSQL's XLogFileName / XLogFromFileName
 * (access/xlog_internal.h). arch_parse_segment fails on anything but a plain segment. */
bool arch_parse_segment(const char *name, uint32_t seg_size, uint32_t *tli, uint64_t *segno);
void arch_segment_name(char out[25], uint32_t tli, uint64_t segno, uint32_t seg_size);
bool arch_valid_seg_size(uint64_t size);
/* The segment that holds lsn on timeline tli. For an lsn exactly on a segment boundary
 * it names the segment that starts there (pg_walfile_name() names the previous one,
 * because it treats the LSN as the end of the WAL written so far). out is "" when
 * seg_size is not a power of two. */
void arch_walfile_name(char out[25], uint32_t tli, uint64_t lsn, uint32_t seg_size);
/* "TTTTTTTT.history", the history file of timeline tli. */
void arch_history_name(char out[17], uint32_t tli);

/* ---- timeline history files (history.c) ------------------------------------------ */

/* One timeline of a history: WAL positions [begin, end) belong to tli. */
typedef struct arch_tl_entry {
    uint32_t tli;
    uint64_t begin, end; /* end = UINT64_MAX on the last timeline of the history */
} arch_tl_entry;

/* Parse the history file of timeline tli (text, len bytes: "parentTLI <tab> X/Y <tab>
 * reason" lines, as PostgreSQL's readTimeLineHistory) into *out (malloc'd, oldest first,
 * caller frees; NULL on failure) and *n entries; the last entry is tli itself, from the
 * last switch point on. PB_ECORRUPT naming the file for a bad line, a parent that is not
 * older than tli, or switch points out of order; PB_ENOMEM. Pure: no I/O. */
int arch_history_parse(const char *text, size_t len, uint32_t tli, arch_tl_entry **out,
                       size_t *n, pb_error *err);

/*
 * ---- the archive-get spool (spool.c) ----
 * The archive-get spool: a directory (pg_wal/pageback-spool) where a background
 * prefetcher leaves the next segments, verified and decompressed, named
 * "<segment>.<hash of the content>", so that the next archive-get only reads, hashes and
 * renames one (the spool is in the destination's file system).
 *
 * arch_spool_prepare creates the spool if needed and removes what is stale: segments
 * before `name` (consumed or skipped), temp files of dead prefetchers, and everything
 * when the spool was filled from another repository (repo_id differs).
 * arch_spool_take serves `name` from the spool into dest_path (its hash checked against
 * the name, then an atomic rename); PB_ENOENT when not spooled (a spooled copy that
 * fails verification is removed and also reported as PB_ENOENT, with a warning).
 * arch_prefetch fetches up to count segments following `name` (same timeline) into the
 * spool, skipping those present, and stops quietly at the end of the archive. Only one
 * prefetcher works on a spool at a time (flock); a second returns 0 at once.
 */
int arch_spool_prepare(const char *spool_dir, const char *name, const char *repo_id,
                       pb_error *err);
int arch_spool_take(const char *spool_dir, const char *name, const char *dest_path,
                    pb_error *err);
int arch_prefetch(repo *r, const char *spool_dir, const char *name, uint32_t seg_size,
                  unsigned count, pb_error *err);

/* ---- the WAL record decoder (decode.c: one record; reader.c: the stream) ---------
 * Reads the WAL of PostgreSQL 14 to 19 (8 kB pages; the version from the page magic,
 * engine/pgver) as its xlogreader does
 * (access/xlogreader.c, access/xlogrecord.h, access/xlog_internal.h): records are
 * gathered across pages and segments, their CRC32C checked, their block references and
 * main data decoded. Nothing of a record is interpreted beyond that: its callers (the
 * restore's recovery targets, WAL-guided backups) read what they need from it. */
typedef struct arch_blockref {
    uint32_t spc, db, rel;  /* RelFileNode */
    uint8_t fork;           /* 0 main, 1 fsm, 2 vm, 3 init */
    uint32_t block;
    bool has_image, apply_image, will_init;
} arch_blockref;
typedef struct arch_record {
    uint64_t lsn, end_lsn;  /* start of the record, first byte after it */
    uint32_t xid;
    uint8_t rmid, info;     /* info includes the rmgr bits (mask with 0xF0 as PG does) */
    const uint8_t *main_data; uint32_t main_len;  /* valid until the next call */
    unsigned nblocks; arch_blockref blocks[33];
} arch_record;

/* Decode the record rec (tot_len bytes, its 24-byte header first, gathered from the
 * pages) found at lsn, written by the PostgreSQL of v, into *out; main_data points into
 * rec. PB_ECORRUPT naming the LSN for a bad CRC, a bad header, a block id out of order or
 * lengths that do not add up. Pure: no I/O, no allocation. */
int arch_record_decode(const uint8_t *rec, uint32_t tot_len, uint64_t lsn, const pgv_facts *v,
                       arch_record *out, pb_error *err);

/* Segment source: give the bytes of WAL segment `segno` (the caller maps segno to a
 * timeline). The bytes stay the source's and valid until its next call. */
typedef int (*arch_segment_fn)(void *ctx, uint64_t segno, const uint8_t **data, size_t *len,
                               pb_error *err);
typedef struct arch_walreader arch_walreader;
/* A reader of the records in [start_lsn, end_lsn) (end_lsn UINT64_MAX: to the end of
 * valid WAL). Nothing is read before the first arch_walreader_next. *out is the
 * caller's, freed with arch_walreader_close. */
int arch_walreader_open(arch_walreader **out, uint32_t seg_size, uint64_t start_lsn,
                        uint64_t end_lsn, arch_segment_fn get, void *ctx, pb_error *err);
/* 0 = *out holds a record; 1 = end_lsn reached (or the end of valid WAL: see
 * arch_walreader_end_reason); < 0 = error naming the segment and LSN (PB_ENOENT for a
 * missing segment, PB_ECORRUPT for a bad CRC or header). start_lsn may point into the
 * middle of a record: skip to the next one. *out is valid until the next call. */
int arch_walreader_next(arch_walreader *r, const arch_record **out, pb_error *err);
/* After next returned 1: why reading stopped ("end_lsn 0/5000000 reached", "no record
 * at 0/5000A28: zero length"), and the LSN where the next record would start. */
const char *arch_walreader_end_reason(const arch_walreader *r);
uint64_t arch_walreader_end_lsn(const arch_walreader *r);
/* The version that wrote the WAL read so far (from its first page's magic); NULL before
 * the first page was read. Valid for the reader's life. */
const pgv_facts *arch_walreader_facts(const arch_walreader *r);
/* Accepts NULL. */
void arch_walreader_close(arch_walreader *r);

/* A segment source over the repository's archived WAL (walsource.c), following the
 * timeline path `path` (n entries oldest first, as arch_history_parse gives; one entry
 * {tli, 0, UINT64_MAX} for a single timeline): segment segno is read from the newest
 * timeline of the path that began at or before it, as PostgreSQL's recovery does
 * (XLogFileReadAnyTLI). Each object is verified and decompressed by arch_read; one
 * segment is held at a time. The path is copied; r must outlive the source. */
typedef struct arch_walsource arch_walsource;
int arch_walsource_open(arch_walsource **out, repo *r, uint32_t seg_size,
                        const arch_tl_entry *path, size_t n, pb_error *err);
/* The arch_segment_fn to hand arch_walreader_open with the source as ctx. */
int arch_walsource_get(void *ctx, uint64_t segno, const uint8_t **data, size_t *len,
                       pb_error *err);
/* The timeline segment segno is read from on the path (0 when none). */
uint32_t arch_walsource_tli(const arch_walsource *s, uint64_t segno);
/* Accepts NULL. */
void arch_walsource_close(arch_walsource *s);

#endif
