#!/bin/bash
# tests/deps_test.sh — the dependency rules of docs/DESIGN.md ("Rooms and arrows"),
# checked on every #include of the tree. Fails when an include crosses a forbidden
# arrow or a third-party header appears outside the one file that owns it.
# Ends with "N passed, N failed".
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC" || exit 1
passed=0
failed=0

# Which project headers each room may include (besides its own room's headers).
allowed_for() {
    case $1 in
        common) echo "" ;;
        manifest) echo "common/pb.h" ;;
        # The storage room (repo_*, posix and S3 drivers) stands on common/ alone.
        engine/storage) echo "common/" ;;
        # engine/'s rooms (docs/DESIGN.md, "Rooms and arrows"): another room only through
        # its one public header, engine/<room>/<room>.h, and only along these arrows.
        engine/scan) echo "common/" ;;
        engine/pack) echo "common/ manifest/manifest.h engine/storage/storage.h" ;;
        engine/pg) echo "common/ manifest/manifest.h engine/pgver/pgver.h" ;;
        engine/chain) echo "common/ manifest/manifest.h engine/storage/storage.h \
engine/pack/pack.h engine/wal/wal.h" ;;
        engine/backup) echo "common/ manifest/manifest.h engine/storage/storage.h \
engine/wal/wal.h engine/pgver/pgver.h engine/scan/scan.h engine/pack/pack.h \
engine/chain/chain.h engine/pg/pg.h" ;;
        # The version layer: facts of each PostgreSQL major, on common/ alone.
        engine/pgver) echo "common/" ;;
        # The WAL room: storage and the object envelope (pack/), nothing of the backup path.
        engine/wal) echo "common/ engine/storage/storage.h engine/pack/pack.h engine/pgver/pgver.h" ;;
        # restore/ may use the repository (storage), pack reading, the chain and the
        # WAL archive; never the backup path (backup/, scan/, pg/).
        restore) echo "common/ manifest/manifest.h engine/storage/storage.h engine/pack/pack.h \
engine/chain/chain.h engine/wal/wal.h engine/pgver/pgver.h restore/recovery/recovery.h" ;;
        # restore/'s rooms: recovery/ stands on the engine and the module's public types
        # alone; the rebuild core (restore/) on recovery/; verify/ on both, through the
        # core's plan.h. Nothing below includes verify/.
        restore/recovery) echo "common/ manifest/manifest.h engine/storage/storage.h \
engine/chain/chain.h engine/pack/pack.h engine/wal/wal.h engine/pgver/pgver.h restore/restore.h" ;;
        restore/verify) echo "$(allowed_for restore) restore/restore.h restore/plan.h restore/srcmap.h \
restore/recovery/recovery.h" ;;
        tools) echo "common/ manifest/ engine/ restore/restore.h restore/verify/verify.h" ;;
        # a benchmark of restore planning measures the tests' model of it
        tools/bench) echo "$(allowed_for tools) tests/unit/restore/plan_stream.h" ;;
    esac
}

# The room a file belongs to: its top folder, except the rooms inside engine/.
room_of() {
    case $1 in
        engine/storage/*) echo "engine/storage" ;;
        engine/wal/*) echo "engine/wal" ;;
        engine/pgver/*) echo "engine/pgver" ;;
        restore/recovery/*) echo "restore/recovery" ;;
        restore/verify/*) echo "restore/verify" ;;
        tools/bench/*) echo "tools/bench" ;;
        engine/*/*) echo "${1%/*}" | cut -d/ -f1-2 ;;
        *) echo "${1%%/*}" ;;
    esac
}

# Third-party headers and the only files (or folder, ending in '/') allowed to include them.
owner_of() {
    case $1 in
        rocksdb/*) echo "manifest/catalog.c manifest/catalog_apply.c manifest/catalog_internal.h" ;;
        curl/*) echo "engine/storage/s3/" ;;
        libpq-fe.h) echo "engine/pg/pgconn.c engine/pg/pgconn_summary.c engine/pg/pgconn_internal.h" ;;
        liburing.h) echo "engine/scan/scan_queue_internal.h" ;;
        zstd.h) echo "engine/pack/pack.c engine/pack/envelope.c" ;;
        xxhash.h) echo "common/util.c" ;;
        isa-l/*) echo "engine/wal/decode.c" ;;
        sodium.h|sodium/*) echo "engine/storage/crypt.c" ;;
        *) echo "" ;;
    esac
}

fail() {
    echo "FAIL $*"
    failed=$((failed + 1))
}

check_project_include() {
    local file=$1 room=$2 inc=$3 ok=0 a
    # A bare name ("pb.h") is resolved beside the including file, as the compiler does.
    case $inc in */*) ;; *) inc=$(dirname "$file")/$inc ;; esac
    [ "$(room_of "$inc")" = "$room" ] && ok=1
    for a in $(allowed_for "$room"); do
        case $a in
            */) case $inc in "$a"*) ok=1 ;; esac ;;
            *) [ "$inc" = "$a" ] && ok=1 ;;
        esac
    done
    # A private header (*_internal.h) is for its own folder and the folders below it
    # (engine/storage/s3/ implements engine/storage/storage_internal.h's vtable).
    case $inc in
        *_internal.h) case "$(dirname "$file")/" in "$(dirname "$inc")/"*) ;; *) ok=0 ;; esac ;;
    esac
    # ... and never for another room's files, even one in a folder below it (restore/'s).
    case $inc in
        restore/*_internal.h) [ "$(room_of "$inc")" = "$room" ] || ok=0 ;;
    esac
    # From outside an engine room, only its public header: engine/<room>/<room>.h.
    local to
    to=$(room_of "$inc")
    case $to in
        engine/*) [ "$to" != "$room" ] && [ "$inc" != "$to/${to#engine/}.h" ] && ok=0 ;;
    esac
    if [ $ok = 1 ]; then passed=$((passed + 1)); else fail "$file includes \"$inc\" ($room/ may not)"; fi
}

check_system_include() {
    local file=$1 inc=$2 owner
    owner=$(owner_of "$inc")
    [ -z "$owner" ] && return
    local o
    for o in $owner; do
        case $o in */) case $file in "$o"*) owner=" $file " ;; esac ;; esac
    done
    case " $owner " in
        *" $file "*) passed=$((passed + 1)) ;;
        *) fail "$file includes <$inc>, which only $owner may include" ;;
    esac
}

for file in $(git ls-files 'common/*.[ch]' 'manifest/*.[ch]' 'engine/*.[ch]' \
    'restore/*.[ch]' 'tools/*.[ch]' 'engine/**/*.[ch]' | sort -u); do
    room=$(room_of "$file")
    while IFS= read -r line; do
        if [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]+\"([^\"]+)\" ]]; then
            check_project_include "$file" "$room" "${BASH_REMATCH[1]}"
        elif [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]+\<([^\>]+)\> ]]; then
            check_system_include "$file" "${BASH_REMATCH[1]}"
        fi
    done <"$file"
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
