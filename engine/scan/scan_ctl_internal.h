/*
 * engine/scan/scan_ctl_internal.h — the scanner's delay-based controller (prefix scan_ctl_),
 * private to engine/. A pure state machine: the scanner feeds it completion samples
 * (bytes, latency) and the device's read counter, and asks it how many requests to keep
 * in flight and whether to pause before the next one. It reads no clock and no file, so
 * tests drive it with made-up samples (tests/unit/engine/scan/scan_ctl_test.c).
 *
 * The policy (docs/DESIGN.md, "Polite I/O"), in the spirit of TCP Vegas and LEDBAT's
 * scavenger class: start with one request in flight and remember the unloaded floor (the
 * lowest median latency of an epoch at one request of the base size: one request's
 * latency scatters, a median of many does not); add one request only while throughput
 * rises by a tenth or more and latency stays near the floor; when a second request does
 * not pay, try larger requests of the base size times 2, then 4, kept only when they pay
 * the same tenth; halve what is in flight (then the size) when latency climbs; drop to
 * one request of the base size with pauses while other processes read from the device.
 *
 * While other processes read the device the controller steers by what its reads cost
 * them (engine/scan/scan_devstat.c): their mean read latency, from the device's counters with
 * this scanner's own reads taken out, against the same latency measured while it does
 * not read (a short quiet window now and then). Within budget x that baseline it steps
 * up a ladder of request sizes and bytes in flight (64 KiB, 128 KiB, ... one in flight,
 * then more in flight); over it, it steps down; only at the bottom step and still over
 * does it pause before each request.
 */
#ifndef PB_ENGINE_SCAN_CTL_INTERNAL_H
#define PB_ENGINE_SCAN_CTL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/scan/scan.h"

/* What the latest call decided; decisions are read from this, never from msg. */
typedef enum scan_ctl_event {
    SCAN_CTL_NONE = 0, /* nothing changed */
    SCAN_CTL_GROW,     /* one more request in flight; steering: a step up */
    SCAN_CTL_PLATEAU,  /* the last request added bought no throughput: one fewer, hold */
    SCAN_CTL_CUT,      /* latency climbed: in flight halved; steering: a step down */
    SCAN_CTL_YIELD,    /* other processes read from the device: steering by their cost */
    SCAN_CTL_RESUME,   /* they stopped: probing again from one in flight */
    SCAN_CTL_KEPT,     /* the last step (a request more, a larger size) paid: kept;
                        * steering: a quiet window gave the others' baseline */
    SCAN_CTL_SIZE_GROW,    /* requests twice as large (depth 2 did not pay) */
    SCAN_CTL_SIZE_PLATEAU, /* the larger requests bought no throughput: back, hold */
} scan_ctl_event;

#define SCAN_CTL_EPOCH_KEEP 128u /* latencies an epoch keeps for its median (the latest) */
#define SCAN_CTL_LEVELS 24u      /* steps of the ladder steered by others' latency */
#define SCAN_CTL_BUDGET 1.3      /* others' read latency allowed, times their baseline */

typedef struct scan_ctl {
    /* configuration */
    unsigned max_depth;     /* buffers the scanner has: the ceiling */
    bool pinned;            /* --queue-depth/--read-size/--max-rate: never adapt */
    double yield_reads;     /* others' reads per second that make it steer by their cost */
    size_t full_bytes;      /* requests this big or bigger (0: all) set the floor and the
                             * epoch's latency: a small file's read is quick for its size,
                             * and a floor taken from it would forbid every growth */
    size_t base_bytes;      /* the request size at mult 1; latencies of larger requests are
                             * scaled to it, so all compare with the floor (0: not scaled) */
    unsigned mult_max;      /* largest request size, in base sizes (1: the size is fixed) */
    /* state */
    unsigned depth;         /* requests allowed in flight now */
    unsigned mult;          /* request size now, in base sizes (1, 2, 4 ...) */
    bool yielding, plateau;
    bool size_probe;        /* prev_tput was measured at mult / 2, not at depth - 1 */
    bool size_held;         /* the size axis was probed and holds (until a re-probe) */
    bool kept;              /* the step prev_tput was measured before has paid */
    double floor_s;         /* lowest epoch median latency at depth 1, mult 1 (0 = none) */
    double ep_start;
    double ep_lats[SCAN_CTL_EPOCH_KEEP]; /* the epoch's full-size latencies (a ring) */
    uint64_t ep_bytes;
    unsigned ep_n;          /* full-size completions in the epoch */
    double prev_tput;       /* bytes/s of the previous epoch at depth - 1 (0 = none) */
    unsigned calm_epochs;   /* epochs held since the plateau (re-probe after a while) */
    double pause_until;     /* no submission before this time */
    bool dev_have;          /* a first device sample was taken */
    double dev_t;           /* the latest device sample (steering time is counted from it) */
    /* steering by others' read latency while they read (scan_devstat.c); yielding is
     * set while it does */
    double budget;          /* others' latency allowed, times their baseline (0: 1.3) */
    unsigned level, nlevels; /* the ladder's step now, and its steps */
    size_t lv_bytes[SCAN_CTL_LEVELS]; /* per step: request size ... */
    unsigned lv_depth[SCAN_CTL_LEVELS]; /* ... and requests in flight */
    double base_ms;         /* others' mean read latency while this scanner did not read */
    double base_at;         /* when it was measured (0: never) */
    bool quiet;             /* a quiet window is due or running: nothing is submitted */
    bool quiet_open;        /* ... it runs: the window below started with nothing in flight */
    bool steered;           /* a baseline was had since others began: steps were taken */
    bool base_ahead;        /* base_ms was taken before the scan read anything */
    double quiet_t0;        /* when the quiet window was asked for */
    double steer_rate;      /* others' reads/s when steering began */
    double hold_until;      /* no steering before (no baseline could be had) */
    double pause_s;         /* the pause before each request at the bottom step (0: none) */
    double win_t;           /* the window of device counters being judged: its start */
    uint64_t win_reads, win_ticks, win_own_reads;
    double win_own_ticks, win_own_floor;
    uint64_t win_own_bytes;
    uint64_t win_read_bytes, win_own_other_bytes;
    bool win_have;
    scan_ctl_event last;
    char msg[200];          /* the latest decision in words, for the log */
    scan_io_stats st;
} scan_ctl;

/* The counters of one /sys/block/<dev>/stat line (Documentation/block/stat.rst). */
typedef struct scan_dev_counters {
    uint64_t reads, read_sectors, writes, write_sectors, in_flight;
    uint64_t read_ticks;    /* ms the completed reads took, summed */
} scan_dev_counters;

/* One look at the device: its cumulative counters (an md array's plus its members' direct
 * reads) beside this scanner's own, cumulative too, counted as its reads complete. */
typedef struct scan_dev_sample {
    uint64_t reads, read_ticks_ms, in_flight;
    uint64_t own_reads;     /* device requests our reads became (split at max_sectors_kb) */
    double own_ticks_ms;    /* their latencies summed, each split part counted whole */
    double own_floor_ms;    /* ... each counted at the lowest latency seen at its size
                             * instead (a reading thread scheduled late inflates none) */
    uint64_t own_bytes;
    unsigned own_inflight;  /* our requests submitted and not yet complete */
    /* The device's bytes read, and ours that were not the scan's own direct reads (the
     * repository's files, the program: /proc/self/io less the scan's requests); both 0
     * when unknown (an md array: its members' reads are counted apart). */
    uint64_t read_bytes, own_other_bytes;
} scan_dev_sample;

/* Start at one request in flight (max_depth when pinned). */
void scan_ctl_init(scan_ctl *c, unsigned max_depth, bool pinned);

/* One completed request of bytes that took latency_s, seen at time now (seconds). */
scan_ctl_event scan_ctl_sample(scan_ctl *c, double now, size_t bytes, double latency_s);

/* A look at the device at time now (scan_devstat.c). Others' reads are the device's less
 * our own; once they read, steers by their latency (see above). A sample closer than
 * 0.1 s after the window's start only waits for more. */
scan_ctl_event scan_ctl_device(scan_ctl *c, double now, const scan_dev_sample *d);

/* A look at the device just before the scan's first read (scan_devstat.c): others' reads
 * since the first look, none of them ours, give their baseline without a quiet window. */
void scan_ctl_prescan(scan_ctl *c, double now, const scan_dev_sample *d);

/* The largest request to make now, bytes, when below the base size (a chunk is then read
 * in several); 0: no cap. */
size_t scan_ctl_request_cap(const scan_ctl *c);

/* Whether a quiet window holds the next request back at time now (false once it could
 * not begin within a second: it is then given up until the next one is due). */
bool scan_ctl_quiet_wait(scan_ctl *c, double now);

/* Build the ladder from the sizes (scan_ctl_sizes calls it). */
void scan_ctl_ladder(scan_ctl *c);

/* Requests to keep in flight now (1..max_depth). */
unsigned scan_ctl_depth(const scan_ctl *c);

/* Size of the next request, in base sizes (1..mult_max; 1 when pinned). */
unsigned scan_ctl_mult(const scan_ctl *c);

/* The request size at mult 1 and the largest multiple the scanner's buffers allow (the
 * controller also keeps twice a request's size free, so the next one can go out while
 * one is checked). Call once after scan_ctl_init. */
void scan_ctl_sizes(scan_ctl *c, size_t base_bytes, unsigned mult_max);

/* Seconds to wait before submitting the next request (0 = go), at time now; the wait
 * is counted in the stats. */
double scan_ctl_pause(scan_ctl *c, double now);

/* Parse the text of a /sys/block/<dev>/stat file. PB_EINVAL when it is not one. */
int scan_ctl_parse_stat(const char *text, scan_dev_counters *out);

/* The sysfs stat file of the whole disk (or md/dm array) holding path, and the largest
 * request it takes (queue/max_sectors_kb, 0 when unknown). PB_ENOENT when path is on no
 * block device (tmpfs, overlay without one). In scan_stripe.c, beside the other sysfs
 * reading. */
int scan_device_stat(const char *path, char *stat_path, size_t len, size_t *max_io);

/* ---- the members of an md array (scan_members.c) ----
 * Others may read an array's disks without going through it: another array or a
 * partition on the same disks. The array's counters miss those reads; its members'
 * whole-disk counters hold them, next to the array's own traffic split into chunks. */
#define SCAN_MEMBERS_MAX 32

typedef struct scan_members {
    size_t n;
    size_t chunk_bytes;                /* md/chunk_size (0: unknown: no split assumed) */
    char stat[SCAN_MEMBERS_MAX][4096]; /* each member's whole disk's stat file */
} scan_members;

/* The members of the array whose sysfs directory is dev_dir (dev_dir/slaves/ *; a
 * partition counts as its whole disk). PB_ENOENT when dev_dir is no md array. */
int scan_device_members(const char *dev_dir, scan_members *out);

/* Reads on the members that the array's own reads do not explain, summed over samples
 * (never decreasing). Call with cumulative counters; the first call sets the baseline. */
typedef struct scan_member_track {
    bool have;
    uint64_t md_reads, md_sectors, member_reads;
    uint64_t direct;
} scan_member_track;

uint64_t scan_members_direct(scan_member_track *t, uint64_t md_reads, uint64_t md_sectors,
                             uint64_t member_reads, size_t chunk_bytes);

#endif
