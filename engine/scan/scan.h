/*
 * engine/scan/scan.h — the O_DIRECT stripe scanner (prefix scan_). Reads a file front
 * to back in read_size requests with queue_depth of them in flight (io_uring when
 * available, pread otherwise), from 4096-aligned buffers, so nothing it reads
 * enters the page cache. Where O_DIRECT is refused (tmpfs) it falls back to
 * buffered reads followed by posix_fadvise(DONTNEED), warning once per scanner.
 */
#ifndef PB_ENGINE_SCAN_H
#define PB_ENGINE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

typedef struct scanner scanner;

typedef struct scan_opts {
    size_t read_size;     /* bytes per request, multiple of 4096; 0 = scan_default_read_size */
    unsigned queue_depth; /* requests in flight; default 4 */
    bool use_uring;       /* try io_uring first; falls back to pread if unavailable */
    bool direct;          /* use O_DIRECT (false only for tests/benchmarks) */
    bool adaptive;        /* queue_depth is a ceiling: the controller starts at one in
                           * flight and adapts (docs/DESIGN.md, "Polite I/O") */
    const char *device_path; /* a path on the device to watch for others' reads (NULL:
                              * none); with adaptive only */
    int ioprio;           /* I/O priority on every request (scan_io_class_parse); 0 = the
                           * thread's own */
    const char *device_stat; /* a /sys/block/<dev>/stat-format file to watch instead of
                              * device_path's (unit tests feed made-up counters) */
    double budget;        /* others' read latency allowed while they read, times theirs
                           * while the scan does not read (0: 1.3) */
} scan_opts;

#define SCAN_OPTS_DEPTH_DEFAULT 4u
#define SCAN_OPTS_INIT {0, SCAN_OPTS_DEPTH_DEFAULT, true, true, false, NULL, 0, NULL, 0}

/* The read buffers scan_open allocates for o (each read_size bytes): the depth, and one
 * more when the depth is pinned, so a chunk is checked while the next read is in flight. */
unsigned scan_buffers(const scan_opts *o);

/* What the scanner's controller did, for the log and the backup report. Counts are
 * decisions, not requests, except requests. */
typedef struct scan_io_stats {
    bool adaptive;           /* false: pinned by --queue-depth, --read-size or --max-rate */
    unsigned depth_start;    /* requests in flight at the start */
    unsigned depth_final;    /* ... at the end */
    unsigned depth_peak;     /* ... at most */
    uint64_t requests;       /* completed read requests */
    uint64_t overlapped;     /* chunks whose read was submitted before the chunk before them
                              * (in this file or the one before) was done being checked and
                              * hashed: the device was kept busy meanwhile; of chunks */
    uint64_t grows;          /* one more in flight: throughput rose, latency near floor */
    uint64_t plateaus;       /* one fewer: the last one added bought under 10% */
    uint64_t cuts;           /* halved: latency climbed over twice the floor */
    uint64_t yields;         /* times others' reads made the scan steer by their cost */
    uint64_t resumes;        /* times they stopped */
    uint64_t pauses;         /* pauses taken: at the bottom step still over budget, and
                              * the quiet windows */
    double pause_seconds;    /* their total */
    double latency_floor_ms; /* lowest completion latency seen */
    double foreground_reads_per_s_peak; /* others' reads on the device, highest seen */
    bool device_watched;     /* the device's counters were read */
    unsigned member_disks_watched; /* an md array's member disks watched beside it */
    uint64_t own_device_reads; /* device requests our reads became (kept out of others') */
    double wait_seconds;     /* the scanning thread waiting for its reads (stage timing) */
    double latency_floor_median_ms; /* the controller's floor: lowest epoch median at one
                                     * request of the base size (0: no epoch closed) */
    uint64_t size_grows;     /* requests made twice as large: they bought 10% or more */
    uint64_t size_plateaus;  /* taken back: they bought under 10% */
    size_t request_bytes_peak;  /* largest request size asked for (the read size if pinned) */
    size_t request_bytes_final; /* ... at the end */
    double depth_gain_pct;   /* what the latest added request bought, percent */
    double size_gain_pct;    /* what the latest larger size bought, percent */
    char decision[200];      /* the latest growth, plateau or cut, in words */
    /* The check stage: the callback runs on a thread of its own while the reading thread
     * reads ahead into the other buffers (engine/scan/scan_check.c). */
    uint64_t chunks;         /* chunks handed to the callback */
    uint64_t paused_chunks;  /* of those not overlapped, the ones whose read the controller
                              * held back with a yielding pause (its policy, not the checks) */
    uint64_t check_waits;    /* times the reading thread waited for the checks to free a
                              * buffer (every one held by a chunk read but not checked) */
    double check_wait_seconds; /* its waits for the checks, those and at files' ends */
    double check_seconds;    /* the check thread in the callback */
    double check_cpu_seconds; /* ... its CPU (user + sys) */
    /* Steering by others' read latency while they read (engine/scan/scan_devstat.c). */
    double budget;           /* the ratio allowed */
    double others_ms;        /* others' mean read latency, the latest window judged */
    double others_base_ms;   /* ... while the scan did not read (the quiet windows) */
    double others_ratio_peak; /* the highest ratio of a window judged */
    uint64_t steer_ups;      /* steps up the ladder: others' latency within budget */
    uint64_t steer_downs;    /* steps down: over budget */
    uint64_t unclear_windows; /* held: others' latency under half their baseline (ours,
                               * seen late by the reading thread, took theirs out) */
    uint64_t quiet_windows;  /* windows read nothing to measure the baseline */
    uint64_t quiet_given_up; /* ... could not begin (our reads still in flight) */
    double quiet_seconds;    /* their total (part of pause_seconds) */
    double steer_seconds;    /* time spent steering (others reading) */
    unsigned steer_depth;    /* requests in flight of the latest step */
    size_t steer_bytes;      /* request size of the latest step */
} scan_io_stats;

int scan_open(scanner **out, const scan_opts *opts, pb_error *err);
void scan_free(scanner *s);

/* Called with consecutive chunks of the file in order, one call at a time, on the
 * scanner's check thread (not the caller's: the reading thread goes on reading meanwhile;
 * the calls of one scan happen between its start and its return, so state the callback
 * shares with the caller needs no lock). offset is the chunk's file offset; len is
 * read_size except for the last chunk (file tail, possibly not a multiple of 8192). data
 * is valid only during the call. A non-zero return stops the scan and is returned by
 * scan_file. */
typedef int (*scan_chunk_cb)(void *ctx, uint64_t offset, const uint8_t *data, size_t len);

/* Scan path. A file that vanished before open returns PB_ENOENT (the caller treats
 * it as dropped). A file that shrinks during the scan ends early; one that grows is
 * read up to the size seen at open. *size_out (may be NULL) receives the bytes
 * delivered. */
int scan_file(scanner *s, const char *path, scan_chunk_cb cb, void *ctx, uint64_t *size_out,
              pb_error *err);

/* Name the file the caller will scan_file next (NULL: none known). The scanner may then
 * open it and submit its first read while the current file's last chunk is still being
 * checked, so the device does not idle between files (most of a data directory's files
 * are a single request). A read ahead for a file that is not scanned next is dropped. */
int scan_set_next(scanner *s, const char *path, pb_error *err);

/* A run of whole pages of a file: pages [first, first + count). */
typedef struct scan_range {
    uint32_t first, count;
} scan_range;

/* What scan_ranges did. */
typedef struct scan_ranges_result {
    uint64_t size;     /* the file's size as read: at open, or where a short read found
                        * its end (the file shrank meanwhile) */
    uint64_t bytes;    /* bytes delivered: the ranges' pages and the gaps read through */
    uint64_t requests; /* read requests made */
} scan_ranges_result;

/* Read only the pages of ranges r[0..n) of path (sorted, not overlapping), as few
 * requests as sensible: ranges fewer than gap_pages pages apart are read as one request
 * (reading a few unneeded pages costs less than another request; they are delivered
 * too), and no request exceeds the read size. The requests go through the scanner's
 * queue exactly as scan_file's do: O_DIRECT, the controller's depth, I/O priority,
 * yielding, own-device-read accounting. cb receives the chunks in file order (offset
 * ascending, not back to back). Pages past the file's size at open are not read. A file
 * that vanished returns PB_ENOENT. out may be NULL. */
int scan_ranges(scanner *s, const char *path, const scan_range *r, size_t n,
                uint32_t gap_pages, scan_chunk_cb cb, void *ctx, scan_ranges_result *out,
                pb_error *err);

/* Re-read len bytes at offset of path (for a checksum retry), bypassing the cache. */
int scan_reread(scanner *s, const char *path, uint64_t offset, void *buf, size_t len,
                pb_error *err);

/* Which path is in use: "io_uring+O_DIRECT", "pread+O_DIRECT", "buffered+fadvise". */
const char *scan_method(const scanner *s);

/* The stripe size to read by default: md RAID chunk_size x data disks of the device
 * holding path (from /sys/block), else 1 MiB. why receives a one-line reason. */
size_t scan_default_read_size(const char *path, char *why, size_t why_len);

/* The same decision starting from a block device's sysfs directory (what
 * /sys/dev/block/MAJ:MIN points to): follows partition -> disk and a single slave of
 * a stacked device (LVM, dm-crypt) to an md array. Exposed so tests can point it at
 * a fake sysfs tree. */
size_t scan_stripe_from_sysfs(const char *sys_dev_dir, char *why, size_t why_len);

/* How a backup reads the data directory: one decision per command, made by
 * scan_plan_io and used as is by the backup (scan_opts) and by `pageback tune`.
 * Decisions read the fields; why is for people only (logs, tune) and is never parsed. */
typedef enum scan_layout {
    SCAN_LAYOUT_GIVEN,   /* the read size was given; the device was not probed */
    SCAN_LAYOUT_SINGLE,  /* no md stripe found: a single device (or unknown) */
    SCAN_LAYOUT_STRIPED, /* an md RAID stripe was found under the path */
} scan_layout;

typedef struct scan_io_plan {
    scan_layout layout;
    size_t read_size;     /* bytes per request, whole pages */
    unsigned queue_depth; /* requests in flight (pinned; the old static plan) */
    bool adaptive;        /* neither size nor depth given: the controller adapts from one
                           * request in flight up to depth_max */
    unsigned depth_max;   /* buffers to allocate: queue_depth when pinned */
    char why[256];        /* how read_size was chosen ("" when given) */
} scan_io_plan;

/* Plan the reads of the files under path. read_size and queue_depth are the user's
 * settings, 0 for automatic: a given value is kept. Automatic on an md array: the
 * stripe (scan_default_read_size) x 8 in flight; on a single device 512 KiB x 2; with
 * a given read size, 8 in flight. Never fails: what cannot be probed is planned as a
 * single device, and why says so. */
void scan_plan_io(const char *path, size_t read_size, unsigned queue_depth,
                  scan_io_plan *out);

/* Totals since scan_open. */
uint64_t scan_bytes_read(const scanner *s);

/* The controller's counts since scan_open. */
void scan_get_io_stats(const scanner *s, scan_io_stats *out);

/* I/O scheduling class of the scan (--io-class). */
typedef enum scan_io_class {
    SCAN_IO_IDLE = 0,   /* idle (default); best-effort 7 where idle is refused */
    SCAN_IO_BEST_EFFORT,
    SCAN_IO_DEFAULT,    /* leave the process's own priority */
} scan_io_class;

/* Set the calling thread's I/O priority (threads it starts later inherit it): idle,
 * falling back to best-effort 7 when idle is refused. *ioprio_out receives the value for
 * scan_opts.ioprio; applied (may be NULL) a description of what was applied and whether
 * the scheduler of the device under path honours it ("idle; scheduler mq-deadline
 * honours it"). Never fails: a refusal is described. */
void scan_io_class_apply(scan_io_class cls, int level, const char *path, int *ioprio_out,
                         char *applied, size_t len);

#endif
