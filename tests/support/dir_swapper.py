"""Swap a workspace directory with a symlink to an outside directory, over and over.

The attacker of the file tools' check-then-open race, run as a process of its own:
`python dir_swapper.py DIRECTORY OUTSIDE`. It makes a symlink to OUTSIDE beside
DIRECTORY and exchanges the two names atomically (renameat2 RENAME_EXCHANGE), so
DIRECTORY is always there, half the time as the symlink. It prints "swapping" after
the first exchange and, once sent SIGTERM, the number of exchanges it made.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def main(directory: str, outside: str) -> None:
    link = directory + ".link"
    os.symlink(outside, link)
    names = (os.fsencode(directory), os.fsencode(link))
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    swaps = 0
    while not stop.is_set() or swaps % 2:  # stops with the real directory back in place
        if libc.renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), directory)
        swaps += 1
        if swaps == 1:
            print("swapping", flush=True)
    print(swaps, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
