/* engine/pg/pgconn_internal.h — what engine/pg/pgconn.c shares with
 * engine/pg/pgconn_summary.c: the session and its query helpers. Only these two files
 * include <libpq-fe.h>. */
#ifndef PB_ENGINE_PGCONN_INTERNAL_H
#define PB_ENGINE_PGCONN_INTERNAL_H

#include "engine/pg/pg.h"

#include <libpq-fe.h>

struct pgc {
    PGconn *conn;
    const pgv_facts *facts; /* the server's major, chosen at connect (engine/pgver) */
};

/* PQerrorMessage / PQresultErrorMessage text on one line, without the trailing newline,
 * so that it reads well inside our own message. */
void pgc_one_line(const char *in, char *out, size_t outsz);

/* Run sql (with optional text parameters) expecting a result set of at least min_rows rows
 * and exactly ncols columns, into *out (the caller PQclears it). On failure the message
 * names the SQL and the server's answer; a lost connection is PB_EREMOTE, a refusal PB_EPG. */
int pgc_query_rows(pgc *c, const char *sql, int nparams, const char *const *params,
                   int min_rows, int ncols, PGresult **out, pb_error *err);

#endif
