/*
 * engine/storage/posix_fs.c — the file-system steps the posix driver's files share:
 * whole writes, a directory fsynced, the flock that proves a temp file's writer alive,
 * the flush count, and emptied backup directories pruned. Below posix.c, posix_write.c,
 * posix_excl.c and posix_defer.c, so none of them needs another for these.
 */
#include "engine/storage/posix_internal.h"
#include "common/fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers ---------------------------------------------------------- */

int posix_write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Splits "a/b/c" into the directory part "a/b" (or "." for a top-level key). */
void posix_parent_of(const char *key, char *out, size_t cap)
{
    const char *slash = strrchr(key, '/');
    if (!slash) {
        snprintf(out, cap, ".");
        return;
    }
    snprintf(out, cap, "%.*s", (int)(slash - key), key);
}

int posix_fsync_dir(posix_repo *pr, const char *dir, pb_error *err)
{
    int fd = openat(pr->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open directory %s/%s to fsync it", pr->root,
                             dir);
    int rc = 0;
    posix_count_flush(pr);
    if (fsync(fd) < 0 && errno != EINVAL)
        rc = pb_fail_errno(err, PB_EIO, "fsync of directory %s/%s failed", pr->root, dir);
    close(fd);
    return rc;
}

/* mkdir -p of the directories holding key; each new directory's parent is fsynced so
 * the directory entry survives a crash together with the object written into it. */
/* A removed backup leaves no empty directories behind: remove dir and its parents while
 * empty, up to (not including) "backup". Only the writer-lock holder writes under
 * backup/, so no one can be creating a file in them meanwhile. WAL directories are left
 * alone: archive-push writes there without the lock. */
void posix_prune_backup_dirs(posix_repo *pr, const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    while (strncmp(path, "backup/", 7) == 0 && unlinkat(pr->dirfd, path, AT_REMOVEDIR) == 0) {
        char *slash = strrchr(path, '/');
        *slash = '\0';
    }
}

bool posix_same_file(posix_repo *pr, const char *key, int fd)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(pr->dirfd, key, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* ---- temp files: the flock that proves a writer alive (posix_clean.c) ---------------- */

int posix_lock_tmp(posix_repo *pr, int fd, const char *tmp, pb_error *err)
{
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            return pb_fail_errno(err, PB_EIO, "cannot lock temp file %s/%s", pr->root, tmp);
    /* Between our create and our flock the file was unlocked: a cleaner may have taken
     * it for a dead writer's and removed it. Then the name is gone (or another file's). */
    if (!posix_same_file(pr, tmp, fd))
        return pb_fail(err, PB_ENOENT, "temp file %s/%s was removed as it was created",
                       pr->root, tmp);
    return 0;
}

void posix_count_flush(posix_repo *pr) { atomic_fetch_add(&pr->flushes, 1); }
