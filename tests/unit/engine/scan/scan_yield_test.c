/*
 * tests/unit/engine/scan/scan_yield_test.c — the scanner while others read its device. A thread
 * rewrites a /sys/block/<dev>/stat-format file with made-up counters (others' reads at
 * ~20,000/s, 1 ms each), handed to the scanner as its device's counters. The scanner must
 * steer by their latency: a quiet window to measure it (a pause), then requests below the
 * read size to start with (a chunk read in several), growing while the others' latency
 * stays where it was; and still deliver every byte in order, over io_uring and pread alike.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "tests/unit/fixtures.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static char tmpdir[64];

typedef struct feeder {
    char path[128];
    atomic_bool stop;
} feeder;

/* Every 5 ms, 100 more completed reads: others read at ~20,000/s. Rewritten in place at a
 * fixed width, as the scanner keeps the file open and re-reads it from offset 0. */
static void *feed(void *arg)
{
    feeder *f = arg;
    int fd = open(f->path, O_WRONLY);
    uint64_t reads = 1000;
    while (fd >= 0 && !atomic_load(&f->stop)) {
        char line[256];
        int n = snprintf(line, sizeof(line), "%20llu 0 %20llu %20llu 0 0 0 0 0 0 0\n",
                         (unsigned long long)reads, (unsigned long long)reads * 8,
                         (unsigned long long)reads); /* 1 ms each */
        if (pwrite(fd, line, (size_t)n, 0) != n)
            break;
        reads += 100;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

typedef struct slow_sink {
    uint8_t *data;
    size_t cap;
    uint64_t next_off;
    int calls, bad;
} slow_sink;

/* 3 ms per chunk: the scan lasts long enough for the 0.1 s device samples to decide. */
static int slow_cb(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
    slow_sink *k = ctx;
    k->calls++;
    if (offset != k->next_off || offset + len > k->cap)
        k->bad++;
    else
        memcpy(k->data + offset, data, len);
    k->next_off = offset + len;
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

static void test_yielding_reads_in_small_requests(void)
{
    const size_t size = 48 * MiB, rs = 512 * KiB;
    char path[128];
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "data", size, 7);
    for (int uring = 0; uring < 2; uring++) {
        feeder fd = {.stop = false};
        snprintf(fd.path, sizeof(fd.path), "%s/stat.%d", tmpdir, uring);
        PBT_CHECK(pbt_write_bytes(fd.path, (const uint8_t *)"", 0) == 0);
        pthread_t th;
        PBT_CHECK(pthread_create(&th, NULL, feed, &fd) == 0);
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = rs;
        o.queue_depth = 4;
        o.use_uring = uring;
        o.adaptive = true;
        o.device_stat = fd.path;
        scanner *s = NULL;
        pb_error err = PB_ERROR_INIT;
        PBT_CHECK(scan_open(&s, &o, &err) == 0);
        slow_sink k = {.data = calloc(1, size), .cap = size};
        uint64_t got = 0;
        if (s)
            PBT_CHECK(scan_file(s, path, slow_cb, &k, &got, &err) == 0);
        atomic_store(&fd.stop, true);
        pthread_join(th, NULL);
        scan_io_stats st;
        memset(&st, 0, sizeof(st));
        if (s)
            scan_get_io_stats(s, &st);
        const uint64_t chunks = size / rs;
        PBT_CHECK(got == size && k.calls == (int)chunks && k.bad == 0);
        PBT_CHECK(memcmp(k.data, want, size) == 0);
        PBT_CHECK(st.device_watched && st.yields >= 1 && st.quiet_windows >= 1);
        PBT_CHECK(st.foreground_reads_per_s_peak > 1000);
        PBT_CHECK(st.others_base_ms > 0.9 && st.others_base_ms < 1.1);
        /* Steering from the first 0.1 s on, from 128 KiB requests up: more requests than
         * chunks. The old scanner made one 512 KiB request per chunk whatever others did. */
        PBT_CHECK(st.requests > chunks);
        PBT_CHECK(st.requests <= 8 * chunks);
        /* others' latency never moved: no step down, no pause but the quiet windows */
        PBT_CHECK(st.steer_downs == 0 && st.pauses == st.quiet_windows);
        /* every request is one device read of ours: none counted as others' */
        PBT_CHECK(st.own_device_reads == st.requests);
        printf("  %s: %llu requests for %llu chunks, %llu quiet windows (%.2f s), %llu steps "
               "up, request %zu KiB x %u at the end, others' reads up to %.0f/s\n",
               scan_method(s), (unsigned long long)st.requests, (unsigned long long)chunks,
               (unsigned long long)st.quiet_windows, st.quiet_seconds,
               (unsigned long long)st.steer_ups, st.steer_bytes / 1024, st.steer_depth,
               st.foreground_reads_per_s_peak);
        free(k.data);
        scan_free(s);
    }
    free(want);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbyieldXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_yielding_reads_in_small_requests);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return PBT_DONE();
}
