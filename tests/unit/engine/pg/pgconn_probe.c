/* tests/unit/engine/pg/pgconn_probe.c — every public pgc_ function against a real PostgreSQL
 * of any supported major (pgconn.sh on the host's 15, versions.sh on the others),
 * each answer checked against what SQL on a second, plain libpq session says. Not a *_test:
 * the unit phase runs no server; tests/integration/pgconn.sh starts one and runs this.
 * Usage: pgconn_probe [CONNINFO] (else PB_TEST_CONNINFO). With PB_TEST_PGLOG set to the
 * server log (log_checkpoints = on), it also checks which kind of checkpoint each
 * pg_backup_start asked for. */
#include "engine/pg/pg.h"
#include "tests/unit/pbtest.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *conninfo;
static PGconn *ref; /* the reference session: plain SQL, no pgc_ code */

/* One text value of a one-row reference query, copied into out ("" on error). */
static void sql(const char *q, char *out, size_t outsz)
{
    PGresult *res = PQexec(ref, q);
    out[0] = '\0';
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
        snprintf(out, outsz, "%s", PQgetvalue(res, 0, 0));
    else if (PQresultStatus(res) != PGRES_COMMAND_OK)
        fprintf(stderr, "reference query \"%s\" failed: %s", q, PQerrorMessage(ref));
    PQclear(res);
}

static uint64_t sql_u64(const char *q)
{
    char v[64];
    sql(q, v, sizeof(v));
    return v[0] == '-' ? (uint64_t)strtoll(v, NULL, 10) : strtoull(v, NULL, 10);
}

static bool sql_true(const char *q)
{
    char v[8];
    sql(q, v, sizeof(v));
    return strcmp(v, "t") == 0;
}

static pgc *connect_ok(void)
{
    pgc *c = NULL;
    pb_error err = PB_ERROR_INIT;
    int rc = pgc_connect(&c, conninfo, &err);
    if (rc)
        fprintf(stderr, "pgc_connect: %s\n", err.msg);
    PBT_CHECK(rc == 0 && c != NULL);
    return c;
}

/* How many times the server log holds needle (0 without PB_TEST_PGLOG). */
static int log_count(const char *needle)
{
    const char *path = getenv("PB_TEST_PGLOG");
    char line[2048];
    int n = 0;
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Checkpoints a backup start asked for, by the server log: a fast one says "immediate"
 * up to 18 and "fast" from 19 on. */
static int ckpt_count(bool fast)
{
    return fast ? log_count("checkpoint starting: immediate force wait") +
                      log_count("checkpoint starting: fast force wait")
                : log_count("checkpoint starting: force wait");
}

/* ---------------------------------------------------------------- tests */

static void test_connect_errors(void)
{
    pgc *c = (pgc *)1;
    pb_error err = PB_ERROR_INIT;
    int rc = pgc_connect(&c, "host=/nonexistent/pb-probe port=1 dbname=probe_db "
                             "connect_timeout=2", &err);
    PBT_CHECK(rc == PB_EREMOTE);
    PBT_CHECK(c == NULL);
    PBT_CHECK(strstr(err.msg, "cannot connect to PostgreSQL") != NULL);
    PBT_CHECK(strstr(err.msg, "host=/nonexistent/pb-probe") != NULL);
    PBT_CHECK(strstr(err.msg, "port=1") != NULL);
    PBT_CHECK(strstr(err.msg, "dbname=probe_db") != NULL);
    pgc_free(NULL); /* accepted */
}

static void test_info(void)
{
    pgc *c = connect_ok();
    pgc_info in;
    pb_error err = PB_ERROR_INIT;
    char v[4096], want[64];
    if (!c)
        return;
    PBT_CHECK(pgc_info_get(c, &in, &err) == 0);
    PBT_CHECK((uint64_t)in.server_version ==
              sql_u64("SELECT current_setting('server_version_num')"));
    /* The version layer's row is the server's, and its facts are the server's own. */
    PBT_CHECK(in.facts != NULL && in.facts == pgv_by_major(in.server_version / 10000));
    PBT_CHECK(in.facts && in.facts->catversion == in.catversion);
    PBT_CHECK(in.facts && in.facts->control_version ==
                              sql_u64("SELECT pg_control_version FROM pg_control_system()"));
    PBT_CHECK(in.system_id == sql_u64("SELECT system_identifier FROM pg_control_system()"));
    PBT_CHECK(in.system_id != 0);
    PBT_CHECK(in.catversion == sql_u64("SELECT catalog_version_no FROM pg_control_system()"));
    snprintf(want, sizeof(want), "PG_%d_%u", in.server_version / 10000, in.catversion);
    PBT_CHECK(strcmp(in.tblspc_dir, want) == 0);
    PBT_CHECK(in.wal_segment_size ==
              sql_u64("SELECT bytes_per_wal_segment FROM pg_control_init()"));
    PBT_CHECK(in.block_size == sql_u64("SELECT database_block_size FROM pg_control_init()"));
    PBT_CHECK(in.data_checksums ==
              sql_true("SELECT data_page_checksum_version <> 0 FROM pg_control_init()"));
    PBT_CHECK(in.in_recovery == sql_true("SELECT pg_is_in_recovery()"));
    PBT_CHECK(!in.in_recovery);
    sql("SELECT setting FROM pg_settings WHERE name = 'data_directory'", v, sizeof(v));
    PBT_CHECK(v[0] && strcmp(in.data_directory, v) == 0);
    sql("SELECT setting FROM pg_settings WHERE name = 'wal_level'", v, sizeof(v));
    PBT_CHECK(v[0] && strcmp(in.wal_level, v) == 0);
    PBT_CHECK(in.wal_log_hints ==
              sql_true("SELECT setting::boolean FROM pg_settings WHERE name = 'wal_log_hints'"));
    /* pg_control as pgc_control_get reads it (nothing checkpoints in between here) */
    pgc_control ctl;
    PBT_CHECK(pgc_control_get(c, &ctl, &err) == 0);
    PBT_CHECK(ctl.system_id == in.system_id);
    PBT_CHECK(ctl.checksum_version ==
              sql_u64("SELECT data_page_checksum_version FROM pg_control_init()"));
    PBT_CHECK(ctl.redo_lsn ==
              sql_u64("SELECT (redo_lsn - '0/0'::pg_lsn)::bigint FROM pg_control_checkpoint()"));
    PBT_CHECK(ctl.checkpoint_lsn == sql_u64("SELECT (checkpoint_lsn - '0/0'::pg_lsn)::bigint "
                                            "FROM pg_control_checkpoint()"));
    PBT_CHECK(ctl.timeline == sql_u64("SELECT timeline_id FROM pg_control_checkpoint()"));
    PBT_CHECK(ctl.redo_lsn > 0 && ctl.redo_lsn <= ctl.checkpoint_lsn && ctl.timeline == 1);
    pgc_free(c);
}

static void test_current_wal(void)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    uint64_t lsn = 0, lsn2 = 0;
    uint32_t tli = 0;
    if (!c)
        return;
    uint64_t before = sql_u64("SELECT pg_current_wal_lsn() - '0/0'");
    PBT_CHECK(pgc_current_wal(c, &lsn, &tli, &err) == 0);
    uint64_t after = sql_u64("SELECT pg_current_wal_lsn() - '0/0'");
    PBT_CHECK(before <= lsn && lsn <= after && lsn > 0);
    PBT_CHECK(tli == sql_u64("SELECT timeline_id FROM pg_control_checkpoint()"));
    PBT_CHECK(tli == 1);
    /* New WAL moves it forward. */
    char v[64];
    sql("SELECT pg_switch_wal()", v, sizeof(v));
    PBT_CHECK(pgc_current_wal(c, &lsn2, &tli, &err) == 0);
    PBT_CHECK(lsn2 > lsn);
    pgc_free(c);
}

/* On a primary the standby-only answers are refusals that name the query. */
static void test_standby_calls_on_primary(void)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    uint64_t lsn = 0;
    uint32_t tli = 0;
    if (!c)
        return;
    PBT_CHECK(pgc_replay_lsn(c, &lsn, &err) == PB_EPG);
    PBT_CHECK(strstr(err.msg, "pg_last_wal_replay_lsn") != NULL);
    PBT_CHECK(strstr(err.msg, "NULL") != NULL);
    /* A primary never set a minimum recovery end timeline: 0. */
    PBT_CHECK(sql_u64("SELECT min_recovery_end_timeline FROM pg_control_recovery()") == 0);
    err = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(pgc_recovery_timeline(c, &tli, &err) == PB_EPG);
    PBT_CHECK(strstr(err.msg, "min_recovery_end_timeline") != NULL);
    pgc_free(c);
}

/* One pg_backup_start/stop round trip; the label must tell what the calls returned. */
static void backup_round_trip(bool fast, const char *label)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    uint64_t start = 0, stop = 0;
    uint32_t tli = 0;
    char *lab = NULL, *spc = NULL, want[128];
    if (!c)
        return;
    int logged = ckpt_count(fast);
    int rc = pgc_backup_start(c, label, fast, &start, &tli, &err);
    if (rc)
        fprintf(stderr, "pgc_backup_start: %s\n", err.msg);
    PBT_CHECK(rc == 0);
    PBT_CHECK(start == sql_u64("SELECT redo_lsn - '0/0' FROM pg_control_checkpoint()"));
    PBT_CHECK(tli == sql_u64("SELECT timeline_id FROM pg_control_checkpoint()"));
    if (getenv("PB_TEST_PGLOG"))
        PBT_CHECK(ckpt_count(fast) == logged + 1);
    rc = pgc_backup_stop(c, &stop, &lab, &spc, &err);
    if (rc)
        fprintf(stderr, "pgc_backup_stop: %s\n", err.msg);
    PBT_CHECK(rc == 0 && lab && spc);
    PBT_CHECK(stop >= start);
    PBT_CHECK(stop <= sql_u64("SELECT pg_current_wal_lsn() - '0/0'"));
    /* 19 prints LSNs with the low half padded to eight digits, 14 to 18 unpadded. */
    const char *at = lab ? strstr(lab, "START WAL LOCATION: ") : NULL;
    unsigned hi = 0, lo = 0;
    PBT_CHECK(at && sscanf(at + strlen("START WAL LOCATION: "), "%X/%X", &hi, &lo) == 2);
    PBT_CHECK(((uint64_t)hi << 32 | lo) == start);
    snprintf(want, sizeof(want), "LABEL: %s\n", label);
    PBT_CHECK(lab && strstr(lab, want) != NULL);
    snprintf(want, sizeof(want), "START TIMELINE: %u\n", tli);
    PBT_CHECK(lab && strstr(lab, want) != NULL);
    PBT_CHECK(lab && strstr(lab, "BACKUP METHOD: streamed\n") != NULL);
    PBT_CHECK(spc && spc[0] == '\0'); /* no tablespaces in the probe's cluster */
    free(lab);
    free(spc);
    pgc_free(c);
}

static void test_backup_fast(void) { backup_round_trip(true, "probe fast"); }
static void test_backup_spread(void) { backup_round_trip(false, "probe spread"); }

static void test_backup_stop_errors(void)
{
    pgc *c = connect_ok(), *d = NULL;
    pb_error err = PB_ERROR_INIT;
    uint64_t lsn = 0;
    uint32_t tli = 0;
    char *lab = (char *)1, *spc = (char *)1;
    if (!c)
        return;
    PBT_CHECK(pgc_backup_stop(c, &lsn, &lab, &spc, &err) == PB_EPG);
    PBT_CHECK(lab == NULL && spc == NULL);
    /* The message names the SQL the server's major uses (pg_stop_backup on 14). */
    const pgv_facts *v = pgv_by_major((int)(sql_u64("SHOW server_version_num") / 10000));
    PBT_CHECK(v && strstr(err.msg, v->backup_stop_sql) != NULL);
    PBT_CHECK(strstr(err.msg, "not in progress") != NULL);
    /* A backup belongs to its session: closing it aborts the backup, so a new session
     * can start (and stop) one, and cannot stop the old one. */
    PBT_CHECK(pgc_backup_start(c, "probe abandoned", true, &lsn, &tli, &err) == 0);
    pgc_free(c);
    d = connect_ok();
    if (!d)
        return;
    err = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(pgc_backup_stop(d, &lsn, &lab, &spc, &err) == PB_EPG);
    PBT_CHECK(pgc_backup_start(d, "probe after abandon", true, &lsn, &tli, &err) == 0);
    PBT_CHECK(pgc_backup_stop(d, &lsn, &lab, &spc, &err) == 0);
    free(lab);
    free(spc);
    pgc_free(d);
}

static void test_databases(void)
{
    static const char name[] = "probe db \"quoted\" é";
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    mf_dblist l = {0};
    char q[256], v[64];
    if (!c)
        return;
    PQclear(PQexec(ref, "CREATE DATABASE \"probe db \"\"quoted\"\" é\""));
    PBT_CHECK(pgc_databases(c, &l, &err) == 0);
    PBT_CHECK(l.count == sql_u64("SELECT count(*) FROM pg_database"));
    PBT_CHECK(l.count >= 4);
    for (size_t i = 0; i < l.count; i++) {
        snprintf(q, sizeof(q), "SELECT datname FROM pg_database WHERE oid = %u", l.items[i].oid);
        sql(q, v, sizeof(v));
        PBT_CHECK(strcmp(v, l.items[i].name) == 0);
    }
    const mf_db *db = mf_dblist_find(&l, name);
    PBT_CHECK(db != NULL);
    snprintf(q, sizeof(q), "SELECT oid FROM pg_database WHERE datname = '%s'",
             "probe db \"quoted\" é");
    PBT_CHECK(db && db->oid == sql_u64(q));
    PBT_CHECK(mf_dblist_find(&l, "postgres") != NULL);
    PBT_CHECK(mf_dblist_find(&l, "template0") != NULL);
    mf_dblist_free(&l);
    PQclear(PQexec(ref, "DROP DATABASE \"probe db \"\"quoted\"\" é\""));
    pgc_free(c);
}

static void test_server_time(void)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    int64_t t = 0;
    if (!c)
        return;
    int64_t before = (int64_t)sql_u64("SELECT floor(extract(epoch FROM now()))::bigint");
    PBT_CHECK(pgc_server_time(c, &t, &err) == 0);
    int64_t after = (int64_t)sql_u64("SELECT ceil(extract(epoch FROM clock_timestamp()))::bigint");
    PBT_CHECK(before <= t && t <= after);
    PBT_CHECK(t - (int64_t)time(NULL) < 5 && (int64_t)time(NULL) - t < 5); /* same host */
    pgc_free(c);
}

/* A session the server killed: the next call is PB_EREMOTE (lost), not PB_EPG (refused). */
static void test_lost_connection(void)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    int64_t t = 0;
    char v[16];
    if (!c)
        return;
    /* One row whatever else is listed: a session an earlier test closed may still be
     * leaving (terminating it answers false); this test's own answers true. */
    sql("SELECT coalesce(bool_or(pg_terminate_backend(pid, 5000)), false) "
        "FROM pg_stat_activity WHERE application_name = 'pageback'", v, sizeof(v));
    PBT_CHECK(strcmp(v, "t") == 0);
    PBT_CHECK(pgc_server_time(c, &t, &err) == PB_EREMOTE);
    PBT_CHECK(strstr(err.msg, "clock_timestamp") != NULL);
    PBT_CHECK(t == 0);
    pgc_free(c);
}

static int count_block(void *ctx, const pgc_summary_block *b, pb_error *err)
{
    (void)err;
    unsigned *n = ctx;
    *n += b->fork <= 3;
    return 0;
}

/* Wait (up to 30 s) until the summarizer has summarized WAL up to lsn. */
static bool summarized_to(uint64_t lsn)
{
    for (int i = 0; i < 300; i++) {
        if (sql_u64("SELECT summarized_lsn - '0/0' FROM pg_get_wal_summarizer_state()") >= lsn)
            return true;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* The WAL summaries (17 on): what a major without them, summarize_wal off, a summarizer
 * behind the window and a window before the first summary say; the blocks of a covered
 * window. summarize_wal is turned on for the test and reset after it. */
static void test_wal_summaries(void)
{
    pgc *c = connect_ok();
    pb_error err = PB_ERROR_INIT;
    char why[400], v[16];
    unsigned n = 0;
    if (!c)
        return;
    const pgv_facts *f = pgv_by_major((int)(sql_u64("SHOW server_version_num") / 10000));
    uint32_t tli = (uint32_t)sql_u64("SELECT timeline_id FROM pg_control_checkpoint()");
    uint64_t now = sql_u64("SELECT pg_current_wal_lsn() - '0/0'");
    int rc = pgc_wal_summary_blocks(c, tli, now - 1, now, 0, count_block, &n, why, sizeof(why),
                                    &err);
    PBT_CHECK(rc == 1 && n == 0);
    if (!f || !f->wal_summaries) {
        PBT_CHECK(strstr(why, "keeps no WAL summaries") != NULL);
        pgc_free(c);
        return;
    }
    PBT_CHECK(strstr(why, "summarize_wal is off") != NULL);
    sql("ALTER SYSTEM SET summarize_wal = on", v, sizeof(v));
    sql("SELECT pg_reload_conf()", v, sizeof(v));
    sql("CREATE TABLE probe_summaries AS SELECT g FROM generate_series(1, 1000) g", v, sizeof(v));
    sql("CHECKPOINT", v, sizeof(v));
    uint64_t end = sql_u64("SELECT redo_lsn - '0/0' FROM pg_control_checkpoint()");
    PBT_CHECK(summarized_to(end));
    rc = pgc_wal_summary_blocks(c, tli, end, end + (1ull << 40), 0, count_block, &n, why,
                                sizeof(why), &err);
    PBT_CHECK(rc == 1 && n == 0 && strstr(why, "the WAL summarizer reached") != NULL);
    uint64_t first = sql_u64("SELECT min(start_lsn) - '0/0' FROM pg_available_wal_summaries()");
    PBT_CHECK(first > 0 && first < end);
    rc = pgc_wal_summary_blocks(c, tli, first - 1, end, 0, count_block, &n, why, sizeof(why),
                                &err);
    PBT_CHECK(rc == 1 && n == 0 && strstr(why, "no WAL summary on timeline") != NULL);
    rc = pgc_wal_summary_blocks(c, tli, first, end, 5, count_block, &n, why, sizeof(why), &err);
    if (rc)
        fprintf(stderr, "pgc_wal_summary_blocks: %s\n", rc > 0 ? why : err.msg);
    PBT_CHECK(rc == 0 && n > 0);
    /* A role the summary functions are revoked from: PB_EPG (the backup then decodes the
     * archived WAL instead), naming the function. */
    char ci[1024];
    pgc *d = NULL;
    sql("CREATE ROLE probe_nosum LOGIN", v, sizeof(v));
    sql("REVOKE EXECUTE ON FUNCTION pg_get_wal_summarizer_state() FROM PUBLIC", v, sizeof(v));
    snprintf(ci, sizeof(ci), "%s user=probe_nosum", conninfo);
    PBT_CHECK(pgc_connect(&d, ci, &err) == 0);
    if (d) {
        rc = pgc_wal_summary_blocks(d, tli, first, end, 0, count_block, &n, why, sizeof(why),
                                    &err);
        PBT_CHECK(rc == PB_EPG && strstr(err.msg, "pg_get_wal_summarizer_state") != NULL);
        pgc_free(d);
    }
    sql("GRANT EXECUTE ON FUNCTION pg_get_wal_summarizer_state() TO PUBLIC", v, sizeof(v));
    sql("DROP ROLE probe_nosum", v, sizeof(v));
    sql("DROP TABLE probe_summaries", v, sizeof(v));
    sql("ALTER SYSTEM RESET summarize_wal", v, sizeof(v));
    sql("SELECT pg_reload_conf()", v, sizeof(v));
    pgc_free(c);
}

int main(int argc, char **argv)
{
    conninfo = argc > 1 ? argv[1] : getenv("PB_TEST_CONNINFO");
    if (!conninfo || !*conninfo) {
        fprintf(stderr, "usage: pgconn_probe CONNINFO (or set PB_TEST_CONNINFO)\n");
        return 2;
    }
    ref = PQconnectdb(conninfo);
    if (PQstatus(ref) != CONNECTION_OK) {
        fprintf(stderr, "reference connection failed: %s", PQerrorMessage(ref));
        PQfinish(ref);
        return 2;
    }
    PQclear(PQexec(ref, "SET application_name = 'pgconn_probe'"));
    PBT_RUN(test_connect_errors);
    PBT_RUN(test_info);
    PBT_RUN(test_current_wal);
    PBT_RUN(test_standby_calls_on_primary);
    PBT_RUN(test_backup_fast);
    PBT_RUN(test_backup_spread);
    PBT_RUN(test_backup_stop_errors);
    PBT_RUN(test_databases);
    PBT_RUN(test_server_time);
    PBT_RUN(test_wal_summaries);
    PBT_RUN(test_lost_connection);
    PQfinish(ref);
    return PBT_DONE();
}
