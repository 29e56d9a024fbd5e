/*
 * tests/unit/engine/scan/scan_test.c — the stripe scanner: byte-exact delivery in file order over
 * io_uring and pread, with several read sizes and queue depths; vanishing, shrinking
 * and growing files; early stop; re-reads; adaptive depth. The page cache (footprint,
 * the buffered fallback where O_DIRECT is refused) is in scan_cache_test.c; how reads are
 * sized (stripe size, I/O plan) in scan_plan_test.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "tests/unit/fixtures.h"

static char tmpdir[64];

/* ------------------------------------------------------------------ helpers */


#include "tests/unit/engine/scan/scan_sink.h"

/* ------------------------------------------------------------------ tests */

static void test_open_options(void)
{
    scanner *s = NULL;
    pb_error err = PB_ERROR_INIT;
    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = 1000; /* not a multiple of 4096 */
    PBT_CHECK(scan_open(&s, &o, &err) == PB_EINVAL && s == NULL);
    PBT_CHECK(strstr(err.msg, "1000") != NULL);
    /* defect 12: a multiple of 4 KiB that is not one of the 8 kB page would split pages
     * between chunks (old code accepted it) */
    o.read_size = 12 * KiB;
    PBT_CHECK(scan_open(&s, &o, &err) == PB_EINVAL && s == NULL);
    PBT_CHECK(strstr(err.msg, "12288") != NULL);
    o.read_size = 132 * KiB;
    PBT_CHECK(scan_open(&s, &o, &err) == PB_EINVAL && s == NULL);
    o.read_size = 0; /* default: from the device holding the working directory */
    PBT_CHECK(scan_open(&s, &o, &err) == 0 && s != NULL);
    scan_free(s);
    scan_free(NULL);
}

static void check_roundtrip(size_t size, bool uring, size_t rs, unsigned qd)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/f_%zu", tmpdir, size);
    uint8_t *want = pbt_random_bytes(size, size + 1);
    PBT_CHECK(pbt_write_bytes(path, want, size) == 0);

    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = rs;
    o.queue_depth = qd;
    o.use_uring = uring;
    scanner *s = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(scan_open(&s, &o, &err) == 0);
    if (!s)
        goto out;
    sink k = sink_make(size, rs);
    uint64_t got = 12345;
    int rc = scan_file(s, path, sink_cb, &k, &got, &err);
    if (rc != 0)
        fprintf(stderr, "  scan %s: %s\n", path, err.msg);
    PBT_CHECK(rc == 0);
    PBT_CHECK(got == size);
    PBT_CHECK(k.calls == expected_calls(size, rs));
    PBT_CHECK(k.bad_order == 0 && k.bad_len == 0 && k.overflow == 0);
    PBT_CHECK(memcmp(k.data, want, size) == 0);
    PBT_CHECK(scan_bytes_read(s) == size);
    if (uring)
        PBT_CHECK(strcmp(scan_method(s), "io_uring+O_DIRECT") == 0 ||
                  strcmp(scan_method(s), "pread+O_DIRECT") == 0);
    else
        PBT_CHECK(strcmp(scan_method(s), "pread+O_DIRECT") == 0);
    /* Full chunks are read_size long; only the tail is shorter. */
    if (size > 0)
        PBT_CHECK(k.next_off == size);
    free(k.data);
    scan_free(s);
out:
    unlink(path);
    free(want);
}

static void test_roundtrip_matrix(void)
{
    static const size_t sizes[] = {0, 1, 8191, 8192, MiB + 1, 3 * MiB + 5 * 8192 + 17};
    static const size_t read_sizes[] = {128 * KiB, MiB};
    static const unsigned depths[] = {1, 8};
    for (int uring = 0; uring < 2; uring++)
        for (size_t r = 0; r < 2; r++)
            for (size_t d = 0; d < 2; d++)
                for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                    check_roundtrip(sizes[i], uring, read_sizes[r], depths[d]);
}

static void test_uring_in_use(void)
{
    scanner *s = NULL;
    scan_opts o = SCAN_OPTS_INIT;
    PBT_CHECK(scan_open(&s, &o, NULL) == 0);
    FILE *fp = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    int disabled = 0;
    if (fp) {
        if (fscanf(fp, "%d", &disabled) != 1)
            disabled = 0;
        fclose(fp);
    }
    printf("  io_uring_disabled=%d, method %s\n", disabled, s ? scan_method(s) : "?");
    /* Where the kernel allows io_uring to root, the scanner must use it. */
    if (s && disabled == 0)
        PBT_CHECK(strcmp(scan_method(s), "io_uring+O_DIRECT") == 0);
    scan_free(s);
}

static void test_vanished(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/gone", tmpdir);
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = 128 * KiB;
        o.use_uring = uring;
        scanner *s = NULL;
        pb_error err = PB_ERROR_INIT;
        PBT_CHECK(scan_open(&s, &o, &err) == 0);
        sink k = sink_make(16, o.read_size);
        uint64_t got = 7;
        PBT_CHECK(scan_file(s, path, sink_cb, &k, &got, &err) == PB_ENOENT);
        PBT_CHECK(err.code == PB_ENOENT && strstr(err.msg, path) != NULL);
        PBT_CHECK(got == 0 && k.calls == 0);
        uint8_t b[8];
        PBT_CHECK(scan_reread(s, path, 0, b, sizeof(b), &err) == PB_ENOENT);
        free(k.data);
        scan_free(s);
    }
}

static void test_callback_stop(void)
{
    char path[128];
    size_t size = 2 * MiB;
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "stop", size, 5);
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = 128 * KiB;
        o.queue_depth = 8;
        o.use_uring = uring;
        scanner *s = NULL;
        PBT_CHECK(scan_open(&s, &o, NULL) == 0);
        sink k = sink_make(size, o.read_size);
        k.stop_at_call = 3;
        k.stop_value = -77;
        uint64_t got = 0;
        PBT_CHECK(scan_file(s, path, sink_cb, &k, &got, NULL) == -77);
        PBT_CHECK(k.calls == 3);
        PBT_CHECK(got == 3 * o.read_size);
        PBT_CHECK(memcmp(k.data, want, 3 * o.read_size) == 0);
        /* The scanner is reusable after an early stop (no stale completions). */
        sink k2 = sink_make(size, o.read_size);
        PBT_CHECK(scan_file(s, path, sink_cb, &k2, &got, NULL) == 0);
        PBT_CHECK(got == size && memcmp(k2.data, want, size) == 0 && k2.bad_order == 0);
        free(k.data);
        free(k2.data);
        scan_free(s);
    }
    unlink(path);
    free(want);
}

static void test_shrink_and_grow(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/mut", tmpdir);
    size_t size = 4 * MiB;
    uint8_t *want = pbt_random_bytes(size, 6);
    for (int uring = 0; uring < 2; uring++) {
        for (unsigned qd = 1; qd <= 8; qd += 7) {
            scan_opts o = SCAN_OPTS_INIT;
            o.read_size = 128 * KiB;
            o.queue_depth = qd;
            o.use_uring = uring;
            scanner *s = NULL;
            PBT_CHECK(scan_open(&s, &o, NULL) == 0);

            /* Shrinks to 200 KiB + 5 after the first chunk: ends early, no error. */
            PBT_CHECK(pbt_write_bytes(path, want, size) == 0);
            sink k = sink_make(size + MiB, o.read_size);
            k.mutate_path = path;
            k.truncate_to = 200 * 1024 + 5;
            uint64_t got = 0;
            pb_error err = PB_ERROR_INIT;
            PBT_CHECK(scan_file(s, path, sink_cb, &k, &got, &err) == 0);
            PBT_CHECK(got < size && got >= 200 * 1024 + 5);
            PBT_CHECK(got == k.next_off && k.bad_order == 0);
            PBT_CHECK(memcmp(k.data, want, got) == 0);
            free(k.data);

            /* Grows by 1 MiB after the first chunk: read up to the size at open. */
            PBT_CHECK(pbt_write_bytes(path, want, size) == 0);
            k = sink_make(size + MiB, o.read_size);
            k.mutate_path = path;
            k.append_len = MiB;
            PBT_CHECK(scan_file(s, path, sink_cb, &k, &got, &err) == 0);
            PBT_CHECK(got == size);
            PBT_CHECK(memcmp(k.data, want, size) == 0);
            free(k.data);
            scan_free(s);
        }
    }
    unlink(path);
    free(want);
}

static void test_reread(void)
{
    char path[128];
    size_t size = 3 * 8192 + 100;
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "reread", size, 7);
    scanner *s = NULL;
    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = 128 * KiB;
    PBT_CHECK(scan_open(&s, &o, NULL) == 0);
    struct {
        uint64_t off;
        size_t len;
    } cases[] = {
        {8192, 8192}, {size - 50, 50}, {1, 8191}, {2 * 8192, 8192 + 100}, {4095, 2}, {0, size},
    };
    uint8_t buf[4 * 8192 + 1];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(buf, 0xAA, sizeof(buf));
        pb_error err = PB_ERROR_INIT;
        int rc = scan_reread(s, path, cases[i].off, buf + 1, cases[i].len, &err);
        if (rc != 0)
            fprintf(stderr, "  reread %llu+%zu: %s\n", (unsigned long long)cases[i].off,
                    cases[i].len, err.msg);
        PBT_CHECK(rc == 0);
        PBT_CHECK(memcmp(buf + 1, want + cases[i].off, cases[i].len) == 0);
        PBT_CHECK(buf[0] == 0xAA && buf[1 + cases[i].len] == 0xAA); /* nothing spilled */
    }
    /* A range running past the end is an error naming the file. */
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(scan_reread(s, path, size - 10, buf, 20, &err) == PB_EIO);
    PBT_CHECK(strstr(err.msg, path) != NULL);
    scan_free(s);
    unlink(path);
    free(want);
}

/* ------------------------------------------------------------------ adaptive depth */

/* Open a scanner with o, scan path (size bytes) through cb and check that what came is
 * want, in order, chunk by chunk. The scanner stays open for the caller's stats; NULL
 * when it did not open. */
static scanner *scan_checked(const scan_opts *o, const char *path, scan_chunk_cb cb,
                             const uint8_t *want, size_t size)
{
    scanner *s = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(scan_open(&s, o, &err) == 0);
    if (!s)
        return NULL;
    sink k = sink_make(size, o->read_size);
    uint64_t got = 0;
    PBT_CHECK(scan_file(s, path, cb, &k, &got, &err) == 0);
    PBT_CHECK(got == size && k.calls == expected_calls(size, o->read_size));
    PBT_CHECK(k.bad_order == 0 && k.bad_len == 0 && k.overflow == 0);
    PBT_CHECK(memcmp(k.data, want, size) == 0);
    free(k.data);
    return s;
}

/* Adaptive reads (the controller picks the depth, up to qd) deliver the same bytes in
 * the same order, and the stats account for every request. */
static void test_adaptive_roundtrip(void)
{
    const size_t size = 24 * MiB + 8192 + 5, rs = 128 * KiB;
    char path[128];
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "adaptive", size, 99);
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = rs;
        o.queue_depth = 8;
        o.use_uring = uring;
        o.adaptive = true;
        o.device_path = tmpdir;
        scanner *s = scan_checked(&o, path, sink_cb, want, size);
        if (!s)
            continue;
        scan_io_stats st;
        scan_get_io_stats(s, &st);
        PBT_CHECK(st.adaptive && st.depth_start == 1 && st.depth_peak <= 8);
        /* while yielding (others read the device), chunks are read in smaller requests */
        PBT_CHECK(st.yields ? st.requests >= (uint64_t)expected_calls(size, rs)
                            : st.requests == (uint64_t)expected_calls(size, rs));
        /* 128 KiB requests are one device read each, whatever the device's largest request
         * (the old estimate, bytes over that size, made 6 of 194 on a 4 MiB device) */
        PBT_CHECK(st.own_device_reads == st.requests);
        PBT_CHECK(st.latency_floor_ms > 0);
        /* The next read is in flight while a chunk is checked, with io_uring and with pread
         * (the checks run on the scanner's check thread, engine/scan/scan_check.c; before, pread
         * overlapped none and io_uring only what it submitted before each callback). The
         * first chunk has none before it. */
        PBT_CHECK(st.chunks == (uint64_t)expected_calls(size, rs));
        PBT_CHECK(st.overlapped > 0 && st.overlapped < st.chunks);
        printf("  adaptive %s: peak %u, %llu grows, %llu plateaus, %llu cuts, %llu yields, "
               "device %s\n", scan_method(s), st.depth_peak, (unsigned long long)st.grows,
               (unsigned long long)st.plateaus, (unsigned long long)st.cuts,
               (unsigned long long)st.yields, st.device_watched ? "watched" : "not watched");
        scan_free(s);
    }
    unlink(path);
    free(want);
    scan_io_plan p;
    scan_plan_io(tmpdir, 0, 0, &p);
    PBT_CHECK(p.adaptive && p.depth_max >= p.queue_depth);
    scan_plan_io(tmpdir, 0, 3, &p);
    PBT_CHECK(!p.adaptive && p.depth_max == 3);
}

/* ------------------------------------------------------------------ reading ahead */

/* A chunk's checks that take a while: the next read has time to go out meanwhile. */
static int slow_sink_cb(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
    usleep(2000);
    return sink_cb(ctx, offset, data, len);
}

/* Pinned at one read in flight, the next read still goes out while a chunk is checked:
 * the scanner holds a buffer more than the depth. With only one, every read waited for
 * the checks of the chunk before it (overlapped none). */
static void test_pinned_one_overlaps_checks(void)
{
    const size_t rs = 128 * KiB, size = 24 * rs;
    char path[128];
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "pinned1", size, 41);
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = rs;
        o.queue_depth = 1;
        o.use_uring = uring;
        PBT_CHECK(scan_buffers(&o) == 2);
        scanner *s = scan_checked(&o, path, slow_sink_cb, want, size);
        if (!s)
            continue;
        scan_io_stats st;
        scan_get_io_stats(s, &st);
        printf("  pinned 1 %s: %llu of %llu chunks overlapped, peak %u in flight\n",
               scan_method(s), (unsigned long long)st.overlapped,
               (unsigned long long)st.chunks, st.depth_peak);
        PBT_CHECK(!st.adaptive && st.depth_peak == 1);
        PBT_CHECK(st.chunks == 24 && st.overlapped * 10 >= st.chunks * 9);
        scan_free(s);
    }
    unlink(path);
    free(want);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

/* Files named with scan_set_next have their first request read while the file before is
 * still being checked: each of 40 one-request files after the first is read ahead (before,
 * the device idled at every file's start), every byte still arrives in order, a read ahead
 * for a file not scanned next is dropped (the file then scanned is read as usual), a
 * vanished next file is reported when it is scanned, and no descriptor is left open. */
static void test_read_ahead_across_files(void)
{
    enum { NFILES = 40 };
    const size_t rs = 128 * KiB;
    char paths[NFILES][128];
    uint8_t *want[NFILES];
    size_t sizes[NFILES];
    for (int i = 0; i < NFILES; i++) {
        sizes[i] = i == 7 ? 3 * rs + 8192 : (size_t)(1 + i % 5) * 8192;
        snprintf(paths[i], sizeof(paths[i]), "%s/ahead.%02d", tmpdir, i);
        want[i] = pbt_random_bytes(sizes[i], 500 + i);
        PBT_CHECK(pbt_write_bytes(paths[i], want[i], sizes[i]) == 0);
    }
    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = rs;
    o.queue_depth = 8;
    o.adaptive = true;
    scanner *s = NULL;
    pb_error err = PB_ERROR_INIT;
    int fds = open_fds();
    PBT_CHECK(scan_open(&s, &o, &err) == 0);
    if (!s)
        return;
    bool uring = strcmp(scan_method(s), "io_uring+O_DIRECT") == 0;
    int right = 0;
    for (int i = 0; i < NFILES; i++) {
        /* file 20 is named next but 21 is scanned; 30 is named, then removed */
        const char *next = i + 1 < NFILES ? paths[i == 19 ? 25 : i + 1] : NULL;
        PBT_CHECK(scan_set_next(s, next, &err) == 0);
        if (i == 30)
            continue;
        sink k = sink_make(sizes[i], rs);
        uint64_t got = 0;
        int rc = scan_file(s, paths[i], sink_cb, &k, &got, &err);
        if (i == 29)
            unlink(paths[30]); /* after its first request was read ahead */
        right += rc == 0 && got == sizes[i] && k.bad_order == 0 && k.overflow == 0 &&
                 memcmp(k.data, want[i], sizes[i]) == 0;
        free(k.data);
    }
    PBT_CHECK(right == NFILES - 1);
    sink k = sink_make(sizes[30], rs);
    PBT_CHECK(scan_set_next(s, NULL, &err) == 0);
    PBT_CHECK(scan_file(s, paths[30], sink_cb, &k, NULL, &err) == PB_ENOENT);
    free(k.data);
    scan_io_stats st;
    scan_get_io_stats(s, &st);
    printf("  %s: %llu of %llu requests in flight while the one before was checked\n",
           scan_method(s), (unsigned long long)st.overlapped, (unsigned long long)st.requests);
    /* every scan but the last read the next named file's first request ahead (one was for
     * a file then removed, one for a file not scanned next): 38, and file 7's own chunks */
    if (uring)
        PBT_CHECK(st.overlapped >= NFILES - 3);
    scan_free(s);
    PBT_CHECK(open_fds() == fds);
    for (int i = 0; i < NFILES; i++) {
        unlink(paths[i]);
        free(want[i]);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbscanXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_open_options);
    PBT_RUN(test_uring_in_use);
    PBT_RUN(test_roundtrip_matrix);
    PBT_RUN(test_vanished);
    PBT_RUN(test_callback_stop);
    PBT_RUN(test_shrink_and_grow);
    PBT_RUN(test_reread);
    PBT_RUN(test_adaptive_roundtrip);
    PBT_RUN(test_read_ahead_across_files);
    PBT_RUN(test_pinned_one_overlaps_checks);
    rmdir(tmpdir);
    return PBT_DONE();
}
