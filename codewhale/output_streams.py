"""Standard output and error that never fail on a character their encoding lacks.

Under an ASCII locale (`LC_ALL=C`, `PYTHONIOENCODING=ascii`, some CI runners) a model's
`é` or `🐳` made every print raise UnicodeEncodeError, after the answer had arrived: the
answer was lost. Text output replaces what it cannot encode (`?`); JSON output escapes
it (`\\u00e9`), so a JSON line stays exact for the program reading it.
"""

from __future__ import annotations

import codecs
import io
import sys
from typing import TextIO

_UNICODE_CODECS = frozenset({"utf-8", "utf-16", "utf-32", "gb18030", "utf-8-sig"})
# Handlers that never raise on a character the codec lacks. Not "surrogateescape", which
# Python picks for stdout under the C and POSIX locales: it raises on `é` all the same.
_TOLERANT = frozenset({"replace", "backslashreplace", "ignore", "namereplace"})


def tolerate_unencodable() -> None:
    """Let stdout and stderr replace what their encoding cannot hold, instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors not in _TOLERANT:
            stream.reconfigure(errors="replace")


def holds_any_character(stream: TextIO) -> bool:
    """Whether `stream` encodes every character (a UTF codec), so JSON need not escape."""
    try:
        return codecs.lookup(stream.encoding or "ascii").name in _UNICODE_CODECS
    except (LookupError, AttributeError):
        return False
