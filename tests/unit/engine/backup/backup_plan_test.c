/*
 * tests/unit/engine/backup/backup_plan_test.c — engine/backup/backup_plan.c: full or
 * incremental, from synthetic manifests in a posix repository. Each rule (no backup, --type full, another
 * cluster, --full-every, --full-after, a damaged head, a broken chain) plans a full
 * backup; otherwise an incremental on top of the chain head by history order (not the
 * last id: a rebase's synthetic full of an older state sorts last). A storage observer
 * checks that no manifest is read whole (headers by range reads, records streamed).
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_plan_internal.h"
#include "tests/unit/fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SYS 7001u

static char root[256];
static int manifest_gets;

static void observe(void *ctx, const char *op, const char *key)
{
    (void)ctx;
    size_t n = strlen(key);
    if (!strcmp(op, "get") && n > 9 && !strcmp(key + n - 9, "/manifest"))
        manifest_gets++;
}

static repo *new_repo(const char *name)
{
    repo *r = pbt_repo_open_in(root, name);
    pbt_repo_identity(r, SYS);
    if (r)
        repo_observe(r, observe, NULL);
    return r;
}

/* Backup k of a chain: stops at LSN k+1 segments, started (k+1) hours before now. */
static void commit(repo *r, const char *id, const char *parent, char type, int k,
                   uint64_t sys)
{
    mf_backup h = pbt_header(id, parent, type);
    h.system_id = sys;
    h.start_lsn = ((uint64_t)k + 1) << 24;
    h.stop_lsn = h.start_lsn + 0x100;
    h.start_time = (int64_t)time(NULL) - 3600 * (3 - k);
    h.stop_time = h.start_time + 60;
    pbt_commit_header(r, &h);
}

static const char *F = "20260101-000000F", *I1 = "20260101-000100I",
                  *I2 = "20260101-000200I";

static void three(repo *r)
{
    commit(r, F, "", 'F', 0, SYS);
    commit(r, I1, F, 'I', 1, SYS);
    commit(r, I2, I1, 'I', 2, SYS);
}

static bk_plan plan_of(repo *r, const bk_opts *o)
{
    bk_plan p;
    pb_error err = PB_ERROR_INIT;
    manifest_gets = 0;
    PBT_CHECK(bk_plan_type(r, NULL, NULL, o, SYS, 0, &p, &err) == 0);
    return p;
}

static void test_incremental(void)
{
    repo *r = new_repo("incr");
    bk_opts o = BK_OPTS_INIT;
    bk_plan p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "no backup") && !p.parent && !p.latest[0]);
    three(r);
    bk_plan_free(&p); /* a plan holds what it loaded, a full's history too */
    p = plan_of(r, &o);
    PBT_CHECK(p.type == 'I' && p.parent && !strcmp(mf_header_c(p.parent)->id, I2));
    PBT_CHECK(p.chain.count == 3 && !strcmp(p.latest, I2));
    /* no manifest read whole (memory bounds): headers by range reads, records streamed by
     * chunk; the plan's chain holds headers alone */
    PBT_CHECK(manifest_gets == 0);
    for (size_t i = 0; i < p.chain.count; i++)
        PBT_CHECK(mf_count(p.chain.items[i]) == 0);
    bk_plan_free(&p);
    o.type = 'F';
    p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "requested") && p.chain.count == 0);
    PBT_CHECK(manifest_gets == 0);
    bk_plan_free(&p);
    repo_free(r);
}

static void test_rules(void)
{
    repo *r = new_repo("rules");
    three(r);
    bk_opts o = BK_OPTS_INIT;
    o.full_every = 3;
    bk_plan p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "--full-every 3") && !p.parent);
    PBT_CHECK(p.chain.count == 0);
    o.full_every = 4;
    o.full_after_secs = 3600; /* the full started three hours ago */
    bk_plan_free(&p);
    p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "--full-after"));
    o.full_after_secs = 4 * 3600;
    bk_plan_free(&p);
    p = plan_of(r, &o);
    PBT_CHECK(p.type == 'I');
    bk_plan_free(&p);
    pb_error err = PB_ERROR_INIT;
    manifest_gets = 0;
    PBT_CHECK(bk_plan_type(r, NULL, NULL, &o, SYS + 1, 0, &p, &err) == 0);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "another cluster"));
    bk_plan_free(&p);
    repo_free(r);
}

/* A synthetic full of I1's state has the last id: the parent is still I2 (history
 * order), and new ids sort after the synthetic one. */
static void test_rebased_head(void)
{
    repo *r = new_repo("rebased");
    three(r);
    commit(r, "20260101-000300S", "", 'S', 1, SYS);
    bk_opts o = BK_OPTS_INIT;
    bk_plan p = plan_of(r, &o);
    PBT_CHECK(p.type == 'I' && p.parent && !strcmp(mf_header_c(p.parent)->id, I2));
    /* headers of all four by range reads; the head's chain (F, I1, I2) streamed */
    PBT_CHECK(!strcmp(p.latest, "20260101-000300S") && manifest_gets == 0);
    bk_plan_free(&p);
    repo_free(r);
}

/* A damaged head: the history cannot be loaded, the last id stands in, and its
 * manifest is unusable. A head whose parent is gone: the chain is broken. */
static void test_damaged(void)
{
    repo *r = new_repo("damaged");
    three(r);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_put(r, "backup/20260101-000300I/manifest", "junk", 4, &err) == 0);
    bk_opts o = BK_OPTS_INIT;
    bk_plan p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "20260101-000300I is unusable"));
    bk_plan_free(&p);
    repo_free(r);
    r = new_repo("broken");
    commit(r, I1, F, 'I', 1, SYS);
    commit(r, I2, I1, 'I', 2, SYS);
    p = plan_of(r, &o);
    PBT_CHECK(p.type == 'F' && strstr(p.reason, "broken") && p.chain.count == 0);
    bk_plan_free(&p);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_incremental), PBT_CASE(test_rules),
                                     PBT_CASE(test_rebased_head), PBT_CASE(test_damaged)};
    return pbt_main_in_tmpdir(root, sizeof(root), "backup-plan-test", cases, PBT_COUNT(cases));
}
