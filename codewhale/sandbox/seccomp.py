"""Linux: the seccomp filter that keeps commands without network off Unix-domain sockets.

`--unshare-net` takes the network away, and with it abstract Unix sockets (they belong
to the network namespace), but a socket *file* is reached through the filesystem, and
a read-only bind still lets `connect()` through: an offline command could hand what it
read to any host process listening on a socket it can see (in the workspace, under
/run, in a cache directory). seccomp cannot see the address `connect()` is given, so
the filter stops the step before: `socket(AF_UNIX, …)` fails with EACCES, and with no
such socket there is nothing to connect or bind. `socketpair()` is another system call
and keeps working, so processes still talk to each other through pairs and pipes.

The filter covers every ABI an x86_64 (or arm64) kernel runs, so a 32-bit binary
cannot slip past it. i386 programs may make sockets through `socketcall()`, whose
arguments sit in memory seccomp cannot read: libseccomp therefore denies
`socketcall(SYS_SOCKET, …)` whatever the family, so offline such a program gets no
socket at all (its network is gone anyway). AF_VSOCK (to a hypervisor's host) is
denied too, and io_uring, whose socket operations would bypass the filter.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

# pyseccomp finds libc and libseccomp with ctypes.util.find_library, which on Linux runs
# `ldconfig -p` once for each: two processes on every start. The dynamic loader finds
# both by their sonames by itself; find_library stays the fallback where they differ.
_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}


@dataclass(frozen=True)
class SocketFilter:
    """The compiled BPF program for bwrap's `--seccomp`, or why it could not be built."""

    program: bytes | None
    reason: str = ""


@functools.cache
def unix_socket_filter() -> SocketFilter:
    """The filter for offline commands, built once per process.

    Building takes under a millisecond, loading libseccomp a few.
    """
    try:
        pyseccomp = _import_pyseccomp()
    except (ImportError, RuntimeError) as error:
        return SocketFilter(None, f"libseccomp unavailable ({error})")
    try:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        # The other ABIs the native kernel runs: x86_64 also runs i386 and x32 code,
        # arm64 runs arm code.
        arches = pyseccomp.Arch
        companions = {arches.X86_64: (arches.X86, arches.X32), arches.AARCH64: (arches.ARM,)}
        for arch in companions.get(pyseccomp.system_arch(), ()):
            rules.add_arch(arch)
        for family in (socket.AF_UNIX, socket.AF_VSOCK):
            rules.add_rule(
                pyseccomp.ERRNO(errno.EACCES), "socket", pyseccomp.Arg(0, pyseccomp.EQ, family)
            )
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "io_uring_setup")
        with tempfile.TemporaryFile() as compiled:
            rules.export_bpf(compiled)
            compiled.seek(0)
            program = compiled.read()
    except OSError as error:
        return SocketFilter(None, f"libseccomp could not build the filter ({error})")
    return SocketFilter(program)


def _import_pyseccomp() -> ModuleType:
    """pyseccomp, its libraries loaded by soname rather than found by running ldconfig."""
    find_library = ctypes.util.find_library

    def by_soname(name: str) -> str | None:
        soname = _SONAMES.get(name)
        if soname is not None:
            with contextlib.suppress(OSError):
                ctypes.CDLL(soname)
                return soname
        return find_library(name)

    ctypes.util.find_library = by_soname
    try:
        # ctypes over the system's libseccomp.so.2; it ships no type information, and
        # importing it raises RuntimeError where that library is missing.
        import pyseccomp  # type: ignore[import-untyped]
    finally:
        ctypes.util.find_library = find_library
    return pyseccomp


@contextlib.contextmanager
def program_fd(program: bytes) -> Iterator[int]:
    """A pipe holding `program` for one bwrap to read (`--seccomp FD`), closed on exit.

    A pipe per command rather than one shared file: bwrap read()s to the end, and
    descriptors passed to concurrent commands would share one file offset. The program
    (a few hundred bytes) fits the pipe's buffer, so the write never waits for a reader.
    """
    read_end, write_end = os.pipe()
    try:
        with open(write_end, "wb") as writer:
            writer.write(program)
        yield read_end
    finally:
        os.close(read_end)
