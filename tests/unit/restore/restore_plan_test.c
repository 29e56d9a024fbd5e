/*
 * tests/unit/restore/restore_plan_test.c — restore/plan.c: the plan a restore, verify --set and
 * rebase build once. A posix repository holds a chain of three backups (a full and two
 * incrementals, each changing one page of base/1/100); a storage observer counts the
 * whole manifest GETs and WAL listings each command makes: no version 2 manifest is read
 * whole (headers and merged streams are range reads, restore/plan_merge.c) and wal/ is
 * listed at most once. Also the choice itself: --set, time and LSN targets, and
 * a target before every backup.
 */
#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "restore/plan.h"
#include "restore/verify/verify.h"
#include "tests/unit/restore/plan_stream.h"
#include "tests/unit/fixtures.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBK 3

static char root[256], repodir[300];
static const char *const ids[NBK] = {"20260101-000000F", "20260101-000100I",
                                     "20260101-000200I"};
static uint8_t expect[3][PB_PAGE_SIZE]; /* base/1/100 as the last backup holds it */

typedef struct counts {
    int manifest_gets, wal_lists, other_lists;
} counts;

static void observe(void *ctx, const char *op, const char *key)
{
    counts *c = ctx;
    size_t n = strlen(key);
    if (!strcmp(op, "get") && n > 9 && !strcmp(key + n - 9, "/manifest"))
        c->manifest_gets++;
    else if (!strcmp(op, "list") && !strncmp(key, "wal/", 4))
        c->wal_lists++;
    else if (!strcmp(op, "list"))
        c->other_lists++;
}

/* Backup k stops in segment k + 1 at time 1000 * (k + 1); it stores page k of base/1/100
 * (3 pages), so a restore of the last needs all three backups. */
static void commit_backup(repo *r, int k)
{
    pb_error err = PB_ERROR_INIT;
    mf_backup h = pbt_header(ids[k], k ? ids[k - 1] : "", k ? 'I' : 'F');
    h.start_lsn = (uint64_t)(k + 1) * PBT_SEG + 0x28;
    h.stop_lsn = (uint64_t)(k + 1) * PBT_SEG + 0x100;
    h.start_time = 1000 * (k + 1) - 10;
    h.stop_time = 1000 * (k + 1);
    mf_manifest *m = pbt_manifest_new(&h);
    pbt_add_entry(m, "base", MF_DIR, NULL);
    pbt_add_entry(m, "base/1", MF_DIR, NULL);
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), ids[k]);
    pack_writer *pw = NULL;
    PBT_CHECK(pack_writer_open(&pw, r, dir, 1 << 20, 1, &err) == 0);
    uint32_t first = k ? (uint32_t)k : 0, count = k ? 1 : 3;
    for (uint32_t p = first; p < first + count; p++)
        pbt_fill_page(expect[p], 10 * k + (int)p);
    mf_file rel = pbt_rel_file("base/1/100", 3);
    pbt_ship(pw, &rel, first, count, expect[first]);
    PBT_CHECK(mf_add_file(m, &rel, &err) == 0);
    pbt_finish_commit(r, pw, m);
}

static repo *chain_repo(void)
{
    repo *r = pbt_repo_open(repodir);
    pbt_repo_identity(r, 0);
    for (int k = 0; r && k < NBK; k++) {
        commit_backup(r, k);
        pbt_push_segment(r, root, 1, (uint64_t)k + 1);
    }
    return r;
}

/* A restore of the chain's last backup: no whole manifest GET, one listing of wal/. */
static void test_restore_reads_once(repo *r)
{
    counts c = {0};
    char target[400], path[500];
    snprintf(target, sizeof(target), "%s/restored", root);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    o.jobs = 2;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    repo_observe(r, observe, &c);
    int rc = rs_restore(r, &o, &st, &err);
    repo_observe(r, NULL, NULL);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "restore: %s\n", err.msg);
    PBT_CHECK(st.chain_length == NBK && !strcmp(st.id, ids[NBK - 1]));
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    PBT_CHECK(pbt_file_equals(path, expect, sizeof(expect)));
    PBT_CHECK(c.manifest_gets == 0);
    PBT_CHECK(c.wal_lists == 1);
    if (c.manifest_gets != 0 || c.wal_lists != 1)
        fprintf(stderr, "restore read %d manifests, listed wal/ %d times\n", c.manifest_gets,
                c.wal_lists);
}

/* verify --set latest: the same plan, the same counts. */
static void test_verify_reads_once(repo *r)
{
    counts c = {0};
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    repo_observe(r, observe, &c);
    int rc = rs_verify(r, "latest", 2, &st, &err);
    repo_observe(r, NULL, NULL);
    PBT_CHECK(rc == 0 && st.chain_length == NBK);
    PBT_CHECK(c.manifest_gets == 0 && c.wal_lists == 1);
}

/* --set of the middle backup reads its header for the choice and its parent's for the
 * chain: range reads, no whole GET. An immediate target on the default timeline lists no
 * WAL for the choice; RS_PLAN_WAL lists it once for the checks. */
static void test_plan_set(repo *r)
{
    counts c = {0};
    rs_opts o = RS_OPTS_INIT;
    o.set = ids[1];
    rs_plan *p = NULL;
    pb_error err = PB_ERROR_INIT;
    repo_observe(r, observe, &c);
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == 0);
    PBT_CHECK(p && !strcmp(p->id, ids[1]) && p->nchain == 2);
    PBT_CHECK(p && !strcmp(rs_plan_header(p)->id, ids[1]));
    PBT_CHECK(c.manifest_gets == 0 && c.wal_lists == 0);
    rs_plan_free(p);
    memset(&c, 0, sizeof(c));
    PBT_CHECK(rs_plan_build(r, &o, RS_PLAN_WAL, &p, &err) == 0);
    PBT_CHECK(p && rs_plan_check(p, &o, &err) == 0 && p->tl.tli == 1);
    PBT_CHECK(p && !strcmp(p->tl.setting, "current"));
    PBT_CHECK(c.manifest_gets == 0 && c.wal_lists == 1);
    rs_plan_free(p);
    repo_observe(r, NULL, NULL);
    o.set = "20260101-000300I";
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == PB_ENOENT && p == NULL);
    rs_plan_free(NULL);
}

/* Time and LSN targets: the newest backup ending before the target, parsed once into
 * the plan (its time_text is what recovery settings write). */
static void test_plan_targets(repo *r)
{
    rs_opts o = RS_OPTS_INIT;
    rs_plan *p = NULL;
    pb_error err = PB_ERROR_INIT;
    counts c = {0};
    o.target = RS_TARGET_TIME;
    o.target_value = "1970-01-01 00:40:00+00"; /* 2400: after backup 1 (2000), before 2 */
    repo_observe(r, observe, &c);
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == 0);
    repo_observe(r, NULL, NULL);
    PBT_CHECK(p && !strcmp(p->id, ids[1]) && p->nchain == 2 && p->tv.time == 2400);
    PBT_CHECK(p && strstr(p->tv.time_text, "00:40:00") != NULL);
    /* the choice and the chain read headers only (range reads of version 2 manifests,
     * not counted here): no manifest is read whole */
    PBT_CHECK(c.manifest_gets == 0 && c.wal_lists == 1);
    rs_plan_free(p);
    o.target = RS_TARGET_LSN;
    o.target_value = "0/1000200"; /* after backup 0's stop (0/1000100), before 1's */
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == 0);
    PBT_CHECK(p && !strcmp(p->id, ids[0]) && p->nchain == 1 && p->tv.lsn == 0x1000200);
    rs_plan_free(p);
    o.target_value = "0/100"; /* before every backup */
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == PB_ENOENT && p == NULL);
    PBT_CHECK(strstr(err.msg, ids[0]) && strstr(err.msg, ids[NBK - 1]));
    o.target_value = "not an lsn";
    PBT_CHECK(rs_plan_build(r, &o, 0, &p, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "--target-lsn") != NULL);
}

/* rebase streams the chain (no whole manifest GET) and lists no WAL. */
static void test_rebase_reads_once(repo *r)
{
    counts c = {0};
    char out[MF_ID_LEN];
    pb_error err = PB_ERROR_INIT;
    repo_observe(r, observe, &c);
    int rc = rs_rebase(r, NULL, 1, NULL, NULL, out, &err);
    repo_observe(r, NULL, NULL);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "rebase: %s\n", err.msg);
    PBT_CHECK(c.manifest_gets == 0 && c.wal_lists == 0);
}

/* Planning over manifest streams: the chain's manifests are range-read (no whole GET),
 * merged, and every page of base/1/100 gets the newest backup that shipped it. */
static void test_plan_stream(repo *r)
{
    counts c = {0};
    mf_stream *s[NBK];
    pb_error err = PB_ERROR_INIT;
    repo_observe(r, observe, &c);
    for (int k = 0; k < NBK; k++)
        PBT_CHECK(chain_stream_open(r, ids[k], &s[k], &err) == 0);
    rs_stream_stats st;
    PBT_CHECK(rs_plan_chain_stream(s, NBK, &st, &err) == 0);
    repo_observe(r, NULL, NULL);
    PBT_CHECK(c.manifest_gets == 0); /* streamed: range reads only */
    PBT_CHECK(st.files == 3 && st.rel_files == 1 && st.pages == 3);
    PBT_CHECK(st.frames == NBK); /* page 0 from the full, page k from backup k */
    PBT_CHECK(st.peak_held > 0 && st.peak_held < (4u << 20));
    /* without the full, page 0 of base/1/100 has no source */
    for (int k = 1; k < NBK; k++)
        PBT_CHECK(chain_stream_open(r, ids[k], &s[k - 1], &err) == 0);
    PBT_CHECK(rs_plan_chain_stream(s, NBK - 1, &st, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "base/1/100") != NULL);
    /* verify planning: every frame of every backup */
    rs_stream_stats v = {0};
    for (int k = 0; k < NBK; k++) {
        mf_stream *one = NULL;
        PBT_CHECK(chain_stream_open(r, ids[k], &one, &err) == 0);
        PBT_CHECK(one && rs_plan_verify_stream(one, &v, &err) == 0);
        mf_stream_close(one);
    }
    PBT_CHECK(v.frames == NBK && v.pages == 3 + NBK - 1 && v.files == 3 * NBK);
    /* the header alone, without the files */
    mf_backup h;
    PBT_CHECK(chain_load_header(r, ids[1], &h, &err) == 0 && !strcmp(h.id, ids[1]) &&
              !strcmp(h.parent, ids[0]));
    PBT_CHECK(chain_load_header(r, "20260101-000900I", &h, &err) == PB_ENOENT);
}

static void test_plan(void)
{
    repo *r = chain_repo();
    if (!r)
        return;
    test_restore_reads_once(r);
    test_verify_reads_once(r);
    test_plan_set(r);
    test_plan_targets(r);
    test_rebase_reads_once(r);
    test_plan_stream(r);
    repo_free(r);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "plan-test") != 0)
        return 1;
    snprintf(repodir, sizeof(repodir), "%s/repo", root);
    PBT_RUN(test_plan);
    pbt_rmtree(root);
    return PBT_DONE();
}
