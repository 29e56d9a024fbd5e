/*
 * tests/unit/restore/recovery/wal_view_test.c — restore/recovery/timeline.c: the
 * timeline a restore follows when a
 * newer timeline branched off the backup's (a promoted test restore that archived into
 * the repository). Synthetic segments with real page headers: timeline 1 goes on past
 * the branch at 0/2000100, timeline 2 holds a little WAL after it. LSN targets follow
 * the timeline whose WAL holds them (or are refused when both or neither do); a time
 * target past the branch is placed by decoding timeline 1's WAL after it, which here
 * holds no valid records (refused: undecodable WAL after the branch) unless
 * --target-timeline says which, and follows the branch when timeline 1
 * has no WAL after the branch's segment. Name targets are still refused there.
 */
#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "restore/recovery/recovery.h"
#include "tests/unit/fixtures.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG PBT_SEG
#define BLCK 8192u

static char root[256];

/* A segment whose written WAL ends at offset end: every page has a header naming its
 * position (as PostgreSQL zero-fills after a switch), content only before end. */
static void push_segment(repo *r, uint32_t tli, uint64_t segno, uint64_t end)
{
    uint8_t *buf = calloc(1, SEG);
    PBT_CHECK(buf != NULL);
    for (uint64_t p = 0; p < SEG / BLCK; p++) {
        uint8_t *page = buf + p * BLCK;
        pb_put_u16(page, 0xD110);
        pb_put_u32(page + 4, tli);
        pb_put_u64(page + 8, segno * SEG + p * BLCK);
        if (p == 0) { /* the long header: XLP_LONG_HEADER, segment and block size */
            pb_put_u16(page + 2, 0x0002);
            pb_put_u32(page + 32, (uint32_t)SEG);
            pb_put_u32(page + 36, BLCK);
        }
        for (uint64_t k = p == 0 ? 40 : 24; k < BLCK && p * BLCK + k < end; k++)
            page[k] = (uint8_t)(1 + k % 251);
    }
    char name[25];
    arch_segment_name(name, tli, segno, SEG);
    pbt_push_file(r, root, name, buf, SEG);
    free(buf);
}

static mf_backup backup_tl1(void)
{
    mf_backup h = pbt_header("20260101-000000F", "", 'F');
    h.start_lsn = 2ull * SEG + 0x28;
    h.stop_lsn = 2ull * SEG + 0x100;
    return h;
}

/* rc of the WAL check for a target, and the timeline setting it chose. */
static int check(repo *r, rs_target_kind kind, const char *value, const char *timeline,
                 char setting[16])
{
    rs_opts o = RS_OPTS_INIT;
    o.target = kind;
    o.target_value = value;
    o.target_timeline = timeline;
    mf_backup h = backup_tl1();
    rs_timeline tl;
    memset(&tl, 0, sizeof(tl));
    pb_error err = PB_ERROR_INIT;
    int rc = rs_check_wal(r, &o, &h, &tl, &err);
    snprintf(setting, 16, "%s", rc == 0 ? tl.setting : "");
    if (rc)
        printf("    (refused: %s)\n", err.msg);
    return rc;
}

static void build(repo *r, bool tl1_goes_on)
{
    const char *hist = "1\t0/2000100\tno recovery target specified\n";
    pbt_push_file(r, root, "00000002.history", hist, strlen(hist));
    push_segment(r, 1, 2, SEG);             /* TL1 ends its segment 2 (switch) */
    if (tl1_goes_on)
        push_segment(r, 1, 3, 0x80000);     /* production wrote on in segment 3 */
    push_segment(r, 2, 2, SEG);             /* TL2: segment 2 complete, */
    push_segment(r, 2, 3, 0x1000);          /* and a little of segment 3 */
}

static void test_lsn_targets(void)
{
    repo *r = pbt_repo_open_in(root, "lsn");
    build(r, true);
    char tl[16];
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/3040000", NULL, tl) == 0 && !strcmp(tl, "1"));
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/3000800", NULL, tl) == PB_EINVAL); /* both */
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/3100000", NULL, tl) == PB_ENOENT); /* neither */
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/2000080", NULL, tl) == 0 && !strcmp(tl, "latest"));
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/3000800", "2", tl) == 0 && !strcmp(tl, "2"));
    PBT_CHECK(check(r, RS_TARGET_LSN, "0/3040000", "latest", tl) == 0 &&
              !strcmp(tl, "latest")); /* said explicitly: PostgreSQL's rule, unchanged */
    PBT_CHECK(check(r, RS_TARGET_IMMEDIATE, NULL, NULL, tl) == 0 && !strcmp(tl, "current"));
    repo_free(r);
}

static void test_time_targets(void)
{
    repo *r = pbt_repo_open_in(root, "time");
    build(r, true);
    char tl[16];
    const char *t = "2026-01-01 00:00:00+00";
    PBT_CHECK(check(r, RS_TARGET_TIME, t, NULL, tl) == PB_ECORRUPT); /* undecodable */
    PBT_CHECK(check(r, RS_TARGET_TIME, t, "1", tl) == 0 && !strcmp(tl, "1"));
    PBT_CHECK(check(r, RS_TARGET_NAME, "rp", NULL, tl) == PB_EINVAL);
    repo_free(r);
    r = pbt_repo_open_in(root, "time-branch-only");
    build(r, false); /* timeline 1 stopped at the branch: a later time is on timeline 2 */
    PBT_CHECK(check(r, RS_TARGET_TIME, t, NULL, tl) == 0 && !strcmp(tl, "latest"));
    repo_free(r);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "walview-test") != 0)
        return 1;
    pb_log_set_level(PB_LOG_ERROR);
    PBT_RUN(test_lsn_targets);
    PBT_RUN(test_time_targets);
    pbt_rmtree(root);
    return PBT_DONE();
}
