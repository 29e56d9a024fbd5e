#!/bin/bash
# Every header compiles on its own (it includes what it uses).
cd "$(dirname "$0")/.."
passed=0
failed=0
CFLAGS_PKG=$(pkg-config --cflags rocksdb libzstd libxxhash libcurl libpq liburing 2>/dev/null)
shopt -s nullglob # engine/'s rooms are sub-folders, at most two deep (engine/storage/s3/)
for h in common/*.h engine/*.h engine/*/*.h engine/*/*/*.h manifest/*.h restore/*.h restore/*/*.h tools/*.h; do
    if echo "#include \"$h\"" | cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only \
        -I. $CFLAGS_PKG -x c - 2>/tmp/hdr.$$; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $h does not compile alone:"
        head -n 5 /tmp/hdr.$$
    fi
done
rm -f /tmp/hdr.$$
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
