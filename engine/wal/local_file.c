/*
 * engine/wal/local_file.c — WAL files in the local file system: reading the file
 * archive_command hands over, writing the file restore_command asks for (and spool
 * entries), and the check of the first page of a segment archive_command hands over.
 * Whole files in memory: a WAL file is at most 1 GiB, usually 16 MiB.
 */
#include "engine/wal/wal.h"
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

/* The segment name of a WAL file name: a plain segment, or one ending in ".partial"
 * (a promoted standby's last segment of the old timeline, its full size). History and
 * .backup files carry no long header: false. */
static bool segment_of(const char *name, char seg[25])
{
    size_t n = strlen(name);
    if (n != 24 && !(n == 32 && !strcmp(name + 24, ".partial")))
        return false;
    memcpy(seg, name, 24);
    seg[24] = '\0';
    return strspn(seg, "0123456789ABCDEF") == 24;
}

/* The page magic of PostgreSQL 9 and later, the page address where the name puts the
 * segment (a recycled segment left in pg_wal under a future name still holds older WAL;
 * stored, it would block archiving of the real one for good), the timeline and the sizes
 * (arch_check_first_page, which archive-get applies too). */
int arch_check_local_segment(const char *path, bool *segment, uint64_t *sysid, pb_error *err)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    char seg[25];
    *segment = segment_of(name, seg);
    if (!*segment)
        return 0;
    uint8_t head[ARCH_LONG_PHD];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot read WAL file %s", path);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    ssize_t n = pread(fd, head, sizeof(head), 0);
    close(fd);
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "WAL file %s", path);
    int rc = 0;
    if (n != (ssize_t)sizeof(head) || pb_get_u16(head) < 0xD000) /* PostgreSQL >= 9 */
        rc = pb_fail(err, PB_EINVAL, "%s does not look like a WAL segment (page magic "
                     "0x%04X, expected a PostgreSQL WAL page magic 0xD0xx or above)", what,
                     n >= 2 ? pb_get_u16(head) : 0);
    if (rc == 0 && arch_check_first_page(head, (uint64_t)st.st_size, seg, what, err))
        rc = PB_EINVAL;
    if (rc == 0)
        *sysid = pb_get_u64(head + 24); /* xlp_sysid */
    return rc;
}
