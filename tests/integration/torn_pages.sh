#!/bin/bash
# Torn-page proof (design rule 2): pgbench and a random-UUID insert workload (a page split
# and a full-page image on almost every insert) run at full speed while full and
# incremental backups read the data files. Each backup is restored to an LSN taken after
# the load stopped; the restored cluster must pass pg_checksums --check (when the cluster
# has data checksums), amcheck on every heap and index, and equal the source's digests.
# Run on a cluster with data checksums and on one without (there torn reads are invisible
# to the backup and only WAL replay makes them right).
#   PB_TORN_LOOPS       backup/restore rounds per cluster (default 3: a full, then incrementals)
#   PB_TORN_SECONDS     seconds of load around each backup at most (default 6; it stops
#                       once the backup has ended)
#   PB_TORN_SCALE       pgbench scale (default 5)
source "$(dirname "$0")/pb_lib.sh"
LOOPS=${PB_TORN_LOOPS:-3}
SECS=${PB_TORN_SECONDS:-6}
SCALE=${PB_TORN_SCALE:-5}
pb_setup
CHECKED=0

cat >"$PB_WORK/uuid.sql" <<'EOF'
INSERT INTO u (id, pad) VALUES (gen_random_uuid(), repeat(md5(random()::text), 3));
EOF

# uuid_run_bg DIR STOPFILE SECONDS: the random-UUID insert load in the background until
# STOPFILE exists or SECONDS have passed (pid in UUID_PID).
uuid_run_bg() {
    pgbench_run_until_bg "$1" "$2" "$3" 2 -f "$PB_WORK/uuid.sql" || return 1
    UUID_PID=$PB_PGBENCH_PID
}

# use_repo SUFFIX: a separate repository and catalog per cluster (a repository belongs to
# one cluster).
use_repo() {
    local i
    PB_STATE=$PB_WORK/state$1
    mkdir -p "$PB_STATE" && _pb_chown_pg "$PB_STATE"
    for i in "${!PB_REPO_ARGS[@]}"; do
        if [ "${PB_REPO_ARGS[$i]}" = --repo ]; then
            PB_REPO=${PB_REPO_BASE:=$PB_REPO}$1
            PB_REPO_ARGS[$((i + 1))]=$PB_REPO
        fi
    done
    if [ "$PB_REPO_KIND" != s3 ]; then
        mkdir -p "$PB_REPO" && _pb_chown_pg "$PB_REPO"
    fi
    PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p ${PB_REPO_ARGS[*]}"
    export PB_ARCHIVE_COMMAND
}

# round SRC LABEL TYPE N: load + backup, quiesce, restore to an LSN after the load, check.
round() {
    local src=$1 label=$2 type=$3 n=$4 id lsn digest d chosen stop=$PB_WORK/load.$4
    uuid_run_bg "$src" "$stop" "$SECS"
    pgbench_run_until_bg "$src" "$stop" "$SECS" 2
    pb_wait_pgbench "$src" 4 # both loads under way before the backup starts
    if ! pb backup --type "$type" >"$PB_WORK/backup.out" 2>&1; then
        touch "$stop"
        cat "$PB_WORK/backup.out"
        pb_test_fail "$label: $type backup under load"
        return 1
    fi
    id=$(pb_last_id)
    touch "$stop"
    pb_test_ok "$label: $type backup $id under pgbench + UUID load"
    pgbench_wait || pb_test_fail "$label: pgbench failed"
    pgbench_wait "$UUID_PID" || pb_test_fail "$label: the UUID load failed"
    local wal inwin scanned changed errors sums
    read -r wal inwin scanned changed errors sums <<<"$(pb_info_fields "$id" \
        wal_bytes_in_window pages_in_window pages_scanned pages_changed checksum_errors \
        data_checksums)"
    pb_log "$label: backup $id: $wal bytes of WAL in its window, $inwin of $scanned" \
        "scanned pages changed inside it, $changed pages shipped, $errors checksum errors"
    digest=$(pg_digest_all "$src")
    lsn=$(pg_psql "$src" "SELECT pg_current_wal_lsn()")
    pb_archive_all "$src" || { pb_test_fail "$label: WAL not archived"; return 1; }
    d=$PB_WORK/restore$n
    if ! pb_restore_start "$d" --target-lsn "$lsn"; then
        pb_test_fail "$label: restore to LSN $lsn"
        return 1
    fi
    chosen=$(sed -n 's/^restored backup \([^ ]*\) .*/\1/p' "$PB_WORK/restore.out")
    pb_assert_eq "$chosen" "$id" "$label: the restore to LSN $lsn starts from backup $id"
    pb_assert_eq "$(pg_digest_all "$d")" "$digest" "$label: digests equal the source at $lsn"
    pb_check "$label: amcheck (heap, every btree, heapallindexed)" pg_amcheck_all "$d"
    pg_stop "$d"
    if [ "$sums" = True ]; then
        pb_check "$label: pg_checksums --check" pg_checksums_check "$d"
    fi
    CHECKED=$((CHECKED + 1))
    pb_rm_bg "$d"
}

# cluster NAME [--no-checksums]: a cluster under load, LOOPS rounds (a full, then incrementals).
cluster() {
    local name=$1 src=$PB_WORK/$1 i type
    use_repo "-$name"
    pg_init_cluster "$src" ${2:-} || pb_die "initdb of $name failed"
    # A busy background writer puts dirty pages on disk while the backup reads them.
    pg_conf "$src" "bgwriter_delay = 10ms" "bgwriter_lru_maxpages = 1000" \
        "bgwriter_lru_multiplier = 10" "checkpoint_timeout = 30s"
    pg_start "$src" || pb_die "cluster $name did not start"
    pg_env "$src"
    pgbench_init "$src" "$SCALE" || pb_die "pgbench init failed"
    pg_psql "$src" "CREATE TABLE u (id uuid PRIMARY KEY, pad text NOT NULL);
                    CREATE INDEX u_pad ON u (pad)" >/dev/null
    for i in $(seq 1 "$LOOPS"); do
        type=incr
        [ "$i" = 1 ] && type=full
        round "$src" "$name round $i" "$type" "$name-$i"
    done
    pg_stop "$src"
}

cluster checksums
cluster nochecksums --no-checksums
pb_log "torn-page loop: $CHECKED backups restored and checked"
pb_test_summary
