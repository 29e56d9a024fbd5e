/*
 * engine/backup/backup_wal_wait.c — the wait, after pg_backup_stop, until the repository
 * holds every WAL segment a restore of the backup replays (docs/DESIGN.md, rule 4).
 */
#include "engine/backup/backup_wal_wait_internal.h"
#include "engine/wal/wal.h"

#include <unistd.h>

/* The LSN whose segment is the last one a restore of the backup replays. A primary's
 * backup ends with its own record, so the segment holding stop_lsn-1 is the last. A
 * standby's ends at its minimum recovery point, which is a segment boundary when the
 * last record replayed was a segment switch; recovery (seen on PostgreSQL 14 and 18)
 * reads the record after it before it calls the backup's end reached, so the segment
 * that begins there is needed too. */
uint64_t bk_last_needed_lsn(const mf_backup *h, bool standby)
{
    return standby ? h->stop_lsn : h->stop_lsn - 1;
}

/* Rule 4: the backup needs WAL from the start segment to the one holding
 * bk_last_needed_lsn(). */
int bk_wait_for_wal(repo *r, repo_lock *lock, const mf_backup *h, unsigned timeout,
                    bool standby, pb_error *err)
{
    uint64_t seg = h->wal_segment_size;
    double deadline = pb_now() + timeout;
    useconds_t nap = 5000; /* the archiver is usually a few ms behind: look again soon */
    for (uint64_t s = h->start_lsn / seg; s <= bk_last_needed_lsn(h, standby) / seg; s++) {
        char name[25];
        arch_walfile_name(name, h->timeline, s * seg, (uint32_t)seg);
        for (;;) {
            bool present = false;
            int rc = arch_exists(r, name, &present, err);
            if (rc)
                return rc;
            if (present)
                break;
            if ((rc = repo_lock_renew(lock, err)))
                return rc;
            if (pb_now() > deadline)
                return pb_fail(err, PB_ESTATE,
                               "WAL segment %s needed by backup %s is not in repository %s "
                               "after %u s: is archive_command set to pageback archive-push?%s",
                               name, h->id, repo_location(r), timeout, standby ?
                               " (a backup from a standby needs the primary's archive_command, "
                               "or the standby's with archive_mode = always, to archive into "
                               "this repository; the last segment is archived when the "
                               "primary switches it: set archive_timeout there)" : "");
            usleep(nap);
            nap = nap < 50000 ? nap * 2 : 50000;
        }
    }
    return 0;
}
