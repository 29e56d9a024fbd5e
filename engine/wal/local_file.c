/*
 * engine/wal/local_file.c — WAL files in the local file system: reading the file
 * archive_command hands over, writing the file restore_command asks for (and spool
 * entries). Whole files in memory: a WAL file is at most 1 GiB, usually 16 MiB.
 */
#include "engine/wal/wal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int arch_file_read(const char *path, uint8_t **out, size_t *out_len, pb_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ENOENT : PB_EIO, "cannot open %s",
                             path);
    struct stat st;
    uint8_t *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = pb_fail_errno(err, PB_EIO, "cannot stat %s", path);
        goto out;
    }
    if ((uint64_t)st.st_size > WAL_MAX_RAW) {
        rc = pb_fail(err, PB_EINVAL, "%s is larger than any WAL file can be", path);
        goto out;
    }
    size_t size = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(size ? size : 1))) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? pb_fail_errno(err, PB_EIO, "cannot read %s", path)
                       : pb_fail(err, PB_EIO, "%s shrank while being read", path);
            goto out;
        }
        got += (size_t)n;
    }
    *out = buf;
    *out_len = size;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* PostgreSQL must never see a partial WAL file: temp file, fsync, rename, fsync dir.
 * durable == false (spool files, which are verified before use and cheap to fetch again)
 * skips the fsyncs. */
int arch_file_write_atomic(const char *dest, const uint8_t *data, size_t len, bool durable,
                           pb_error *err)
{
    char tmp[PATH_MAX], dir[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.pbtmp.%ld", dest, (long)getpid()) >= (int)sizeof(tmp))
        return pb_fail(err, PB_EINVAL, "destination path too long: %s", dest);
    const char *slash = strrchr(dest, '/');
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - dest) + (slash == dest) : 1,
             slash ? dest : ".");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create %s", tmp);
    int rc = 0;
    if (write_all(fd, data, len) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", tmp);
    else if (durable && fsync(fd) < 0)
        rc = pb_fail_errno(err, PB_EIO, "fsync of %s failed", tmp);
    if (close(fd) < 0 && !rc)
        rc = pb_fail_errno(err, PB_EIO, "close of %s failed", tmp);
    if (!rc && rename(tmp, dest) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot rename %s to %s", tmp, dest);
    if (rc) {
        unlink(tmp);
        return rc;
    }
    if (!durable)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open directory %s to fsync it", dir);
    if (fsync(dfd) < 0 && errno != EINVAL)
        rc = pb_fail_errno(err, PB_EIO, "fsync of directory %s failed", dir);
    close(dfd);
    return rc;
}
