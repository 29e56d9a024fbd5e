/*
 * tests/unit/engine/scan/scan_size_test.c — larger requests (the controller's size multiple,
 * docs/DESIGN.md "Polite I/O"): one io_uring request reads consecutive chunks into
 * consecutive buffer slots and its completion is split back into them. White box: the
 * controller is set to a multiple and kept from deciding (no epoch can close), so the
 * scan reads at that size whatever the device's timing. Every byte must arrive in order,
 * in read-size chunks, with fewer requests; across files (the read ahead), at file ends
 * that cut a request short, and when a slot run would wrap around the buffers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "engine/scan/scan_queue_internal.h"
#include "tests/unit/fixtures.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static char tmpdir[64];

typedef struct sink {
    uint8_t *data;
    size_t cap, read_size;
    uint64_t next_off;
    int calls, bad;
} sink;

static int sink_cb(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
    sink *k = ctx;
    k->calls++;
    if (offset != k->next_off || len == 0 || len > k->read_size || offset + len > k->cap) {
        k->bad++;
        return 0;
    }
    memcpy(k->data + offset, data, len);
    k->next_off = offset + len;
    return 0;
}

/* A scanner of 128 KiB x 8 slots held at requests of mult chunks. */
static scanner *open_at(unsigned mult)
{
    scan_opts o = SCAN_OPTS_INIT;
    o.read_size = 128 * KiB;
    o.queue_depth = 8;
    o.adaptive = true;
    scanner *s = NULL;
    pb_error err = PB_ERROR_INIT;
    if (scan_open(&s, &o, &err) != 0)
        return NULL;
    s->ctl.mult = mult;
    s->ctl.full_bytes = SIZE_MAX; /* no completion counts: no epoch closes, nothing changes */
    return s;
}

/* Files of these sizes, named next one after the other, scanned at mult; *requests gets
 * the requests made. Returns the files delivered byte-exact. */
static int scan_files(scanner *s, const size_t *sizes, int n, uint64_t *requests)
{
    char paths[8][128];
    uint8_t *want[8];
    int right = 0;
    for (int i = 0; i < n; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/f%d", tmpdir, i);
        want[i] = pbt_random_bytes(sizes[i], 70 + (uint64_t)i);
        PBT_CHECK(pbt_write_bytes(paths[i], want[i], sizes[i]) == 0);
    }
    pb_error err = PB_ERROR_INIT;
    for (int i = 0; i < n; i++) {
        PBT_CHECK(scan_set_next(s, i + 1 < n ? paths[i + 1] : NULL, &err) == 0);
        sink k = {calloc(1, sizes[i]), sizes[i], 128 * KiB, 0, 0, 0};
        uint64_t got = 0;
        int rc = scan_file(s, paths[i], sink_cb, &k, &got, &err);
        int calls = (int)((sizes[i] + 128 * KiB - 1) / (128 * KiB));
        right += rc == 0 && got == sizes[i] && k.bad == 0 && k.calls == calls &&
                 memcmp(k.data, want[i], sizes[i]) == 0;
        free(k.data);
        unlink(paths[i]);
        free(want[i]);
    }
    scan_io_stats st;
    scan_get_io_stats(s, &st);
    *requests = st.requests;
    return right;
}

/* 4 chunks a request: a 24 MiB file in about a quarter of the requests, byte-exact. */
static void test_larger_requests(void)
{
    scanner *s = open_at(4);
    PBT_CHECK(s != NULL);
    if (!s)
        return;
    bool uring = strcmp(scan_method(s), "io_uring+O_DIRECT") == 0;
    const size_t sizes[] = {24 * MiB + 8192 + 5};
    uint64_t requests = 0;
    PBT_CHECK(scan_files(s, sizes, 1, &requests) == 1);
    uint64_t chunks = (sizes[0] + 128 * KiB - 1) / (128 * KiB);
    printf("  %s%s: %llu requests for %llu chunks at 4 chunks a request\n", scan_method(s),
           s->fixed ? " (registered buffers)" : "",
           (unsigned long long)requests, (unsigned long long)chunks);
    if (uring) /* a request never wraps around the 8 slots: at most a few shorter ones */
        PBT_CHECK(requests <= chunks / 4 + 4);
    else
        PBT_CHECK(requests == chunks); /* pread: one chunk a request, as before */
    scan_free(s);
}

/* Files that end inside a request, one-chunk files read ahead (the read ahead is one
 * chunk and shifts the slots, so runs start at odd slots and must stop at the end), and
 * a multiple of 2: every byte in order. */
static void test_ends_and_wraps(void)
{
    const size_t sizes[] = {3 * 128 * KiB + 8192, 8192, 5 * 128 * KiB, 16384 + 7,
                            9 * 128 * KiB - 4096, 128 * KiB, 2 * MiB + 1};
    for (unsigned mult = 2; mult <= 4; mult += 2) {
        scanner *s = open_at(mult);
        PBT_CHECK(s != NULL);
        if (!s)
            return;
        uint64_t requests = 0;
        PBT_CHECK(scan_files(s, sizes, 7, &requests) == 7);
        printf("  %s at %u chunks a request: %llu requests\n", scan_method(s), mult,
               (unsigned long long)requests);
        scan_free(s);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbscansizeXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_larger_requests);
    PBT_RUN(test_ends_and_wraps);
    rmdir(tmpdir);
    return PBT_DONE();
}
