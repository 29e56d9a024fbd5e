/*
 * tests/unit/engine/backup/backup_skip_test.c — engine/backup/backup_skip.c: the file-level
 * skip rule (each reason to read, and the one way to skip) and when a verify scan is due, from
 * synthetic chains of manifest headers.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_identity_internal.h"
#include "engine/backup/backup_skip_internal.h"
#include "tests/unit/pbtest.h"

#include <string.h>

#define H 1000000 /* the parent's horizon (server clock, unix s) */

static void test_skip_rule(void)
{
    const bk_skip_stat prev = {8192 * 10, H - 50, 77};
    bk_skip_stat cur = prev;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_SKIP);
    PBT_CHECK(bk_skip_decide(&cur, NULL, H, H + 100) == BK_READ_NEW);
    PBT_CHECK(bk_skip_decide(&cur, &prev, 0, H + 100) == BK_READ_NO_HORIZON);
    cur.inode = 78;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_INODE);
    cur.inode = 0; /* unknown on one side (a v1 manifest): not a reason */
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_SKIP);
    cur = prev;
    cur.mtime = H + 200;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_MTIME_FUTURE);
    cur.mtime = H - 51;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_MTIME_BACKWARDS);
    cur = prev;
    cur.size += 8192;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_SIZE_SAME_MTIME);
    /* Grown in the parent's last second, after its walk (mtimes are whole seconds): a
     * recent write, not metadata that lies, so WAL guidance still holds for it. */
    bk_skip_stat grown_prev = {8192 * 10, H, 77}, grown = grown_prev;
    grown.size += 8192;
    PBT_CHECK(bk_skip_decide(&grown, &grown_prev, H, H + 100) == BK_READ_RECENT);
    grown_prev.mtime = grown.mtime = H + 1;
    PBT_CHECK(bk_skip_decide(&grown, &grown_prev, H, H + 100) == BK_READ_RECENT);
    cur.mtime = H + 5;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_CHANGED);
    cur = prev;
    cur.mtime = H + 5;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 100) == BK_READ_CHANGED);
}

/* The margin: an mtime equal to the parent's but not before its horizon may hide a write
 * made in the same second after the parent read the file. */
static void test_skip_margin(void)
{
    bk_skip_stat prev = {8192, H, 0}, cur = prev;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 10) == BK_READ_RECENT);
    prev.mtime = cur.mtime = H + 3;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 10) == BK_READ_RECENT);
    prev.mtime = cur.mtime = H - 1;
    PBT_CHECK(bk_skip_decide(&cur, &prev, H, H + 10) == BK_SKIP);
    for (int v = 0; v < BK_SKIP_NVERDICTS; v++)
        PBT_CHECK(strcmp(bk_skip_verdict_name((bk_skip_verdict)v), "?") != 0);
}

/* The horizon needs no wait for the server's next second: for a mark at any point of a
 * second, a file the walk read just after it and written again just after that (within
 * the same second, the kernel's coarse clock a few ms behind) is never skipped by the next
 * backup. Taking the mark's own second as the horizon without the wait would skip some. */
static void test_horizon_without_wait(void)
{
    const int64_t base_ms = (int64_t)H * 1000;
    const int lags[] = {0, 4, 10}, befores[] = {1, 5, 300}, afters[] = {1, 2, 5, 20};
    unsigned cases = 0, skipped = 0, naive_skips = 0;
    for (int64_t t0 = base_ms; t0 < base_ms + 1000; t0 += 3) {
        int64_t s = t0 / 1000, walk = t0 + 1; /* the server's second at the mark */
        for (size_t l = 0; l < 3; l++)
            for (size_t b = 0; b < 3; b++)
                for (size_t a = 0; a < 4; a++) {
                    bk_skip_stat prev = {8192, (walk - befores[b] - lags[l]) / 1000, 5};
                    bk_skip_stat cur = prev;
                    cur.mtime = (walk + afters[a] - lags[l]) / 1000; /* written after */
                    cases++;
                    skipped += bk_skip_decide(&cur, &prev, bk_mtime_horizon(s), s + 100) ==
                               BK_SKIP;
                    naive_skips += bk_skip_decide(&cur, &prev, s, s + 100) == BK_SKIP;
                }
    }
    PBT_CHECK(cases > 10000 && skipped == 0);
    PBT_CHECK(naive_skips > 0); /* the case the margin is for does occur */
    PBT_CHECK(bk_mtime_horizon(H) == H - 1);
    /* A file untouched since well before the mark is still skipped. */
    bk_skip_stat old = {8192, H - 2, 5};
    PBT_CHECK(bk_skip_decide(&old, &old, bk_mtime_horizon(H), H + 1) == BK_SKIP);
}

/* A chain of headers: types and read modes from spec ('F' full, 's' scan, 'f' file,
 * 'v' file + verify scan, '0' an incremental of an older version, 'S' a synthetic full
 * rebased from a file-mode incremental, 'T' one rebased from a full), one hour apart. */
static void make_chain(chain *c, const char *spec, int64_t now)
{
    size_t n = strlen(spec);
    c->items = calloc(n, sizeof(*c->items));
    c->count = n;
    for (size_t i = 0; i < n; i++) {
        mf_backup h;
        memset(&h, 0, sizeof(h));
        snprintf(h.id, sizeof(h.id), "20261201-0000%02u%c", (unsigned)(i % 100), spec[i] == 'F' ? 'F' : 'I');
        h.type = spec[i] == 'F' ? 'F' : spec[i] == 'S' || spec[i] == 'T' ? 'S' : 'I';
        h.read_mode = spec[i] == 'F' || spec[i] == 's' || spec[i] == 'T' ? MF_READ_SCAN
                    : spec[i] == '0' ? 0 : MF_READ_FILE;
        h.verify_scan = spec[i] == 'v';
        h.start_time = now - (int64_t)(n - i) * 3600;
        pb_error err = PB_ERROR_INIT;
        PBT_CHECK(mf_new(&c->items[i], &h, &err) == 0);
    }
}

static bool due(const char *spec, unsigned every, int64_t after)
{
    chain c = {0};
    int64_t now = 2000000000;
    make_chain(&c, spec, now);
    char why[160] = "";
    bool d = bk_verify_due(&c, every, after, now, why, sizeof(why));
    if (d)
        PBT_CHECK(why[0] != '\0');
    chain_free(&c);
    return d;
}

static void test_verify_due(void)
{
    /* Every 7th incremental: six cheap ones since the full make the next one a scan. */
    PBT_CHECK(!due("F", 7, 0));
    PBT_CHECK(!due("Fffff", 7, 0));
    PBT_CHECK(due("Fffffff", 7, 0));
    PBT_CHECK(!due("Fffffffv", 7, 0));       /* the verify scan resets the count */
    PBT_CHECK(!due("Fffffffs", 7, 0));       /* so does a scan-mode incremental */
    PBT_CHECK(!due("Fffff0", 7, 0));         /* and an older version's (it read everything) */
    PBT_CHECK(due("F", 1, 0));               /* --verify-scan 1: every incremental */
    PBT_CHECK(!due("Fffffffffff", 0, 0));    /* 0: never */
    /* By age: the last full scan started 4 h before now in "Fff". */
    PBT_CHECK(due("Fff", 0, 3 * 3600));
    PBT_CHECK(!due("Fff", 0, 5 * 3600));
    PBT_CHECK(!due("F", 0, 60));             /* nothing cheap to check yet */
    PBT_CHECK(due("Fff", 7, 7 * 86400) == false);
    /* A rebase of a cheap incremental read nothing: it does not reset the count, and the
     * last full scan's time is unknown. One of a full does. */
    PBT_CHECK(due("Sfffff", 7, 0));
    PBT_CHECK(!due("Tfffff", 7, 0));
    PBT_CHECK(due("Sf", 0, 7 * 86400));
    PBT_CHECK(!due("Tf", 0, 7 * 86400));
}

/* pg_control follows the parent's stop point only with the same system, checksum version
 * and timeline, and a latest checkpoint not before the recorded one; an old parent that
 * recorded none is not followed either. */
static void test_control_follows(void)
{
    mf_backup ph;
    memset(&ph, 0, sizeof(ph));
    snprintf(ph.id, sizeof(ph.id), "20261204-101500F");
    ph.system_id = 7;
    pgc_control now = {7, 1, 0x5000060, 0x5000028, 1};
    char why[400];
    PBT_CHECK(!bk_control_follows(&ph, &now, NULL, why, sizeof(why)) &&
              strstr(why, "20261204-101500F recorded no pg_control stop point"));
    bk_record_stop_control(&ph, &now);
    PBT_CHECK(bk_control_follows(&ph, &now, NULL, why, sizeof(why)));
    pgc_control later = now;
    later.redo_lsn = later.checkpoint_lsn = 0x9000028;
    PBT_CHECK(bk_control_follows(&ph, &later, NULL, why, sizeof(why)));
    pgc_control c = later;
    c.checksum_version = 0;
    PBT_CHECK(!bk_control_follows(&ph, &c, NULL, why, sizeof(why)) &&
              strstr(why, "data checksum version changed from 1 to 0"));
    c = later;
    c.system_id = 8;
    PBT_CHECK(!bk_control_follows(&ph, &c, NULL, why, sizeof(why)) &&
              strstr(why, "is 8, the parent's 7"));
    c = later;
    c.timeline = 2;
    PBT_CHECK(!bk_control_follows(&ph, &c, NULL, why, sizeof(why)) && strstr(why, "timeline 2"));
    c = now;
    c.redo_lsn = 0x4000028;
    PBT_CHECK(!bk_control_follows(&ph, &c, NULL, why, sizeof(why)) &&
              strstr(why, "redo 0/4000028 is before the parent's stop point 0/5000028"));
    /* a recorded history must be met by the same one */
    ph.ctl_history_known = true;
    ph.ctl_history_hash = 42;
    uint64_t same = 42, other = 43;
    PBT_CHECK(bk_control_follows(&ph, &later, &same, why, sizeof(why)));
    PBT_CHECK(!bk_control_follows(&ph, &later, &other, why, sizeof(why)) &&
              strstr(why, "history of timeline 1 differs from the parent's"));
    PBT_CHECK(!bk_control_follows(&ph, &later, NULL, why, sizeof(why)) &&
              strstr(why, "cannot be read"));
    uint64_t h1 = 0;
    PBT_CHECK(bk_history_hash("/nonexistent", 1, &h1) && h1 == pb_hash64("", 0));
    PBT_CHECK(!bk_history_hash("/nonexistent", 2, &h1));
    mf_backup h;
    memset(&h, 0, sizeof(h));
    bk_set_read_why(&h, "a \"quoted\" path\\x\n");
    PBT_CHECK(strcmp(h.read_why, "a 'quoted' path'x'") == 0);
}

int main(void)
{
    PBT_RUN(test_skip_rule);
    PBT_RUN(test_skip_margin);
    PBT_RUN(test_horizon_without_wait);
    PBT_RUN(test_verify_due);
    PBT_RUN(test_control_follows);
    return PBT_DONE();
}
