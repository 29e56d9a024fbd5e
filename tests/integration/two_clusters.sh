#!/bin/bash
# Two clusters in one repository (docs/FORMAT.md, "Clusters in one repository"): one
# configuration file with [global] repo and two [cluster:NAME] sections. Cluster alpha
# starts in a repository written without a namespace (its first full taken with --repo
# alone) and keeps it; cluster beta gets cluster/beta/. Each archives with --cluster,
# both are backed up (beta's lock does not stop alpha's backup while beta's runs), each
# is restored and compared by digest, an expire in beta leaves alpha intact, info lists
# both (text and JSON), and their metrics files carry their own cluster label. info's
# text shows local times with the zone, binary units, the database size, the duration
# and a running backup. Runs on either repository kind (PB_REPO_KIND=s3).
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about two clusters in one repository.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
export TZ=Europe/Berlin # info prints local times with the zone's name (CET)
[ "$PB_REPO_KIND" = s3 ] && { set -a; . "$PB_S3_DIR/env"; set +a; }
s3tool() { (set -a && . "$PB_S3_DIR/env" && /usr/bin/python3 "$PB_SRCDIR/tests/s3server/s3tool.py" "$@"); }
obj_get() { # KEY FILE: a repository object by key, on either kind
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool get "$S3_ENDPOINT/${PB_REPO#s3://}/$1" "$2"
    else cp "$PB_REPO/$1" "$2"; fi
}
A=$PB_WORK/alpha
B=$PB_WORK/beta
CONF=$PB_WORK/clusters.conf

# ---- alpha: a repository of one cluster, written without a namespace (as before)
pg_init_cluster "$A" && pg_start "$A" || pb_die "alpha did not start"
pgbench_init "$A" 1 || pb_die "pgbench init of alpha failed"
pg_env "$A"
pb_check "alpha's first full, without a cluster name" pb_backup_logged --type full --checkpoint fast
A_F=$(pb_last_id)

# ---- the configuration of both clusters
{
    echo "[global]"
    echo "repo = $PB_REPO"
    echo "state-dir = $PB_WORK/cstate"
    echo "checkpoint = fast"
    if [ "$PB_REPO_KIND" = s3 ]; then
        echo "s3-endpoint = $S3_ENDPOINT"
        echo "s3-region = us-east-1"
        echo "s3-key = $AWS_ACCESS_KEY_ID"
        echo "s3-secret = $AWS_SECRET_ACCESS_KEY"
    fi
    echo "[cluster:alpha]"
    echo "pgdata = $A"
    echo "dbname = host=$PB_WORK/sock port=$(pg_port "$A") user=postgres dbname=postgres"
} >"$CONF"
mkdir -p "$PB_WORK/cstate" "$PB_WORK/prom" && _pb_chown_pg "$PB_WORK/cstate" &&
    _pb_chown_pg "$PB_WORK/prom" && chmod 0700 "$PB_WORK/cstate"
pbc() { # NAME COMMAND ARGS...: pageback as postgres with the file's section NAME
    local name=$1 cmd=$2
    shift 2
    _pb_as_pg env TZ="$TZ" "$PB_BIN" "$cmd" --config "$CONF" --cluster "$name" "$@"
}
archive_with() { # DIR NAME: archive_command with --cluster NAME
    pg_psql "$1" "ALTER SYSTEM SET archive_command = '$PB_BIN archive-push %p --config $CONF --cluster $2'" \
        >/dev/null && pg_psql "$1" "SELECT pg_reload_conf()" >/dev/null
}
archive_with "$A" alpha || pb_die "alpha's archive_command not set"

PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p --config $CONF --cluster beta"
pg_init_cluster "$B" && pg_start "$B" || pb_die "beta did not start"
pgbench_init "$B" 2 || pb_die "pgbench init of beta failed"
pg_psql "$B" "CREATE TABLE only_beta AS SELECT g AS n FROM generate_series(1, 5000) g" >/dev/null
{
    echo "[cluster:beta]"
    echo "pgdata = $B"
    echo "dbname = host=$PB_WORK/sock port=$(pg_port "$B") user=postgres dbname=postgres"
} >>"$CONF"
chmod 600 "$CONF" && _pb_chown_pg "$CONF"

# ---- backups of both
pg_psql "$A" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 500" >/dev/null
pbc alpha backup >"$PB_WORK/a1.out" 2>&1 &&
    pb_test_ok "alpha backs up through its section" ||
    pb_test_fail "alpha backup: $(cat "$PB_WORK/a1.out")"
pbc beta backup --metrics-file "$PB_WORK/prom/beta.prom" >"$PB_WORK/b1.out" 2>&1 &&
    pb_test_ok "beta backs up into the repository alpha uses" ||
    pb_test_fail "beta backup: $(cat "$PB_WORK/b1.out")"

ids() { # NAME: "type:id" of the cluster's backups, history order
    pbc "$1" info --json | python3 -c "
import json, sys
print(' '.join(b['type'] + ':' + b['id'] + ':' + b['parent'] for b in json.load(sys.stdin)['backups']))"
}
A_IDS=$(ids alpha)
pb_assert_eq "$(echo "$A_IDS" | wc -w)" 2 "alpha has its first full and an incremental"
[[ "$A_IDS" == "full:$A_F: incr:"*":$A_F" ]] &&
    pb_test_ok "alpha's incremental builds on the full taken before namespaces" ||
    pb_test_fail "alpha's backups: $A_IDS"
B_IDS=$(ids beta)
B_F=$(cut -d: -f2 <<<"$B_IDS")
[[ "$B_IDS" == full:* ]] && [ "$(echo "$B_IDS" | wc -w)" = 1 ] &&
    pb_test_ok "beta has one full of its own" || pb_test_fail "beta's backups: $B_IDS"
obj_get cluster/beta/pageback.repo "$PB_WORK/beta.id" &&
    grep -q "system-identifier=$(pg_psql "$B" "SELECT system_identifier FROM pg_control_system()")" \
        "$PB_WORK/beta.id" &&
    pb_test_ok "beta lives under cluster/beta/ with its own identity" ||
    pb_test_fail "no identity of beta at cluster/beta/pageback.repo"
obj_get cluster/beta/backup.info "$PB_WORK/beta.rec" && grep -qx "$B_F" "$PB_WORK/beta.rec" &&
    obj_get backup.info "$PB_WORK/alpha.rec" && ! grep -qx "$B_F" "$PB_WORK/alpha.rec" &&
    pb_test_ok "each cluster's record of backups lists its own" ||
    pb_test_fail "records: beta $(cat "$PB_WORK/beta.rec" 2>&1), alpha $(cat "$PB_WORK/alpha.rec" 2>&1)"
obj_get clusters/alpha "$PB_WORK/alpha.entry" && grep -q '^layout=root$' "$PB_WORK/alpha.entry" &&
    pb_test_ok "alpha's entry keeps it at the repository root" ||
    pb_test_fail "alpha's entry: $(cat "$PB_WORK/alpha.entry" 2>&1)"
[ -d "$PB_WORK/cstate/beta" ] && pb_test_ok "beta's catalog is in its own state directory" ||
    pb_test_fail "no $PB_WORK/cstate/beta"

# ---- WAL of each through its own archive_command; beta's backup running while alpha's
pg_psql "$B" "INSERT INTO only_beta SELECT g FROM generate_series(5001, 6000) g" >/dev/null
pb_archive_all "$A" && pb_archive_all "$B" && pb_test_ok "both archive with --cluster" ||
    pb_test_fail "archiving of a cluster stalled"
pbc beta backup --type full --max-rate 3M >"$PB_WORK/b2.out" 2>&1 &
SLOW=$!
running=
for _ in $(seq 1 100); do
    running=$(pbc beta info 2>&1 | grep '^running: backup since') && break
    sleep 0.1
done
[[ "$running" =~ ^running:\ backup\ since\ 20[0-9-]+\ [0-9:]+\ CET ]] &&
    pb_test_ok "info shows beta's running backup in local time: $running" ||
    pb_test_fail "info of beta during its backup: $(pbc beta info 2>&1 | head -3)"
pg_psql "$A" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 800" >/dev/null
pbc alpha backup --metrics-file "$PB_WORK/prom/alpha.prom" >"$PB_WORK/a2.out" 2>&1 &&
    pb_test_ok "alpha backs up while beta's backup holds beta's lock" ||
    pb_test_fail "alpha backup during beta's: $(cat "$PB_WORK/a2.out")"
pbc alpha info 2>&1 | grep -q '^running:' && pb_test_fail "alpha's info shows beta's backup" ||
    pb_test_ok "alpha's info shows no running backup"
wait $SLOW && pb_test_ok "beta's second full" || pb_test_fail "beta's second full: $(cat "$PB_WORK/b2.out")"
A_DIGEST=$(pg_digest "$A")
B_DIGEST=$(pg_digest "$B")

# ---- info: every cluster, text and JSON
out=$(_pb_as_pg env TZ="$TZ" "$PB_BIN" info --config "$CONF" 2>&1)
grep -q '^cluster alpha: repository ' <<<"$out" && grep -q '^cluster beta: repository .*cluster/beta: 2 backups' <<<"$out" &&
    pb_test_ok "info without --cluster lists both clusters" || pb_test_fail "info: $out"
grep -Eq '^    started 20[0-9-]+ [0-9:]+ CET, stopped 20[0-9-]+ [0-9:]+ CET, took [0-9.]+ s' <<<"$out" &&
    grep -Eq '^    database [0-9.]+ MiB; read [0-9.]+ MiB, stored [0-9.]+ (KiB|MiB) ' <<<"$out" &&
    pb_test_ok "info text: local times with the zone, duration, database size in MiB" ||
    pb_test_fail "info text: $(sed -n 1,6p <<<"$out")"
_pb_as_pg "$PB_BIN" info --config "$CONF" --json >"$PB_WORK/all.json" 2>&1
python3 - "$PB_WORK/all.json" "$A_F" <<'EOF' && pb_test_ok "info --json lists both clusters" ||
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["clusters"]}
assert d["backups"] == [], d["backups"]          # alpha is listed once, as a cluster
assert len(c["alpha"]["backups"]) == 3 and c["alpha"]["backups"][0]["id"] == sys.argv[2], c["alpha"]
assert len(c["beta"]["backups"]) == 2 and c["beta"]["repository"].endswith("/cluster/beta")
assert c["alpha"]["wal"] and c["beta"]["wal"]
EOF
    pb_test_fail "info --json: $(head -c 600 "$PB_WORK/all.json")"
python3 "$PB_SRCDIR/tests/integration/schema_check.py" "$PB_SRCDIR/docs/info.schema.json" \
    "$PB_WORK/all.json" >"$PB_WORK/schema.out" 2>&1 &&
    pb_test_ok "info --json of both clusters follows docs/info.schema.json" ||
    pb_test_fail "schema: $(cat "$PB_WORK/schema.out")"

# ---- metrics: one textfile directory, a cluster label each
grep -q "^pageback_backups{cluster=\"alpha\",repo=\"$PB_REPO\"} 3$" "$PB_WORK/prom/alpha.prom" &&
    grep -q "^pageback_backups{cluster=\"beta\",repo=\"$PB_REPO\"} 1$" "$PB_WORK/prom/beta.prom" &&
    pb_test_ok "metrics name their cluster and repository" ||
    pb_test_fail "metrics: $(grep '^pageback_backups' "$PB_WORK/prom/"*.prom)"
undocumented=$(sed -n 's/^# TYPE \(pageback_[a-z_]*\) .*/\1/p' "$PB_WORK/prom/"*.prom | sort -u |
    while read -r name; do grep -q "$name" "$PB_SRCDIR/docs/pageback.1" || echo "$name"; done)
[ -z "$undocumented" ] && pb_test_ok "pageback(1) names every metric written" ||
    pb_test_fail "metrics missing from docs/pageback.1: $undocumented"
dup=$(cat "$PB_WORK/prom/"*.prom | grep -v '^#' | sed 's/ [^ ]*$//' | sort | uniq -d)
[ -z "$dup" ] && pb_test_ok "no series repeats across the two clusters' files" ||
    pb_test_fail "series in both files: $dup"

# ---- restore each and compare
restore_cmp() { # NAME DIR DIGEST
    mkdir -p "$2" && chmod 0700 "$2" && _pb_chown_pg "$2"
    pbc "$1" restore --target-dir "$2" >"$PB_WORK/restore-$1.out" 2>&1 ||
        { pb_test_fail "restore of $1: $(cat "$PB_WORK/restore-$1.out")"; return; }
    pg_reconfigure "$2" && pg_conf "$2" "archive_mode = off" && pg_start "$2" &&
        pb_wait_recovery "$2" || { pb_test_fail "restored $1 did not start"; return; }
    pb_assert_eq "$(pg_digest "$2")" "$3" "restored $1 has its source's digest"
    pg_stop "$2"
}
restore_cmp alpha "$PB_WORK/alpha-copy" "$A_DIGEST"
restore_cmp beta "$PB_WORK/beta-copy" "$B_DIGEST"

# ---- expire in beta leaves alpha intact
before=$(ids alpha)
pbc beta expire --retain-full 1 >"$PB_WORK/expire.out" 2>&1 &&
    grep -q "expired backup $B_F" "$PB_WORK/expire.out" &&
    pb_test_ok "expire in beta removes beta's first full" ||
    pb_test_fail "expire in beta: $(cat "$PB_WORK/expire.out")"
pb_assert_eq "$(ids alpha)" "$before" "alpha's backups are untouched by beta's expire"
pbc alpha verify >"$PB_WORK/verify.out" 2>&1 && pb_test_ok "alpha verifies after beta's expire" ||
    pb_test_fail "verify of alpha: $(tail -5 "$PB_WORK/verify.out")"
pb_assert_eq "$(ids beta | wc -w)" 1 "beta keeps its newest full"

# ---- a cluster the repository does not hold yet, and one that cannot be a place in it
printf '[cluster:gamma]\npgdata = %s\n' "$B" >>"$CONF"
out=$(pbc gamma info 2>&1) && pb_test_fail "info of a cluster never backed up succeeds: $out" ||
    { grep -q "cluster gamma has nothing in repository .* yet (no clusters/gamma entry)" <<<"$out" &&
        pb_test_ok "info of a cluster never backed up names it" || pb_test_fail "gamma: $out"; }

printf '[cluster:a/b]\npgdata = %s\n' "$B" >>"$CONF"
out=$(pbc "a/b" info 2>&1) && pb_test_fail "a cluster named a/b was accepted" ||
    { grep -q "cluster name 'a/b' cannot name a place" <<<"$out" &&
        pb_test_ok "a cluster named a/b is refused by name" || pb_test_fail "a/b: $out"; }

pg_stop "$A"
pg_stop "$B"
pb_test_summary
