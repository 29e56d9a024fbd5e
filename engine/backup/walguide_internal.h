/*
 * engine/backup/walguide_internal.h — WAL-guided incrementals (reading less, prefix wg_): the
 * blocks that the archived WAL between the parent backup's start LSN and this backup's start LSN
 * names, per relation segment, and the relations and databases it cannot vouch for.
 * walguide.c holds the block set (bounded memory, spilled to the state directory beyond
 * a limit); walguide_read.c decodes the WAL window into it.
 */
#ifndef PB_ENGINE_WALGUIDE_INTERNAL_H
#define PB_ENGINE_WALGUIDE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage/storage.h"

/* A relation segment: RelFileNode, fork, segment number (block / 131072). */
typedef struct wg_key {
    uint32_t spc, db, rel;
    uint32_t fork;
    uint32_t seg;
} wg_key;

typedef struct wg_set wg_set;

/* A set that holds at most mem_entries block numbers in memory (0 = the default: 4 MiB
 * of entries, 174762) and spills sorted runs to files under spill_dir beyond that. */
int wg_set_open(wg_set **out, const char *spill_dir, size_t mem_entries, pb_error *err);
void wg_set_free(wg_set *s); /* accepts NULL; removes the spill files */
int wg_set_add(wg_set *s, const wg_key *k, uint32_t blk, pb_error *err);
/* The relation (spc, db, rel; every fork and segment) cannot be vouched for: read whole. */
int wg_set_mark_rel(wg_set *s, uint32_t spc, uint32_t db, uint32_t rel, pb_error *err);
/* Every relation of database db in tablespace spc: read whole. */
int wg_set_mark_db(wg_set *s, uint32_t spc, uint32_t db, pb_error *err);
/* Sort, merge the spilled runs, index. No add or mark after it. */
int wg_set_finish(wg_set *s, pb_error *err);
/* After finish: PB_ENOENT when k must be read whole (marked), else 0 with *out (malloc'd,
 * sorted, distinct; NULL when *n is 0) the blocks named within segment k. */
int wg_set_blocks(const wg_set *s, const wg_key *k, uint32_t **out, size_t *n, pb_error *err);
/* Statistics: distinct blocks named, bytes spilled. */
uint64_t wg_set_count(const wg_set *s);
uint64_t wg_set_spilled(const wg_set *s);

/* The relation segment a data-directory path names, with tblspc_dir the cluster's
 * "PG_<major>_<catversion>". false for anything else. */
bool wg_key_from_path(const char *path, const char *tblspc_dir, wg_key *out);

/* ---- the WAL window (walguide_read.c) ---- */
typedef struct wg_window {
    repo *repo;
    const char *pgdata;      /* the segment holding end_lsn is read from pg_wal here */
    const char *spill_dir;
    uint32_t timeline, seg_size;
    uint64_t start_lsn, end_lsn; /* parent's start, this backup's start */
    size_t mem_entries;      /* wg_set_open's limit; 0 = default */
    int nice;                /* the decoding thread's niceness (19 = the lowest) */
} wg_window;

/* Decode the window into *out. When WAL cannot vouch for the whole window (a segment
 * missing from the archive, an unknown resource manager) returns 0 with *out NULL and
 * why saying so: the caller falls back. Errors (< 0) only for what stops the backup. */
int wg_collect(const wg_window *w, wg_set **out, char *why, size_t why_len, pb_error *err);

/* How much of the segment holding end_lsn the window reads from pg_wal: through the end
 * of the WAL page holding end_lsn, at most the segment. */
size_t wg_local_len(uint32_t seg_size, uint64_t end_lsn);

#endif
