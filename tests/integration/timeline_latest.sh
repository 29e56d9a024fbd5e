#!/bin/bash
# "Latest", the next incremental's parent and retention follow the timeline history, not
# raw stop LSNs. Full F0 and F1 on timeline 1 (F1 after four segment switches); a copy
# restored from F0 is promoted (timeline 2) and archives into the same repository. While
# timeline 2 has no backup the branches compete: a plain restore refuses, naming F1 and
# F0 and the options that choose, --target-timeline 1 chooses F1, and expire keeps the
# newest of both. The old primary stops; the copy is the live cluster and takes F2 (its
# stop LSN lower than F1's): a plain restore now chooses F2, the next incremental builds
# on F2, and `expire --retain-full 1` keeps F2 (the newest backup of the newest timeline)
# and drops F1's dead branch.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
q() { pg_psql "$DB" "$1"; }
DB=$SRC
pg_env "$SRC"
q "CREATE TABLE t (tag text)" >/dev/null
q "INSERT INTO t VALUES ('F0')" >/dev/null
pb_check "full F0 on timeline 1" pb_backup_logged --type full --checkpoint fast
F0=$(pb_last_id)
for i in 1 2 3 4; do
    q "INSERT INTO t VALUES ('tl1-$i')" >/dev/null
    q "SELECT pg_switch_wal()" >/dev/null
done
pb_check "full F1 on timeline 1" pb_backup_logged --type full --checkpoint fast
F1=$(pb_last_id)
pb_archive_all "$SRC" || pb_die "timeline 1 not archived"

# ---- the copy restored from F0 is promoted and archives into the repository
R=$PB_WORK/promoted
mkdir -p "$R" && chmod 0700 "$R" && _pb_chown_pg "$R"
pb restore --target-dir "$R" --set "$F0" --archive-mode preserve >"$PB_WORK/restore.out" 2>&1 ||
    { cat "$PB_WORK/restore.out"; pb_die "restore of F0 failed"; }
pg_reconfigure "$R" && pg_conf "$R" "archive_mode = on" \
    "archive_command = '${PB_ARCHIVE_COMMAND//\'/\'\'}'" || pb_die "cannot configure $R"
pg_start "$R" && pb_wait_recovery "$R" || pb_die "the restored copy did not promote"
DB=$R
pb_assert_eq "$(q "SELECT timeline_id FROM pg_control_checkpoint()")" 2 "the copy is on timeline 2"
q "INSERT INTO t VALUES ('tl2')" >/dev/null
pb_archive_all "$R" || pb_die "timeline 2 not archived"
mkdir -p "$PB_WORK/h" && _pb_chown_pg "$PB_WORK/h"
pb_check "00000002.history is archived" pb archive-get 00000002.history "$PB_WORK/h/history"

# ---- timeline 2 has no backup yet: the branches compete
pb_refused "a plain restore refuses while the branches compete, naming both" \
    "compete.*$F0.*$F1.*--set ID.*--target-timeline"
pb_check "expire --retain-full 1 while they compete" pb expire --retain-full 1
pb_assert_eq "$(pb info --json | python3 -c "
import json, sys
print(' '.join(sorted(b['id'] for b in json.load(sys.stdin)['backups'])))")" "$F0 $F1" \
    "expire keeps the newest backup of both competing branches"
pb_pitr_rows() { pg_psql "$1" "SELECT string_agg(tag, ',' ORDER BY tag) FROM t"; }
d=$PB_WORK/tl1
if pb_restore_start "$d" --target-timeline 1; then
    pb_assert_eq "$(sed -n 's/^restored backup \([^ ]*\) .*/\1/p' "$PB_WORK/restore.out")" \
        "$F1" "--target-timeline 1 chooses F1, the newest of timeline 1"
    pg_stop "$d"
else
    pb_test_fail "restore --target-timeline 1"
fi
rm -rf "$d"

# A backup of the old primary meanwhile builds on its own timeline's newest, F1.
pg_env "$SRC"
pg_psql "$SRC" "INSERT INTO t VALUES ('tl1-late')" >/dev/null
pb_check "a backup of the old primary while the branches compete" pb_backup_logged --checkpoint fast
I1=$(pb info --json | python3 -c "
import json, sys
print([b['id'] for b in json.load(sys.stdin)['backups'] if b['type'] == 'incr'][-1])")
pb_assert_eq "$(pb_info_field "$I1" parent)" "$F1" "it is an incremental on F1 (its cluster's timeline)"

# ---- the old primary is gone; the copy is the live cluster and backs up
pg_stop "$SRC"
pg_env "$R"
pb_check "backup F2 on timeline 2" pb_backup_logged --type full --checkpoint fast
F2=$(pb info --json | python3 -c "
import json, sys
print([b['id'] for b in json.load(sys.stdin)['backups'] if b['timeline'] == 2][-1])")
python3 - "$(pb_info_field "$F2" stop_lsn)" "$(pb_info_field "$F1" stop_lsn)" <<'EOF' &&
import sys
lsn = lambda s: int(s.split('/')[0], 16) << 32 | int(s.split('/')[1], 16)
sys.exit(0 if lsn(sys.argv[1]) < lsn(sys.argv[2]) else 1)
EOF
    pb_test_ok "F2 stops at a lower LSN than F1" || pb_test_fail "F2 does not stop before F1"
pb_archive_all "$R" || pb_die "timeline 2 not archived"

d=$PB_WORK/latest
if pb_restore_start "$d"; then
    pb_assert_eq "$(sed -n 's/^restored backup \([^ ]*\) .*/\1/p' "$PB_WORK/restore.out")" \
        "$F2" "a plain restore chooses F2, the newest of the newest timeline"
    pb_assert_eq "$(pb_pitr_rows "$d")" "F0,tl2" "the restored copy holds timeline 2's rows"
    pg_stop "$d"
else
    pb_test_fail "plain restore after F2"
fi
rm -rf "$d"

pb_check "expire --retain-full 1" pb expire --retain-full 1
ids=$(pb_ids)
pb_assert_eq "$ids" "$F2" "expire kept F2 (the live cluster's backup) and dropped the rest"

q "INSERT INTO t VALUES ('tl2-incr')" >/dev/null
pb_check "the next backup" pb_backup_logged --checkpoint fast
I=$(pb_last_id)
pb_assert_eq "$(pb_info_field "$I" type)/$(pb_info_field "$I" parent)" "incr/$F2" \
    "the next backup is an incremental on F2"
pg_stop "$R"
pb_test_summary
