"""The bwrap probe: remembered until bwrap changes; libseccomp loaded without ldconfig."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from codewhale.sandbox import bwrap, sandbox_status
from codewhale.sandbox.probe_cache import _FILE_NAME

_STATUS = sandbox_status()
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not _STATUS.available, reason=f"bubblewrap cannot start here: {_STATUS.reason}"
    ),
]


def _mark_remembered(cache_file, reason: str) -> None:
    """Change the remembered reason, so a later probe shows whether it used the file."""
    saved = json.loads(cache_file.read_text("utf-8"))
    cache_file.write_text(json.dumps({**saved, "reason": reason}), "utf-8")


def test_a_working_bwrap_is_remembered_privately_and_not_probed_again(isolated_home):
    first = bwrap.probe()
    cache_file = isolated_home / "state" / _FILE_NAME
    assert first.launcher is not None
    assert stat.S_IMODE(cache_file.stat().st_mode) == 0o600
    _mark_remembered(cache_file, "remembered")
    again = bwrap.probe()
    assert (again.launcher, again.reason) == (first.launcher, "remembered")
    # The filter is built afresh each launch; only whether bwrap loaded it is remembered.
    assert again.socket_filter == first.socket_filter


def test_another_bwrap_on_path_is_probed_again(isolated_home, tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    copy = tools / "bwrap"
    shutil.copy2(bwrap.probe().launcher, copy)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    first = bwrap.probe()
    cache_file = isolated_home / "state" / _FILE_NAME
    _mark_remembered(cache_file, "remembered")
    assert bwrap.probe().reason == "remembered"
    # An upgraded bwrap is another file: the same path with new contents and time.
    copy.write_bytes(copy.read_bytes() + b"\0")
    assert bwrap.probe().reason == first.reason


def test_an_unreadable_memory_means_a_fresh_probe(isolated_home):
    first = bwrap.probe()
    cache_file = isolated_home / "state" / _FILE_NAME
    cache_file.write_text("{not json", "utf-8")
    assert bwrap.probe() == first
    assert json.loads(cache_file.read_text("utf-8"))["launcher"] == first.launcher


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_socket_filter_is_built_without_running_ldconfig(tmp_path):
    trace = tmp_path / "trace"
    script = (
        "import ctypes.util\n"
        "find_library = ctypes.util.find_library\n"
        "from codewhale.sandbox.seccomp import unix_socket_filter\n"
        "assert unix_socket_filter().program, unix_socket_filter().reason\n"
        "assert ctypes.util.find_library is find_library\n"
    )
    command = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace)]
    done = subprocess.run(
        [*command, sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    if not trace.exists():
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    started = [line for line in trace.read_text().splitlines() if "execve(" in line]
    assert len(started) == 1 and "ldconfig" not in trace.read_text()
