/*
 * engine/pg/pgconn.c — the libpq session a backup holds open (docs/DESIGN.md rule 1). With
 * engine/pg/pgconn_summary.c (the WAL summaries) the only files that include <libpq-fe.h>,
 * through engine/pgconn_internal.h.
 *
 * A non-exclusive backup belongs to the session that started it: the same pgc must
 * call pgc_backup_start and pgc_backup_stop, and closing it (pgc_free) in between
 * makes the server abort the backup, which is the right outcome for a failed run.
 */
#include "engine/pg/pgconn_internal.h"
#include "engine/pgver/pgver.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pgc_one_line(const char *in, char *out, size_t outsz)
{
    size_t j = 0;
    for (size_t i = 0; in && in[i] && j + 1 < outsz; i++)
        out[j++] = (in[i] == '\n' || in[i] == '\r' || in[i] == '\t') ? ' ' : in[i];
    while (j > 0 && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
}

static const char *or_default(const char *s, const char *dflt)
{
    return (s && *s) ? s : dflt;
}

/* host=.. port=.. dbname=.. of a connection, for messages. */
static void describe_target(PGconn *conn, char *out, size_t outsz)
{
    snprintf(out, outsz, "host=%s port=%s dbname=%s",
             or_default(conn ? PQhost(conn) : NULL, "(default)"),
             or_default(conn ? PQport(conn) : NULL, "(default)"),
             or_default(conn ? PQdb(conn) : NULL, "(default)"));
}

int pgc_query_rows(pgc *c, const char *sql, int nparams, const char *const *params,
                   int min_rows, int ncols, PGresult **out, pb_error *err)
{
    char msg[768];
    *out = NULL;
    PGresult *res = PQexecParams(c->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        pgc_one_line(res ? PQresultErrorMessage(res) : PQerrorMessage(c->conn), msg, sizeof(msg));
        if (!*msg)
            pgc_one_line(PQerrorMessage(c->conn), msg, sizeof(msg));
        int code = PQstatus(c->conn) == CONNECTION_OK ? PB_EPG : PB_EREMOTE;
        PQclear(res);
        return pb_fail(err, code, "PostgreSQL: \"%s\" failed: %s", sql, msg);
    }
    if (PQntuples(res) < min_rows || PQnfields(res) != ncols) {
        int rows = PQntuples(res), cols = PQnfields(res);
        PQclear(res);
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned %d rows of %d columns, "
                       "expected %d of %d", sql, rows, cols, min_rows, ncols);
    }
    *out = res;
    return 0;
}

/* One text value from a one-row, one-column query, copied into out. */
static int query_value(pgc *c, const char *sql, char *out, size_t outsz, pb_error *err)
{
    PGresult *res;
    int rc = pgc_query_rows(c, sql, 0, NULL, 1, 1, &res, err);
    if (rc)
        return rc;
    if (PQgetisnull(res, 0, 0)) {
        PQclear(res);
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned NULL", sql);
    }
    const char *v = PQgetvalue(res, 0, 0);
    if (strlen(v) >= outsz) {
        PQclear(res);
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned a value longer than %zu bytes",
                       sql, outsz - 1);
    }
    strcpy(out, v);
    PQclear(res);
    return 0;
}

static int query_u64(pgc *c, const char *sql, uint64_t *out, pb_error *err)
{
    char buf[64], *end = NULL;
    int rc = query_value(c, sql, buf, sizeof(buf), err);
    if (rc)
        return rc;
    /* system_identifier is a bigint and may print negative; keep its 64 bits. */
    *out = buf[0] == '-' ? (uint64_t)strtoll(buf, &end, 10) : strtoull(buf, &end, 10);
    if (end == buf || *end)
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not an integer", sql,
                       buf);
    return 0;
}

/*
 * Server notices go to our log instead of libpq's default stderr printer: WARNINGs
 * (e.g. pg_backup_stop still waiting for the archiver) as warnings, the rest
 * (NOTICE "all required WAL segments have been archived", ...) as debug lines.
 */
static void notice_receiver(void *arg, const PGresult *res)
{
    char msg[768];
    (void)arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    pgc_one_line(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY), msg, sizeof(msg));
    if (sev && strcmp(sev, "WARNING") == 0)
        pb_warn("PostgreSQL: %s", msg);
    else
        pb_debug("PostgreSQL %s: %s", sev ? sev : "notice", msg);
}

int pgc_connect(pgc **out, const char *conninfo, pb_error *err)
{
    /* fallback_application_name names us in pg_stat_activity unless the user chose
     * an application_name (in conninfo or PGAPPNAME). expand_dbname lets conninfo be
     * a full connection string or URI. */
    const char *keys[3] = {"fallback_application_name", NULL, NULL};
    const char *vals[3] = {"pageback", NULL, NULL};
    char target[512], msg[768];
    int rc = 0;
    *out = NULL;
    if (conninfo && *conninfo) {
        keys[1] = "dbname";
        vals[1] = conninfo;
    }
    pgc *c = calloc(1, sizeof(*c));
    if (!c)
        return pb_fail(err, PB_ENOMEM, "PostgreSQL: out of memory");
    c->conn = PQconnectdbParams(keys, vals, 1);
    if (!c->conn || PQstatus(c->conn) != CONNECTION_OK) {
        describe_target(c->conn, target, sizeof(target));
        pgc_one_line(c->conn ? PQerrorMessage(c->conn) : "out of memory", msg, sizeof(msg));
        rc = pb_fail(err, PB_EREMOTE, "cannot connect to PostgreSQL (%s): %s", target, msg);
        goto out;
    }
    PQsetNoticeReceiver(c->conn, notice_receiver, NULL);
    if ((rc = pgv_from_server_version(&c->facts, PQserverVersion(c->conn), err)))
        goto out;
    /* A backup can take hours and pg_backup_stop waits for the archiver: a
     * configured statement or idle timeout must not kill the session that owns it. */
    PGresult *res = PQexec(c->conn, "SET statement_timeout = 0; SET idle_session_timeout = 0; "
                                    "SET idle_in_transaction_session_timeout = 0");
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        pgc_one_line(PQresultErrorMessage(res), msg, sizeof(msg));
        rc = pb_fail(err, PB_EPG, "PostgreSQL: disabling session timeouts failed: %s", msg);
    }
    PQclear(res);
out:
    if (rc) {
        pgc_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void pgc_free(pgc *c)
{
    if (!c)
        return;
    PQfinish(c->conn);
    free(c);
}

static int parse_bool_setting(const char *sql, const char *v, bool *out, pb_error *err)
{
    if (strcmp(v, "on") == 0 || strcmp(v, "true") == 0)
        *out = true;
    else if (strcmp(v, "off") == 0 || strcmp(v, "false") == 0)
        *out = false;
    else
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not a boolean", sql, v);
    return 0;
}

static int info_settings(pgc *c, pgc_info *out, pb_error *err)
{
    static const char q_checksums[] = "SHOW data_checksums";
    static const char q_recovery[] = "SELECT pg_is_in_recovery()";
    /* pg_settings reports wal_segment_size with unit "B" since PostgreSQL 11. */
    static const char q_segsize[] =
        "SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'";
    static const char q_blksize[] = "SELECT current_setting('block_size')::int";
    char v[16];
    uint64_t n;
    int rc;
    if ((rc = query_value(c, q_checksums, v, sizeof(v), err)) ||
        (rc = parse_bool_setting(q_checksums, v, &out->data_checksums, err)))
        return rc;
    /* boolean results come back as "t" / "f" in text format */
    if ((rc = query_value(c, q_recovery, v, sizeof(v), err)))
        return rc;
    out->in_recovery = strcmp(v, "t") == 0;
    if ((rc = query_value(c, "SHOW data_directory", out->data_directory,
                          sizeof(out->data_directory), err)))
        return rc;
    if ((rc = query_u64(c, q_segsize, &n, err)))
        return rc;
    /* initdb allows powers of two from 1 MiB to 1 GiB. */
    if (n < (1u << 20) || n > (1u << 30) || (n & (n - 1)))
        return pb_fail(err, PB_EPG, "PostgreSQL reports wal_segment_size %" PRIu64
                       " bytes, not a power of two between 1 MiB and 1 GiB", n);
    out->wal_segment_size = (uint32_t)n;
    if ((rc = query_u64(c, q_blksize, &n, err)))
        return rc;
    out->block_size = (uint32_t)n;
    if ((rc = query_value(c, "SHOW wal_level", out->wal_level, sizeof(out->wal_level), err)) ||
        (rc = query_value(c, "SHOW wal_log_hints", v, sizeof(v), err)) ||
        (rc = parse_bool_setting("SHOW wal_log_hints", v, &out->wal_log_hints, err)))
        return rc;
    if (n != PB_PAGE_SIZE)
        return pb_fail(err, PB_EUNSUPPORTED, "PostgreSQL block_size is %" PRIu64
                       " bytes; pageback supports only %u", n, PB_PAGE_SIZE);
    return 0;
}

int pgc_info_get(pgc *c, pgc_info *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    out->server_version = PQserverVersion(c->conn);
    out->facts = c->facts;
    int rc = query_u64(c, "SELECT system_identifier FROM pg_control_system()", &out->system_id,
                       err);
    if (!rc)
        rc = info_settings(c, out, err);
    uint64_t cat = 0;
    if (!rc)
        rc = query_u64(c, "SELECT catalog_version_no FROM pg_control_system()", &cat, err);
    if (!rc && (cat == 0 || cat > UINT32_MAX))
        rc = pb_fail(err, PB_EPG, "PostgreSQL reports catalog version %" PRIu64, cat);
    if (!rc) {
        /* TABLESPACE_VERSION_DIRECTORY: "PG_" PG_MAJORVERSION "_" CATALOG_VERSION_NO */
        out->catversion = (uint32_t)cat;
        pgv_tblspc_dir(c->facts, out->catversion, out->tblspc_dir, sizeof(out->tblspc_dir));
    }
    return rc;
}

int pgc_backup_start(pgc *c, const char *label, bool fast, uint64_t *start_lsn,
                     uint32_t *timeline, pb_error *err)
{
    const char *q_start = c->facts->backup_start_sql; /* pg_backup_start, 14: pg_start_backup */
    /* pg_backup_start has just completed a checkpoint (immediate when fast, else spread
     * over checkpoint_completion_target; on a standby: a restartpoint, or found the
     * latest one done) whose REDO is the start LSN; that checkpoint's timeline is the
     * backup's start timeline (backup_standby.c checks it against the label's). */
    static const char q_tli[] = "SELECT timeline_id FROM pg_control_checkpoint()";
    const char *params[2] = {label ? label : "pageback", fast ? "true" : "false"};
    PGresult *res = NULL;
    uint64_t tli;
    int rc = pgc_query_rows(c, q_start, 2, params, 1, 1, &res, err);
    if (rc)
        return rc;
    const char *text = PQgetvalue(res, 0, 0);
    if (pb_lsn_parse(text, start_lsn) != 0)
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not an LSN", q_start, text);
    PQclear(res);
    if (rc)
        return rc;
    if ((rc = query_u64(c, q_tli, &tli, err)))
        return rc;
    if (tli == 0 || tli > UINT32_MAX)
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned timeline %" PRIu64, q_tli, tli);
    *timeline = (uint32_t)tli;
    return 0;
}

static char *dup_value(PGresult *res, int col)
{
    return strdup(PQgetisnull(res, 0, col) ? "" : PQgetvalue(res, 0, col));
}

int pgc_backup_stop(pgc *c, uint64_t *stop_lsn, char **label_out, char **spcmap_out,
                    pb_error *err)
{
    /* wait_for_archive := false: a primary still switches to a new segment (a standby
     * cannot: engine/backup/backup_standby.c), and the backup then polls the repository itself
     * for every segment it needs (rule 4), which is both stricter and faster than the
     * server's once-a-second check. */
    const char *q_stop = c->facts->backup_stop_sql; /* pg_backup_stop, 14: pg_stop_backup */
    PGresult *res = NULL;
    char *label = NULL, *spcmap = NULL;
    *label_out = NULL;
    *spcmap_out = NULL;
    int rc = pgc_query_rows(c, q_stop, 0, NULL, 1, 3, &res, err);
    if (rc)
        return rc;
    const char *text = PQgetvalue(res, 0, 0);
    if (pb_lsn_parse(text, stop_lsn) != 0) {
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not an LSN", q_stop, text);
        goto out;
    }
    if (PQgetisnull(res, 0, 1) || !*PQgetvalue(res, 0, 1)) {
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned an empty backup_label", q_stop);
        goto out;
    }
    label = dup_value(res, 1);
    spcmap = dup_value(res, 2);
    if (!label || !spcmap) {
        rc = pb_fail(err, PB_ENOMEM, "PostgreSQL: out of memory copying backup_label");
        goto out;
    }
    *label_out = label;
    *spcmap_out = spcmap;
    label = spcmap = NULL;
out:
    free(label);
    free(spcmap);
    PQclear(res);
    return rc;
}

int pgc_current_wal(pgc *c, uint64_t *lsn, uint32_t *timeline, pb_error *err)
{
    /* A standby has no current write position: what it has received is its "now". */
    static const char q_lsn[] = "SELECT (CASE WHEN pg_is_in_recovery() THEN "
                                "pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END "
                                "- '0/0'::pg_lsn)::text";
    static const char q_tli[] = "SELECT timeline_id FROM pg_control_checkpoint()";
    uint64_t tli = 0;
    int rc = query_u64(c, q_lsn, lsn, err);
    if (rc == 0)
        rc = query_u64(c, q_tli, &tli, err);
    *timeline = (uint32_t)tli;
    return rc;
}

int pgc_replay_lsn(pgc *c, uint64_t *out, pb_error *err)
{
    static const char q[] = "SELECT pg_last_wal_replay_lsn()";
    char v[32];
    int rc = query_value(c, q, v, sizeof(v), err);
    if (rc == 0 && pb_lsn_parse(v, out) != 0)
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not an LSN", q, v);
    return rc;
}

int pgc_recovery_timeline(pgc *c, uint32_t *out, pb_error *err)
{
    static const char q[] = "SELECT min_recovery_end_timeline FROM pg_control_recovery()";
    uint64_t tli;
    int rc = query_u64(c, q, &tli, err);
    if (rc == 0 && (tli == 0 || tli > UINT32_MAX))
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned timeline %" PRIu64, q, tli);
    if (rc == 0)
        *out = (uint32_t)tli;
    return rc;
}

int pgc_databases(pgc *c, mf_dblist *out, pb_error *err)
{
    static const char q[] = "SELECT oid, datname FROM pg_database ORDER BY oid";
    PGresult *res = NULL;
    int rc = pgc_query_rows(c, q, 0, NULL, 1, 2, &res, err);
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        char *end = NULL;
        unsigned long oid = strtoul(PQgetvalue(res, i, 0), &end, 10);
        if (!end || *end || oid == 0 || oid > UINT32_MAX)
            rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned OID \"%s\"", q,
                         PQgetvalue(res, i, 0));
        else
            rc = mf_dblist_add(out, (uint32_t)oid, PQgetvalue(res, i, 1), err);
    }
    PQclear(res);
    return rc;
}

int pgc_server_time(pgc *c, int64_t *out, pb_error *err)
{
    uint64_t v = 0;
    int rc = query_u64(c, "SELECT floor(extract(epoch FROM clock_timestamp()))::bigint", &v, err);
    *out = rc ? 0 : (int64_t)v;
    return rc;
}

/* One value of row 0 as an unsigned integer (a bigint may print negative: its 64 bits). */
static int col_u64(PGresult *res, int col, const char *sql, uint64_t *out, pb_error *err)
{
    const char *v = PQgetisnull(res, 0, col) ? "" : PQgetvalue(res, 0, col);
    char *end = NULL;
    *out = v[0] == '-' ? (uint64_t)strtoll(v, &end, 10) : strtoull(v, &end, 10);
    if (end == v || *end)
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\" in column %d, not an "
                       "integer", sql, v, col + 1);
    return 0;
}

int pgc_control_get(pgc *c, pgc_control *out, pb_error *err)
{
    static const char q[] =
        "SELECT s.system_identifier, i.data_page_checksum_version, "
        "(c.checkpoint_lsn - '0/0'::pg_lsn)::text, (c.redo_lsn - '0/0'::pg_lsn)::text, "
        "c.timeline_id FROM pg_control_system() s, pg_control_init() i, "
        "pg_control_checkpoint() c";
    PGresult *res = NULL;
    uint64_t v[5] = {0};
    memset(out, 0, sizeof(*out));
    int rc = pgc_query_rows(c, q, 0, NULL, 1, 5, &res, err);
    for (int i = 0; rc == 0 && i < 5; i++)
        rc = col_u64(res, i, q, &v[i], err);
    PQclear(res);
    if (rc == 0 && (v[1] > UINT32_MAX || v[4] == 0 || v[4] > UINT32_MAX))
        rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned checksum version %" PRIu64
                     " and timeline %" PRIu64, q, v[1], v[4]);
    if (rc)
        return rc;
    out->system_id = v[0];
    out->checksum_version = (uint32_t)v[1];
    out->checkpoint_lsn = v[2];
    out->redo_lsn = v[3];
    out->timeline = (uint32_t)v[4];
    return 0;
}

int pgc_query_text(pgc *c, const char *sql, char *out, size_t outsz, pb_error *err)
{
    return query_value(c, sql, out, outsz, err);
}

int pgc_checkpoint_spread(pgc *c, char *timeout, size_t tcap, char *target, size_t gcap,
                          double *seconds, pb_error *err)
{
    static const char q_secs[] =
        "SELECT round((SELECT setting::float8 FROM pg_settings WHERE name = "
        "'checkpoint_timeout') * current_setting('checkpoint_completion_target')::float8)";
    char v[64], *end = NULL;
    int rc = query_value(c, "SHOW checkpoint_timeout", timeout, tcap, err);
    if (rc == 0)
        rc = query_value(c, "SHOW checkpoint_completion_target", target, gcap, err);
    if (rc == 0)
        rc = query_value(c, q_secs, v, sizeof(v), err);
    if (rc)
        return rc;
    *seconds = strtod(v, &end);
    if (end == v || *end)
        return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned \"%s\", not a number", q_secs,
                       v);
    return 0;
}
