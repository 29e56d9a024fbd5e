/*
 * engine/pgver/pgver.h — the version layer (prefix pgv_): what pageback depends on that
 * differs between PostgreSQL majors, one table row per supported major (14 to 19), chosen
 * once and handed down as a `const pgv_facts *` (pgBackRest's postgres/interface is the
 * model). From a server: pgv_from_server_version (pgconn.c, at connect). Offline: from
 * the magic of a WAL page header (the WAL reader, at its first page) or from a catalog
 * version. An unknown version is refused with a message naming it. Callers read fields;
 * they never test the major number themselves.
 *
 * The room depends on common/ only; the rows are static and never freed.
 */
#ifndef PB_ENGINE_PGVER_H
#define PB_ENGINE_PGVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

typedef struct pgv_facts {
    int major;                 /* 14 .. 19 */
    uint16_t wal_page_magic;   /* XLOG_PAGE_MAGIC (access/xlog_internal.h) */
    uint32_t catversion;       /* CATALOG_VERSION_NO (catalog/catversion.h) */
    uint32_t control_version;  /* PG_CONTROL_VERSION (catalog/pg_control.h) */
    /* Full-page-image flags of XLogRecordBlockImageHeader.bimg_info (access/xlogrecord.h):
     * 15 moved BKPIMAGE_APPLY from 0x04 to 0x02 and gave each compression method a bit. */
    uint8_t bkpimage_has_hole, bkpimage_apply, bkpimage_compressed; /* compressed: a mask */
    /* CREATE DATABASE record kinds of RM_DBASE_ID (commands/dbcommands_xlog.h, info &
     * 0xF0): 14 has one (XLOG_DBASE_CREATE), 15 on FILE_COPY and WAL_LOG. Both layouts
     * begin with {Oid db_id; Oid tablespace_id}. ndbase_create of them are valid. */
    uint8_t dbase_create[2], ndbase_create;
    uint8_t rm_max_builtin;    /* the last builtin resource manager (access/rmgrlist.h) */
    /* Backup start ($1 label text, $2 fast boolean; returns the start LSN) and stop
     * (returns lsn, labelfile, spcmapfile; does not wait for the archive). */
    const char *backup_start_sql, *backup_stop_sql;
    bool wal_summaries;        /* summarize_wal and pg_available_wal_summaries() (17+) */
} pgv_facts;

/* The row of a major (14 .. 19), or NULL. */
const pgv_facts *pgv_by_major(int major);
/* From server_version_num (e.g. 160004). PB_EUNSUPPORTED naming the version otherwise. */
int pgv_from_server_version(const pgv_facts **out, int server_version_num, pb_error *err);
/* From a WAL page header's xlp_magic. PB_EUNSUPPORTED naming the magic otherwise. */
int pgv_from_wal_magic(const pgv_facts **out, uint16_t magic, pb_error *err);
/* From a catalog version (pg_control's catalog_version_no, or the PG_<major>_<catver>
 * directory of a tablespace). PB_EUNSUPPORTED naming it otherwise. */
int pgv_from_catversion(const pgv_facts **out, uint32_t catversion, pb_error *err);
/* From the first bytes of global/pg_control (ControlFileData: u64 system_identifier,
 * u32 pg_control_version, u32 catalog_version_no, in the server's byte order; len >= 16):
 * the row of its catalog version, whose pg_control version must match too.
 * PB_EUNSUPPORTED naming both versions otherwise, PB_EINVAL when len is too short. */
int pgv_from_control(const pgv_facts **out, const uint8_t *pg_control, size_t len,
                     pb_error *err);

/* Is info (masked with 0xF0) of an RM_DBASE_ID record a CREATE DATABASE of this major? */
bool pgv_is_dbase_create(const pgv_facts *v, uint8_t info);
/* "PG_<major>_<catversion>": the cluster's directory inside a tablespace
 * (TABLESPACE_VERSION_DIRECTORY) for a catalog version, into out (cap >= 32). */
void pgv_tblspc_dir(const pgv_facts *v, uint32_t catversion, char *out, size_t cap);
/* "14, 15, 16, 17, 18, 19": the supported majors, for messages. */
const char *pgv_supported(void);

#endif
