#!/bin/bash
# tests/integration/systemd_units.sh — the systemd units of docs/examples/ (the hourly
# backup and the weekly rebase + expire, one instance per cluster): each is shown in
# docs/GUIDE.md as it is in its file (guide.sh runs the GUIDE's ExecStart= lines), and
# `systemd-analyze verify` accepts an instance of each without a word, the binary path
# pointed at the one under test. Without systemd-analyze that check is skipped, said so.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
EX=$PB_SRCDIR/docs/examples
GUIDE=$PB_SRCDIR/docs/GUIDE.md
UNITS="pageback-backup@.service pageback-backup@.timer pageback-weekly@.service pageback-weekly@.timer"

# The GUIDE's fenced blocks, one file each, to compare a unit with.
awk -v dir="$PB_WORK" '/^```ini/ { n++; inb = 1; next } inb && /^```$/ { inb = 0; next }
    inb { print > (dir "/block" n) }' "$GUIDE"
for u in $UNITS; do
    if [ ! -f "$EX/$u" ]; then
        pb_test_fail "docs/examples/$u is missing"
        continue
    fi
    same=0
    for b in "$PB_WORK"/block*; do cmp -s "$b" "$EX/$u" && same=1; done
    [ "$same" = 1 ] && pb_test_ok "docs/GUIDE.md shows $u as shipped" ||
        pb_test_fail "docs/GUIDE.md has no block equal to docs/examples/$u"
    [[ "$u" == *.timer ]] && continue
    bad=$(grep '^ExecStart=' "$EX/$u" | grep -v -- "--cluster %i")
    [ -z "$bad" ] && pb_test_ok "every ExecStart= of $u names its cluster by the instance (%i)" ||
        pb_test_fail "$u: $bad"
done

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "note: systemd-analyze not found: the units were not verified by systemd"
    pb_test_summary
    exit
fi
D=$PB_WORK/units
mkdir -p "$D"
for u in $UNITS; do
    sed "s|/usr/local/bin/pageback|$PB_BIN|g" "$EX/$u" >"$D/$u"
done
for u in $UNITS; do
    inst=$D/${u/@./@main.}
    out=$(systemd-analyze verify "$inst" 2>&1)
    rc=$?
    [ "$rc" = 0 ] && [ -z "$out" ] && pb_test_ok "systemd-analyze verify ${u/@./@main.}: clean" ||
        pb_test_fail "systemd-analyze verify ${u/@./@main.} (rc $rc): $out"
done
pb_test_summary
