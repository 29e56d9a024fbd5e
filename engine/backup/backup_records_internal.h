/* engine/backup/backup_records_internal.h — the file records of a backup and the
 * parent's, streamed (backup_records.c). */
#ifndef PB_ENGINE_BACKUP_RECORDS_INTERNAL_H
#define PB_ENGINE_BACKUP_RECORDS_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* ---- the file records (engine/backup/backup_records.c): memory bounded by a chunk ---------- */
/* After init_manifest: the spool in the state directory and the streaming writer. */
int bk_records_open(bk_ctx *ctx, pb_error *err);
/* Record f (as mf_add_file: on success f's pointers are taken). Paths come in walk order;
 * the few out of it (pg_control, backup_label, tablespace_map) are held aside. While
 * records wait for their frames (bk_record_later), f waits behind them. */
int bk_record_add(bk_ctx *ctx, mf_file *f, pb_error *err);
/* Records waiting for frames, at most: the walk's next files are read meanwhile. A full
 * queue, or one holding more than BK_PENDING_BYTES (hashes and runs), waits for its oldest
 * record's frames (a drain wait, bk_stages), so memory stays flat. The frames
 * in flight are bounded by the pipe's buffers, so more than a few files are pending only
 * behind a slow frame. */
#define BK_PENDING_FILES 64u
#define BK_PENDING_BYTES (4u << 20)
/* Record f once the frames of handle frames (bk_pipe_file_end) are stored: f.runs are
 * theirs then. As bk_record_add, the caller clears f after a failure (a no-op when f was
 * queued: its pointers are taken at once). f NULL: the file vanished, its frames land
 * unrecorded. frames NULL: as bk_record_add. */
int bk_record_later(bk_ctx *ctx, mf_file *f, bk_pipe_file *frames, pb_error *err);
/* Write the pending records whose frames are stored, oldest first (never one before an
 * earlier one); all: wait for every one (before pg_backup_stop). The first failure names
 * the file whose frames failed. */
int bk_records_settle(bk_ctx *ctx, bool all, pb_error *err);
size_t bk_records_pending(const bk_ctx *ctx);
/* Write the manifest with ctx->m's header (final by now) and commit it: the object
 * appears whole or not at all. Fills ctx->io's manifest_*_peak. */
int bk_records_commit(bk_ctx *ctx, pb_error *err);
/* After the commit: make the committed records the catalog's head, streamed. */
int bk_records_apply(bk_ctx *ctx, mf_catalog *cat, pb_error *err);
/* The parent's record of path (*out NULL when it has none), read forward along the
 * walk's path order; *out is valid until the next call. */
int bk_parent_find(bk_ctx *ctx, const char *path, const mf_file **out, pb_error *err);
/* A cursor over the parent's records (bk_parent_find's, one per backup: the progress
 * plan reads none): a forward-only find. Start with BK_PARENT_CURSOR_INIT. */
typedef struct bk_parent_cursor {
    mf_stream *s;
    mf_file cur;  /* the record at the cursor */
    int state;    /* 1: cur holds one; 0: past the end (or closed); -1: not opened */
} bk_parent_cursor;
#define BK_PARENT_CURSOR_INIT {NULL, {0}, -1}
int bk_parent_cursor_find(bk_ctx *ctx, bk_parent_cursor *c, const char *path, const mf_file **out,
                   pb_error *err);
void bk_parent_cursor_close(bk_parent_cursor *c); /* what a cursor holds; it reads nothing more */
void bk_records_free(bk_records *rec); /* accepts NULL */

#endif
