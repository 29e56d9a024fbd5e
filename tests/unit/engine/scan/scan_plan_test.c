/*
 * tests/unit/engine/scan/scan_plan_test.c — how the scanner sizes its reads before it reads:
 * the stripe size from sysfs (md levels and layouts, partitions, LVM on md, plain disks,
 * adjusted and capped sizes, whole stripes and pages) and the I/O plan (given settings
 * kept, automatic ones from the device). The reads themselves are in scan_test.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "tests/unit/pbtest.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static char tmpdir[64];

static void put(const char *dir, const char *name, const char *value)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(value, fp);
        fputc('\n', fp);
        fclose(fp);
    }
}

static void fake_md(const char *root, const char *name, const char *level, const char *disks,
                    const char *chunk, const char *layout)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/%s", root, name);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/%s/md", root, name);
    mkdir(dir, 0700);
    put(dir, "level", level);
    put(dir, "raid_disks", disks);
    put(dir, "chunk_size", chunk);
    if (layout)
        put(dir, "layout", layout);
}

static size_t stripe_of(const char *root, const char *name, char *why, size_t len)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/%s", root, name);
    size_t n = scan_stripe_from_sysfs(dir, why, len);
    printf("  %-12s %6zu KiB: %s\n", name, n / KiB, why);
    return n;
}

static void test_stripe_size(void)
{
    char root[128], why[256], path[512];
    snprintf(root, sizeof(root), "%s/sys", tmpdir);
    mkdir(root, 0700);
    fake_md(root, "md0", "raid0", "4", "524288", NULL);
    fake_md(root, "md1", "raid5", "5", "65536", NULL);
    fake_md(root, "md2", "raid6", "6", "524288", NULL);
    fake_md(root, "md3", "raid10", "4", "524288", "258"); /* near=2 far=1 */
    fake_md(root, "md4", "raid10", "4", "524288", "513"); /* near=1 far=2 */
    fake_md(root, "md5", "raid1", "2", "0", NULL);
    fake_md(root, "md6", "raid0", "2", "4096", NULL);     /* 8 KiB stripe: raised */
    fake_md(root, "md7", "raid0", "16", "4194304", NULL); /* 64 MiB: capped */
    fake_md(root, "md8", "raid5", "3", "12288", NULL);    /* 24 KiB: whole stripes */
    fake_md(root, "md9", "raid5", "4", "4096", NULL);     /* 12 KiB: whole stripes and pages */
    fake_md(root, "md10", "raid0", "7", "4096", NULL);    /* 28 KiB */
    /* md0p1: a partition of md0, as sysfs nests it. */
    snprintf(path, sizeof(path), "%s/md0/md0p1", root);
    mkdir(path, 0700);
    put(path, "partition", "1");
    /* dm-0: LVM on md2. */
    snprintf(path, sizeof(path), "%s/dm-0", root);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/dm-0/slaves", root);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/dm-0/slaves/md2", root);
    if (symlink("../../md2", path) != 0)
        perror("symlink");
    /* sda with partition sda1: no md. */
    snprintf(path, sizeof(path), "%s/sda", root);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/sda/sda1", root);
    mkdir(path, 0700);
    put(path, "partition", "1");

    PBT_CHECK(stripe_of(root, "md0", why, sizeof(why)) == 2 * MiB);
    PBT_CHECK(strstr(why, "md0") && strstr(why, "512 KiB chunk x 4 data disks"));
    PBT_CHECK(stripe_of(root, "md1", why, sizeof(why)) == 256 * KiB);
    PBT_CHECK(stripe_of(root, "md2", why, sizeof(why)) == 2 * MiB);
    PBT_CHECK(stripe_of(root, "md3", why, sizeof(why)) == MiB);
    PBT_CHECK(stripe_of(root, "md4", why, sizeof(why)) == 2 * MiB);
    PBT_CHECK(stripe_of(root, "md5", why, sizeof(why)) == MiB);
    PBT_CHECK(strstr(why, "raid1") != NULL);
    PBT_CHECK(stripe_of(root, "md6", why, sizeof(why)) == 128 * KiB);
    PBT_CHECK(strstr(why, "adjusted") != NULL);
    PBT_CHECK(stripe_of(root, "md7", why, sizeof(why)) == 16 * MiB);
    PBT_CHECK(stripe_of(root, "md8", why, sizeof(why)) == 144 * KiB); /* 6 whole stripes */
    /* defect 12: old code rounded 12 KiB stripes to 132 KiB, which splits pages */
    PBT_CHECK(stripe_of(root, "md9", why, sizeof(why)) == 144 * KiB); /* 12 stripes, 18 pages */
    PBT_CHECK(stripe_of(root, "md10", why, sizeof(why)) == 168 * KiB); /* 6 x 28, 21 pages */
    PBT_CHECK(stripe_of(root, "md0/md0p1", why, sizeof(why)) == 2 * MiB);
    PBT_CHECK(stripe_of(root, "dm-0", why, sizeof(why)) == 2 * MiB);
    PBT_CHECK(strstr(why, "md2") != NULL);
    PBT_CHECK(stripe_of(root, "sda/sda1", why, sizeof(why)) == MiB);
    PBT_CHECK(strstr(why, "not an md") != NULL);
    PBT_CHECK(stripe_of(root, "nonexistent", why, sizeof(why)) == MiB);

    /* The real device under the test directory. */
    size_t n = scan_default_read_size(tmpdir, why, sizeof(why));
    printf("  %s: %zu KiB: %s\n", tmpdir, n / KiB, why);
    PBT_CHECK(n >= 128 * KiB && n <= 16 * MiB && n % 4096 == 0 && why[0] != '\0');
    n = scan_default_read_size("/nonexistent/x", why, sizeof(why));
    PBT_CHECK(n == MiB && strstr(why, "/nonexistent/x") != NULL);
    PBT_CHECK(scan_default_read_size(tmpdir, NULL, 0) >= 128 * KiB);

    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
}

/* The I/O plan: given settings are kept; automatic ones follow the device, and the
 * decision is in the layout field (why is text for people). */
static void test_io_plan(void)
{
    scan_io_plan p;
    scan_plan_io("/nonexistent/x", 0, 0, &p); /* cannot be probed: a single device */
    PBT_CHECK(p.layout == SCAN_LAYOUT_SINGLE && p.read_size == 512 * KiB && p.queue_depth == 2);
    PBT_CHECK(strstr(p.why, "/nonexistent/x") != NULL);
    scan_plan_io("/nonexistent/x", 0, 5, &p);
    PBT_CHECK(p.layout == SCAN_LAYOUT_SINGLE && p.read_size == 512 * KiB && p.queue_depth == 5);
    scan_plan_io(tmpdir, 256 * KiB, 0, &p); /* a given size is not probed */
    PBT_CHECK(p.layout == SCAN_LAYOUT_GIVEN && p.read_size == 256 * KiB && p.queue_depth == 8);
    PBT_CHECK(p.why[0] == '\0');
    scan_plan_io(tmpdir, 256 * KiB, 3, &p);
    PBT_CHECK(p.layout == SCAN_LAYOUT_GIVEN && p.read_size == 256 * KiB && p.queue_depth == 3);
    scan_plan_io(tmpdir, 0, 0, &p); /* the real device: either plan, consistently */
    printf("  %s: %s, %zu KiB x %u: %s\n", tmpdir,
           p.layout == SCAN_LAYOUT_STRIPED ? "striped" : "single", p.read_size / KiB,
           p.queue_depth, p.why);
    if (p.layout == SCAN_LAYOUT_STRIPED)
        PBT_CHECK(p.read_size == scan_default_read_size(tmpdir, NULL, 0) && p.queue_depth == 8);
    else
        PBT_CHECK(p.layout == SCAN_LAYOUT_SINGLE && p.read_size == 512 * KiB &&
                  p.queue_depth == 2);
    PBT_CHECK(p.why[0] != '\0');
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbscanplanXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_stripe_size);
    PBT_RUN(test_io_plan);
    rmdir(tmpdir);
    return PBT_DONE();
}
