/* engine/backup/backup_wal_wait_internal.h — backup_wal_wait.c's own API. */
#ifndef PB_BACKUP_WAL_WAIT_INTERNAL_H
#define PB_BACKUP_WAL_WAIT_INTERNAL_H

#include "engine/storage/storage.h"
#include "manifest/manifest.h"

/* The LSN whose segment is the last one a restore of backup h replays (a standby's backup
 * may end at a segment boundary and need the segment that begins there). */
uint64_t bk_last_needed_lsn(const mf_backup *h, bool standby);

/* Wait (renewing the writer lock) until the repository holds every segment from backup h's
 * start to the last one its restore replays (a standby's backup may need the segment
 * that begins at its stop point), at most timeout seconds; PB_ESTATE naming the first
 * missing segment and what to set when it does not come. */
int bk_wait_for_wal(repo *r, repo_lock *lock, const mf_backup *h, unsigned timeout,
                    bool standby, pb_error *err);

#endif
