/* tests/unit/engine/scan/scan_ctl_test.c — the scanner's delay-based controller, driven with
 * made-up completions (no disk), and the parsing of a real /sys/block/<dev>/stat. */
#include "engine/scan/scan_ctl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string.h>

#include "../../pbtest.h"

#define MiB (1024.0 * 1024.0)

/* Feed completions of 512 KiB spaced so that throughput is tput bytes/s, each with
 * latency lat, until the controller closes an epoch (it then starts the next one
 * empty; while pinned or yielding it keeps none). *now advances. */
static scan_ctl_event epoch(scan_ctl *c, double *now, double tput, double lat)
{
    const size_t size = 512 * 1024;
    for (int i = 0; i < 100000; i++) {
        *now += (double)size / tput;
        scan_ctl_event ev = scan_ctl_sample(c, *now, size, lat);
        if (ev != SCAN_CTL_NONE || c->ep_n == 0)
            return ev;
    }
    return SCAN_CTL_NONE;
}

/* An epoch, and when it only said that the last step paid (KEPT), the next one too: the
 * event that changes what is in flight. */
static scan_ctl_event step(scan_ctl *c, double *now, double tput, double lat)
{
    scan_ctl_event ev = epoch(c, now, tput, lat);
    return ev == SCAN_CTL_KEPT ? epoch(c, now, tput, lat) : ev;
}

/* Requests of size bytes at throughput tput whose latencies cycle through lat[0..n) (a
 * virtual disk's scatter), until the controller closes an epoch. */
static scan_ctl_event epoch_of(scan_ctl *c, double *now, double tput, size_t size,
                               const double *lat, size_t n)
{
    for (int i = 0; i < 100000; i++) {
        *now += (double)size / tput;
        scan_ctl_event ev = scan_ctl_sample(c, *now, size, lat[(size_t)i % n]);
        if (ev != SCAN_CTL_NONE || c->ep_n == 0)
            return ev;
    }
    return SCAN_CTL_NONE;
}

/* One 512 KiB request's latency on this virtio disk, ms: the median is 1.0, the mean 1.17,
 * the lowest 0.3 (the mean of an epoch was over 1.5x the lowest ever seen, and the old
 * controller never probed a second request on an idle database). */
static const double scatter[] = {0.0003, 0.0009, 0.0010, 0.0011, 0.0024,
                                 0.0010, 0.00095, 0.0016, 0.0010, 0.00105};
#define NSCATTER (sizeof(scatter) / sizeof(scatter[0]))

/* The same scatter, times f. */
static scan_ctl_event epoch_scaled(scan_ctl *c, double *now, double tput, size_t size,
                                   double f)
{
    double lat[NSCATTER];
    for (size_t i = 0; i < NSCATTER; i++)
        lat[i] = scatter[i] * f;
    return epoch_of(c, now, tput, size, lat, NSCATTER);
}

/* Scattered latencies at one request in flight on an idle device: the second is probed. */
static void test_scatter_probes_two(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_GROW);
    PBT_CHECK(scan_ctl_depth(&c) == 2 && c.st.grows == 1);
    PBT_CHECK(c.st.latency_floor_median_ms > 0.99 && c.st.latency_floor_median_ms < 1.01);
    PBT_CHECK(c.st.latency_floor_ms > 0.29 && c.st.latency_floor_ms < 0.31); /* the lowest */
    PBT_CHECK(strstr(c.st.decision, "2 in flight: probing") != NULL);
}

/* A second request that buys +3% (its latency near twice the floor: it only queued) is
 * taken back, and the depth holds at one; it pays +20%: kept and said so. */
static void test_second_request_judged_by_throughput(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 566e6, 512 * 1024, 1.9) == SCAN_CTL_PLATEAU);
    PBT_CHECK(scan_ctl_depth(&c) == 1 && c.st.plateaus == 1);
    PBT_CHECK(c.st.depth_gain_pct > 0 && c.st.depth_gain_pct < 5); /* epochs' edges: ~3% */
    for (int i = 0; i < 20; i++)
        PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_NONE);
    PBT_CHECK(scan_ctl_depth(&c) == 1 && c.st.grows == 1 && c.st.depth_peak == 2);

    scan_ctl_init(&c, 8, false);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 660e6, 512 * 1024, 1.2) == SCAN_CTL_KEPT);
    PBT_CHECK(scan_ctl_depth(&c) == 2);
    PBT_CHECK(strstr(c.st.decision, "2 in flight: +") != NULL);
    PBT_CHECK(strstr(c.st.decision, "% throughput") != NULL);
    PBT_CHECK(c.st.depth_gain_pct > 15 && c.st.depth_gain_pct < 25);
}

/* One disk: a second request only queues, so latency doubles (2.1x the floor) and
 * throughput stays flat. That is the probe failing: taken back and held (a plateau), not
 * a cut that would probe again at the next epoch, over and over. */
static void test_queueing_probe_is_a_plateau(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 555e6, 512 * 1024, 2.1) == SCAN_CTL_PLATEAU);
    for (int i = 0; i < 20; i++)
        PBT_CHECK(epoch_scaled(&c, &now, 550e6, 512 * 1024, 1) == SCAN_CTL_NONE);
    PBT_CHECK(c.st.cuts == 0 && c.st.grows == 1 && c.st.plateaus == 1);
}

/* Depth 2 did not pay: 1 MiB requests are probed (same bytes in flight as two of 512 KiB),
 * kept at +15%, then 2 MiB, taken back at +2%. Latencies are scaled to the base size. */
static void test_size_axis(void)
{
    const size_t base = 512 * 1024;
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    scan_ctl_sizes(&c, base, 4);
    PBT_CHECK(scan_ctl_mult(&c) == 1 && c.st.request_bytes_peak == base);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 566e6, base, 1.9) == SCAN_CTL_PLATEAU);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_SIZE_GROW);
    PBT_CHECK(scan_ctl_mult(&c) == 2 && scan_ctl_depth(&c) == 1);
    /* a 1 MiB request takes 1.8x a 512 KiB one: 0.9x per base size */
    PBT_CHECK(epoch_scaled(&c, &now, 633e6, 2 * base, 1.8) == SCAN_CTL_KEPT);
    PBT_CHECK(strstr(c.st.decision, "1024 KiB requests: +1") != NULL); /* ~15% */
    PBT_CHECK(epoch_scaled(&c, &now, 633e6, 2 * base, 1.8) == SCAN_CTL_SIZE_GROW);
    PBT_CHECK(scan_ctl_mult(&c) == 4);
    PBT_CHECK(epoch_scaled(&c, &now, 645e6, 4 * base, 3.6) == SCAN_CTL_SIZE_PLATEAU);
    PBT_CHECK(scan_ctl_mult(&c) == 2 && scan_ctl_depth(&c) == 1);
    for (int i = 0; i < 10; i++)
        PBT_CHECK(epoch_scaled(&c, &now, 633e6, 2 * base, 1.8) == SCAN_CTL_NONE);
    PBT_CHECK(c.st.size_grows == 2 && c.st.size_plateaus == 1);
    PBT_CHECK(c.st.request_bytes_peak == 4 * base && c.st.request_bytes_final == 2 * base);
    PBT_CHECK(c.st.size_gain_pct > 0 && c.st.size_gain_pct < 5); /* ~2% */
    /* the buffers bound the size: 8 slots hold two 2 MiB requests, 4 slots two 1 MiB */
    scan_ctl_init(&c, 4, false);
    scan_ctl_sizes(&c, base, 4);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 560e6, base, 1.9) == SCAN_CTL_PLATEAU);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_SIZE_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 700e6, 2 * base, 1.8) == SCAN_CTL_KEPT);
    PBT_CHECK(epoch_scaled(&c, &now, 700e6, 2 * base, 1.8) == SCAN_CTL_NONE);
    PBT_CHECK(scan_ctl_mult(&c) == 2 && c.st.request_bytes_peak == 2 * base);
}

/* Latency doubling (scattered, as at depth 1) halves what is in flight; at one request
 * of twice the size it halves the size. */
static void test_cut_on_scattered_doubling(void)
{
    const size_t base = 512 * 1024;
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    scan_ctl_sizes(&c, base, 4);
    for (unsigned d = 1; d < 4; d++)
        PBT_CHECK(step(&c, &now, 500e6 * d, 0.001) == SCAN_CTL_GROW);
    PBT_CHECK(scan_ctl_depth(&c) == 4);
    PBT_CHECK(epoch_scaled(&c, &now, 2000e6, base, 1) == SCAN_CTL_KEPT);
    PBT_CHECK(epoch_scaled(&c, &now, 2000e6, base, 2.2) == SCAN_CTL_CUT);
    PBT_CHECK(scan_ctl_depth(&c) == 2 && c.st.cuts == 1);
    scan_ctl_init(&c, 8, false);
    scan_ctl_sizes(&c, base, 4);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 560e6, base, 1.9) == SCAN_CTL_PLATEAU);
    PBT_CHECK(epoch_scaled(&c, &now, 550e6, base, 1) == SCAN_CTL_SIZE_GROW);
    PBT_CHECK(epoch_scaled(&c, &now, 650e6, 2 * base, 4.4) == SCAN_CTL_CUT); /* +18% */
    PBT_CHECK(scan_ctl_mult(&c) == 1 && scan_ctl_depth(&c) == 1);
    PBT_CHECK(strstr(c.st.decision, "latency 2.2x") != NULL);
}

/* Throughput that rises with depth at the floor latency: one more each epoch. */
static void test_growth_at_floor(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    PBT_CHECK(scan_ctl_depth(&c) == 1);
    for (unsigned d = 1; d < 5; d++) {
        scan_ctl_event ev = step(&c, &now, 500e6 * d, 0.001);
        PBT_CHECK(ev == SCAN_CTL_GROW);
        PBT_CHECK(scan_ctl_depth(&c) == d + 1);
    }
    PBT_CHECK(c.st.grows == 4);
    PBT_CHECK(c.st.depth_peak == 5);
    PBT_CHECK(c.st.latency_floor_ms > 0.99 && c.st.latency_floor_ms < 1.01);
    PBT_CHECK(strstr(c.msg, "in flight") != NULL); /* a sentence for the log */
}

/* A data directory's small files complete fast for their size: their latency must not
 * become the floor a 512 KiB request is held to (it would read 14x "too slow" and the
 * scanner would never grow on any real cluster). */
static void test_small_reads_leave_the_floor(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    c.full_bytes = 256 * 1024;
    for (int i = 0; i < 50; i++) {
        now += 0.0001;
        PBT_CHECK(scan_ctl_sample(&c, now, 8192, 0.00005) == SCAN_CTL_NONE);
    }
    PBT_CHECK(c.st.latency_floor_ms == 0);
    for (unsigned d = 1; d < 4; d++)
        PBT_CHECK(step(&c, &now, 500e6 * d, 0.001) == SCAN_CTL_GROW);
    PBT_CHECK(scan_ctl_depth(&c) == 4);
    PBT_CHECK(c.st.latency_floor_ms > 0.99 && c.st.latency_floor_ms < 1.01);
}

/* A latency climb to 3x the floor halves what is in flight. */
static void test_cut_on_latency_climb(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 16, false);
    for (unsigned d = 1; d < 8; d++)
        step(&c, &now, 100e6 * d, 0.001);
    PBT_CHECK(scan_ctl_depth(&c) == 8);
    PBT_CHECK(epoch(&c, &now, 800e6, 0.003) == SCAN_CTL_CUT);
    PBT_CHECK(scan_ctl_depth(&c) == 4);
    PBT_CHECK(c.st.cuts == 1);
    PBT_CHECK(epoch(&c, &now, 400e6, 0.003) == SCAN_CTL_CUT);
    PBT_CHECK(scan_ctl_depth(&c) == 2);
}

/* A single disk: the second request only queues. Flat throughput means one fewer and
 * no further growth. */
static void test_no_growth_when_flat(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 8, false);
    PBT_CHECK(epoch(&c, &now, 1000e6, 0.0005) == SCAN_CTL_GROW); /* the probe to 2 */
    PBT_CHECK(scan_ctl_depth(&c) == 2);
    PBT_CHECK(epoch(&c, &now, 1020e6, 0.0007) == SCAN_CTL_PLATEAU); /* +2%: not worth it */
    PBT_CHECK(scan_ctl_depth(&c) == 1);
    for (int i = 0; i < 10; i++)
        epoch(&c, &now, 1000e6, 0.0005);
    PBT_CHECK(scan_ctl_depth(&c) == 1);
    PBT_CHECK(c.st.plateaus == 1 && c.st.grows == 1);
}

/* Pinned: the given depth, whatever the samples and counters say. */
static void test_pinned(void)
{
    scan_ctl c;
    double now = 1;
    scan_ctl_init(&c, 2, true);
    PBT_CHECK(scan_ctl_depth(&c) == 2);
    for (int i = 0; i < 4; i++)
        PBT_CHECK(epoch(&c, &now, 100e6 * (i + 1), 0.001 * (i + 1)) == SCAN_CTL_NONE);
    scan_dev_sample d = {0};
    scan_ctl_device(&c, now, &d);
    d.reads = 100000; /* others read hard: pinned reads do not steer */
    d.read_ticks_ms = 900000;
    PBT_CHECK(scan_ctl_device(&c, now + 1, &d) == SCAN_CTL_NONE);
    PBT_CHECK(scan_ctl_depth(&c) == 2 && scan_ctl_pause(&c, now) == 0);
    PBT_CHECK(!c.st.adaptive && c.st.grows == 0 && c.st.cuts == 0 && c.st.yields == 0);
    PBT_CHECK(c.st.requests == 4);
}

/* An md array's members, from a made-up sysfs tree: a partition counts as its disk, two
 * partitions of one disk count once, and the chunk size comes along. */
static void test_md_members(void)
{
    char root[64], p[256];
    snprintf(root, sizeof(root), "/tmp/pbmdXXXXXX");
    PBT_CHECK(mkdtemp(root) != NULL);
    const char *dirs[] = {"md0", "md0/md", "md0/slaves", "sda", "sda/sda1", "sda/sda2", "sdb"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        PBT_CHECK(mkdir(p, 0700) == 0);
    }
    const char *files[] = {"md0/md/chunk_size", "sda/sda1/partition", "sda/sda2/partition"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, files[i]);
        FILE *fp = fopen(p, "w");
        PBT_CHECK(fp != NULL);
        if (fp) {
            fputs(i == 0 ? "524288\n" : "1\n", fp);
            fclose(fp);
        }
    }
    const char *links[][2] = {{"../../sda/sda1", "sda1"}, {"../../sda/sda2", "sda2"},
                              {"../../sdb", "sdb"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/md0/slaves/%s", root, links[i][1]);
        PBT_CHECK(symlink(links[i][0], p) == 0);
    }
    scan_members m;
    snprintf(p, sizeof(p), "%s/md0", root);
    PBT_CHECK(scan_device_members(p, &m) == 0);
    PBT_CHECK(m.n == 2 && m.chunk_bytes == 524288);
    bool sda = false, sdb = false;
    for (size_t i = 0; i < m.n; i++) {
        sda |= strstr(m.stat[i], "/sda/stat") != NULL;
        sdb |= strstr(m.stat[i], "/sdb/stat") != NULL;
    }
    PBT_CHECK(sda && sdb);
    snprintf(p, sizeof(p), "%s/sdb", root);
    PBT_CHECK(scan_device_members(p, &m) == PB_ENOENT); /* not an array */
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    PBT_CHECK(system(cmd) == 0);
}

/* Member reads beyond the array's own (one per read plus one per chunk of sectors) are
 * others'; the sum never goes down, and a counter that went back is a new baseline. */
static void test_members_direct(void)
{
    scan_member_track t;
    memset(&t, 0, sizeof(t));
    const size_t chunk = 512 * 1024;
    PBT_CHECK(scan_members_direct(&t, 100, 1000, 500, chunk) == 0); /* baseline */
    /* 10 array reads of 4 MiB (8192 sectors each: 8 chunks): 10 + 80 member reads */
    PBT_CHECK(scan_members_direct(&t, 110, 1000 + 81920, 590, chunk) == 0);
    /* the same, plus 300 reads on the disks that bypassed the array */
    PBT_CHECK(scan_members_direct(&t, 120, 1000 + 163840, 980, chunk) == 300);
    /* fewer member reads than explained: nothing added, nothing taken back */
    PBT_CHECK(scan_members_direct(&t, 200, 1000 + 163840 + 819200, 1000, chunk) == 300);
    PBT_CHECK(scan_members_direct(&t, 10, 0, 0, chunk) == 300); /* a reset */
    PBT_CHECK(scan_members_direct(&t, 10, 0, 50, chunk) == 350);
}

static void test_parse_stat_fixture(void)
{
    char path[4200], text[512];
    const char *src = getenv("PB_SRCDIR");
    snprintf(path, sizeof(path), "%s/tests/fixtures/sysblock/vda.stat", src ? src : ".");
    FILE *fp = fopen(path, "r");
    PBT_CHECK(fp != NULL);
    if (!fp)
        return;
    size_t n = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[n] = '\0';
    scan_dev_counters dc;
    PBT_CHECK(scan_ctl_parse_stat(text, &dc) == 0);
    PBT_CHECK(dc.reads == 2063422 && dc.read_sectors == 278544010 && dc.read_ticks == 847551);
    PBT_CHECK(dc.writes == 5547981 && dc.write_sectors == 543705280 && dc.in_flight == 0);
    PBT_CHECK(scan_ctl_parse_stat("12 3 4\n", &dc) == PB_EINVAL);
    PBT_CHECK(scan_ctl_parse_stat("not a stat line", &dc) == PB_EINVAL);
}

int main(void)
{
    PBT_RUN(test_growth_at_floor);
    PBT_RUN(test_small_reads_leave_the_floor);
    PBT_RUN(test_cut_on_latency_climb);
    PBT_RUN(test_no_growth_when_flat);
    PBT_RUN(test_pinned);
    PBT_RUN(test_scatter_probes_two);
    PBT_RUN(test_second_request_judged_by_throughput);
    PBT_RUN(test_queueing_probe_is_a_plateau);
    PBT_RUN(test_size_axis);
    PBT_RUN(test_cut_on_scattered_doubling);
    PBT_RUN(test_parse_stat_fixture);
    PBT_RUN(test_md_members);
    PBT_RUN(test_members_direct);
    return PBT_DONE();
}
