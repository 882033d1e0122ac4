"""Setting a damaged state file aside before it is rewritten, and saying so once.

The copy (`<name>.damaged-<UTC time>`) keeps whatever the skipped records held, for
a person to look at; the rewritten file holds only what could be read.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from codewhale.private_files import private_opener

# The problems quoted in a warning; the rest are counted.
QUOTED_PROBLEMS = 3


def set_aside(path: Path) -> Path:
    """Copy `path` to a new `<name>.damaged-<time>` beside it (0600); returns the copy."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    copy = path.with_name(f"{path.name}.damaged-{stamp}")
    number = 1
    while copy.exists():
        number += 1
        copy = path.with_name(f"{path.name}.damaged-{stamp}-{number}")
    with path.open("rb") as source, open(copy, "xb", opener=private_opener) as target:
        shutil.copyfileobj(source, target)
    return copy


def damage_warning(path: Path, problems: list[str], copy: Path | None, error: str = "") -> str:
    """One warning for one damaged file: what was skipped, where the original went."""
    quoted = "; ".join(problems[:QUOTED_PROBLEMS])
    more = len(problems) - QUOTED_PROBLEMS
    if more > 0:
        quoted += f"; and {more} more"
    text = f"sub-agent state {path} was damaged and what could not be read was skipped ({quoted})"
    if copy is not None:
        return (
            f"{text}. The damaged file was copied to {copy.name} and the state rewritten "
            "from what could be read; nothing else to do (delete the copy once you no "
            "longer need it)."
        )
    return (
        f"{text}. It could not be set aside ({error}); free space or fix the permissions of "
        f"{path.parent} and it will be, at the next run."
    )
