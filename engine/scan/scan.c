/*
 * engine/scan/scan.c — the O_DIRECT stripe scanner (see scan.h).
 *
 * Why it looks like this: O_DIRECT keeps the backup out of the page cache, but it
 * also switches kernel readahead off, so throughput depends on issuing large
 * (stripe-sized) requests and keeping several in flight. io_uring does that from
 * one thread; pread is the fallback when io_uring is unavailable (disabled by
 * sysctl or seccomp). Chunks complete out of order but are delivered in file order,
 * so callers can treat the scan as a sequential stream.
 *
 * Memory is fixed at scan_open: scan_buffers() buffers of read_size bytes. A chunk's
 * buffer is reused only after the callback for that chunk returned.
 *
 * How many of those buffers are in flight at a time is the controller's choice
 * (scan_ctl.c), fed with every completion's latency and the device's read counters
 * (scan_devstat.c); pinned options make it a constant (docs/DESIGN.md, "Polite I/O").
 */
#include "engine/scan/scan_queue_internal.h"

#include <assert.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_BYTES_MAX ((size_t)1 << 30) /* a sanity bound, not a tuning knob */

#define METHOD_URING "io_uring+O_DIRECT"
#define METHOD_PREAD "pread+O_DIRECT"
#define METHOD_BUFFERED "buffered+fadvise"

/* ------------------------------------------------------------------ public */

/* Register the read buffers with the ring so the kernel pins them once, not on every
 * request. Optional: it can fail under RLIMIT_MEMLOCK, and plain reads still work. One
 * buffer spans every slot: a larger request reads into consecutive slots. */
static bool register_buffers(scanner *s)
{
    struct iovec iov = {s->bufs, s->read_size * s->queue_depth};
    int rc = io_uring_register_buffers(&s->ring, &iov, 1);
    if (rc != 0)
        pb_debug("scan: io_uring buffer registration failed (%s); plain reads", strerror(-rc));
    return rc == 0;
}

/* On an md array, also watch its member disks (scan_members.c): reads that bypass the
 * array are others' too. stat_path is the array's stat file. */
static void open_members(scanner *s, const char *stat_path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", stat_path);
    char *slash = strrchr(dir, '/');
    scan_members *m = slash ? malloc(sizeof(*m)) : NULL;
    if (!m)
        return;
    *slash = '\0';
    if (scan_device_members(dir, m) == 0) {
        for (size_t i = 0; i < m->n; i++) {
            int fd = open(m->stat[i], O_RDONLY | O_CLOEXEC);
            if (fd >= 0)
                s->member_fd[s->nmembers++] = fd;
        }
        s->md_chunk = m->chunk_bytes;
        pb_debug("scan: watching %zu member disks of %s too", s->nmembers, dir);
    }
    free(m);
}

/* pread keeps one request in flight whatever the depth: the controller's ceiling is 1
 * there, and only its request sizes and pauses while others read apply. */
static void start_controller(scanner *s, const scan_opts *o)
{
    size_t max_io = 0;
    if (o->adaptive && o->device_stat) {
        s->stat_fd = open(o->device_stat, O_RDONLY | O_CLOEXEC);
    } else if (o->adaptive && o->device_path) {
        char stat_path[PATH_MAX];
        if (scan_device_stat(o->device_path, stat_path, sizeof(stat_path), &max_io) == 0)
            s->stat_fd = open(stat_path, O_RDONLY | O_CLOEXEC);
        if (s->stat_fd >= 0)
            open_members(s, stat_path);
        if (s->stat_fd < 0)
            pb_detail("scan: no block device found under %s: not watching others' reads",
                    o->device_path);
        else
            pb_debug("scan: watching %s for others' reads", stat_path);
    }
    /* Our reads besides the scan's own, taken out of the others' (scan_devstat.c); an md
     * array's member counters are summed apart, so only a plain device. */
    if (s->stat_fd >= 0 && s->nmembers == 0)
        s->io_fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
    s->dev_max_io = max_io ? max_io : s->read_size;
    scan_ctl_init(&s->ctl, s->ring_ok ? o->queue_depth : 1, !o->adaptive);
    s->ctl.full_bytes = s->read_size / 2;
    /* Larger requests (io_uring only) up to SCAN_REQUEST_MAX, as dd's best sizes on one
     * virtio disk were 512 KiB to 2 MiB (docs/DESIGN.md, "Polite I/O"). */
    unsigned mult = 1;
    while (s->ring_ok && mult * 2 * s->read_size <= SCAN_REQUEST_MAX)
        mult *= 2;
    if (o->budget > 0)
        s->ctl.budget = s->ctl.st.budget = o->budget;
    scan_ctl_sizes(&s->ctl, s->read_size, mult);
    s->ctl.st.device_watched = s->stat_fd >= 0;
    scan_watch_start(s);
    s->ctl.st.member_disks_watched = (unsigned)s->nmembers;
}

/* Pinned reads get one buffer more than their depth: with only as many as in flight, the
 * next read waits for the last chunk's checks (at one in flight: every read, 0.86 s of a
 * 2 s scan); adaptive reads hold their ceiling's and start at one in flight. */
unsigned scan_buffers(const scan_opts *o)
{
    unsigned depth = o->queue_depth ? o->queue_depth : SCAN_OPTS_DEPTH_DEFAULT;
    return depth + (o->adaptive ? 0u : 1u);
}

int scan_open(scanner **out, const scan_opts *opts, pb_error *err)
{
    *out = NULL;
    scan_opts o = opts ? *opts : (scan_opts)SCAN_OPTS_INIT;
    if (o.queue_depth == 0)
        o.queue_depth = SCAN_OPTS_DEPTH_DEFAULT;
    if (o.read_size == 0) {
        char why[256];
        o.read_size = scan_default_read_size(".", why, sizeof(why));
        pb_debug("scan: read size %zu: %s", o.read_size, why);
    }
    /* Every chunk but a file's last must hold whole pages: the backup checks, hashes and
     * ships pages chunk by chunk, and a page split between two chunks would be neither. */
    unsigned slots = scan_buffers(&o);
    if (o.read_size % PB_PAGE_SIZE != 0 || o.read_size > UINT_MAX / 2 ||
        slots > QUEUE_DEPTH_MAX || o.read_size * slots > BUFFER_BYTES_MAX)
        return pb_fail(err, PB_EINVAL,
                       "scan: read size %zu (must be a multiple of the %u-byte page) x queue "
                       "depth %u (at most %u) exceeds the limits",
                       o.read_size, PB_PAGE_SIZE, o.queue_depth,
                       QUEUE_DEPTH_MAX - (slots - o.queue_depth));

    scanner *s = calloc(1, sizeof(*s));
    if (!s)
        return pb_fail(err, PB_ENOMEM, "scan: allocating scanner");
    s->read_size = o.read_size;
    s->queue_depth = slots;
    s->direct = o.direct;
    s->ioprio = o.ioprio;
    s->stat_fd = -1;
    s->io_fd = -1;
    for (size_t i = 0; i < SCAN_MEMBERS_MAX; i++)
        s->member_fd[i] = -1;
    void *mem = NULL;
    if (posix_memalign(&mem, PB_ALIGN, o.read_size * slots) != 0) {
        free(s);
        return pb_fail(err, PB_ENOMEM, "scan: allocating %u x %zu bytes of read buffers",
                       slots, o.read_size);
    }
    s->bufs = mem;
    if (o.use_uring) {
        int rc = io_uring_queue_init(slots, &s->ring, 0);
        if (rc == 0) {
            s->ring_ok = true;
            s->fixed = register_buffers(s);
        } else
            pb_detail("scan: io_uring unavailable (%s); using pread", strerror(-rc));
    }
    s->method = !s->direct ? METHOD_BUFFERED : s->ring_ok ? METHOD_URING : METHOD_PREAD;
    start_controller(s, &o);
    *out = s;
    return 0;
}

void scan_free(scanner *s)
{
    if (!s)
        return;
    scan_check_stop(&s->check);
    scan_carry_drop(s);
    free(s->next_path);
    if (s->ring_ok)
        io_uring_queue_exit(&s->ring);
    if (s->stat_fd >= 0)
        close(s->stat_fd);
    if (s->io_fd >= 0)
        close(s->io_fd);
    for (size_t i = 0; i < s->nmembers; i++)
        close(s->member_fd[i]);
    free(s->bufs);
    free(s);
}

int scan_set_next(scanner *s, const char *path, pb_error *err)
{
    free(s->next_path);
    s->next_path = NULL;
    if (path && !(s->next_path = strdup(path)))
        return pb_fail(err, PB_ENOMEM, "scan: naming %s as the next file", path);
    return 0;
}

/* Open path for scan_file: the carried read's file when it is path's (the queue takes its
 * first chunk from the carry). Any other carried read is dropped, unless path is empty:
 * nothing is read there, and the read ahead is for a file after it (backup.c names the
 * next file with something to read). */
static int open_scanned(scanner *s, const char *path, scan_fd *f, pb_error *err)
{
    if (s->carry.ready && strcmp(s->carry.path, path) == 0) {
        *f = s->carry.f;
        return 0;
    }
    int rc = scan_open_fd(s, path, true, f, err);
    if (rc != 0 || f->size > 0)
        scan_carry_drop(s);
    return rc;
}

int scan_file(scanner *s, const char *path, scan_chunk_cb cb, void *ctx, uint64_t *size_out,
              pb_error *err)
{
    uint64_t delivered = 0;
    scan_fd f;
    int rc = open_scanned(s, path, &f, err);
    if (rc != 0)
        goto out;
    s->method = !f.direct ? METHOD_BUFFERED : s->ring_ok ? METHOD_URING : METHOD_PREAD;
    rc = scan_queue_read(s, path, &f, cb, ctx, &delivered, err);
    close(f.fd);
out:
    if (size_out)
        *size_out = delivered;
    return rc;
}

int scan_read_spans(scanner *s, const char *path, const scan_span *spans, size_t n,
                    scan_chunk_cb cb, void *ctx, uint64_t *size_at_open, pb_error *err)
{
    scan_carry_drop(s); /* read whole files only: a ranged read opens its own */
    for (size_t i = 0; i < n; i++)
        if (spans[i].len == 0 || spans[i].len > s->read_size || spans[i].off % PB_PAGE_SIZE ||
            (i && spans[i].off < spans[i - 1].off + spans[i - 1].len))
            return pb_fail(err, PB_EINVAL, "%s: read request %zu is not page-aligned, in "
                           "order and within the read size", path, i);
    scan_fd f;
    int rc = scan_open_fd(s, path, true, &f, err);
    if (rc != 0)
        return rc;
    *size_at_open = f.size;
    f.spans = spans; /* n == 0: nothing to read (NULL spans would be the whole file) */
    while (f.nspans < n && spans[f.nspans].off < f.size)
        f.nspans++;
    s->method = !f.direct ? METHOD_BUFFERED : s->ring_ok ? METHOD_URING : METHOD_PREAD;
    uint64_t delivered = 0;
    if (n)
        rc = scan_queue_read(s, path, &f, cb, ctx, &delivered, err);
    close(f.fd);
    return rc;
}

int scan_reread(scanner *s, const char *path, uint64_t offset, void *buf, size_t len,
                pb_error *err)
{
    scan_fd f;
    uint8_t *bounce = NULL;
    int rc = scan_open_fd(s, path, false, &f, err);
    if (rc != 0)
        return rc;
    /* Read the aligned range covering [offset, offset+len) into a bounce buffer: the
     * caller's buffer, offset and length need not be aligned. */
    uint64_t start = offset / PB_ALIGN * PB_ALIGN;
    size_t lead = (size_t)(offset - start);
    size_t want = lead + len;
    size_t cap = scan_round_up(want, PB_ALIGN);
    void *mem = NULL;
    if (posix_memalign(&mem, PB_ALIGN, cap ? cap : PB_ALIGN) != 0) {
        rc = pb_fail(err, PB_ENOMEM, "re-reading %s: allocating %zu bytes", path, cap);
        goto out;
    }
    bounce = mem;
    double t0 = pb_now();
    ssize_t got = scan_read_rest(&f, bounce, cap, start, 0, want);
    s->reread_wait_s += pb_now() - t0; /* apart: this runs on the check thread */
    if (got < 0) {
        errno = (int)-got;
        rc = pb_fail_errno(err, PB_EIO, "re-reading %s at offset %llu", path,
                           (unsigned long long)offset);
        goto out;
    }
    if ((size_t)got < want) {
        rc = pb_fail(err, PB_EIO, "re-reading %s: %zu bytes at offset %llu run past its end",
                     path, len, (unsigned long long)offset);
        goto out;
    }
    memcpy(buf, bounce + lead, len);
    s->reread_bytes += len;
    if (!f.direct)
        (void)posix_fadvise(f.fd, (off_t)start, (off_t)cap, POSIX_FADV_DONTNEED);
out:
    free(bounce);
    close(f.fd);
    return rc;
}

const char *scan_method(const scanner *s) { return s->method; }

uint64_t scan_bytes_read(const scanner *s) { return s->bytes_read + s->reread_bytes; }

size_t scan_read_size(const scanner *s) { return s->read_size; }

void scan_get_io_stats(const scanner *s, scan_io_stats *out)
{
    *out = s->ctl.st;
    out->own_device_reads = s->own_dev_reads;
    out->wait_seconds = s->wait_s + s->reread_wait_s;
    out->chunks = s->check.chunks;
    out->overlapped = s->check.overlapped;
    out->paused_chunks = s->check.paused;
    out->check_waits = s->check_waits;
    out->check_wait_seconds = s->check_wait_s;
    out->check_seconds = s->check.busy_s;
    out->check_cpu_seconds = s->check.cpu_s;
}
