#!/bin/bash
# The corruption matrix: every kind of stored object (pack, manifest, WAL segment, history
# file, repository identity, and the local catalog) x every damage (flip a byte, truncate,
# delete, swap with another object of the same kind). For repository objects: verify must
# fail naming the object, and restore must fail before writing anything wrong (an empty
# target, or a failure whose written files are all correct). For the catalog (a cache):
# the next incremental must rebuild it from the repository (or refuse clearly), and the
# restored result must equal the source. Damage always lands in objects that the newest
# chain needs. Prints the matrix as a table.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1

pb_check "full backup" pb backup --type full >/dev/null
FULL=$(pb_last_id)
cp -a "$PB_STATE" "$PB_WORK/state-after-full"
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid % 97 = 0" >/dev/null
pb_check "incremental backup" pb backup --type incr >/dev/null
INCR=$(pb_last_id)
START_WAL=$(pb_info_field "$INCR" start_wal)
# Two timeline histories forking after the newest backup: a restore to the latest
# timeline reads the newest one. Pushed the way archive_command would push them.
FORK=$(pg_psql "$SRC" "SELECT pg_current_wal_lsn()")
pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
printf '1\t%s\tno recovery target specified\n' "$FORK" >"$PB_WORK/00000002.history"
printf '1\t%s\tno recovery target specified\n2\t%s\tno recovery target specified\n' \
    "$FORK" "$FORK" >"$PB_WORK/00000003.history"
_pb_chown_pg "$PB_WORK/00000002.history" "$PB_WORK/00000003.history"
pb_check "push history 2" pb archive-push "$PB_WORK/00000002.history"
pb_check "push history 3" pb archive-push "$PB_WORK/00000003.history"
# the segment after the newest backup's start must be archived too (the swap partner)
pg_psql "$SRC" "CREATE TABLE wal_filler AS SELECT g FROM generate_series(1, 1000) g" >/dev/null
pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 1 100); do
    [ "$(ls "$PB_REPO/wal/00000001" | sort | awk -v s="$START_WAL.zst" '$0 > s' | wc -l)" -gt 0 ] && break
    sleep 0.2
done

CLEAN=$PB_WORK/clean-repo
CLEAN_STATE=$PB_WORK/clean-state
cp -a "$PB_REPO" "$CLEAN" && cp -a "$PB_STATE" "$CLEAN_STATE" || pb_die "cannot copy the repository"
REF=$PB_WORK/ref-restore
mkdir -p "$REF" && _pb_chown_pg "$REF"
pb_check "reference restore of the undamaged repository" \
    pb restore --target-dir "$REF" >"$PB_WORK/ref.out" 2>&1
pb_check "verify of the undamaged repository" pb verify >/dev/null 2>&1

# objects the newest chain needs, relative to the repository
NEXT_WAL=$(ls "$PB_REPO/wal/00000001" | sort | awk -v s="$START_WAL.zst" '$0 > s {print; exit}')
declare -A OBJ OTHER
OBJ[pack]=backup/$INCR/pack/$(ls "$PB_REPO/backup/$INCR/pack" | head -n 1)
OTHER[pack]=backup/$FULL/pack/$(ls "$PB_REPO/backup/$FULL/pack" | head -n 1)
OBJ[manifest]=backup/$INCR/manifest
OTHER[manifest]=backup/$FULL/manifest
OBJ[wal]=wal/00000001/$START_WAL.zst
OTHER[wal]=wal/00000001/$NEXT_WAL
OBJ[history]=wal/history/00000003.history.zst
OTHER[history]=wal/history/00000002.history.zst
OBJ[identity]=pageback.repo
[ -n "$NEXT_WAL" ] || pb_die "no archived WAL segment after $START_WAL"
for k in pack manifest wal history identity; do
    [ -f "$PB_REPO/${OBJ[$k]}" ] || pb_die "no ${OBJ[$k]} in the repository"
    echo "damaged $k: ${OBJ[$k]}${OTHER[$k]:+ (swapped with ${OTHER[$k]})}"
done

# damage FILE DAMAGE [OTHER FILE]
damage() {
    local f=$1 how=$2 o=${3:-} size
    size=$(stat -c %s "$f")
    case $how in
    flip) printf "$(printf '\\x%02x' $(( $(od -An -tu1 -j $((size / 2)) -N1 "$f") ^ 0x20 )))" |
              dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc status=none ;;
    truncate) truncate -s $((size * 2 / 3)) "$f" ;;
    delete) rm -f "$f" ;;
    swap) if [ -n "$o" ]; then mv "$f" "$f.swap" && mv "$o" "$f" && mv "$f.swap" "$o"; fi ;;
    esac
}

# fresh copies of the undamaged repository and state for one cell
fresh() {
    CUR=$PB_WORK/cell/repo
    CUR_STATE=$PB_WORK/cell/state
    rm -rf "$PB_WORK/cell"
    mkdir -p "$PB_WORK/cell"
    cp -a "$CLEAN" "$CUR" && cp -a "$CLEAN_STATE" "$CUR_STATE"
    _pb_chown_pg "$PB_WORK/cell"
}
pbc() {
    local cmd=$1
    shift
    _pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres "$PB_BIN" "$cmd" --repo "$CUR" --state-dir "$CUR_STATE" "$@"
}

# Every page a failed restore wrote must be the reference restore's page: a file may be
# incomplete (pages not written yet read as zeros, or missing at the end), never wrong.
written_ok() {
    /usr/bin/python3 - "$1" "$REF" <<'PY'
import os, sys
t, ref = sys.argv[1], sys.argv[2]
bad = 0
for d, _, files in os.walk(t):
    for n in files:
        p = os.path.join(d, n)
        rel = os.path.relpath(p, t)
        if rel in ("recovery.signal", "postgresql.auto.conf"):
            continue
        r = os.path.join(ref, rel)
        if not os.path.exists(r):
            print("  not in the backup:", rel, file=sys.stderr); bad = 1; continue
        a, b = open(p, "rb").read(), open(r, "rb").read()
        for off in range(0, len(a), 8192):
            pa, pb = a[off:off + 8192], b[off:off + 8192]
            if pa != pb and pa.strip(b"\0"):
                print("  wrong page:", rel, off // 8192, file=sys.stderr); bad = 1; break
sys.exit(bad)
PY
}

declare -A CELL
# Cells that no check can see today, reported as "pending" unless PB_MATRIX_STRICT=1: a
# deleted newest manifest or newest history file leaves a repository that is consistent
# without it (the backup, or the timeline, is simply not there). Detecting them needs a
# record of what was committed (e.g. verify flagging packs without a manifest).
PENDING_VERIFY=" manifest,delete history,delete "
# Cells where a successful restore is right today: a deleted newest manifest or history
# file leaves a consistent, older repository (the backup or timeline is simply not
# there), and a swapped-in valid history is the one recovery follows. Damaged WAL the
# restore's recovery needs is refused before writing (restore/wal_check.c), and
# archive-get must refuse it by name too (checked below).
ACCEPT_RESTORED=" manifest,delete history,delete history,swap "
declare -A RARGS=([history]="--target-timeline latest")
PENDING=0
repo_cell() {
    local kind=$1 how=$2 obj=${OBJ[$1]} other=${OTHER[$1]:-} v vout r rout named target
    fresh
    if [ "$how" = swap ] && [ "$kind" = identity ]; then
        # another repository's identity file (another cluster)
        printf 'PAGEBACK-REPO 1\nsystem-identifier=7000000000000000001\n' >"$CUR/$obj"
    else
        damage "$CUR/$obj" "$how" "${other:+$CUR/$other}"
    fi
    vout=$(pbc verify 2>&1); v=$?
    named=no
    echo "$vout" | grep -qF "$(basename "$obj" .zst)" && named=yes
    [ "$how" = swap ] && [ -n "$other" ] && echo "$vout" | grep -qF "$(basename "$other" .zst)" && named=yes
    target=$PB_WORK/cell/target
    mkdir -p "$target" && _pb_chown_pg "$target"
    # shellcheck disable=SC2086
    rout=$(pbc restore --target-dir "$target" ${RARGS[$kind]:-} 2>&1); r=$?
    local rstate ok=1 extra=""
    if [ $r = 0 ]; then
        rstate="restored (exit 0)"
    elif [ -z "$(ls -A "$target")" ]; then
        rstate="refused, target empty"
    elif written_ok "$target"; then
        rstate="failed mid-restore, every written page correct"
    else
        rstate="failed, WRONG PAGES WRITTEN"
    fi
    if [ "$kind" = wal ] || [ "$kind" = history ]; then
        # the read path recovery uses: archive-get must refuse the damaged object by name
        local name
        name=$(basename "$obj" .zst)
        if pbc archive-get "$name" "$PB_WORK/cell/got" >"$PB_WORK/cell/get.out" 2>&1; then
            extra="; archive-get $name SUCCEEDS"
            [ "$kind,$how" = history,swap ] || ok=0
        elif [ "$how" = delete ]; then
            extra="; archive-get: not found (exit 1, as PostgreSQL expects)"
        elif grep -qF "$name" "$PB_WORK/cell/get.out"; then
            extra="; archive-get refuses $name (named)"
        else
            extra="; archive-get fails without naming $name"
            ok=0
        fi
    fi
    [ "$rstate" = "failed, WRONG PAGES WRITTEN" ] && ok=0
    [ $r != 0 ] || [[ "$ACCEPT_RESTORED" == *" $kind,$how "* ]] || ok=0
    local vstate="verify exit $v, named $named"
    local vok=0
    [ $v != 0 ] && [ $named = yes ] && vok=1
    if [ $vok = 0 ] && [[ "$PENDING_VERIFY" == *" $kind,$how "* ]] && [ "${PB_MATRIX_STRICT:-0}" != 1 ]; then
        vstate="$vstate (PENDING: not detectable yet)"
        PENDING=$((PENDING + 1))
        vok=1
    fi
    [ $vok = 1 ] || ok=0
    CELL[$kind,$how]="$vstate; restore $rstate$extra"
    if [ $ok = 1 ]; then
        pb_test_ok "$kind x $how: ${CELL[$kind,$how]}"
    else
        pb_test_fail "$kind x $how: ${CELL[$kind,$how]}"
        echo "$vout" | tail -n 2 | sed 's/^/    verify: /'
        echo "$rout" | tail -n 2 | sed 's/^/    restore: /'
    fi
}

KINDS=${PB_MATRIX_KINDS:-pack manifest wal history identity catalog}
for kind in $KINDS; do
    [ "$kind" = catalog ] && continue
    for how in flip truncate delete swap; do
        repo_cell "$kind" "$how"
    done
done

# The catalog, against the real repository (the source archives its WAL there): damage a
# copy of the up-to-date state directory, change the database, take an incremental with
# it, and compare a restore of that incremental with the source.
catalog_cell() {
    local how=$1 out rc f st=$PB_WORK/cell-state
    rm -rf "$st" && cp -a "$PB_STATE" "$st"
    case $how in
    flip | truncate)
        f=$(ls -S "$st"/*.sst 2>/dev/null | head -n 1)
        [ -n "$f" ] || f=$(ls -S "$st"/*.log | head -n 1)
        damage "$f" "$how" ;;
    delete) find "$st" -mindepth 1 ! -name backup.lock -delete ;;
    swap) # a state directory put back from an older copy: its head is the full backup
        rm -rf "$st" && cp -a "$PB_WORK/state-after-full" "$st" ;;
    esac
    _pb_chown_pg "$st"
    pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 89 = 0" >/dev/null
    out=$(_pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres "$PB_BIN" backup "${PB_REPO_ARGS[@]}" --state-dir "$st" --type incr 2>&1)
    rc=$?
    [ -n "${PB_MATRIX_DEBUG:-}" ] && echo "$out" | sed 's/^/    backup: /'
    local digest result target=$PB_WORK/cell-pg
    if [ $rc != 0 ]; then
        if echo "$out" | grep -qiE "catalog"; then result="refused clearly"; else result="FAILED UNCLEARLY"; fi
    else
        digest=$(pg_digest_all "$SRC")
        rm -rf "$target"
        # By id: the WAL cells above pushed history files of timelines 2 and 3, so a plain
        # restore refuses (their branches compete with the cluster's timeline 1).
        local id
        id=$(sed -n 's/^.*backup \([0-9]\{8\}-[0-9]\{6\}I[^ ]*\) started.*$/\1/p' <<<"$out" | head -n 1)
        if pb_restore_start "$target" --set "$id" >"$PB_WORK/cell-restore.log" 2>&1 &&
            [ "$(pg_digest_all "$target")" = "$digest" ]; then
            result="incremental taken$(echo "$out" | grep -q 'rebuil' && echo ' after rebuilding the catalog from the repository'); its restore equals the source"
        else
            result="WRONG INCREMENTAL"
        fi
        pg_stop "$target" >/dev/null 2>&1
        rm -rf "$PB_STATE" && mv "$st" "$PB_STATE" # the next cell starts from this head
    fi
    CELL[catalog,$how]="backup exit $rc: $result"
    case $result in
    *WRONG* | *UNCLEARLY*) pb_test_fail "catalog x $how: ${CELL[catalog,$how]}"
                           echo "$out" | tail -n 3 | sed 's/^/    backup: /' ;;
    *) pb_test_ok "catalog x $how: ${CELL[catalog,$how]}" ;;
    esac
}

case " $KINDS " in *" catalog "*)
    for how in flip truncate delete swap; do
        catalog_cell "$how"
    done ;;
esac

echo
echo "corruption matrix (kind x damage -> outcome)"
printf '%-9s | %-8s | %s\n' kind damage outcome
for kind in pack manifest wal history identity catalog; do
    for how in flip truncate delete swap; do
        printf '%-9s | %-8s | %s\n' "$kind" "$how" "${CELL[$kind,$how]:-not run}"
    done
done
echo "cells pending (not detectable yet): $PENDING (PB_MATRIX_STRICT=1 counts them as failures)"
echo
pb_test_summary
