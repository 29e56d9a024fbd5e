/*
 * engine/archive.h — WAL archive in the repository (prefix arch_). Segments and
 * history files are stored zstd-compressed under "wal/<timeline>/<name>.zst"
 * with a header carrying the raw size and hash, so a second push of the same
 * segment is recognised as identical and a different one is refused.
 */
#ifndef PB_ENGINE_ARCHIVE_H
#define PB_ENGINE_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage.h"

/* Store the file at path (its basename is the WAL file name). */
int arch_push(repo *r, const char *path, pb_error *err);
/* Fetch name into dest_path (written atomically). PB_ENOENT when not archived. */
int arch_get(repo *r, const char *name, const char *dest_path, pb_error *err);
/* Is this WAL file present? */
int arch_exists(repo *r, const char *name, bool *present, pb_error *err);
/* Key of a WAL file in the repository. */
void arch_key(char *out, size_t cap, const char *name);

/* ---- additions for point-in-time restore and archive-get prefetch ---------------- */

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

/* Segment names <-> (timeline, segment number) for a wal_segment_size (a power of two
 * between 1 MiB and 1 GiB). arch_parse_segment fails on anything but a plain segment. */
bool arch_parse_segment(const char *name, uint32_t seg_size, uint32_t *tli, uint64_t *segno);
void arch_segment_name(char out[25], uint32_t tli, uint64_t segno, uint32_t seg_size);
bool arch_valid_seg_size(uint64_t size);

/*
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
