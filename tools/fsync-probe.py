#!/usr/bin/env python3
"""What a commit point costs on this disk: p50 of write + fdatasync of a frame-sized
record in three kinds of file:

  grow     appended to a growing file (what the journal does: ext4 allocates blocks and
           writes the inode, because the size changes);
  keep     appended to a file preallocated with fallocate(FALLOC_FL_KEEP_SIZE): blocks are
           reserved (as unwritten extents) but the size still grows with each write;
  falloc   overwriting, in place, a file sized with plain fallocate (mode 0): the size never
           changes but the blocks are unwritten extents, converted (metadata) on first write;
  zeroed   overwriting, in place, a file that was zero-filled and fdatasync'd first (the
           size never changes; only the data block is written).

Usage: tools/fsync-probe.py [DIR] [N] [BYTES...]   (default: . 500 600 9000)"""
import ctypes
import ctypes.util
import os
import statistics
import sys
import time

SEGMENT = 16 << 20
FALLOC_FL_KEEP_SIZE = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate_keep_size(fd, length):
    if _libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def run(path, mode, n, size):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    try:
        if mode == "keep":
            fallocate_keep_size(fd, SEGMENT)
            os.fsync(fd)
            assert os.fstat(fd).st_size == 0
        elif mode == "falloc":
            os.posix_fallocate(fd, 0, SEGMENT)
            os.fsync(fd)
        elif mode == "zeroed":
            os.write(fd, b"\0" * SEGMENT)
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
    sizes = [int(s) for s in sys.argv[3:]] or [600, 9000]
    modes = ("grow", "keep", "falloc", "zeroed")
    for round_ in range(3):
        for size in sizes:
            p50 = {m: run(os.path.join(d, f"fsync-probe.{m}"), m, n, size) for m in modes}
            print(f"round {round_ + 1}: {size:>5} B + fdatasync, p50 us: "
                  + ", ".join(f"{m} {p50[m]:.0f}" for m in modes)
                  + f"  (keep/grow {p50['keep'] / p50['grow']:.2f}, zeroed/grow {p50['zeroed'] / p50['grow']:.2f})",
                  flush=True)


if __name__ == "__main__":
    main()
