#!/bin/bash
# tests/integration/guide.sh — runs the examples of docs/GUIDE.md against a real
# PostgreSQL 15, in order, so the guide cannot rot: every fenced block tagged
# "sh test" runs as postgres, "sh test-root" as root, and the ExecStart= lines of
# "ini test-exec" blocks (the systemd units) as postgres. Only paths change (the guide
# says so too; and the server's restart is pg_ctl's): /srv/, /var/ and /etc/pageback.conf move under the work directory,
# /usr/local/bin/pageback becomes $PB_BIN, /usr/lib/postgresql/15/bin $PB_PGBIN,
# /var/lib/postgresql/15/main the test cluster, port 5433 a free port; PGHOST/PGPORT
# name the test cluster and PAGEBACK_CONFIG the moved config file. Each block is one
# test; the first failure stops the run (later blocks build on earlier ones).
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
GUIDE=$PB_SRCDIR/docs/GUIDE.md
W=$PB_WORK/root
mkdir -p "$W/srv" "$W/var" "$W/etc" "$W/blocks"
_pb_chown_pg "$W/srv"
pb_source_pgbench 1
PORT2=$(_pb_free_port) || pb_die "no free port"

# Split the guide into numbered block files: N.KIND (KIND: pg, root, exec), and
# N.line with the block's line number in the guide.
awk -v dir="$W/blocks" '
    /^```(sh test|sh test-root|ini test-exec)$/ {
        n++; kind = $0 ~ /test-root/ ? "root" : $0 ~ /test-exec/ ? "exec" : "pg"
        file = dir "/" sprintf("%02d", n) "." kind
        print NR > (dir "/" sprintf("%02d", n) ".line"); inblock = 1; next
    }
    inblock && /^```$/ { inblock = 0; close(file); next }
    inblock { print > file }
' "$GUIDE"
nblocks=$(ls "$W/blocks" | grep -cv '\.line$')
[ "$nblocks" -ge 10 ] && pb_test_ok "the guide has $nblocks tested blocks" ||
    pb_test_fail "only $nblocks tested blocks in docs/GUIDE.md"

# The server's restart (systemd in production), and its socket and port in the config.
RESTART="$PB_PGBIN/pg_ctl -D $SRC -l $(pg_logfile "$SRC") -w -m fast restart >/dev/null"
[ "$(id -u)" = 0 ] && RESTART="runuser -u postgres -- $RESTART"
# substitute FILE: the guide's production paths -> this run's; %i (a unit's instance)
# is the cluster main.
substitute() {
    sed -e "s|systemctl restart postgresql@15-main|$RESTART|g" \
        -e "s|host=/var/run/postgresql port=5432|host=$PGHOST port=$PGPORT|g" \
        -e "s|%i|main|g" \
        -e "s|/usr/local/bin/pageback|$PB_BIN|g" \
        -e "s|/usr/lib/postgresql/15/bin|$PB_PGBIN|g" \
        -e "s|/var/lib/postgresql/15/main|$SRC|g" \
        -e "s|/etc/pageback.conf|$W/etc/pageback.conf|g" \
        -e "s|/srv/|$W/srv/|g" -e "s|/var/|$W/var/|g" \
        -e "s|\b5433\b|$PORT2|g" "$1"
}

BIN=$PB_WORK/bin
mkdir -p "$BIN" && ln -s "$PB_BIN" "$BIN/pageback"
ENV=(PATH="$BIN:$PATH" PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres
     PGDATABASE=postgres PAGEBACK_CONFIG="$W/etc/pageback.conf")
for f in $(ls "$W/blocks" | grep -v '\.line$' | sort); do
    kind=${f#*.}
    line=$(cat "$W/blocks/${f%%.*}.line")
    script=$W/blocks/$f.run
    if [ "$kind" = exec ]; then
        { echo "set -eu -o pipefail"; substitute "$W/blocks/$f" | sed -n 's/^ExecStart=//p'; } >"$script"
    else
        { echo "set -eu -o pipefail"; substitute "$W/blocks/$f"; } >"$script"
    fi
    chmod 644 "$script"
    if [ "$kind" = root ]; then
        env "${ENV[@]}" bash "$script" >"$script.out" 2>&1
    else
        (cd "$W/srv" && _pb_as_pg env "${ENV[@]}" bash "$script") >"$script.out" 2>&1
    fi
    rc=$?
    first=$(grep -v '^\s*#' "$W/blocks/$f" | grep -m1 . | cut -c1-60)
    if [ "$rc" = 0 ]; then
        pb_test_ok "GUIDE.md line $line ($kind): $first"
    else
        pb_test_fail "GUIDE.md line $line ($kind) exited $rc: $first"
        tail -n 15 "$script.out" >&2
        break
    fi
done

# What the blocks should have left: backups, a report, metrics, a restore that
# brought the dropped table back (the last block checked it as it ran).
[ -s "$W/var/log/pageback/backup-last.json" ] &&
    python3 -m json.tool "$W/var/log/pageback/backup-last.json" >/dev/null &&
    pb_test_ok "the hourly job left its JSON report" || pb_test_fail "no report from the hourly job"
grep -q '^pageback_backup_last_success_timestamp_seconds{[^}]*type="incr"}' \
    "$W/var/lib/node_exporter/pageback_backup.prom" 2>/dev/null &&
    pb_test_ok "the hourly job left its metrics" || pb_test_fail "no metrics from the hourly job"
pb_test_summary
