#!/usr/bin/env python3
"""What a commit point costs on this disk: p50 of write + fdatasync of a frame-sized
record, appended to a growing file (what the journal does: ext4 must also write the inode,
because the size changes) vs overwriting an already zero-filled, preallocated file (only
the data block is written). Usage: tools/fsync-probe.py [DIR] [N] [BYTES]"""
import os
import statistics
import sys
import time

def run(path, prealloc, n, size):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    try:
        if prealloc:
            os.write(fd, b"\0" * (16 << 20))
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        record, lat = b"a" * size, []
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, record)
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1e6)
        return statistics.median(lat)
    finally:
        os.close(fd)
        os.unlink(path)

def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 9000
    for round_ in range(2):
        a = run(os.path.join(d, "fsync-probe.append"), False, n, size)
        p = run(os.path.join(d, "fsync-probe.prealloc"), True, n, size)
        print(f"round {round_ + 1}: {size} B + fdatasync, p50: append {a:.0f} us, "
              f"overwrite preallocated {p:.0f} us (ratio {p / a:.2f})")

if __name__ == "__main__":
    main()
