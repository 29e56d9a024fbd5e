/*
 * engine/scan.c — the O_DIRECT stripe scanner (see scan.h).
 *
 * Why it looks like this: O_DIRECT keeps the backup out of the page cache, but it
 * also switches kernel readahead off, so throughput depends on issuing large
 * (stripe-sized) requests and keeping several in flight. io_uring does that from
 * one thread; pread is the fallback when io_uring is unavailable (disabled by
 * sysctl or seccomp). Chunks complete out of order but are delivered in file order,
 * so callers can treat the scan as a sequential stream.
 *
 * Memory is fixed at scan_open: queue_depth buffers of read_size bytes. A chunk's
 * buffer is reused only after the callback for that chunk returned.
 *
 * How many of those buffers are in flight at a time is the controller's choice
 * (scan_ctl.c), fed with every completion's latency and, every 0.1 s, the device's
 * read counter; pinned options make it a constant (docs/DESIGN.md, "Polite I/O").
 */
#include "engine/scan.h"
#include "engine/scan_ctl_internal.h"
#include "engine/scan_internal.h"

#include <assert.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_DEPTH_MAX 1024u
#define BUFFER_BYTES_MAX ((size_t)1 << 30) /* a sanity bound, not a tuning knob */

#define METHOD_URING "io_uring+O_DIRECT"
#define METHOD_PREAD "pread+O_DIRECT"
#define METHOD_BUFFERED "buffered+fadvise"

struct scanner {
    size_t read_size;
    unsigned queue_depth;
    bool direct;         /* try O_DIRECT */
    bool ring_ok;        /* io_uring initialised */
    bool fixed;          /* bufs registered with the ring (no page pinning per read) */
    bool warned;         /* the buffered-fallback warning was given */
    const char *method;  /* path used by the latest scan (or the one planned) */
    uint8_t *bufs;       /* queue_depth * read_size, PB_ALIGN aligned */
    uint64_t bytes_read;
    int ioprio;          /* put on every io_uring request (0 = the thread's) */
    int stat_fd;         /* the device's /sys/block/<dev>/stat, -1 when not watched */
    size_t dev_max_io;   /* largest request the device takes (queue/max_sectors_kb) */
    uint64_t own_dev_reads; /* device requests our completed reads became */
    double dev_read_at;  /* when stat_fd was last read */
    double wait_s;       /* waiting for reads: completions, preads (bk_stages) */
    scan_ctl ctl;
    double t_sub[QUEUE_DEPTH_MAX]; /* per slot: when its request was submitted */
    struct io_uring ring;
};

/* An open file being scanned. */
typedef struct scan_fd {
    int fd;
    bool direct;   /* opened with O_DIRECT */
    uint64_t size; /* st_size at open: the scan never reads past it */
    const scan_span *spans; /* the requests of a ranged read (scan_ranges.c); NULL: the
                             * whole file in read_size chunks */
    uint64_t nspans;        /* spans that start before size */
} scan_fd;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

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
static int open_for_scan(scanner *s, const char *path, bool warn, scan_fd *out, pb_error *err)
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

/* ------------------------------------------------------------------ reading */

/* Complete a chunk read of want bytes at off into buf (capacity cap, a multiple of
 * PB_ALIGN) of which got bytes are already there. Used after a short or failed
 * asynchronous read and as the whole pread path. A direct read must start aligned,
 * so a continuation re-reads from the last aligned offset. Returns the bytes now in
 * buf (less than want only at end of file: the file shrank) or -errno. */
static ssize_t read_rest(const scan_fd *f, uint8_t *buf, size_t cap, uint64_t off, size_t got,
                         size_t want)
{
    while (got < want) {
        size_t from = f->direct ? got / PB_ALIGN * PB_ALIGN : got;
        ssize_t n = pread(f->fd, buf + from, cap - from, (off_t)(off + from));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (from + (size_t)n <= got)
            break; /* end of file */
        got = from + (size_t)n;
    }
    return (ssize_t)(got < want ? got : want);
}

/* What one chunk of the file needs. */
typedef struct chunk_plan {
    uint64_t off;
    size_t want; /* bytes of file data expected (size at open) */
    size_t cap;  /* request length: want rounded up to PB_ALIGN */
} chunk_plan;

static chunk_plan plan_chunk(const scanner *s, const scan_fd *f, uint64_t index)
{
    chunk_plan p;
    assert(s->read_size % PB_PAGE_SIZE == 0); /* chunks start on page boundaries */
    p.off = f->spans ? f->spans[index].off : index * s->read_size;
    size_t most = f->spans ? f->spans[index].len : s->read_size;
    uint64_t left = f->size - p.off;
    p.want = left < most ? (size_t)left : most;
    p.cap = round_up(p.want, PB_ALIGN);
    return p;
}

/* The requests a scan of f makes (the last may end short at the file's end). */
static uint64_t chunk_count(const scanner *s, const scan_fd *f)
{
    return f->spans ? f->nspans : (f->size + s->read_size - 1) / s->read_size;
}

/* Hand one chunk to the callback; got < want means the file shrank: deliver what is
 * there and stop (*stop). */
static int deliver(scanner *s, const scan_fd *f, const chunk_plan *p, const uint8_t *buf,
                   size_t got, scan_chunk_cb cb, void *ctx, uint64_t *delivered, bool *stop)
{
    *stop = got < p->want;
    if (got == 0)
        return 0;
    int rc = cb(ctx, p->off, buf, got);
    s->bytes_read += got;
    *delivered += got;
    if (!f->direct)
        (void)posix_fadvise(f->fd, (off_t)p->off, (off_t)got, POSIX_FADV_DONTNEED);
    if (rc != 0)
        *stop = true;
    return rc;
}

/* ------------------------------------------------------------------ pacing */

static void log_decision(const scanner *s, scan_ctl_event ev)
{
    if (ev != SCAN_CTL_NONE)
        pb_info("scan: %s", s->ctl.msg);
}

/* Every 0.1 s (the controller decides on that period): the device's completed reads. */
static void watch_device(scanner *s, double now)
{
    char text[512];
    scan_dev_counters dc;
    if (s->stat_fd < 0 || now - s->dev_read_at < 0.1)
        return;
    s->dev_read_at = now;
    ssize_t n = pread(s->stat_fd, text, sizeof(text) - 1, 0);
    if (n <= 0)
        return;
    text[n] = '\0';
    if (scan_ctl_parse_stat(text, &dc) == 0)
        log_decision(s, scan_ctl_device(&s->ctl, now, dc.reads, s->own_dev_reads));
}

/* One completion: its latency and size go to the controller. */
static void note_completion(scanner *s, double submitted, int res)
{
    double now = pb_now();
    /* Each of our requests is at least one device read, split at the device's largest
     * request: counting them so (not our bytes over that size, which undercounts a 512 KiB
     * read on a 4 MiB device 8 times) keeps our own reads out of "others' reads". */
    if (res > 0)
        s->own_dev_reads += ((size_t)res + s->dev_max_io - 1) / s->dev_max_io;
    log_decision(s, scan_ctl_sample(&s->ctl, now, res > 0 ? (size_t)res : 0, now - submitted));
    watch_device(s, now);
}

/* While yielding: sleep the pause the controller asks for before the next request. */
static void pace(scanner *s)
{
    double left;
    while ((left = scan_ctl_pause(&s->ctl, pb_now())) > 0) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static int scan_pread(scanner *s, const char *path, const scan_fd *f, scan_chunk_cb cb, void *ctx,
                      uint64_t *delivered, pb_error *err)
{
    uint64_t nchunks = chunk_count(s, f);
    for (uint64_t i = 0; i < nchunks; i++) {
        chunk_plan p = plan_chunk(s, f, i);
        pace(s);
        double t0 = pb_now();
        ssize_t got = read_rest(f, s->bufs, p.cap, p.off, 0, p.want);
        s->wait_s += pb_now() - t0;
        note_completion(s, t0, got > 0 ? (int)got : 0);
        if (got < 0) {
            errno = (int)-got;
            return pb_fail_errno(err, PB_EIO, "read %s at offset %llu", path,
                                 (unsigned long long)p.off);
        }
        bool stop;
        int rc = deliver(s, f, &p, s->bufs, (size_t)got, cb, ctx, delivered, &stop);
        if (rc != 0 || stop)
            return rc;
    }
    return 0;
}

/* io_uring state of one file scan: chunk i lives in slot i % queue_depth. */
typedef struct uring_scan {
    uint64_t nchunks, submitted, completed_upto;
    unsigned inflight;
    int *res;   /* per slot: cqe result, or INT_MIN while in flight */
} uring_scan;

static int uring_submit_next(scanner *s, const scan_fd *f, uring_scan *u)
{
    chunk_plan p = plan_chunk(s, f, u->submitted);
    unsigned slot = (unsigned)(u->submitted % s->queue_depth);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe)
        return -EBUSY; /* cannot happen: the ring holds queue_depth entries */
    uint8_t *buf = s->bufs + (size_t)slot * s->read_size;
    if (s->fixed)
        io_uring_prep_read_fixed(sqe, f->fd, buf, (unsigned)p.cap, p.off, (int)slot);
    else
        io_uring_prep_read(sqe, f->fd, buf, (unsigned)p.cap, p.off);
    sqe->ioprio = (uint16_t)s->ioprio;
    io_uring_sqe_set_data64(sqe, u->submitted);
    u->res[slot] = INT_MIN;
    s->t_sub[slot] = pb_now();
    u->submitted++;
    u->inflight++;
    return 0;
}

/* Reap one completion into its slot. submit_and_wait also pushes any request a
 * previous io_uring_submit left in the submission queue, so waiting cannot hang. */
static int uring_reap(scanner *s, uring_scan *u)
{
    struct io_uring_cqe *cqe;
    double t0 = 0;
    while (io_uring_peek_cqe(&s->ring, &cqe) != 0) {
        if (t0 == 0)
            t0 = pb_now();
        int rc = io_uring_submit_and_wait(&s->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
            return rc;
    }
    if (t0 != 0)
        s->wait_s += pb_now() - t0;
    uint64_t index = io_uring_cqe_get_data64(cqe);
    unsigned slot = (unsigned)(index % s->queue_depth);
    u->res[slot] = cqe->res;
    io_uring_cqe_seen(&s->ring, cqe);
    u->inflight--;
    note_completion(s, s->t_sub[slot], u->res[slot]);
    return 0;
}

/* Wait for every request still in flight: their buffers and fd must stay valid. */
static void uring_drain(scanner *s, uring_scan *u)
{
    while (u->inflight > 0)
        if (uring_reap(s, u) < 0)
            break;
}

/* Submit up to the controller's depth, within the free slots. While the controller asks
 * for a pause, nothing is submitted; when nothing is in flight either and the caller is
 * about to wait for the next chunk (may_sleep), the pause is slept here, so one is. */
static int uring_fill(scanner *s, const scan_fd *f, uring_scan *u, bool may_sleep)
{
    bool added = false;
    if (u->inflight == 0 && may_sleep)
        pace(s);
    else if (scan_ctl_pause(&s->ctl, pb_now()) > 0)
        return 0;
    while (u->submitted < u->nchunks && u->submitted < u->completed_upto + s->queue_depth &&
           u->inflight < scan_ctl_depth(&s->ctl)) {
        int rc = uring_submit_next(s, f, u);
        if (rc < 0)
            return rc;
        added = true;
    }
    if (!added)
        return 0;
    /* Transient refusals are retried by uring_reap, which submits what is queued. */
    int rc = io_uring_submit(&s->ring);
    return rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY ? rc : 0;
}

static int scan_uring(scanner *s, const char *path, const scan_fd *f, scan_chunk_cb cb, void *ctx,
                      uint64_t *delivered, pb_error *err)
{
    int res[QUEUE_DEPTH_MAX];
    uring_scan u = {.nchunks = chunk_count(s, f), .res = res};
    int rc = 0;

    while (u.completed_upto < u.nchunks) {
        int sys = uring_fill(s, f, &u, true);
        if (sys < 0) {
            rc = pb_fail(err, PB_EIO, "io_uring submit for %s: %s", path, strerror(-sys));
            goto out;
        }
        uint64_t i = u.completed_upto;
        unsigned slot = (unsigned)(i % s->queue_depth);
        assert(u.submitted > i); /* else res[slot] is an older chunk's */
        while (res[slot] == INT_MIN) {
            sys = uring_reap(s, &u);
            if (sys < 0) {
                rc = pb_fail(err, PB_EIO, "io_uring wait for %s: %s", path, strerror(-sys));
                goto out;
            }
        }
        /* Keep the device busy while this chunk is checked and hashed: the next request
         * goes out now, within the controller's depth, and never into a pause. */
        uint64_t before = u.submitted;
        sys = uring_fill(s, f, &u, false);
        s->ctl.st.overlapped += u.submitted - before;
        if (sys < 0) {
            rc = pb_fail(err, PB_EIO, "io_uring submit for %s: %s", path, strerror(-sys));
            goto out;
        }
        chunk_plan p = plan_chunk(s, f, i);
        uint8_t *buf = s->bufs + (size_t)slot * s->read_size;
        /* A failed (EAGAIN, EINTR) or short completion is finished synchronously; only
         * end of file ends the chunk short. */
        size_t have = res[slot] > 0 ? (size_t)res[slot] : 0;
        double t0 = pb_now();
        ssize_t got = read_rest(f, buf, p.cap, p.off, have, p.want);
        s->wait_s += pb_now() - t0;
        if (got < 0) {
            errno = (int)-got;
            rc = pb_fail_errno(err, PB_EIO, "read %s at offset %llu", path,
                               (unsigned long long)p.off);
            goto out;
        }
        bool stop;
        rc = deliver(s, f, &p, buf, (size_t)got, cb, ctx, delivered, &stop);
        u.completed_upto++;
        if (rc != 0 || stop)
            goto out;
    }
out:
    uring_drain(s, &u);
    return rc;
}

/* ------------------------------------------------------------------ public */

/* Register the read buffers with the ring so the kernel pins them once, not on every
 * request. Optional: it can fail under RLIMIT_MEMLOCK, and plain reads still work. */
static bool register_buffers(scanner *s)
{
    struct iovec iov[QUEUE_DEPTH_MAX];
    for (unsigned i = 0; i < s->queue_depth; i++) {
        iov[i].iov_base = s->bufs + (size_t)i * s->read_size;
        iov[i].iov_len = s->read_size;
    }
    int rc = io_uring_register_buffers(&s->ring, iov, s->queue_depth);
    if (rc != 0)
        pb_debug("scan: io_uring buffer registration failed (%s); plain reads", strerror(-rc));
    return rc == 0;
}

/* pread keeps one request in flight whatever the depth: the controller's ceiling is 1
 * there, and only its yielding pauses apply. */
static void start_controller(scanner *s, const scan_opts *o)
{
    size_t max_io = 0;
    if (o->adaptive && o->device_path) {
        char stat_path[PATH_MAX];
        if (scan_device_stat(o->device_path, stat_path, sizeof(stat_path), &max_io) == 0)
            s->stat_fd = open(stat_path, O_RDONLY | O_CLOEXEC);
        if (s->stat_fd < 0)
            pb_info("scan: no block device found under %s: not watching others' reads",
                    o->device_path);
        else
            pb_debug("scan: watching %s for others' reads", stat_path);
    }
    s->dev_max_io = max_io ? max_io : s->read_size;
    scan_ctl_init(&s->ctl, s->ring_ok ? s->queue_depth : 1, !o->adaptive);
    s->ctl.full_bytes = s->read_size / 2;
    s->ctl.st.device_watched = s->stat_fd >= 0;
}

int scan_open(scanner **out, const scan_opts *opts, pb_error *err)
{
    *out = NULL;
    scan_opts o = opts ? *opts : (scan_opts)SCAN_OPTS_INIT;
    if (o.queue_depth == 0)
        o.queue_depth = 4;
    if (o.read_size == 0) {
        char why[256];
        o.read_size = scan_default_read_size(".", why, sizeof(why));
        pb_debug("scan: read size %zu: %s", o.read_size, why);
    }
    /* Every chunk but a file's last must hold whole pages: the backup checks, hashes and
     * ships pages chunk by chunk, and a page split between two chunks would be neither. */
    if (o.read_size % PB_PAGE_SIZE != 0 || o.read_size > UINT_MAX / 2 ||
        o.queue_depth > QUEUE_DEPTH_MAX || o.read_size * o.queue_depth > BUFFER_BYTES_MAX)
        return pb_fail(err, PB_EINVAL,
                       "scan: read size %zu (must be a multiple of the %u-byte page) x queue "
                       "depth %u (at most %u) exceeds the limits",
                       o.read_size, PB_PAGE_SIZE, o.queue_depth, QUEUE_DEPTH_MAX);

    scanner *s = calloc(1, sizeof(*s));
    if (!s)
        return pb_fail(err, PB_ENOMEM, "scan: allocating scanner");
    s->read_size = o.read_size;
    s->queue_depth = o.queue_depth;
    s->direct = o.direct;
    s->ioprio = o.ioprio;
    s->stat_fd = -1;
    void *mem = NULL;
    if (posix_memalign(&mem, PB_ALIGN, o.read_size * o.queue_depth) != 0) {
        free(s);
        return pb_fail(err, PB_ENOMEM, "scan: allocating %u x %zu bytes of read buffers",
                       o.queue_depth, o.read_size);
    }
    s->bufs = mem;
    if (o.use_uring) {
        int rc = io_uring_queue_init(o.queue_depth, &s->ring, 0);
        if (rc == 0) {
            s->ring_ok = true;
            s->fixed = register_buffers(s);
        } else
            pb_info("scan: io_uring unavailable (%s); using pread", strerror(-rc));
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
    if (s->ring_ok)
        io_uring_queue_exit(&s->ring);
    if (s->stat_fd >= 0)
        close(s->stat_fd);
    free(s->bufs);
    free(s);
}

int scan_file(scanner *s, const char *path, scan_chunk_cb cb, void *ctx, uint64_t *size_out,
              pb_error *err)
{
    uint64_t delivered = 0;
    scan_fd f;
    int rc = open_for_scan(s, path, true, &f, err);
    if (rc != 0)
        goto out;
    s->method = !f.direct ? METHOD_BUFFERED : s->ring_ok ? METHOD_URING : METHOD_PREAD;
    if (s->ring_ok)
        rc = scan_uring(s, path, &f, cb, ctx, &delivered, err);
    else
        rc = scan_pread(s, path, &f, cb, ctx, &delivered, err);
    close(f.fd);
out:
    if (size_out)
        *size_out = delivered;
    return rc;
}

int scan_read_spans(scanner *s, const char *path, const scan_span *spans, size_t n,
                    scan_chunk_cb cb, void *ctx, uint64_t *size_at_open, pb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (spans[i].len == 0 || spans[i].len > s->read_size || spans[i].off % PB_PAGE_SIZE ||
            (i && spans[i].off < spans[i - 1].off + spans[i - 1].len))
            return pb_fail(err, PB_EINVAL, "%s: read request %zu is not page-aligned, in "
                           "order and within the read size", path, i);
    scan_fd f;
    int rc = open_for_scan(s, path, true, &f, err);
    if (rc != 0)
        return rc;
    *size_at_open = f.size;
    f.spans = spans; /* n == 0: nothing to read (NULL spans would be the whole file) */
    while (f.nspans < n && spans[f.nspans].off < f.size)
        f.nspans++;
    s->method = !f.direct ? METHOD_BUFFERED : s->ring_ok ? METHOD_URING : METHOD_PREAD;
    uint64_t delivered = 0;
    if (n && s->ring_ok)
        rc = scan_uring(s, path, &f, cb, ctx, &delivered, err);
    else if (n)
        rc = scan_pread(s, path, &f, cb, ctx, &delivered, err);
    close(f.fd);
    return rc;
}

int scan_reread(scanner *s, const char *path, uint64_t offset, void *buf, size_t len,
                pb_error *err)
{
    scan_fd f;
    uint8_t *bounce = NULL;
    int rc = open_for_scan(s, path, false, &f, err);
    if (rc != 0)
        return rc;
    /* Read the aligned range covering [offset, offset+len) into a bounce buffer: the
     * caller's buffer, offset and length need not be aligned. */
    uint64_t start = offset / PB_ALIGN * PB_ALIGN;
    size_t lead = (size_t)(offset - start);
    size_t want = lead + len;
    size_t cap = round_up(want, PB_ALIGN);
    void *mem = NULL;
    if (posix_memalign(&mem, PB_ALIGN, cap ? cap : PB_ALIGN) != 0) {
        rc = pb_fail(err, PB_ENOMEM, "re-reading %s: allocating %zu bytes", path, cap);
        goto out;
    }
    bounce = mem;
    double t0 = pb_now();
    ssize_t got = read_rest(&f, bounce, cap, start, 0, want);
    s->wait_s += pb_now() - t0;
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
    s->bytes_read += len;
    if (!f.direct)
        (void)posix_fadvise(f.fd, (off_t)start, (off_t)cap, POSIX_FADV_DONTNEED);
out:
    free(bounce);
    close(f.fd);
    return rc;
}

const char *scan_method(const scanner *s) { return s->method; }

uint64_t scan_bytes_read(const scanner *s) { return s->bytes_read; }

size_t scan_read_size(const scanner *s) { return s->read_size; }

void scan_get_io_stats(const scanner *s, scan_io_stats *out)
{
    *out = s->ctl.st;
    out->own_device_reads = s->own_dev_reads;
    out->wait_seconds = s->wait_s;
}
