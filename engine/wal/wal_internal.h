/*
 * engine/wal/wal_internal.h — shared by the files of the WAL room (engine/wal/), for
 * nothing outside it.
 */
#ifndef PB_ENGINE_WAL_INTERNAL_H
#define PB_ENGINE_WAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

#define WAL_MAX_RAW (1ull << 30) /* wal_segment_size is at most 1 GiB */

/* ---- names (walname.c) ---- */

/* The first n characters are upper-case hex digits, as PostgreSQL writes WAL names. */
bool arch_all_hex(const char *s, size_t n);
/* Segment "TTTTTTTTXXXXXXXXYYYYYYYY", optionally ".partial" or ".OOOOOOOO.backup". */
bool arch_is_segment_name(const char *name);
/* "TTTTTTTT.history". */
bool arch_is_history_name(const char *name);
/* PB_EINVAL naming name unless it is a segment, .partial, .backup or .history name. */
int arch_check_name(const char *name, pb_error *err);

/* ---- WAL files in the local file system (local_file.c) ---- */

/* Read a whole file of at most WAL_MAX_RAW bytes into *out (malloc'd, caller frees).
 * PB_ENOENT when it does not exist, PB_EINVAL when it is larger, else PB_EIO. */
int arch_file_read(const char *path, uint8_t **out, size_t *out_len, pb_error *err);
/* Write dest atomically: temp file, rename; with durable, fsync of the file and of its
 * directory too. PostgreSQL must never see a partial WAL file. */
int arch_file_write_atomic(const char *dest, const uint8_t *data, size_t len, bool durable,
                           pb_error *err);

#endif
