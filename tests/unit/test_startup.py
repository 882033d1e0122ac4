"""Cold-start hygiene: cheap commands must not import the UI or network stacks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from codewhale import __version__

PROBE = """
import sys
from codewhale.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("textual", "httpx", "httpx_sse", "rich") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


def _heavy_modules_after(argv: list[str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [["--version"], ["config", "show"], ["config", "path"]])
def test_cheap_commands_do_not_import_textual_or_httpx(argv):
    heavy = _heavy_modules_after(argv)
    assert "textual" not in heavy and "httpx" not in heavy, heavy


def test_version_flag_prints_the_package_version():
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"codewhale {__version__}"
