/*
 * tests/unit/engine/scan/scan_ranges_test.c — the scanner's ranged read (scan_ranges): how
 * block lists become requests (close ranges joined, long ones split at the read size),
 * the request counts of a dense and a sparse block list over io_uring and pread, the
 * bytes delivered, the own-device-read accounting, and files that end early or vanish.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "engine/scan/scan_internal.h"
#include "tests/unit/fixtures.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define PAGE ((size_t)PB_PAGE_SIZE)

static char tmpdir[64];


/* What the callback saw: the bytes at their offsets, order, and a mutation to apply. */
typedef struct sink {
    uint8_t *data;  /* file-sized; delivered bytes copied to their offset */
    uint8_t *seen;  /* per page: delivered */
    size_t cap;
    uint64_t last_end;
    int calls, bad_order, overflow;
    const char *truncate_path; /* on the first call: truncate to truncate_to */
    off_t truncate_to;
} sink;

static int sink_cb(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
    sink *k = ctx;
    k->calls++;
    if (offset < k->last_end || offset % PAGE)
        k->bad_order++;
    k->last_end = offset + len;
    if (offset + len > k->cap) {
        k->overflow++;
    } else {
        memcpy(k->data + offset, data, len);
        for (uint64_t p = offset / PAGE; p < (offset + len + PAGE - 1) / PAGE; p++)
            k->seen[p] = 1;
    }
    if (k->calls == 1 && k->truncate_path && truncate(k->truncate_path, k->truncate_to) != 0)
        perror("truncate");
    return 0;
}

static sink sink_make(size_t cap)
{
    sink k;
    memset(&k, 0, sizeof(k));
    k.data = calloc(1, cap);
    k.seen = calloc(1, cap / PAGE + 1);
    k.cap = cap;
    return k;
}

static void sink_free(sink *k)
{
    free(k->data);
    free(k->seen);
}

/* ------------------------------------------------------------------ planning */

static size_t plan_count(const scan_range *r, size_t n, uint32_t gap, size_t max,
                         scan_span **out)
{
    size_t nout = 0;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(scan_plan_spans(r, n, gap, max, out, &nout, &err) == 0);
    return nout;
}

static void test_plan(void)
{
    scan_span *sp = NULL;
    /* Gap of 3 pages (fewer than 4): one request through it; of 4: two requests. */
    scan_range near[] = {{0, 1}, {4, 1}};
    PBT_CHECK(plan_count(near, 2, 4, 16 * PAGE, &sp) == 1 && sp[0].off == 0 &&
              sp[0].len == 5 * PAGE);
    free(sp);
    scan_range far[] = {{0, 1}, {5, 2}};
    PBT_CHECK(plan_count(far, 2, 4, 16 * PAGE, &sp) == 2 && sp[1].off == 5 * PAGE &&
              sp[1].len == 2 * PAGE);
    free(sp);
    /* gap 0: only touching ranges join (they are distinct runs, so none here). */
    PBT_CHECK(plan_count(near, 2, 0, 16 * PAGE, &sp) == 2);
    free(sp);
    /* A range of 100 pages with 16-page requests: 7 requests, the last 4 pages. */
    scan_range longr[] = {{10, 100}};
    PBT_CHECK(plan_count(longr, 1, 4, 16 * PAGE, &sp) == 7 && sp[0].off == 10 * PAGE &&
              sp[6].off == 106 * PAGE && sp[6].len == 4 * PAGE);
    free(sp);
    /* Joining stops at the request size: pages 0-11 and 14 share a 16-page request, 16
     * (one page after 14) starts the next. */
    scan_range edge[] = {{0, 12}, {14, 1}, {16, 1}};
    PBT_CHECK(plan_count(edge, 3, 4, 16 * PAGE, &sp) == 2 && sp[0].len == 15 * PAGE &&
              sp[1].off == 16 * PAGE && sp[1].len == PAGE);
    free(sp);
    PBT_CHECK(plan_count(NULL, 0, 4, 16 * PAGE, &sp) == 0 && sp == NULL);
    /* Out of order or overlapping: refused. */
    scan_range bad[] = {{10, 5}, {12, 1}};
    size_t n = 0;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(scan_plan_spans(bad, 2, 4, 16 * PAGE, &sp, &n, &err) == PB_EINVAL && !sp);
}

/* ------------------------------------------------------------------ reading */

/* Read ranges r of path (size bytes, content want) and check every named page arrived
 * intact; returns the requests made. */
static uint64_t read_and_check(scanner *s, const char *path, const uint8_t *want, size_t size,
                               const scan_range *r, size_t n)
{
    sink k = sink_make(size);
    scan_ranges_result res;
    scan_io_stats before, after;
    pb_error err = PB_ERROR_INIT;
    scan_get_io_stats(s, &before);
    PBT_CHECK(scan_ranges(s, path, r, n, 4, sink_cb, &k, &res, &err) == 0);
    scan_get_io_stats(s, &after);
    PBT_CHECK(k.bad_order == 0 && k.overflow == 0);
    PBT_CHECK(res.size == size && res.requests == after.requests - before.requests);
    /* Our requests are counted as our own device reads, as a full scan's are. */
    PBT_CHECK(after.own_device_reads - before.own_device_reads == res.requests);
    uint64_t bytes = 0;
    for (size_t p = 0; p < size / PAGE; p++)
        bytes += k.seen[p] ? PAGE : 0;
    PBT_CHECK(res.bytes == bytes);
    int missing = 0, wrong = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t p = r[i].first; p < r[i].first + r[i].count; p++) {
            missing += !k.seen[p];
            wrong += memcmp(k.data + (size_t)p * PAGE, want + (size_t)p * PAGE, PAGE) != 0;
        }
    PBT_CHECK(missing == 0 && wrong == 0);
    sink_free(&k);
    return res.requests;
}

static void test_request_counts(void)
{
    const size_t size = 32 * MiB, rs = 128 * KiB; /* 4096 pages, 16 per request */
    char path[128];
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "rel", size, 7);
    /* Dense: every other page of the first 2048 (1024 blocks, gaps of one page). */
    scan_range dense[1024];
    for (uint32_t i = 0; i < 1024; i++)
        dense[i] = (scan_range){2 * i, 1};
    /* Sparse: every 64th page (64 blocks, gaps of 63 pages). */
    scan_range sparse[64];
    for (uint32_t i = 0; i < 64; i++)
        sparse[i] = (scan_range){64 * i + 3, 1};
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = rs;
        o.queue_depth = 8;
        o.use_uring = uring;
        o.adaptive = true;
        o.device_path = tmpdir;
        scanner *s = NULL;
        PBT_CHECK(scan_open(&s, &o, NULL) == 0);
        if (!s)
            continue;
        uint64_t nd = read_and_check(s, path, want, size, dense, 1024);
        uint64_t ns = read_and_check(s, path, want, size, sparse, 64);
        /* Dense: 2048 pages in 16-page requests = 128 (one request per block: 1024). */
        PBT_CHECK(nd == 128);
        /* Sparse: nothing to join, one request per block. */
        PBT_CHECK(ns == 64);
        printf("  %s: dense 1024 blocks in %llu requests, sparse 64 blocks in %llu\n",
               scan_method(s), (unsigned long long)nd, (unsigned long long)ns);
        scan_free(s);
    }
    unlink(path);
    free(want);
}

/* Pages past the size at open are not read; a file that shrinks during the read ends
 * where the read found its end; a vanished file is PB_ENOENT. */
static void test_ends(void)
{
    const size_t size = 32 * PAGE;
    char path[128];
    snprintf(path, sizeof(path), "%s/short", tmpdir);
    uint8_t *want = pbt_random_bytes(size, 9);
    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = 4 * PAGE;
    o.use_uring = false;
    o.queue_depth = 1; /* one buffer (adaptive with a ceiling of one: a pinned scan holds
                        * a spare): the next read waits for the check of the one before
                        * (engine/scan/scan_check.c), so the truncation lands between two */
    o.adaptive = true;
    scanner *s = NULL;
    PBT_CHECK(scan_open(&s, &o, NULL) == 0);
    scan_ranges_result res;
    pb_error err = PB_ERROR_INIT;

    PBT_CHECK(pbt_write_bytes(path, want, 10 * PAGE + 100) == 0);
    scan_range past[] = {{8, 4}, {20, 2}};
    sink k = sink_make(size);
    PBT_CHECK(scan_ranges(s, path, past, 2, 4, sink_cb, &k, &res, &err) == 0);
    PBT_CHECK(res.size == 10 * PAGE + 100 && res.bytes == 2 * PAGE + 100 && res.requests == 1);
    sink_free(&k);

    /* No range: nothing read, the size still reported. */
    k = sink_make(size);
    PBT_CHECK(scan_ranges(s, path, NULL, 0, 4, sink_cb, &k, &res, &err) == 0);
    PBT_CHECK(res.size == 10 * PAGE + 100 && res.bytes == 0 && res.requests == 0 && !k.calls);
    sink_free(&k);

    scan_range three[] = {{0, 1}, {10, 1}, {20, 1}};
    PBT_CHECK(pbt_write_bytes(path, want, size) == 0);
    k = sink_make(size);
    k.truncate_path = path;
    k.truncate_to = 10 * PAGE + 5; /* inside the second request */
    PBT_CHECK(scan_ranges(s, path, three, 3, 4, sink_cb, &k, &res, &err) == 0);
    PBT_CHECK(res.size == 10 * PAGE + 5 && k.calls == 2);
    sink_free(&k);

    PBT_CHECK(pbt_write_bytes(path, want, size) == 0);
    k = sink_make(size);
    k.truncate_path = path;
    k.truncate_to = 15 * PAGE; /* between the second and the third */
    PBT_CHECK(scan_ranges(s, path, three, 3, 4, sink_cb, &k, &res, &err) == 0);
    PBT_CHECK(res.size == 20 * PAGE && k.calls == 2 && res.bytes == 2 * PAGE);
    sink_free(&k);

    unlink(path);
    k = sink_make(size);
    PBT_CHECK(scan_ranges(s, path, three, 3, 4, sink_cb, &k, &res, &err) == PB_ENOENT);
    sink_free(&k);
    scan_free(s);
    free(want);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbscanrXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_plan);
    PBT_RUN(test_request_counts);
    PBT_RUN(test_ends);
    rmdir(tmpdir);
    return PBT_DONE();
}
