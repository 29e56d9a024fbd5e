/*
 * engine/scan/scan_queue_internal.h — what scan.c (opening files, the public calls) and
 * scan_queue.c (the request queue: io_uring or pread, pacing, delivery in file order)
 * share, private to the scanner. Split so each file holds one concern.
 */
#ifndef PB_ENGINE_SCAN_QUEUE_INTERNAL_H
#define PB_ENGINE_SCAN_QUEUE_INTERNAL_H

#include "engine/scan/scan.h"
#include "engine/scan/scan_ctl_internal.h"
#include "engine/scan/scan_internal.h"

#include <liburing.h>
#include <pthread.h>
#include <sys/types.h>

#define QUEUE_DEPTH_MAX 1024u
#define SCAN_REQUEST_MAX (2u * 1024 * 1024) /* largest request the controller may try */

/* An open file being scanned. */
typedef struct scan_fd {
    int fd;
    bool direct;   /* opened with O_DIRECT */
    uint64_t size; /* st_size at open: the scan never reads past it */
    const scan_span *spans; /* the requests of a ranged read (scan_ranges.c); NULL: the
                             * whole file in read_size chunks */
    uint64_t nspans;        /* spans that start before size */
} scan_fd;

/* The next file's first request, submitted while the current file's last chunk was still
 * being checked (scan_set_next), so the device does not idle between two files. Always
 * complete once the current file's scan returns (its queue is drained). */
typedef struct scan_carry {
    bool ready;     /* f is open and its chunk 0 was read into slot */
    char *path;     /* the file it belongs to */
    scan_fd f;
    unsigned slot;  /* the buffer slot holding chunk 0 */
    int res;        /* its completion result */
} scan_carry;

/* One chunk read and waiting for its checks. */
typedef struct scan_check_item {
    uint64_t off;
    const uint8_t *data; /* in a slot of the scanner's buffers */
    size_t len;
    double submitted;    /* when its read was submitted (pb_now) */
    bool paused;         /* the controller paused just before that (yielding) */
} scan_check_item;

/* The check stage (scan_check.c): a thread that runs the scan callback on the chunks the
 * reading thread hands it, in order, so the reading thread only reads. queued and checked
 * count this scan's chunks; a chunk's buffer is the reader's again once it is checked. The
 * counters below the lock's fields are the check thread's, read by the scanner's owner
 * between scans. */
typedef struct scan_check {
    bool started;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    scan_check_item *q;  /* cap entries, a ring */
    unsigned cap;        /* the scanner's buffers: at most that many outstanding */
    scan_chunk_cb cb;
    void *ctx;
    uint64_t queued, checked;
    int rc;              /* the first non-zero callback return: later chunks are skipped */
    uint64_t bytes;      /* this scan's bytes handed to the callback (read ahead past a
                          * stop is not delivered) */
    bool quit;
    /* the check thread's own */
    bool first_done;     /* a chunk was checked (last_end is set) */
    double last_end;     /* when the latest chunk's checks ended */
    uint64_t chunks;     /* chunks checked since scan_open */
    uint64_t overlapped; /* ... whose read was submitted before the chunk before them was
                          * done being checked */
    uint64_t paused;     /* ... not overlapped, their read held back by a yielding pause */
    double busy_s;       /* in the callback */
    double cpu_s;        /* CPU used in the callback */
} scan_check;

struct scanner {
    size_t read_size;
    unsigned queue_depth; /* buffer slots (scan_buffers); the controller sets how many fly */
    bool direct;         /* try O_DIRECT */
    bool ring_ok;        /* io_uring initialised */
    bool fixed;          /* bufs registered with the ring (no page pinning per read) */
    bool warned;         /* the buffered-fallback warning was given */
    const char *method;  /* path used by the latest scan (or the one planned) */
    uint8_t *bufs;       /* queue_depth * read_size, PB_ALIGN aligned */
    uint64_t bytes_read;
    int ioprio;          /* put on every io_uring request (0 = the thread's) */
    int stat_fd;         /* the device's /sys/block/<dev>/stat, -1 when not watched */
    int member_fd[SCAN_MEMBERS_MAX]; /* an md array's member disks' stat files */
    size_t nmembers;
    size_t md_chunk;     /* the array's chunk: its own reads split there on the members */
    scan_member_track members;
    size_t dev_max_io;   /* largest request the device takes (queue/max_sectors_kb) */
    uint64_t own_dev_reads; /* device requests our completed reads became */
    double own_ticks_ms; /* ... their latencies, summed as the device sums its read ticks */
    double own_floor_ms; /* ... each at the lowest latency seen at its size class */
    double lat_min[64];  /* per size class (bit length of the bytes): lowest latency, ms */
    uint64_t bytes_done; /* bytes our completed reads returned */
    unsigned own_inflight; /* our io_uring requests submitted, not yet reaped */
    uint64_t own_inflight_bytes; /* ... and the bytes they asked for */
    int io_fd;           /* /proc/self/io: this process's reads from the device, -1 if not */
    bool prescanned;     /* the look before the first read was taken (scan_ctl_prescan) */
    double dev_read_at;  /* when stat_fd was last read */
    double wait_s;       /* waiting for reads: completions, preads (bk_stages) */
    scan_ctl ctl;
    double t_sub[QUEUE_DEPTH_MAX]; /* per slot: when its request was submitted */
    struct io_uring ring;
    char *next_path;     /* scan_set_next: the file the caller reads whole next */
    scan_carry carry;    /* its first request, read ahead (scan_queue.c) */
    scan_check check;    /* the check stage (scan_check.c) */
    double check_wait_s; /* the reading thread waiting for the checks: every buffer held
                          * by a chunk not yet checked, or a file's last chunks */
    uint64_t check_waits; /* times it waited for a buffer */
    bool paused;         /* a yielding pause was slept since the latest request */
    bool paused_sub[QUEUE_DEPTH_MAX]; /* per slot: its request followed a pause */
    double rest_t0;      /* read_chunk_rest: when the chunk's first request went out */
    double reread_wait_s; /* scan_reread's waits: it runs on the check thread */
    uint64_t reread_bytes;
};


/* Open s->next_path for a carried read into *f (O_DIRECT only: false when it cannot be
 * carried; the scan of that file then opens it as usual and reports what is wrong). */
/* Open path for reading (scan_open.c), O_DIRECT when s wants it and the file system takes
 * it, else buffered (warn: say so once). Not a regular file: PB_EINVAL; absent: PB_ENOENT. */
int scan_open_fd(scanner *s, const char *path, bool warn, scan_fd *out, pb_error *err);
bool scan_open_next(scanner *s, scan_fd *f);
/* Forget the carried read (its request is complete): close its file. */
void scan_carry_drop(scanner *s);
/* ---- the look at the device (scan_watch.c) ----
 * The first look, when the scanner opens: others' reads from then until the first read
 * are a baseline taken while the backup prepares (scan_ctl_prescan). */
void scan_watch_start(scanner *s);
/* The look just before the first read (sets s->prescanned). */
void scan_watch_prescan(scanner *s);
/* A look at time now, at most one per 20 ms; the controller's decision is logged. */
void scan_watch_device(scanner *s, double now);
/* One of our requests completed (res bytes or a negative errno) after being submitted at
 * that time: counted as ours, its latency to the controller, then a look. */
void scan_note_completion(scanner *s, double submitted, int res);

/* Read the chunks of f (the whole file, or its spans) with the scanner's queue, in file
 * order, to cb; *delivered counts the bytes handed over. io_uring when the ring is up,
 * else pread. */
int scan_queue_read(scanner *s, const char *path, const scan_fd *f, scan_chunk_cb cb,
                    void *ctx, uint64_t *delivered, pb_error *err);

/* The check stage. begin: before a scan, with its callback (starts the thread on first
 * use; cap = the scanner's buffers). push: hand a chunk over, returns the callback's first
 * failure so far. done: chunks checked. wait: block until upto chunks are checked (or all
 * pushed are), adding the time to *wait_s; returns the first failure. stop: end the
 * thread (scan_free). */
int scan_check_begin(scan_check *c, unsigned cap, scan_chunk_cb cb, void *ctx, pb_error *err);
int scan_check_push(scan_check *c, uint64_t off, const uint8_t *data, size_t len,
                    double submitted, bool paused);
uint64_t scan_check_done(scan_check *c);
int scan_check_wait(scan_check *c, uint64_t upto, double *wait_s);
void scan_check_stop(scan_check *c);

/* Complete a read of want bytes at off into buf (capacity cap, a multiple of PB_ALIGN)
 * of which got bytes are already there; see scan_queue.c. Bytes in buf, or -errno. */
ssize_t scan_read_rest(const scan_fd *f, uint8_t *buf, size_t cap, uint64_t off, size_t got,
                       size_t want);

static inline size_t scan_round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

#endif
