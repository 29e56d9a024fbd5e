#!/bin/bash
# An encrypted repository (docs/FORMAT.md, "Encrypted repositories"; posix, and S3 under
# PB_REPO_KIND=s3): encrypted full + incrementals (compression levels 6 and 1) + WAL
# archiving; no stored byte shows a known plaintext row; info, verify, rebase, expire,
# archive-get and restore work with the key, restore byte-exact (digests); no key, a wrong
# key, a key file readable by others fail clearly and write nothing; an unencrypted
# repository refuses a key; without a key every command on an encrypted repository is
# refused up front, a WAL-only one too; a flipped byte in a pack, a manifest, a WAL segment,
# a history file and a key check (posix, and on the S3 server through signed GET/PUT) is
# named by verify / restore / archive-get, which fail and write nothing; key rotation keeps
# old backups readable with the old key given second, and a rebase under the new key gives
# a synthetic full that the new key alone restores.
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about what an encrypted repository stores.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
KEY=$PB_WORK/repo.key
WRONG=$PB_WORK/wrong.key
NEWKEY=$PB_WORK/new.key
for k in "$KEY" "$WRONG" "$NEWKEY"; do
    head -c 32 /dev/urandom | base64 >"$k" && chmod 600 "$k" && _pb_chown_pg "$k"
done
PLAIN_ARGS=("${PB_REPO_ARGS[@]}")
PB_REPO_ARGS+=(--encrypt-key-file "$KEY")
PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p ${PB_REPO_ARGS[*]}"
export PB_ARCHIVE_COMMAND

pb_source_pgbench 1
MARKER=PBSECRETMARKER
# the marker in readable rows that compress well (level 1) and in rows beside random bytes
pg_psql "$SRC" "CREATE TABLE secret (id int, v text)" >/dev/null
pg_psql "$SRC" "INSERT INTO secret SELECT g, '$MARKER-' || g || '-' || md5(g::text)
                FROM generate_series(1, 2000) g" >/dev/null

# pb_raw CMD ARGS...: pageback with the repository but without its key file
pb_raw() {
    local cmd=$1
    shift
    _pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres "$PB_BIN" "$cmd" "${PLAIN_ARGS[@]}" --state-dir "$PB_STATE" "$@"
}
# stored objects: the posix directory, or the Swift object files of the S3 test server
stored_dir() { [ "$PB_REPO_KIND" = s3 ] && echo "$PB_S3_DIR" || echo "$PB_REPO"; }
# (Swift keeps each object in a .data file, beside its own databases and logs)
stored_count() {
    if [ "$PB_REPO_KIND" = s3 ]; then find "$PB_S3_DIR" -type f -name '*.data' | wc -l
    else find "$PB_REPO" -type f | wc -l; fi
}
empty_dir() { [ -z "$(ls -A "$1" 2>/dev/null)" ]; }
# Stored objects by repository key, on either kind: ROOT is a posix directory or
# s3://bucket/prefix (the S3 test server's signed GET/PUT/LIST, tests/s3server/s3tool.py).
s3tool() { (set -a && . "$PB_S3_DIR/env" && /usr/bin/python3 "$PB_SRCDIR/tests/s3server/s3tool.py" "$@"); }
obj_get() { # ROOT KEY FILE
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool get "$S3_ENDPOINT/${1#s3://}/$2" "$3"
    else cp "$1/$2" "$3"; fi
}
obj_put() { # ROOT KEY FILE (replaces the object)
    if [ "$PB_REPO_KIND" = s3 ]; then s3tool put "$S3_ENDPOINT/${1#s3://}/$2" "$3"
    else cat "$3" >"$1/$2"; fi
}
obj_list() { # ROOT PREFIX: the keys under PREFIX, sorted
    if [ "$PB_REPO_KIND" = s3 ]; then
        local b=${1#s3://} p
        p=${b#*/}
        s3tool request GET "$S3_ENDPOINT/${b%%/*}?list-type=2&prefix=${p//\//%2F}%2F${2//\//%2F}" |
            grep -o '<Key>[^<]*</Key>' | sed -e 's|<Key>||' -e 's|</Key>||' -e "s|^$p/||" | sort
    else
        (cd "$1" && find "$2" -type f | sort)
    fi
}
flip_byte() { # FILE: invert the byte in the middle
    /usr/bin/python3 -c 'import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0xff
open(sys.argv[1], "wb").write(bytes(b))' "$1"
}

pb_check "encrypted full backup" pb backup --type full >/dev/null
FULL=$(pb_last_id)
pg_psql "$SRC" "UPDATE secret SET v = v || '-upd' WHERE id % 3 = 0" >/dev/null
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = 0" >/dev/null
pb_check "encrypted incremental (compress level 6)" pb backup --type incr --compress-level 6 >/dev/null
pg_psql "$SRC" "INSERT INTO secret SELECT g, '$MARKER-' || g || '-' || gen_random_uuid()
                FROM generate_series(2001, 3000) g" >/dev/null
pb_check "encrypted incremental (compress level 1)" pb backup --type incr --compress-level 1 >/dev/null
LAST=$(pb_last_id)
DIGEST_LAST=$(pg_digest_all "$SRC")
# archive the current segment and wait for it, so that nothing else writes meanwhile
SWITCHED=$(pg_psql "$SRC" "SELECT pg_walfile_name(pg_switch_wal())")
for _ in $(seq 1 150); do
    [ "$(pg_psql "$SRC" "SELECT last_archived_wal FROM pg_stat_archiver")" = "$SWITCHED" ] && break
    sleep 0.2
done

pb_check "the marker is in the source's data files (the grep below can see it)" \
    grep -rqa "$MARKER" "$SRC/base"
if grep -rla "$MARKER" "$(stored_dir)" >"$PB_WORK/hits" 2>/dev/null; then
    pb_test_fail "no stored object holds the marker row: $(head -n 3 "$PB_WORK/hits")"
else
    pb_test_ok "no stored object holds the marker row ($(stored_count) files searched)"
fi
pb_check "no stored object holds the pgbench table name" \
    bash -c "! grep -rqa pgbench_accounts '$(stored_dir)'"
if [ "$PB_REPO_KIND" != s3 ]; then
    pb_check "a key check object exists" test -n "$(ls "$PB_REPO/keycheck")"
fi

pb_check "info with the key" pb info >/dev/null
pb_check "verify with the key" pb verify >/dev/null 2>&1

# no key, a wrong key, a key file others can read: refused, nothing written
BEFORE=$(stored_count)
out=$(pb_raw info 2>&1) && pb_test_fail "info without the key succeeds" ||
    pb_check "info without the key: 'is encrypted ... give --encrypt-key-file'" \
        grep -q "is encrypted.*give --encrypt-key-file" <<<"$out"
out=$(pb_raw backup --type incr 2>&1) && pb_test_fail "backup without the key succeeds" ||
    pb_check "backup without the key refused" grep -q "is encrypted" <<<"$out"
out=$(pb_raw info --encrypt-key-file "$WRONG" 2>&1) && pb_test_fail "info with a wrong key succeeds" ||
    pb_check "a wrong key: 'wrong encryption key'" grep -q "wrong encryption key" <<<"$out"
out=$(pb_raw backup --encrypt-key-file "$WRONG" 2>&1) && pb_test_fail "backup with a wrong key succeeds" ||
    pb_check "backup with a wrong key refused" grep -q "wrong encryption key" <<<"$out"
for how in none wrong; do
    T=$PB_WORK/t-$how
    mkdir -p "$T" && chmod 700 "$T" && _pb_chown_pg "$T"
    if [ $how = none ]; then out=$(pb_raw restore --target-dir "$T" 2>&1)
    else out=$(pb_raw restore --target-dir "$T" --encrypt-key-file "$WRONG" 2>&1); fi &&
        pb_test_fail "restore with $how key succeeds" ||
        pb_check "restore with $how key fails and writes nothing into the target" empty_dir "$T"
done
cp "$KEY" "$PB_WORK/open.key" && chmod 644 "$PB_WORK/open.key" && _pb_chown_pg "$PB_WORK/open.key"
out=$(pb_raw info --encrypt-key-file "$PB_WORK/open.key" 2>&1) &&
    pb_test_fail "a key file of mode 0644 is used" ||
    pb_check "a key file of mode 0644 is refused (names the mode)" grep -q "mode 644" <<<"$out"
pb_assert_eq "$(stored_count)" "$BEFORE" "the refused commands wrote nothing into the repository"

# A repository that holds only WAL: without the key every command is refused up front
# (decided by its key-check object), and a flipped byte in its history file is named.
if [ "$PB_REPO_KIND" = s3 ]; then W=${PB_REPO%/repo}/walonly; else W=$PB_WORK/walonly; mkdir -p "$W" && _pb_chown_pg "$W"; fi
W_ARGS=()
for a in "${PLAIN_ARGS[@]}"; do [ "$a" = "$PB_REPO" ] && W_ARGS+=("$W") || W_ARGS+=("$a"); done
printf '1\t0/3000000\tno recovery target specified\n' >"$PB_WORK/00000002.history"
_pb_chown_pg "$PB_WORK/00000002.history"
pb_check "a WAL-only encrypted repository (one history file pushed with the key)" \
    _pb_as_pg "$PB_BIN" archive-push "$PB_WORK/00000002.history" "${W_ARGS[@]}" --encrypt-key-file "$KEY"
for c in info "info --json" verify "expire --retain-full 1" rebase "archive-get 00000002.history $PB_WORK/h.out"; do
    # shellcheck disable=SC2086
    out=$(_pb_as_pg "$PB_BIN" $c "${W_ARGS[@]}" --state-dir "$PB_STATE" 2>&1) &&
        pb_test_fail "$c without the key on a WAL-only encrypted repository succeeds: $out" ||
        pb_check "$c without the key on a WAL-only encrypted repository: refused up front" \
            grep -q "repository $W is encrypted: give --encrypt-key-file" <<<"$out"
done
pb_check "archive-get without the key wrote nothing" test ! -e "$PB_WORK/h.out"
HIST=wal/history/00000002.history.zst
obj_get "$W" "$HIST" "$PB_WORK/hist.obj" && flip_byte "$PB_WORK/hist.obj" &&
    obj_put "$W" "$HIST" "$PB_WORK/hist.obj" || pb_test_fail "damaging $HIST"
out=$(_pb_as_pg "$PB_BIN" archive-get 00000002.history "$PB_WORK/h.out" "${W_ARGS[@]}" \
      --encrypt-key-file "$KEY" 2>&1) && pb_test_fail "archive-get of a damaged history file succeeds" ||
    pb_check "a flipped byte in $HIST: archive-get fails naming it, writes nothing" \
        bash -c "grep -q '${HIST%.zst}' <<<'$out' && test ! -e '$PB_WORK/h.out'"

# restore with the key: byte-exact, WAL through archive-get (restore_command carries the key file)
R=$PB_WORK/restored
if pb_restore_start "$R" --set "$LAST"; then
    pb_assert_eq "$(pg_digest_all "$R")" "$DIGEST_LAST" "restore of $LAST with the key: digests equal the source"
    pg_stop "$R"
    pb_check "restore: pg_checksums --check" pg_checksums_check "$R"
else
    pb_test_fail "restore of $LAST with the key"
fi
pb_check "restore_command carries the key file" grep -q -- "--encrypt-key-file" "$R/postgresql.auto.conf"

# flipped bytes in each kind of object (posix and S3): verify, restore and archive-get name
# the object and fail, restore writes nothing into its target; then the object is put back
WALOBJ=$(obj_list "$PB_REPO" wal/00000001/ | grep '\.zst$' | head -n 1)
WALNAME=$(basename "$WALOBJ" .zst)
PACK=$(obj_list "$PB_REPO" "backup/$LAST/pack/" | head -n 1)
KC=$(obj_list "$PB_REPO" keycheck/ | head -n 1)
for obj in "$PACK" "backup/$LAST/manifest" "$WALOBJ" "$KC"; do
    [ -n "$obj" ] || { pb_test_fail "an object to damage is missing ($PACK, $WALOBJ, $KC)"; continue; }
    obj_get "$PB_REPO" "$obj" "$PB_WORK/orig.obj" && cp "$PB_WORK/orig.obj" "$PB_WORK/bad.obj" &&
        flip_byte "$PB_WORK/bad.obj" && obj_put "$PB_REPO" "$obj" "$PB_WORK/bad.obj" ||
        pb_test_fail "damaging $obj"
    out=$(pb verify 2>&1) && pb_test_fail "verify passes with a flipped byte in $obj" ||
        pb_check "a flipped byte in $obj: verify fails naming it" grep -q "${obj%.zst}" <<<"$out"
    if [ "$obj" = "$WALOBJ" ]; then
        out=$(pb archive-get "$WALNAME" "$PB_WORK/seg.out" 2>&1) &&
            pb_test_fail "archive-get of $WALNAME passes with a flipped byte" ||
            pb_check "a flipped byte in $obj: archive-get fails naming it, writes nothing" \
                bash -c "grep -q '${obj%.zst}' <<<'$out' && test ! -e '$PB_WORK/seg.out'"
    else
        T=$PB_WORK/t-flip
        rm -rf "$T" && mkdir -p "$T" && chmod 700 "$T" && _pb_chown_pg "$T"
        out=$(pb restore --target-dir "$T" --set "$LAST" 2>&1)
        rrc=$?
        if [ "$obj" = "$PACK" ]; then
            # found mid-restore: the files rebuilt before it are written, recovery settings not
            pb_check "a flipped byte in $obj: restore fails naming it, no recovery settings written" \
                bash -c "[ $rrc != 0 ] && grep -q '$obj' <<<'$out' && test ! -e '$T/recovery.signal'"
        else
            pb_check "a flipped byte in $obj: restore fails naming it, writes nothing" \
                bash -c "[ $rrc != 0 ] && grep -q '$obj' <<<'$out' && [ -z \"\$(ls -A '$T')\" ]"
        fi
    fi
    obj_put "$PB_REPO" "$obj" "$PB_WORK/orig.obj" || pb_test_fail "putting $obj back"
done
pb_check "verify passes again with every object put back" pb verify >/dev/null 2>&1

# rebase and expire on the encrypted repository, then verify again
pb_check "rebase" pb rebase >/dev/null
pb_check "expire --retain-full 1" pb expire --retain-full 1 >/dev/null
pb_check "verify after rebase and expire" pb verify >/dev/null 2>&1

# key rotation: a new key seals new backups, the old one (given second) opens old ones
REBASED=$(pb_last_id)
ROT=("${PLAIN_ARGS[@]}" --encrypt-key-file "$NEWKEY" --encrypt-key-file "$KEY")
pb_rot() { local c=$1; shift; _pb_as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres \
    PGDATABASE=postgres "$PB_BIN" "$c" "${ROT[@]}" --state-dir "$PB_STATE" "$@"; }
pb_check "backup under a new key (old key given second)" pb_rot backup --type incr >/dev/null
pb_check "verify of old and new backups with both keys" pb_rot verify >/dev/null 2>&1
out=$(_pb_as_pg "$PB_BIN" verify "${PLAIN_ARGS[@]}" --encrypt-key-file "$NEWKEY" --state-dir "$PB_STATE" --set "$REBASED" 2>&1) &&
    pb_test_fail "the new key alone opens the old backup" ||
    pb_check "the new key alone: the old backup names its key id" grep -q "key id" <<<"$out"
# rotation by rebase: a synthetic full under the new key, restored with the new key alone
# (its WAL, archived under the old key, is sealed again by the rebase)
pb_check "rebase with the new key first" pb_rot rebase >/dev/null
SYN=$(pb_rot info --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['backups'][-1]['id'])")
ROT_ARGS=("${PB_REPO_ARGS[@]}")
PB_REPO_ARGS=("${PLAIN_ARGS[@]}" --encrypt-key-file "$NEWKEY")
pb_check "the new key alone verifies the synthetic full $SYN" pb verify --set "$SYN" >/dev/null 2>&1
R2=$PB_WORK/restored-newkey
pb_restore_digest "restore of $SYN with the new key alone: digests equal the source" \
    "restore of the rebased $SYN with the new key alone" "$R2" "$DIGEST_LAST" --set "$SYN"
pb_assert_eq "$(grep -o -- '--encrypt-key-file' "$R2/postgresql.auto.conf" | wc -l)" 1 \
    "its restore_command carries the new key file alone"
PB_REPO_ARGS=("${ROT_ARGS[@]}")

# an unencrypted repository refuses a key
if [ "$PB_REPO_KIND" != s3 ]; then
    P=$PB_WORK/plain-repo
    mkdir -p "$P" && _pb_chown_pg "$P"
    printf '1\t0/3000000\tno recovery target specified\n' >"$PB_WORK/00000002.history"
    _pb_chown_pg "$PB_WORK/00000002.history"
    pb_check "an unencrypted repository" _pb_as_pg "$PB_BIN" archive-push "$PB_WORK/00000002.history" --repo "$P"
    out=$(_pb_as_pg "$PB_BIN" info --repo "$P" --encrypt-key-file "$KEY" 2>&1) &&
        pb_test_fail "an unencrypted repository accepts a key" ||
        pb_check "an unencrypted repository refuses a key ('not encrypted')" grep -q "not encrypted" <<<"$out"
fi

pg_stop "$SRC"
pb_test_summary
