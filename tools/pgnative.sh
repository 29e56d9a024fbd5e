#!/bin/bash
# tools/pgnative.sh — native builds from Debian's source packages, for the benches and a
# manual version matrix (not tools/check: each build takes minutes):
#   tools/pgnative.sh pg MAJOR       PostgreSQL MAJOR (18 from sid, 19 from experimental)
#                                    with contrib (amcheck, pg_walinspect) and every client
#                                    (psql, pgbench, pg_basebackup, pg_combinebackup,
#                                    pg_checksums) into build/pg-native/MAJOR; prints its bin.
#                                    Built from the source package with io_uring; where the
#                                    mirror serves no source, Debian's binaries (see
#                                    install_pg_debs)
#   tools/pgnative.sh pgbackrest     pgBackRest of sid into build/pgbackrest-<version>/
#                                    (Debian's binary: see build_pgbackrest); prints it
# A finished build is kept and reused (its .version file names the source package).
# The source comes through a private apt state (lists and archives under
# build/apt-src/<suite>) that points at the host's own Debian mirror: the host's apt
# sources and lists are never changed. Build tools missing on the host (bison, flex,
# meson, the -dev libraries) are installed with apt-get from the host's own suites.
# Environment: PB_NATIVE_DIR (default build), PB_NATIVE_JOBS (default nproc),
# PB_NATIVE_MIRROR (default: the first deb.debian.org-like URI of the host's sources).
set -u -o pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${PB_NATIVE_DIR:-$SRC/build}
JOBS=${PB_NATIVE_JOBS:-$(nproc)}

die() { echo "pgnative: $*" >&2; exit 1; }
log() { echo "pgnative: $*" >&2; }

host_mirror() {
    [ -n "${PB_NATIVE_MIRROR:-}" ] && { echo "$PB_NATIVE_MIRROR"; return; }
    # deb822 (URIs:) or one-line (deb URI suite) sources; the main archive, not security.
    cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list 2>/dev/null |
        sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' |
        grep -v security | head -n 1
}

# apt_private SUITE [deb]: sets APT (options of a private apt state for SUITE's source
# packages, or with "deb" its binary ones) and refreshes its lists once a day.
apt_private() {
    local suite=$1 kind=${2:-deb-src} d=$DIR/apt-src/$1 mirror
    [ "$kind" = deb ] && d=$DIR/apt-src/$1-bin
    mirror=$(host_mirror)
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list.d/"
    mkdir -p "$d/lists/partial" "$d/archives/partial" || exit 1
    echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
        >"$d/sources.list"
    # Check-Valid-Until: a suite's Release may have expired against this machine's clock.
    # The status file of the host's dpkg is not this state's business.
    APT=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=-
         -o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d" -o "Dir::Cache::archives=$d/archives"
         -o Dir::State::status=/dev/null -o Acquire::Check-Valid-Until=false)
    APTDIR=$d
    if [ -z "$(find "$d/lists" -maxdepth 1 -name '*_main_*' -mmin -1440 2>/dev/null)" ]; then
        log "apt-get update ($kind $suite from $mirror, private lists in $d)"
        apt-get "${APT[@]}" update >"$d/update.log" 2>&1 ||
            { tail -n 5 "$d/update.log" >&2; die "apt-get update of $suite failed"; }
    fi
}

# newest CMD PACKAGE: the newest version `apt-cache CMD PACKAGE` lists in the private
# state (experimental keeps a beta beside a release candidate).
newest() {
    local v best=
    for v in $(apt-cache "${APT[@]}" "$1" "$2" 2>/dev/null | sed -n 's/^Version: //p'); do
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
    done
    echo "$best"
}

# srcver SUITE PACKAGE: the newest version of source PACKAGE in SUITE, in SRCVER.
srcver() {
    apt_private "$1"
    SRCVER=$(newest showsrc "$2")
    [ -n "$SRCVER" ] || die "no source package $2 in $1"
}

# fetch SUITE PACKAGE: download and unpack version SRCVER of PACKAGE's source (upstream
# tarball only); sets SRCDIR (the unpacked tree). Returns 1 when the mirror does not
# serve the source (it dies on anything else).
fetch() {
    local suite=$1 pkg=$2 d=$DIR/apt-src/$1 orig
    if ! (cd "$d" && apt-get "${APT[@]}" source --download-only "$pkg=$SRCVER" >"$d/source.log" 2>&1); then
        grep '^E:' "$d/source.log" | tail -n 3 >&2
        log "apt-get source $pkg=$SRCVER ($suite) failed"
        return 1
    fi
    orig=$(ls "$d/${pkg}_${SRCVER%-*}".orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -n 1)
    [ -n "$orig" ] || die "no upstream tarball of $pkg $SRCVER in $d"
    SRCDIR=$d/$pkg-${SRCVER%-*}
    rm -rf "$SRCDIR" && mkdir -p "$SRCDIR" &&
        tar xf "$orig" -C "$SRCDIR" --strip-components=1 || die "cannot unpack $orig"
}

need_host() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    log "apt-get install ${missing[*]} (host build tools)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" \
        >"$DIR/apt-install.log" 2>&1 || { tail -n 5 "$DIR/apt-install.log" >&2; die "apt-get install failed"; }
}

# The suite that carries each major (sid: the newest release; experimental: the next).
pg_suite() {
    case $1 in
        17) echo trixie ;;
        18) echo sid ;;
        *) echo experimental ;;
    esac
}

build_pg() {
    local major=$1 dest=$DIR/pg-native/$1 suite pkg=postgresql-$1 t0
    case $major in ''|*[!0-9]*) die "not a PostgreSQL major: '$major'" ;; esac
    suite=$(pg_suite "$major")
    need_host bison flex pkg-config libzstd-dev liblz4-dev zlib1g-dev libssl-dev liburing-dev
    t0=$(date +%s)
    srcver "$suite" "$pkg"
    case $(cat "$dest/.version" 2>/dev/null) in
        "$pkg $SRCVER" | "$pkg $SRCVER (Debian's binaries)")
            [ -x "$dest/bin/postgres" ] && { echo "$dest/bin"; return 0; } ;;
    esac
    if ! fetch "$suite" "$pkg"; then
        log "$pkg $SRCVER: no source here; Debian's binary packages instead"
        install_pg_debs "$major" "$suite" "$SRCVER"
        return
    fi
    log "building $pkg $SRCVER into $dest"
    rm -rf "$dest"
    (cd "$SRCDIR" &&
        ./configure --prefix="$dest" --without-icu --without-readline --with-lz4 --with-zstd \
            --with-openssl --with-liburing >"$SRCDIR/configure.log" 2>&1 &&
        make -j"$JOBS" >"$SRCDIR/make.log" 2>&1 && make install >>"$SRCDIR/make.log" 2>&1 &&
        make -j"$JOBS" -C contrib >>"$SRCDIR/make.log" 2>&1 &&
        make -C contrib install >>"$SRCDIR/make.log" 2>&1) ||
        { tail -n 20 "$SRCDIR"/configure.log "$SRCDIR"/make.log >&2; die "build of $pkg $SRCVER failed"; }
    echo "$pkg $SRCVER" >"$dest/.version"
    # The servers run as postgres; the tree stays root's.
    chmod -R a+rX "$dest"
    rm -rf "$SRCDIR"
    log "$pkg $SRCVER built in $(( $(date +%s) - t0 )) s"
    echo "$dest/bin"
}

# The libraries Debian's server and clients need (sid's names), beside sid's own glibc.
SID_LIBS=(libc6 libssl3t64 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
    libcom-err2 libkeyutils1 libicu78 libstdc++6 libgcc-s1 libldap2 libsasl2-2 liblz4-1
    libnuma1 libpam0g libaudit1 libcap-ng0 libreadline8t64 libtinfo6 libsystemd0 libcap2
    liburing2 libxml2-16 zlib1g libzstd1 liblzma5 libselinux1 libpcre2-8-0 libuuid1
    libxslt1.1 libgcrypt20 libgpg-error0 libgnutls30t64 libidn2-0 libunistring5 libp11-kit0
    libtasn1-6 libnettle8t64 libhogweed6t64 libgmp10 libffi8 libxxhash0)

# install_pg_debs MAJOR SUITE VERSION: where the mirror serves a major's binary packages
# but not its source (19 on 2026-12-05), Debian's own server and clients, unpacked with
# sid's libraries into DIR/pg-native/MAJOR/root. They need a newer glibc than the host's:
# every program's ELF interpreter and library path are pointed at the unpacked glibc and
# libraries (patchelf), so they run on the host as they are, pg_ctl starting postgres too.
install_pg_debs() {
    local major=$1 suite=$2 ver=$3 dest=$DIR/pg-native/$1 tmp root ldso f n=0 missing
    need_host patchelf
    tmp=$(mktemp -d "$DIR/.pg$major.XXXXXX") || exit 1
    root=$dest/root
    apt_private "$suite" deb
    (cd "$tmp" && apt-get "${APT[@]}" download "postgresql-$major=$ver" \
        "postgresql-client-$major=$ver" "libpq5=$ver" >"$tmp/download.log" 2>&1) ||
        { tail -n 5 "$tmp/download.log" >&2; rm -rf "$tmp"; die "apt-get download postgresql-$major=$ver failed"; }
    apt_private sid deb
    (cd "$tmp" && apt-get "${APT[@]}" download "${SID_LIBS[@]}" >"$tmp/download-libs.log" 2>&1) ||
        { tail -n 5 "$tmp/download-libs.log" >&2; rm -rf "$tmp"; die "apt-get download of sid's libraries failed"; }
    rm -rf "$dest" && mkdir -p "$root" || exit 1
    for f in "$tmp"/*.deb; do
        dpkg-deb -x "$f" "$root" || { rm -rf "$tmp"; die "cannot unpack $f"; }
    done
    rm -rf "$tmp"
    ldso=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
    [ -x "$ldso" ] || die "no $ldso in sid's libc6"
    for f in "$root/usr/lib/postgresql/$major/bin"/*; do
        head -c 4 "$f" | grep -q ELF || continue
        patchelf --set-interpreter "$ldso" --force-rpath \
            --set-rpath "$root/usr/lib/x86_64-linux-gnu:$root/usr/lib/postgresql/$major/lib" "$f" ||
            die "patchelf of $f failed"
        n=$((n + 1))
    done
    missing=$("$ldso" --list "$root/usr/lib/postgresql/$major/bin/postgres" | grep "not found")
    [ -z "$missing" ] || { echo "$missing" >&2; die "postgresql-$major $ver needs libraries SID_LIBS lacks"; }
    ln -s "root/usr/lib/postgresql/$major/bin" "$dest/bin"
    "$dest/bin/postgres" --version >/dev/null || die "$dest/bin/postgres does not run here"
    echo "postgresql-$major $ver (Debian's binaries)" >"$dest/.version"
    chmod -R a+rX "$dest"
    log "postgresql-$major $ver: Debian's binaries, $n programs pointed at sid's glibc: $("$dest/bin/postgres" --version)"
    echo "$dest/bin"
}

# pgBackRest: the mirror this machine reaches serves sid's binary packages but not the
# files of its pgbackrest source package (404 on 2026-12-05), so Debian's own build of
# the version is used. It needs glibc 2.34 (bookworm has 2.36) and sid's libxml2 soname
# 16, which is built for glibc 2.38: its one libxml2 dependency is re-pointed at
# bookworm's libxml2.so.2 (the thirteen long-stable calls it makes, unversioned, are all
# there; pgBackRest parses XML for object-store repositories only).
build_pgbackrest() {
    local t0 dest ver tmp deb
    need_host patchelf libxml2 libssh2-1 libpq5 liblz4-1 libzstd1 libbz2-1.0
    t0=$(date +%s)
    apt_private sid deb
    ver=$(newest show pgbackrest)
    [ -n "$ver" ] || die "no pgbackrest package in sid"
    dest=$DIR/pgbackrest-${ver%-*}
    if [ -x "$dest/bin/pgbackrest" ] && [ "$(cat "$dest/.version" 2>/dev/null)" = "pgbackrest $ver" ]; then
        echo "$dest/bin/pgbackrest"
        return 0
    fi
    (cd "$APTDIR/archives" && apt-get "${APT[@]}" download "pgbackrest=$ver" >"$APTDIR/download.log" 2>&1) ||
        { tail -n 5 "$APTDIR/download.log" >&2; die "apt-get download pgbackrest=$ver failed"; }
    deb=$APTDIR/archives/pgbackrest_${ver/:/%3a}_amd64.deb
    [ -f "$deb" ] || die "no $deb after the download"
    tmp=$(mktemp -d "$DIR/.pgbackrest.XXXXXX") || exit 1
    dpkg-deb -x "$deb" "$tmp" || { rm -rf "$tmp"; die "cannot unpack $deb"; }
    rm -rf "$dest" && mkdir -p "$dest/bin" && cp "$tmp/usr/bin/pgbackrest" "$dest/bin/" ||
        { rm -rf "$tmp"; die "cannot install into $dest"; }
    rm -rf "$tmp"
    if patchelf --print-needed "$dest/bin/pgbackrest" | grep -qx 'libxml2.so.16'; then
        patchelf --replace-needed libxml2.so.16 libxml2.so.2 "$dest/bin/pgbackrest" ||
            die "patchelf of $dest/bin/pgbackrest failed"
    fi
    if ldd "$dest/bin/pgbackrest" | grep -q "not found"; then
        ldd "$dest/bin/pgbackrest" | grep "not found" >&2
        die "pgbackrest $ver needs libraries this host lacks"
    fi
    "$dest/bin/pgbackrest" version >/dev/null || die "$dest/bin/pgbackrest does not run here"
    echo "pgbackrest $ver" >"$dest/.version"
    chmod -R a+rX "$dest"
    log "pgbackrest $ver installed in $(( $(date +%s) - t0 )) s: $("$dest/bin/pgbackrest" version)"
    echo "$dest/bin/pgbackrest"
}

[ "$(id -u)" = 0 ] || die "run as root (apt-get, and the trees must be readable by postgres)"
mkdir -p "$DIR" || exit 1
case ${1:-} in
    pg) [ $# = 2 ] || die "usage: $0 pg MAJOR"; build_pg "$2" ;;
    pgbackrest) build_pgbackrest ;;
    *) die "usage: $0 pg MAJOR | pgbackrest" ;;
esac
