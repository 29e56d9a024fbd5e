/*
 * engine/scan/scan_queue.c — the scanner's request queue (see scan.c for the why): chunks are
 * planned, submitted within the controller's depth (io_uring; pread keeps one), paced
 * while yielding, and delivered to the callback in file order. While a chunk is checked
 * and hashed the next read is already in flight, so one request in flight keeps the
 * device busy as a plain sequential reader does (docs/DESIGN.md, "Polite I/O").
 */
#include "engine/scan/scan_queue_internal.h"

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

/* Hand one chunk to the check stage (scan_check.c); got < want means the file shrank:
 * hand over what is there and stop (*stop). submitted: when its read went out; paused: a
 * yielding pause was taken just before it. Returns the
 * callback's first failure so far (it stops the scan too). */
static int hand_over(scanner *s, const scan_fd *f, const chunk_plan *p, const uint8_t *buf,
                     size_t got, double submitted, bool paused, bool *stop)
{
    *stop = got < p->want;
    if (got == 0)
        return 0;
    if (!f->direct) /* the bytes are in our buffer already */
        (void)posix_fadvise(f->fd, (off_t)p->off, (off_t)got, POSIX_FADV_DONTNEED);
    int rc = scan_check_push(&s->check, p->off, buf, got, submitted, paused);
    if (rc != 0)
        *stop = true;
    return rc;
}

/* Wait until the checks have caught up to upto chunks of this scan (every buffer before
 * it is the reader's again); the wait is the reading thread's, counted for the report (as
 * a wait for a buffer unless upto is UINT64_MAX: the file's end). Returns the callback's
 * first failure. */
static int wait_checks(scanner *s, uint64_t upto)
{
    if (scan_check_done(&s->check) >= upto)
        return scan_check_wait(&s->check, 0, &s->check_wait_s);
    if (upto != UINT64_MAX)
        s->check_waits++;
    return scan_check_wait(&s->check, upto, &s->check_wait_s);
}

/* ------------------------------------------------------------------ pacing */

/* Sleep the pause the controller asks for before the next request (a quiet window, or
 * others' reads still over budget at its smallest step). */
static void pace(scanner *s)
{
    double left;
    if (s->ctl.quiet && s->own_inflight > 0)
        return; /* a quiet window begins once ours complete: not while one waits here */
    while ((left = scan_ctl_pause(&s->ctl, pb_now())) > 0) {
        s->paused = true; /* the next request waited for the controller, not the checks */
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
        scan_watch_device(s, pb_now()); /* a quiet window ends on a device sample */
    }
}

/* While others read, the controller may ask for requests below the read size: a chunk
 * is then read in several, and a foreground read waits behind at most one of them (the
 * figures on one virtio disk: 64 KiB direct reads cost the database 1.17x, 512 KiB ones
 * 1.35x). */
static size_t request_len(const scanner *s, size_t len)
{
    size_t cap = scan_ctl_request_cap(&s->ctl);
    return cap && len > cap ? cap : len;
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
        if (have == 0)
            s->rest_t0 = t0; /* the chunk's first request (the pread path's submission) */
        ssize_t got = scan_read_rest(f, buf, upto, p->off, have, want);
        s->wait_s += pb_now() - t0;
        if (got < 0)
            return got;
        scan_note_completion(s, t0, (int)((size_t)got - from));
        if ((size_t)got < want)
            return got; /* end of file: the file shrank */
        have = (size_t)got;
    }
    return (ssize_t)have;
}

/* pread: one request at a time, into the buffers in turn; a buffer is reused once the
 * chunk in it is checked, so the next read runs while the checks do. */
static int scan_pread(scanner *s, const char *path, const scan_fd *f, pb_error *err)
{
    uint64_t nchunks = chunk_count(s, f);
    int rc = 0;
    for (uint64_t i = 0; i < nchunks; i++) {
        if (i >= s->queue_depth && (rc = wait_checks(s, i - s->queue_depth + 1)) != 0)
            break;
        uint8_t *buf = s->bufs + (size_t)(i % s->queue_depth) * s->read_size;
        chunk_plan p = plan_chunk(s, f, i);
        s->paused = false;
        ssize_t got = read_chunk_rest(s, f, buf, &p, 0);
        if (got < 0) {
            errno = (int)-got;
            rc = pb_fail_errno(err, PB_EIO, "read %s at offset %llu", path,
                               (unsigned long long)p.off);
            break;
        }
        bool stop;
        rc = hand_over(s, f, &p, buf, (size_t)got, s->rest_t0, s->paused, &stop);
        if (rc != 0 || stop)
            break;
    }
    int crc = wait_checks(s, UINT64_MAX); /* the buffers and the callback's state */
    return rc ? rc : crc;
}

/* io_uring state of one file scan: chunk i lives in slot (base + i) % queue_depth, and
 * its request carries base + i, so a request reaped here for the next file (the carry,
 * chunk nchunks) lands in the slot the next file's scan starts from. A larger request
 * (the controller's size multiple) reads consecutive chunks into consecutive slots; its
 * completion is split back into them. A slot is free again once its chunk is checked. */
typedef struct uring_scan {
    uint64_t nchunks, submitted, completed_upto;
    uint64_t checked; /* chunks checked (scan_check.c): their slots are free again */
    uint64_t base;
    unsigned inflight; /* requests, not chunks */
    unsigned *len;   /* per slot: the bytes its request asked for */
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
    double now = pb_now();
    for (unsigned j = 0; j < k; j++) {
        u->res[slot + j] = INT_MIN;
        s->t_sub[slot + j] = now;
        s->paused_sub[slot + j] = s->paused;
    }
    s->paused = false;
    u->group[slot] = k;
    u->len[slot] = len;
    s->own_inflight_bytes += len;
    u->inflight++;
    s->own_inflight++;
    return 0;
}

/* Chunks the next request reads: the controller's size multiple, within the file, the
 * end of the buffers (a request's slots do not wrap around). 0: wait for the checks to
 * free enough slots for a whole request. Slots free one at a time as chunks are checked;
 * taking each at once would cut the requests the controller sized into single chunks
 * whenever the reads run ahead of the checks. */
static unsigned group_len(const scanner *s, const scan_fd *f, const uring_scan *u)
{
    unsigned k = scan_ctl_mult(&s->ctl);
    if (k <= 1 || f->spans)
        return 1;
    uint64_t left = u->nchunks - u->submitted;
    uint64_t free_slots = u->checked + s->queue_depth - u->submitted;
    unsigned to_end = s->queue_depth - slot_of(s, u, u->submitted);
    k = left < k ? (unsigned)left : k;
    k = to_end < k ? to_end : k;
    return free_slots < k ? 0 : k;
}

/* Every chunk of this file is asked for: ask for the next file's first one (scan_set_next)
 * while this file's last chunks are checked. Whole-file scans only; the slot must be free. */
static int carry_next(scanner *s, const scan_fd *f, uring_scan *u, bool *added)
{
    if (!s->next_path || u->carrying || s->carry.ready || f->spans ||
        u->submitted < u->nchunks || u->nchunks >= u->checked + s->queue_depth ||
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
    *added = true;
    return 0;
}

/* Submit the next request, if a whole one fits (group_len); *added says whether one went. */
static int uring_submit_next(scanner *s, const scan_fd *f, uring_scan *u, bool *added)
{
    unsigned k = group_len(s, f, u);
    if (k == 0)
        return 0;
    chunk_plan p = plan_chunk(s, f, u->submitted);
    int rc = submit_read(s, u, f, u->submitted, &p, k);
    if (rc == 0) {
        u->submitted += k;
        *added = true;
    }
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
    s->own_inflight_bytes -= u->len[slot];
    s->own_inflight--;
    scan_note_completion(s, s->t_sub[slot], res);
    return 0;
}

/* Wait for every request still in flight: their buffers and fd must stay valid. */
static void uring_drain(scanner *s, uring_scan *u)
{
    while (u->inflight > 0)
        if (uring_reap(s, u) < 0)
            break;
}

/* Whether the next request may go now. The controller's depth counts requests of its
 * step's size; the blocks WAL names are read in requests of a page or a few, and one at
 * a time they wait out the device's latency page by page (an incremental's scattered
 * reads ran at 0.2 ms per page). So those go while the bytes in flight stay within what
 * the step allows: at one 512 KiB request, up to 64 single pages, as the slots allow. */
static bool may_submit(const scanner *s, const scan_fd *f, const uring_scan *u)
{
    if (!f->spans || u->inflight == 0)
        return u->inflight < scan_ctl_depth(&s->ctl);
    size_t cap = scan_ctl_request_cap(&s->ctl), step = scan_ctl_mult(&s->ctl) * s->read_size;
    uint64_t allowed = (uint64_t)scan_ctl_depth(&s->ctl) * (cap && cap < step ? cap : step);
    chunk_plan p = plan_chunk(s, f, u->submitted);
    return s->own_inflight_bytes + request_len(s, p.cap) <= allowed;
}

/* Submit up to the controller's depth, within the free slots. While the controller asks
 * for a pause, nothing is submitted; when nothing is in flight either and the caller is
 * about to wait for the next chunk (may_sleep), the pause is slept here, so one is. */
static int uring_fill(scanner *s, const scan_fd *f, uring_scan *u, bool may_sleep)
{
    bool added = false;
    u->checked = scan_check_done(&s->check);
    if (u->inflight == 0 && may_sleep)
        pace(s);
    else if (scan_ctl_pause(&s->ctl, pb_now()) > 0) {
        s->paused = true; /* the controller holds the next request back, not the checks */
        return 0;
    }
    while (u->submitted < u->nchunks && u->submitted < u->checked + s->queue_depth &&
           may_submit(s, f, u)) {
        bool one = false;
        int rc = uring_submit_next(s, f, u, &one);
        if (rc < 0)
            return rc;
        if (!one)
            break;
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

/* Submit what the controller and the free slots allow until chunk i is asked for: when
 * every slot is held by a chunk not yet checked, wait for the checks to free one. */
static int ensure_submitted(scanner *s, const char *path, const scan_fd *f, uring_scan *u,
                            uint64_t i, pb_error *err)
{
    while (u->submitted <= i) {
        int sys = uring_fill(s, f, u, true);
        if (sys < 0)
            return pb_fail(err, PB_EIO, "io_uring submit for %s: %s", path, strerror(-sys));
        if (u->submitted > i)
            break;
        int rc = wait_checks(s, u->checked + 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Wait until chunk i's read is complete (reaping others meanwhile), then submit what is
 * allowed at once, so the device is busy while it is checked. */
static int wait_chunk(scanner *s, const char *path, const scan_fd *f, uring_scan *u,
                      uint64_t i, pb_error *err)
{
    unsigned slot = slot_of(s, u, i);
    assert(u->submitted > i); /* else res[slot] is an older chunk's */
    while (u->res[slot] == INT_MIN) {
        int sys = uring_reap(s, u);
        if (sys < 0)
            return pb_fail(err, PB_EIO, "io_uring wait for %s: %s", path, strerror(-sys));
    }
    /* Requests below the read size (scan_ctl_request_cap): the rest of this chunk is read
     * next, synchronously; the next chunk's read waits for it, so one is in flight. */
    if (scan_ctl_request_cap(&s->ctl) && u->res[slot] >= 0 &&
        (size_t)u->res[slot] < plan_chunk(s, f, i).want)
        return 0;
    int sys = uring_fill(s, f, u, false);
    return sys < 0 ? pb_fail(err, PB_EIO, "io_uring submit for %s: %s", path, strerror(-sys))
                   : 0;
}

/* The file's last chunks are being checked: keep offering the next file's first read (a
 * slot may free up meanwhile), and wait until every chunk is checked. */
static int finish_checks(scanner *s, const scan_fd *f, uring_scan *u, bool offer)
{
    offer = offer && u->submitted >= u->nchunks; /* only the next file's read is offered */
    for (;;) {
        if (offer && !u->carrying)
            (void)uring_fill(s, f, u, false); /* a refusal only loses the read ahead */
        uint64_t done = scan_check_done(&s->check);
        if (done >= u->completed_upto || !offer)
            break;
        /* The next file's read is reaped before the wait for the checks, so its latency is
         * the device's and not the checks' (the controller takes ours out of the device's
         * read ticks: an inflated one would hide the others' cost). */
        uring_drain(s, u);
        int rc = wait_checks(s, done + 1);
        if (rc != 0)
            break;
    }
    uring_drain(s, u);
    return wait_checks(s, UINT64_MAX);
}

static int scan_uring(scanner *s, const char *path, const scan_fd *f, pb_error *err)
{
    int res[QUEUE_DEPTH_MAX];
    unsigned group[QUEUE_DEPTH_MAX], len[QUEUE_DEPTH_MAX];
    uring_scan u = {.nchunks = chunk_count(s, f), .res = res, .group = group, .len = len};
    int rc = 0;
    if (s->carry.ready && s->carry.f.fd == f->fd) { /* chunk 0 was read ahead */
        u.base = s->carry.slot;
        u.submitted = 1;
        res[s->carry.slot] = s->carry.res;
        free(s->carry.path);
        memset(&s->carry, 0, sizeof(s->carry)); /* f (the caller's) owns the file now */
    }

    while (u.completed_upto < u.nchunks) {
        uint64_t i = u.completed_upto;
        if ((rc = ensure_submitted(s, path, f, &u, i, err)) != 0 ||
            (rc = wait_chunk(s, path, f, &u, i, err)) != 0)
            goto out;
        chunk_plan p = plan_chunk(s, f, i);
        unsigned slot = slot_of(s, &u, i);
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
        rc = hand_over(s, f, &p, buf, (size_t)got, s->t_sub[slot], s->paused_sub[slot], &stop);
        u.completed_upto++;
        if (rc != 0 || stop)
            goto out;
    }
out:;
    /* The checks must be done with the buffers, and the reads with them and the file,
     * before the scan returns. */
    int crc = finish_checks(s, f, &u, rc == 0);
    rc = rc ? rc : crc;
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
    if (!s->prescanned)
        scan_watch_prescan(s);
    int rc = scan_check_begin(&s->check, s->queue_depth, cb, ctx, err);
    if (rc != 0)
        return rc;
    /* The callback may fill err (the backup passes the scan's own) on the check thread:
     * the reads' failures wait in rerr until every check is done. */
    pb_error rerr = PB_ERROR_INIT;
    rc = s->ring_ok ? scan_uring(s, path, f, &rerr) : scan_pread(s, path, f, &rerr);
    /* Every check is done (the scan waited): what the callback was given is delivered. */
    s->bytes_read += s->check.bytes;
    *delivered += s->check.bytes;
    if (s->check.rc != 0)
        return s->check.rc; /* the callback's failure, in its own words */
    if (rc != 0 && err)
        *err = rerr;
    return rc;
}
