/*
 * engine/pgver/pgver.c — one row per supported PostgreSQL major. Every value was read
 * from that major's headers (access/xlog_internal.h, catalog/catversion.h,
 * catalog/pg_control.h, access/xlogrecord.h, commands/dbcommands_xlog.h,
 * access/rmgrlist.h) and checked against a real server of it (server_version_num,
 * pg_control_system(), the first bytes of a WAL segment it wrote). A release branch never
 * changes them, so a minor release needs no new row; a new major does.
 */
#include "engine/pgver/pgver.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* 14 started non-exclusive backups with pg_start_backup(label, fast, exclusive := false);
 * pg_stop_backup(exclusive := false, wait_for_archive := false) returns the same three
 * columns as 15's pg_backup_stop(false), and still switches WAL on a primary. */
#define START_14 "SELECT pg_start_backup($1, $2::boolean, false)"
#define STOP_14 "SELECT lsn, labelfile, spcmapfile FROM pg_stop_backup(false, false)"
#define START_15 "SELECT pg_backup_start($1, $2::boolean)"
#define STOP_15 "SELECT lsn, labelfile, spcmapfile FROM pg_backup_stop(false)"

/* 14: BKPIMAGE_HAS_HOLE 0x01, BKPIMAGE_IS_COMPRESSED 0x02 (pglz), BKPIMAGE_APPLY 0x04;
 * XLOG_DBASE_CREATE 0x00 (0x10 is XLOG_DBASE_DROP there).
 * 15+: HAS_HOLE 0x01, APPLY 0x02, COMPRESS_PGLZ 0x04 | LZ4 0x08 | ZSTD 0x10;
 * XLOG_DBASE_CREATE_FILE_COPY 0x00, XLOG_DBASE_CREATE_WAL_LOG 0x10 (DROP 0x20).
 * Builtin resource managers are 0 (XLOG) .. 21 (LogicalMessage) in all of them. */
static const pgv_facts rows[] = {
    {14, 0xD10D, 202107181, 1300, 0x01, 0x04, 0x02, {0x00, 0x00}, 1, 21, START_14, STOP_14,
     false},
    {15, 0xD110, 202209061, 1300, 0x01, 0x02, 0x1C, {0x00, 0x10}, 2, 21, START_15, STOP_15,
     false},
    {16, 0xD113, 202307071, 1300, 0x01, 0x02, 0x1C, {0x00, 0x10}, 2, 21, START_15, STOP_15,
     false},
    {17, 0xD116, 202406281, 1700, 0x01, 0x02, 0x1C, {0x00, 0x10}, 2, 21, START_15, STOP_15,
     true},
    {18, 0xD118, 202506291, 1800, 0x01, 0x02, 0x1C, {0x00, 0x10}, 2, 21, START_15, STOP_15,
     true},
    /* 19 (read from Debian's postgresql-server-dev-19 19~rc1-1 and the pg_proc entries of
     * its postgres.bki, 2026-12-05): pg_control 1905 adds fields after the versions, the
     * checkpoint record gains logicalDecodingEnabled, XLOG gains ASSIGN_LSN (0xC0) and
     * LOGICAL_DECODING_STATUS_CHANGE (0xF0); block references, image flags, CREATE
     * DATABASE, resource managers, backup and summary functions are 18's. */
    {19, 0xD122, 202610061, 1905, 0x01, 0x02, 0x1C, {0x00, 0x10}, 2, 21, START_15, STOP_15,
     true},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

const char *pgv_supported(void) { return "14, 15, 16, 17, 18, 19"; }

const pgv_facts *pgv_by_major(int major)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].major == major)
            return &rows[i];
    return NULL;
}

int pgv_from_server_version(const pgv_facts **out, int server_version_num, pb_error *err)
{
    int v = server_version_num;
    /* server_version_num is major * 10000 + minor since PostgreSQL 10 (90624 was 9.6.24). */
    *out = v >= 100000 ? pgv_by_major(v / 10000) : NULL;
    if (*out)
        return 0;
    char name[32];
    if (v >= 100000)
        snprintf(name, sizeof(name), "%d.%d", v / 10000, v % 10000);
    else
        snprintf(name, sizeof(name), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return pb_fail(err, PB_EUNSUPPORTED, "PostgreSQL server version %s (server_version_num %d) "
                   "is not supported (supported majors: %s)", name, v, pgv_supported());
}

int pgv_from_wal_magic(const pgv_facts **out, uint16_t magic, pb_error *err)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].wal_page_magic == magic)
            return *out = &rows[i], 0;
    *out = NULL;
    return pb_fail(err, PB_EUNSUPPORTED,
                   "WAL page magic 0x%04X is not that of a supported PostgreSQL "
                   "(supported majors: %s)", magic, pgv_supported());
}

int pgv_from_catversion(const pgv_facts **out, uint32_t catversion, pb_error *err)
{
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].catversion == catversion)
            return *out = &rows[i], 0;
    *out = NULL;
    return pb_fail(err, PB_EUNSUPPORTED,
                   "catalog version %u is not that of a supported PostgreSQL "
                   "(supported majors: %s)", catversion, pgv_supported());
}

int pgv_from_control(const pgv_facts **out, const uint8_t *pg_control, size_t len,
                     pb_error *err)
{
    *out = NULL;
    if (len < 16)
        return pb_fail(err, PB_EINVAL, "pg_control: %zu bytes, too short for its versions", len);
    uint32_t control, catversion;
    /* Native byte order, as the server wrote it: pageback reads it on that kind of host. */
    memcpy(&control, pg_control + 8, 4);
    memcpy(&catversion, pg_control + 12, 4);
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].catversion == catversion && rows[i].control_version == control)
            return *out = &rows[i], 0;
    return pb_fail(err, PB_EUNSUPPORTED,
                   "pg_control version %u with catalog version %u is not that of a supported "
                   "PostgreSQL (supported majors: %s)", control, catversion, pgv_supported());
}

bool pgv_is_dbase_create(const pgv_facts *v, uint8_t info)
{
    for (unsigned i = 0; i < v->ndbase_create; i++)
        if (v->dbase_create[i] == (info & 0xF0))
            return true;
    return false;
}

void pgv_tblspc_dir(const pgv_facts *v, uint32_t catversion, char *out, size_t cap)
{
    snprintf(out, cap, "PG_%d_%u", v->major, catversion);
}
