/*
 * engine/scan_queue.c — the scanner's request queue (see scan.c for the why): chunks are
 * planned, submitted within the controller's depth (io_uring; pread keeps one), paced
 * while yielding, and delivered to the callback in file order. While a chunk is checked
 * and hashed the next read is already in flight, so one request in flight keeps the
 * device busy as a plain sequential reader does (docs/DESIGN.md, "Polite I/O").
 */
#include "engine/scan_queue_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ------------------------------------------------------------------ reading */

/* Complete a chunk read of want bytes at off into buf (capacity cap, a multiple of
 * PB_ALIGN) of which got bytes are already there. Used after a short or failed
 * asynchronous read and as the whole pread path. A direct read must start aligned,
 * so a continuation re-reads from the last aligned offset. Returns the bytes now in
 * buf (less than want only at end of file: the file shrank) or -errno. */
ssize_t scan_read_rest(const scan_fd *f, uint8_t *buf, size_t cap, uint64_t off, size_t got,
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
    p.cap = scan_round_up(p.want, PB_ALIGN);
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
        pb_detail("scan: %s", s->ctl.msg);
}

/* Reads on an md array's member disks that its own reads do not explain, so far. */
static uint64_t member_direct_reads(scanner *s, const scan_dev_counters *md)
{
    char text[512];
    uint64_t member_reads = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        scan_dev_counters mc;
        ssize_t m = pread(s->member_fd[i], text, sizeof(text) - 1, 0);
        if (m <= 0)
            continue;
        text[m] = '\0';
        if (scan_ctl_parse_stat(text, &mc) == 0)
            member_reads += mc.reads;
    }
    return scan_members_direct(&s->members, md->reads, md->read_sectors, member_reads,
                               s->md_chunk);
}

/* Every 0.1 s (the controller decides on that period): the device's completed reads,
 * and on an md array those that bypassed it on its member disks. */
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
    if (scan_ctl_parse_stat(text, &dc) != 0)
        return;
    uint64_t direct = s->nmembers ? member_direct_reads(s, &dc) : 0;
    log_decision(s, scan_ctl_device(&s->ctl, now, dc.reads + direct, s->own_dev_reads));
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

/* While yielding, a chunk is read in requests of SCAN_YIELD_REQUEST, a pause before each:
 * a foreground read then waits behind at most that much transfer (issue 10's figures on
 * one virtio disk: 64 KiB direct reads cost the database 1.17x, 512 KiB ones 1.35x). */
static size_t request_len(const scanner *s, size_t len)
{
    return s->ctl.yielding && len > SCAN_YIELD_REQUEST ? SCAN_YIELD_REQUEST : len;
}

/* Read bytes [have, want) of chunk p into buf synchronously (the pread path, and the
 * rest of a short or partial io_uring read), a request at a time, each paced and
 * counted as a completion. Returns the bytes in buf (short only at end of file), or
 * -errno. */
static ssize_t read_chunk_rest(scanner *s, const scan_fd *f, uint8_t *buf, const chunk_plan *p,
                               size_t have)
{
    while (have < p->want) {
        size_t from = f->direct ? have / PB_ALIGN * PB_ALIGN : have;
        size_t upto = from + request_len(s, p->cap - from);
        size_t want = upto < p->want ? upto : p->want;
        pace(s);
        double t0 = pb_now();
        ssize_t got = scan_read_rest(f, buf, upto, p->off, have, want);
        s->wait_s += pb_now() - t0;
        if (got < 0)
            return got;
        note_completion(s, t0, (int)((size_t)got - from));
        if ((size_t)got < want)
            return got; /* end of file: the file shrank */
        have = (size_t)got;
    }
    return (ssize_t)have;
}

static int scan_pread(scanner *s, const char *path, const scan_fd *f, scan_chunk_cb cb, void *ctx,
                      uint64_t *delivered, pb_error *err)
{
    uint64_t nchunks = chunk_count(s, f);
    for (uint64_t i = 0; i < nchunks; i++) {
        chunk_plan p = plan_chunk(s, f, i);
        ssize_t got = read_chunk_rest(s, f, s->bufs, &p, 0);
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

/* io_uring state of one file scan: chunk i lives in slot (base + i) % queue_depth, and
 * its request carries base + i, so a request reaped here for the next file (the carry,
 * chunk nchunks) lands in the slot the next file's scan starts from. A larger request
 * (the controller's size multiple) reads consecutive chunks into consecutive slots; its
 * completion is split back into them. */
typedef struct uring_scan {
    uint64_t nchunks, submitted, completed_upto;
    uint64_t base;
    unsigned inflight; /* requests, not chunks */
    bool carrying; /* the next file's chunk 0 was submitted into slot_of(nchunks) */
    int *res;      /* per slot: cqe result, or INT_MIN while in flight */
    unsigned *group; /* per slot: chunks read by the request that starts there */
} uring_scan;

static unsigned slot_of(const scanner *s, const uring_scan *u, uint64_t index)
{
    return (unsigned)((u->base + index) % s->queue_depth);
}

/* One request for chunks [index, index + k) (k > 1: whole-file scans only, the slots
 * consecutive; p is chunk index's plan). */
static int submit_read(scanner *s, uring_scan *u, const scan_fd *f, uint64_t index,
                       const chunk_plan *p, unsigned k)
{
    unsigned slot = slot_of(s, u, index);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe)
        return -EBUSY; /* cannot happen: the ring holds queue_depth entries */
    uint8_t *buf = s->bufs + (size_t)slot * s->read_size;
    unsigned len = (unsigned)request_len(s, p->cap); /* the rest, if any: read_chunk_rest */
    if (k > 1)
        len = (unsigned)((k - 1) * s->read_size + plan_chunk(s, f, index + k - 1).cap);
    if (s->fixed) /* one registered buffer spans every slot (scan.c) */
        io_uring_prep_read_fixed(sqe, f->fd, buf, len, p->off, 0);
    else
        io_uring_prep_read(sqe, f->fd, buf, len, p->off);
    sqe->ioprio = (uint16_t)s->ioprio;
    io_uring_sqe_set_data64(sqe, u->base + index);
    for (unsigned j = 0; j < k; j++)
        u->res[slot + j] = INT_MIN;
    u->group[slot] = k;
    s->t_sub[slot] = pb_now();
    u->inflight++;
    return 0;
}

/* Chunks the next request reads: the controller's size multiple, within the file, the
 * free slots and the end of the buffers (a request's slots do not wrap around). */
static unsigned group_len(const scanner *s, const scan_fd *f, const uring_scan *u)
{
    unsigned k = scan_ctl_mult(&s->ctl);
    if (k <= 1 || f->spans)
        return 1;
    uint64_t left = u->nchunks - u->submitted;
    uint64_t free_slots = u->completed_upto + s->queue_depth - u->submitted;
    unsigned to_end = s->queue_depth - slot_of(s, u, u->submitted);
    k = left < k ? (unsigned)left : k;
    k = free_slots < k ? (unsigned)free_slots : k;
    return to_end < k ? to_end : k;
}

/* Every chunk of this file is asked for: ask for the next file's first one (scan_set_next)
 * while this file's last chunks are checked. Whole-file scans only; the slot must be free. */
static int carry_next(scanner *s, const scan_fd *f, uring_scan *u, bool *added)
{
    if (!s->next_path || u->carrying || s->carry.ready || f->spans ||
        u->submitted < u->nchunks || u->nchunks >= u->completed_upto + s->queue_depth ||
        u->inflight >= scan_ctl_depth(&s->ctl))
        return 0;
    scan_fd next;
    bool ok = scan_open_next(s, &next);
    s->carry.path = s->next_path; /* this read ahead is for it, or for nothing */
    s->next_path = NULL;
    if (!ok)
        return 0;
    chunk_plan p = plan_chunk(s, &next, 0);
    int rc = submit_read(s, u, &next, u->nchunks, &p, 1);
    if (rc < 0) {
        close(next.fd);
        return rc;
    }
    s->carry.f = next;
    s->carry.slot = slot_of(s, u, u->nchunks);
    u->carrying = true;
    s->ctl.st.overlapped++; /* in flight while this file's last chunk is checked */
    *added = true;
    return 0;
}

static int uring_submit_next(scanner *s, const scan_fd *f, uring_scan *u)
{
    chunk_plan p = plan_chunk(s, f, u->submitted);
    unsigned k = group_len(s, f, u);
    int rc = submit_read(s, u, f, u->submitted, &p, k);
    if (rc == 0)
        u->submitted += k;
    return rc;
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
    unsigned slot = (unsigned)(index % s->queue_depth), k = u->group[slot];
    int res = cqe->res;
    io_uring_cqe_seen(&s->ring, cqe);
    /* Each chunk of the request gets its part; a short part is finished synchronously. */
    for (unsigned j = 0; j < k; j++) {
        int64_t part = res - (int64_t)j * (int64_t)s->read_size;
        u->res[slot + j] = res <= 0 ? res : part <= 0 ? 0
                                 : part > (int64_t)s->read_size ? (int)s->read_size : (int)part;
    }
    u->inflight--;
    note_completion(s, s->t_sub[slot], res);
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
    int crc = carry_next(s, f, u, &added);
    if (crc < 0)
        return crc;
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
    unsigned group[QUEUE_DEPTH_MAX];
    uring_scan u = {.nchunks = chunk_count(s, f), .res = res, .group = group};
    int rc = 0;
    if (s->carry.ready && s->carry.f.fd == f->fd) { /* chunk 0 was read ahead */
        u.base = s->carry.slot;
        u.submitted = 1;
        res[s->carry.slot] = s->carry.res;
        free(s->carry.path);
        memset(&s->carry, 0, sizeof(s->carry)); /* f (the caller's) owns the file now */
    }

    while (u.completed_upto < u.nchunks) {
        int sys = uring_fill(s, f, &u, true);
        if (sys < 0) {
            rc = pb_fail(err, PB_EIO, "io_uring submit for %s: %s", path, strerror(-sys));
            goto out;
        }
        uint64_t i = u.completed_upto;
        unsigned slot = slot_of(s, &u, i);
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
        /* A failed (EAGAIN, EINTR), short or (while yielding) partial completion is
         * finished synchronously; only end of file ends the chunk short. */
        size_t have = res[slot] > 0 ? (size_t)res[slot] : 0;
        ssize_t got = read_chunk_rest(s, f, buf, &p, have);
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
    if (u.carrying) {
        unsigned slot = slot_of(s, &u, u.nchunks);
        s->carry.res = res[slot];
        s->carry.ready = res[slot] != INT_MIN; /* else the ring failed: drop it */
        if (!s->carry.ready) {
            close(s->carry.f.fd);
            scan_carry_drop(s);
        }
    }
    return rc;
}

int scan_queue_read(scanner *s, const char *path, const scan_fd *f, scan_chunk_cb cb,
                    void *ctx, uint64_t *delivered, pb_error *err)
{
    if (s->ring_ok)
        return scan_uring(s, path, f, cb, ctx, delivered, err);
    return scan_pread(s, path, f, cb, ctx, delivered, err);
}
