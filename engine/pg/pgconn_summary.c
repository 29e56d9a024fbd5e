/*
 * engine/pg/pgconn_summary.c — the server's WAL summaries (PostgreSQL 17 on: summarize_wal,
 * walsummarizer.c) as an incremental's changed-block list, on the backup's own session
 * (engine/pg/pgconn.c holds the session and its query helpers).
 */
#include "engine/pg/pgconn_internal.h"
#include "engine/pgver/pgver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Wait up to wait_secs until the summarizer has summarized WAL up to end on timeline tli
 * (an incremental's start was just made by a checkpoint). 1 = not in time (why filled). */
static int summaries_reach(pgc *c, uint32_t tli, uint64_t end, unsigned wait_secs, char *why,
                           size_t why_len, pb_error *err)
{
    static const char q[] =
        "SELECT summarized_tli, summarized_lsn FROM pg_get_wal_summarizer_state()";
    double deadline = pb_now() + wait_secs;
    useconds_t pause = 5000; /* the summarizer follows a checkpoint within milliseconds */
    for (;;) {
        PGresult *res = NULL;
        uint64_t lsn = 0;
        int rc = pgc_query_rows(c, q, 0, NULL, 1, 2, &res, err);
        if (rc)
            return rc;
        unsigned long t = strtoul(PQgetvalue(res, 0, 0), NULL, 10);
        bool bad = pb_lsn_parse(PQgetvalue(res, 0, 1), &lsn) != 0;
        PQclear(res);
        if (bad)
            return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned no LSN", q);
        if (t > tli || (t == tli && lsn >= end))
            return 0;
        if (pb_now() >= deadline) {
            char at[32], want[32];
            pb_lsn_format(lsn, at);
            pb_lsn_format(end, want);
            snprintf(why, why_len, "the WAL summarizer reached %s on timeline %lu, not the "
                     "window's end %s on timeline %u, within %u s", at, t, want, tli, wait_secs);
            return 1;
        }
        usleep(pause);
        if (pause < 100 * 1000)
            pause *= 2;
    }
}

/* The summaries on tli that overlap [start, end), into res; 1 with why filled when they
 * leave a gap (a summary removed by wal_summary_keep_time, or summarizing turned on late). */
static int summaries_cover(pgc *c, uint32_t tli, const char *const params[3], uint64_t start,
                           uint64_t end, PGresult **res, char *why, size_t why_len,
                           pb_error *err)
{
    static const char q[] = "SELECT start_lsn, end_lsn FROM pg_available_wal_summaries() "
                            "WHERE tli = $1::bigint AND end_lsn > $2::pg_lsn "
                            "AND start_lsn < $3::pg_lsn ORDER BY start_lsn, end_lsn";
    int rc = pgc_query_rows(c, q, 3, params, 0, 2, res, err);
    if (rc)
        return rc;
    uint64_t pos = start;
    for (int i = 0; i < PQntuples(*res) && pos < end; i++) {
        uint64_t s = 0, e = 0;
        if (pb_lsn_parse(PQgetvalue(*res, i, 0), &s) || pb_lsn_parse(PQgetvalue(*res, i, 1), &e))
            return pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned no LSN", q);
        if (s > pos)
            break;
        if (e > pos)
            pos = e;
    }
    if (pos >= end)
        return 0;
    char at[32];
    pb_lsn_format(pos, at);
    snprintf(why, why_len, "no WAL summary on timeline %u covers %s (the window is %s..%s)",
             tli, at, params[1], params[2]);
    return 1;
}

static int parse_summary_row(const PGresult *res, pgc_summary_block *b)
{
    unsigned long long v[5];
    for (int i = 0; i < 5; i++) {
        char *end = NULL;
        v[i] = strtoull(PQgetvalue(res, 0, i), &end, 10);
        if (!end || *end || v[i] > UINT32_MAX)
            return -1;
    }
    *b = (pgc_summary_block){(uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[0], (uint8_t)v[3],
                             (uint32_t)v[4], PQgetvalue(res, 0, 5)[0] == 't'};
    return v[3] > 3 ? -1 : 0;
}

/* Every block of one summary, row by row (single-row mode: a large window is never held
 * whole), to fn. */
static int summary_rows(pgc *c, const char *const params[3], pgc_summary_fn fn, void *ctx,
                        pb_error *err)
{
    static const char q[] = "SELECT relfilenode, reltablespace, reldatabase, relforknumber, "
                            "relblocknumber, is_limit_block "
                            "FROM pg_wal_summary_contents($1::bigint, $2::pg_lsn, $3::pg_lsn)";
    char msg[768];
    if (!PQsendQueryParams(c->conn, q, 3, NULL, params, NULL, NULL, 0) ||
        !PQsetSingleRowMode(c->conn)) {
        pgc_one_line(PQerrorMessage(c->conn), msg, sizeof(msg));
        return pb_fail(err, PB_EREMOTE, "PostgreSQL: \"%s\" failed: %s", q, msg);
    }
    int rc = 0;
    PGresult *res;
    while ((res = PQgetResult(c->conn)) != NULL) { /* drained to the end, even after a failure */
        ExecStatusType st = PQresultStatus(res);
        pgc_summary_block b;
        if (rc == 0 && st == PGRES_SINGLE_TUPLE) {
            if (PQnfields(res) != 6 || parse_summary_row(res, &b) != 0)
                rc = pb_fail(err, PB_EPG, "PostgreSQL: \"%s\" returned a row that is not a "
                             "block reference", q);
            else
                rc = fn(ctx, &b, err);
        } else if (rc == 0 && st != PGRES_TUPLES_OK && st != PGRES_SINGLE_TUPLE) {
            pgc_one_line(PQresultErrorMessage(res), msg, sizeof(msg));
            rc = pb_fail(err, PQstatus(c->conn) == CONNECTION_OK ? PB_EPG : PB_EREMOTE,
                         "PostgreSQL: \"%s\" failed: %s", q, msg);
        }
        PQclear(res);
    }
    return rc;
}

int pgc_wal_summary_blocks(pgc *c, uint32_t tli, uint64_t start, uint64_t end,
                           unsigned wait_secs, pgc_summary_fn fn, void *ctx, char *why,
                           size_t why_len, pb_error *err)
{
    char v[16], t[16], s[32], e[32];
    if (!c->facts->wal_summaries) {
        snprintf(why, why_len, "PostgreSQL %d keeps no WAL summaries", c->facts->major);
        return 1;
    }
    int rc = pgc_query_text(c, "SHOW summarize_wal", v, sizeof(v), err);
    if (rc)
        return rc;
    if (strcmp(v, "on") != 0) {
        snprintf(why, why_len, "summarize_wal is off");
        return 1;
    }
    if ((rc = summaries_reach(c, tli, end, wait_secs, why, why_len, err)))
        return rc;
    snprintf(t, sizeof(t), "%u", tli);
    pb_lsn_format(start, s);
    pb_lsn_format(end, e);
    const char *params[3] = {t, s, e};
    PGresult *res = NULL;
    rc = summaries_cover(c, tli, params, start, end, &res, why, why_len, err);
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        const char *one[3] = {t, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1)};
        rc = summary_rows(c, one, fn, ctx, err);
    }
    PQclear(res);
    return rc;
}
