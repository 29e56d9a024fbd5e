#!/bin/bash
# tests/fuzz/build.sh [OUTDIR] — build the libFuzzer targets with clang
# (-fsanitize=fuzzer,address,undefined) into OUTDIR (default build-fuzz/ at the top of
# the tree). The tree's sources are compiled once into one archive the targets link
# against. Needs Debian's clang (apt-get install clang); exits 2 when it is missing.
set -eu -o pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$SRC/build-fuzz}
CC=${PB_FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "fuzz build: $CC not found (apt-get install clang)" >&2; exit 2; }
TARGETS="manifest pack wal s3xml options walrec crypt"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-std=c11 -g -O1 -D_GNU_SOURCE -I$SRC -Wall -Wno-unused-parameter $SAN"
CFLAGS="$CFLAGS $(pkg-config --cflags libzstd libcurl libpq liburing rocksdb libxxhash libisal libsodium)"
LIBS="$(pkg-config --libs libzstd libcurl libpq liburing rocksdb libxxhash libisal libsodium) -lpthread -lstdc++"
mkdir -p "$OUT/obj"
objs=()
stale=()
cd "$SRC"
for f in common/*.c manifest/*.c engine/pack/pack.c engine/pack/envelope.c \
         engine/wal/*.c engine/pgver/*.c \
         engine/storage/*.c engine/storage/s3/*.c \
         tools/options.c tools/options_table.c tools/options_ops.c tools/options_sources.c \
         tools/config.c tools/help.c; do
    o=$OUT/obj/$(echo "$f" | tr / _).o
    if [ ! -f "$o" ] || [ "$SRC/$f" -nt "$o" ]; then
        stale+=("$f")
    fi
    objs+=("$o")
done
# The stale objects, then the targets, one compiler per CPU (clang is single-threaded).
export CC CFLAGS LIBS OUT SRC
jobs=${PB_FUZZ_JOBS:-$(nproc)}
[ ${#stale[@]} = 0 ] || printf '%s\n' "${stale[@]}" | xargs -P "$jobs" -I{} sh -c \
    'exec $CC $CFLAGS -fsanitize=fuzzer-no-link -c "$SRC/{}" -o "$OUT/obj/$(echo {} | tr / _).o"'
rm -f "$OUT/libpbfuzz.a"
ar rcs "$OUT/libpbfuzz.a" "${objs[@]}"
printf '%s\n' $TARGETS | xargs -P "$jobs" -I{} sh -c \
    'exec $CC $CFLAGS -fsanitize=fuzzer "$SRC/tests/fuzz/fuzz_{}.c" "$OUT/libpbfuzz.a" $LIBS -o "$OUT/fuzz_{}"'
echo "fuzz targets in $OUT: $TARGETS"
