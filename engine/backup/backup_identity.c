/*
 * engine/backup/backup_identity.c — what a backup proves before it reads or trusts anything:
 *
 * - the data directory it reads is the connected server's (a stopped older copy of the
 *   cluster, or another cluster, would otherwise be backed up as the live one): its
 *   global/pg_control carries the server's system identifier, and it is the server's
 *   data_directory itself (device and inode of both);
 * - an incremental trusts WAL (or mtimes) only when pg_control follows its parent's stop
 *   point: the same system and data checksum version, a latest checkpoint on the same
 *   timeline at or after the parent's. An offline rewrite (pg_checksums, a data directory
 *   copied in from elsewhere) writes pages without WAL; what it leaves in pg_control is
 *   the trace WAL does not have. A break reads every page by hash instead.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_identity_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The system identifier is the first field of ControlFileData in every version. */
static int pgdata_system_id(const char *pgdata, uint64_t *out, pb_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/global/pg_control", pgdata);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ESTATE : PB_EIO,
                             "cannot open %s: is %s a PostgreSQL data directory?", path, pgdata);
    ssize_t n = pread(fd, out, sizeof(*out), 0);
    int saved = errno;
    close(fd);
    if (n != (ssize_t)sizeof(*out)) {
        errno = saved;
        return n < 0 ? pb_fail_errno(err, PB_EIO, "cannot read %s", path)
                     : pb_fail(err, PB_ESTATE, "%s holds %zd bytes, not a control file", path,
                               n);
    }
    return 0;
}

int bk_check_pgdata(const char *pgdata, const pgc_info *info, pb_error *err)
{
    uint64_t sysid = 0;
    int rc = pgdata_system_id(pgdata, &sysid, err);
    if (rc)
        return rc;
    if (sysid != info->system_id)
        return pb_fail(err, PB_ESTATE, "data directory %s is not the connected server's: its "
                       "global/pg_control has system identifier %" PRIu64 ", the server "
                       "(pg_control_system()) has %" PRIu64 " (data_directory %s)", pgdata,
                       sysid, info->system_id, info->data_directory);
    struct stat mine, server;
    if (stat(pgdata, &mine) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot stat data directory %s", pgdata);
    if (stat(info->data_directory, &server) != 0)
        return pb_fail_errno(err, PB_ESTATE, "cannot stat the server's data_directory %s "
                             "(SHOW data_directory), so %s cannot be proven to be it",
                             info->data_directory, pgdata);
    if (mine.st_dev != server.st_dev || mine.st_ino != server.st_ino)
        return pb_fail(err, PB_ESTATE, "data directory %s (device %ju, inode %ju) is not the "
                       "connected server's data_directory %s (device %ju, inode %ju): a copy "
                       "of the same cluster (system identifier %" PRIu64 ") is not the live "
                       "one", pgdata, (uintmax_t)mine.st_dev, (uintmax_t)mine.st_ino,
                       info->data_directory, (uintmax_t)server.st_dev,
                       (uintmax_t)server.st_ino, sysid);
    return 0;
}

bool bk_history_hash(const char *pgdata, uint32_t tli, uint64_t *out)
{
    if (tli <= 1) {
        *out = pb_hash64("", 0); /* timeline 1 has no history */
        return true;
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/pg_wal/%08X.history", pgdata, tli);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    /* A history file is a line per switch: far below this bound. */
    static const size_t max = 1u << 20;
    char *buf = malloc(max);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    bool ok = buf && !ferror(f) && n < max;
    fclose(f);
    if (ok)
        *out = pb_hash64(buf, n);
    free(buf);
    return ok;
}

void bk_record_stop_control(mf_backup *h, const pgc_control *c)
{
    h->ctl_recorded = true;
    h->ctl_checksum_version = c->checksum_version;
    h->ctl_redo_lsn = c->redo_lsn;
    h->ctl_checkpoint_lsn = c->checkpoint_lsn;
    h->ctl_timeline = c->timeline;
}

bool bk_control_follows(const mf_backup *ph, const pgc_control *now, const uint64_t *history,
                        char *why, size_t len)
{
    char a[32], b[32];
    if (!ph->ctl_recorded) {
        snprintf(why, len, "the parent %s recorded no pg_control stop point (an older version "
                 "made it)", ph->id);
        return false;
    }
    if (now->system_id != ph->system_id) {
        snprintf(why, len, "pg_control's system identifier is %" PRIu64 ", the parent's %"
                 PRIu64, now->system_id, ph->system_id);
        return false;
    }
    if (now->checksum_version != ph->ctl_checksum_version) {
        snprintf(why, len, "the data checksum version changed from %u to %u since the parent "
                 "(pg_checksums rewrote the stopped cluster without WAL)",
                 ph->ctl_checksum_version, now->checksum_version);
        return false;
    }
    if (now->timeline != ph->ctl_timeline) {
        snprintf(why, len, "the latest checkpoint is on timeline %u, the parent's stop point "
                 "on %u", now->timeline, ph->ctl_timeline);
        return false;
    }
    if (ph->ctl_history_known && (!history || *history != ph->ctl_history_hash)) {
        snprintf(why, len, "the history of timeline %u %s the parent's (another branch with "
                 "the same timeline number?)", now->timeline,
                 history ? "differs from" : "cannot be read in pg_wal to compare with");
        return false;
    }
    if (now->redo_lsn < ph->ctl_redo_lsn || now->checkpoint_lsn < ph->ctl_checkpoint_lsn) {
        pb_lsn_format(now->redo_lsn, a);
        pb_lsn_format(ph->ctl_redo_lsn, b);
        snprintf(why, len, "the latest checkpoint's redo %s is before the parent's stop point "
                 "%s (the data directory is older than the parent: copied in?)", a, b);
        return false;
    }
    return true;
}

void bk_set_read_why(mf_backup *h, const char *why)
{
    /* info --json prints it as a string: no quote or backslash inside. */
    size_t i = 0;
    for (; why && why[i] && i + 1 < sizeof(h->read_why); i++)
        h->read_why[i] = why[i] == '"' || why[i] == '\\' || (unsigned char)why[i] < 0x20
                         ? '\'' : why[i];
    h->read_why[i] = '\0';
}
