"""Every module imports where POSIX-only modules do not exist (macOS has them; Windows not).

CI is Linux, so the test hides `fcntl`, `resource` and `termios` from a fresh interpreter
and imports the whole package there, as Windows would.
"""

from __future__ import annotations

import subprocess
import sys

HIDE_AND_IMPORT = """
import sys
for name in ("fcntl", "resource", "termios"):
    sys.modules[name] = None  # `import name` now raises ImportError
import importlib, pkgutil, codewhale
# hangup_driver extends Textual's Linux driver; tui/hangup.py imports it only there.
skipped = {"codewhale.__main__", "codewhale.tui.hangup_driver"}
names = [m.name for m in pkgutil.walk_packages(codewhale.__path__, "codewhale.")]
for name in names:
    if name not in skipped:
        importlib.import_module(name)
print(len(names))
"""


def test_the_package_imports_without_posix_only_modules():
    done = subprocess.run(
        [sys.executable, "-c", HIDE_AND_IMPORT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50
