"""Linux: a bwrap probe that succeeded, remembered until bwrap, the filter or the boot changes.

Probing starts bwrap twice (about 0.1 s on a loaded machine), on every launch. What it
finds depends on the bwrap binaries, the seccomp program and the kernel with its
settings, so the answer is kept under a key made of exactly those: each candidate's
path and file identity (a reinstalled or upgraded bwrap is another file), a digest of
the program, the kernel's release and this boot's id (sysctls such as
kernel.unprivileged_userns_clone reset at boot). Only success is kept: a machine
where the sandbox failed is probed again each time, so a fix is seen at once. If
bwrap stops working within one boot, commands fail with bwrap's error rather than run
unconfined, and the next boot (or new bwrap) probes again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from codewhale.atomic import atomic_write_text
from codewhale.paths import user_dirs

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_FILE_NAME = "sandbox-probe.v1.json"


@dataclass(frozen=True)
class Remembered:
    """The bwrap a probe found working, what it said, and whether it loaded the filter."""

    launcher: str
    reason: str
    filtered: bool


def probe_key(candidates: list[str], program: bytes | None) -> str:
    """A digest of everything a probe's answer depends on."""
    files: list[tuple[str | int, ...]] = []
    for candidate in candidates:
        try:
            info = os.stat(candidate)
        except OSError:
            files.append((candidate,))
            continue
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)
        files.append((candidate, *identity, info.st_uid))
    try:
        boot = _BOOT_ID.read_text("ascii").strip()
    except OSError:
        boot = ""
    parts = {
        "bwrap": files,
        "program": hashlib.sha256(program).hexdigest() if program is not None else None,
        "kernel": os.uname().release,
        "boot": boot,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def recall(key: str) -> Remembered | None:
    """The success remembered under `key`, or None (none, another key, or unreadable)."""
    try:
        saved = json.loads(_cache_file().read_text("utf-8"))
        if saved["key"] != key:
            return None
        return Remembered(str(saved["launcher"]), str(saved["reason"]), bool(saved["filtered"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(key: str, found: Remembered) -> None:
    """Keep `found` under `key` (0600); a state dir that cannot be written keeps nothing."""
    text = json.dumps({"key": key, **asdict(found)})
    with contextlib.suppress(OSError):
        atomic_write_text(_cache_file(), text)


def _cache_file() -> Path:
    return user_dirs().state_dir / _FILE_NAME
