#!/usr/bin/python3
"""tools/bench/perf_breakdown.py — where a restore's CPU goes, from `perf script` output of
a `perf record -g` (cpu-clock samples, frame pointers: build with
CFLAGS="-O2 -g -fno-omit-frame-pointer" so pageback's own frames show).

    perf script -i full.data -F period,ip,sym,dso | perf_breakdown.py full \
        > full.txt
    perf_breakdown.py --compare full.json chain.json

Each sample goes to one component, chosen from its call chain (innermost first):
zstd (frame decompression), xxhash (frame checksums in decode_frame, page hashes in
apply_frame), the kernel side of pwrite / fsync / file creation (openat) / pack reads
(pread) / other system calls, manifest work (stream decoding, the merge, record copies)
and the rest of pageback and libc. Printed in milliseconds of CPU; --json writes them."""
import collections
import json
import re
import sys

FRAME = re.compile(r'^\s*([0-9a-f]+)\s+(\S+)\s+\((.*)\)\s*$')
MANIFEST = ('mf_', 'rs_recs_copy', 'rs_recs_clear', 'copy_file', 'grab')


def component(stack):
    """stack: [(symbol, dso)], innermost first."""
    leaf_sym, leaf_dso = stack[0]
    syms = [s for s, _ in stack]
    if 'libzstd' in leaf_dso:
        return 'zstd'
    if 'libxxhash' in leaf_dso:
        return 'xxhash (frame checksum)' if 'decode_frame' in syms else 'xxhash (page hashes)'
    if 'kernel' in leaf_dso:
        entry = next((s for s, d in stack if 'libc' in d), '')
        if 'pwrite' in entry:
            return 'kernel: pwrite'
        if 'fsync' in entry:
            return 'kernel: fsync'
        if 'openat' in entry and 'rs_rebuild_file' in syms:
            return 'kernel: open/create targets'
        if 'pread' in entry:
            return 'kernel: pack/manifest reads'
        return 'kernel: other'
    if any(s.startswith(MANIFEST) for s in syms):
        return 'manifest (decode, merge, copies)'
    return 'pageback + libc (rest)'


def parse(lines):
    ms = collections.Counter()
    stack, period = [], 0
    for line in lines + ['']:
        m = FRAME.match(line)
        if m:
            stack.append((re.sub(r'\+0x[0-9a-f]+$', '', m.group(2)), m.group(3)))
            continue
        if stack:
            ms[component(stack)] += period / 1e6
        stack = []
        head = line.split()
        period = int(head[0]) if head and head[0].isdigit() else 0
    return ms


def main():
    if sys.argv[1:2] == ['--compare']:
        a, b = (json.load(open(p)) for p in sys.argv[2:4])
        print(f"{'component':36s} {'full ms':>9s} {'chain ms':>9s} {'extra':>8s}")
        for k in sorted(set(a) | set(b), key=lambda k: -(b.get(k, 0) - a.get(k, 0))):
            print(f"{k:36s} {a.get(k, 0):9.0f} {b.get(k, 0):9.0f} {b.get(k, 0) - a.get(k, 0):+8.0f}")
        print(f"{'total':36s} {sum(a.values()):9.0f} {sum(b.values()):9.0f} "
              f"{sum(b.values()) - sum(a.values()):+8.0f}")
        return
    ms = parse(sys.stdin.read().splitlines())
    if len(sys.argv) > 2:
        json.dump(ms, open(sys.argv[2], 'w'))
    for k, v in ms.most_common():
        print(f"{sys.argv[1] if len(sys.argv) > 1 else ''} {k:36s} {v:8.0f} ms")


main()
