#!/bin/sh
# tests/s3server/start.sh DIR [WATCH_PID] — start a throwaway S3-compatible server
# (OpenStack Swift with the s3api middleware, which checks SigV4 signatures) on free
# loopback ports, everything under DIR (created if missing). Waits until it is ready,
# then writes
#   DIR/env   S3_ENDPOINT=http://127.0.0.1:PORT, AWS_ACCESS_KEY_ID=test:tester,
#             AWS_SECRET_ACCESS_KEY=testing, AWS_REGION=us-east-1 (shell syntax)
#   DIR/pids  the PIDs of memcached, the four Swift servers (and the watcher)
# Stop it with tests/s3server/stop.sh DIR (kills exactly those PIDs). Logs: DIR/log/.
# With WATCH_PID, a small watcher stops the server once that process is gone, so a
# test that crashes does not leave servers behind.
# Swift runs under Debian's /usr/bin/python3 (a pyenv python first on PATH has no swift).
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 DIR [WATCH_PID]" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
SRCDIR=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3
WATCH=${2:-}
mkdir -p "$1" || exit 1
DIR=$(cd "$1" && pwd)
MEMCACHED=$(command -v memcached || echo /usr/bin/memcached)
# Start-up is ~5 s on an idle 2-vCPU machine; allow for a loaded one.
READY_TIMEOUT=${PB_S3_READY_TIMEOUT:-90}

start_once() {
    rm -rf "$DIR/etc" "$DIR/srv" "$DIR/log" "$DIR/pids" "$DIR/env"
    "$PY" "$HERE/s3tool.py" setup "$SRCDIR" "$DIR" > "$DIR/ports" || return 1
    . "$DIR/ports"
    : > "$DIR/pids"
    # memcached refuses to run as root without -u.
    if [ "$(id -u)" = 0 ]; then MCUSER="-u root"; else MCUSER=""; fi
    # shellcheck disable=SC2086
    "$MEMCACHED" -l 127.0.0.1 -p "$MEMCACHE_PORT" -U 0 -m 64 $MCUSER \
        < /dev/null > "$DIR/log/memcached.log" 2>&1 &
    echo $! >> "$DIR/pids"
    for kind in account container object proxy; do
        "$PY" "$HERE/launch.py" "$DIR/etc" "$kind" "$DIR/etc/$kind-server.conf" \
            < /dev/null > "$DIR/log/$kind.log" 2>&1 &
        echo $! >> "$DIR/pids"
    done
    "$PY" "$HERE/s3tool.py" wait "$DIR" "$READY_TIMEOUT"
}

# A port picked as free can be taken by someone else before the server binds it (a
# server then exits, status 3): retry the whole start a few times.
attempt=1
while :; do
    start_once
    rc=$?
    [ $rc -eq 0 ] && break
    echo "s3server: start attempt $attempt failed; last log lines:" >&2
    tail -n 20 "$DIR"/log/*.log >&2 2>/dev/null
    "$HERE/stop.sh" "$DIR"
    if [ $rc -ne 3 ] || [ $attempt -ge 3 ]; then
        echo "s3server: could not start the test S3 server in $DIR" >&2
        exit 1
    fi
    attempt=$((attempt + 1))
done

if [ -n "$WATCH" ]; then
    (
        trap '' HUP INT
        while kill -0 "$WATCH" 2>/dev/null; do sleep 1; done
        "$HERE/stop.sh" "$DIR"
    ) < /dev/null > /dev/null 2>&1 &
    echo $! >> "$DIR/pids"
fi
cat > "$DIR/env" <<ENV
S3_ENDPOINT=http://127.0.0.1:$PROXY_PORT
AWS_ACCESS_KEY_ID=test:tester
AWS_SECRET_ACCESS_KEY=testing
AWS_REGION=us-east-1
ENV
exit 0
