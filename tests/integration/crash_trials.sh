#!/bin/bash
# Crash trials: backup, rebase, expire and archive-push are killed (SIGKILL) at every
# named fault point (PAGEBACK_TEST_FAULT, docs/GUIDE.md "Fault injection (tests only)")
# and at random moments from outside, with a little pgbench writing between trials.
# After each trial:
#   verify   every backup listed in the repository passes `pageback verify --set ID`
#   rerun    the same command, run again without a fault, succeeds
#   clean    after that successful run no leftovers remain: no temp object of a dead
#            writer, no backup/<id>/ without a manifest
#   restore  (every 10th trial of backup, rebase and expire) the newest backup restores,
#            the cluster starts and its table digests equal the source's at that backup
#   archive-push also: the segment that was being pushed is archived byte-exact once
#            PostgreSQL has retried (it stays in pg_wal until then).
# Ends with a table: point -> trials, killed, and each outcome; then "N passed, N failed".
#   PB_TRIALS   trials per command (default 30)
#   PB_TRIALS_LEFTOVERS=warn  count leftovers in the table only, not as failures (for
#               a tree without the removal of a killed writer's objects)
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about what a kill leaves behind.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
if [ "$PB_REPO_KIND" != posix ]; then
    echo "crash trials use the posix repository (the fault points of puts are posix ones)"
    echo "0 passed, 0 failed"
    exit 0
fi
pb_setup
TRIALS=${PB_TRIALS:-30}
CTL=$PB_WORK/ctl # written by the postgres user: archive wrapper state, pid files
mkdir -p "$CTL" && _pb_chown_pg "$CTL"

# archive_command: pageback archive-push, with a one-shot fault taken from $CTL/fault
# ("<point>[:<nth>]" or "kill:<ms>" for a SIGKILL from outside after that many ms).
cat >"$CTL/arch.sh" <<EOF
#!/bin/bash
spec=
if [ -f "$CTL/fault" ]; then
    spec=\$(cat "$CTL/fault"); rm -f "$CTL/fault"
    cp "\$1" "$CTL/seg.copy"; basename "\$1" >"$CTL/seg.name"
fi
case "\$spec" in
kill:*)
    "$PB_BIN" archive-push "\$1" --repo "$PB_REPO" & p=\$!
    sleep "\$(echo "scale=3; \${spec#kill:} / 1000" | bc)"; kill -9 \$p 2>/dev/null
    wait \$p; rc=\$? ;;
*)
    PAGEBACK_TEST_FAULT=\$spec "$PB_BIN" archive-push "\$1" --repo "$PB_REPO"; rc=\$? ;;
esac
[ -n "\$spec" ] && echo "\$spec \$rc" >>"$CTL/arch.log"
# A push that died on a signal is reported as a plain failure: PostgreSQL retries it a
# second later instead of restarting its archiver (what it does for a signal), which
# only makes the trial slower.
[ \$rc -gt 128 ] && exit 1
exit \$rc
EOF
chmod 755 "$CTL/arch.sh" && _pb_chown_pg "$CTL"
PB_ARCHIVE_COMMAND="$CTL/arch.sh %p"

SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" 1 || pb_die "pgbench init failed"
pg_psql "$SRC" "CREATE TABLE trial_log (n int, t text)" >/dev/null

# ---- helpers ----------------------------------------------------------------------

# pbf SPEC CMD ARGS...: pageback as postgres with fault SPEC armed ("" = none).
pbf() {
    local spec=$1 cmd=$2
    shift 2
    _pb_as_pg env PAGEBACK_TEST_FAULT="$spec" PGHOST="$PGHOST" PGPORT="$PGPORT" \
        PGUSER=postgres PGDATABASE=postgres "$PB_BIN" "$cmd" "${PB_REPO_ARGS[@]}" \
        --state-dir "$PB_STATE" "$@"
}

# pbkill MS CMD ARGS...: start the command, SIGKILL it after MS ms (if still running).
pbkill() {
    local ms=$1 pid
    shift
    rm -f "$CTL/pid"
    _pb_as_pg bash -c 'echo $$ >"$0"; exec "$@"' "$CTL/pid" env PGHOST="$PGHOST" \
        PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres "$PB_BIN" "$@" \
        "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" &
    local bg=$!
    sleep "$(echo "scale=3; $ms / 1000" | bc)"
    pid=$(cat "$CTL/pid" 2>/dev/null)
    # Only while the command still runs: pids wrap quickly here (pid_max 32768), and a
    # finished command's pid may already belong to someone else (an archive-push).
    kill -0 "$bg" 2>/dev/null && [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    wait "$bg"
}

listed() { ls "$PB_REPO"/backup/*/manifest 2>/dev/null | awk -F/ '{print $(NF-1)}'; }

# verify_all: every listed backup verifies; prints the ones that do not.
verify_all() {
    local id bad=
    for id in $(listed); do
        pb verify --set "$id" >"$PB_WORK/verify.out" 2>&1 ||
            bad+="$id($(tail -n 1 "$PB_WORK/verify.out")) "
    done
    [ -z "$bad" ] || { echo "$bad"; return 1; }
}

# leftovers: temp objects of writers that are gone, backup directories without a
# manifest. Prints them.
leftovers() {
    local f pid d out=
    while IFS= read -r f; do
        pid=$(echo "$f" | sed -n 's/.*\.tmp\.\([0-9]*\)\..*/\1/p')
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && continue
        # Listed while its writer (an archive-push PostgreSQL started) ran, and gone with
        # it: not a leftover.
        [ -e "$f" ] || continue
        out+="${f#"$PB_REPO"/} "
    done < <(find "$PB_REPO" -name '*.tmp.*' 2>/dev/null)
    for d in "$PB_REPO"/backup/*/; do
        [ -d "$d" ] && [ ! -f "$d/manifest" ] && out+="${d#"$PB_REPO"/}(no manifest) "
    done
    [ -z "$out" ] || { echo "$out"; return 1; }
}

# Once counted, a trial's leftovers are removed, so that the next trial is judged on
# what it leaves itself.
remove_leftovers() {
    local f pid d
    while IFS= read -r f; do
        pid=$(echo "$f" | sed -n 's/.*\.tmp\.\([0-9]*\)\..*/\1/p')
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && continue
        rm -f "$f"
    done < <(find "$PB_REPO" -name '*.tmp.*' 2>/dev/null)
    for d in "$PB_REPO"/backup/*/; do
        [ -d "$d" ] && [ ! -f "$d/manifest" ] && rm -rf "$d"
    done
}

# a little writing load between trials
write_load() {
    pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1
                    WHERE aid IN (SELECT (random() * 99999)::int + 1 FROM generate_series(1, 200));
                    INSERT INTO trial_log VALUES ($1, repeat('w', 500))" >/dev/null
}

declare -A T_N T_KILLED T_VERIFY T_RERUN T_CLEAN T_RESTORE T_RESTORE_N
ROWS=()
# record CMD POINT KILLED VERIFY RERUN CLEAN [RESTORE]: 1 = ok, 0 = not; RESTORE "" = none
record() {
    local k="$1 $2"
    [ -n "${T_N[$k]:-}" ] || { ROWS+=("$k"); T_N[$k]=0; T_KILLED[$k]=0; T_VERIFY[$k]=0;
        T_RERUN[$k]=0; T_CLEAN[$k]=0; T_RESTORE[$k]=0; T_RESTORE_N[$k]=0; }
    T_N[$k]=$((T_N[$k] + 1))
    T_KILLED[$k]=$((T_KILLED[$k] + $3))
    T_VERIFY[$k]=$((T_VERIFY[$k] + $4))
    T_RERUN[$k]=$((T_RERUN[$k] + $5))
    T_CLEAN[$k]=$((T_CLEAN[$k] + $6))
    if [ -n "${7:-}" ]; then
        T_RESTORE_N[$k]=$((T_RESTORE_N[$k] + 1))
        T_RESTORE[$k]=$((T_RESTORE[$k] + $7))
    fi
}

# The newest backup restores to the source's state: nothing writes between a trial's
# rerun and its restore, so the source's digest now is its digest at that backup's end.
RESTORES=0
restore_latest() {
    local d=$PB_WORK/restore$RESTORES want got
    RESTORES=$((RESTORES + 1))
    want=$(pg_digest_all "$SRC")
    pb_restore_start "$d" >/dev/null || return 1
    got=$(pg_digest_all "$d")
    pg_stop "$d" >/dev/null
    pb_rm_bg "$d"
    [ "$got" = "$want" ]
}

secs() { echo "scale=1; (${2/./} - ${1/./}) / 1000000" | bc; }

# trial CMD POINT RUN...: RUN kills the command (a fault spec or an outside kill); then
# the checks. POINT "random" means an outside kill.
TRIAL_NO=0
declare -A CMD_TRIALS
trial() {
    local cmd=$1 point=$2 rc killed=0 v=1 r=1 c=1 res= why=
    shift 2
    TRIAL_NO=$((TRIAL_NO + 1))
    local t0=$EPOCHREALTIME t1 t2 t3
    "$@" >"$PB_WORK/trial.out" 2>&1
    rc=$?
    t1=$EPOCHREALTIME
    [ "$rc" = 137 ] && killed=1
    if [ "$point" != random ] && [ "$killed" = 0 ]; then
        why+=" not killed (exit $rc: $(tail -n 1 "$PB_WORK/trial.out"));"
    fi
    local bad
    bad=$(verify_all) || { v=0; why+=" verify failed: $bad;"; }
    t2=$EPOCHREALTIME
    rerun_$cmd >"$PB_WORK/rerun.out" 2>&1 || { r=0; why+=" rerun failed: $(tail -n 1 "$PB_WORK/rerun.out");"; }
    t3=$EPOCHREALTIME
    if ! bad=$(leftovers); then
        c=0
        remove_leftovers
        if [ "${PB_TRIALS_LEFTOVERS:-fail}" = warn ]; then
            echo "warn $cmd trial $TRIAL_NO ($point): leftovers: $bad"
        else
            why+=" leftovers: $bad;"
        fi
    fi
    CMD_TRIALS[$cmd]=$((${CMD_TRIALS[$cmd]:-0} + 1))
    if [ "$cmd" != archive-push ] && [ $((CMD_TRIALS[$cmd] % 10)) = 0 ] && [ "$r" = 1 ]; then
        if restore_latest; then res=1; else res=0; why+=" restore of the newest backup differs;"; fi
    fi
    record "$cmd" "$point" "$killed" "$v" "$r" "$c" "$res"
    local took="run $(secs "$t0" "$t1") s, verify $(secs "$t1" "$t2") s, rerun $(secs "$t2" "$t3") s"
    if [ -n "$why" ]; then
        pb_test_fail "$cmd trial $TRIAL_NO ($point; $took):$why"
    else
        pb_test_ok "$cmd trial $TRIAL_NO ($point; $took)"
    fi
}

rerun_backup() { pb backup; }
rerun_rebase() { pb rebase; }
rerun_expire() { pb expire --retain-full 1; }
# the retry by PostgreSQL succeeded and the segment is archived byte-exact
rerun_archive-push() { wait_archived && arch_lost_nothing; }

# ---- archive-push: the push runs under PostgreSQL's archiver ----------------------

# wait until nothing is waiting to be archived (PostgreSQL retried the failed push).
# A push killed by a signal makes the archiver exit (FATAL); the postmaster starts a new
# one on its next loop, which a reload triggers at once instead of within a minute.
wait_archived() {
    local i
    for i in $(seq 1 300); do
        ls "$SRC"/pg_wal/archive_status/*.ready >/dev/null 2>&1 || return 0
        [ $((i % 10)) = 0 ] && pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null
        sleep 0.1
    done
    echo "segments still not archived: $(ls "$SRC"/pg_wal/archive_status/)"
    return 1
}

# arch_run SPEC: one push under the fault; returns the push's exit code (137 = killed).
arch_run() {
    wait_archived || return 1
    rm -f "$CTL/arch.log" "$CTL/seg.copy" "$CTL/seg.name"
    echo "$1" >"$CTL/fault" && _pb_chown_pg "$CTL/fault"
    write_load "$TRIAL_NO"
    pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
    local i
    for i in $(seq 1 300); do
        [ -s "$CTL/arch.log" ] && break
        sleep 0.05
    done
    [ -s "$CTL/arch.log" ] || { echo "no push attempted"; return 1; }
    return "$(awk '{print $2}' "$CTL/arch.log")"
}

# after the retry: the pushed segment is in the repository with the same bytes
arch_lost_nothing() {
    local name
    name=$(cat "$CTL/seg.name")
    "$PB_BIN" archive-get "$name" "$PB_WORK/seg.got" --repo "$PB_REPO" >/dev/null 2>&1 &&
        cmp -s "$PB_WORK/seg.got" "$CTL/seg.copy"
}

# ---- an expire that stops half way (no fault switch needed) -------------------------
# A delete that fails (the directory of the newest expired backup made read-only for
# the postgres user) stops expire where a kill would: every backup still listed must
# have its whole chain, and once the delete works again expire leaves no empty
# backup/<id>/ behind.
pb_check "first full backup" rerun_backup
FIRST=$(listed | head -n 1)
write_load 0 && pb backup >/dev/null 2>&1 && write_load 0 && pb backup >/dev/null 2>&1
NEWEST_INCR=$(listed | tail -n 1)
pb backup --type full >/dev/null 2>&1
chown root "$PB_REPO/backup/$NEWEST_INCR" && chmod 755 "$PB_REPO/backup/$NEWEST_INCR"
pb expire --retain-full 1 >"$PB_WORK/expire.out" 2>&1 &&
    pb_test_fail "expire should fail on the read-only backup directory"
BAD=$(verify_all) && pb_test_ok "expire stopped half way: every listed backup verifies" ||
    pb_test_fail "expire stopped half way: broken chains: $BAD"
_pb_chown_pg "$PB_REPO/backup/$NEWEST_INCR"
pb_check "expire succeeds once the delete works" pb expire --retain-full 1
pb_assert_eq "$(listed | grep -c "$FIRST")" 0 "the old chain is expired"
BAD=$(leftovers) && pb_test_ok "expire leaves no backup directory without a manifest" ||
    { pb_test_fail "expire left: $BAD"; remove_leftovers; }

# ---- the trials ---------------------------------------------------------------------
rand_ms() { echo $(($1 + RANDOM % ($2 - $1 + 1))); }

BACKUP_POINTS=(backup.after-start backup.mid-pack backup.mid-pack:5 writer.mid-object
    writer.mid-object:3 writer.after-commit backup.before-manifest-commit
    backup.after-manifest-commit backup.after-catalog-update put.after-temp-write
    put.after-rename put-new.after-temp-write put-new.after-link)
REBASE_POINTS=(rebase.mid-pack rebase.mid-pack:20 writer.mid-object writer.after-commit
    rebase.before-manifest-commit put.after-temp-write put.after-rename)
EXPIRE_POINTS=(expire.after-backup drop.after-manifest drop.after-manifest:2
    expire.after-backup:2 expire.mid-wal expire.mid-wal:2 put-new.after-link)
# archive-push stores a segment create-if-absent (put-new.*); backup and expire reach
# the same points while they create the writer lock (the first thing they write).
ARCH_POINTS=(put-new.after-temp-write put-new.after-link)
T0=$(date +%s)
for i in $(seq 0 $((TRIALS - 1))); do
    write_load "$i"
    # backup: the named points first, then outside kills at random moments
    if [ "$i" -lt ${#BACKUP_POINTS[@]} ]; then
        # points in the pack path need pages to ship: a full backup
        p=${BACKUP_POINTS[$i]}
        t=incr
        case $p in *pack*|writer.*) t=full ;; esac
        trial backup "$p" pbf "$p" backup --type $t
    elif [ $((i % 2)) = 0 ]; then
        trial backup random pbkill "$(rand_ms 20 800)" backup --type full
    else
        trial backup random pbkill "$(rand_ms 20 500)" backup
    fi
    # rebase: a synthetic full of the newest chain
    if [ "$i" -lt ${#REBASE_POINTS[@]} ]; then
        p=${REBASE_POINTS[$i]}
        trial rebase "$p" pbf "$p" rebase
    else
        trial rebase random pbkill "$(rand_ms 20 800)" rebase
    fi
    # expire: the rebase made a new synthetic full, so --retain-full 1 has work to do
    if [ "$i" -lt ${#EXPIRE_POINTS[@]} ]; then
        p=${EXPIRE_POINTS[$i]}
        trial expire "$p" pbf "$p" expire --retain-full 1
    else
        trial expire random pbkill "$(rand_ms 1 150)" expire --retain-full 1
    fi
    # archive-push under PostgreSQL's archiver
    if [ "$i" -lt $((2 * ${#ARCH_POINTS[@]})) ]; then
        p=${ARCH_POINTS[$((i % ${#ARCH_POINTS[@]}))]}
        trial archive-push "$p" arch_run "$p"
    else
        p=random
        trial archive-push random arch_run "kill:$(rand_ms 1 120)"
    fi
done
T1=$(date +%s)

# ---- one list of points: the source's PB_FAULT_POINT calls, the table in common/fault.c,
# docs/GUIDE.md and the trials above name the same points, and each of them killed
points_in() { sort -u | tr '\n' ' '; }
CALLS=$(grep -rhoE 'PB_FAULT_POINT\("[^"]+"\)' "$PB_SRCDIR"/common "$PB_SRCDIR"/engine \
    "$PB_SRCDIR"/restore "$PB_SRCDIR"/tools --include='*.c' | sed 's/.*("\(.*\)")/\1/' | points_in)
# Behaviour faults (pb_fault_fires: "not a crash") are listed apart from the crash points.
table_of() { sed -n 's/^    {"\([a-z.-]*\)", .*/\1/p' "$PB_SRCDIR/common/fault.c" | points_in; }
docs_of() { sed -n 's/^| `\([a-z.-]*\)` |.*/\1/p' "$PB_SRCDIR/docs/GUIDE.md" | points_in; }
TABLE=$(grep -v 'not a crash' "$PB_SRCDIR/common/fault.c" |
    sed -n 's/^    {"\([a-z.-]*\)", .*/\1/p' | points_in)
DOCS=$(grep -v 'not a crash' "$PB_SRCDIR/docs/GUIDE.md" | sed -n 's/^| `\([a-z.-]*\)` |.*/\1/p' |
    points_in)
FIRES=$(grep -rhoE 'pb_fault_fires\("[^"]+"\)' "$PB_SRCDIR"/common "$PB_SRCDIR"/engine \
    "$PB_SRCDIR"/restore "$PB_SRCDIR"/tools --include='*.c' | sed 's/.*("\(.*\)")/\1/' | points_in)
ALL_TABLE=$(table_of)
ALL_DOCS=$(docs_of)
pb_assert_eq "$TABLE" "$CALLS" "the fault point table lists exactly the crash points in the source"
pb_assert_eq "$DOCS" "$CALLS" "docs/GUIDE.md lists exactly the crash points in the source"
pb_assert_eq "$ALL_TABLE" "$(echo $CALLS $FIRES | tr ' ' '\n' | points_in)" \
    "the fault point table lists every fault of the source, behaviour faults included"
pb_assert_eq "$ALL_DOCS" "$ALL_TABLE" "docs/GUIDE.md lists every fault of the table"
if [ "$TRIALS" -ge ${#BACKUP_POINTS[@]} ]; then # every point was armed
    KILLED_AT=$(for k in "${ROWS[@]}"; do
        [ "${T_KILLED[$k]}" -gt 0 ] && p=${k#* } && echo "${p%%:*}"; done | grep -v '^random$' | points_in)
    pb_assert_eq "$KILLED_AT" "$CALLS" "every fault point was reached and killed its command"
fi

# ---- the table ------------------------------------------------------------------------
echo
echo "crash trials: $TRIAL_NO in $((T1 - T0)) s"
printf '%-14s %-32s %6s %6s %9s %8s %10s %10s\n' command point trials killed "verify ok" \
    "rerun ok" "left none" "restore ok"
for k in $(printf '%s\n' "${ROWS[@]}" | tr ' ' '|' | sort -t'|' -k1,1 -s); do
    k=${k/|/ }
    printf '%-14s %-32s %6s %6s %9s %8s %10s %10s\n' ${k% *} ${k#* } "${T_N[$k]}" \
        "${T_KILLED[$k]}" "${T_VERIFY[$k]}" "${T_RERUN[$k]}" "${T_CLEAN[$k]}" \
        "${T_RESTORE[$k]}/${T_RESTORE_N[$k]}"
done
pb_test_summary
