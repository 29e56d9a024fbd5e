/* tests/unit/engine/pgver/pgver_test.c — the version table and its lookups: each major's
 * facts as its headers state them (and as the real servers of tools/pgversions.sh report
 * them: server_version_num, pg_control_system(), a WAL segment's first bytes), every key
 * finds its own row, and what is not a supported version is refused naming it. */
#include "engine/pgver/pgver.h"
#include "tests/unit/pbtest.h"

#include <stdio.h>
#include <string.h>

typedef struct want {
    int major;
    uint16_t magic;
    uint32_t catversion, control;
    uint8_t apply, compressed;
    const char *start_fn;
    bool summaries;
} want;

static const want wants[] = {
    {14, 0xD10D, 202107181, 1300, 0x04, 0x02, "pg_start_backup(", false},
    {15, 0xD110, 202209061, 1300, 0x02, 0x1C, "pg_backup_start(", false},
    {16, 0xD113, 202307071, 1300, 0x02, 0x1C, "pg_backup_start(", false},
    {17, 0xD116, 202406281, 1700, 0x02, 0x1C, "pg_backup_start(", true},
    {18, 0xD118, 202506291, 1800, 0x02, 0x1C, "pg_backup_start(", true},
    {19, 0xD122, 202610061, 1905, 0x02, 0x1C, "pg_backup_start(", true},
};

static void test_rows(void)
{
    for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
        const want *w = &wants[i];
        const pgv_facts *v = pgv_by_major(w->major), *o = NULL;
        pb_error e = PB_ERROR_INIT;
        PBT_CHECK(v && v->major == w->major);
        if (!v)
            continue;
        PBT_CHECK(v->wal_page_magic == w->magic && v->catversion == w->catversion);
        PBT_CHECK(v->control_version == w->control && v->bkpimage_has_hole == 0x01);
        PBT_CHECK(v->bkpimage_apply == w->apply && v->bkpimage_compressed == w->compressed);
        PBT_CHECK((v->bkpimage_apply & v->bkpimage_compressed) == 0);
        PBT_CHECK(strstr(v->backup_start_sql, w->start_fn) != NULL);
        PBT_CHECK(strstr(v->backup_stop_sql, "lsn, labelfile, spcmapfile") != NULL);
        PBT_CHECK(v->wal_summaries == w->summaries && v->rm_max_builtin == 21);
        PBT_CHECK(pgv_from_server_version(&o, w->major * 10000 + 7, &e) == 0 && o == v);
        PBT_CHECK(pgv_from_wal_magic(&o, w->magic, &e) == 0 && o == v);
        PBT_CHECK(pgv_from_catversion(&o, w->catversion, &e) == 0 && o == v);
        uint8_t ctl[16] = {0};
        memcpy(ctl + 8, &w->control, 4);
        memcpy(ctl + 12, &w->catversion, 4);
        PBT_CHECK(pgv_from_control(&o, ctl, sizeof(ctl), &e) == 0 && o == v);
        uint32_t other = w->control + 1;
        memcpy(ctl + 8, &other, 4); /* a catalog version with another major's control */
        PBT_CHECK(pgv_from_control(&o, ctl, sizeof(ctl), &e) == PB_EUNSUPPORTED && !o);
        PBT_CHECK(pgv_from_control(&o, ctl, 15, &e) == PB_EINVAL);
        char dir[32], exp[32];
        pgv_tblspc_dir(v, w->catversion, dir, sizeof(dir));
        snprintf(exp, sizeof(exp), "PG_%d_%u", w->major, w->catversion);
        PBT_CHECK(strcmp(dir, exp) == 0);
        /* CREATE DATABASE: 0x00 everywhere; 0x10 is WAL_LOG from 15 on, DROP on 14. */
        PBT_CHECK(pgv_is_dbase_create(v, 0x00) && pgv_is_dbase_create(v, 0x01));
        PBT_CHECK(pgv_is_dbase_create(v, 0x10) == (w->major >= 15));
        PBT_CHECK(!pgv_is_dbase_create(v, 0x20));
    }
    /* 14's stop does not wait for the archive, as 15's pg_backup_stop(false) does not. */
    PBT_CHECK(strstr(pgv_by_major(14)->backup_stop_sql, "pg_stop_backup(false, false)"));
    PBT_CHECK(strstr(pgv_by_major(14)->backup_start_sql, "$2::boolean, false)"));
}

static void test_refused(void)
{
    const pgv_facts *o = pgv_by_major(15);
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(pgv_by_major(13) == NULL && pgv_by_major(20) == NULL);
    PBT_CHECK(pgv_from_server_version(&o, 130012, &e) == PB_EUNSUPPORTED && o == NULL);
    PBT_CHECK(strstr(e.msg, "13.12") && strstr(e.msg, "14, 15, 16, 17, 18, 19"));
    PBT_CHECK(pgv_from_server_version(&o, 200000, &e) == PB_EUNSUPPORTED);
    PBT_CHECK(strstr(e.msg, "20.0") != NULL);
    /* 19's beta catalog version (pgBackRest 2.60 carries it) is not the release's. */
    PBT_CHECK(pgv_from_catversion(&o, 202605131, &e) == PB_EUNSUPPORTED);
    PBT_CHECK(pgv_from_server_version(&o, 90624, &e) == PB_EUNSUPPORTED);
    PBT_CHECK(strstr(e.msg, "9.6.24") != NULL);
    PBT_CHECK(pgv_from_wal_magic(&o, 0xD106, &e) == PB_EUNSUPPORTED && o == NULL);
    PBT_CHECK(strstr(e.msg, "0xD106") != NULL);
    PBT_CHECK(pgv_from_wal_magic(&o, 0, &e) == PB_EUNSUPPORTED);
    PBT_CHECK(pgv_from_catversion(&o, 202007201, &e) == PB_EUNSUPPORTED);
    PBT_CHECK(strstr(e.msg, "202007201") != NULL);
    uint8_t ctl[16] = {0};
    uint32_t control = 1201, catversion = 201909212; /* PostgreSQL 12 */
    memcpy(ctl + 8, &control, 4);
    memcpy(ctl + 12, &catversion, 4);
    PBT_CHECK(pgv_from_control(&o, ctl, sizeof(ctl), &e) == PB_EUNSUPPORTED);
    PBT_CHECK(strstr(e.msg, "1201") && strstr(e.msg, "201909212"));
}

int main(void)
{
    test_rows();
    test_refused();
    return PBT_DONE();
}
