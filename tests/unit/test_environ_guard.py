"""The app's environment cannot be read by the programs it starts (same user, not root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale import environ_guard

SETPRIV = shutil.which("setpriv")
# The unprivileged user cannot enter root's home, where this venv's Python may live.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
# The parent (sealed or not) starts a same-user child that reads the parent's environ.
SCRIPT = """
import os, subprocess, sys
if sys.argv[1] == "seal":
    assert seal_environment()
reader = "import os; print(open(f'/proc/{os.getppid()}/environ', 'rb').read().count(b'CANARY'))"
done = subprocess.run([sys.executable, "-c", reader], capture_output=True, text=True)
print(done.stdout.strip() or done.stderr.strip().splitlines()[-1])
"""


def read_from_child(how: str) -> str:
    """As an unprivileged user: root reads any process's environ whatever the flag."""
    guard = Path(environ_guard.__file__).read_text()
    done = subprocess.run(
        [
            SETPRIV,
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            SYSTEM_PYTHON,
            "-c",
            guard + SCRIPT,
            how,
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "CANARY": "sk-1"},
        cwd="/",
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or None in (SETPRIV, SYSTEM_PYTHON) or os.geteuid() != 0,
    reason="needs Linux, setpriv, a system python3 and root to become another user",
)
def test_a_sealed_process_environment_is_unreadable_to_its_children():
    assert read_from_child("open") == "1"  # the control: the read works unsealed
    assert "PermissionError" in read_from_child("seal")
