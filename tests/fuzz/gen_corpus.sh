#!/bin/bash
# tests/fuzz/gen_corpus.sh — regenerate the seed corpus in tests/fuzz/corpus/<target>/:
# binary seeds from pageback's own writers (gen_corpus.c, built against the fuzz build's
# archive, so run tests/fuzz/build.sh first), text seeds written here.
set -eu -o pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$SRC/build-fuzz}
C=$SRC/tests/fuzz/corpus
mkdir -p "$C"/{manifest,pack,wal,s3xml,options}
clang -std=c11 -g -D_GNU_SOURCE -I"$SRC" -fsanitize=address,undefined "$SRC/tests/fuzz/gen_corpus.c" \
    "$OUT/libpbfuzz.a" $(pkg-config --libs libzstd libcurl libpq liburing rocksdb libxxhash libsodium) \
    -lpthread -lstdc++ -o "$OUT/gen_corpus"
"$OUT/gen_corpus" "$C"
cat >"$C/s3xml/list" <<'X'
<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult><Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated><NextContinuationToken>1a&amp;2</NextContinuationToken><Contents><Key>p/backup/20261201-000000F/manifest</Key><Size>1234</Size><ETag>&quot;abc&quot;</ETag></Contents><Contents><Key>p/wal/00000001/000000010000000000000001.zst</Key><Size>99</Size></Contents></ListBucketResult>
X
cat >"$C/s3xml/uploads" <<'X'
<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><NextKeyMarker>k</NextKeyMarker><NextUploadIdMarker>u</NextUploadIdMarker><Upload><Key>p/backup/x/pack/000001</Key><UploadId>tx&#x41;&#66;</UploadId><Initiated>2026-12-01T00:00:00Z</Initiated></Upload></ListMultipartUploadsResult>
X
cat >"$C/s3xml/error" <<'X'
<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The &lt;key&gt; does not exist &#128512;</Message></Error>
X
printf '\001repo = /srv/pageback\nread-size = 1MiB\nqueue-depth = 8\n# comment\ns3-key = k\ns3-secret = s\ntype = full\nlog-level = debug\n' >"$C/options/config"
printf '\000backup\000--repo\000/srv/r\000--read-size\00064k\000--type\000incr\000--queue-depth\0004' >"$C/options/args-backup"
printf '\000restore\000--repo\000s3://b/p\000--target-dir\000/tmp/t\000--target-time\0002026-12-01 00:00:00\000--tablespace-map\00016384=/srv/t' >"$C/options/args-restore"
du -sh "$C"/* | sed 's/^/corpus /'
