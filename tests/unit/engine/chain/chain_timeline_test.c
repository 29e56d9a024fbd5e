/*
 * tests/unit/engine/chain/chain_timeline_test.c — engine/chain/chain_timeline.c, chain_retain and
 * engine/chain_record.c. A copy restored from F0 is promoted (timeline 2 from 0/2000000)
 * while the old primary went on to F1 (timeline 1, 0/3000000); F2 on timeline 2 stops
 * lower than F1: the newest is F2, retention keeps it, F1 is on a branch. Before F2
 * exists the branches compete. Two fulls of one state count once. The record of
 * committed backups: format, checksum, the copy, merging the manifests present.
 */
#include "engine/chain/chain.h"
#include "engine/wal/wal.h"
#include "tests/unit/fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char root[256];

#define F0 "20260101-000000F"
#define F1 "20260101-000100F"
#define F2 "20260101-000200F"

static mf_backup hdr(const char *id, const char *parent, char type, uint32_t tli,
                     uint64_t stop_lsn, int64_t stop_time)
{
    mf_backup h = pbt_header(id, parent, type);
    h.timeline = tli;
    h.start_lsn = stop_lsn - 0x100;
    h.stop_lsn = stop_lsn;
    h.stop_time = stop_time;
    return h;
}

/* 00000002.history: timeline 2 left timeline 1 at 0/2000000. */
static void push_history(repo *r)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/00000002.history", root);
    FILE *f = fopen(path, "w");
    PBT_CHECK(f != NULL);
    if (!f)
        return;
    fputs("1\t0/2000000\tno recovery target specified\n", f);
    fclose(f);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
}

static repo *two_branches(const char *name, bool with_f2)
{
    repo *r = pbt_repo_open_in(root, name);
    mf_backup f0 = hdr(F0, "", 'F', 1, 0x1000000, 100), f1 = hdr(F1, "", 'F', 1, 0x3000000, 300),
              f2 = hdr(F2, "", 'F', 2, 0x2800000, 400);
    pbt_commit_header(r, &f0);
    pbt_commit_header(r, &f1);
    push_history(r);
    if (with_f2)
        pbt_commit_header(r, &f2);
    return r;
}

static void test_newest_follows_timeline(void)
{
    repo *r = two_branches("tl", true);
    chain_history h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_history_load(r, &h, &err) == 0);
    PBT_CHECK(h.count == 3 && h.timeline == 2 && h.off_path == 1 && !h.compete);
    const char *want[] = {F1, F0, F2};
    for (size_t i = 0; i < 3 && i < h.count; i++)
        PBT_CHECK(strcmp(h.items[i].id, want[i]) == 0);
    PBT_CHECK(chain_history_newest(&h) && !strcmp(chain_history_newest(&h)->id, F2));
    bool keep[4];
    PBT_CHECK(chain_retain(&h, 1, keep) == 1 && keep[2] && !keep[0] && !keep[1]);
    chain_history_free(&h);
    char head[MF_ID_LEN];
    PBT_CHECK(chain_head(r, head, &err) == 0 && strcmp(head, F2) == 0);
    /* along timeline 1 (restore --target-timeline 1): F1 is the newest */
    PBT_CHECK(chain_history_load_on(r, 1, &h, &err) == 0);
    PBT_CHECK(chain_history_newest(&h) && !strcmp(chain_history_newest(&h)->id, F1));
    chain_history_free(&h);
    repo_free(r);
}

static void test_branches_compete(void)
{
    repo *r = two_branches("compete", false);
    chain_history h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_history_load(r, &h, &err) == 0);
    PBT_CHECK(h.compete && h.timeline == 2);
    PBT_CHECK(chain_history_check(&h, "test", &err) == PB_ESTATE);
    PBT_CHECK(strstr(err.msg, F0) && strstr(err.msg, F1) && strstr(err.msg, "--set"));
    bool keep[4];
    chain_retain(&h, 1, keep);
    PBT_CHECK(keep[1]); /* F0, the newest on timeline 2's path, is never dropped */
    PBT_CHECK(keep[0]); /* nor F1, which competes with it */
    chain_history_free(&h);
    char head[MF_ID_LEN];
    PBT_CHECK(chain_head(r, head, &err) == PB_ESTATE);
    /* the cluster's own timeline (a backup knows it) decides without a guess */
    PBT_CHECK(chain_history_load_on(r, 1, &h, &err) == 0 && !h.compete);
    PBT_CHECK(chain_history_newest(&h) && !strcmp(chain_history_newest(&h)->id, F1));
    chain_history_free(&h);
    PBT_CHECK(chain_history_load_on(r, 2, &h, &err) == 0 && !h.compete);
    PBT_CHECK(chain_history_newest(&h) && !strcmp(chain_history_newest(&h)->id, F0));
    chain_history_free(&h);
    repo_free(r);
}

/* A rebase run twice: F, I, then S1 and S2 of I's state. Two to keep: S (one state) and
 * F, so I stays too. */
static void test_same_state_counts_once(void)
{
    repo *r = pbt_repo_open_in(root, "twice");
    mf_backup f = hdr("20260101-000000F", "", 'F', 1, 0x1000000, 100),
              i = hdr("20260101-000100I", "20260101-000000F", 'I', 1, 0x2000000, 200),
              s1 = hdr("20260101-000200S", "", 'S', 1, 0x2000000, 200),
              s2 = hdr("20260101-000300S", "", 'S', 1, 0x2000000, 200);
    pbt_commit_header(r, &f);
    pbt_commit_header(r, &i);
    pbt_commit_header(r, &s1);
    pbt_commit_header(r, &s2);
    chain_history h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_history_load(r, &h, &err) == 0 && h.count == 4);
    bool keep[4];
    PBT_CHECK(chain_retain(&h, 2, keep) == 4);
    PBT_CHECK(chain_retain(&h, 1, keep) == 2 && keep[2] && keep[3]);
    chain_history_free(&h);
    repo_free(r);
}

static void test_record(void)
{
    repo *r = two_branches("record", true);
    pb_error err = PB_ERROR_INIT;
    chain_record rec;
    PBT_CHECK(chain_record_load(r, &rec, &err) == 0 && !rec.present);
    /* the first write lists the manifests present (an older repository) */
    PBT_CHECK(chain_record_update(r, NULL, NULL, 0, &err) == 0);
    PBT_CHECK(chain_record_load(r, &rec, &err) == 0 && rec.present && rec.count == 3);
    PBT_CHECK(chain_record_has(&rec, F0) && chain_record_has(&rec, F2));
    chain_record_free(&rec);
    /* a manifest lost since stays listed; a dropped one goes */
    PBT_CHECK(repo_delete(r, "backup/" F2 "/manifest", &err) == 0);
    const char drop[1][MF_ID_LEN] = {F0};
    PBT_CHECK(chain_record_update(r, NULL, drop, 1, &err) == 0);
    PBT_CHECK(chain_record_load(r, &rec, &err) == 0 && rec.count == 2);
    PBT_CHECK(chain_record_has(&rec, F2) && !chain_record_has(&rec, F0));
    chain_record_free(&rec);
    /* a damaged primary: the copy answers, naming what failed */
    void *data = NULL;
    size_t len = 0;
    PBT_CHECK(repo_get(r, CHAIN_RECORD_KEY, &data, &len, &err) == 0 && len > 30);
    if (data && len > 30) {
        ((char *)data)[len - 30] ^= 1;
        PBT_CHECK(repo_put(r, CHAIN_RECORD_KEY, data, len, &err) == 0);
        PBT_CHECK(chain_record_parse(data, len, "x", &rec, &err) == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "checksum") != NULL);
    }
    free(data);
    PBT_CHECK(chain_record_load(r, &rec, &err) == 0 && rec.count == 2);
    PBT_CHECK(strcmp(rec.damaged, CHAIN_RECORD_KEY) == 0);
    chain_record_free(&rec);
    PBT_CHECK(repo_put(r, CHAIN_RECORD_COPY_KEY, "PAGEBACK-BACKUPS 1\n", 19, &err) == 0);
    PBT_CHECK(chain_record_load(r, &rec, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, CHAIN_RECORD_COPY_KEY) != NULL);
    repo_free(r);
}

/* Hostile records: each is refused naming the object, with nothing allocated. */
static void test_record_hostile(void)
{
    chain_record rec = {0}, ok = {0};
    pb_buf good = {0};
    pb_error err = PB_ERROR_INIT;
    char ids[2][MF_ID_LEN] = {F0, F1};
    ok.ids = ids;
    ok.count = 2;
    PBT_CHECK(chain_record_format(&ok, &good, &err) == 0);
    PBT_CHECK(chain_record_parse((const char *)good.data, good.len, "x", &rec, &err) == 0 &&
              rec.count == 2 && rec.present);
    chain_record_free(&rec);
    for (size_t cut = 0; cut < good.len; cut++) /* every truncation */
        PBT_CHECK(chain_record_parse((const char *)good.data, cut, "x", &rec, &err) ==
                      PB_ECORRUPT && rec.ids == NULL);
    const char *bad[] = {
        "PAGEBACK-BACKUPS 1\ncount=99999999999\n", /* count past the bytes */
        "PAGEBACK-BACKUPS 1\ncount=1\n../../x\n", /* a path in an id */
        "PAGEBACK-BACKUPS 1\ncount=2\na\n",       /* fewer ids than count */
        "PAGEBACK-BACKUPS 1\ncount=0\na\n",       /* more lines than count */
        "PAGEBACK-BACKUPS 2\ncount=0\n",           /* another version */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pb_buf b = {0};
        char sum[32];
        pb_buf_append(&b, bad[i], strlen(bad[i]));
        snprintf(sum, sizeof(sum), "xxh3=%016llx\n",
                 (unsigned long long)pb_hash64(b.data, b.len));
        pb_buf_append(&b, sum, strlen(sum)); /* a right checksum: the content is wrong */
        PBT_CHECK(chain_record_parse((const char *)b.data, b.len, "obj", &rec, &err) ==
                      PB_ECORRUPT && rec.ids == NULL && strstr(err.msg, "obj"));
        pb_buf_free(&b);
    }
    pb_buf_free(&good);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_newest_follows_timeline),
                                     PBT_CASE(test_branches_compete),
                                     PBT_CASE(test_same_state_counts_once), PBT_CASE(test_record),
                                     PBT_CASE(test_record_hostile)};
    return pbt_main_in_tmpdir(root, sizeof(root), "chain-timeline-test", cases, PBT_COUNT(cases));
}
