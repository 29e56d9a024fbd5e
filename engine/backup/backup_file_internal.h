/* engine/backup/backup_file_internal.h — backing up one walked entry (backup_file.c). */
#ifndef PB_ENGINE_BACKUP_FILE_INTERNAL_H
#define PB_ENGINE_BACKUP_FILE_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* Back up one walked entry into ctx->rec. A file that vanished is skipped (not an error). */
int bk_file(bk_ctx *ctx, const walk_entry *e, pb_error *err);
/* Store a file whose content is in memory (backup_label, tablespace_map). */
int bk_memory_file(bk_ctx *ctx, const char *path, const void *data, size_t len, pb_error *err);

/* Tell opts->progress (if any) that bytes more were read. */
void bk_progress_note(bk_ctx *ctx, uint64_t bytes);
/* Sleep as needed to keep reads under opts->max_rate. */
void bk_throttle(bk_ctx *ctx, size_t bytes);

#endif
