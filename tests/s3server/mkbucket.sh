#!/bin/sh
# tests/s3server/mkbucket.sh DIR BUCKET — create BUCKET on the server started by
# start.sh DIR (a signed PUT /BUCKET; the storage driver never creates buckets).
if [ $# -ne 2 ]; then
    echo "usage: $0 DIR BUCKET" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
set -a
. "$1/env" || exit 1
set +a
"/usr/bin/python3" "$HERE/s3tool.py" request PUT "$S3_ENDPOINT/$2" > /dev/null
