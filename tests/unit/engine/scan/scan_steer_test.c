/* tests/unit/engine/scan_steer_test.c — steering by what the scan's reads cost the other
 * readers of the device (engine/scan_devstat.c), driven with made-up device counters: a
 * fake /sys/block/<dev>/stat source whose reads and read ticks grow as the test says, and
 * the scanner's own reads beside them. No disk. */
#include "engine/scan/scan_ctl_internal.h"

#include <stdio.h>
#include <string.h>

#include "tests/unit/pbtest.h"

#define KiB ((size_t)1024)

/* The device's counters and ours, cumulative, as the scanner hands them over. */
typedef struct fake_dev {
    scan_dev_sample d;
    double now;
} fake_dev;

/* dt seconds pass: others complete n reads of lat_ms each, we complete own reads of
 * own_ms each (own_inflight still out at the end); the controller looks. */
static scan_ctl_event look(scan_ctl *c, fake_dev *f, double dt, unsigned n, double lat_ms,
                           unsigned own, double own_ms, unsigned own_inflight)
{
    f->now += dt;
    f->d.reads += n + own;
    f->d.read_ticks_ms += (uint64_t)(n * lat_ms + own * own_ms);
    f->d.own_reads += own;
    f->d.own_ticks_ms += own * own_ms;
    f->d.own_floor_ms += own * own_ms;
    f->d.own_bytes += own * 128 * KiB;
    f->d.own_inflight = own_inflight;
    return scan_ctl_device(c, f->now, &f->d);
}

/* 512 KiB base requests, 8 buffers, sizes up to 4x: the ladder 64 KiB .. 2 MiB, one in
 * flight. */
static void setup(scan_ctl *c, fake_dev *f)
{
    memset(f, 0, sizeof(*f));
    f->now = 1;
    scan_ctl_init(c, 8, false);
    scan_ctl_sizes(c, 512 * KiB, 4);
}

/* setup, and the scanner's first look at the device (it opens the first window). */
static void watched(scan_ctl *c, fake_dev *f)
{
    setup(c, f);
    look(c, f, 0, 0, 0, 0, 0, 0);
}

/* Others start reading (1,000/s at 1 ms): the scan steers, measures their latency while
 * it does not read (a quiet window: it pauses), then reads at 128 KiB. */
static void start(scan_ctl *c, fake_dev *f)
{
    PBT_CHECK(look(c, f, 0, 0, 0, 0, 0, 0) == SCAN_CTL_NONE); /* the first look */
    PBT_CHECK(look(c, f, 0.1, 100, 1.0, 50, 4.0, 1) == SCAN_CTL_YIELD);
    PBT_CHECK(c->yielding && c->quiet);
    PBT_CHECK(scan_ctl_pause(c, f->now) > 0); /* nothing goes out during the quiet window */
    PBT_CHECK(look(c, f, 0.01, 10, 1.0, 1, 4.0, 0) == SCAN_CTL_NONE); /* ours complete */
    PBT_CHECK(look(c, f, 0.1, 100, 1.0, 0, 0, 0) == SCAN_CTL_KEPT);
    PBT_CHECK(!c->quiet && c->base_ms > 0.99 && c->base_ms < 1.01);
    PBT_CHECK(scan_ctl_pause(c, f->now) == 0);
    PBT_CHECK(scan_ctl_request_cap(c) == 128 * KiB && scan_ctl_depth(c) == 1);
    PBT_CHECK(c->st.quiet_windows == 1 && c->st.pauses == 1);
}

static void test_ladder(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    /* Up to 256 KiB one in flight while others read, whatever the buffers allow. */
    PBT_CHECK(c.nlevels == 3);
    PBT_CHECK(c.lv_bytes[0] == 64 * KiB && c.lv_bytes[1] == 128 * KiB);
    PBT_CHECK(c.lv_bytes[2] == 256 * KiB && c.lv_depth[2] == 1);
    scan_ctl_init(&c, 16, false);
    scan_ctl_sizes(&c, 512 * KiB, 2); /* more buffers than sizes: still the same top */
    PBT_CHECK(c.nlevels == 3 && c.lv_bytes[2] == 256 * KiB && c.lv_depth[2] == 1);
    scan_ctl_init(&c, 16, false);
    scan_ctl_sizes(&c, 64 * KiB, 1); /* a small base, no larger sizes: more in flight */
    PBT_CHECK(c.nlevels == 4 && c.lv_bytes[3] == 64 * KiB && c.lv_depth[3] == 4);
}

/* Within budget: one step up per window, our own slow reads notwithstanding, to the top. */
static void test_grows_within_budget(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    start(&c, &f);
    /* Ours take 5 ms each (they queue behind nothing but themselves); others 1.1 ms. */
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.1, 40, 5.0, 1) == SCAN_CTL_GROW);
    PBT_CHECK(scan_ctl_request_cap(&c) == 256 * KiB && scan_ctl_depth(&c) == 1);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.1, 40, 5.0, 1) == SCAN_CTL_NONE); /* the top */
    PBT_CHECK(scan_ctl_request_cap(&c) == 256 * KiB && scan_ctl_depth(&c) == 1);
    PBT_CHECK(c.st.steer_ups == 1 && c.st.steer_downs == 0 && c.st.pauses == 1);
    PBT_CHECK(c.st.others_ms > 1.09 && c.st.others_ms < 1.11);
    PBT_CHECK(strstr(c.st.decision, "up to 256 KiB x 1 in flight") != NULL);
    /* Between 0.9 and 1 of the budget: hold. */
    setup(&c, &f);
    start(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.25, 40, 5.0, 1) == SCAN_CTL_NONE);
    PBT_CHECK(scan_ctl_request_cap(&c) == 128 * KiB);
}

/* Over budget: one step down per window; at the bottom, pauses that double while it stays
 * over; back within budget, the pauses halve away before any step up. */
static void test_shrinks_then_pauses_at_the_bottom(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    start(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.5, 40, 5.0, 1) == SCAN_CTL_CUT);
    PBT_CHECK(scan_ctl_request_cap(&c) == 64 * KiB);
    PBT_CHECK(c.pause_s == 0 && scan_ctl_pause(&c, f.now) == 0); /* a step first */
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.5, 40, 5.0, 1) == SCAN_CTL_CUT);
    PBT_CHECK(scan_ctl_request_cap(&c) == 64 * KiB && c.pause_s > 0);
    double p1 = c.pause_s;
    PBT_CHECK(scan_ctl_pause(&c, f.now) > 0);
    PBT_CHECK(strstr(c.st.decision, "64 KiB x 1 in flight, pausing") != NULL);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.5, 40, 5.0, 1) == SCAN_CTL_CUT);
    PBT_CHECK(c.pause_s > 1.9 * p1);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 40, 5.0, 1) == SCAN_CTL_NONE);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 40, 5.0, 1) == SCAN_CTL_NONE);
    PBT_CHECK(c.pause_s > 0 && c.pause_s < p1 * 1.01);
    for (int i = 0; i < 4 && c.pause_s > 0; i++)
        look(&c, &f, 0.1, 100, 1.0, 40, 5.0, 1);
    PBT_CHECK(c.pause_s == 0 && scan_ctl_request_cap(&c) == 64 * KiB);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 40, 5.0, 1) == SCAN_CTL_GROW);
    PBT_CHECK(scan_ctl_request_cap(&c) == 128 * KiB);
    PBT_CHECK(c.st.steer_downs == 1 && c.st.others_ratio_peak > 1.49);
    /* A larger budget allows what 1.3x did not. */
    setup(&c, &f);
    c.budget = 2.0;
    start(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.5, 40, 5.0, 1) == SCAN_CTL_GROW);
}

/* Our own reads are not others': alone on the device, however many and slow, the scan does
 * not steer; and a request the block layer split counts every part as ours. */
static void test_own_reads_not_counted(void)
{
    scan_ctl c;
    fake_dev f;
    watched(&c, &f);
    for (int i = 0; i < 20; i++)
        PBT_CHECK(look(&c, &f, 0.1, 0, 0, 400, 8.0, 2) == SCAN_CTL_NONE);
    PBT_CHECK(!c.yielding && c.st.yields == 0 && c.st.foreground_reads_per_s_peak == 0);
    /* Steering: others at their baseline while ours are slow: within budget. */
    start(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 20, 1.0, 400, 20.0, 1) == SCAN_CTL_GROW);
    PBT_CHECK(c.st.others_ms > 0.99 && c.st.others_ms < 1.01);
    /* Ours seen later than the device completed them (the reading thread not scheduled at
     * once): their ticks taken out with ours leave others implausibly fast. No step up. */
    c.level = 0; /* back to the bottom: room to step up */
    unsigned lv = c.level;
    for (int over = 0; over < 2; over++) {
        f.now += 0.1; /* our 400 latencies 10% over what the device counted */
        f.d.reads += 420;
        f.d.read_ticks_ms += 400 * 20 + 20 * 1;
        f.d.own_reads += 400;
        f.d.own_ticks_ms += 400 * 22.0;
        /* Ours at their floor: 20 ms (theirs 1 ms: within), or 19.9 (theirs 3 ms: over, but
         * that estimate counts theirs high: a hold, not a step down). */
        f.d.own_floor_ms += 400 * (over ? 19.9 : 20.0);
        scan_ctl_event ev = scan_ctl_device(&c, f.now, &f.d);
        PBT_CHECK(ev == (over ? SCAN_CTL_NONE : SCAN_CTL_GROW));
        PBT_CHECK(c.level == lv + 1 && c.st.unclear_windows == (uint64_t)over + 1);
    }
    PBT_CHECK(c.st.steer_downs == 0);
}

/* On a fast device a rise under 0.25 ms is within budget whatever the ratio. */
static void test_slack(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    PBT_CHECK(look(&c, &f, 0, 0, 0, 0, 0, 0) == SCAN_CTL_NONE);
    PBT_CHECK(look(&c, &f, 0.1, 100, 0.1, 50, 4.0, 1) == SCAN_CTL_YIELD);
    look(&c, &f, 0.01, 10, 0.1, 1, 4.0, 0);
    PBT_CHECK(look(&c, &f, 0.1, 100, 0.1, 0, 0, 0) == SCAN_CTL_KEPT);
    PBT_CHECK(look(&c, &f, 0.1, 100, 0.3, 40, 0.4, 1) == SCAN_CTL_GROW); /* 3x, +0.2 ms */
    PBT_CHECK(look(&c, &f, 0.1, 100, 0.4, 40, 0.4, 1) == SCAN_CTL_CUT);  /* +0.3 ms */
}

/* Others stop: after a window with too few of their reads, back to the probing of an idle
 * device, from one request of the base size; no pauses. How long that window is follows
 * their rate when steering began: at 1,000/s eight reads come in 8 ms, so a judged window
 * (0.1 s) without them says they stopped; at 25/s only a second says so. */
static void test_resume_when_others_stop(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    start(&c, &f); /* others at 1,000/s */
    PBT_CHECK(look(&c, &f, 0.05, 0, 0, 40, 5.0, 1) == SCAN_CTL_NONE); /* not judged yet */
    PBT_CHECK(look(&c, &f, 0.06, 2, 1.0, 40, 5.0, 1) == SCAN_CTL_RESUME);
    PBT_CHECK(!c.yielding && scan_ctl_request_cap(&c) == 0 && scan_ctl_pause(&c, f.now) == 0);
    PBT_CHECK(scan_ctl_depth(&c) == 1 && scan_ctl_mult(&c) == 1 && c.st.resumes == 1);
    /* Others reading slowly (25/s) when steering began: a second of too few. */
    watched(&c, &f);
    PBT_CHECK(look(&c, &f, 0.4, 10, 1.0, 50, 4.0, 0) == SCAN_CTL_YIELD);
    PBT_CHECK(look(&c, &f, 0.01, 0, 0, 0, 0, 0) == SCAN_CTL_NONE); /* the quiet window opens */
    PBT_CHECK(look(&c, &f, 0.15, 10, 1.0, 0, 0, 0) == SCAN_CTL_KEPT);
    for (int i = 0; i < 9; i++)
        PBT_CHECK(look(&c, &f, 0.1, 0, 0, 40, 5.0, 1) == SCAN_CTL_NONE);
    PBT_CHECK(look(&c, &f, 0.15, 2, 1.0, 40, 5.0, 1) == SCAN_CTL_RESUME);
}

/* The baseline is measured again after a while: a quiet window every 10 s. */
static void test_rebase(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    start(&c, &f);
    for (int i = 0; i < 200 && !c.quiet; i++)
        look(&c, &f, 0.1, 100, 1.2, 40, 5.0, 1);
    PBT_CHECK(c.quiet && f.now > 10.5);
    PBT_CHECK(scan_ctl_pause(&c, f.now) > 0);
    look(&c, &f, 0.01, 0, 0, 1, 5.0, 0);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.2, 0, 0, 0) == SCAN_CTL_KEPT);
    PBT_CHECK(c.base_ms > 1.09 && c.base_ms < 1.11 && c.st.quiet_windows == 2);
}

/* A quiet window that cannot begin (a request of ours stays in flight) is given up after
 * a second: the scan never waits for it for good. */
static void test_quiet_given_up(void)
{
    scan_ctl c;
    fake_dev f;
    watched(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 50, 4.0, 1) == SCAN_CTL_YIELD);
    for (int i = 0; i < 9; i++) {
        PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 0, 0, 1) == SCAN_CTL_NONE);
        PBT_CHECK(scan_ctl_pause(&c, f.now) > 0);
    }
    PBT_CHECK(scan_ctl_pause(&c, f.now + 0.2) == 0);
    PBT_CHECK(!c.quiet && c.st.quiet_given_up == 1 && c.st.quiet_windows == 0);
    /* No baseline: back to the idle device's probing, not steering again for a while. */
    PBT_CHECK(!c.yielding && scan_ctl_request_cap(&c) == 0 && c.st.resumes == 1);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 0, 0, 1) == SCAN_CTL_NONE && !c.yielding);
    look(&c, &f, 10, 0, 0, 0, 0, 1); /* ten seconds of nothing from others */
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 0, 0, 1) == SCAN_CTL_YIELD);
    /* A quiet window with too few of others' reads to time: the same, and it pauses the
     * scan for at most 0.15 s. */
    watched(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 50, 4.0, 1) == SCAN_CTL_YIELD);
    look(&c, &f, 0.01, 0, 0, 1, 4.0, 0);
    PBT_CHECK(look(&c, &f, 0.16, 3, 1.0, 0, 0, 0) == SCAN_CTL_RESUME);
    PBT_CHECK(!c.yielding && c.hold_until > f.now + 9);
}

/* Our own other reads (the repository's files, buffered, on the same disk) reach the
 * device as anyone's: counted by bytes from /proc/self/io, they are taken out, and no
 * pause for a baseline follows. Others reading beside them still steer the scan. */
static void test_own_buffered_reads_not_counted(void)
{
    scan_ctl c;
    fake_dev f;
    setup(&c, &f);
    f.d.read_bytes = 1; /* known: counted from here */
    look(&c, &f, 0, 0, 0, 0, 0, 0);
    for (int i = 0; i < 10; i++) { /* 30 reads of 128 KiB a window, all ours: 300/s */
        f.d.read_bytes += 30 * 128 * KiB + 20 * 128 * KiB; /* look() adds our direct 20 */
        f.d.own_other_bytes += 30 * 128 * KiB;
        PBT_CHECK(look(&c, &f, 0.1, 30, 2.0, 20, 4.0, 1) == SCAN_CTL_NONE);
    }
    PBT_CHECK(!c.yielding && c.st.yields == 0 && c.st.foreground_reads_per_s_peak < 1);
    /* The same device traffic with half of it others' 8 KiB reads: they steer. */
    f.d.read_bytes += 30 * 128 * KiB + 60 * 8 * KiB + 20 * 128 * KiB;
    f.d.own_other_bytes += 30 * 128 * KiB;
    PBT_CHECK(look(&c, &f, 0.1, 90, 1.0, 20, 4.0, 1) == SCAN_CTL_YIELD);
}

/* Others that stop as steering begins (a burst, such as the archiver reading the segment
 * the backup's start closed): the quiet window waits for their reads a few times as long
 * as their rate says eight take (60 ms at 400/s), not QUIET_MAX, before reading on. */
static void test_quiet_short_after_burst(void)
{
    scan_ctl c;
    fake_dev f;
    watched(&c, &f);
    PBT_CHECK(look(&c, &f, 0.1, 40, 1.0, 50, 4.0, 0) == SCAN_CTL_YIELD);
    PBT_CHECK(look(&c, &f, 0.005, 0, 0, 0, 0, 0) == SCAN_CTL_NONE); /* the window opens */
    PBT_CHECK(look(&c, &f, 0.03, 0, 0, 0, 0, 0) == SCAN_CTL_NONE);
    PBT_CHECK(look(&c, &f, 0.04, 0, 0, 0, 0, 0) == SCAN_CTL_RESUME);
    PBT_CHECK(!c.yielding && c.st.pause_seconds < 0.08);
}

/* Others read while the backup prepared (the checkpoint, the walk): their latency then,
 * none of it ours, is the baseline, and steering starts at the entry step without a quiet
 * window. Without such reads before the scan, the quiet window is taken as before. */
static void test_baseline_before_the_scan(void)
{
    scan_ctl c;
    fake_dev f;
    watched(&c, &f); /* the scanner opens */
    f.now += 0.05;
    f.d.reads += 30;
    f.d.read_ticks_ms += 30; /* 1 ms each */
    scan_ctl_prescan(&c, f.now, &f.d);
    PBT_CHECK(c.base_ms > 0.99 && c.base_ms < 1.01);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 50, 4.0, 1) == SCAN_CTL_YIELD);
    PBT_CHECK(c.yielding && !c.quiet && scan_ctl_pause(&c, f.now) == 0);
    PBT_CHECK(scan_ctl_request_cap(&c) == 128 * KiB && c.st.pauses == 0);
    /* No reads of others before the scan: the baseline waits for a quiet window. */
    watched(&c, &f);
    f.now += 0.05;
    scan_ctl_prescan(&c, f.now, &f.d);
    PBT_CHECK(c.base_ms == 0);
    PBT_CHECK(look(&c, &f, 0.1, 100, 1.0, 50, 4.0, 1) == SCAN_CTL_YIELD);
    PBT_CHECK(c.quiet);
}

int main(void)
{
    PBT_RUN(test_ladder);
    PBT_RUN(test_grows_within_budget);
    PBT_RUN(test_shrinks_then_pauses_at_the_bottom);
    PBT_RUN(test_own_reads_not_counted);
    PBT_RUN(test_own_buffered_reads_not_counted);
    PBT_RUN(test_resume_when_others_stop);
    PBT_RUN(test_rebase);
    PBT_RUN(test_quiet_given_up);
    PBT_RUN(test_slack);
    PBT_RUN(test_quiet_short_after_burst);
    PBT_RUN(test_baseline_before_the_scan);
    return PBT_DONE();
}
