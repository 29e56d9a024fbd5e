#!/bin/bash
# tests/integration/lib_selftest.sh — proves lib.sh works here: a cluster with
# checksums, pgbench data, stable digests that do notice a change, a background load,
# amcheck, a clean stop and an offline checksum pass. Takes ~15 s.
source "$(dirname "$0")/lib.sh"

pb_tmpdir
D=$PB_WORK/pg

pg_init_cluster "$D" || pb_die "cannot create the cluster"
pg_start "$D" || pb_die "cannot start the cluster"
pb_assert_eq "$(pg_psql "$D" 'SHOW data_checksums')" on "data checksums are on"
pb_assert_eq "$(pg_psql "$D" 'SHOW archive_mode')" on "archive_mode is on"
pb_assert_eq "$(pg_psql "$D" 'SHOW wal_level')" replica "wal_level is replica"

pgbench_init "$D" 1 || pb_die "pgbench -i failed"
pb_assert_eq "$(pg_psql "$D" 'SELECT count(*) FROM pgbench_accounts')" 100000 \
    "pgbench scale 1 has 100000 accounts"

d1=$(pg_digest "$D")
d2=$(pg_digest "$D")
pb_assert_eq "$d2" "$d1" "digest is stable"
pb_assert_eq "$(echo "$d1" | cut -d' ' -f1 | tr '\n' ' ')" \
    "public.pgbench_accounts public.pgbench_branches public.pgbench_history public.pgbench_tellers " \
    "digest lists the four pgbench tables in order"

pg_psql "$D" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 4242" >/dev/null
d3=$(pg_digest "$D")
pb_assert_ne "$d3" "$d1" "digest notices a one-row change"
pb_assert_eq "$(diff <(echo "$d1") <(echo "$d3") | grep -c '^>')" 1 \
    "only pgbench_accounts' digest changed"

pg_psql "$D" "CREATE DATABASE other" >/dev/null
pg_psql "$D" "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 10) g" other >/dev/null
all=$(pg_digest_all "$D")
pb_assert_eq "$(echo "$all" | cut -d' ' -f1 | tr '\n' ' ')" \
    "other/public.t postgres/public.pgbench_accounts postgres/public.pgbench_branches postgres/public.pgbench_history postgres/public.pgbench_tellers " \
    "pg_digest_all covers every database"

pgbench_run_bg "$D" 3 2
pb_check "pgbench ran 3 s in the background" pgbench_wait
pb_assert_ne "$(pg_digest "$D")" "$d3" "the load changed the data"
pgbench_run_until_bg "$D" "$PB_WORK/stop" 30 2
sleep 1.5
touch "$PB_WORK/stop"
T0=$SECONDS
pb_check "a load until a stop file ends without error" pgbench_wait
pb_check "within two seconds of the stop file ($((SECONDS - T0)) s)" test $((SECONDS - T0)) -le 2
pb_check "having run transactions" grep -q "number of transactions actually processed: [1-9]" \
    "$PB_WORK/pgbench.$PB_PGBENCH_PID.log"

(pg_env "$D" && [ "$("$PB_PGBIN/psql" -X -At -c 'SELECT 1')" = 1 ]) >/dev/null
pb_assert_eq "$?" 0 "pg_env points libpq at the cluster"

pb_check "amcheck finds no corruption" pg_amcheck_all "$D"
pb_check "pg_checksums refuses a running cluster" eval '! pg_checksums_check "$D" 2>/dev/null'
pb_check "cluster stops" pg_stop "$D"
pb_check "offline checksums verify" pg_checksums_check "$D"

pb_test_summary
