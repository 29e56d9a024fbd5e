/*
 * tests/unit/restore/db_filter_test.c — the database list (manifest/dblist.c: round trip, and a
 * damaged body is PB_ECORRUPT, never a large allocation) and restore --db-include
 * (restore/db_filter.c: names mapped with a backup's list, unknown names and a missing
 * list refused, which files become stubs).
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/pbtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID "20261201-120000F-000001-0001"

static mf_dblist sample(void)
{
    mf_dblist l = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_dblist_add(&l, 1, "template1", &err) == 0);
    PBT_CHECK(mf_dblist_add(&l, 4, "template0", &err) == 0);
    PBT_CHECK(mf_dblist_add(&l, 5, "postgres", &err) == 0);
    PBT_CHECK(mf_dblist_add(&l, 16384, "db_one", &err) == 0);
    PBT_CHECK(mf_dblist_add(&l, 16385, "db two", &err) == 0);
    return l;
}

static void test_round_trip(void)
{
    pb_error err = PB_ERROR_INIT;
    mf_dblist l = sample(), back = {0};
    pb_buf b = {0};
    PBT_CHECK(mf_dblist_encode(&l, &b, &err) == 0);
    PBT_CHECK(mf_dblist_decode(b.data, b.len, "t", &back, &err) == 0);
    PBT_CHECK(back.count == 5);
    PBT_CHECK(mf_dblist_find(&back, "db two") && mf_dblist_find(&back, "db two")->oid == 16385);
    PBT_CHECK(mf_dblist_find(&back, "nope") == NULL);
    mf_dblist_free(&back);
    /* every truncation is refused and leaves the output empty */
    for (size_t n = 0; n < b.len; n++) {
        PBT_CHECK(mf_dblist_decode(b.data, n, "t", &back, &err) == PB_ECORRUPT);
        PBT_CHECK(back.count == 0 && back.items == NULL);
    }
    /* trailing bytes */
    PBT_CHECK(pb_buf_u32(&b, 7) == 0);
    PBT_CHECK(mf_dblist_decode(b.data, b.len, "t", &back, &err) == PB_ECORRUPT);
    /* a count far beyond the bytes present: refused before any allocation */
    pb_put_u32(b.data, 0xffffffffu);
    PBT_CHECK(mf_dblist_decode(b.data, b.len, "t", &back, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "t: database count") != NULL);
    pb_buf_free(&b);
    mf_dblist_free(&l);
}

static void test_bad_names(void)
{
    pb_error err = PB_ERROR_INIT;
    mf_dblist l = {0};
    char longname[80];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    PBT_CHECK(mf_dblist_add(&l, 9, longname, &err) == PB_EINVAL);
    PBT_CHECK(mf_dblist_add(&l, 9, "", &err) == PB_EINVAL);
    /* a name with a NUL inside, and a name longer than NAMEDATALEN - 1, when decoded */
    uint8_t body[4 + 8 + 3];
    pb_put_u32(body, 1);
    pb_put_u32(body + 4, 9);
    pb_put_u32(body + 8, 3);
    memcpy(body + 12, "a\0b", 3);
    PBT_CHECK(mf_dblist_decode(body, sizeof(body), "t", &l, &err) == PB_ECORRUPT);
    pb_put_u32(body + 8, 64);
    PBT_CHECK(mf_dblist_decode(body, sizeof(body), "t", &l, &err) == PB_ECORRUPT);
    mf_dblist_free(&l);
    mf_dblist_free(NULL);
}

static int put_list(repo *r, pb_error *err)
{
    mf_dblist l = sample();
    pb_buf raw = {0}, obj = {0};
    int rc = mf_dblist_encode(&l, &raw, err);
    if (rc == 0)
        rc = pack_envelope_encode(raw.data, raw.len, MF_DBLIST_MAGIC, 3, "list", &obj, err);
    if (rc == 0)
        rc = repo_put(r, "backup/" ID "/databases", obj.data, obj.len, err);
    mf_dblist_free(&l);
    pb_buf_free(&raw);
    pb_buf_free(&obj);
    return rc;
}

static bool stub(const rs_db_filter *f, mf_kind kind, const char *path)
{
    mf_file file;
    memset(&file, 0, sizeof(file));
    file.kind = kind;
    file.path = (char *)path;
    return rs_db_filter_stub(f, &file);
}

static void test_filter(void)
{
    char dir[256];
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "dbfilter") == 0);
    repo_opts ro = REPO_OPTS_INIT;
    ro.location = dir;
    repo *r = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &ro, &err) == 0);
    rs_opts o = RS_OPTS_INIT;
    const char *names[] = {"db_one", "nope"};
    rs_db_filter f;
    /* no --db-include: inactive, nothing read */
    PBT_CHECK(rs_db_filter_build(r, &o, ID, &f, &err) == 0 && !f.active);
    PBT_CHECK(!stub(&f, MF_REL, "base/16385/16400"));
    o.db_include = names;
    o.ndb_include = 1;
    /* a backup without a list */
    PBT_CHECK(rs_db_filter_build(r, &o, ID, &f, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "has no database list") != NULL);
    PBT_CHECK(put_list(r, &err) == 0);
    o.ndb_include = 2;
    PBT_CHECK(rs_db_filter_build(r, &o, ID, &f, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "--db-include nope") && strstr(err.msg, "db two"));
    PBT_CHECK(!f.active && f.keep == NULL);
    o.ndb_include = 1;
    PBT_CHECK(rs_db_filter_build(r, &o, ID, &f, &err) == 0 && f.active && f.nkeep == 4);
    /* the left-out database's relation files, in base/ and in a tablespace */
    PBT_CHECK(stub(&f, MF_REL, "base/16385/16400"));
    PBT_CHECK(stub(&f, MF_REL, "base/16385/16400_fsm"));
    PBT_CHECK(stub(&f, MF_REL, "base/16385/16400_vm"));
    PBT_CHECK(stub(&f, MF_REL, "base/16385/16400_init"));
    PBT_CHECK(stub(&f, MF_REL, "base/16385/16400.3"));
    PBT_CHECK(stub(&f, MF_REL, "pg_tblspc/16390/PG_15_202209061/16385/16401"));
    /* kept: included and system databases, shared catalogs, other files, odd names */
    PBT_CHECK(!stub(&f, MF_REL, "base/16384/16400"));
    PBT_CHECK(!stub(&f, MF_REL, "base/1/1259"));
    PBT_CHECK(!stub(&f, MF_REL, "base/4/1259"));
    PBT_CHECK(!stub(&f, MF_REL, "base/5/1259"));
    PBT_CHECK(!stub(&f, MF_REL, "global/1262"));
    PBT_CHECK(!stub(&f, MF_FILE, "base/16385/PG_VERSION"));
    PBT_CHECK(!stub(&f, MF_FILE, "base/16385/pg_filenode.map"));
    PBT_CHECK(!stub(&f, MF_REL, "base/16385/16400_bogus"));
    PBT_CHECK(!stub(&f, MF_REL, "base/16385/16400."));
    PBT_CHECK(!stub(&f, MF_REL, "base/x/16400"));
    PBT_CHECK(!stub(&f, MF_REL, "pg_tblspc/16390/16385/16401/x"));
    PBT_CHECK(!stub(&f, MF_DIR, "base/16385"));
    /* the list copied for a synthetic full (rebase) */
    PBT_CHECK(rs_db_list_copy(r, ID, "20261201-130000S-000001-0001", &err) == 0);
    PBT_CHECK(repo_stat(r, "backup/20261201-130000S-000001-0001/databases", NULL, &err) == 0);
    PBT_CHECK(rs_db_list_copy(r, "20261201-110000F-000001-0001", "x", &err) == 0);
    rs_db_filter_free(&f);
    rs_db_filter_free(NULL);
    repo_free(r);
    pbt_rmtree(dir);
}

int main(void)
{
    PBT_RUN(test_round_trip);
    PBT_RUN(test_bad_names);
    PBT_RUN(test_filter);
    return PBT_DONE();
}
