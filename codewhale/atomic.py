"""Atomic file replacement: readers see the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from codewhale.private_files import private_dir


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Replace `path` with `text` via a temp file, fsync and os.replace; the folder it is
    in is one of the app's own, so it is made (or kept) private."""
    private_dir(path.parent)
    descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
