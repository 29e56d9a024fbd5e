#!/bin/bash
# tools/deps.sh — install the Debian packages pageback builds and tests with, only
# those missing. Sourced by tools/check and tools/quickstart.
PB_DEB_PACKAGES=(build-essential autoconf automake libtool pkg-config
    librocksdb-dev libzstd-dev libxxhash-dev libcurl4-openssl-dev libpq-dev liburing-dev
    libsodium-dev
    postgresql-15 postgresql-client-15 python3
    swift swift-proxy swift-account swift-container swift-object python3-swift memcached
    pgbackrest fio util-linux procps iproute2 bc
    strace # tests/integration/flushes.sh counts flushes per backup
    libisal-dev # CRC-32C of WAL records (engine/wal/decode.c)
    clang) # clang: the libFuzzer targets of tests/fuzz/

pb_install_deps() {
    local missing=() p
    for p in "${PB_DEB_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "missing packages and not root: apt-get install ${missing[*]}" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null ||
        { echo "apt-get install failed for: ${missing[*]}" >&2; return 1; }
    # Debian starts a default cluster and memcached on install; tests run their own.
    command -v pg_ctlcluster >/dev/null && pg_ctlcluster 15 main stop >/dev/null 2>&1
    return 0
}

# pb_build DIR [CONFIGURE ARGS...]: out-of-tree build of this checkout.
pb_build() {
    local dir=$1 src
    shift
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    (cd "$src" && { [ -x configure ] && [ configure -nt configure.ac ] && [ configure -nt Makefile.am ] ||
        autoreconf -fi >/dev/null 2>&1; }) || { echo "autoreconf failed" >&2; return 1; }
    mkdir -p "$dir"
    (cd "$dir" && { [ -f Makefile ] || "$src/configure" "$@" >configure.out 2>&1 ||
        { cat configure.out >&2; false; }; } && make -j"$(nproc)" >make.out 2>&1 ||
        { tail -n 40 make.out >&2; false; })
}
