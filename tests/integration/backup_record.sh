#!/bin/bash
# The record of committed backups (backup.info and backup.info.copy, docs/FORMAT.md):
# written at each commit, rebuilt from the manifests present when a repository has none
# (one written before the record existed); a committed incremental whose manifest is
# deleted is reported by verify (non-zero exit), its packs survive the cleanup of the
# next backup and of expire, and expire removes nothing; with its manifest back verify
# passes; expire takes what it drops out of the record; a damaged primary is reported
# and the copy serves. Runs on either repository kind (PB_REPO_KIND=s3).
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about the record of committed backups.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
# Stored objects by repository key on either kind (as encryption.sh).
s3tool() { (set -a && . "$PB_S3_DIR/env" && /usr/bin/python3 "$PB_SRCDIR/tests/s3server/s3tool.py" "$@"); }
obj_get() { # KEY FILE
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool get "$S3_ENDPOINT/${PB_REPO#s3://}/$1" "$2"
    else cp "$PB_REPO/$1" "$2"; fi
}
obj_put() { # KEY FILE
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool put "$S3_ENDPOINT/${PB_REPO#s3://}/$1" "$2"
    else cat "$2" >"$PB_REPO/$1"; fi
}
obj_del() { # KEY
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool request DELETE "$S3_ENDPOINT/${PB_REPO#s3://}/$1" >/dev/null
    else rm -f "$PB_REPO/$1"; fi
}
obj_list() { # PREFIX: the keys under PREFIX
    if [ "$PB_REPO_KIND" = s3 ]; then
        local b=${PB_REPO#s3://} p
        p=${b#*/}
        s3tool request GET "$S3_ENDPOINT/${b%%/*}?list-type=2&prefix=${p//\//%2F}%2F${1//\//%2F}" |
            grep -o '<Key>[^<]*</Key>' | sed -e 's|<Key>||' -e 's|</Key>||' -e "s|^$p/||" | sort
    else
        (cd "$PB_REPO" && find "$1" -type f 2>/dev/null | sort)
    fi
}
[ "$PB_REPO_KIND" = s3 ] && { set -a; . "$PB_S3_DIR/env"; set +a; }
listed() { obj_get backup.info "$PB_WORK/rec" && sed -n '3,/^xxh3=/p' "$PB_WORK/rec" | grep -v '^xxh3=' | tr '\n' ' ' | sed 's/ $//'; }
change() { q "INSERT INTO t VALUES ($1)" >/dev/null; }

q "CREATE TABLE t (n int)" >/dev/null
change 1
pb_check "full" pb_backup_logged --type full --checkpoint fast
F=$(pb_last_id)
change 2
pb_check "incremental 1" pb_backup_logged --checkpoint fast
I1=$(pb_last_id)
obj_get backup.info "$PB_WORK/rec" && obj_get backup.info.copy "$PB_WORK/rec.copy" &&
    pb_test_ok "backup.info and backup.info.copy are written" || pb_test_fail "no backup record"
pb_assert_eq "$(head -n 1 "$PB_WORK/rec")" "PAGEBACK-BACKUPS 1" "the record starts with its magic and version"
pb_check "the copy equals the record" cmp "$PB_WORK/rec" "$PB_WORK/rec.copy"
pb_assert_eq "$(listed)" "$F $I1" "the record lists both backups"

# ---- a repository without the record (written before it existed) gets one
obj_del backup.info && obj_del backup.info.copy
change 3
pb_check "incremental 2 in a repository without the record" pb_backup_logged --checkpoint fast
I2=$(pb_last_id)
pb_assert_eq "$(listed)" "$F $I1 $I2" "the record is built from the manifests present"

# ---- the head incremental's manifest disappears
obj_get "backup/$I2/manifest" "$PB_WORK/i2.manifest" || pb_die "cannot read $I2's manifest"
obj_del "backup/$I2/manifest"
out=$(pb verify 2>&1)
rc=$?
pb_assert_ne "$rc" 0 "verify fails when a listed backup has no manifest"
grep -q "backup $I2 is listed in .*backup.info as committed, but its manifest backup/$I2/manifest is missing" <<<"$out" &&
    pb_test_ok "verify names the backup and its missing manifest" || pb_test_fail "verify: $out"
PACKS=$(obj_list "backup/$I2/" | wc -l)
pb_assert_ne "$PACKS" 0 "$I2 still has its packs"
change 4
pb_backup_logged --checkpoint fast >/dev/null 2>&1 || pb_test_fail "backup with a lost manifest"
grep -q "backup $I2 has no manifest, but backup.info lists it" "$PB_WORK/backup.out" &&
    pb_test_ok "the backup's cleanup warns and keeps $I2's objects" ||
    pb_test_fail "no warning: $(cat "$PB_WORK/backup.out")"
pb_assert_eq "$(obj_list "backup/$I2/" | wc -l)" "$PACKS" "cleanup kept every object of $I2"
out=$(pb expire --retain-full 1 2>&1)
rc=$?
pb_assert_ne "$rc" 0 "expire refuses while a listed backup has no manifest"
grep -q "backup $I2 is listed in .* but its manifest .* is missing: expire removes nothing" <<<"$out" &&
    pb_test_ok "expire names the backup" || pb_test_fail "expire: $out"
pb_assert_eq "$(obj_list "backup/$I2/" | wc -l)" "$PACKS" "expire's cleanup kept every object of $I2"
pb_assert_eq "$(obj_list "backup/$F/" | grep -c manifest)" 1 "expire kept the full $I2 needs"
obj_put "backup/$I2/manifest" "$PB_WORK/i2.manifest" || pb_test_fail "putting the manifest back"
pb_check "with the manifest back, verify passes" pb verify

# ---- expire takes what it drops out of the record
change 5
pb_check "a new full" pb_backup_logged --type full --checkpoint fast
F2=$(pb_last_id)
pb_check "expire --retain-full 1" pb expire --retain-full 1
pb_assert_eq "$(listed)" "$F2" "the record lists only what expire kept"
pb_check "verify after expire" pb verify

# ---- a damaged primary: verify says so; the copy serves, the next write repairs it
obj_get backup.info "$PB_WORK/rec"
sed -i "s/^$F2\$/${F2:0:-1}x/" "$PB_WORK/rec" && obj_put backup.info "$PB_WORK/rec"
out=$(pb verify 2>&1)
rc=$?
pb_assert_ne "$rc" 0 "verify fails on a damaged backup.info"
grep -q "backup.info.*checksum mismatch" <<<"$out" && pb_test_ok "verify names the damaged record" ||
    pb_test_fail "verify: $out"
change 6
pb_check "a backup with a damaged record (the copy serves)" pb_backup_logged --checkpoint fast
pb_check "verify after the next write" pb verify
pg_stop "$SRC"
pb_test_summary
