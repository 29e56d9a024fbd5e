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

#endif
