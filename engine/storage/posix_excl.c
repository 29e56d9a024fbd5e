/*
 * engine/storage/posix_excl.c — exclusive creation in the posix driver: create-if-absent
 * objects (archive-push of a WAL segment that a racing pusher may be writing too) and
 * the writer lock file.
 *
 * Why link(2): rename(2) replaces what is there, so two racing writers would both
 * "succeed" and the second would silently overwrite the first. linkat(2) of the
 * complete, durable temp file onto the final name fails with EEXIST when the name
 * exists, so exactly one writer wins and readers never see a partial object.
 *
 * The lock file is flock'ed before it gets its name (the flock belongs to the inode,
 * which the link keeps), so there is no moment at which the lock exists unlocked and a
 * prober could take it for the debris of a dead writer.
 *
 * The writer lock is never flushed (no fdatasync, no directory fsync, on creation,
 * renewal or removal): it guards running processes, and after a power loss none runs.
 * Whatever the lock file holds after one (absent, empty, torn, or an old holder's text)
 * is judged stale by storage_lock.c: unreadable and unflock'ed, or naming a boot id
 * this host no longer has. Objects created here without hold_fd (archive-push) stay
 * durable: data and name are synced before success is returned.
 *
 * Temp files: every writer of the driver holds a flock on its temp file from creation
 * until the file has its final name (or is removed), and the kernel drops it when the
 * writer dies, however it dies. So a temp file whose flock we obtain is proof that its
 * writer is gone, on this host or (NFSv4 locks) another; no pid or age guess is needed.
 * That is what lets archive-push, which runs without the writer lock, remove what a
 * killed push of the same segment left, while a concurrent push of it goes on (the
 * removal is in posix_clean.c).
 */
#include "engine/storage/posix_internal.h"

#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int posix_put_new(void *impl, const char *key, const void *data, size_t len, int *hold_fd,
                  pb_error *err)
{
    posix_repo *pr = impl;
    char tmp[PATH_MAX];
    int fd = -1;
    if (hold_fd)
        *hold_fd = -1;
    int rc = posix_open_tmp(pr, key, tmp, sizeof(tmp), &fd, err);
    if (rc)
        return rc;
    rc = posix_write_paced(pr, fd, tmp, data, len, err);
    if (rc == 0 && !hold_fd && (posix_count_flush(pr), fdatasync(fd)) < 0)
        rc = pb_fail_errno(err, PB_EIO, "fdatasync of %s/%s failed", pr->root, tmp);
    else if (rc == 0 && !hold_fd) /* written once, rarely read back here */
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (rc == 0)
        PB_FAULT_POINT("put-new.after-temp-write");
    /* The temp file is flock'ed since posix_open_tmp: for the writer lock (hold_fd) that
     * flock is the lock's, from its first moment under its name. */
    if (rc == 0 && linkat(pr->dirfd, tmp, pr->dirfd, key, 0) < 0)
        rc = errno == EEXIST ? pb_fail(err, PB_EEXIST, "object %s/%s exists already",
                                       pr->root, key)
                             : pb_fail_errno(err, PB_EIO, "cannot link %s/%s to %s", pr->root,
                                             tmp, key);
    if (rc == 0)
        PB_FAULT_POINT("put-new.after-link");
    (void)unlinkat(pr->dirfd, tmp, 0); /* still flock'ed: no cleaner takes it meanwhile */
    if (rc == 0 && !hold_fd) {
        char parent[PATH_MAX];
        posix_parent_of(key, parent, sizeof(parent));
        rc = posix_fsync_dir(pr, parent, err);
    }
    if (rc == 0 && hold_fd) {
        *hold_fd = fd;
        return 0;
    }
    close(fd);
    return rc;
}

int posix_lock_probe(void *impl, const char *key, int *fd, pb_error *err)
{
    posix_repo *pr = impl;
    *fd = -1;
    int f = openat(pr->dirfd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* flock needs no write */
    if (f < 0) {
        if (errno == ENOENT)
            return pb_fail(err, PB_ENOENT, "lock %s/%s does not exist", pr->root, key);
        return pb_fail_errno(err, PB_EIO, "cannot open lock %s/%s", pr->root, key);
    }
    if (flock(f, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(f);
        if (e == EWOULDBLOCK)
            return 0; /* a live process on this host holds it */
        errno = e;
        return pb_fail_errno(err, PB_EIO, "cannot lock %s/%s", pr->root, key);
    }
    if (!posix_same_file(pr, key, f)) {
        /* Replaced or removed between our open and our flock: look again. */
        close(f);
        return pb_fail(err, PB_ENOENT, "lock %s/%s changed while probing it", pr->root, key);
    }
    *fd = f;
    return 0;
}

int posix_lock_rewrite(void *impl, const char *key, int fd, const void *data, size_t len,
                       pb_error *err)
{
    posix_repo *pr = impl;
    if (!posix_same_file(pr, key, fd))
        return pb_fail(err, PB_ESTATE, "writer lock %s/%s was taken over or removed", pr->root,
                       key);
    const unsigned char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, p + done, len - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return pb_fail_errno(err, PB_EIO, "cannot write lock %s/%s", pr->root, key);
        done += (size_t)n;
    }
    if (ftruncate(fd, (off_t)len) < 0) /* not flushed: see the head comment */
        return pb_fail_errno(err, PB_EIO, "cannot write lock %s/%s", pr->root, key);
    return 0;
}
