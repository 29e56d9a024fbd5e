/* tests/unit/engine/scan/scan_sink.h — what a scan's callback saw, shared by the scanner's
 * runners (scan_test.c, scan_cache_test.c). */
#ifndef PB_TESTS_SCAN_SINK_H
#define PB_TESTS_SCAN_SINK_H

#include "tests/unit/fixtures.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* What the callback saw. */
typedef struct sink {
    uint8_t *data;
    size_t cap;
    uint64_t next_off; /* chunks must arrive in order, back to back */
    size_t read_size;
    int calls;
    int bad_order, bad_len, overflow;
    int stop_at_call; /* return stop_value from this call (1-based); 0 = never */
    int stop_value;
    const char *mutate_path; /* on the first call: truncate to / extend by mutate_len */
    off_t truncate_to;
    size_t append_len;
} sink;

static inline int sink_cb(void *ctx, uint64_t offset, const uint8_t *data, size_t len)
{
    sink *k = ctx;
    k->calls++;
    if (offset != k->next_off)
        k->bad_order++;
    if (len == 0 || len > k->read_size)
        k->bad_len++;
    if (offset + len > k->cap)
        k->overflow++;
    else
        memcpy(k->data + offset, data, len);
    k->next_off = offset + len;
    if (k->calls == 1 && k->mutate_path) {
        if (k->truncate_to >= 0 && truncate(k->mutate_path, k->truncate_to) != 0)
            perror("truncate");
        if (k->append_len) {
            int fd = open(k->mutate_path, O_WRONLY | O_APPEND);
            uint8_t *extra = pbt_random_bytes(k->append_len, 99);
            if (fd < 0 || write(fd, extra, k->append_len) != (ssize_t)k->append_len)
                perror("append");
            free(extra);
            if (fd >= 0)
                close(fd);
        }
    }
    if (k->stop_at_call && k->calls == k->stop_at_call)
        return k->stop_value;
    return 0;
}

static inline sink sink_make(size_t cap, size_t read_size)
{
    sink k;
    memset(&k, 0, sizeof(k));
    k.data = calloc(1, cap ? cap : 1);
    k.cap = cap;
    k.read_size = read_size;
    k.truncate_to = -1;
    return k;
}

/* Last complete chunk length expected for a file of size n read in rs pieces. */
static inline int expected_calls(size_t n, size_t rs) { return (int)((n + rs - 1) / rs); }

#endif
