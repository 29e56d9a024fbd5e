#!/bin/bash
# engine/pg/pgconn.c against a real PostgreSQL 15: runs the pgconn_probe unit runner (every
# public pgc_ function, each answer checked against SQL) on a fresh cluster. The
# probe's own "N passed, N failed" is this script's result.
source "$(dirname "$0")/lib.sh"
: "${PB_BIN:?set PB_BIN to the pageback binary}"
PROBE=$(dirname "$PB_BIN")/tests/unit/engine/pg/pgconn_probe
[ -x "$PROBE" ] || { echo "FAIL no probe at $PROBE"; echo "0 passed, 1 failed"; exit 1; }
pb_tmpdir
PG=$PB_WORK/pg
pg_init_cluster "$PG" && pg_start "$PG" || pb_die "cluster did not start"
CONNINFO="host=$(pg_sockdir "$PG") port=$(pg_port "$PG") user=postgres dbname=postgres"
# The probe's verdict (its last line) is ours; its exit status says the same.
PB_TEST_PGLOG=$(pg_logfile "$PG") "$PROBE" "$CONNINFO"
