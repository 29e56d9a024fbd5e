/*
 * engine/storage_posix_clean.c — which temp files and directories in a posix repository
 * are the leftovers of a writer that is gone, and their removal (repo_cleanup,
 * repo_cleanup_key).
 *
 * The proof is the temp file's flock (storage_posix_excl.c, posix_lock_tmp): its writer
 * holds it from creation until the file has its final name, and the kernel drops it when
 * the writer dies. A name is checked again under the flock before it is removed, so a
 * writer that finished between our open and our flock loses nothing. Under backup/ the
 * writer lock is proof enough: only its holder writes there.
 */
#include "engine/storage_posix_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int posix_remove_abandoned(posix_repo *pr, const char *tmp, bool *removed, pb_error *err)
{
    *removed = false;
    int fd = openat(pr->dirfd, tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0; /* finished or removed meanwhile */
        if (errno == EACCES || errno == ELOOP) {
            pb_debug("temp file %s/%s cannot be opened to probe its writer: left alone",
                     pr->root, tmp);
            return 0;
        }
        return pb_fail_errno(err, PB_EIO, "cannot open temp file %s/%s", pr->root, tmp);
    }
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK) /* EWOULDBLOCK: its writer lives */
            rc = pb_fail_errno(err, PB_EIO, "cannot probe the lock of temp file %s/%s",
                               pr->root, tmp);
    } else if (posix_same_file(pr, tmp, fd)) {
        /* Checked under the flock: a writer that finished between our open and our
         * flock removed the name, so what we hold may be its object's inode now. */
        if (unlinkat(pr->dirfd, tmp, 0) == 0)
            *removed = true;
        else if (errno != ENOENT)
            rc = pb_fail_errno(err, PB_EIO, "cannot remove temp file %s/%s", pr->root, tmp);
    }
    close(fd);
    return rc;
}

int posix_cleanup_key(void *impl, const char *key, pb_error *err)
{
    posix_repo *pr = impl;
    char parent[PATH_MAX], mark[PATH_MAX], tmp[PATH_MAX];
    posix_parent_of(key, parent, sizeof(parent));
    const char *base = strrchr(key, '/');
    int mlen = snprintf(mark, sizeof(mark), "%s" POSIX_TMP_MARK, base ? base + 1 : key);
    int dfd = openat(pr->dirfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : pb_fail_errno(err, PB_EIO, "cannot open directory %s/%s",
                                                   pr->root, parent);
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return pb_fail_errno(err, PB_EIO, "cannot read directory %s/%s", pr->root, parent);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strncmp(de->d_name, mark, (size_t)mlen) != 0 ||
            snprintf(tmp, sizeof(tmp), "%s/%s", parent, de->d_name) >= (int)sizeof(tmp))
            continue;
        bool removed = false;
        const char *rel = strcmp(parent, ".") == 0 ? de->d_name : tmp;
        rc = posix_remove_abandoned(pr, rel, &removed, err);
        if (removed)
            pb_info("removed temp file %s/%s of a writer that is gone", pr->root, rel);
    }
    closedir(d);
    return rc;
}

/* Temp files of writers that are gone. With the writer lock held (locked), every temp
 * file under backup/ is one, whatever its flock says: only the lock holder writes there
 * (and a writer on another host may not share our flocks). Everywhere else (wal/, the
 * lock and identity files: written without the writer lock) a temp file goes only when
 * its flock is free, i.e. its writer is gone. */
static int remove_stale(posix_repo *pr, const char *tmp, bool locked, pb_error *err)
{
    bool removed = false;
    int rc = 0;
    if (locked && strncmp(tmp, "backup/", 7) == 0) {
        if (unlinkat(pr->dirfd, tmp, 0) == 0)
            removed = true;
        else if (errno != ENOENT)
            rc = pb_fail_errno(err, PB_EIO, "cannot remove stale temp file %s/%s", pr->root,
                               tmp);
    } else {
        rc = posix_remove_abandoned(pr, tmp, &removed, err);
    }
    if (!removed)
        return rc;
    pb_info("removed stale temp file %s/%s", pr->root, tmp);
    if (strncmp(tmp, "backup/", 7) == 0) {
        char parent[PATH_MAX];
        posix_parent_of(tmp, parent, sizeof(parent));
        posix_prune_backup_dirs(pr, parent);
    }
    return rc;
}

/* Empty directories beneath backup/ (not backup/ itself): what a writer killed between
 * a mkdir and its first file, or a delete killed before its prune, left; a listing never
 * shows them, so no object rule finds them. Only with the writer lock held: only its
 * holder creates directories there. Depth is bounded by the key layout. */
static void prune_empty_dirs(posix_repo *pr, const char *dir, int depth)
{
    int fd = openat(pr->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    char path[PATH_MAX];
    while (depth < 8 && (de = readdir(d))) {
        struct stat st;
        if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) || !strcmp(de->d_name, ".") ||
            !strcmp(de->d_name, "..") ||
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
            continue;
        if (de->d_type == DT_DIR ||
            (fstatat(pr->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)))
            prune_empty_dirs(pr, path, depth + 1);
    }
    closedir(d);
    if (depth > 0 && unlinkat(pr->dirfd, dir, AT_REMOVEDIR) == 0)
        pb_info("removed empty directory %s/%s", pr->root, dir);
}

typedef struct clean_ctx {
    bool locked;
    pb_error *err;
} clean_ctx;

static int remove_one(posix_repo *pr, const char *tmp, void *vctx)
{
    clean_ctx *c = vctx;
    return remove_stale(pr, tmp, c->locked, c->err);
}

int posix_cleanup(void *impl, bool locked, pb_error *err)
{
    posix_repo *pr = impl;
    clean_ctx c = {locked, err};
    int rc = posix_walk_tmp(pr, remove_one, &c, err);
    if (rc == 0 && locked)
        prune_empty_dirs(pr, "backup", 0);
    return rc;
}
