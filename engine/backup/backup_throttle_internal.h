/* engine/backup/backup_throttle_internal.h — what a backup does to stay out of the
 * database's way (backup_throttle.c, backup_cache.c). */
#ifndef PB_ENGINE_BACKUP_THROTTLE_INTERNAL_H
#define PB_ENGINE_BACKUP_THROTTLE_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* Page-cache residue (backup_cache.c): the resident bytes of the file at path now (0 when
 * it cannot be mapped); after reading it, add what became resident since before to
 * ctx->io.page_cache_left_bytes. */
uint64_t bk_cache_resident(const char *path);
void bk_cache_left(bk_ctx *ctx, const char *path, uint64_t before);

/* Plan the reads, apply --io-class and --max-memory, open ctx->scan (backup_throttle.c). */
int bk_open_scanner(bk_ctx *ctx, const bk_opts *opts, pb_error *err);
/* --cpu-weight: move the process into a new cgroup with that weight, or say why not. */
void bk_apply_cpu_weight(const bk_opts *opts, bk_io_report *io);
/* Leave and remove that cgroup (at the end of bk_run). */
void bk_release_cpu_weight(bk_io_report *io);
/* Log what was applied and counted; copy it to ctx->report when given. */
void bk_finish_report(bk_ctx *ctx);

/* Fixed costs (backup_throttle.c): add the time since *mark to *field and move *mark to
 * now; log the backup's steps end to end (one line, with the scan's share). */
void bk_stage_mark(double *mark, double *field);
void bk_log_fixed_costs(const bk_stages *st);

#endif
