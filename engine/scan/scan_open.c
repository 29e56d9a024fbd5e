/*
 * engine/scan/scan_open.c — opening the files the scanner reads: O_DIRECT when the file
 * system takes it, and the next file's read ahead (the carry). Below both scan.c, which
 * opens the file it is asked for, and scan_queue.c, which opens the next one to read its
 * first chunk ahead: neither needs the other for it.
 */
#include "engine/scan/scan_queue_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ opening */

static int open_flags(int flags, const char *path)
{
    int fd = open(path, flags);
    if (fd < 0 && errno == EPERM && (flags & O_NOATIME))
        fd = open(path, flags & ~O_NOATIME); /* O_NOATIME needs ownership or CAP_FOWNER */
    return fd;
}

/* Open path for reading, O_DIRECT when wanted and possible. A file system that
 * refuses O_DIRECT (EINVAL: tmpfs before Linux 6.6, ramfs, some FUSE) gets buffered
 * reads; the caller drops what it read from the cache with fadvise. */
int scan_open_fd(scanner *s, const char *path, bool warn, scan_fd *out, pb_error *err)
{
    const int base = O_RDONLY | O_CLOEXEC | O_NOATIME;
    out->fd = -1;
    out->direct = false;
    out->spans = NULL;
    out->nspans = 0;
    if (s->direct) {
        out->fd = open_flags(base | O_DIRECT, path);
        if (out->fd >= 0) {
            out->direct = true;
        } else if (errno == EINVAL) {
            if (warn && !s->warned) {
                pb_warn("%s: O_DIRECT refused by the file system (EINVAL); reading buffered "
                        "and dropping what was read from the page cache",
                        path);
                s->warned = true;
            }
        } else {
            goto failed;
        }
    }
    if (out->fd < 0)
        out->fd = open_flags(base, path);
    if (out->fd < 0)
        goto failed;

    struct stat st;
    if (fstat(out->fd, &st) != 0) {
        int rc = pb_fail_errno(err, PB_EIO, "fstat %s", path);
        close(out->fd);
        out->fd = -1;
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(out->fd);
        out->fd = -1;
        return pb_fail(err, PB_EINVAL, "%s: not a regular file", path);
    }
    out->size = (uint64_t)st.st_size;
    return 0;

failed:
    if (errno == ENOENT)
        return pb_fail_errno(err, PB_ENOENT, "open %s", path);
    return pb_fail_errno(err, PB_EIO, "open %s", path);
}

/* ------------------------------------------------------------------ reading ahead */

bool scan_open_next(scanner *s, scan_fd *f)
{
    pb_error quiet = PB_ERROR_INIT;
    if (!s->next_path || scan_open_fd(s, s->next_path, false, f, &quiet) != 0)
        return false;
    if (f->direct && f->size > 0)
        return true;
    close(f->fd);
    f->fd = -1;
    return false;
}

void scan_carry_drop(scanner *s)
{
    if (s->carry.ready)
        close(s->carry.f.fd);
    free(s->carry.path);
    memset(&s->carry, 0, sizeof(s->carry));
}
