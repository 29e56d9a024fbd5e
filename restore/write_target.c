/*
 * restore/write_target.c — how rebuilt bytes reach the target's files. A relation file
 * is opened with O_DIRECT (a delta restore's, which reads what the target holds, is not):
 * on this project's VMs a buffered restore spent 0.1-0.8 s of system time per 320 MiB
 * copying pages into freshly allocated page-cache memory, the same run varying 5x with
 * how the host had taken that memory back (docs/BENCHMARKS.md, "A restore writes past the
 * page cache"), and a restore that goes through the page cache evicts what the host's other
 * work had cached.
 * Buffers are RB_IO_ALIGN-aligned and relation writes are whole pages at page offsets.
 * Where the filesystem refuses O_DIRECT (tmpfs on older kernels, a device whose
 * alignment is coarser) the file is written buffered instead, and so is a file whose
 * pages come backup by backup from several backups (restore/rebuild.c): an
 * incremental's scattered pages are 8 KiB writes, each a round trip to the device when
 * direct. rs_stats counts both.
 */
#include "restore/rebuild_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint8_t *rb_io_alloc(size_t len)
{
    void *p = NULL;
    return posix_memalign(&p, RB_IO_ALIGN, len ? len : 1) == 0 ? p : NULL;
}

bool rb_write_buffered(rs_ctx *ctx, int fd)
{
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fl < 0 || !(fl & O_DIRECT) || fcntl(fd, F_SETFL, fl & ~O_DIRECT) != 0)
        return false;
    ctx->stats->direct_fallbacks++;
    return true;
}

static int write_all(rs_ctx *ctx, int fd, const mf_file *f, uint64_t off, const uint8_t *data,
                     size_t len, pb_error *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINVAL && rb_write_buffered(ctx, fd)) /* refused direct */
            continue;
        if (n < 0)
            return pb_fail_errno(err, PB_EIO, "writing %s/%s at offset %llu", ctx->target_dir,
                                 f->path, (unsigned long long)(off + done));
        done += (size_t)n;
    }
    ctx->stats->pages_written += len / PB_PAGE_SIZE;
    ctx->stats->bytes_written += len;
    return 0;
}

/* Delta: what the target holds already is read once, and only the runs of pages that
 * differ from it are written (len <= PACK_MAX_FRAME_RAW, the size of ctx->existing). */
static int write_changed(rs_ctx *ctx, int fd, const mf_file *f, uint64_t off,
                         const uint8_t *data, size_t len, pb_error *err)
{
    ssize_t got = pread(fd, ctx->existing, len, (off_t)off);
    size_t have = got > 0 ? (size_t)got : 0, start = 0;
    bool in_run = false;
    for (size_t at = 0;;) {
        size_t n = len - at < PB_PAGE_SIZE ? len - at : PB_PAGE_SIZE;
        bool end = at >= len;
        if (!end && !(at + n <= have && memcmp(ctx->existing + at, data + at, n) == 0)) {
            start = in_run ? start : at;
            in_run = true;
            at += n;
            continue;
        }
        if (in_run) {
            int rc = write_all(ctx, fd, f, off + start, data + start, at - start, err);
            if (rc)
                return rc;
            in_run = false;
        }
        if (end)
            return 0;
        ctx->stats->pages_skipped += n / PB_PAGE_SIZE;
        at += n;
    }
}

int rb_write_span(rs_ctx *ctx, int fd, const mf_file *f, uint64_t off, const uint8_t *data,
                  size_t len, pb_error *err)
{
    if (ctx->sink)
        return ctx->sink(ctx->sink_ctx, f, off, data, len, err);
    if (fd < 0)
        return 0;
    if (ctx->delta && len <= PACK_MAX_FRAME_RAW)
        return write_changed(ctx, fd, f, off, data, len, err);
    return write_all(ctx, fd, f, off, data, len, err);
}

int rb_open_target(rs_ctx *ctx, const mf_file *f, int *fd, pb_error *err)
{
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
    if (ctx->delta)
        flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
    else
        flags |= O_TRUNC;
    if (f->kind == MF_REL && !ctx->delta)
        flags |= O_DIRECT;
    int dfd = -1;
    const char *base = NULL;
    int rc = rs_target_parent(ctx->target, f->path, 0, &dfd, &base, err);
    for (int replaced = 0; rc == 0;) {
        *fd = openat(dfd, base, flags, 0600);
        if (*fd >= 0) {
            if (flags & O_DIRECT)
                ctx->stats->files_direct++;
            break;
        }
        if (errno == EINVAL && (flags & O_DIRECT)) { /* refused by the filesystem */
            flags &= ~O_DIRECT;
            ctx->stats->direct_fallbacks++;
            continue;
        }
        if (replaced || !ctx->delta || (errno != ELOOP && errno != EISDIR)) {
            rc = pb_fail_errno(err, PB_EIO, "cannot open %s/%s for restore", ctx->target_dir,
                               f->path);
            break;
        }
        /* A delta restore replaces a link or directory standing where the file belongs
         * (the link, never what it points to). */
        pb_warn("%s/%s is a link or directory; the backup has a file there: replaced",
                ctx->target_dir, f->path);
        char shown[8192];
        snprintf(shown, sizeof(shown), "%s/%s", ctx->target_dir, f->path);
        rc = rs_remove_at(dfd, base, shown, err);
        replaced = 1;
    }
    if (dfd >= 0)
        close(dfd);
    return rc;
}
