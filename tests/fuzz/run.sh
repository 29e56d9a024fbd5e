#!/bin/bash
# tests/fuzz/run.sh TARGET [SECONDS] — a bounded libFuzzer run of build-fuzz/fuzz_TARGET
# from the seed corpus (tests/fuzz/corpus/TARGET, read only: new inputs go to a temp
# dir). Prints the executions run and ends with "N passed, N failed": 1 passed when the
# run finished without a crash, leak or timeout; a crash leaves its input in
# build-fuzz/artifacts/. A missing target (no clang) is a failure, never a skip.
set -u -o pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$1
SECS=${2:-10}
BIN=${PB_FUZZ_DIR:-$SRC/build-fuzz}/fuzz_$T
if [ ! -x "$BIN" ]; then
    echo "FAIL fuzz $T: $BIN not built (tests/fuzz/build.sh; needs clang)"
    echo "0 passed, 1 failed"
    exit 1
fi
work=$(mktemp -d /tmp/pb-fuzz-$T.XXXXXX)
trap 'rm -rf "$work"' EXIT
art=$SRC/build-fuzz/artifacts
mkdir -p "$art"
"$BIN" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$art/$T-" "$work" "$SRC/tests/fuzz/corpus/$T" \
    >"$work/log" 2>&1
rc=$?
execs=$(grep -E '^stat::number_of_executed_units' "$work/log" | awk '{print $2}')
echo "fuzz $T: ${execs:-0} executions in $SECS s (exit $rc)"
if [ $rc -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|artifact|==[0-9]+==' "$work/log" | head -n 20
    echo "FAIL fuzz $T"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
