#!/bin/sh
# tests/s3server/stop.sh DIR — stop the server started by start.sh DIR: kills exactly
# the PIDs recorded in DIR/pids (Swift calls setsid(), so signals to our process
# group would not reach it), waits for them to go, then removes DIR/pids.
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
PIDS="$1/pids"
[ -f "$PIDS" ] || exit 0
# Skip our own PID: the watcher started by start.sh may exec this script.
for pid in $(cat "$PIDS"); do
    [ "$pid" = $$ ] || kill "$pid" 2>/dev/null
done
# Up to ~5 s for a clean exit, then SIGKILL what is left.
i=0
while [ $i -lt 50 ]; do
    alive=""
    for pid in $(cat "$PIDS"); do
        [ "$pid" != $$ ] && kill -0 "$pid" 2>/dev/null && alive="$alive $pid"
    done
    [ -z "$alive" ] && break
    sleep 0.1
    i=$((i + 1))
done
for pid in $alive; do
    kill -9 "$pid" 2>/dev/null
done
rm -f "$PIDS"
exit 0
