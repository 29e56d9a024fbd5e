/* engine/backup/backup_standby_internal.h — a backup from a hot standby; the database list
 * (backup_standby.c). */
#ifndef PB_ENGINE_BACKUP_STANDBY_INTERNAL_H
#define PB_ENGINE_BACKUP_STANDBY_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* ---- a backup from a hot standby; the database list (backup_standby.c) ---- */
/* Before pg_backup_start: an incremental from a standby waits (wal_timeout_secs) until
 * the standby has replayed past its parent's stop LSN. 0 at once on a primary. */
int bk_standby_before_start(bk_ctx *ctx, pgc *conn, pb_error *err);
/* After pg_backup_stop: the label's start timeline is the recorded one; on a standby the
 * end is on that timeline too, not before the parent's end, and replayed by the standby
 * (a bounded wait). PB_ESTATE otherwise. */
int bk_standby_after_stop(bk_ctx *ctx, pgc *conn, const char *label, pb_error *err);
/* Store backup/<id>/databases (pg_database's names and OIDs), before the manifest. */
int bk_put_databases(bk_ctx *ctx, pgc *conn, pb_error *err);

#endif
