/*
 * engine/wal/wal.h — the WAL room (prefix arch_): the WAL archive in the repository,
 * WAL file names, timeline history files and the archive-get spool. Segments are stored
 * under "wal/<timeline>/<name>.zst" and history files under "wal/history/<name>.zst", each
 * in the object envelope (engine/envelope.h, magic "PBWAL001") whose header carries the
 * raw size and hash, so a second push of the same segment is recognised as identical and
 * a different one is refused.
 *
 * Files: archive.c (push, get, read, list), walname.c (names and keys), history.c
 * (history files), spool.c (archive-get spool and prefetch), local_file.c (WAL files in
 * the local file system). The room uses common/, the repository's storage and the
 * envelope, nothing of the backup path.
 */
#ifndef PB_ENGINE_WAL_H
#define PB_ENGINE_WAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage.h"

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

#endif
