/*
 * restore/durable.c — a restore reports success only once what it wrote is on stable
 * storage. Each written file is fsync'ed by rebuild.c before it is closed; here the
 * directories that got entries (created, replaced or pruned: all of them are manifest
 * directories, the target, the tablespace directories and their parents) and the
 * files rs_write_recovery and tablespace_map wrote. fsync rather than one syncfs():
 * syncfs covers one file system (tablespaces may sit on others) and, before Linux
 * 5.8, does not report writeback errors; an fsync result names the path at fault.
 * (docs/DESIGN.md rule 8: everything written reaches stable storage first.)
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rs_fsync(int fd, const char *dir, const char *rel, pb_error *err)
{
    if (fsync(fd) == 0)
        return 0;
    return pb_fail_errno(err, PB_EIO, "cannot fsync %s%s%s", dir, rel[0] ? "/" : "", rel);
}

static int sync_dir_path(const char *path, pb_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open directory %s to fsync it", path);
    int rc = rs_fsync(fd, path, "", err);
    close(fd);
    return rc;
}

/* The directory holding path (which the restore may have created). */
static int sync_parent_of(const char *path, pb_error *err)
{
    char copy[4096];
    if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy))
        return pb_fail(err, PB_EINVAL, "path %s is too long", path);
    return sync_dir_path(dirname(copy), err);
}

static int sync_rel_dir(const rs_target *t, const char *rel, pb_error *err)
{
    int fd = -1;
    int rc = rs_target_dir(t, rel, 0, &fd, err);
    if (rc == 0)
        rc = rs_fsync(fd, rs_target_path(t), rel, err);
    if (fd >= 0)
        close(fd);
    return rc;
}

int rs_sync_dirs(const rs_target *t, const mf_manifest *m, pb_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < mf_count(m); i++)
        if (mf_at(m, i)->kind == MF_DIR)
            rc = sync_rel_dir(t, mf_at(m, i)->path, err);
    for (size_t i = 0; rc == 0 && i < rs_target_nlinks(t); i++) {
        rc = rs_fsync(rs_target_link_fd(t, i), rs_target_link_dir(t, i), "", err);
        if (rc == 0)
            rc = sync_parent_of(rs_target_link_dir(t, i), err);
    }
    if (rc == 0)
        rc = rs_fsync(rs_target_fd(t), rs_target_path(t), "", err);
    if (rc == 0)
        rc = sync_parent_of(rs_target_path(t), err);
    return rc;
}

/* A file at the top of the target; absent is fine when optional. */
static int sync_top_file(const rs_target *t, const char *name, bool optional, pb_error *err)
{
    int fd = openat(rs_target_fd(t), name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && optional)
        return 0;
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open %s/%s to fsync it", rs_target_path(t),
                             name);
    int rc = rs_fsync(fd, rs_target_path(t), name, err);
    close(fd);
    return rc;
}

int rs_sync_recovery(const rs_target *t, pb_error *err)
{
    static const struct {
        const char *name;
        bool optional;
    } files[] = {
        {"postgresql.auto.conf", false}, /* where rs_write_recovery puts the settings */
        {"recovery.signal", true},
        {"standby.signal", true},
        {"tablespace_map", true},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(files) / sizeof(files[0]); i++)
        rc = sync_top_file(t, files[i].name, files[i].optional, err);
    if (rc == 0)
        rc = rs_fsync(rs_target_fd(t), rs_target_path(t), "", err);
    return rc;
}
